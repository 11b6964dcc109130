//! toolplan as an MCP server: `execute_tool_plan` over every tool of an [`Engine`] (built-in, MCP,
//! search), optionally the tools themselves, and any extra tools (`query_planning`,
//! `query_plan_tool`), over stdio or streamable HTTP. A plan's steps are reported as MCP progress
//! notifications; a client's cancellation cancels the plan; results come back as text (what an LLM
//! reads) and as `structuredContent` (the whole report).
//!
//! A tool called directly runs as a one-step plan on the same engine settings, so it gets what a
//! plan's step gets: argument-schema validation, the step timeout, the plan deadline, the output
//! size limit and panic isolation.
//!
//! Over HTTP the server guards itself (see [`HttpOptions`]): at most
//! [`DEFAULT_MAX_SESSIONS`] sessions at once (a new one beyond that is refused with HTTP 503 and a
//! JSON-RPC error), sessions idle for [`DEFAULT_SESSION_IDLE`] are ended, requests from a browser
//! page (`Origin`) are served only for loopback origins and those allowed explicitly (403
//! otherwise), the bearer token is compared in constant time, a session ended with HTTP `DELETE`
//! cancels the plans it is running, and so does a client that closed a call's response stream and
//! did not come back to its session within [`DEFAULT_DISCONNECT_GRACE`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http::StatusCode;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig, Tool as McpToolDef,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;
use toolplan_core::plan::{DraftPlan, DraftStep};
use toolplan_core::scheduler::{Observer, StepFinished};
use toolplan_core::template::Template;
use toolplan_core::{Engine, ExecuteToolPlan, RunControl, StepStatus, Tool, ToolRegistry};

use crate::error::McpError;

/// Default most tool calls (plans and direct calls) running at once, over all clients.
pub const DEFAULT_MAX_CALLS: usize = 32;
/// Default most sessions an HTTP server keeps open at once.
pub const DEFAULT_MAX_SESSIONS: usize = 64;
/// Default time after which an HTTP session nobody used is ended.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(600);
/// Default time a call whose client went away (its HTTP response stream closed before the result)
/// goes on, waiting for the client to come back to its session, before it is cancelled.
pub const DEFAULT_DISCONNECT_GRACE: Duration = Duration::from_secs(10);
/// Largest request body the HTTP server reads (as the MCP SDK's own default), in bytes.
const MAX_REQUEST_BODY: usize = 4 * 1024 * 1024;
/// The HTTP header carrying a session's id.
const SESSION_HEADER: &str = "mcp-session-id";

/// How the streamable-HTTP server guards itself.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// A bearer token every request must carry (`Authorization: Bearer <token>`).
    pub token: Option<String>,
    /// Most sessions open at once; an `initialize` beyond that gets HTTP 503.
    pub max_sessions: usize,
    /// A session without any request for this long is ended; `None`: never.
    pub session_idle: Option<Duration>,
    /// Browser origins served besides loopback ones (`https://app.example.com`, with `:PORT` or
    /// `:*`); a request whose `Origin` is neither gets HTTP 403. Requests without `Origin` (not
    /// from a browser page) are served.
    pub allowed_origins: Vec<String>,
    /// A call whose client closed the response stream before the result is cancelled when no
    /// request of its session came within this time (a client may reconnect and resume, so a
    /// dropped connection alone is not a cancellation); `None`: never.
    pub disconnect_grace: Option<Duration>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            token: None,
            max_sessions: DEFAULT_MAX_SESSIONS,
            session_idle: Some(DEFAULT_SESSION_IDLE),
            allowed_origins: Vec::new(),
            disconnect_grace: Some(DEFAULT_DISCONNECT_GRACE),
        }
    }
}

/// The origins always allowed: pages served from this machine.
const LOOPBACK_ORIGINS: [&str; 6] = [
    "http://localhost:*",
    "https://localhost:*",
    "http://127.0.0.1:*",
    "https://127.0.0.1:*",
    "http://[::1]:*",
    "https://[::1]:*",
];

