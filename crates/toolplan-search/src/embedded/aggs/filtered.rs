//! `filter`, `filters`, `adjacency_matrix`, `missing`, `ip_range` and `date_range`: bucket
//! aggregations whose buckets are queries.
//! Each bucket is one search (size 0) for the request's query, the filters of the buckets it sits
//! in and its own query, with the aggregation's sub-aggregations; its `doc_count` is that search's
//! total. The searches of one request are bounded by `max_buckets`.

use serde_json::{Map, Value, json};

use std::net::Ipv6Addr;

use super::{AggregationPlan, Rewrite};
use crate::datemath::DateFormat;
use crate::embedded::schema::{ip_address, ip_block, ip_text};
use crate::error::SearchError;
use crate::limits::{SearchLimits, within};

/// What a `filter`, `filters` or `missing` aggregation searches.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Searched {
    /// One bucket (`filter`, `missing`): the documents this query selects.
    One(Value),
    /// `filters`: one bucket per query, named (`keyed`: an object of buckets by name, else a list
    /// with their keys) or listed (a list without keys), and the documents none selects under
    /// `other` when asked.
    Many {
        filters: Vec<(Option<String>, Value)>,
        keyed: bool,
        other: Option<String>,
    },
    /// `adjacency_matrix`: a bucket per named query and per pair of them (their names joined by
    /// `separator`, the first name first in order), for the documents both select; the buckets
    /// with documents only, ordered by key.
    Adjacency {
        filters: Vec<(String, Value)>,
        separator: String,
    },
    /// `auto_date_histogram`: one bucket per period of `interval` (`7d`, `1M` …), each keyed by its
    /// start ([`super::auto_date`]).
    Dated {
        buckets: Vec<DatedBucket>,
        interval: String,
    },
    /// `ip_range` and `date_range`: one bucket per range of addresses or dates, `from` included
    /// and `to` excluded, each with its key (given, the CIDR mask, or `from-to` with `*` for an
    /// open end), ordered by `from` and then `to`, keyed by key when `keyed`.
    Ranges {
        ranges: Vec<RangeBucket>,
        keyed: bool,
    },
}

/// One period of an `auto_date_histogram`: its start (ms), written in the format asked, and the
/// query for its documents.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DatedBucket {
    pub(crate) key: i64,
    pub(crate) text: String,
    pub(crate) query: Value,
}

/// One bucket of a range aggregation run as searches.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RangeBucket {
    key: String,
    /// The bounds as the response shows them (`from`, `from_as_string`, `to`, `to_as_string`).
    shown: Vec<(&'static str, Value)>,
    /// The bounds as comparable numbers: OpenSearch returns the buckets ordered by `from`, then
    /// `to` (an open `from` first, an open `to` last).
    order: (Option<u128>, Option<u128>),
    /// The documents in the range.
    query: Value,
}

impl RangeBucket {
    fn sort(ranges: &mut [RangeBucket]) {
        ranges.sort_by(|a, b| {
            a.order
                .0
                .cmp(&b.order.0)
                .then_with(|| match (a.order.1, b.order.1) {
                    (None, None) => std::cmp::Ordering::Equal,
                    (None, Some(_)) => std::cmp::Ordering::Greater,
                    (Some(_), None) => std::cmp::Ordering::Less,
                    (Some(x), Some(y)) => x.cmp(&y),
                })
        });
    }
}

impl Searched {
    /// Reads the aggregation `kind` with body `body` (at `path`, for messages).
    pub(super) fn parse(
        kind: &str,
        body: &Value,
        path: &str,
        limits: &SearchLimits,
    ) -> Result<Searched, SearchError> {
        match kind {
            "filter" => match body {
                Value::Object(o) if o.len() == 1 => Ok(Searched::One(body.clone())),
                _ => Err(SearchError::dsl(
                    path,
                    "a filter aggregation takes one query, such as {\"term\": {\"field\": \"value\"}}",
                )),
            },
            "missing" => {
                let Some(Value::Object(o)) = Some(body) else {
                    return Err(SearchError::dsl(path, "missing must be an object"));
                };
                if let Some(other) = o.keys().find(|k| k.as_str() != "field") {
                    return Err(SearchError::dsl(
                        format!("{path}.{other}"),
                        format!("unknown option [{other}] of a missing aggregation"),
                    ));
                }
                let field = o
                    .get("field")
                    .and_then(Value::as_str)
                    .ok_or_else(|| SearchError::dsl(path, "a missing aggregation needs a field"))?;
                Ok(Searched::One(
                    json!({"bool": {"must_not": {"exists": {"field": field}}}}),
                ))
            }
            "ip_range" => Self::parse_ip_ranges(body, path, limits),
            "adjacency_matrix" => Self::parse_adjacency(body, path, limits),
            _ => Self::parse_filters(body, path, limits),
        }
    }

