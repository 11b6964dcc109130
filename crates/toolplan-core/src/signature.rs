//! How the tools look to an LLM that writes plans: one-line signatures for a planner's description
//! (`get_weather(location: string): Current weather …`), and the **typed plan schema**, in which each
//! step's `arguments` must match the schema of the tool the step names.
//!
//! A signature costs a tenth of the tokens of the JSON Schema it is read from, so a planner that lists
//! every tool stays short. The typed schema is for providers that constrain decoding by a schema (the
//! local model's grammar): the model is shown the short description, and the grammar holds every step
//! to its tool's arguments — with `"$ref:…"` text allowed wherever a value may come from an earlier
//! step.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::tool::{RegisteredTool, ToolRegistry};

/// The pattern of a whole-value reference (`$ref:step` or `$ref:step.path.0`), as a JSON Schema
/// `pattern`.
pub const REF_PATTERN: &str = r"^\$ref:[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$";

/// A tool's one-line signature: `name(arg: type, optional?: type): description`.
///
/// Argument types come from each property's `type` (`string`, `integer`, …; a union as
/// `string|null`), `enum` (`"a"|"b"`) or `const`; a property without one is `any`. A schema that is
/// not an object with `properties` gives `name(…)` (any arguments object).
pub fn tool_signature(name: &str, description: &str, schema: &Value) -> String {
    let arguments = match schema.get("properties") {
        Some(Value::Object(props)) => {
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            props
                .iter()
                .map(|(field, prop)| {
                    let optional = if required.contains(&field.as_str()) {
                        ""
                    } else {
                        "?"
                    };
                    format!("{field}{optional}: {}", type_of(prop))
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
        _ => "…".to_owned(),
    };
    let description = description.trim();
    if description.is_empty() {
        format!("{name}({arguments})")
    } else {
        format!("{name}({arguments}): {description}")
    }
}

/// The short type of one property schema.
fn type_of(schema: &Value) -> String {
    if let Some(Value::Array(values)) = schema.get("enum") {
        return values
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("|");
    }
    if let Some(value) = schema.get("const") {
        return value.to_string();
    }
    match schema.get("type") {
        Some(Value::String(t)) if t == "array" => match schema.get("items") {
            Some(items) if items.is_object() => format!("{}[]", type_of(items)),
            _ => "array".to_owned(),
        },
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|"),
        _ => "any".to_owned(),
    }
}

/// A tool's arguments schema as a plan step may fill it: every property that is not already text
/// may also be a `"$ref:…"` string (the reference is resolved, and the arguments checked against the
/// tool's own schema, right before the call). A schema that is not an object with `properties` is
/// any object.
pub fn ref_tolerant_arguments(schema: &Value) -> Value {
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
pub fn strip_annotations(schema: &Value) -> Value {
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

/// The JSON Schema of a tool plan over `tools` in which each step is one of the tools, with its
/// arguments as a JSON object that matches that tool's schema ([`ref_tolerant_arguments`]), and a
/// short `thought` written first (what the answer needs, which tool gives each piece: a small model
/// that says so first plans the lookups it would otherwise skip). Every plan it accepts is one the
/// engine's parser accepts; it is stricter than [`plan_schema`](crate::plan_schema) (no arguments as
/// a JSON string, no `depends_on`), which is what makes it a good grammar for a model's plans.
pub fn typed_plan_schema(tools: &ToolRegistry) -> Value {
    typed_plan_schema_of(tools.plan_tools())
}

/// [`typed_plan_schema`] over some of a registry's tools.
pub fn typed_plan_schema_of<'t>(tools: impl IntoIterator<Item = &'t Arc<RegisteredTool>>) -> Value {
    let steps: Vec<Value> = tools
        .into_iter()
        .map(|t| {
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "pattern": "^[A-Za-z0-9_-]+$"},
                    "tool": {"const": t.tool().name()},
                    "arguments": ref_tolerant_arguments(t.schema()),
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
    json!({
        "type": "object",
        "properties": {
            // Written first: the model says what the answer needs before it writes the steps.
            "thought": {"type": "string", "minLength": 1, "maxLength": THOUGHT_MAX_CHARS},
            "steps": {"type": "array", "minItems": 1, "items": step},
            "output_steps": {"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z0-9_-]+$"}},
        },
        "required": ["thought", "steps"],
        "additionalProperties": false,
    })
}

/// The longest `thought` the typed plan schema lets a model write before its steps.
pub const THOUGHT_MAX_CHARS: u64 = 400;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo;
    use crate::engine::Engine;

    #[test]
    fn signatures_show_names_types_and_optional_fields() {
        let schema = json!({"type": "object", "properties": {
            "location": {"type": "string", "description": "City."},
            "days": {"type": "integer"},
            "units": {"enum": ["metric", "imperial"]},
            "tags": {"type": "array", "items": {"type": "string"}},
            "extra": {},
            "maybe": {"type": ["string", "null"]}},
            "required": ["location"]});
        assert_eq!(
            tool_signature("forecast", " Weather ahead. ", &schema),
            r#"forecast(location: string, days?: integer, units?: "metric"|"imperial", tags?: string[], extra?: any, maybe?: string|null): Weather ahead."#
        );
        assert_eq!(tool_signature("ping", "", &json!({})), "ping(…)");
        assert_eq!(
            tool_signature(
                "noop",
                "Nothing.",
                &json!({"type": "object", "properties": {}})
            ),
            "noop(): Nothing."
        );
    }

    fn valid(schema: &Value, instance: &Value) -> bool {
        jsonschema::validator_for(schema)
            .expect("a valid JSON Schema")
            .is_valid(instance)
    }

    #[test]
    fn typed_schema_holds_each_step_to_its_tool() {
        let schema = typed_plan_schema(&demo::registry());
        for ok in [
            json!({"thought": "t", "steps": [{"id": "a", "tool": "get_weather", "arguments": {"location": "Tokyo"}}]}),
            json!({"thought": "Weather, then twice its temperature.", "steps": [
                {"id": "a", "tool": "get_weather", "arguments": {"location": "Tokyo"}},
                {"id": "b", "tool": "calculator", "arguments": {"expression": "$ref:a.temp * 2"}},
                {"id": "c", "tool": "sleep", "arguments": {"ms": "$ref:b", "value": "$ref:a"}}],
             "output_steps": ["b", "c"]}),
        ] {
            assert!(valid(&schema, &ok), "{ok}");
        }
        for bad in [
            json!({"steps": [{"id": "a", "tool": "get_weather", "arguments": {"location": "Tokyo"}}]}),
            json!({"thought": "t", "steps": []}),
            json!({"thought": "t", "steps": [{"id": "a", "tool": "get_weather", "arguments": {"city": "Tokyo"}}]}),
            json!({"thought": "t", "steps": [{"id": "a", "tool": "get_weather", "arguments": "{\"location\": \"Tokyo\"}"}]}),
            json!({"thought": "t", "steps": [{"id": "a", "tool": "nope", "arguments": {}}]}),
            json!({"thought": "t", "steps": [{"id": "a b", "tool": "echo", "arguments": {"text": 1}}]}),
            json!({"thought": "t", "steps": [{"id": "c", "tool": "sleep", "arguments": {"ms": "soon"}}]}),
            json!({"thought": "t", "steps": [{"id": "c", "tool": "execute_tool_plan", "arguments": {"steps": []}}]}),
        ] {
            assert!(!valid(&schema, &bad), "{bad}");
        }
    }

    #[test]
    fn every_plan_the_typed_schema_accepts_compiles() {
        let engine = Engine::new(Arc::new(demo::registry()));
        let plan = json!({"thought": "Oslo's weather, then arithmetic.", "steps": [
            {"id": "a", "tool": "get_weather", "arguments": {"location": "Oslo"}},
            {"id": "b", "tool": "calculator", "arguments": {"expression": "$ref:a.temp + 1"}},
            {"id": "c", "tool": "sleep", "arguments": {"ms": "$ref:b", "value": "$ref:a.city"}}],
            "output_steps": ["c"]});
        assert!(valid(&typed_plan_schema(engine.tools()), &plan));
        assert!(engine.compile_value(plan).is_ok());
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
