//! Checks of a model's first plan against the question it answers, made before the plan runs, for
//! what validation cannot see: the plan is well formed but leaves out part of the question.
//!
//! * [`unused_numbers`]: numbers the question gives that no call uses. A small model asked for two
//!   calls ("Taylor Swift and Maroon 5, 20 and 15 minutes") often writes the first and stops, and a
//!   computation the question spells out ("F = C * 9 / 5 + 32") is often left to the answer. The
//!   numbers are the part of a question that can be checked without understanding it: a value the
//!   question gives is nearly always an argument of some call.
//!
//! * [`tools_left_out`]: tools the plan's own `thought` names that no step calls. A small model
//!   often writes the whole chain in its thought ("get_user gives Erin's city, get_user gives
//!   Dave's city, calculator subtracts the temperatures") and closes the steps after the first.
//!
//! An agent sends a plan that fails a check back once, with [`incomplete_plan`] as the reason, and
//! runs whatever comes back. Where the planner is offered beside the tools, the first turn's direct
//! calls are checked for numbers the same way ([`incomplete_calls`]).
//!
//! [`mark_bare_references`] repairs instead of checking: an argument that names an earlier step's
//! field without the `$ref:` marker (`"(w.temp + b.temp) / 2"`), which the engine would pass on as
//! text, gets the marker. [`percentages_as_fractions`] repairs too: a percentage of the question
//! ("2%") passed as 2 to a number parameter that takes a fraction becomes 0.02.

use serde_json::Value;
use toolplan_core::reference::REF_PREFIX;
use toolplan_core::words::word_at;

use crate::schema::THOUGHT_FIELD;

/// Most numbers of a question [`unused_numbers`] looks at; the rest are not checked.
pub const MAX_CHECKED_NUMBERS: usize = 64;

/// The numbers `question` gives that none of `arguments` uses, as the question writes them, in the
/// order it gives them (each once). `arguments` are the calls' arguments: for a plan, each step's
/// arguments (see [`plan_arguments`]).
///
/// A number is used when some argument holds it as a JSON number or writes it inside text, compared
/// by value ("1,000" is 1000, "03" is 3); a percentage is also used as a fraction ("2%" as 0.02).
/// Numbers that are part of a word ("A7", "H2O", "COVID-19") count only as that word's digits, the
/// same way in the question and the arguments, so they are compared like any other.
pub fn unused_numbers<'v>(
    question: &str,
    arguments: impl IntoIterator<Item = &'v Value>,
) -> Vec<String> {
    let mut used = Vec::new();
    for value in arguments {
        collect_numbers(value, &mut used, 0);
    }
    let mut unused: Vec<String> = Vec::new();
    for found in numbers_in(question).into_iter().take(MAX_CHECKED_NUMBERS) {
        let fits =
            |v: &f64| same(*v, found.value) || (found.percent && same(*v, found.value / 100.0));
        if !used.iter().any(fits) && !unused.contains(&found.text) {
            unused.push(found.text);
        }
    }
    unused
}

/// The numbers `question` gives, each once, as the values that count as using it, in decimal: a
/// percentage ("2%") as itself and as a fraction (`["2", "0.02"]`). For a provider that keeps a
/// plan's steps open until they use them (toolplan-llm's `StepReferences::required_numbers`): the
/// check [`unused_numbers`] makes after the reply, made while it is written.
pub fn numbers_to_use(question: &str) -> Vec<Vec<String>> {
    let mut numbers: Vec<Vec<String>> = Vec::new();
    for found in numbers_in(question).into_iter().take(MAX_CHECKED_NUMBERS) {
        let mut values = vec![found.value.to_string()];
        if found.percent {
            values.push((found.value / 100.0).to_string());
        }
        if !numbers.contains(&values) {
            numbers.push(values);
        }
    }
    numbers
}

