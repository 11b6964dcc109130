//! Limits on the work one search may make the embedded backend do, and on how far documents may
//! grow a mapping, so that no request body or document can hang it or exhaust memory. Each limit has a default (OpenSearch's own where it has one) that the owner of
//! the backend can change: [`crate::EmbeddedBackend::open_with_limits`], or `name=value` overrides
//! ([`SearchLimits::apply_overrides`]; the CLI reads them from `TOOLPLAN_SEARCH_LIMITS`). An
//! index's settings (`index.max_result_window` …, [`crate::settings`]) can lower some of them for
//! that index, never raise them.
//!
//! | limit | default | exceeded |
//! |---|---|---|
//! | `timeout` | 30s | the search is stopped and fails naming the budget (a `"timeout"` in the body instead returns the hits found so far with `timed_out: true`, as OpenSearch); also the longest a change to the aliases or a new index waits for another process that holds the alias table's lock |
//! | `max_result_window` | 10000 | `from + size` above it is refused (OpenSearch's `index.max_result_window`); also the most hits all `top_hits` of a request return together |
//! | `max_docvalue_fields` | 100 | a search asking for more `docvalue_fields` is refused (`index.max_docvalue_fields_search`) |
//! | `max_inner_result_window` | 100 | `top_hits` and collapse `inner_hits` `from + size` above it is refused (`index.max_inner_result_window`) |
//! | `max_slop` | 50 | a phrase `slop` above it is refused (phrase matching with a large slop costs time and memory per document; at most 255) |
//! | `max_nested_depth` | 20 | queries or aggregations nested deeper are refused |
//! | `max_clause_count` | 1024 | a query with more clauses (bool clauses, match terms, multi_match fields) is refused (`indices.query.bool.max_clause_count`) |
//! | `max_terms_count` | 65536 | a `terms` or `ids` query with more values is refused (`index.max_terms_count`) |
//! | `max_pattern_length` | 1000 | a longer `wildcard` or `prefix` pattern is refused (`index.max_regex_length`) |
//! | `max_buckets` | 65535 | a `terms` or `multi_terms` `size` above it is refused, and aggregations making more buckets fail (`search.max_buckets`); also the most searches the `filter`, `filters` and `missing` buckets of a request make |
//! | `max_aggregation_memory` | 500000000 | aggregations needing more bytes fail |
//! | `max_mapped_fields` | 1000 | a document whose new fields would make the mapping larger (fields, sub-fields and objects) is refused, and so is a mapping that large (`index.mapping.total_fields.limit`) |
//! | `max_multi_searches` | 100 | a `multi_search` tool call with more searches is refused (each runs under the limits above) |
//! | `max_filter_paths` | 100 | a `filter_path` with more paths is refused |
//! | `max_aliases` | 10000 | putting an alias on an index when the aliases of all indices would hold more (alias, index) pairs is refused |
//! | `max_script_fields` | 32 | a search asking for more `script_fields` is refused (`index.max_script_fields`; script fields themselves are refused as unsupported) |
//! | `max_rescore_window` | 10000 | a `rescore` `window_size` above it is refused (`index.max_rescore_window`; rescoring itself is refused as unsupported) |
//! | `max_mapping_depth` | 20 | a document whose new objects would sit deeper is refused (`index.mapping.depth.limit`) |

use std::time::Duration;

use serde_json::Value;

use crate::error::SearchError;

/// The default of [`SearchLimits::max_result_window`] (OpenSearch's `index.max_result_window`).
pub const DEFAULT_MAX_RESULT_WINDOW: usize = 10_000;

/// The largest phrase slop tantivy matches correctly (it keeps slop in a byte).
pub const SLOP_CEILING: u32 = 255;