/// What the server offers.
#[derive(Clone)]
pub struct PlanServer {
    planner: Arc<ExecuteToolPlan>,
    /// Tools offered beside `execute_tool_plan`, by name.
    tools: Arc<Vec<Arc<dyn Tool>>>,
    /// The engine direct calls run on: the offered tools, with the plan engine's settings.
    direct: Arc<Engine>,
    instructions: String,
    /// The calls running over HTTP, with their session, so that ending a session cancels them.
    running: Arc<Running>,
    /// Places for calls running at once.
    calls: Arc<tokio::sync::Semaphore>,
    max_calls: usize,
}

/// Calls running in HTTP sessions.
#[derive(Default)]
struct Running {
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

struct RunningGuard {
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
    /// `execute_tool_plan` over `engine`'s tools; with `expose_tools`, those tools too; and
    /// `extra` tools (which plans do not call: planners over their own tools). Tools called
    /// directly run with `engine`'s settings (step timeout, deadline, output limit).
    pub fn new(
        engine: Arc<Engine>,
        expose_tools: bool,
        extra: Vec<Arc<dyn Tool>>,
    ) -> Result<PlanServer, McpError> {
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        if expose_tools {
            tools.extend(engine.tools().iter().map(|t| Arc::clone(t.tool())));
        }
        tools.extend(extra);
        let mut registry = ToolRegistry::new();
        registry
            .register_all(tools.iter().cloned())
            .map_err(|e| McpError::Serve(format!("cannot offer the tools: {e}")))?;
        let direct = Engine::new(Arc::new(registry))
            .with_limits(engine.limits().clone())
            .with_config(engine.config().clone());
        let count = engine.tools().iter().count();
        Ok(PlanServer {
            planner: Arc::new(ExecuteToolPlan::new(engine)),
            tools: Arc::new(tools),
            direct: Arc::new(direct),
            instructions: format!(
                "Call execute_tool_plan with one plan (a DAG of steps over {count} tools, arguments referring to earlier results with $ref) instead of one call per tool: independent steps run at once and only the output steps come back."
            ),
            running: Arc::new(Running::default()),
            calls: Arc::new(tokio::sync::Semaphore::new(DEFAULT_MAX_CALLS)),
            max_calls: DEFAULT_MAX_CALLS,
        })
    }

    /// At most `max` calls (plans and direct calls, over all clients) run at once; a call beyond
    /// them fails at once, saying so (default [`DEFAULT_MAX_CALLS`]; at least 1).
    pub fn with_max_calls(mut self, max: usize) -> PlanServer {
        let max = max.max(1);
        self.calls = Arc::new(tokio::sync::Semaphore::new(max));
        self.max_calls = max;
        self
    }

    /// The tool definitions offered, `execute_tool_plan` first.
    pub fn definitions(&self) -> Vec<McpToolDef> {
        std::iter::once(Arc::clone(&self.planner) as Arc<dyn Tool>)
            .chain(self.tools.iter().cloned())
            .map(|t| definition(t.as_ref()))
            .collect()
    }

    /// Serves on stdin/stdout until the client closes them.
    pub async fn serve_stdio(self) -> Result<(), McpError> {
        let service = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| McpError::Serve(e.to_string()))?;
        service
            .waiting()
            .await
            .map_err(|e| McpError::Serve(e.to_string()))?;
        Ok(())
    }

