//! A scripted loopback HTTP server that records every request, and the failure-mode checks every
//! provider must pass (retry on 429, no retry on 400, timeout, cancellation, malformed answers,
//! connection refused).

#![allow(clippy::unwrap_used, dead_code)]

use std::collections::VecDeque;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolplan_llm::message::ToolDefinition;
use toolplan_llm::{CallPolicy, ChatModel, ChatRequest, LlmError, Message};

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `POST`, …
    pub method: String,
    /// The path exactly as sent (percent-encoding kept).
    pub path: String,
    /// Headers, names lower-case.
    pub headers: Vec<(String, String)>,
    /// The raw body.
    pub body: Vec<u8>,
}

impl Recorded {
    /// The value of a header, if sent (once).
    pub fn header(&self, name: &str) -> Option<&str> {
        let mut values = self.headers.iter().filter(|(k, _)| k == name);
        let value = values.next().map(|(_, v)| v.as_str());
        assert!(values.next().is_none(), "header {name} sent more than once");
        value
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// What the server answers to one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A status and a JSON body.
    Json(u16, Value),
    /// A status and a raw body.
    Raw(u16, &'static str),
    /// No answer for a minute (longer than any test's timeout).
    Hang,
    /// Status 200 and a body that never ends (64 KiB chunks of spaces, as fast as they are read).
    Endless,
    /// Status 200 and a body written in pieces, with a pause before each.
    Stream(Streamed),
}

/// A body written in pieces ([`Reply::Stream`]).
#[derive(Debug, Clone)]
pub struct Streamed {
    /// The `content-type` of the answer.
    pub content_type: &'static str,
    /// The pieces, each written on its own after `pause`.
    pub pieces: Vec<Vec<u8>>,
    /// The pause before each piece.
    pub pause: Duration,
    /// What happens after the last piece.
    pub end: StreamEnd,
}

/// How a [`Streamed`] body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// The body ends cleanly.
    Complete,
    /// The connection breaks (the body ends with an error: no last chunk).
    Abort,
    /// Nothing more for a minute (longer than any test's timeout).
    Stall,
}

struct Script {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
}

/// A loopback server answering with scripted replies, in order.
pub struct MockServer {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    script: Arc<Script>,
    task: tokio::task::JoinHandle<()>,
}

impl MockServer {
    /// Starts a server on 127.0.0.1 (a free port) that answers `replies` in order; requests
    /// past the script get HTTP 599.
    pub async fn start(replies: Vec<Reply>) -> Self {
        let script = Arc::new(Script {
            replies: Mutex::new(replies.into()),
            requests: Mutex::new(Vec::new()),
        });
        let app = Router::new().fallback(handle).with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { base, script, task }
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.script.requests.lock().unwrap().clone()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(State(script): State<Arc<Script>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 16 << 20).await.unwrap();
    script.requests.lock().unwrap().push(Recorded {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    v.to_str().unwrap_or("<binary>").to_owned(),
                )
            })
            .collect(),
        body: body.to_vec(),
    });
    let reply = script.replies.lock().unwrap().pop_front();
    match reply {
        Some(Reply::Json(status, value)) => response(status, value.to_string(), "application/json"),
        Some(Reply::Raw(status, text)) => response(status, text.to_owned(), "text/html"),
        Some(Reply::Hang) => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            response(200, "{}".into(), "application/json")
        }
        Some(Reply::Endless) => {
            let chunk = axum::body::Bytes::from(vec![b' '; 64 * 1024]);
            let chunks = futures::stream::repeat_with(move || {
                Ok::<_, std::convert::Infallible>(chunk.clone())
            });
            (
                StatusCode::OK,
                [("content-type", "application/json")],
                Body::from_stream(chunks),
            )
                .into_response()
        }
        Some(Reply::Stream(streamed)) => streamed_response(streamed),
        None => response(599, "no scripted reply left".into(), "text/plain"),
    }
}

fn streamed_response(streamed: Streamed) -> Response {
    use futures::StreamExt;
    type Piece = Result<axum::body::Bytes, std::io::Error>;
    let pause = streamed.pause;
    let pieces = futures::stream::iter(streamed.pieces).then(move |piece| async move {
        tokio::time::sleep(pause).await;
        Ok::<_, std::io::Error>(axum::body::Bytes::from(piece))
    });
    let end: futures::stream::BoxStream<'static, Piece> = match streamed.end {
        StreamEnd::Complete => futures::stream::empty().boxed(),
        StreamEnd::Abort => futures::stream::once(async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Err(std::io::Error::other("the server broke the connection"))
        })
        .boxed(),
        StreamEnd::Stall => futures::stream::once(async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(axum::body::Bytes::new())
        })
        .boxed(),
    };
    (
        StatusCode::OK,
        [("content-type", streamed.content_type)],
        Body::from_stream(pieces.chain(end)),
    )
        .into_response()
}

fn response(status: u16, body: String, content_type: &'static str) -> Response {
    let status = StatusCode::from_u16(status).unwrap();
    (status, [("content-type", content_type)], Body::from(body)).into_response()
}

/// Runs `f`, failing the test if it takes longer than 20 s.
pub async fn bounded<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .expect("test took longer than 20 s")
}

/// A policy with short timeouts and backoffs for tests.
pub fn fast_policy(max_retries: u32) -> CallPolicy {
    CallPolicy {
        timeout: Duration::from_millis(2000),
        max_retries,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
        ..CallPolicy::default()
    }
}

