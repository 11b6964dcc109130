//! Streamed Messages (`"stream": true`): Server-Sent Events, each with a JSON `data` whose `type`
//! says what it is.
//!
//! `message_start` brings the input tokens; `content_block_start` opens a block at an `index`: a
//! `text` block, or a `tool_use` block with its `id` and `name` (sent as a
//! [`CallStart`](crate::ReplyDelta::CallStart); calls are numbered among the `tool_use` blocks
//! only); `content_block_delta` adds a `text_delta` to a text block or an `input_json_delta`'s
//! `partial_json` to a call's arguments; `message_delta` brings the stop reason and the output
//! tokens; `message_stop` ends the stream. `ping`, `content_block_stop`, blocks and deltas of
//! other kinds (thinking) and event types this crate does not know are skipped. An `error` event
//! fails the call as the HTTP status of its error type would (`overloaded_error` as 529,
//! `rate_limit_error` as 429 …), so it is retried only when nothing was sent yet. A stream
//! without `message_stop` was cut: an error.

use serde::Deserialize;

use super::WireUsage;
use crate::error::LlmError;
use crate::message::{ChatResponse, ReplyDelta};
use crate::provider::http::{self, ReplyStream, SseEvent, SseSplitter, StreamedReply};

/// The reading of one streamed Messages answer.
#[derive(Debug)]
pub(crate) struct AnthropicStream {
    provider: String,
    sse: SseSplitter,
    reply: StreamedReply,
    /// The content blocks opened so far, by the index the stream gives them.
    blocks: Vec<(u64, Block)>,
    usage: WireUsage,
    stop_reason: Option<String>,
    /// Whether `message_stop` came.
    stopped: bool,
}

