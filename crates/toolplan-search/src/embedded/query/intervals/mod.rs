//! `intervals`: documents where the positions of terms keep an order and a distance, as OpenSearch's
//! interval rules say (Lucene's `IntervalsSource`).
//!
//! A rule is read into a [`Rule`] tree: `match` (the analysed terms, combined by `mode` —
//! `ordered`, `unordered`, `unordered_no_overlap` — and `max_gaps`), `prefix`, `wildcard`,
//! `regexp` and `fuzzy` (the terms of the field they match, at most [`MAX_EXPANSIONS`] per index
//! segment), `all_of` (its rules combined the same way), `any_of`, and a `filter` on any of them
//! (`containing`, `contained_by`, `overlapping`, `before`, `after` and their `not_` forms).
//! [`IntervalsQuery`] runs the tree in each segment: for every document that has one of its terms it
//! reads the terms' positions and computes the rule's intervals (spans of positions) from them,
//! as Lucene does — term intervals; ordered and unordered combinations as minimal spans, their
//! gaps the positions between the parts; filters comparing spans. A document matches when its
//! rule has an interval; its score grows with the intervals and shrinks with their width.
//!
//! This module reads the rules; [`scorer`] runs them in a segment; [`spans`] is the span
//! arithmetic.

mod scorer;
mod spans;

use serde_json::{Map, Value};

use self::scorer::IntervalsQuery;
use super::{BoxedQuery, QueryTranslator, check_options};
use crate::embedded::schema::Indexed;
use crate::error::SearchError;
use crate::mapping::FieldKind;

/// The most terms a `prefix`, `wildcard`, `regexp` or `fuzzy` rule may match in one index segment
/// (Lucene's default for interval rules; lower with `max_clause_count`).
pub const MAX_EXPANSIONS: usize = 128;

/// How the parts of a `match` or `all_of` combine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Mode {
    Ordered,
    Unordered,
    UnorderedNoOverlap,
}

/// A relation between a rule's intervals and a filter's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Relation {
    Containing,
    ContainedBy,
    Overlapping,
    Before,
    After,
}

/// Terms a pattern rule matches, found in each segment's term dictionary.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Pattern {
    Prefix(String),
    /// A regular expression in Rust's syntax, matched against whole terms.
    Regex(String),
    Fuzzy {
        term: String,
        fuzziness: super::fuzzy::Fuzziness,
    },
}

/// An interval rule, read from the request.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Rule {
    Term(String),
    Pattern(Pattern, String),
    Combine {
        rules: Vec<Rule>,
        mode: Mode,
        max_gaps: Option<i64>,
    },
    AnyOf(Vec<Rule>),
    /// A rule's intervals started `before` positions earlier (the stop words a `match` query's
    /// analyzer removed before a term, which the term stands after).
    Extend {
        rule: Box<Rule>,
        before: u32,
    },
    /// `count` successive intervals of a rule as one: a rule named more than once in an
    /// unordered combination needs as many intervals of its own.
    Repeat {
        rule: Box<Rule>,
        count: usize,
    },
    Filter {
        rule: Box<Rule>,
        relation: Relation,
        negated: bool,
        filter: Box<Rule>,
    },
}

