//! `auto_date_histogram`: a date histogram whose interval is chosen, as OpenSearch chooses it,
//! to give at most `buckets` buckets (10 by default) from the first matching date to the last:
//! the first of 1, 5, 10, 30 seconds; 1, 5, 10, 30 minutes; 1, 3, 12 hours; 1, 7 days; 1, 3
//! months; 1, 5, 10, 20, 50, 100 years (from `minimum_interval` on) that does. Periods start at
//! the first date rounded down to the unit, in UTC; empty periods in between are buckets too.
//! Each bucket is a search of its own (as `date_range`'s), with the sub-aggregations. Only at the
//! top level of a request: inside another bucket OpenSearch chooses an interval per bucket.

use chrono::{DateTime, Datelike, Months, TimeZone, Utc};
use serde_json::{Map, Value, json};

use super::Rewrite;
use super::filtered::{DatedBucket, Searched};
use crate::datemath::DateFormat;
use crate::error::SearchError;
use crate::mapping::FieldKind;

/// A unit of periods, and the multiples of it OpenSearch tries.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    Second,
    Minute,
    Hour,
    Day,
    Month,
    Year,
}

/// The units in order, with their multiples and suffixes.
const LEVELS: &[(Unit, &[u32], &str)] = &[
    (Unit::Second, &[1, 5, 10, 30], "s"),
    (Unit::Minute, &[1, 5, 10, 30], "m"),
    (Unit::Hour, &[1, 3, 12], "h"),
    (Unit::Day, &[1, 7], "d"),
    (Unit::Month, &[1, 3], "M"),
    (Unit::Year, &[1, 5, 10, 20, 50, 100], "y"),
];

/// The options an `auto_date_histogram` takes.
const OPTIONS: &[&str] = &[
    "field",
    "buckets",
    "format",
    "minimum_interval",
    "time_zone",
];

impl Unit {
    /// Milliseconds of a fixed unit (`None` for months and years).
    fn ms(self) -> Option<i64> {
        match self {
            Unit::Second => Some(1_000),
            Unit::Minute => Some(60_000),
            Unit::Hour => Some(3_600_000),
            Unit::Day => Some(86_400_000),
            Unit::Month | Unit::Year => None,
        }
    }

    /// `at` rounded down to the unit.
    fn round(self, at: DateTime<Utc>) -> DateTime<Utc> {
        match self.ms() {
            Some(ms) => {
                let t = at.timestamp_millis();
                Utc.timestamp_millis_opt(t - t.rem_euclid(ms))
                    .single()
                    .unwrap_or(at)
            }
            None => {
                let month = if self == Unit::Year { 1 } else { at.month() };
                Utc.with_ymd_and_hms(at.year(), month, 1, 0, 0, 0)
                    .single()
                    .unwrap_or(at)
            }
        }
    }

    /// Whole units from `from` to `to` (both rounded).
    fn between(self, from: DateTime<Utc>, to: DateTime<Utc>) -> i64 {
        match self.ms() {
            Some(ms) => (to.timestamp_millis() - from.timestamp_millis()) / ms,
            None => {
                let months = i64::from(to.year() - from.year()) * 12 + i64::from(to.month())
                    - i64::from(from.month());
                if self == Unit::Year {
                    months / 12
                } else {
                    months
                }
            }
        }
    }

    /// `at` moved on by `n` units.
    fn add(self, at: DateTime<Utc>, n: u32) -> Option<DateTime<Utc>> {
        match self.ms() {
            Some(ms) => at.checked_add_signed(chrono::Duration::milliseconds(ms * i64::from(n))),
            None => {
                let months = if self == Unit::Year {
                    n.checked_mul(12)?
                } else {
                    n
                };
                at.checked_add_months(Months::new(months))
            }
        }
    }
}

