//! A first plan checked for the options its question names that no step sets: [`options_left_out`].
//!
//! A question often picks one of a parameter's listed values in plain words ("set cool mode with
//! the high wind strength" for `windStrength` of `["LOW", "HIGH", "MID"]`), and a small model that
//! writes the step for it sometimes sets the parameters it read first and stops ("airConJobMode":
//! "COOL", no `windStrength`). The tool then runs with the parameter's default, and the answer is
//! wrong without any error. Like the numbers of a question ([`crate::unused_numbers`]), the named
//! options can be checked without understanding the question: an enum value it names is nearly
//! always an argument of some call. Run on BFCL's ground truth (each correct plan with every
//! optional parameter left out), the check sends back 9 of 2,351 plans
//! (`bench/bfcl_unasked.py --check options`).
//!
//! The same reading finds the other way a small model misses a named option: asked for the weather
//! "in Celsius", it fetches it in Celsius and again in Fahrenheit. The step that differs from
//! another only by a value the question does not name, where the other sets the one it names, is
//! asked by nobody ([`contradicted_twins`]), and [`drop_contradicted_twins`] takes it out.

use serde_json::Value;

/// Most enum values of a plan's parameters [`options_left_out`] looks at; the rest are not
/// checked.
pub const MAX_CHECKED_OPTIONS: usize = 1024;

/// Fewest characters of an enum value [`options_left_out`] looks for in a question: shorter values
/// ("C", "on", "v2") are too often part of other words or said in passing.
pub const MIN_OPTION_CHARS: usize = 3;

/// Deepest nesting of object parameters [`options_left_out`] looks into.
const MAX_OPTION_DEPTH: usize = 8;

/// An option of a parameter that the question names and a step does not set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOutOption {
    /// The position of the call among those [`options_left_out`] was given.
    pub call: usize,
    /// The id of the step (for a direct call, the tool's name).
    pub step: String,
    /// The tool the step calls.
    pub tool: String,
    /// The parameter, with the object parameters it is inside first (`["body", "windStrength"]`).
    pub parameter: Vec<String>,
    /// The value of the parameter's enum that the question names, as the enum writes it.
    pub value: String,
}

/// The options the question names that the calls leave out: for each call (`(step id, tool,
/// arguments)`), each parameter of its tool's schema (from `schema_of`, a JSON Schema object; the
/// properties of object parameters too) that has an enum of strings and that the call does not set,
/// the enum values the question names, in the order of the calls and the schema.
///
/// A value is named when it stands in the question as words of their own, compared without case
/// and with `_` and `-` read as spaces ("high" names `HIGH`, "air clean" names `AIR_CLEAN`). It is
/// not counted when it has fewer than [`MIN_OPTION_CHARS`] characters, is the parameter's
/// `default`, or what its description says is the default (left out, the parameter takes it
/// anyway), or is written in any string argument of
/// any call (the question's "Vegan" set as one call's `diet` is not asked of the others).
pub fn options_left_out<'c, 's>(
    question: &str,
    calls: impl IntoIterator<Item = (&'c str, &'c str, &'c Value)>,
    schema_of: impl Fn(&str) -> Option<&'s Value>,
) -> Vec<LeftOutOption> {
    let calls: Vec<(&str, &str, &Value)> = calls.into_iter().collect();
    let question = plain(question);
    let mut written = Vec::new();
    for (_, _, arguments) in &calls {
        collect_texts(arguments, &mut written, 0);
    }
    let mut budget = MAX_CHECKED_OPTIONS;
    let mut found = Vec::new();
    for (call, (step, tool, arguments)) in calls.into_iter().enumerate() {
        let Some(schema) = schema_of(tool) else {
            continue;
        };
        let mut walk = Walk {
            question: &question,
            written: &written,
            budget: &mut budget,
            call,
            step,
            tool,
            found: &mut found,
        };
        walk.object(schema, Some(arguments), &mut Vec::new(), 0);
        if budget == 0 {
            break;
        }
    }
    found
}

/// One call's schema walked by [`options_left_out`].
struct Walk<'a> {
    /// The question, [`plain`].
    question: &'a str,
    /// Every string argument of the calls, [`plain`].
    written: &'a [String],
    /// Enum values still to look at.
    budget: &'a mut usize,
    call: usize,
    step: &'a str,
    tool: &'a str,
    found: &'a mut Vec<LeftOutOption>,
}

