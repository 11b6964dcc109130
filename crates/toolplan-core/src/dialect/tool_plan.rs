//! The tool-plan dialect, toolplan's native plan format (agentle4j's `execute_tool_plan` format):
//!
//! ```json
//! {"steps": [{"id": "a", "tool": "get_weather", "arguments": "{\"location\": \"Tokyo\"}"},
//!            {"id": "b", "tool": "echo", "arguments": {"text": "It is $ref:a.temp degrees"}}],
//!  "output_steps": ["b"]}
//! ```
//!
//! `arguments` is a JSON string (as in agentle4j) or a JSON object; missing or `null` means `{}`.
//! `depends_on` (a list of step ids) is an optional extension for ordering steps that pass no data.
//! `thought` (text) is an optional extension too: the planner's reasoning, written before the steps
//! (it helps small models plan), kept out of execution.
//! The parser never stops at the first problem: it reports every one it can find.

use serde_json::{Map, Value};

use crate::error::{InvalidPlan, Problem, json_type};
use crate::limits::{Limits, json_size};
use crate::plan::{self, DraftPlan, DraftStep, Plan};
use crate::reference::is_valid_id;
use crate::template::Template;
use crate::tool::ToolRegistry;

const PLAN_FIELDS: &str = "\"steps\", \"output_steps\", \"thought\"";
const STEP_FIELDS: &str = "\"id\", \"tool\", \"arguments\", \"depends_on\"";

/// Parses and validates plan text against a registry.
pub fn compile(text: &str, tools: &ToolRegistry, limits: &Limits) -> Result<Plan, InvalidPlan> {
    let (draft, problems) = parse_str(text, limits);
    plan::validate(
        draft,
        problems,
        tools,
        limits.repeated_calls,
        limits.written_order,
    )
}

/// Parses and validates a plan already in JSON form.
pub fn compile_value(
    value: Value,
    tools: &ToolRegistry,
    limits: &Limits,
) -> Result<Plan, InvalidPlan> {
    super::compile_value(&ToolPlan, value, tools, limits).map(|(plan, ())| plan)
}

/// The native plan format as a [`Dialect`](super::Dialect): every plan drafts, problems or not.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolPlan;

impl super::Dialect for ToolPlan {
    type Extra = ();

    fn draft(
        &self,
        value: Value,
        _tools: &ToolRegistry,
        limits: &Limits,
        problems: &mut Vec<Problem>,
    ) -> Option<(DraftPlan, ())> {
        let (draft, found) = parse_value(value, limits);
        problems.extend(found);
        Some((draft, ()))
    }

    fn list_key(&self) -> &'static str {
        "steps"
    }

    fn draft_prefix(
        &self,
        items: Vec<Value>,
        _tools: &ToolRegistry,
        limits: &Limits,
    ) -> (DraftPlan, Vec<Problem>) {
        let mut top = Map::new();
        top.insert("steps".to_owned(), Value::Array(items));
        parse_value(Value::Object(top), limits)
    }
}

/// Parses plan text into a draft and the problems found.
pub fn parse_str(text: &str, limits: &Limits) -> (DraftPlan, Vec<Problem>) {
    match super::parse_text(text, limits) {
        Ok(v) => parse_value(v, limits),
        Err(problem) => (DraftPlan::default(), vec![problem]),
    }
}

/// Parses a plan in JSON form into a draft and the problems found.
pub fn parse_value(value: Value, limits: &Limits) -> (DraftPlan, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut draft = DraftPlan::default();
    let Value::Object(mut top) = value else {
        problems.push(Problem::WrongType {
            what: "the plan".into(),
            expected: "a JSON object with a \"steps\" array",
            found: json_type(&value),
        });
        return (draft, problems);
    };
    for key in top.keys() {
        if !matches!(key.as_str(), "steps" | "output_steps" | "thought") {
            problems.push(Problem::UnknownField {
                what: "the plan".into(),
                field: key.clone(),
                known: PLAN_FIELDS,
            });
        }
    }
    // Kept aside until the steps parse: a plan whose steps are unusable does not also get every output
    // step reported unknown.
    match top.remove("thought") {
        None | Some(Value::Null | Value::String(_)) => {}
        Some(other) => problems.push(Problem::WrongType {
            what: "\"thought\"".into(),
            expected: "text",
            found: json_type(&other),
        }),
    }
    let mut output_steps = Vec::new();
    match top.remove("output_steps") {
        None | Some(Value::Null) => {}
        Some(Value::Array(ids)) => {
            for (i, id) in ids.into_iter().enumerate() {
                match id {
                    Value::String(s) => output_steps.push(s),
                    other => problems.push(Problem::WrongType {
                        what: format!("\"output_steps\"[{i}]"),
                        expected: "a step id string",
                        found: json_type(&other),
                    }),
                }
            }
        }
        Some(other) => problems.push(Problem::WrongType {
            what: "\"output_steps\"".into(),
            expected: "an array of step ids",
            found: json_type(&other),
        }),
    }
    let Some(steps) = super::take_items(&mut top, "steps", "the plan", limits, &mut problems)
    else {
        return (draft, problems);
    };
    let mut first_position: std::collections::HashMap<String, usize> =
        std::collections::HashMap::with_capacity(steps.len());
    draft.steps.reserve(steps.len());
    for (position, raw) in steps.into_iter().enumerate() {
        let Some(step) = parse_step(position, raw, limits, &mut problems) else {
            continue;
        };
        if let Some(&first) = first_position.get(&step.id) {
            problems.push(Problem::DuplicateId {
                id: step.id,
                first,
                second: position,
            });
            continue;
        }
        first_position.insert(step.id.clone(), position);
        draft.steps.push(step);
    }
    draft.output_steps = output_steps;
    (draft, problems)
}

