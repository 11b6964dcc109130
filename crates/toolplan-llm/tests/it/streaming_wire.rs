//! Streamed calls ([`ChatModel::chat_streamed`]) of the three HTTP providers against a loopback
//! server that writes realistic streams in pieces cut at awkward places (inside JSON, inside a
//! UTF-8 character, between the two line ends of an event, inside a binary frame), with a pause
//! before each piece: the deltas and their order, the response they add up to, the requests, and
//! how streams fail (cut, broken, error events, too large, stalled, cancelled, bad CRC).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolplan_llm::message::parse_arguments;
use toolplan_llm::{
    CallPolicy, ChatModel, ChatResponse, LlmError, Message, ReplyDelta, StopReason, ToolCall, Usage,
};

use crate::common::{self, MockServer, Reply, StreamEnd, Streamed, bounded};
use crate::{anthropic_wire, bedrock_wire, openai_wire};

/// The HTTP providers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Provider {
    OpenAi,
    Anthropic,
    Bedrock,
}

use Provider::{Anthropic, Bedrock, OpenAi};

const ALL: [Provider; 3] = [OpenAi, Anthropic, Bedrock];

/// A provider's realistic stream, as the events (or frames) it is made of.
struct Script {
    /// Every event of a whole answer, in order.
    events: Vec<Vec<u8>>,
    /// How many first events send nothing (no text, no call).
    quiet: usize,
    /// How many first events send some deltas, and not the end.
    head: usize,
    /// An event that sends a piece of text (to make a stream long).
    filler: Vec<u8>,
    /// An event whose JSON is malformed.
    malformed: Vec<u8>,
}

impl Provider {
    fn name(self) -> &'static str {
        match self {
            OpenAi => "openai",
            Anthropic => "anthropic",
            Bedrock => "bedrock",
        }
    }

    fn model(self, base: &str, policy: CallPolicy) -> Arc<dyn ChatModel> {
        match self {
            OpenAi => Arc::new(openai_wire::model(base, Some("sk-test"), policy)),
            Anthropic => Arc::new(anthropic_wire::model(base, policy)),
            Bedrock => Arc::new(bedrock_wire::model(base, Some("SESSION-TOKEN"), policy)),
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            OpenAi | Anthropic => "text/event-stream; charset=utf-8",
            Bedrock => "application/vnd.amazon.eventstream",
        }
    }

    fn script(self) -> Script {
        match self {
            OpenAi => openai_script(),
            Anthropic => anthropic_script(),
            Bedrock => bedrock_script(),
        }
    }

    /// The deltas the whole stream sends, and the response it ends with.
    fn expected(self) -> (Vec<ReplyDelta>, ChatResponse) {
        match self {
            OpenAi => openai_expected(),
            Anthropic => anthropic_expected(),
            Bedrock => bedrock_expected(),
        }
    }

    /// `events` written as a stream cut at awkward places, ending with `end`.
    fn reply(self, events: &[Vec<u8>], end: StreamEnd) -> Reply {
        Reply::Stream(Streamed {
            content_type: self.content_type(),
            pieces: awkward(&events.concat()),
            pause: Duration::from_millis(1),
            end,
        })
    }

    /// The whole stream.
    fn whole(self) -> Reply {
        self.reply(&self.script().events, StreamEnd::Complete)
    }
}

/// `bytes` cut every 23 bytes, after the lead byte of every multi-byte UTF-8 character, and
/// between the two bytes of every `\n\n` and `\r\n`.
fn awkward(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut cuts = BTreeSet::new();
    for (i, &b) in bytes.iter().enumerate() {
        let next = bytes.get(i + 1).copied();
        if i % 23 == 0 || b >= 0xC0 || (matches!(b, b'\n' | b'\r') && next == Some(b'\n')) {
            cuts.insert(i + 1);
        }
    }
    let mut pieces = Vec::new();
    let mut start = 0;
    for cut in cuts.into_iter().filter(|&c| c < bytes.len()) {
        pieces.push(bytes[start..cut].to_vec());
        start = cut;
    }
    pieces.push(bytes[start..].to_vec());
    pieces
}

