//! `toolplan run`: validate a plan, run it, print the results (human-readable or `--json`).

use std::io::IsTerminal;
use std::sync::Arc;

use toolplan_core::{Observer, RunConfig, RunControl, Schedule};

use crate::Outcome;
use crate::args::{RunArgs, ScheduleArg};
use crate::cmd::{cancel_on_interrupt, print_problems, read_plan};
use crate::config::Config;
use crate::output::{out, outln};
use crate::progress::Progress;
use crate::settings::{self, LimitFlags, RUN_STEP_TIMEOUT};
use crate::{render, toolset};

/// Runs the subcommand.
pub async fn execute(args: RunArgs) -> anyhow::Result<Outcome> {
    let text = read_plan(&args.input.plan)?;
    let (config, _) = Config::load(args.tools.config.as_deref())?;
    let flags = LimitFlags {
        max_steps: args.input.max_steps,
        concurrency: args.concurrency.map(|n| n as usize),
        step_timeout: args.step_timeout.map(|d| d.0),
        deadline: args.deadline.map(|d| d.0),
    };
    let base = RunConfig {
        tool_concurrency: args.tool_limits.iter().cloned().collect(),
        step_timeout: Some(RUN_STEP_TIMEOUT),
        deadline: None,
        schedule: match args.schedule {
            ScheduleArg::Dependency => Schedule::Dependency,
            ScheduleArg::WaveBarrier => Schedule::WaveBarrier,
        },
        ..RunConfig::default()
    };
    let run_config = settings::resolve_run(&config, &flags, base)?;
    let limits = settings::limits(&config, &flags);
    let engine = toolset::engine(&args.tools, &config, limits, run_config).await?;
    for (tool, _) in &args.tool_limits {
        if !engine.tools().contains(tool) {
            eprintln!("warning: --tool-limit names '{tool}', which is not a tool of this tool set");
        }
    }
    let plan = match engine.compile(&text) {
        Ok(plan) => plan,
        Err(invalid) => {
            print_problems(&args.input.plan, &invalid);
            return Ok(Outcome::InvalidPlan);
        }
    };

    // Ctrl-C cancels the plan: running steps fail, the rest are skipped, and the report still prints.
    let cancel = cancel_on_interrupt();
    let progress = (!args.quiet && std::io::stderr().is_terminal())
        .then(|| Arc::new(Progress::new(plan.len())));
    let control = RunControl {
        cancel,
        observer: progress.clone().map(|p| p as Arc<dyn Observer>),
    };
    let run = engine.run(&plan, control).await;
    if let Some(p) = progress {
        p.finish();
    }
    if args.json {
        outln!("{}", run.to_json())?;
    } else {
        out!("{}", render::report(&run))?;
    }
    Ok(Outcome::Ok)
}
