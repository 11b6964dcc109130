//! Field collapsing (`collapse`): one hit per value of a keyword or numeric field, the best of
//! each group in the search's order, and for each hit its group's own hits (`inner_hits`), as
//! OpenSearch answers it.
//!
//! [`CollapseRequest`] reads the clause; the sort collector keeps the best document of each group
//! ([`super::sort::CollapseOn`]); each hit then shows its group's value under `fields`, and each
//! `inner_hits` definition is a search of its own, run by the caller: the request's query with the
//! group's value as a filter ([`CollapseRequest::inner_searches`]), as OpenSearch's expand phase
//! runs it. Across several indices each index collapses its hits, the merged hits are collapsed
//! again, and the inner searches run across the indices.

use serde_json::{Map, Value, json};

use super::schema::IndexSchema;
use super::sort::CollapseOn;
use crate::error::SearchError;
use crate::limits::{SearchLimits, inner_window};
use crate::mapping::FieldKind;

/// The options an `inner_hits` definition may hold (the rest are refused, naming them).
const INNER_HIT_KEYS: &[&str] = &[
    "name",
    "from",
    "size",
    "sort",
    "_source",
    "version",
    "seq_no_primary_term",
    "track_scores",
    "collapse",
    "fields",
    "docvalue_fields",
    "stored_fields",
];

/// A `collapse` clause, read.
#[derive(Debug, Clone, PartialEq)]
pub struct CollapseRequest {
    /// The field's path.
    pub field: String,
    /// The `inner_hits` definitions: each one's name and the search body its hits come from
    /// (without the query, which is the request's and the group's).
    pub inner_hits: Vec<(String, Map<String, Value>)>,
}

impl CollapseRequest {
    /// Reads `collapse` from a search body; `None` when it has none. The body's other options
    /// that cannot go with collapsing are refused here, in OpenSearch's words.
    pub fn of_body(
        body: &Map<String, Value>,
        limits: &SearchLimits,
    ) -> Result<Option<CollapseRequest>, SearchError> {
        let Some(clause) = body.get("collapse") else {
            return Ok(None);
        };
        for other in ["search_after", "rescore"] {
            if body.contains_key(other) {
                return Err(SearchError::dsl(
                    "collapse",
                    format!("cannot use `collapse` in conjunction with `{other}`"),
                ));
            }
        }
        Self::parse(clause, limits).map(Some)
    }

    fn parse(v: &Value, limits: &SearchLimits) -> Result<CollapseRequest, SearchError> {
        let Value::Object(o) = v else {
            return Err(SearchError::dsl("collapse", "collapse must be an object"));
        };
        let mut field = None;
        let mut inner = Vec::new();
        for (key, value) in o {
            match key.as_str() {
                "field" => field = value.as_str().map(str::to_owned),
                "max_concurrent_group_searches" => {
                    // One node runs the group searches one after the other: nothing to bound.
                    if value.as_u64().is_none_or(|n| n < 1) {
                        return Err(SearchError::dsl(
                            "collapse.max_concurrent_group_searches",
                            format!("max_concurrent_group_searches must be positive, got {value}"),
                        ));
                    }
                }
                "inner_hits" => match value {
                    Value::Array(list) => inner.extend(list.iter().cloned()),
                    other => inner.push(other.clone()),
                },
                other => {
                    return Err(SearchError::dsl(
                        format!("collapse.{other}"),
                        format!("unknown key [{other}] in collapse"),
                    ));
                }
            }
        }
        let field = field.ok_or_else(|| {
            SearchError::dsl("collapse.field", "collapse needs a field name in [field]")
        })?;
        let mut inner_hits: Vec<(String, Map<String, Value>)> = Vec::new();
        for (i, definition) in inner.iter().enumerate() {
            let path = format!("collapse.inner_hits[{i}]");
            let Value::Object(d) = definition else {
                return Err(SearchError::dsl(path, "inner_hits must be an object"));
            };
            let name = d
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or(&field)
                .to_owned();
            if inner_hits.iter().any(|(n, _)| *n == name) {
                return Err(SearchError::dsl(
                    path,
                    format!("[inner_hits] already contains an entry for key [{name}]"),
                ));
            }
            let mut body = Map::new();
            body.insert("size".into(), json!(3));
            for (key, value) in d {
                if !INNER_HIT_KEYS.contains(&key.as_str()) {
                    return Err(SearchError::Unsupported {
                        path: format!("{path}.{key}"),
                        clause: format!("inner_hits option {key}"),
                    });
                }
                // A second level of collapsing groups the inner hits; it has no inner hits of its
                // own (which bounds the searches one request makes).
                if key == "collapse" && value.get("inner_hits").is_some() {
                    return Err(SearchError::dsl(
                        format!("{path}.collapse.inner_hits"),
                        "a collapse inside inner_hits cannot have inner_hits of its own",
                    ));
                }
                if key != "name" {
                    body.insert(key.clone(), value.clone());
                }
            }
            let number = |k: &str| body.get(k).and_then(Value::as_u64).unwrap_or(0);
            inner_window(
                number("from"),
                number("size"),
                limits,
                &path,
                |max, window| {
                    format!(
                        "Inner result window is too large, the inner hit definition's [{name}]'s from + size must be less than or equal to: [{max}] but was [{window}]"
                    )
                },
            )?;
            body.insert("track_total_hits".into(), json!(true));
            inner_hits.push((name, body));
        }
        Ok(CollapseRequest { field, inner_hits })
    }

