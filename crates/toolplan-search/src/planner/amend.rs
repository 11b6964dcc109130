//! Amendments: what the planner can correct in a valid body from its observations ([`super::observe`])
//! without asking the model again. A small model told "the question names 'virginica' but the query
//! does not filter on it" often writes a worse query; the planner knows the field and the value, so
//! it adds the filter itself. The amended body is checked and run like any other, and kept only when
//! it has fewer observations than the body it came from.
//!
//! The amendments, in order, each general (any index, any mapping):
//!
//! * **copied values dropped** — a `term` / `match` / `match_phrase` clause, or a range bound, whose
//!   value equals the sample document's and is not in the question, is removed (as is a range whose
//!   bounds are one value the question does not name), and so is a frequent keyword value the
//!   question does not name while it names another value of that field, or neither a value nor the
//!   field;
//! * **values moved to their field** — a `match` / `match_phrase` / `term` on a text field the
//!   question does not name, whose text is the question's words and names exactly one frequent
//!   keyword value (`title: "mystery"` or `"mystery books"` for "how many mystery books"), becomes
//!   a `term` on the keyword field;
//! * **named values filtered** — each frequent keyword value the question names and the query
//!   ignores becomes a `term` filter (several values of one field: `terms`); after a negation
//!   ([`NEGATIONS`]: "not closed") it goes under `must_not`;
//! * **exclusive terms merged** — when the query matched nothing and it requires one keyword field
//!   to equal two values at once (`category: billing` and `category: login`), they become one
//!   `terms` ("billing or login");
//! * **words in text** — when the query matched nothing, a `match` / `match_phrase` on the exact
//!   sub-field of a text field (`title.keyword: "dragon"`) goes to the text field (`title`);
//! * **aggregation added** — the question asks for an average, a total, an extreme or a count per
//!   group ([`AGGREGATE_WORDS`]), the body has nothing that gives it, and exactly one field of the
//!   right type is named in the question (`petal width` → `petal_width_in_cm`): an `avg` / `sum` /
//!   `max` / `min` aggregation (size 0), or for a question asking for documents ("which …") a sort
//!   and as many hits as it names; for "each" / "per", a `terms` aggregation on the keyword field
//!   named after it.

use serde_json::{Map, Value, json};

use super::observe::{
    AGGREGATE_WORDS, AVERAGE_AGGS, Context, MIN_VALUE_CHARS, Needs, TOTAL_AGGS, TOTAL_COUNT_WORDS,
    agg_types, has_sort, is_bound, mentions, missing_values, names, names_a_value, names_field,
    other_value, same, sample_value, stem, total_hits, words,
};
use crate::check::{clause_value, field_clause, query_objects};
use crate::mapping::{FieldKind, FieldSpec};

/// Words that, right before a value the question names (at most two words before), make it a value
/// to exclude: "not closed", "no longer open", "except billing".
pub const NEGATIONS: &[&str] = &[
    "not",
    "no",
    "non",
    "except",
    "excluding",
    "without",
    "isn t",
    "aren t",
];

/// Openings of questions that ask for documents rather than a value.
pub const DOCUMENT_OPENINGS: &[&str] = &["which", "who", "list", "show", "find", "give", "name"];

/// Most hits a sort added for "which N …" asks for.
const MAX_NAMED_SIZE: u64 = 100;

/// Buckets a `terms` aggregation added for "each" asks for.
const GROUP_BUCKETS: u64 = 50;

/// The body amended from what the planner observed of it (`response`: its run), with a line per
/// amendment; `None` when nothing could be amended.
pub fn amend(
    cx: &Context<'_>,
    body: &Value,
    response: Option<&Value>,
) -> Option<(Value, Vec<String>)> {
    let question = words(cx.question);
    let mut out = body.clone();
    if !out.is_object() {
        return None;
    }
    let mut notes = Vec::new();
    drop_copied_values(cx, &question, &mut out, &mut notes);
    values_to_their_field(cx, &question, &mut out, &mut notes);
    filter_named_values(cx, &question, &mut out, &mut notes);
    if response.and_then(total_hits) == Some(0) {
        merge_exclusive_terms(cx, &mut out, &mut notes);
        match_analysed_text(cx, &mut out, &mut notes);
    }
    add_aggregation(cx, &question, &mut out, &mut notes);
    (!notes.is_empty()).then_some((out, notes))
}

