//! `toolplan template`: store, show and delete search templates (OpenSearch stored scripts) on the
//! chosen backend, for `toolplan dsl --template`.

use std::path::Path;

use anyhow::Context;
use serde_json::{Value, json};

use crate::Outcome;
use crate::args::{TemplateAction, TemplateArgs};
use crate::cmd::index::backend;
use crate::cmd::{MAX_INPUT_BYTES, input_limit, read_input};
use crate::output::outln;

/// Runs the subcommand.
pub async fn execute(args: TemplateArgs) -> anyhow::Result<Outcome> {
    let (backend, place) = backend(&args.backend)?;
    match args.action {
        TemplateAction::Put { id, source } => {
            let text = match source.strip_prefix('@') {
                Some(file) => {
                    read_input(Path::new(file), "template", input_limit(MAX_INPUT_BYTES)?)?
                }
                None => source,
            };
            let body: Value = serde_json::from_str(&text).context("the template is not JSON")?;
            let script = if body.get("script").is_some() {
                body
            } else {
                json!({"lang": "mustache", "source": body})
            };
            backend.put_script(&id, &script).await?;
            eprintln!("stored template {id} in {place}");
        }
        TemplateAction::Get { id } => match backend.get_script(&id).await? {
            Some(script) => outln!("{}", serde_json::to_string_pretty(&script)?)?,
            None => anyhow::bail!("no stored template '{id}' in {place}"),
        },
        TemplateAction::Delete { id } => {
            backend.delete_script(&id).await?;
            eprintln!("deleted template {id}");
        }
    }
    Ok(Outcome::Ok)
}