impl QueryTranslator<'_> {
    /// `intervals`: `{"<field>": <rule>}` on a text field.
    pub(super) fn intervals_query(
        &self,
        body: &Value,
        path: &str,
    ) -> Result<BoxedQuery, SearchError> {
        let Value::Object(o) = body else {
            return Err(SearchError::dsl(path, "expected {\"<field>\": <rule>}"));
        };
        let fields: Vec<(&String, &Value)> = o.iter().filter(|(k, _)| *k != "boost").collect();
        let [(name, rule)] = fields.as_slice() else {
            return Err(SearchError::dsl(path, "intervals names exactly one field"));
        };
        let here = format!("{path}.{name}");
        let Some(indexed) = self.indexed_field(name, &here)? else {
            return Ok(super::match_nothing());
        };
        if indexed.spec.kind != FieldKind::Text {
            return Err(SearchError::dsl(
                &here,
                format!(
                    "Can only use interval queries on text fields - not on [{name}] which is of type [{}]",
                    indexed.spec.kind.name()
                ),
            ));
        }
        let rule = self.interval_rule(indexed, rule, &here, 0)?;
        let query: BoxedQuery = Box::new(IntervalsQuery::new(
            indexed.field,
            rule,
            MAX_EXPANSIONS.min(self.limits.max_clause_count),
        ));
        Ok(super::with_boost(query, body))
    }

    /// One rule, `{"<kind>": {…}}`, `depth` rules down.
    fn interval_rule(
        &self,
        indexed: &Indexed,
        rule: &Value,
        path: &str,
        depth: usize,
    ) -> Result<Rule, SearchError> {
        let max = self.limits.max_nested_depth;
        crate::limits::within(
            depth + self.depth.get(),
            max,
            "max_nested_depth",
            path,
            || format!("the query nests more than {max} levels deep"),
        )?;
        let Some((kind, Value::Object(body))) = only_entry(rule) else {
            return Err(SearchError::dsl(
                path,
                "an interval rule is one {\"<rule>\": {…}}",
            ));
        };
        let here = format!("{path}.{kind}");
        self.count_clauses(1, &here)?;
        let allowed: &[&str] = match kind.as_str() {
            "match" => &[
                "query",
                "max_gaps",
                "ordered",
                "mode",
                "analyzer",
                "filter",
                "use_field",
            ],
            "all_of" => &["intervals", "max_gaps", "ordered", "mode", "filter"],
            "any_of" => &["intervals", "filter"],
            "prefix" => &["prefix", "analyzer", "use_field"],
            "wildcard" => &["pattern", "analyzer", "use_field"],
            "regexp" => &["pattern", "case_insensitive", "flags", "use_field"],
            "fuzzy" => &[
                "term",
                "fuzziness",
                "transpositions",
                "prefix_length",
                "analyzer",
                "use_field",
            ],
            other => {
                return Err(SearchError::dsl(
                    path,
                    format!("Unknown interval type [{other}]"),
                ));
            }
        };
        check_options(kind, body, &[allowed], &here)?;
        if body.contains_key("use_field") {
            return Err(SearchError::Unsupported {
                path: format!("{here}.use_field"),
                clause: "intervals use_field".into(),
            });
        }
        let inner = match kind.as_str() {
            "match" => {
                let text = text_option(body, "query", &here)?;
                let tokens = self.interval_tokens(indexed, body, text, &here)?;
                self.count_clauses(tokens.len(), &here)?;
                combine(
                    positioned_terms(tokens),
                    mode(body, &here)?,
                    max_gaps(body, &here)?,
                )
            }
            "all_of" => {
                let rules = self.interval_rules(indexed, body, &here, depth)?;
                combine(rules, mode(body, &here)?, max_gaps(body, &here)?)
            }
            "any_of" => Rule::AnyOf(self.interval_rules(indexed, body, &here, depth)?),
            "prefix" => {
                let text = text_option(body, "prefix", &here)?;
                let prefix = self.interval_normalized(indexed, body, text, &here)?;
                Rule::Pattern(Pattern::Prefix(prefix), format!("{text}*"))
            }
            "wildcard" => {
                let text = text_option(body, "pattern", &here)?;
                let pattern = self.interval_normalized(indexed, body, text, &here)?;
                let regex = super::term_level::wildcard_regex(&pattern);
                Rule::Pattern(Pattern::Regex(regex), text.to_owned())
            }
            "regexp" => {
                let text = text_option(body, "pattern", &here)?;
                let mut regex = super::regexp::lucene_regex(text, body.get("flags"), &here)?;
                if body.get("case_insensitive").and_then(Value::as_bool) == Some(true) {
                    regex = format!("(?i){regex}");
                }
                Rule::Pattern(Pattern::Regex(regex), text.to_owned())
            }
            _ => {
                let text = text_option(body, "term", &here)?;
                let term = self.interval_normalized(indexed, body, text, &here)?;
                let mut with_default = body.clone();
                with_default
                    .entry("fuzziness")
                    .or_insert_with(|| Value::from("AUTO"));
                let fuzziness =
                    super::full_text::fuzziness_of(&with_default, &term, "transpositions", &here)?
                        .unwrap_or(super::fuzzy::Fuzziness {
                            distance: 0,
                            transpositions: true,
                            prefix_length: 0,
                            max_expansions: MAX_EXPANSIONS,
                        });
                let pattern = Pattern::Fuzzy { term, fuzziness };
                Rule::Pattern(pattern, text.to_owned())
            }
        };
        match body.get("filter") {
            None => Ok(inner),
            Some(filter) => {
                self.interval_filter(indexed, inner, filter, &format!("{here}.filter"), depth)
            }
        }
    }

    /// The rules of `intervals` in an `all_of` or `any_of`.
    fn interval_rules(
        &self,
        indexed: &Indexed,
        body: &Map<String, Value>,
        path: &str,
        depth: usize,
    ) -> Result<Vec<Rule>, SearchError> {
        let Some(Value::Array(list)) = body.get("intervals") else {
            return Err(SearchError::dsl(
                path,
                "[intervals] must be a list of rules",
            ));
        };
        if list.is_empty() {
            return Err(SearchError::dsl(path, "[intervals] must not be empty"));
        }
        list.iter()
            .enumerate()
            .map(|(i, r)| {
                self.interval_rule(indexed, r, &format!("{path}.intervals[{i}]"), depth + 1)
            })
            .collect()
    }

    /// A rule's `filter`: `{"<relation>": <rule>}`.
    fn interval_filter(
        &self,
        indexed: &Indexed,
        rule: Rule,
        filter: &Value,
        path: &str,
        depth: usize,
    ) -> Result<Rule, SearchError> {
        let Some((name, inner)) = only_entry(filter) else {
            return Err(SearchError::dsl(
                path,
                "a filter is one {\"<relation>\": <rule>}",
            ));
        };
        let (negated, relation) = match name.as_str() {
            "containing" => (false, Relation::Containing),
            "not_containing" => (true, Relation::Containing),
            "contained_by" => (false, Relation::ContainedBy),
            "not_contained_by" => (true, Relation::ContainedBy),
            "overlapping" => (false, Relation::Overlapping),
            "not_overlapping" => (true, Relation::Overlapping),
            "before" => (false, Relation::Before),
            "after" => (false, Relation::After),
            "script" => {
                return Err(SearchError::Unsupported {
                    path: format!("{path}.script"),
                    clause: "intervals filter script".into(),
                });
            }
            other => {
                return Err(SearchError::dsl(
                    path,
                    format!("Unknown filter type [{other}]"),
                ));
            }
        };
        let filter = self.interval_rule(indexed, inner, &format!("{path}.{name}"), depth + 1)?;
        Ok(Rule::Filter {
            rule: Box::new(rule),
            relation,
            negated,
            filter: Box::new(filter),
        })
    }

    /// The tokens of `text` by the rule's `analyzer`, or the field's.
    fn interval_tokens(
        &self,
        indexed: &Indexed,
        body: &Map<String, Value>,
        text: &str,
        path: &str,
    ) -> Result<Vec<(String, usize)>, SearchError> {
        self.analyze_positioned(indexed, text, body.get("analyzer"), path)
    }

    /// A prefix, pattern or term as the field's analyzer normalizes text: lower-cased when it
    /// lower-cases (its letters only, so that `*` and `?` stay).
    fn interval_normalized(
        &self,
        indexed: &Indexed,
        body: &Map<String, Value>,
        text: &str,
        path: &str,
    ) -> Result<String, SearchError> {
        let lowers = self.interval_tokens(indexed, body, "A", path)? == [("a".to_owned(), 0)];
        Ok(if lowers {
            text.to_lowercase()
        } else {
            text.to_owned()
        })
    }
}