/// Limits on one search of the embedded backend, and on the mappings documents grow. See the [module documentation](self) for what each
/// bounds and what exceeding it does.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchLimits {
    /// Longest one search may run before it is stopped and fails.
    pub timeout: Duration,
    /// Most `from + size` of a request.
    pub max_result_window: usize,
    /// Most `from + size` of a `top_hits` aggregation.
    pub max_inner_result_window: usize,
    /// Largest phrase `slop` (at most [`SLOP_CEILING`] applies whatever is set).
    pub max_slop: u32,
    /// Deepest nesting of query clauses, and of aggregations.
    pub max_nested_depth: usize,
    /// Most clauses in one query.
    pub max_clause_count: usize,
    /// Most values of one `terms` or `ids` query.
    pub max_terms_count: usize,
    /// Longest `wildcard` or `prefix` pattern, in characters.
    pub max_pattern_length: usize,
    /// Most buckets the aggregations of one request may make.
    pub max_buckets: u32,
    /// Most bytes the aggregations of one request may use.
    pub max_aggregation_memory: u64,
    /// Most fields, sub-fields and objects in one index's mapping, counting those documents add.
    pub max_mapped_fields: usize,
    /// Most levels of objects in one index's mapping that documents may add.
    pub max_mapping_depth: usize,
    /// Most searches in one `multi_search` tool call.
    pub max_multi_searches: usize,
    /// Most `docvalue_fields` one search may ask for.
    pub max_docvalue_fields: usize,
    /// Most (alias, index) pairs the aliases of all indices hold.
    pub max_aliases: usize,
    /// Most paths in one `filter_path`.
    pub max_filter_paths: usize,
    /// Most `script_fields` one search may ask for (checked before they are refused as
    /// unsupported, as OpenSearch checks them).
    pub max_script_fields: usize,
    /// Largest `window_size` of a `rescore` (checked before rescoring is refused as
    /// unsupported).
    pub max_rescore_window: usize,
}

impl Default for SearchLimits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            max_result_window: DEFAULT_MAX_RESULT_WINDOW,
            max_inner_result_window: 100,
            max_slop: 50,
            max_nested_depth: 20,
            max_clause_count: 1024,
            max_terms_count: 65_536,
            max_pattern_length: 1000,
            max_buckets: 65_535,
            max_aggregation_memory: 500_000_000,
            max_mapped_fields: 1000,
            max_mapping_depth: 20,
            max_multi_searches: 100,
            max_docvalue_fields: 100,
            max_aliases: 10_000,
            max_filter_paths: 100,
            max_script_fields: 32,
            max_rescore_window: 10_000,
        }
    }
}

impl SearchLimits {
    /// Sets the limit `name` (a field name of this struct) from text: a time value (`10s`, `500ms`)
    /// for `timeout`, a whole number for the others.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), SearchError> {
        let value = value.trim();
        let bad = |what: &str| {
            SearchError::InvalidParameter(format!("search limit {name}: '{value}' is not {what}"))
        };
        let number = || value.parse::<u64>().map_err(|_| bad("a whole number"));
        let size = || usize::try_from(number()?).map_err(|_| bad("a whole number that fits"));
        match name {
            "timeout" => {
                self.timeout = parse_time(value)
                    .filter(|d| !d.is_zero())
                    .ok_or_else(|| bad("a time above 0 such as 30s or 500ms"))?;
            }
            "max_result_window" => self.max_result_window = size()?,
            "max_inner_result_window" => self.max_inner_result_window = size()?,
            "max_slop" => {
                self.max_slop = u32::try_from(number()?).map_err(|_| bad("a slop"))?;
            }
            "max_nested_depth" => self.max_nested_depth = size()?,
            "max_clause_count" => self.max_clause_count = size()?,
            "max_terms_count" => self.max_terms_count = size()?,
            "max_pattern_length" => self.max_pattern_length = size()?,
            "max_buckets" => {
                self.max_buckets = u32::try_from(number()?).map_err(|_| bad("a bucket count"))?;
            }
            "max_aggregation_memory" => self.max_aggregation_memory = number()?,
            "max_mapped_fields" => self.max_mapped_fields = size()?,
            "max_mapping_depth" => self.max_mapping_depth = size()?,
            "max_multi_searches" => self.max_multi_searches = size()?,
            "max_docvalue_fields" => self.max_docvalue_fields = size()?,
            "max_aliases" => self.max_aliases = size()?,
            "max_filter_paths" => self.max_filter_paths = size()?,
            "max_script_fields" => self.max_script_fields = size()?,
            "max_rescore_window" => self.max_rescore_window = size()?,
            other => {
                return Err(SearchError::InvalidParameter(format!(
                    "unknown search limit '{other}' (timeout, max_result_window, max_inner_result_window, max_slop, max_nested_depth, max_clause_count, max_terms_count, max_pattern_length, max_buckets, max_aggregation_memory, max_mapped_fields, max_mapping_depth, max_multi_searches, max_docvalue_fields, max_aliases, max_filter_paths, max_script_fields, max_rescore_window)"
                )));
            }
        }
        Ok(())
    }

    /// Applies `name=value` overrides separated by commas or spaces
    /// (`timeout=10s,max_result_window=50000`).
    pub fn apply_overrides(&mut self, spec: &str) -> Result<(), SearchError> {
        for item in spec
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty())
        {
            let (name, value) = item.split_once('=').ok_or_else(|| {
                SearchError::InvalidParameter(format!(
                    "search limit '{item}' is not name=value (timeout=10s)"
                ))
            })?;
            self.set(name.trim(), value)?;
        }
        Ok(())
    }

    /// The limits on what documents add to a mapping.
    pub fn mapping(&self) -> crate::mapping::MappingLimits {
        crate::mapping::MappingLimits {
            max_fields: self.max_mapped_fields,
            max_depth: self.max_mapping_depth,
        }
    }

    /// The phrase slop that applies: [`Self::max_slop`], at most [`SLOP_CEILING`].
    pub fn slop(&self) -> u32 {
        self.max_slop.min(SLOP_CEILING)
    }
}

