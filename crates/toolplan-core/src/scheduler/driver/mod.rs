//! The driver: one task that owns all of a run's bookkeeping (no locks). It keeps the ready queue,
//! starts steps while the global and per-tool limits allow, reacts to each completion by starting the
//! dependents whose last dependency just finished, skips the dependents of a failed step, and stops the
//! run at the deadline or on cancellation.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use serde_json::Value;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod streaming;

pub use streaming::PlanPiece;
pub(super) use streaming::{DialectReader, Writing, Written};
use streaming::{may_start_early, waits_for_more};

use super::call::{Call, CallResult};
use super::config::{RunConfig, Schedule};
use super::observer::{Observer, RunControl, StepFinished, StepStarted};
use super::slot::{Slot, State, Trouble};
use crate::error::{ToolError, format_duration};
use crate::limits::truncate_string;
use crate::plan::{Plan, Step};
use crate::run::{PlanRun, RunOutcome, StepRecord, StepStatus};
use crate::template::Budget;
use crate::tool::{RunExtension, ToolContext, ToolRegistry};

pub(super) struct Driver<'p> {
    /// The plan's steps: borrowed from a whole plan, owned while a streamed plan grows.
    steps: Cow<'p, [Step]>,
    outputs: Cow<'p, [usize]>,
    explicit_outputs: bool,
    waves: Cow<'p, [Vec<usize>]>,
    tools: &'p ToolRegistry,
    config: &'p RunConfig,
    observer: Option<Arc<dyn Observer>>,
    /// What the caller attached to the run, handed to each tool call.
    extension: Option<RunExtension>,
    user_cancel: CancellationToken,
    run_cancel: CancellationToken,
    start: Instant,
    slots: Vec<Slot>,
    ready: VecDeque<usize>,
    blocked: HashMap<String, VecDeque<usize>>,
    tool_running: HashMap<String, usize>,
    running: usize,
    done: usize,
    wave_left: Vec<usize>,
    current_wave: usize,
    tasks: JoinSet<(usize, CallResult)>,
    /// Bytes of the outputs held in `slots` now for steps and outputs.
    kept: usize,
    /// Bytes of the outputs held only because a failed or skipped step read them.
    failure_kept: usize,
    inline_budget: usize,
    outcome: RunOutcome,
    /// While a streamed plan is being written: its text and what is known of it.
    writing: Option<Box<Writing<'p>>>,
    /// Per step of a streamed plan: when its text was complete (empty for a plan read whole).
    written: Vec<Option<Duration>>,
    /// How a streamed plan's text ended, when that stopped the run (not valid, or not the steps
    /// streamed).
    ended: Option<Written>,
}

/// Most steps one `launch` completes inline before the driver yields to the runtime (and checks for
/// cancellation and the deadline).
const INLINE_BUDGET: usize = 1024;

/// How a `launch` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Launch {
    /// Every step that could start has started.
    Done,
    /// The inline budget ran out with steps still to start.
    BudgetSpent,
}

impl<'p> Driver<'p> {
    pub(super) fn new(
        plan: &'p Plan,
        tools: &'p ToolRegistry,
        config: &'p RunConfig,
        control: RunControl,
    ) -> Self {
        let mut slots: Vec<Slot> = plan
            .steps()
            .iter()
            .map(|s| Slot {
                missing: s.deps.len(),
                consumers: s.dependents.len(),
                ..Slot::waiting()
            })
            .collect();
        for &i in plan.outputs() {
            slots[i].is_output = true;
        }
        Self {
            steps: Cow::Borrowed(plan.steps()),
            outputs: Cow::Borrowed(plan.outputs()),
            explicit_outputs: plan.has_explicit_outputs(),
            waves: Cow::Borrowed(plan.waves()),
            slots,
            wave_left: plan.waves().iter().map(Vec::len).collect(),
            ..Self::without_steps(tools, config, control)
        }
    }

    /// A driver for a plan whose text is still being written: `writing` brings its steps.
    pub(super) fn streaming(
        tools: &'p ToolRegistry,
        config: &'p RunConfig,
        control: RunControl,
        writing: Writing<'p>,
    ) -> Self {
        Self {
            writing: Some(Box::new(writing)),
            ..Self::without_steps(tools, config, control)
        }
    }