    /// The column the sort collector groups by, or why the field cannot be collapsed on.
    pub fn on(&self, schema: &IndexSchema) -> Result<CollapseOn, SearchError> {
        if let Some(why) = schema.not_indexed(&self.field) {
            return Err(SearchError::dsl("collapse.field", why));
        }
        let Some(indexed) = schema.fields.get(&self.field) else {
            return Err(SearchError::dsl(
                "collapse.field",
                format!(
                    "no mapping found for `{}` in order to collapse on",
                    self.field
                ),
            ));
        };
        match indexed.spec.kind {
            FieldKind::Keyword | FieldKind::Integer | FieldKind::Float => Ok(CollapseOn {
                column: indexed.name.clone(),
                kind: indexed.spec.kind.clone(),
                path: self.field.clone(),
            }),
            _ => Err(SearchError::dsl(
                "collapse.field",
                format!(
                    "unknown type for collapse field `{}`, only keywords and numbers are accepted",
                    self.field
                ),
            )),
        }
    }

    /// The body each index answers when the search spans several: the same collapse without
    /// its inner hits (they are searched across the indices once the groups are known).
    pub fn without_inner_hits(body: &mut Map<String, Value>) {
        if let Some(Value::Object(c)) = body.get_mut("collapse") {
            c.remove("inner_hits");
        }
    }

    /// The searches of a hit's inner hits, by name: the request's `query` and the group's value
    /// (`null`: the documents without one) as a filter.
    pub fn inner_searches(&self, query: Option<&Value>, group: &Value) -> Vec<(String, Value)> {
        let filter = if group.is_null() {
            json!({"bool": {"must_not": {"exists": {"field": self.field}}}})
        } else {
            json!({"term": {self.field.clone(): group}})
        };
        let mut bool_query = Map::new();
        if let Some(q) = query.filter(|q| !q.is_null()) {
            bool_query.insert("must".into(), q.clone());
        }
        bool_query.insert("filter".into(), filter);
        self.inner_hits
            .iter()
            .map(|(name, body)| {
                let mut body = body.clone();
                body.insert("query".into(), json!({ "bool": bool_query }));
                (name.clone(), Value::Object(body))
            })
            .collect()
    }

    /// Puts the group's value under the hit's `fields`.
    pub fn show_group(&self, hit: &mut Value, group: Value) {
        if let Some(h) = hit.as_object_mut()
            && let Some(fields) = h
                .entry("fields")
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
        {
            fields.insert(self.field.clone(), json!([group]));
        }
    }

    /// The group value a hit shows under `fields` (`null` when it has none).
    pub fn group_of<'a>(&self, hit: &'a Value) -> &'a Value {
        hit.get("fields")
            .and_then(|f| f.get(&self.field))
            .and_then(|v| v.get(0))
            .unwrap_or(&Value::Null)
    }

    /// Adds one inner hits search's answer to the hit.
    pub fn attach(hit: &mut Value, name: &str, response: &Value) {
        if let Some(h) = hit.as_object_mut() {
            let inner = h
                .entry("inner_hits")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(inner) = inner.as_object_mut() {
                inner.insert(name.to_owned(), json!({"hits": response["hits"].clone()}));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: Value) -> Result<Option<CollapseRequest>, SearchError> {
        CollapseRequest::of_body(
            body.as_object().expect("an object"),
            &SearchLimits::default(),
        )
    }

    #[test]
    fn the_clause_and_its_inner_hits_are_read() {
        let c = parse(json!({"collapse": {"field": "g", "inner_hits": [
            {"name": "a", "size": 2, "sort": [{"n": "asc"}]}, {"name": "b", "version": true}]}}))
        .expect("valid")
        .expect("present");
        assert_eq!(c.field, "g");
        assert_eq!(c.inner_hits.len(), 2);
        let searches = c.inner_searches(Some(&json!({"match_all": {}})), &json!(3));
        assert_eq!(
            searches[0].1["query"],
            json!({"bool": {"must": {"match_all": {}}, "filter": {"term": {"g": 3}}}})
        );
        assert_eq!(searches[0].1["size"], json!(2));
        assert_eq!(searches[1].1["size"], json!(3));
        let missing = c.inner_searches(None, &Value::Null);
        assert_eq!(
            missing[0].1["query"],
            json!({"bool": {"filter": {"bool": {"must_not": {"exists": {"field": "g"}}}}}})
        );
        assert_eq!(parse(json!({"size": 1})).expect("valid"), None);
    }

    #[test]
    fn what_collapsing_cannot_do_is_refused_by_name() {
        for (body, message) in [
            (
                json!({"collapse": {"field": "g"}, "search_after": [1]}),
                "cannot use `collapse` in conjunction with `search_after`",
            ),
            (
                json!({"collapse": {"field": "g"}, "rescore": {}}),
                "cannot use `collapse` in conjunction with `rescore`",
            ),
            (json!({"collapse": {}}), "needs a field name"),
            (
                json!({"collapse": {"field": "g", "nope": 1}}),
                "unknown key [nope]",
            ),
            (
                json!({"collapse": {"field": "g", "inner_hits": [{"name": "a"}, {"name": "a"}]}}),
                "already contains an entry for key [a]",
            ),
            (
                json!({"collapse": {"field": "g", "inner_hits": {"size": 100, "from": 1}}}),
                "Inner result window is too large",
            ),
            (
                json!({"collapse": {"field": "g", "inner_hits": {"highlight": {}}}}),
                "inner_hits option highlight",
            ),
            (
                json!({"collapse": {"field": "g", "inner_hits": {"collapse": {"field": "h", "inner_hits": {}}}}}),
                "cannot have inner_hits of its own",
            ),
        ] {
            let err = parse(body.clone()).expect_err(&body.to_string());
            assert!(err.to_string().contains(message), "{body}: {err}");
        }
    }
}
