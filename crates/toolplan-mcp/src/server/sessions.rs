//! The HTTP sessions of [`PlanServer`]: [`SessionGuard`] caps how many are open and notes when
//! each was last used, [`Running`] knows which calls each session runs, so that a session ended
//! with HTTP `DELETE`, or whose client closed a call's response stream and did not come back
//! within the grace time, has its calls cancelled.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http::StatusCode;
use rmcp::RoleServer;
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::PlanServer;
use super::http::{
    DEFAULT_DISCONNECT_GRACE, DEFAULT_MAX_SESSIONS, MAX_REQUEST_BODY, SESSION_HEADER,
};

/// Calls running in HTTP sessions.
#[derive(Default)]
pub(super) struct Running {
    next: AtomicU64,
    calls: StdMutex<HashMap<u64, (String, CancellationToken)>>,
}

impl Running {
    /// Registers a call of `session`; it is forgotten when the guard drops.
    fn register(self: &Arc<Self>, session: String, cancel: CancellationToken) -> RunningGuard {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, (session, cancel));
        RunningGuard {
            running: Arc::clone(self),
            id,
        }
    }

    /// Cancels every call of `session`.
    fn cancel_session(&self, session: &str) {
        let calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        for (s, cancel) in calls.values() {
            if s == session {
                cancel.cancel();
            }
        }
    }
}

pub(super) struct RunningGuard {
    running: Arc<Running>,
    id: u64,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.running
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
    }
}

impl PlanServer {
    /// The token a call runs under: the request's own (a client's cancellation), registered with
    /// its HTTP session so that ending the session cancels it too.
    pub(super) fn call_token(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> (CancellationToken, Option<RunningGuard>) {
        let cancel = context.ct.child_token();
        let parts = context.extensions.get::<http::request::Parts>();
        let session = parts
            .and_then(|p| p.headers.get(SESSION_HEADER))
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(RequestGone(gone)) = parts.and_then(|p| p.extensions.get::<RequestGone>()) {
            let (gone, run) = (gone.clone(), cancel.clone());
            tokio::spawn(async move {
                tokio::select! {
                    () = gone.cancelled() => run.cancel(),
                    () = run.cancelled() => {}
                }
            });
        }
        let guard = session.map(|s| self.running.register(s, cancel.clone()));
        (cancel, guard)
    }
}

/// The HTTP front of the sessions: caps how many are open, and cancels a session's calls when it
/// is ended.
pub(super) struct SessionGuard {
    pub(super) sessions: Arc<LocalSessionManager>,
    pub(super) max: usize,
    /// Held while a session opens, so that two `initialize` requests cannot both take the last
    /// place.
    pub(super) opening: tokio::sync::Mutex<()>,
    pub(super) running: Arc<Running>,
    pub(super) grace: Option<Duration>,
    /// When each session last sent a request.
    pub(super) seen: Arc<StdMutex<HashMap<String, Instant>>>,
}

/// Cancelled when the HTTP request a call came in is gone: its client closed the response stream
/// and did not come back to its session within the grace time.
#[derive(Clone)]
struct RequestGone(CancellationToken);

/// Lives as long as a POST's response stream: dropped before the stream ended, it cancels the
/// request's calls unless the session sends another request within the grace time.
struct StreamWatch {
    gone: CancellationToken,
    finished: bool,
    session: String,
    grace: Duration,
    seen: Arc<StdMutex<HashMap<String, Instant>>>,
}

impl Drop for StreamWatch {
    fn drop(&mut self) {
        if self.finished {
            // The result went out: nothing is left to cancel (this ends the link task).
            self.gone.cancel();
            return;
        }
        let (gone, session, grace) = (self.gone.clone(), self.session.clone(), self.grace);
        let seen = Arc::clone(&self.seen);
        let dropped = Instant::now();
        tokio::spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(grace) => {}
                () = gone.cancelled() => return,
            }
            let back = seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&session)
                .is_some_and(|at| *at > dropped);
            if !back {
                gone.cancel();
            }
        });
    }
}

impl SessionGuard {
    pub(super) async fn handle(&self, req: Request, next: Next) -> Response {
        let session = req
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(session) = &session {
            self.saw(session).await;
        }
        match (req.method().clone(), session) {
            (http::Method::DELETE, Some(session)) => {
                let response = next.run(req).await;
                self.running.cancel_session(&session);
                self.seen
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&session);
                response
            }
            (http::Method::POST, None) => self.open(req, next).await,
            (http::Method::POST, Some(session)) if self.grace.is_some() => {
                self.watch(req, next, session).await
            }
            _ => next.run(req).await,
        }
    }

    /// Notes that `session` sent a request; forgets sessions that ended when there are many.
    async fn saw(&self, session: &str) {
        let crowded = {
            let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            seen.insert(session.to_owned(), Instant::now());
            seen.len() > 2 * self.max + 16
        };
        if crowded {
            let open = self.sessions.sessions.read().await;
            self.seen
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .retain(|s, _| open.contains_key(s.as_str()));
        }
    }

    /// A POST of a session: its calls are cancelled if its client goes away for good.
    async fn watch(&self, mut req: Request, next: Next, session: String) -> Response {
        let gone = CancellationToken::new();
        req.extensions_mut().insert(RequestGone(gone.clone()));
        let mut watch = StreamWatch {
            gone: gone.clone(),
            finished: false,
            session,
            grace: self.grace.unwrap_or(DEFAULT_DISCONNECT_GRACE),
            seen: Arc::clone(&self.seen),
        };
        // Dropped before a response (the client went away early), the watch still acts.
        let response = next.run(req).await;
        let (parts, body) = response.into_parts();
        let mut data = body.into_data_stream();
        let stream = futures::stream::poll_fn(move |cx| {
            // The whole watch moves into the stream (not only its flag), to drop with it.
            let watch = &mut watch;
            let polled = data.poll_next_unpin(cx);
            if let std::task::Poll::Ready(None) = polled {
                watch.finished = true;
            }
            polled
        });
        Response::from_parts(parts, axum::body::Body::from_stream(stream))
    }

    /// A POST without a session: an `initialize` opens one if there is room.
    async fn open(&self, req: Request, next: Next) -> Response {
        let (parts, body) = req.into_parts();
        // Read whole before the lock is taken, so that a slow client cannot hold it.
        let Ok(bytes) = axum::body::to_bytes(body, MAX_REQUEST_BODY).await else {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the request body is larger than {MAX_REQUEST_BODY} bytes or was cut short"
                ),
            )
                .into_response();
        };
        let message: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let req = Request::from_parts(parts, axum::body::Body::from(bytes));
        if message.get("method").and_then(Value::as_str) != Some("initialize") {
            return next.run(req).await;
        }
        let _opening = self.opening.lock().await;
        let open = self.sessions.sessions.read().await.len();
        if open >= self.max {
            let body = json!({
                "jsonrpc": "2.0",
                "id": message.get("id").cloned().unwrap_or(Value::Null),
                "error": {
                    "code": -32000,
                    "message": format!(
                        "toolplan MCP server: {open} sessions are open, the most it allows (toolplan mcp --max-sessions N raises it; default {DEFAULT_MAX_SESSIONS}); end a session with HTTP DELETE or wait until idle ones expire (--session-idle)"
                    ),
                },
            });
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                [(http::header::CONTENT_TYPE, "application/json")],
                body.to_string(),
            )
                .into_response();
        }
        next.run(req).await
    }
}
