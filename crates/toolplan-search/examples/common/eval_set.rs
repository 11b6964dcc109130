//! The DSL evaluation set, for the examples that use it (`dsl_eval`, `dsl_observe`): the set file
//! read, and its indices loaded into a fresh embedded backend.

use std::path::Path;

use serde_json::Value;
use toolplan_search::{EmbeddedBackend, SearchBackend};

/// The error the examples return.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// A JSON file, read.
fn read_json(path: &Path) -> Result<Value, Error> {
    Ok(serde_json::from_str(&std::fs::read_to_string(path)?)?)
}

/// The evaluation set at `path` and an embedded backend in `dir` holding its indices (each
/// created from its mapping file and bulk-loaded from its data file, both beside the set).
pub async fn load(path: &Path, dir: &Path) -> Result<(Value, EmbeddedBackend), Error> {
    let base = path.parent().unwrap_or(Path::new("."));
    let set = read_json(path)?;
    let backend = EmbeddedBackend::open(dir)?;
    for (name, files) in set["indices"].as_object().ok_or("no indices")? {
        let mapping = read_json(&base.join(files["mapping"].as_str().ok_or("mapping")?))?;
        backend.create_index(name, &mapping).await?;
        let data = std::fs::read_to_string(base.join(files["data"].as_str().ok_or("data")?))?;
        backend.bulk(Some(name), &data).await?;
    }
    Ok((set, backend))
}