impl Rewrite<'_> {
    /// Reads an `auto_date_histogram` (`body` at `path`, `depth` levels down) into its buckets:
    /// the span of the field under the query is searched first, the interval chosen from it.
    pub(super) fn auto_date_histogram(
        &self,
        body: &Value,
        depth: usize,
        path: &str,
    ) -> Result<Searched, SearchError> {
        let Value::Object(o) = body else {
            return Err(SearchError::dsl(
                path,
                "auto_date_histogram must be an object",
            ));
        };
        if let Some(other) = o.keys().find(|k| !OPTIONS.contains(&k.as_str())) {
            return Err(SearchError::Unsupported {
                path: format!("{path}.{other}"),
                clause: format!("auto_date_histogram option {other}"),
            });
        }
        if depth > 1 {
            return Err(SearchError::Unsupported {
                path: path.to_owned(),
                clause: "auto_date_histogram inside another aggregation".into(),
            });
        }
        if let Some(tz) = o.get("time_zone").and_then(Value::as_str)
            && !matches!(tz, "UTC" | "Z" | "+00:00" | "Etc/UTC")
        {
            return Err(SearchError::Unsupported {
                path: format!("{path}.time_zone"),
                clause: format!("auto_date_histogram time_zone \"{tz}\" (only UTC)"),
            });
        }
        let field = o
            .get("field")
            .and_then(Value::as_str)
            .ok_or_else(|| SearchError::dsl(path, "auto_date_histogram needs a field"))?;
        if let Some(why) = self.schema.not_indexed(field) {
            return Err(SearchError::dsl(path, why));
        }
        let indexed = self.schema.fields.get(field);
        if let Some(indexed) = indexed
            && indexed.spec.kind != FieldKind::Date
        {
            return Err(super::not_for_aggregation(
                field,
                &indexed.spec.kind,
                "auto_date_histogram",
                path,
            ));
        }
        let max = u64::from(self.limits.max_buckets);
        let target = match o.get("buckets") {
            None => 10,
            Some(v) => v.as_u64().filter(|n| (1..=max).contains(n)).ok_or_else(|| {
                SearchError::dsl(
                    format!("{path}.buckets"),
                    format!("[buckets] must be a whole number from 1 to {max} (search limit max_buckets), found {v}"),
                )
            })?,
        };
        let first_level = match o.get("minimum_interval").map(|v| (v, v.as_str())) {
            None => 0,
            Some((_, Some(name))) => {
                let unit = ["second", "minute", "hour", "day", "month", "year"]
                    .iter()
                    .position(|u| *u == name);
                unit.ok_or_else(|| {
                    SearchError::dsl(
                        format!("{path}.minimum_interval"),
                        format!("minimum_interval must be one of [second, minute, hour, day, month, year], found [{name}]"),
                    )
                })?
            }
            Some((v, None)) => {
                return Err(SearchError::dsl(
                    format!("{path}.minimum_interval"),
                    format!("minimum_interval must be text, found {v}"),
                ));
            }
        };
        let format = match o.get("format") {
            Some(_) => crate::datemath::format_option(o.get("format"), &format!("{path}.format"))?,
            None => indexed.and_then(|i| i.format.clone()),
        };
        let format = match format {
            Some(f) => f,
            None => DateFormat::parse("strict_date_optional_time")
                .map_err(|e| SearchError::dsl(path, e))?,
        };
        let Some((first, last)) = self.date_span(field)? else {
            let (_, inners, suffix) = LEVELS[first_level];
            return Ok(Searched::Dated {
                buckets: Vec::new(),
                interval: format!("{}{suffix}", inners[0]),
            });
        };
        let (unit, inner, suffix) = choose(first, last, first_level, target);
        let mut buckets = Vec::new();
        let mut from = unit.round(first);
        while from <= last {
            let Some(to) = unit.add(from, inner) else {
                break;
            };
            let mut range = Map::new();
            range.insert(
                field.to_owned(),
                json!({"gte": from.timestamp_millis(), "lt": to.timestamp_millis(), "format": "epoch_millis"}),
            );
            buckets.push(DatedBucket {
                key: from.timestamp_millis(),
                text: format.write(from),
                query: json!({ "range": range }),
            });
            from = to;
        }
        Ok(Searched::Dated {
            buckets,
            interval: format!("{inner}{suffix}"),
        })
    }
}

/// The first unit and multiple from level `first_level` on that spans `first` to `last` in at
/// most `target` periods (the widest when none does).
fn choose(
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    first_level: usize,
    target: u64,
) -> (Unit, u32, &'static str) {
    for &(unit, inners, suffix) in &LEVELS[first_level.min(LEVELS.len() - 1)..] {
        let units = unit.between(unit.round(first), unit.round(last));
        for &inner in inners {
            let count = units / i64::from(inner) + 1;
            if u64::try_from(count).is_ok_and(|c| c <= target) {
                return (unit, inner, suffix);
            }
        }
    }
    (Unit::Year, 100, "y")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(y: i32, m: u32, d: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, d, 0, 0, 0)
            .single()
            .unwrap_or_default()
    }

    #[test]
    fn the_interval_is_the_first_that_gives_few_enough_buckets() {
        let (first, last) = (day(2020, 3, 1), day(2020, 3, 9));
        assert_eq!(choose(first, last, 0, 2), (Unit::Day, 7, "d"));
        assert_eq!(choose(first, last, 0, 10), (Unit::Day, 1, "d"));
        assert_eq!(
            choose(day(2020, 1, 1), day(2020, 12, 31), 0, 5),
            (Unit::Month, 3, "M")
        );
        assert_eq!(
            choose(day(2000, 1, 1), day(2020, 1, 1), 0, 3),
            (Unit::Year, 10, "y")
        );
        // minimum_interval: month.
        assert_eq!(choose(first, last, 4, 10), (Unit::Month, 1, "M"));
    }
}
