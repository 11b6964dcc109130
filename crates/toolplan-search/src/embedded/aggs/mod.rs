//! Aggregations: OpenSearch requests rewritten onto the index's fields and run by tantivy's
//! Elasticsearch-compatible aggregation engine; results put back into OpenSearch's shape.
//!
//! Supported: `terms` (size, order — also by a sub-aggregation —, min_doc_count, include/exclude,
//! missing), `avg`, `min`, `max`, `sum`, `stats`, `extended_stats`, `value_count`, `cardinality`,
//! `percentiles`, `histogram`, `date_histogram` (`fixed_interval`; `calendar_interval` from second
//! to year, in UTC — week, month, quarter and year run as calendar-aligned date ranges over the
//! matching documents' span), `range` (only the requested buckets are returned), `top_hits`
//! (run as one search per bucket: the query and the bucket's own filter, with the `size`, `from`,
//! `sort` and `_source` asked for), and `filter`, `filters`, `missing`, `ip_range` and
//! `date_range` (run the same way, their sub-aggregations in that search). On an `ip` field: `terms`, `rare_terms`,
//! `multi_terms`, `cardinality`, `value_count` and `ip_range`. Anything else is an error naming the aggregation.
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
//! * [`filtered`] — `filter`, `filters`, `missing`, `ip_range` and `date_range`: the searches
//!   their buckets are.
//! * [`percentiles`] — `percentiles`' options, and the `hdr` method computed from a listing of
//!   the field's values.
//! * [`response`] — tantivy's result put back into OpenSearch's shape.

mod auto_date;
mod calendar;
mod filtered;
mod mad;
mod order;
mod percentiles;
mod pipeline;
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
use self::pipeline::Pipeline;
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
    "median_absolute_deviation",
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
/// The aggregations of tantivy's engine that read an `ip` field: addresses are values to count,
/// not numbers.
const IP_AGGREGATIONS: &[&str] = &[
    "terms",
    "rare_terms",
    "multi_terms",
    "cardinality",
    "value_count",
];

/// OpenSearch's refusal of an aggregation on a field of a type it does not read.
fn not_for_aggregation(
    field: &str,
    kind: &FieldKind,
    aggregation: &str,
    path: &str,
) -> SearchError {
    SearchError::dsl(
        path,
        format!(
            "Field [{field}] of type [{}] is not supported for aggregation [{aggregation}]",
            kind.name()
        ),
    )
}

/// Whether an `order` names a sub-aggregation (among `children`) that is a search of its own.
fn order_names_searched(order: &Value, children: Option<&Value>) -> bool {
    let names: Vec<&str> = match order {
        Value::Object(o) => o.keys().map(String::as_str).collect(),
        Value::Array(list) => list
            .iter()
            .filter_map(Value::as_object)
            .flat_map(|o| o.keys().map(String::as_str))
            .collect(),
        _ => Vec::new(),
    };
    names.iter().any(|path| {
        let name = path.split(['.', '>', '[']).next().unwrap_or_default();
        children
            .and_then(|c| c.get(name))
            .and_then(Value::as_object)
            .is_some_and(|child| child.keys().any(|k| SEARCHED.contains(&k.as_str())))
    })
}

/// Bucket aggregations run as searches of their own ([`filtered`]).
const SEARCHED: &[&str] = &[
    "auto_date_histogram",
    "filter",
    "filters",
    "adjacency_matrix",
    "missing",
    "ip_range",
    "date_range",
];

/// `include` / `exclude` lists of a `terms` (or `rare_terms`) aggregation on a number, boolean,
/// date or ip field, and the order of the buckets of an ip field, applied to the buckets tantivy
/// made of every term. OpenSearch takes lists of values there, not patterns.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KeyFilter {
    include: Option<Vec<Value>>,
    exclude: Option<Vec<Value>>,
    /// The buckets the request asked for.
    size: usize,
    /// On an `ip` field, the order of the buckets by count and address (tantivy compares the
    /// addresses as text, so `::1` would come after `10.0.0.1`): `None` when ordered by a
    /// sub-aggregation, which tantivy's order is right for.
    by_address: Option<AddressOrder>,
    /// Whether tantivy was asked for every term (to filter them, or to order addresses by key):
    /// otherwise it chose the top terms by count, and their order is only put right here.
    every_term: bool,
    /// `include: {"partition": p, "num_partitions": n}`: the terms whose hash falls in partition
    /// `p` of `n`, hashed as OpenSearch hashes them ([`Partition`]).
    partition: Option<Partition>,
}

