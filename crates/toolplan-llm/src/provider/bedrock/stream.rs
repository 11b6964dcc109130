//! Streamed Converse (`POST /model/{modelId}/converse-stream`): [`Frame`]s of the AWS event-stream
//! framing, each an event named by its `:event-type` header with a JSON payload.
//!
//! `messageStart` opens the reply; `contentBlockStart` with `start.toolUse {toolUseId, name}`
//! opens a tool call (sent as a [`CallStart`](crate::ReplyDelta::CallStart); calls are numbered
//! among the tool-use blocks only); `contentBlockDelta` adds `delta.text` to the text or
//! `delta.toolUse.input` to a call's arguments (a text block has no start event); `messageStop`
//! brings the stop reason and `metadata` the usage, last. Blocks and deltas of other kinds
//! (reasoning) and event types this crate does not know are skipped. A frame whose
//! `:message-type` is `exception` fails the call as the HTTP status of its `:exception-type` would
//! (`throttlingException` as 429 …), so it is retried only when nothing was sent yet. A stream
//! that ends before `messageStop` was cut: an error.

use serde::Deserialize;
use serde_json::Value;

use super::WireUsage;
use super::frames::{Frame, FrameDecoder};
use crate::error::LlmError;
use crate::message::{ChatResponse, ReplyDelta, Usage};
use crate::provider::http::{self, ReplyStream, StreamedReply};

