//! Streamed answers of the HTTP providers, the parts they share: [`BodyReader`] reads an answer's
//! body chunk by chunk under the response-size cap and the cancellation token; [`SseSplitter`]
//! cuts Server-Sent Events out of bytes that arrive cut anywhere (inside a line, inside a UTF-8
//! character), holding at most one event; [`ReplyStream`] is what a provider's event mapping
//! implements (beside its wire format); [`run_streamed`] runs the attempts of a streamed call under
//! the [`CallPolicy`], retrying only while nothing has been handed over.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::endpoint::chain;
use crate::error::LlmError;
use crate::message::{ChatResponse, Message, ReplyDelta, ToolCall, parse_arguments};
use crate::model::CallPolicy;

/// A provider's reading of a streamed answer: it takes the body's bytes as they come, in pieces
/// cut anywhere, hands over the [`ReplyDelta`]s they complete, and at the end builds the
/// [`ChatResponse`] the deltas add up to.
pub(crate) trait ReplyStream: Send {
    /// Takes the next bytes of the body and appends the pieces of the reply they complete to
    /// `deltas`. An event that reports an error, or that cannot be read, fails the call.
    fn feed(&mut self, bytes: &[u8], deltas: &mut Vec<ReplyDelta>) -> Result<(), LlmError>;

    /// Whether the stream's last event has come (nothing more needs to be read).
    fn finished(&self) -> bool;

    /// The body has ended (or [`finished`](Self::finished) said nothing more is needed): the whole
    /// response, or an error saying the stream was cut when its end marker never came.
    fn finish(self) -> Result<ChatResponse, LlmError>;
}

/// The reply of a streamed answer as it grows: each piece added to it is also appended to the
/// deltas to send, so that what is sent adds up to the [`Message`] it becomes.
#[derive(Debug, Default)]
pub(crate) struct StreamedReply {
    text: String,
    calls: Vec<StreamedCall>,
}

/// A tool call of a [`StreamedReply`].
#[derive(Debug)]
struct StreamedCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

impl StreamedReply {
    /// Adds `piece` to the reply's text.
    pub(crate) fn text(&mut self, piece: &str, deltas: &mut Vec<ReplyDelta>) {
        if !piece.is_empty() {
            self.text.push_str(piece);
            deltas.push(ReplyDelta::Text(piece.to_owned()));
        }
    }

    /// Starts the next tool call, of tool `name` with the provider's `id` (when known), and
    /// returns its index.
    pub(crate) fn start_call(
        &mut self,
        id: Option<String>,
        name: String,
        deltas: &mut Vec<ReplyDelta>,
    ) -> usize {
        let index = self.calls.len();
        deltas.push(ReplyDelta::CallStart {
            index,
            name: name.clone(),
        });
        self.calls.push(StreamedCall {
            id: id.filter(|id| !id.is_empty()),
            name,
            arguments: String::new(),
        });
        index
    }

    /// Sets the id of call `index` when it has none yet (some servers send it late).
    pub(crate) fn set_id(&mut self, index: usize, id: &str) {
        if let Some(call) = self.calls.get_mut(index)
            && call.id.is_none()
            && !id.is_empty()
        {
            call.id = Some(id.to_owned());
        }
    }

    /// Adds `piece` to the JSON text of call `index`'s arguments (a call not started is ignored).
    pub(crate) fn arguments(&mut self, index: usize, piece: &str, deltas: &mut Vec<ReplyDelta>) {
        if let Some(call) = self.calls.get_mut(index)
            && !piece.is_empty()
        {
            call.arguments.push_str(piece);
            deltas.push(ReplyDelta::Arguments {
                index,
                text: piece.to_owned(),
            });
        }
    }

    /// Whether the reply has tool calls.
    pub(crate) fn has_calls(&self) -> bool {
        !self.calls.is_empty()
    }