/// Refuses `value` over `max`: an error at `path` saying `what` and naming the search limit.
pub(crate) fn within(
    value: usize,
    max: usize,
    limit: &str,
    path: &str,
    what: impl FnOnce() -> String,
) -> Result<(), SearchError> {
    if value > max {
        return Err(SearchError::dsl(
            path,
            format!("{} (search limit {limit})", what()),
        ));
    }
    Ok(())
}

/// Refuses the hits of an inner search (`top_hits`, a collapse's `inner_hits`) whose `from + size`
/// is over `max_inner_result_window`; `what` words the error from the limit and the window.
pub(crate) fn inner_window(
    from: u64,
    size: u64,
    limits: &SearchLimits,
    path: &str,
    what: impl FnOnce(usize, u128) -> String,
) -> Result<(), SearchError> {
    let window = u128::from(from) + u128::from(size);
    let max = limits.max_inner_result_window;
    if window > max as u128 {
        return Err(SearchError::dsl(
            path,
            format!(
                "{} (search limit max_inner_result_window)",
                what(max, window)
            ),
        ));
    }
    Ok(())
}

/// An OpenSearch time value: a number and a unit (`nanos`, `micros`, `ms`, `s`, `m`, `h`, `d`), or
/// `0`. `None` when it is not one.
pub fn parse_time(text: &str) -> Option<Duration> {
    let text = text.trim();
    if text == "0" {
        return Some(Duration::ZERO);
    }
    let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let n: f64 = digits
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)?;
    let seconds = match &text[digits.len()..] {
        "nanos" => 1e-9,
        "micros" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(n * seconds).ok()
}

/// The `timeout` of a search body: `None` for none (absent, `null` or `-1`), an error naming the
/// key when it is not a time value.
pub fn body_timeout(value: Option<&Value>) -> Result<Option<Duration>, SearchError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim() == "-1" => Ok(None),
        Some(Value::String(s)) => parse_time(s).map(Some).ok_or_else(|| {
            SearchError::dsl(
                "timeout",
                format!("failed to parse [{s}] as a time value: use a unit such as 1s or 500ms"),
            )
        }),
        Some(other) => Err(SearchError::dsl(
            "timeout",
            format!("timeout must be a time value such as \"1s\", found {other}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn time_values() {
        assert_eq!(parse_time("1s"), Some(Duration::from_secs(1)));
        assert_eq!(parse_time("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_time("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_time("0"), Some(Duration::ZERO));
        for bad in ["", "10", "1x", "-1s", "s", "1e400s"] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
        assert_eq!(body_timeout(Some(&json!("-1"))).ok(), Some(None));
        assert!(body_timeout(Some(&json!(5))).is_err());
        assert!(body_timeout(Some(&json!("5"))).is_err());
    }

    #[test]
    fn overrides() {
        let mut l = SearchLimits::default();
        l.apply_overrides("timeout=2s, max_result_window=50000 max_slop=300")
            .expect("valid");
        assert_eq!(l.timeout, Duration::from_secs(2));
        assert_eq!(l.max_result_window, 50_000);
        assert_eq!(l.slop(), SLOP_CEILING);
        for bad in ["nope=1", "timeout", "timeout=0s", "max_buckets=-1"] {
            assert!(l.clone().apply_overrides(bad).is_err(), "{bad}");
        }
    }
}