/// Makes fractions of the question's percentages that a call passes as whole numbers to a
/// parameter that takes a fraction, and returns the names of the parameters changed: for "a growth
/// rate of 2%", `"growth_rate": 2` becomes `0.02`. Rates, returns and probabilities given to a
/// `number` parameter are fractions by convention (where this rule applies, BFCL expects the
/// fraction in 58 of 58 values of its four single-turn categories, and in 1 of 2 of its live ones),
/// and a small model copies the number it reads.
///
/// Only a top-level argument that is a JSON number is changed, and only when all of this holds:
/// its schema (in `parameters`, a JSON Schema object) says `number` and not `integer`; its
/// `maximum`, if any, is at most 1; neither its name nor its description says it is a percentage
/// (a description that says how a percentage is written as a fraction, "as a decimal. E.g., 5% is
/// 0.05", is a fraction); the question
/// writes the value with a percent sign ("2%", "2 percent") and nowhere without one (in "5 years
/// at 5%", a 5 is left as it is).
pub fn percentages_as_fractions(
    question: &str,
    parameters: &Value,
    arguments: &mut Value,
) -> Vec<String> {
    let (Some(arguments), Some(properties)) = (
        arguments.as_object_mut(),
        parameters.get("properties").and_then(Value::as_object),
    ) else {
        return Vec::new();
    };
    let found: Vec<Found> = numbers_in(question)
        .into_iter()
        .take(MAX_CHECKED_NUMBERS)
        .collect();
    let given = |v: f64, percent: bool| {
        found
            .iter()
            .any(|f| f.percent == percent && same(f.value, v))
    };
    let mut changed = Vec::new();
    for (name, value) in arguments.iter_mut() {
        let Some(v) = value.as_f64() else {
            continue;
        };
        let fraction = properties
            .get(name)
            .is_some_and(|schema| takes_fraction(name, schema));
        if fraction
            && given(v, true)
            && !given(v, false)
            && let Some(number) = serde_json::Number::from_f64(v / 100.0)
        {
            *value = Value::Number(number);
            changed.push(name.clone());
        }
    }
    changed
}

/// Whether the parameter `name` with `schema` takes a fraction where a question gives a percentage
/// (see [`percentages_as_fractions`]).
fn takes_fraction(name: &str, schema: &Value) -> bool {
    let number = match schema.get("type") {
        Some(Value::String(t)) => t == "number",
        Some(Value::Array(types)) => {
            types.iter().any(|t| t == "number") && !types.iter().any(|t| t == "integer")
        }
        _ => false,
    };
    if !number {
        return false;
    }
    if let Some(maximum) = schema.get("maximum").and_then(Value::as_f64) {
        return maximum <= 1.0;
    }
    let name = name.to_ascii_lowercase();
    if name.contains("percent") || name.contains("pct") {
        return false;
    }
    let description = schema
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_lowercase();
    let percentage = ["percent", "porcent", "pourcent", "prozent", "%"]
        .iter()
        .any(|word| description.contains(word));
    // "as a decimal. E.g., 5% is 0.05", "(1 is 100%)": a fraction described through percentages.
    let fraction = [
        "as a decimal",
        "in decimal",
        "decimal form",
        "fraction",
        "is 100%",
        "% is 0.",
        "% = 0.",
        "as 0.",
    ]
    .iter()
    .any(|words| description.contains(words));
    !percentage || fraction
}

/// The arguments of each step of a plan (`{"steps": [{"arguments": …}]}`), for [`unused_numbers`].
/// Arguments written as a JSON string of an object are read as that string.
pub fn plan_arguments(plan: &Value) -> impl Iterator<Item = &Value> {
    plan.get("steps")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|step| step.get("arguments"))
}