/// The clause lists of a `bool` query.
const BOOL_LISTS: &[&str] = &["filter", "must", "should", "must_not"];

fn drop_copied_values(cx: &Context<'_>, question: &str, body: &mut Value, notes: &mut Vec<String>) {
    let anchored = names_a_value(question, body);
    let Some(query) = body.get_mut("query") else {
        return;
    };
    prune(cx, question, anchored, query, notes);
    // The query itself may be the one clause to drop.
    let drop = is_empty_bool(query)
        || (query.get("bool").is_none() && !keep_clause(cx, question, anchored, query, notes));
    if drop && let Value::Object(o) = body {
        o.remove("query");
    }
}

/// Removes copied clauses from the `bool` queries of `query`, recursively.
fn prune(
    cx: &Context<'_>,
    question: &str,
    anchored: bool,
    query: &mut Value,
    notes: &mut Vec<String>,
) {
    let Some(Value::Object(b)) = query.get_mut("bool") else {
        return;
    };
    for list in BOOL_LISTS {
        let Some(clauses) = b.get_mut(*list) else {
            continue;
        };
        if clauses.is_object() {
            *clauses = Value::Array(vec![clauses.take()]);
        }
        let Value::Array(items) = clauses else {
            continue;
        };
        for item in items.iter_mut() {
            prune(cx, question, anchored, item, notes);
        }
        items.retain_mut(|clause| keep_clause(cx, question, anchored, clause, notes));
        if items.is_empty() {
            b.remove(*list);
        }
    }
}

/// Whether a clause stays: false for a clause made only of a copied value (after the copied bounds
/// of a range are removed).
fn keep_clause(
    cx: &Context<'_>,
    question: &str,
    anchored: bool,
    clause: &mut Value,
    notes: &mut Vec<String>,
) -> bool {
    let Value::Object(c) = clause else {
        return true;
    };
    let Some((kind, Value::Object(fields))) = c.iter_mut().next() else {
        return true;
    };
    // A boolean is never written in the question as a value: naming its field is mentioning it.
    let copied = |field: &str, v: &Value| {
        sample_value(cx, field).is_some_and(|s| same(s, v))
            && !mentions(cx.question, question, v)
            && !(v.is_boolean() && names_field(question, field))
    };
    match kind.as_str() {
        "terms" => {
            let Some((field, Value::Array(items))) = fields.iter_mut().next() else {
                return true;
            };
            let before = items.len();
            items.retain(|v| !other_value(cx, question, field, v, anchored));
            if items.len() < before {
                notes.push(format!(
                    "terms {field}: values the question does not name; removed"
                ));
            }
            !items.is_empty()
        }
        "term" | "match" | "match_phrase" => {
            let Some((field, v)) = fields.iter().next() else {
                return true;
            };
            let v = clause_value(v).unwrap_or(v);
            if fields.len() == 1 && copied(field, v) {
                notes.push(format!("{kind} {field} = {v}: the sample document's value, not in the question; removed"));
                return false;
            }
            if fields.len() == 1 && other_value(cx, question, field, v, anchored) {
                notes.push(format!(
                    "{kind} {field} = {v}: a value the question does not name; removed"
                ));
                return false;
            }
            true
        }
        "range" => {
            let Some((field, Value::Object(bounds))) = fields.iter_mut().next() else {
                return true;
            };
            let field = field.clone();
            let lower = ["gte", "gt", "from"]
                .iter()
                .find_map(|k| bounds.get(*k))
                .cloned();
            let upper = ["lte", "lt", "to"]
                .iter()
                .find_map(|k| bounds.get(*k))
                .cloned();
            if let (Some(lo), Some(hi)) = (&lower, &upper)
                && same(lo, hi)
                && !mentions(cx.question, question, lo)
            {
                notes.push(format!(
                    "range {field}: one value ({lo}) the question does not name; removed"
                ));
                return false;
            }
            let before = bounds.len();
            bounds.retain(|k, b| !(is_bound(k) && copied(&field, b)));
            if bounds.len() < before {
                notes.push(format!("range {field}: a bound that is the sample document's value, not in the question; removed"));
            }
            bounds.keys().any(|k| is_bound(k))
        }
        _ => true,
    }
}

