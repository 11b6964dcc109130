//! `top_hits`: run after the aggregations as one search per bucket, with the request's query and the
//! filters of the buckets it sits in, bounded by `max_inner_result_window` per request and
//! `max_result_window` over all buckets. The walk over the buckets ([`Rewrite::fill_searched`])
//! also runs the searches of `filter`, `filters` and `missing` ([`super::filtered`]).

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::{AggregationPlan, Rewrite};
use crate::error::SearchError;
use crate::limits::{SearchLimits, inner_window, within};

impl Rewrite<'_> {
    /// The query of a search inside buckets: the request's query, and the buckets' `filters`.
    pub(super) fn bucket_query(&self, filters: Vec<Value>) -> Value {
        json!({"bool": {"must": [self.query], "filter": filters}})
    }

    /// Fills in the aggregations that are searches of their own (`top_hits`, and `filter`,
    /// `filters`, `missing`) in `v`, the result of `plan`, and under it: each one's search is the
    /// request's query and the filters of the buckets it sits in.
    pub(super) fn fill_searched(
        &self,
        v: &mut Value,
        plan: &AggregationPlan,
        filters: &mut Vec<Value>,
    ) -> Result<(), SearchError> {
        if let Some((every, size)) = &plan.all_combinations {
            self.add_empty_combinations(v, every, *size)?;
        }
        if let Some((searched, sub_aggs)) = &plan.searched {
            *v = self.run_searched(searched, sub_aggs.as_ref(), filters)?;
            if let Some(terms) = &plan.index_terms {
                *v = index_bucket(terms, std::mem::take(v));
            }
            return Ok(());
        }
        if let Some(req) = &plan.top_hits {
            let mut body = req.clone();
            body["query"] = self.bucket_query(filters.clone());
            let response = (self.sub)(&body)?;
            let returned = response
                .pointer("/hits/hits")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let total = self.top_hits.get().saturating_add(returned);
            self.top_hits.set(total);
            let max = self.limits.max_result_window;
            within(
                total,
                max,
                "max_result_window",
                &format!("aggs.{}", plan.name),
                || {
                    format!(
                        "the top_hits of all buckets return more than {max} hits; ask for fewer buckets or a smaller size"
                    )
                },
            )?;
            *v = json!({"hits": response.get("hits").cloned().unwrap_or(Value::Null)});
            return Ok(());
        }
        if !plan.children.iter().any(AggregationPlan::runs_searches) {
            return Ok(());
        }
        let Some(Value::Array(buckets)) = v.get_mut("buckets") else {
            return Ok(());
        };
        for b in buckets.iter_mut() {
            let filter = bucket_filter(plan, b);
            filters.push(filter);
            for child in &plan.children {
                if (child.top_hits.is_some() || child.searched.is_some())
                    && let Some(o) = b.as_object_mut()
                {
                    o.insert(child.name.clone(), Value::Null);
                }
                if let Some(cv) = b.get_mut(&child.name) {
                    self.fill_searched(cv, child, filters)?;
                }
            }
            filters.pop();
        }
        if let Some((order, size)) = &plan.order_after_searches {
            order_and_cut(v, order, *size, plan)?;
        }
        Ok(())
    }
}

/// Orders `terms` buckets (all of the field's) by `order`, then keeps `size` of them, the others
/// counted in `sum_other_doc_count`.
fn order_and_cut(
    v: &mut Value,
    order: &super::order::BucketOrder,
    size: usize,
    plan: &AggregationPlan,
) -> Result<(), SearchError> {
    if v.get("sum_other_doc_count")
        .and_then(Value::as_u64)
        .is_some_and(|n| n > 0)
    {
        return Err(SearchError::dsl(
            format!("aggs.{}.terms", plan.name),
            "the field has more distinct values than an order by a filter sub-aggregation can sort (search limit max_buckets)",
        ));
    }
    order.apply(v);
    let Some(Value::Array(buckets)) = v.get_mut("buckets") else {
        return Ok(());
    };
    let cut: u64 = buckets
        .iter()
        .skip(size)
        .map(|b| b["doc_count"].as_u64().unwrap_or(0))
        .sum();
    buckets.truncate(size);
    v["sum_other_doc_count"] = json!(cut);
    Ok(())
}

