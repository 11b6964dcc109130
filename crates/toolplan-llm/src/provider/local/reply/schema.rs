//! The JSON Schema of the replies a local model may give in each [`ReplyMode`]: `{"answer": …}`,
//! `{"tool_calls": [{"name": <an offered tool>, "arguments": <that tool's schema>}]}`, or either,
//! each starting with a bounded `thought` when the request asks the model to think first. The
//! grammar of constrained decoding is built from it.

use serde_json::{Map, Value, json};

use super::ReplyMode;
use crate::message::ToolDefinition;

/// The longest `thought` a reply may start with ([`ChatRequest::think_first`](crate::ChatRequest::think_first)): a sentence or two,
/// so that thinking costs a few dozen tokens per call.
pub const THOUGHT_MAX_CHARS: u64 = 300;

/// A schema that accepts any JSON object: the fallback for tools whose parameters schema is not a
/// JSON object (or cannot be turned into a grammar).
pub fn any_object_schema() -> Value {
    json!({"type": "object"})
}

/// The parameters schema of a tool as it goes into the reply schema: the tool's own schema when it
/// is a JSON object, otherwise any object.
fn parameters_of(tool: &ToolDefinition) -> Value {
    match &tool.parameters {
        Value::Object(o) if !o.is_empty() => tool.parameters.clone(),
        // `{}` and `null` (no schema given): any arguments object.
        _ => any_object_schema(),
    }
}

/// Whether a schema holds a local `$ref` (`"#/…"`) anywhere.
fn has_local_ref(schema: &Value) -> bool {
    match schema {
        Value::Object(o) => o.iter().any(|(k, v)| {
            (k == "$ref" && v.as_str().is_some_and(|r| r.starts_with('#'))) || has_local_ref(v)
        }),
        Value::Array(a) => a.iter().any(has_local_ref),
        _ => false,
    }
}

