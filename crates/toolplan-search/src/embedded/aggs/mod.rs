//! Aggregations: OpenSearch requests rewritten onto the index's fields and run by tantivy's
//! Elasticsearch-compatible aggregation engine; results put back into OpenSearch's shape.
//!
//! Supported: `terms` (size, order — also by a sub-aggregation —, min_doc_count, include/exclude,
//! missing), `avg`, `min`, `max`, `sum`, `stats`, `extended_stats`, `value_count`, `cardinality`,
//! `percentiles`, `histogram`, `date_histogram` (`fixed_interval`; `calendar_interval` from second
//! to year, in UTC — week, month, quarter and year run as calendar-aligned date ranges over the
//! matching documents' span), `range` (only the requested buckets are returned), `top_hits`
//! (run as one search per bucket: the query and the bucket's own filter, with the `size`, `from`,
//! `sort` and `_source` asked for), and `filter`, `filters` and `missing` (run the same way, their
//! sub-aggregations in that search). Anything else is an error naming the aggregation.
//!
//! Bounded by the [`SearchLimits`]: aggregation nesting (`max_nested_depth`), `terms` sizes and
//! buckets made (`max_buckets`), memory (`max_aggregation_memory`), `top_hits` `from + size`
//! (`max_inner_result_window`) and the hits all `top_hits` return together (`max_result_window`).
//!
//! [`run`] rewrites the request onto the index's fields (this module), runs it and puts the result
//! back into shape; the parts that need more than tantivy's engine live in their own modules:
//!
//! * [`calendar`] — `date_histogram` intervals; calendar periods (week, month, quarter, year) as
//!   date ranges over the matching documents' span.
//! * [`top_hits`] — `top_hits`, run as one search per bucket with the bucket's own filter; the
//!   searches of every aggregation run that way.
//! * [`filtered`] — `filter`, `filters` and `missing`: the searches their buckets are.
//! * [`response`] — tantivy's result put back into OpenSearch's shape.

mod calendar;
mod filtered;
mod response;
mod top_hits;

use std::cell::Cell;

use serde_json::{Map, Value, json};
use tantivy::Searcher;
use tantivy::aggregation::agg_req::Aggregations;
use tantivy::aggregation::{AggContextParams, AggregationCollector, AggregationLimitsGuard};
use tantivy::query::Query;
use tantivy::tokenizer::TokenizerManager;

use self::calendar::{Calendar, Interval, date_histogram_interval};
use self::filtered::Searched;
use self::response::to_opensearch_shape;
use self::top_hits::top_hits_body;
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
/// The field an aggregation on a field the mapping lacks is run on: no index has it, so it has no
/// values.
const UNMAPPED: &str = "_unmapped_field";

const BUCKETS: &[&str] = &[
    "terms",
    "histogram",
    "date_histogram",
    "range",
    "multi_terms",
    "rare_terms",
];
/// The options of `rare_terms` (`precision` tunes OpenSearch's approximate filter; the count here is
/// exact, or an error when it cannot be).
const RARE_TERMS_OPTIONS: &[&str] = &[
    "field",
    "max_doc_count",
    "precision",
    "include",
    "exclude",
    "missing",
];
/// The largest `max_doc_count` of `rare_terms`, OpenSearch's.
const MAX_RARE_DOC_COUNT: u64 = 100;
/// The options of `multi_terms` tantivy runs as OpenSearch does.
const MULTI_TERMS_OPTIONS: &[&str] = &[
    "terms",
    "size",
    "shard_size",
    "order",
    "min_doc_count",
    "show_term_doc_count_error",
];
/// Bucket aggregations run as searches of their own ([`filtered`]).
const SEARCHED: &[&str] = &["filter", "filters", "missing"];

/// What the post-processing needs to remember of a request.
struct AggregationPlan {
    name: String,
    kind: String,
    /// The field as the request names it (for bucket filters of `top_hits`).
    field: Option<String>,
    /// The fields of a `multi_terms`, as the request names them.
    multi_fields: Vec<String>,
    /// Which of them are booleans (tantivy gives their key as 0 or 1).
    multi_booleans: Vec<bool>,
    /// Buckets of equal counts ordered by key (tantivy leaves their order open): a `terms` kind
    /// ordered by count, the default.
    ties_by_key: bool,
    /// `rare_terms`: the most documents a rare term has.
    max_doc_count: Option<u64>,
    /// The request's `meta`, returned with the result.
    meta: Option<Value>,
    date_field: bool,
    ranges: Vec<(Option<f64>, Option<f64>)>,
    /// Width of a `histogram` / fixed `date_histogram` bucket (ms for dates).
    interval: Option<f64>,
    calendar: Option<Calendar>,
    min_doc_count: u64,
    /// A `top_hits` request, run after the aggregations.
    top_hits: Option<Value>,
    /// A `filter` / `filters` / `missing` aggregation, run after the aggregations, and its
    /// sub-aggregations (run in its searches).
    searched: Option<(Searched, Option<Value>)>,
    children: Vec<AggregationPlan>,
}

