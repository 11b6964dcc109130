//! `toolplan ask`: an agent answers a question with the chosen model and tools, through a plan when
//! planning is on.

use std::io::IsTerminal;
use std::time::Duration;

use serde_json::json;
use std::sync::Arc;
use toolplan_agent::{Agent, AgentError, Planning, Proposal, Record};

use indicatif::ProgressBar;
use toolplan_llm::{CallPolicy, ChatModel, ConnectOptions, LlmError, Message, ModelSpec, Role};
use toolplan_query::{QueryPlanTool, QueryPlanner, Synthesizer};

use crate::Outcome;
use crate::args::{AskArgs, PlannerArg};
use crate::cmd::{cancel_on_interrupt, plural};
use crate::config::Config;
use crate::output::outln;
use crate::settings::Settings;
use crate::toolset;

/// The instructions the agent always gets; the config file's `instructions` and `--instructions`
/// are added after them.
pub const DEFAULT_INSTRUCTIONS: &str = "You are a helpful assistant. Use the tools to get facts; do not guess them. \
Answer the user's question briefly, using the tool results.";

/// The agent's planning mode from the flags: `--plan-only` offers the planner alone (even when the
/// config turns planning off), `--answer-in-plan` gives plans an answer field when a planner is
/// offered.
fn planning_mode(offered: bool, plan_only: bool, answer_in_plan: bool) -> Planning {
    match (plan_only, offered, answer_in_plan) {
        (true, _, false) => Planning::Only,
        (true, _, true) => Planning::OnlyWithAnswer,
        (false, true, false) => Planning::Offered,
        (false, true, true) => Planning::OfferedWithAnswer,
        (false, false, _) => Planning::Off,
    }
}

/// How `ask` plans: the planning flags as given, or, with the local model and none of `--plan-only`,
/// `--plan-beside` and `--no-plan`, what scores best with it on the agent bench: only the planner,
/// plans that bring their answer, and a plan that brings none answered with its results
/// (`--plan-only --answer-in-plan --results-answer`; bench/README.md). Offered beside the tools,
/// the local model calls them one round trip at a time and seldom plans. A hosted model keeps the
/// planner beside the tools, choosing for itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PlanFlags {
    /// Only the planner is offered.
    plan_only: bool,
    /// Plans have an `answer` field.
    answer_in_plan: bool,
    /// A plan that succeeds without an answer of its own answers with its results.
    results_answer: bool,
}

impl PlanFlags {
    /// The flags `args` give for `spec`, when planning is on (`planning`).
    fn of(args: &AskArgs, spec: &ModelSpec, planning: bool) -> PlanFlags {
        let chosen = args.plan_only || args.plan_beside || args.no_plan;
        if planning && !chosen && matches!(spec, ModelSpec::Local(_)) {
            return PlanFlags {
                plan_only: true,
                answer_in_plan: true,
                results_answer: true,
            };
        }
        PlanFlags {
            plan_only: args.plan_only,
            answer_in_plan: args.answer_in_plan,
            results_answer: args.results_answer,
        }
    }
}

