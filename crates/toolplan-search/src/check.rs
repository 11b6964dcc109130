//! Checks of a search body against an index mapping, without running it: fields the mapping does
//! not have (OpenSearch runs such queries and finds nothing, which is rarely what was meant), and
//! `term` / `terms` / `prefix` / `wildcard` on an analysed text field that has an exact sub-field.
//! `toolplan search` prints these as warnings; the query-DSL planner sends them back to the model.

use serde_json::{Map, Value};

use crate::mapping::{FieldKind, Mapping};

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Where in the body (`query.bool.filter[0].term`).
    pub path: String,
    /// What is wrong and what would be right.
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Clauses whose keys are field names.
pub(crate) const FIELD_KEYED: &[&str] = &[
    "match",
    "match_phrase",
    "match_phrase_prefix",
    "term",
    "terms",
    "range",
    "prefix",
    "wildcard",
    "regexp",
    "fuzzy",
    "match_bool_prefix",
];
/// Clauses that need an exact (keyword) field to mean what they usually mean.
pub(crate) const EXACT: &[&str] = &["term", "terms", "prefix", "wildcard"];

/// Every finding of `body` against `mapping`.
pub fn check(mapping: &Mapping, body: &Value) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(q) = body.get("query") {
        walk_query(mapping, q, "query", &mut out);
    }
    if let Some(sort) = body.get("sort") {
        let items: Vec<&Value> = match sort {
            Value::Array(a) => a.iter().collect(),
            other => vec![other],
        };
        for (i, item) in items.iter().enumerate() {
            let field = match item {
                Value::String(s) => Some(s.as_str()),
                Value::Object(o) => o.keys().next().map(String::as_str),
                _ => None,
            };
            if let Some(f) = field.filter(|f| !f.starts_with('_')) {
                field_known(mapping, f, &format!("sort[{i}]"), &mut out);
            }
        }
    }
    for key in ["aggs", "aggregations"] {
        if let Some(aggs) = body.get(key) {
            walk_aggs(mapping, aggs, key, &mut out);
        }
    }
    out
}

fn field_known(mapping: &Mapping, field: &str, path: &str, out: &mut Vec<Finding>) -> bool {
    if mapping.field(field).is_some() || field.contains('*') {
        return true;
    }
    // An object path (`user`) is known when fields live under it.
    if mapping
        .fields()
        .iter()
        .any(|f| f.path.starts_with(&format!("{field}.")))
    {
        return true;
    }
    out.push(Finding {
        path: path.to_owned(),
        message: format!(
            "field '{field}' is not in the mapping{}",
            suggestion(mapping, field)
        ),
    });
    false
}

fn suggestion(mapping: &Mapping, field: &str) -> String {
    let lower = field.to_lowercase();
    mapping
        .fields()
        .iter()
        .find(|f| {
            let p = f.path.to_lowercase();
            p == lower
                || p.ends_with(&format!(".{lower}"))
                || p.replace('_', "") == lower.replace('_', "")
        })
        .map(|f| format!(" (did you mean '{}'?)", f.path))
        .unwrap_or_default()
}

/// A clause of exactly one query of one of `kinds`, keyed by exactly one field
/// (`{"match": {"title": …}}`): its kind, field and options as written (an object such as
/// `{"query": …}`, or the bare value).
pub(crate) fn field_clause<'c>(
    clause: &'c Map<String, Value>,
    kinds: &[&str],
) -> Option<(&'c str, &'c str, &'c Value)> {
    let (kind, Value::Object(fields)) = clause.iter().next()? else {
        return None;
    };
    if clause.len() != 1 || fields.len() != 1 || !kinds.contains(&kind.as_str()) {
        return None;
    }
    let (field, options) = fields.iter().next()?;
    Some((kind, field, options))
}

/// The value a field clause's options give: the `query` or `value` of an options object, or the
/// bare value itself; `None` for an object with neither.
pub(crate) fn clause_value(options: &Value) -> Option<&Value> {
    match options {
        Value::Object(o) => o.get("query").or_else(|| o.get("value")),
        other => Some(other),
    }
}