impl Walk<'_> {
    /// The properties of `schema` against `arguments` (the object the call gives for it, if any).
    fn object(
        &mut self,
        schema: &Value,
        arguments: Option<&Value>,
        path: &mut Vec<String>,
        depth: usize,
    ) {
        if depth > MAX_OPTION_DEPTH {
            return;
        }
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return;
        };
        for (name, property) in properties {
            let given = arguments.and_then(|a| a.get(name)).filter(|v| !v.is_null());
            path.push(name.clone());
            if let Some(options) = property.get("enum").and_then(Value::as_array) {
                if given.is_none() {
                    self.options(property, options, path);
                }
            } else if property.get("properties").is_some() {
                self.object(property, given, path, depth + 1);
            }
            path.pop();
            if *self.budget == 0 {
                return;
            }
        }
    }

    /// The values of one left-out parameter's enum that the question names.
    fn options(&mut self, property: &Value, options: &[Value], path: &[String]) {
        let default = property.get("default").and_then(Value::as_str);
        let described = property
            .get("description")
            .and_then(Value::as_str)
            .map(described_default)
            .unwrap_or_default();
        for value in options.iter().filter_map(Value::as_str) {
            if *self.budget == 0 {
                return;
            }
            *self.budget -= 1;
            if Some(value) == default || !names(self.question, value) {
                continue;
            }
            let words = plain(value);
            let words = words.trim();
            if has_words(&described, words) || self.written.iter().any(|w| has_words(w, words)) {
                continue;
            }
            self.found.push(LeftOutOption {
                call: self.call,
                step: self.step.to_owned(),
                tool: self.tool.to_owned(),
                parameter: path.to_vec(),
                value: value.to_owned(),
            });
        }
    }
}

/// The options of `left_out` that can be set without asking the model: each where the question
/// names no other value of the same parameter of the same call, and no other left-out parameter
/// (of any call) takes the same value. "High wind strength" with one step that leaves out
/// `windStrength` is settled; with two such steps, or "high or low", it is not (which step, which
/// value, is the model's to say).
pub fn settled_options(left_out: &[LeftOutOption]) -> Vec<&LeftOutOption> {
    left_out
        .iter()
        .filter(|o| {
            let same_parameter = left_out
                .iter()
                .filter(|p| p.call == o.call && p.parameter == o.parameter)
                .count();
            let same_value = left_out.iter().filter(|p| p.value == o.value).count();
            same_parameter == 1 && same_value == 1
        })
        .collect()
}

/// Sets `option` in `arguments` (a call's arguments), making the objects it is inside where they
/// are missing, and says whether it could: not where `arguments`, or an object on the way, is
/// another kind of value.
pub fn set_option(arguments: &mut Value, option: &LeftOutOption) -> bool {
    let Some((last, outer)) = option.parameter.split_last() else {
        return false;
    };
    let mut at = arguments;
    for name in outer {
        let Some(object) = at.as_object_mut() else {
            return false;
        };
        let inner = object
            .entry(name.clone())
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if inner.is_null() {
            *inner = Value::Object(serde_json::Map::new());
        }
        at = inner;
    }
    match at.as_object_mut() {
        Some(object) => {
            object.insert(last.clone(), Value::String(option.value.clone()));
            true
        }
        None => false,
    }
}

/// How many characters after "default" in a parameter's description [`described_default`] reads.
const DESCRIBED_DEFAULT_CHARS: usize = 40;

/// What a parameter's description says after "default" ("Default is 'popularity'.", "defaults to
/// status"), [`plain`], up to [`DESCRIBED_DEFAULT_CHARS`] characters or the end of the sentence;
/// empty when it says nothing of a default.
fn described_default(description: &str) -> String {
    let description = plain(description);
    let Some(at) = description.find("default") else {
        return String::new();
    };
    let after = &description[at + "default".len()..];
    let mut said = String::new();
    for (i, (byte, c)) in after.char_indices().enumerate() {
        // A full stop followed by a space or the end closes the sentence ("'v1.2'" does not).
        let full_stop = c == '.'
            && after[byte + 1..]
                .chars()
                .next()
                .is_none_or(char::is_whitespace);
        if i >= DESCRIBED_DEFAULT_CHARS || full_stop {
            break;
        }
        said.push(c);
    }
    said
}

/// Whether `question` ([`plain`]) names the enum value `option`: the value has at least
/// [`MIN_OPTION_CHARS`] characters and stands in the question as words of their own, compared
/// without case and with `_` and `-` read as spaces.
fn names(question: &str, option: &str) -> bool {
    let words = plain(option);
    let words = words.trim();
    option.chars().count() >= MIN_OPTION_CHARS && !words.is_empty() && has_words(question, words)
}

