//! Execution-guided checks: a body that passed the mapping checks and the dry run is run once (at
//! most [`OBSERVE_MAX_HITS`] hits) and what came back, with cheap checks against the question, is
//! turned into *observations* — things that are valid DSL but unlikely to answer the question. The
//! planner sends them back to the model once, within its repair budget, like problems.
//!
//! The observations, each general (any index, any mapping):
//!
//! * **no hits** — the query matched no documents (unless the question is a yes/no one, see
//!   [`YES_NO_OPENINGS`]);
//! * **named value not filtered** — the question names a frequent value of a keyword field
//!   (case-insensitive, whole words, a plural `s` / `es` / `ies` allowed, values of at least
//!   [`MIN_VALUE_CHARS`] letters or digits) that the body never mentions; and a `term` / `terms` /
//!   `match` on a keyword field whose value is stored in another case;
//! * **one-instant range** — a range whose lower and upper bounds are equal, a value the question
//!   does not name (the model copies the current time into both);
//! * **sample value copied** — a range bound, or a `term` / `match` value, that equals the sample
//!   document's value of that field while the question does not mention it;
//! * **another value** — a `term` / `terms` / `match` value of a keyword field that the question
//!   does not name, while it names another of that field's frequent values or neither a value nor
//!   the field;
//! * **missing aggregation** — the question asks for an average, a total, an extreme or a result per
//!   group ([`AGGREGATE_WORDS`]) and the body has no aggregation (or sort) that gives it;
//! * **count only** — `size: 0` and no aggregations, so only a count comes back, while the question
//!   asks for documents (none of [`COUNT_WORDS`]).
//!
//! The word lists are short, general English, and all here.

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::values::KeywordValues;
use crate::backend::SearchBackend;
use crate::check::{agg_bodies, clause_value, query_objects};
use crate::error::SearchError;
use crate::mapping::{FieldKind, Mapping, value_at};

/// The observation run asks for at most this many hits.
pub const OBSERVE_MAX_HITS: u64 = 10;
/// Keyword values shorter than this (letters and digits) are not looked for in the question.
pub const MIN_VALUE_CHARS: usize = 3;

/// Openings of yes/no questions, which a query that matches nothing answers ("no").
pub const YES_NO_OPENINGS: &[&str] = &[
    "are there",
    "is there",
    "was there",
    "were there",
    "are any",
    "is any",
    "do any",
    "does any",
    "did any",
    "has any",
    "have any",
];

/// Words of questions that ask for a number of documents, which `hits.total` answers.
pub const COUNT_WORDS: &[&str] = &["how many", "count", "number of"];

/// Words of questions that ask for a number of documents even with "total" in them ("how many in
/// total"); "the total number of pages" asks for a sum.
pub const TOTAL_COUNT_WORDS: &[&str] = &["how many", "count"];

/// What a question can ask for that needs an aggregation (or, for extremes, a sort).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// An `avg` (or `stats`) aggregation.
    Average,
    /// A `sum` (or `stats`, `value_count`) aggregation — not for [`TOTAL_COUNT_WORDS`] questions.
    Total,
    /// The largest value: a sort (descending) or a `max` aggregation — any aggregation or sort.
    Largest,
    /// The smallest value: a sort (ascending) or a `min` aggregation — any aggregation or sort.
    Smallest,
    /// A result per group: a bucket aggregation (`terms` …).
    PerGroup,
}

/// The words (whole words of the question) that ask for each [`Needs`], first match wins per kind.
pub const AGGREGATE_WORDS: &[(Needs, &[&str])] = &[
    (Needs::Average, &["average", "mean"]),
    (Needs::Total, &["total", "sum"]),
    (
        Needs::Largest,
        &[
            "largest",
            "highest",
            "maximum",
            "max",
            "biggest",
            "longest",
            "greatest",
            "most expensive",
            "most recent",
            "most recently",
            "latest",
            "newest",
        ],
    ),
    (
        Needs::Smallest,
        &[
            "smallest",
            "lowest",
            "minimum",
            "min",
            "shortest",
            "cheapest",
            "least expensive",
            "earliest",
            "oldest",
        ],
    ),
    (Needs::PerGroup, &["each", "per", "for every"]),
];

/// Aggregation types that give an average, a total, or buckets.
pub(super) const AVERAGE_AGGS: &[&str] = &["avg", "stats", "extended_stats"];
pub(super) const TOTAL_AGGS: &[&str] = &["sum", "stats", "extended_stats", "value_count"];
const BUCKET_AGGS: &[&str] = &[
    "terms",
    "multi_terms",
    "histogram",
    "date_histogram",
    "range",
    "date_range",
    "filters",
    "composite",
];