    /// The assistant message: the text, and the calls with their arguments parsed
    /// ([`parse_arguments`]); a call without an id gets `call_{index}`.
    pub(crate) fn into_message(self) -> Message {
        let calls = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(i, c)| ToolCall {
                id: c.id.unwrap_or_else(|| format!("call_{i}")),
                name: c.name,
                arguments: parse_arguments(&c.arguments),
            })
            .collect();
        Message::assistant(self.text, calls)
    }
}

/// A [`LlmError::Transport`] for a stream that ended before its end marker: `marker` names what
/// was missing (`data: [DONE]`, `message_stop`).
pub(crate) fn cut(provider: &str, marker: &str) -> LlmError {
    LlmError::Transport {
        provider: provider.to_owned(),
        message: format!("the streamed answer was cut: it ended before {marker}"),
    }
}

/// Reads a response body chunk by chunk: at most `max_bytes` in all
/// ([`CallPolicy::max_response_bytes`]), and not a moment past the cancellation of the call.
pub(crate) struct BodyReader<'a> {
    provider: &'a str,
    response: reqwest::Response,
    max_bytes: usize,
    read: usize,
    cancel: &'a CancellationToken,
}

impl<'a> BodyReader<'a> {
    /// A reader of `response`'s body for `provider` (the label in errors).
    pub(crate) fn new(
        provider: &'a str,
        response: reqwest::Response,
        max_bytes: usize,
        cancel: &'a CancellationToken,
    ) -> Self {
        Self {
            provider,
            response,
            max_bytes,
            read: 0,
            cancel,
        }
    }

    /// The next chunk of the body, `None` at its end. A chunk that takes the body past the limit
    /// is [`LlmError::TooLarge`]; a broken connection [`LlmError::Transport`]; cancellation while
    /// waiting [`LlmError::Cancelled`].
    pub(crate) async fn next(
        &mut self,
    ) -> Result<Option<impl std::ops::Deref<Target = [u8]> + use<>>, LlmError> {
        let chunk = tokio::select! {
            _ = self.cancel.cancelled() => return Err(LlmError::Cancelled),
            chunk = self.response.chunk() => chunk,
        };
        let chunk = chunk.map_err(|e| LlmError::Transport {
            provider: self.provider.to_owned(),
            message: chain(&e),
        })?;
        let Some(chunk) = chunk else {
            return Ok(None);
        };
        self.read = self.read.saturating_add(chunk.len());
        if self.read > self.max_bytes {
            return Err(LlmError::TooLarge {
                provider: self.provider.to_owned(),
                limit: self.max_bytes,
            });
        }
        Ok(Some(chunk))
    }
}

/// One Server-Sent Event: its `event:` name (empty when it has none) and its `data:` lines
/// joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SseEvent {
    /// The event's name.
    pub(crate) name: String,
    /// Its data.
    pub(crate) data: String,
}

/// Cuts Server-Sent Events out of bytes cut anywhere: lines end at `\n`, `\r\n` or `\r` (also when
/// the two bytes of `\r\n` come in different chunks), a blank line ends an event, `:` lines are
/// comments, fields other than `event` and `data` are ignored, and an event without data is not
/// handed over (as the SSE specification says). It holds at most one event's bytes: an event
/// longer than its limit is [`LlmError::TooLarge`]. A line is decoded as UTF-8 only once it is
/// whole, so a character cut between chunks is read whole.
#[derive(Debug)]
pub(crate) struct SseSplitter {
    provider: String,
    max_event_bytes: usize,
    /// The bytes of the line being read.
    line: Vec<u8>,
    /// Whether the last byte seen ended a line with `\r` (a `\n` right after it ends nothing).
    after_cr: bool,
    /// The event being read.
    event: SseEvent,
    /// Whether it has a `data` field.
    has_data: bool,
}

impl SseSplitter {
    /// A splitter for `provider` (the label in errors) that holds at most `max_event_bytes` of one
    /// event.
    pub(crate) fn new(provider: &str, max_event_bytes: usize) -> Self {
        Self {
            provider: provider.to_owned(),
            max_event_bytes,
            line: Vec::new(),
            after_cr: false,
            event: SseEvent::default(),
            has_data: false,
        }
    }

