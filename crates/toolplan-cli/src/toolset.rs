//! The tool sets the CLI can run plans against.

use std::sync::Arc;

use toolplan_core::{Engine, Limits, RunConfig, Tool, ToolRegistry, demo};

use crate::args::ToolSet;

/// The registry of a tool set.
pub fn registry(set: ToolSet) -> ToolRegistry {
    match set {
        ToolSet::Demo => demo::registry(),
        ToolSet::None => ToolRegistry::new(),
    }
}

/// The tools of a set, to hand to an agent.
pub fn tools(set: ToolSet) -> Vec<Arc<dyn Tool>> {
    match set {
        ToolSet::Demo => demo::tools(),
        ToolSet::None => Vec::new(),
    }
}

/// One document tool per .md/.txt file of a folder.
pub fn documents(dir: &std::path::Path) -> anyhow::Result<Vec<Arc<dyn Tool>>> {
    Ok(toolplan_query::documents::load_dir(dir)?)
}

/// An engine over a tool set.
pub fn engine(set: ToolSet, limits: Limits, config: RunConfig) -> Engine {
    Engine::new(Arc::new(registry(set)))
        .with_limits(limits)
        .with_config(config)
}
