//! Aggregations: OpenSearch requests rewritten onto the index's fields and run by tantivy's
//! Elasticsearch-compatible aggregation engine; results put back into OpenSearch's shape.
//!
//! Supported: `terms` (size, order — also by a sub-aggregation —, min_doc_count, include/exclude,
//! missing), `avg`, `min`, `max`, `sum`, `stats`, `extended_stats`, `value_count`, `cardinality`,
//! `percentiles`, `histogram`, `date_histogram` (`fixed_interval`; `calendar_interval` from second
//! to year, in UTC — week, month, quarter and year run as calendar-aligned date ranges over the
//! matching documents' span), `range` (only the requested buckets are returned), and `top_hits`
//! (run as one search per bucket: the query and the bucket's own filter, with the `size`, `from`,
//! `sort` and `_source` asked for). Anything else is an error naming the aggregation.
//!
//! Bounded by the [`SearchLimits`]: aggregation nesting (`max_nested_depth`), `terms` sizes and
//! buckets made (`max_buckets`), memory (`max_aggregation_memory`), `top_hits` `from + size`
//! (`max_inner_result_window`) and the hits all `top_hits` return together (`max_result_window`).

use std::cell::Cell;

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};
use serde_json::{Map, Value, json};
use tantivy::Searcher;
use tantivy::aggregation::agg_req::Aggregations;
use tantivy::aggregation::{AggContextParams, AggregationCollector, AggregationLimitsGuard};
use tantivy::query::Query;
use tantivy::tokenizer::TokenizerManager;

use super::schema::IndexSchema;
use crate::error::SearchError;
use crate::limits::{SearchLimits, within};
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

/// Most buckets a calendar `date_histogram` may make (OpenSearch's `search.max_buckets` is larger;
/// this keeps one request's work bounded).
pub const MAX_CALENDAR_BUCKETS: usize = 10_000;

/// Calendar intervals that are not a fixed length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Calendar {
    Week,
    Month,
    Quarter,
    Year,
}

impl Calendar {
    /// The start of the period holding `t`.
    fn start(self, t: DateTime<Utc>) -> DateTime<Utc> {
        let d = t.date_naive();
        let first = match self {
            Calendar::Week => d - Duration::days(i64::from(d.weekday().num_days_from_monday())),
            Calendar::Month => d.with_day(1).unwrap_or(d),
            Calendar::Quarter => {
                NaiveDate::from_ymd_opt(d.year(), (d.month0() / 3) * 3 + 1, 1).unwrap_or(d)
            }
            Calendar::Year => NaiveDate::from_ymd_opt(d.year(), 1, 1).unwrap_or(d),
        };
        Utc.from_utc_datetime(&first.and_hms_opt(0, 0, 0).unwrap_or_default())
    }

    /// The start of the next period, from a period start.
    fn next(self, t: DateTime<Utc>) -> DateTime<Utc> {
        let months = match self {
            Calendar::Week => return t + Duration::days(7),
            Calendar::Month => 1,
            Calendar::Quarter => 3,
            Calendar::Year => 12,
        };
        t.checked_add_months(chrono::Months::new(months))
            .unwrap_or(t + Duration::days(366))
    }
}

/// What the post-processing needs to remember of a request.
struct Plan {
    name: String,
    kind: String,
    /// The field as the request names it (for bucket filters of `top_hits`).
    field: Option<String>,
    date_field: bool,
    ranges: Vec<(Option<f64>, Option<f64>)>,
    /// Width of a `histogram` / fixed `date_histogram` bucket (ms for dates).
    interval: Option<f64>,
    calendar: Option<Calendar>,
    min_doc_count: u64,
    /// A `top_hits` request, run after the aggregations.
    top_hits: Option<Value>,
    children: Vec<Plan>,
}

/// A search on the same index, for what aggregations need besides tantivy's engine: the span of a
/// date field under the query, and the hits of `top_hits`.
pub type SubSearch<'a> = &'a dyn Fn(&Value) -> Result<Value, SearchError>;

