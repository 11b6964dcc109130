//! Terms lookup: a `terms` query whose values are another document's field
//! (`{"terms": {"user": {"index": "people", "id": "1", "path": "followers"}}}`), resolved before
//! the search runs, as OpenSearch resolves it in its rewrite phase: the document is fetched and
//! the values at `path` take the lookup's place (a document that is not there gives no values).
//! The lookups of one request, wherever they are (queries, filter aggregations), are at most
//! `max_clause_count`.

use serde_json::Value;

use crate::error::SearchError;
use crate::limits::{SearchLimits, within};

/// One lookup in a request body.
#[derive(Debug, Clone, PartialEq)]
pub struct Lookup {
    /// Where the lookup object is in the body (a JSON pointer).
    pub pointer: String,
    /// The index that holds the document.
    pub index: String,
    /// The document's id.
    pub id: String,
    /// The field whose values are the terms (dotted).
    pub path: String,
}

/// The terms lookups of a request body, or why one is malformed.
pub fn find(body: &Value, limits: &SearchLimits) -> Result<Vec<Lookup>, SearchError> {
    let mut found = Vec::new();
    let mut at: Vec<String> = Vec::new();
    walk(body, &mut at, &mut found)?;
    let max = limits.max_clause_count;
    within(found.len(), max, "max_clause_count", "terms", || {
        format!("more than {max} terms lookups in one request")
    })?;
    Ok(found)
}

/// A JSON pointer to the place the keys `at` lead to.
fn pointer(at: &[String]) -> String {
    at.iter()
        .map(|k| format!("/{}", k.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// Collects the lookups under `v`, whose place is `at` (built only where one is found).
fn walk(v: &Value, at: &mut Vec<String>, found: &mut Vec<Lookup>) -> Result<(), SearchError> {
    match v {
        Value::Object(map) => {
            for (key, child) in map {
                if key == "terms"
                    && let Value::Object(terms) = child
                {
                    for (field, spec) in terms {
                        if let Value::Object(spec) = spec
                            && spec.contains_key("id")
                            && spec.contains_key("path")
                        {
                            let mut place = at.clone();
                            place.push(key.clone());
                            place.push(field.clone());
                            found.push(lookup(spec, field, pointer(&place))?);
                        }
                    }
                }
                if child.is_object() || child.is_array() {
                    at.push(key.clone());
                    walk(child, at, found)?;
                    at.pop();
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                if item.is_object() || item.is_array() {
                    at.push(i.to_string());
                    walk(item, at, found)?;
                    at.pop();
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// One lookup object (`{"index", "id", "path"}`) of the field `field`, found at `pointer`.
fn lookup(
    spec: &serde_json::Map<String, Value>,
    field: &str,
    pointer: String,
) -> Result<Lookup, SearchError> {
    if let Some(other) = spec
        .keys()
        .find(|k| !matches!(k.as_str(), "index" | "id" | "path" | "routing"))
    {
        return Err(SearchError::dsl(
            format!("terms.{field}"),
            format!("unknown key [{other}] in a terms lookup"),
        ));
    }
    let text = |k: &str| -> Result<String, SearchError> {
        match spec.get(k) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(Value::Number(n)) => Ok(n.to_string()),
            _ => Err(SearchError::dsl(
                format!("terms.{field}"),
                format!("a terms lookup needs [{k}]"),
            )),
        }
    };
    Ok(Lookup {
        pointer,
        index: text("index")?,
        id: text("id")?,
        path: text("path")?,
    })
}

/// The terms a looked-up document gives: the scalar values at `path` in its source.
pub fn terms_of(source: &Value, path: &str) -> Vec<Value> {
    crate::mapping::values_at(source, path)
        .into_iter()
        .filter(|v| matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_)))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn lookups_are_found_wherever_they_are() {
        let body = json!({"query": {"bool": {"filter": [{"terms": {"user": {"index": "p", "id": 1, "path": "f"}}},
                                                         {"terms": {"tag": ["a"]}}]}},
                          "aggs": {"x": {"filter": {"terms": {"u/v": {"index": "p", "id": "2", "path": "g.h"}}}}}});
        let found = find(&body, &SearchLimits::default()).expect("valid");
        let mut pointers: Vec<&str> = found.iter().map(|l| l.pointer.as_str()).collect();
        pointers.sort_unstable();
        assert_eq!(
            pointers,
            [
                "/aggs/x/filter/terms/u~1v",
                "/query/bool/filter/0/terms/user"
            ]
        );
        let user = found
            .iter()
            .find(|l| l.pointer.ends_with("user"))
            .expect("found");
        assert_eq!((user.id.as_str(), user.path.as_str()), ("1", "f"));
        let bad = json!({"query": {"terms": {"user": {"id": 1, "path": "f"}}}});
        assert!(find(&bad, &SearchLimits::default()).is_err());
        assert_eq!(
            terms_of(&json!({"g": [{"h": "a"}, {"h": ["b", 3]}]}), "g.h"),
            [json!("a"), json!("b"), json!(3)]
        );
    }
}