/// What a content block of the stream is.
#[derive(Debug, Clone, Copy)]
enum Block {
    /// Text.
    Text,
    /// Tool call `index` of the reply.
    Call(usize),
    /// A kind this crate does not use (thinking …).
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: u64,
        content_block: WireBlockStart,
    },
    ContentBlockDelta {
        index: u64,
        delta: WireDelta,
    },
    MessageDelta {
        #[serde(default)]
        delta: Option<MessageDelta>,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Error {
        error: WireError,
    },
    /// `ping`, `content_block_stop`, and event types added later.
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlockStart {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

/// The HTTP status Anthropic gives an error of type `kind` outside a stream.
fn error_status(kind: &str) -> u16 {
    match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "overloaded_error" => 529,
        // `api_error` and types added later: a server-side error.
        _ => 500,
    }
}

impl AnthropicStream {
    /// A reader for `provider` (the label in errors) holding at most `max_event_bytes` of one event.
    pub(super) fn new(provider: &str, max_event_bytes: usize) -> Self {
        Self {
            provider: provider.to_owned(),
            sse: SseSplitter::new(provider, max_event_bytes),
            reply: StreamedReply::default(),
            blocks: Vec::new(),
            usage: WireUsage::default(),
            stop_reason: None,
            stopped: false,
        }
    }

    /// Reads one event.
    fn event(&mut self, event: &SseEvent, deltas: &mut Vec<ReplyDelta>) -> Result<(), LlmError> {
        let parsed: Event = http::decode(&self.provider, event.data.as_bytes())?;
        match parsed {
            Event::MessageStart { message } => {
                if let Some(usage) = message.usage {
                    self.usage.update(usage);
                }
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => {
                let block = match content_block {
                    WireBlockStart::Text { text } => {
                        self.reply.text(&text, deltas);
                        Block::Text
                    }
                    WireBlockStart::ToolUse { id, name } => {
                        Block::Call(self.reply.start_call(Some(id), name, deltas))
                    }
                    WireBlockStart::Other => Block::Other,
                };
                self.blocks.retain(|(i, _)| *i != index);
                self.blocks.push((index, block));
            }
            Event::ContentBlockDelta { index, delta } => {
                let block = self
                    .blocks
                    .iter()
                    .find(|(i, _)| *i == index)
                    .map(|(_, b)| *b);
                match (delta, block) {
                    (WireDelta::TextDelta { text }, Some(Block::Text)) => {
                        self.reply.text(&text, deltas);
                    }
                    (WireDelta::InputJsonDelta { partial_json }, Some(Block::Call(call))) => {
                        self.reply.arguments(call, &partial_json, deltas);
                    }
                    (WireDelta::Other, _) | (_, Some(Block::Other)) => {}
                    (_, _) => {
                        return Err(http::bad_answer(
                            &self.provider,
                            format!(
                                "a content_block_delta does not fit content block {index}: {}",
                                http::shorten(&event.data, 200)
                            ),
                        ));
                    }
                }
            }
            Event::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.and_then(|d| d.stop_reason) {
                    self.stop_reason = Some(reason);
                }
                if let Some(usage) = usage {
                    self.usage.update(usage);
                }
            }
            Event::MessageStop => self.stopped = true,
            Event::Error { error } => {
                return Err(LlmError::Http {
                    provider: self.provider.clone(),
                    status: error_status(&error.kind),
                    body: format!(
                        "{}: {} (an error event in the streamed answer)",
                        error.kind,
                        http::shorten(&error.message, 500)
                    ),
                });
            }
            Event::Other => {}
        }
        Ok(())
    }
}

impl ReplyStream for AnthropicStream {
    fn feed(&mut self, bytes: &[u8], deltas: &mut Vec<ReplyDelta>) -> Result<(), LlmError> {
        let mut events = Vec::new();
        self.sse.push(bytes, &mut events)?;
        for event in &events {
            if self.stopped {
                break;
            }
            self.event(event, deltas)?;
        }
        Ok(())
    }

    fn finished(&self) -> bool {
        self.stopped
    }

    fn finish(self) -> Result<ChatResponse, LlmError> {
        if !self.stopped {
            return Err(http::cut(&self.provider, "`message_stop`"));
        }
        let stop = http::stop_reason(self.stop_reason.as_deref(), self.reply.has_calls());
        Ok(ChatResponse {
            message: self.reply.into_message(),
            usage: self.usage.into(),
            stop,
            raw: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::message::{StopReason, Usage};

    fn read(events: &[Value]) -> (Vec<ReplyDelta>, Result<ChatResponse, LlmError>) {
        let mut stream = AnthropicStream::new("p", 1 << 20);
        let mut deltas = Vec::new();
        for data in events {
            let text = format!("event: x\ndata: {data}\n\n");
            if let Err(e) = stream.feed(text.as_bytes(), &mut deltas) {
                return (deltas, Err(e));
            }
        }
        (deltas, stream.finish())
    }

    #[test]
    fn skips_thinking_and_unknown_events_and_counts_calls_apart() {
        let (deltas, r) = read(&[
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hm"}}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {}}}),
            json!({"type": "something_new"}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 7}}),
            json!({"type": "message_stop"}),
        ]);
        assert_eq!(
            deltas,
            vec![ReplyDelta::CallStart {
                index: 0,
                name: "f".into()
            }]
        );
        let r = r.unwrap();
        assert_eq!(r.message.tool_calls[0].arguments, json!({}));
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 15,
                output_tokens: 7
            }
        );
        assert_eq!(r.stop, StopReason::ToolUse);
    }

    #[test]
    fn errors_and_cuts() {
        let (_, r) = read(&[
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ]);
        let e = r.unwrap_err();
        assert!(e.is_retryable());
        assert!(
            matches!(&e, LlmError::Http { status: 529, body, .. } if body.contains("Overloaded")),
            "{e:?}"
        );
        let (_, r) = read(&[
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}),
        ]);
        assert!(!r.unwrap_err().is_retryable());
        let (_, r) = read(&[json!({"type": "message_start", "message": {}})]);
        assert!(r.unwrap_err().to_string().contains("message_stop"));
        let (_, r) = read(&[
            json!({"type": "content_block_delta", "index": 4, "delta": {"type": "input_json_delta", "partial_json": "{"}}),
        ]);
        assert!(matches!(r, Err(LlmError::Decode { .. })), "{r:?}");
    }
}
