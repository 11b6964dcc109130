//! tantivy's aggregation result put back into OpenSearch's shape: only the requested range buckets,
//! calendar buckets keyed by their start, dates in milliseconds.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::AggregationPlan;
use crate::datemath::iso_millis;
use crate::embedded::multi::compare_values;
use crate::error::SearchError;

/// Puts a result back into OpenSearch's shape; an error when it cannot be given exactly.
pub(super) fn to_opensearch_shape(
    v: &mut Value,
    plan: &AggregationPlan,
) -> Result<(), SearchError> {
    match plan.kind.as_str() {
        "date_histogram" if plan.calendar.is_some() => {
            if let Some(Value::Array(buckets)) = v.get_mut("buckets") {
                // tantivy adds open-ended buckets before the first and after the last period.
                buckets.retain(|b| {
                    b.get("from").and_then(Value::as_f64).is_some()
                        && b.get("to").and_then(Value::as_f64).is_some()
                });
                for b in buckets.iter_mut() {
                    let from_ns = b.get("from").and_then(Value::as_f64).unwrap_or_default();
                    let key = (from_ns / 1e6) as i64;
                    if let Some(o) = b.as_object_mut() {
                        for k in ["from", "to", "key", "from_as_string", "to_as_string"] {
                            o.remove(k);
                        }
                        let text = DateTime::<Utc>::from_timestamp_millis(key)
                            .map(iso_millis)
                            .unwrap_or_default();
                        o.insert("key_as_string".into(), json!(text));
                        o.insert("key".into(), json!(key));
                    }
                }
                // As OpenSearch: from the first to the last bucket with documents.
                let keep = |b: &Value| {
                    b.get("doc_count").and_then(Value::as_u64).unwrap_or(0)
                        >= plan.min_doc_count.max(1)
                };
                if plan.min_doc_count > 0 {
                    buckets.retain(keep);
                } else {
                    let first = buckets.iter().position(keep).unwrap_or(buckets.len());
                    let last = buckets.iter().rposition(keep).map_or(0, |i| i + 1);
                    if first >= last {
                        buckets.clear();
                    } else {
                        buckets.truncate(last);
                        buckets.drain(..first);
                    }
                }
            }
        }
        "range" => {
            if let Some(Value::Array(buckets)) = v.get_mut("buckets") {
                // A field no document has: every requested range, empty.
                if buckets.is_empty() {
                    for (from, to) in &plan.ranges {
                        let mut b = json!({"key": range_key(*from, *to), "doc_count": 0});
                        if let Some(f) = from {
                            b["from"] = json!(f);
                        }
                        if let Some(t) = to {
                            b["to"] = json!(t);
                        }
                        buckets.push(b);
                    }
                }
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
                } else {
                    // OpenSearch writes numeric range keys with its doubles' text (`*-5.0`); a key
                    // the request gave stays.
                    for b in buckets.iter_mut() {
                        let from = b.get("from").and_then(Value::as_f64);
                        let to = b.get("to").and_then(Value::as_f64);
                        let text =
                            |x: Option<f64>| x.map_or_else(|| "*".to_owned(), |x| x.to_string());
                        if b.get("key").and_then(Value::as_str)
                            == Some(format!("{}-{}", text(from), text(to)).as_str())
                        {
                            b["key"] = json!(range_key(from, to));
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
                    // With milliseconds, as OpenSearch writes dates (tantivy leaves them out).
                    if let Some(Value::String(text)) = b.get("key_as_string")
                        && let Ok(date) = DateTime::parse_from_rfc3339(text)
                    {
                        b["key_as_string"] = json!(iso_millis(date.with_timezone(&Utc)));
                    }
                }
            }
        }
        "multi_terms" => {
            if let Some(Value::Array(buckets)) = v.get_mut("buckets") {
                // Boolean parts of the key as OpenSearch writes them.
                // Date parts as OpenSearch writes dates; the key's text made of the parts.
                for b in buckets.iter_mut() {
                    let mut rewritten = false;
                    if let Some(Value::Array(key)) = b.get_mut("key") {
                        for (part, boolean) in key.iter_mut().zip(&plan.multi_booleans) {
                            if let (true, Some(n)) = (*boolean, part.as_f64()) {
                                *part = Value::Bool(n != 0.0);
                            }
                        }
                        for (part, date) in key.iter_mut().zip(&plan.multi_dates) {
                            if !*date {
                                continue;
                            }
                            let at = match &*part {
                                Value::String(text) => DateTime::parse_from_rfc3339(text)
                                    .ok()
                                    .map(|d| d.with_timezone(&Utc)),
                                Value::Number(n) => {
                                    n.as_i64().map(DateTime::<Utc>::from_timestamp_nanos)
                                }
                                _ => None,
                            };
                            if let Some(at) = at {
                                *part = json!(iso_millis(at));
                                rewritten = true;
                            }
                        }
                    }
                    if rewritten && let Some(Value::Array(key)) = b.get("key") {
                        let text: Vec<String> = key
                            .iter()
                            .map(|p| match p {
                                Value::String(s) => s.clone(),
                                other => other.to_string(),
                            })
                            .collect();
                        b["key_as_string"] = json!(text.join("|"));
                    }
                }
            }
            if !plan.ties_by_key {
                return shape_children(v, plan);
            }
            if let Some(Value::Array(buckets)) = v.get_mut("buckets") {
                let count = |b: &Value| b.get("doc_count").and_then(Value::as_u64).unwrap_or(0);
                buckets.sort_by(|a, b| {
                    count(b)
                        .cmp(&count(a))
                        .then_with(|| compare_values(&a["key"], &b["key"]))
                });
            }
        }
        "terms" => {
            if plan.date_field {
                date_term_keys(v);
            }
            filter_keys(v, plan)?;
            if let (Some(kind), Some(Value::Array(buckets))) =
                (&plan.missing_kind, v.get_mut("buckets"))
            {
                for b in buckets.iter_mut() {
                    let Some(key) = b.get("key").and_then(Value::as_f64) else {
                        continue;
                    };
                    b["key"] = json!(key as i64);
                    b["key_as_string"] = match kind {
                        crate::mapping::FieldKind::Boolean => {
                            json!(if key != 0.0 { "true" } else { "false" })
                        }
                        _ => json!(
                            DateTime::<Utc>::from_timestamp_millis(key as i64)
                                .map(iso_millis)
                                .unwrap_or_default()
                        ),
                    };
                }
            }
        }
        "rare_terms" => {
            if plan.date_field {
                date_term_keys(v);
            }
            filter_keys(v, plan)?;
            // Every term was counted, or some were left out and the rarest cannot be told.
            if v.get("sum_other_doc_count")
                .and_then(Value::as_u64)
                .is_some_and(|n| n > 0)
            {
                return Err(SearchError::dsl(
                    format!("aggs.{}.rare_terms", plan.name),
                    "the field has more distinct values than rare_terms can count exactly (search limit max_buckets)",
                ));
            }
            let max = plan.max_doc_count.unwrap_or(1);
            if let Some(o) = v.as_object_mut() {
                o.remove("sum_other_doc_count");
                o.remove("doc_count_error_upper_bound");
            }
            if let Some(Value::Array(buckets)) = v.get_mut("buckets") {
                buckets.retain(|b| b.get("doc_count").and_then(Value::as_u64).unwrap_or(0) <= max);
                // Rarest first, then by key, as OpenSearch orders them.
                let count = |b: &Value| b.get("doc_count").and_then(Value::as_u64).unwrap_or(0);
                match plan.key_filter.as_ref().and_then(|f| f.by_address) {
                    Some(_) => buckets.sort_by(|a, b| {
                        super::AddressOrder::Count { ascending: true }.compare(a, b)
                    }),
                    None => buckets.sort_by(|a, b| {
                        count(a)
                            .cmp(&count(b))
                            .then_with(|| compare_values(&a["key"], &b["key"]))
                    }),
                }
            }
        }
        "percentiles" => {
            if let Some(hdr) = &plan.hdr {
                hdr.shape(v)?;
            }
        }
        "median_absolute_deviation" => {
            if let Some(mad) = &plan.mad {
                mad.shape(v)?;
            }
        }
        // Counts are whole numbers in OpenSearch; tantivy gives them as doubles.
        "value_count" | "cardinality" => {
            if let Some(x) = v.get("value").and_then(Value::as_f64) {
                v["value"] = json!(x.max(0.0).round() as u64);
            }
        }
        "min" | "max" | "avg" if plan.date_field => {
            if let Some(x) = v.get("value").and_then(Value::as_f64) {
                v["value"] = json!(x / 1e6);
            }
        }
        _ => {}
    }
    // A histogram's keys in the number format asked for.
    if let (Some(format), Some(Value::Array(buckets))) = (&plan.number_format, v.get_mut("buckets"))
    {
        for b in buckets.iter_mut() {
            if let Some(key) = b.get("key").and_then(Value::as_f64) {
                b["key_as_string"] = json!(format.write(key));
            }
        }
    }
    // A date_histogram's keys in the format asked for.
    if let (Some(format), Some(Value::Array(buckets))) = (&plan.key_format, v.get_mut("buckets")) {
        for b in buckets.iter_mut() {
            if let Some(key) = b
                .get("key")
                .and_then(Value::as_i64)
                .and_then(DateTime::<Utc>::from_timestamp_millis)
            {
                b["key_as_string"] = json!(format.write(key));
            }
        }
    }
    shape_children(v, plan)?;
    if let Some(order) = &plan.bucket_order {
        order.apply(v);
    }
    if plan.keyed_buckets
        && let Some(Value::Array(buckets)) = v.get_mut("buckets")
    {
        // By the key's text, as OpenSearch names keyed buckets.
        let keyed: serde_json::Map<String, Value> = std::mem::take(buckets)
            .into_iter()
            .map(|b| {
                let name = match (b.get("key_as_string"), b.get("key")) {
                    (Some(Value::String(text)), _) => text.clone(),
                    (_, Some(key)) => key.as_f64().map_or_else(|| key.to_string(), java_double),
                    _ => String::new(),
                };
                (name, b)
            })
            .collect();
        v["buckets"] = Value::Object(keyed);
    }
    Ok(())
}

/// Keeps the buckets whose keys the request's `include` / `exclude` lists allow
/// ([`KeyFilter`](super::KeyFilter)), at most the number asked for, the rest counted in
/// `sum_other_doc_count`. tantivy was asked for every term; when it could not give them all, the
/// buckets kept cannot be told and the request fails.
fn filter_keys(v: &mut Value, plan: &AggregationPlan) -> Result<(), SearchError> {
    let Some(filter) = &plan.key_filter else {
        return Ok(());
    };
    if !filter.every_term {
        if let (Some(order), Some(Value::Array(buckets))) =
            (filter.by_address, v.get_mut("buckets"))
        {
            buckets.sort_by(|a, b| order.compare(a, b));
        }
        return Ok(());
    }
    if v.get("sum_other_doc_count")
        .and_then(Value::as_u64)
        .is_some_and(|n| n > 0)
    {
        return Err(SearchError::dsl(
            format!("aggs.{}.{}", plan.name, plan.kind),
            "the field has more distinct values than include / exclude can filter exactly (search limit max_buckets)",
        ));
    }
    let Some(Value::Array(buckets)) = v.get_mut("buckets") else {
        return Ok(());
    };
    buckets.retain(|b| filter.keeps(&b["key"]));
    if let Some(order) = filter.by_address {
        buckets.sort_by(|a, b| order.compare(a, b));
    }
    let count = |b: &Value| b.get("doc_count").and_then(Value::as_u64).unwrap_or(0);
    let mut other = 0;
    if plan.kind == "terms" && buckets.len() > filter.size {
        other = buckets[filter.size..].iter().map(count).sum::<u64>();
        buckets.truncate(filter.size);
    }
    if plan.kind == "terms" {
        v["sum_other_doc_count"] = json!(other);
    }
    Ok(())
}

/// Puts the sub-aggregations of each bucket into shape.
fn shape_children(v: &mut Value, plan: &AggregationPlan) -> Result<(), SearchError> {
    if plan.children.is_empty() {
        return Ok(());
    }
    if let Some(Value::Array(buckets)) = v.get_mut("buckets") {
        for b in buckets.iter_mut() {
            for child in &plan.children {
                if let Some(cv) = b.get_mut(&child.name) {
                    to_opensearch_shape(cv, child)?;
                }
            }
        }
    }
    Ok(())
}

/// Date terms keyed as OpenSearch keys them: milliseconds, and the date as text with them (tantivy
/// keys them by the RFC 3339 text).
fn date_term_keys(v: &mut Value) {
    if let Some(Value::Array(buckets)) = v.get_mut("buckets") {
        for b in buckets.iter_mut() {
            let Some(text) = b.get("key").and_then(Value::as_str) else {
                continue;
            };
            let Ok(date) = DateTime::parse_from_rfc3339(text) else {
                continue;
            };
            let millis = date.timestamp_millis();
            let shown = iso_millis(date.with_timezone(&Utc));
            b["key"] = json!(millis);
            b["key_as_string"] = json!(shown);
        }
    }
}

/// The key OpenSearch gives a numeric range bucket: `from-to` with `*` for an open end, each bound
/// as Java writes a double (`5.0`, `0.25`, `1.0E7`).
fn range_key(from: Option<f64>, to: Option<f64>) -> String {
    let bound = |x: Option<f64>| x.map_or_else(|| "*".to_owned(), java_double);
    format!("{}-{}", bound(from), bound(to))
}

/// A double as Java's `Double.toString` writes it.
pub(super) fn java_double(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 || (1e-3..1e7).contains(&a) {
        let text = format!("{x}");
        if text.contains('.') {
            text
        } else {
            format!("{text}.0")
        }
    } else {
        let exp = a.log10().floor() as i32;
        let mantissa = x / 10f64.powi(exp);
        let m = format!("{mantissa}");
        let m = if m.contains('.') { m } else { format!("{m}.0") };
        format!("{m}E{exp}")
    }
}

fn close(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(1.0),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_and_range_keys_as_opensearch_writes_them() {
        assert_eq!(java_double(5.0), "5.0");
        assert_eq!(java_double(-0.25), "-0.25");
        assert_eq!(java_double(1e7), "1.0E7");
        assert_eq!(java_double(123_456.5), "123456.5");
        assert_eq!(range_key(None, Some(5.0)), "*-5.0");
        assert_eq!(range_key(Some(1.5), None), "1.5-*");
    }
}
