//! `regexp` and `fuzzy`: term-level queries over the terms of a field (not analysed; through a
//! keyword's normalizer).
//!
//! `regexp` takes Lucene's regular expression syntax, which is not Rust's: every pattern matches a
//! whole term; `"…"` quotes a literal; `\` escapes; `.`, `?`, `+`, `*`, `{n,m}`, `|`, `(…)` and
//! character classes as usual; with the optional operators on (`flags`, `ALL` by default) `@` is
//! any string and `<n-m>` a number in that range. The operators `#` (empty), `&` (intersection) and
//! `~` (complement) are refused by name; with their flag off they are literal characters, as in
//! Lucene. `^`, `$` and the Rust-only escapes (`\d`, `\w` …) stand for themselves.

use serde_json::{Map, Value};
use tantivy::query::RegexQuery;

use super::term_level::regex_escape;
use super::{BoxedQuery, QueryTranslator, check_options};
use crate::embedded::schema::{Indexed, scalar_text};
use crate::error::SearchError;
use crate::limits::within;
use crate::mapping::FieldKind;

/// The optional operators of a Lucene regular expression that are on.
#[derive(Debug, Clone, Copy)]
struct Flags {
    anystring: bool,
    interval: bool,
    intersection: bool,
    complement: bool,
    empty: bool,
}

impl Flags {
    /// Reads `flags` (`ALL` by default; `NONE`, or names joined by `|`).
    fn read(value: Option<&Value>, path: &str) -> Result<Flags, SearchError> {
        let all = Flags {
            anystring: true,
            interval: true,
            intersection: true,
            complement: true,
            empty: true,
        };
        let Some(value) = value else {
            return Ok(all);
        };
        let text = value
            .as_str()
            .ok_or_else(|| SearchError::dsl(path, "flags must be text such as ALL or NONE"))?;
        let mut flags = Flags {
            anystring: false,
            interval: false,
            intersection: false,
            complement: false,
            empty: false,
        };
        for name in text.split('|').map(str::trim).filter(|n| !n.is_empty()) {
            match name.to_ascii_uppercase().as_str() {
                "ALL" => flags = all,
                "NONE" => {}
                "ANYSTRING" => flags.anystring = true,
                "INTERVAL" => flags.interval = true,
                "INTERSECTION" => flags.intersection = true,
                "COMPLEMENT" => flags.complement = true,
                "EMPTY" => flags.empty = true,
                other => {
                    return Err(SearchError::dsl(
                        path,
                        format!("unknown regexp flag [{other}]"),
                    ));
                }
            }
        }
        Ok(flags)
    }
}

/// A Lucene regular expression in Rust's syntax (both match whole terms here).
fn lucene_to_rust(pattern: &str, flags: Flags) -> Result<String, String> {
    let mut out = String::with_capacity(pattern.len() * 2);
    let chars: Vec<char> = pattern.chars().collect();
    let mut i = 0;
    let refuse = |op: char, name: &str| {
        Err(format!(
            "the regexp operator [{op}] ({name}) is not supported by the embedded engine"
        ))
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                let next = chars.get(i + 1).copied().unwrap_or('\\');
                out.push_str(&regex_escape(&next.to_string()));
                i += 2;
                continue;
            }
            '"' => {
                let end = chars[i + 1..]
                    .iter()
                    .position(|&x| x == '"')
                    .ok_or_else(|| "an unterminated \" in the regexp".to_owned())?;
                let literal: String = chars[i + 1..i + 1 + end].iter().collect();
                out.push_str(&regex_escape(&literal));
                i += end + 2;
                continue;
            }
            '[' => {
                let end = class_end(&chars, i).ok_or("an unterminated [ in the regexp")?;
                out.push('[');
                let mut j = i + 1;
                if chars.get(j) == Some(&'^') {
                    out.push('^');
                    j += 1;
                }
                while j < end {
                    let x = chars[j];
                    match x {
                        '\\' if j + 1 < end => {
                            out.push_str(&regex_escape(&chars[j + 1].to_string()));
                            j += 2;
                            continue;
                        }
                        // Set operators and nesting in Rust's classes; plain characters in Lucene's.
                        '&' | '~' | '[' | ']' | '^' => {
                            out.push('\\');
                            out.push(x);
                        }
                        _ => out.push(x),
                    }
                    j += 1;
                }
                out.push(']');
                i = end + 1;
                continue;
            }
            '.' | '?' | '+' | '*' | '|' | '(' | ')' | '{' | '}' => out.push(c),
            '@' if flags.anystring => out.push_str(".*"),
            '<' if flags.interval => {
                let end = chars[i..]
                    .iter()
                    .position(|&x| x == '>')
                    .ok_or("an unterminated < in the regexp")?;
                let inner: String = chars[i + 1..i + end].iter().collect();
                out.push_str(&interval(&inner)?);
                i += end + 1;
                continue;
            }
            '#' if flags.empty => return refuse('#', "the empty language"),
            '&' if flags.intersection => return refuse('&', "intersection"),
            '~' if flags.complement => return refuse('~', "complement"),
            other => out.push_str(&regex_escape(&other.to_string())),
        }
        i += 1;
    }
    Ok(out)
}