/// `text` lowercased, with `_` and `-` as spaces.
pub(crate) fn plain(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '_' | '-' => ' ',
            c => c,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether `words` stands in `text` as words of their own (not inside a longer word).
fn has_words(text: &str, words: &str) -> bool {
    let mut from = 0;
    while let Some(found) = text.get(from..).and_then(|rest| rest.find(words)) {
        let at = from + found;
        let end = at + words.len();
        let before = text[..at].chars().next_back();
        let after = text[end..].chars().next();
        if before.is_none_or(|c| !c.is_alphanumeric()) && after.is_none_or(|c| !c.is_alphanumeric())
        {
            return true;
        }
        from = end;
    }
    false
}

/// Whether `question` ([`plain`]) says `value`, an enum value, as a word, the word without an
/// ending "ly" or "s" too ("annual" says `annually`, "month" says `monthly`, "day" says `days`):
/// what a question says that way is not contradicted, though it does not name it.
fn says(question: &str, value: &str) -> bool {
    let value = plain(value);
    let value = value.trim();
    let stem = value
        .strip_suffix("ly")
        .or_else(|| value.strip_suffix('s'))
        .unwrap_or(value);
    [value, stem]
        .iter()
        .any(|w| w.chars().count() >= MIN_OPTION_CHARS && has_words(question, w))
}

/// The string values an argument value holds, [`plain`].
fn collect_texts(value: &Value, into: &mut Vec<String>, depth: usize) {
    if depth > MAX_OPTION_DEPTH * 4 {
        return;
    }
    match value {
        Value::String(s) => into.push(plain(s)),
        Value::Array(items) => items.iter().for_each(|v| collect_texts(v, into, depth + 1)),
        Value::Object(map) => map.values().for_each(|v| collect_texts(v, into, depth + 1)),
        _ => {}
    }
}

/// A parameter as the model reads it: `"windStrength"`, with the objects it is inside
/// (`(inside "body")`) in `inside`.
fn parameter_text(parameter: &[String]) -> (String, String) {
    match parameter {
        [] => (String::new(), String::new()),
        [one] => (format!("\"{one}\""), String::new()),
        [outer @ .., last] => (
            format!("\"{last}\""),
            format!(
                " (inside {})",
                outer
                    .iter()
                    .map(|o| format!("\"{o}\""))
                    .collect::<Vec<_>>()
                    .join(" > ")
            ),
        ),
    }
}

/// The left-out options of one parameter of one tool, in the order first met.
struct Group<'a> {
    tool: &'a str,
    parameter: &'a [String],
    values: Vec<&'a str>,
    steps: Vec<&'a str>,
}

/// The left-out options as the model reads them, one item per tool's parameter:
/// `"windStrength": "HIGH" (inside "body") in step s1 (ThinQ_Connect)` where one value goes to
/// one step, otherwise `"windStrength" (inside "body") set to "HIGH" or "LOW" (as the question
/// asks) in steps s1 and s2 (ThinQ_Connect)`: which value, in which step, is then the model's to
/// say.
fn options_text(left_out: &[LeftOutOption], calls: bool) -> String {
    let mut groups: Vec<Group> = Vec::new();
    for o in left_out {
        let at = match groups
            .iter()
            .position(|g| g.tool == o.tool && g.parameter == o.parameter.as_slice())
        {
            Some(at) => at,
            None => {
                groups.push(Group {
                    tool: &o.tool,
                    parameter: &o.parameter,
                    values: Vec::new(),
                    steps: Vec::new(),
                });
                groups.len() - 1
            }
        };
        let group = &mut groups[at];
        if !group.values.contains(&o.value.as_str()) {
            group.values.push(&o.value);
        }
        if !group.steps.contains(&o.step.as_str()) {
            group.steps.push(&o.step);
        }
    }
    let items: Vec<String> = groups
        .into_iter()
        .map(
            |Group {
                 tool,
                 parameter,
                 values,
                 steps,
             }| {
                let (name, inside) = parameter_text(parameter);
                let place = match (calls, steps.len()) {
                    (true, 1) => format!("in the {tool} call"),
                    (true, _) => format!("in the {tool} calls the question asks it for"),
                    (false, 1) => format!("in step {} ({tool})", steps.join("")),
                    (false, _) => format!(
                        "in the steps the question asks it for, of {} ({tool})",
                        crate::self_check::listed(&steps)
                    ),
                };
                match values.as_slice() {
                    [value] if steps.len() == 1 => format!("{name}: \"{value}\"{inside} {place}"),
                    [value] => format!("{name}{inside} set to \"{value}\" {place}"),
                    _ => format!(
                        "{name}{inside} set to {} (the one the question asks for) {place}",
                        values
                            .iter()
                            .map(|v| format!("\"{v}\""))
                            .collect::<Vec<_>>()
                            .join(" or ")
                    ),
                }
            },
        )
        .collect();
    crate::self_check::listed(&items)
}

/// What the model reads when its first plan was sent back because the question names options that
/// no step sets ([`options_left_out`]).
pub fn plan_without_options(left_out: &[LeftOutOption]) -> String {
    format!(
        "Error: the plan was not run. The question asks for {values}, but no step sets {it}: the \
         plan leaves out part of the question. Send the whole plan again, with {options}. Call \
         execute_tool_plan again.",
        values = named_values(left_out),
        it = it_or_them(left_out),
        options = options_text(left_out, false),
    )
}