/// The one key and value of an object that has one.
fn only_entry(v: &Value) -> Option<(&String, &Value)> {
    v.as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.iter().next())
}

/// The text option `key` of a rule.
fn text_option<'a>(
    body: &'a Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<&'a str, SearchError> {
    body.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| SearchError::dsl(path, format!("[{key}] must be text")))
}

/// `mode` (or the older `ordered`) of a rule; unordered by default.
fn mode(body: &Map<String, Value>, path: &str) -> Result<Mode, SearchError> {
    if let Some(m) = body.get("mode") {
        return match m.as_str() {
            Some("ordered") => Ok(Mode::Ordered),
            Some("unordered") => Ok(Mode::Unordered),
            Some("unordered_no_overlap") => Ok(Mode::UnorderedNoOverlap),
            _ => Err(SearchError::dsl(
                format!("{path}.mode"),
                format!("unknown mode {m}: ordered, unordered or unordered_no_overlap"),
            )),
        };
    }
    match body.get("ordered") {
        None => Ok(Mode::Unordered),
        Some(Value::Bool(true)) => Ok(Mode::Ordered),
        Some(Value::Bool(false)) => Ok(Mode::Unordered),
        Some(other) => Err(SearchError::dsl(
            format!("{path}.ordered"),
            format!("[ordered] must be true or false, found {other}"),
        )),
    }
}

