//! The aggregations of a search over several indices, made from each index's own.
//!
//! An index with no matching document adds nothing to any aggregation, so when at most one index
//! matched, its aggregations are the answer exactly, whatever their kind — but for the empty
//! buckets a `terms` with `min_doc_count: 0` shows, which the other indices add. When several did, the
//! partial results are combined as OpenSearch reduces shard results: `terms` buckets added by key
//! and cut to `size` again (ordered by count or key; each index gave its own top `size`, so counts
//! of terms outside one index's top can be low, as OpenSearch's shard-level `terms` are),
//! `histogram` / `date_histogram` / `range` buckets added by key, sub-aggregations combined in
//! each bucket; `filter`, `filters` and `missing` buckets added; `min`, `max`, `sum`,
//! `value_count` and `stats`. Any other kind (`avg`,
//! `cardinality`, `percentiles`, `top_hits` …) over several indices with matching documents is
//! refused by name rather than answered from one index.

use std::cmp::Ordering;

use serde_json::{Map, Value, json};

use crate::error::SearchError;

/// The aggregations of `request` (its `aggs` or `aggregations`) combined from the per-index
/// responses, or `None` when the request has none.
pub fn aggregations(request: &Value, responses: &[Value]) -> Result<Option<Value>, SearchError> {
    let Some(Value::Object(defs)) = request.get("aggs").or_else(|| request.get("aggregations"))
    else {
        return Ok(None);
    };
    // No index searched (a pattern that matched none): OpenSearch, with no shard to answer,
    // leaves `aggregations` out.
    if responses.is_empty() {
        return Ok(None);
    }
    let matched: Vec<&Value> = responses.iter().filter(|r| has_matches(r)).collect();
    let unmatched: Vec<&Value> = responses.iter().filter(|r| !has_matches(r)).collect();
    if responses.len() > 1 && !unmatched.is_empty() {
        refuse_empty_buckets_below_the_top(defs, "aggs", true)?;
    }
    let parts: Vec<&Map<String, Value>> = match matched.as_slice() {
        [] => responses.first().into_iter().collect(),
        more => more.to_vec(),
    }
    .into_iter()
    .filter_map(|r| r.get("aggregations").and_then(Value::as_object))
    .collect();
    let mut out = match parts.as_slice() {
        [one] => (*one).clone(),
        _ => combine(defs, &parts, "aggs")?,
    };
    add_empty_terms_buckets(defs, &mut out, &unmatched);
    Ok(Some(Value::Object(out)))
}

/// Adds to each top-level `terms` result asking for `min_doc_count: 0` the empty buckets of the
/// indices without matches (keys it lacks), ordered and cut to `size` as the request says.
fn add_empty_terms_buckets(
    defs: &Map<String, Value>,
    out: &mut Map<String, Value>,
    unmatched: &[&Value],
) {
    for (name, def) in defs {
        let Some(body) = def.get("terms") else {
            continue;
        };
        if body.get("min_doc_count").and_then(Value::as_u64) != Some(0) {
            continue;
        }
        let Some(Value::Array(buckets)) = out.get_mut(name).and_then(|v| v.get_mut("buckets"))
        else {
            continue;
        };
        let before = buckets.len();
        for response in unmatched {
            let empty = response
                .pointer(&format!(
                    "/aggregations/{}/buckets",
                    name.replace('~', "~0").replace('/', "~1")
                ))
                .and_then(Value::as_array);
            for bucket in empty.into_iter().flatten() {
                let known = buckets.iter().any(|b| b["key"] == bucket["key"]);
                if !known && bucket["doc_count"].as_u64() == Some(0) {
                    buckets.push(bucket.clone());
                }
            }
        }
        // Empty buckets go after those with documents, ordered as the request says.
        if buckets.len() > before {
            order_terms(buckets, body);
            let size = body.get("size").and_then(Value::as_u64).unwrap_or(10);
            buckets.truncate(usize::try_from(size).unwrap_or(usize::MAX));
        }
    }
}

