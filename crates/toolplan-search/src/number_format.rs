//! Numbers written with a Java `DecimalFormat` pattern, as OpenSearch writes a numeric field's or
//! an aggregation's `format`: `0.00`, `#,##0.0#`, `Value is ##0.0`, `0.0%`.
//!
//! The pattern's parts: text before and after the digits (quoted with `'` where it holds pattern
//! characters), `0` for a digit always written and `#` for one written when needed, `,` for
//! grouping (the size is the digits after the last `,`), `.` before the fraction, and `%` to show
//! a percentage. Rounding is half-even, Java's default. Exponents (`E`) and separate negative
//! patterns (`;`) are refused by name.

use crate::error::SearchError;

/// A parsed `DecimalFormat` pattern.
#[derive(Debug, Clone, PartialEq)]
pub struct NumberFormat {
    prefix: String,
    suffix: String,
    min_integer: usize,
    min_fraction: usize,
    max_fraction: usize,
    /// Digits per group (0: no grouping).
    grouping: usize,
    percent: bool,
}

impl NumberFormat {
    /// Reads a pattern; an error names what it cannot write.
    pub fn parse(pattern: &str) -> Result<NumberFormat, SearchError> {
        let bad = |why: &str| {
            SearchError::InvalidParameter(format!(
                "the number format [{pattern}] is not supported: {why}"
            ))
        };
        let mut prefix = String::new();
        let mut suffix = String::new();
        let mut digits = String::new();
        let mut percent = false;
        // 0: before the digits, 1: in them, 2: after them.
        let mut part = 0;
        let mut chars = pattern.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\'' => {
                    // Quoted text; '' is a quote.
                    let mut text = String::new();
                    if chars.peek() == Some(&'\'') {
                        chars.next();
                        text.push('\'');
                    } else {
                        for q in chars.by_ref() {
                            if q == '\'' {
                                break;
                            }
                            text.push(q);
                        }
                    }
                    if part == 1 {
                        part = 2;
                    }
                    if part == 0 { &mut prefix } else { &mut suffix }.push_str(&text);
                }
                '#' | '0' | ',' | '.' => {
                    if part == 2 {
                        return Err(bad("digits after the text that follows them"));
                    }
                    part = 1;
                    digits.push(c);
                }
                'E' => return Err(bad("exponents (E) are not")),
                ';' => return Err(bad("a separate negative pattern (;) is not")),
                '\u{2030}' | '\u{00A4}' => {
                    return Err(bad("per mille and currency signs are not"));
                }
                '%' => {
                    percent = true;
                    if part == 1 {
                        part = 2;
                    }
                    if part == 0 { &mut prefix } else { &mut suffix }.push('%');
                }
                other => {
                    if part == 1 {
                        part = 2;
                    }
                    if part == 0 { &mut prefix } else { &mut suffix }.push(other);
                }
            }
        }
        if digits.is_empty() {
            return Err(bad("it has no digits (# or 0)"));
        }
        let (whole, fraction) = match digits.split_once('.') {
            Some((w, f)) if f.contains('.') => {
                let _ = w;
                return Err(bad("it has two decimal points"));
            }
            Some((w, f)) => (w, f),
            None => (digits.as_str(), ""),
        };
        if fraction.contains(',') {
            return Err(bad("grouping in the fraction is not"));
        }
        if fraction.trim_start_matches('0').contains('0') {
            return Err(bad("a 0 after a # in the fraction is not"));
        }
        // Java writes at most 309 whole and 340 fraction digits of a double.
        if whole.len() > 400 || fraction.len() > 340 {
            return Err(bad("more digits than a double has are not"));
        }
        let grouping = whole.rfind(',').map_or(0, |at| whole.len() - at - 1);
        if whole.contains(',') && grouping == 0 {
            return Err(bad("a grouping separator at the end of the digits is not"));
        }
        Ok(NumberFormat {
            prefix,
            suffix,
            min_integer: whole.chars().filter(|c| *c == '0').count(),
            min_fraction: fraction.chars().filter(|c| *c == '0').count(),
            max_fraction: fraction.len(),
            grouping,
            percent,
        })
    }

    /// `x` written with the pattern.
    pub fn write(&self, x: f64) -> String {
        if x.is_nan() {
            return "NaN".to_owned();
        }
        let x = if self.percent { x * 100.0 } else { x };
        if x.is_infinite() {
            let sign = if x < 0.0 { "-" } else { "" };
            return format!("{sign}{}\u{221E}{}", self.prefix, self.suffix);
        }
        // Rust rounds the double's exact value, ties to even: Java's HALF_EVEN.
        let text = format!("{:.*}", self.max_fraction, x.abs());
        let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
        // Fraction digits beyond the minimum are written only when not zero.
        let mut fraction = fraction.to_owned();
        while fraction.len() > self.min_fraction && fraction.ends_with('0') {
            fraction.pop();
        }
        let whole = whole.trim_start_matches('0');
        let mut whole = format!("{whole:0>width$}", width = self.min_integer);
        if whole.is_empty() && fraction.is_empty() {
            whole.push('0');
        }
        if self.grouping > 0 {
            whole = group(&whole, self.grouping);
        }
        // Java keeps the sign of a number that rounds to zero, and of -0.0: "-0".
        let negative = x.is_sign_negative();
        let mut out = String::new();
        if negative {
            out.push('-');
        }
        out.push_str(&self.prefix);
        out.push_str(&whole);
        if !fraction.is_empty() {
            out.push('.');
            out.push_str(&fraction);
        }
        out.push_str(&self.suffix);
        out
    }
}

