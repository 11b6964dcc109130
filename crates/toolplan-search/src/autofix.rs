//! Deterministic repairs of generated DSL: mistakes that have exactly one right correction are
//! corrected in place, without another model call, and each correction is reported. Used by the
//! query-DSL planner before it checks a body (what is left goes back to the model).
//!
//! * a field named `X.keyword` where `X` is itself a keyword (or number, date, boolean) field → `X`;
//! * a field the mapping does not have, but has under another case or with `_` differences → that;
//! * `term` / `terms` / `prefix` / `wildcard`, sorting and aggregations on an analysed text field
//!   that has an exact sub-field → the sub-field;
//! * `range` with only `eq` (no such parameter) → `term`; with only `neq` / `ne` / `not` → that
//!   `term` under a `bool`'s `must_not`;
//! * `sort`, `aggs`, `size`, `from`, `_source`, `track_total_hits` written inside `query` (or a
//!   `bool`) → moved to the top level of the body;
//! * `range` of numbers on a boolean field that allows one of 0 (false) and 1 (true) → a `term` for
//!   it;
//! * a `match` / `match_phrase` / `term` of words (no digit) on a number field, which cannot match
//!   and which OpenSearch refuses → removed (alone, the query becomes `match_all`).

use serde_json::{Map, Value};

use crate::check::{EXACT, FIELD_KEYED, agg_bodies, clause_value, field_clause, query_objects};
use crate::mapping::{FieldKind, Mapping};

/// Body keys that belong at the top level, not inside a query.
const TOP_LEVEL: &[&str] = &[
    "sort",
    "aggs",
    "aggregations",
    "size",
    "from",
    "_source",
    "track_total_hits",
];

/// Corrects `body` in place; returns one line per correction.
pub fn autofix(mapping: &Mapping, body: &mut Value) -> Vec<String> {
    let mut notes = Vec::new();
    hoist(body, &mut notes);
    if let Some(q) = body.get_mut("query") {
        fix_query(mapping, q, "query", &mut notes);
        drop_words_on_numbers(mapping, q, "query", &mut notes);
        if let Some(note) = words_on_numbers(mapping, q) {
            notes.push(format!("query: {note}"));
            *q = serde_json::json!({"match_all": {}});
        }
    }
    if let Some(sort) = body.get_mut("sort") {
        let items: Vec<&mut Value> = match sort {
            Value::Array(a) => a.iter_mut().collect(),
            other => vec![other],
        };
        for (i, item) in items.into_iter().enumerate() {
            match item {
                Value::String(s) => {
                    if let Some(fixed) = corrected(mapping, s, true) {
                        notes.push(format!("sort[{i}]: {s} → {fixed}"));
                        *s = fixed;
                    }
                }
                Value::Object(o) => {
                    rename_keys(mapping, o, true, &format!("sort[{i}]"), &mut notes)
                }
                _ => {}
            }
        }
    }
    for key in ["aggs", "aggregations"] {
        if let Some(aggs) = body.get_mut(key) {
            fix_aggs(mapping, aggs, key, &mut notes);
        }
    }
    notes
}

/// The field a name should be, if it should be another: see the module documentation.
fn corrected(mapping: &Mapping, name: &str, exact: bool) -> Option<String> {
    if name.starts_with('_') || name.contains('*') {
        return None;
    }
    let exact_of = |field: &str| -> Option<String> {
        let spec = mapping.field(field)?;
        if exact && spec.kind == FieldKind::Text {
            let sub = format!("{field}.keyword");
            mapping
                .field(&sub)
                .filter(|s| s.kind == FieldKind::Keyword)
                .map(|_| sub)
        } else {
            None
        }
    };
    if mapping.field(name).is_some() {
        return exact_of(name);
    }
    // Objects are not fields, but naming one is not a mistake to correct here.
    if mapping
        .fields()
        .iter()
        .any(|f| f.path.starts_with(&format!("{name}.")))
    {
        return None;
    }
    if let Some(base) = name.strip_suffix(".keyword")
        && mapping
            .field(base)
            .is_some_and(|f| f.kind != FieldKind::Text)
    {
        return Some(base.to_owned());
    }
    let norm = |s: &str| s.to_lowercase().replace(['_', '-'], "");
    let matches: Vec<&str> = mapping
        .fields()
        .iter()
        .map(|f| f.path.as_str())
        .filter(|p| norm(p) == norm(name))
        .collect();
    match matches.as_slice() {
        [only] => Some(exact_of(only).unwrap_or_else(|| (*only).to_owned())),
        _ => None,
    }
}