/// Runs the aggregations of a request (`key` is `aggs` or `aggregations`, for messages).
/// `query_json` is the request's query (for `top_hits` and calendar spans, run through `sub`).
#[allow(clippy::too_many_arguments)]
pub fn run(
    schema: &IndexSchema,
    searcher: &Searcher,
    query: &dyn Query,
    query_json: &Value,
    aggs: &Value,
    key: &str,
    limits: &SearchLimits,
    sub: SubSearch<'_>,
) -> Result<Value, SearchError> {
    let ctx = Rewrite {
        schema,
        query: query_json,
        sub,
        limits,
        top_hits: Cell::new(0),
    };
    let (request, plans) = ctx.rewrite(aggs, key, 1)?;
    let parsed: Aggregations = serde_json::from_value(request)
        .map_err(|e| SearchError::dsl(key, format!("invalid aggregation: {e}")))?;
    let guard = AggregationLimitsGuard::new(
        Some(limits.max_aggregation_memory),
        Some(limits.max_buckets),
    );
    let params = AggContextParams::new(guard, TokenizerManager::default());
    let collector = AggregationCollector::from_aggs(parsed, params);
    let result = searcher
        .search(query, &collector)
        .map_err(|e| SearchError::dsl(key, e.to_string()))?;
    let mut out = serde_json::to_value(&result).map_err(|e| SearchError::Index(e.to_string()))?;
    let mut filters = Vec::new();
    for plan in &plans {
        if plan.top_hits.is_some()
            && let Some(o) = out.as_object_mut()
        {
            o.insert(plan.name.clone(), Value::Null);
        }
        if let Some(v) = out.get_mut(&plan.name) {
            fix(v, plan);
            ctx.fill_top_hits(v, plan, &mut filters)?;
        }
    }
    Ok(out)
}

/// Query-time context of the rewrite.
struct Rewrite<'a> {
    schema: &'a IndexSchema,
    query: &'a Value,
    sub: SubSearch<'a>,
    limits: &'a SearchLimits,
    /// Hits the `top_hits` searches returned so far.
    top_hits: Cell<usize>,
}