/// What the model reads when its first tool calls (no plan among them) were sent back because
/// the question names options that no call sets ([`options_left_out`]).
pub fn calls_without_options(left_out: &[LeftOutOption]) -> String {
    format!(
        "Error: the calls were not run. The question asks for {values}, but no call sets {it}: \
         the calls leave out part of the question. Make all the calls again, with {options}.",
        values = named_values(left_out),
        it = it_or_them(left_out),
        options = options_text(left_out, true),
    )
}

/// "it" for one value, "them" for more.
fn it_or_them(left_out: &[LeftOutOption]) -> &'static str {
    if left_out.iter().all(|o| o.value == left_out[0].value) {
        "it"
    } else {
        "them"
    }
}

/// The values of `left_out`, each once: `HIGH`, `HIGH and COOL`.
fn named_values(left_out: &[LeftOutOption]) -> String {
    let mut values: Vec<String> = Vec::new();
    for o in left_out {
        if !values.contains(&o.value) {
            values.push(o.value.clone());
        }
    }
    crate::self_check::listed(&values)
}

/// Enum values that are everyday words rather than names of an option: a question says them in
/// passing ("list all PostgreSQL servers" names no `type: "all"`), so [`options_contradicted`]
/// does not read them as the question's choice.
const PASSING_WORDS: &[&str] = &[
    "all", "any", "both", "none", "other", "auto", "default", "yes", "no", "true", "false",
];

/// An option a call sets that its question contradicts ([`options_contradicted`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContradictedOption {
    /// The position of the call among those [`options_contradicted`] was given.
    pub call: usize,
    /// The id of the step (for a direct call, the tool's name).
    pub step: String,
    /// The tool the step calls.
    pub tool: String,
    /// The parameter, with the object parameters it is inside first.
    pub parameter: Vec<String>,
    /// The value the call sets, which the question does not name.
    pub value: String,
    /// The values of the same enum that the question names, as the enum writes them.
    pub named: Vec<String>,
}

