//! `typed_keys`: each aggregation of a response named `type#name`, as OpenSearch names them when a
//! search asks for it, so that a client can read each result by its type. The type is what
//! OpenSearch calls the result: `sterms`, `lterms` or `dterms` for `terms` on text, whole numbers
//! or decimals, `tdigest_percentiles` or `hdr_percentiles`, `bucket_metric_value` for `max_bucket`,
//! `simple_value` for `avg_bucket` …; it follows from the request and the fields' kinds.

use serde_json::{Map, Value};

use crate::mapping::{FieldKind, Mapping};

/// What OpenSearch calls the result of aggregation `kind` with request `body`, the field's kind
/// read by `kind_of` (`None` for a field no index maps).
fn type_name(kind: &str, body: &Value, kind_of: &dyn Fn(&str) -> Option<FieldKind>) -> String {
    let field = body.get("field").and_then(Value::as_str).and_then(kind_of);
    let by_values = |text: &str, whole: &str, decimal: &str, unmapped: &str| -> String {
        match field {
            None => unmapped,
            Some(FieldKind::Integer | FieldKind::Date | FieldKind::Boolean) => whole,
            Some(FieldKind::Float) => decimal,
            Some(_) => text,
        }
        .to_owned()
    };
    match kind {
        "terms" => by_values("sterms", "lterms", "dterms", "umterms"),
        "rare_terms" => by_values("srareterms", "lrareterms", "lrareterms", "umrareterms"),
        "significant_terms" => by_values("sigsterms", "siglterms", "siglterms", "umsigterms"),
        "percentiles" | "percentile_ranks" => {
            let method = if body.get("hdr").is_some() {
                "hdr"
            } else {
                "tdigest"
            };
            format!("{method}_{kind}")
        }
        "avg_bucket" | "sum_bucket" | "cumulative_sum" | "moving_fn" | "bucket_script"
        | "serial_diff" => "simple_value".to_owned(),
        "min_bucket" | "max_bucket" => "bucket_metric_value".to_owned(),
        other => other.to_owned(),
    }
}

/// Renames the aggregations of the search `response` to `type#name` after the aggregations of
/// the request body `request`, at every level; `mapping` gives a field's kind.
pub fn apply(request: &Value, response: &mut Value, mapping: &dyn Fn(&str) -> Option<FieldKind>) {
    let Some(aggs) = request.get("aggs").or_else(|| request.get("aggregations")) else {
        return;
    };
    if let Some(Value::Object(level)) = response.get_mut("aggregations") {
        rename_level(aggs, level, mapping);
    }
}

/// The field kinds a set of mappings gives (the first that maps the field).
pub fn kinds_of(mappings: &[Mapping]) -> impl Fn(&str) -> Option<FieldKind> + '_ {
    move |field: &str| {
        mappings
            .iter()
            .find_map(|m| m.field(field).map(|f| f.kind.clone()))
    }
}

/// Renames one level of results after its requests.
fn rename_level(
    requests: &Value,
    level: &mut Map<String, Value>,
    mapping: &dyn Fn(&str) -> Option<FieldKind>,
) {
    let Some(requests) = requests.as_object() else {
        return;
    };
    for (name, def) in requests {
        let Some(mut result) = level.remove(name) else {
            continue;
        };
        let Some(def) = def.as_object() else {
            level.insert(name.clone(), result);
            continue;
        };
        let Some((kind, body)) = def
            .iter()
            .find(|(k, _)| !matches!(k.as_str(), "aggs" | "aggregations" | "meta"))
        else {
            level.insert(name.clone(), result);
            continue;
        };
        if let Some(children) = def.get("aggs").or_else(|| def.get("aggregations")) {
            rename_children(children, &mut result, mapping);
        }
        level.insert(format!("{}#{name}", type_name(kind, body, mapping)), result);
    }
}

/// Renames the sub-aggregations of a result: in each bucket, or in the result itself (a
/// single-bucket aggregation such as `filter`).
fn rename_children(
    children: &Value,
    result: &mut Value,
    mapping: &dyn Fn(&str) -> Option<FieldKind>,
) {
    match result.get_mut("buckets") {
        Some(Value::Array(buckets)) => {
            for b in buckets {
                if let Value::Object(o) = b {
                    rename_level(children, o, mapping);
                }
            }
        }
        Some(Value::Object(by_key)) => {
            for b in by_key.values_mut() {
                if let Value::Object(o) = b {
                    rename_level(children, o, mapping);
                }
            }
        }
        _ => {
            if let Value::Object(o) = result {
                rename_level(children, o, mapping);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn results_are_named_by_their_type() {
        let kind_of = |f: &str| match f {
            "name" => Some(FieldKind::Keyword),
            "num" => Some(FieldKind::Integer),
            "price" => Some(FieldKind::Float),
            _ => None,
        };
        let request = json!({"aggs": {
            "t": {"terms": {"field": "name"}, "aggs": {"top": {"top_hits": {}}, "p": {"percentiles": {"field": "num", "hdr": {}}}}},
            "n": {"terms": {"field": "num"}},
            "d": {"terms": {"field": "price"}},
            "u": {"terms": {"field": "nope"}},
            "f": {"filter": {"match_all": {}}, "aggs": {"s": {"sum": {"field": "num"}}}},
            "m": {"max_bucket": {"buckets_path": "t>_count"}}}});
        let mut response = json!({"aggregations": {
            "t": {"buckets": [{"key": "a", "top": {}, "p": {}}]},
            "n": {"buckets": []}, "d": {"buckets": []}, "u": {"buckets": []},
            "f": {"doc_count": 1, "s": {"value": 1.0}},
            "m": {"value": 1.0}}});
        apply(&request, &mut response, &kind_of);
        let a = &response["aggregations"];
        assert!(a["sterms#t"]["buckets"][0]["top_hits#top"].is_object());
        assert!(a["sterms#t"]["buckets"][0]["hdr_percentiles#p"].is_object());
        for key in ["lterms#n", "dterms#d", "umterms#u", "bucket_metric_value#m"] {
            assert!(a[key].is_object(), "{key}");
        }
        assert_eq!(a["filter#f"]["sum#s"]["value"], 1.0);
    }
}