/// Escapes a key for a JSON pointer.
fn pointer_key(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

/// Every query object in `q` — `q` itself and those inside `bool`, `constant_score` and `dis_max`
/// — as (path for messages, JSON pointer relative to `q`), parents before children. The checks
/// here and the corrections of [`crate::autofix`] visit the same clauses through it.
pub(crate) fn query_objects(q: &Value, path: &str) -> Vec<(String, String)> {
    fn visit(q: &Value, path: &str, ptr: &str, out: &mut Vec<(String, String)>) {
        let Value::Object(obj) = q else { return };
        out.push((path.to_owned(), ptr.to_owned()));
        for (clause, body) in obj {
            let here = format!("{path}.{clause}");
            let at = format!("{ptr}/{}", pointer_key(clause));
            let lists: &[&str] = match clause.as_str() {
                "bool" => &["must", "should", "filter", "must_not"],
                "constant_score" => &["filter"],
                "dis_max" => &["queries"],
                _ => &[],
            };
            for key in lists {
                match body.get(key) {
                    Some(Value::Array(items)) => {
                        for (i, item) in items.iter().enumerate() {
                            visit(
                                item,
                                &format!("{here}.{key}[{i}]"),
                                &format!("{at}/{key}/{i}"),
                                out,
                            );
                        }
                    }
                    Some(item @ Value::Object(_)) => {
                        visit(item, &format!("{here}.{key}"), &format!("{at}/{key}"), out)
                    }
                    _ => {}
                }
            }
        }
    }
    let mut out = Vec::new();
    visit(q, path, "", &mut out);
    out
}

/// Every aggregation in `aggs` (sub-aggregations included) as (path for messages, JSON pointer of
/// its type's body relative to `aggs`), e.g. (`aggs.by_species.terms`, `/by_species/terms`).
pub(crate) fn agg_bodies(aggs: &Value, path: &str) -> Vec<(String, String)> {
    fn visit(aggs: &Value, path: &str, ptr: &str, out: &mut Vec<(String, String)>) {
        let Value::Object(named) = aggs else { return };
        for (name, def) in named {
            let Value::Object(def) = def else { continue };
            for (kind, body) in def {
                let here = format!("{path}.{name}.{kind}");
                let at = format!("{ptr}/{}/{}", pointer_key(name), pointer_key(kind));
                if kind == "aggs" || kind == "aggregations" {
                    visit(body, &here, &at, out);
                } else {
                    out.push((here, at));
                }
            }
        }
    }
    let mut out = Vec::new();
    visit(aggs, path, "", &mut out);
    out
}

fn walk_query(mapping: &Mapping, q: &Value, path: &str, out: &mut Vec<Finding>) {
    for (at, ptr) in query_objects(q, path) {
        let Some(Value::Object(obj)) = q.pointer(&ptr) else {
            continue;
        };
        for (clause, body) in obj {
            let here = format!("{at}.{clause}");
            match clause.as_str() {
                "exists" => {
                    if let Some(f) = body.get("field").and_then(Value::as_str) {
                        field_known(mapping, f, &here, out);
                    }
                }
                "multi_match" => {
                    if let Some(Value::Array(fields)) = body.get("fields") {
                        for f in fields.iter().filter_map(Value::as_str) {
                            let name = f.split('^').next().unwrap_or(f);
                            field_known(mapping, name, &here, out);
                        }
                    }
                }
                c if FIELD_KEYED.contains(&c) => {
                    let Value::Object(fields) = body else {
                        continue;
                    };
                    for field in fields.keys().filter(|k| k.as_str() != "boost") {
                        if !field_known(mapping, field, &here, out) {
                            continue;
                        }
                        let is_text = mapping
                            .field(field)
                            .is_some_and(|f| f.kind == FieldKind::Text);
                        if is_text
                            && EXACT.contains(&c)
                            && let Some(kw) = mapping.keyword_subfield(field)
                        {
                            out.push(Finding {
                                path: here.clone(),
                                message: format!(
                                    "{c} on the analysed text field '{field}' compares against single lower-cased words; use '{}' for exact values",
                                    kw.path
                                ),
                            });
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

fn walk_aggs(mapping: &Mapping, aggs: &Value, path: &str, out: &mut Vec<Finding>) {
    for (here, ptr) in agg_bodies(aggs, path) {
        if let Some(f) = aggs
            .pointer(&ptr)
            .and_then(|b| b.get("field"))
            .and_then(Value::as_str)
            && field_known(mapping, f, &here, out)
            && mapping.field(f).is_some_and(|s| s.kind == FieldKind::Text)
        {
            let hint = mapping
                .keyword_subfield(f)
                .map(|k| format!("; use '{}'", k.path))
                .unwrap_or_default();
            out.push(Finding {
                path: here.clone(),
                message: format!("text field '{f}' cannot be aggregated{hint}"),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn iris() -> Mapping {
        Mapping::parse(&json!({"properties": {
            "petal_length_in_cm": {"type": "float"},
            "species": {"type": "text", "fields": {"keyword": {"type": "keyword"}}}
        }}))
        .expect("mapping")
    }

    #[test]
    fn unknown_fields_and_text_terms_are_found() {
        let body = json!({
            "query": {"bool": {"filter": [
                {"term": {"species": "setosa"}},
                {"range": {"petal_length": {"gte": 1}}}
            ]}},
            "sort": [{"sepal": "asc"}],
            "aggs": {"s": {"terms": {"field": "species"}}}
        });
        let found: Vec<String> = check(&iris(), &body)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            found,
            [
                "query.bool.filter[0].term: term on the analysed text field 'species' compares against single lower-cased words; use 'species.keyword' for exact values",
                "query.bool.filter[1].range: field 'petal_length' is not in the mapping",
                "sort[0]: field 'sepal' is not in the mapping",
                "aggs.s.terms: text field 'species' cannot be aggregated; use 'species.keyword'",
            ]
        );
    }

    #[test]
    fn good_bodies_have_no_findings() {
        let body = json!({"query": {"match": {"species": "setosa"}}, "size": 0,
                          "aggs": {"n": {"terms": {"field": "species.keyword"}, "aggs": {"a": {"avg": {"field": "petal_length_in_cm"}}}}}});
        assert!(check(&iris(), &body).is_empty());
        let found = check(&iris(), &json!({"query": {"exists": {"field": "Species"}}}));
        assert_eq!(
            found[0].message,
            "field 'Species' is not in the mapping (did you mean 'species'?)"
        );
    }
}
