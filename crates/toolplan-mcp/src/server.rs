//! toolplan as an MCP server: `execute_tool_plan` over every tool of an [`Engine`] (built-in, MCP,
//! search), optionally the tools themselves, and any extra tools (`query_planning`,
//! `query_plan_tool`), over stdio or streamable HTTP. A plan's steps are reported as MCP progress
//! notifications; a client's cancellation cancels the plan; results come back as text (what an LLM
//! reads) and as `structuredContent` (the whole report).

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig, Tool as McpToolDef,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolplan_core::scheduler::{Observer, StepFinished};
use toolplan_core::{Engine, ExecuteToolPlan, RunControl, Tool, ToolContext};

use crate::error::McpError;

/// What the server offers.
#[derive(Clone)]
pub struct PlanServer {
    planner: Arc<ExecuteToolPlan>,
    /// Tools offered beside `execute_tool_plan`, by name.
    tools: Arc<Vec<Arc<dyn Tool>>>,
    instructions: String,
}

impl PlanServer {
    /// `execute_tool_plan` over `engine`'s tools; with `expose_tools`, those tools too; and
    /// `extra` tools (which plans do not call: planners over their own tools).
    pub fn new(engine: Arc<Engine>, expose_tools: bool, extra: Vec<Arc<dyn Tool>>) -> PlanServer {
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        if expose_tools {
            tools.extend(engine.tools().iter().map(|t| Arc::clone(t.tool())));
        }
        tools.extend(extra);
        let count = engine.tools().iter().count();
        PlanServer {
            planner: Arc::new(ExecuteToolPlan::new(engine)),
            tools: Arc::new(tools),
            instructions: format!(
                "Call execute_tool_plan with one plan (a DAG of steps over {count} tools, arguments referring to earlier results with $ref) instead of one call per tool: independent steps run at once and only the output steps come back."
            ),
        }
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

    /// Serves streamable HTTP at `http://ADDR/mcp` until `stop` is cancelled. With `token`, every
    /// request needs `Authorization: Bearer <token>`. Calls `ready` with the bound address.
    pub async fn serve_http(
        self,
        addr: SocketAddr,
        token: Option<String>,
        stop: CancellationToken,
        ready: impl FnOnce(SocketAddr),
    ) -> Result<(), McpError> {
        let mut config =
            StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token());
        if !addr.ip().is_loopback() {
            // The Host check guards loopback servers against DNS rebinding; a server bound
            // elsewhere is reached by other names and is guarded by its token.
            config = config.disable_allowed_hosts();
        }
        let service: StreamableHttpService<PlanServer, LocalSessionManager> =
            StreamableHttpService::new(
                move || Ok(self.clone()),
                Arc::new(LocalSessionManager::default()),
                config,
            );
        let mut app = axum::Router::new().nest_service("/mcp", service);
        if let Some(token) = token {
            let expected = Arc::new(format!("Bearer {token}"));
            app = app.layer(axum::middleware::from_fn(
                move |req: axum::extract::Request, next: axum::middleware::Next| {
                    let expected = Arc::clone(&expected);
                    async move {
                        let ok = req
                            .headers()
                            .get(axum::http::header::AUTHORIZATION)
                            .and_then(|v| v.to_str().ok())
                            .is_some_and(|v| v == expected.as_str());
                        if ok {
                            Ok(next.run(req).await)
                        } else {
                            Err(axum::http::StatusCode::UNAUTHORIZED)
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
        let control = RunControl {
            cancel: context.ct.clone(),
            observer: reporter.clone().map(|r| r as Arc<dyn Observer>),
        };
        let run = engine.run(&plan, control).await;
        // Every step's notification goes out before the result (clients drop progress that
        // arrives after it).
        if let Some(r) = reporter {
            r.flush().await;
        }
        let mut result = CallToolResult::success(vec![ContentBlock::text(run.summary())]);
        result.structured_content = Some(run.to_json());
        result
    }

    async fn run_tool(
        &self,
        tool: &Arc<dyn Tool>,
        arguments: Value,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let ctx = ToolContext {
            step_id: Arc::from(""),
            cancel: context.ct.clone(),
        };
        let call = tool.call(arguments, ctx);
        let outcome = tokio::select! {
            r = call => r,
            _ = context.ct.cancelled() => Err(toolplan_core::ToolError::Cancelled),
        };
        match outcome {
            Err(e) => CallToolResult::error(vec![ContentBlock::text(e.to_string())]),
            Ok(v) => {
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
        }
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
        if request.name == self.planner.name() {
            return Ok(self.run_plan(arguments, context).await.into());
        }
        let Some(tool) = self.tools.iter().find(|t| t.name() == request.name) else {
            return Err(ErrorData::invalid_params(
                format!("no tool named '{}'", request.name),
                None,
            ));
        };
        Ok(self.run_tool(tool, arguments, context).await.into())
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
