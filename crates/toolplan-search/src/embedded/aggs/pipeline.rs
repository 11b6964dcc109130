//! Pipeline aggregations: computed from the other aggregations' results once they are in
//! OpenSearch's shape, never run by tantivy.
//!
//! * Sibling pipelines (`avg_bucket`, `sum_bucket`, `min_bucket`, `max_bucket`, `stats_bucket`)
//!   read one value from each bucket of a multi-bucket aggregation beside them
//!   (`buckets_path: "sales_per_month>sales"`, or `"sales_per_month.sales"`) and answer with one
//!   result of their own.
//! * Parent pipelines (`cumulative_sum`, `derivative`, `bucket_sort`) sit among the
//!   sub-aggregations of a multi-bucket aggregation (a histogram for the first two) and work across
//!   its buckets, in their order: a value in each bucket, or the buckets sorted and cut.
//!
//! A path names aggregations by `>`, then a value of the last one: `_count` (the bucket's
//! documents), a single-value metric (its `value`), or a metric's named value (`stats.avg`,
//! `percentiles[99.0]`). Buckets whose value is missing, and buckets without documents (but for
//! their `_count`), are skipped (`gap_policy: skip`, the default) or counted as 0 (`insert_zeros`).

use serde_json::{Map, Value, json};

use super::AggregationPlan;
use crate::error::SearchError;

/// Sibling pipelines: one result from the buckets of another aggregation.
pub(super) const SIBLING: &[&str] = &[
    "avg_bucket",
    "sum_bucket",
    "min_bucket",
    "max_bucket",
    "stats_bucket",
];
/// Parent pipelines: values across the buckets of the aggregation they sit in.
pub(super) const PARENT: &[&str] = &["cumulative_sum", "derivative", "bucket_sort"];

/// A pipeline aggregation as the request gives it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pipeline {
    kind: String,
    /// `buckets_path`, split: aggregation names, then the value's key if one is named.
    path: Vec<String>,
    /// `gap_policy: insert_zeros`: a missing value counts as 0.
    zeros: bool,
    /// `bucket_sort`: the sort (paths and directions), `from` and `size`.
    sort: Vec<(Vec<String>, bool)>,
    from: usize,
    size: Option<usize>,
}

impl Pipeline {
    /// Reads pipeline `kind` with body `body` (at `path`, for messages).
    pub(super) fn parse(kind: &str, body: &Value, path: &str) -> Result<Pipeline, SearchError> {
        let Value::Object(o) = body else {
            return Err(SearchError::dsl(path, format!("{kind} must be an object")));
        };
        let allowed: &[&str] = if kind == "bucket_sort" {
            &["sort", "from", "size", "gap_policy"]
        } else {
            &["buckets_path", "gap_policy"]
        };
        if let Some(other) = o.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(SearchError::Unsupported {
                path: format!("{path}.{other}"),
                clause: format!("{kind} option {other}"),
            });
        }
        let zeros = match o.get("gap_policy").map(|g| g.as_str()) {
            None | Some(Some("skip")) => false,
            Some(Some("insert_zeros")) => true,
            Some(_) => {
                return Err(SearchError::dsl(
                    format!("{path}.gap_policy"),
                    "gap_policy must be skip or insert_zeros",
                ));
            }
        };
        let mut pipeline = Pipeline {
            kind: kind.to_owned(),
            path: Vec::new(),
            zeros,
            sort: Vec::new(),
            from: 0,
            size: None,
        };
        if kind == "bucket_sort" {
            pipeline.sort = sort_of(o.get("sort"), path)?;
            let count = |key: &str| -> Result<Option<usize>, SearchError> {
                match o.get(key) {
                    None => Ok(None),
                    Some(v) => v.as_u64().map(|n| Some(n as usize)).ok_or_else(|| {
                        SearchError::dsl(
                            format!("{path}.{key}"),
                            format!("{key} must be a whole number"),
                        )
                    }),
                }
            };
            pipeline.from = count("from")?.unwrap_or(0);
            pipeline.size = count("size")?;
            return Ok(pipeline);
        }
        let Some(Value::String(p)) = o.get("buckets_path") else {
            return Err(SearchError::dsl(
                path,
                format!("{kind} needs [buckets_path], such as \"sales_per_month>sales\""),
            ));
        };
        pipeline.path = split_path(p);
        Ok(pipeline)
    }

    fn is_parent(&self) -> bool {
        PARENT.contains(&self.kind.as_str())
    }
}