/// Refuses what [`add_empty_terms_buckets`] cannot do: the empty buckets (`min_doc_count: 0`) of
/// indices without matches are added to top-level `terms` only, so a `multi_terms` asking for them,
/// or a `terms` inside another aggregation, would miss them without a word.
fn refuse_empty_buckets_below_the_top(
    defs: &Map<String, Value>,
    path: &str,
    top: bool,
) -> Result<(), SearchError> {
    for (name, def) in defs {
        let Some(def) = def.as_object() else {
            continue;
        };
        for (kind, body) in def {
            if matches!(kind.as_str(), "aggs" | "aggregations") {
                if let Some(children) = body.as_object() {
                    refuse_empty_buckets_below_the_top(children, &format!("{path}.{name}"), false)?;
                }
                continue;
            }
            let empty_buckets = body.get("min_doc_count").and_then(Value::as_u64) == Some(0);
            if empty_buckets && (kind == "multi_terms" || (kind == "terms" && !top)) {
                return Err(SearchError::Unsupported {
                    path: format!("{path}.{name}.{kind}"),
                    clause: format!(
                        "{kind} with min_doc_count 0 {}over several indices, some without matches",
                        if top {
                            ""
                        } else {
                            "inside another aggregation "
                        }
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Whether an index's response matched any document.
fn has_matches(response: &Value) -> bool {
    let hits = &response["hits"];
    hits["total"]["value"].as_u64().is_some_and(|n| n > 0)
        || hits["total"].as_u64().is_some_and(|n| n > 0)
        || hits["hits"].as_array().is_some_and(|h| !h.is_empty())
}

/// Combines the results of the aggregations `defs` from several parts.
fn combine(
    defs: &Map<String, Value>,
    parts: &[&Map<String, Value>],
    path: &str,
) -> Result<Map<String, Value>, SearchError> {
    let mut out = Map::new();
    for (name, def) in defs {
        let Some((kind, body)) = def.as_object().and_then(|d| {
            d.iter()
                .find(|(k, _)| !matches!(k.as_str(), "aggs" | "aggregations" | "meta"))
        }) else {
            continue;
        };
        let here = format!("{path}.{name}.{kind}");
        let children = def
            .get("aggs")
            .or_else(|| def.get("aggregations"))
            .and_then(Value::as_object);
        let values: Vec<&Value> = parts.iter().filter_map(|p| p.get(name)).collect();
        let combined = match kind.as_str() {
            "terms" | "multi_terms" => buckets(&values, children, &here, |merged| {
                order_terms(merged, body);
                let size = body.get("size").and_then(Value::as_u64).unwrap_or(10);
                let size = usize::try_from(size).unwrap_or(usize::MAX);
                let cut: u64 = merged
                    .iter()
                    .skip(size)
                    .map(|b| b["doc_count"].as_u64().unwrap_or(0))
                    .sum();
                merged.truncate(size);
                cut
            })
            .map(|(list, cut)| {
                let other: u64 = values
                    .iter()
                    .map(|v| v["sum_other_doc_count"].as_u64().unwrap_or(0))
                    .sum();
                json!({"doc_count_error_upper_bound": 0, "sum_other_doc_count": other + cut,
                       "buckets": list})
            })?,
            "histogram" | "date_histogram" => buckets(&values, children, &here, |merged| {
                merged.sort_by(|a, b| {
                    key_number(a)
                        .partial_cmp(&key_number(b))
                        .unwrap_or(Ordering::Equal)
                });
                0
            })
            .map(|(list, _)| json!({ "buckets": list }))?,
            "range" => buckets(&values, children, &here, |_| 0)
                .map(|(list, _)| json!({ "buckets": list }))?,
            "filter" | "missing" => one_bucket(&values, children, &here)?,
            "filters" => match values.first().map(|v| &v["buckets"]) {
                Some(Value::Object(first)) => {
                    let mut by_name = Map::new();
                    for key in first.keys() {
                        let same: Vec<&Value> =
                            values.iter().map(|v| &v["buckets"][key.as_str()]).collect();
                        by_name.insert(key.clone(), one_bucket(&same, children, &here)?);
                    }
                    json!({ "buckets": by_name })
                }
                _ => {
                    // Listed: the same filters in the same order in every part.
                    let n = values
                        .first()
                        .and_then(|v| v["buckets"].as_array())
                        .map_or(0, Vec::len);
                    let mut list = Vec::with_capacity(n);
                    for i in 0..n {
                        let same: Vec<&Value> = values.iter().map(|v| &v["buckets"][i]).collect();
                        let mut bucket = one_bucket(&same, children, &here)?;
                        if let Some(key) = same[0].get("key") {
                            bucket["key"] = key.clone();
                        }
                        list.push(bucket);
                    }
                    json!({ "buckets": list })
                }
            },
            "min" | "max" | "sum" | "value_count" => {
                let numbers = values.iter().filter_map(|v| v["value"].as_f64());
                let value = match kind.as_str() {
                    "min" => numbers.reduce(f64::min).map(Value::from),
                    "max" => numbers.reduce(f64::max).map(Value::from),
                    "sum" => Some(Value::from(numbers.sum::<f64>())),
                    _ => Some(Value::from(numbers.sum::<f64>().round() as u64)),
                };
                json!({ "value": value })
            }
            "stats" => {
                let count: u64 = values.iter().filter_map(|v| v["count"].as_u64()).sum();
                let sum: f64 = values.iter().filter_map(|v| v["sum"].as_f64()).sum();
                let min = values
                    .iter()
                    .filter_map(|v| v["min"].as_f64())
                    .reduce(f64::min);
                let max = values
                    .iter()
                    .filter_map(|v| v["max"].as_f64())
                    .reduce(f64::max);
                let avg = (count > 0).then(|| sum / count as f64);
                json!({"count": count, "min": min, "max": max, "avg": avg, "sum": sum})
            }
            _ => {
                return Err(SearchError::Unsupported {
                    path: here,
                    clause: format!(
                        "{kind} aggregation over several indices that each match documents"
                    ),
                });
            }
        };
        out.insert(name.clone(), combined);
    }
    Ok(out)
}

/// The buckets of several parts added by key, in the order `finish` gives them (it returns the
/// documents of the buckets it cut), with their sub-aggregations combined.
fn buckets(
    values: &[&Value],
    children: Option<&Map<String, Value>>,
    path: &str,
    finish: impl FnOnce(&mut Vec<Value>) -> u64,
) -> Result<(Vec<Value>, u64), SearchError> {
    // Buckets by key text, in the order first seen, with each part's bucket.
    let mut merged: Vec<(String, Vec<&Value>)> = Vec::new();
    for v in values {
        for b in v["buckets"].as_array().into_iter().flatten() {
            let key = b["key"].to_string();
            match merged.iter_mut().find(|(k, _)| *k == key) {
                Some((_, list)) => list.push(b),
                None => merged.push((key, vec![b])),
            }
        }
    }
    let mut out = Vec::with_capacity(merged.len());
    for (_, same) in merged {
        let mut bucket = same[0].clone();
        let count: u64 = same
            .iter()
            .map(|b| b["doc_count"].as_u64().unwrap_or(0))
            .sum();
        bucket["doc_count"] = json!(count);
        if let Some(children) = children {
            let subs: Vec<&Map<String, Value>> =
                same.iter().filter_map(|b| b.as_object()).collect();
            for (name, value) in combine(children, &subs, &format!("{path}.aggs"))? {
                bucket[name.as_str()] = value;
            }
        }
        out.push(bucket);
    }
    let cut = finish(&mut out);
    Ok((out, cut))
}

/// One bucket (`filter`, `missing`, each of `filters`) from several parts: counts added,
/// sub-aggregations combined.
fn one_bucket(
    values: &[&Value],
    children: Option<&Map<String, Value>>,
    path: &str,
) -> Result<Value, SearchError> {
    let count: u64 = values
        .iter()
        .map(|b| b["doc_count"].as_u64().unwrap_or(0))
        .sum();
    let mut bucket = Map::new();
    bucket.insert("doc_count".into(), json!(count));
    if let Some(children) = children {
        let subs: Vec<&Map<String, Value>> = values.iter().filter_map(|b| b.as_object()).collect();
        bucket.extend(combine(children, &subs, &format!("{path}.aggs"))?);
    }
    Ok(Value::Object(bucket))
}

fn key_number(b: &Value) -> f64 {
    b["key"].as_f64().unwrap_or(f64::NAN)
}

/// Orders terms buckets by the request's `order` (`_count` or `_key`, either direction; by count
/// descending by default, ties by key ascending).
fn order_terms(buckets: &mut [Value], body: &Value) {
    let (by_key, desc) = match body
        .get("order")
        .and_then(Value::as_object)
        .and_then(|o| o.iter().next())
    {
        Some((k, d)) if k == "_key" || k == "_term" => (true, d == "desc"),
        Some((_, d)) => (false, d != "asc"),
        None => (false, true),
    };
    let key_order = |a: &Value, b: &Value| match (a["key"].as_f64(), b["key"].as_f64()) {
        (Some(x), Some(y)) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        _ => a["key"].to_string().cmp(&b["key"].to_string()),
    };
    buckets.sort_by(|a, b| {
        let primary = if by_key {
            key_order(a, b)
        } else {
            a["doc_count"].as_u64().cmp(&b["doc_count"].as_u64())
        };
        let primary = if desc { primary.reverse() } else { primary };
        primary.then_with(|| key_order(a, b))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(total: u64, aggs: Value) -> Value {
        json!({"hits": {"total": {"value": total, "relation": "eq"}, "hits": []}, "aggregations": aggs})
    }

    #[test]
    fn one_index_with_matches_answers_exactly() {
        let request = json!({"aggs": {"p": {"percentiles": {"field": "x"}}}});
        let a = response(3, json!({"p": {"values": {"50.0": 2.0}}}));
        let b = response(0, json!({"p": {"values": {"50.0": null}}}));
        assert_eq!(
            aggregations(&request, &[b.clone(), a]).unwrap(),
            Some(json!({"p": {"values": {"50.0": 2.0}}}))
        );
        let err = aggregations(
            &request,
            &[
                b.clone(),
                response(1, json!({"p": {}})),
                response(1, json!({"p": {}})),
            ],
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("percentiles aggregation over several indices"),
            "{err}"
        );
    }

    #[test]
    fn buckets_and_metrics_add_up() {
        let request = json!({"aggs": {
            "t": {"terms": {"field": "k", "size": 2}, "aggs": {"m": {"max": {"field": "v"}}}},
            "h": {"histogram": {"field": "v", "interval": 1}},
            "s": {"stats": {"field": "v"}},
            "c": {"value_count": {"field": "v"}}
        }});
        let a = response(
            3,
            json!({
                "t": {"sum_other_doc_count": 0, "buckets": [{"key": "x", "doc_count": 2, "m": {"value": 1.0}}, {"key": "y", "doc_count": 1, "m": {"value": 5.0}}]},
                "h": {"buckets": [{"key": 1.0, "doc_count": 2}, {"key": 3.0, "doc_count": 1}]},
                "s": {"count": 3, "min": 1.0, "max": 5.0, "sum": 7.0, "avg": 2.33},
                "c": {"value": 3}
            }),
        );
        let b = response(
            3,
            json!({
                "t": {"sum_other_doc_count": 0, "buckets": [{"key": "y", "doc_count": 2, "m": {"value": 9.0}}, {"key": "z", "doc_count": 1, "m": {"value": 0.0}}]},
                "h": {"buckets": [{"key": 2.0, "doc_count": 1}, {"key": 3.0, "doc_count": 2}]},
                "s": {"count": 3, "min": 0.0, "max": 9.0, "sum": 11.0, "avg": 3.67},
                "c": {"value": 3}
            }),
        );
        let got = aggregations(&request, &[a, b]).unwrap().unwrap();
        assert_eq!(
            got["t"],
            json!({"doc_count_error_upper_bound": 0, "sum_other_doc_count": 1, "buckets": [
                {"key": "y", "doc_count": 3, "m": {"value": 9.0}},
                {"key": "x", "doc_count": 2, "m": {"value": 1.0}}]})
        );
        let keys: Vec<(f64, u64)> = got["h"]["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| (b["key"].as_f64().unwrap(), b["doc_count"].as_u64().unwrap()))
            .collect();
        assert_eq!(keys, [(1.0, 2), (2.0, 1), (3.0, 3)]);
        assert_eq!(
            got["s"],
            json!({"count": 6, "min": 0.0, "max": 9.0, "avg": 3.0, "sum": 18.0})
        );
        assert_eq!(got["c"]["value"], 6);
    }
}
