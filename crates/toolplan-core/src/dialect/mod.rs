//! Plan dialects: each parses one plan format into the [`DraftPlan`] IR, reporting every problem it
//! finds, and leaves graph checks and tool checks to [`plan::validate`].
//!
//! A plan format provides one thing, a [`Dialect`]: how its JSON becomes a draft of the IR (and what
//! it keeps beside it). [`compile`] and [`compile_value`] do the rest the same way for every format:
//! the size limit, the JSON parse, validation. [`tool_plan`] is the native format; other crates bring
//! their own (toolplan-query's LlamaIndex query plans). [`take_items`] and [`json_type`] are for
//! dialects: the list of steps out of the top-level object, and a value's JSON type in problems.
//! [`incremental`] reads a plan's list of steps while its text is still arriving: each step as
//! soon as it is written whole.

pub mod incremental;
pub mod tool_plan;

use serde_json::{Map, Value};

pub use crate::error::json_type;
use crate::error::{InvalidPlan, Problem};
use crate::limits::Limits;
use crate::plan::{self, DraftPlan, Plan};
use crate::tool::ToolRegistry;

/// A plan format: what it must provide to produce core's plan IR.
pub trait Dialect {
    /// What the format keeps beside the IR (nothing for the native format; the root and the nodes of
    /// a query plan).
    type Extra;

    /// Turns the plan's JSON into a draft of the IR and what the format keeps beside it, adding every
    /// problem it finds to `problems` (unknown tools, steps and cycles are [`plan::validate`]'s to
    /// find). `None` when there is nothing to check further; `problems` then says why.
    fn draft(
        &self,
        value: Value,
        tools: &ToolRegistry,
        limits: &Limits,
        problems: &mut Vec<Problem>,
    ) -> Option<(DraftPlan, Self::Extra)>;

    /// The name of the plan's list of steps (or nodes) in its top-level object: the list a plan
    /// read while it is written follows ([`crate::Engine::run_streamed_dialect`]).
    fn list_key(&self) -> &'static str;

    /// Drafts the items of the plan's list written so far, while the rest is still being written:
    /// as [`draft`](Self::draft) does, with two differences. A step or node named and not yet
    /// written is not a problem (the step that names it waits for the rest of the plan), and checks
    /// that need the whole plan (its root, its output steps) are left to the end. Each item must
    /// become the step at its own place, with the same id, whatever follows it. Every problem
    /// returned is one the rest of the plan cannot undo.
    fn draft_prefix(
        &self,
        items: Vec<Value>,
        tools: &ToolRegistry,
        limits: &Limits,
    ) -> (DraftPlan, Vec<Problem>);
}

/// Parses and validates plan text of a dialect against a registry: the size limit, the JSON parse,
/// then [`compile_value`].
pub fn compile<D: Dialect>(
    dialect: &D,
    text: &str,
    tools: &ToolRegistry,
    limits: &Limits,
) -> Result<(Plan, D::Extra), InvalidPlan> {
    match parse_text(text, limits) {
        Ok(v) => compile_value(dialect, v, tools, limits),
        Err(problem) => Err(InvalidPlan {
            problems: vec![problem],
        }),
    }
}

/// Drafts a plan already in JSON form with the dialect and validates the draft; every problem found
/// by either is in the error.
pub fn compile_value<D: Dialect>(
    dialect: &D,
    value: Value,
    tools: &ToolRegistry,
    limits: &Limits,
) -> Result<(Plan, D::Extra), InvalidPlan> {
    let mut problems = Vec::new();
    let Some((draft, extra)) = dialect.draft(value, tools, limits, &mut problems) else {
        if problems.is_empty() {
            problems.push(Problem::EmptyPlan);
        }
        return Err(InvalidPlan { problems });
    };
    let plan = plan::validate(
        draft,
        problems,
        tools,
        limits.repeated_calls,
        limits.written_order,
    )?;
    Ok((plan, extra))
}

/// Parses plan text into JSON, after checking it is within the size limit.
pub(crate) fn parse_text(text: &str, limits: &Limits) -> Result<Value, Problem> {
    if text.len() > limits.max_plan_bytes {
        return Err(Problem::PlanTooLarge {
            size: text.len(),
            limit: limits.max_plan_bytes,
        });
    }
    serde_json::from_str(text).map_err(|e| Problem::NotJson(e.to_string()))
}

/// Takes a plan's list of steps (or nodes) out of the top-level object: present, an array, not empty,
/// within the step limit. Otherwise records the problem and returns `None`. `field` is the list's
/// name and `plan` names the plan in problems (`the query plan`).
pub fn take_items(
    top: &mut Map<String, Value>,
    field: &'static str,
    plan: &str,
    limits: &Limits,
    problems: &mut Vec<Problem>,
) -> Option<Vec<Value>> {
    let items = match top.remove(field) {
        None | Some(Value::Null) => {
            problems.push(Problem::MissingField {
                what: plan.into(),
                field,
            });
            return None;
        }
        Some(Value::Array(items)) => items,
        Some(other) => {
            problems.push(Problem::WrongType {
                what: format!("\"{field}\""),
                expected: "an array",
                found: json_type(&other),
            });
            return None;
        }
    };
    if items.is_empty() {
        problems.push(Problem::EmptyPlan);
        return None;
    }
    if items.len() > limits.max_steps {
        problems.push(Problem::TooManySteps {
            count: items.len(),
            limit: limits.max_steps,
        });
        return None;
    }
    Some(items)
}
