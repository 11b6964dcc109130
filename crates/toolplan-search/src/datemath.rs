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

/// A date `format` as OpenSearch names them: built-in names (`epoch_millis`, `epoch_second`,
/// `strict_date_optional_time`, `basic_date` …) and Java-style patterns (`yyyy/MM/dd HH:mm:ss`,
/// `dd.MM.yyyy`), several joined by `||` (the first that reads a text wins).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DateFormat {
    alternatives: Vec<Alternative>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Alternative {
    /// The ISO forms [`parse_date`] reads.
    Iso,
    EpochMillis,
    EpochSecond,
    /// A pattern in chrono's syntax, and whether it has a time (else a date at midnight).
    Pattern {
        chrono: String,
        has_time: bool,
        has_zone: bool,
    },
}

impl DateFormat {
    /// Reads a `format`; an unknown name or a pattern letter it cannot translate is an error
    /// naming it.
    pub fn parse(format: &str) -> Result<DateFormat, String> {
        let alternatives = format
            .split("||")
            .map(|f| alternative(f.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(DateFormat { alternatives })
    }

    /// The date a JSON value stands for under this format: text as [`read`](Self::read) reads it,
    /// a number as its text (`epoch_second`: `1600000000`).
    pub fn read_json(&self, value: &serde_json::Value) -> Option<DateTime<Utc>> {
        match value {
            serde_json::Value::String(text) => self.read(text),
            serde_json::Value::Number(n) => self.read(&n.to_string()),
            _ => None,
        }
    }

    /// Whether `text` is a date under this format as dynamic mapping detects dates: the ISO forms
    /// need at least a year and a month (`2024-01`), so a number or a year alone in text stays text.
    pub fn detects(&self, text: &str) -> bool {
        let t = text.trim();
        self.alternatives.iter().any(|a| match a {
            Alternative::Iso => {
                let b = t.as_bytes();
                b.len() >= 7
                    && b[..4].iter().all(u8::is_ascii_digit)
                    && b[4] == b'-'
                    && parse_date(t).is_some()
            }
            Alternative::EpochMillis | Alternative::EpochSecond => {
                !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit())
            }
            pattern @ Alternative::Pattern { .. } => DateFormat {
                alternatives: vec![pattern.clone()],
            }
            .read(t)
            .is_some(),
        })
    }

    /// `date` written in this format's first form (`strict_date_optional_time`: with milliseconds
    /// and `Z`, as OpenSearch writes dates it returns).
    pub fn write(&self, date: DateTime<Utc>) -> String {
        match self.alternatives.first() {
            None | Some(Alternative::Iso) => iso_millis(date),
            Some(Alternative::EpochMillis) => date.timestamp_millis().to_string(),
            Some(Alternative::EpochSecond) => date.timestamp().to_string(),
            Some(Alternative::Pattern { chrono, .. }) => date.format(chrono).to_string(),
        }
    }

    /// The date `text` stands for under this format.
    pub fn read(&self, text: &str) -> Option<DateTime<Utc>> {
        let t = text.trim();
        self.alternatives.iter().find_map(|a| match a {
            Alternative::Iso => parse_date(t),
            Alternative::EpochMillis => t
                .parse::<i64>()
                .ok()
                .and_then(DateTime::from_timestamp_millis),
            Alternative::EpochSecond => t
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && s.abs() < 9.2e15)
                .and_then(|s| DateTime::from_timestamp_millis((s * 1000.0).round() as i64)),
            Alternative::Pattern {
                chrono,
                has_time,
                has_zone,
            } => {
                if *has_zone {
                    DateTime::parse_from_str(t, chrono)
                        .ok()
                        .map(|d| d.with_timezone(&Utc))
                } else if *has_time {
                    NaiveDateTime::parse_from_str(t, chrono)
                        .ok()
                        .map(|d| Utc.from_utc_datetime(&d))
                } else {
                    NaiveDate::parse_from_str(t, chrono)
                        .ok()
                        .and_then(|d| d.and_hms_opt(0, 0, 0))
                        .map(|d| Utc.from_utc_datetime(&d))
                }
            }
        })
    }
}

