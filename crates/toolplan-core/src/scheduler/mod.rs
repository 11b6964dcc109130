//! The one scheduler: runs a validated [`Plan`] against a [`ToolRegistry`].
//!
//! A single driver task owns all bookkeeping (no locks): it keeps a ready queue, starts steps as tokio
//! tasks while the global and per-tool concurrency limits allow, and reacts to each completion by
//! starting the dependents whose last dependency just finished — there is no wave barrier. A failed
//! step marks all of its transitive dependents skipped at once; independent steps go on (fail-forward).
//!
//! Every tool call runs under `catch_unwind` and an optional timeout, so a panicking or hanging tool
//! fails only its own step. The driver polls each call once itself: a call that is done at once (an
//! instant tool) completes without a task or a thread hop; a call that has to wait continues on its own
//! task. Tools must therefore not block the thread (use `spawn_blocking` for blocking work). The run as a whole stops at the plan deadline or when the
//! cancellation token fires: steps still running then fail, steps not started are skipped. Dropping the
//! future returned by [`run`] aborts every running tool call.
//!
//! Outputs are kept only while a dependent still has to read them, or when they are output steps, so a
//! long pipeline does not hold every intermediate result in memory. The outputs a step read are
//! released when that step is decided; if it failed or was skipped they are kept to the end of the
//! run and reported ([`PlanRun::failure_inputs`](crate::PlanRun::failure_inputs)), so that a
//! follow-up plan can use them instead of calling their tools again.
//!
//! [`Schedule::WaveBarrier`] runs the same plans the way wave executors do (each wave waits for the
//! previous one to finish): it exists to compare against, and for users who want that behaviour.
//!
//! ## Layout
//!
//! * `config` — [`RunConfig`] and [`Schedule`]: how plans run, set once for many runs.
//! * `observer` — [`RunControl`] (cancellation, an observer) and the [`Observer`] events.
//! * `driver` — the driver task: the ready queue, the limits, completions, skips, the deadline.
//! * `slot` — what the driver keeps per step while a run goes on.
//! * `call` — one tool call: schema check, timeout, panic isolation, output limits.
//!
//! Before the driver starts, a plan that needs approval ([`RunConfig::approval`]) waits for it
//! (see [`crate::approval`]).

mod call;
mod config;
mod driver;
mod observer;
mod slot;

pub use config::{RunConfig, Schedule};
pub use driver::PlanPiece;
pub use observer::{Observer, RunControl, StepFinished, StepStarted};

use std::time::Duration;

use crate::approval::Approval;
use crate::error::format_duration;
use crate::plan::Plan;
use crate::run::{PlanRun, RunOutcome, StepRecord, StepStatus};
use crate::tool::ToolRegistry;
use driver::Driver;

/// Runs a validated plan. Never fails as a whole: every step's fate is in the returned record.
///
/// A plan that needs approval ([`RunConfig::approval`]) waits for it first, within the gate's
/// timeout and the run's cancellation; without it no step runs.
pub async fn run(
    plan: &Plan,
    tools: &ToolRegistry,
    config: &RunConfig,
    control: RunControl,
) -> PlanRun {
    let start = tokio::time::Instant::now();
    if let Some(gate) = &config.approval
        && let Some(request) = gate.request(plan, tools)
    {
        let refusal = tokio::select! {
            biased;
            () = control.cancel.cancelled() => Some((
                RunOutcome::Cancelled,
                "cancelled while the plan waited for approval".to_owned(),
            )),
            answer = tokio::time::timeout(
                gate.timeout,
                control.approver.as_ref().unwrap_or(&gate.approver).approve(&request),
            ) => match answer {
                Ok(Approval::Approved) => None,
                Ok(Approval::Declined(why)) => Some((
                    RunOutcome::Declined,
                    format!("the plan was declined ({why})"),
                )),
                Err(_) => Some((
                    RunOutcome::Declined,
                    format!(
                        "the plan needed approval, and none came within {}",
                        format_duration(gate.timeout)
                    ),
                )),
            },
        };
        if let Some((outcome, reason)) = refusal {
            return not_run(plan, outcome, &reason, start.elapsed());
        }
    }
    let mut driver = Driver::new(plan, tools, config, control);
    driver.drive().await;
    driver.finish()
}

