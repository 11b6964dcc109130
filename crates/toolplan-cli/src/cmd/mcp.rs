//! `toolplan mcp`: toolplan as an MCP server, over stdio or streamable HTTP.
//!
//! Plans run with the settings every command resolves (`crate::settings`: flags, then `[limits]`
//! of the configuration, then the defaults); a request's plan also has a deadline (default
//! [`DEFAULT_DEADLINE`]) unless set. Ctrl-C, SIGTERM and SIGHUP stop the server and
//! kill every MCP server it started (and what those started).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio_util::sync::CancellationToken;
use toolplan_core::Tool;
use toolplan_core::approval::{Approval, FnApprover};
use toolplan_mcp::PlanServer;
use toolplan_mcp::server::HttpOptions;
use toolplan_query::{QueryPlanTool, QueryPlanner, Synthesizer};
use toolplan_search::tools::QUERY_PLANNING;

use crate::Outcome;
use crate::args::McpArgs;
use crate::cmd::ask::connect_model;
use crate::settings::Settings;
use crate::toolset;

/// Longest a request's plan may take unless the configuration or `--deadline` says otherwise.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);

/// How long a stopping server waits for open requests before it exits anyway.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// Runs the subcommand.
pub async fn execute(args: McpArgs, settings: Settings) -> anyhow::Result<Outcome> {
    // From the start: a signal while MCP servers are starting must not leave them behind.
    let stop = stop_on_signals();
    let result = serve(args, settings, stop.clone()).await;
    toolplan_mcp::client::kill_all_children();
    if stop.is_cancelled() {
        // Stopped by a signal: exit now, as the runtime would wait for ever for the thread still
        // blocked reading standard input.
        if let Err(e) = &result {
            eprintln!("error: {e:#}");
        }
        std::process::exit(i32::from(result.is_err()));
    }
    result
}

async fn serve(
    args: McpArgs,
    settings: Settings,
    stop: CancellationToken,
) -> anyhow::Result<Outcome> {
    let Settings {
        config,
        tools: tool_set,
        limits,
        mut run,
    } = settings;
    // Plans that need approval are approved by the client that sent them (MCP elicitation); a
    // run no client asked for (a query plan's own steps) has no one to ask, and is declined.
    if let Some(gate) = &mut run.approval {
        gate.approver = Arc::new(FnApprover(|_| async {
            Approval::Declined(
                "no MCP client to ask for this run's approval (toolplan mcp --confirm)".into(),
            )
        }));
    }
    let addr = args.http.as_deref().map(parse_addr).transpose()?;
    let token = match &args.token_env {
        None => None,
        Some(var) => Some(
            std::env::var(var)
                .ok()
                .filter(|t| !t.is_empty())
                .with_context(|| format!("--token-env {var}: the variable is not set"))?,
        ),
    };
    if let Some(a) = addr
        && !a.ip().is_loopback()
        && token.is_none()
    {
        bail!(
            "--http {a} is not a loopback address: give --token-env VAR so that requests need a token"
        );
    }
    // A configured model adds the planners that need one: query_planning (search tool set) and
    // query_plan_tool (LlamaIndex's QueryPlanTool over the same tools).
    let model = match &config.model {
        Some(_) => Some(connect_model(None, None, &config, false).await?.1),
        None => None,
    };
    let tools = tokio::select! {
        tools = toolset::with_mcp(toolset::tools(tool_set, &config, model.as_ref())?, &config) => tools?,
        () = stop.cancelled() => bail!("stopped while the MCP servers were starting"),
    };
    // The planners are served on their own even without --expose-tools: query_planning (in the
    // search set when a model is configured) and query_plan_tool.
    let mut extra: Vec<Arc<dyn Tool>> = Vec::new();
    if !args.expose_tools {
        extra.extend(tools.iter().filter(|t| t.name() == QUERY_PLANNING).cloned());
    }
    if let Some(model) = &model {
        let planner = QueryPlanner::new(tools.clone(), Synthesizer::compact(Arc::clone(model)))?
            .with_config(run.clone());
        extra.push(Arc::new(QueryPlanTool::new(Arc::new(planner))));
    }
    let mut registry = toolplan_core::ToolRegistry::new();
    registry.register_all(tools)?;
    let engine = toolplan_core::Engine::new(Arc::new(registry))
        .with_limits(limits)
        .with_config(run);
    let server = PlanServer::new(Arc::new(engine), args.expose_tools, extra)?
        .with_max_calls(args.max_calls as usize);
    match addr {
        None => {
            tokio::select! {
                served = server.serve_stdio() => served?,
                () = stop.cancelled() => {}
            }
        }
        Some(addr) => {
            let options = HttpOptions {
                token,
                max_sessions: args.max_sessions as usize,
                session_idle: args.session_idle.0,
                allowed_origins: args.allow_origins.clone(),
                disconnect_grace: args.disconnect_grace.0,
            };
            let served = server.serve_http(addr, options, stop.clone(), |bound| {
                eprintln!("toolplan MCP server on http://{bound}/mcp");
            });
            // Stopping waits for open requests, but not for ever (an open event stream never ends).
            tokio::select! {
                served = served => served?,
                () = async {
                    stop.cancelled().await;
                    tokio::time::sleep(STOP_GRACE).await;
                } => {}
            }
        }
    }
    Ok(Outcome::Ok)
}

/// For every command that starts MCP servers: SIGTERM and SIGHUP kill them (and what they started)
/// before toolplan exits as the signal asks (their own process groups do not get the signal).
/// Installed once.
pub fn kill_children_on_termination() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        #[cfg(unix)]
        tokio::spawn(async {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut hangup)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
            ) else {
                return;
            };
            let code = tokio::select! {
                _ = term.recv() => 128 + 15,
                _ = hangup.recv() => 128 + 1,
            };
            toolplan_mcp::client::kill_all_children();
            std::process::exit(code);
        });
    });
}

/// A token cancelled by Ctrl-C, SIGTERM or SIGHUP. The MCP servers toolplan started are killed as
/// toolplan exits.
fn stop_on_signals() -> CancellationToken {
    let stop = CancellationToken::new();
    let cancel = stop.clone();
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut hangup)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
            ) else {
                let _ = tokio::signal::ctrl_c().await;
                cancel.cancel();
                return;
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
                _ = hangup.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        cancel.cancel();
    });
    stop
}

/// `PORT` (loopback) or `ADDR:PORT`.
fn parse_addr(text: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    text.parse()
        .with_context(|| format!("--http '{text}': expected PORT or ADDR:PORT (127.0.0.1:8765)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_alone_bind_loopback() {
        assert_eq!(parse_addr("8765").ok(), "127.0.0.1:8765".parse().ok());
        assert_eq!(parse_addr("0.0.0.0:80").ok(), "0.0.0.0:80".parse().ok());
        assert!(parse_addr("localhost").is_err());
    }
}