/// One alternative of a format.
fn alternative(format: &str) -> Result<Alternative, String> {
    Ok(match format {
        "strict_date_optional_time"
        | "date_optional_time"
        | "strict_date_optional_time_nanos"
        | "strict_date_time"
        | "date_time"
        | "strict_date_time_no_millis"
        | "date_time_no_millis"
        | "strict_date"
        | "date"
        | "strict_date_hour_minute_second"
        | "date_hour_minute_second"
        | "strict_date_hour_minute_second_millis"
        | "date_hour_minute_second_millis"
        | "strict_year_month"
        | "year_month"
        | "strict_year"
        | "year" => Alternative::Iso,
        "epoch_millis" => Alternative::EpochMillis,
        "epoch_second" => Alternative::EpochSecond,
        "basic_date" | "strict_basic_date" => java_pattern("yyyyMMdd")?,
        "basic_date_time_no_millis" => java_pattern("yyyyMMdd'T'HHmmssZ")?,
        name if name.chars().all(|c| c.is_ascii_lowercase() || c == '_') => {
            return Err(format!("date format [{name}] is not supported"));
        }
        pattern => java_pattern(pattern)?,
    })
}

/// A Java date pattern (`yyyy-MM-dd'T'HH:mm:ss.SSSZ`) in chrono's syntax.
fn java_pattern(pattern: &str) -> Result<Alternative, String> {
    let mut out = String::new();
    let (mut has_time, mut has_zone) = (false, false);
    let chars: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let run = chars[i..].iter().take_while(|&&x| x == c).count();
        if c == '\'' {
            // Quoted literal text; '' is a quote.
            let end = chars[i + 1..]
                .iter()
                .position(|&x| x == '\'')
                .map(|p| i + 1 + p);
            let Some(end) = end else {
                return Err(format!("date format [{pattern}] has an unclosed quote"));
            };
            if end == i + 1 {
                out.push('\'');
            } else {
                out.extend(chars[i + 1..end].iter().flat_map(|&x| escape(x)));
            }
            i = end + 1;
            continue;
        }
        let piece = match (c, run) {
            ('y' | 'u', 2) => "%y",
            ('y' | 'u', _) => "%Y",
            ('M', 1 | 2) => "%m",
            ('M', 3) => "%b",
            ('M', _) => "%B",
            ('d', _) => "%d",
            ('D', _) => "%j",
            ('E', 1..=3) => "%a",
            ('E', _) => "%A",
            ('a', _) => "%p",
            ('H', _) => {
                has_time = true;
                "%H"
            }
            ('h', _) => {
                has_time = true;
                "%I"
            }
            ('m', _) => {
                has_time = true;
                "%M"
            }
            ('s', _) => {
                has_time = true;
                "%S"
            }
            ('S', _) => {
                has_time = true;
                // Fractions of a second follow a '.', written in the pattern.
                if out.ends_with('.') {
                    out.pop();
                }
                "%.f"
            }
            ('Z' | 'X' | 'x', _) => {
                has_zone = true;
                has_time = true;
                "%z"
            }
            (c, _) if c.is_ascii_alphabetic() => {
                return Err(format!(
                    "date format [{pattern}]: the pattern letter '{c}' is not supported"
                ));
            }
            (c, _) => {
                for _ in 0..run {
                    out.extend(escape(c));
                }
                i += run;
                continue;
            }
        };
        out.push_str(piece);
        i += run;
    }
    Ok(Alternative::Pattern {
        chrono: out,
        has_time,
        has_zone,
    })
}

/// A literal character in chrono's syntax.
fn escape(c: char) -> Vec<char> {
    if c == '%' { vec!['%', '%'] } else { vec![c] }
}