/// A `match` / `match_phrase` / `term` on a text field (or its exact sub-field) that the question
/// does not name, whose text is made of the question's words and names exactly one frequent
/// keyword value, becomes a `term` on that keyword field with the value as stored: "how many
/// mystery books" asks for the genre, not for "mystery" (or "history books") in the title.
fn values_to_their_field(
    cx: &Context<'_>,
    question: &str,
    body: &mut Value,
    notes: &mut Vec<String>,
) {
    for_each_clause(body, |clause| {
        let Some((kind, field, options)) = field_clause(clause, &["match", "match_phrase", "term"])
        else {
            return;
        };
        let Some(text) = clause_value(options).and_then(Value::as_str).map(str::trim) else {
            return;
        };
        let parent = field.strip_suffix(".keyword").unwrap_or(field);
        let is_text = cx
            .mapping
            .field(parent)
            .is_some_and(|f| f.kind == FieldKind::Text);
        // The text is the question's words ("history books"), and it names one keyword value.
        let text_words = words(text);
        let from_question = text_words.split_whitespace().all(|w| names(question, w));
        if !is_text || names_field(question, field) || !from_question {
            return;
        }
        let owners: Vec<(&str, &str)> = cx
            .values
            .pairs()
            .filter(|(f, v)| {
                v.chars().filter(|c| c.is_alphanumeric()).count() >= MIN_VALUE_CHARS
                    && names(&text_words, v)
                    && names(question, v)
                    && f.strip_suffix(".keyword").unwrap_or(f) != parent
            })
            .collect();
        let [(owner, stored)] = owners.as_slice() else {
            return;
        };
        let note = format!(
            "{kind} {field} = '{text}': a value of {owner}, which the question names; a term on {owner}"
        );
        let term = json!({"term": {*owner: *stored}});
        if let Value::Object(t) = term {
            *clause = t;
            notes.push(note);
        }
    });
}

/// Calls `f` with each query object of the body's query (the query itself, and every clause in
/// its compound queries), each of which it may change in place.
fn for_each_clause(body: &mut Value, mut f: impl FnMut(&mut Map<String, Value>)) {
    let Some(query) = body.get_mut("query") else {
        return;
    };
    let pointers: Vec<String> = query_objects(query, "query")
        .into_iter()
        .map(|(_, ptr)| ptr)
        .collect();
    for ptr in pointers {
        if let Some(Value::Object(clause)) = query.pointer_mut(&ptr) {
            f(clause);
        }
    }
}

fn is_empty_bool(query: &Value) -> bool {
    query
        .get("bool")
        .and_then(Value::as_object)
        .is_some_and(|b| !BOOL_LISTS.iter().any(|l| b.contains_key(*l)))
}

fn filter_named_values(
    cx: &Context<'_>,
    question: &str,
    body: &mut Value,
    notes: &mut Vec<String>,
) {
    for (field, values) in missing_values(cx, question, body) {
        let (negated, wanted): (Vec<&str>, Vec<&str>) =
            values.into_iter().partition(|v| negated(question, v));
        for (list, vs) in [("filter", wanted), ("must_not", negated)] {
            let clause = match vs.as_slice() {
                [] => continue,
                [v] => json!({"term": {field: v}}),
                many => json!({"terms": {field: many}}),
            };
            if let Some(clauses) = bool_list(body, list) {
                notes.push(format!("{list}: {clause}, a value the question names"));
                clauses.push(clause);
            }
        }
    }
}

/// Whether a negation ([`NEGATIONS`]) comes at most two words before `value` in `question` (from
/// [`words`]).
fn negated(question: &str, value: &str) -> bool {
    let v = words(value);
    let v = v.trim();
    let Some(at) = [format!(" {v} "), format!(" {v}s "), format!(" {v}es ")]
        .iter()
        .find_map(|f| question.find(f.as_str()))
    else {
        return false;
    };
    let before: Vec<&str> = question[..at].split_whitespace().rev().take(2).collect();
    let before = format!(
        " {} ",
        before.into_iter().rev().collect::<Vec<_>>().join(" ")
    );
    NEGATIONS.iter().any(|n| before.contains(&format!(" {n} ")))
}

