//! Checks of a search body against an index mapping, without running it: fields the mapping does
//! not have (OpenSearch runs such queries and finds nothing, which is rarely what was meant), and
//! `term` / `terms` / `prefix` / `wildcard` on an analysed text field that has an exact sub-field.
//! `toolplan search` prints these as warnings; the query-DSL planner sends them back to the model.

use serde_json::Value;

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
const FIELD_KEYED: &[&str] = &[
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
const EXACT: &[&str] = &["term", "terms", "prefix", "wildcard"];

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

fn walk_query(mapping: &Mapping, q: &Value, path: &str, out: &mut Vec<Finding>) {
    let Value::Object(obj) = q else { return };
    for (clause, body) in obj {
        let here = format!("{path}.{clause}");
        match clause.as_str() {
            "bool" => {
                for occur in ["must", "should", "filter", "must_not"] {
                    match body.get(occur) {
                        Some(Value::Array(items)) => {
                            for (i, item) in items.iter().enumerate() {
                                walk_query(mapping, item, &format!("{here}.{occur}[{i}]"), out);
                            }
                        }
                        Some(item @ Value::Object(_)) => {
                            walk_query(mapping, item, &format!("{here}.{occur}"), out)
                        }
                        _ => {}
                    }
                }
            }
            "constant_score" => {
                if let Some(f) = body.get("filter") {
                    walk_query(mapping, f, &format!("{here}.filter"), out);
                }
            }
            "dis_max" => {
                if let Some(Value::Array(items)) = body.get("queries") {
                    for (i, item) in items.iter().enumerate() {
                        walk_query(mapping, item, &format!("{here}.queries[{i}]"), out);
                    }
                }
            }
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

fn walk_aggs(mapping: &Mapping, aggs: &Value, path: &str, out: &mut Vec<Finding>) {
    let Value::Object(aggs) = aggs else { return };
    for (name, def) in aggs {
        let Value::Object(def) = def else { continue };
        for (kind, body) in def {
            let here = format!("{path}.{name}.{kind}");
            if kind == "aggs" || kind == "aggregations" {
                walk_aggs(mapping, body, &format!("{path}.{name}.{kind}"), out);
                continue;
            }
            if let Some(f) = body.get("field").and_then(Value::as_str)
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