/// One of `num` partitions of a field's terms, as OpenSearch makes them: a text term by the
/// MurmurHash3 (x86, 32-bit, seed 31) of its bytes, a whole number (or date, or boolean) by
/// its 64-bit mix, each modulo `num`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Partition {
    partition: i64,
    num: i64,
    /// On an `ip` field: an address is hashed as its 16 bytes (IPv4 mapped into IPv6), the
    /// term OpenSearch keeps.
    ip: bool,
}

impl Partition {
    /// OpenSearch's seed of the terms' hashes.
    const SEED: u32 = 31;

    /// Reads `{"partition": p, "num_partitions": n}` at `path`.
    fn parse(v: &Map<String, Value>, path: &str) -> Result<Partition, SearchError> {
        let number = |key: &str| {
            v.get(key).and_then(Value::as_i64).ok_or_else(|| {
                SearchError::dsl(
                    path,
                    format!("include partitions need [partition] and [num_partitions] as whole numbers ([{key}] is missing)"),
                )
            })
        };
        if let Some(other) = v
            .keys()
            .find(|k| !matches!(k.as_str(), "partition" | "num_partitions"))
        {
            return Err(SearchError::dsl(
                path,
                format!("Unknown parameter in Include/Exclude clause: {other}"),
            ));
        }
        let (partition, num) = (number("partition")?, number("num_partitions")?);
        if num < 1 || partition < 0 || partition >= num {
            return Err(SearchError::dsl(
                path,
                format!(
                    "[partition] must be at least 0 and below [num_partitions] (at least 1): found {partition} of {num}"
                ),
            ));
        }
        Ok(Partition {
            partition,
            num,
            ip: false,
        })
    }

    /// Whether a bucket key (text, or a whole number) is in the partition.
    fn keeps(self, key: &Value) -> bool {
        let hash = match key {
            Value::String(text) => {
                let address = match text.parse::<std::net::IpAddr>() {
                    Ok(std::net::IpAddr::V4(v4)) if self.ip => Some(v4.to_ipv6_mapped().octets()),
                    Ok(std::net::IpAddr::V6(v6)) if self.ip => Some(v6.octets()),
                    _ => None,
                };
                let bytes = address.as_ref().map_or(text.as_bytes(), |a| &a[..]);
                let hash =
                    murmur3::murmur3_32(&mut std::io::Cursor::new(bytes), Self::SEED).unwrap_or(0);
                i64::from(hash as i32)
            }
            Value::Number(n) => match n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)) {
                Some(x) => mix64(x),
                None => return false,
            },
            Value::Bool(b) => mix64(i64::from(*b)),
            _ => return false,
        };
        hash.rem_euclid(self.num) == self.partition
    }
}

/// The 64-bit mix OpenSearch hashes whole numbers with for partitions (HPPC's `BitMixer.mix64`).
fn mix64(x: i64) -> i64 {
    let mut z = x as u64;
    z = (z ^ (z >> 32)).wrapping_mul(0x4cd6_944c_5cc2_0b6d);
    z = (z ^ (z >> 29)).wrapping_mul(0xfc12_c5b1_9d32_59e9);
    (z ^ (z >> 32)) as i64
}

/// The order of `terms` buckets on an `ip` field, addresses compared as addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AddressOrder {
    /// By count (descending unless `ascending`), ties by address.
    Count { ascending: bool },
    /// By address.
    Key { ascending: bool },
}

impl AddressOrder {
    /// The order a terms request asks for, when it is by count or by key.
    fn of(order: Option<&Value>) -> Option<AddressOrder> {
        let Some(order) = order else {
            return Some(AddressOrder::Count { ascending: false });
        };
        let (target, direction) = order.as_object()?.iter().next()?;
        let ascending = direction.as_str()?.eq_ignore_ascii_case("asc");
        match target.as_str() {
            "_count" => Some(AddressOrder::Count { ascending }),
            "_key" | "_term" => Some(AddressOrder::Key { ascending }),
            _ => None,
        }
    }

    /// Compares two buckets.
    pub(crate) fn compare(self, a: &Value, b: &Value) -> std::cmp::Ordering {
        let count = |b: &Value| b.get("doc_count").and_then(Value::as_u64).unwrap_or(0);
        let address = |b: &Value| {
            b.get("key")
                .and_then(Value::as_str)
                .and_then(super::schema::ip_address)
        };
        match self {
            AddressOrder::Count { ascending } => {
                let by_count = count(a).cmp(&count(b));
                (if ascending {
                    by_count
                } else {
                    by_count.reverse()
                })
                .then_with(|| address(a).cmp(&address(b)))
            }
            AddressOrder::Key { ascending } => {
                let by_key = address(a).cmp(&address(b));
                if ascending { by_key } else { by_key.reverse() }
            }
        }
    }
}