/// Where the character class opened at `start` closes (a `]` right after `[` or `[^` belongs to it).
fn class_end(chars: &[char], start: usize) -> Option<usize> {
    let mut j = start + 1;
    if chars.get(j) == Some(&'^') {
        j += 1;
    }
    if chars.get(j) == Some(&']') {
        j += 1;
    }
    while j < chars.len() {
        match chars[j] {
            '\\' => j += 2,
            ']' => return Some(j),
            _ => j += 1,
        }
    }
    None
}

/// Lucene's `<n-m>`: the whole numbers from n to m, as an alternation (at most a thousand).
fn interval(inner: &str) -> Result<String, String> {
    let bad = || format!("the regexp interval <{inner}> is not <n-m>");
    let (lo, hi) = inner.split_once('-').ok_or_else(bad)?;
    let (lo, hi): (u64, u64) = (
        lo.trim().parse().map_err(|_| bad())?,
        hi.trim().parse().map_err(|_| bad())?,
    );
    let (lo, hi) = (lo.min(hi), lo.max(hi));
    if hi - lo > 1000 {
        return Err(format!(
            "the regexp interval <{inner}> spans more than 1000 numbers"
        ));
    }
    let numbers: Vec<String> = (lo..=hi).map(|n| n.to_string()).collect();
    Ok(format!("0*(?:{})", numbers.join("|")))
}

/// A Lucene regular expression (with its `flags`) in Rust's syntax.
pub(super) fn lucene_regex(
    pattern: &str,
    flags: Option<&Value>,
    path: &str,
) -> Result<String, SearchError> {
    let flags = Flags::read(flags, &format!("{path}.flags"))?;
    lucene_to_rust(pattern, flags).map_err(|e| SearchError::dsl(path, e))
}

