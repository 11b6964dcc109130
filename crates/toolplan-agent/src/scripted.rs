//! A scripted chat model, for tests only (feature `test-util`): it replays prepared replies in order
//! and keeps every request it was sent, so tests can assert what the agent asked.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolplan_llm::{
    ChatModel, ChatRequest, ChatResponse, LlmError, Message, ReplyDelta, ReplySink, StopReason,
    ToolCall, Usage,
};

/// Replays replies in order; fails when it runs out.
#[derive(Default)]
pub struct ScriptedModel {
    replies: Mutex<VecDeque<Result<ChatResponse, LlmError>>>,
    requests: Mutex<Vec<ChatRequest>>,
    /// How long each token of a reply takes to write ([`writing_at`](Self::writing_at)).
    per_token: Option<Duration>,
}

impl ScriptedModel {
    /// A model that will give these replies, in order.
    pub fn new(replies: impl IntoIterator<Item = ChatResponse>) -> Self {
        Self::with_errors(replies.into_iter().map(Ok))
    }

    /// A model that will give these replies or fail with these errors, in order.
    pub fn with_errors(replies: impl IntoIterator<Item = Result<ChatResponse, LlmError>>) -> Self {
        Self {
            replies: Mutex::new(replies.into_iter().collect()),
            requests: Mutex::new(Vec::new()),
            per_token: None,
        }
    }

    /// Writes each reply at `tokens_per_second`, a token being [`TOKEN_BYTES`] bytes of its text
    /// and its calls' arguments: `chat` returns when the whole reply is written, `chat_streamed`
    /// hands over each token when it is. A model of known speed, for measuring what streaming
    /// saves without a model's noise.
    pub fn writing_at(mut self, tokens_per_second: f64) -> Self {
        self.per_token =
            (tokens_per_second > 0.0).then(|| Duration::from_secs_f64(1.0 / tokens_per_second));
        self
    }

    /// The error of a reply cut off at the output-token limit (`tokens`) before any call in it was
    /// whole, as the local model reports it.
    pub fn cut_off(tokens: u64, reply: &str) -> LlmError {
        LlmError::CutOff {
            provider: "scripted".into(),
            tokens,
            reply: reply.into(),
        }
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// A text answer. Usage counts one input token per 4 bytes of the request's messages.
    pub fn answer(text: &str) -> ChatResponse {
        ChatResponse {
            message: Message::assistant(text, Vec::new()),
            usage: Usage::default(),
            stop: StopReason::EndTurn,
            raw: None,
        }
    }

    /// A reply calling these tools: `(name, arguments)`, with ids `call_0`, `call_1`, ….
    pub fn calls(calls: &[(&str, Value)]) -> ChatResponse {
        let tool_calls = calls
            .iter()
            .enumerate()
            .map(|(i, (name, arguments))| ToolCall {
                id: format!("call_{i}"),
                name: (*name).to_owned(),
                arguments: arguments.clone(),
            })
            .collect();
        ChatResponse {
            message: Message::assistant("", tool_calls),
            usage: Usage::default(),
            stop: StopReason::ToolUse,
            raw: None,
        }
    }
}

fn approx_tokens(request: &ChatRequest) -> u64 {
    let text: usize = request
        .messages
        .iter()
        .map(|m| {
            m.content.len()
                + m.tool_calls
                    .iter()
                    .map(|c| c.arguments.to_string().len())
                    .sum::<usize>()
        })
        .sum();
    let tools: usize = request
        .tools
        .iter()
        .map(|t| t.description.len() + t.parameters.to_string().len())
        .sum();
    ((text + tools) / 4) as u64
}

#[async_trait]
impl ChatModel for ScriptedModel {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        let reply = self.next_reply(request, cancel)?;
        if let Some(per_token) = self.per_token {
            let tokens = pieces(&reply.message).count() as u32;
            wait(per_token * tokens, cancel).await?;
        }
        Ok(reply)
    }

    async fn chat_streamed(
        &self,
        request: &ChatRequest,
        sink: &ReplySink,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        let reply = self.next_reply(request, cancel)?;
        let Some(per_token) = self.per_token else {
            ReplyDelta::send_whole(&reply.message, sink);
            return Ok(reply);
        };
        for piece in pieces(&reply.message) {
            wait(per_token, cancel).await?;
            let _ = sink.send(piece);
        }
        Ok(reply)
    }
}

/// How many bytes of a reply [`ScriptedModel::writing_at`] counts as one token.
pub const TOKEN_BYTES: usize = 4;

/// The pieces of a reply a token at a time: its text, then each call's name (with its first
/// token) and arguments.
fn pieces(message: &Message) -> impl Iterator<Item = ReplyDelta> + '_ {
    let chunks = |text: String| {
        let mut pieces = Vec::new();
        let mut piece = String::new();
        for c in text.chars() {
            piece.push(c);
            if piece.len() >= TOKEN_BYTES {
                pieces.push(std::mem::take(&mut piece));
            }
        }
        if !piece.is_empty() {
            pieces.push(piece);
        }
        pieces
    };
    let text = chunks(message.content.clone())
        .into_iter()
        .map(ReplyDelta::Text);
    let calls = message
        .tool_calls
        .iter()
        .enumerate()
        .flat_map(move |(index, call)| {
            let start = ReplyDelta::CallStart {
                index,
                name: call.name.clone(),
            };
            std::iter::once(start).chain(
                chunks(call.arguments.to_string())
                    .into_iter()
                    .map(move |text| ReplyDelta::Arguments { index, text }),
            )
        });
    text.chain(calls)
}

/// Waits `time`, or fails when `cancel` fires first.
async fn wait(time: Duration, cancel: &CancellationToken) -> Result<(), LlmError> {
    tokio::select! {
        _ = cancel.cancelled() => Err(LlmError::Cancelled),
        _ = tokio::time::sleep(time) => Ok(()),
    }
}

impl ScriptedModel {
    /// The next reply, with its usage filled in when the script gave none; the request is kept.
    fn next_reply(
        &self,
        request: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        if cancel.is_cancelled() {
            return Err(LlmError::Cancelled);
        }
        if let Ok(mut r) = self.requests.lock() {
            r.push(request.clone());
        }
        let mut reply = self
            .replies
            .lock()
            .ok()
            .and_then(|mut q| q.pop_front())
            .ok_or_else(|| LlmError::Local("the scripted model has no more replies".into()))??;
        if reply.usage == Usage::default() {
            reply.usage = Usage {
                input_tokens: approx_tokens(request),
                output_tokens: (reply.message.content.len()
                    + reply
                        .message
                        .tool_calls
                        .iter()
                        .map(|c| c.arguments.to_string().len())
                        .sum::<usize>()) as u64
                    / 4,
            };
        }
        Ok(reply)
    }
}