/// Parses one step. Returns `None` when the step has no usable id (it is then left out of the draft;
/// its problems are still reported).
fn parse_step(
    position: usize,
    raw: Value,
    limits: &Limits,
    problems: &mut Vec<Problem>,
) -> Option<DraftStep> {
    let Value::Object(mut fields) = raw else {
        problems.push(Problem::WrongType {
            what: format!("step #{position}"),
            expected: "an object with \"id\", \"tool\" and \"arguments\"",
            found: json_type(&raw),
        });
        return None;
    };
    // Listed before the known fields are taken out, so they are reported in source order.
    let unknown: Vec<String> = fields
        .keys()
        .filter(|k| !matches!(k.as_str(), "id" | "tool" | "arguments" | "depends_on"))
        .cloned()
        .collect();
    let id = match fields.remove("id") {
        Some(Value::String(id)) if is_valid_id(&id) && id.len() <= limits.max_id_len => Some(id),
        Some(Value::String(id)) => {
            problems.push(Problem::InvalidId {
                index: position,
                id,
                max_len: limits.max_id_len,
            });
            None
        }
        None | Some(Value::Null) => {
            problems.push(Problem::MissingField {
                what: format!("step #{position}"),
                field: "id",
            });
            None
        }
        Some(other) => {
            problems.push(Problem::WrongType {
                what: format!("step #{position} field \"id\""),
                expected: "a string",
                found: json_type(&other),
            });
            None
        }
    };
    let label = id.clone().unwrap_or_else(|| format!("#{position}"));
    let what = format!("step '{label}'");

    let tool = match fields.remove("tool") {
        Some(Value::String(t)) => Some(t),
        None | Some(Value::Null) => {
            problems.push(Problem::MissingField {
                what: what.clone(),
                field: "tool",
            });
            None
        }
        Some(other) => {
            problems.push(Problem::WrongType {
                what: format!("{what} field \"tool\""),
                expected: "a string",
                found: json_type(&other),
            });
            None
        }
    };
    let arguments = parse_arguments(&label, fields.remove("arguments"), limits, problems);
    let depends_on = parse_depends_on(&what, fields.remove("depends_on"), problems);
    for field in unknown {
        problems.push(Problem::UnknownField {
            what: what.clone(),
            field,
            known: STEP_FIELDS,
        });
    }
    Some(DraftStep {
        position,
        id: id?,
        tool,
        arguments,
        depends_on,
    })
}

fn parse_arguments(
    step: &str,
    raw: Option<Value>,
    limits: &Limits,
    problems: &mut Vec<Problem>,
) -> Option<Template> {
    let (value, size) = match raw {
        None | Some(Value::Null) => return Some(Template::Literal(Value::Object(Map::new()))),
        Some(Value::String(text)) => {
            if text.len() > limits.max_argument_bytes {
                problems.push(Problem::ArgumentsTooLarge {
                    step: step.to_owned(),
                    size: text.len(),
                    limit: limits.max_argument_bytes,
                });
                return None;
            }
            if text.trim().is_empty() {
                return Some(Template::Literal(Value::Object(Map::new())));
            }
            match serde_json::from_str::<Value>(&text) {
                Ok(v) => (v, text.len()),
                Err(e) => {
                    problems.push(Problem::ArgumentsNotJson {
                        step: step.to_owned(),
                        error: e.to_string(),
                    });
                    return None;
                }
            }
        }
        Some(v @ Value::Object(_)) => {
            let size = json_size(&v);
            (v, size)
        }
        Some(other) => {
            problems.push(Problem::ArgumentsNotObject {
                step: step.to_owned(),
                found: json_type(&other),
            });
            return None;
        }
    };
    if !value.is_object() {
        problems.push(Problem::ArgumentsNotObject {
            step: step.to_owned(),
            found: json_type(&value),
        });
        return None;
    }
    if size > limits.max_argument_bytes {
        problems.push(Problem::ArgumentsTooLarge {
            step: step.to_owned(),
            size,
            limit: limits.max_argument_bytes,
        });
        return None;
    }
    Some(Template::compile(value))
}

fn parse_depends_on(what: &str, raw: Option<Value>, problems: &mut Vec<Problem>) -> Vec<String> {
    match raw {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(ids)) => ids
            .into_iter()
            .filter_map(|v| match v {
                Value::String(s) => Some(s),
                other => {
                    problems.push(Problem::WrongType {
                        what: format!("{what} field \"depends_on\" entry"),
                        expected: "a step id string",
                        found: json_type(&other),
                    });
                    None
                }
            })
            .collect(),
        Some(other) => {
            problems.push(Problem::WrongType {
                what: format!("{what} field \"depends_on\""),
                expected: "an array of step ids",
                found: json_type(&other),
            });
            Vec::new()
        }
    }
}