/// Runs a streamed call of the one-question request: its result and the deltas it sent.
async fn stream_call(
    model: &dyn ChatModel,
    cancel: &CancellationToken,
) -> (Result<ChatResponse, LlmError>, Vec<ReplyDelta>) {
    let (sink, mut received) = tokio::sync::mpsc::unbounded_channel();
    let result = bounded(model.chat_streamed(&common::simple_request(), &sink, cancel)).await;
    drop(sink);
    let mut deltas = Vec::new();
    while let Ok(delta) = received.try_recv() {
        deltas.push(delta);
    }
    (result, deltas)
}

/// The deltas add up to the response: the text pieces to its content, each call's start to its
/// name (in order, from 0) and its argument pieces to its arguments.
fn assert_adds_up(deltas: &[ReplyDelta], response: &ChatResponse) {
    let mut text = String::new();
    let mut calls: Vec<(String, String)> = Vec::new();
    for delta in deltas {
        match delta {
            ReplyDelta::Text(piece) => text.push_str(piece),
            ReplyDelta::CallStart { index, name } => {
                assert_eq!(*index, calls.len(), "{deltas:?}");
                calls.push((name.clone(), String::new()));
            }
            ReplyDelta::Arguments { index, text } => calls[*index].1.push_str(text),
        }
    }
    assert_eq!(text, response.message.content);
    assert_eq!(calls.len(), response.message.tool_calls.len());
    for ((name, arguments), call) in calls.iter().zip(&response.message.tool_calls) {
        assert_eq!(name, &call.name);
        assert_eq!(parse_arguments(arguments), call.arguments);
    }
}

fn call(id: &str, location: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "get_weather".into(),
        arguments: json!({ "location": location }),
    }
}

fn text(piece: &str) -> ReplyDelta {
    ReplyDelta::Text(piece.into())
}

fn start(index: usize) -> ReplyDelta {
    ReplyDelta::CallStart {
        index,
        name: "get_weather".into(),
    }
}

fn arguments(index: usize, text: &str) -> ReplyDelta {
    ReplyDelta::Arguments {
        index,
        text: text.into(),
    }
}

fn response(content: &str, calls: Vec<ToolCall>, usage: (u64, u64)) -> ChatResponse {
    ChatResponse {
        message: Message::assistant(content, calls),
        usage: Usage {
            input_tokens: usage.0,
            output_tokens: usage.1,
        },
        stop: StopReason::ToolUse,
        raw: None,
    }
}

// ---------------------------------------------------------------- OpenAI

fn sse_data(data: &Value) -> Vec<u8> {
    format!("data: {data}\n\n").into_bytes()
}

fn openai_chunk(delta: Value, finish_reason: Value) -> Vec<u8> {
    sse_data(&json!({
        "id": "chatcmpl-9xQ", "object": "chat.completion.chunk", "created": 1727000000,
        "model": "gpt-4o-mini-2024-07-18", "system_fingerprint": "fp_0ba0d124f1",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
        "usage": null
    }))
}

fn openai_call(index: u64, id: Option<&str>, arguments: &str) -> Vec<u8> {
    let mut call = json!({"index": index, "function": {"arguments": arguments}});
    if let Some(id) = id {
        call["id"] = json!(id);
        call["type"] = json!("function");
        call["function"]["name"] = json!("get_weather");
    }
    openai_chunk(json!({ "tool_calls": [call] }), Value::Null)
}

fn openai_script() -> Script {
    let events = vec![
        openai_chunk(
            json!({"role": "assistant", "content": "", "refusal": null}),
            Value::Null,
        ),
        openai_chunk(json!({"content": "Checking "}), Value::Null),
        openai_chunk(json!({"content": "22°C ✓ — "}), Value::Null),
        openai_call(0, Some("call_tokyo"), ""),
        openai_call(0, None, "{\"loc"),
        openai_call(0, None, "ation\": \"Tōk"),
        openai_call(0, None, "yō\"}"),
        openai_call(1, Some("call_paris"), ""),
        openai_call(1, None, "{\"location\": \"Paris\"}"),
        openai_chunk(json!({}), json!("tool_calls")),
        sse_data(&json!({
            "id": "chatcmpl-9xQ", "object": "chat.completion.chunk", "created": 1727000000,
            "model": "gpt-4o-mini-2024-07-18", "choices": [],
            "usage": {"prompt_tokens": 82, "completion_tokens": 46, "total_tokens": 128}
        })),
        b"data: [DONE]\n\n".to_vec(),
    ];
    Script {
        events,
        quiet: 1,
        head: 5,
        filler: openai_chunk(json!({"content": "more and more text, "}), Value::Null),
        malformed: b"data: {\"choices\": [{\"index\": 0, \"delta\": \n\n".to_vec(),
    }
}

