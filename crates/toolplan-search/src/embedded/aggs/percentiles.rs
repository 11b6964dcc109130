//! `percentiles`: the options checked as OpenSearch checks them, and the `hdr` method computed as
//! OpenSearch's HDR histogram computes it.
//!
//! The default method (OpenSearch's t-digest) runs on tantivy's percentile sketch. With `hdr`,
//! OpenSearch records each value in HdrHistogram's `DoubleHistogram` and answers a percentile with
//! the highest value of the histogram bucket holding it. Those buckets depend only on the values:
//! a value `v` between `2^m` and `2^(m+1)` falls in a bucket `2^m / H` wide (`H` is half the
//! sub-buckets `number_of_significant_value_digits` asks for: 1024 for the default 3), aligned to
//! multiples of that width; and the histogram's smallest unit is `L / H`, where `L` is the largest
//! power of two not above the smallest value recorded (the histogram ranges itself to it). So the
//! answer is computed exactly from the distinct values and their counts, which tantivy's `terms`
//! aggregation gives (every value of the field under the bucket, up to `max_buckets` of them: more
//! is an error, not an approximation). tantivy counts a value once per document, while
//! OpenSearch records every value: a field where some document holds a value more than once is
//! refused ([`refuse_repeats`]).

use serde_json::{Map, Value, json};
use tantivy::collector::{Collector, SegmentCollector};
use tantivy::columnar::{Column, HasAssociatedColumnType};
use tantivy::query::Query;
use tantivy::{DateTime, DocId, Score, Searcher, SegmentOrdinal, SegmentReader};

use super::response::java_double;
use crate::error::SearchError;
use crate::limits::SearchLimits;
use crate::mapping::FieldKind;

/// The options of a `percentiles` request.
const OPTIONS: &[&str] = &["field", "missing", "percents", "keyed", "hdr", "tdigest"];
/// OpenSearch's default percents.
const DEFAULT_PERCENTS: &[f64] = &[1.0, 5.0, 25.0, 50.0, 75.0, 95.0, 99.0];
/// OpenSearch's default `number_of_significant_value_digits`.
const DEFAULT_DIGITS: u32 = 3;
/// The largest `number_of_significant_value_digits` HdrHistogram takes.
const MAX_DIGITS: u32 = 5;

/// A `percentiles` request with the `hdr` method, run as a `terms` listing of the field's values.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Hdr {
    /// Half the histogram's sub-buckets (`H`).
    half_count: f64,
    percents: Vec<f64>,
    keyed: bool,
    /// Where the request is, for messages.
    path: String,
}

/// Checks a `percentiles` request `body` at `path` (named `name`) on a field of kind `kind`
/// (`None` for a field the mapping lacks), and takes the method out of it: `Some` for `hdr`, whose
/// request then becomes a listing of the field's values ([`Hdr::terms_body`]); `None` for the
/// default, which tantivy runs.
pub(crate) fn take(
    body: &mut Value,
    name: &str,
    path: &str,
    kind: Option<&FieldKind>,
) -> Result<Option<Hdr>, SearchError> {
    let Value::Object(o) = body else {
        return Err(SearchError::dsl(path, "percentiles must be an object"));
    };
    if let Some(other) = o.keys().find(|k| !OPTIONS.contains(&k.as_str())) {
        let clause = if other == "script" {
            "script".to_owned()
        } else {
            format!("percentiles option {other}")
        };
        return Err(SearchError::Unsupported {
            path: format!("{path}.{other}"),
            clause,
        });
    }
    let percents = percents(o.get("percents"), name, path)?;
    if o.contains_key("percents") {
        o.insert("percents".into(), json!(percents));
    }
    let keyed = match o.get("keyed") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            return Err(SearchError::dsl(
                format!("{path}.keyed"),
                format!("[keyed] must be true or false, found {v}"),
            ));
        }
    };
    // Text and ip fields are refused where every aggregation's field is checked.
    if let Some(kind @ FieldKind::Keyword) = kind {
        let field = o.get("field").and_then(Value::as_str).unwrap_or_default();
        return Err(super::not_for_aggregation(field, kind, "percentiles", path));
    }
    let hdr = o.remove("hdr");
    let tdigest = o.remove("tdigest");
    if hdr.is_some() && tdigest.is_some() {
        return Err(SearchError::dsl(
            path,
            format!("[{name}] takes one method: hdr or tdigest, not both"),
        ));
    }
    if let Some(tdigest) = tdigest {
        check_tdigest(&tdigest, name, &format!("{path}.tdigest"))?;
        return Ok(None);
    }
    let Some(hdr) = hdr else {
        return Ok(None);
    };
    let digits = digits(&hdr, name, &format!("{path}.hdr"))?;
    Ok(Some(Hdr {
        half_count: half_count(digits),
        percents,
        keyed,
        path: path.to_owned(),
    }))
}

