//! Steps a plan adds that its question does not ask for.
//!
//! A small model offered several tools tends to call more of them than the question needs: asked
//! to "predict the house prices for the next month in New York" with a house-price, a weather and a
//! stock forecast on offer, it also asks for New York's weather. Such a step costs a call, and on a
//! benchmark it makes the answer wrong.
//!
//! [`unasked_steps`] finds them by the words of the question and of each tool: a step is unasked
//! when its tool's words (its name, description, parameter names, parameter descriptions and enum
//! values) share no word with the question, while another step's tool does, and it stands alone:
//! it reads no other step's result and nothing in the plan reads its own. Words are compared by
//! their English stems (Snowball), and two stems also match when one starts with the other ("art"
//! and "artwork") or when they share their first five letters ("discovered" and "discovery",
//! "convert" and "conversion"), so that a question need not use the tool's own word forms.
//!
//! The rule is deliberately narrow, because a step it wrongly calls unasked may be dropped by the
//! model it goes back to: a plan whose steps all miss the question (a question about rain answered
//! with `get_weather`) or a plan of one step is never questioned, nor is a step of a chain ("How
//! cold is it where Dave lives?": `get_weather` on the city of `get_user`, whose words the question
//! shares, is asked for). On BFCL's ground truth it questions 2 of 2,351 correct plans of the
//! categories simple, multiple, parallel, parallel_multiple and their live versions (dollars and
//! yen answered with `currency_conversion`, "add 1 and 2" with `sum`): `bench/bfcl_unasked.py`.

use rust_stemmers::{Algorithm, Stemmer};
use serde_json::Value;
use toolplan_core::reference::{Piece, Reference, split_pieces};

/// Most words of a question, or of one tool, that [`unasked_steps`] compares; the rest are not
/// read. Bounds the check's work at this number squared per step.
pub const MAX_COMPARED_WORDS: usize = 512;

/// Most steps [`unasked_steps`] looks at; a longer plan is not checked.
pub const MAX_CHECKED_STEPS: usize = 256;

/// Words that say nothing about what a tool is for: articles, pronouns, question words and the verbs
/// every tool description uses ("get", "find", "calculate").
const STOP_WORDS: &[&str] = &[
    "a",
    "about",
    "all",
    "also",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "based",
    "be",
    "by",
    "calculate",
    "can",
    "compute",
    "could",
    "did",
    "do",
    "does",
    "each",
    "fetch",
    "find",
    "for",
    "from",
    "get",
    "gets",
    "give",
    "given",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "just",
    "may",
    "me",
    "might",
    "more",
    "most",
    "my",
    "no",
    "not",
    "of",
    "on",
    "only",
    "or",
    "other",
    "our",
    "own",
    "please",
    "provide",
    "provides",
    "retrieve",
    "return",
    "returns",
    "same",
    "should",
    "show",
    "so",
    "some",
    "specific",
    "such",
    "tell",
    "than",
    "that",
    "the",
    "then",
    "these",
    "this",
    "those",
    "to",
    "too",
    "use",
    "used",
    "using",
    "very",
    "was",
    "we",
    "were",
    "what",
    "when",
    "where",
    "which",
    "who",
    "whom",
    "whose",
    "why",
    "will",
    "with",
    "would",
    "yes",
    "you",
    "your",
];

/// A plan step as [`unasked_steps`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnaskedStep {
    /// The step's id.
    pub id: String,
    /// The tool it calls.
    pub tool: String,
}

/// The stems of the words of `text` that say something: camelCase and snake_case split, lowercased,
/// stop words and one-letter words left out, each stem once, at most [`MAX_COMPARED_WORDS`].
fn stems(stemmer: &Stemmer, text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for word in words(text) {
        if word.len() < 2 || STOP_WORDS.binary_search(&word.as_str()).is_ok() {
            continue;
        }
        let stem = stemmer.stem(&word).into_owned();
        if !found.contains(&stem) {
            found.push(stem);
            if found.len() == MAX_COMPARED_WORDS {
                break;
            }
        }
    }
    found
}

