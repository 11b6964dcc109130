//! Searching several indices at once, as OpenSearch names them: a comma list (`a,b`), wildcards
//! (`logs-*`, `*`, `_all`) and exclusions (`-logs-old`). [`crate::backend::resolve_indices`] turns the expression into
//! index names; each index answers the search for the first `from + size` hits, and [`merge`]
//! makes one response of them: totals added, the hits ordered by the body's `sort` (or by score)
//! across indices (collapsed again by group when the body collapses), then the page cut;
//! aggregations are combined from each index's ([`super::combine`]).

use std::cmp::Ordering;

use serde_json::{Map, Value, json};

use tantivy::Order;

use super::search::sort_specs;
use crate::error::SearchError;

/// The body each index answers: the same query and aggregations, for the first `from + size`
/// hits.
pub fn per_index_body(body: &Value) -> (Value, usize, usize) {
    let mut per = body.as_object().cloned().unwrap_or_default();
    let number = |key: &str, default: usize| {
        per.get(key)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(default)
    };
    let (from, size) = (number("from", 0), number("size", 10));
    per.insert("from".into(), json!(0));
    per.insert("size".into(), json!(from.saturating_add(size)));
    (Value::Object(per), from, size)
}

/// `indices_boost`: a factor for the scores of each index's hits, so that across indices the hits
/// of some come first. Each entry names an index, an alias or a pattern (of index and alias
/// names); an index takes the factor of the first entry that names it, and 1 otherwise.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct IndicesBoost {
    entries: Vec<(Vec<String>, f64)>,
}

impl IndicesBoost {
    /// Reads `indices_boost` (a list of `{name: factor}`, or one object of them, OpenSearch's
    /// older form) against the indices and aliases there are. A name that is neither an index nor
    /// an alias is refused, as OpenSearch refuses it.
    pub(super) fn parse(
        spec: &Value,
        existing: &[String],
        aliases: &crate::aliases::Aliases,
    ) -> Result<IndicesBoost, SearchError> {
        let pairs: Vec<(&String, &Value)> = match spec {
            Value::Array(list) => list
                .iter()
                .map(|entry| {
                    entry
                        .as_object()
                        .filter(|o| o.len() == 1)
                        .and_then(|o| o.iter().next())
                        .ok_or_else(|| {
                            SearchError::dsl(
                                "indices_boost",
                                format!("each entry of indices_boost is one {{\"index\": factor}}, found {entry}"),
                            )
                        })
                })
                .collect::<Result<_, _>>()?,
            Value::Object(o) => o.iter().collect(),
            other => {
                return Err(SearchError::dsl(
                    "indices_boost",
                    format!("indices_boost must be a list of {{\"index\": factor}}, found {other}"),
                ));
            }
        };
        let mut entries = Vec::with_capacity(pairs.len());
        for (name, factor) in pairs {
            let Some(factor) = factor.as_f64() else {
                return Err(SearchError::dsl(
                    format!("indices_boost.{name}"),
                    format!("the factor of [{name}] must be a number, found {factor}"),
                ));
            };
            let indices: Vec<String> = if name.contains('*') {
                let mut found: Vec<String> = existing
                    .iter()
                    .filter(|n| crate::backend::glob(name, n))
                    .cloned()
                    .collect();
                for alias in aliases.names_matching(name) {
                    found.extend(
                        aliases
                            .indices_of(alias)
                            .into_iter()
                            .flatten()
                            .map(|(i, _)| i.clone()),
                    );
                }
                found
            } else if existing.contains(name) {
                vec![name.clone()]
            } else if let Some(of) = aliases.indices_of(name) {
                of.keys().cloned().collect()
            } else {
                return Err(SearchError::NoSuchIndex(name.clone()));
            };
            entries.push((indices, factor));
        }
        Ok(IndicesBoost { entries })
    }

    /// The factor of `index`'s scores.
    pub(super) fn of(&self, index: &str) -> f64 {
        self.entries
            .iter()
            .find(|(indices, _)| indices.iter().any(|i| i == index))
            .map_or(1.0, |(_, factor)| *factor)
    }

    /// The request `body` for an index whose scores are multiplied by `factor`: its query
    /// boosted, as OpenSearch boosts it, so that `min_score`, sorting and `top_hits` see the
    /// boosted scores.
    pub(super) fn boosted(body: &Value, factor: f64) -> Value {
        let mut body = body.clone();
        if factor == 1.0 {
            return body;
        }
        if let Some(o) = body.as_object_mut() {
            let query = o
                .remove("query")
                .filter(|q| !q.is_null())
                .unwrap_or_else(|| json!({"match_all": {}}));
            o.insert(
                "query".into(),
                json!({"bool": {"must": [query], "boost": factor}}),
            );
        }
        body
    }
}

/// The directions of the body's sort fields (`true` for descending), in the order of the hits'
/// `sort` values; `None` when the hits are ordered by score (no sort, or `_score` alone, as each
/// index ordered them). Each index has already refused a sort it cannot run.
fn sort_directions(body: &Value) -> Option<Vec<bool>> {
    let fields: Vec<bool> = sort_specs(body.get("sort"))
        .ok()?
        .into_iter()
        .filter(|(field, _)| field != "_score")
        .map(|(_, order)| order == Some(Order::Desc))
        .collect();
    (!fields.is_empty()).then_some(fields)
}

/// Orders two sort values or bucket keys as OpenSearch does: numbers by value, text by its
/// bytes, `false` before `true`, lists element by element; other pairs as equal.
pub(super) fn compare_values(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x
            .as_f64()
            .partial_cmp(&y.as_f64())
            .unwrap_or(Ordering::Equal),
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => x
            .iter()
            .zip(y)
            .map(|(p, q)| compare_values(p, q))
            .find(|o| *o != Ordering::Equal)
            .unwrap_or_else(|| x.len().cmp(&y.len())),
        _ => Ordering::Equal,
    }
}