/// What the checks compare a body with.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The question.
    pub question: &'a str,
    /// The index mapping.
    pub mapping: &'a Mapping,
    /// The frequent values of its keyword fields.
    pub values: &'a KeywordValues,
    /// The sample document the prompt showed.
    pub sample: Option<&'a Value>,
}

/// The body the observation run sends: `size` at most [`OBSERVE_MAX_HITS`], the rest as given.
pub fn observation_body(body: &Value) -> Value {
    let mut run = body.clone();
    if let Value::Object(o) = &mut run {
        let size = o.get("size").and_then(Value::as_u64);
        if size.is_none_or(|n| n > OBSERVE_MAX_HITS) {
            o.insert("size".into(), Value::from(OBSERVE_MAX_HITS));
        }
    }
    run
}

/// Runs [`observation_body`] on `index`; the backend's limits and time budget apply, and `cancel`
/// stops it ([`SearchError::Cancelled`]).
pub async fn run(
    backend: &dyn SearchBackend,
    index: &str,
    body: &Value,
    cancel: &CancellationToken,
) -> Result<Value, SearchError> {
    let body = observation_body(body);
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(SearchError::Cancelled(index.to_owned())),
        r = backend.search(index, &body) => r,
    }
}

/// Every observation of `body` against the question, with the `response` of its run if there is one.
pub fn observations(cx: &Context<'_>, body: &Value, response: Option<&Value>) -> Vec<String> {
    let question = words(cx.question);
    let mut out = Vec::new();
    if let Some(r) = response
        && total_hits(r) == Some(0)
        && !is_yes_no(&question)
    {
        out.push("it matched no documents; check the field names and that values are spelled as stored (see the values of keyword fields)".to_owned());
    }
    named_values(cx, &question, body, &mut out);
    ranges(cx, &question, body, &mut out);
    sample_terms(cx, &question, body, &mut out);
    other_values(cx, &question, body, &mut out);
    let before = out.len();
    aggregations(&question, body, &mut out);
    if out.len() == before {
        count_only(&question, body, &mut out);
    }
    out
}

/// `hits.total` of a response (`{"value": n}` or a bare number).
pub fn total_hits(response: &Value) -> Option<u64> {
    let total = response.pointer("/hits/total")?;
    total
        .get("value")
        .and_then(Value::as_u64)
        .or_else(|| total.as_u64())
}

/// Text as lower-case words separated by single spaces, with a space at each end (` a b `), so
/// that ` word ` finds whole words.
pub fn words(text: &str) -> String {
    let mut out = String::from(" ");
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            out.push(c);
        } else if !out.ends_with(' ') {
            out.push(' ');
        }
    }
    if !out.ends_with(' ') {
        out.push(' ');
    }
    out
}

/// Whether `haystack` (from [`words`]) holds `phrase` as whole words, a plural of its last word
/// (`s`, `es`, `y` → `ies`) allowed.
pub fn names(haystack: &str, phrase: &str) -> bool {
    let p = words(phrase);
    let p = p.trim();
    if p.is_empty() {
        return false;
    }
    let mut forms = vec![format!(" {p} "), format!(" {p}s "), format!(" {p}es ")];
    if let Some(stem) = p.strip_suffix('y') {
        forms.push(format!(" {stem}ies "));
    }
    forms.iter().any(|f| haystack.contains(f.as_str()))
}

fn is_yes_no(question: &str) -> bool {
    YES_NO_OPENINGS
        .iter()
        .any(|o| question.starts_with(&format!(" {o} ")))
        || question.contains(" if any ")
}