    /// Takes the next bytes and appends the events they complete to `events`.
    pub(crate) fn push(
        &mut self,
        bytes: &[u8],
        events: &mut Vec<SseEvent>,
    ) -> Result<(), LlmError> {
        let mut rest = bytes;
        if self.after_cr && !rest.is_empty() {
            self.after_cr = false;
            if let Some(after) = rest.strip_prefix(b"\n") {
                rest = after;
            }
        }
        while let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.append(&rest[..end])?;
            self.end_line(events)?;
            let crlf = rest[end] == b'\r' && rest.get(end + 1) == Some(&b'\n');
            if rest[end] == b'\r' && end + 1 == rest.len() {
                self.after_cr = true;
            }
            rest = &rest[end + 1 + usize::from(crlf)..];
        }
        self.append(rest)
    }

    /// Adds bytes to the line being read, within the event's limit.
    fn append(&mut self, bytes: &[u8]) -> Result<(), LlmError> {
        let held = self.line.len() + self.event.name.len() + self.event.data.len();
        if held.saturating_add(bytes.len()) > self.max_event_bytes {
            return Err(LlmError::TooLarge {
                provider: self.provider.clone(),
                limit: self.max_event_bytes,
            });
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    /// Reads the line that just ended: a field of the event, or the blank line that ends it.
    fn end_line(&mut self, events: &mut Vec<SseEvent>) -> Result<(), LlmError> {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            if std::mem::take(&mut self.has_data) {
                events.push(event);
            }
            return Ok(());
        }
        let line = String::from_utf8(line).map_err(|e| LlmError::Decode {
            provider: self.provider.clone(),
            message: format!("a line of the event stream is not UTF-8: {e}"),
        })?;
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_str(), ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event.name),
            "data" => {
                if self.has_data {
                    self.event.data.push('\n');
                }
                self.event.data.push_str(value);
                self.has_data = true;
            }
            _ => {}
        }
        Ok(())
    }
}

