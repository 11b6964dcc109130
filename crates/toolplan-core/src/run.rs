//! The result of running a plan: per-step records, the requested outputs, and the two renderings of it
//! that leave the engine — the JSON report (CLI `--json`) and the text summary that goes back to an LLM.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::limits::truncate_text;
use crate::tool::value_as_text;

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// The tool returned a result.
    Ok,
    /// The tool (or the resolution of its arguments) failed, timed out or was cancelled.
    Failed,
    /// The step did not run: a dependency failed, or the plan was cancelled or ran out of time first.
    Skipped,
}

impl StepStatus {
    /// The status as the JSON report writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Ok => "ok",
            StepStatus::Failed => "failed",
            StepStatus::Skipped => "skipped",
        }
    }
}

/// How the run as a whole ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// Every step ran or was skipped because of a failed dependency.
    Completed,
    /// The run was cancelled; steps still running failed, steps not started were skipped.
    Cancelled,
    /// The plan deadline passed; steps still running failed, steps not started were skipped.
    DeadlineExceeded,
    /// The plan needed approval and did not get it (declined, or no answer in time): no step ran.
    Declined,
}

/// What happened to one step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRecord {
    /// The step id.
    pub id: String,
    /// The tool it called.
    pub tool: String,
    /// How it ended.
    pub status: StepStatus,
    /// Its output, kept only for steps that succeeded and are output steps or were read by a step
    /// that failed or was skipped ([`PlanRun::failure_inputs`]).
    pub output: Option<Value>,
    /// Why it failed or was skipped.
    pub error: Option<String>,
    /// Whether it failed after a reference in its arguments found no value (a field its producer's
    /// output lacks, a null result): a failure the plan caused, which a corrected plan can avoid.
    pub unresolved_reference: bool,
    /// Whether it failed because its tool refused the arguments
    /// ([`ToolError::InvalidArguments`](crate::ToolError::InvalidArguments): a value that breaks the
    /// tool's schema or a check of its own, such as a person's name where a city belongs): a
    /// failure of the plan, not of the tool, which a corrected plan can avoid.
    pub invalid_arguments: bool,
    /// When its text was complete, from the start of the run, for a plan run while it was being
    /// written (`None` for a plan read whole).
    pub written: Option<Duration>,
    /// When it started, from the start of the run (`None` for skipped steps).
    pub started: Option<Duration>,
    /// When it finished (or was skipped), from the start of the run.
    pub finished: Duration,
    /// Its wave (Kahn level).
    pub wave: usize,
}

/// The result of running a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRun {
    /// One record per step, in plan order.
    pub steps: Vec<StepRecord>,
    /// Indexes of the output steps.
    pub outputs: Vec<usize>,
    /// Whether `output_steps` was given.
    pub explicit_outputs: bool,
    /// Steps by wave, as indexes.
    pub waves: Vec<Vec<usize>>,
    /// Wall time of the whole run.
    pub elapsed: Duration,
    /// How the run ended.
    pub outcome: RunOutcome,
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

impl PlanRun {
    /// The output of a step that is an output step and succeeded.
    pub fn output(&self, id: &str) -> Option<&Value> {
        self.steps.iter().find(|s| s.id == id)?.output.as_ref()
    }

    /// The record of a step.
    pub fn step(&self, id: &str) -> Option<&StepRecord> {
        self.steps.iter().find(|s| s.id == id)
    }

    /// Steps that failed or were skipped, in plan order.
    pub fn problems(&self) -> impl Iterator<Item = &StepRecord> {
        self.steps.iter().filter(|s| s.status != StepStatus::Ok)
    }

    /// Whether every step succeeded.
    pub fn all_ok(&self) -> bool {
        self.outcome == RunOutcome::Completed
            && self.steps.iter().all(|s| s.status == StepStatus::Ok)
    }

    /// Number of steps with that status.
    pub fn count(&self, status: StepStatus) -> usize {
        self.steps.iter().filter(|s| s.status == status).count()
    }

    /// The successful output steps' results keyed by id, in `output_steps` order.
    pub fn outputs_map(&self) -> Map<String, Value> {
        self.outputs
            .iter()
            .filter_map(|&i| {
                let s = &self.steps[i];
                s.output.clone().map(|v| (s.id.clone(), v))
            })
            .collect()
    }