/// Refuses `what` (`percentiles` with `hdr`, `median_absolute_deviation`: a listing of the
/// field's values) on a field (`column`, named `shown`) where some document the query matches
/// holds one value more than once (the listing would count it once; OpenSearch's histogram
/// records it each time). Only columns with several values in a document are read.
pub(crate) fn refuse_repeats(
    what: &str,
    searcher: &Searcher,
    query: &dyn Query,
    column: &str,
    shown: &str,
    kind: &FieldKind,
    path: &str,
) -> Result<(), SearchError> {
    if !matches!(
        kind,
        FieldKind::Integer | FieldKind::Float | FieldKind::Date
    ) {
        return Ok(());
    }
    let check = RepeatCheck {
        column: column.to_owned(),
        kind: kind.clone(),
    };
    let repeats = searcher
        .search(query, &check)
        .map_err(|e| SearchError::Index(e.to_string()))?;
    if repeats {
        return Err(SearchError::Unsupported {
            path: path.to_owned(),
            clause: format!(
                "{what} on a field that holds a value more than once in a document ([{shown}])"
            ),
        });
    }
    Ok(())
}

/// Reads a document's values of a column, as bits, onto a list.
type ValuesOf = Box<dyn Fn(DocId, &mut Vec<u64>) + Send>;

/// Whether a matched document holds a value of a numeric column more than once.
struct RepeatCheck {
    column: String,
    kind: FieldKind,
}

/// [`RepeatCheck`] in one segment: `None` when its column has one value a document at most.
struct SegmentRepeatCheck {
    values: Option<ValuesOf>,
    buffer: Vec<u64>,
    found: bool,
}

impl Collector for RepeatCheck {
    type Fruit = bool;
    type Child = SegmentRepeatCheck;

    fn for_segment(
        &self,
        _segment: SegmentOrdinal,
        reader: &SegmentReader,
    ) -> tantivy::Result<SegmentRepeatCheck> {
        let fast = reader.fast_fields();
        let values: Option<ValuesOf> = match self.kind {
            FieldKind::Integer => several(fast.column_opt::<i64>(&self.column)?, |v| v as u64),
            FieldKind::Float => several(fast.column_opt::<f64>(&self.column)?, f64::to_bits),
            FieldKind::Date => several(fast.column_opt::<DateTime>(&self.column)?, |d| {
                d.into_timestamp_nanos() as u64
            }),
            _ => None,
        };
        Ok(SegmentRepeatCheck {
            values,
            buffer: Vec::new(),
            found: false,
        })
    }

    fn requires_scoring(&self) -> bool {
        false
    }

    fn merge_fruits(&self, fruits: Vec<bool>) -> tantivy::Result<bool> {
        Ok(fruits.into_iter().any(|f| f))
    }
}

/// A reader of a column's values of a document as bits, when it holds several in one.
fn several<T>(column: Option<Column<T>>, bits: fn(T) -> u64) -> Option<ValuesOf>
where
    T: HasAssociatedColumnType + PartialOrd + Copy + std::fmt::Debug + Send + Sync + 'static,
{
    let column = column.filter(|c| c.get_cardinality().is_multivalue())?;
    Some(Box::new(move |doc, out: &mut Vec<u64>| {
        out.extend(column.values_for_doc(doc).map(bits));
    }))
}

impl SegmentCollector for SegmentRepeatCheck {
    type Fruit = bool;

    fn collect(&mut self, doc: DocId, _score: Score) {
        let Some(values) = &self.values else {
            return;
        };
        if self.found {
            return;
        }
        self.buffer.clear();
        values(doc, &mut self.buffer);
        self.buffer.sort_unstable();
        self.found = self.buffer.windows(2).any(|w| w[0] == w[1]);
    }