/// The weather tool of the conversations.
pub fn weather_tool() -> ToolDefinition {
    ToolDefinition {
        name: "get_weather".into(),
        description: "Current weather of a city".into(),
        parameters: json!({
            "type": "object",
            "properties": {"location": {"type": "string", "description": "City name"}},
            "required": ["location"]
        }),
        ..Default::default()
    }
}

/// A one-question request with the weather tool.
pub fn simple_request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user("Weather in Tokyo?")],
        tools: vec![weather_tool()],
        ..ChatRequest::default()
    }
}

/// Makes a provider's model talking to `base` with `policy`.
pub type MakeModel = fn(base: &str, policy: CallPolicy) -> Arc<dyn ChatModel>;

/// 429, then a good answer: retried, and the answer comes back.
pub async fn check_retries_429(make: MakeModel, ok: Value) {
    let server = MockServer::start(vec![
        Reply::Json(429, json!({"error": {"message": "rate limited"}})),
        Reply::Json(200, ok),
    ])
    .await;
    let model = make(&server.base, fast_policy(2));
    let r = bounded(model.chat(&simple_request(), &CancellationToken::new())).await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(server.requests().len(), 2);
}

/// 400: not retried; the error names the provider, status and body.
pub async fn check_no_retry_on_400(make: MakeModel, provider: &str) {
    let server = MockServer::start(vec![
        Reply::Json(400, json!({"error": {"message": "bad tool schema"}})),
        Reply::Json(200, json!({})),
    ])
    .await;
    let model = make(&server.base, fast_policy(3));
    let e = bounded(model.chat(&simple_request(), &CancellationToken::new()))
        .await
        .unwrap_err();
    match &e {
        LlmError::Http {
            status: 400, body, ..
        } => assert!(body.contains("bad tool schema"), "{e}"),
        other => panic!("expected HTTP 400, got {other:?}"),
    }
    let text = e.to_string();
    assert!(text.contains(provider) && text.contains("400"), "{text}");
    assert_eq!(server.requests().len(), 1);
}

/// A server that never answers: the call ends with a timeout.
pub async fn check_timeout(make: MakeModel) {
    let server = MockServer::start(vec![Reply::Hang]).await;
    let policy = CallPolicy {
        timeout: Duration::from_millis(300),
        ..fast_policy(0)
    };
    let model = make(&server.base, policy);
    let start = Instant::now();
    let e = bounded(model.chat(&simple_request(), &CancellationToken::new()))
        .await
        .unwrap_err();
    assert_eq!(e, LlmError::Timeout(Duration::from_millis(300)));
    assert!(start.elapsed() < Duration::from_secs(5));
}

/// A body that never ends is read up to `max_response_bytes`, then the call fails (without a retry)
/// instead of filling memory until the timeout.
pub async fn check_endless_body(make: MakeModel, provider: &str) {
    let server = MockServer::start(vec![Reply::Endless, Reply::Endless]).await;
    let policy = CallPolicy {
        timeout: Duration::from_secs(15),
        max_response_bytes: 1 << 20,
        ..fast_policy(1)
    };
    let model = make(&server.base, policy);
    let start = Instant::now();
    let e = bounded(model.chat(&simple_request(), &CancellationToken::new()))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, LlmError::TooLarge { provider: p, limit: 1_048_576 } if p.starts_with(provider)),
        "{e:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_eq!(
        server.requests().len(),
        1,
        "a response too large is not retried"
    );
}

/// Cancelling a call in flight ends it at once with `Cancelled`.
pub async fn check_cancel(make: MakeModel) {
    let server = MockServer::start(vec![Reply::Hang]).await;
    let policy = CallPolicy {
        timeout: Duration::from_secs(30),
        ..fast_policy(3)
    };
    let model = make(&server.base, policy);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(150)).await;
        trigger.cancel();
    });
    let start = Instant::now();
    let e = bounded(model.chat(&simple_request(), &cancel))
        .await
        .unwrap_err();
    assert_eq!(e, LlmError::Cancelled);
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(server.requests().len(), 1);
}

/// Answers that are not JSON, or JSON of the wrong shape, are decode errors (not retried).
pub async fn check_malformed(make: MakeModel, wrong_shape: Value) {
    let server = MockServer::start(vec![
        Reply::Raw(200, "<html>gateway says hi</html>"),
        Reply::Json(200, wrong_shape),
    ])
    .await;
    let model = make(&server.base, fast_policy(3));
    for _ in 0..2 {
        let e = bounded(model.chat(&simple_request(), &CancellationToken::new()))
            .await
            .unwrap_err();
        assert!(matches!(e, LlmError::Decode { .. }), "{e:?}");
    }
    assert_eq!(server.requests().len(), 2);
}

/// Nothing listens: a transport error (retried, then reported).
pub async fn check_connection_refused(make: MakeModel) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let model = make(&base, fast_policy(1));
    let e = bounded(model.chat(&simple_request(), &CancellationToken::new()))
        .await
        .unwrap_err();
    assert!(matches!(e, LlmError::Transport { .. }), "{e:?}");
}

/// A reply start, which a hosted model cannot be given: its provider ignores it (the wire tests
/// that set it show it changes nothing on the wire).
pub fn ignored_reply_start() -> Option<toolplan_llm::ReplyStart> {
    Some(toolplan_llm::ReplyStart {
        calls: vec![toolplan_llm::ToolCall {
            id: "call_0".into(),
            name: "get_weather".into(),
            arguments: json!({"location": "Oslo"}),
        }],
        ..Default::default()
    })
}