    /// A driver with no steps yet, nothing running and nothing kept, its clock started.
    fn without_steps(tools: &'p ToolRegistry, config: &'p RunConfig, control: RunControl) -> Self {
        let run_cancel = control.cancel.child_token();
        Self {
            steps: Cow::Owned(Vec::new()),
            outputs: Cow::Owned(Vec::new()),
            explicit_outputs: false,
            waves: Cow::Owned(Vec::new()),
            tools,
            config,
            observer: control.observer,
            extension: control.extension,
            user_cancel: control.cancel,
            run_cancel,
            start: Instant::now(),
            slots: Vec::new(),
            ready: VecDeque::new(),
            blocked: HashMap::new(),
            tool_running: HashMap::new(),
            running: 0,
            done: 0,
            wave_left: Vec::new(),
            current_wave: 0,
            tasks: JoinSet::new(),
            kept: 0,
            failure_kept: 0,
            inline_budget: INLINE_BUDGET,
            outcome: RunOutcome::Completed,
            writing: None,
            written: Vec::new(),
            ended: None,
        }
    }

    /// How a streamed plan's text ended when that stopped the run: not valid, or not the steps
    /// that were streamed (then the run is to start again from the plan).
    pub(super) fn take_ended(&mut self) -> Option<Written> {
        self.ended.take()
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    pub(super) async fn drive(&mut self) {
        // Tool side work watches `run_cancel`; it fires on cancel, deadline, and when this future is
        // dropped half-way.
        let _cancel_on_drop = self.run_cancel.clone().drop_guard();
        match self.config.schedule {
            Schedule::Dependency => {
                for (i, s) in self.steps.iter().enumerate() {
                    if s.deps.is_empty() {
                        enqueue(&mut self.slots, &mut self.ready, i);
                    }
                }
            }
            Schedule::WaveBarrier => self.open_wave(0),
        }
        let user_cancel = self.user_cancel.clone();
        let cancelled = user_cancel.cancelled();
        tokio::pin!(cancelled);
        // A caller that bounds the writing itself starts the deadline when the text ends.
        let deferred = self.writing.as_ref().is_some_and(|w| w.deadline_after_text);
        let mut deadline = self
            .config
            .deadline
            .filter(|_| !deferred)
            .map(|d| self.start + d);
        // Without a deadline the timer is never polled.
        let timer = tokio::time::sleep_until(deadline.unwrap_or(self.start));
        tokio::pin!(timer);

        while self.writing.is_some() || self.done < self.slots.len() {
            // Checked here too, not only in the select below: steps that finish inline never reach it.
            if self.user_cancel.is_cancelled() {
                self.stop(RunOutcome::Cancelled);
                return;
            }
            if deadline.is_some_and(|at| Instant::now() >= at) {
                self.stop(RunOutcome::DeadlineExceeded);
                return;
            }
            if self.launch() == Launch::BudgetSpent {
                // Many steps finished inline in a row: let other tasks run before going on.
                tokio::task::yield_now().await;
                continue;
            }
            if self.writing.is_none() && self.done == self.slots.len() {
                break;
            }
            let writing = self.writing.is_some();
            let idle = self.tasks.is_empty();
            tokio::select! {
                biased;
                _ = &mut cancelled => {
                    self.stop(RunOutcome::Cancelled);
                    return;
                }
                _ = &mut timer, if deadline.is_some() => {
                    self.stop(RunOutcome::DeadlineExceeded);
                    return;
                }
                piece = next_piece(&mut self.writing), if writing => {
                    let piece_ended = !matches!(piece, Some(PlanPiece::Text(_)));
                    let ended = match piece {
                        Some(PlanPiece::Text(chunk)) => self.on_chunk(&chunk),
                        Some(PlanPiece::Whole(plan)) => {
                            if let Some(writing) = self.writing.as_mut() {
                                writing.given = Some(plan);
                            }
                            Some(self.on_text_end())
                        }
                        None => Some(self.on_text_end()),
                    };
                    // The deadline deferred to the end of the text starts now, as for a plan
                    // run whole.
                    if deferred
                        && deadline.is_none()
                        && piece_ended
                        && let Some(d) = self.config.deadline
                    {
                        let at = Instant::now() + d;
                        deadline = Some(at);
                        timer.as_mut().reset(at);
                    }
                    match ended {
                        None | Some(Written::Plan) => {}
                        Some(stop) => {
                            let reason = match &stop {
                                Written::Invalid(_) => "the plan is not valid",
                                Written::NeedsApproval(_) => "the plan needs approval first",
                                _ => "the plan is run again as read whole",
                            };
                            self.writing = None;
                            self.stop_with(RunOutcome::Cancelled, reason);
                            self.ended = Some(stop);
                            return;
                        }
                    }
                }
                joined = self.tasks.join_next(), if !(writing && idle) => {
                    match joined {
                        Some(Ok((i, result))) => self.complete(i, result),
                        // Tasks are only aborted in `stop`, and panics are caught inside them.
                        Some(Err(_)) => {}
                        None => {
                            // Nothing is running, yet steps are undecided: never leave the caller hanging.
                            self.stop_with(RunOutcome::Completed, "internal error: the step was never started");
                            return;
                        }
                    }
                    while let Some(joined) = self.tasks.try_join_next() {
                        if let Ok((i, result)) = joined {
                            self.complete(i, result);
                        }
                    }
                }
            }
        }
    }

    fn enqueue(&mut self, i: usize) {
        enqueue(&mut self.slots, &mut self.ready, i);
    }

    /// Wave-barrier mode: makes every undecided step of `wave` ready (all their dependencies are done).
    fn open_wave(&mut self, wave: usize) {
        self.current_wave = wave;
        let count = self.waves.get(wave).map_or(0, Vec::len);
        for k in 0..count {
            let i = self.waves[wave][k];
            if self.slots[i].state == State::Waiting {
                self.enqueue(i);
            }
        }
    }

    /// Starts ready steps while the limits allow. Steps whose calls finish on their first poll are
    /// completed on the spot, and their dependents started in the same loop, up to [`INLINE_BUDGET`].
    fn launch(&mut self) -> Launch {
        self.inline_budget = INLINE_BUDGET;
        while self.running < self.config.concurrency.max(1) {
            let Some(i) = self.ready.pop_front().or_else(|| self.unblock()) else {
                break;
            };
            if self.inline_budget == 0 {
                self.ready.push_front(i);
                return Launch::BudgetSpent;
            }
            let tool = self.steps[i].tool.as_str();
            if self.at_tool_limit(tool) {
                match self.blocked.get_mut(tool) {
                    Some(queue) => queue.push_back(i),
                    None => {
                        self.blocked.insert(tool.to_owned(), VecDeque::from([i]));
                    }
                }
                continue;
            }
            self.start_step(i);
        }
        Launch::Done
    }

    fn at_tool_limit(&self, tool: &str) -> bool {
        self.config
            .tool_concurrency
            .get(tool)
            .is_some_and(|&limit| self.tool_running.get(tool).copied().unwrap_or(0) >= limit.max(1))
    }

    /// A step that waited for its tool's limit and may start now. `complete` hands the freed slot to
    /// the next waiting step, but that step can fail before taking the slot (its references do not
    /// resolve), so the queues are also checked here whenever nothing else is ready.
    fn unblock(&mut self) -> Option<usize> {
        let tool = self
            .blocked
            .iter()
            .find(|(tool, queue)| !queue.is_empty() && !self.at_tool_limit(tool))
            .map(|(tool, _)| tool.clone())?;
        self.blocked.get_mut(&tool)?.pop_front()
    }

    fn start_step(&mut self, i: usize) {
        let step = &self.steps[i];
        if let Some(first) = step.same_call_as {
            return self.share_result(i, first);
        }
        let slots = &self.slots;
        let output = |slot: usize| slots.get(slot).and_then(|s| s.output.as_ref());
        let budget = Budget {
            max_bytes: self.config.max_resolved_argument_bytes,
            max_depth: self.config.max_value_depth,
        };
        let rendered = step.arguments.render_within(&output, &budget);
        // Why a reference found nothing, worked out only when one did (for the error if the step
        // then fails), while the outputs it read are still here.
        let note = match &rendered {
            Ok(r) if r.missing => step.arguments.missing_note(&output),
            _ => None,
        };
        if note.is_some() {
            self.slots[i].trouble = Some(Box::new(Trouble {
                error: None,
                note,
                unresolved: true,
                refused: false,
            }));
        }
        // The inputs are released when the step is decided: if it fails, the results it read are
        // kept for the report (a replan can use them instead of calling their tools again).
        let arguments = match rendered {
            Ok(r) => r.value,
            Err(e) => return self.decide(i, StepStatus::Failed, None, Some(e.to_string())),
        };
        let Some(registered) = self.tools.get(&step.tool) else {
            let msg = format!(
                "tool '{}' is not in the registry this plan runs against",
                step.tool
            );
            return self.decide(i, StepStatus::Failed, None, Some(msg));
        };
        let call = Call {
            registered: Arc::clone(registered),
            // Literal arguments were checked against the schema when the plan was validated.
            check: !step.arguments.is_literal(),
            arguments,
            ctx: ToolContext {
                step_id: Arc::from(step.id.as_str()),
                cancel: self.run_cancel.child_token(),
                extension: self.extension.clone(),
            },
            timeout: self.config.step_timeout,
            max_output_bytes: self.config.max_output_bytes,
            max_depth: self.config.max_value_depth,
        };
        let at = self.now();
        let slot = &mut self.slots[i];
        slot.state = State::Running;
        slot.started = Some(at);
        self.running += 1;
        match self.tool_running.get_mut(step.tool.as_str()) {
            Some(n) => *n += 1,
            None => {
                self.tool_running.insert(step.tool.clone(), 1);
            }
        }
        if let Some(o) = &self.observer {
            o.step_started(&StepStarted {
                index: i,
                id: &step.id,
                tool: &step.tool,
                at,
            });
        }
        // Fast path: poll the call once here. A call that is done at once (an instant tool, arguments
        // that break the schema) completes without a task and without waking another thread, which is
        // most of the cost of a step when the caller is not on a runtime worker. Anything that has to
        // wait is handed to its own task, already polled once.
        let mut call = Box::pin(call.run());
        if self.inline_budget > 0 {
            self.inline_budget -= 1;
            if let Some(result) = (&mut call).now_or_never() {
                self.complete(i, result);
                return;
            }
        }
        self.tasks.spawn(async move { (i, call.await) });
    }

    /// Step `i` repeats the call of step `first`, which has succeeded (it is one of `i`'s
    /// dependencies): `i` takes its result instead of calling the tool again.
    fn share_result(&mut self, i: usize, first: usize) {
        let output = self.slots[first].output.clone();
        let size = self.slots[first].size;
        let at = self.now();
        self.slots[i].started = Some(at);
        self.succeed(i, output, size);
    }

    /// Step `i` succeeded with `output` of `size` bytes: it is kept if someone needs it and the run's
    /// budget for kept outputs allows, else the step fails for the budget.
    fn succeed(&mut self, i: usize, output: Option<Value>, size: usize) {
        let slot = &mut self.slots[i];
        // While the plan is being written, a step not yet written may read any output.
        let kept = self.writing.is_some() || slot.is_output || slot.consumers > 0;
        if kept && self.kept.saturating_add(size) > self.config.max_kept_output_bytes {
            let error = format!(
                "the output ({size} bytes) would take the outputs this run holds ({} bytes) past the limit of {} bytes (max_kept_output_bytes)",
                self.kept, self.config.max_kept_output_bytes
            );
            return self.decide(i, StepStatus::Failed, None, Some(error));
        }
        slot.size = size;
        self.decide(i, StepStatus::Ok, output, None)
    }

    /// Step `i` is decided and no longer needs its dependencies' outputs: drop those nobody else
    /// needs. When it did not succeed, the outputs it read are kept to the end of the run instead
    /// (reported as [`PlanRun::failure_inputs`](crate::PlanRun::failure_inputs)).
    fn release_inputs(&mut self, i: usize, succeeded: bool) {
        for k in 0..self.steps[i].deps.len() {
            let d = self.steps[i].deps[k];
            let slot = &mut self.slots[d];
            if self.writing.is_some() {
                // Nothing is released before the whole plan is known (its consumers are counted
                // then).
                slot.used_by_failure |= !succeeded;
                continue;
            }
            slot.consumers = slot.consumers.saturating_sub(1);
            if !succeeded {
                // Also when the dependency has not finished yet (a step skipped for another
                // dependency): its output is kept when it comes, if it fits.
                slot.used_by_failure = true;
            }
            self.release_output(d);
        }
    }

    /// Drops step `d`'s output if no step still to be decided reads it and it is not an output
    /// step; a result that a failed or skipped step read is kept on for the report instead, within
    /// its own budget, else let go.
    fn release_output(&mut self, d: usize) {
        let slot = &mut self.slots[d];
        if slot.consumers == 0
            && !slot.is_output
            && let Some(output) = slot.output.take()
        {
            self.kept -= slot.size;
            let size = slot.size;
            if slot.used_by_failure && self.fits_failure_budget(size) {
                self.failure_kept += size;
                self.slots[d].output = Some(output);
            }
        }
    }

    /// Whether an output of `size` bytes still fits the budget for results kept because a failed
    /// or skipped step read them (`max_failure_input_bytes`).
    fn fits_failure_budget(&self, size: usize) -> bool {
        self.failure_kept.saturating_add(size) <= self.config.max_failure_input_bytes
    }

    fn complete(&mut self, i: usize, result: CallResult) {
        let tool = self.steps[i].tool.as_str();
        self.running -= 1;
        if let Some(n) = self.tool_running.get_mut(tool) {
            *n -= 1;
        }
        if let Some(queue) = self.blocked.get_mut(tool)
            && let Some(next) = queue.pop_front()
        {
            self.ready.push_front(next);
        }
        let note = self.slots[i].trouble.as_mut().and_then(|t| t.note.take());
        match result {
            Ok((output, size)) => self.succeed(i, Some(output), size),
            Err(e) => {
                let refused = matches!(e, ToolError::InvalidArguments(_));
                let error = match note {
                    Some(note) => format!("{} ({note})", e.to_string().trim_end()),
                    None => e.to_string(),
                };
                self.decide(i, StepStatus::Failed, None, Some(error));
                if refused && let Some(trouble) = self.slots[i].trouble.as_mut() {
                    trouble.refused = true;
                }
            }
        }
    }

    /// Records how step `i` ended and moves its dependents on: ready when this was their last
    /// dependency, skipped (transitively) when it did not succeed.
    fn decide(
        &mut self,
        i: usize,
        status: StepStatus,
        output: Option<Value>,
        error: Option<String>,
    ) {
        // Skipping dependents is the rare case: `pending` allocates only then.
        let mut next = Some((i, status, output, error));
        let mut pending = Vec::new();
        while let Some((i, status, output, error)) = next.take().or_else(|| pending.pop()) {
            let at = self.now();
            let slot = &mut self.slots[i];
            slot.state = State::Done;
            slot.status = status;
            slot.finished = at;
            let keep = status == StepStatus::Ok
                && (self.writing.is_some() || slot.is_output || slot.consumers > 0);
            let read_by_failure = slot.used_by_failure;
            slot.set_error(error.map(|mut e| {
                truncate_string(&mut e, self.config.max_error_bytes);
                e
            }));
            // Read only by steps that failed or were skipped already: kept for the report if it
            // fits that budget.
            let keep_for_failure = status == StepStatus::Ok
                && !keep
                && read_by_failure
                && self.fits_failure_budget(self.slots[i].size);
            self.done += 1;
            self.release_inputs(i, status == StepStatus::Ok);
            // The observer sees the output even when no one keeps it.
            self.notify_finished(i, output.as_ref());
            if keep {
                self.kept += self.slots[i].size;
                self.slots[i].output = output;
            } else if keep_for_failure {
                self.failure_kept += self.slots[i].size;
                self.slots[i].output = output;
            }

            let step = &self.steps[i];
            for &d in &step.dependents {
                let dep = &mut self.slots[d];
                if dep.state != State::Waiting {
                    continue;
                }
                if status == StepStatus::Ok {
                    dep.missing -= 1;
                    if dep.missing == 0
                        && self.config.schedule == Schedule::Dependency
                        && may_start_early(self.writing.as_deref(), d)
                    {
                        enqueue(&mut self.slots, &mut self.ready, d);
                    }
                } else if !waits_for_more(self.writing.as_deref(), d) {
                    // Mark it now so no other path decides it twice.
                    dep.state = State::Done;
                    let reason = format!("Skipped because dependency '{}' failed", step.id);
                    pending.push((d, StepStatus::Skipped, None, Some(reason)));
                }
            }

            // (No waves are counted while a streamed plan is being written.)
            if let Some(left) = self.wave_left.get_mut(step.wave) {
                *left -= 1;
            }
            if self.config.schedule == Schedule::WaveBarrier {
                while self.current_wave < self.wave_left.len()
                    && self.wave_left[self.current_wave] == 0
                {
                    self.open_wave(self.current_wave + 1);
                }
            }
        }
    }

    fn notify_finished(&self, i: usize, output: Option<&Value>) {
        if let Some(o) = &self.observer {
            let step = &self.steps[i];
            let slot = &self.slots[i];
            o.step_finished(&StepFinished {
                index: i,
                id: &step.id,
                tool: &step.tool,
                status: slot.status,
                error: slot.error(),
                output,
                started: slot.started,
                at: slot.finished,
                done: self.done,
                total: self.slots.len(),
            });
        }
    }

    fn stop(&mut self, outcome: RunOutcome) {
        let reason = match outcome {
            RunOutcome::Cancelled => "the plan was cancelled".to_owned(),
            _ => format!(
                "the plan deadline of {} passed",
                format_duration(self.config.deadline.unwrap_or_default())
            ),
        };
        self.stop_with(outcome, &reason);
    }

    /// Ends the run now: running steps fail, undecided steps are skipped, all with `reason`.
    fn stop_with(&mut self, outcome: RunOutcome, reason: &str) {
        self.outcome = outcome;
        self.run_cancel.cancel();
        self.tasks.abort_all();
        let at = self.now();
        for i in 0..self.slots.len() {
            let slot = &mut self.slots[i];
            let (status, error) = match slot.state {
                State::Done => continue,
                State::Running => (
                    StepStatus::Failed,
                    format!("Stopped while running: {reason}"),
                ),
                State::Waiting | State::Queued => {
                    (StepStatus::Skipped, format!("Not run: {reason}"))
                }
            };
            slot.state = State::Done;
            slot.status = status;
            slot.set_error(Some(error));
            slot.finished = at;
            self.done += 1;
            self.notify_finished(i, None);
        }
        self.running = 0;
    }

    pub(super) fn finish(self) -> PlanRun {
        let elapsed = self.now();
        let written = self.written;
        let steps = self
            .steps
            .iter()
            .zip(self.slots)
            .enumerate()
            .map(|(i, (step, slot))| StepRecord {
                written: written.get(i).copied().flatten(),
                id: step.id.clone(),
                tool: step.tool.clone(),
                status: slot.status,
                output: if slot.is_output || slot.used_by_failure {
                    slot.output
                } else {
                    None
                },
                unresolved_reference: slot.status == StepStatus::Failed
                    && slot.trouble.as_ref().is_some_and(|t| t.unresolved),
                invalid_arguments: slot.status == StepStatus::Failed
                    && slot.trouble.as_ref().is_some_and(|t| t.refused),
                error: slot.trouble.and_then(|t| t.error),
                started: slot.started,
                finished: slot.finished,
                wave: step.wave,
            })
            .collect();
        PlanRun {
            steps,
            outputs: self.outputs.into_owned(),
            explicit_outputs: self.explicit_outputs,
            waves: self.waves.into_owned(),
            elapsed,
            outcome: self.outcome,
        }
    }
}

/// Puts step `i` in the ready queue.
fn enqueue(slots: &mut [Slot], ready: &mut VecDeque<usize>, i: usize) {
    slots[i].state = State::Queued;
    ready.push_back(i);
}

/// The next piece of a streamed plan (`None` at the end of its text; never ready without a
/// writing).
async fn next_piece(writing: &mut Option<Box<Writing<'_>>>) -> Option<PlanPiece> {
    use futures::StreamExt;
    match writing {
        Some(w) => w.text.next().await,
        None => std::future::pending().await,
    }
}