impl Rewrite<'_> {
    /// Rewrites the aggregations at `path`, `depth` levels down.
    fn rewrite(
        &self,
        aggs: &Value,
        path: &str,
        depth: usize,
    ) -> Result<(Value, Vec<Plan>), SearchError> {
        let schema = self.schema;
        let max = self.limits.max_nested_depth;
        within(depth, max, "max_nested_depth", path, || {
            format!("aggregations nest more than {max} levels deep")
        })?;
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
            if kind == "top_hits" {
                if children.is_some() {
                    return Err(SearchError::dsl(
                        &here,
                        "a top_hits aggregation cannot have sub-aggregations",
                    ));
                }
                plans.push(Plan {
                    top_hits: Some(top_hits_body(&body, name, &kind_path, self.limits)?),
                    ..Plan::new(name, &kind)
                });
                continue;
            }
            if !METRICS.contains(&kind.as_str()) && !BUCKETS.contains(&kind.as_str()) {
                return Err(SearchError::Unsupported {
                    path: kind_path,
                    clause: format!("{kind} aggregation"),
                });
            }
            let mut date_field = false;
            let requested_field = body.get("field").and_then(Value::as_str).map(str::to_owned);
            if let Some(field) = requested_field.clone() {
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
                        format!(
                            "text field '{field}' cannot be aggregated; use a keyword field{hint}"
                        ),
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
            let mut interval = None;
            let mut calendar = None;
            let min_doc_count = body
                .get("min_doc_count")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let mut tantivy_kind = kind.clone();
            if kind == "terms" {
                self.check_terms_size(&body, &kind_path)?;
            }
            if kind == "histogram" {
                interval = body.get("interval").and_then(Value::as_f64);
            }
            if kind == "date_histogram" {
                match date_histogram(&mut body, &kind_path)? {
                    Interval::Fixed(ms) => interval = Some(ms),
                    Interval::Calendar(c) => {
                        // tantivy knows fixed intervals only: a calendar interval becomes date ranges,
                        // one per period over the span of the matching documents.
                        let field = requested_field.clone().unwrap_or_default();
                        let periods = self.calendar_ranges(&field, c, &kind_path)?;
                        body = json!({"field": body.get("field").cloned().unwrap_or(Value::Null),
                                  "ranges": periods, "keyed": false});
                        calendar = Some(c);
                        tantivy_kind = "range".into();
                    }
                }
            }
            if tantivy_kind == "range" {
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
            if calendar.is_some()
                && let Some(o) = body.as_object_mut()
            {
                o.remove("min_doc_count");
            }
            let mut entry = Map::new();
            entry.insert(tantivy_kind, body);
            let mut child_plans = Vec::new();
            if let Some(children) = children {
                if METRICS.contains(&kind.as_str()) {
                    return Err(SearchError::dsl(
                        &here,
                        format!("a {kind} aggregation cannot have sub-aggregations"),
                    ));
                }
                let (sub, sub_plans) =
                    self.rewrite(children, &format!("{here}.aggs"), depth + 1)?;
                if sub.as_object().is_some_and(|o| !o.is_empty()) {
                    entry.insert("aggs".into(), sub);
                }
                child_plans = sub_plans;
            }
            out.insert(name.clone(), Value::Object(entry));
            plans.push(Plan {
                field: requested_field,
                date_field,
                ranges,
                interval,
                calendar,
                min_doc_count,
                children: child_plans,
                ..Plan::new(name, &kind)
            });
        }
        Ok((Value::Object(out), plans))
    }

    /// Refuses a `terms` `size` (or `shard_size`) over `max_buckets`: tantivy would reserve room
    /// for that many terms.
    fn check_terms_size(&self, body: &Value, path: &str) -> Result<(), SearchError> {
        let max = self.limits.max_buckets;
        for key in ["size", "shard_size", "segment_size"] {
            if let Some(n) = body.get(key).and_then(Value::as_u64)
                && n > u64::from(max)
            {
                return Err(SearchError::dsl(
                    format!("{path}.{key}"),
                    format!(
                        "{key} {n} is more than the {max} buckets one request may make (search limit max_buckets)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The date ranges (ms) of the calendar periods from the first to the last matching document.
    fn calendar_ranges(
        &self,
        field: &str,
        c: Calendar,
        path: &str,
    ) -> Result<Vec<Value>, SearchError> {
        let span = (self.sub)(&json!({
            "size": 0,
            "query": self.query,
            "aggs": {"first": {"min": {"field": field}}, "last": {"max": {"field": field}}},
        }))?;
        let ms = |k: &str| {
            span.pointer(&format!("/aggregations/{k}/value"))
                .and_then(Value::as_f64)
                .and_then(|v| DateTime::<Utc>::from_timestamp_millis(v as i64))
        };
        let (Some(first), Some(last)) = (ms("first"), ms("last")) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let mut at = c.start(first);
        while at <= last {
            if out.len() >= MAX_CALENDAR_BUCKETS {
                return Err(SearchError::dsl(
                    path,
                    format!("more than {MAX_CALENDAR_BUCKETS} buckets; use a longer interval"),
                ));
            }
            let next = c.next(at);
            out.push(json!({"from": at.timestamp_millis(), "to": next.timestamp_millis()}));
            at = next;
        }
        Ok(out)
    }

    /// Runs the `top_hits` of `plan` (and of its sub-aggregations, bucket by bucket): a search with the
    /// request's query and the filters of the buckets it sits in.
    fn fill_top_hits(
        &self,
        v: &mut Value,
        plan: &Plan,
        filters: &mut Vec<Value>,
    ) -> Result<(), SearchError> {
        if let Some(req) = &plan.top_hits {
            let mut body = req.clone();
            body["query"] = json!({"bool": {"must": [self.query], "filter": filters.clone()}});
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
        if !plan.children.iter().any(Plan::has_top_hits) {
            return Ok(());
        }
        let Some(Value::Array(buckets)) = v.get_mut("buckets") else {
            return Ok(());
        };
        for b in buckets.iter_mut() {
            let filter = bucket_filter(plan, b);
            filters.push(filter);
            for child in &plan.children {
                if child.top_hits.is_some()
                    && let Some(o) = b.as_object_mut()
                {
                    o.insert(child.name.clone(), Value::Null);
                }
                if let Some(cv) = b.get_mut(&child.name) {
                    self.fill_top_hits(cv, child, filters)?;
                }
            }
            filters.pop();
        }
        Ok(())
    }
}

impl Plan {
    fn new(name: &str, kind: &str) -> Plan {
        Plan {
            name: name.to_owned(),
            kind: kind.to_owned(),
            field: None,
            date_field: false,
            ranges: Vec::new(),
            interval: None,
            calendar: None,
            min_doc_count: 0,
            top_hits: None,
            children: Vec::new(),
        }
    }

    fn has_top_hits(&self) -> bool {
        self.top_hits.is_some() || self.children.iter().any(Plan::has_top_hits)
    }
}

/// The query DSL that selects a bucket's documents.
fn bucket_filter(plan: &Plan, bucket: &Value) -> Value {
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
fn top_hits_body(
    req: &Value,
    name: &str,
    path: &str,
    limits: &SearchLimits,
) -> Result<Value, SearchError> {
    let Value::Object(o) = req else {
        return Err(SearchError::dsl(path, "top_hits must be an object"));
    };
    let number = |k: &str, default: u64| o.get(k).and_then(Value::as_u64).unwrap_or(default);
    let window = u128::from(number("size", 3)) + u128::from(number("from", 0));
    let max = limits.max_inner_result_window;
    if window > max as u128 {
        return Err(SearchError::dsl(
            path,
            format!(
                "Top hits result window is too large, the top hits aggregator [{name}]'s from + size must be less than or equal to: [{max}] but was [{window}] (search limit max_inner_result_window)"
            ),
        ));
    }
    let mut body = Map::new();
    body.insert("size".into(), json!(3));
    body.insert("track_total_hits".into(), json!(true));
    for (k, v) in o {
        match k.as_str() {
            "size" | "from" | "sort" | "_source" => {
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

/// A `date_histogram` interval.
enum Interval {
    /// A fixed length, in ms.
    Fixed(f64),
    /// A calendar period of varying length.
    Calendar(Calendar),
}

/// Milliseconds of a fixed interval like `90m`, `12h`, `1d`.
fn fixed_ms(s: &str) -> Option<f64> {
    let digits = s.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let n: f64 = digits.parse().ok()?;
    let unit = match &s[digits.len()..] {
        "ms" => 1.0,
        "s" => 1e3,
        "m" => 6e4,
        "h" => 3.6e6,
        "d" => 8.64e7,
        _ => return None,
    };
    Some(n * unit)
}

fn date_histogram(body: &mut Value, path: &str) -> Result<Interval, SearchError> {
    let Some(obj) = body.as_object_mut() else {
        return Err(SearchError::dsl(path, "date_histogram must be an object"));
    };
    obj.remove("format");
    obj.remove("time_zone");
    let calendar = obj
        .remove("calendar_interval")
        .or_else(|| obj.remove("interval"));
    if let Some(c) = calendar {
        let name = c.as_str().unwrap_or_default();
        let fixed = match name {
            "second" | "1s" => "1s",
            "minute" | "1m" => "1m",
            "hour" | "1h" => "1h",
            "day" | "1d" => "1d",
            "week" | "1w" => return Ok(Interval::Calendar(Calendar::Week)),
            "month" | "1M" => return Ok(Interval::Calendar(Calendar::Month)),
            "quarter" | "1q" => return Ok(Interval::Calendar(Calendar::Quarter)),
            "year" | "1y" => return Ok(Interval::Calendar(Calendar::Year)),
            other => {
                return Err(SearchError::dsl(
                    format!("{path}.calendar_interval"),
                    format!(
                        "unknown calendar_interval '{other}' (second, minute, hour, day, week, month, quarter, year)"
                    ),
                ));
            }
        };
        obj.insert("fixed_interval".into(), json!(fixed));
    }
    let fixed = obj
        .get("fixed_interval")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    fixed_ms(&fixed).map(Interval::Fixed).ok_or_else(|| {
        SearchError::dsl(
            format!("{path}.fixed_interval"),
            format!("invalid fixed_interval '{fixed}'"),
        )
    })
}

/// Puts a result back into OpenSearch's shape.
fn fix(v: &mut Value, plan: &Plan) {
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
                            .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
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
