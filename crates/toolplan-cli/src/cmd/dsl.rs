//! `toolplan dsl`: a question → OpenSearch query DSL for an index, by a model; optionally run.

use std::collections::HashMap;

use anyhow::Context;
use serde_json::{Value, json};
use toolplan_search::DslPlanner;

use crate::Outcome;
use crate::args::DslArgs;
use crate::cmd::ask::connect_model;
use crate::cmd::index::backend;
use crate::cmd::{cancel_on_interrupt, plural};
use crate::config::Config;

/// Runs the subcommand.
pub async fn execute(args: DslArgs) -> anyhow::Result<Outcome> {
    let (config, _) = Config::load(args.config.as_deref())?;
    let (backend, _) = backend(&args.backend)?;
    // The index is checked before a model loads.
    backend.get_mapping(&args.index).await?;
    let (_spec, model, spinner) = connect_model(
        args.model.as_deref(),
        args.base_url.as_deref(),
        &config,
        !args.json,
    )
    .await?;
    if let Some(s) = &spinner {
        s.set_message("writing the query…");
    }
    let mut planner =
        DslPlanner::new(model, std::sync::Arc::clone(&backend)).with_max_repairs(args.max_repairs);
    if let Some(q) = &args.fallback_query {
        planner = planner
            .with_fallback_query(serde_json::from_str(q).context("--fallback-query is not JSON")?);
    }
    let mut extra = HashMap::new();
    if let Some(id) = &args.embedding_model_id {
        extra.insert("embedding_model_id".to_owned(), id.clone());
    }
    let plan = planner
        .plan(
            &args.question,
            &args.index,
            &args.query_fields,
            &extra,
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
            .map(|a| json!({"reply": a.reply, "dsl": a.dsl, "problems": a.problems}))
            .collect();
        let mut out = json!({
            "dsl": plan.dsl,
            "attempts": attempts,
            "fallback": plan.fallback,
            "llm_calls": plan.llm_calls,
            "input_tokens": plan.input_tokens,
            "output_tokens": plan.output_tokens,
        });
        if let (Some(r), Some(obj)) = (response, out.as_object_mut()) {
            obj.insert("response".into(), r);
        }
        println!("{out}");
        return Ok(Outcome::Ok);
    }
    for (i, a) in plan.attempts.iter().enumerate() {
        for p in &a.problems {
            eprintln!("attempt {}: {p}", i + 1);
        }
    }
    if let Some(reason) = &plan.fallback {
        eprintln!("warning: using the fallback query: {reason}");
    }
    println!("{}", serde_json::to_string_pretty(&plan.dsl)?);
    if let Some(r) = response {
        println!("{}", serde_json::to_string_pretty(&r)?);
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
