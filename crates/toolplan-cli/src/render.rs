//! The human-readable report of a run: a headline, a per-step timeline, outputs and errors.

use std::fmt::Write;
use std::time::Duration;

use serde_json::Value;
use toolplan_core::{PlanRun, RunOutcome, StepStatus};

const BAR_WIDTH: usize = 32;

fn ms(d: Duration) -> String {
    format!("{:.1}ms", d.as_secs_f64() * 1000.0)
}

/// The report for a finished run.
pub fn report(run: &PlanRun) -> String {
    let mut out = String::new();
    let headline = match run.outcome {
        RunOutcome::Completed if run.all_ok() => "Plan completed",
        RunOutcome::Completed => "Plan completed with errors",
        RunOutcome::Cancelled => "Plan cancelled",
        RunOutcome::DeadlineExceeded => "Plan stopped at its deadline",
        RunOutcome::Declined => "Plan not run (not approved)",
    };
    let _ = writeln!(
        out,
        "{headline}: {} steps in {} waves, {} ok, {} failed, {} skipped, in {}",
        run.steps.len(),
        run.waves.len(),
        run.count(StepStatus::Ok),
        run.count(StepStatus::Failed),
        run.count(StepStatus::Skipped),
        ms(run.elapsed)
    );
    out.push('\n');
    timeline(run, &mut out);

    let outputs = run.outputs_map();
    if !outputs.is_empty() {
        let _ = writeln!(out, "\nOutputs");
        for (id, value) in &outputs {
            let text = match value {
                Value::String(s) => s.clone(),
                other => serde_json::to_string_pretty(other).unwrap_or_else(|_| other.to_string()),
            };
            let mut lines = text.lines();
            let _ = writeln!(out, "  {id}: {}", lines.next().unwrap_or(""));
            for line in lines {
                let _ = writeln!(out, "    {line}");
            }
        }
    }
    let problems: Vec<_> = run.problems().collect();
    if !problems.is_empty() {
        let _ = writeln!(out, "\nErrors");
        for s in problems {
            let _ = writeln!(
                out,
                "  {} ({}): {}",
                s.id,
                s.status.as_str(),
                s.error.as_deref().unwrap_or("")
            );
        }
    }
    out
}

fn timeline(run: &PlanRun, out: &mut String) {
    let id_w = run
        .steps
        .iter()
        .map(|s| s.id.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let tool_w = run
        .steps
        .iter()
        .map(|s| s.tool.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let total = run.elapsed.as_secs_f64().max(1e-9);
    let _ = writeln!(
        out,
        "  {:<id_w$}  {:<tool_w$}  {:<7}  {:>9}  {:>9}  timeline (0 to {})",
        "step",
        "tool",
        "status",
        "start",
        "end",
        ms(run.elapsed)
    );
    for s in &run.steps {
        let col = |d: Duration| ((d.as_secs_f64() / total) * BAR_WIDTH as f64) as usize;
        let mut bar = vec![' '; BAR_WIDTH];
        match s.started {
            Some(start) => {
                let from = col(start).min(BAR_WIDTH - 1);
                let to = col(s.finished).clamp(from + 1, BAR_WIDTH);
                let fill = if s.status == StepStatus::Ok {
                    '█'
                } else {
                    '▒'
                };
                bar[from..to].iter_mut().for_each(|c| *c = fill);
            }
            None => bar[col(s.finished).min(BAR_WIDTH - 1)] = '·',
        }
        let bar: String = bar.into_iter().collect();
        let start = s.started.map(ms).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "  {:<id_w$}  {:<tool_w$}  {:<7}  {:>9}  {:>9}  |{}|",
            s.id,
            s.tool,
            s.status.as_str(),
            start,
            ms(s.finished),
            bar
        );
    }
}
