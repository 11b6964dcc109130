//! The `order` of `histogram` and `date_histogram` buckets (tantivy's histograms come in key
//! order only), applied to the shaped buckets: by `_key` (`_time`, its old name), `_count` or a
//! sub-aggregation's value, several criteria in turn, ties by key ascending as OpenSearch breaks
//! them. `_term` and `_time` are renamed `_key` in the orders tantivy runs (`terms`).

use std::cmp::Ordering;

use serde_json::{Map, Value};

use crate::embedded::multi::compare_values;
use crate::error::SearchError;

/// What buckets are ordered by.
#[derive(Debug, Clone, PartialEq)]
enum Target {
    Key,
    Count,
    /// A sub-aggregation's value: `name` (its `value`) or `name.metric`.
    Path(String, Option<String>),
}

/// A bucket order: criteria in turn, each ascending or not.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BucketOrder(Vec<(Target, bool)>);

impl BucketOrder {
    /// Reads an `order` (`{"_key": "desc"}`, or a list of such objects) at `path`.
    pub(crate) fn parse(order: &Value, path: &str) -> Result<BucketOrder, SearchError> {
        let items: Vec<&Map<String, Value>> = match order {
            Value::Object(o) => vec![o],
            Value::Array(list) => list
                .iter()
                .map(|v| {
                    v.as_object().ok_or_else(|| {
                        SearchError::dsl(path, format!("an order is an object, found {v}"))
                    })
                })
                .collect::<Result<_, _>>()?,
            other => {
                return Err(SearchError::dsl(
                    path,
                    format!("an order is an object, found {other}"),
                ));
            }
        };
        let mut criteria = Vec::new();
        for item in items {
            for (target, direction) in item {
                let ascending = match direction.as_str().map(str::to_ascii_lowercase).as_deref() {
                    Some("asc") => true,
                    Some("desc") => false,
                    _ => {
                        return Err(SearchError::dsl(
                            path,
                            format!("Unknown order direction [{direction}]"),
                        ));
                    }
                };
                let target = match target.as_str() {
                    "_key" | "_time" => Target::Key,
                    "_count" => Target::Count,
                    other => match other.split_once(['.', '[']) {
                        Some((name, metric)) => Target::Path(
                            name.to_owned(),
                            Some(metric.trim_end_matches(']').to_owned()),
                        ),
                        None => Target::Path(other.to_owned(), None),
                    },
                };
                criteria.push((target, ascending));
            }
        }
        Ok(BucketOrder(criteria))
    }

    /// Checks that each sub-aggregation the order names is among `children` (the request's
    /// sub-aggregations) and is a metric, as OpenSearch checks an order path; a path through a
    /// bucket aggregation (`a>b`) is not run here.
    pub(crate) fn check_paths(
        &self,
        children: Option<&Value>,
        path: &str,
    ) -> Result<(), SearchError> {
        for (target, _) in &self.0 {
            let Target::Path(name, metric) = target else {
                continue;
            };
            let shown = match metric {
                Some(m) => format!("{name}.{m}"),
                None => name.clone(),
            };
            if name.contains('>') {
                return Err(SearchError::Unsupported {
                    path: path.to_owned(),
                    clause: format!(
                        "histogram order by a path through a bucket aggregation [{shown}]"
                    ),
                });
            }
            let kind = children
                .and_then(|c| c.get(name.as_str()))
                .and_then(Value::as_object)
                .and_then(|o| {
                    o.keys()
                        .find(|k| !matches!(k.as_str(), "aggs" | "aggregations" | "meta"))
                });
            let Some(kind) = kind.filter(|k| super::METRICS.contains(&k.as_str())) else {
                return Err(SearchError::dsl(
                    path,
                    format!(
                        "Invalid aggregator order path [{shown}]. The provided aggregation [{name}] either does not exist, or is a pipeline aggregation and cannot be used to sort the buckets."
                    ),
                ));
            };
            let multi_value = matches!(kind.as_str(), "stats" | "extended_stats" | "percentiles");
            if multi_value && metric.is_none() {
                return Err(SearchError::dsl(
                    path,
                    format!(
                        "Invalid aggregation order path [{shown}]. When ordering on a multi-value metrics aggregation a metric name must be specified."
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Orders the buckets of a shaped histogram result.
    pub(crate) fn apply(&self, v: &mut Value) {
        let Some(Value::Array(buckets)) = v.get_mut("buckets") else {
            return;
        };
        buckets.sort_by(|a, b| {
            self.0
                .iter()
                .map(|(target, ascending)| {
                    let o = compare_values(&value_of(a, target), &value_of(b, target));
                    if *ascending { o } else { o.reverse() }
                })
                .find(|o| *o != Ordering::Equal)
                .unwrap_or_else(|| compare_values(&a["key"], &b["key"]))
        });
    }
}

/// What a bucket is ordered by.
fn value_of(bucket: &Value, target: &Target) -> Value {
    match target {
        Target::Key => bucket["key"].clone(),
        Target::Count => bucket["doc_count"].clone(),
        Target::Path(name, metric) => {
            let agg = &bucket[name.as_str()];
            match metric {
                Some(m) => agg
                    .get(m.as_str())
                    .or_else(|| agg.get("values").and_then(|vs| vs.get(m.as_str())))
                    .cloned()
                    .unwrap_or(Value::Null),
                // A single-bucket aggregation (`filter`) orders by its count.
                None => agg
                    .get("value")
                    .or_else(|| agg.get("doc_count"))
                    .cloned()
                    .unwrap_or(Value::Null),
            }
        }
    }
}

/// Renames `_term` and `_time` to `_key` in the `order` of a request tantivy runs.
pub(crate) fn rename_old_keys(body: &mut Value) {
    let rename = |o: &mut Map<String, Value>| {
        for old in ["_term", "_time"] {
            if let Some(v) = o.remove(old) {
                o.insert("_key".into(), v);
            }
        }
    };
    match body.get_mut("order") {
        Some(Value::Object(o)) => rename(o),
        Some(Value::Array(list)) => {
            for item in list {
                if let Value::Object(o) = item {
                    rename(o);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn buckets_are_ordered_by_each_criterion_in_turn_then_by_key() {
        let mut v = json!({"buckets": [
            {"key": 1, "doc_count": 2, "s": {"value": 5.0}},
            {"key": 2, "doc_count": 1, "s": {"value": 9.0}},
            {"key": 3, "doc_count": 2, "s": {"value": 1.0}}]});
        let keys = |v: &Value| -> Vec<i64> {
            v["buckets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["key"].as_i64().unwrap())
                .collect()
        };
        BucketOrder::parse(&json!({"_time": "desc"}), "o")
            .unwrap()
            .apply(&mut v);
        assert_eq!(keys(&v), [3, 2, 1]);
        BucketOrder::parse(&json!({"_count": "desc"}), "o")
            .unwrap()
            .apply(&mut v);
        assert_eq!(keys(&v), [1, 3, 2]);
        BucketOrder::parse(&json!([{"_count": "desc"}, {"s": "asc"}]), "o")
            .unwrap()
            .apply(&mut v);
        assert_eq!(keys(&v), [3, 1, 2]);
        assert!(BucketOrder::parse(&json!({"_key": "up"}), "o").is_err());
        let mut terms = json!({"order": [{"_term": "asc"}]});
        rename_old_keys(&mut terms);
        assert_eq!(terms, json!({"order": [{"_key": "asc"}]}));
    }
}
