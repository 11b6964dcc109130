//! The JSON Schemas of a plan as a model writes it.
//!
//! * The **plan schema** ([`plan_schema`], [`plan_schema_for_tools`]) is what the model is shown: steps
//!   of `{id, tool, arguments}`, each field explained.
//! * The **typed plan schema** ([`typed_plan_schema`]) holds each step's `arguments` to the schema of
//!   the tool the step names, with `"$ref:…"` text allowed wherever a value may come from an earlier
//!   step. It is for providers that constrain decoding by a schema (the local model's grammar): the
//!   model reads the short description, and the grammar keeps every step to its tool's arguments.
//!
//! Both may carry the plan's `answer` field ([`ANSWER_FIELD`]), after `steps`: optional and explained
//! in the plan schema, required (text or null) in the typed one, so that the model decides on it in
//! every plan.

use serde_json::{Map, Value, json};
use toolplan_core::ToolRegistry;

/// The pattern of a whole-value reference (`$ref:step` or `$ref:step.path.0`), as a JSON Schema
/// `pattern`.
pub(crate) const REF_PATTERN: &str = r"^\$ref:[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$";

/// The longest `thought` the typed plan schema lets a model write before its steps.
pub const THOUGHT_MAX_CHARS: u64 = 400;

/// The plan field that holds the reply to the user, with `$ref:` where results go (see
/// [`ExecuteToolPlan::with_answer_field`](crate::ExecuteToolPlan::with_answer_field)).
pub const ANSWER_FIELD: &str = "answer";

/// The plan field where the model says, before the steps, what the plan does and which tools it
/// calls (checked against the steps: [`tools_left_out`](crate::tools_left_out)).
pub const THOUGHT_FIELD: &str = "thought";

/// The longest `answer` the typed plan schema lets a model write.
pub const ANSWER_MAX_CHARS: u64 = 400;

/// The longest condition (`if`) of a choice answer ([`choice_answer_schema`]) the typed plan schema
/// lets a model write.
pub const CONDITION_MAX_CHARS: u64 = 200;

/// The plan schema's `answer` field as a question that asks for a judgement on the results sees it
/// (see [`choice_answer_schema`]; [`judgement_description`](crate::judgement_description) says the
/// same in the description). With `described`, each part says what it is; without, the field is
/// shown bare, as the rest of a plan schema whose description explains it (a compact listing): the
/// description then has the choice, and its example.
pub fn choice_answer_shown(described: bool) -> Value {
    let shown = json!({
        "type": "object",
        "properties": {
            "if": {"type": "string", "description": "A condition on the results: $ref: values compared with == != < > <= >=, joined with and, or, not."},
            "then": {"type": "string", "description": "The reply when the condition holds."},
            "else": {"type": "string", "description": "The reply when it does not."}},
        "required": ["if", "then", "else"],
        "description": "The reply to the user as a choice: a condition on the results, and the reply for each outcome. Written before the results, so never a value of them itself."
    });
    if described {
        shown
    } else {
        strip_annotations(&shown)
    }
}

/// The schema of a **choice answer**: the reply to a question that asks for a judgement on the
/// results (yes or no, which of two), written before the results as a condition on them and a reply
/// for each outcome: `{"if": "$ref:b.temp < $ref:l.temp", "then": "Berlin", "else": "London"}`.
/// The caller evaluates the condition once the results are in (an agent's answer step).
pub fn choice_answer_schema() -> Value {
    let reply = json!({"type": "string", "minLength": 1, "maxLength": ANSWER_MAX_CHARS});
    json!({
        "type": "object",
        "properties": {
            "if": {"type": "string", "minLength": 1, "maxLength": CONDITION_MAX_CHARS},
            "then": reply,
            "else": reply,
        },
        "required": ["if", "then", "else"],
        "additionalProperties": false,
    })
}