/// The reading of one streamed Converse answer.
#[derive(Debug)]
pub(crate) struct BedrockStream {
    provider: String,
    frames: FrameDecoder,
    reply: StreamedReply,
    /// The tool calls opened so far, by content block index.
    calls: Vec<(u64, usize)>,
    stop_reason: Option<String>,
    usage: Option<Usage>,
    /// Whether `messageStop` came.
    stopped: bool,
    /// Whether `metadata` came (the last event).
    metadata: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlockStart {
    content_block_index: u64,
    #[serde(default)]
    start: Option<StartKind>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StartKind {
    #[serde(default)]
    tool_use: Option<ToolUseStart>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolUseStart {
    tool_use_id: String,
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlockDelta {
    content_block_index: u64,
    #[serde(default)]
    delta: Option<DeltaKind>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeltaKind {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_use: Option<ToolUseDelta>,
}

#[derive(Deserialize)]
struct ToolUseDelta {
    #[serde(default)]
    input: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageStop {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct Metadata {
    #[serde(default)]
    usage: Option<WireUsage>,
}

/// The HTTP status Bedrock gives exception `kind` outside a stream.
fn exception_status(kind: &str) -> u16 {
    match kind {
        "validationException" => 400,
        "accessDeniedException" => 403,
        "resourceNotFoundException" => 404,
        "modelTimeoutException" => 408,
        "modelStreamErrorException" => 424,
        "throttlingException" | "modelNotReadyException" => 429,
        "serviceUnavailableException" => 503,
        // `internalServerException` and exceptions added later: a server-side error.
        _ => 500,
    }
}

impl BedrockStream {
    /// A reader for `provider` (the label in errors) of frames of at most `max_frame_bytes`.
    pub(super) fn new(provider: &str, max_frame_bytes: usize) -> Self {
        Self {
            provider: provider.to_owned(),
            frames: FrameDecoder::new(provider, max_frame_bytes),
            reply: StreamedReply::default(),
            calls: Vec::new(),
            stop_reason: None,
            usage: None,
            stopped: false,
            metadata: false,
        }
    }

    /// Reads one frame.
    fn frame(&mut self, frame: &Frame, deltas: &mut Vec<ReplyDelta>) -> Result<(), LlmError> {
        match frame.header(":message-type") {
            Some("event") => {}
            Some("exception") => {
                let kind = frame.header(":exception-type").unwrap_or("exception");
                return Err(self.error(exception_status(kind), kind, &frame.payload));
            }
            Some("error") => {
                let code = frame.header(":error-code").unwrap_or("error");
                let message = frame.header(":error-message").unwrap_or_default();
                return Err(self.error(500, code, message.as_bytes()));
            }
            other => {
                return Err(http::bad_answer(
                    &self.provider,
                    format!("an event-stream frame of message type {other:?}"),
                ));
            }
        }
        let payload = frame.payload.as_slice();
        match frame.header(":event-type") {
            Some("contentBlockStart") => {
                let start: BlockStart = http::decode(&self.provider, payload)?;
                if let Some(call) = start.start.and_then(|s| s.tool_use) {
                    let index = self
                        .reply
                        .start_call(Some(call.tool_use_id), call.name, deltas);
                    self.calls
                        .retain(|(block, _)| *block != start.content_block_index);
                    self.calls.push((start.content_block_index, index));
                }
            }
            Some("contentBlockDelta") => {
                let delta: BlockDelta = http::decode(&self.provider, payload)?;
                let call = self
                    .calls
                    .iter()
                    .find(|(block, _)| *block == delta.content_block_index)
                    .map(|(_, call)| *call);
                let Some(delta) = delta.delta else {
                    return Ok(());
                };
                match (delta.text, delta.tool_use, call) {
                    (Some(text), None, None) => self.reply.text(&text, deltas),
                    (None, Some(input), Some(call)) => {
                        self.reply.arguments(call, &input.input, deltas);
                    }
                    (None, None, _) => {}
                    _ => {
                        return Err(http::bad_answer(
                            &self.provider,
                            format!(
                                "a contentBlockDelta does not fit its content block: {}",
                                http::shorten(&String::from_utf8_lossy(payload), 200)
                            ),
                        ));
                    }
                }
            }
            Some("messageStop") => {
                let stop: MessageStop = http::decode(&self.provider, payload)?;
                self.stop_reason = stop.stop_reason;
                self.stopped = true;
            }
            Some("metadata") => {
                let metadata: Metadata = http::decode(&self.provider, payload)?;
                self.usage = metadata.usage.map(Usage::from);
                self.metadata = true;
            }
            // `messageStart`, `contentBlockStop`, and event types added later.
            _ => {}
        }
        Ok(())
    }

    /// An error frame as the [`LlmError::Http`] its status would be.
    fn error(&self, status: u16, kind: &str, payload: &[u8]) -> LlmError {
        let message = serde_json::from_slice::<Value>(payload)
            .ok()
            .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_else(|| String::from_utf8_lossy(payload).into_owned());
        LlmError::Http {
            provider: self.provider.clone(),
            status,
            body: format!(
                "{kind}: {} (an exception in the streamed answer)",
                http::shorten(&message, 500)
            ),
        }
    }
}

impl ReplyStream for BedrockStream {
    fn feed(&mut self, bytes: &[u8], deltas: &mut Vec<ReplyDelta>) -> Result<(), LlmError> {
        let mut frames = Vec::new();
        self.frames.push(bytes, &mut frames)?;
        for frame in &frames {
            if self.metadata {
                break;
            }
            self.frame(frame, deltas)?;
        }
        Ok(())
    }

    fn finished(&self) -> bool {
        self.metadata
    }

    fn finish(self) -> Result<ChatResponse, LlmError> {
        if !self.stopped {
            return Err(http::cut(&self.provider, "`messageStop`"));
        }
        let stop = http::stop_reason(self.stop_reason.as_deref(), self.reply.has_calls());
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

    use super::super::frames::encode;
    use super::*;
    use crate::message::StopReason;

    fn event(kind: &str, payload: Value) -> Vec<u8> {
        encode(
            &[(":event-type", kind), (":message-type", "event")],
            payload.to_string().as_bytes(),
        )
    }

    fn read(frames: &[Vec<u8>]) -> (Vec<ReplyDelta>, Result<ChatResponse, LlmError>) {
        let mut stream = BedrockStream::new("p", 1 << 20);
        let mut deltas = Vec::new();
        for frame in frames {
            if let Err(e) = stream.feed(frame, &mut deltas) {
                return (deltas, Err(e));
            }
        }
        (deltas, stream.finish())
    }

    #[test]
    fn ends_at_message_stop_without_metadata() {
        let (deltas, r) = read(&[
            event("messageStart", json!({"role": "assistant"})),
            event(
                "contentBlockDelta",
                json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "hm"}}}),
            ),
            event(
                "contentBlockDelta",
                json!({"contentBlockIndex": 1, "delta": {"text": "hi"}}),
            ),
            event("messageStop", json!({"stopReason": "guardrail_intervened"})),
        ]);
        assert_eq!(deltas, vec![ReplyDelta::Text("hi".into())]);
        let r = r.unwrap();
        assert_eq!(
            (r.message.content.as_str(), r.stop),
            ("hi", StopReason::Other)
        );
        assert_eq!(r.usage, Usage::default());
    }

    #[test]
    fn exceptions_and_cuts() {
        let throttled = encode(
            &[
                (":exception-type", "throttlingException"),
                (":message-type", "exception"),
            ],
            br#"{"message":"slow down"}"#,
        );
        let (_, r) = read(&[throttled]);
        let e = r.unwrap_err();
        assert!(
            matches!(&e, LlmError::Http { status: 429, body, .. } if body.contains("slow down")),
            "{e:?}"
        );
        let invalid = encode(
            &[
                (":exception-type", "validationException"),
                (":message-type", "exception"),
            ],
            b"not json",
        );
        let (_, r) = read(&[invalid]);
        assert!(!r.unwrap_err().is_retryable());
        let (_, r) = read(&[event("messageStart", json!({}))]);
        assert!(r.unwrap_err().to_string().contains("messageStop"));
        let (_, r) = read(&[encode(&[(":event-type", "messageStop")], b"{}")]);
        assert!(matches!(r, Err(LlmError::Decode { .. })), "{r:?}");
        let (_, r) = read(&[event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 2, "delta": {"toolUse": {"input": "{"}}}),
        )]);
        assert!(matches!(r, Err(LlmError::Decode { .. })), "{r:?}");
        let (_, r) = read(&[encode(
            &[(":event-type", "metadata"), (":message-type", "event")],
            b"{",
        )]);
        assert!(matches!(r, Err(LlmError::Decode { .. })), "{r:?}");
    }
}