/// Every string and key of a body, as [`words`].
fn body_words(body: &Value) -> String {
    fn walk(v: &Value, out: &mut String) {
        match v {
            Value::String(s) => {
                out.push_str(&words(s));
            }
            Value::Object(o) => {
                for (k, child) in o {
                    out.push_str(&words(k));
                    walk(child, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|c| walk(c, out)),
            Value::Number(n) => out.push_str(&words(&n.to_string())),
            _ => {}
        }
    }
    let mut out = String::new();
    walk(body, &mut out);
    out
}

/// The frequent keyword values the question names (see [`names`]) that the body never mentions,
/// by field, in the order of the fields.
pub(super) fn missing_values<'v>(
    cx: &Context<'v>,
    question: &str,
    body: &Value,
) -> Vec<(&'v str, Vec<&'v str>)> {
    let in_body = body_words(body);
    let mut missing: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for (field, value) in cx.values.pairs() {
        let key = words(value);
        let long_enough = value.chars().filter(|c| c.is_alphanumeric()).count() >= MIN_VALUE_CHARS;
        if !long_enough || seen.contains(&key) || !names(question, value) {
            continue;
        }
        seen.push(key);
        if names(&in_body, value) {
            continue;
        }
        match missing.iter_mut().find(|(f, _)| *f == field) {
            Some((_, vs)) => vs.push(value),
            None => missing.push((field, vec![value])),
        }
    }
    missing
}

fn named_values(cx: &Context<'_>, question: &str, body: &Value, out: &mut Vec<String>) {
    let missing = missing_values(cx, question, body);
    for (field, vs) in missing {
        let quoted: Vec<String> = vs.iter().map(|v| format!("'{v}'")).collect();
        let (what, it) = if vs.len() == 1 {
            ("a value", "it")
        } else {
            ("values", "them")
        };
        out.push(format!(
            "the question names {} ({what} of {field}) but the query does not filter on {it}",
            quoted.join(", ")
        ));
    }
    // Exact clauses on keyword fields whose value is stored in another case.
    for_each_field_value(body, &["term", "terms", "match"], |field, v| {
        let Some(text) = v.as_str() else { return };
        let stored = known_values(cx, field);
        let is_keyword = cx
            .mapping
            .field(field)
            .is_some_and(|f| f.kind == FieldKind::Keyword);
        if is_keyword
            && !stored.contains(&text)
            && let Some(s) = stored
                .iter()
                .find(|s| s.to_lowercase() == text.to_lowercase())
        {
            out.push(format!(
                "{field} stores '{s}', not '{text}': keyword values match exactly, in the stored case"
            ));
        }
    });
}

/// The frequent values of keyword field `field`.
fn known_values<'v>(cx: &Context<'v>, field: &str) -> Vec<&'v str> {
    cx.values
        .pairs()
        .filter(|(f, _)| *f == field)
        .map(|(_, v)| v)
        .collect()
}

/// Calls `f(field, value)` for each value of the given field-keyed clauses in the query: `term`
/// (`{"f": v}` or `{"f": {"value": v}}`), `terms` (each item), `match` (`{"f": v}` or
/// `{"f": {"query": v}}`), `range` (each bound).
fn for_each_field_value(body: &Value, clauses: &[&str], mut f: impl FnMut(&str, &Value)) {
    let Some(q) = body.get("query") else { return };
    for (_, ptr) in query_objects(q, "query") {
        let Some(Value::Object(obj)) = q.pointer(&ptr) else {
            continue;
        };
        for (clause, inner) in obj.iter().filter(|(c, _)| clauses.contains(&c.as_str())) {
            let Value::Object(fields) = inner else {
                continue;
            };
            for (field, v) in fields.iter().filter(|(k, _)| k.as_str() != "boost") {
                match (clause.as_str(), v) {
                    ("terms", Value::Array(items)) => items.iter().for_each(|i| f(field, i)),
                    ("range", Value::Object(bounds)) => bounds
                        .iter()
                        .filter(|(k, _)| is_bound(k))
                        .for_each(|(_, b)| f(field, b)),
                    (_, options) => {
                        if let Some(x) = clause_value(options) {
                            f(field, x);
                        }
                    }
                }
            }
        }
    }
}

/// Whether a `range` key is a bound (`gt`, `gte`, `lt`, `lte`, `from`, `to`).
pub(super) fn is_bound(k: &str) -> bool {
    matches!(k, "gt" | "gte" | "lt" | "lte" | "from" | "to")
}

/// The numbers written in a text (`3.0`, `550`, `-2`).
fn numbers_in(text: &str) -> Vec<f64> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() || (c == '.' && !cur.is_empty() && !cur.contains('.')) {
            cur.push(c);
        } else {
            if let Ok(n) = cur.trim_end_matches('.').parse::<f64>() {
                out.push(n);
            }
            cur.clear();
        }
    }
    out
}

/// Whether the question mentions `v` (a number written in it, or the text as whole words).
pub(super) fn mentions(question_text: &str, question: &str, v: &Value) -> bool {
    match v {
        Value::Number(n) => n.as_f64().is_some_and(|x| {
            numbers_in(question_text)
                .iter()
                .any(|q| (q - x).abs() < 1e-9)
        }),
        Value::String(s) => {
            names(question, s)
                || s.parse::<f64>()
                    .is_ok_and(|x| mentions(question_text, question, &Value::from(x)))
        }
        other => names(question, &other.to_string()),
    }
}