fn openai_expected() -> (Vec<ReplyDelta>, ChatResponse) {
    let deltas = vec![
        text("Checking "),
        text("22°C ✓ — "),
        start(0),
        arguments(0, "{\"loc"),
        arguments(0, "ation\": \"Tōk"),
        arguments(0, "yō\"}"),
        start(1),
        arguments(1, "{\"location\": \"Paris\"}"),
    ];
    let response = response(
        "Checking 22°C ✓ — ",
        vec![call("call_tokyo", "Tōkyō"), call("call_paris", "Paris")],
        (82, 46),
    );
    (deltas, response)
}

// ---------------------------------------------------------------- Anthropic

/// An Anthropic event, with `\r\n` line ends (which SSE allows).
fn anthropic_event(data: Value) -> Vec<u8> {
    let name = data["type"].as_str().unwrap().to_owned();
    format!("event: {name}\r\ndata: {data}\r\n\r\n").into_bytes()
}

fn anthropic_delta(index: u64, delta: Value) -> Vec<u8> {
    anthropic_event(json!({"type": "content_block_delta", "index": index, "delta": delta}))
}

fn anthropic_tool_start(index: u64, id: &str) -> Vec<u8> {
    anthropic_event(json!({"type": "content_block_start", "index": index,
        "content_block": {"type": "tool_use", "id": id, "name": "get_weather", "input": {}}}))
}

fn anthropic_json(index: u64, partial: &str) -> Vec<u8> {
    anthropic_delta(
        index,
        json!({"type": "input_json_delta", "partial_json": partial}),
    )
}

fn anthropic_stop(index: u64) -> Vec<u8> {
    anthropic_event(json!({"type": "content_block_stop", "index": index}))
}

fn anthropic_script() -> Script {
    let events = vec![
        anthropic_event(json!({"type": "message_start", "message": {
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
            "content": [], "model": "claude-3-5-haiku-20241022", "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": 412, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 8, "output_tokens": 1}}})),
        anthropic_event(json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}})),
        anthropic_event(json!({"type": "ping"})),
        anthropic_delta(0, json!({"type": "text_delta", "text": "I'll look up "})),
        anthropic_delta(0, json!({"type": "text_delta", "text": "東京 and Paris."})),
        anthropic_stop(0),
        anthropic_tool_start(1, "toolu_01A09q90qw90lq917835lq9"),
        anthropic_json(1, ""),
        anthropic_json(1, "{\"location\": \"To"),
        anthropic_json(1, "kyo\"}"),
        anthropic_stop(1),
        anthropic_tool_start(2, "toolu_01B19q90qw90lq917835lq8"),
        anthropic_json(2, "{\"location\":"),
        anthropic_json(2, " \"Paris\"}"),
        anthropic_stop(2),
        anthropic_event(json!({"type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": null},
            "usage": {"output_tokens": 96}})),
        anthropic_event(json!({"type": "message_stop"})),
    ];
    Script {
        events,
        quiet: 3,
        head: 7,
        filler: anthropic_delta(
            0,
            json!({"type": "text_delta", "text": "more and more text, "}),
        ),
        malformed: b"event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\n\n".to_vec(),
    }
}

fn anthropic_expected() -> (Vec<ReplyDelta>, ChatResponse) {
    let deltas = vec![
        text("I'll look up "),
        text("東京 and Paris."),
        start(0),
        arguments(0, "{\"location\": \"To"),
        arguments(0, "kyo\"}"),
        start(1),
        arguments(1, "{\"location\":"),
        arguments(1, " \"Paris\"}"),
    ];
    let response = response(
        "I'll look up 東京 and Paris.",
        vec![
            call("toolu_01A09q90qw90lq917835lq9", "Tokyo"),
            call("toolu_01B19q90qw90lq917835lq8", "Paris"),
        ],
        (420, 96),
    );
    (deltas, response)
}

// ---------------------------------------------------------------- Bedrock

