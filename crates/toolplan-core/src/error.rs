//! Errors of the core: plan problems found before anything runs, tool errors, registry errors.

use std::fmt;
use std::time::Duration;

/// One thing wrong with a plan. Validation collects every problem, not just the first.
///
/// Steps are named by id; a step without a usable id is named by its position (`#0` is the first).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    /// The plan text does not parse as JSON.
    #[error("the plan is not valid JSON: {0}")]
    NotJson(String),
    /// The plan is larger than the configured limit.
    #[error("the plan is {size} bytes, more than the limit of {limit} bytes")]
    PlanTooLarge {
        /// Size of the plan text.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The plan is not a JSON object, or a field of it has the wrong type.
    #[error("{what} must be {expected}, found {found}")]
    WrongType {
        /// What has the wrong type (`the plan`, `"steps"`, `step 'a' field "tool"` …).
        what: String,
        /// What it must be.
        expected: &'static str,
        /// The JSON type found.
        found: &'static str,
    },
    /// A required field is missing.
    #[error("{what} has no \"{field}\"")]
    MissingField {
        /// What lacks the field.
        what: String,
        /// The missing field.
        field: &'static str,
    },
    /// A field that the format does not know.
    #[error("{what} has an unknown field \"{field}\" (known: {known})")]
    UnknownField {
        /// Where the field is.
        what: String,
        /// The unknown field.
        field: String,
        /// The fields that are allowed there.
        known: &'static str,
    },
    /// The plan has no steps.
    #[error("the plan is empty: it has no steps")]
    EmptyPlan,
    /// The plan has more steps than allowed.
    #[error("the plan has {count} steps, more than the limit of {limit}")]
    TooManySteps {
        /// Number of steps.
        count: usize,
        /// The configured limit.
        limit: usize,
    },
    /// A step id that is empty, too long or has characters outside `[A-Za-z0-9_-]`.
    #[error(
        "step #{index}: id {id:?} is not valid: ids are 1 to {max_len} characters of A-Z, a-z, 0-9, '_' and '-'"
    )]
    InvalidId {
        /// Position of the step.
        index: usize,
        /// The id as written.
        id: String,
        /// The configured maximum id length.
        max_len: usize,
    },
    /// Two steps with the same id.
    #[error("Duplicate step ID: '{id}' (steps #{first} and #{second})")]
    DuplicateId {
        /// The repeated id.
        id: String,
        /// Position of the first step with it.
        first: usize,
        /// Position of the repeat.
        second: usize,
    },
    /// A step that makes the same call as an earlier one (same tool, same arguments) of a tool that
    /// does not say repeats are harmless ([`crate::RepeatedCalls::ShareOrReject`]).
    #[error(
        "step '{step}' makes the same call as step '{first}' ({tool} with the same arguments): make each call once, and refer to its result where it is needed again"
    )]
    RepeatedCall {
        /// The repeat.
        step: String,
        /// The earlier step with the same call.
        first: String,
        /// The tool.
        tool: String,
    },
    /// A step whose tool is empty.
    #[error("step '{step}' has a blank tool name")]
    BlankTool {
        /// The step.
        step: String,
    },
    /// A step that calls a tool the registry does not have.
    #[error("Unknown tool '{tool}' in step '{step}'{}", suggestion_text(.suggestion))]
    UnknownTool {
        /// The step.
        step: String,
        /// The tool name as written.
        tool: String,
        /// The closest registered tool name, if one is close.
        suggestion: Option<String>,
    },
    /// A step that calls `execute_tool_plan`.
    #[error("step '{step}' calls execute_tool_plan: recursive plans are not allowed")]
    RecursivePlan {
        /// The step.
        step: String,
    },
    /// A step whose `arguments` string is not JSON.
    #[error("step '{step}': arguments are not valid JSON: {error}")]
    ArgumentsNotJson {
        /// The step.
        step: String,
        /// The parser's message, with line and column.
        error: String,
    },
    /// A step whose arguments are JSON but not an object.
    #[error("step '{step}': arguments must be a JSON object, found {found}")]
    ArgumentsNotObject {
        /// The step.
        step: String,
        /// The JSON type found.
        found: &'static str,
    },
    /// A step whose arguments are larger than allowed.
    #[error("step '{step}': arguments are {size} bytes, more than the limit of {limit} bytes")]
    ArgumentsTooLarge {
        /// The step.
        step: String,
        /// Size of the arguments.
        size: usize,
        /// The configured limit.
        limit: usize,
    },
    /// A reference to a step that is not in the plan.
    #[error("step '{step}' references unknown step '{target}' in \"{reference}\"")]
    UnknownReference {
        /// The step holding the reference.
        step: String,
        /// The id it names.
        target: String,
        /// The reference as written.
        reference: String,
    },
    /// A reference whose path names a field that the output schema of the step it names does not
    /// have ([`crate::output`]).
    #[error(
        "step '{step}': {reference} names no field of what step '{target}' returns: {has}{}",
        suggestion.as_ref().map(|s| format!("; did you mean {s}?")).unwrap_or_default()
    )]
    UnknownOutputField {
        /// The step holding the reference.
        step: String,
        /// The reference as written.
        reference: String,
        /// The step it names.
        target: String,
        /// What is there instead: `get_user's result has name, city, team`, `'u.address' of
        /// get_user has street, zip`, `'u.city' of get_user has no fields`.
        has: String,
        /// The field closest to the one written, when one is close enough to be a likely typo.
        suggestion: Option<String>,
    },
    /// A whole-value reference whose declared type cannot be the type of the argument it fills.
    #[error("step '{step}': argument '{argument}' must be {expected}, but {reference} is {found}")]
    ReferenceTypeMismatch {
        /// The step holding the reference.
        step: String,
        /// The argument it fills.
        argument: String,
        /// The reference as written.
        reference: String,
        /// The types the output schema gives the value, and whose schema says so: `a string (the
        /// output schema of get_user)`.
        found: String,
        /// The types the argument's schema allows (`a number`).
        expected: String,
    },
    /// An explicit dependency on a step that is not in the plan.
    #[error("step '{step}' depends on unknown step '{target}'")]
    UnknownDependency {
        /// The step holding the dependency.
        step: String,
        /// The id it names.
        target: String,
    },
    /// A dependency cycle; the cycle is printed `a -> b -> a`.
    #[error("Cycle detected in tool plan dependencies: {}", .cycle.join(" -> "))]
    Cycle {
        /// The steps of the cycle, the first repeated at the end.
        cycle: Vec<String>,
    },
    /// Literal arguments that violate the tool's JSON Schema.
    #[error("step '{step}': arguments do not match the schema of tool '{tool}': {detail}")]
    SchemaViolation {
        /// The step.
        step: String,
        /// The tool.
        tool: String,
        /// Every violation, each with its JSON pointer.
        detail: String,
    },
    /// `output_steps` names a step that is not in the plan.
    #[error("\"output_steps\" names unknown step '{id}'")]
    UnknownOutputStep {
        /// The id as written.
        id: String,
    },
    /// A query plan in which every node is a dependency of another node.
    #[error("the query plan has no root: every node is a dependency of another node")]
    NoRoot,
    /// A query plan with more than one node that no other node depends on.
    #[error(
        "the query plan must have exactly one root (the node no other node depends on); found {}: {}",
        .roots.len(), .roots.join(", ")
    )]
    SeveralRoots {
        /// The ids of the roots.
        roots: Vec<String>,
    },
    /// A query-plan node without dependencies and without a tool: nothing can answer it.
    #[error(
        "node {node} has neither dependencies nor a tool_name: a leaf must name the tool that answers it"
    )]
    LeafWithoutTool {
        /// The node id.
        node: String,
    },
    /// A query-plan leaf names a tool that is not registered.
    #[error("node {node} names unknown tool '{tool}'{}", suggestion_text(.suggestion))]
    UnknownNodeTool {
        /// The node id.
        node: String,
        /// The tool as written.
        tool: String,
        /// A registered tool with a similar name.
        suggestion: Option<String>,
    },
    /// A query-plan node depends on a node that is not in the plan.
    #[error("node {node} depends on unknown node {target}")]
    UnknownNode {
        /// The node id.
        node: String,
        /// The missing dependency as written.
        target: String,
    },
    /// A query-plan node names a tool that cannot take one text query.
    #[error("node {node}: tool '{tool}' cannot take a query: {reason}")]
    ToolTakesNoQuery {
        /// The node id.
        node: String,
        /// The tool.
        tool: String,
        /// Why (the tool's parameters).
        reason: String,
    },
}