/// The words of `text`, lowercased: runs of ASCII letters, a run also split where a lowercase
/// letter is followed by an uppercase one (`getCurrentTime` is get, current, time).
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in text.chars() {
        if c.is_ascii_alphabetic() {
            if c.is_ascii_uppercase() && previous_lower && !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            previous_lower = c.is_ascii_lowercase();
            word.push(c.to_ascii_lowercase());
        } else {
            previous_lower = false;
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// Whether two stems name the same thing: equal, one a prefix of the other (of three letters or
/// more), or the same first five letters.
fn near(a: &str, b: &str) -> bool {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if short.len() >= 3 && long.starts_with(short) {
        return true;
    }
    let common = short
        .bytes()
        .zip(long.bytes())
        .take_while(|(x, y)| x == y)
        .count();
    common >= 5
}

/// The text a tool is known by for [`unasked_steps`]: its name, description, and each parameter's
/// name, description and enum values (from a JSON Schema object's top-level `properties`).
pub fn tool_text(name: &str, description: &str, parameters: &Value) -> String {
    let mut text = format!("{} {description}", name.replace(['_', '.', '-'], " "));
    let properties = parameters.get("properties").and_then(Value::as_object);
    for (key, schema) in properties.into_iter().flatten() {
        text.push(' ');
        text.push_str(&key.replace(['_', '-'], " "));
        if let Some(d) = schema.get("description").and_then(Value::as_str) {
            text.push(' ');
            text.push_str(d);
        }
        for value in schema
            .get("enum")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(v) = value.as_str() {
                text.push(' ');
                text.push_str(v);
            }
        }
    }
    text
}

/// The steps of `plan` (`{"steps": [{"id", "tool", "arguments"}]}`) that `question` does not ask
/// for, in plan order (see the module documentation for the rule). `tool_text` gives a tool's text
/// by name ([`tool_text`]); a step whose tool it does not know is taken as asked for.
pub fn unasked_steps(
    question: &str,
    plan: &Value,
    tool_text: impl Fn(&str) -> Option<String>,
) -> Vec<UnaskedStep> {
    let Some(steps) = plan.get("steps").and_then(Value::as_array) else {
        return Vec::new();
    };
    if steps.len() < 2 || steps.len() > MAX_CHECKED_STEPS {
        return Vec::new();
    }
    let stemmer = Stemmer::create(Algorithm::English);
    let asked = stems(&stemmer, question);
    // Steps whose results something in the plan reads: another step, or the plan's other fields
    // (its answer).
    let mut read: Vec<String> = Vec::new();
    if let Some(fields) = plan.as_object() {
        for (key, value) in fields {
            if key != "steps" {
                referenced_ids(value, &mut read, 0);
            }
        }
    }
    // Each step: (id, tool, whether its tool touches the question, whether it reads another
    // step). Tools are stemmed once each.
    let mut touched: Vec<(String, bool)> = Vec::new();
    let mut relevant = Vec::with_capacity(steps.len());
    for step in steps {
        let id = step.get("id").and_then(Value::as_str).unwrap_or_default();
        let tool = step.get("tool").and_then(Value::as_str).unwrap_or_default();
        let before = read.len();
        if let Some(arguments) = step.get("arguments") {
            referenced_ids(arguments, &mut read, 0);
        }
        let reads = read.len() > before;
        let touches = match touched.iter().find(|(t, _)| t == tool) {
            Some((_, touches)) => *touches,
            None => {
                let touches = match tool_text(tool) {
                    Some(text) => stems(&stemmer, &text)
                        .iter()
                        .any(|t| asked.iter().any(|q| near(t, q))),
                    None => true,
                };
                touched.push((tool.to_owned(), touches));
                touches
            }
        };
        relevant.push((id, tool, touches, reads));
    }
    if !relevant.iter().any(|(_, _, touches, _)| *touches) {
        return Vec::new();
    }
    relevant
        .into_iter()
        .filter(|(id, _, touches, reads)| !touches && !reads && !read.iter().any(|r| r == id))
        .map(|(id, tool, _, _)| UnaskedStep {
            id: id.to_owned(),
            tool: tool.to_owned(),
        })
        .collect()
}

/// The ids of a plan's final steps: those whose results no other step reads (its `steps` as JSON;
/// a step's own references to itself do not count). What the plan finds out ends there, so a reply
/// written before the results ([`ANSWER_FIELD`](crate::ANSWER_FIELD)) that inserts none of a final
/// step's results says something the plan was not asked to find out: a guess.
pub fn final_steps(steps: &[Value]) -> Vec<String> {
    let mut read: Vec<String> = Vec::new();
    for step in steps {
        let id = step.get("id").and_then(Value::as_str);
        let mut reads = Vec::new();
        if let Some(arguments) = step.get("arguments") {
            referenced_ids(arguments, &mut reads, 0);
        }
        // A reference to itself is a plan problem the validator names, not a reader.
        read.extend(reads.into_iter().filter(|r| Some(r.as_str()) != id));
    }
    steps
        .iter()
        .filter_map(|s| s.get("id").and_then(Value::as_str))
        .filter(|id| !read.iter().any(|r| r == id))
        .map(str::to_owned)
        .collect()
}

/// Takes out of `plan` (an `execute_tool_plan` call's arguments) the steps `find` names, given
/// each step's `(id, tool, arguments)`, that stand alone ([`drop_lone_steps`]). Returns the ids
/// taken out.
pub(crate) fn drop_found_steps<F>(plan: &mut Value, find: F) -> Vec<String>
where
    F: for<'a> FnOnce(Vec<(&'a str, &'a str, &'a Value)>) -> Vec<String>,
{
    let Some(steps) = plan.get("steps").and_then(Value::as_array) else {
        return Vec::new();
    };
    let calls = steps
        .iter()
        .map(|s| {
            let text = |key: &str| s.get(key).and_then(Value::as_str).unwrap_or_default();
            (
                text("id"),
                text("tool"),
                s.get("arguments").unwrap_or(&Value::Null),
            )
        })
        .collect();
    let mut ids: Vec<String> = Vec::new();
    for id in find(calls) {
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    drop_lone_steps(plan, ids)
}

/// Takes out of `plan` (an `execute_tool_plan` call's arguments) the steps of `ids` that stand
/// alone: they read no other step's result, and no step (nor anything else in the plan, such as
/// its `answer`) reads theirs. One step always stays. Returns the ids taken out; `output_steps`
/// loses them too.
pub(crate) fn drop_lone_steps(plan: &mut Value, ids: Vec<String>) -> Vec<String> {
    let Some(steps) = plan.get("steps").and_then(Value::as_array) else {
        return Vec::new();
    };
    let mut unread = final_steps(steps);
    if let Some(fields) = plan.as_object() {
        let mut read = Vec::new();
        for (key, value) in fields {
            if key != "steps" && key != "output_steps" {
                referenced_ids(value, &mut read, 0);
            }
        }
        unread.retain(|id| !read.contains(id));
    }
    let reads_nothing = |id: &str| {
        steps
            .iter()
            .find(|s| s.get("id").and_then(Value::as_str) == Some(id))
            .and_then(|s| s.get("arguments"))
            .is_none_or(|a| {
                let mut reads = Vec::new();
                referenced_ids(a, &mut reads, 0);
                reads.is_empty()
            })
    };
    let alone: Vec<String> = ids
        .into_iter()
        .filter(|id| unread.contains(id) && reads_nothing(id))
        .collect();
    let mut dropped = Vec::new();
    if let Some(steps) = plan.get_mut("steps").and_then(Value::as_array_mut) {
        for id in alone {
            if steps.len() <= 1 {
                break;
            }
            if let Some(at) = steps
                .iter()
                .position(|s| s.get("id").and_then(Value::as_str) == Some(id.as_str()))
            {
                steps.remove(at);
                dropped.push(id);
            }
        }
    }
    if let Some(outputs) = plan.get_mut("output_steps").and_then(Value::as_array_mut) {
        outputs.retain(|o| !o.as_str().is_some_and(|o| dropped.iter().any(|d| d == o)));
    }
    dropped
}

/// Deepest nesting of arguments that [`references_in`] walks.
const MAX_DEPTH: usize = 64;

/// Adds the step ids that the strings in `value` reference, whole or inside text, as the engine
/// reads references ([`split_pieces`]); an id read twice is added twice.
pub(crate) fn referenced_ids(value: &Value, ids: &mut Vec<String>, depth: usize) {
    let mut references = Vec::new();
    references_in(value, &mut references, depth);
    ids.extend(references.into_iter().map(|r| r.step));
}

/// Adds the references in the strings of `value` (an argument value of a plan's step, as JSON),
/// whole or inside text, as the engine reads them ([`split_pieces`]), down to 64 levels
/// from `depth`.
pub fn references_in(value: &Value, into: &mut Vec<Reference>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::String(s) => {
            for piece in split_pieces(s).into_iter().flatten() {
                if let Piece::Ref(reference) = piece {
                    into.push(reference);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| references_in(v, into, depth + 1)),
        Value::Object(fields) => fields
            .values()
            .for_each(|v| references_in(v, into, depth + 1)),
        _ => {}
    }
}

/// What the model reads when its first plan was sent back because of steps the question does not
/// ask for: which they are, and to send the plan again without them unless the answer needs them.
pub fn unasked_plan(unasked: &[UnaskedStep]) -> String {
    let mut ids: Vec<String> = Vec::with_capacity(unasked.len());
    let mut named: Vec<String> = Vec::with_capacity(unasked.len());
    for step in unasked {
        if !ids.contains(&step.id) {
            ids.push(step.id.clone());
            named.push(format!("{} ({})", step.id, step.tool));
        }
    }
    let (steps, call, their) = if named.len() == 1 {
        ("Step", "calls a tool", "its result")
    } else {
        ("Steps", "call tools", "their results")
    };
    format!(
        "Error: the plan was not run. {steps} {} {call} that the question does not ask about. \
         Call execute_tool_plan again without {}, with only the steps the question asks for \
         (keep {} only if the answer needs {their}).",
        crate::self_check::listed(&named),
        crate::self_check::listed(&ids),
        if named.len() == 1 { "it" } else { "them" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn final_steps_are_those_no_other_step_reads() {
        let steps = json!([
            {"id": "u", "tool": "get_user", "arguments": {"name": "Erin"}},
            {"id": "d", "tool": "get_user", "arguments": {"name": "Dave"}},
            {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}},
            {"id": "c", "tool": "calculator", "arguments": {"expression": "$ref:w.temp - 1"}},
            // Reading itself does not make a step read by another.
            {"id": "s", "tool": "echo", "arguments": {"text": {"x": ["$ref:s"]}}},
        ]);
        let steps = steps.as_array().unwrap();
        assert_eq!(final_steps(steps), ["d", "c", "s"]);
        // Steps without ids are not listed; nothing read makes every step final.
        assert_eq!(
            final_steps(&[json!({"tool": "x"}), json!("odd")]),
            Vec::<String>::new()
        );
        assert!(final_steps(&[]).is_empty());
    }

    fn tools(name: &str) -> Option<String> {
        let (description, parameters) = match name {
            "house_price_forecast" => (
                "Predict the house prices for a specific location and time frame.",
                json!({"properties": {"location": {"type": "string"}, "months": {"type": "integer"}}}),
            ),
            "weather_forecast" => (
                "Retrieve a weather forecast for a specific location and time frame.",
                json!({"properties": {"location": {"type": "string",
                    "description": "The city that you want to get the weather for."},
                    "days": {"type": "integer", "description": "Number of days for the forecast."}}}),
            ),
            "get_weather" => ("Current weather of a city.", json!({})),
            "get_user" => ("A user's profile: name, city, team.", json!({})),
            "getCurrentTime" => ("Returns the local time in ISO 8601 format.", json!({})),
            _ => return None,
        };
        Some(tool_text(name, description, &parameters))
    }

    fn plan(steps: &[(&str, &str, Value)]) -> Value {
        json!({"steps": steps.iter().map(|(id, tool, arguments)|
            json!({"id": id, "tool": tool, "arguments": arguments})).collect::<Vec<_>>()})
    }

    #[test]
    fn a_tool_the_question_never_touches_beside_one_it_does_is_unasked() {
        let p = plan(&[
            (
                "h",
                "house_price_forecast",
                json!({"location": "New York", "months": 1}),
            ),
            (
                "w",
                "weather_forecast",
                json!({"location": "New York", "days": 30}),
            ),
        ]);
        let found = unasked_steps(
            "Predict the house prices for the next month in New York.",
            &p,
            tools,
        );
        assert_eq!(
            found,
            vec![UnaskedStep {
                id: "w".into(),
                tool: "weather_forecast".into()
            }]
        );
        let told = unasked_plan(&found);
        assert!(
            told.contains("Step w (weather_forecast) calls a tool"),
            "{told}"
        );
    }

    #[test]
    fn word_forms_and_camel_case_match() {
        let p = plan(&[
            ("h", "house_price_forecast", json!({})),
            ("w", "weather_forecast", json!({})),
            ("t", "getCurrentTime", json!({})),
        ]);
        // "forecasts" and "forecast", "times" and "time".
        let q = "Two forecasts for houses, and the times in Berlin";
        assert!(unasked_steps(q, &p, tools).is_empty());
    }

    #[test]
    fn plans_that_all_miss_the_question_or_have_one_step_are_not_questioned() {
        let two = plan(&[
            ("p", "get_weather", json!({"city": "Paris"})),
            ("l", "get_weather", json!({"city": "London"})),
        ]);
        assert!(unasked_steps("Is it raining in Paris or London?", &two, tools).is_empty());
        let one = plan(&[("w", "weather_forecast", json!({}))]);
        assert!(unasked_steps("Predict house prices", &one, tools).is_empty());
    }

    #[test]
    fn a_step_whose_result_is_read_is_asked_for() {
        // get_user shares no word with the question but feeds the forecast, also inside text.
        let p = plan(&[
            ("u", "get_user", json!({"name": "ana"})),
            (
                "h",
                "house_price_forecast",
                json!({"location": "in $ref:u.city today"}),
            ),
        ]);
        assert!(unasked_steps("House prices for ana", &p, tools).is_empty());
        // Another step beside them that nothing reads and the question misses is unasked.
        let mut p = p;
        p["steps"]
            .as_array_mut()
            .unwrap()
            .push(json!({"id": "w", "tool": "get_weather", "arguments": {}}));
        let found = unasked_steps("House prices for ana", &p, tools);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].id, "w");
        // A step that reads another's result is part of a chain: "cold" is no word of get_weather,
        // but the step reads the directory lookup the question asks about ("lives").
        let chain = plan(&[
            ("u", "get_user", json!({"name": "Dave"})),
            ("w", "get_weather", json!({"location": "$ref:u.city"})),
        ]);
        assert!(unasked_steps("How cold is it where Dave lives?", &chain, tools).is_empty());
        // A step the plan's answer reads is asked for.
        let mut answered = plan(&[
            ("u", "get_user", json!({"name": "Dave"})),
            ("w", "get_weather", json!({"location": "Oslo"})),
        ]);
        answered["answer"] = json!("It is $ref:w.temp °C.");
        assert!(unasked_steps("How cold is it where Dave lives?", &answered, tools).is_empty());
    }

    #[test]
    fn unknown_tools_and_malformed_plans_are_taken_as_asked() {
        let p = plan(&[
            ("h", "house_price_forecast", json!({})),
            ("x", "no_such_tool", json!({})),
        ]);
        assert!(unasked_steps("house prices", &p, tools).is_empty());
        assert!(unasked_steps("house prices", &json!({"steps": 3}), tools).is_empty());
        assert!(unasked_steps("house prices", &json!([1, 2]), tools).is_empty());
    }

    #[test]
    fn hostile_sizes_are_bounded() {
        // A question of many distinct words: only the first MAX_COMPARED_WORDS are read, so a
        // tool word given after them does not count.
        let filler: Vec<String> = (0..MAX_COMPARED_WORDS + 100)
            .map(|i| format!("qz{}", spelled(i)))
            .collect();
        let question = format!("house {} weather", filler.join(" "));
        let p = plan(&[
            ("h", "house_price_forecast", json!({})),
            ("w", "weather_forecast", json!({})),
        ]);
        assert_eq!(unasked_steps(&question, &p, tools).len(), 1);
        // A plan longer than MAX_CHECKED_STEPS is not checked.
        let many: Vec<(&str, &str, Value)> = (0..=MAX_CHECKED_STEPS)
            .map(|_| ("w", "weather_forecast", json!({})))
            .chain([("h", "house_price_forecast", json!({}))])
            .collect();
        assert!(unasked_steps("house prices", &plan(&many), tools).is_empty());
        // Arguments nested deeper than the walk goes are not read (and do not overflow the stack).
        let mut deep = json!("$ref:w");
        for _ in 0..100_000 {
            deep = Value::Array(vec![deep]);
        }
        let mut ids = Vec::new();
        referenced_ids(&deep, &mut ids, 0);
        assert!(ids.is_empty());
        // Dropping a deep value recurses in serde_json itself; leak it to keep the test about ours.
        std::mem::forget(deep);
    }

    /// `i` in letters (a, b, …, z, ba, bb, …), so that each filler word is a word.
    fn spelled(mut i: usize) -> String {
        let mut out = Vec::new();
        loop {
            out.push(b'a' + (i % 26) as u8);
            i /= 26;
            if i == 0 {
                break;
            }
        }
        out.reverse();
        String::from_utf8(out).unwrap_or_default()
    }

    #[test]
    fn stop_words_are_sorted_for_the_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn near_stems() {
        assert!(near("art", "artwork"));
        assert!(near("discov", "discoveri"));
        assert!(near("convert", "convers"));
        assert!(!near("ai", "air"));
        assert!(!near("hous", "weather"));
    }
}