/// Runs a plan while its text is still being written: `text` brings it in chunks of any size, and
/// its end is the end of the plan. Each step joins the run when its text is complete; a step on a
/// read-only tool whose references are written and done starts at once (see the streaming driver's
/// rules), every other step when the whole plan is known. The whole text is then compiled as
/// [`crate::Engine::compile`] would: an invalid plan is an error with the same problems (steps
/// started early are stopped), and a valid one runs on as if it had been read whole. Its report is
/// the same, plus when each step's text was complete ([`StepRecord::written`]).
///
/// `plan_path` holds the keys that lead from the text's JSON document to the plan: empty when the
/// text is the plan, `["arguments"]` when it is a whole tool call (`{"name": …, "arguments": {…}}`;
/// arguments written as a JSON string are read too, but then no step starts before the end). Text
/// before the document's first `{` and after its end is ignored.
///
/// The text may end with the plan as the caller will have it run ([`PlanPiece::Whole`]), which is
/// then compiled instead of the text. With `deadline_after_text` the run's deadline counts from
/// the end of the text (a caller that bounds the writing itself); otherwise from the start (it
/// then also bounds a writer that stalls).
///
/// The text is bounded by the plan size limit and its steps by the step limit (`limits`); waiting
/// for it is bounded by the run's cancellation and deadline (the run starts when this is called).
/// With an approval gate configured ([`RunConfig::approval`]) nothing starts early: the plan is
/// read whole, then approved and run.
///
/// The plan is in `dialect`: its list of steps is the one followed, its items are drafted as they
/// come ([`Dialect::draft_prefix`](crate::dialect::Dialect::draft_prefix)), and the whole plan is
/// compiled by it at the end. Besides the run, what the dialect keeps beside the whole plan; `None`
/// when the run stopped (cancelled, past its deadline) before the text ended.
#[allow(clippy::too_many_arguments)]
pub async fn run_streamed<'a, D>(
    dialect: &'a D,
    text: impl futures::Stream<Item = PlanPiece> + Send + 'a,
    plan_path: &[&str],
    deadline_after_text: bool,
    tools: &'a ToolRegistry,
    limits: &'a crate::limits::Limits,
    config: &'a RunConfig,
    control: RunControl,
) -> Result<(PlanRun, Option<D::Extra>), crate::error::InvalidPlan>
where
    D: crate::dialect::Dialect + Sync,
    D::Extra: Send,
{
    let mut reader = driver::DialectReader {
        dialect,
        extra: None,
    };
    let ended = {
        let writing = driver::Writing::new(
            Box::pin(text),
            &mut reader,
            plan_path,
            limits,
            deadline_after_text,
        );
        let mut driver = Driver::streaming(tools, config, control.clone(), writing);
        driver.drive().await;
        match driver.take_ended() {
            Some(driver::Written::Invalid(invalid)) => return Err(invalid),
            // The steps streamed were not the plan's (a document naming its steps twice): the
            // plan runs from the start, as read whole. Steps that started early were read-only.
            Some(driver::Written::Differs(plan) | driver::Written::NeedsApproval(plan)) => {
                Err(plan)
            }
            Some(driver::Written::Plan) | None => Ok(driver.finish()),
        }
    };
    let run = match ended {
        Ok(run) => run,
        Err(plan) => run(&plan, tools, config, control).await,
    };
    Ok((run, reader.extra))
}

/// The record of a plan none of whose steps ran: each skipped, with `reason`.
fn not_run(plan: &Plan, outcome: RunOutcome, reason: &str, elapsed: Duration) -> PlanRun {
    PlanRun {
        steps: plan
            .steps()
            .iter()
            .map(|s| StepRecord {
                id: s.id.clone(),
                tool: s.tool.clone(),
                status: StepStatus::Skipped,
                output: None,
                error: Some(reason.to_owned()),
                unresolved_reference: false,
                invalid_arguments: false,
                written: None,
                started: None,
                finished: elapsed,
                wave: s.wave,
            })
            .collect(),
        outputs: plan.outputs().to_vec(),
        explicit_outputs: plan.has_explicit_outputs(),
        waves: plan.waves().to_vec(),
        elapsed,
        outcome,
    }
}
