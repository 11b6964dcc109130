//! What a local model wrote, as a [`ChatResponse`]: the reply parsed into an answer or tool calls
//! ([`parse_reply`]), its stop reason and token usage, and a `raw` answer shaped like the one of an
//! OpenAI-compatible server.

use serde_json::Value;

use super::generate::Generated;
use super::reply::{Reply, ReplyMode, SALVAGED_ARRAYS, drop_repeats, parse_reply, salvage};
use crate::error::LlmError;
use crate::message::{ChatResponse, Message, StopReason, ToolDefinition, Usage};

/// The response of `model` (its name, for errors) for the reply it `generated` in `mode` to a
/// request that offered `tools`; `next_id` gives each tool call its id. A constrained reply that
/// does not parse is an [`LlmError::Decode`].
pub(super) fn response(
    model: &str,
    generated: &Generated,
    mode: ReplyMode,
    tools: &[ToolDefinition],
    mut next_id: impl FnMut() -> String,
) -> Result<ChatResponse, LlmError> {
    let usage = Usage {
        input_tokens: generated.stats.prompt_tokens,
        output_tokens: generated.stats.generated_tokens,
    };
    // Stopped at a repeat: the calls and steps written before it, each once, are the reply.
    let unrepeated = generated
        .repeated
        .then(|| unrepeated(&generated.text))
        .flatten();
    let text = unrepeated.as_deref().unwrap_or(&generated.text);
    let (message, stop) = match parse_reply(text, mode, tools, &mut next_id) {
        Ok(Reply::Answer(text)) => {
            let stop = if generated.hit_limit && mode == ReplyMode::Text {
                StopReason::MaxTokens
            } else {
                StopReason::EndTurn
            };
            (Message::assistant(text, Vec::new()), stop)
        }
        Ok(Reply::ToolCalls { calls, thought }) => {
            (Message::assistant(thought, calls), StopReason::ToolUse)
        }
        // Cut off by the token limit: the calls (and a plan's steps) that were complete are kept,
        // each whole, and the stop says the reply was cut; with none complete, the reply is nothing
        // to act on (handing it back as an answer would pass a fragment of a tool call off as one).
        Err(_) if generated.hit_limit => {
            let kept = salvage(&generated.text, SALVAGED_ARRAYS)
                .and_then(|text| parse_reply(&text, mode, tools, next_id).ok());
            match kept {
                Some(Reply::ToolCalls { calls, thought }) => {
                    (Message::assistant(thought, calls), StopReason::MaxTokens)
                }
                _ => {
                    return Err(LlmError::CutOff {
                        provider: model.to_owned(),
                        tokens: generated.stats.generated_tokens,
                        reply: generated.text.clone(),
                    });
                }
            }
        }
        Err(e) => {
            return Err(LlmError::Decode {
                provider: model.to_owned(),
                message: e,
            });
        }
    };
    let raw = openai_shaped(model, &message, stop, usage);
    Ok(ChatResponse {
        message,
        usage,
        stop,
        raw: Some(raw),
    })
}

/// A reply stopped where it repeated a call or a step: its whole calls and steps, each once, as JSON
/// text.
fn unrepeated(text: &str) -> Option<String> {
    let kept = salvage(text, SALVAGED_ARRAYS)?;
    let mut reply: Value = serde_json::from_str(&kept).ok()?;
    drop_repeats(&mut reply);
    Some(reply.to_string())
}

/// A local reply as an OpenAI-compatible server (llama.cpp's) would send it, so that response
/// filters written for one (`$.choices[0].message.content`) work on the other.
fn openai_shaped(model: &str, message: &Message, stop: StopReason, usage: Usage) -> Value {
    let finish = match stop {
        StopReason::ToolUse => "tool_calls",
        StopReason::MaxTokens => "length",
        _ => "stop",
    };
    let calls: Vec<Value> = message
        .tool_calls
        .iter()
        .map(|c| {
            serde_json::json!({"id": c.id, "type": "function",
                "function": {"name": c.name, "arguments": c.arguments.to_string()}})
        })
        .collect();
    let mut msg = serde_json::json!({"role": "assistant", "content": message.content});
    if !calls.is_empty()
        && let Value::Object(o) = &mut msg
    {
        o.insert("tool_calls".into(), Value::Array(calls));
    }
    serde_json::json!({
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
        "usage": {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
                  "total_tokens": usage.input_tokens + usage.output_tokens},
    })
}