fn suggestion_text(s: &Option<String>) -> String {
    match s {
        Some(name) => format!(" (did you mean '{name}'?)"),
        None => String::new(),
    }
}

impl Problem {
    /// The id (or `#index`) of the step the problem is about, if it is about one step.
    pub fn step(&self) -> Option<&str> {
        match self {
            Problem::BlankTool { step }
            | Problem::UnknownTool { step, .. }
            | Problem::RecursivePlan { step }
            | Problem::ArgumentsNotJson { step, .. }
            | Problem::ArgumentsNotObject { step, .. }
            | Problem::ArgumentsTooLarge { step, .. }
            | Problem::UnknownReference { step, .. }
            | Problem::UnknownOutputField { step, .. }
            | Problem::ReferenceTypeMismatch { step, .. }
            | Problem::UnknownDependency { step, .. }
            | Problem::SchemaViolation { step, .. }
            | Problem::RepeatedCall { step, .. } => Some(step),
            Problem::LeafWithoutTool { node }
            | Problem::UnknownNodeTool { node, .. }
            | Problem::UnknownNode { node, .. }
            | Problem::ToolTakesNoQuery { node, .. } => Some(node),
            Problem::DuplicateId { id, .. } => Some(id),
            _ => None,
        }
    }
}

/// The name of a JSON value's type, for messages.
pub fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// A plan that was rejected before anything ran, with every problem found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidPlan {
    /// The problems, in the order they were found (parse, then steps in order, then graph).
    pub problems: Vec<Problem>,
}

