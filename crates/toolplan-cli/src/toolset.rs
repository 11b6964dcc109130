//! The tool sets the CLI can run plans against.

use std::sync::Arc;

use toolplan_core::{Engine, Limits, RunConfig, Tool, ToolRegistry, demo};
use toolplan_llm::ChatModel;
use toolplan_search::tools::QueryPlanning;
use toolplan_search::{DslPlanner, SearchBackend};

use crate::args::{BackendArgs, BackendKind, ToolSet};

/// The tools of a set. The search set opens the embedded backend in the default data directory;
/// with a model it also gets `query_planning`, over the same backend.
pub fn tools(
    set: ToolSet,
    model: Option<&Arc<dyn ChatModel>>,
) -> anyhow::Result<Vec<Arc<dyn Tool>>> {
    Ok(match set {
        ToolSet::Demo => demo::tools(),
        ToolSet::None => Vec::new(),
        ToolSet::Search => {
            let backend = search_backend()?;
            let mut tools = toolplan_search::tools::backend_tools(Arc::clone(&backend));
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

/// The registry of a tool set.
pub fn registry(set: ToolSet) -> anyhow::Result<ToolRegistry> {
    let mut registry = ToolRegistry::new();
    registry.register_all(tools(set, None)?)?;
    Ok(registry)
}

/// One document tool per .md/.txt file of a folder.
pub fn documents(dir: &std::path::Path) -> anyhow::Result<Vec<Arc<dyn Tool>>> {
    Ok(toolplan_query::documents::load_dir(dir)?)
}

/// An engine over a tool set.
pub fn engine(set: ToolSet, limits: Limits, config: RunConfig) -> anyhow::Result<Engine> {
    Ok(Engine::new(Arc::new(registry(set)?))
        .with_limits(limits)
        .with_config(config))
}