/// The query DSL that selects a bucket's documents.
fn bucket_filter(plan: &AggregationPlan, bucket: &Value) -> Value {
    let field = plan.field.clone().unwrap_or_default();
    let num = |k: &str| bucket.get(k).and_then(Value::as_f64);
    let range = |from: Option<f64>, to: Option<f64>| {
        let mut r = Map::new();
        if let Some(f) = from {
            r.insert("gte".into(), json!(f));
        }
        if let Some(t) = to {
            r.insert("lt".into(), json!(t));
        }
        json!({"range": {field.clone(): Value::Object(r)}})
    };
    match plan.kind.as_str() {
        "terms" => {
            let key = match (bucket.get("key_as_string"), bucket.get("key")) {
                (Some(s), _) if !plan.date_field => s.clone(),
                (_, Some(k)) => k.clone(),
                _ => Value::Null,
            };
            json!({"term": {field: key}})
        }
        "multi_terms" => {
            let keys = bucket.get("key").and_then(Value::as_array);
            let terms: Vec<Value> = plan
                .multi_fields
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let key = keys.and_then(|k| k.get(i)).cloned().unwrap_or(Value::Null);
                    json!({"term": {f.clone(): key}})
                })
                .collect();
            json!({"bool": {"filter": terms}})
        }
        "range" => range(num("from"), num("to")),
        "date_histogram" | "histogram" => {
            let key = num("key");
            let to = match (plan.calendar, key) {
                (Some(c), Some(k)) => DateTime::<Utc>::from_timestamp_millis(k as i64)
                    .map(|t| c.next(t).timestamp_millis() as f64),
                (None, Some(k)) => plan.interval.map(|i| k + i),
                _ => None,
            };
            range(key, to)
        }
        _ => json!({"match_all": {}}),
    }
}

/// The search body of a `top_hits` request: its `size` (default 3), `from`, `sort`, `_source`;
/// `from + size` at most `max_inner_result_window` (in OpenSearch's words).
pub(super) fn top_hits_body(
    req: &Value,
    name: &str,
    path: &str,
    limits: &SearchLimits,
) -> Result<Value, SearchError> {
    let Value::Object(o) = req else {
        return Err(SearchError::dsl(path, "top_hits must be an object"));
    };
    let number = |k: &str, default: u64| o.get(k).and_then(Value::as_u64).unwrap_or(default);
    inner_window(
        number("from", 0),
        number("size", 3),
        limits,
        path,
        |max, window| {
            format!(
                "Top hits result window is too large, the top hits aggregator [{name}]'s from + size must be less than or equal to: [{max}] but was [{window}]"
            )
        },
    )?;
    let mut body = Map::new();
    body.insert("size".into(), json!(3));
    body.insert("track_total_hits".into(), json!(true));
    for (k, v) in o {
        match k.as_str() {
            "size"
            | "from"
            | "sort"
            | "_source"
            | "version"
            | "seq_no_primary_term"
            | "fields"
            | "docvalue_fields"
            | "stored_fields" => {
                body.insert(k.clone(), v.clone());
            }
            other => {
                return Err(SearchError::Unsupported {
                    path: format!("{path}.{other}"),
                    clause: format!("top_hits option {other}"),
                });
            }
        }
    }
    Ok(Value::Object(body))
}

impl Rewrite<'_> {
    /// Adds to a `multi_terms` result the combinations of the index (`every`, a search of every
    /// document) it lacks, with no documents, ordered by count and then key, cut to `size`.
    fn add_empty_combinations(
        &self,
        v: &mut Value,
        every: &Value,
        size: usize,
    ) -> Result<(), SearchError> {
        self.count_searches(1, "aggs")?;
        // Every document of the index, whatever its score.
        let all = (self.sub)(
            &serde_json::json!({"size": 0, "min_score": null, "aggs": {"every": every}}),
        )?;
        let Some(Value::Array(buckets)) = v.get_mut("buckets") else {
            return Ok(());
        };
        for b in all
            .pointer("/aggregations/every/buckets")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if !buckets.iter().any(|known| known["key"] == b["key"]) {
                let mut empty = b.clone();
                empty["doc_count"] = Value::from(0);
                buckets.push(empty);
            }
        }
        let count = |b: &Value| b.get("doc_count").and_then(Value::as_u64).unwrap_or(0);
        buckets.sort_by(|a, b| {
            count(b)
                .cmp(&count(a))
                .then_with(|| crate::embedded::multi::compare_values(&a["key"], &b["key"]))
        });
        buckets.truncate(size);
        Ok(())
    }
}

/// The `terms` result on `_index` of one index: its documents (`filter`'s result, with the
/// sub-aggregations) as the bucket keyed by its name, when `include` / `exclude` let the name
/// through and it has at least `min_doc_count` documents; else none.
fn index_bucket(terms: &super::IndexTerms, mut counted: Value) -> Value {
    let count = counted
        .get("doc_count")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let buckets = if !terms.kept || count < terms.min_doc_count {
        Vec::new()
    } else {
        if let Some(o) = counted.as_object_mut() {
            o.insert("key".into(), Value::from(terms.index.as_str()));
        }
        vec![counted]
    };
    serde_json::json!({"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": buckets})
}
