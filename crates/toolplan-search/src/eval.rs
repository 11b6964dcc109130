//! Execution accuracy of generated DSL: a question's expected answer, and whether a search response
//! holds it. The query-DSL benchmark (`bench/dsl_eval.sh`) scores every generated body with
//! [`judge`]; its test checks the expected answers against gold bodies the same way.
//!
//! An answer is judged on what the search *returns*, not on the DSL's text, so every correct way of
//! asking counts: a count may come back as `hits.total` or as a `value_count`; the cheapest price as a
//! `min` aggregation or as the first hit of an ascending sort.

use serde::Deserialize;
use serde_json::Value;

use crate::planner::default_fallback;

/// What the right answer returns.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", content = "expected", rename_all = "snake_case")]
pub enum Expected {
    /// `hits.total.value`, or a metric aggregation's `value`, equals this.
    Count(u64),
    /// The returned hits are exactly these documents (see [`Question::ordered`]).
    Ids(Vec<String>),
    /// A metric aggregation's value (or the first hit's [`Question::field`]) equals this, ±0.01.
    Value(f64),
    /// Some aggregation has exactly these bucket keys, with these document counts.
    Buckets(std::collections::BTreeMap<String, u64>),
}

/// One question of an evaluation set.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Question {
    /// Its id (`q1` …).
    pub id: String,
    /// The index it is about.
    pub index: String,
    /// The question, in natural language.
    pub question: String,
    /// The right answer.
    #[serde(flatten)]
    pub expected: Expected,
    /// A request body that returns the right answer.
    pub gold: Value,
    /// For [`Expected::Ids`]: the hits must come in this order.
    #[serde(default)]
    pub ordered: bool,
    /// For [`Expected::Value`]: a `_source` field whose value in the first hit may carry the answer.
    #[serde(default)]
    pub field: Option<String>,
}

/// Whether `response` (an OpenSearch-shaped search response) holds the answer `q` expects.
pub fn judge(q: &Question, response: &Value) -> bool {
    let total = response
        .pointer("/hits/total/value")
        .and_then(Value::as_u64);
    let hits: Vec<&Value> = response
        .pointer("/hits/hits")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let aggs = response.get("aggregations");
    match &q.expected {
        Expected::Count(n) => {
            total == Some(*n)
                || metric_values(aggs)
                    .iter()
                    .any(|v| (v - *n as f64).abs() < 1e-9)
        }
        Expected::Ids(ids) => {
            let got: Vec<&str> = hits
                .iter()
                .filter_map(|h| h.get("_id").and_then(Value::as_str))
                .collect();
            if q.ordered {
                got == ids.iter().map(String::as_str).collect::<Vec<_>>()
            } else {
                let mut a = got.clone();
                let mut b: Vec<&str> = ids.iter().map(String::as_str).collect();
                a.sort_unstable();
                b.sort_unstable();
                a == b
            }
        }
        Expected::Value(x) => {
            let close = |v: f64| (v - x).abs() <= 0.01;
            metric_values(aggs).into_iter().any(close)
                || q.field.as_deref().is_some_and(|f| {
                    hits.first()
                        .and_then(|h| h.pointer(&format!("/_source/{f}")))
                        .and_then(Value::as_f64)
                        .is_some_and(close)
                })
        }
        Expected::Buckets(want) => any_buckets(aggs, &|buckets: &[Value]| {
            let got: std::collections::BTreeMap<String, u64> = buckets
                .iter()
                .filter_map(|b| {
                    let key = toolplan_core::value_as_text(b.get("key")?).into_owned();
                    Some((key, b.get("doc_count")?.as_u64()?))
                })
                .filter(|(_, n)| *n > 0)
                .collect();
            &got == want
        }),
    }
}