/// `a>b.c` as `["a", "b", "c"]`; `p[99.0]` keeps its brackets.
fn split_path(path: &str) -> Vec<String> {
    let mut parts: Vec<String> = path.split('>').map(|p| p.trim().to_owned()).collect();
    if let Some(last) = parts.pop() {
        match last.split_once('.') {
            Some((name, key)) if !name.contains('[') => {
                parts.push(name.to_owned());
                parts.push(key.to_owned());
            }
            _ => parts.push(last),
        }
    }
    parts
}

/// A `bucket_sort`'s `sort`: paths (`"the_max"`, `{"the_max": {"order": "desc"}}`), ascending unless
/// `desc` is asked.
fn sort_of(sort: Option<&Value>, path: &str) -> Result<Vec<(Vec<String>, bool)>, SearchError> {
    let list = match sort {
        None => return Ok(Vec::new()),
        Some(Value::Array(list)) => list.clone(),
        Some(one) => vec![one.clone()],
    };
    list.iter()
        .map(|entry| match entry {
            Value::String(p) => Ok((split_path(p), false)),
            Value::Object(o) if let (Some((p, how)), 1) = (o.iter().next(), o.len()) => {
                let order = how
                    .get("order")
                    .and_then(Value::as_str)
                    .or_else(|| how.as_str())
                    .unwrap_or("asc");
                Ok((split_path(p), order.eq_ignore_ascii_case("desc")))
            }
            other => Err(SearchError::dsl(
                format!("{path}.sort"),
                format!(
                    "a bucket_sort sort entry must be a path or {{path: {{order}}}}, found {other}"
                ),
            )),
        })
        .collect()
}

/// Checks where the pipelines among `plans` stand before anything runs: parent pipelines inside a
/// multi-bucket aggregation of the right kind (`parent` is the kind of the aggregation they sit
/// in, `None` at the top level), sibling pipelines naming an aggregation beside them.
pub(super) fn check(
    plans: &[AggregationPlan],
    parent: Option<&str>,
    path: &str,
) -> Result<(), SearchError> {
    for plan in plans {
        let Some(pipeline) = &plan.pipeline else {
            check(
                &plan.children,
                Some(&plan.kind),
                &format!("{path}.{}", plan.name),
            )?;
            continue;
        };
        let here = format!("{path}.{}.{}", plan.name, pipeline.kind);
        if pipeline.is_parent() {
            let histogram = matches!(parent, Some("histogram" | "date_histogram"));
            let ok = match pipeline.kind.as_str() {
                "bucket_sort" => parent.is_some_and(is_multi_bucket),
                _ => histogram,
            };
            if !ok {
                let wanted = if pipeline.kind == "bucket_sort" {
                    "must be declared inside of another aggregation"
                } else {
                    "must have a histogram or date_histogram as parent"
                };
                return Err(SearchError::dsl(
                    here,
                    format!("{} aggregation [{}] {wanted}", pipeline.kind, plan.name),
                ));
            }
            continue;
        }
        let Some(first) = pipeline.path.first() else {
            return Err(SearchError::dsl(here, "buckets_path is empty"));
        };
        let Some(sibling) = plans.iter().find(|p| &p.name == first) else {
            return Err(SearchError::dsl(
                here,
                format!(
                    "No aggregation found for path [{}]",
                    pipeline.path.join(">")
                ),
            ));
        };
        if !is_multi_bucket(&sibling.kind) {
            return Err(SearchError::dsl(
                here,
                format!(
                    "the first aggregation in buckets_path must be a multi-bucket aggregation: [{first}] is a {}",
                    sibling.kind
                ),
            ));
        }
    }
    Ok(())
}

fn is_multi_bucket(kind: &str) -> bool {
    matches!(
        kind,
        "terms"
            | "rare_terms"
            | "multi_terms"
            | "histogram"
            | "date_histogram"
            | "auto_date_histogram"
            | "adjacency_matrix"
            | "range"
            | "date_range"
            | "ip_range"
            | "filters"
    )
}

