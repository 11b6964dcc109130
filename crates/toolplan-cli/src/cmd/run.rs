//! `toolplan run`: validate a plan, run it, print the results (human-readable or `--json`).

use std::io::IsTerminal;
use std::sync::Arc;

use toolplan_core::{Observer, RunControl, Schedule};

use crate::Outcome;
use crate::args::{RunArgs, ScheduleArg};
use crate::cmd::{cancel_on_interrupt, print_problems, read_plan};
use crate::output::{out, outln};
use crate::progress::Progress;
use crate::settings::Settings;
use crate::{render, toolset};

/// Runs the subcommand.
pub async fn execute(args: RunArgs, mut settings: Settings) -> anyhow::Result<Outcome> {
    let text = read_plan(&args.input.plan, settings.limits.max_plan_bytes)?;
    // The flags of `run` alone, which neither the environment nor the configuration sets.
    settings.run.tool_concurrency = args.tool_limits.iter().cloned().collect();
    settings.run.schedule = match args.schedule {
        ScheduleArg::Dependency => Schedule::Dependency,
        ScheduleArg::WaveBarrier => Schedule::WaveBarrier,
    };
    let engine = toolset::engine(&settings).await?;
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
    // No live display while a plan may wait for approval on the same terminal.
    let progress =
        (!args.quiet && settings.run.approval.is_none() && std::io::stderr().is_terminal())
            .then(|| Arc::new(Progress::new(plan.len())));
    let control = RunControl {
        cancel,
        observer: progress.clone().map(|p| p as Arc<dyn Observer>),
        ..RunControl::default()
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