/// Whether two values are the same value: numbers by value (a number written as a string too),
/// strings trimmed and case-insensitive.
pub(super) fn same(a: &Value, b: &Value) -> bool {
    let number = |v: &Value| {
        v.as_f64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse::<f64>().ok()))
    };
    if a.is_number() || b.is_number() {
        return matches!((number(a), number(b)), (Some(x), Some(y)) if (x - y).abs() < 1e-9);
    }
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (x - y).abs() < 1e-9,
        _ => match (a.as_str(), b.as_str()) {
            (Some(x), Some(y)) => x.trim().eq_ignore_ascii_case(y.trim()),
            _ => a == b,
        },
    }
}

/// The sample document's value of `field` (a sub-field reads its parent's value).
pub(super) fn sample_value<'v>(cx: &Context<'v>, field: &str) -> Option<&'v Value> {
    let source = cx
        .mapping
        .field(field)
        .map_or(field, |f| f.source_path.as_str());
    value_at(cx.sample?, source)
}

fn ranges(cx: &Context<'_>, question: &str, body: &Value, out: &mut Vec<String>) {
    let Some(q) = body.get("query") else { return };
    for (_, ptr) in query_objects(q, "query") {
        let Some(Value::Object(fields)) = q.pointer(&ptr).and_then(|o| o.get("range")) else {
            continue;
        };
        for (field, bounds) in fields {
            let Value::Object(bounds) = bounds else {
                continue;
            };
            let lower = ["gte", "gt", "from"].iter().find_map(|k| bounds.get(*k));
            let upper = ["lte", "lt", "to"].iter().find_map(|k| bounds.get(*k));
            if let (Some(lo), Some(hi)) = (lower, upper)
                && same(lo, hi)
                && !mentions(cx.question, question, lo)
            {
                let date = cx
                    .mapping
                    .field(field)
                    .is_some_and(|f| f.kind == FieldKind::Date);
                out.push(if date {
                    format!("the range on {field} allows one instant only ({lo}); filter on dates only when the question asks")
                } else {
                    format!("the range on {field} allows the one value {lo} only; filter on {field} only as the question asks")
                });
                continue;
            }
            let sample = sample_value(cx, field);
            for b in bounds.iter().filter(|(k, _)| is_bound(k)).map(|(_, b)| b) {
                if sample.is_some_and(|s| same(s, b)) && !mentions(cx.question, question, b) {
                    out.push(format!(
                        "the range on {field} uses {b}, the sample document's value, which the question does not mention; filter only on what the question asks"
                    ));
                    break;
                }
            }
        }
    }
}

fn sample_terms(cx: &Context<'_>, question: &str, body: &Value, out: &mut Vec<String>) {
    let clauses = ["term", "terms", "match", "match_phrase"];
    for_each_field_value(body, &clauses, |field, v| {
        if v.is_string()
            && sample_value(cx, field).is_some_and(|s| same(s, v))
            && !mentions(cx.question, question, v)
        {
            out.push(format!(
                "the query looks for {v} in {field}, the sample document's value, which the question does not mention; filter only on what the question asks"
            ));
        }
    });
}

/// Whether `value` of keyword field `field` is one the query should not look for: one of the
/// field's frequent values that the question does not name, while it names another of them
/// (`species: versicolor` for "how many are not setosa"), or, in a body `anchored` by a value the
/// question does name ([`names_a_value`]), names neither a value nor the field itself
/// (`genre: non-fiction` beside `author: Omar Haddad` for "how many books did Omar Haddad write").
/// A lone value the question does not name is left alone: it may be the model's reading of a
/// word ("tickets about parcels" → `category: shipping`).
pub(super) fn other_value(
    cx: &Context<'_>,
    question: &str,
    field: &str,
    value: &Value,
    anchored: bool,
) -> bool {
    let Some(text) = value.as_str() else {
        return false;
    };
    let known = known_values(cx, field);
    known.iter().any(|v| v.eq_ignore_ascii_case(text))
        && !mentions(cx.question, question, value)
        && (known
            .iter()
            .any(|v| !v.eq_ignore_ascii_case(text) && names(question, v))
            || (anchored && !names_field(question, field)))
}