impl KeyFilter {
    /// Takes `include` and `exclude` out of the terms request `body` on a field of kind `kind`,
    /// which then asks for every term (up to `max_buckets`).
    fn take(
        body: &mut Value,
        kind: &FieldKind,
        format: Option<&crate::datemath::DateFormat>,
        name: &str,
        path: &str,
        limits: &SearchLimits,
    ) -> Result<Option<KeyFilter>, SearchError> {
        let Some(o) = body.as_object_mut() else {
            return Ok(None);
        };
        let partition = match o.get("include") {
            Some(Value::Object(p)) => {
                if *kind == FieldKind::Float {
                    return Err(SearchError::Unsupported {
                        path: format!("{path}.include"),
                        clause: "include partitions on a decimal field".into(),
                    });
                }
                let partition = Partition {
                    ip: *kind == FieldKind::Ip,
                    ..Partition::parse(p, &format!("{path}.include"))?
                };
                o.remove("include");
                Some(partition)
            }
            _ => None,
        };
        // A keyword field's lists and patterns are tantivy's to apply.
        if *kind == FieldKind::Keyword && partition.is_none() {
            return Ok(None);
        }
        let (include, exclude) = if *kind == FieldKind::Keyword {
            (None, None)
        } else {
            (o.remove("include"), o.remove("exclude"))
        };
        let by_address = if *kind == FieldKind::Ip {
            AddressOrder::of(o.get("order"))
        } else {
            None
        };
        if include.is_none() && exclude.is_none() && by_address.is_none() && partition.is_none() {
            return Ok(None);
        }
        // Ordered by count, tantivy's top terms are the right ones (ties aside): only their order
        // by address is put right, and a field of many addresses needs no room for all of them.
        let every_term = include.is_some()
            || exclude.is_some()
            || partition.is_some()
            || matches!(by_address, Some(AddressOrder::Key { .. }));
        let list = |v: Option<Value>, key: &str| -> Result<Option<Vec<Value>>, SearchError> {
            match v {
                None => Ok(None),
                // Dates are named as the field writes them; the buckets are keyed in milliseconds.
                Some(Value::Array(values)) if *kind == FieldKind::Date => values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        format
                            .and_then(|f| f.read_json(v))
                            .or_else(|| crate::datemath::date_from_json(v))
                            .map(|d| json!(d.timestamp_millis()))
                            .ok_or_else(|| {
                                SearchError::dsl(
                                    format!("{path}.{key}[{i}]"),
                                    format!("{v} is not a date of the field"),
                                )
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(Some),
                Some(Value::Array(values)) => Ok(Some(values)),
                Some(Value::String(_)) => Err(SearchError::dsl(
                    format!("{path}.{key}"),
                    format!(
                        "Aggregation [{name}] cannot support regular expression style include/exclude settings as they can only be applied to string fields. Use an array of values for include/exclude clauses"
                    ),
                )),
                Some(_) => Err(SearchError::Unsupported {
                    path: format!("{path}.{key}"),
                    clause: format!("{key} partitions on a {} field", kind.name()),
                }),
            }
        };
        let filter = KeyFilter {
            include: list(include, "include")?,
            exclude: list(exclude, "exclude")?,
            size: o
                .get("size")
                .and_then(Value::as_u64)
                .map_or(10, |n| n as usize),
            by_address,
            every_term,
            partition,
        };
        if every_term {
            o.insert("size".into(), json!(limits.max_buckets));
        }
        Ok(Some(filter))
    }

    /// Whether a bucket's key is kept.
    fn keeps(&self, key: &Value) -> bool {
        let listed = |values: &[Value]| values.iter().any(|v| same_key(key, v));
        self.include.as_deref().is_none_or(listed)
            && !self.exclude.as_deref().is_some_and(listed)
            && self.partition.is_none_or(|p| p.keeps(key))
    }
}

/// Whether a bucket key (a number, or an address as text) is the value a request names (a number
/// or its text, an address in any of its spellings, a boolean for 1 or 0).
fn same_key(key: &Value, named: &Value) -> bool {
    let number = |v: &Value| match v {
        Value::Number(n) => n.as_f64(),
        // A boolean's terms are keyed 1 and 0.
        Value::String(s) if s.trim() == "true" => Some(1.0),
        Value::String(s) if s.trim() == "false" => Some(0.0),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    };
    if let (Value::String(a), Value::String(b)) = (key, named)
        && let (Some(a), Some(b)) = (super::schema::ip_address(a), super::schema::ip_address(b))
    {
        return a == b;
    }
    match (number(key), number(named)) {
        (Some(a), Some(b)) => a == b,
        _ => key == named,
    }
}

/// The `missing` value of `terms` on a field the mapping lacks, read by its `value_type`: a
/// boolean becomes 1 or 0, a date its milliseconds (the kind returned, for the keys' text).
fn unmapped_missing(body: &mut Value, path: &str) -> Result<Option<FieldKind>, SearchError> {
    let Some(o) = body.as_object_mut() else {
        return Ok(None);
    };
    let value_type = o
        .get("value_type")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let kind = match (value_type.as_deref(), o.get("missing")) {
        (Some("boolean"), Some(Value::Bool(b))) => {
            let n = if *b { 1.0 } else { 0.0 };
            o.insert("missing".into(), json!(n));
            FieldKind::Boolean
        }
        (Some("date"), Some(m)) => {
            let date = crate::datemath::date_from_json(m).ok_or_else(|| {
                SearchError::dsl(format!("{path}.missing"), format!("{m} is not a date"))
            })?;
            o.insert("missing".into(), json!(date.timestamp_millis() as f64));
            FieldKind::Date
        }
        _ => return Ok(None),
    };
    o.remove("value_type");
    Ok(Some(kind))
}

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
    /// Which of them are date fields (their parts written as dates).
    multi_dates: Vec<bool>,
    /// `multi_terms` with `min_doc_count: 0`: the request for every combination of the index
    /// (its own search), whose combinations the query missed are shown with no documents, and
    /// the buckets asked for.
    all_combinations: Option<(Value, usize)>,
    /// Buckets of equal counts ordered by key (tantivy leaves their order open): a `terms` kind
    /// ordered by count, the default.
    ties_by_key: bool,
    /// `rare_terms`: the most documents a rare term has.
    max_doc_count: Option<u64>,
    /// `terms` / `rare_terms` on a field that is not a keyword, with `include` or `exclude`: the
    /// values kept, applied to tantivy's buckets.
    key_filter: Option<KeyFilter>,
    /// The request's `meta`, returned with the result.
    meta: Option<Value>,
    date_field: bool,
    ranges: Vec<(Option<f64>, Option<f64>)>,
    /// Width of a `histogram` / fixed `date_histogram` bucket (ms for dates).
    interval: Option<f64>,
    calendar: Option<Calendar>,
    /// A `date_histogram`'s `format`, for its keys' text.
    key_format: Option<crate::datemath::DateFormat>,
    min_doc_count: u64,
    /// A `top_hits` request, run after the aggregations.
    top_hits: Option<Value>,
    /// A `filter` / `filters` / `missing` aggregation, run after the aggregations, and its
    /// sub-aggregations (run in its searches).
    searched: Option<(Searched, Option<Value>)>,
    /// A pipeline aggregation, computed from the others' results ([`pipeline`]).
    pipeline: Option<Pipeline>,
    /// `percentiles` with `hdr`: run as a listing of the field's values ([`percentiles`]).
    hdr: Option<percentiles::Hdr>,
    /// `median_absolute_deviation`: run as a listing of the field's values ([`mad`]).
    mad: Option<mad::Mad>,
    /// `terms` ordered by a sub-aggregation that is a search of its own (`filter` …): every term
    /// is asked for, then ordered once those searches are done and cut to the size asked.
    order_after_searches: Option<(order::BucketOrder, usize)>,
    /// A histogram's `order`, applied to its buckets ([`order`]).
    bucket_order: Option<order::BucketOrder>,
    /// A `histogram`'s `format`, for its keys' text.
    number_format: Option<crate::number_format::NumberFormat>,
    /// A histogram asked for `keyed` buckets: an object of them by key text, made after they
    /// are ordered and their keys written.
    keyed_buckets: bool,
    /// `terms` on a field the mapping lacks whose `missing` value is a boolean or a date
    /// (`value_type`): its key is shown as one.
    missing_kind: Option<FieldKind>,
    /// `terms` on `_index`: run as a search of every document, shown as this index's bucket.
    index_terms: Option<IndexTerms>,
    children: Vec<AggregationPlan>,
}

/// `terms` on `_index`, whose one term is the index's name.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IndexTerms {
    /// The index's name.
    pub(crate) index: String,
    /// Whether `include` / `exclude` let the name through.
    pub(crate) kept: bool,
    /// The fewest documents its bucket shows with (`min_doc_count`, 1 by default).
    pub(crate) min_doc_count: u64,
}