    /// `ip_range`: `field`, `ranges` of `from` / `to` addresses or a CIDR `mask`, each with an
    /// optional `key`, and `keyed`.
    fn parse_ip_ranges(
        body: &Value,
        path: &str,
        limits: &SearchLimits,
    ) -> Result<Searched, SearchError> {
        let o = options_of(
            body,
            &["field", "ranges", "keyed"],
            ("ip_range", "an ip_range aggregation"),
            path,
        )?;
        let (field, keyed) = field_and_keyed(o, "an ip_range", path)?;
        let listed = ranges_of(o, ("an ip_range", "{from, to} or {mask}"), path, limits)?;
        let mut ranges = Vec::with_capacity(listed.len());
        for (i, range) in listed.iter().enumerate() {
            let here = format!("{path}.ranges[{i}]");
            ranges.push(ip_range_bucket(field, range, &here)?);
        }
        RangeBucket::sort(&mut ranges);
        Ok(Searched::Ranges { ranges, keyed })
    }

    /// `date_range` on a field whose format is `field_format` (`None`: unmapped, or ISO dates):
    /// `field`, `ranges` of `from` / `to` dates or date math (`now-1M/M`) with an optional `key`,
    /// `format` (of the bounds given and shown), `missing` (the date of documents without one),
    /// `keyed` and `time_zone` (UTC only).
    pub(super) fn parse_date_ranges(
        body: &Value,
        path: &str,
        limits: &SearchLimits,
        field_format: Option<&DateFormat>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Searched, SearchError> {
        let o = options_of(
            body,
            &["field", "ranges", "keyed", "format", "missing", "time_zone"],
            ("date_range", "a date_range aggregation"),
            path,
        )?;
        if let Some(zone) = o.get("time_zone") {
            crate::datemath::utc_only(zone, "date_range", path)?;
        }
        let (field, keyed) = field_and_keyed(o, "a date_range", path)?;
        let own_format =
            crate::datemath::format_option(o.get("format"), &format!("{path}.format"))?;
        let format = own_format.as_ref().or(field_format);
        let date = |v: &Value, at: &str| -> Result<i64, SearchError> {
            let read = match v {
                Value::String(text) => crate::datemath::eval_with(text, now, false, format)
                    .map_err(|e| SearchError::dsl(at, e))?,
                other => format
                    .and_then(|f| f.read_json(other))
                    .or_else(|| crate::datemath::date_from_json(other))
                    .ok_or_else(|| SearchError::dsl(at, format!("{other} is not a date")))?,
            };
            Ok(read.timestamp_millis())
        };
        let missing = o
            .get("missing")
            .map(|v| date(v, &format!("{path}.missing")))
            .transpose()?;
        let listed = ranges_of(o, ("a date_range", "{from, to}"), path, limits)?;
        let shown = |millis: i64| {
            let d = chrono::DateTime::from_timestamp_millis(millis).unwrap_or_default();
            format.map_or_else(|| crate::datemath::iso_millis(d), |f| f.write(d))
        };
        let mut ranges = Vec::with_capacity(listed.len());
        for (i, range) in listed.iter().enumerate() {
            let here = format!("{path}.ranges[{i}]");
            let r = options_of(
                range,
                &["from", "to", "key"],
                ("a range", "a date range"),
                &here,
            )?;
            let bound = |key: &str| -> Result<Option<i64>, SearchError> {
                match r.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(v) => date(v, &format!("{here}.{key}")).map(Some),
                }
            };
            let (from, to) = (bound("from")?, bound("to")?);
            let end = |b: Option<i64>| b.map_or_else(|| "*".to_owned(), shown);
            let key = key_of(r, || format!("{}-{}", end(from), end(to)), &here)?;
            let mut bounds = Map::new();
            let mut shown_bounds = Vec::new();
            if let Some(from) = from {
                bounds.insert("gte".into(), json!(from));
                shown_bounds.push(("from", json!(from as f64)));
                shown_bounds.push(("from_as_string", json!(shown(from))));
            }
            if let Some(to) = to {
                bounds.insert("lt".into(), json!(to));
                shown_bounds.push(("to", json!(to as f64)));
                shown_bounds.push(("to_as_string", json!(shown(to))));
            }
            bounds.insert("format".into(), json!("epoch_millis"));
            let in_range = json!({"range": {field: bounds}});
            // Documents without a date count as having the missing one.
            let query = match missing {
                Some(m) if from.is_none_or(|f| f <= m) && to.is_none_or(|t| m < t) => {
                    json!({"bool": {
                    "should": [in_range, {"bool": {"must_not": {"exists": {"field": field}}}}],
                    "minimum_should_match": 1}})
                }
                _ => in_range,
            };
            // Millisecond dates as unsigned numbers in the same order.
            let order = |b: Option<i64>| b.map(|x| (i128::from(x) - i128::from(i64::MIN)) as u128);
            ranges.push(RangeBucket {
                key,
                shown: shown_bounds,
                order: (order(from), order(to)),
                query,
            });
        }
        RangeBucket::sort(&mut ranges);
        Ok(Searched::Ranges { ranges, keyed })
    }