/// The system instructions: toolplan's own, then the config file's, then the command line's, each
/// block apart (the builder adds the planner's after them). A user's house rules never remove what
/// toolplan tells the model about tools and plans.
fn instructions(config: Option<&str>, flag: Option<&str>) -> String {
    [Some(DEFAULT_INSTRUCTIONS), config, flag]
        .into_iter()
        .flatten()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Runs the subcommand.
pub async fn execute(args: AskArgs, settings: Settings) -> anyhow::Result<Outcome> {
    let config = &settings.config;
    let (spec, model, spinner) = connect_model(
        args.model.as_deref(),
        args.base_url.as_deref(),
        config,
        !args.json,
    )
    .await?;
    // With the search tools, questions become DSL through the agent's own model.
    let mut tools = toolset::tools(settings.tools, &settings.config, Some(&model))?;
    if let Some(dir) = &args.docs {
        tools.extend(toolset::documents(dir)?);
    }
    if let Some(file) = &args.tool_defs {
        tools.extend(toolset::declared(file)?);
    }
    let tools = toolset::with_mcp(tools, config).await?;
    let query_planner = args.planner == PlannerArg::QueryPlan;
    let planning = !query_planner && !args.no_plan && config.planning.unwrap_or(true);

    let flags = PlanFlags::of(&args, &spec, planning);

    let run_config = settings.run.clone();
    let mut builder = Agent::builder("toolplan")
        .model(Arc::clone(&model))
        .instructions(instructions(
            config.instructions.as_deref(),
            args.instructions.as_deref(),
        ))
        .planning(planning_mode(
            planning,
            flags.plan_only,
            flags.answer_in_plan,
        ))
        .max_turns(args.max_turns.or(config.max_turns).unwrap_or(8))
        .repairs(args.repairs)
        .stream_plans(!args.no_stream)
        .compact_answer(args.compact_answer)
        .results_answer(flags.results_answer)
        .run_config(run_config.clone())
        .limits(settings.limits.clone());
    if let Some(n) = config.limits.max_result_bytes {
        builder = builder.max_result_bytes(n);
    }
    // A step limit the user set holds for the model's plans too (else the agent's own default).
    if let Some(n) = config.limits.max_steps {
        builder = builder.max_plan_steps(n);
    }
    if let Some(listing) = args.plan_listing {
        builder = builder.plan_listing(listing.into());
    }
    if query_planner {
        // The agent gets query planning as its one tool; branches are written by the same model.
        let planner = QueryPlanner::new(tools, Synthesizer::compact(Arc::clone(&model)))?
            .with_config(run_config.clone());
        builder = builder.tool(Arc::new(
            QueryPlanTool::new(Arc::new(planner)).verbose(args.verbose),
        ));
    } else {
        builder = builder.tools(tools);
    }
    let agent = builder.build()?;

    if let Some(s) = &spinner {
        s.set_message("thinking…");
    }
    let cancel = cancel_on_interrupt();
    if args.dry_run {
        let result = agent.propose(&args.question, &cancel).await;
        if let Some(s) = &spinner {
            s.finish_and_clear();
        }
        return print_proposal(result, &args, &spec, planning);
    }
    let result = agent.interact_with(&args.question, &cancel).await;
    if let Some(s) = &spinner {
        s.finish_and_clear();
    }
    let interaction = match result {
        Ok(i) => i,
        Err(AgentError::MaxTurns { record, messages }) => {
            if args.verbose {
                print_conversation(&messages);
            }
            let message = format!(
                "no answer after {} turns ({} model calls, {} tool calls); raise --max-turns or simplify the question",
                record.turns, record.llm_calls, record.tool_calls
            );
            if args.json {
                // What the attempt cost still goes to stdout, for scripts that count it.
                print_failure(&message, &spec, planning, false, Some(&record))?;
            }
            anyhow::bail!(message)
        }
        Err(e) => {
            if args.verbose {
                print_cut_reply(&e);
            }
            if args.json {
                print_failure(&e.to_string(), &spec, planning, false, e.record())?;
            }
            return Err(e.into());
        }
    };
    if args.verbose {
        print_conversation(&interaction.messages);
    }
    let r = &interaction.record;
    if args.json {
        let head =
            json!({"answer": interaction.answer, "model": spec.to_string(), "planning": planning});
        outln!("{}", with_record(head, r))?;
    } else {
        outln!("{}", interaction.answer.trim())?;
        eprintln!(
            "({} model call{}, {} input / {} output tokens, {} tool call{}, {} plan{}, {:.1}s)",
            r.llm_calls,
            plural(r.llm_calls),
            r.input_tokens,
            r.output_tokens,
            r.tool_calls,
            plural(r.tool_calls),
            r.plans,
            plural(r.plans),
            r.elapsed.as_secs_f64()
        );
    }
    Ok(Outcome::Ok)
}

/// Prints what the model asked for in a dry run: its calls (each plan's steps, and the problems that
/// would stop it) or its answer.
fn print_proposal(
    result: Result<Proposal, AgentError>,
    args: &AskArgs,
    spec: &ModelSpec,
    planning: bool,
) -> anyhow::Result<Outcome> {
    let proposal = match result {
        Ok(p) => p,
        Err(e) => {
            if args.verbose {
                print_cut_reply(&e);
            }
            if args.json {
                print_failure(&e.to_string(), spec, planning, true, e.record())?;
            }
            return Err(e.into());
        }
    };
    let r = &proposal.record;
    if args.json {
        let calls: Vec<serde_json::Value> = proposal
            .calls
            .iter()
            .map(|c| json!({"name": c.name, "arguments": c.arguments}))
            .collect();
        let answer = proposal.calls.is_empty().then_some(&proposal.text);
        let head = json!({"answer": answer, "calls": calls, "plan_problems": proposal.plan_problems,
            "dry_run": true, "model": spec.to_string(), "planning": planning});
        outln!("{}", with_record(head, r))?;
        return Ok(Outcome::Ok);
    }
    if proposal.calls.is_empty() {
        outln!("{}", proposal.text.trim())?;
    }
    let mut problems = proposal.plan_problems.iter();
    for call in &proposal.calls {
        if call.name != toolplan_core::EXECUTE_TOOL_PLAN {
            outln!("{}({})", call.name, call.arguments)?;
            continue;
        }
        outln!("execute_tool_plan:")?;
        let steps = call.arguments.get("steps").and_then(|s| s.as_array());
        for step in steps.into_iter().flatten() {
            let field = |k: &str| step.get(k).and_then(|v| v.as_str()).unwrap_or("?");
            let arguments = step.get("arguments").cloned().unwrap_or_default();
            outln!("  {} = {}({})", field("id"), field("tool"), arguments)?;
        }
        for problem in problems.next().into_iter().flatten() {
            outln!("  problem: {problem}")?;
        }
    }
    eprintln!(
        "(dry run: nothing was run; {} model call{}, {} input / {} output tokens, {:.1}s)",
        r.llm_calls,
        plural(r.llm_calls),
        r.input_tokens,
        r.output_tokens,
        r.elapsed.as_secs_f64()
    );
    Ok(Outcome::Ok)
}

/// Prints the one JSON object of an ask that ended without an answer: the error, and what it cost
/// until then where that is known.
fn print_failure(
    error: &str,
    spec: &ModelSpec,
    planning: bool,
    dry_run: bool,
    record: Option<&Record>,
) -> anyhow::Result<()> {
    let mut head =
        json!({"answer": null, "error": error, "model": spec.to_string(), "planning": planning});
    if dry_run {
        head["dry_run"] = json!(true);
    }
    let head = match record {
        Some(record) => with_record(head, record),
        None => head,
    };
    outln!("{head}")?;
    Ok(())
}

/// `head` (an object) with the record's fields added: what `--json` prints.
fn with_record(mut head: serde_json::Value, record: &Record) -> serde_json::Value {
    if let (Some(obj), Ok(serde_json::Value::Object(rec))) =
        (head.as_object_mut(), serde_json::to_value(record))
    {
        obj.extend(rec);
    }
    head
}

/// Connects the model the command line or the configuration names (default: the local model). On
/// a terminal (and with `spinner`), a spinner shows while it loads; it is returned to go on showing
/// progress.
pub async fn connect_model(
    model: Option<&str>,
    base_url: Option<&str>,
    config: &Config,
    spinner: bool,
) -> anyhow::Result<(ModelSpec, Arc<dyn ChatModel>, Option<ProgressBar>)> {
    let spec_text = model
        .map(str::to_owned)
        .or(config.model.clone())
        .unwrap_or_else(|| "local".into());
    let spec: ModelSpec = spec_text.parse()?;
    let mut policy = CallPolicy::default();
    if let Some(t) = config.limits.model_timeout()? {
        policy.timeout = t;
    }
    if let Some(n) = config.limits.max_response_bytes {
        policy.max_response_bytes = n;
    }
    // A base_url from a toolplan.toml found in the current directory must be trusted (or local).
    let base_url = match base_url {
        Some(url) => Some(url.to_owned()),
        None => config.trusted_base_url()?.map(str::to_owned),
    };
    let options = ConnectOptions { base_url, policy };
    let spinner = (spinner && std::io::stderr().is_terminal()).then(|| {
        let s = ProgressBar::new_spinner();
        s.set_message(format!("connecting to {spec}…"));
        s.enable_steady_tick(Duration::from_millis(100));
        s
    });
    match toolplan_llm::connect(&spec, &options).await {
        Ok(m) => Ok((spec, m, spinner)),
        Err(e) => {
            if let Some(s) = &spinner {
                s.finish_and_clear();
            }
            Err(e.into())
        }
    }
}

/// With `--verbose`: a reply cut off at the token limit that could not be used, whole, on standard
/// error (the error message shows only how it ended).
fn print_cut_reply(error: &AgentError) {
    if let AgentError::Llm {
        error: LlmError::CutOff { reply, tokens, .. },
        ..
    } = error
    {
        eprintln!("assistant (cut off at {tokens} tokens): {reply}");
    }
}

/// Prints the conversation (tool calls and results) on standard error.
fn print_conversation(messages: &[Message]) {
    for m in messages {
        match m.role {
            Role::System => {}
            Role::User => eprintln!("user: {}", m.content),
            Role::Assistant => {
                if !m.content.trim().is_empty() {
                    eprintln!("assistant: {}", m.content.trim());
                }
                for c in &m.tool_calls {
                    eprintln!("assistant → {}({})", c.name, c.arguments);
                }
            }
            Role::Tool => eprintln!(
                "{} {}: {}",
                if m.is_error { "✗" } else { "←" },
                m.tool_name.as_deref().unwrap_or("tool"),
                m.content
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use toolplan_llm::ModelSpec;

    use super::PlanFlags;
    use crate::args::{Cli, Command};

    /// The plan flags of `ask hi` with `flags`, for `model`, planning on.
    fn flags(model: &str, extra: &[&str]) -> PlanFlags {
        let argv = [&["toolplan", "ask", "hi"][..], extra].concat();
        let Command::Ask(args) = Cli::try_parse_from(argv)
            .expect("a valid command line")
            .command
        else {
            unreachable!("ask parses as ask")
        };
        let spec: ModelSpec = model.parse().expect("a model spec");
        PlanFlags::of(&args, &spec, true)
    }

    #[test]
    fn the_local_model_plans_with_its_answer_by_default_and_hosted_models_choose() {
        let best = PlanFlags {
            plan_only: true,
            answer_in_plan: true,
            results_answer: true,
        };
        let given = |plan_only, answer_in_plan, results_answer| PlanFlags {
            plan_only,
            answer_in_plan,
            results_answer,
        };
        assert_eq!(flags("local", &[]), best);
        assert_eq!(flags("local:/m.gguf", &[]), best);
        // Any planning flag is taken as given.
        assert_eq!(flags("local", &["--plan-only"]), given(true, false, false));
        assert_eq!(
            flags("local", &["--plan-beside"]),
            given(false, false, false)
        );
        assert_eq!(
            flags("local", &["--plan-beside", "--answer-in-plan"]),
            given(false, true, false)
        );
        assert_eq!(flags("local", &["--no-plan"]), given(false, false, false));
        // Hosted models keep the planner beside the tools.
        assert_eq!(flags("openai:gpt-4o", &[]), given(false, false, false));
        assert_eq!(
            flags("anthropic:claude", &["--results-answer"]),
            given(false, false, true)
        );
        // --plan-beside and --plan-only cannot go together.
        assert!(
            Cli::try_parse_from(["toolplan", "ask", "hi", "--plan-beside", "--plan-only"]).is_err()
        );
    }
}