impl IndexTerms {
    /// The options a `terms` on `_index` takes.
    const OPTIONS: &[&str] = &[
        "field",
        "size",
        "shard_size",
        "order",
        "include",
        "exclude",
        "min_doc_count",
        "shard_min_doc_count",
        "missing",
        "show_term_doc_count_error",
        "execution_hint",
        "collect_mode",
    ];

    /// Reads `body` (a `terms` on `_index` at `path`) for index `index`.
    fn parse(body: &Value, index: &str, path: &str) -> Result<IndexTerms, SearchError> {
        let Some(o) = body.as_object() else {
            return Err(SearchError::dsl(path, "terms must be an object"));
        };
        if let Some(other) = o.keys().find(|k| !Self::OPTIONS.contains(&k.as_str())) {
            return Err(SearchError::Unsupported {
                path: format!("{path}.{other}"),
                clause: format!("terms option {other} on _index"),
            });
        }
        let allowed = |key: &str| -> Result<Option<bool>, SearchError> {
            let here = format!("{path}.{key}");
            match o.get(key) {
                None => Ok(None),
                Some(Value::String(pattern)) => {
                    crate::embedded::query::lucene_regex_matches(pattern, index, &here).map(Some)
                }
                Some(Value::Array(list)) => {
                    Ok(Some(list.iter().any(|v| v.as_str() == Some(index))))
                }
                Some(Value::Object(_)) => Err(SearchError::Unsupported {
                    path: here,
                    clause: "include partitions on _index".into(),
                }),
                Some(other) => Err(SearchError::dsl(
                    here,
                    format!(
                        "[{key}] must be a regular expression or a list of terms, found {other}"
                    ),
                )),
            }
        };
        let kept = allowed("include")?.unwrap_or(true) && !allowed("exclude")?.unwrap_or(false);
        let min_doc_count = match o.get("min_doc_count") {
            None => 1,
            Some(v) => v.as_u64().ok_or_else(|| {
                SearchError::dsl(
                    format!("{path}.min_doc_count"),
                    format!("[min_doc_count] must be a whole number not below 0, found {v}"),
                )
            })?,
        };
        if let Some(size) = o.get("size")
            && size.as_u64().is_none_or(|n| n == 0)
        {
            return Err(SearchError::dsl(
                format!("{path}.size"),
                format!("[size] must be greater than 0. Found [{size}] in [{path}]"),
            ));
        }
        Ok(IndexTerms {
            index: index.to_owned(),
            kept,
            min_doc_count,
        })
    }
}