fn rename_keys(
    mapping: &Mapping,
    obj: &mut Map<String, Value>,
    exact: bool,
    path: &str,
    notes: &mut Vec<String>,
) {
    let renames: Vec<(String, String)> = obj
        .keys()
        .filter(|k| !matches!(k.as_str(), "boost" | "_name"))
        .filter_map(|k| corrected(mapping, k, exact).map(|f| (k.clone(), f)))
        .collect();
    for (from, to) in renames {
        if obj.contains_key(&to) {
            continue;
        }
        if let Some(v) = obj.remove(&from) {
            notes.push(format!("{path}: {from} → {to}"));
            obj.insert(to, v);
        }
    }
}

/// Moves top-level keys found in `query` or in its `bool`s to the body.
fn hoist(body: &mut Value, notes: &mut Vec<String>) {
    let mut found = Vec::new();
    if let Some(q) = body.get_mut("query") {
        collect_misplaced(q, "query", &mut found);
    }
    if let Value::Object(top) = body {
        for (path, key, value) in found {
            if top.contains_key(&key) {
                continue;
            }
            notes.push(format!("{path}.{key}: moved to the top level of the body"));
            top.insert(key, value);
        }
    }
}

fn collect_misplaced(q: &mut Value, path: &str, found: &mut Vec<(String, String, Value)>) {
    let Value::Object(obj) = q else { return };
    for key in TOP_LEVEL {
        if let Some(v) = obj.remove(*key) {
            found.push((path.to_owned(), (*key).to_owned(), v));
        }
    }
    if let Some(b) = obj.get_mut("bool") {
        collect_misplaced(b, &format!("{path}.bool"), found);
        for occur in ["must", "should", "filter", "must_not"] {
            match b.get_mut(occur) {
                Some(Value::Array(items)) => {
                    for (i, item) in items.iter_mut().enumerate() {
                        collect_misplaced(item, &format!("{path}.bool.{occur}[{i}]"), found);
                    }
                }
                Some(item @ Value::Object(_)) => {
                    collect_misplaced(item, &format!("{path}.bool.{occur}"), found)
                }
                _ => {}
            }
        }
    }
}

fn fix_query(mapping: &Mapping, q: &mut Value, path: &str, notes: &mut Vec<String>) {
    for (at, ptr) in query_objects(q, path) {
        let Some(Value::Object(obj)) = q.pointer_mut(&ptr) else {
            continue;
        };
        // `range: {f: {eq: v}}` → `term: {f: v}`.
        if let Some(Value::Object(range)) = obj.get("range")
            && range.len() == 1
            && let Some((field, Value::Object(bounds))) = range.iter().next()
            && bounds.len() == 1
            && let Some(v) = bounds.get("eq")
        {
            let term = serde_json::json!({ field.clone(): v.clone() });
            obj.remove("range");
            obj.insert("term".into(), term);
            notes.push(format!(
                "{at}.range: eq is no range parameter; a term query"
            ));
        }
        // `range: {f: {neq: v}}` → `bool: {must_not: [{term: {f: v}}]}`.
        if let Some(Value::Object(range)) = obj.get("range")
            && range.len() == 1
            && let Some((field, Value::Object(bounds))) = range.iter().next()
            && bounds.len() == 1
            && let Some((op, v)) = bounds.iter().next()
            && matches!(op.as_str(), "neq" | "ne" | "not")
        {
            let not = serde_json::json!({"must_not": [{"term": { field.clone(): v.clone() }}]});
            let op = op.clone();
            obj.remove("range");
            obj.insert("bool".into(), not);
            notes.push(format!(
                "{at}.range: {op} is no range parameter; a term query under must_not"
            ));
        }
        // `range` of numbers on a boolean field (`in_stock: {gte: 1}`) → the one value it allows.
        if let Some(Value::Object(range)) = obj.get("range")
            && range.len() == 1
            && let Some((field, Value::Object(bounds))) = range.iter().next()
            && mapping
                .field(field)
                .is_some_and(|f| f.kind == FieldKind::Boolean)
            && let Some(value) = boolean_of_range(bounds)
        {
            let term = serde_json::json!({ field.clone(): value });
            obj.remove("range");
            obj.insert("term".into(), term);
            notes.push(format!(
                "{at}.range: numbers on a boolean field; a term query for {value}"
            ));
        }
        for (clause, body) in obj.iter_mut() {
            let here = format!("{at}.{clause}");
            match (clause.as_str(), body) {
                ("exists", body) => {
                    if let Some(Value::String(f)) = body.get_mut("field")
                        && let Some(fixed) = corrected(mapping, f, false)
                    {
                        notes.push(format!("{here}: {f} → {fixed}"));
                        *f = fixed;
                    }
                }
                (c, Value::Object(fields)) if FIELD_KEYED.contains(&c) => {
                    rename_keys(mapping, fields, EXACT.contains(&c), &here, notes);
                }
                _ => {}
            }
        }
    }
}