    /// Serves streamable HTTP at `http://ADDR/mcp` until `stop` is cancelled, guarded as `options`
    /// says. Calls `ready` with the bound address.
    pub async fn serve_http(
        self,
        addr: SocketAddr,
        options: HttpOptions,
        stop: CancellationToken,
        ready: impl FnOnce(SocketAddr),
    ) -> Result<(), McpError> {
        if options.max_sessions == 0 {
            return Err(McpError::Serve(
                "the session limit must be at least 1".into(),
            ));
        }
        let mut config = StreamableHttpServerConfig::default()
            .with_cancellation_token(stop.child_token())
            .with_max_request_body_bytes(MAX_REQUEST_BODY)
            .with_allowed_origins(
                LOOPBACK_ORIGINS
                    .iter()
                    .map(|o| (*o).to_owned())
                    .chain(options.allowed_origins.iter().cloned()),
            )
            .enforce_origin_validation();
        if !addr.ip().is_loopback() {
            // The Host check guards loopback servers against DNS rebinding; a server bound
            // elsewhere is reached by other names and is guarded by its token.
            config = config.disable_allowed_hosts();
        }
        let mut sessions = LocalSessionManager::default();
        sessions.session_config.keep_alive = options.session_idle;
        let sessions = Arc::new(sessions);
        let running = Arc::clone(&self.running);
        let service: StreamableHttpService<PlanServer, LocalSessionManager> =
            StreamableHttpService::new(move || Ok(self.clone()), Arc::clone(&sessions), config);
        let guard = Arc::new(SessionGuard {
            sessions,
            max: options.max_sessions,
            opening: tokio::sync::Mutex::new(()),
            running,
            grace: options.disconnect_grace,
            seen: Arc::new(StdMutex::new(HashMap::new())),
        });
        let mut app =
            axum::Router::new()
                .nest_service("/mcp", service)
                .layer(axum::middleware::from_fn(
                    move |req: Request, next: Next| {
                        let guard = Arc::clone(&guard);
                        async move { guard.handle(req, next).await }
                    },
                ));
        if let Some(token) = options.token {
            let expected = Arc::new(format!("Bearer {token}"));
            app = app.layer(axum::middleware::from_fn(
                move |req: Request, next: Next| {
                    let expected = Arc::clone(&expected);
                    async move {
                        let given = req
                            .headers()
                            .get(http::header::AUTHORIZATION)
                            .map(|v| v.as_bytes())
                            .unwrap_or_default();
                        if bool::from(given.ct_eq(expected.as_bytes())) {
                            Ok(next.run(req).await)
                        } else {
                            Err(StatusCode::UNAUTHORIZED)
                        }
                    }
                },
            ));
        }
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| McpError::Serve(format!("cannot listen on {addr}: {e}")))?;
        let bound = listener
            .local_addr()
            .map_err(|e| McpError::Serve(e.to_string()))?;
        ready(bound);
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await
            .map_err(|e| McpError::Serve(e.to_string()))
    }

    /// The token a call runs under: the request's own (a client's cancellation), registered with
    /// its HTTP session so that ending the session cancels it too.
    fn call_token(
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

    async fn run_plan(
        &self,
        arguments: Value,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let engine = self.planner.engine();
        // Compiled here (not by `execute`) so that progress can say how many steps there are.
        let plan = match self.planner.compile(arguments) {
            Ok(plan) => plan,
            Err(invalid) => {
                return CallToolResult::error(vec![ContentBlock::text(invalid.to_string())]);
            }
        };
        let reporter = context.meta.get_progress_token().map(|token| {
            Arc::new(ProgressReporter::new(
                context.peer.clone(),
                token,
                plan.len(),
            ))
        });
        let (cancel, _registered) = self.call_token(&context);
        let control = RunControl {
            cancel,
            observer: reporter.clone().map(|r| r as Arc<dyn Observer>),
        };
        let run = engine.run(&plan, control).await;
        // Every step's notification goes out before the result (clients drop progress that
        // arrives after it).
        if let Some(r) = reporter {
            r.flush().await;
        }
        // The text a client's model reads is bounded; the whole report is the structured content.
        let summary = run.summary_within(toolplan_core::limits::DEFAULT_MAX_SUMMARY_BYTES);
        let mut result = CallToolResult::success(vec![ContentBlock::text(summary)]);
        result.structured_content = Some(run.to_json());
        result
    }

    /// A tool called directly: a one-step plan, so that it is checked and bounded as a step is.
    async fn run_tool(
        &self,
        name: &str,
        arguments: Value,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let draft = DraftPlan {
            steps: vec![DraftStep {
                position: 0,
                id: "call".into(),
                tool: Some(name.to_owned()),
                // Literal: a direct call's strings are data, not references.
                arguments: Some(Template::Literal(arguments)),
                depends_on: Vec::new(),
            }],
            output_steps: Vec::new(),
        };
        let plan = match toolplan_core::plan::validate(draft, Vec::new(), self.direct.tools()) {
            Ok(plan) => plan,
            Err(invalid) => {
                let text = invalid
                    .problems
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ");
                return CallToolResult::error(vec![ContentBlock::text(text)]);
            }
        };
        let (cancel, _registered) = self.call_token(&context);
        let run = self
            .direct
            .run(&plan, RunControl::with_cancel(cancel))
            .await;
        let Some(step) = run.steps.into_iter().next() else {
            return CallToolResult::error(vec![ContentBlock::text("the call did not run")]);
        };
        match (step.status, step.output) {
            (StepStatus::Ok, Some(v)) => {
                let text = match &v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
                if v.is_object() {
                    result.structured_content = Some(v);
                }
                result
            }
            _ => CallToolResult::error(vec![ContentBlock::text(
                step.error
                    .unwrap_or_else(|| format!("the call ended {}", step.status.as_str())),
            )]),
        }
    }
}