/// Marks the references a model wrote without their `$ref:` marker in a plan's step arguments, and
/// returns them as `(step id, what was written)`: `"w.temp"` in `"(w.temp + b.temp) / 2"`, after a
/// step `w`, becomes `"$ref:w.temp"`. Only `id.field` with the id of a step written before and a
/// field of two characters or more with a letter counts (so "a.m." is not a reference to step `a`,
/// nor "data.csv" one to step `a`). The engine would otherwise pass the name on as text, and the
/// 1.5B model, told so, sent the same plan again.
pub fn mark_bare_references(plan: &mut Value) -> Vec<(String, String)> {
    let Some(steps) = plan.get_mut("steps").and_then(Value::as_array_mut) else {
        return Vec::new();
    };
    let mut earlier: Vec<String> = Vec::new();
    let mut found = Vec::new();
    for step in steps {
        let id = step
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if let Some(arguments) = step.get_mut("arguments") {
            let mut marked = Vec::new();
            mark_texts(arguments, &earlier, &mut marked, 0);
            for written in marked {
                if !found.iter().any(|(s, w)| *s == id && *w == written) {
                    found.push((id.clone(), written));
                }
            }
        }
        earlier.push(id);
    }
    found
}

/// What the model reads when its first plan was sent back by a check: the numbers of the question it
/// leaves out, and that it should send the whole plan again with steps that use them.
pub fn incomplete_plan(unused: &[String]) -> String {
    let them = if unused.len() == 1 { "it" } else { "them" };
    format!(
        "Error: the plan was not run. The question gives {list}, but no step uses {them}: the plan \
         leaves out part of the question. Send the whole plan again: the steps it has, and added \
         steps that use {list} (a step for every call the question asks for, and for every \
         computation it asks for). Call execute_tool_plan again.",
        list = listed(unused)
    )
}

/// What the model reads when its first tool calls (no plan among them) were sent back because
/// they leave numbers of the question unused ([`unused_numbers`]).
pub fn incomplete_calls(unused: &[String]) -> String {
    let them = if unused.len() == 1 { "it" } else { "them" };
    format!(
        "Error: the calls were not run. The question gives {list}, but no call uses {them}: the \
         calls leave out part of the question. Make all the calls again: the calls made, and \
         added calls that use {list} (a call for everything the question asks for).",
        list = listed(unused)
    )
}

/// "a", "a and b", "a, b and c".
pub(crate) fn listed<S: AsRef<str>>(items: &[S]) -> String {
    match items {
        [] => String::new(),
        [one] => one.as_ref().to_owned(),
        [init @ .., last] => {
            let init: Vec<&str> = init.iter().map(AsRef::as_ref).collect();
            format!("{} and {}", init.join(", "), last.as_ref())
        }
    }
}

/// The tools of `tools` that `plan`'s `thought` names but no step of it calls, in the order the
/// thought names them (each once). A tool is named when its name stands in the thought as a word of
/// its own (`get_user`, not `get_users` or `user`); a plan with no thought names none.
pub fn tools_left_out<'t>(plan: &Value, tools: impl IntoIterator<Item = &'t str>) -> Vec<String> {
    let Some(thought) = plan.get(THOUGHT_FIELD).and_then(Value::as_str) else {
        return Vec::new();
    };
    let called: Vec<&str> = plan
        .get("steps")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("tool").and_then(Value::as_str))
        .collect();
    let mut named: Vec<(usize, &str)> = tools
        .into_iter()
        .filter(|t| !t.is_empty() && !called.contains(t))
        .filter_map(|t| word_at(thought, t).map(|at| (at, t)))
        .collect();
    named.sort_unstable();
    named.dedup_by_key(|(_, t)| *t);
    named.into_iter().map(|(_, t)| t.to_owned()).collect()
}

/// What the model reads when its first plan was sent back because its thought names tools that no
/// step calls ([`tools_left_out`]).
pub fn plan_short_of_thought(left_out: &[String]) -> String {
    let them = if left_out.len() == 1 { "it" } else { "them" };
    format!(
        "Error: the plan was not run. Its thought names {list}, but no step calls {them}: the plan \
         stops before the end of its own thought. Send the whole plan again: the steps it has, and \
         added steps for the rest of the thought (a step for every call the question needs, {list} \
         among them). Call execute_tool_plan again.",
        list = listed(left_out)
    )
}