/// The one boolean a `range` of numbers allows, reading `false` as 0 and `true` as 1 (`gte: 1` →
/// true, `lt: 1` → false); `None` when it allows both, neither, or has a bound that is not a
/// number.
fn boolean_of_range(bounds: &Map<String, Value>) -> Option<bool> {
    let mut allowed = [true, true];
    for (op, bound) in bounds {
        let b = bound.as_f64()?;
        for (x, ok) in allowed.iter_mut().enumerate() {
            let x = x as f64;
            *ok &= match op.as_str() {
                "gt" => x > b,
                "gte" => x >= b,
                "lt" => x < b,
                "lte" => x <= b,
                _ => return None,
            };
        }
    }
    match allowed {
        [false, true] => Some(true),
        [true, false] => Some(false),
        _ => None,
    }
}

/// Removes, from the `bool` queries in `q` (recursively), the clauses [`words_on_numbers`] finds.
fn drop_words_on_numbers(mapping: &Mapping, q: &mut Value, at: &str, notes: &mut Vec<String>) {
    let Some(Value::Object(b)) = q.get_mut("bool") else {
        return;
    };
    for list in ["filter", "must", "should", "must_not"] {
        let here = format!("{at}.bool.{list}");
        let empty = match b.get_mut(list) {
            Some(Value::Array(items)) => {
                for (i, item) in items.iter_mut().enumerate() {
                    drop_words_on_numbers(mapping, item, &format!("{here}[{i}]"), notes);
                }
                items.retain(|item| match words_on_numbers(mapping, item) {
                    Some(note) => {
                        notes.push(format!("{here}: {note}"));
                        false
                    }
                    None => true,
                });
                items.is_empty()
            }
            Some(item @ Value::Object(_)) => {
                drop_words_on_numbers(mapping, item, &here, notes);
                words_on_numbers(mapping, item)
                    .map(|note| notes.push(format!("{here}: {note}")))
                    .is_some()
            }
            _ => false,
        };
        if empty {
            b.remove(list);
        }
    }
}

/// A `match` / `match_phrase` / `term` clause of words (text without a digit) on a number field,
/// not `lenient`: it cannot match, and OpenSearch refuses it ("average" written as a match on the
/// field a question averages). The line saying so, or `None` for any other clause.
fn words_on_numbers(mapping: &Mapping, clause: &Value) -> Option<String> {
    let Value::Object(c) = clause else {
        return None;
    };
    let (kind, field, options) = field_clause(c, &["match", "match_phrase", "term"])?;
    if options.get("lenient").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    let text = clause_value(options)?.as_str()?;
    let numeric = mapping.field(field).is_some_and(|f| f.kind.is_numeric());
    (numeric && !text.chars().any(|c| c.is_ascii_digit()))
        .then(|| format!("{kind} {field} = '{text}': words on a number field; removed"))
}

