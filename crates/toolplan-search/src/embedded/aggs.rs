//! Aggregations: OpenSearch requests rewritten onto the index's fields and run by tantivy's
//! Elasticsearch-compatible aggregation engine; results put back into OpenSearch's shape.
//!
//! Supported: `terms` (size, order — also by a sub-aggregation —, min_doc_count, include/exclude,
//! missing), `avg`, `min`, `max`, `sum`, `stats`, `extended_stats`, `value_count`, `cardinality`,
//! `percentiles`, `histogram`, `date_histogram` (`fixed_interval`, and `calendar_interval` of a
//! second, minute, hour or day), `range` (only the requested buckets are returned). Anything else is
//! an error naming the aggregation.

use serde_json::{Map, Value, json};
use tantivy::Searcher;
use tantivy::aggregation::agg_req::Aggregations;
use tantivy::aggregation::{AggContextParams, AggregationCollector};
use tantivy::query::Query;

use super::schema::IndexSchema;
use crate::error::SearchError;
use crate::mapping::FieldKind;

const METRICS: &[&str] = &[
    "avg",
    "min",
    "max",
    "sum",
    "stats",
    "extended_stats",
    "value_count",
    "cardinality",
    "percentiles",
];
const BUCKETS: &[&str] = &["terms", "histogram", "date_histogram", "range"];

/// What the post-processing needs to remember of a request.
struct Plan {
    name: String,
    kind: String,
    date_field: bool,
    ranges: Vec<(Option<f64>, Option<f64>)>,
    children: Vec<Plan>,
}

/// Runs the aggregations of a request (`key` is `aggs` or `aggregations`, for messages).
pub fn run(
    schema: &IndexSchema,
    searcher: &Searcher,
    query: &dyn Query,
    aggs: &Value,
    key: &str,
) -> Result<Value, SearchError> {
    let (request, plans) = rewrite(schema, aggs, key)?;
    let parsed: Aggregations = serde_json::from_value(request)
        .map_err(|e| SearchError::dsl(key, format!("invalid aggregation: {e}")))?;
    let collector = AggregationCollector::from_aggs(parsed, AggContextParams::default());
    let result = searcher
        .search(query, &collector)
        .map_err(|e| SearchError::dsl(key, e.to_string()))?;
    let mut out = serde_json::to_value(&result).map_err(|e| SearchError::Index(e.to_string()))?;
    for plan in &plans {
        if let Some(v) = out.get_mut(&plan.name) {
            fix(v, plan);
        }
    }
    Ok(out)
}

fn rewrite(
    schema: &IndexSchema,
    aggs: &Value,
    path: &str,
) -> Result<(Value, Vec<Plan>), SearchError> {
    let Value::Object(aggs) = aggs else {
        return Err(SearchError::dsl(
            path,
            "aggregations must be an object of named aggregations",
        ));
    };
    let mut out = Map::new();
    let mut plans = Vec::new();
    for (name, def) in aggs {
        let here = format!("{path}.{name}");
        let Value::Object(def) = def else {
            return Err(SearchError::dsl(&here, "an aggregation must be an object"));
        };
        let mut kind: Option<(String, Value)> = None;
        let mut children = None;
        for (k, v) in def {
            match k.as_str() {
                "aggs" | "aggregations" => children = Some(v),
                "meta" => {}
                other if kind.is_none() => kind = Some((other.to_owned(), v.clone())),
                other => {
                    return Err(SearchError::dsl(
                        &here,
                        format!("more than one aggregation type ({other})"),
                    ));
                }
            }
        }
        let Some((kind, mut body)) = kind else {
            return Err(SearchError::dsl(&here, "no aggregation type"));
        };
        let kind_path = format!("{here}.{kind}");
        if !METRICS.contains(&kind.as_str()) && !BUCKETS.contains(&kind.as_str()) {
            return Err(SearchError::Unsupported {
                path: kind_path,
                clause: format!("{kind} aggregation"),
            });
        }
        let mut date_field = false;
        if let Some(field) = body.get("field").and_then(Value::as_str).map(str::to_owned) {
            let Some(indexed) = schema.fields.get(&field) else {
                return Err(SearchError::dsl(
                    &kind_path,
                    format!("field '{field}' is not in the mapping"),
                ));
            };
            if indexed.spec.kind == FieldKind::Text {
                let hint = schema.keyword_hint(&field);
                return Err(SearchError::dsl(
                    &kind_path,
                    format!("text field '{field}' cannot be aggregated; use a keyword field{hint}"),
                ));
            }
            date_field = indexed.spec.kind == FieldKind::Date;
            body["field"] = json!(indexed.name);
        } else if kind != "value_count" || body.get("script").is_some() {
            if body.get("script").is_some() {
                return Err(SearchError::Unsupported {
                    path: format!("{kind_path}.script"),
                    clause: "script".into(),
                });
            }
            return Err(SearchError::dsl(&kind_path, "a field is required"));
        }
        let mut ranges = Vec::new();
        if kind == "date_histogram" {
            date_histogram(&mut body, &kind_path)?;
        }
        if kind == "range" {
            let scale = if date_field { 1e6 } else { 1.0 };
            if let Some(Value::Array(rs)) = body.get_mut("ranges") {
                for r in rs.iter_mut() {
                    let from = r.get("from").and_then(Value::as_f64);
                    let to = r.get("to").and_then(Value::as_f64);
                    ranges.push((from, to));
                    // Date ranges are given in ms; tantivy takes nanoseconds.
                    if let (true, Some(f)) = (date_field, from) {
                        r["from"] = json!(f * scale);
                    }
                    if let (true, Some(t)) = (date_field, to) {
                        r["to"] = json!(t * scale);
                    }
                }
            }
        }
        let mut entry = Map::new();
        entry.insert(kind.clone(), body);
        let mut child_plans = Vec::new();
        if let Some(children) = children {
            if METRICS.contains(&kind.as_str()) {
                return Err(SearchError::dsl(
                    &here,
                    format!("a {kind} aggregation cannot have sub-aggregations"),
                ));
            }
            let (sub, sub_plans) = rewrite(schema, children, &format!("{here}.aggs"))?;
            entry.insert("aggs".into(), sub);
            child_plans = sub_plans;
        }
        out.insert(name.clone(), Value::Object(entry));
        plans.push(Plan {
            name: name.clone(),
            kind,
            date_field,
            ranges,
            children: child_plans,
        });
    }
    Ok((Value::Object(out), plans))
}