    fn harvest(self) -> bool {
        self.found
    }
}

/// The `percents` asked for (OpenSearch's defaults without any), in order; each between 0 and
/// 100.
fn percents(v: Option<&Value>, name: &str, path: &str) -> Result<Vec<f64>, SearchError> {
    let here = format!("{path}.percents");
    let list = match v {
        None => return Ok(DEFAULT_PERCENTS.to_vec()),
        Some(Value::Array(list)) => list,
        Some(other) => {
            return Err(SearchError::dsl(
                here,
                format!("[percents] must be a list of numbers, found {other}"),
            ));
        }
    };
    if list.is_empty() {
        return Err(SearchError::dsl(
            here,
            format!("[percents] must not be empty: [{name}]"),
        ));
    }
    let mut percents = list
        .iter()
        .map(|p| match p.as_f64() {
            Some(p) if (0.0..=100.0).contains(&p) => Ok(p),
            Some(p) => Err(SearchError::dsl(
                &here,
                format!("percent must be in [0,100], got [{p}]: [{name}]"),
            )),
            None => Err(SearchError::dsl(
                &here,
                format!("[percents] must be numbers, found {p}"),
            )),
        })
        .collect::<Result<Vec<f64>, SearchError>>()?;
    // OpenSearch answers the percents in order, whatever order they were asked in.
    percents.sort_by(f64::total_cmp);
    Ok(percents)
}

/// Checks `tdigest`'s options: `compression`, a number not below 0 (a tuning of OpenSearch's
/// sketch; tantivy's own sketch answers within 1% whatever it is).
fn check_tdigest(v: &Value, name: &str, path: &str) -> Result<(), SearchError> {
    let Value::Object(o) = v else {
        return Err(SearchError::dsl(path, "[tdigest] must be an object"));
    };
    for (k, value) in o {
        match k.as_str() {
            "compression" => match value.as_f64() {
                Some(c) if c >= 0.0 => {}
                Some(c) => {
                    return Err(SearchError::dsl(
                        format!("{path}.compression"),
                        format!(
                            "[compression] must be greater than or equal to 0. Found [{}] in [{name}]",
                            java_double(c)
                        ),
                    ));
                }
                None => {
                    return Err(SearchError::dsl(
                        format!("{path}.compression"),
                        format!("[compression] must be a number, found {value}"),
                    ));
                }
            },
            other => {
                return Err(SearchError::Unsupported {
                    path: format!("{path}.{other}"),
                    clause: format!("tdigest option {other}"),
                });
            }
        }
    }
    Ok(())
}

/// `hdr`'s `number_of_significant_value_digits`, 0 to 5.
fn digits(v: &Value, name: &str, path: &str) -> Result<u32, SearchError> {
    let Value::Object(o) = v else {
        return Err(SearchError::dsl(path, "[hdr] must be an object"));
    };
    let mut digits = DEFAULT_DIGITS;
    for (k, value) in o {
        let here = format!("{path}.{k}");
        match k.as_str() {
            "number_of_significant_value_digits" => {
                digits = match value.as_i64() {
                    Some(d) if (0..=i64::from(MAX_DIGITS)).contains(&d) => d as u32,
                    Some(_) => {
                        return Err(SearchError::dsl(
                            here,
                            format!(
                                "[numberOfSignificantValueDigits] must be between 0 and {MAX_DIGITS}: [{name}]"
                            ),
                        ));
                    }
                    None => {
                        return Err(SearchError::dsl(
                            here,
                            format!(
                                "[number_of_significant_value_digits] must be a whole number, found {value}"
                            ),
                        ));
                    }
                }
            }
            other => {
                return Err(SearchError::Unsupported {
                    path: here,
                    clause: format!("hdr option {other}"),
                });
            }
        }
    }
    Ok(digits)
}

/// Half the sub-buckets of an HdrHistogram keeping `digits` significant digits: the power of two
/// at or above `2 * 10^digits`, halved (HdrHistogram's `subBucketHalfCount`; at least 1).
fn half_count(digits: u32) -> f64 {
    let single_unit = 2.0 * 10f64.powi(digits as i32);
    let magnitude = single_unit.log2().ceil() as i32;
    2f64.powi(magnitude.max(1) - 1)
}