/// A number as a question writes it.
struct Found {
    /// Its text ("1,000", "2.5%").
    text: String,
    /// Its value (1000, 2.5).
    value: f64,
    /// Whether a percent sign follows it.
    percent: bool,
}

/// The numbers written in `text`: runs of digits, with a decimal point or thousands commas between
/// digits; a minus sign is not part of it (a hyphen in "COVID-19" is not one).
fn numbers_in(text: &str) -> Vec<Found> {
    let chars: Vec<char> = text.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len()
            && (chars[i].is_ascii_digit()
                || (matches!(chars[i], '.' | ',')
                    && chars.get(i + 1).is_some_and(char::is_ascii_digit)
                    && i > start))
        {
            i += 1;
        }
        let mut written: String = chars[start..i].iter().collect();
        // "1,000" is a thousand; in "7,8" (a list, or a decimal comma) the comma ends the number,
        // and the next one starts after it.
        if !thousands(&written)
            && let Some(comma) = written.find(',')
        {
            written.truncate(comma);
            i = start + written.chars().count();
        }
        let plain = written.replace(',', "");
        let percent = percent_follows(&chars[i..]);
        if let Ok(value) = plain.parse::<f64>() {
            let text = if percent {
                format!("{written}%")
            } else {
                written
            };
            found.push(Found {
                text,
                value,
                percent,
            });
        }
    }
    found
}

/// Whether a number followed by `after` is a percentage: "%" follows, or "percent" (after one
/// space at most).
fn percent_follows(after: &[char]) -> bool {
    let after = match after {
        [' ', rest @ ..] => rest,
        rest => rest,
    };
    let word: String = after.iter().take(8).collect();
    after.first() == Some(&'%')
        || (word.to_ascii_lowercase().starts_with("percent")
            && !after.get(7).is_some_and(|c| c.is_alphabetic() && *c != 's'))
}

/// Whether `written` groups thousands with commas ("1,000", "12,345.5").
fn thousands(written: &str) -> bool {
    let whole = written.split('.').next().unwrap_or_default();
    let mut groups = whole.split(',');
    let first = groups.next().unwrap_or_default();
    let rest: Vec<&str> = groups.collect();
    !rest.is_empty() && first.len() <= 3 && rest.iter().all(|g| g.len() == 3)
}

/// Deepest nesting of arguments the checks look into.
const MAX_DEPTH: usize = 32;

/// The numbers an argument value holds: JSON numbers, and numbers written inside its text.
fn collect_numbers(value: &Value, into: &mut Vec<f64>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::Number(n) => into.extend(n.as_f64()),
        Value::String(s) => into.extend(numbers_in(s).into_iter().map(|f| f.value)),
        Value::Array(items) => items
            .iter()
            .for_each(|v| collect_numbers(v, into, depth + 1)),
        Value::Object(map) => map
            .values()
            .for_each(|v| collect_numbers(v, into, depth + 1)),
        Value::Bool(_) | Value::Null => {}
    }
}

/// Marks the bare references in the text values of an argument value (see
/// [`mark_bare_references`]), adding what it marked to `marked`.
fn mark_texts(value: &mut Value, ids: &[String], marked: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::String(s) => {
            if let Some(text) = mark_in(s, ids, marked) {
                *s = text;
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| mark_texts(v, ids, marked, depth + 1)),
        Value::Object(map) => map
            .values_mut()
            .for_each(|v| mark_texts(v, ids, marked, depth + 1)),
        _ => {}
    }
}