/// A search on the same index, for what aggregations need besides tantivy's engine: the span of a
/// date field under the query, and the hits of `top_hits`.
pub(crate) type SubSearch<'a> = &'a dyn Fn(&Value) -> Result<Value, SearchError>;

/// Runs the aggregations of a request on index `index` (`key` is `aggs` or `aggregations`, for
/// messages).
/// `query_json` is the request's query (for `top_hits` and calendar spans, run through `sub`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    index: &str,
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
        index,
        schema,
        searcher,
        matching: query,
        query: query_json,
        sub,
        limits,
        top_hits: Cell::new(0),
        searches,
    };
    let (request, plans) = rewrite.rewrite(aggs, key, 1)?;
    pipeline::check(&plans, None, key)?;
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
    if let Some(level) = out.as_object_mut() {
        pipeline::apply(level, &plans)?;
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
    /// The index's name (the one value of its `_index` field).
    index: &'a str,
    schema: &'a IndexSchema,
    query: &'a Value,
    sub: SubSearch<'a>,
    limits: &'a SearchLimits,
    /// Hits the `top_hits` searches returned so far.
    top_hits: Cell<usize>,
    /// Searches the `filter` / `filters` / `missing` buckets of the request (with the searches
    /// they run, at any depth) make.
    searches: &'a Cell<usize>,
    /// The index's segments, for what the request's rewriting must read from the columns.
    searcher: &'a Searcher,
    /// The request's query (stopped with the search), for the documents those reads look at.
    matching: &'a dyn Query,
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
            if kind == "ip_range"
                && let Some(field) = body.get("field").and_then(Value::as_str)
                && let Some(indexed) = schema.fields.get(field)
                && indexed.spec.kind != FieldKind::Ip
            {
                return Err(not_for_aggregation(
                    field,
                    &indexed.spec.kind,
                    &kind,
                    &kind_path,
                ));
            }
            if body.get("field").and_then(Value::as_str) == Some("_index") {
                // One index, one value: its documents under the query are the bucket, counted
                // (with the sub-aggregations) by a search of their own.
                if kind != "terms" {
                    return Err(SearchError::Unsupported {
                        path: kind_path,
                        clause: format!("{kind} aggregation on _index"),
                    });
                }
                let index_terms = IndexTerms::parse(&body, self.index, &kind_path)?;
                if let Some(children) = children {
                    self.rewrite(children, &format!("{here}.aggs"), depth + 1)?;
                }
                let all =
                    Searched::parse("filter", &json!({"match_all": {}}), &kind_path, self.limits)?;
                plans.push(AggregationPlan {
                    searched: Some((all, children.cloned())),
                    index_terms: Some(index_terms),
                    ..AggregationPlan::new(name, &kind)
                });
                continue;
            }
            if SEARCHED.contains(&kind.as_str()) {
                let searched = if kind == "date_range" {
                    self.date_ranges(&body, &kind_path)?
                } else if kind == "auto_date_histogram" {
                    self.auto_date_histogram(&body, depth, &kind_path)?
                } else {
                    Searched::parse(&kind, &body, &kind_path, self.limits)?
                };
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
            if pipeline::SIBLING.contains(&kind.as_str())
                || pipeline::PARENT.contains(&kind.as_str())
            {
                if children.is_some() {
                    return Err(SearchError::dsl(
                        &here,
                        format!("a {kind} aggregation cannot have sub-aggregations"),
                    ));
                }
                plans.push(AggregationPlan {
                    pipeline: Some(Pipeline::parse(&kind, &body, &kind_path)?),
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
            let mut multi_dates = Vec::new();
            let mut all_combinations = None;
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
                multi_dates = multi_fields
                    .iter()
                    .map(|f| {
                        schema
                            .fields
                            .get(f)
                            .is_some_and(|i| i.spec.kind == FieldKind::Date)
                    })
                    .collect();
                if body.get("min_doc_count").and_then(Value::as_u64) == Some(0) {
                    if children.is_some() {
                        return Err(SearchError::Unsupported {
                            path: kind_path,
                            clause: "multi_terms with min_doc_count 0 and sub-aggregations".into(),
                        });
                    }
                    let mut every = body.clone();
                    if let Some(o) = every.as_object_mut() {
                        o.remove("min_doc_count");
                        o.remove("order");
                        o.insert("size".into(), json!(self.limits.max_buckets));
                    }
                    let size = body
                        .get("size")
                        .and_then(Value::as_u64)
                        .and_then(|n| usize::try_from(n).ok())
                        .unwrap_or(10);
                    all_combinations = Some((json!({ "multi_terms": every }), size));
                }
                self.multi_terms_fields(&mut body, &kind_path)?;
                self.check_terms_size(&body, &kind_path)?;
            }
            let mut date_field = false;
            let mut field_kind = None;
            let mut date_format = None;
            let requested_field = body.get("field").and_then(Value::as_str).map(str::to_owned);
            let hdr = if kind == "percentiles" {
                let field_kind = requested_field
                    .as_deref()
                    .and_then(|f| schema.fields.get(f))
                    .map(|i| &i.spec.kind);
                percentiles::take(&mut body, name, &kind_path, field_kind)?
            } else {
                None
            };
            let mad = if kind == "median_absolute_deviation" {
                let field_kind = requested_field
                    .as_deref()
                    .and_then(|f| schema.fields.get(f))
                    .map(|i| &i.spec.kind);
                Some(mad::Mad::take(&mut body, name, &kind_path, field_kind)?)
            } else {
                None
            };
            if let Some(field) = requested_field.clone() {
                if let Some(why) = schema.not_indexed(&field) {
                    return Err(SearchError::dsl(kind_path, why));
                }
                let Some(indexed) = schema.fields.get(&field) else {
                    // As in OpenSearch, a field the mapping lacks has no values: no buckets,
                    // metrics over nothing (or over the `missing` value).
                    body["field"] = json!(UNMAPPED);
                    // `value_type` says what the `missing` value is: a boolean or a date is
                    // counted as the number the field would hold, and shown as one.
                    let missing_kind = if kind == "terms" {
                        unmapped_missing(&mut body, &kind_path)?
                    } else {
                        None
                    };
                    if let Some(o) = body.as_object_mut() {
                        if matches!(kind.as_str(), "histogram" | "date_histogram") {
                            o.remove("order");
                            o.remove("format");
                        }
                        // No terms to put in partitions.
                        if o.get("include").is_some_and(Value::is_object) {
                            o.remove("include");
                        }
                    }
                    let entry = match kind.as_str() {
                        "date_histogram" => {
                            json!({"histogram": {"field": UNMAPPED, "interval": 1.0}})
                        }
                        "rare_terms" => {
                            // Checked as a mapped one would be; no terms.
                            self.rare_terms_body(&body, &kind_path)?;
                            json!({"terms": {"field": UNMAPPED}})
                        }
                        "percentiles" if hdr.is_some() => json!({"terms":
                            percentiles::Hdr::terms_body(UNMAPPED, body.get("missing"), self.limits)}),
                        "median_absolute_deviation" => json!({"terms":
                            percentiles::Hdr::terms_body(UNMAPPED, body.get("missing"), self.limits)}),
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
                        hdr,
                        mad,
                        missing_kind,
                        ..AggregationPlan::new(name, &kind)
                    });
                    continue;
                };
                if indexed.spec.kind == FieldKind::Text && !indexed.spec.fielddata {
                    let hint = schema.keyword_hint(&field);
                    return Err(SearchError::dsl(
                        &kind_path,
                        format!(
                            "text field '{field}' cannot be aggregated; use a keyword field{hint}"
                        ),
                    ));
                }
                if indexed.spec.kind == FieldKind::Ip && !IP_AGGREGATIONS.contains(&kind.as_str()) {
                    return Err(not_for_aggregation(
                        &field,
                        &indexed.spec.kind,
                        &kind,
                        &kind_path,
                    ));
                }
                date_field = indexed.spec.kind == FieldKind::Date;
                // A text field with field data is aggregated on as its words: keyword values.
                field_kind = Some(match indexed.spec.kind {
                    FieldKind::Text => FieldKind::Keyword,
                    ref other => other.clone(),
                });
                date_format = indexed.format.clone();
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
                return Err(SearchError::dsl(
                    &kind_path,
                    "Required one of fields [field, script], but none were specified",
                ));
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
            // tantivy filters the terms of keyword columns only (of others it would make no
            // buckets at all): the values of other fields are filtered here, after.
            let key_filter = match &field_kind {
                Some(k) if tantivy_kind == "terms" => KeyFilter::take(
                    &mut body,
                    k,
                    date_format.as_ref(),
                    name,
                    &kind_path,
                    self.limits,
                )?,
                _ => None,
            };
            if kind == "histogram" {
                interval = body.get("interval").and_then(Value::as_f64);
            }
            let mut bucket_order = None;
            let mut number_format = None;
            let mut keyed_buckets = false;
            if let ("histogram" | "date_histogram", Some(o)) = (kind.as_str(), body.as_object_mut())
            {
                match o.remove("keyed") {
                    None | Some(Value::Bool(false)) => {}
                    Some(Value::Bool(true)) => keyed_buckets = true,
                    Some(other) => {
                        return Err(SearchError::dsl(
                            format!("{kind_path}.keyed"),
                            format!("[keyed] must be true or false, found {other}"),
                        ));
                    }
                }
                if let Some(spec) = o.remove("order") {
                    let at = format!("{kind_path}.order");
                    let parsed = order::BucketOrder::parse(&spec, &at)?;
                    parsed.check_paths(children, &at)?;
                    bucket_order = Some(parsed);
                }
                if kind == "histogram"
                    && let Some(f) = o.remove("format")
                {
                    let pattern = f.as_str().ok_or_else(|| {
                        SearchError::dsl(format!("{kind_path}.format"), "a format is text")
                    })?;
                    number_format = Some(
                        crate::number_format::NumberFormat::parse(pattern).map_err(|e| {
                            SearchError::dsl(format!("{kind_path}.format"), e.to_string())
                        })?,
                    );
                }
            }
            if matches!(tantivy_kind.as_str(), "terms" | "multi_terms") {
                order::rename_old_keys(&mut body);
            }
            // Ordered by a sub-aggregation tantivy does not run (`filter`, `filters`, `missing`):
            // every term now, ordered when their searches are done.
            let mut order_after_searches = None;
            if kind == "terms"
                && let Some(spec) = body.get("order").cloned()
                && order_names_searched(&spec, children)
            {
                let at = format!("{kind_path}.order");
                let parsed = order::BucketOrder::parse(&spec, &at)?;
                let size = body
                    .get("size")
                    .and_then(Value::as_u64)
                    .and_then(|n| usize::try_from(n).ok())
                    .unwrap_or(10);
                if let Some(o) = body.as_object_mut() {
                    o.remove("order");
                    o.insert("size".into(), json!(self.limits.max_buckets));
                }
                order_after_searches = Some((parsed, size));
            }
            let mut key_format = None;
            if kind == "date_histogram" {
                key_format = crate::datemath::format_option(
                    body.get("format"),
                    &format!("{kind_path}.format"),
                )?;
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
            if hdr.is_some() || mad.is_some() {
                let column = body
                    .get("field")
                    .and_then(Value::as_str)
                    .unwrap_or(UNMAPPED);
                if let Some(kind) = &field_kind {
                    let shown = requested_field.as_deref().unwrap_or(column);
                    let what = if mad.is_some() {
                        "median_absolute_deviation"
                    } else {
                        "percentiles with hdr"
                    };
                    percentiles::refuse_repeats(
                        what,
                        self.searcher,
                        self.matching,
                        column,
                        shown,
                        kind,
                        &kind_path,
                    )?;
                }
                body = percentiles::Hdr::terms_body(column, body.get("missing"), self.limits);
                tantivy_kind = "terms".into();
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
                multi_dates,
                all_combinations,
                ties_by_key,
                max_doc_count,
                key_filter,
                date_field,
                ranges,
                interval,
                calendar,
                key_format,
                min_doc_count,
                hdr,
                mad,
                order_after_searches,
                bucket_order,
                number_format,
                keyed_buckets,
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
            // `value_type` says what a field the mapping lacks holds: its `missing` value's kind.
            if let Some(Value::Object(t)) = Some(&mut *term)
                && let Some(value_type) = t.get("value_type").cloned()
            {
                let fits = matches!(
                    (value_type.as_str(), t.get("missing")),
                    (Some("string"), Some(Value::String(_)))
                        | (Some("long" | "double" | "number"), Some(Value::Number(_)))
                );
                if !fits || self.schema.fields.contains_key(&field) {
                    return Err(SearchError::Unsupported {
                        path: format!("{here}.value_type"),
                        clause: format!(
                            "multi_terms value_type {value_type} (read only for a field the mapping lacks, with a missing value of that type)"
                        ),
                    });
                }
                t.remove("value_type");
            }
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
                    | FieldKind::Boolean
                    | FieldKind::Date
                    | FieldKind::Ip => indexed.name.clone(),
                    FieldKind::Text if indexed.spec.fielddata => indexed.name.clone(),
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

    /// A `date_range` request read against its field: a date field (its format reads and shows
    /// the bounds) or one the mapping lacks (no documents fall in any range).
    fn date_ranges(&self, body: &Value, path: &str) -> Result<Searched, SearchError> {
        let field = body
            .get("field")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if let Some(why) = self.schema.not_indexed(field) {
            return Err(SearchError::dsl(path, why));
        }
        let indexed = self.schema.fields.get(field);
        if let Some(indexed) = indexed
            && indexed.spec.kind != FieldKind::Date
        {
            return Err(not_for_aggregation(
                field,
                &indexed.spec.kind,
                "date_range",
                path,
            ));
        }
        Searched::parse_date_ranges(
            body,
            path,
            self.limits,
            indexed.and_then(|i| i.format.as_ref()),
            chrono::Utc::now(),
        )
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
            multi_dates: Vec::new(),
            all_combinations: None,
            ties_by_key: false,
            max_doc_count: None,
            key_filter: None,
            meta: None,
            date_field: false,
            ranges: Vec::new(),
            interval: None,
            calendar: None,
            key_format: None,
            min_doc_count: 0,
            top_hits: None,
            searched: None,
            pipeline: None,
            hdr: None,
            mad: None,
            order_after_searches: None,
            bucket_order: None,
            number_format: None,
            keyed_buckets: false,
            missing_kind: None,
            index_terms: None,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_keys_match_the_values_a_request_names() {
        assert!(same_key(&json!(3), &json!("3")));
        assert!(same_key(&json!(2.5), &json!(2.5)));
        // Booleans are keyed 1 and 0, and named true and false.
        assert!(same_key(&json!(1), &json!("true")));
        assert!(same_key(&json!(0), &json!(false)));
        assert!(!same_key(&json!(1), &json!("false")));
        // Addresses in any spelling.
        assert!(same_key(&json!("::1"), &json!("0:0:0:0:0:0:0:1")));
        assert!(same_key(&json!("10.0.0.1"), &json!("::ffff:10.0.0.1")));
        assert!(!same_key(&json!("10.0.0.1"), &json!("10.0.0.2")));
        assert!(same_key(&json!("a"), &json!("a")));
    }

    #[test]
    fn partitions_hash_terms_as_opensearch_does() {
        // The partitions OpenSearch's tests expect: of two, "bcd" and 5678 in the first, "abc"
        // and 1234 in the second.
        let first = Partition {
            ip: false,
            partition: 0,
            num: 2,
        };
        let second = Partition {
            ip: false,
            partition: 1,
            num: 2,
        };
        assert!(first.keeps(&json!("bcd")) && second.keeps(&json!("abc")));
        assert!(first.keeps(&json!(5678)) && second.keeps(&json!(1234)));
        assert!(!first.keeps(&json!("abc")) && !second.keeps(&json!(5678)));
        // An address is hashed as its 16 bytes: written either way, it has one partition.
        for num in 2..40 {
            for partition in 0..num {
                let p = Partition {
                    ip: true,
                    partition,
                    num,
                };
                assert_eq!(
                    p.keeps(&json!("10.0.0.1")),
                    p.keeps(&json!("::ffff:10.0.0.1"))
                );
            }
        }
        // Known values of the two hashes.
        assert_eq!(mix64(0), 0);
        assert_eq!(
            murmur3::murmur3_32(&mut std::io::Cursor::new(b"hello"), 0).unwrap(),
            0x248b_fa47
        );
    }
}
