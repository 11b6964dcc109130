//! Dates as OpenSearch reads them: ISO 8601 dates and date-times, epoch milliseconds, and date math
//! (`now-30d/d`, `2024-01-01||+1M/d`).
//!
//! Date math: an anchor (`now`, or a date followed by `||`), then any number of `+N<unit>` / `-N<unit>`
//! steps and `/<unit>` roundings; units `y` `M` `w` `d` `h` `H` `m` `s`. Rounding goes to the start
//! of the unit, or — for `gt` and `lte` bounds, as in OpenSearch — to its last millisecond.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveDateTime, TimeZone, Timelike, Utc};

/// Parses a date: RFC 3339 / ISO 8601 date-time (with or without zone, `T` or space), a date
/// (`2024-01-31`), a year-month (`2024-01`), a year (`2024`) or epoch milliseconds.
pub fn parse_date(text: &str) -> Option<DateTime<Utc>> {
    let t = text.trim();
    if let Ok(d) = DateTime::parse_from_rfc3339(t) {
        return Some(d.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f%z", "%Y-%m-%d %H:%M:%S%.f%z"] {
        if let Ok(d) = DateTime::parse_from_str(t, format) {
            return Some(d.with_timezone(&Utc));
        }
    }
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Ok(d) = NaiveDateTime::parse_from_str(t, format) {
            return Some(Utc.from_utc_datetime(&d));
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return d.and_hms_opt(0, 0, 0).map(|d| Utc.from_utc_datetime(&d));
    }
    if let Some((y, m)) = t.split_once('-')
        && y.len() == 4
        && let (Ok(y), Ok(m)) = (y.parse::<i32>(), m.parse::<u32>())
    {
        return NaiveDate::from_ymd_opt(y, m, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|d| Utc.from_utc_datetime(&d));
    }
    if t.len() == 4
        && let Ok(y) = t.parse::<i32>()
    {
        return NaiveDate::from_ymd_opt(y, 1, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|d| Utc.from_utc_datetime(&d));
    }
    t.parse::<i64>()
        .ok()
        .and_then(DateTime::from_timestamp_millis)
}

/// A date from a JSON value: text as [`parse_date`] reads it, a number as epoch milliseconds.
pub fn date_from_json(value: &serde_json::Value) -> Option<DateTime<Utc>> {
    match value {
        serde_json::Value::String(s) => parse_date(s),
        serde_json::Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .and_then(DateTime::from_timestamp_millis),
        _ => None,
    }
}

/// Evaluates date math (or a plain date) relative to `now`; `round_up` rounds to the last
/// millisecond of the unit instead of its first.
pub fn eval(expr: &str, now: DateTime<Utc>, round_up: bool) -> Result<DateTime<Utc>, String> {
    let expr = expr.trim();
    let (mut at, mut rest) = if let Some(rest) = expr.strip_prefix("now") {
        (now, rest)
    } else if let Some((date, rest)) = expr.split_once("||") {
        (
            parse_date(date).ok_or_else(|| format!("'{date}' is not a date"))?,
            rest,
        )
    } else {
        return parse_date(expr).ok_or_else(|| format!("'{expr}' is not a date or date math"));
    };
    while !rest.is_empty() {
        let op = rest.as_bytes()[0];
        rest = &rest[1..];
        match op {
            b'/' => {
                let (unit, tail) = split_unit(rest)?;
                at = round(at, unit, round_up)?;
                rest = tail;
            }
            b'+' | b'-' => {
                let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
                let n: i64 = if digits == 0 {
                    1
                } else {
                    rest[..digits]
                        .parse()
                        .map_err(|_| format!("'{}' is too large", &rest[..digits]))?
                };
                let (unit, tail) = split_unit(&rest[digits..])?;
                at = add(at, if op == b'-' { -n } else { n }, unit)?;
                rest = tail;
            }
            other => {
                return Err(format!(
                    "unexpected '{}' in date math '{expr}' (expected +, - or /)",
                    other as char
                ));
            }
        }
    }
    Ok(at)
}

fn split_unit(s: &str) -> Result<(char, &str), String> {
    let mut chars = s.chars();
    match chars.next() {
        Some(u @ ('y' | 'M' | 'w' | 'd' | 'h' | 'H' | 'm' | 's')) => Ok((u, chars.as_str())),
        Some(u) => Err(format!("unknown date math unit '{u}' (y M w d h H m s)")),
        None => Err("date math ends without a unit".into()),
    }
}

fn add(at: DateTime<Utc>, n: i64, unit: char) -> Result<DateTime<Utc>, String> {
    let overflow = || "date math out of range".to_owned();
    let months = |m: i64| -> Result<DateTime<Utc>, String> {
        let m = i32::try_from(m).map_err(|_| overflow())?;
        let total = at.year() * 12 + at.month0() as i32 + m;
        let (y, mo) = (total.div_euclid(12), total.rem_euclid(12) as u32 + 1);
        // The day is clamped to the month's length (Jan 31 + 1M = Feb 28/29), as OpenSearch does.
        let day = (1..=at.day())
            .rev()
            .find_map(|d| NaiveDate::from_ymd_opt(y, mo, d))
            .ok_or_else(overflow)?;
        Ok(Utc.from_utc_datetime(&day.and_time(at.time())))
    };
    let delta = match unit {
        'y' => return months(n.checked_mul(12).ok_or_else(overflow)?),
        'M' => return months(n),
        'w' => Duration::try_weeks(n),
        'd' => Duration::try_days(n),
        'h' | 'H' => Duration::try_hours(n),
        'm' => Duration::try_minutes(n),
        _ => Duration::try_seconds(n),
    }
    .ok_or_else(overflow)?;
    at.checked_add_signed(delta).ok_or_else(overflow)
}

fn round(at: DateTime<Utc>, unit: char, up: bool) -> Result<DateTime<Utc>, String> {
    let date = at.date_naive();
    let start = match unit {
        'y' => NaiveDate::from_ymd_opt(at.year(), 1, 1).and_then(|d| d.and_hms_opt(0, 0, 0)),
        'M' => {
            NaiveDate::from_ymd_opt(at.year(), at.month(), 1).and_then(|d| d.and_hms_opt(0, 0, 0))
        }
        'w' => (date - Duration::days(i64::from(at.weekday().num_days_from_monday())))
            .and_hms_opt(0, 0, 0),
        'd' => date.and_hms_opt(0, 0, 0),
        'h' | 'H' => date.and_hms_opt(at.hour(), 0, 0),
        'm' => date.and_hms_opt(at.hour(), at.minute(), 0),
        _ => date.and_hms_opt(at.hour(), at.minute(), at.second()),
    }
    .map(|d| Utc.from_utc_datetime(&d))
    .ok_or("date out of range")?;
    if !up {
        return Ok(start);
    }
    let next = add(start, 1, unit)?;
    Ok(next - Duration::milliseconds(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        parse_date(s).expect("date")
    }

    #[test]
    fn dates_in_the_usual_forms() {
        assert_eq!(at("2024-03-05"), at("2024-03-05T00:00:00Z"));
        assert_eq!(at("2024-03-05 10:20:30"), at("2024-03-05T10:20:30Z"));
        assert_eq!(at("2024-03-05T10:20:30+02:00"), at("2024-03-05T08:20:30Z"));
        assert_eq!(at("2024-03"), at("2024-03-01"));
        assert_eq!(at("2024"), at("2024-01-01"));
        assert_eq!(at("1700000000000").timestamp_millis(), 1_700_000_000_000);
        assert_eq!(parse_date("yesterday"), None);
    }

    #[test]
    fn date_math_adds_and_rounds() {
        let now = at("2024-03-15T10:20:30Z");
        assert_eq!(eval("now", now, false), Ok(now));
        assert_eq!(eval("now-30d/d", now, false), Ok(at("2024-02-14")));
        assert_eq!(
            eval("now-30d/d", now, true),
            Ok(at("2024-02-14T23:59:59.999Z"))
        );
        assert_eq!(eval("now/M", now, false), Ok(at("2024-03-01")));
        assert_eq!(eval("now+1y/y", now, false), Ok(at("2025-01-01")));
        assert_eq!(eval("now/w", now, false), Ok(at("2024-03-11")));
        assert_eq!(eval("now-2h", now, false), Ok(at("2024-03-15T08:20:30Z")));
        assert_eq!(eval("2024-01-31||+1M", now, false), Ok(at("2024-02-29")));
        assert_eq!(eval("2024-01-01", now, false), Ok(at("2024-01-01")));
        assert!(
            eval("now-3x", now, false)
                .unwrap_err()
                .contains("unknown date math unit 'x'")
        );
        assert!(eval("soon", now, false).is_err());
        assert!(eval("now*2", now, false).is_err());
    }
}
