//! A search request body run on one embedded index: query, paging, sorting, `_source` filtering,
//! total hits and aggregations, answered in OpenSearch's response shape. The request is checked
//! against the [`SearchLimits`] first; while it runs, its [`Stop`] is watched between matching
//! documents, between hits read and between `top_hits` searches.

use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime as ChronoDate, Utc};
use serde_json::{Map, Value, json};
use tantivy::collector::{Count, TopDocs};
use tantivy::query::{AllQuery, Query, TermQuery};
use tantivy::schema::Value as _;
use tantivy::{DocAddress, Index, Order, Searcher, TantivyDocument};

use super::budget::{Bounded, Reason, Stop};
use super::collapse::CollapseRequest;
use super::fetch::Fetch;
use super::query::QueryTranslator;
use super::schema::IndexSchema;
use super::sort::{Key, Missing, Mode, SortCollector, SortSpec};
use crate::error::SearchError;
use crate::limits::{SearchLimits, body_timeout, within};

const KNOWN_KEYS: &[&str] = &[
    "query",
    "size",
    "from",
    "sort",
    "_source",
    "track_total_hits",
    "aggs",
    "aggregations",
    "timeout",
    "track_scores",
    "min_score",
    "explain",
    "version",
    "seq_no_primary_term",
    "search_after",
    "collapse",
    "fields",
    "docvalue_fields",
    "stored_fields",
];
const UNSUPPORTED_KEYS: &[&str] = &[
    "highlight",
    "suggest",
    "knn",
    "script_fields",
    "rescore",
    "pit",
    "post_filter",
    "indices_boost",
    "ext",
    "profile",
    "runtime_mappings",
];

/// One index being searched, and what bounds the search.
pub struct Env<'a> {
    /// The index name, for hits and messages.
    pub name: &'a str,
    /// The index.
    pub index: &'a Index,
    /// Its schema.
    pub schema: &'a IndexSchema,
    /// The searcher all searches of one request share.
    pub searcher: &'a Searcher,
    /// "now" for date math.
    pub now: ChronoDate<Utc>,
    /// What a request may ask for.
    pub limits: &'a SearchLimits,
    /// Raised to stop the search.
    pub stop: &'a Arc<Stop>,
    /// The searches the aggregations of the request (at any depth) have made so far.
    pub searches: &'a std::cell::Cell<usize>,
}

impl Env<'_> {
    /// An error when the search must stop without an answer (over budget, cancelled).
    pub fn check(&self) -> Result<(), SearchError> {
        match self.stop.reason() {
            Reason::Running | Reason::TimedOut => Ok(()),
            Reason::OverBudget => Err(SearchError::TimedOut {
                index: self.name.to_owned(),
                budget: self.limits.timeout,
            }),
            Reason::Cancelled => Err(SearchError::Cancelled(self.name.to_owned())),
        }
    }
}