/// Whether a `term` / `terms` / `match` / `match_phrase` clause of the body looks for a text of at
/// least [`MIN_VALUE_CHARS`] letters or digits that the question names.
pub(super) fn names_a_value(question: &str, body: &Value) -> bool {
    let mut named = false;
    for_each_field_value(body, &["term", "terms", "match", "match_phrase"], |_, v| {
        named |= v.as_str().is_some_and(|t| {
            t.chars().filter(|c| c.is_alphanumeric()).count() >= MIN_VALUE_CHARS
                && names(question, t)
        });
    });
    named
}

/// Whether the question (from [`words`]) names a field: a word of its last path segment (the
/// parent's for a `.keyword` sub-field; `_` and `-` separate words) of at least
/// [`MIN_VALUE_CHARS`] letters, plurals allowed.
pub(super) fn names_field(question: &str, field: &str) -> bool {
    stem(field)
        .split(['_', '-'])
        .filter(|w| w.chars().count() >= MIN_VALUE_CHARS)
        .any(|w| names(question, w))
}

/// A field's name: its last dotted segment (the parent's for a `.keyword` sub-field), whose `_`
/// and `-` separate its words.
pub(super) fn stem(path: &str) -> String {
    let path = path.strip_suffix(".keyword").unwrap_or(path);
    path.rsplit('.').next().unwrap_or(path).to_owned()
}

fn other_values(cx: &Context<'_>, question: &str, body: &Value, out: &mut Vec<String>) {
    let anchored = names_a_value(question, body);
    for_each_field_value(
        body,
        &["term", "terms", "match", "match_phrase"],
        |field, v| {
            if other_value(cx, question, field, v, anchored) {
                out.push(format!(
                "the query looks for {v} in {field}, which the question does not name; filter only on what the question asks"
            ));
            }
        },
    );
}

/// The aggregation types in a body, sub-aggregations included.
pub(super) fn agg_types(body: &Value) -> Vec<String> {
    ["aggs", "aggregations"]
        .iter()
        .filter_map(|k| body.get(*k).map(|a| (*k, a)))
        .flat_map(|(k, a)| agg_bodies(a, k))
        .filter_map(|(path, _)| path.rsplit('.').next().map(str::to_owned))
        .collect()
}

/// Whether the body sorts its hits.
pub(super) fn has_sort(body: &Value) -> bool {
    body.get("sort").is_some_and(|s| match s {
        Value::Array(a) => !a.is_empty(),
        Value::Null => false,
        _ => true,
    })
}

fn aggregations(question: &str, body: &Value, out: &mut Vec<String>) {
    let types = agg_types(body);
    let has = |set: &[&str]| types.iter().any(|t| set.contains(&t.as_str()));
    let sorted = has_sort(body);
    let counting = TOTAL_COUNT_WORDS.iter().any(|w| names(question, w));
    for (needs, list) in AGGREGATE_WORDS {
        let Some(word) = list.iter().find(|w| question.contains(&format!(" {w} "))) else {
            continue;
        };
        let message = match needs {
            Needs::Average if !has(AVERAGE_AGGS) => {
                "use an avg aggregation on the field (size 0)".to_owned()
            }
            Needs::Total if !has(TOTAL_AGGS) && !counting => {
                "use a sum aggregation on the field (size 0)".to_owned()
            }
            Needs::Largest if types.is_empty() && !sorted => {
                "sort by the field in descending order for the documents, or use a max aggregation for the value".to_owned()
            }
            Needs::Smallest if types.is_empty() && !sorted => {
                "sort by the field in ascending order for the documents, or use a min aggregation for the value".to_owned()
            }
            Needs::PerGroup if !has(BUCKET_AGGS) => {
                "use a terms aggregation on the field to group by".to_owned()
            }
            _ => continue,
        };
        out.push(format!(
            "the question asks for the '{word}' but the query has no aggregation{} that gives it: {message}",
            if matches!(needs, Needs::Largest | Needs::Smallest) {
                " or sort"
            } else {
                ""
            }
        ));
    }
}

fn count_only(question: &str, body: &Value, out: &mut Vec<String>) {
    let size_zero = body.get("size").and_then(Value::as_u64) == Some(0);
    let counting = COUNT_WORDS.iter().any(|w| names(question, w));
    if size_zero && agg_types(body).is_empty() && !counting && !is_yes_no(question) {
        out.push("it returns only the number of matches (size 0, no aggregations), while the question asks for documents: set size to the number of documents wanted".to_owned());
    }
}

#[cfg(test)]
#[path = "observe_tests.rs"]
mod tests;
