//! Streamed chat completions (`"stream": true`): Server-Sent Events whose `data` is a chunk of the
//! completion, ending with `data: [DONE]`.
//!
//! A chunk's `choices[0].delta` carries text (`content`) or pieces of tool calls
//! (`tool_calls[k]`: `index`, on a call's first chunk its `id` and `function.name`, then
//! `function.arguments` text); `finish_reason` comes on a late chunk, and `usage` on a last chunk
//! with no choices (asked for with `stream_options.include_usage`). A call's [`CallStart`] is sent
//! once its name is known (arguments that came before it are sent right after), and calls are
//! numbered in the order they are named. The response is built as an unstreamed answer is:
//! `call_{i}` for a call without an id, the arguments text parsed with [`parse_arguments`], the
//! same stop reasons. A stream without `[DONE]` and without a `finish_reason` was cut: an error.
//!
//! [`CallStart`]: crate::ReplyDelta::CallStart
//! [`parse_arguments`]: crate::message::parse_arguments

use serde::Deserialize;
use serde_json::Value;

use super::{WireUsage, stop_reason};
use crate::error::LlmError;
use crate::message::{ChatResponse, ReplyDelta, Usage};
use crate::provider::http::{self, ReplyStream, SseEvent, SseSplitter, StreamedReply};

/// The reading of one streamed chat completion.
#[derive(Debug)]
pub(crate) struct OpenAiStream {
    provider: String,
    sse: SseSplitter,
    reply: StreamedReply,
    /// The tool calls by the index the server gives them.
    calls: Vec<WireCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    /// Whether `data: [DONE]` came.
    done: bool,
}

/// A tool call as the server numbers it, until and after it is named.
#[derive(Debug)]
struct WireCall {
    /// The server's `index`.
    wire_index: u64,
    /// Its place in the reply, once its name is known.
    index: Option<usize>,
    /// Its id, when it came before the name.
    id: Option<String>,
    /// Arguments text that came before the name.
    pending: String,
    /// The id the server gave it: a later piece without an index but with this id is its.
    given_id: Option<String>,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    index: u64,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<CallDelta>>,
}

#[derive(Deserialize)]
struct CallDelta {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Value>,
}

impl OpenAiStream {
    /// A reader for `provider` (the label in errors) holding at most `max_event_bytes` of one event.
    pub(super) fn new(provider: &str, max_event_bytes: usize) -> Self {
        Self {
            provider: provider.to_owned(),
            sse: SseSplitter::new(provider, max_event_bytes),
            reply: StreamedReply::default(),
            calls: Vec::new(),
            finish_reason: None,
            usage: None,
            done: false,
        }
    }

    /// Reads one event.
    fn event(&mut self, event: &SseEvent, deltas: &mut Vec<ReplyDelta>) -> Result<(), LlmError> {
        if event.data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Chunk = http::decode(&self.provider, event.data.as_bytes())?;
        if let Some(error) = chunk.error {
            return Err(http::bad_answer(
                &self.provider,
                format!("the server reported an error: {error}"),
            ));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.into());
        }
        // Only the first choice is read, as in an unstreamed answer.
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            if let Some(delta) = choice.delta {
                self.delta(delta, deltas)?;
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
        }
        Ok(())
    }

    /// Reads the delta of the first choice.
    fn delta(&mut self, delta: Delta, deltas: &mut Vec<ReplyDelta>) -> Result<(), LlmError> {
        match delta.content {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => self.reply.text(&text, deltas),
            // Content parts: keep the text ones.
            Some(Value::Array(parts)) => {
                for text in parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                {
                    self.reply.text(text, deltas);
                }
            }
            Some(other) => {
                return Err(http::bad_answer(
                    &self.provider,
                    format!("unexpected message content {other}"),
                ));
            }
        }
        for call in delta.tool_calls.unwrap_or_default() {
            self.call(call, deltas);
        }
        Ok(())
    }

    /// Reads a piece of a tool call.
    fn call(&mut self, call: CallDelta, deltas: &mut Vec<ReplyDelta>) {
        let (name, arguments) = match call.function {
            Some(f) => (f.name.filter(|n| !n.is_empty()), f.arguments),
            None => (None, None),
        };
        let arguments = match arguments {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text,
            Some(other) => other.to_string(),
        };
        // A server that leaves out `index` sends each call whole, or starts a new one with its
        // name or id: such a piece belongs to a new call, unless it only repeats the id of one
        // (no name of its own: it continues that call), and any other piece to the last one.
        let wire_index = call.index.unwrap_or_else(|| {
            let same_id = call
                .id
                .as_ref()
                .filter(|id| name.is_none() && !id.is_empty())
                .and_then(|id| self.calls.iter().find(|c| c.given_id.as_ref() == Some(id)));
            if let Some(same) = same_id {
                return same.wire_index;
            }
            let last = self.calls.last().map(|c| c.wire_index);
            match last {
                Some(last) if name.is_none() && call.id.is_none() => last,
                Some(last) => last.saturating_add(1),
                None => 0,
            }
        });
        let slot = match self.calls.iter().position(|c| c.wire_index == wire_index) {
            Some(slot) => slot,
            None => {
                self.calls.push(WireCall {
                    wire_index,
                    index: None,
                    id: None,
                    pending: String::new(),
                    given_id: None,
                });
                self.calls.len() - 1
            }
        };
        let Some(wire) = self.calls.get_mut(slot) else {
            return;
        };
        if wire.given_id.is_none() {
            wire.given_id.clone_from(&call.id);
        }
        match (wire.index, name) {
            (Some(index), _) => {
                if let Some(id) = &call.id {
                    self.reply.set_id(index, id);
                }
                self.reply.arguments(index, &arguments, deltas);
            }
            (None, Some(name)) => {
                let id = call.id.or_else(|| wire.id.take());
                let index = self.reply.start_call(id, name, deltas);
                wire.index = Some(index);
                let pending = std::mem::take(&mut wire.pending);
                self.reply.arguments(index, &pending, deltas);
                self.reply.arguments(index, &arguments, deltas);
            }
            (None, None) => {
                if wire.id.is_none() {
                    wire.id = call.id;
                }
                wire.pending.push_str(&arguments);
            }
        }
    }
}

