//! `toolplan mcp`: toolplan as an MCP server, over stdio or streamable HTTP.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use anyhow::{Context, bail};
use toolplan_core::{Limits, RunConfig, Tool};
use toolplan_mcp::PlanServer;
use toolplan_query::{QueryPlanTool, QueryPlanner, Synthesizer};
use toolplan_search::tools::QUERY_PLANNING;

use crate::Outcome;
use crate::args::McpArgs;
use crate::cmd::ask::connect_model;
use crate::config::Config;
use crate::toolset;

/// Runs the subcommand.
pub async fn execute(args: McpArgs) -> anyhow::Result<Outcome> {
    let (config, _) = Config::load(args.tools.config.as_deref())?;
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
    let tools =
        toolset::with_mcp(toolset::tools(args.tools.tools, model.as_ref())?, &config).await?;
    let run = RunConfig {
        step_timeout: args.step_timeout.0,
        ..RunConfig::default()
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
        .with_limits(Limits::default())
        .with_config(run);
    let server = PlanServer::new(Arc::new(engine), args.expose_tools, extra);
    match addr {
        None => server.serve_stdio().await?,
        Some(addr) => {
            let stop = crate::cmd::cancel_on_interrupt();
            server
                .serve_http(addr, token, stop, |bound| {
                    eprintln!("toolplan MCP server on http://{bound}/mcp");
                })
                .await?;
        }
    }
    Ok(Outcome::Ok)
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
