//! The pieces of the message mapping that several wire formats have in common (tool schemas, tool
//! call arguments, role-alternating messages of content blocks, stop reasons), and decoding a JSON
//! answer into a provider's response type.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::endpoint::shorten;
use crate::error::LlmError;
use crate::message::{StopReason, ToolCall};

/// Decodes a JSON answer into the provider's response type.
pub(crate) fn decode<T: DeserializeOwned>(provider: &str, body: &[u8]) -> Result<T, LlmError> {
    serde_json::from_slice(body).map_err(|e| LlmError::Decode {
        provider: provider.to_owned(),
        message: format!(
            "{e} (body: {})",
            shorten(&String::from_utf8_lossy(body), 500)
        ),
    })
}

/// A [`LlmError::Decode`] for an answer that parsed but does not make sense.
pub(crate) fn bad_answer(provider: &str, message: impl Into<String>) -> LlmError {
    LlmError::Decode {
        provider: provider.to_owned(),
        message: message.into(),
    }
}

/// A tool's parameter schema; a missing schema becomes the schema of an empty object (providers
/// that require one reject `null`).
pub(crate) fn parameters_schema(parameters: &Value) -> Value {
    match parameters {
        Value::Null => json!({"type": "object", "properties": {}}),
        other => other.clone(),
    }
}

/// A tool call's arguments as a JSON object, for providers whose wire format requires one.
/// Arguments that are not an object (text the model sent that was not JSON) are wrapped as
/// `{"arguments": …}` so nothing is lost.
pub(crate) fn arguments_object(call: &ToolCall) -> Value {
    match &call.arguments {
        Value::Object(_) => call.arguments.clone(),
        Value::Null => Value::Object(Map::new()),
        other => json!({ "arguments": other }),
    }
}

/// Messages of a provider that wants strictly alternating roles with content blocks: appends
/// `blocks` as a message of `role`, or to the last message when it has the same role (so the
/// results of several tool calls land in one user message).
pub(crate) fn push_blocks(
    messages: &mut Vec<(&'static str, Vec<Value>)>,
    role: &'static str,
    blocks: Vec<Value>,
) {
    if blocks.is_empty() {
        return;
    }
    match messages.last_mut() {
        Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
        _ => messages.push((role, blocks)),
    }
}

/// The messages [`push_blocks`] gathered, as the wire's `[{role, content}]`.
pub(crate) fn messages(messages: Vec<(&'static str, Vec<Value>)>) -> Value {
    Value::Array(
        messages
            .into_iter()
            .map(|(role, content)| json!({"role": role, "content": content}))
            .collect(),
    )
}

/// The tool call id of a tool message, or an error naming the message.
pub(crate) fn tool_call_id<'a>(
    provider: &str,
    index: usize,
    id: Option<&'a str>,
) -> Result<&'a str, LlmError> {
    match id {
        Some(id) if !id.is_empty() => Ok(id),
        _ => Err(LlmError::InvalidRequest(format!(
            "{provider}: message {index} is a tool result without the id of the tool call it answers"
        ))),
    }
}

/// The stop reason of Anthropic Messages and Bedrock Converse, which name them alike
/// (`end_turn`, `stop_sequence`, `tool_use`, `max_tokens`); without one, tool calls mean tool use.
pub(crate) fn stop_reason(reason: Option<&str>, has_tool_calls: bool) -> StopReason {
    match reason {
        Some("end_turn" | "stop_sequence") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        None if has_tool_calls => StopReason::ToolUse,
        None => StopReason::EndTurn,
        Some(_) => StopReason::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_blocks_of_the_same_role() {
        let mut m = Vec::new();
        push_blocks(&mut m, "user", vec![json!(1)]);
        push_blocks(&mut m, "user", vec![json!(2)]);
        push_blocks(&mut m, "assistant", vec![]);
        push_blocks(&mut m, "assistant", vec![json!(3)]);
        assert_eq!(
            m,
            vec![
                ("user", vec![json!(1), json!(2)]),
                ("assistant", vec![json!(3)])
            ]
        );
    }

    #[test]
    fn wraps_arguments_that_are_not_objects() {
        let call = |arguments| ToolCall {
            id: "c".into(),
            name: "t".into(),
            arguments,
        };
        assert_eq!(arguments_object(&call(json!({"a": 1}))), json!({"a": 1}));
        assert_eq!(arguments_object(&call(Value::Null)), json!({}));
        assert_eq!(
            arguments_object(&call(json!("oops"))),
            json!({"arguments": "oops"})
        );
    }
}