/// `text` with `$ref:` before each `id.field` whose id is one of `ids` and that no marker has;
/// `None` when there is none.
fn mark_in(text: &str, ids: &[String], marked: &mut Vec<String>) -> Option<String> {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let mut out = String::with_capacity(text.len() + 16);
    let mut changed = false;
    let mut previous: Option<char> = None;
    for (start, c) in text.char_indices() {
        let starts_name =
            !previous.is_some_and(|p| word(p) || p == '.') && !text[..start].ends_with(REF_PREFIX);
        previous = Some(c);
        if starts_name {
            let rest = &text[start..];
            let bare = ids.iter().find_map(|id| {
                let after = rest.strip_prefix(id.as_str())?.strip_prefix('.')?;
                let field: String = after.chars().take_while(|&c| word(c)).collect();
                let letters = field.chars().any(|c| c.is_ascii_alphabetic());
                (field.chars().count() >= 2 && letters).then(|| format!("{id}.{field}"))
            });
            if let Some(written) = bare {
                out.push_str(REF_PREFIX);
                changed = true;
                if !marked.contains(&written) {
                    marked.push(written);
                }
            }
        }
        out.push(c);
    }
    changed.then_some(out)
}

/// Whether `question` gives `value`: writes it as a number (compared as [`unused_numbers`]
/// compares, "1,000" is 1000), or as a percentage of which it is the fraction ("2%" gives 0.02).
/// At most [`MAX_CHECKED_NUMBERS`] numbers of the question are read.
pub(crate) fn gives_number(question: &str, value: f64) -> bool {
    numbers_in(question)
        .into_iter()
        .take(MAX_CHECKED_NUMBERS)
        .any(|found| {
            same(value, found.value) || (found.percent && same(value, found.value / 100.0))
        })
}