/// One response made of the per-index responses (in index order) to a body with `from` and `size`;
/// its aggregations combined ([`super::combine`]).
pub fn merge(
    body: &Value,
    responses: Vec<Value>,
    from: usize,
    size: usize,
) -> Result<Value, SearchError> {
    let aggregations = super::combine::aggregations(body, &responses)?;
    let mut total: u64 = 0;
    let mut exact = true;
    // No index at all (a pattern that matched none) still counts: none.
    let mut counted = responses.is_empty();
    let mut timed_out = false;
    let mut max_score: Option<f64> = None;
    let mut hits: Vec<Value> = Vec::new();
    let shards = responses.len();
    for mut r in responses {
        timed_out |= r["timed_out"].as_bool().unwrap_or(false);
        if let Some(t) = r["hits"].get("total") {
            counted = true;
            total += t["value"].as_u64().unwrap_or(0);
            exact &= t["relation"].as_str() != Some("gte");
        }
        if let Some(s) = r["hits"]["max_score"].as_f64() {
            max_score = Some(max_score.map_or(s, |m| m.max(s)));
        }
        if let Some(Value::Array(h)) = r["hits"].get_mut("hits").map(Value::take) {
            hits.extend(h);
        }
    }
    match sort_directions(body) {
        Some(descending) => hits.sort_by(|a, b| {
            let (x, y) = (a["sort"].as_array(), b["sort"].as_array());
            for (i, desc) in descending.iter().enumerate() {
                let (p, q) = (
                    x.and_then(|v| v.get(i)).unwrap_or(&Value::Null),
                    y.and_then(|v| v.get(i)).unwrap_or(&Value::Null),
                );
                // A missing value goes last whichever the direction.
                let order = match (p.is_null(), q.is_null()) {
                    (true, false) => Ordering::Greater,
                    (false, true) => Ordering::Less,
                    _ if *desc => compare_values(q, p),
                    _ => compare_values(p, q),
                };
                if order != Ordering::Equal {
                    return order;
                }
            }
            Ordering::Equal
        }),
        None => hits.sort_by(|a, b| {
            let score = |h: &Value| h["_score"].as_f64().unwrap_or(f64::NEG_INFINITY);
            score(b).partial_cmp(&score(a)).unwrap_or(Ordering::Equal)
        }),
    }
    // Collapsed: each index gave the best hit of each of its groups; the first of each group
    // across indices is the group's best.
    if let Some(field) = body["collapse"]["field"].as_str() {
        let mut seen = std::collections::HashSet::new();
        hits.retain(|h| seen.insert(h["fields"][field][0].to_string()));
    }
    let page: Vec<Value> = hits.into_iter().skip(from).take(size).collect();
    let mut hits_obj = Map::new();
    // A number of `track_total_hits` bounds the sum as it bounds each index's count.
    if let Some(cap) = body.get("track_total_hits").and_then(Value::as_u64)
        && total > cap
    {
        total = cap;
        exact = false;
    }
    if counted {
        hits_obj.insert(
            "total".into(),
            json!({"value": total, "relation": if exact { "eq" } else { "gte" }}),
        );
    }
    hits_obj.insert("max_score".into(), json!(max_score));
    hits_obj.insert("hits".into(), Value::Array(page));
    let mut merged = json!({
        "took": 0,
        "timed_out": timed_out,
        "_shards": {"total": shards, "successful": shards, "skipped": 0, "failed": 0},
        "hits": Value::Object(hits_obj),
    });
    if let Some(aggregations) = aggregations {
        merged["aggregations"] = aggregations;
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_merge_by_score_or_by_sort_and_the_page_is_cut_after() {
        let r = |hits: Value, total: u64| json!({"timed_out": false, "hits": {"total": {"value": total, "relation": "eq"}, "max_score": 2.0, "hits": hits}});
        let a = r(
            json!([{"_id": "a1", "_score": 2.0, "sort": [3]}, {"_id": "a2", "_score": 0.5, "sort": [null]}]),
            2,
        );
        let b = r(json!([{"_id": "b1", "_score": 1.0, "sort": [1]}]), 1);
        let by_score = merge(&json!({}), vec![a.clone(), b.clone()], 0, 10).unwrap();
        assert_eq!(
            by_score["hits"]["total"],
            json!({"value": 3, "relation": "eq"})
        );
        let ids = |v: &Value| {
            v["hits"]["hits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h["_id"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&by_score), ["a1", "b1", "a2"]);
        // `_score` alone orders by score, as one index does.
        let by_score_named = merge(
            &json!({"sort": [{"_score": "desc"}]}),
            vec![a.clone(), b.clone()],
            0,
            10,
        )
        .unwrap();
        assert_eq!(ids(&by_score_named), ["a1", "b1", "a2"]);
        let by_sort = merge(
            &json!({"sort": [{"n": "asc"}]}),
            vec![a.clone(), b.clone()],
            0,
            10,
        )
        .unwrap();
        assert_eq!(ids(&by_sort), ["b1", "a1", "a2"]);
        let desc = merge(
            &json!({"sort": [{"n": {"order": "desc"}}]}),
            vec![a.clone(), b.clone()],
            1,
            1,
        )
        .unwrap();
        assert_eq!(ids(&desc), ["b1"]);
        let (per, from, size) = per_index_body(&json!({"from": 5, "size": 3}));
        assert_eq!(
            (per["from"].clone(), per["size"].clone(), from, size),
            (json!(0), json!(8), 5, 3)
        );
    }
}
