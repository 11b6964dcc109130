//! `toolplan index`: create, load, list and delete indices of the chosen search backend.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use serde_json::Value;
use toolplan_search::{
    Auth, EmbeddedBackend, OpenSearchBackend, OpenSearchConfig, SearchBackend, SearchLimits,
};

use crate::Outcome;
use crate::args::{BackendArgs, BackendKind, IndexAction, IndexArgs};
use crate::cmd::read_input;

/// The variable that names the data directory.
pub const DATA_DIR_ENV: &str = "TOOLPLAN_DATA_DIR";

/// The variable that changes the embedded backend's search limits: `name=value` pairs separated by
/// commas (`timeout=10s,max_result_window=50000`; see `toolplan_search::limits`).
pub const SEARCH_LIMITS_ENV: &str = "TOOLPLAN_SEARCH_LIMITS";

/// The default search limits with `$TOOLPLAN_SEARCH_LIMITS` applied.
pub fn search_limits() -> anyhow::Result<SearchLimits> {
    let mut limits = SearchLimits::default();
    if let Some(spec) = std::env::var_os(SEARCH_LIMITS_ENV) {
        let spec = spec.to_string_lossy();
        limits
            .apply_overrides(&spec)
            .with_context(|| format!("in {SEARCH_LIMITS_ENV}"))?;
    }
    Ok(limits)
}

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

/// The backend the arguments choose, and a description for messages.
pub fn backend(args: &BackendArgs) -> anyhow::Result<(Arc<dyn SearchBackend>, String)> {
    match args.backend {
        BackendKind::Embedded => {
            let dir = data_dir(args)?;
            let backend = EmbeddedBackend::open_with_limits(&dir, search_limits()?)
                .with_context(|| format!("cannot open the data directory {}", dir.display()))?;
            Ok((Arc::new(backend), format!("{}", dir.display())))
        }
        BackendKind::Opensearch => {
            let env = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
            let url = args
                .url
                .clone()
                .or_else(|| env("OPENSEARCH_URL"))
                .context("--backend opensearch needs --url (or OPENSEARCH_URL)")?;
            let mut config = OpenSearchConfig::new(&url);
            config.accept_invalid_certs = args.insecure;
            config.auth = match (env("OPENSEARCH_API_KEY"), env("OPENSEARCH_USER")) {
                (Some(key), _) => Auth::ApiKey(key),
                (None, Some(user)) => Auth::Basic {
                    user,
                    password: env("OPENSEARCH_PASSWORD").unwrap_or_default(),
                },
                (None, None) => Auth::None,
            };
            Ok((Arc::new(OpenSearchBackend::new(config)?), url))
        }
    }
}

/// Runs the subcommand.
pub async fn execute(args: IndexArgs) -> anyhow::Result<Outcome> {
    let (backend, place) = backend(&args.backend)?;
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
            eprintln!("created index {name} ({n} fields) in {place}");
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
            let listing = backend.list_indices_checked().await?;
            for bad in &listing.unreadable {
                eprintln!(
                    "warning: index {} cannot be read and is left out: {}",
                    bad.name, bad.reason
                );
            }
            let indices = listing.indices;
            if json {
                let list: Vec<Value> = indices.iter().map(|i| i.to_json()).collect();
                println!("{}", Value::Array(list));
            } else if indices.is_empty() {
                eprintln!("no indices in {place}");
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