fn date_histogram(body: &mut Value, path: &str) -> Result<(), SearchError> {
    let Some(obj) = body.as_object_mut() else {
        return Ok(());
    };
    obj.remove("format");
    obj.remove("time_zone");
    let calendar = obj
        .remove("calendar_interval")
        .or_else(|| obj.remove("interval"));
    if let Some(c) = calendar {
        let fixed = match c.as_str().unwrap_or_default() {
            "second" | "1s" => "1s",
            "minute" | "1m" => "1m",
            "hour" | "1h" => "1h",
            "day" | "1d" => "1d",
            other => {
                return Err(SearchError::Unsupported {
                    path: format!("{path}.calendar_interval"),
                    clause: format!(
                        "calendar_interval '{other}' (second, minute, hour and day are)"
                    ),
                });
            }
        };
        obj.insert("fixed_interval".into(), json!(fixed));
    }
    Ok(())
}

/// Puts a result back into OpenSearch's shape.
fn fix(v: &mut Value, plan: &Plan) {
    match plan.kind.as_str() {
        "range" => {
            if let Some(Value::Array(buckets)) = v.get_mut("buckets") {
                // tantivy fills the gaps between requested ranges with buckets of its own.
                buckets.retain(|b| {
                    let from = b
                        .get("from")
                        .and_then(Value::as_f64)
                        .map(|f| if plan.date_field { f / 1e6 } else { f });
                    let to = b
                        .get("to")
                        .and_then(Value::as_f64)
                        .map(|t| if plan.date_field { t / 1e6 } else { t });
                    plan.ranges
                        .iter()
                        .any(|(rf, rt)| close(*rf, from) && close(*rt, to))
                });
                if plan.date_field {
                    for b in buckets.iter_mut() {
                        for k in ["from", "to"] {
                            if let Some(x) = b.get(k).and_then(Value::as_f64) {
                                b[k] = json!(x / 1e6);
                            }
                        }
                    }
                }
            }
        }
        "date_histogram" => {
            if let Some(Value::Array(buckets)) = v.get_mut("buckets") {
                for b in buckets.iter_mut() {
                    if let Some(k) = b.get("key").and_then(Value::as_f64) {
                        b["key"] = json!(k as i64);
                    }
                }
            }
        }
        "min" | "max" | "avg" if plan.date_field => {
            if let Some(x) = v.get("value").and_then(Value::as_f64) {
                v["value"] = json!(x / 1e6);
            }
        }
        _ => {}
    }
    if plan.children.is_empty() {
        return;
    }
    if let Some(Value::Array(buckets)) = v.get_mut("buckets") {
        for b in buckets.iter_mut() {
            for child in &plan.children {
                if let Some(cv) = b.get_mut(&child.name) {
                    fix(cv, child);
                }
            }
        }
    }
}

fn close(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(1.0),
        _ => false,
    }
}