/// The pattern of a step id.
const ID_PATTERN: &str = "^[A-Za-z0-9_-]+$";

/// How the `arguments` field of a step is described to an LLM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ArgumentsStyle {
    /// A JSON string or a JSON object (both are accepted whatever the style).
    #[default]
    Either,
    /// A JSON string, exactly as agentle4j's `execute_tool_plan` (for models tuned on that schema).
    JsonString,
}

/// The JSON Schema of a tool plan, as an LLM sees it.
pub fn plan_schema(style: ArgumentsStyle) -> Value {
    plan_schema_with(style, &[], false)
}

/// The JSON Schema of a tool plan over these tools, as an LLM sees it: like [`plan_schema`], with each
/// step's `tool` limited to the tool names (so a grammar built from the schema can only name them).
pub fn plan_schema_for_tools(style: ArgumentsStyle, tools: &[String]) -> Value {
    plan_schema_with(style, tools, false)
}

/// The plan schema: each step's `tool` limited to `tools` unless there are none, and with the optional
/// `answer` field when `answer` is set.
pub(crate) fn plan_schema_with(style: ArgumentsStyle, tools: &[String], answer: bool) -> Value {
    let arguments = match style {
        ArgumentsStyle::Either => json!({
            "type": ["object", "string"],
            "description": "The tool's arguments: a JSON object, or a JSON string of one. String values may be \"$ref:<step_id>\" or \"$ref:<step_id>.<field>\" references."
        }),
        ArgumentsStyle::JsonString => json!({
            "type": "string",
            "description": "JSON string of the tool's arguments. May contain \"$ref:<step_id>\" or \"$ref:<step_id>.<field>\" references."
        }),
    };
    let mut tool = json!({"type": "string", "description": "Name of the tool to call."});
    if !tools.is_empty() {
        tool["enum"] = json!(tools);
    }
    let steps = json!({
        "type": "array",
        "minItems": 1,
        "description": "The tool calls to make.",
        "items": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "pattern": ID_PATTERN, "description": "Unique step id, used by $ref references."},
                "tool": tool,
                "arguments": arguments
            },
            "required": ["id", "tool", "arguments"],
            "additionalProperties": false
        }
    });
    let answer = answer.then(|| {
        json!({"type": ["string", "null"],
               "description": "The reply to the user, with $ref:<step>.<field> where results go, when it is the results put into words (it then goes to the user as it is, and no further call is needed); null when the reply needs a judgement on the results."})
    });
    let output_steps = json!({
        "type": "array",
        "items": {"type": "string"},
        "description": "Ids of the steps whose results you need; all results are returned if omitted."
    });
    let thought = json!({
        "type": "string",
        "description": "Optional, written first: what the answer needs and which tool gives each piece. Not executed."
    });
    plan_object(thought, steps, answer, output_steps, &["steps"])
}

/// The JSON Schema of a tool plan over a registry's plan tools in which each step is one of the
/// tools, with its arguments as a JSON object that matches that tool's schema (any value that is not
/// text may also be a `"$ref:…"` string), and a short `thought` written first (what the answer needs, which
/// tool gives each piece: a small model that says so first plans the lookups it would otherwise
/// skip). Every plan it accepts is one the engine's parser accepts; it is stricter than
/// [`plan_schema`] (no arguments as a JSON string, no `depends_on`), which is what makes it a good
/// grammar for a model's plans.
pub fn typed_plan_schema(tools: &ToolRegistry) -> Value {
    typed_plan_schema_of(
        tools.plan_tools().map(|t| (t.tool().name(), t.schema())),
        false,
        None,
    )
}

/// Most steps a typed plan schema states as its `maxItems`: a grammar built from the schema spells
/// out every allowed count, so a larger limit (the engine's default is 10,000) is left to the
/// validator.
pub const MAX_STATED_STEPS: usize = 100;