/// Computes the pipelines among `plans` into `level` (an aggregations object: the response's, or a
/// bucket's), those deeper first: parent pipelines across the buckets they sit in, then sibling
/// pipelines of this level.
pub(super) fn apply(
    level: &mut Map<String, Value>,
    plans: &[AggregationPlan],
) -> Result<(), SearchError> {
    for plan in plans.iter().filter(|p| p.pipeline.is_none()) {
        if plan.children.is_empty() {
            continue;
        }
        let Some(result) = level.get_mut(&plan.name) else {
            continue;
        };
        if let Some(own) = result.as_object_mut()
            && !own.contains_key("buckets")
        {
            // A single-bucket aggregation (`filter`, `missing`): its sub-aggregations are a level.
            apply(own, &plan.children)?;
            continue;
        }
        let mut buckets = buckets_of(result);
        for bucket in buckets.iter_mut() {
            if let Some(b) = bucket.as_object_mut() {
                apply(b, &plan.children)?;
            }
        }
        for child in &plan.children {
            if let Some(pipeline) = child.pipeline.as_ref().filter(|p| p.is_parent()) {
                across(result, &child.name, pipeline)?;
            }
        }
    }
    for plan in plans {
        let Some(pipeline) = plan.pipeline.as_ref().filter(|p| !p.is_parent()) else {
            continue;
        };
        let value = sibling(level, &plan.name, pipeline)?;
        level.insert(plan.name.clone(), value);
    }
    Ok(())
}

/// The buckets of a multi-bucket result, listed or keyed.
fn buckets_of(result: &mut Value) -> Vec<&mut Value> {
    match result.get_mut("buckets") {
        Some(Value::Array(list)) => list.iter_mut().collect(),
        Some(Value::Object(by_key)) => by_key.values_mut().collect(),
        _ => Vec::new(),
    }
}

/// The number `path` reads in `bucket`; `Ok(None)` for a metric without a value (an empty bucket's
/// `avg`).
fn value_at(bucket: &Value, path: &[String], name: &str) -> Result<Option<f64>, SearchError> {
    value_in(bucket, path, name, false)
}

/// [`value_at`]; with `absent_is_gap`, a path that names nothing in this bucket is a missing value
/// (a parent pipeline over another one, which the first bucket lacks: a derivative of a
/// derivative).
fn value_in(
    bucket: &Value,
    path: &[String],
    name: &str,
    absent_is_gap: bool,
) -> Result<Option<f64>, SearchError> {
    let not_found = || {
        SearchError::dsl(
            format!("aggs.{name}.buckets_path"),
            format!("No aggregation found for path [{}]", path.join(">")),
        )
    };
    let Some((last, through)) = path.split_last() else {
        return Err(not_found());
    };
    let mut at = bucket;
    for step in through {
        at = at.get(step).ok_or_else(not_found)?;
        if at.get("buckets").is_some() {
            return Err(SearchError::dsl(
                format!("aggs.{name}.buckets_path"),
                format!(
                    "buckets_path must reference either a number value or a single value numeric metric aggregation, but [{step}] is a multi-bucket aggregation"
                ),
            ));
        }
    }
    if last == "_count" && through.is_empty() {
        return Ok(at.get("doc_count").and_then(Value::as_f64));
    }
    // A bucket without documents has no value but its count (OpenSearch's gap).
    if bucket.get("doc_count").and_then(Value::as_u64) == Some(0) {
        return Ok(None);
    }
    if last == "_count" {
        return Ok(at.get("doc_count").and_then(Value::as_f64));
    }
    // `p[99.0]`: a named value of a metric with several.
    if let Some((metric, key)) = last.strip_suffix(']').and_then(|l| l.split_once('[')) {
        let values = at.get(metric).ok_or_else(not_found)?;
        return Ok(values
            .get("values")
            .and_then(|v| v.get(key))
            .and_then(Value::as_f64));
    }
    let Some(found) = at.get(last) else {
        return if absent_is_gap {
            Ok(None)
        } else {
            Err(not_found())
        };
    };
    match found {
        Value::Number(n) => Ok(n.as_f64()),
        Value::Null => Ok(None),
        Value::Object(metric) if metric.contains_key("value") => {
            Ok(metric.get("value").and_then(Value::as_f64))
        }
        Value::Object(metric) if metric.contains_key("buckets") => Err(SearchError::dsl(
            format!("aggs.{name}.buckets_path"),
            format!(
                "buckets_path must reference either a number value or a single value numeric metric aggregation, but [{last}] is a multi-bucket aggregation"
            ),
        )),
        Value::Object(_) => Err(SearchError::dsl(
            format!("aggs.{name}.buckets_path"),
            format!(
                "buckets_path must reference either a number value or a single value numeric metric aggregation, but [{last}] contains multiple values. Please specify which to use."
            ),
        )),
        _ => Err(not_found()),
    }
}

