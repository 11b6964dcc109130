//! `toolplan dsl`: a question → OpenSearch query DSL for an index, by a model; optionally run.

use std::path::Path;

use anyhow::Context;
use serde_json::{Map, Value, json};
use toolplan_search::{DslPlanner, PlanParameters};

use crate::Outcome;
use crate::args::DslArgs;
use crate::cmd::ask::connect_model;
use crate::cmd::index::backend;
use crate::cmd::{MAX_INPUT_BYTES, cancel_on_interrupt, input_limit, plural, read_input};
use crate::output::outln;
use crate::settings::Settings;

/// Runs the subcommand.
pub async fn execute(args: DslArgs, settings: Settings) -> anyhow::Result<Outcome> {
    let config = &settings.config;
    let (backend, _) = backend(&args.backend)?;
    // The index and the parameters are checked before a model loads.
    backend.get_mapping(&args.index).await?;
    let params = parameters(&args)?;
    let (_spec, model, spinner) = connect_model(
        args.model.as_deref(),
        args.base_url.as_deref(),
        config,
        !args.json,
    )
    .await?;
    if let Some(s) = &spinner {
        s.set_message("writing the query…");
    }
    let planner = DslPlanner::new(model, std::sync::Arc::clone(&backend))
        .with_max_repairs(args.max_repairs)
        .with_autofix(!args.no_autofix)
        .with_keyword_values(!args.no_values)
        .with_observations(!args.no_observe)
        .with_amendments(!args.no_amend)
        .with_parameters(&params)?;
    let plan = planner
        .plan(
            &args.question,
            &args.index,
            &PlanParameters::default(),
            &cancel_on_interrupt(),
        )
        .await;
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    let plan = plan?;
    let response = if args.execute {
        Some(backend.search(&args.index, &plan.dsl).await?)
    } else {
        None
    };
    if args.json {
        let attempts: Vec<Value> = plan
            .attempts
            .iter()
            .map(|a| json!({"reply": a.reply, "dsl": a.dsl, "fixes": a.fixes, "problems": a.problems}))
            .collect();
        let template = plan.template.as_ref().map(|t| {
            json!({"reply": t.reply, "selected": t.selected, "template": t.template, "note": t.note})
        });
        let mut out = json!({
            "dsl": plan.dsl,
            "template": template,
            "attempts": attempts,
            "fallback": plan.fallback,
            "llm_calls": plan.llm_calls,
            "input_tokens": plan.input_tokens,
            "output_tokens": plan.output_tokens,
        });
        if let (Some(r), Some(obj)) = (response, out.as_object_mut()) {
            obj.insert("response".into(), r);
        }
        outln!("{out}")?;
        return Ok(Outcome::Ok);
    }
    if let Some(t) = &plan.template {
        match (&t.selected, &t.note) {
            (_, Some(note)) => eprintln!("template: {note}"),
            (Some(id), None) => eprintln!("template: {id}"),
            (None, None) => {}
        }
    }
    for (i, a) in plan.attempts.iter().enumerate() {
        for f in &a.fixes {
            eprintln!("attempt {}: corrected {f}", i + 1);
        }
        for p in &a.problems {
            eprintln!("attempt {}: {p}", i + 1);
        }
    }
    if let Some(reason) = &plan.fallback {
        eprintln!("warning: using the fallback query: {reason}");
    }
    outln!("{}", serde_json::to_string_pretty(&plan.dsl)?)?;
    if let Some(r) = response {
        outln!("{}", serde_json::to_string_pretty(&r)?)?;
    }
    eprintln!(
        "({} model call{}, {} input / {} output tokens)",
        plan.llm_calls,
        plural(plan.llm_calls as usize),
        plan.input_tokens,
        plan.output_tokens
    );
    Ok(Outcome::Ok)
}

/// The planner's parameters from the command line: --param NAME=VALUE (VALUE may be @FILE), then
/// the dedicated options, which win.
fn parameters(args: &DslArgs) -> anyhow::Result<PlanParameters> {
    let mut obj = Map::new();
    for (name, value) in &args.params {
        let value = match value.strip_prefix('@') {
            Some(file) => read_input(Path::new(file), name, input_limit(MAX_INPUT_BYTES)?)?,
            None => value.clone(),
        };
        obj.insert(name.clone(), Value::String(value));
    }
    if !args.query_fields.is_empty() {
        obj.insert("query_fields".into(), json!(args.query_fields));
    }
    if let Some(id) = &args.embedding_model_id {
        obj.insert("embedding_model_id".into(), json!(id));
    }
    if let Some(q) = &args.fallback_query {
        let q: Value = serde_json::from_str(q).context("--fallback-query is not JSON")?;
        obj.insert("fallback_query".into(), q);
    }
    if let Some(f) = &args.response_filter {
        obj.insert("response_filter".into(), json!(f));
    }
    if !args.templates.is_empty() {
        let list: Vec<Value> = args
            .templates
            .iter()
            .map(|(id, d)| json!({"template_id": id, "template_description": d}))
            .collect();
        obj.insert("search_templates".into(), Value::Array(list));
        obj.entry("generation_type")
            .or_insert_with(|| json!("user_templates"));
    }
    Ok(PlanParameters::from_json(&obj)?)
}