impl Hdr {
    /// The `terms` request that lists the values of `column` (and the `missing` value, for
    /// documents without one), each with its count.
    pub(crate) fn terms_body(
        column: &str,
        missing: Option<&Value>,
        limits: &SearchLimits,
    ) -> Value {
        let mut o = Map::new();
        o.insert("field".into(), json!(column));
        o.insert("size".into(), json!(limits.max_buckets));
        o.insert("min_doc_count".into(), json!(1));
        if let Some(m) = missing {
            o.insert("missing".into(), m.clone());
        }
        Value::Object(o)
    }

    /// Puts the listing tantivy made (`buckets` of `key` and `doc_count`) into the shape of a
    /// `percentiles` result, each percent computed as the HDR histogram computes it.
    pub(crate) fn shape(&self, v: &mut Value) -> Result<(), SearchError> {
        whole_listing(v, "percentiles with hdr", &self.path)?;
        let mut values = listed_values(v);
        values.sort_by(|a, b| a.0.total_cmp(&b.0));
        let histogram = Histogram::new(values, self.half_count, &self.path)?;
        let value = |p: f64| histogram.percentile(p).map_or(Value::Null, |x| json!(x));
        *v = if self.keyed {
            let mut out = Map::new();
            for &p in &self.percents {
                out.insert(java_double(p), value(p));
            }
            json!({"values": out})
        } else {
            let list: Vec<Value> = self
                .percents
                .iter()
                .map(|&p| json!({"key": p, "value": value(p)}))
                .collect();
            json!({"values": list})
        };
        Ok(())
    }
}

/// Refuses a listing tantivy could not make whole (more distinct values than `max_buckets`).
pub(crate) fn whole_listing(v: &Value, what: &str, path: &str) -> Result<(), SearchError> {
    if v.get("sum_other_doc_count")
        .and_then(Value::as_u64)
        .is_some_and(|n| n > 0)
    {
        return Err(SearchError::dsl(
            path,
            format!(
                "the field has more distinct values than {what} can read (search limit max_buckets)"
            ),
        ));
    }
    Ok(())
}

/// The values of a listing (`buckets` of `key` and `doc_count`; dates as ms), with their counts.
pub(crate) fn listed_values(v: &Value) -> Vec<(f64, u64)> {
    let mut values = Vec::new();
    for b in v
        .get("buckets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = match b.get("key") {
            Some(Value::String(text)) => chrono::DateTime::parse_from_rfc3339(text)
                .map(|d| d.timestamp_millis() as f64)
                .ok(),
            Some(k) => k.as_f64(),
            None => None,
        };
        let count = b.get("doc_count").and_then(Value::as_u64).unwrap_or(0);
        if let Some(key) = key {
            values.push((key, count));
        }
    }
    values
}

/// The recorded values, in order, with what HdrHistogram's buckets need.
struct Histogram {
    values: Vec<(f64, u64)>,
    total: u64,
    half_count: f64,
    /// The histogram's smallest unit, `L / H`.
    unit: f64,
}

impl Histogram {
    /// `values` sorted, with their counts. Negative values are refused, as HdrHistogram refuses
    /// them, and so is a range wider than its 63-bit counts can cover.
    fn new(values: Vec<(f64, u64)>, half_count: f64, path: &str) -> Result<Histogram, SearchError> {
        if let Some((v, _)) = values.iter().find(|(v, _)| *v < 0.0) {
            return Err(SearchError::dsl(
                path,
                format!(
                    "percentiles with hdr cannot record negative values (found [{}])",
                    java_double(*v)
                ),
            ));
        }
        let total = values
            .iter()
            .map(|(_, c)| *c)
            .fold(0u64, u64::saturating_add);
        let lowest = values
            .iter()
            .map(|(v, _)| *v)
            .find(|v| *v > 0.0)
            .map_or(1.0, power_of_two_below);
        let unit = lowest / half_count;
        let highest = values.last().map_or(0.0, |(v, _)| *v);
        // HdrHistogram's integer values are 63-bit longs.
        if highest / unit >= 2f64.powi(62) {
            return Err(SearchError::dsl(
                path,
                format!(
                    "percentiles with hdr cannot cover values from [{}] to [{}] at this precision",
                    java_double(lowest),
                    java_double(highest)
                ),
            ));
        }
        Ok(Histogram {
            values,
            total,
            half_count,
            unit,
        })
    }

