//! The tool sets the CLI can run plans against.

use std::sync::Arc;

use toolplan_core::{Engine, Tool, ToolRegistry};
use toolplan_demo as demo;
use toolplan_llm::ChatModel;
use toolplan_search::tools::QueryPlanning;
use toolplan_search::{DslPlanner, SearchBackend};

use crate::args::{BackendArgs, BackendKind, ToolSet};
use crate::config::Config;
use crate::settings::Settings;

/// The tools of a set. The search set opens the embedded backend in the default data directory;
/// with a model it also gets `query_planning`, over the same backend.
pub fn tools(
    set: ToolSet,
    config: &Config,
    model: Option<&Arc<dyn ChatModel>>,
) -> anyhow::Result<Vec<Arc<dyn Tool>>> {
    Ok(match set {
        ToolSet::Demo => match &config.demo_latency {
            Some(latency) => {
                demo::tools_with_latency(crate::config::duration(latency, "demo_latency")?)
            }
            None => demo::tools(),
        },
        ToolSet::None => Vec::new(),
        ToolSet::Search => {
            let backend = search_backend()?;
            let limits = crate::settings::search_limits()?;
            let mut tools =
                toolplan_search::tools::backend_tools_with(Arc::clone(&backend), &limits);
            if let Some(model) = model {
                let planner = DslPlanner::new(Arc::clone(model), backend);
                tools.push(Arc::new(QueryPlanning(Arc::new(planner))));
            }
            tools
        }
    })
}

/// The embedded backend in the default data directory (`$TOOLPLAN_DATA_DIR`, else per user).
fn search_backend() -> anyhow::Result<Arc<dyn SearchBackend>> {
    let args = BackendArgs {
        backend: BackendKind::Embedded,
        data_dir: None,
        url: None,
        insecure: false,
    };
    Ok(crate::cmd::index::backend(&args)?.0)
}

/// `tools` and the tools of the configuration's MCP servers (started here; they stop when the
/// last tool is dropped). An MCP tool whose name another tool has is `<server>.<tool>`.
///
/// Every command gets its tools through here, once: so this is where the contradictions in the
/// tools' schemas are told, `warning: tool 'NAME': TEXT` on stderr for each ([`warn_schemas`]).
pub async fn with_mcp(
    mut tools: Vec<Arc<dyn Tool>>,
    config: &Config,
) -> anyhow::Result<Vec<Arc<dyn Tool>>> {
    if config.mcp_servers.is_empty() {
        warn_schemas(&tools);
        return Ok(tools);
    }
    // A toolplan.toml found in the current directory starts nothing without the user's opt-in.
    config.check_mcp_trusted()?;
    let taken: Vec<String> = tools.iter().map(|t| t.name().to_owned()).collect();
    // The servers run in process groups of their own, which a signal to toolplan does not reach.
    crate::cmd::mcp::kill_children_on_termination();
    let (servers, mcp) = tokio::select! {
        connected = toolplan_mcp::connect_all(&config.mcp_servers, &taken) => connected?,
        // Dropping what started kills it.
        _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted while the MCP servers were starting"),
    };
    for skipped in servers.iter().flat_map(|s| s.skipped_tools()) {
        eprintln!("warning: {skipped}");
    }
    tools.extend(mcp);
    warn_schemas(&tools);
    Ok(tools)
}

/// Prints `warning: tool 'NAME': TEXT` on stderr for each contradiction in a tool's parameter
/// schema: the reading the registry will keep ([`toolplan_core::reconcile`]), said once, where the
/// tools are loaded.
pub fn warn_schemas(tools: &[Arc<dyn Tool>]) {
    for tool in tools {
        for warning in toolplan_core::reconcile(tool.parameters()).warnings {
            eprintln!("warning: tool '{}': {warning}", tool.name());
        }
    }
}

/// The registry of a command's settings: its tool set, and the MCP servers of its configuration.
pub async fn registry(settings: &Settings) -> anyhow::Result<ToolRegistry> {
    let mut registry = ToolRegistry::new();
    registry.register_all(
        with_mcp(
            tools(settings.tools, &settings.config, None)?,
            &settings.config,
        )
        .await?,
    )?;
    Ok(registry)
}

/// One document tool per .md/.txt file of a folder.
pub fn documents(dir: &std::path::Path) -> anyhow::Result<Vec<Arc<dyn Tool>>> {
    Ok(toolplan_query::documents::load_dir(dir)?)
}

/// An engine over the tools of a command's settings, with its limits and run configuration.
pub async fn engine(settings: &Settings) -> anyhow::Result<Engine> {
    Ok(Engine::new(Arc::new(registry(settings).await?))
        .with_limits(settings.limits.clone())
        .with_config(settings.run.clone()))
}

/// Largest `--tool-defs` file read, in bytes.
pub const MAX_TOOL_DEFS_BYTES: u64 = 8 << 20;

/// The tools a `--tool-defs` file declares: each has a name, a description and a JSON Schema of its
/// arguments, and no implementation (calling one is an error that says so). Accepts an array of
/// `{name, description, parameters}`, OpenAI's `{"type": "function", "function": {...}}` and MCP's
/// `{name, description, inputSchema}`; an `outputSchema` (or `output`) is the tool's output schema.
pub fn declared(path: &std::path::Path) -> anyhow::Result<Vec<Arc<dyn Tool>>> {
    use anyhow::Context;
    use serde_json::Value;
    let size = std::fs::metadata(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .len();
    if size > MAX_TOOL_DEFS_BYTES {
        anyhow::bail!(
            "{} has {size} bytes; a tool definitions file may have at most {MAX_TOOL_DEFS_BYTES}",
            path.display()
        );
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let value: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    let Value::Array(items) = value else {
        anyhow::bail!(
            "{} must hold a JSON array of tool definitions",
            path.display()
        );
    };
    let mut tools: Vec<Arc<dyn Tool>> = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let item = match item {
            Value::Object(mut o) if o.get("type").and_then(Value::as_str) == Some("function") => {
                o.remove("function").unwrap_or(Value::Null)
            }
            other => other,
        };
        let Value::Object(mut o) = item else {
            anyhow::bail!(
                "tool definition #{i} in {} is not an object",
                path.display()
            );
        };
        let Some(Value::String(name)) = o.remove("name") else {
            anyhow::bail!(
                "tool definition #{i} in {} has no \"name\" string",
                path.display()
            );
        };
        let description = match o.remove("description") {
            Some(Value::String(d)) => d,
            _ => String::new(),
        };
        let parameters = o
            .remove("parameters")
            .or_else(|| o.remove("inputSchema"))
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
        // MCP's `outputSchema`, or `output`: what the tool returns, which plans are checked against.
        let output = o.remove("outputSchema").or_else(|| o.remove("output"));
        let message =
            format!("'{name}' is declared by --tool-defs only: it has no implementation to run");
        let tool = toolplan_core::FnTool::new(name, description, parameters, move |_, _| {
            let message = message.clone();
            async move { Err(toolplan_core::ToolError::failed(message)) }
        });
        tools.push(match output {
            Some(output) => Arc::new(tool.with_output_schema(output)),
            None => Arc::new(tool),
        });
    }
    Ok(tools)
}
