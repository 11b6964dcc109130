//! `toolplan query-plan`: run a query plan (LlamaIndex's format) and print the root's answer.

use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use toolplan_core::{Observer, RunControl};
use toolplan_query::{NodeLog, QueryPlanner, QueryRun, SynthesisMode, Synthesizer};

use crate::Outcome;
use crate::args::{QueryPlanArgs, SynthesizerArg};
use crate::cmd::ask::connect_model;
use crate::cmd::{cancel_on_interrupt, plural, print_problems, read_plan, stdin_text};
use crate::output::outln;
use crate::settings::Settings;
use crate::toolset;

/// Runs the subcommand.
pub async fn execute(args: QueryPlanArgs, settings: Settings) -> anyhow::Result<Outcome> {
    let config = &settings.config;
    // A plan piped in runs while it is written (unless --no-stream): nothing to compile first.
    let streamed = args.input.plan.as_os_str() == "-" && !args.no_stream;
    let text = if streamed {
        String::new()
    } else {
        read_plan(&args.input.plan, settings.limits.max_plan_bytes)?
    };
    let mut tools = toolset::tools(settings.tools, &settings.config, None)?;
    if let Some(dir) = &args.docs {
        tools.extend(toolset::documents(dir)?);
    }
    let tools = toolset::with_mcp(tools, config).await?;
    let mode = match args.synthesizer {
        SynthesizerArg::Compact => SynthesisMode::Compact,
        SynthesizerArg::TreeSummarize => SynthesisMode::TreeSummarize,
        SynthesizerArg::Concat => SynthesisMode::Concat,
    };

    // The plan is compiled before a model loads, so a plan with mistakes fails fast. A compiled plan
    // names its tools, so it runs on the planner built below over the same tools.
    let plan = if streamed {
        None
    } else {
        let checker = QueryPlanner::new(tools.clone(), Synthesizer::concat())?
            .with_limits(settings.limits.clone());
        match checker.compile(&text) {
            Ok(plan) => Some(plan),
            Err(invalid) => {
                print_problems(&args.input.plan, &invalid);
                return Ok(Outcome::InvalidPlan);
            }
        }
    };
    let (model_name, synthesizer) = if mode == SynthesisMode::Concat {
        (Value::Null, Synthesizer::concat())
    } else {
        let (spec, model, spinner) = connect_model(
            args.model.as_deref(),
            args.base_url.as_deref(),
            config,
            !args.json,
        )
        .await?;
        if let Some(s) = spinner {
            s.finish_and_clear();
        }
        (json!(spec.to_string()), Synthesizer::new(mode, Some(model)))
    };
    let planner = QueryPlanner::new(tools, synthesizer.with_context_budget(args.context_budget))?
        .with_config(settings.run.clone())
        .with_limits(settings.limits.clone());

    let cancel = cancel_on_interrupt();
    let nodes = Arc::new(match &plan {
        Some(plan) => NodeLog::new(plan, args.verbose),
        None => NodeLog::streamed(args.verbose),
    });
    let control = RunControl {
        cancel,
        observer: Some(Arc::clone(&nodes) as Arc<dyn Observer>),
        ..RunControl::default()
    };
    let result = match &plan {
        Some(plan) => planner.run(plan, control).await,
        None => {
            let trouble = Arc::new(Mutex::new(None));
            let text = nodes.follow(stdin_text(Arc::clone(&trouble)), &settings.limits);
            let result = planner.run_streamed(text, control).await;
            // A read error or text that is not UTF-8 ends the text; that, not the plan it cut, is
            // the error.
            if let Some(e) = trouble.lock().ok().and_then(|mut t| t.take()) {
                return Err(e);
            }
            match result {
                Ok(result) => result,
                Err(invalid) => {
                    print_problems(&args.input.plan, &invalid);
                    return Ok(Outcome::InvalidPlan);
                }
            }
        }
    };
    print_result(&args, &result, &nodes, mode, model_name)
}

/// Prints the root's answer (or the JSON report) of a finished run.
fn print_result(
    args: &QueryPlanArgs,
    result: &QueryRun,
    nodes: &NodeLog,
    mode: SynthesisMode,
    model_name: Value,
) -> anyhow::Result<Outcome> {
    let answer = result.answer_text();
    let node_count = result.nodes.len();
    if args.json {
        let answers = nodes.answers();
        let mut per_node = Map::new();
        for record in &result.run.steps {
            let query = result
                .nodes
                .iter()
                .find(|n| n.id == record.id)
                .map(|n| n.query.clone());
            let mut node = json!({
                "query": query,
                "tool": record.tool,
                "status": record.status.as_str(),
                "written_ms": record.written.map(|d| d.as_secs_f64() * 1000.0),
                "started_ms": record.started.map(|d| d.as_secs_f64() * 1000.0),
                "finished_ms": record.finished.as_secs_f64() * 1000.0,
            });
            if let Some(obj) = node.as_object_mut() {
                if let Some(a) = answers.get(&record.id) {
                    obj.insert("answer".into(), a.clone());
                }
                if let Some(e) = &record.error {
                    obj.insert("error".into(), json!(e));
                }
            }
            per_node.insert(record.id.clone(), node);
        }
        let mut out = json!({
            "root": result.root,
            "nodes": per_node,
            "waves": result.run.to_json()["waves"],
            "tool_calls": result.tool_calls(),
            "llm_calls": result.llm.calls,
            "input_tokens": result.llm.input_tokens,
            "output_tokens": result.llm.output_tokens,
            "elapsed_ms": result.run.elapsed.as_secs_f64() * 1000.0,
            "synthesizer": mode.as_str(),
            "model": model_name,
        });
        if let Some(obj) = out.as_object_mut() {
            match &answer {
                Ok(a) => obj.insert("answer".into(), json!(a)),
                Err(e) => obj.insert("error".into(), json!(e.to_string())),
            };
        }
        outln!("{out}")?;
        return Ok(Outcome::Ok);
    }
    let answer = answer?;
    outln!("{}", answer.trim())?;
    eprintln!(
        "({} node{}, {} tool call{}, {} model call{}, {} input / {} output tokens, {:.1}s)",
        node_count,
        plural(node_count),
        result.tool_calls(),
        plural(result.tool_calls()),
        result.llm.calls,
        plural(result.llm.calls as usize),
        result.llm.input_tokens,
        result.llm.output_tokens,
        result.run.elapsed.as_secs_f64()
    );
    Ok(Outcome::Ok)
}