/// `max_gaps`: `None` (any gaps) unless a number not below 0.
fn max_gaps(body: &Map<String, Value>, path: &str) -> Result<Option<i64>, SearchError> {
    match body.get("max_gaps") {
        None => Ok(None),
        Some(v) => match v.as_i64() {
            Some(n) if n < 0 => Ok(None),
            Some(n) => Ok(Some(n)),
            None => Err(SearchError::dsl(
                format!("{path}.max_gaps"),
                format!("[max_gaps] must be a whole number, found {v}"),
            )),
        },
    }
}

/// The terms of an analysed text as interval rules, as Lucene's interval builder makes them:
/// tokens at one position (synonyms) are any of them; a term after removed tokens (stop words)
/// is extended back over their positions, so that `max_gaps` and order count the text's own
/// positions. One term alone is itself.
fn positioned_terms(tokens: Vec<(String, usize)>) -> Vec<Rule> {
    // (position, positions left empty before it, the terms there)
    let mut groups: Vec<(usize, usize, Vec<Rule>)> = Vec::new();
    for (text, position) in tokens {
        match groups.last_mut() {
            Some((at, _, terms)) if *at == position => terms.push(Rule::Term(text)),
            last => {
                // Before the first token, positions count from -1, as increments do.
                let spaces = match last {
                    Some((prev, _, _)) => position.saturating_sub(*prev + 1),
                    None => position,
                };
                groups.push((position, spaces, vec![Rule::Term(text)]));
            }
        }
    }
    let single = groups.len() == 1 && groups[0].2.len() == 1;
    groups
        .into_iter()
        .map(|(_, spaces, mut terms)| {
            let rule = if terms.len() == 1 {
                terms.remove(0)
            } else {
                Rule::AnyOf(terms)
            };
            match u32::try_from(spaces) {
                Ok(before) if before > 0 && !single => Rule::Extend {
                    rule: Box::new(rule),
                    before,
                },
                _ => rule,
            }
        })
        .collect()
}

/// Rules combined by a mode; one rule stands alone.
///
/// Unordered, as Lucene builds it: an unordered rule without `max_gaps` among the parts gives its
/// parts instead (so does an ordered one in an ordered rule), and a part named `n` times is one part of `n` successive intervals, so that one
/// occurrence cannot stand for two parts (`"cold cold"` needs two).
fn combine(mut rules: Vec<Rule>, mode: Mode, max_gaps: Option<i64>) -> Rule {
    // One rule is itself, `max_gaps` aside, as OpenSearch combines sources.
    if rules.len() == 1 {
        return rules.remove(0);
    }
    // A rule of the same mode without `max_gaps` among the parts gives its parts, as Lucene
    // builds ordered and unordered rules.
    if mode != Mode::UnorderedNoOverlap {
        let mut flat: Vec<Rule> = Vec::with_capacity(rules.len());
        for rule in rules {
            match rule {
                Rule::Combine {
                    rules: inner,
                    mode: inner_mode,
                    max_gaps: None,
                } if inner_mode == mode => flat.extend(inner),
                other => flat.push(other),
            }
        }
        rules = flat;
    }
    if mode == Mode::Unordered {
        let mut counted: Vec<(Rule, usize)> = Vec::with_capacity(rules.len());
        for rule in rules {
            match counted.iter_mut().find(|(seen, _)| *seen == rule) {
                Some((_, n)) => *n += 1,
                None => counted.push((rule, 1)),
            }
        }
        rules = counted
            .into_iter()
            .map(|(rule, count)| match count {
                1 => rule,
                _ => Rule::Repeat {
                    rule: Box::new(rule),
                    count,
                },
            })
            .collect();
        if rules.len() == 1 && max_gaps.is_none() {
            return rules.remove(0);
        }
    }
    Rule::Combine {
        rules,
        mode,
        max_gaps,
    }
}