/// Runs `body` on the index and returns the OpenSearch-shaped response.
pub fn run(env: &Env<'_>, body: &Value) -> Result<Value, SearchError> {
    let (index_name, index, schema, searcher, now) =
        (env.name, env.index, env.schema, env.searcher, env.now);
    env.check()?;
    let started = Instant::now();
    let empty = Map::new();
    let obj = match body {
        Value::Object(o) => o,
        Value::Null => &empty,
        _ => {
            return Err(SearchError::dsl(
                "body",
                "a search body must be a JSON object",
            ));
        }
    };
    // Before the keys: `rescore` beside `collapse` is refused for that, in OpenSearch's words.
    let collapse = CollapseRequest::of_body(obj, env.limits)?;
    check_refused_shapes(obj, env.limits)?;
    for key in obj.keys() {
        if UNSUPPORTED_KEYS.contains(&key.as_str()) {
            return Err(SearchError::Unsupported {
                path: key.clone(),
                clause: key.clone(),
            });
        }
        if !KNOWN_KEYS.contains(&key.as_str()) {
            return Err(SearchError::dsl(
                key,
                format!("unknown key [{key}] in the search body"),
            ));
        }
    }
    body_timeout(obj.get("timeout"))?;
    let size = count(obj.get("size"), "size", 10)?;
    let from = count(obj.get("from"), "from", 0)?;
    let (size, from) = result_window(size, from, env.limits.max_result_window)?;
    let translator = QueryTranslator::new(index, schema, now, env.limits);
    let mut unbounded: Box<dyn Query> = match obj.get("query") {
        None | Some(Value::Null) => Box::new(AllQuery),
        Some(q) => translator.translate(q, "query")?,
    };
    match obj.get("min_score") {
        None | Some(Value::Null) => {}
        Some(v) => {
            let min = v.as_f64().ok_or_else(|| {
                SearchError::dsl(
                    "min_score",
                    format!("[min_score] must be a number, found {v}"),
                )
            })?;
            unbounded = Box::new(super::query::MinScore::new(unbounded, min as f32));
        }
    }
    let mut specs = super::sort::specs(obj.get("sort"), schema)?;
    let after = obj
        .get("search_after")
        .map(|v| super::sort::search_after(v, &specs))
        .transpose()?;
    let collapse_on = collapse.as_ref().map(|c| c.on(schema)).transpose()?;
    // Collapsing by score: the sort collector, by score, without showing it as a sort value.
    let score_alone = collapse_on.is_some() && specs.is_empty();
    if score_alone {
        specs.push(SortSpec {
            key: Key::Score,
            desc: true,
            missing: Missing::Last,
            mode: Mode::Max,
        });
    }
    // By score alone (the default), tantivy's own top-n path; any other sort is ours.
    let by_score = after.is_none()
        && collapse_on.is_none()
        && (specs.is_empty() || matches!(specs.as_slice(), [s] if s.key == Key::Score && s.desc));
    let show_scores = !by_score
        && (obj.get("track_scores") == Some(&Value::Bool(true))
            || specs.iter().any(|s| s.key == Key::Score));
    // A query refusing what it was asked while it runs (an intervals pattern matching too many
    // terms) is the request's fault, not the index's.
    let tantivy_err = |e: tantivy::TantivyError| match e {
        tantivy::TantivyError::InvalidArgument(message) => SearchError::dsl("query", message),
        other => SearchError::Index(other.to_string()),
    };

    // One pass over the matches counts them and collects the page of hits, except where the count
    // is cheaper apart: a term query's count is its term's document frequency, without visiting
    // the matches, and the page by score then skips the blocks that cannot make it (a term on a
    // keyword of 100,000 documents: 0.09 ms p50 apart, 0.15 ms in one pass).
    let cheap_count = unbounded.is::<TermQuery>();
    let term_count = || unbounded.count(searcher).map_err(tantivy_err);
    let query = Bounded::new(
        unbounded.box_clone(),
        Arc::clone(env.stop),
        !translator.has_phrase_query(),
    );
    let (total, hits): (usize, Vec<Hit>) = if size == 0 && cheap_count {
        (term_count()?, Vec::new())
    } else if size == 0 {
        (query.count(searcher).map_err(tantivy_err)?, Vec::new())
    } else {
        if by_score {
            let top = TopDocs::with_limit(size).and_offset(from);
            let by_score = top.order_by_score();
            let (total, top) = if cheap_count {
                let total = term_count()?;
                (
                    total,
                    searcher.search(&query, &by_score).map_err(tantivy_err)?,
                )
            } else {
                searcher
                    .search(&query, &(Count, by_score))
                    .map_err(tantivy_err)?
            };
            let hits = top.into_iter().map(|(s, a)| (Some(s), Vec::new(), a, None));
            (total, hits.collect())
        } else {
            let sorter = SortCollector {
                specs: Arc::new(specs),
                limit: from.saturating_add(size),
                after,
                collapse: collapse_on,
            };
            let (total, sorted) =
                searcher
                    .search(&query, &(Count, sorter))
                    .map_err(|e| match e {
                        // The collapse field had several values in a document.
                        tantivy::TantivyError::InvalidArgument(m) => {
                            SearchError::dsl("collapse", m)
                        }
                        e => tantivy_err(e),
                    })?;
            let hits = sorted.into_iter().skip(from).map(|s| {
                let values = if score_alone { Vec::new() } else { s.values };
                (
                    (show_scores || score_alone).then_some(s.score),
                    values,
                    s.address,
                    s.group,
                )
            });
            (total, hits.collect())
        }
    };

    let source_filter = SourceFilter::parse(obj.get("_source"))?;
    let fetch = Fetch::of_body(obj, schema, env.limits)?;
    let shows_source = fetch.shows_source(obj.contains_key("_source"));
    let show_version = flag(obj, "version")?;
    let show_seq_no = flag(obj, "seq_no_primary_term")?;
    let mut out_hits = Vec::with_capacity(hits.len());
    let mut max_score: Option<f32> = None;
    for (score, sort_values, address, group) in hits {
        env.check()?;
        let doc: TantivyDocument = searcher.doc(address).map_err(tantivy_err)?;
        let id = doc
            .get_first(schema.id)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned();
        let source: Value = doc
            .get_first(schema.source)
            .and_then(|v| v.as_bytes())
            .and_then(|b| serde_json::from_slice(b).ok())
            .unwrap_or(Value::Null);
        if let Some(s) = score {
            max_score = Some(max_score.map_or(s, |m| m.max(s)));
        }
        let mut hit = json!({"_index": index_name, "_id": id, "_score": score});
        if let Some(h) = hit.as_object_mut() {
            if !fetch.shows_id() {
                h.remove("_id");
            }
            if shows_source && let Some(src) = source_filter.apply(&source) {
                h.insert("_source".into(), src);
            }
            let fields = fetch.fields_of(&source, schema);
            if !fields.is_empty() {
                h.insert("fields".into(), Value::Object(fields));
            }
            if !sort_values.is_empty() {
                h.insert("sort".into(), Value::Array(sort_values));
            }
            let ignored = IndexSchema::ignored_of(&doc, schema.ignored);
            if !ignored.is_empty() {
                h.insert("_ignored".into(), Value::Array(ignored));
            }
            if show_version || show_seq_no {
                let meta = IndexSchema::meta_at(
                    searcher.segment_reader(address.segment_ord),
                    address.doc_id,
                )
                .map_err(tantivy_err)?;
                if show_version {
                    h.insert("_version".into(), json!(meta.map_or(1, |m| m.version)));
                }
                if show_seq_no {
                    h.insert("_seq_no".into(), json!(meta.map_or(0, |m| m.seq_no)));
                    // One primary, never replaced.
                    h.insert("_primary_term".into(), json!(1));
                }
            }
        }
        if let (Some(c), Some(group)) = (&collapse, group) {
            for (name, inner) in c.inner_searches(obj.get("query"), &group) {
                let response = run(env, &inner)?;
                CollapseRequest::attach(&mut hit, &name, &response);
            }
            c.show_group(&mut hit, group);
        }
        out_hits.push(hit);
    }

    let mut hits_obj = Map::new();
    match obj.get("track_total_hits") {
        // -1 is OpenSearch's "not tracked", as false.
        Some(Value::Bool(false)) => {}
        Some(Value::Number(n)) if n.as_i64() == Some(-1) => {}
        Some(Value::Number(n)) if n.as_i64().is_some_and(|n| n < -1) => {
            return Err(SearchError::dsl(
                "track_total_hits",
                format!("[track_total_hits] parameter must be positive or equals to -1, got {n}"),
            ));
        }
        Some(Value::Number(n)) if n.as_u64().is_some_and(|limit| (total as u64) > limit) => {
            hits_obj.insert("total".into(), json!({"value": n, "relation": "gte"}));
        }
        _ => {
            hits_obj.insert("total".into(), json!({"value": total, "relation": "eq"}));
        }
    }
    hits_obj.insert("max_score".into(), json!(max_score));
    hits_obj.insert("hits".into(), Value::Array(out_hits));
    let mut response = json!({
        "took": 0,
        "timed_out": env.stop.reason() == Reason::TimedOut,
        "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
        "hits": Value::Object(hits_obj),
    });
    let aggs = obj.get("aggs").or_else(|| obj.get("aggregations"));
    if let Some(aggs) = aggs {
        let key = if obj.contains_key("aggs") {
            "aggs"
        } else {
            "aggregations"
        };
        let query_json = obj
            .get("query")
            .cloned()
            .unwrap_or(json!({"match_all": {}}));
        // The searches aggregations make of their own (filter buckets, top_hits, calendar
        // spans) keep only the documents `min_score` keeps, as the aggregations here do.
        let min_score = obj.get("min_score").filter(|v| !v.is_null()).cloned();
        let sub = |body: &Value| match &min_score {
            // A search that sets its own (`null` for none) keeps it.
            Some(min) if body.get("min_score").is_none() => {
                let mut body = body.clone();
                body["min_score"] = min.clone();
                run(env, &body)
            }
            Some(_) => run(env, body),
            None => run(env, body),
        };
        let result = super::aggs::run(
            env.name,
            schema,
            searcher,
            &query,
            &query_json,
            aggs,
            key,
            env.limits,
            &sub,
            env.searches,
        )?;
        if let Some(r) = response.as_object_mut() {
            r.insert("aggregations".into(), result);
        }
    }
    env.check()?;
    if let Some(r) = response.as_object_mut() {
        r.insert("took".into(), json!(started.elapsed().as_millis() as u64));
        r.insert(
            "timed_out".into(),
            json!(env.stop.reason() == Reason::TimedOut),
        );
    }
    Ok(response)
}