/// The CRC-32 (IEEE) of `bytes`, bit by bit (independent of the crate's table).
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// An event-stream frame with string headers.
fn frame(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut head = Vec::new();
    for (name, value) in headers {
        head.push(u8::try_from(name.len()).unwrap());
        head.extend_from_slice(name.as_bytes());
        head.push(7);
        head.extend_from_slice(&u16::try_from(value.len()).unwrap().to_be_bytes());
        head.extend_from_slice(value.as_bytes());
    }
    let total = u32::try_from(12 + head.len() + payload.len() + 4).unwrap();
    let mut bytes = total.to_be_bytes().to_vec();
    bytes.extend(u32::try_from(head.len()).unwrap().to_be_bytes());
    bytes.extend(crc32(&bytes).to_be_bytes());
    bytes.extend(head);
    bytes.extend_from_slice(payload);
    bytes.extend(crc32(&bytes).to_be_bytes());
    bytes
}

/// A ConverseStream event (with the `p` padding field Bedrock adds).
fn bedrock_event(kind: &str, mut payload: Value) -> Vec<u8> {
    payload["p"] = json!("abcdefghijklmnopqrstuvwxyzABCDEFGH");
    frame(
        &[
            (":event-type", kind),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        payload.to_string().as_bytes(),
    )
}

fn bedrock_text(piece: &str) -> Vec<u8> {
    bedrock_event(
        "contentBlockDelta",
        json!({"contentBlockIndex": 0, "delta": {"text": piece}}),
    )
}

fn bedrock_input(index: u64, piece: &str) -> Vec<u8> {
    bedrock_event(
        "contentBlockDelta",
        json!({"contentBlockIndex": index, "delta": {"toolUse": {"input": piece}}}),
    )
}

fn bedrock_tool_start(index: u64, id: &str) -> Vec<u8> {
    bedrock_event(
        "contentBlockStart",
        json!({"contentBlockIndex": index,
               "start": {"toolUse": {"toolUseId": id, "name": "get_weather"}}}),
    )
}

fn bedrock_stop(index: u64) -> Vec<u8> {
    bedrock_event("contentBlockStop", json!({ "contentBlockIndex": index }))
}

fn bedrock_exception(kind: &str, message: &str) -> Vec<u8> {
    frame(
        &[
            (":exception-type", kind),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        json!({ "message": message }).to_string().as_bytes(),
    )
}

fn bedrock_script() -> Script {
    let events = vec![
        bedrock_event("messageStart", json!({"role": "assistant"})),
        bedrock_text("I'll look up "),
        bedrock_text("Zürich and Paris."),
        bedrock_stop(0),
        bedrock_tool_start(1, "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"),
        bedrock_input(1, "{\"location\": \"Zü"),
        bedrock_input(1, "rich\"}"),
        bedrock_stop(1),
        bedrock_tool_start(2, "tooluse_pQ3bXw8aT0qkLq1yXr7sZg"),
        bedrock_input(2, "{\"location\": \"Paris\"}"),
        bedrock_stop(2),
        bedrock_event("messageStop", json!({"stopReason": "tool_use"})),
        bedrock_event(
            "metadata",
            json!({"usage": {"inputTokens": 410, "outputTokens": 72, "totalTokens": 482},
                   "metrics": {"latencyMs": 1210}}),
        ),
    ];
    Script {
        events,
        quiet: 1,
        head: 5,
        filler: bedrock_text("more and more text, "),
        malformed: frame(
            &[
                (":event-type", "contentBlockDelta"),
                (":message-type", "event"),
            ],
            b"{\"contentBlockIndex\": 0, \"delta\": {",
        ),
    }
}

fn bedrock_expected() -> (Vec<ReplyDelta>, ChatResponse) {
    let deltas = vec![
        text("I'll look up "),
        text("Zürich and Paris."),
        start(0),
        arguments(0, "{\"location\": \"Zü"),
        arguments(0, "rich\"}"),
        start(1),
        arguments(1, "{\"location\": \"Paris\"}"),
    ];
    let response = response(
        "I'll look up Zürich and Paris.",
        vec![
            call("tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "Zürich"),
            call("tooluse_pQ3bXw8aT0qkLq1yXr7sZg", "Paris"),
        ],
        (410, 72),
    );
    (deltas, response)
}

// ---------------------------------------------------------------- whole streams

/// A whole stream, cut at awkward places: the deltas in order, the response they add up to, and
/// the request each provider sends for a stream.
#[tokio::test]
async fn streams_text_and_tool_calls() {
    for provider in ALL {
        let server = MockServer::start(vec![provider.whole()]).await;
        let model = provider.model(&server.base, common::fast_policy(0));
        let (result, deltas) = stream_call(model.as_ref(), &CancellationToken::new()).await;
        let response = result.unwrap_or_else(|e| panic!("{provider:?}: {e}"));
        let (want_deltas, want_response) = provider.expected();
        assert_eq!(deltas, want_deltas, "{provider:?}");
        assert_eq!(response, want_response, "{provider:?}");
        assert_adds_up(&deltas, &response);

        let requests = server.requests();
        assert_eq!(requests.len(), 1);
        let sent = &requests[0];
        assert_eq!(sent.header("content-type"), Some("application/json"));
        let request = common::simple_request();
        let body = sent.json();
        match provider {
            OpenAi => {
                assert_eq!(sent.path, "/v1/chat/completions");
                assert_eq!(sent.header("authorization"), Some("Bearer sk-test"));
                let mut want = openai_wire::model(&server.base, None, common::fast_policy(0))
                    .request_body(&request)
                    .unwrap();
                want["stream"] = json!(true);
                want["stream_options"] = json!({"include_usage": true});
                assert_eq!(body, want);
            }
            Anthropic => {
                assert_eq!(sent.path, "/v1/messages");
                assert_eq!(sent.header("x-api-key"), Some("sk-ant-test"));
                let mut want = anthropic_wire::model(&server.base, common::fast_policy(0))
                    .request_body(&request)
                    .unwrap();
                want["stream"] = json!(true);
                assert_eq!(body, want);
            }
            Bedrock => {
                assert_eq!(
                    sent.path,
                    "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream"
                );
                bedrock_wire::assert_signed(sent, Some("SESSION-TOKEN"));
                let want = bedrock_wire::model(&server.base, None, common::fast_policy(0))
                    .request_body(&request)
                    .unwrap();
                assert_eq!(body, want);
            }
        }
    }
}

/// A server that ignores the request for a stream and answers with one JSON body: read whole,
/// and its reply sent whole.
#[tokio::test]
async fn a_whole_answer_to_a_streamed_call_is_sent_whole() {
    let answer = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "qwen2.5:7b",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "Tokyo is 22°C."}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 6}
    });
    let server = MockServer::start(vec![Reply::Json(200, answer.clone())]).await;
    let model = OpenAi.model(&server.base, common::fast_policy(0));
    let (result, deltas) = stream_call(model.as_ref(), &CancellationToken::new()).await;
    let response = result.unwrap();
    assert_eq!(deltas, vec![text("Tokyo is 22°C.")]);
    assert_eq!(response.stop, StopReason::EndTurn);
    assert_eq!(response.raw, Some(answer));
}