impl ReplyStream for OpenAiStream {
    fn feed(&mut self, bytes: &[u8], deltas: &mut Vec<ReplyDelta>) -> Result<(), LlmError> {
        let mut events = Vec::new();
        self.sse.push(bytes, &mut events)?;
        for event in &events {
            if self.done {
                break;
            }
            self.event(event, deltas)?;
        }
        Ok(())
    }

    fn finished(&self) -> bool {
        self.done
    }

    fn finish(self) -> Result<ChatResponse, LlmError> {
        if !self.done && self.finish_reason.is_none() {
            return Err(http::cut(
                &self.provider,
                "`data: [DONE]` or a finish_reason",
            ));
        }
        if let Some(unnamed) = self.calls.iter().find(|c| c.index.is_none()) {
            return Err(http::bad_answer(
                &self.provider,
                format!("tool call {} of the stream has no name", unnamed.wire_index),
            ));
        }
        let stop = stop_reason(self.finish_reason.as_deref(), self.reply.has_calls());
        Ok(ChatResponse {
            message: self.reply.into_message(),
            usage: self.usage.unwrap_or_default(),
            stop,
            raw: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::message::StopReason;

    fn read(events: &[&str]) -> (Vec<ReplyDelta>, Result<ChatResponse, LlmError>) {
        let mut stream = OpenAiStream::new("p", 1 << 20);
        let mut deltas = Vec::new();
        for data in events {
            let text = format!("data: {data}\n\n");
            if let Err(e) = stream.feed(text.as_bytes(), &mut deltas) {
                return (deltas, Err(e));
            }
        }
        (deltas, stream.finish())
    }

    #[test]
    fn pieces_without_an_index_that_repeat_an_id_continue_that_call() {
        let (_, r) = read(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{\"a\""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c1","function":{"arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c2","function":{"name":"g","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":""}}]}}]}"#,
            // A call of its own, though the server gives it an id it gave before.
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c1","function":{"name":"h","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ]);
        let calls = r.unwrap().message.tool_calls;
        let got: Vec<(&str, &str, Value)> = calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("c1", "f", json!({"a": 1})),
                ("c2", "g", json!({})),
                ("c1", "h", json!({}))
            ]
        );
    }

    #[test]
    fn arguments_before_the_name_wait_for_it() {
        let (deltas, r) = read(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"id":"c9","function":{"arguments":"{\"a\""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"function":{"name":"f","arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
        ]);
        assert_eq!(
            deltas,
            vec![
                ReplyDelta::CallStart {
                    index: 0,
                    name: "f".into()
                },
                ReplyDelta::Arguments {
                    index: 0,
                    text: "{\"a\"".into()
                },
                ReplyDelta::Arguments {
                    index: 0,
                    text: ":1}".into()
                },
            ]
        );
        let r = r.unwrap();
        assert_eq!(r.message.tool_calls[0].id, "c9");
        assert_eq!(r.message.tool_calls[0].arguments, json!({"a": 1}));
        // As unstreamed: tool calls with `stop` mean tool use.
        assert_eq!(r.stop, StopReason::ToolUse);
    }

    #[test]
    fn calls_without_index_or_id_and_odd_ends() {
        let (deltas, r) = read(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"f","arguments":{"x":1}}},{"function":{"name":"g"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{}"}}]},"finish_reason":"length"}]}"#,
        ]);
        assert_eq!(deltas.len(), 4, "{deltas:?}");
        let r = r.unwrap();
        let ids: Vec<_> = r.message.tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["call_0", "call_1"]);
        assert_eq!(r.message.tool_calls[0].arguments, json!({"x": 1}));
        assert_eq!(r.message.tool_calls[1].arguments, json!({}));
        assert_eq!(r.stop, StopReason::MaxTokens);

        let (_, r) = read(&[r#"{"choices":[{"delta":{"content":"hi"}}]}"#]);
        let e = r.unwrap_err();
        assert!(matches!(e, LlmError::Transport { .. }), "{e:?}");
        assert!(e.to_string().contains("cut"), "{e}");
        let (_, r) = read(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
            "[DONE]",
        ]);
        assert!(r.unwrap_err().to_string().contains("no name"));
        let (_, r) = read(&[r#"{"error":{"message":"boom"}}"#]);
        assert!(r.unwrap_err().to_string().contains("boom"));
        let (_, r) = read(&[r#"{"choices":[{"delta":{"content":"#]);
        assert!(matches!(r, Err(LlmError::Decode { .. })), "{r:?}");
    }
}