/// Whether two numbers are the same value, allowing for the rounding of decimal fractions.
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn unused(question: &str, plan: Value) -> Vec<String> {
        unused_numbers(question, plan_arguments(&plan))
    }

    #[test]
    fn the_numbers_to_use_are_the_question_s_each_once() {
        assert_eq!(
            numbers_to_use("Invest 1,000 at 2% for 3 years, then 3 more; F = C * 9 / 5 + 32.5"),
            [
                vec!["1000"],
                vec!["2", "0.02"],
                vec!["3"],
                vec!["9"],
                vec!["5"],
                vec!["32.5"]
            ]
        );
        assert!(numbers_to_use("What is the weather in Oslo?").is_empty());
    }

    #[test]
    fn a_second_call_left_out_leaves_its_numbers() {
        let plan = json!({"steps": [{"id": "a", "tool": "play",
            "arguments": {"artist": "Taylor Swift", "duration": 20}}]});
        assert_eq!(
            unused(
                "Play Taylor Swift and Maroon 5 for 20 and 15 minutes respectively.",
                plan
            ),
            ["5", "15"]
        );
        let both = json!({"steps": [
            {"id": "a", "tool": "play", "arguments": {"artist": "Taylor Swift", "duration": 20}},
            {"id": "b", "tool": "play", "arguments": {"artist": "Maroon 5", "duration": 15}}]});
        assert!(
            unused(
                "Play Taylor Swift and Maroon 5 for 20 and 15 minutes respectively.",
                both
            )
            .is_empty()
        );
    }

    #[test]
    fn numbers_compare_by_value_in_text_and_as_fractions() {
        let plan = json!({"steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "Sydney"}},
            {"id": "c", "tool": "calculator", "arguments": {"expression": "$ref:w.temp * 9 / 5 + 32"}},
            {"id": "g", "tool": "grow", "arguments": {"population": 1000, "rate": 0.02, "date": "2024-03-05"}}]});
        assert!(
            unused(
                "F = C * 9 / 5 + 32; a herd of 1,000 growing 2% a year since 2024-03-05",
                plan.clone()
            )
            .is_empty()
        );
        assert_eq!(
            unused("the same at 2.5% and in 10 years", plan),
            ["2.5%", "10"]
        );
    }

    #[test]
    fn numbers_inside_words_and_lists() {
        let plan = json!({"steps": [{"id": "o", "tool": "get_order", "arguments": {"id": "A7"}}]});
        assert!(unused("Where is order A7?", plan.clone()).is_empty());
        assert_eq!(unused("Orders A7 and B8", plan.clone()), ["8"]);
        // A list with commas is its numbers, not one.
        assert_eq!(unused("Sizes 7,8 and 9", plan), ["8", "9"]);
    }

    #[test]
    fn a_question_without_numbers_passes() {
        let plan =
            json!({"steps": [{"id": "u", "tool": "get_user", "arguments": {"name": "Bob"}}]});
        assert!(unused("Is it raining where Bob lives?", plan.clone()).is_empty());
        // Not a plan: nothing to compare, every number is unused.
        assert_eq!(unused("3 things", json!("no plan")), ["3"]);
    }

    #[test]
    fn hostile_input_is_bounded() {
        let question = (0..10_000)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(
            unused(&question, json!({"steps": []})).len(),
            MAX_CHECKED_NUMBERS
        );
        // Deeper than the checks look (model JSON is parsed with a depth limit of 128).
        let mut deep = json!(5);
        for _ in 0..100 {
            deep = json!([deep]);
        }
        let plan = json!({"steps": [{"id": "a", "tool": "t", "arguments": {"x": deep}}]});
        // Too deep to look into: the 5 is not seen, and nothing overflows.
        assert_eq!(unused("5", plan.clone()), ["5"]);
        let mut marked = plan.clone();
        assert!(mark_bare_references(&mut marked).is_empty());
    }

    #[test]
    fn references_without_their_marker_are_marked() {
        let mut plan = json!({"steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "Paris"}},
            {"id": "b", "tool": "get_weather", "arguments": {"location": "Berlin"}},
            {"id": "c", "tool": "calculator", "arguments": {"expression": "(w.temp + $ref:b.temp + w.temp) / 2"}}]});
        assert_eq!(
            mark_bare_references(&mut plan),
            [("c".to_owned(), "w.temp".to_owned())]
        );
        assert_eq!(
            plan["steps"][2]["arguments"]["expression"],
            "($ref:w.temp + $ref:b.temp + $ref:w.temp) / 2"
        );
        // Not a step written before, a one-letter field, part of a longer name: left as written.
        let mut plan = json!({"steps": [
            {"id": "a", "tool": "echo", "arguments": {"text": "c.temp at 9 a.m. in data.csv"}},
            {"id": "c", "tool": "echo", "arguments": {"text": ["at 9 a.m., see ba.temp", "a.12"]}}]});
        let before = plan.clone();
        assert!(mark_bare_references(&mut plan).is_empty());
        assert_eq!(plan, before);
    }

    #[test]
    fn the_message_for_calls_names_the_numbers() {
        assert_eq!(
            incomplete_calls(&["1.5%".to_owned()]),
            "Error: the calls were not run. The question gives 1.5%, but no call uses it: the \
             calls leave out part of the question. Make all the calls again: the calls made, and \
             added calls that use 1.5% (a call for everything the question asks for)."
        );
    }

    #[test]
    fn the_message_names_what_is_missing() {
        assert_eq!(
            incomplete_plan(&["15".to_owned(), "1000".to_owned()]),
            "Error: the plan was not run. The question gives 15 and 1000, but no step uses them: \
             the plan leaves out part of the question. Send the whole plan again: the steps it \
             has, and added steps that use 15 and 1000 (a step for every call the question asks \
             for, and for every computation it asks for). Call execute_tool_plan again."
        );
    }

    #[test]
    fn percentages_given_to_fraction_parameters_become_fractions() {
        let parameters = json!({"type": "object", "properties": {
            "growth_rate": {"type": "number", "description": "The annual growth rate."},
            "years": {"type": "integer"},
            "share": {"type": "number", "description": "Share as a percentage."},
            "yield_decimal": {"type": "number", "description": "Yield in percent, as a decimal."},
            "score": {"type": "number", "description": "A decimal value, as a percentage."},
            "rate_pct": {"type": "number"},
            "capped": {"type": ["number", "null"], "maximum": 1},
            "scaled": {"type": "number", "maximum": 100},
            "label": {"type": "string"}}});
        let question = "A herd of 500 grows by 2% a year (or 1.5 percent, or 2.5%) for 10 years; \
                        the share is 30%, the yield 4%, the cap 7%, the scale 8%, the label 9%.";
        let mut arguments = json!({"growth_rate": 2, "years": 10, "share": 30, "score": 30,
            "yield_decimal": 4, "rate_pct": 2, "capped": 7, "scaled": 8, "label": "9"});
        let changed = percentages_as_fractions(question, &parameters, &mut arguments);
        assert_eq!(changed, ["growth_rate", "yield_decimal", "capped"]);
        assert_eq!(
            arguments,
            json!({"growth_rate": 0.02, "years": 10, "share": 30, "score": 30, "yield_decimal": 0.04,
                "rate_pct": 2, "capped": 0.07, "scaled": 8, "label": "9"})
        );
        // "1.5 percent" is a percentage; a value the model already wrote as a fraction stays.
        let mut arguments = json!({"growth_rate": 1.5});
        percentages_as_fractions(question, &parameters, &mut arguments);
        assert_eq!(arguments, json!({"growth_rate": 0.015}));
        let mut arguments = json!({"growth_rate": 0.025});
        assert!(percentages_as_fractions(question, &parameters, &mut arguments).is_empty());
        // A value the question also gives without a percent sign is left as it is.
        let mut arguments = json!({"growth_rate": 5});
        let question = "5 years at 5%";
        assert!(percentages_as_fractions(question, &parameters, &mut arguments).is_empty());
        // Not an object, no properties: nothing to do.
        for (parameters, mut arguments) in [
            (parameters.clone(), json!([2])),
            (json!({"type": "object"}), json!({"growth_rate": 2})),
        ] {
            assert!(percentages_as_fractions("2%", &parameters, &mut arguments).is_empty());
        }
        // "percentage points" is not a percent sign.
        let mut arguments = json!({"growth_rate": 3});
        assert!(
            percentages_as_fractions("3 percentage points", &parameters, &mut arguments).is_empty()
        );
    }

    #[test]
    fn tools_the_thought_names_and_no_step_calls() {
        let tools = ["get_user", "get_weather", "calculator", "answer"];
        let plan = serde_json::json!({
            "thought": "get_user gives Erin's city, get_user gives Dave's city, calculator \
                        subtracts the temperatures, the answer puts it into words.",
            "steps": [{"id": "e", "tool": "get_user", "arguments": {"name": "Erin"}}]
        });
        // "answer" stands in the thought as a word: a caller leaves out tools that are words.
        assert_eq!(tools_left_out(&plan, tools), ["calculator", "answer"]);
        assert_eq!(
            tools_left_out(&plan, ["get_user", "get_weather"]),
            Vec::<String>::new()
        );
        let whole = serde_json::json!({
            "thought": "get_weather of both cities, then calculator.",
            "steps": [
                {"id": "a", "tool": "get_weather", "arguments": {}},
                {"id": "c", "tool": "calculator", "arguments": {}}
            ]
        });
        assert!(tools_left_out(&whole, tools).is_empty());
        // Inside a longer name, or with no thought, nothing is named.
        let longer =
            serde_json::json!({"thought": "get_users_weather and my_calculator", "steps": []});
        assert!(tools_left_out(&longer, tools).is_empty());
        assert!(tools_left_out(&serde_json::json!({"steps": []}), tools).is_empty());
        let end = serde_json::json!({"thought": "Then calculator.", "steps": []});
        assert_eq!(tools_left_out(&end, tools), ["calculator"]);
        let text = plan_short_of_thought(&["calculator".to_owned()]);
        assert!(text.contains("Its thought names calculator, but no step calls it"));
    }
}