    /// `adjacency_matrix`: named `filters` and a `separator` (`&` by default); at most 100
    /// filters (OpenSearch's `index.max_adjacency_matrix_filters`), each pair a search, all
    /// within `max_buckets` searches.
    fn parse_adjacency(
        body: &Value,
        path: &str,
        limits: &SearchLimits,
    ) -> Result<Searched, SearchError> {
        const MAX_FILTERS: usize = 100;
        let Value::Object(o) = body else {
            return Err(SearchError::dsl(path, "adjacency_matrix must be an object"));
        };
        let mut filters = Vec::new();
        let mut separator = "&".to_owned();
        for (key, value) in o {
            match (key.as_str(), value) {
                ("filters", Value::Object(named)) => {
                    filters.extend(named.iter().map(|(n, q)| (n.clone(), q.clone())));
                }
                ("separator", Value::String(s)) => separator = s.clone(),
                (other, _) => {
                    return Err(SearchError::dsl(
                        format!("{path}.{other}"),
                        format!(
                            "unknown or malformed option [{other}] of an adjacency_matrix aggregation"
                        ),
                    ));
                }
            }
        }
        if filters.is_empty() {
            return Err(SearchError::dsl(
                path,
                "[filters] cannot be empty: an adjacency_matrix needs an object of named queries",
            ));
        }
        if filters.len() > MAX_FILTERS {
            return Err(SearchError::dsl(
                path,
                format!(
                    "Number of filters is too large, must be less than or equal to: [{MAX_FILTERS}] but was [{}]. This limit can be set by changing the [index.max_adjacency_matrix_filters] index level setting.",
                    filters.len()
                ),
            ));
        }
        filters.sort_by(|a, b| a.0.cmp(&b.0));
        let n = filters.len();
        let max = limits.max_buckets as usize;
        within(n + n * (n - 1) / 2, max, "max_buckets", path, || {
            format!("an adjacency_matrix of {n} filters makes more than {max} searches")
        })?;
        Ok(Searched::Adjacency { filters, separator })
    }

    fn parse_filters(
        body: &Value,
        path: &str,
        limits: &SearchLimits,
    ) -> Result<Searched, SearchError> {
        let Value::Object(o) = body else {
            return Err(SearchError::dsl(path, "filters must be an object"));
        };
        let mut filters = Vec::new();
        let mut keyed = None;
        let mut other_bucket = None;
        let mut other_key = None;
        for (key, value) in o {
            match (key.as_str(), value) {
                ("filters", Value::Object(named)) => {
                    filters.extend(named.iter().map(|(n, q)| (Some(n.clone()), q.clone())));
                }
                ("filters", Value::Array(listed)) => {
                    filters.extend(listed.iter().map(|q| (None, q.clone())));
                }
                ("keyed", Value::Bool(b)) => keyed = Some(*b),
                ("other_bucket", Value::Bool(b)) => other_bucket = Some(*b),
                ("other_bucket_key", Value::String(k)) => other_key = Some(k.clone()),
                (other, _) => {
                    return Err(SearchError::dsl(
                        format!("{path}.{other}"),
                        format!("unknown or malformed option [{other}] of a filters aggregation"),
                    ));
                }
            }
        }
        if !o.contains_key("filters") {
            return Err(SearchError::dsl(
                path,
                "a filters aggregation needs [filters]: an object of named queries or a list of queries",
            ));
        }
        // `keyed` (true by default) applies to named filters; listed ones are always a list.
        let keyed = keyed.unwrap_or(true) && filters.iter().all(|(n, _)| n.is_some());
        let max = limits.max_buckets as usize;
        within(filters.len(), max, "max_buckets", path, || {
            format!("a filters aggregation of more than {max} filters")
        })?;
        let other = match (other_bucket, other_key) {
            (Some(false), _) | (None, None) => None,
            (_, Some(k)) => Some(k),
            (Some(true), None) => Some("_other_".to_owned()),
        };
        Ok(Searched::Many {
            filters,
            keyed,
            other,
        })
    }
}