/// [`typed_plan_schema`] over some tools, given as (name, arguments schema); with the required
/// `answer` field when `answer` is set, and `maxItems` on the steps when `max_steps` is given and at
/// most [`MAX_STATED_STEPS`].
pub(crate) fn typed_plan_schema_of<'t>(
    tools: impl IntoIterator<Item = (&'t str, &'t Value)>,
    answer: bool,
    max_steps: Option<usize>,
) -> Value {
    let steps: Vec<Value> = tools
        .into_iter()
        .map(|(name, schema)| {
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "pattern": ID_PATTERN},
                    "tool": {"const": name},
                    "arguments": ref_tolerant_arguments(schema),
                },
                "required": ["id", "tool", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    let step = if steps.is_empty() {
        json!({"type": "object"})
    } else {
        json!({"anyOf": steps})
    };
    // Written first: the model says what the answer needs before it writes the steps.
    let thought = json!({"type": "string", "minLength": 1, "maxLength": THOUGHT_MAX_CHARS});
    let mut steps = json!({"type": "array", "minItems": 1, "items": step});
    if let Some(n) = max_steps.filter(|n| (1..=MAX_STATED_STEPS).contains(n)) {
        steps["maxItems"] = json!(n);
    }
    let answer = answer.then(|| {
        json!({"anyOf": [{"type": "string", "minLength": 1, "maxLength": ANSWER_MAX_CHARS},
                         {"type": "null"}]})
    });
    let output_steps = json!({"type": "array", "items": {"type": "string", "pattern": ID_PATTERN}});
    let required: &[&str] = if answer.is_some() {
        &[THOUGHT_FIELD, "steps", ANSWER_FIELD]
    } else {
        &[THOUGHT_FIELD, "steps"]
    };
    plan_object(thought, steps, answer, output_steps, required)
}

/// A plan object schema with its fields in the order a model writes them: `thought`, `steps`, then
/// `answer` (when there is one), then `output_steps`.
fn plan_object(
    thought: Value,
    steps: Value,
    answer: Option<Value>,
    output_steps: Value,
    required: &[&str],
) -> Value {
    let mut properties = Map::with_capacity(4);
    properties.insert(THOUGHT_FIELD.into(), thought);
    properties.insert("steps".into(), steps);
    if let Some(answer) = answer {
        properties.insert(ANSWER_FIELD.into(), answer);
    }
    properties.insert("output_steps".into(), output_steps);
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// A tool's arguments schema as a plan step may fill it: every property that is not already text
/// may also be a `"$ref:…"` string (the reference is resolved, and the arguments checked against the
/// tool's own schema, right before the call). A schema that is not an object with `properties` is
/// any object.
pub(crate) fn ref_tolerant_arguments(schema: &Value) -> Value {
    let Some(Value::Object(props)) = schema.get("properties") else {
        return json!({"type": "object"});
    };
    let mut out = Map::new();
    out.insert("type".into(), json!("object"));
    let props: Map<String, Value> = props
        .iter()
        .map(|(field, prop)| (field.clone(), ref_tolerant_value(prop)))
        .collect();
    out.insert("properties".into(), Value::Object(props));
    if let Some(required) = schema.get("required") {
        out.insert("required".into(), required.clone());
    }
    if let Some(extra) = schema.get("additionalProperties") {
        out.insert("additionalProperties".into(), extra.clone());
    }
    Value::Object(out)
}

/// The properties of a tool's arguments schema that [`ref_tolerant_arguments`] lets be a
/// reference string while their own schema allows no string: in a step, a string there is always a
/// reference.
pub(crate) fn reference_only_fields(schema: &Value) -> Vec<String> {
    let Some(Value::Object(props)) = schema.get("properties") else {
        return Vec::new();
    };
    props
        .iter()
        .filter(|(_, prop)| ref_tolerant_value(prop).get("anyOf").is_some() && !may_be_string(prop))
        .map(|(field, _)| field.clone())
        .collect()
}

/// Whether a property schema may hold a string: a string type (alone or in a list), or a string
/// among its `enum` or `const` values. Conservative: a combinator counts as maybe.
fn may_be_string(prop: &Value) -> bool {
    let typed = match prop.get("type") {
        Some(Value::String(t)) => t == "string",
        Some(Value::Array(types)) => types.iter().any(|t| t == "string"),
        Some(_) => false,
        None => true,
    };
    let listed = prop
        .get("enum")
        .and_then(Value::as_array)
        .is_some_and(|values| values.iter().any(Value::is_string))
        || prop.get("const").is_some_and(Value::is_string);
    let combined = ["anyOf", "oneOf", "allOf", "$ref"]
        .iter()
        .any(|k| prop.get(*k).is_some());
    (typed && prop.get("enum").is_none() && prop.get("const").is_none()) || listed || combined
}

/// One property: text stays text (a reference is text already); a property of any type stays as it
/// is; anything else may also be a reference.
fn ref_tolerant_value(prop: &Value) -> Value {
    let is_text = prop.get("type").and_then(Value::as_str) == Some("string")
        && prop.get("enum").is_none()
        && prop.get("const").is_none()
        && prop.get("pattern").is_none()
        && prop.get("format").is_none();
    let untyped = prop.get("type").is_none()
        && prop.get("enum").is_none()
        && prop.get("const").is_none()
        && prop.get("$ref").is_none()
        && prop.get("anyOf").is_none()
        && prop.get("oneOf").is_none();
    if is_text || untyped {
        return strip_annotations(prop);
    }
    json!({"anyOf": [strip_annotations(prop), {"type": "string", "pattern": REF_PATTERN}]})
}

/// A schema without the keys that only explain (`description`, `title`, `examples`): what a
/// grammar needs, or a model that has the explanation elsewhere (a planner's description).
pub(crate) fn strip_annotations(schema: &Value) -> Value {
    match schema {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "description" | "title" | "examples"))
                .map(|(k, v)| (k.clone(), strip_annotations(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_annotations).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_choice_is_shown_bare_or_described() {
        let bare = choice_answer_shown(false);
        assert_eq!(
            bare,
            json!({"type": "object", "required": ["if", "then", "else"], "properties": {
                "if": {"type": "string"}, "then": {"type": "string"}, "else": {"type": "string"}}})
        );
        let described = choice_answer_shown(true);
        assert!(described["description"].is_string());
        assert!(described["properties"]["if"]["description"].is_string());
        assert_eq!(strip_annotations(&described), bare);
    }

    #[test]
    fn only_arguments_that_hold_no_string_are_reference_only() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer"}, "flag": {"type": "boolean"}, "list": {"type": "array"},
            "text": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]},
            "when": {"type": "string", "format": "date"}, "either": {"type": ["string", "integer"]},
            "level": {"enum": [1, 2]}, "named": {"enum": [1, "two"]}, "any": {},
            "choice": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}});
        assert_eq!(
            reference_only_fields(&schema),
            ["n", "flag", "list", "level"]
        );
        assert!(reference_only_fields(&json!({"type": "object"})).is_empty());
    }

    #[test]
    fn untyped_and_text_properties_are_left_alone() {
        let schema = json!({"type": "object", "properties": {
            "text": {"type": "string", "description": "x"}, "any": {}, "n": {"type": "number"}},
            "required": ["text"], "additionalProperties": false});
        assert_eq!(
            ref_tolerant_arguments(&schema),
            json!({"type": "object", "properties": {
                "text": {"type": "string"}, "any": {},
                "n": {"anyOf": [{"type": "number"}, {"type": "string", "pattern": REF_PATTERN}]}},
                "required": ["text"], "additionalProperties": false})
        );
        assert_eq!(
            ref_tolerant_arguments(&json!({"type": "object"})),
            json!({"type": "object"})
        );
    }
}