// ---------------------------------------------------------------- cut and broken streams

/// A stream that ends (cleanly, or with a broken connection) after some deltas were sent, before
/// its end marker: an error that says so, and no retry, though the server would answer again.
#[tokio::test]
async fn a_stream_cut_after_data_fails_without_a_retry() {
    for end in [StreamEnd::Complete, StreamEnd::Abort] {
        for provider in ALL {
            let script = provider.script();
            let server = MockServer::start(vec![
                provider.reply(&script.events[..script.head], end),
                provider.whole(),
            ])
            .await;
            let model = provider.model(&server.base, common::fast_policy(3));
            let (result, deltas) = stream_call(model.as_ref(), &CancellationToken::new()).await;
            let e = result.unwrap_err();
            assert!(
                matches!(&e, LlmError::Transport { provider: p, .. } if p.starts_with(provider.name())),
                "{provider:?} {end:?}: {e:?}"
            );
            // A clean end says the stream was cut; a broken connection says what broke.
            assert_eq!(
                e.to_string().contains("cut"),
                end == StreamEnd::Complete,
                "{end:?}: {e}"
            );
            assert!(!deltas.is_empty(), "{provider:?} {end:?}");
            let (want, _) = provider.expected();
            assert_eq!(deltas[..], want[..deltas.len()], "{provider:?} {end:?}");
            assert_eq!(server.requests().len(), 1, "{provider:?} {end:?}: retried");
        }
    }
}