/// `date` as OpenSearch writes the dates it returns: ISO 8601 with milliseconds and `Z`.
pub fn iso_millis(date: DateTime<Utc>) -> String {
    date.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// The `format` option of a request (at `path`): `None` when not given; one that is not text or
/// cannot be read is refused.
pub(crate) fn format_option(
    value: Option<&serde_json::Value>,
    path: &str,
) -> Result<Option<DateFormat>, crate::error::SearchError> {
    match value {
        None => Ok(None),
        Some(serde_json::Value::String(f)) => DateFormat::parse(f)
            .map(Some)
            .map_err(|e| crate::error::SearchError::dsl(path, e)),
        Some(v) => Err(crate::error::SearchError::dsl(
            path,
            format!("a format must be text, found {v}"),
        )),
    }
}

/// Refuses a `time_zone` (of clause `clause`, at `path`) other than UTC by its names: the engine
/// reads and buckets dates in UTC, and another zone would move the answer.
pub(crate) fn utc_only(
    zone: &serde_json::Value,
    clause: &str,
    path: &str,
) -> Result<(), crate::error::SearchError> {
    if matches!(
        zone.as_str().unwrap_or_default(),
        "UTC" | "Z" | "+00:00" | "-00:00" | "+0000" | "Etc/UTC" | "GMT"
    ) {
        return Ok(());
    }
    Err(crate::error::SearchError::Unsupported {
        path: format!("{path}.time_zone"),
        clause: format!("{clause} time_zone {zone} (only UTC)"),
    })
}

/// Evaluates date math (or a plain date) relative to `now`; `round_up` rounds to the last
/// millisecond of the unit instead of its first.
pub fn eval(expr: &str, now: DateTime<Utc>, round_up: bool) -> Result<DateTime<Utc>, String> {
    eval_with(expr, now, round_up, None)
}

/// [`eval`], with the dates in `expr` read by `format` when one is given.
pub fn eval_with(
    expr: &str,
    now: DateTime<Utc>,
    round_up: bool,
    format: Option<&DateFormat>,
) -> Result<DateTime<Utc>, String> {
    let expr = expr.trim();
    let read = |text: &str| match format {
        Some(f) => f.read(text),
        None => parse_date(text),
    };
    let (mut at, mut rest) = if let Some(rest) = expr.strip_prefix("now") {
        (now, rest)
    } else if let Some((date, rest)) = expr.split_once("||") {
        (
            read(date).ok_or_else(|| format!("'{date}' is not a date"))?,
            rest,
        )
    } else {
        return read(expr).ok_or_else(|| match format {
            Some(_) => format!("'{expr}' does not match the date format"),
            None => format!("'{expr}' is not a date or date math"),
        });
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

    #[test]
    fn formats_read_dates_as_opensearch_does() {
        let at = |f: &str, t: &str| {
            DateFormat::parse(f)
                .unwrap()
                .read(t)
                .map(|d| d.to_rfc3339())
        };
        assert_eq!(
            at("dd/MM/yyyy", "02/01/2024").as_deref(),
            Some("2024-01-02T00:00:00+00:00")
        );
        assert_eq!(
            at("MM/dd/yyyy", "02/01/2024").as_deref(),
            Some("2024-02-01T00:00:00+00:00")
        );
        assert_eq!(
            at("epoch_second", "1700000000").as_deref(),
            Some("2023-11-14T22:13:20+00:00")
        );
        assert_eq!(
            at("epoch_millis", "1700000000000").as_deref(),
            Some("2023-11-14T22:13:20+00:00")
        );
        assert_eq!(
            at("yyyy-MM-dd HH:mm:ss||epoch_millis", "2024-03-04 05:06:07").as_deref(),
            Some("2024-03-04T05:06:07+00:00")
        );
        assert_eq!(
            at("yyyy-MM-dd HH:mm:ss||epoch_millis", "0").as_deref(),
            Some("1970-01-01T00:00:00+00:00")
        );
        assert_eq!(
            at("yyyy-MM-dd'T'HH:mm:ss.SSSZ", "2024-03-04T05:06:07.250+0100").as_deref(),
            Some("2024-03-04T04:06:07.250+00:00")
        );
        assert_eq!(
            at("basic_date", "20240102").as_deref(),
            Some("2024-01-02T00:00:00+00:00")
        );
        assert_eq!(
            at("strict_date_optional_time", "2024-01-02").as_deref(),
            Some("2024-01-02T00:00:00+00:00")
        );
        assert_eq!(at("dd/MM/yyyy", "2024-01-02"), None);
        assert!(DateFormat::parse("week_date_time_of_doom").is_err());
        assert!(DateFormat::parse("yyyy-ww").is_err());
        assert!(DateFormat::parse("'unclosed").is_err());
        let now = Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).single().unwrap();
        let f = DateFormat::parse("dd/MM/yyyy").unwrap();
        assert_eq!(
            eval_with("02/01/2024||+1d", now, false, Some(&f)).map(|d| d.to_rfc3339()),
            Ok("2024-01-03T00:00:00+00:00".to_owned())
        );
    }
}