/// A search on the same index, for what aggregations need besides tantivy's engine: the span of a
/// date field under the query, and the hits of `top_hits`.
pub(crate) type SubSearch<'a> = &'a dyn Fn(&Value) -> Result<Value, SearchError>;

/// Runs the aggregations of a request (`key` is `aggs` or `aggregations`, for messages).
/// `query_json` is the request's query (for `top_hits` and calendar spans, run through `sub`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    schema: &IndexSchema,
    searcher: &Searcher,
    query: &dyn Query,
    query_json: &Value,
    aggs: &Value,
    key: &str,
    limits: &SearchLimits,
    sub: SubSearch<'_>,
    searches: &Cell<usize>,
) -> Result<Value, SearchError> {
    let rewrite = Rewrite {
        schema,
        query: query_json,
        sub,
        limits,
        top_hits: Cell::new(0),
        searches,
    };
    let (request, plans) = rewrite.rewrite(aggs, key, 1)?;
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
    // The filter buckets' searches are counted before any runs, so that too many fail at once.
    let needed = plans
        .iter()
        .map(|p| filtered::searches_needed(out.get(&p.name), p))
        .fold(0usize, usize::saturating_add);
    rewrite.count_searches(needed, key)?;
    let mut filters = Vec::new();
    for plan in &plans {
        if (plan.top_hits.is_some() || plan.searched.is_some())
            && let Some(o) = out.as_object_mut()
        {
            o.insert(plan.name.clone(), Value::Null);
        }
        if let Some(v) = out.get_mut(&plan.name) {
            to_opensearch_shape(v, plan)?;
            rewrite.fill_searched(v, plan, &mut filters)?;
            attach_meta(v, plan);
        }
    }
    Ok(out)
}

/// Gives each aggregation's result the `meta` its request had, as OpenSearch returns it.
fn attach_meta(v: &mut Value, plan: &AggregationPlan) {
    if let (Some(meta), Some(o)) = (&plan.meta, v.as_object_mut()) {
        o.insert("meta".into(), meta.clone());
    }
    if plan.children.is_empty() {
        return;
    }
    let buckets: Vec<&mut Value> = match v.get_mut("buckets") {
        Some(Value::Array(list)) => list.iter_mut().collect(),
        Some(Value::Object(by_key)) => by_key.values_mut().collect(),
        _ => Vec::new(),
    };
    for bucket in buckets {
        for child in &plan.children {
            if let Some(cv) = bucket.get_mut(&child.name) {
                attach_meta(cv, child);
            }
        }
    }
}

/// Query-time context of the rewrite.
struct Rewrite<'a> {
    schema: &'a IndexSchema,
    query: &'a Value,
    sub: SubSearch<'a>,
    limits: &'a SearchLimits,
    /// Hits the `top_hits` searches returned so far.
    top_hits: Cell<usize>,
    /// Searches the `filter` / `filters` / `missing` buckets of the request (with the searches
    /// they run, at any depth) make.
    searches: &'a Cell<usize>,
}