/// `size` and `from` as counts, refused when `from + size` is over the result window (in
/// OpenSearch's words).
fn result_window(size: u64, from: u64, max: usize) -> Result<(usize, usize), SearchError> {
    let window = u128::from(size) + u128::from(from);
    match (usize::try_from(size), usize::try_from(from)) {
        (Ok(size), Ok(from)) if window <= max as u128 => Ok((size, from)),
        _ => Err(SearchError::dsl(
            "from",
            format!(
                "Result window is too large, from + size must be less than or equal to: [{max}] but was [{window}]. See the scroll api for a more efficient way to request large data sets. This limit can be set by changing the [index.max_result_window] index level setting. (search limit max_result_window)"
            ),
        )),
    }
}

/// The bounds OpenSearch checks on `script_fields` and `rescore` before anything else, checked
/// here before they are refused as unsupported (so that a request over them learns that first).
fn check_refused_shapes(
    obj: &Map<String, Value>,
    limits: &SearchLimits,
) -> Result<(), SearchError> {
    if let Some(Value::Object(fields)) = obj.get("script_fields") {
        let max = limits.max_script_fields;
        within(
            fields.len(),
            max,
            "max_script_fields",
            "script_fields",
            || {
                format!(
                    "Trying to retrieve too many script_fields. Must be less than or equal to: [{max}] but was [{}]. This limit can be set by changing the [index.max_script_fields] index level setting.",
                    fields.len()
                )
            },
        )?;
    }
    let rescores: Vec<&Value> = match obj.get("rescore") {
        Some(Value::Array(list)) => list.iter().collect(),
        Some(one) => vec![one],
        None => Vec::new(),
    };
    let max = limits.max_rescore_window;
    for rescore in rescores {
        if let Some(window) = rescore.get("window_size").and_then(Value::as_u64)
            && usize::try_from(window).map_or(true, |w| w > max)
        {
            return Err(SearchError::dsl(
                "rescore.window_size",
                format!(
                    "Rescore window [{window}] is too large. It must be less than [{max}]. (search limit max_rescore_window)"
                ),
            ));
        }
    }
    Ok(())
}