/// `digits` with a `,` between groups of `size`, from the right.
fn group(digits: &str, size: usize) -> String {
    let chars: Vec<char> = digits.chars().collect();
    let mut out = String::new();
    for (i, c) in chars.iter().enumerate() {
        if i > 0 && (chars.len() - i).is_multiple_of(size) {
            out.push(',');
        }
        out.push(*c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(pattern: &str, x: f64) -> String {
        NumberFormat::parse(pattern).unwrap().write(x)
    }

    #[test]
    fn patterns_write_numbers_as_java_does() {
        assert_eq!(write("Value is ##0.0", 0.0), "Value is 0.0");
        assert_eq!(write("Value is ##0.0", 150.0), "Value is 150.0");
        assert_eq!(write("0.00", 1.005), "1.00");
        assert_eq!(write("0.00", 1.015), "1.01");
        assert_eq!(write("0.00", 0.125), "0.12");
        assert_eq!(write("0.00", 2.5), "2.50");
        assert_eq!(write("#", 2.5), "2");
        assert_eq!(write("#", 3.5), "4");
        assert_eq!(write("#.##", 0.5), ".5");
        assert_eq!(write("0.0#", 1.0), "1.0");
        assert_eq!(write("0", -0.0), "-0");
        assert_eq!(write("0.0", -0.01), "-0.0");
        assert_eq!(write("0", 0.0), "0");
        assert_eq!(write("0.0#", 1.234), "1.23");
        assert_eq!(write("#,##0", 1_234_567.0), "1,234,567");
        assert_eq!(write("000", 7.0), "007");
        assert_eq!(write("0.0%", 0.256), "25.6%");
        assert_eq!(write("'#'0", 5.0), "#5");
        assert_eq!(write("0.0", -1.25), "-1.2");
        assert_eq!(write("0", -0.2), "-0");
        assert_eq!(write("#.0", 12.0), "12.0");
    }

    #[test]
    fn patterns_it_cannot_write_are_refused() {
        let long = format!("0.{}", "0".repeat(70_000));
        for p in [
            "0.0E0",
            "0;(0)",
            "abc",
            "0.0.0",
            "#,##0.0,0",
            "0,",
            long.as_str(),
        ] {
            assert!(NumberFormat::parse(p).is_err(), "{p}");
        }
    }
}
