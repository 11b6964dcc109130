//! `toolplan index`: create, load, list and delete indices of the chosen search backend, and
//! name them with aliases.

use std::sync::Arc;

use anyhow::Context;
use serde_json::Value;
use toolplan_search::{Auth, EmbeddedBackend, OpenSearchBackend, OpenSearchConfig, SearchBackend};

use crate::Outcome;
use crate::args::{BackendArgs, BackendKind, IndexAction, IndexArgs};
use crate::cmd::{MAX_BULK_BYTES, MAX_INPUT_BYTES, input_limit, read_input};
use crate::settings;

/// The backend the arguments choose, and a description for messages.
pub fn backend(args: &BackendArgs) -> anyhow::Result<(Arc<dyn SearchBackend>, String)> {
    match args.backend {
        BackendKind::Embedded => {
            let dir = settings::data_dir(args.data_dir.as_deref())?;
            let backend = EmbeddedBackend::open_with_limits(&dir, settings::search_limits()?)
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
            let text = read_input(&mapping, "mapping", input_limit(MAX_INPUT_BYTES)?)?;
            let mapping: Value = serde_json::from_str(&text)
                .with_context(|| format!("mapping file '{}' is not JSON", mapping.display()))?;
            backend.create_index(&name, &mapping).await?;
            let fields = backend.get_mapping(&name).await?;
            let n = toolplan_search::Mapping::parse(&fields)
                .map(|m| m.fields().len())
                .unwrap_or(0);
            eprintln!("created index {name} ({n} fields) in {place}");
        }
        IndexAction::Mapping { name, update } => {
            if let Some(update) = update {
                let text = read_input(&update, "mapping update", input_limit(MAX_INPUT_BYTES)?)?;
                let update: Value = serde_json::from_str(&text).with_context(|| {
                    format!("mapping update '{}' is not JSON", update.display())
                })?;
                backend.put_mapping(&name, &update).await?;
                eprintln!("updated the mapping of {name}");
            }
            let mapping = backend.get_mapping(&name).await?;
            println!("{}", serde_json::to_string_pretty(&mapping)?);
        }
        IndexAction::Bulk { file, index } => {
            let body = read_input(&file, "bulk", input_limit(MAX_BULK_BYTES)?)?;
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
        IndexAction::Alias {
            alias,
            index,
            filter,
            write_index,
            remove,
        } => {
            if remove {
                backend.delete_alias(&index, &alias).await?;
                eprintln!("removed alias {alias} from {index}");
            } else {
                let mut options = serde_json::json!({});
                if let Some(filter) = filter {
                    options["filter"] = serde_json::from_str(&filter)
                        .with_context(|| format!("--filter is not JSON: {filter}"))?;
                }
                if write_index {
                    options["is_write_index"] = Value::Bool(true);
                }
                backend.put_alias(&index, &alias, &options).await?;
                eprintln!("alias {alias} now names {index}");
            }
        }
        IndexAction::Aliases { index } => {
            let aliases = backend.get_aliases(&index).await?;
            println!("{}", serde_json::to_string_pretty(&aliases)?);
        }
    }
    Ok(Outcome::Ok)
}