/// A stream cut before it sent anything is retried like a broken connection.
#[tokio::test]
async fn a_stream_cut_before_any_delta_is_retried() {
    for provider in ALL {
        let script = provider.script();
        let server = MockServer::start(vec![
            provider.reply(&script.events[..script.quiet], StreamEnd::Complete),
            provider.whole(),
        ])
        .await;
        let model = provider.model(&server.base, common::fast_policy(2));
        let (result, deltas) = stream_call(model.as_ref(), &CancellationToken::new()).await;
        let (want_deltas, want_response) = provider.expected();
        assert_eq!(result, Ok(want_response), "{provider:?}");
        assert_eq!(deltas, want_deltas, "{provider:?}");
        assert_eq!(server.requests().len(), 2, "{provider:?}");
    }
}

/// An error status before the stream fails as an unstreamed call does: 503 and 429 retried, 400
/// not; an OpenAI-compatible server's 400 is asked once more unstreamed (such a server may refuse
/// only the streamed form), whose own 400 is then the error.
#[tokio::test]
async fn error_statuses_before_the_stream() {
    for provider in ALL {
        let server = MockServer::start(vec![
            Reply::Json(503, json!({"message": "service unavailable"})),
            Reply::Json(429, json!({"message": "slow down"})),
            provider.whole(),
            Reply::Json(400, json!({"message": "bad tool schema"})),
            Reply::Json(400, json!({"message": "bad tool schema"})),
            provider.whole(),
        ])
        .await;
        let model = provider.model(&server.base, common::fast_policy(3));
        let (result, deltas) = stream_call(model.as_ref(), &CancellationToken::new()).await;
        assert_eq!(result, Ok(provider.expected().1), "{provider:?}");
        assert_eq!(deltas, provider.expected().0, "{provider:?}");
        assert_eq!(server.requests().len(), 3, "{provider:?}");
        let (result, deltas) = stream_call(model.as_ref(), &CancellationToken::new()).await;
        match result {
            Err(LlmError::Http {
                status: 400, body, ..
            }) => assert!(body.contains("bad tool schema"), "{body}"),
            other => panic!("{provider:?}: expected HTTP 400, got {other:?}"),
        }
        assert!(deltas.is_empty());
        let asked = if provider == OpenAi { 5 } else { 4 };
        assert_eq!(server.requests().len(), asked, "{provider:?}");
    }
}

/// An OpenAI-compatible server that refuses the streamed request (it knows no `stream_options`):
/// the call is made again unstreamed, and its reply sent whole.
#[tokio::test]
async fn a_server_that_refuses_to_stream_is_asked_unstreamed() {
    let answer = json!({
        "id": "chatcmpl-2", "object": "chat.completion", "model": "small",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "Tokyo is 22°C."}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 6}
    });
    for status in [400, 422] {
        let server = MockServer::start(vec![
            Reply::Json(
                status,
                json!({"error": {"message": "Unrecognized request argument supplied: stream_options"}}),
            ),
            Reply::Json(200, answer.clone()),
        ])
        .await;
        let model = OpenAi.model(&server.base, common::fast_policy(0));
        let (result, deltas) = stream_call(model.as_ref(), &CancellationToken::new()).await;
        let response = result.unwrap();
        assert_eq!(response.message.content, "Tokyo is 22°C.");
        assert_eq!(deltas, vec![text("Tokyo is 22°C.")]);
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        let body = |i: usize| serde_json::from_slice::<Value>(&requests[i].body).unwrap();
        assert_eq!(body(0)["stream"], json!(true));
        assert!(body(1).get("stream").is_none() && body(1).get("stream_options").is_none());
    }
}

/// Malformed JSON in an event: a decode error.
#[tokio::test]
async fn malformed_json_in_an_event() {
    for provider in ALL {
        let script = provider.script();
        let mut events = script.events[..script.head].to_vec();
        events.push(script.malformed);
        events.extend_from_slice(&script.events[script.head..]);
        let server = MockServer::start(vec![provider.reply(&events, StreamEnd::Complete)]).await;
        let model = provider.model(&server.base, common::fast_policy(2));
        let (result, _) = stream_call(model.as_ref(), &CancellationToken::new()).await;
        assert!(
            matches!(&result, Err(LlmError::Decode { provider: p, .. }) if p.starts_with(provider.name())),
            "{provider:?}: {result:?}"
        );
        assert_eq!(server.requests().len(), 1);
    }
}