impl Rewrite<'_> {
    /// Rewrites the aggregations at `path`, `depth` levels down.
    fn rewrite(
        &self,
        aggs: &Value,
        path: &str,
        depth: usize,
    ) -> Result<(Value, Vec<AggregationPlan>), SearchError> {
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
                plans.push(AggregationPlan {
                    top_hits: Some(top_hits_body(&body, name, &kind_path, self.limits)?),
                    ..AggregationPlan::new(name, &kind)
                });
                continue;
            }
            if SEARCHED.contains(&kind.as_str()) {
                let searched = Searched::parse(&kind, &body, &kind_path, self.limits)?;
                // Their sub-aggregations run in their searches; checked here, before any runs,
                // and counted in the nesting depth.
                if let Some(children) = children {
                    self.rewrite(children, &format!("{here}.aggs"), depth + 1)?;
                }
                plans.push(AggregationPlan {
                    searched: Some((searched, children.cloned())),
                    ..AggregationPlan::new(name, &kind)
                });
                continue;
            }
            if !METRICS.contains(&kind.as_str()) && !BUCKETS.contains(&kind.as_str()) {
                return Err(SearchError::Unsupported {
                    path: kind_path,
                    clause: format!("{kind} aggregation"),
                });
            }
            let mut multi_fields = Vec::new();
            let mut multi_booleans = Vec::new();
            let ties_by_key = kind == "multi_terms" && body.get("order").is_none();
            if kind == "multi_terms" {
                multi_fields = body["terms"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|t| t["field"].as_str().unwrap_or_default().to_owned())
                    .collect();
                multi_booleans = multi_fields
                    .iter()
                    .map(|f| {
                        schema
                            .fields
                            .get(f)
                            .is_some_and(|i| i.spec.kind == FieldKind::Boolean)
                    })
                    .collect();
                self.multi_terms_fields(&mut body, &kind_path)?;
                self.check_terms_size(&body, &kind_path)?;
            }
            let mut date_field = false;
            let requested_field = body.get("field").and_then(Value::as_str).map(str::to_owned);
            if let Some(field) = requested_field.clone() {
                if let Some(why) = schema.not_indexed(&field) {
                    return Err(SearchError::dsl(kind_path, why));
                }
                let Some(indexed) = schema.fields.get(&field) else {
                    // As in OpenSearch, a field the mapping lacks has no values: no buckets,
                    // metrics over nothing (or over the `missing` value).
                    body["field"] = json!(UNMAPPED);
                    let entry = match kind.as_str() {
                        "date_histogram" => {
                            json!({"histogram": {"field": UNMAPPED, "interval": 1.0}})
                        }
                        "rare_terms" => {
                            // Checked as a mapped one would be; no terms.
                            self.rare_terms_body(&body, &kind_path)?;
                            json!({"terms": {"field": UNMAPPED}})
                        }
                        _ => json!({ kind.as_str(): body }),
                    };
                    out.insert(name.clone(), entry);
                    let ranges = match body.get("ranges") {
                        Some(Value::Array(rs)) if kind == "range" => rs
                            .iter()
                            .map(|r| {
                                (
                                    r.get("from").and_then(Value::as_f64),
                                    r.get("to").and_then(Value::as_f64),
                                )
                            })
                            .collect(),
                        _ => Vec::new(),
                    };
                    plans.push(AggregationPlan {
                        field: requested_field,
                        ranges,
                        ..AggregationPlan::new(name, &kind)
                    });
                    continue;
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
            } else if kind == "multi_terms" {
                // Its fields are in `terms`, rewritten above.
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
            let mut max_doc_count = None;
            if kind == "rare_terms" {
                let (terms, max) = self.rare_terms_body(&body, &kind_path)?;
                body = terms;
                max_doc_count = Some(max);
                tantivy_kind = "terms".into();
            }
            if kind == "histogram" {
                interval = body.get("interval").and_then(Value::as_f64);
            }
            if kind == "date_histogram" {
                match date_histogram_interval(&mut body, &kind_path)? {
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
            plans.push(AggregationPlan {
                field: requested_field,
                multi_fields,
                multi_booleans,
                ties_by_key,
                max_doc_count,
                date_field,
                ranges,
                interval,
                calendar,
                min_doc_count,
                children: child_plans,
                ..AggregationPlan::new(name, &kind)
            });
        }
        for plan in &mut plans {
            plan.meta = aggs.get(&plan.name).and_then(|d| d.get("meta")).cloned();
        }
        Ok((Value::Object(out), plans))
    }

    /// Rewrites the fields of a `multi_terms` request onto the index's columns: keywords and
    /// numbers (a field the mapping lacks has no values); other kinds and options are refused by
    /// name.
    fn multi_terms_fields(&self, body: &mut Value, path: &str) -> Result<(), SearchError> {
        let Value::Object(o) = body else {
            return Err(SearchError::dsl(path, "multi_terms must be an object"));
        };
        if let Some(other) = o
            .keys()
            .find(|k| !MULTI_TERMS_OPTIONS.contains(&k.as_str()))
        {
            return Err(SearchError::Unsupported {
                path: format!("{path}.{other}"),
                clause: format!("multi_terms option {other}"),
            });
        }
        let Some(Value::Array(terms)) = o.get_mut("terms") else {
            return Err(SearchError::dsl(
                path,
                "multi_terms needs [terms]: a list of at least two {\"field\": …}",
            ));
        };
        if terms.len() < 2 {
            return Err(SearchError::dsl(
                format!("{path}.terms"),
                "The number of fields in the terms parameter must be at least 2",
            ));
        }
        for (i, term) in terms.iter_mut().enumerate() {
            let here = format!("{path}.terms[{i}]");
            let Some(field) = term.get("field").and_then(Value::as_str).map(str::to_owned) else {
                return Err(SearchError::dsl(&here, "each term needs a field"));
            };
            if let Some(other) = term.as_object().and_then(|t| {
                t.keys()
                    .find(|k| !matches!(k.as_str(), "field" | "missing"))
            }) {
                return Err(SearchError::Unsupported {
                    path: format!("{here}.{other}"),
                    clause: format!("multi_terms term option {other}"),
                });
            }
            if let Some(why) = self.schema.not_indexed(&field) {
                return Err(SearchError::dsl(here, why));
            }
            let column = match self.schema.fields.get(&field) {
                None => UNMAPPED.to_owned(),
                Some(indexed) => match indexed.spec.kind {
                    FieldKind::Keyword
                    | FieldKind::Integer
                    | FieldKind::Float
                    | FieldKind::Boolean => indexed.name.clone(),
                    FieldKind::Text => {
                        let hint = self.schema.keyword_hint(&field);
                        return Err(SearchError::dsl(
                            &here,
                            format!(
                                "text field '{field}' cannot be aggregated; use a keyword field{hint}"
                            ),
                        ));
                    }
                    ref other => {
                        return Err(SearchError::Unsupported {
                            path: here,
                            clause: format!("multi_terms on a {} field", other.name()),
                        });
                    }
                },
            };
            term["field"] = json!(column);
        }
        Ok(())
    }

    /// The `terms` request a `rare_terms` one runs as (every term of the field, rarest first, up to
    /// `max_buckets` of them) and its `max_doc_count`.
    fn rare_terms_body(&self, body: &Value, path: &str) -> Result<(Value, u64), SearchError> {
        let Value::Object(o) = body else {
            return Err(SearchError::dsl(path, "rare_terms must be an object"));
        };
        if let Some(other) = o.keys().find(|k| !RARE_TERMS_OPTIONS.contains(&k.as_str())) {
            return Err(SearchError::Unsupported {
                path: format!("{path}.{other}"),
                clause: format!("rare_terms option {other}"),
            });
        }
        let max = match o.get("max_doc_count") {
            None => 1,
            Some(v) => match v.as_u64() {
                Some(n @ 1..=MAX_RARE_DOC_COUNT) => n,
                Some(0) => {
                    return Err(SearchError::dsl(
                        format!("{path}.max_doc_count"),
                        "[maxDocCount] must be greater than 0",
                    ));
                }
                _ => {
                    return Err(SearchError::dsl(
                        format!("{path}.max_doc_count"),
                        format!(
                            "[max_doc_count] must be smaller than or equal to [{MAX_RARE_DOC_COUNT}], found {v}"
                        ),
                    ));
                }
            },
        };
        let mut terms = Map::new();
        for key in ["field", "include", "exclude", "missing"] {
            if let Some(v) = o.get(key) {
                terms.insert(key.into(), v.clone());
            }
        }
        terms.insert("size".into(), json!(self.limits.max_buckets));
        terms.insert("min_doc_count".into(), json!(1));
        terms.insert("order".into(), json!({"_count": "asc"}));
        Ok((Value::Object(terms), max))
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
}

impl AggregationPlan {
    fn new(name: &str, kind: &str) -> AggregationPlan {
        AggregationPlan {
            name: name.to_owned(),
            kind: kind.to_owned(),
            field: None,
            multi_fields: Vec::new(),
            multi_booleans: Vec::new(),
            ties_by_key: false,
            max_doc_count: None,
            meta: None,
            date_field: false,
            ranges: Vec::new(),
            interval: None,
            calendar: None,
            min_doc_count: 0,
            top_hits: None,
            searched: None,
            children: Vec::new(),
        }
    }

    /// Whether this aggregation or one under it runs searches of its own.
    fn runs_searches(&self) -> bool {
        self.top_hits.is_some()
            || self.searched.is_some()
            || self.children.iter().any(AggregationPlan::runs_searches)
    }
}