/// The HTTP front of the sessions: caps how many are open, and cancels a session's calls when it
/// is ended.
struct SessionGuard {
    sessions: Arc<LocalSessionManager>,
    max: usize,
    /// Held while a session opens, so that two `initialize` requests cannot both take the last
    /// place.
    opening: tokio::sync::Mutex<()>,
    running: Arc<Running>,
    grace: Option<Duration>,
    /// When each session last sent a request.
    seen: Arc<StdMutex<HashMap<String, Instant>>>,
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
    async fn handle(&self, req: Request, next: Next) -> Response {
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

/// An MCP tool definition of a toolplan tool.
fn definition(tool: &dyn Tool) -> McpToolDef {
    let schema = match tool.parameters() {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    };
    McpToolDef::new(
        tool.name().to_owned(),
        tool.description().to_owned(),
        Arc::new(schema),
    )
}

impl ServerHandler for PlanServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("toolplan", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions.clone())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.definitions()))
    }

    fn get_tool(&self, name: &str) -> Option<McpToolDef> {
        self.definitions().into_iter().find(|t| t.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let Ok(_place) = Arc::clone(&self.calls).try_acquire_owned() else {
            return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "toolplan MCP server: {} calls are running, the most it runs at once (toolplan mcp --max-calls N raises it); try again when one has finished",
                self.max_calls
            ))])
            .into());
        };
        if request.name == self.planner.name() {
            return Ok(self.run_plan(arguments, context).await.into());
        }
        if !self.tools.iter().any(|t| t.name() == request.name) {
            return Err(ErrorData::invalid_params(
                format!("no tool named '{}'", request.name),
                None,
            ));
        }
        Ok(self
            .run_tool(&request.name, arguments, context)
            .await
            .into())
    }
}

/// Sends a progress notification per finished step: `progress` is the number of steps done,
/// `total` the plan's size, the message names the step and how it ended.
struct ProgressReporter {
    tx: std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedSender<(usize, String)>>>,
    sender: tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    done: std::sync::atomic::AtomicUsize,
}

impl ProgressReporter {
    fn new(peer: Peer<RoleServer>, token: ProgressToken, total: usize) -> ProgressReporter {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, String)>();
        let sender = tokio::spawn(async move {
            while let Some((done, message)) = rx.recv().await {
                let _ = peer
                    .notify_progress(
                        ProgressNotificationParam::new(token.clone(), done as f64)
                            .with_total(total as f64)
                            .with_message(message),
                    )
                    .await;
            }
        });
        ProgressReporter {
            tx: std::sync::Mutex::new(Some(tx)),
            sender: tokio::sync::Mutex::new(Some(sender)),
            done: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Waits until every notification so far has been sent.
    async fn flush(&self) {
        self.tx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(sender) = self.sender.lock().await.take() {
            let _ = sender.await;
        }
    }
}

impl Observer for ProgressReporter {
    fn step_finished(&self, event: &StepFinished<'_>) {
        let done = self.done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let how = match event.error {
            None => event.status.as_str().to_owned(),
            Some(e) => format!("{}: {e}", event.status.as_str()),
        };
        if let Some(tx) = self
            .tx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
        {
            let _ = tx.send((done, format!("step {} ({}) {how}", event.id, event.tool)));
        }
    }
}
