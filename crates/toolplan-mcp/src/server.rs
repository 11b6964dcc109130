//! toolplan as an MCP server: `execute_tool_plan` over every tool of an [`Engine`] (built-in, MCP,
//! search), optionally the tools themselves, and any extra tools (`query_planning`,
//! `query_plan_tool`), over stdio or streamable HTTP. A plan's steps are reported as MCP progress
//! notifications; a client's cancellation cancels the plan; results come back as text (what an LLM
//! reads) and as `structuredContent` (the whole report).
//!
//! A tool called directly runs as a step on the same engine settings ([`Engine::run_calls`]), so it
//! gets what a plan's step gets: argument-schema validation, the step timeout, the plan deadline, the output
//! size limit and panic isolation.
//!
//! Over HTTP the server guards itself ([`HttpOptions`]): a session cap ([`DEFAULT_MAX_SESSIONS`],
//! HTTP 503 beyond), idle sessions ended ([`DEFAULT_SESSION_IDLE`]), browser `Origin`s served only
//! when loopback or allowed, a bearer token compared in constant time, and the plans of a session
//! cancelled when it is ended with HTTP `DELETE` or its client goes away for longer than
//! [`DEFAULT_DISCONNECT_GRACE`].
//!
//! A server whose engine runs some plans only once approved ([`RunConfig::approval`](toolplan_core::RunConfig::approval),
//! `toolplan mcp --confirm`) asks the client that sent each such plan (or direct call), through MCP
//! elicitation (`approval`).
//!
//! The parts: this file is [`PlanServer`] and how it answers MCP requests; `approval` asks the
//! client; `http` serves it over
//! streamable HTTP; `sessions` guards the HTTP sessions (the cap, the calls of each session,
//! cancellation when a session ends or its client goes away); `progress` turns finished steps into
//! MCP progress notifications.

mod approval;
mod http;
mod progress;
mod sessions;

use std::sync::Arc;

use approval::ClientApprover;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool as McpToolDef,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use toolplan_core::Observer;
use toolplan_core::{
    DirectCall, Engine, RunControl, StepStatus, Tool, ToolAnnotations, ToolRegistry, value_as_text,
};
use toolplan_planner::ExecuteToolPlan;

use crate::error::McpError;
pub use http::{DEFAULT_DISCONNECT_GRACE, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE, HttpOptions};
use progress::ProgressReporter;
use sessions::Running;

/// Default most tool calls (plans and direct calls) running at once, over all clients.
pub const DEFAULT_MAX_CALLS: usize = 32;

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
            approver: Some(Arc::new(ClientApprover::new(context.peer.clone()))),
            extension: None,
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

    /// A tool called directly ([`Engine::run_calls`]), so that it is checked and bounded as a plan's
    /// step is.
    async fn run_tool(
        &self,
        name: &str,
        arguments: Value,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let (cancel, _registered) = self.call_token(&context);
        // Literal arguments: a direct call's strings are data, not references.
        let call = DirectCall::new("call", name, arguments);
        let outcome = self
            .direct
            .run_calls(
                vec![call],
                RunControl {
                    approver: Some(Arc::new(ClientApprover::new(context.peer.clone()))),
                    extension: None,
                    ..RunControl::with_cancel(cancel)
                },
            )
            .await
            .pop();
        let step = match outcome {
            Some(Ok(step)) => step,
            Some(Err(problem)) => {
                return CallToolResult::error(vec![ContentBlock::text(problem.to_string())]);
            }
            None => return CallToolResult::error(vec![ContentBlock::text("the call did not run")]),
        };
        match (step.status, step.output) {
            (StepStatus::Ok, Some(v)) => {
                let text = value_as_text(&v).into_owned();
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

/// An MCP tool definition of a toolplan tool: its schema, its hints (`readOnlyHint` …), and its
/// output schema where MCP can carry it (an object schema: a call's `structuredContent` is an
/// object).
fn definition(tool: &dyn Tool) -> McpToolDef {
    let schema = match tool.parameters() {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    };
    let mut def = McpToolDef::new(
        tool.name().to_owned(),
        tool.description().to_owned(),
        Arc::new(schema),
    );
    let hints = tool.annotations();
    if hints != ToolAnnotations::default() {
        def.annotations = Some(rmcp::model::ToolAnnotations::from_raw(
            None,
            hints.read_only,
            hints.destructive,
            hints.idempotent,
            hints.open_world,
        ));
    }
    if let Some(Value::Object(output)) = tool.output_schema()
        && output.get("type").and_then(Value::as_str) == Some("object")
    {
        def.output_schema = Some(Arc::new(output));
    }
    def
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offered_tools_carry_their_hints_and_object_output_schemas() {
        let engine = Arc::new(Engine::new(Arc::new(toolplan_demo::registry())));
        let server = PlanServer::new(engine, true, Vec::new()).expect("a server");
        let definitions = server.definitions();
        let find = |name: &str| definitions.iter().find(|d| d.name == name).cloned();
        let user = find("get_user").expect("get_user offered");
        let hints = user.annotations.expect("hints");
        assert_eq!(hints.read_only_hint, Some(true));
        let output = user.output_schema.expect("an output schema");
        assert_eq!(output.get("type"), Some(&Value::from("object")));
        // `calculator` returns a number: MCP carries only object output schemas.
        assert!(find("calculator").expect("offered").output_schema.is_none());
    }
}