    /// The results that steps which failed or were skipped had read (or would have read), keyed
    /// by id, in plan order; output steps are left out ([`outputs_map`](Self::outputs_map) has
    /// them). A follow-up plan can use them instead of calling their tools again.
    pub fn failure_inputs(&self) -> Map<String, Value> {
        self.steps
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.outputs.contains(i))
            .filter_map(|(_, s)| s.output.clone().map(|v| (s.id.clone(), v)))
            .collect()
    }

    /// Every failed or skipped step's message keyed by id.
    pub fn errors_map(&self) -> Map<String, Value> {
        self.problems()
            .map(|s| {
                (
                    s.id.clone(),
                    Value::String(s.error.clone().unwrap_or_default()),
                )
            })
            .collect()
    }

    /// The JSON report: `{"outputs", "errors", "waves", "elapsed_ms", "steps", "outcome"}`.
    pub fn to_json(&self) -> Value {
        let waves: Vec<Vec<&str>> = self
            .waves
            .iter()
            .map(|w| w.iter().map(|&i| self.steps[i].id.as_str()).collect())
            .collect();
        let steps: Map<String, Value> = self
            .steps
            .iter()
            .map(|s| {
                let mut step = json!({
                    "tool": s.tool,
                    "status": s.status,
                    "started_ms": s.started.map(ms),
                    "finished_ms": ms(s.finished),
                    "wave": s.wave,
                });
                if let (Some(written), Some(fields)) = (s.written, step.as_object_mut()) {
                    fields.insert("written_ms".into(), json!(ms(written)));
                }
                (s.id.clone(), step)
            })
            .collect();
        json!({
            "outputs": self.outputs_map(),
            "errors": self.errors_map(),
            "waves": waves,
            "elapsed_ms": ms(self.elapsed),
            "steps": steps,
            "outcome": self.outcome,
        })
    }

    /// The text that goes back to an LLM: the output steps' results, then every failed or skipped step
    /// with its reason, and the results those steps read ([`failure_inputs`](Self::failure_inputs)).
    /// Other intermediate results are left out: they never enter the model's context.
    /// Whole: for a model's context, [`summary_within`](Self::summary_within).
    pub fn summary(&self) -> String {
        self.summary_within(usize::MAX)
    }

    /// [`summary`](Self::summary) for a context of limited size: the results and errors share
    /// `max_bytes` (each gets an equal share, at least 1 KB; a longer one is cut, with a note of how
    /// much was left out), so one huge result cannot push the others, or the errors, out.
    pub fn summary_within(&self, max_bytes: usize) -> String {
        let total = self.steps.len();
        let failed = self.count(StepStatus::Failed);
        let skipped = self.count(StepStatus::Skipped);
        let mut text = match self.outcome {
            RunOutcome::Completed if failed + skipped == 0 => {
                format!("Plan executed successfully ({total} steps).")
            }
            RunOutcome::Completed => format!(
                "Plan completed with errors: {failed} of {total} steps failed, {skipped} skipped."
            ),
            RunOutcome::Cancelled => {
                format!("Plan cancelled: {failed} steps failed, {skipped} not run, of {total}.")
            }
            RunOutcome::DeadlineExceeded => format!(
                "Plan stopped at its deadline: {failed} steps failed, {skipped} not run, of {total}."
            ),
            // Every step carries the same reason: said once.
            RunOutcome::Declined => {
                let reason = self.steps.first().and_then(|s| s.error.as_deref());
                return format!(
                    "Plan not run ({total} steps): {}",
                    truncate_text(reason.unwrap_or("it was not approved"), max_bytes.max(1000))
                );
            }
        };
        let outputs = self.outputs_map();
        let inputs = self.failure_inputs();
        let share =
            (max_bytes / (outputs.len() + inputs.len() + failed + skipped).max(1)).max(1000);
        list_results(&mut text, "Results", &outputs, share);
        if failed + skipped > 0 {
            text.push_str("\nErrors:");
            for s in self.problems() {
                text.push_str(&format!(
                    "\n- {} ({}): {}",
                    s.id,
                    s.status.as_str(),
                    truncate_text(s.error.as_deref().unwrap_or(""), share)
                ));
            }
        }
        list_results(&mut text, "Results the failed steps used", &inputs, share);
        text
    }
}

/// Adds `results` under `heading` to a summary, one line each, each cut to `share` bytes; nothing
/// when there are none.
fn list_results(text: &mut String, heading: &str, results: &Map<String, Value>, share: usize) {
    if results.is_empty() {
        return;
    }
    text.push('\n');
    text.push_str(heading);
    text.push(':');
    for (id, v) in results {
        text.push_str("\n- ");
        text.push_str(id);
        text.push_str(": ");
        text.push_str(&truncate_text(&value_as_text(v), share));
    }
}