/// The list `name` of the body's top `bool` query, made when missing: a query that is not a `bool`
/// moves under `must` (a `match_all` is dropped). `None` only for a body that is not an object.
fn bool_list<'b>(body: &'b mut Value, name: &str) -> Option<&'b mut Vec<Value>> {
    let query = body
        .as_object_mut()?
        .entry("query")
        .or_insert_with(|| json!({"bool": {}}));
    if query.get("bool").is_none() {
        let old = query.take();
        let mut b = Map::new();
        if old.get("match_all").is_none() && !old.is_null() {
            b.insert("must".into(), json!([old]));
        }
        *query = json!({"bool": b});
    }
    let list = query
        .get_mut("bool")?
        .as_object_mut()?
        .entry(name)
        .or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = Value::Array(vec![list.take()]);
    }
    list.as_array_mut()
}

fn merge_exclusive_terms(cx: &Context<'_>, body: &mut Value, notes: &mut Vec<String>) {
    let Some(Value::Object(b)) = body.pointer_mut("/query/bool") else {
        return;
    };
    for list in ["filter", "must"] {
        let Some(Value::Array(items)) = b.get_mut(list) else {
            continue;
        };
        // field → the indexes of its single-value term clauses, and their values.
        let mut by_field: Vec<(String, Vec<usize>, Vec<Value>)> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let Some(Value::Object(t)) = item.get("term") else {
                continue;
            };
            let Some((field, v)) = t.iter().next().filter(|_| t.len() == 1) else {
                continue;
            };
            let keyword = cx
                .mapping
                .field(field)
                .is_some_and(|f| f.kind == FieldKind::Keyword);
            let v = v.get("value").unwrap_or(v).clone();
            if !keyword {
                continue;
            }
            match by_field.iter_mut().find(|(f, _, _)| f == field) {
                Some((_, at, vs)) => {
                    at.push(i);
                    if !vs.contains(&v) {
                        vs.push(v);
                    }
                }
                None => by_field.push((field.clone(), vec![i], vec![v])),
            }
        }
        let mut drop = Vec::new();
        for (field, at, vs) in by_field.into_iter().filter(|(_, _, vs)| vs.len() > 1) {
            if let Some(first) = at.first().and_then(|i| items.get_mut(*i)) {
                *first = json!({"terms": {field.clone(): vs}});
                notes.push(format!("{list}: the term clauses on {field} require two values at once; merged into {first}"));
            }
            drop.extend(at.into_iter().skip(1));
        }
        let mut i = 0;
        items.retain(|_| {
            i += 1;
            !drop.contains(&(i - 1))
        });
    }
}

/// `match` / `match_phrase` on the exact sub-field of a text field (`title.keyword`) matches only
/// whole stored values; when nothing matched, the words are looked for in the text field itself.
fn match_analysed_text(cx: &Context<'_>, body: &mut Value, notes: &mut Vec<String>) {
    for_each_clause(body, |clause| {
        for kind in ["match", "match_phrase"] {
            let Some(Value::Object(fields)) = clause.get_mut(kind) else {
                continue;
            };
            let exact: Vec<String> = fields
                .keys()
                .filter(|f| {
                    f.strip_suffix(".keyword").is_some_and(|parent| {
                        cx.mapping
                            .field(parent)
                            .is_some_and(|p| p.kind == FieldKind::Text)
                    })
                })
                .cloned()
                .collect();
            for f in exact {
                if let (Some(v), Some(parent)) = (fields.remove(&f), f.strip_suffix(".keyword")) {
                    notes.push(format!(
                        "{kind} {f}: nothing matched the whole value; {parent} matches its words"
                    ));
                    fields.insert(parent.to_owned(), v);
                }
            }
        }
    });
}