/// Every metric value in an aggregations tree: `value`, and the fields of `stats`-like results.
fn metric_values(aggs: Option<&Value>) -> Vec<f64> {
    fn walk(v: &Value, out: &mut Vec<f64>) {
        match v {
            Value::Object(o) => {
                for (k, child) in o {
                    match (k.as_str(), child.as_f64()) {
                        ("value" | "avg" | "min" | "max" | "sum" | "count", Some(x)) => out.push(x),
                        _ => walk(child, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|c| walk(c, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Some(a) = aggs {
        walk(a, &mut out);
    }
    out
}

/// Whether some `buckets` array in an aggregations tree satisfies `test`.
fn any_buckets(aggs: Option<&Value>, test: &dyn Fn(&[Value]) -> bool) -> bool {
    fn walk(v: &Value, test: &dyn Fn(&[Value]) -> bool) -> bool {
        match v {
            Value::Object(o) => o.iter().any(|(k, child)| {
                (k == "buckets" && child.as_array().is_some_and(|b| test(b))) || walk(child, test)
            }),
            Value::Array(a) => a.iter().any(|c| walk(c, test)),
            _ => false,
        }
    }
    aggs.is_some_and(|a| walk(a, test))
}

/// OpenSearch's own extraction, for comparison: from the first `{`, one JSON value (trailing text
/// ignored), `size`/`from`/`k` written as whole floats made integers; no `{`, a value that does not
/// parse or is not an object → the fallback query. No validation, no repair.
pub fn plain_extract(reply: &str) -> Value {
    let Some(start) = reply.find('{') else {
        return default_fallback();
    };
    let mut stream = serde_json::Deserializer::from_str(&reply[start..]).into_iter::<Value>();
    match stream.next() {
        Some(Ok(v @ Value::Object(_))) => crate::planner::normalize_integers(v),
        _ => default_fallback(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn question(expected: Value) -> Question {
        let mut q = json!({"id": "q", "index": "i", "question": "?", "gold": {}});
        if let (Some(o), Value::Object(e)) = (q.as_object_mut(), expected) {
            o.extend(e);
        }
        serde_json::from_value(q).expect("question")
    }

    #[test]
    fn counts_come_from_totals_or_metrics() {
        let q = question(json!({"kind": "count", "expected": 50}));
        assert!(judge(
            &q,
            &json!({"hits": {"total": {"value": 50}, "hits": []}})
        ));
        assert!(judge(
            &q,
            &json!({"hits": {"total": {"value": 150}}, "aggregations": {"n": {"value": 50.0}}})
        ));
        assert!(!judge(&q, &json!({"hits": {"total": {"value": 150}}})));
        assert!(!judge(
            &q,
            &json!({"hits": {"total": {"value": 150}}, "aggregations": {"s": {"buckets": [{"key": "a", "doc_count": 50}]}}})
        ));
    }

    #[test]
    fn ids_in_or_out_of_order() {
        let hits = json!({"hits": {"hits": [{"_id": "b"}, {"_id": "a"}]}});
        assert!(judge(
            &question(json!({"kind": "ids", "expected": ["a", "b"]})),
            &hits
        ));
        assert!(!judge(
            &question(json!({"kind": "ids", "expected": ["a", "b"], "ordered": true})),
            &hits
        ));
        assert!(!judge(
            &question(json!({"kind": "ids", "expected": ["a"]})),
            &hits
        ));
    }

    #[test]
    fn values_from_metrics_stats_or_the_first_hit() {
        let q = question(json!({"kind": "value", "expected": 2.5, "field": "w"}));
        assert!(judge(&q, &json!({"aggregations": {"m": {"value": 2.5}}})));
        assert!(judge(
            &q,
            &json!({"aggregations": {"m": {"min": 0.1, "max": 2.5}}})
        ));
        assert!(judge(
            &q,
            &json!({"hits": {"hits": [{"_id": "1", "_source": {"w": 2.5}}]}})
        ));
        assert!(!judge(
            &q,
            &json!({"hits": {"hits": [{"_id": "1", "_source": {"w": 2.4}}]}})
        ));
    }

    #[test]
    fn buckets_must_match_exactly() {
        let q = question(json!({"kind": "buckets", "expected": {"a": 2, "b": 1}}));
        let r = |b: Value| json!({"aggregations": {"x": {"buckets": b}}});
        assert!(judge(
            &q,
            &r(json!([{"key": "a", "doc_count": 2}, {"key": "b", "doc_count": 1}]))
        ));
        assert!(!judge(&q, &r(json!([{"key": "a", "doc_count": 2}]))));
        assert!(judge(
            &q,
            &json!({"aggregations": {"outer": {"buckets": [{"key": "z", "doc_count": 3,
                "inner": {"buckets": [{"key": "a", "doc_count": 2}, {"key": "b", "doc_count": 1}]}}]}}})
        ));
    }

    #[test]
    fn plain_extraction_falls_back_on_a_stray_brace() {
        assert_eq!(plain_extract("{\"size\": 3.0}"), json!({"size": 3}));
        assert_eq!(
            plain_extract("Here {it is}: {\"size\": 3}"),
            default_fallback()
        );
        assert_eq!(plain_extract("none"), default_fallback());
        assert_eq!(plain_extract("{\"a\": 1} and more"), json!({"a": 1}));
    }
}