impl QueryTranslator<'_> {
    /// `regexp`: the documents with a term the Lucene regular expression matches whole.
    pub(super) fn regexp_query(
        &self,
        indexed: &Indexed,
        options: &Map<String, Value>,
        path: &str,
    ) -> Result<BoxedQuery, SearchError> {
        let allowed = [
            "value",
            "flags",
            "case_insensitive",
            "max_determinized_states",
            "rewrite",
        ];
        let value = self.pattern_value("regexp", indexed, options, &allowed, path)?;
        let mut regex = lucene_regex(&value, options.get("flags"), path)?;
        if options.get("case_insensitive").and_then(Value::as_bool) == Some(true) {
            regex = format!("(?i){regex}");
        }
        Ok(Box::new(
            RegexQuery::from_pattern(&regex, indexed.field)
                .map_err(|e| SearchError::dsl(path, format!("invalid regexp: {e}")))?,
        ))
    }

    /// `fuzzy`: the documents with a term within `fuzziness` edits of the value (`AUTO` by
    /// default).
    pub(super) fn fuzzy_query(
        &self,
        indexed: &Indexed,
        options: &Map<String, Value>,
        path: &str,
    ) -> Result<BoxedQuery, SearchError> {
        let allowed = [
            "value",
            "fuzziness",
            "transpositions",
            "max_expansions",
            "prefix_length",
            "rewrite",
        ];
        let value = self.pattern_value("fuzzy", indexed, options, &allowed, path)?;
        let value = self.normalized(indexed, &value);
        // `AUTO` by default, as OpenSearch's `fuzzy`.
        let mut with_default = options.clone();
        with_default
            .entry("fuzziness")
            .or_insert_with(|| Value::from("AUTO"));
        if let Some(f) =
            super::full_text::fuzziness_of(&with_default, &value, "transpositions", path)?
            && f.max_expansions != usize::MAX
        {
            let max = self.limits.max_clause_count;
            within(f.max_expansions, max, "max_clause_count", path, || {
                format!(
                    "max_expansions {} is more than {max} terms",
                    f.max_expansions
                )
            })?;
        }
        // No edits left for a short term: the term itself, scored as the fuzzy terms are.
        let fuzziness =
            super::full_text::fuzziness_of(&with_default, &value, "transpositions", path)?
                .unwrap_or(super::fuzzy::Fuzziness {
                    distance: 0,
                    transpositions: true,
                    prefix_length: 0,
                    max_expansions: 1,
                });
        Ok(Box::new(super::fuzzy::FuzzyQuery::new(
            indexed.field,
            &value,
            fuzziness,
        )))
    }

    /// The `value` of a `kind` clause whose options are `allowed`, checked as a pattern.
    fn pattern_value(
        &self,
        kind: &str,
        indexed: &Indexed,
        options: &Map<String, Value>,
        allowed: &[&str],
        path: &str,
    ) -> Result<String, SearchError> {
        check_options(kind, options, &[allowed], path)?;
        let value = options
            .get("value")
            .and_then(scalar_text)
            .ok_or_else(|| SearchError::dsl(path, "expected a text value"))?;
        self.check_pattern(indexed, &value, kind, path)?;
        Ok(value)
    }

    /// A pattern for a term-level query on `indexed`: within `max_pattern_length`, on a text or
    /// keyword field.
    pub(super) fn check_pattern(
        &self,
        indexed: &Indexed,
        value: &str,
        kind: &str,
        path: &str,
    ) -> Result<(), SearchError> {
        let max = self.limits.max_pattern_length;
        let length = value.chars().count();
        within(length, max, "max_pattern_length", path, || {
            if kind == "regexp" {
                format!(
                    "The length of regex [{length}] used in the Regexp Query request has exceeded the allowed maximum of [{max}]. This maximum can be set by changing the [index.max_regex_length] index level setting."
                )
            } else {
                format!("the pattern is {length} characters long, more than {max}")
            }
        })?;
        if !matches!(indexed.spec.kind, FieldKind::Keyword | FieldKind::Text) {
            return Err(SearchError::dsl(
                path,
                format!(
                    "field '{}' is {}: {kind} queries need text or keyword",
                    indexed.spec.path,
                    indexed.spec.kind.name()
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Flags {
        Flags::read(None, "q").unwrap()
    }

    #[test]
    fn lucene_patterns_in_rust_syntax() {
        assert_eq!(lucene_to_rust("jo.*n", all()).unwrap(), "jo.*n");
        assert_eq!(lucene_to_rust("a\\.b", all()).unwrap(), "a\\.b");
        assert_eq!(lucene_to_rust("\"a.b\"c", all()).unwrap(), "a\\.bc");
        assert_eq!(lucene_to_rust("[a-c&]x", all()).unwrap(), "[a-c\\&]x");
        assert_eq!(lucene_to_rust("ab@", all()).unwrap(), "ab.*");
        assert_eq!(lucene_to_rust("^a$", all()).unwrap(), "\\^a\\$");
        assert_eq!(lucene_to_rust("x<1-3>", all()).unwrap(), "x0*(?:1|2|3)");
        assert!(
            lucene_to_rust("a&b", all())
                .unwrap_err()
                .contains("intersection")
        );
        let none = Flags::read(Some(&Value::from("NONE")), "q").unwrap();
        assert_eq!(lucene_to_rust("a&b@", none).unwrap(), "a\\&b@");
        assert!(Flags::read(Some(&Value::from("NOPE")), "q").is_err());
    }
}