/// Runs the attempts of a streamed call as [`CallPolicy::run`] does (each under the policy's
/// timeout, retryable failures retried with backoff, cancellation honoured), except that a failed
/// attempt is retried only while `sent` is false: once a piece of the reply has been handed over,
/// a failure (a broken or cut stream, a timeout, an error event) ends the call, since the pieces
/// sent were the start of a reply that will not come.
pub(crate) async fn run_streamed<F, Fut>(
    policy: &CallPolicy,
    cancel: &CancellationToken,
    sent: &AtomicBool,
    mut attempt: F,
) -> Result<ChatResponse, LlmError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<ChatResponse, LlmError>>,
{
    // The timeout is applied to each attempt here rather than by `run`, so that an attempt that
    // timed out after it sent something is not retried either; `run` keeps the retries, the
    // backoff and the cancellation.
    let retries = CallPolicy {
        timeout: Duration::MAX,
        ..policy.clone()
    };
    retries
        .run(cancel, || {
            let attempt = attempt();
            async move {
                let result = tokio::time::timeout(policy.timeout, attempt)
                    .await
                    .unwrap_or(Err(LlmError::Timeout(policy.timeout)));
                match result {
                    // Not retryable: `run` hands it back as it is.
                    Err(e) if sent.load(Ordering::SeqCst) => Ok(Err(e)),
                    other => other.map(Ok),
                }
            }
        })
        .await
        .flatten()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;

    use super::*;
    use crate::message::{StopReason, Usage};

    /// The events of `bytes` pushed in pieces cut at every `step` bytes.
    fn split(bytes: &[u8], step: usize, max: usize) -> Result<Vec<SseEvent>, LlmError> {
        let mut splitter = SseSplitter::new("p", max);
        let mut events = Vec::new();
        for piece in bytes.chunks(step) {
            splitter.push(piece, &mut events)?;
        }
        Ok(events)
    }

    fn event(name: &str, data: &str) -> SseEvent {
        SseEvent {
            name: name.into(),
            data: data.into(),
        }
    }

    #[test]
    fn splits_events_cut_anywhere() {
        let text = "event: a\ndata: {\"t\": \"22°C ✓\"}\n\n: a comment\r\n\r\nid: 7\ndata:x\ndata:  y\r\n\r\nevent: no-data\n\ndata: [DONE]\r\r";
        let want = vec![
            event("a", "{\"t\": \"22°C ✓\"}"),
            event("", "x\n y"),
            event("", "[DONE]"),
        ];
        for step in 1..=text.len() {
            assert_eq!(
                split(text.as_bytes(), step, 1000).unwrap(),
                want,
                "step {step}"
            );
        }
    }

    #[test]
    fn an_event_without_its_blank_line_is_not_handed_over() {
        assert_eq!(split(b"data: {\"a\"", 3, 100).unwrap(), vec![]);
        assert_eq!(split(b"data: 1\n", 3, 100).unwrap(), vec![]);
        // A `\r` then a `\n` in the next chunk is one line end, not two.
        assert_eq!(
            split(b"data: 1\r\ndata: 2\r\n\r\n", 8, 100).unwrap(),
            vec![event("", "1\n2")]
        );
    }

    #[test]
    fn bounds_one_event_and_checks_utf8() {
        let e = split(&[b'x'; 64], 7, 50).unwrap_err();
        assert_eq!(
            e,
            LlmError::TooLarge {
                provider: "p".into(),
                limit: 50
            }
        );
        // Many events each within the limit are fine.
        let many = "data: 12345\n\n".repeat(100);
        assert_eq!(split(many.as_bytes(), 5, 20).unwrap().len(), 100);
        let e = split(b"data: \xff\xfe\n\n", 2, 100).unwrap_err();
        assert!(matches!(e, LlmError::Decode { .. }), "{e:?}");
    }

    fn response() -> ChatResponse {
        ChatResponse {
            message: Message::assistant("hi", vec![]),
            usage: Usage::default(),
            stop: StopReason::EndTurn,
            raw: None,
        }
    }

    fn fast() -> CallPolicy {
        CallPolicy {
            timeout: Duration::from_secs(1),
            initial_backoff: Duration::from_millis(10),
            ..CallPolicy::default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retries_only_until_something_was_sent() {
        let calls = AtomicU32::new(0);
        let sent = AtomicBool::new(false);
        let transport = || LlmError::Transport {
            provider: "p".into(),
            message: "cut".into(),
        };
        let r = run_streamed(&fast(), &CancellationToken::new(), &sent, || async {
            match calls.fetch_add(1, Ordering::SeqCst) {
                0 => Err(transport()),
                _ => Ok(response()),
            }
        })
        .await;
        assert_eq!(r, Ok(response()));
        assert_eq!(calls.load(Ordering::SeqCst), 2);

        calls.store(0, Ordering::SeqCst);
        let r = run_streamed(&fast(), &CancellationToken::new(), &sent, || async {
            calls.fetch_add(1, Ordering::SeqCst);
            sent.store(true, Ordering::SeqCst);
            Err(transport())
        })
        .await;
        assert_eq!(r, Err(transport()));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_after_something_was_sent_is_final() {
        let calls = AtomicU32::new(0);
        let sent = AtomicBool::new(false);
        let r = run_streamed(&fast(), &CancellationToken::new(), &sent, || async {
            if calls.fetch_add(1, Ordering::SeqCst) > 0 {
                sent.store(true, Ordering::SeqCst);
            }
            std::future::pending().await
        })
        .await;
        assert_eq!(r, Err(LlmError::Timeout(Duration::from_secs(1))));
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "retried once, before anything was sent"
        );
        let cancel = CancellationToken::new();
        cancel.cancel();
        let r = run_streamed(&fast(), &cancel, &sent, std::future::pending).await;
        assert_eq!(r, Err(LlmError::Cancelled));
    }
}