impl fmt::Display for InvalidPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.problems.as_slice() {
            [one] => write!(f, "invalid plan: {one}"),
            many => {
                write!(f, "invalid plan: {} problems:", many.len())?;
                for p in many {
                    write!(f, "\n- {p}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for InvalidPlan {}

/// Why a tool call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The tool ran and reported a failure.
    #[error("{0}")]
    Failed(String),
    /// The arguments were rejected (schema violation or a check of the tool's own).
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The call did not finish within the step timeout.
    #[error("timed out after {}", crate::error::format_duration(*.0))]
    Timeout(Duration),
    /// The call was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The tool panicked; the panic was contained to its step.
    #[error("the tool panicked: {0}")]
    Panicked(String),
}

impl ToolError {
    /// A failure with a message.
    pub fn failed(message: impl Into<String>) -> Self {
        ToolError::Failed(message.into())
    }

    /// A rejection of the arguments with a message.
    pub fn invalid(message: impl Into<String>) -> Self {
        ToolError::InvalidArguments(message.into())
    }
}

/// Why a tool could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// A tool with that name is registered already.
    #[error("a tool named '{0}' is registered already")]
    DuplicateName(String),
    /// The name is empty or unusable.
    #[error("tool name {0:?} is not valid: names are non-empty and have no whitespace")]
    InvalidName(String),
    /// The tool's parameter schema is not a valid JSON Schema.
    #[error("tool '{tool}' has an invalid parameter schema: {detail}")]
    InvalidSchema {
        /// The tool.
        tool: String,
        /// What is wrong with the schema.
        detail: String,
    },
    /// The tool's output schema ([`crate::Tool::output_schema`]) is not a valid JSON Schema, is
    /// not an object, or nests too deep.
    #[error("tool '{tool}' has an invalid output schema: {detail}")]
    InvalidOutputSchema {
        /// The tool.
        tool: String,
        /// What is wrong with the schema.
        detail: String,
    },
}

/// Formats a duration for messages: `250ms`, `1.5s`, `2m 5s`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 1.0 {
        format!("{}µs", d.as_micros())
    } else if ms < 1000.0 {
        format!("{}ms", d.as_millis())
    } else if d.as_secs() < 60 {
        let s = d.as_secs_f64();
        if (s - s.round()).abs() < 1e-9 {
            format!("{}s", s.round())
        } else {
            format!("{s:.1}s")
        }
    } else {
        format!("{}m {}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_step() {
        let p = Problem::UnknownTool {
            step: "s1".into(),
            tool: "get_wether".into(),
            suggestion: Some("get_weather".into()),
        };
        assert_eq!(
            p.to_string(),
            "Unknown tool 'get_wether' in step 's1' (did you mean 'get_weather'?)"
        );
        assert_eq!(p.step(), Some("s1"));
        let c = Problem::Cycle {
            cycle: vec!["a".into(), "b".into(), "a".into()],
        };
        assert!(c.to_string().ends_with("a -> b -> a"));
    }

    #[test]
    fn invalid_plan_lists_all() {
        let e = InvalidPlan {
            problems: vec![Problem::EmptyPlan, Problem::NotJson("x".into())],
        };
        let s = e.to_string();
        assert!(
            s.contains("2 problems") && s.contains("- the plan is empty"),
            "{s}"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_secs(2)), "2s");
        assert_eq!(format_duration(Duration::from_secs(125)), "2m 5s");
        assert_eq!(format_duration(Duration::from_micros(20)), "20µs");
    }
}
