//! `toolplan index`: create, load, list and delete indices of the embedded search backend.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use serde_json::{Value, json};
use toolplan_search::{EmbeddedBackend, SearchBackend};

use crate::Outcome;
use crate::args::{BackendArgs, IndexAction, IndexArgs};

/// The variable that names the data directory.
pub const DATA_DIR_ENV: &str = "TOOLPLAN_DATA_DIR";

/// The embedded backend's data directory: `--data-dir`, else `$TOOLPLAN_DATA_DIR`, else the
/// per-user data directory.
pub fn data_dir(args: &BackendArgs) -> anyhow::Result<PathBuf> {
    if let Some(dir) = &args.data_dir {
        return Ok(dir.clone());
    }
    if let Some(dir) = std::env::var_os(DATA_DIR_ENV).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    let base = match std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(
            std::env::var_os("HOME")
                .context("no --data-dir, TOOLPLAN_DATA_DIR or HOME to put indices in")?,
        )
        .join(".local/share"),
    };
    Ok(base.join("toolplan/indices"))
}

/// The backend the arguments choose.
pub fn backend(args: &BackendArgs) -> anyhow::Result<Arc<EmbeddedBackend>> {
    let dir = data_dir(args)?;
    Ok(Arc::new(EmbeddedBackend::open(&dir).with_context(
        || format!("cannot open the data directory {}", dir.display()),
    )?))
}

/// Reads a file, or standard input for `-`.
pub fn read_input(path: &Path, what: &str) -> anyhow::Result<String> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .with_context(|| format!("cannot read the {what} from standard input"))?;
        return Ok(text);
    }
    std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {what} file '{}'", path.display()))
}

/// Runs the subcommand.
pub async fn execute(args: IndexArgs) -> anyhow::Result<Outcome> {
    let backend = backend(&args.backend)?;
    match args.action {
        IndexAction::Create { name, mapping } => {
            let text = read_input(&mapping, "mapping")?;
            let mapping: Value = serde_json::from_str(&text)
                .with_context(|| format!("mapping file '{}' is not JSON", mapping.display()))?;
            backend.create_index(&name, &mapping).await?;
            let fields = backend.get_mapping(&name).await?;
            let n = toolplan_search::Mapping::parse(&fields)
                .map(|m| m.fields().len())
                .unwrap_or(0);
            eprintln!(
                "created index {name} ({n} fields) in {}",
                backend.dir().display()
            );
        }
        IndexAction::Bulk { file, index } => {
            let body = read_input(&file, "bulk")?;
            let summary = backend.bulk(index.as_deref(), &body).await?;
            eprintln!(
                "indexed {}, deleted {}, {} failed",
                summary.indexed,
                summary.deleted,
                summary.errors.len()
            );
            for e in &summary.errors {
                eprintln!("  - {e}");
            }
            if !summary.errors.is_empty() {
                anyhow::bail!(
                    "{} bulk actions failed (the others were applied)",
                    summary.errors.len()
                );
            }
        }
        IndexAction::List { json } => {
            let indices = backend.list_indices().await?;
            if json {
                let list: Vec<Value> = indices
                    .iter()
                    .map(|i| json!({"index": i.name, "docs": i.docs}))
                    .collect();
                println!("{}", Value::Array(list));
            } else if indices.is_empty() {
                eprintln!("no indices in {}", backend.dir().display());
            } else {
                let width = indices
                    .iter()
                    .map(|i| i.name.len())
                    .max()
                    .unwrap_or(5)
                    .max(5);
                println!("{:width$}  docs", "index");
                for i in &indices {
                    println!("{:width$}  {}", i.name, i.docs);
                }
            }
        }
        IndexAction::Delete { name } => {
            backend.delete_index(&name).await?;
            eprintln!("deleted index {name}");
        }
    }
    Ok(Outcome::Ok)
}
