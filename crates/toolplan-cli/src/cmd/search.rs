//! `toolplan search`: run a query DSL body on an index and print the OpenSearch-shaped response.

use std::path::Path;

use anyhow::Context;
use serde_json::{Value, json};
use toolplan_search::{Mapping, check};

use crate::Outcome;
use crate::args::SearchArgs;
use crate::cmd::index::backend;
use crate::cmd::{MAX_INPUT_BYTES, input_limit, read_input};

/// Runs the subcommand.
pub async fn execute(args: SearchArgs) -> anyhow::Result<Outcome> {
    let (backend, _) = backend(&args.backend)?;
    let body: Value = match args.dsl.as_deref() {
        None => json!({"query": {"match_all": {}}}),
        Some(text) => {
            let text = match text.strip_prefix('@') {
                Some(file) => read_input(Path::new(file), "DSL", input_limit(MAX_INPUT_BYTES)?)?,
                None => text.to_owned(),
            };
            serde_json::from_str(&text).context("the DSL is not valid JSON")?
        }
    };
    let mut body = body;
    if let Some(q) = &args.q {
        toolplan_search::backend::apply_q(&mut body, q, None);
    }
    // Valid DSL runs as OpenSearch would run it; what is probably a mistake is said on stderr.
    if !toolplan_search::backend::is_multi_index(&args.index) {
        let mapping = Mapping::parse(&backend.get_mapping(&args.index).await?)?;
        for finding in check::check(&mapping, &body) {
            eprintln!("warning: {finding}");
        }
    }
    let filter = match &args.filter_path {
        Some(spec) => Some(toolplan_search::filter_path::FilterPath::parse(
            &Value::String(spec.clone()),
            crate::settings::search_limits()?.max_filter_paths,
        )?),
        None => None,
    };
    let mut response = backend.search(&args.index, &body).await?;
    if let Some(filter) = filter {
        response = filter.apply(&response);
    }
    println!("{}", serde_json::to_string_pretty(&response)?);
    Ok(Outcome::Ok)
}