/// A bucket's key as a sibling pipeline lists it (`min_bucket`'s `keys`).
fn key_text(bucket: &Value, keyed_as: Option<&str>) -> String {
    if let Some(k) = keyed_as {
        return k.to_owned();
    }
    match bucket.get("key_as_string").or_else(|| bucket.get("key")) {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// A sibling pipeline's result, from the buckets of the aggregation its path names.
fn sibling(
    level: &Map<String, Value>,
    name: &str,
    pipeline: &Pipeline,
) -> Result<Value, SearchError> {
    let Some((first, rest)) = pipeline.path.split_first() else {
        return Ok(Value::Null);
    };
    let result = level.get(first).cloned().unwrap_or(Value::Null);
    let buckets: Vec<(Option<String>, Value)> = match result.get("buckets") {
        Some(Value::Array(list)) => list.iter().map(|b| (None, b.clone())).collect(),
        Some(Value::Object(by_key)) => by_key
            .iter()
            .map(|(k, b)| (Some(k.clone()), b.clone()))
            .collect(),
        _ => Vec::new(),
    };
    let rest = if rest.is_empty() {
        vec!["_count".to_owned()]
    } else {
        rest.to_vec()
    };
    let mut values = Vec::new();
    for (keyed_as, bucket) in &buckets {
        match value_at(bucket, &rest, name)? {
            Some(x) if x.is_finite() => values.push((key_text(bucket, keyed_as.as_deref()), x)),
            _ if pipeline.zeros => values.push((key_text(bucket, keyed_as.as_deref()), 0.0)),
            _ => {}
        }
    }
    let sum: f64 = values.iter().map(|(_, x)| x).sum();
    let count = values.len();
    let extreme = |pick_max: bool| {
        let best = values
            .iter()
            .map(|(_, x)| *x)
            .reduce(|a, b| if (b > a) == pick_max { b } else { a });
        let keys: Vec<&String> = values
            .iter()
            .filter(|(_, x)| Some(*x) == best)
            .map(|(k, _)| k)
            .collect();
        json!({"value": best, "keys": keys})
    };
    Ok(match pipeline.kind.as_str() {
        "avg_bucket" => json!({"value": (count > 0).then(|| sum / count as f64)}),
        "sum_bucket" => json!({"value": sum}),
        "min_bucket" => extreme(false),
        "max_bucket" => extreme(true),
        _ => {
            let min = values.iter().map(|(_, x)| *x).reduce(f64::min);
            let max = values.iter().map(|(_, x)| *x).reduce(f64::max);
            json!({"count": count, "min": min, "max": max,
                   "avg": (count > 0).then(|| sum / count as f64), "sum": sum})
        }
    })
}

/// A parent pipeline `name` across the buckets of `result`, in their order.
fn across(result: &mut Value, name: &str, pipeline: &Pipeline) -> Result<(), SearchError> {
    if pipeline.kind == "bucket_sort" {
        return sort_buckets(result, name, pipeline);
    }
    let mut running = 0.0;
    let mut previous: Option<f64> = None;
    for (i, bucket) in buckets_of(result).into_iter().enumerate() {
        let value = match value_in(bucket, &pipeline.path, name, true)? {
            Some(x) if x.is_finite() => Some(x),
            _ if pipeline.zeros => Some(0.0),
            _ => None,
        };
        let Some(o) = bucket.as_object_mut() else {
            continue;
        };
        match pipeline.kind.as_str() {
            "cumulative_sum" => {
                running += value.unwrap_or(0.0);
                o.insert(name.to_owned(), json!({"value": running}));
            }
            _ => {
                // The first bucket has no derivative; a gap, and the bucket after one, a null one.
                if i > 0 {
                    let change = previous.zip(value).map(|(before, now)| now - before);
                    o.insert(name.to_owned(), json!({ "value": change }));
                }
                previous = value;
            }
        }
    }
    Ok(())
}

/// `bucket_sort`: the buckets ordered by the sort's paths (kept in their order when none), then
/// `from` and `size`.
fn sort_buckets(result: &mut Value, name: &str, pipeline: &Pipeline) -> Result<(), SearchError> {
    let list = match result.get_mut("buckets") {
        Some(Value::Array(list)) => list,
        Some(Value::Object(_)) => {
            return Err(SearchError::Unsupported {
                path: format!("aggs.{name}.bucket_sort"),
                clause: "bucket_sort of keyed buckets".into(),
            });
        }
        _ => return Ok(()),
    };
    let mut keyed: Vec<(Vec<Option<f64>>, Value)> = Vec::with_capacity(list.len());
    for bucket in list.drain(..) {
        let mut keys = Vec::with_capacity(pipeline.sort.len());
        for (path, _) in &pipeline.sort {
            keys.push(value_in(&bucket, path, name, true)?);
        }
        // A bucket whose every sort value is a gap is left out (unless the gaps count as 0).
        if !keys.is_empty() && keys.iter().all(Option::is_none) {
            if !pipeline.zeros {
                continue;
            }
            keys.iter_mut().for_each(|k| *k = Some(0.0));
        }
        keyed.push((keys, bucket));
    }
    keyed.sort_by(|(a, _), (b, _)| {
        for ((x, y), (_, desc)) in a.iter().zip(b).zip(&pipeline.sort) {
            // Buckets without the value last, either way.
            let order = match (x, y) {
                (None, None) => std::cmp::Ordering::Equal,
                (None, Some(_)) => return std::cmp::Ordering::Greater,
                (Some(_), None) => return std::cmp::Ordering::Less,
                (Some(x), Some(y)) => x.partial_cmp(y).unwrap_or(std::cmp::Ordering::Equal),
            };
            let order = if *desc { order.reverse() } else { order };
            if order != std::cmp::Ordering::Equal {
                return order;
            }
        }
        std::cmp::Ordering::Equal
    });
    let size = pipeline.size.unwrap_or(usize::MAX);
    list.extend(
        keyed
            .into_iter()
            .map(|(_, b)| b)
            .skip(pipeline.from)
            .take(size),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_on_aggregations_and_the_value_key() {
        assert_eq!(
            split_path("sales_per_month>sales"),
            ["sales_per_month", "sales"]
        );
        assert_eq!(split_path("range.v"), ["range", "v"]);
        assert_eq!(split_path("a>stats.avg"), ["a", "stats", "avg"]);
        assert_eq!(split_path("t>p[99.0]"), ["t", "p[99.0]"]);
    }

    #[test]
    fn values_are_read_from_a_bucket() {
        let bucket = json!({"doc_count": 3, "m": {"value": 2.5}, "s": {"avg": 1.0, "max": 4.0},
                            "p": {"values": {"99.0": 7.0}}, "e": {"value": null},
                            "t": {"buckets": []}});
        let at = |p: &str| value_at(&bucket, &split_path(p), "x");
        assert_eq!(at("_count").unwrap(), Some(3.0));
        assert_eq!(at("m").unwrap(), Some(2.5));
        assert_eq!(at("m.value").unwrap(), Some(2.5));
        assert_eq!(at("s.max").unwrap(), Some(4.0));
        assert_eq!(at("p[99.0]").unwrap(), Some(7.0));
        assert_eq!(at("e").unwrap(), None);
        assert!(
            at("s")
                .unwrap_err()
                .to_string()
                .contains("contains multiple values")
        );
        assert!(at("t").unwrap_err().to_string().contains("multi-bucket"));
        assert!(
            at("nope")
                .unwrap_err()
                .to_string()
                .contains("No aggregation found")
        );
    }
}