// ---------------------------------------------------------------- limits, time, cancellation

/// A stream longer than `max_response_bytes` fails at the limit (not retried), after the deltas
/// of what came before it.
#[tokio::test]
async fn an_oversized_stream_fails_at_the_limit() {
    for provider in ALL {
        let script = provider.script();
        let mut events = script.events[..script.head].to_vec();
        events.extend(std::iter::repeat_n(script.filler.clone(), 600));
        let server = MockServer::start(vec![
            Reply::Stream(Streamed {
                content_type: provider.content_type(),
                pieces: events,
                pause: Duration::ZERO,
                end: StreamEnd::Stall,
            }),
            provider.whole(),
        ])
        .await;
        let policy = CallPolicy {
            max_response_bytes: 16 * 1024,
            ..common::fast_policy(2)
        };
        let model = provider.model(&server.base, policy);
        let (result, deltas) = stream_call(model.as_ref(), &CancellationToken::new()).await;
        assert!(
            matches!(&result, Err(LlmError::TooLarge { provider: p, limit: 16384 }) if p.starts_with(provider.name())),
            "{provider:?}: {result:?}"
        );
        assert!(deltas.len() > 10, "{provider:?}");
        assert_eq!(server.requests().len(), 1);
    }
}

/// One SSE event, or one event-stream frame, longer than the limit: too large, before it is
/// read whole.
#[tokio::test]
async fn one_event_longer_than_the_limit() {
    let long = "x".repeat(40_000);
    let cases = [
        (OpenAi, format!("data: {long}").into_bytes()),
        (Anthropic, format!("event: ping\ndata: {long}").into_bytes()),
        (Bedrock, bedrock_text(&long)[..100].to_vec()),
    ];
    for (provider, event) in cases {
        let server = MockServer::start(vec![Reply::Stream(Streamed {
            content_type: provider.content_type(),
            pieces: vec![event],
            pause: Duration::ZERO,
            end: StreamEnd::Stall,
        })])
        .await;
        let policy = CallPolicy {
            max_response_bytes: 16 * 1024,
            ..common::fast_policy(0)
        };
        let model = provider.model(&server.base, policy);
        let start = Instant::now();
        let (result, _) = stream_call(model.as_ref(), &CancellationToken::new()).await;
        assert!(
            matches!(&result, Err(LlmError::TooLarge { limit: 16384, .. })),
            "{provider:?}: {result:?}"
        );
        assert!(start.elapsed() < Duration::from_secs(1), "{provider:?}");
    }
}

/// Cancelling a call while the server stalls mid-stream ends it at once.
#[tokio::test]
async fn cancellation_while_the_server_stalls() {
    for provider in ALL {
        let script = provider.script();
        let server = MockServer::start(vec![
            provider.reply(&script.events[..script.head], StreamEnd::Stall),
        ])
        .await;
        let policy = CallPolicy {
            timeout: Duration::from_secs(30),
            ..common::fast_policy(3)
        };
        let model = provider.model(&server.base, policy);
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1000)).await;
            trigger.cancel();
        });
        let start = Instant::now();
        let (result, deltas) = stream_call(model.as_ref(), &cancel).await;
        assert_eq!(result, Err(LlmError::Cancelled), "{provider:?}");
        assert!(start.elapsed() < Duration::from_secs(3), "{provider:?}");
        assert!(!deltas.is_empty(), "{provider:?}: the head was not sent");
        let (want, _) = provider.expected();
        assert_eq!(deltas[..], want[..deltas.len()], "{provider:?}");
        assert_eq!(server.requests().len(), 1);
    }
}

/// A stream that stalls after some deltas times out, and is not retried.
#[tokio::test]
async fn a_stalled_stream_times_out_without_a_retry() {
    for provider in ALL {
        let script = provider.script();
        let server = MockServer::start(vec![
            provider.reply(&script.events[..script.head], StreamEnd::Stall),
            provider.whole(),
        ])
        .await;
        let policy = CallPolicy {
            timeout: Duration::from_millis(2500),
            ..common::fast_policy(3)
        };
        let model = provider.model(&server.base, policy);
        let (result, deltas) = stream_call(model.as_ref(), &CancellationToken::new()).await;
        assert_eq!(
            result,
            Err(LlmError::Timeout(Duration::from_millis(2500))),
            "{provider:?}"
        );
        assert!(!deltas.is_empty(), "{provider:?}");
        assert_eq!(server.requests().len(), 1, "{provider:?}");
    }
}

