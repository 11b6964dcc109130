//! Plan dialects: each parses one plan format into the [`crate::plan::DraftPlan`] IR, reporting every
//! problem it finds, and leaves graph checks and tool checks to [`crate::plan::validate`]. A new plan
//! format is a new module here that looks like its neighbours.

pub mod query_plan;
pub mod tool_plan;

use serde_json::{Map, Value};

use crate::error::{Problem, json_type};
use crate::limits::Limits;

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
/// within the step limit. Otherwise records the problem and returns `None`.
pub(crate) fn take_items(
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
