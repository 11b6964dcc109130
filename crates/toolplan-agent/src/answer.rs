//! The plan's `answer`: a plan that ends with the answer itself, so that a plan that succeeds costs
//! one model call instead of two (the plan, then the answer written from its results).
//!
//! With a planning mode that has one
//! ([`Planning::answer_in_plan`](toolplan_planner::Planning::answer_in_plan)), a plan has an `answer`
//! field (its schema and the example the model reads are toolplan-planner's): the reply to the user,
//! with `$ref:` where results go, or null when the reply needs a judgement on the results. An answer
//! to a question that asks for a judgement (yes or no, one of named options: [`needs_judgement`]) is
//! not taken either: written before the results, it can only guess. Before the plan runs, [`prepare_answers`]
//! turns the field into a last step that calls the built-in `answer` tool (the engine inserts the
//! results, and validates the references like any other). When every step succeeds, the agent
//! returns that text as the answer without asking the model again; when a step fails, the model
//! reads the plan's summary as usual and plans again or answers. The tool itself is hidden from the
//! model's list of tools: the field is the one way to use it.

use std::sync::Arc;

use serde_json::{Value, json};
use toolplan_core::EXECUTE_TOOL_PLAN;
use toolplan_core::reference::{Piece, REF_PREFIX, Reference, split_pieces};
use toolplan_core::{FnTool, Tool, ToolAnnotations, ToolError, ToolResult, value_as_text};
use toolplan_llm::ToolDefinition;
use toolplan_planner::{
    Judgement, choice_answer_schema, choice_answer_shown, copies_example_answer, final_steps,
    judgement_description,
};

use crate::choice::{self, Condition};

/// The name of the built-in answer tool, and of the plan field that becomes its step.
pub const ANSWER_TOOL: &str = toolplan_planner::ANSWER_FIELD;

/// `answer` without the user's question in front of it: small models often open their answer by
/// writing the question out again ("Is it sunny in both? Yes, …"), which a reader (or a script
/// that reads the first word) takes for the answer. The echo is the whole question, or a question
/// of it (text up to a `?` that the question holds). Kept as it is when nothing follows the echo.
pub(crate) fn without_echoed_question(answer: String, question: &str) -> String {
    let question = question.trim().to_lowercase();
    let opening = answer.trim_start();
    let lowered = opening.to_lowercase();
    // The echo's length in `opening`: lowercasing can change a text's length, so only an opening
    // whose lowercase form is as long is cut, and only where that length ends a character of it
    // (characters that grow and shrink can even out).
    let echo = if question.is_empty() || lowered.len() != opening.len() {
        None
    } else if lowered.starts_with(&question) {
        Some(question.len())
    } else {
        lowered
            .find('?')
            .map(|end| end + 1)
            .filter(|&end| question.contains(&lowered[..end]) && lowered[..end].contains(' '))
    };
    let Some(rest) = echo.and_then(|echo| opening.get(echo..)) else {
        return answer;
    };
    let rest = rest.trim_start_matches(|c: char| {
        c.is_whitespace() || matches!(c, ':' | '-' | '\u{2013}' | '\u{2014}')
    });
    if rest.is_empty() {
        answer
    } else {
        rest.to_owned()
    }
}

/// The `answer` tool: returns its text (with the results its `$ref:`s name inserted). A reference
/// that found no value (a missing field, a null result) fails the step instead of putting "null" in
/// front of the user: [`prepare_answers`] lists the text's references as whole values beside it.
pub(crate) fn answer_tool() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        ANSWER_TOOL,
        "The final answer to the user, written with $ref:<step>.<field> where results go; returned to the user as it is when the plan succeeds.",
        // Only `text` is the model's; `values` and `names` are added by `prepare_answers`.
        // A choice answer has `if`, `operands`, `then` and `else` instead of `text` (see
        // `crate::choice`).
        json!({"type": "object",
               "properties": {"text": {"type": "string", "description": "The answer, with $ref:<step>.<field> where results go."},
                              "if": {"type": "string"}, "operands": {"type": "array"},
                              "operand_names": {"type": "array", "items": {"type": "string"}},
                              "then": {"type": "string"}, "else": {"type": "string"}},
               "anyOf": [{"required": ["text"]}, {"required": ["if", "operands", "then", "else"]}]}),
        |arguments: Value, _| async move { answer_text(&arguments) },
    )
    .with_annotations(ToolAnnotations::READ_ONLY))
}