impl Searched {
    /// The searches this aggregation makes in one bucket.
    fn searches(&self) -> usize {
        match self {
            Searched::One(_) => 1,
            Searched::Many { filters, other, .. } => filters.len() + usize::from(other.is_some()),
            Searched::Ranges { ranges, .. } => ranges.len(),
            Searched::Dated { buckets, .. } => buckets.len(),
            Searched::Adjacency { filters, .. } => {
                let n = filters.len();
                n + n * n.saturating_sub(1) / 2
            }
        }
    }
}

/// The searches the filter buckets of `plan` make, in `result` (its result from tantivy's engine,
/// where its buckets are).
pub(super) fn searches_needed(result: Option<&Value>, plan: &AggregationPlan) -> usize {
    if let Some((searched, _)) = &plan.searched {
        return searched.searches();
    }
    if !plan
        .children
        .iter()
        .any(|c| c.searched.is_some() || !c.children.is_empty())
    {
        return 0;
    }
    let buckets: Vec<&Value> = match result.and_then(|r| r.get("buckets")) {
        Some(Value::Array(list)) => list.iter().collect(),
        Some(Value::Object(by_key)) => by_key.values().collect(),
        _ => Vec::new(),
    };
    buckets
        .into_iter()
        .flat_map(|b| {
            plan.children
                .iter()
                .map(move |c| searches_needed(b.get(&c.name), c))
        })
        .fold(0, usize::saturating_add)
}