fn fix_aggs(mapping: &Mapping, aggs: &mut Value, path: &str, notes: &mut Vec<String>) {
    for (here, ptr) in agg_bodies(aggs, path) {
        if let Some(Value::String(f)) = aggs.pointer_mut(&ptr).and_then(|b| b.get_mut("field"))
            && let Some(fixed) = corrected(mapping, f, true)
        {
            notes.push(format!("{here}: {f} → {fixed}"));
            *f = fixed;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mapping() -> Mapping {
        Mapping::parse(&json!({"properties": {
            "title": {"type": "text", "fields": {"keyword": {"type": "keyword"}}},
            "summary": {"type": "text"},
            "genre": {"type": "keyword"},
            "price": {"type": "float"},
            "response_minutes": {"type": "integer"},
        }}))
        .expect("mapping")
    }

    fn fixed(mut body: Value) -> (Value, Vec<String>) {
        let notes = autofix(&mapping(), &mut body);
        (body, notes)
    }

    #[test]
    fn keyword_suffixes_and_exact_fields() {
        let (body, notes) = fixed(json!({
            "query": {"bool": {"filter": [{"term": {"genre.keyword": "fantasy"}}, {"term": {"title": "The Wing"}}],
                               "must": {"match": {"Summary": "dragon"}}}},
            "aggs": {"g": {"terms": {"field": "genre.keyword"}, "aggs": {"t": {"terms": {"field": "title"}}}}},
            "sort": [{"Price": "asc"}, "title"]}));
        assert_eq!(
            body,
            json!({
                "query": {"bool": {"filter": [{"term": {"genre": "fantasy"}}, {"term": {"title.keyword": "The Wing"}}],
                                   "must": {"match": {"summary": "dragon"}}}},
                "aggs": {"g": {"terms": {"field": "genre"}, "aggs": {"t": {"terms": {"field": "title.keyword"}}}}},
                "sort": [{"price": "asc"}, "title.keyword"]})
        );
        assert_eq!(notes.len(), 7, "{notes:?}");
        assert!(notes.contains(&"query.bool.filter[0].term: genre.keyword → genre".to_owned()));
    }

    #[test]
    fn range_eq_and_misplaced_sort() {
        let (body, notes) = fixed(json!({"size": 3, "query": {"bool": {
            "filter": [{"range": {"genre": {"eq": "open"}}}],
            "sort": [{"response_minutes": {"order": "desc"}}], "size": 10}}}));
        assert_eq!(
            body,
            json!({"size": 3, "query": {"bool": {"filter": [{"term": {"genre": "open"}}]}},
                   "sort": [{"response_minutes": {"order": "desc"}}]})
        );
        assert_eq!(
            notes,
            [
                "query.bool.sort: moved to the top level of the body",
                "query.bool.filter[0].range: eq is no range parameter; a term query"
            ]
        );
    }

    #[test]
    fn range_neq_is_a_negated_term() {
        let (body, notes) = fixed(json!({"query": {"bool": {
            "filter": [{"range": {"status": {"neq": "closed"}}}]}}}));
        assert_eq!(
            body,
            json!({"query": {"bool": {"filter": [
                {"bool": {"must_not": [{"term": {"status": "closed"}}]}}]}}})
        );
        assert_eq!(
            notes,
            ["query.bool.filter[0].range: neq is no range parameter; a term query under must_not"]
        );
    }

    #[test]
    fn numbers_on_a_boolean_field_are_the_boolean_they_allow() {
        let m = Mapping::parse(&json!({"properties": {"in_stock": {"type": "boolean"}}}))
            .expect("mapping");
        let fix = |range: Value| {
            let mut body = json!({"query": {"bool": {"filter": [{"range": {"in_stock": range}}]}}});
            let notes = autofix(&m, &mut body);
            (body["query"]["bool"]["filter"][0].clone(), notes.len())
        };
        assert_eq!(
            fix(json!({"gte": 1})),
            (json!({"term": {"in_stock": true}}), 1)
        );
        assert_eq!(
            fix(json!({"gt": 0, "lte": 1})),
            (json!({"term": {"in_stock": true}}), 1)
        );
        assert_eq!(
            fix(json!({"lt": 1})),
            (json!({"term": {"in_stock": false}}), 1)
        );
        // Both, neither, or not numbers: left for the model.
        for kept in [json!({"gte": 0}), json!({"gt": 1}), json!({"gte": "true"})] {
            assert_eq!(fix(kept.clone()), (json!({"range": {"in_stock": kept}}), 0));
        }
    }

    #[test]
    fn words_on_a_number_field_are_removed() {
        let (body, notes) = fixed(json!({"query": {"bool": {
            "filter": [{"term": {"genre": "fantasy"}}],
            "must": [{"match": {"price": {"query": "average", "fuzziness": "AUTO"}}}],
            "should": {"match_phrase": {"response_minutes": "long"}}}}}));
        assert_eq!(
            body,
            json!({"query": {"bool": {"filter": [{"term": {"genre": "fantasy"}}]}}})
        );
        assert_eq!(
            notes,
            [
                "query.bool.must: match price = 'average': words on a number field; removed",
                "query.bool.should: match_phrase response_minutes = 'long': words on a number field; removed"
            ]
        );
        // Alone, the query matches everything instead; numbers and lenient clauses stay.
        let (body, _) = fixed(json!({"query": {"match": {"price": "cheap"}}}));
        assert_eq!(body, json!({"query": {"match_all": {}}}));
        let kept = json!({"query": {"bool": {"must": [{"match": {"price": "12.5"}},
            {"match": {"price": {"query": "cheap", "lenient": true}}}, {"match": {"genre": "x"}}]}}});
        assert_eq!(fixed(kept.clone()).0, kept);
    }

    #[test]
    fn what_has_no_single_correction_is_left() {
        let body = json!({"query": {"bool": {"must": [{"match": {"author": "x"}},
                                                       {"range": {"price": {"eq": 1, "lt": 3}}}]}},
                          "aggs": {"a": {"avg": {"field": "price"}}}});
        let (after, notes) = fixed(body.clone());
        assert_eq!(after, body);
        assert!(notes.is_empty());
    }
}
