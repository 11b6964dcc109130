//! `toolplan ask`: an agent answers a question with the chosen model and tools, through a plan when
//! planning is on.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::Context;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use toolplan_agent::{Agent, AgentError};
use toolplan_core::{Limits, RunConfig};
use toolplan_llm::{CallPolicy, ConnectOptions, Message, ModelSpec, Role};

use crate::Outcome;
use crate::args::{AskArgs, ToolSet};
use crate::config::Config;
use crate::toolset;

/// The instructions the agent gets unless the configuration names others.
pub const DEFAULT_INSTRUCTIONS: &str = "You are a helpful assistant. Use the tools to get facts; do not guess them. \
Answer the user's question briefly, using the tool results.";

fn duration(text: &str, what: &str) -> anyhow::Result<Duration> {
    humantime::parse_duration(text)
        .with_context(|| format!("{what}: '{text}' is not a duration (e.g. 30s, 2m)"))
}

/// Runs the subcommand.
pub async fn execute(args: AskArgs) -> anyhow::Result<Outcome> {
    let (config, _) = Config::load(args.config.as_deref())?;
    let spec_text = args
        .model
        .clone()
        .or(config.model.clone())
        .unwrap_or_else(|| "local".into());
    let spec: ModelSpec = spec_text.parse()?;
    let tool_set = match (&args.tools, config.tools.as_deref()) {
        (Some(t), _) => *t,
        (None, None | Some("demo")) => ToolSet::Demo,
        (None, Some(other)) => {
            anyhow::bail!("unknown tool set '{other}' in the config (known: demo)")
        }
    };
    let planning = !args.no_plan && config.planning.unwrap_or(true);

    let mut policy = CallPolicy::default();
    if let Some(t) = &config.limits.model_timeout {
        policy.timeout = duration(t, "limits.model_timeout")?;
    }
    let options = ConnectOptions {
        base_url: args.base_url.clone().or(config.base_url.clone()),
        policy,
    };
    let spinner = (!args.json && std::io::stderr().is_terminal()).then(|| {
        let s = indicatif::ProgressBar::new_spinner();
        s.set_message(format!("connecting to {spec}…"));
        s.enable_steady_tick(Duration::from_millis(100));
        s
    });
    let model = toolplan_llm::connect(&spec, &options).await;
    let model = match model {
        Ok(m) => m,
        Err(e) => {
            if let Some(s) = &spinner {
                s.finish_and_clear();
            }
            return Err(e.into());
        }
    };

    let mut run = RunConfig::default();
    if let Some(n) = config.limits.concurrency {
        run.concurrency = n.max(1);
    }
    if let Some(t) = &config.limits.step_timeout {
        run.step_timeout = Some(duration(t, "limits.step_timeout")?);
    }
    if let Some(t) = &config.limits.deadline {
        run.deadline = Some(duration(t, "limits.deadline")?);
    }
    let mut limits = Limits::default();
    if let Some(n) = config.limits.max_steps {
        limits.max_steps = n;
    }
    let mut builder = Agent::builder("toolplan")
        .model(model)
        .instructions(
            config
                .instructions
                .clone()
                .unwrap_or_else(|| DEFAULT_INSTRUCTIONS.into()),
        )
        .tools(toolset::tools(tool_set))
        .tool_planning(planning)
        .max_turns(args.max_turns.or(config.max_turns).unwrap_or(8))
        .run_config(run)
        .limits(limits);
    if args.plan_only {
        builder = builder.plan_only();
    }
    let agent = builder.build()?;

    if let Some(s) = &spinner {
        s.set_message("thinking…");
    }
    let cancel = CancellationToken::new();
    let on_interrupt = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_interrupt.cancel();
        }
    });
    let result = agent.interact_with(&args.question, &cancel).await;
    if let Some(s) = &spinner {
        s.finish_and_clear();
    }
    let interaction = match result {
        Ok(i) => i,
        Err(AgentError::MaxTurns { record }) => {
            anyhow::bail!(
                "no answer after {} turns ({} model calls, {} tool calls); raise --max-turns or simplify the question",
                record.turns,
                record.llm_calls,
                record.tool_calls
            )
        }
        Err(e) => return Err(e.into()),
    };
    if args.verbose {
        print_conversation(&interaction.messages);
    }
    let r = &interaction.record;
    if args.json {
        let mut out = json!({
            "answer": interaction.answer,
            "model": spec.to_string(),
            "planning": planning,
        });
        if let (Some(obj), Ok(serde_json::Value::Object(rec))) =
            (out.as_object_mut(), serde_json::to_value(r))
        {
            obj.extend(rec);
        }
        println!("{out}");
    } else {
        println!("{}", interaction.answer.trim());
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

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
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