/// Rewrites the local `$ref`s of a schema that moves from the document root to `prefix`
/// (`#/$defs/x` inside the tool becomes `#/$defs/tool_0/$defs/x` in the reply schema).
fn rebase_refs(schema: &mut Value, prefix: &str) {
    match schema {
        Value::Object(o) => {
            for (k, v) in o.iter_mut() {
                if k == "$ref" {
                    if let Some(r) = v.as_str().and_then(|r| r.strip_prefix('#')) {
                        *v = Value::String(format!("#{prefix}{r}"));
                    }
                } else {
                    rebase_refs(v, prefix);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|v| rebase_refs(v, prefix)),
        _ => {}
    }
}

/// Limits the `tool_calls` array of a reply schema to one call (for requests with parallel tool calls
/// switched off).
pub fn limit_to_one_call(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::Object(calls)) = map
                .get_mut("properties")
                .and_then(|p| p.get_mut("tool_calls"))
            {
                calls.insert("maxItems".into(), json!(1));
            }
            for v in map.values_mut() {
                limit_to_one_call(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(limit_to_one_call),
        _ => {}
    }
}

/// The JSON Schema of the replies allowed in `mode` (`None` for free text).
///
/// `parameters` may override a tool's parameters schema (by index into `tools`), e.g. with
/// [`any_object_schema`] for a schema that llama.cpp cannot turn into a grammar. With `think`, every
/// form starts with a `thought` of at most [`THOUGHT_MAX_CHARS`] characters
/// ([`ChatRequest::think_first`](crate::ChatRequest::think_first)).
pub fn reply_schema(
    tools: &[ToolDefinition],
    mode: ReplyMode,
    overrides: &[(usize, Value)],
    think: bool,
) -> Option<Value> {
    if !mode.is_constrained() {
        return None;
    }
    let mut defs = Map::new();
    let calls: Vec<Value> = tools
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            let mut params = overrides
                .iter()
                .find(|(j, _)| *j == i)
                .map_or_else(|| parameters_of(tool), |(_, s)| s.clone());
            if has_local_ref(&params) {
                // A schema with `$ref`s into itself keeps them valid by moving to `$defs`, with
                // every reference rebased onto its new place.
                let name = format!("tool_{i}");
                rebase_refs(&mut params, &format!("/$defs/{name}"));
                defs.insert(name.clone(), params);
                params = json!({"$ref": format!("#/$defs/{name}")});
            }
            json!({
                "type": "object",
                "properties": {"name": {"const": tool.name}, "arguments": params},
                "required": ["name", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    // One form of reply: an object with `key` (after the thought, when there is one).
    let form = |key: &str, value: Value| {
        let mut properties = Map::new();
        let mut required = Vec::new();
        if think {
            properties.insert(
                "thought".to_owned(),
                json!({"type": "string", "maxLength": THOUGHT_MAX_CHARS}),
            );
            required.push("thought");
        }
        properties.insert(key.to_owned(), value);
        required.push(key);
        json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        })
    };
    let tool_calls = form(
        "tool_calls",
        json!({"type": "array", "minItems": 1, "items": {"anyOf": calls}}),
    );
    let answer = form("answer", json!({"type": "string"}));
    let mut schema = match mode {
        ReplyMode::ToolsOnly => tool_calls,
        ReplyMode::AnswerOnly => return Some(answer),
        _ => json!({"anyOf": [answer, tool_calls]}),
    };
    if !defs.is_empty()
        && let Value::Object(o) = &mut schema
    {
        o.insert("$defs".to_owned(), Value::Object(defs));
    }
    Some(schema)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{tool, valid, weather_and_calculator};
    use super::*;

    #[test]
    fn free_text_has_no_schema() {
        assert_eq!(
            reply_schema(&weather_and_calculator(), ReplyMode::Text, &[], false),
            None
        );
    }

    #[test]
    fn schema_accepts_answers_and_calls_of_offered_tools_only() {
        let tools = weather_and_calculator();
        let schema =
            reply_schema(&tools, ReplyMode::AnswerOrTools, &[], false).expect("constrained");
        for ok in [
            json!({"answer": "It is sunny."}),
            json!({"tool_calls": [{"name": "get_weather", "arguments": {"location": "Tokyo"}}]}),
            json!({"tool_calls": [
                {"name": "get_weather", "arguments": {"location": "Paris"}},
                {"name": "calculator", "arguments": {"expression": "2+2"}},
            ]}),
        ] {
            assert!(valid(&schema, &ok), "{ok}");
        }
        for bad in [
            json!({"answer": 3}),
            json!({"answer": "x", "extra": 1}),
            json!({"tool_calls": []}),
            json!({"tool_calls": [{"name": "rm_rf", "arguments": {}}]}),
            json!({"tool_calls": [{"name": "get_weather", "arguments": {}}]}),
            json!({"tool_calls": [{"name": "get_weather", "arguments": {"expression": "1"}}]}),
            json!({"tool_calls": [{"name": "calculator", "arguments": {"location": "Tokyo"}}]}),
            json!({"tool_calls": [{"name": "get_weather"}]}),
            json!("just text"),
        ] {
            assert!(!valid(&schema, &bad), "{bad}");
        }
    }

    #[test]
    fn required_allows_only_tool_calls() {
        let tools = weather_and_calculator();
        let schema = reply_schema(&tools, ReplyMode::ToolsOnly, &[], false).expect("constrained");
        assert!(!valid(&schema, &json!({"answer": "no"})));
        assert!(valid(
            &schema,
            &json!({"tool_calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]})
        ));
    }

    #[test]
    fn tools_without_a_schema_take_any_object() {
        let tools = vec![tool("ping", Value::Null), tool("pong", json!({}))];
        let schema = reply_schema(&tools, ReplyMode::ToolsOnly, &[], false).expect("constrained");
        assert!(valid(
            &schema,
            &json!({"tool_calls": [{"name": "ping", "arguments": {"a": [1]}}]})
        ));
        assert!(valid(
            &schema,
            &json!({"tool_calls": [{"name": "pong", "arguments": {}}]})
        ));
        assert!(!valid(
            &schema,
            &json!({"tool_calls": [{"name": "ping", "arguments": 3}]})
        ));
    }

    #[test]
    fn overrides_replace_a_tools_schema() {
        let tools = weather_and_calculator();
        let schema = reply_schema(
            &tools,
            ReplyMode::ToolsOnly,
            &[(0, any_object_schema())],
            false,
        )
        .expect("constrained");
        assert!(valid(
            &schema,
            &json!({"tool_calls": [{"name": "get_weather", "arguments": {"x": 1}}]})
        ));
        assert!(!valid(
            &schema,
            &json!({"tool_calls": [{"name": "calculator", "arguments": {"x": 1}}]})
        ));
    }

    #[test]
    fn local_refs_are_rebased_into_defs() {
        let tools = vec![tool(
            "plan",
            json!({
                "type": "object",
                "properties": {"steps": {"type": "array", "items": {"$ref": "#/$defs/step"}}},
                "required": ["steps"],
                "$defs": {"step": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}},
            }),
        )];
        let schema =
            reply_schema(&tools, ReplyMode::AnswerOrTools, &[], false).expect("constrained");
        assert_eq!(
            schema["$defs"]["tool_0"]["properties"]["steps"]["items"]["$ref"],
            json!("#/$defs/tool_0/$defs/step")
        );
        assert!(valid(
            &schema,
            &json!({"tool_calls": [{"name": "plan", "arguments": {"steps": [{"id": "a"}]}}]})
        ));
        assert!(!valid(
            &schema,
            &json!({"tool_calls": [{"name": "plan", "arguments": {"steps": [{"x": 1}]}}]})
        ));
    }
}
