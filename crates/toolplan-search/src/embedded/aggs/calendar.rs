//! `date_histogram` intervals: fixed lengths (`90m`, `1d`) that tantivy runs itself, and calendar
//! periods (week, month, quarter, year) that are not a fixed length, run as date ranges, one per
//! period from the first to the last matching document.

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};
use serde_json::{Value, json};

use super::Rewrite;
use crate::error::SearchError;

/// Most buckets a calendar `date_histogram` may make (OpenSearch's `search.max_buckets` is larger;
/// this keeps one request's work bounded).
const MAX_CALENDAR_BUCKETS: usize = 10_000;

/// Calendar intervals that are not a fixed length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Calendar {
    Week,
    Month,
    Quarter,
    Year,
}

impl Calendar {
    /// The start of the period holding `t`.
    pub(super) fn start(self, t: DateTime<Utc>) -> DateTime<Utc> {
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
    pub(super) fn next(self, t: DateTime<Utc>) -> DateTime<Utc> {
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

/// A `date_histogram` interval.
pub(super) enum Interval {
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

pub(super) fn date_histogram_interval(
    body: &mut Value,
    path: &str,
) -> Result<Interval, SearchError> {
    let Some(obj) = body.as_object_mut() else {
        return Err(SearchError::dsl(path, "date_histogram must be an object"));
    };
    // Read by the caller (`format`); only UTC is implemented, any other zone is refused rather
    // than answered with UTC days.
    obj.remove("format");
    if let Some(zone) = obj.remove("time_zone") {
        crate::datemath::utc_only(&zone, "date_histogram", path)?;
    }
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

/// The first and last dates of a field under a query.
pub(super) type DateSpan = (DateTime<Utc>, DateTime<Utc>);

impl Rewrite<'_> {
    /// The first and last dates of `field` under the request's query (a search of its own);
    /// `None` when no matching document has one.
    pub(super) fn date_span(&self, field: &str) -> Result<Option<DateSpan>, SearchError> {
        let span = (self.sub)(&json!({
            "size": 0,
            "query": self.query,
            "aggs": {"first": {"min": {"field": field}}, "last": {"max": {"field": field}}},
        }))?;
        let at = |k: &str| {
            span.pointer(&format!("/aggregations/{k}/value"))
                .and_then(Value::as_f64)
                .and_then(|v| DateTime::<Utc>::from_timestamp_millis(v as i64))
        };
        Ok(at("first").zip(at("last")))
    }

    /// The date ranges (ms) of the calendar periods from the first to the last matching document.
    pub(super) fn calendar_ranges(
        &self,
        field: &str,
        c: Calendar,
        path: &str,
    ) -> Result<Vec<Value>, SearchError> {
        let Some((first, last)) = self.date_span(field)? else {
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
}