impl Rewrite<'_> {
    /// Counts `more` searches toward the request's, refusing them all when they would make more
    /// than `max_buckets`.
    pub(super) fn count_searches(&self, more: usize, path: &str) -> Result<(), SearchError> {
        if more == 0 {
            return Ok(());
        }
        let made = self.searches.get().saturating_add(more);
        self.searches.set(made);
        let max = self.limits.max_buckets as usize;
        within(made, max, "max_buckets", path, || {
            format!("the filter aggregations of all buckets make more than {max} searches")
        })
    }

    /// The result of a searched aggregation inside the buckets whose filters are `filters`.
    pub(super) fn run_searched(
        &self,
        searched: &Searched,
        sub_aggs: Option<&Value>,
        filters: &[Value],
    ) -> Result<Value, SearchError> {
        match searched {
            Searched::One(query) => self.bucket_search(query, sub_aggs, filters),
            Searched::Ranges { ranges, keyed } => {
                self.range_buckets(ranges, *keyed, sub_aggs, filters)
            }
            Searched::Dated { buckets, interval } => {
                let mut list = Vec::with_capacity(buckets.len());
                for b in buckets {
                    let mut bucket = Map::new();
                    bucket.insert("key_as_string".into(), json!(b.text));
                    bucket.insert("key".into(), json!(b.key));
                    if let Value::Object(counted) =
                        self.bucket_search(&b.query, sub_aggs, filters)?
                    {
                        bucket.extend(counted);
                    }
                    list.push(Value::Object(bucket));
                }
                Ok(json!({"buckets": list, "interval": interval}))
            }
            Searched::Adjacency {
                filters: named,
                separator,
            } => {
                let mut buckets = Vec::new();
                for (i, (name, query)) in named.iter().enumerate() {
                    let mut cells = vec![(name.clone(), query.clone())];
                    for (other, with) in &named[i + 1..] {
                        cells.push((
                            format!("{name}{separator}{other}"),
                            json!({"bool": {"filter": [query, with]}}),
                        ));
                    }
                    for (key, query) in cells {
                        let bucket = self.bucket_search(&query, sub_aggs, filters)?;
                        if bucket["doc_count"].as_u64().is_some_and(|n| n > 0) {
                            let mut keyed = Map::new();
                            keyed.insert("key".into(), json!(key));
                            if let Value::Object(counted) = bucket {
                                keyed.extend(counted);
                            }
                            buckets.push(Value::Object(keyed));
                        }
                    }
                }
                buckets.sort_by(|a, b| {
                    a["key"]
                        .as_str()
                        .unwrap_or_default()
                        .cmp(b["key"].as_str().unwrap_or_default())
                });
                Ok(json!({ "buckets": buckets }))
            }
            Searched::Many {
                filters: named,
                keyed,
                other,
            } => {
                let mut buckets = Vec::with_capacity(named.len() + 1);
                for (key, query) in named {
                    let bucket = self.bucket_search(query, sub_aggs, filters)?;
                    buckets.push((key.clone(), bucket));
                }
                if let Some(other) = other {
                    let none = json!({"bool": {"must_not": named.iter().map(|(_, q)| q.clone()).collect::<Vec<_>>()}});
                    let bucket = self.bucket_search(&none, sub_aggs, filters)?;
                    buckets.push((Some(other.clone()), bucket));
                }
                Ok(if *keyed {
                    let mut by_name = Map::new();
                    for (key, bucket) in buckets {
                        by_name.insert(key.unwrap_or_default(), bucket);
                    }
                    json!({ "buckets": by_name })
                } else {
                    let list: Vec<Value> = buckets
                        .into_iter()
                        .map(|(key, mut bucket)| {
                            if let (Some(k), Some(b)) = (key, bucket.as_object_mut()) {
                                b.insert("key".into(), json!(k));
                            }
                            bucket
                        })
                        .collect();
                    json!({ "buckets": list })
                })
            }
        }
    }

    /// The buckets of a range aggregation run as searches, in the order asked.
    fn range_buckets(
        &self,
        ranges: &[RangeBucket],
        keyed: bool,
        sub_aggs: Option<&Value>,
        filters: &[Value],
    ) -> Result<Value, SearchError> {
        let mut by_key = Map::new();
        let mut list = Vec::with_capacity(ranges.len());
        for range in ranges {
            let counted = self.bucket_search(&range.query, sub_aggs, filters)?;
            let mut bucket = Map::new();
            bucket.insert("key".into(), json!(range.key));
            for (name, value) in &range.shown {
                bucket.insert((*name).into(), value.clone());
            }
            if let Value::Object(counted) = counted {
                bucket.extend(counted);
            }
            if keyed {
                bucket.remove("key");
                by_key.insert(range.key.clone(), Value::Object(bucket));
            } else {
                list.push(Value::Object(bucket));
            }
        }
        Ok(if keyed {
            json!({ "buckets": by_key })
        } else {
            json!({ "buckets": list })
        })
    }

    /// One bucket: `{"doc_count": …, sub-aggregations …}` for the documents the request's query,
    /// the enclosing buckets' filters and `query` select.
    fn bucket_search(
        &self,
        query: &Value,
        sub_aggs: Option<&Value>,
        filters: &[Value],
    ) -> Result<Value, SearchError> {
        let mut all = filters.to_vec();
        all.push(query.clone());
        let mut body =
            json!({"size": 0, "track_total_hits": true, "query": self.bucket_query(all)});
        if let Some(aggs) = sub_aggs {
            body["aggs"] = aggs.clone();
        }
        let response = (self.sub)(&body)?;
        let mut bucket = Map::new();
        bucket.insert(
            "doc_count".into(),
            response["hits"]["total"]["value"].clone(),
        );
        if let Some(Value::Object(results)) = response.get("aggregations") {
            bucket.extend(results.clone());
        }
        Ok(Value::Object(bucket))
    }
}