/// The options `calls` (`(step id, tool, arguments)`) set that the question contradicts: a
/// parameter with an enum of strings that a call sets to a value the question does not name,
/// while the question names another value of the same enum ("in Celsius" and `unit:
/// "fahrenheit"`) and no call of the same tool sets that parameter to a value it names (one
/// question can ask for ounces of one food and pieces of another). Values are named as
/// [`options_left_out`] reads them; values shorter than [`MIN_OPTION_CHARS`] and everyday words
/// such as "all" are not read as named. At most [`MAX_CHECKED_OPTIONS`] enum values are looked
/// at.
///
/// Not used by the agent: on BFCL's ground truth it flags 7 of 2,351 correct plans, and on the
/// plans the local model wrote for held-out questions it found none wrong
/// (`bench/bfcl_unasked.py --check contradicted`). [`contradicted_twins`] is the case it leaves.
pub fn options_contradicted<'c, 's>(
    question: &str,
    calls: impl IntoIterator<Item = (&'c str, &'c str, &'c Value)>,
    schema_of: impl Fn(&str) -> Option<&'s Value>,
) -> Vec<ContradictedOption> {
    contradicted_where(question, calls, schema_of, |o, set, _| {
        !set.iter()
            .any(|p| p.tool == o.tool && p.parameter == o.parameter && o.is_named(&p.value))
    })
}

/// The calls of `calls` (`(step id, tool, arguments)`) that are another call's twin but for an
/// option the question contradicts: a call sets a parameter with an enum of strings to a value
/// the question does not name, while another call of the same tool, with the same arguments but
/// for that parameter, sets it to a value the question names (asked for the weather "in
/// Celsius", a plan fetches it in Celsius and again in Fahrenheit). One entry per such call and
/// parameter; values are named as [`options_contradicted`] reads them. The calls found are
/// nothing the question asks for: [`drop_contradicted_twins`] takes them out of a plan.
pub fn contradicted_twins<'c, 's>(
    question: &str,
    calls: impl IntoIterator<Item = (&'c str, &'c str, &'c Value)>,
    schema_of: impl Fn(&str) -> Option<&'s Value>,
) -> Vec<ContradictedOption> {
    contradicted_where(question, calls, schema_of, |o, set, calls| {
        let arguments_of = |call: usize| calls.get(call).map(|(_, _, arguments)| *arguments);
        set.iter().any(|p| {
            p.call != o.call
                && p.tool == o.tool
                && p.parameter == o.parameter
                && o.is_named(&p.value)
                && match (arguments_of(o.call), arguments_of(p.call)) {
                    (Some(a), Some(b)) => same_but_for(a, b, &o.parameter),
                    _ => false,
                }
        })
    })
}

/// The options `calls` set ([`options_set`]) that the question contradicts and that `keep`
/// keeps, given the option, every option set, and the calls.
fn contradicted_where<'c, 's>(
    question: &str,
    calls: impl IntoIterator<Item = (&'c str, &'c str, &'c Value)>,
    schema_of: impl Fn(&str) -> Option<&'s Value>,
    keep: impl Fn(&ContradictedOption, &[ContradictedOption], &[(&str, &str, &Value)]) -> bool,
) -> Vec<ContradictedOption> {
    let calls: Vec<(&str, &str, &Value)> = calls.into_iter().collect();
    let (set, said): (Vec<ContradictedOption>, Vec<bool>) =
        options_set(question, &calls, schema_of).into_iter().unzip();
    set.iter()
        .zip(said)
        .filter(|(o, said)| o.contradicted(*said) && keep(o, &set, &calls))
        .map(|(o, _)| o.clone())
        .collect()
}

/// Takes out of `plan` (an `execute_tool_plan` call's arguments) the steps that are another
/// step's twin but for an option the question contradicts ([`contradicted_twins`]) and stand
/// alone: they read no other step's result and nothing in the plan (a step, its answer) reads
/// theirs. One step always stays. Returns the ids taken out; `output_steps` loses them too.
/// `schema_of` gives a tool's parameters (a JSON Schema object).
pub fn drop_contradicted_twins<'s>(
    question: &str,
    plan: &mut Value,
    schema_of: impl Fn(&str) -> Option<&'s Value>,
) -> Vec<String> {
    crate::relevance::drop_found_steps(plan, |calls| {
        let twins = contradicted_twins(question, calls, schema_of);
        twins.into_iter().map(|o| o.step).collect()
    })
}

/// Whether `a` and `b` (two calls' arguments) are the same but for the value at `parameter` (a
/// path of object keys).
fn same_but_for(a: &Value, b: &Value, parameter: &[String]) -> bool {
    let Some((name, inner)) = parameter.split_first() else {
        return a == b;
    };
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return false;
    };
    let others_equal = a.len() == b.len()
        && a.iter()
            .all(|(key, value)| key == name || b.get(key) == Some(value));
    others_equal
        && match (a.get(name), b.get(name)) {
            (Some(a), Some(b)) => inner.is_empty() || same_but_for(a, b, inner),
            _ => false,
        }
}

impl ContradictedOption {
    /// Whether the question names other values of the option's enum and not the one set, nor
    /// says it in other words (`said`, [`says`]).
    fn contradicted(&self, said: bool) -> bool {
        !self.named.is_empty() && !said && !self.is_named(&self.value)
    }

    /// Whether `value` is one of the values the question names.
    fn is_named(&self, value: &str) -> bool {
        self.named.iter().any(|n| n.eq_ignore_ascii_case(value))
    }
}

/// Every string enum value `calls` set, with the values of its enum the question names (those
/// at least [`MIN_OPTION_CHARS`] long that are not everyday words), and whether the question says
/// the value set ([`says`]); at most [`MAX_CHECKED_OPTIONS`] enum values are looked at.
fn options_set<'s>(
    question: &str,
    calls: &[(&str, &str, &Value)],
    schema_of: impl Fn(&str) -> Option<&'s Value>,
) -> Vec<(ContradictedOption, bool)> {
    let question = plain(question);
    let mut budget = MAX_CHECKED_OPTIONS;
    let mut set: Vec<(ContradictedOption, bool)> = Vec::new();
    for (call, (step, tool, arguments)) in calls.iter().enumerate() {
        let Some(schema) = schema_of(tool) else {
            continue;
        };
        let mut path = Vec::new();
        set_options(
            &question,
            schema,
            arguments,
            &mut path,
            0,
            &mut budget,
            &mut |parameter, value, named| {
                let said = says(&question, &value);
                let option = ContradictedOption {
                    call,
                    step: (*step).to_owned(),
                    tool: (*tool).to_owned(),
                    parameter,
                    value,
                    named,
                };
                set.push((option, said));
            },
        );
        if budget == 0 {
            break;
        }
    }
    set
}