/// A boolean option of the body (absent: false).
fn flag(obj: &Map<String, Value>, name: &str) -> Result<bool, SearchError> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
        Some(other) => Err(SearchError::dsl(
            name,
            format!("[{name}] must be a boolean, found {other}"),
        )),
    }
}

/// One hit as collected: its score (when sorted by score), its sort values, where it is, its
/// group's value when collapsing.
type Hit = (Option<f32>, Vec<Value>, DocAddress, Option<Value>);

fn count(v: Option<&Value>, name: &str, default: u64) -> Result<u64, SearchError> {
    match v {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64().unwrap_or_default()),
        // OpenSearch's words.
        Some(Value::Number(n)) if n.as_i64().is_some_and(|n| n < 0) => Err(SearchError::dsl(
            name,
            format!("[{name}] parameter cannot be negative, found [{n}]"),
        )),
        Some(other) => Err(SearchError::dsl(
            name,
            format!("{name} must be a whole number of at least 0, found {other}"),
        )),
    }
}

/// The keys of a body's `sort` as written: each field with its order, if it names one.
pub(super) fn sort_specs(v: Option<&Value>) -> Result<Vec<(String, Option<Order>)>, SearchError> {
    let mut specs = Vec::new();
    for (i, (field, options)) in super::sort::items(v)?.into_iter().enumerate() {
        let order = match options.get("order").and_then(Value::as_str) {
            None => None,
            Some(o) if o.eq_ignore_ascii_case("asc") => Some(Order::Asc),
            Some(o) if o.eq_ignore_ascii_case("desc") => Some(Order::Desc),
            Some(o) => {
                return Err(SearchError::dsl(
                    format!("sort[{i}]"),
                    format!("unknown sort order '{o}'"),
                ));
            }
        };
        specs.push((field, order));
    }
    Ok(specs)
}