/// One range of an `ip_range` aggregation: `from` (included) and `to` (excluded) addresses, or a
/// CIDR `mask` (its first address to the one after its last), with an optional `key`.
fn ip_range_bucket(field: &str, range: &Value, path: &str) -> Result<RangeBucket, SearchError> {
    let r = options_of(
        range,
        &["from", "to", "key", "mask"],
        ("a range", "an ip range"),
        path,
    )?;
    let address = |key: &str| -> Result<Option<Ipv6Addr>, SearchError> {
        match r.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v.as_str().and_then(ip_address).map(Some).ok_or_else(|| {
                SearchError::dsl(
                    format!("{path}.{key}"),
                    format!(
                        "'{}' is not an IP string literal",
                        v.as_str().map_or_else(|| v.to_string(), str::to_owned)
                    ),
                )
            }),
        }
    };
    let (from, to, default_key) = match r.get("mask") {
        Some(mask) => {
            if r.contains_key("from") || r.contains_key("to") {
                return Err(SearchError::dsl(
                    path,
                    "a range with a mask cannot also have from or to",
                ));
            }
            let text = mask.as_str().unwrap_or_default();
            let (first, last) = ip_block(text).ok_or_else(|| {
                SearchError::dsl(
                    format!("{path}.mask"),
                    format!("'{text}' is not a CIDR mask such as 192.168.0.0/16"),
                )
            })?;
            // The address after the block; none when the block ends the address space.
            let after = u128::from(last).checked_add(1).map(Ipv6Addr::from);
            (Some(first), after, text.to_owned())
        }
        None => {
            let (from, to) = (address("from")?, address("to")?);
            let end = |ip: Option<Ipv6Addr>| ip.map_or_else(|| "*".to_owned(), ip_text);
            (from, to, format!("{}-{}", end(from), end(to)))
        }
    };
    let key = key_of(r, || default_key, path)?;
    let mut bounds = Map::new();
    if let Some(from) = from {
        bounds.insert("gte".into(), json!(ip_text(from)));
    }
    if let Some(to) = to {
        bounds.insert("lt".into(), json!(ip_text(to)));
    }
    let query = if bounds.is_empty() {
        json!({"exists": {"field": field}})
    } else {
        json!({"range": {field: bounds}})
    };
    let mut shown = Vec::new();
    if let Some(from) = from {
        shown.push(("from", json!(ip_text(from))));
    }
    if let Some(to) = to {
        shown.push(("to", json!(ip_text(to))));
    }
    Ok(RangeBucket {
        key,
        shown,
        order: (from.map(u128::from), to.map(u128::from)),
        query,
    })
}

/// The `field` of a range aggregation run as searches (`what`: "an ip_range", for messages) and
/// its `keyed` (false when not given).
fn field_and_keyed<'a>(
    o: &'a Map<String, Value>,
    what: &str,
    path: &str,
) -> Result<(&'a str, bool), SearchError> {
    let field = o
        .get("field")
        .and_then(Value::as_str)
        .ok_or_else(|| SearchError::dsl(path, format!("{what} aggregation needs a field")))?;
    let keyed = match o.get("keyed") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            return Err(SearchError::dsl(
                path,
                format!("keyed must be true or false, found {v}"),
            ));
        }
    };
    Ok((field, keyed))
}

/// The options object of a range aggregation or of one of its ranges, refusing any not `allowed`
/// (`names`: what "must be an object", and what an unknown option is "of", for messages).
fn options_of<'a>(
    body: &'a Value,
    allowed: &[&str],
    (noun, of): (&str, &str),
    path: &str,
) -> Result<&'a Map<String, Value>, SearchError> {
    let Value::Object(o) = body else {
        return Err(SearchError::dsl(path, format!("{noun} must be an object")));
    };
    if let Some(other) = o.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(SearchError::dsl(
            format!("{path}.{other}"),
            format!("unknown option [{other}] of {of}"),
        ));
    }
    Ok(o)
}

/// The `ranges` of a range aggregation (`what`: "an ip_range", and the form of a range, for
/// messages): a list of at least one and at most `max_buckets`.
fn ranges_of<'a>(
    o: &'a Map<String, Value>,
    (what, form): (&str, &str),
    path: &str,
    limits: &SearchLimits,
) -> Result<&'a [Value], SearchError> {
    let Some(Value::Array(listed)) = o.get("ranges") else {
        return Err(SearchError::dsl(
            path,
            format!("{what} aggregation needs [ranges]: a list of {form}"),
        ));
    };
    if listed.is_empty() {
        return Err(SearchError::dsl(path, "No [ranges] specified"));
    }
    let max = limits.max_buckets as usize;
    within(listed.len(), max, "max_buckets", path, || {
        format!("{what} aggregation of more than {max} ranges")
    })?;
    Ok(listed)
}

/// A range's `key`, or `default` when it has none.
fn key_of(
    r: &Map<String, Value>,
    default: impl FnOnce() -> String,
    path: &str,
) -> Result<String, SearchError> {
    match r.get("key") {
        None | Some(Value::Null) => Ok(default()),
        Some(Value::String(k)) => Ok(k.clone()),
        Some(v) => Err(SearchError::dsl(
            format!("{path}.key"),
            format!("a key must be text, found {v}"),
        )),
    }
}