    /// The value at percent `p`, as HdrHistogram's `getValueAtPercentile` gives it: the value of
    /// rank `ceil(p% of the count)` (at least the first), as the highest value of its bucket (the
    /// lowest at 0%). `None` without values.
    fn percentile(&self, p: f64) -> Option<f64> {
        if self.total == 0 {
            return None;
        }
        // HdrHistogram takes one ulp off the percent, so a whole rank is not rounded past.
        let requested = next_down(p).clamp(0.0, 100.0);
        let rank = ((requested / 100.0) * self.total as f64).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        let value = self
            .values
            .iter()
            .find(|(_, c)| {
                seen = seen.saturating_add(*c);
                seen >= rank
            })
            .or(self.values.last())
            .map(|(v, _)| *v)?;
        Some(self.equivalent(value, p == 0.0))
    }

    /// The lowest or highest value of the bucket holding `v`.
    fn equivalent(&self, v: f64, lowest: bool) -> f64 {
        if v <= 0.0 {
            return 0.0;
        }
        let width = (power_of_two_below(v) / self.half_count).max(self.unit);
        let start = (v / width).floor() * width;
        if lowest {
            start
        } else {
            start + width - self.unit
        }
    }
}

/// The largest power of two not above `v` (a positive, finite double), read from its exponent
/// bits (a logarithm can round up to the next power just below it).
fn power_of_two_below(v: f64) -> f64 {
    let exponent = ((v.to_bits() >> 52) & 0x7ff) as i32;
    if exponent == 0 {
        // Below the normal doubles; nothing this small is measured.
        return f64::MIN_POSITIVE;
    }
    2f64.powi(exponent - 1023)
}

/// The largest double below `x` (Java's `Math.nextDown`).
fn next_down(x: f64) -> f64 {
    if x.is_nan() || x == f64::NEG_INFINITY {
        return x;
    }
    if x == 0.0 {
        return -f64::from_bits(1);
    }
    let bits = x.to_bits();
    f64::from_bits(if x > 0.0 { bits - 1 } else { bits + 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values: &[f64]) -> Histogram {
        let mut list: Vec<(f64, u64)> = values.iter().map(|v| (*v, 1)).collect();
        list.sort_by(|a, b| a.0.total_cmp(&b.0));
        Histogram::new(list, half_count(3), "p").unwrap()
    }

    #[test]
    fn sub_bucket_halves_follow_the_significant_digits() {
        assert_eq!(half_count(0), 1.0);
        assert_eq!(half_count(1), 16.0);
        assert_eq!(half_count(2), 128.0);
        assert_eq!(half_count(3), 1024.0);
        assert_eq!(half_count(5), 131_072.0);
    }

    #[test]
    fn percentiles_are_the_highest_value_of_the_bucket_at_their_rank() {
        // The values of OpenSearch's HDR tests, and the answers it gives for them.
        let h = histogram(&[1.0, 51.0, 101.0, 151.0]);
        let at = |p| h.percentile(p).unwrap();
        assert_eq!(at(1.0), 1.0);
        assert_eq!(at(25.0), 1.0);
        assert_eq!(at(50.0), 51.030_273_437_5);
        assert_eq!(at(75.0), 101.061_523_437_5);
        assert_eq!(at(95.0), 151.124_023_437_5);
        // The smallest value sets the unit: from 51 it is 1/32.
        let h = histogram(&[51.0, 101.0, 126.0, 151.0]);
        let at = |p| h.percentile(p).unwrap();
        assert_eq!(at(5.0), 51.0);
        assert_eq!(at(50.0), 101.031_25);
        assert_eq!(at(75.0), 126.031_25);
        assert_eq!(at(99.0), 151.093_75);
        // 0% is the lowest value of the first bucket.
        assert_eq!(h.percentile(0.0), Some(51.0));
    }

    #[test]
    fn no_values_no_percentile_and_negative_or_vast_ranges_are_refused() {
        assert_eq!(histogram(&[]).percentile(50.0), None);
        assert_eq!(histogram(&[0.0, 0.0]).percentile(50.0), Some(0.0));
        assert!(Histogram::new(vec![(-10.0, 1), (1.0, 1)], 1024.0, "p").is_err());
        assert!(Histogram::new(vec![(1e-300, 1), (1e300, 1)], 1024.0, "p").is_err());
    }
}