/// Calls `found(parameter, value, named)` for each string enum value `arguments` sets under
/// `schema`'s properties (nested objects too), with the values of that enum the question names.
fn set_options(
    question: &str,
    schema: &Value,
    arguments: &Value,
    path: &mut Vec<String>,
    depth: usize,
    budget: &mut usize,
    found: &mut dyn FnMut(Vec<String>, String, Vec<String>),
) {
    if depth > MAX_OPTION_DEPTH {
        return;
    }
    let (Some(properties), Some(arguments)) = (
        schema.get("properties").and_then(Value::as_object),
        arguments.as_object(),
    ) else {
        return;
    };
    for (name, given) in arguments {
        let Some(property) = properties.get(name) else {
            continue;
        };
        path.push(name.clone());
        if let (Some(options), Some(value)) = (
            property.get("enum").and_then(Value::as_array),
            given.as_str(),
        ) {
            if options.iter().any(|o| o.as_str() == Some(value)) {
                let mut named = Vec::new();
                for option in options.iter().filter_map(Value::as_str) {
                    if *budget == 0 {
                        break;
                    }
                    *budget -= 1;
                    if names(question, option) && !PASSING_WORDS.contains(&plain(option).trim()) {
                        named.push(option.to_owned());
                    }
                }
                found(path.clone(), value.to_owned(), named);
            }
        } else if given.is_object() {
            set_options(question, property, given, path, depth + 1, budget, found);
        }
        path.pop();
        if *budget == 0 {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn thinq() -> Value {
        json!({"type": "object", "properties": {"body": {"type": "object", "properties": {
            "airConJobMode": {"type": "string", "enum": ["AIR_CLEAN", "COOL", "AIR_DRY"],
                "default": "COOL"},
            "windStrength": {"type": "string", "enum": ["LOW", "HIGH", "MID"], "default": "MID"},
            "targetTemperature": {"type": "integer"}}}}})
    }

    fn check(question: &str, arguments: &Value) -> Vec<LeftOutOption> {
        let schema = thinq();
        options_left_out(question, [("s1", "thinq", arguments)], |t| {
            (t == "thinq").then_some(&schema)
        })
    }

    #[test]
    fn a_named_option_no_step_sets_is_found_inside_an_object_parameter() {
        let found = check(
            "set cool mode with a temp of 24 oC and the high wind strength.",
            &json!({"body": {"airConJobMode": "COOL", "targetTemperature": 24}}),
        );
        assert_eq!(
            found,
            vec![LeftOutOption {
                call: 0,
                step: "s1".into(),
                tool: "thinq".into(),
                parameter: vec!["body".into(), "windStrength".into()],
                value: "HIGH".into(),
            }]
        );
        assert_eq!(
            plan_without_options(&found),
            "Error: the plan was not run. The question asks for HIGH, but no step sets it: the \
             plan leaves out part of the question. Send the whole plan again, with \
             \"windStrength\": \"HIGH\" (inside \"body\") in step s1 (thinq). Call \
             execute_tool_plan again."
        );
        assert!(
            calls_without_options(&found)
                .contains("\"windStrength\": \"HIGH\" (inside \"body\") in the thinq call")
        );
    }

    #[test]
    fn set_parameters_defaults_and_values_written_elsewhere_are_not_flagged() {
        // Two values of one parameter: the model says which.
        let found = check(
            "high or low wind, whichever is quieter",
            &json!({"body": {}}),
        );
        assert!(
            plan_without_options(&found).contains(
                "The question asks for LOW and HIGH, but no step sets them: the plan leaves out \
                 part of the question. Send the whole plan again, with \"windStrength\" (inside \
                 \"body\") set to \"LOW\" or \"HIGH\" (the one the question asks for) in step s1 \
                 (thinq)."
            ),
            "{}",
            plan_without_options(&found)
        );
        // Set (to whatever value): not flagged.
        assert!(
            check(
                "the high wind strength",
                &json!({"body": {"windStrength": "LOW"}})
            )
            .is_empty()
        );
        // The default: left out, it is taken anyway.
        assert!(check("cool mode please", &json!({"body": {}})).is_empty());
        // The default as the description says it.
        let schema = json!({"properties": {"sort_by": {"enum": ["popularity", "chronological"],
            "description": "How to sort. Default is 'popularity'. Chronological is oldest first."}}});
        let sorted = |q: &str| options_left_out(q, [("s", "t", &json!({}))], |_| Some(&schema));
        assert!(sorted("sort by popularity").is_empty());
        assert_eq!(sorted("in chronological order").len(), 1);
        // Written in another argument.
        assert!(check("high", &json!({"body": {"note": "high"}})).is_empty());
        // Part of a longer word, or too short to look for.
        assert!(check("highway lowlands", &json!({"body": {}})).is_empty());
        // Words with `_` read as spaces.
        let found = check("run the air clean mode", &json!({"body": {}}));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].value, "AIR_CLEAN");
        // A tool without a schema, and arguments that are not an object.
        assert!(options_left_out("high", [("s1", "other", &json!({}))], |_| None).is_empty());
        assert_eq!(check("high", &json!("text")).len(), 1);
    }

    #[test]
    fn an_option_is_settled_when_neither_its_value_nor_its_parameter_is_in_question() {
        let option = |call: usize, parameter: &str, value: &str| LeftOutOption {
            call,
            step: format!("s{call}"),
            tool: "t".into(),
            parameter: vec!["body".into(), parameter.into()],
            value: value.into(),
        };
        let one = [option(0, "wind", "HIGH"), option(0, "mode", "COOL")];
        assert_eq!(settled_options(&one).len(), 2);
        // Two values of one parameter, or one value for two calls: the model says which.
        let two_values = [option(0, "wind", "HIGH"), option(0, "wind", "LOW")];
        assert!(settled_options(&two_values).is_empty());
        let two_calls = [option(0, "wind", "HIGH"), option(1, "wind", "HIGH")];
        assert!(settled_options(&two_calls).is_empty());

        let mut arguments = json!({});
        assert!(set_option(&mut arguments, &one[0]));
        assert_eq!(arguments, json!({"body": {"wind": "HIGH"}}));
        let mut arguments = json!({"body": null, "x": 1});
        assert!(set_option(&mut arguments, &one[0]));
        assert_eq!(arguments, json!({"body": {"wind": "HIGH"}, "x": 1}));
        for mut arguments in [json!({"body": "text"}), json!([1])] {
            assert!(!set_option(&mut arguments, &one[0]));
        }
    }

    #[test]
    fn a_hostile_schema_is_looked_at_within_the_limits() {
        // Nesting deeper than the limit is not walked.
        let mut schema = json!({"type": "string", "enum": ["deep"]});
        for _ in 0..200 {
            schema = json!({"type": "object", "properties": {"p": schema}});
        }
        assert!(options_left_out("deep", [("s", "t", &json!({}))], |_| Some(&schema)).is_empty());
        // More enum values than the budget: the rest are not looked at.
        let many: Vec<String> = (0..MAX_CHECKED_OPTIONS + 10)
            .map(|i| format!("opt{i}"))
            .collect();
        let schema = json!({"properties": {"p": {"enum": many}}});
        let last = format!("opt{}", MAX_CHECKED_OPTIONS + 5);
        assert!(options_left_out(&last, [("s", "t", &json!({}))], |_| Some(&schema)).is_empty());
        let first = options_left_out("opt3", [("s", "t", &json!({}))], |_| Some(&schema));
        assert_eq!(first.len(), 1);
    }

    fn unit_schema() -> Value {
        json!({"type": "object", "properties": {
            "location": {"type": "string"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "body": {"type": "object", "properties": {
                "mode": {"type": "string", "enum": ["COOL", "AIR_DRY"]}}}}})
    }

    fn contradicted(question: &str, calls: &[(&str, &str, Value)]) -> Vec<(String, String)> {
        let schema = unit_schema();
        options_contradicted(question, calls.iter().map(|(s, t, a)| (*s, *t, a)), |_| {
            Some(&schema)
        })
        .into_iter()
        .map(|o| (o.step, o.value))
        .collect()
    }

    #[test]
    fn a_value_the_question_contradicts_is_found() {
        let q = "What is the weather in New York? Give the temperature in Celsius.";
        let step = |id, unit| (id, "weather", json!({"location": "New York", "unit": unit}));
        // One step with the other value.
        assert_eq!(
            contradicted(q, &[step("a", "fahrenheit")]),
            [("a".to_owned(), "fahrenheit".to_owned())]
        );
        // Both values, one step each: the step with the named one stands, so the other is not
        // read as contradicting it (another food, another unit).
        assert!(contradicted(q, &[step("a", "celsius"), step("b", "fahrenheit")]).is_empty());
        // The value named, or no value named, or the parameter not set: nothing.
        assert!(contradicted(q, &[step("a", "celsius")]).is_empty());
        assert!(contradicted("Weather in Rome?", &[step("a", "fahrenheit")]).is_empty());
        assert!(contradicted(q, &[("a", "weather", json!({"location": "NY"}))]).is_empty());
        // Inside an object parameter, with `_` read as a space.
        let body = |mode| ("c", "weather", json!({"body": {"mode": mode}}));
        assert_eq!(
            contradicted("Set it to air dry.", &[body("COOL")]),
            [("c".to_owned(), "COOL".to_owned())]
        );
        assert!(contradicted("Set it to air dry.", &[body("AIR_DRY")]).is_empty());
    }

    #[test]
    fn everyday_words_are_not_a_choice() {
        let schema = json!({"type": "object", "properties": {
            "type": {"type": "string", "enum": ["all", "postgres", "mysql"]}}});
        let calls = [("s", "list", json!({"type": "postgres"}))];
        let found = options_contradicted(
            "List all PostgreSQL servers",
            calls.iter().map(|(s, t, a)| (*s, *t, a)),
            |_| Some(&schema),
        );
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn a_huge_enum_is_read_only_so_far() {
        let options: Vec<String> = (0..MAX_CHECKED_OPTIONS * 4)
            .map(|i| format!("opt{i}"))
            .collect();
        let schema =
            json!({"type": "object", "properties": {"o": {"type": "string", "enum": options}}});
        let calls: Vec<(String, Value)> = (0..64)
            .map(|i| {
                (
                    format!("s{i}"),
                    json!({"o": format!("opt{}", MAX_CHECKED_OPTIONS * 4 - 1)}),
                )
            })
            .collect();
        let found = options_contradicted(
            "Use opt1 please",
            calls.iter().map(|(s, a)| (s.as_str(), "t", a)),
            |_| Some(&schema),
        );
        // The first call's enum spends the budget before any later call is read.
        assert!(found.len() <= 1, "{}", found.len());
    }

    fn twins(question: &str, calls: &[(&str, &str, Value)]) -> Vec<String> {
        let schema = unit_schema();
        contradicted_twins(question, calls.iter().map(|(s, t, a)| (*s, *t, a)), |_| {
            Some(&schema)
        })
        .into_iter()
        .map(|o| o.step)
        .collect()
    }

    #[test]
    fn a_twin_but_for_a_contradicted_value_is_found() {
        let q = "What is the weather in New York? Give the temperature in Celsius.";
        let step =
            |id, location, unit| (id, "weather", json!({"location": location, "unit": unit}));
        let ny = |id, unit| step(id, "New York", unit);
        assert_eq!(
            twins(q, &[ny("a", "celsius"), ny("b", "fahrenheit")]),
            ["b"]
        );
        assert_eq!(
            twins(q, &[ny("a", "fahrenheit"), ny("b", "celsius")]),
            ["a"]
        );
        // Another city is another question's part, not a twin.
        let rome = step("b", "Rome", "fahrenheit");
        assert!(twins(q, &[ny("a", "celsius"), rome]).is_empty());
        // Both units named: both asked.
        let both = "Weather in New York in celsius and in fahrenheit";
        assert!(twins(both, &[ny("a", "celsius"), ny("b", "fahrenheit")]).is_empty());
        // No unit named, or the lone step the only one: nothing.
        let plain = "Weather in New York?";
        assert!(twins(plain, &[ny("a", "celsius"), ny("b", "fahrenheit")]).is_empty());
        assert!(twins(q, &[ny("a", "fahrenheit")]).is_empty());
        // An argument more on one side is not a twin.
        let more = (
            "b",
            "weather",
            json!({"location": "New York", "unit": "fahrenheit", "x": 1}),
        );
        assert!(twins(q, &[ny("a", "celsius"), more]).is_empty());
        // A value the question says in other words ("annual" for `annually`) is asked too.
        let schema = json!({"type": "object", "properties": {
            "frequency": {"type": "string", "enum": ["quarterly", "annually"]}}});
        let by = |id, f| (id, "dividends", json!({"company": "MSFT", "frequency": f}));
        let found = |q: &str| {
            let calls = [by("a", "quarterly"), by("b", "annually")];
            let found = contradicted_twins(q, calls.iter().map(|(s, t, a)| (*s, *t, a)), |_| {
                Some(&schema)
            });
            found.into_iter().map(|o| o.step).collect::<Vec<_>>()
        };
        assert!(found("Dividends on a quarterly basis, then on an annual basis").is_empty());
        assert_eq!(found("Dividends on a quarterly basis"), ["b"]);
        // Inside an object parameter.
        let body = |id, mode, fan| (id, "weather", json!({"body": {"mode": mode, "fan": fan}}));
        let q = "Set it to air dry.";
        assert_eq!(
            twins(q, &[body("a", "AIR_DRY", 1), body("b", "COOL", 1)]),
            ["b"]
        );
        assert!(twins(q, &[body("a", "AIR_DRY", 1), body("b", "COOL", 2)]).is_empty());
    }

    #[test]
    fn lone_twins_are_dropped_from_a_plan() {
        let schema = unit_schema();
        let q = "Weather in New York, in Celsius please";
        let step = |id: &str, unit: &str| json!({"id": id, "tool": "weather", "arguments": {"location": "New York", "unit": unit}});
        let mut plan = json!({"steps": [step("a", "celsius"), step("b", "fahrenheit")],
                              "output_steps": ["a", "b"]});
        let dropped = drop_contradicted_twins(q, &mut plan, |_| Some(&schema));
        assert_eq!(dropped, ["b"]);
        assert_eq!(
            plan,
            json!({"steps": [step("a", "celsius")], "output_steps": ["a"]})
        );
        // A twin another step reads, or the plan's answer reads, stays.
        let reader = json!({"id": "c", "tool": "say", "arguments": {"text": "$ref:b.temp"}});
        let mut plan = json!({"steps": [step("a", "celsius"), step("b", "fahrenheit"), reader]});
        assert!(drop_contradicted_twins(q, &mut plan, |_| Some(&schema)).is_empty());
        let mut plan = json!({"steps": [step("a", "celsius"), step("b", "fahrenheit")],
                              "answer": "It is $ref:b.temp degrees"});
        let before = plan.clone();
        drop_contradicted_twins(q, &mut plan, |_| Some(&schema));
        assert_eq!(plan, before);
        // Not a plan: nothing.
        let mut not_a_plan = json!({"steps": 3});
        assert!(drop_contradicted_twins(q, &mut not_a_plan, |_| Some(&schema)).is_empty());
    }
}