/// `_source`: `true`/`false`, a field pattern, a list of them, or `{"includes", "excludes"}`.
struct SourceFilter {
    enabled: bool,
    includes: Vec<String>,
    excludes: Vec<String>,
}

impl SourceFilter {
    fn parse(v: Option<&Value>) -> Result<SourceFilter, SearchError> {
        let list = |v: Option<&Value>| -> Vec<String> {
            match v {
                Some(Value::String(s)) => vec![s.clone()],
                Some(Value::Array(a)) => a
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
                _ => Vec::new(),
            }
        };
        Ok(match v {
            None | Some(Value::Null) | Some(Value::Bool(true)) => SourceFilter {
                enabled: true,
                includes: vec![],
                excludes: vec![],
            },
            Some(Value::Bool(false)) => SourceFilter {
                enabled: false,
                includes: vec![],
                excludes: vec![],
            },
            Some(s @ (Value::String(_) | Value::Array(_))) => SourceFilter {
                enabled: true,
                includes: list(Some(s)),
                excludes: vec![],
            },
            Some(Value::Object(o)) => SourceFilter {
                enabled: true,
                includes: list(o.get("includes").or_else(|| o.get("include"))),
                excludes: list(o.get("excludes").or_else(|| o.get("exclude"))),
            },
            Some(other) => {
                return Err(SearchError::dsl(
                    "_source",
                    format!(
                        "_source must be a boolean, a pattern, a list or an object, found {other}"
                    ),
                ));
            }
        })
    }

    fn apply(&self, source: &Value) -> Option<Value> {
        if !self.enabled {
            return None;
        }
        if self.includes.is_empty() && self.excludes.is_empty() {
            return Some(source.clone());
        }
        Some(filter_object(source, "", &self.includes, &self.excludes))
    }
}

fn pattern_match(pattern: &str, path: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == path || path.starts_with(&format!("{pattern}.")),
        Some((head, tail)) => {
            path.starts_with(head) && path.len() >= head.len() + tail.len() && path.ends_with(tail)
        }
    }
}

fn filter_object(v: &Value, prefix: &str, includes: &[String], excludes: &[String]) -> Value {
    let Value::Object(obj) = v else {
        return v.clone();
    };
    let mut out = Map::new();
    for (k, child) in obj {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        if excludes.iter().any(|p| pattern_match(p, &path)) {
            continue;
        }
        let included = includes.is_empty() || includes.iter().any(|p| pattern_match(p, &path));
        if included {
            out.insert(
                k.clone(),
                if excludes.is_empty() {
                    child.clone()
                } else {
                    filter_object(child, &path, &[], excludes)
                },
            );
        } else if child.is_object()
            && includes
                .iter()
                .any(|p| p.starts_with(&format!("{path}.")) || p.contains('*'))
        {
            let inner = filter_object(child, &path, includes, excludes);
            if inner.as_object().is_some_and(|o| !o.is_empty()) {
                out.insert(k.clone(), inner);
            }
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_filtering() {
        let doc = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": 4});
        let f = SourceFilter::parse(Some(&json!(["a", "b.c"]))).expect("parses");
        assert_eq!(f.apply(&doc), Some(json!({"a": 1, "b": {"c": 2}})));
        let f = SourceFilter::parse(Some(&json!({"excludes": ["b.d", "e"]}))).expect("parses");
        assert_eq!(f.apply(&doc), Some(json!({"a": 1, "b": {"c": 2}})));
        let f = SourceFilter::parse(Some(&json!(false))).expect("parses");
        assert_eq!(f.apply(&doc), None);
        let f = SourceFilter::parse(Some(&json!("b*"))).expect("parses");
        assert_eq!(f.apply(&doc), Some(json!({"b": {"c": 2, "d": 3}})));
    }
}