/// What the answer tool returns for these arguments: the text, or an error naming the references
/// that found no value.
fn answer_text(arguments: &Value) -> ToolResult {
    let values = arguments.get("values").and_then(Value::as_array);
    let names = arguments.get("names").and_then(Value::as_array);
    if let (Some(values), Some(names)) = (values, names) {
        let empty: Vec<&str> = values
            .iter()
            .zip(names)
            .filter(|(v, _)| v.is_null())
            .filter_map(|(_, n)| n.as_str())
            .collect();
        if !empty.is_empty() {
            return Err(ToolError::failed(format!(
                "the answer refers to {} with no value (no such field in that step's result): \
                 refer to a field the step returns",
                empty
                    .iter()
                    .map(|n| format!("$ref:{n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    let field = match arguments.get(choice::IF).and_then(Value::as_str) {
        Some(condition) => {
            let operands = arguments
                .get("operands")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let names: Vec<String> = arguments
                .get("operand_names")
                .and_then(Value::as_array)
                .map(|n| {
                    n.iter()
                        .map(|n| format!("$ref:{}", value_as_text(n)))
                        .collect()
                })
                .unwrap_or_default();
            let holds = choice::evaluate(condition, operands, &names).map_err(|why| {
                ToolError::failed(format!(
                    "the answer's condition could not be evaluated: {why}"
                ))
            })?;
            if holds { choice::THEN } else { choice::ELSE }
        }
        None => "text",
    };
    let text = arguments.get(field).map(value_as_text).unwrap_or_default();
    Ok(Value::String(text.into_owned()))
}

/// A plan's arguments made ready for its answer: an `answer` field that inserts results becomes a
/// last step that calls the `answer` tool (one that inserts none or refers to a step the plan does
/// not have, or null, is dropped); each `answer` step's references are listed
/// beside its text, as whole values (`values`) and by name (`names`), so that the tool can tell a
/// reference that found nothing; and the steps are added to `output_steps` (when the plan lists
/// output steps and leaves them out), so that their text is kept.
pub(crate) fn prepare_answers(mut plan: Value) -> Value {
    answer_field_to_step(&mut plan);
    let mut answers = Vec::new();
    if let Some(steps) = plan.get_mut("steps").and_then(Value::as_array_mut) {
        for step in steps {
            if step.get("tool").and_then(Value::as_str) != Some(ANSWER_TOOL) {
                continue;
            }
            if let Some(id) = step.get("id") {
                answers.push(id.clone());
            }
            let Some(arguments) = step.get_mut("arguments").and_then(Value::as_object_mut) else {
                continue;
            };
            let refs: Vec<Reference> = ["text", choice::THEN, choice::ELSE]
                .iter()
                .flat_map(|field| references(arguments.get(*field)))
                .collect();
            if refs.is_empty() {
                continue;
            }
            let names = refs
                .iter()
                .map(|r| Value::String(r.to_string().trim_start_matches(REF_PREFIX).to_owned()))
                .collect();
            let values = refs.iter().map(|r| Value::String(r.to_string())).collect();
            arguments.insert("names".into(), Value::Array(names));
            arguments.insert("values".into(), Value::Array(values));
        }
    }
    if let Some(Value::Array(outputs)) = plan.get_mut("output_steps") {
        for id in answers {
            if !outputs.contains(&id) {
                outputs.push(id);
            }
        }
    }
    plan
}

/// A plan's results written out as the answer to the user
/// ([`AgentBuilder::results_answer`](crate::AgentBuilder::results_answer)): `plan` is the plan's
/// arguments as the model wrote them, `outputs` the results of its output steps by id (all its
/// steps when it names no `output_steps`). The steps it named as outputs, or else its final steps
/// (those no other step reads: what the plan set out to find) and then the others in plan order,
/// one line each, `tool(literal arguments): result`; a plan of one result is that result alone. A
/// result is written as people read it: text as it is, an object as `field: value, …` (an object
/// of one field as its value). `None` when no step has a result. Cut to `max_bytes`.
pub(crate) fn results_answer(
    plan: &Value,
    outputs: &serde_json::Map<String, Value>,
    max_bytes: usize,
) -> Option<String> {
    let steps = plan.get("steps").and_then(Value::as_array)?;
    let named = plan
        .get("output_steps")
        .and_then(Value::as_array)
        .is_some_and(|o| !o.is_empty());
    let finals = final_steps(steps);
    let id_of = |step: &Value| step.get("id").and_then(Value::as_str).map(str::to_owned);
    // Final steps first, unless the plan named its outputs (then in the plan's order).
    let mut order: Vec<&Value> = steps.iter().collect();
    if !named {
        order.sort_by_key(|step| id_of(step).is_none_or(|id| !finals.contains(&id)));
    }
    let lines: Vec<(String, String)> = order
        .into_iter()
        .filter_map(|step| {
            let id = id_of(step)?;
            let result = outputs.get(&id)?;
            let tool = step.get("tool").and_then(Value::as_str).unwrap_or("?");
            (tool != ANSWER_TOOL).then(|| {
                let literal = literal_arguments(step.get("arguments"));
                (format!("{tool}{literal}"), readable(result))
            })
        })
        .collect();
    let mut text = match lines.as_slice() {
        [] => return None,
        [(_, result)] => result.clone(),
        many => many
            .iter()
            .map(|(call, result)| format!("{call}: {result}"))
            .collect::<Vec<_>>()
            .join("\n"),
    };
    toolplan_core::limits::truncate_string(&mut text, max_bytes);
    Some(text)
}

/// A step's arguments that the model wrote as they are (no reference in them), in brackets:
/// `(Paris, 2)`; empty when there are none.
fn literal_arguments(arguments: Option<&Value>) -> String {
    let Some(Value::Object(arguments)) = arguments else {
        return String::new();
    };
    let values: Vec<String> = arguments
        .values()
        .filter(|v| match v {
            Value::String(s) => !s.contains(REF_PREFIX),
            Value::Number(_) | Value::Bool(_) => true,
            _ => false,
        })
        .map(|v| value_as_text(v).into_owned())
        .collect();
    if values.is_empty() {
        String::new()
    } else {
        format!("({})", values.join(", "))
    }
}

/// A result as people read it: text as it is, an object as `field: value, …` (one field: its
/// value), a list of plain values joined by `; `, anything deeper as compact JSON.
fn readable(value: &Value) -> String {
    let plain = |v: &Value| match v {
        Value::Null => "none".to_owned(),
        Value::Object(_) | Value::Array(_) => v.to_string(),
        other => value_as_text(other).into_owned(),
    };
    match value {
        Value::Object(fields) if fields.len() == 1 => fields.values().map(plain).collect(),
        Value::Object(fields) => fields
            .iter()
            .map(|(k, v)| format!("{k}: {}", plain(v)))
            .collect::<Vec<_>>()
            .join(", "),
        Value::Array(items) if items.iter().all(|v| !v.is_object() && !v.is_array()) => {
            items.iter().map(plain).collect::<Vec<_>>().join("; ")
        }
        other => plain(other),
    }
}

/// The references in an answer's text (none when it is not text).
fn references(text: Option<&Value>) -> Vec<Reference> {
    text.and_then(Value::as_str)
        .and_then(split_pieces)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| match p {
            Piece::Ref(r) => Some(r),
            Piece::Text(_) => None,
        })
        .collect()
}

/// The references of a plan's `answer`: in its text, or in a choice's condition and replies.
fn answer_references(answer: &Value) -> Vec<Reference> {
    if choice::is_choice(answer) {
        [choice::IF, choice::THEN, choice::ELSE]
            .iter()
            .flat_map(|field| references(answer.get(*field)))
            .collect()
    } else {
        references(Some(answer))
    }
}

/// Whether a plan's `answer` field is taken as the answer: text that inserts results, and only
/// results of the plan's `steps`.
fn usable_answer(text: &Value, steps: &[Value]) -> bool {
    // A choice whose condition reads no result, or is not a condition, is a guess too.
    if choice::is_choice(text)
        && !([choice::IF, choice::THEN, choice::ELSE]
            .iter()
            .all(|f| text.get(*f).is_some_and(Value::is_string))
            && text
                .get(choice::IF)
                .and_then(Value::as_str)
                .is_some_and(|c| Condition::parse(c).is_ok()))
    {
        return false;
    }
    // An answer that inserts no result was written before the results, and is a guess; the model
    // answers from the results instead.
    let refs = answer_references(text);
    // An answer that refers to a step the plan does not have (copied from the example, or a step
    // left out) would make the whole plan invalid: the steps run without it, and the model answers
    // from their results.
    // An answer that inserts no result of a final step (one no other step reads) was written
    // without what the plan finds out ("The weather in $ref:u.city is sunny."): a guess too.
    !refs.is_empty()
        && refs.iter().all(|r| has_step(steps, &r.step))
        && final_steps(steps)
            .iter()
            .all(|id| refs.iter().any(|r| &r.step == id))
}

/// Whether one of a plan's `steps` has the id `id`.
fn has_step(steps: &[Value], id: &str) -> bool {
    steps
        .iter()
        .any(|s| s.get("id").and_then(Value::as_str) == Some(id))
}

/// Sets a plan's `answer` field to null when [`prepare_answers`] would drop it (a guess, or one that
/// refers to a step the plan lacks), when it copies the worked example's answer instead of
/// answering `question` ([`copies_example_answer`]), or when it is a choice between the options
/// `question` names ([`chooses_between`]) whose condition compares nothing (`$ref:c.equal` says
/// nothing of which), and says whether it did. The agent does this to
/// the plan it keeps in the conversation: a model that reads its own guess beside the results
/// repeats the guess (the 1.5B model called Paris "sunny" again next to a result that said
/// "cloudy").
pub(crate) fn forget_unused_answer(plan: &mut Value, question: &str) -> bool {
    let Some(object) = plan.as_object_mut() else {
        return false;
    };
    let usable = match (object.get(ANSWER_TOOL), object.get("steps")) {
        (None | Some(Value::Null), _) => return false,
        (Some(text), Some(Value::Array(steps))) => {
            // A choice is the one answer a judgement can be written as before the results.
            (choice::is_choice(text) || !needs_judgement(question))
                && usable_answer(text, steps)
                // Choosing between options takes a comparison: a bare flag (`$ref:c.equal`)
                // says nothing of which.
                && !(chooses_between(question)
                    && text
                        .get(choice::IF)
                        .and_then(Value::as_str)
                        .is_some_and(|c| !c.contains(['<', '>', '='])))
                && !text
                    .as_str()
                    .is_some_and(|t| copies_example_answer(t, question))
        }
        // Not a plan the engine accepts: validation names the problem.
        (Some(_), _) => return false,
    };
    if !usable {
        object.insert(ANSWER_TOOL.into(), Value::Null);
    }
    !usable
}

/// The fields `question` asks for that a plan's text answer leaves out: a field of a step's result
/// (from its tool's output schema, `output_of`) that the question names as a word of its own
/// ("team", "conditions" for `condition`), that no step reads (a field a step reads is on the way
/// to the answer, as a person's city is on the way to its weather), and that the answer inserts
/// neither alone nor with its step's whole result. An answer written before the results that
/// leaves out what the question asks for answers another question (asked for a team and a weather
/// condition, the 1.5B model wrote "The team of Grace is $ref:w.city's team."); the plan then runs
/// without it and answers with its results. A choice, or a plan without a text answer, leaves out
/// nothing.
pub(crate) fn asked_fields_left_out(
    plan: &Value,
    question: &str,
    output_of: impl Fn(&str) -> Option<Value>,
) -> Vec<String> {
    let (Some(Value::String(_)), Some(Value::Array(steps))) =
        (plan.get(ANSWER_TOOL), plan.get("steps"))
    else {
        return Vec::new();
    };
    let asked: Vec<String> = question
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| choice::stem(&w.to_lowercase()))
        .collect();
    let mut read = Vec::new();
    for step in steps {
        if let Some(arguments) = step.get("arguments") {
            toolplan_planner::references_in(arguments, &mut read, 0);
        }
    }
    let inserted = references(plan.get(ANSWER_TOOL));
    let mut left_out: Vec<String> = Vec::new();
    for step in steps.iter().take(toolplan_planner::MAX_CHECKED_STEPS) {
        let (Some(id), Some(tool)) = (
            step.get("id").and_then(Value::as_str),
            step.get("tool").and_then(Value::as_str),
        ) else {
            continue;
        };
        let Some(output) = output_of(tool) else {
            continue;
        };
        let Some(fields) = output.get("properties").and_then(Value::as_object) else {
            continue;
        };
        for field in fields.keys() {
            let named = field.chars().all(char::is_alphabetic)
                && asked.contains(&choice::stem(&field.to_lowercase()));
            let first = |r: &Reference| r.path.first().is_some_and(|f| f == field);
            let on_the_way = read.iter().any(first);
            let answered = inserted
                .iter()
                .any(|r| first(r) || (r.step == id && r.path.is_empty()));
            if named && !on_the_way && !answered && !left_out.contains(field) {
                left_out.push(field.clone());
            }
        }
    }
    left_out
}

/// The plan tool as a question that needs a judgement on the results ([`needs_judgement`]) sees it:
/// its answer field is a choice ([`crate::choice`]), a condition on the results and a reply for
/// each outcome, in the decoding schema ([`strict_parameters`](ToolDefinition::strict_parameters),
/// what a provider that constrains decoding enforces), the schema shown and the description. A
/// text answer, written before the results, is never taken for such a question (it can only
/// guess). Other questions see the plan tool as it is. `None` when the question needs no judgement
/// or no definition has an answer field to narrow.
///
/// The other way round, forcing text for the other questions, was tried and dropped: the 1.5B model,
/// which writes null when it cannot put the results into words before it has them, then wrote a
/// guess ("sunny and warm, with a temperature of 22°C") with a reference or two tacked on.
pub(crate) fn answer_shaped(
    definitions: &[ToolDefinition],
    question: &str,
) -> Option<Vec<ToolDefinition>> {
    if !needs_judgement(question) {
        return None;
    }
    let mut shaped = definitions.to_vec();
    let mut changed = false;
    for definition in shaped.iter_mut().filter(|d| d.name == EXECUTE_TOOL_PLAN) {
        let field = definition
            .strict_parameters
            .as_mut()
            .and_then(|s| s.get_mut("properties"))
            .and_then(|p| p.get_mut(ANSWER_TOOL));
        if let Some(field) = field {
            *field = choice_answer_schema();
            changed = true;
            // What the model reads says so too: the shown field and the description.
            if let Some(shown) = definition
                .parameters
                .get_mut("properties")
                .and_then(|p| p.get_mut(ANSWER_TOOL))
            {
                // Described where the field was (a schema that explains itself), bare where the
                // description explains the plan.
                *shown = choice_answer_shown(shown.get("description").is_some());
            }
            let judgement = if chooses_between(question) {
                Judgement::Between
            } else {
                Judgement::YesNo
            };
            if let Some(description) = judgement_description(&definition.description, judgement) {
                definition.description = description;
            }
        }
    }
    changed.then_some(shaped)
}

/// The words that open a question answered by yes or no ("Is it raining …?", "Does Bob …?").
const YES_NO_OPENINGS: &[&str] = &[
    "is", "are", "was", "were", "am", "do", "does", "did", "can", "could", "will", "would",
    "should", "shall", "has", "have", "had", "may", "might", "must",
];

/// The words that open a question that asks to choose ("Which city is colder, Berlin or London?").
const CHOICE_OPENINGS: &[&str] = &["which", "who", "whose", "whom", "what"];

/// Whether the reply to `question` is a judgement on results, which an answer written before them
/// can only guess: a question answered by yes or no (it opens with a word like "is" or "does", or
/// asks for "yes or no"), or one that asks to choose between named options ("Which …, A or B?").
/// Such a plan's `answer` is not taken: the model replies when the results are back.
pub(crate) fn needs_judgement(question: &str) -> bool {
    let (lowered, words) = lowered_words(question);
    let yes_or_no = words.windows(3).any(|w| w == ["yes", "or", "no"]);
    yes_or_no || opens_with(&lowered, YES_NO_OPENINGS) || chooses_between(question)
}

/// Whether `question` asks to choose between named options ("Which …, A or B?"): a sentence opens
/// with a word like "which", and the question has an "or" that is not "yes or no".
pub(crate) fn chooses_between(question: &str) -> bool {
    let (lowered, words) = lowered_words(question);
    let or_between = words.iter().enumerate().any(|(i, w)| {
        w == "or"
            && !(i > 0 && words[i - 1] == "yes" && words.get(i + 1).is_some_and(|n| n == "no"))
    });
    opens_with(&lowered, CHOICE_OPENINGS) && or_between
}

/// The options a question that chooses between them names ([`chooses_between`]), where they are
/// names: the words on each side of an "or" when both start with a capital ("Berlin or London",
/// "Grace or Heidi", "A7 or B2"), each once. A plan for such a question looks each of them up, so
/// its steps' arguments write them (the local sampler holds the steps open until they do, once);
/// options that are not names ("the red one or the blue one") are not read. At most
/// [`MAX_NAMED_OPTIONS`].
pub(crate) fn named_options(question: &str) -> Vec<String> {
    if !chooses_between(question) {
        return Vec::new();
    }
    let words: Vec<&str> = question
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let named = |w: &&str| w.chars().next().is_some_and(char::is_uppercase);
    let mut options: Vec<String> = Vec::new();
    for (i, word) in words.iter().enumerate() {
        if !word.eq_ignore_ascii_case("or") || i == 0 {
            continue;
        }
        let (Some(before), Some(after)) = (words.get(i - 1), words.get(i + 1)) else {
            continue;
        };
        if named(before) && named(after) {
            for option in [before, after] {
                if options.len() == MAX_NAMED_OPTIONS {
                    return options;
                }
                if !options.iter().any(|o| o == option) {
                    options.push((*option).to_owned());
                }
            }
        }
    }
    options
}

/// Most options [`named_options`] reads of a question: the local sampler looks for each in the
/// plan's arguments whenever the steps might close.
pub(crate) const MAX_NAMED_OPTIONS: usize = 16;

/// `text` in lower case, and its words.
fn lowered_words(text: &str) -> (String, Vec<String>) {
    let lowered = text.to_lowercase();
    let words = lowered
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect();
    (lowered, words)
}

/// Whether a sentence of `lowered` opens with one of `openings` (a question can follow a sentence
/// of context).
fn opens_with(lowered: &str, openings: &[&str]) -> bool {
    lowered
        .split(['.', '?', '!', '\n'])
        .filter_map(|s| {
            s.split(|c: char| !c.is_alphanumeric())
                .find(|w| !w.is_empty())
        })
        .any(|first| openings.contains(&first))
}

/// Moves a plan's `answer` field into a last step (see [`prepare_answers`]).
fn answer_field_to_step(plan: &mut Value) {
    let Some(object) = plan.as_object_mut() else {
        return;
    };
    let Some(text) = object.remove(ANSWER_TOOL) else {
        return;
    };
    let Some(Value::Array(steps)) = object.get_mut("steps") else {
        // Not a plan the engine accepts: keep the field, so that validation names it.
        object.insert(ANSWER_TOOL.into(), text);
        return;
    };
    if !usable_answer(&text, steps) {
        return;
    }
    let id = std::iter::once(ANSWER_TOOL.to_owned())
        .chain((2..).map(|n| format!("{ANSWER_TOOL}_{n}")))
        .find(|id| !has_step(steps, id))
        .unwrap_or_else(|| ANSWER_TOOL.to_owned());
    let arguments = match text
        .get(choice::IF)
        .and_then(Value::as_str)
        .map(Condition::parse)
    {
        // The condition's references become its operands, which the engine resolves as whole
        // values; the replies keep theirs, inserted as text.
        Some(Ok(condition)) => json!({
            choice::IF: condition.expression,
            "operands": condition.operands.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
            "operand_names": condition.operands.iter()
                .map(|r| r.to_string().trim_start_matches(REF_PREFIX).to_owned())
                .collect::<Vec<_>>(),
            choice::THEN: text.get(choice::THEN),
            choice::ELSE: text.get(choice::ELSE),
        }),
        _ => json!({"text": text}),
    };
    steps.push(json!({"id": id, "tool": ANSWER_TOOL, "arguments": arguments}));
}

#[cfg(test)]
mod tests {
    use toolplan_core::ToolContext;

    use super::*;

    #[test]
    fn results_are_written_out_final_steps_first() {
        let plan = json!({"steps": [
            {"id": "a", "tool": "get_weather", "arguments": {"location": "Paris"}},
            {"id": "b", "tool": "get_weather", "arguments": {"location": "Oslo"}},
            {"id": "c", "tool": "calculator", "arguments": {"expression": "$ref:a.temp - $ref:b.temp"}}]});
        let outputs = json!({
            "a": {"temp": 11, "condition": "cloudy"},
            "b": {"temp": 3, "condition": "snow"},
            "c": 8});
        let outputs = outputs.as_object().unwrap();
        assert_eq!(
            results_answer(&plan, outputs, 10_000).unwrap(),
            "calculator: 8\nget_weather(Paris): temp: 11, condition: cloudy\n\
             get_weather(Oslo): temp: 3, condition: snow"
        );
        // Named output steps, in the plan's order; one result alone; an object of one field
        // as its value.
        let mut named = plan.clone();
        named["output_steps"] = json!(["c"]);
        let only_c = json!({"c": {"result": 8}});
        assert_eq!(
            results_answer(&named, only_c.as_object().unwrap(), 10_000).unwrap(),
            "8"
        );
        // Lists of plain values, nested values as JSON, null as "none".
        let list = json!({"a": ["x", 2, null], "b": {"k": {"n": 1}, "z": null}});
        assert_eq!(
            results_answer(&plan, list.as_object().unwrap(), 10_000).unwrap(),
            "get_weather(Paris): x; 2; none\nget_weather(Oslo): k: {\"n\":1}, z: none"
        );
        // Nothing to write: no result, or no steps.
        assert!(results_answer(&plan, &serde_json::Map::new(), 10_000).is_none());
        assert!(results_answer(&json!({}), outputs, 10_000).is_none());
        // Cut to the limit.
        let long = json!({"c": "x".repeat(5_000)});
        assert!(
            results_answer(&plan, long.as_object().unwrap(), 1_000)
                .unwrap()
                .len()
                <= 1_100
        );
    }

    #[test]
    fn only_answers_that_would_be_dropped_are_forgotten() {
        let steps = json!([
            {"id": "u", "tool": "get_user", "arguments": {"name": "Dave"}},
            {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}}]);
        for (answer, forgotten) in [
            (json!("It is $ref:w.temp °C."), false),
            (json!("It is 3 °C."), true),
            (json!("It is $ref:e euros."), true),
            // A reference, but to no final step: the rest is a guess.
            (json!("It is sunny in $ref:u.city."), true),
            (json!("$ref:u.name: $ref:w.condition"), false),
            // The worked example's answer, copied with the plan's own step.
            (json!("The product of order A7 costs $ref:w euros."), true),
            (Value::Null, false),
        ] {
            let mut plan = json!({"steps": steps, "answer": answer});
            let question = "How cold is it in Oslo?";
            assert_eq!(
                forget_unused_answer(&mut plan, question),
                forgotten,
                "{answer}"
            );
            let kept = if forgotten {
                Value::Null
            } else {
                answer.clone()
            };
            assert_eq!(plan["answer"], kept);
            assert_eq!(plan["steps"], steps);
        }
        // No answer field, or not a plan: nothing changes.
        for plan in [
            json!({"steps": steps}),
            json!({"answer": "x", "steps": "w"}),
            json!([1]),
        ] {
            let mut changed = plan.clone();
            assert!(!forget_unused_answer(&mut changed, ""));
            assert_eq!(changed, plan);
        }
    }

    #[test]
    fn only_a_judgement_narrows_the_answer_field_to_a_choice() {
        let plan = ToolDefinition::new(EXECUTE_TOOL_PLAN, "plans", json!({"type": "object"}))
            .with_strict_parameters(json!({"type": "object", "properties": {
                "steps": {"type": "array"},
                "answer": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}));
        let other = ToolDefinition::new("get_weather", "weather", json!({"type": "object"}));
        let definitions = [other.clone(), plan.clone()];
        let shaped = answer_shaped(&definitions, "Is it raining in Oslo? Answer yes or no.")
            .expect("narrowed");
        assert_eq!(shaped[0], other);
        let strict = shaped[1].strict_parameters.as_ref().unwrap();
        assert_eq!(strict["properties"]["answer"], choice_answer_schema());
        assert_eq!(strict["properties"]["steps"], json!({"type": "array"}));
        // The schema shown has no answer field to change here.
        assert_eq!(shaped[1].parameters, plan.parameters);
        // A question answered by the results in words, or a plan without an answer field: as is.
        assert!(answer_shaped(&definitions, "How cold is it in Oslo?").is_none());
        assert!(answer_shaped(&[other], "Is it raining in Oslo?").is_none());
    }

    #[test]
    fn answer_steps_list_their_references_and_become_output_steps() {
        let plan = json!({"steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}},
            {"id": "a", "tool": "answer", "arguments": {"text": "$ref:w.temp °C in $ref:w.city"}}],
            "output_steps": ["w"]});
        let plan = prepare_answers(plan);
        assert_eq!(plan["output_steps"], json!(["w", "a"]));
        assert_eq!(
            plan["steps"][1]["arguments"],
            json!({"text": "$ref:w.temp °C in $ref:w.city",
                   "values": ["$ref:w.temp", "$ref:w.city"], "names": ["w.temp", "w.city"]})
        );
        // No output_steps: every step's result is kept already; no references: nothing to list.
        let plan = json!({"steps": [{"id": "a", "tool": "answer", "arguments": {"text": "x"}}]});
        assert_eq!(prepare_answers(plan.clone()), plan);
        // Not a plan: left alone (validation says what is wrong).
        assert_eq!(prepare_answers(json!("text")), json!("text"));
    }

    #[test]
    fn the_answer_field_becomes_a_last_step() {
        let plan = json!({"thought": "t", "steps": [
            {"id": "answer", "tool": "get_weather", "arguments": {"location": "Oslo"}}],
            "answer": "It is $ref:answer.temp °C", "output_steps": ["answer"]});
        let plan = prepare_answers(plan);
        assert_eq!(
            plan,
            json!({"thought": "t", "steps": [
                {"id": "answer", "tool": "get_weather", "arguments": {"location": "Oslo"}},
                {"id": "answer_2", "tool": "answer", "arguments": {
                    "text": "It is $ref:answer.temp °C",
                    "names": ["answer.temp"], "values": ["$ref:answer.temp"]}}],
                "output_steps": ["answer", "answer_2"]})
        );
        // null, or text that inserts no result: no answer step, and the field is gone (the engine
        // knows no such field).
        for empty in [json!(null), json!(" "), json!("It is sunny.")] {
            let plan = json!({"steps": [{"id": "w", "tool": "get_weather", "arguments": {}}],
                              "answer": empty});
            assert_eq!(
                prepare_answers(plan),
                json!({"steps": [{"id": "w", "tool": "get_weather", "arguments": {}}]})
            );
        }
        // A reference to a step the plan does not have: dropped, so that the steps still run.
        let plan = json!({"steps": [{"id": "w", "tool": "get_weather", "arguments": {}}],
                          "answer": "It costs $ref:e euros."});
        assert_eq!(
            prepare_answers(plan),
            json!({"steps": [{"id": "w", "tool": "get_weather", "arguments": {}}]})
        );
        // No steps to add it to: left for validation to report.
        let plan = json!({"answer": "$ref:w"});
        assert_eq!(prepare_answers(plan.clone()), plan);
    }

    #[tokio::test]
    async fn the_tool_returns_its_text() {
        let ctx = ToolContext {
            step_id: std::sync::Arc::from("a"),
            ..ToolContext::detached()
        };
        let out = answer_tool()
            .call(
                json!({"text": "It is 3 °C", "values": [3], "names": ["w.temp"]}),
                ctx.clone(),
            )
            .await;
        assert_eq!(out.ok(), Some(json!("It is 3 °C")));
        // A reference that found nothing fails the step, naming it.
        let out = answer_tool()
            .call(
                json!({"text": "It is null °F", "values": [null, 3], "names": ["c.f", "w.temp"]}),
                ctx,
            )
            .await;
        let error = out.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("$ref:c.f with no value"), "{error}");
    }

    #[test]
    fn an_answer_that_opens_with_the_question_loses_it() {
        let question = "Is it sunny in both Tokyo and Sydney? ";
        assert_eq!(
            without_echoed_question(
                "Is it sunny in both Tokyo and Sydney? Yes, it is sunny in both.".into(),
                question
            ),
            "Yes, it is sunny in both."
        );
        assert_eq!(
            without_echoed_question(
                "is it sunny in both tokyo and sydney?: Yes.".into(),
                question
            ),
            "Yes."
        );
        // A question of the question, written out again, goes too.
        assert_eq!(
            without_echoed_question(
                "Is it sunny in both Tokyo and Sydney? Yes.".into(),
                "Is it sunny in both Tokyo and Sydney? Check both."
            ),
            "Yes."
        );
        // Other answers, and an answer that is only the question, are kept.
        for kept in [
            "Yes, it is sunny in both Tokyo and Sydney.",
            "Is it sunny in both Tokyo and Sydney?",
            "Is it",
            "",
            "Why? Because it is sunny.",
            "Is it raining in Oslo? No, but it is sunny in both Tokyo and Sydney.",
        ] {
            assert_eq!(without_echoed_question(kept.into(), question), kept);
        }
        assert_eq!(without_echoed_question("Yes.".into(), ""), "Yes.");
        // Text whose lowercase form is longer is not cut (no cut inside a character).
        assert_eq!(
            without_echoed_question("\u{130}stanbul? Yes.".into(), "\u{130}stanbul?"),
            "\u{130}stanbul? Yes."
        );
        // Nor one whose characters grow and shrink by as much, where the cut would fall inside a
        // character.
        let uneven = "\u{212a} \u{e9}\u{e9}? \u{23a}\u{23a}";
        assert_eq!(
            without_echoed_question(uneven.into(), "\u{212a} \u{e9}\u{e9}? More."),
            uneven
        );
    }

    #[test]
    fn an_answer_that_leaves_out_a_field_the_question_asks_for_is_found() {
        let output_of = |tool: &str| match tool {
            "get_user" => Some(json!({"type": "object", "properties": {
                "name": {}, "city": {}, "team": {}}})),
            "get_weather" => Some(json!({"type": "object", "properties": {
                "temp": {}, "condition": {}, "city": {}}})),
            _ => None,
        };
        let steps = json!([
            {"id": "u", "tool": "get_user", "arguments": {"name": "Grace"}},
            {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}}]);
        let question = "Which team is Grace on, and what is the weather condition in the city \
                        where she lives?";
        for (answer, left_out) in [
            (
                json!("The team of Grace is $ref:w.city's team."),
                vec!["team", "condition"],
            ),
            (
                json!("Grace is on $ref:u.team; it is $ref:w.condition there."),
                vec![],
            ),
            (json!("Grace is on $ref:u.team."), vec!["condition"]),
            // Whole results hold every field.
            (json!("$ref:u and $ref:w"), vec![]),
            (
                json!({"if": "$ref:w.temp > 3", "then": "a", "else": "b"}),
                vec![],
            ),
            (Value::Null, vec![]),
        ] {
            let plan = json!({"steps": steps, "answer": answer});
            assert_eq!(
                asked_fields_left_out(&plan, question, output_of),
                left_out,
                "{answer}"
            );
        }
        // The city is on the way to the weather, the temperature is not a field's name, and a
        // tool without an output schema has no fields to ask for.
        let plan = json!({"steps": [
            {"id": "u", "tool": "get_user", "arguments": {"name": "Frank"}},
            {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}},
            {"id": "c", "tool": "calculator", "arguments": {"expression": "$ref:w.temp * 9 / 5 + 32"}}],
            "answer": "It is $ref:c °F where Frank lives."});
        let question = "What is the temperature in the city where Frank lives, in Fahrenheit?";
        assert!(asked_fields_left_out(&plan, question, output_of).is_empty());
        // Plural and singular are one word.
        let plan = json!({"steps": [{"id": "p", "tool": "get_weather", "arguments": {"location": "Paris"}}],
                          "answer": "It is $ref:p.temp °C in Paris."});
        assert_eq!(
            asked_fields_left_out(
                &plan,
                "What are the weather conditions in Paris?",
                output_of
            ),
            ["condition"]
        );
    }

    #[test]
    fn the_options_a_question_names() {
        for (question, options) in [
            (
                "Which city is colder right now, Berlin or London? Answer with the city name.",
                &["Berlin", "London"][..],
            ),
            (
                "Who lives in the warmer city, Grace or Heidi?",
                &["Grace", "Heidi"],
            ),
            ("Which is warmer, New York or Paris?", &["York", "Paris"]),
            (
                "Which order ships first, A7 or B2, or A7 again?",
                &["A7", "B2"],
            ),
            // Not names, not a choice, or yes or no: nothing to hold.
            ("Which is cheaper, the red one or the blue one?", &[]),
            ("Is it warmer in Berlin or London?", &[]),
            (
                "What is the weather in Berlin or London",
                &["Berlin", "London"],
            ),
            ("Is it raining? Answer Yes or No.", &[]),
            ("", &[]),
        ] {
            assert_eq!(named_options(question), options, "{question}");
        }
        // A question with a thousand options names the first few.
        let many = (0..1_000)
            .map(|i| format!("C{i}"))
            .collect::<Vec<_>>()
            .join(" or ");
        let options = named_options(&format!("Which is best, {many}?"));
        assert_eq!(options.len(), MAX_NAMED_OPTIONS);
        assert_eq!(options[..2], ["C0", "C1"]);
    }

    #[test]
    fn choosing_between_options_takes_a_comparison() {
        let steps = json!([
            {"id": "b", "tool": "get_weather", "arguments": {"location": "Berlin"}},
            {"id": "l", "tool": "get_weather", "arguments": {"location": "London"}},
            {"id": "c", "tool": "compare_data", "arguments": {"data_a": "$ref:b.temp", "data_b": "$ref:l.temp"}}]);
        let which = "Which city is colder right now, Berlin or London? Answer with the city name.";
        let yes_no = "Are Berlin and London equally warm? Answer yes or no.";
        for (question, condition, forgotten) in [
            (which, "$ref:c.equal", true),
            (which, "$ref:c.a < $ref:c.b", false),
            (which, "$ref:c.difference <= 0", false),
            (yes_no, "$ref:c.equal", false),
        ] {
            let mut plan = json!({"steps": steps, "answer": {
                "if": condition, "then": "Berlin", "else": "London"}});
            assert_eq!(
                forget_unused_answer(&mut plan, question),
                forgotten,
                "{question} {condition}"
            );
        }
        for (question, chooses) in [
            (which, true),
            (yes_no, false),
            ("Who lives in the warmer city, Grace or Heidi?", true),
            ("Which city is warmer? Yes or no.", false),
            ("What is warmer, tea or coffee?", true),
        ] {
            assert_eq!(chooses_between(question), chooses, "{question}");
        }
    }

    #[test]
    fn questions_that_need_a_judgement() {
        for (q, judged) in [
            ("What is the weather like where Alice lives?", false),
            ("Is it raining where Bob lives? Answer yes or no.", true),
            (
                "Which city is colder right now, Berlin or London? Answer with the city name.",
                true,
            ),
            (
                "Who lives in the warmer city, Grace or Heidi? Answer with the name.",
                true,
            ),
            ("Is it sunny in both Tokyo and Sydney? Check both.", true),
            (
                "How many degrees warmer is Cairo than Oslo right now?",
                false,
            ),
            (
                "What are the weather conditions in Paris and in London?",
                false,
            ),
            (
                "Add the temperatures of London and Paris, then multiply the sum by 2. What number do you get?",
                false,
            ),
        ] {
            assert_eq!(needs_judgement(q), judged, "{q}");
        }
        let mut plan = json!({"steps": [{"id": "u", "tool": "get_user", "arguments": {"name": "Alice"}}],
                              "answer": "Alice lives in $ref:u.city."});
        assert!(!forget_unused_answer(
            &mut plan,
            "What is the weather like where Alice lives?"
        ));
        // Asked for a judgement, the same answer is a guess: the model replies from the results.
        assert!(forget_unused_answer(
            &mut plan,
            "Is Alice in the research team? Answer yes or no."
        ));
        assert_eq!(plan["answer"], Value::Null);
    }
}