fn add_aggregation(cx: &Context<'_>, question: &str, body: &mut Value, notes: &mut Vec<String>) {
    let types = agg_types(body);
    let sorted = has_sort(body);
    let counting = TOTAL_COUNT_WORDS.iter().any(|w| names(question, w));
    let Some((needs, word)) = AGGREGATE_WORDS.iter().find_map(|(needs, list)| {
        list.iter()
            .find(|w| question.contains(&format!(" {w} ")))
            .map(|w| (*needs, *w))
    }) else {
        return;
    };
    let missing = match needs {
        Needs::Average => !types.iter().any(|t| AVERAGE_AGGS.contains(&t.as_str())),
        Needs::Total => !counting && !types.iter().any(|t| TOTAL_AGGS.contains(&t.as_str())),
        Needs::Largest | Needs::Smallest => types.is_empty() && !sorted,
        Needs::PerGroup => types.is_empty(),
    };
    if !missing {
        return;
    }
    let Value::Object(o) = body else { return };
    if needs == Needs::PerGroup {
        let after = question
            .find(&format!(" {word} "))
            .map(|at| &question[at + word.len() + 1..])
            .unwrap_or_default();
        let Some(field) = named_field(cx, after, |f| f.kind == FieldKind::Keyword, true) else {
            return;
        };
        o.insert("size".into(), json!(0));
        o.insert("aggs".into(), json!({format!("by_{}", stem(&field.path)): {"terms": {"field": field.path, "size": GROUP_BUCKETS}}}));
        notes.push(format!(
            "aggs: a terms aggregation on {}, for '{word}'",
            field.path
        ));
        return;
    }
    let numeric = |f: &FieldSpec| {
        f.kind.is_numeric()
            || (f.kind == FieldKind::Date && matches!(needs, Needs::Largest | Needs::Smallest))
    };
    let Some(field) = named_field(cx, question, numeric, false) else {
        return;
    };
    let documents = DOCUMENT_OPENINGS
        .iter()
        .any(|w| question.starts_with(&format!(" {w} ")));
    let (metric, order) = match needs {
        Needs::Average => ("avg", "desc"),
        Needs::Total => ("sum", "desc"),
        Needs::Largest => ("max", "desc"),
        _ => ("min", "asc"),
    };
    if documents && matches!(needs, Needs::Largest | Needs::Smallest) {
        let size = named_count(cx.question).unwrap_or(1).min(MAX_NAMED_SIZE);
        o.insert(
            "sort".into(),
            json!([{field.path.clone(): {"order": order}}]),
        );
        o.insert("size".into(), json!(size));
        notes.push(format!(
            "sort: {} {order}, size {size}, for '{word}'",
            field.path
        ));
    } else {
        o.insert("size".into(), json!(0));
        let mut aggs = Map::new();
        aggs.insert(
            format!("{metric}_{}", stem(&field.path)),
            json!({metric: {"field": field.path}}),
        );
        o.insert("aggs".into(), Value::Object(aggs));
        notes.push(format!("aggs: {metric} of {}, for '{word}'", field.path));
    }
}

/// The one field `accepts` takes whose name the text names best: the most leading words of its
/// name ([`stem`]) found together in `text`, plurals allowed; `None` when no field is named or two
/// are named equally well. With `leading`, the name must come first in `text`.
fn named_field<'m>(
    cx: &Context<'m>,
    text: &str,
    accepts: impl Fn(&FieldSpec) -> bool,
    leading: bool,
) -> Option<&'m FieldSpec> {
    let mut best: Option<(usize, &FieldSpec)> = None;
    let mut tied = false;
    for f in cx.mapping.fields().iter().filter(|f| accepts(f)) {
        let name = words(&stem(&f.path).replace(['_', '-'], " "));
        let name: Vec<&str> = name.split_whitespace().collect();
        let score = (1..=name.len())
            .rev()
            .find(|n| {
                let phrase = name[..*n].join(" ");
                if leading {
                    let first = text
                        .split_whitespace()
                        .take(*n)
                        .collect::<Vec<_>>()
                        .join(" ");
                    names(&words(&first), &phrase)
                } else {
                    names(text, &phrase)
                }
            })
            .unwrap_or(0);
        if score == 0 {
            continue;
        }
        match best {
            Some((s, prev)) if s == score && stem(&prev.path) != stem(&f.path) => tied = true,
            Some((s, _)) if s >= score => {}
            _ => {
                best = Some((score, f));
                tied = false;
            }
        }
    }
    best.filter(|_| !tied).map(|(_, f)| f)
}

/// A number of documents the question names before a word: "which 5 books" → 5.
fn named_count(question: &str) -> Option<u64> {
    let w: Vec<&str> = question.split_whitespace().collect();
    w.windows(2).find_map(|p| {
        p[0].parse::<u64>()
            .ok()
            .filter(|_| p[1].chars().all(char::is_alphabetic))
    })
}

#[cfg(test)]
#[path = "amend_tests.rs"]
mod tests;