// ---------------------------------------------------------------- error events, frames

/// An `overloaded_error` event before anything was sent is retried as HTTP 529 would be; after
/// some deltas it ends the call.
#[tokio::test]
async fn anthropic_error_events() {
    let script = Anthropic.script();
    let overloaded = anthropic_event(
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    );
    let mut early = script.events[..script.quiet].to_vec();
    early.push(overloaded.clone());
    let mut late = script.events[..script.head].to_vec();
    late.push(overloaded);
    let server = MockServer::start(vec![
        Anthropic.reply(&early, StreamEnd::Complete),
        Anthropic.whole(),
        Anthropic.reply(&late, StreamEnd::Complete),
        Anthropic.whole(),
    ])
    .await;
    let model = Anthropic.model(&server.base, common::fast_policy(3));
    let (result, _) = stream_call(model.as_ref(), &CancellationToken::new()).await;
    assert_eq!(result, Ok(Anthropic.expected().1));
    assert_eq!(server.requests().len(), 2);
    let (result, deltas) = stream_call(model.as_ref(), &CancellationToken::new()).await;
    match &result {
        Err(LlmError::Http {
            provider,
            status: 529,
            body,
        }) => assert!(
            provider.starts_with("anthropic") && body.contains("overloaded_error: Overloaded"),
            "{result:?}"
        ),
        other => panic!("expected an overloaded error, got {other:?}"),
    }
    assert!(!deltas.is_empty());
    assert_eq!(server.requests().len(), 3, "retried after data was sent");
}

/// A `throttlingException` frame before anything was sent is retried as HTTP 429 would be; after
/// some deltas it ends the call.
#[tokio::test]
async fn bedrock_exception_frames() {
    let script = Bedrock.script();
    let throttled = bedrock_exception("throttlingException", "Too many tokens, please wait.");
    let mut early = script.events[..script.quiet].to_vec();
    early.push(throttled.clone());
    let mut late = script.events[..script.head].to_vec();
    late.push(throttled);
    let server = MockServer::start(vec![
        Bedrock.reply(&early, StreamEnd::Complete),
        Bedrock.whole(),
        Bedrock.reply(&late, StreamEnd::Complete),
        Bedrock.whole(),
    ])
    .await;
    let model = Bedrock.model(&server.base, common::fast_policy(3));
    let (result, _) = stream_call(model.as_ref(), &CancellationToken::new()).await;
    assert_eq!(result, Ok(Bedrock.expected().1));
    assert_eq!(server.requests().len(), 2);
    for r in server.requests() {
        bedrock_wire::assert_signed(&r, Some("SESSION-TOKEN"));
    }
    let (result, deltas) = stream_call(model.as_ref(), &CancellationToken::new()).await;
    match &result {
        Err(LlmError::Http {
            status: 429, body, ..
        }) => assert!(body.contains("Too many tokens"), "{result:?}"),
        other => panic!("expected a throttling error, got {other:?}"),
    }
    assert!(!deltas.is_empty());
    assert_eq!(server.requests().len(), 3, "retried after data was sent");
}

/// A frame whose CRC does not match: a decode error, not retried.
#[tokio::test]
async fn bedrock_bad_crc() {
    let script = Bedrock.script();
    let mut events = script.events.clone();
    // A byte of the third frame's payload (the message CRC no longer matches), and of a prelude.
    let n = events[2].len();
    events[2][n - 10] ^= 0x01;
    let mut bad_prelude = script.events.clone();
    bad_prelude[1][2] ^= 0x01;
    for events in [events, bad_prelude] {
        let server = MockServer::start(vec![
            Bedrock.reply(&events, StreamEnd::Complete),
            Bedrock.whole(),
        ])
        .await;
        let model = Bedrock.model(&server.base, common::fast_policy(3));
        let (result, _) = stream_call(model.as_ref(), &CancellationToken::new()).await;
        match &result {
            Err(LlmError::Decode { message, .. }) => assert!(message.contains("CRC"), "{message}"),
            other => panic!("expected a decode error, got {other:?}"),
        }
        assert_eq!(server.requests().len(), 1);
    }
}
