//! The driver while the plan is still being written: its text arrives in chunks, each step joins
//! the run when its text is complete, and may start before the rest of the plan is written.
//!
//! A step starts early only when all of this holds: the steps written so far pass every check the
//! rest of the plan cannot undo ([`validate_prefix`]); its tool says it is read-only; everything it
//! refers to is written and has succeeded; it does not repeat an earlier call; the schedule is
//! [`Schedule::Dependency`] and no approval is configured. Any other step waits for the whole
//! plan, which is then compiled as any plan is: a plan that fails validation fails with the same
//! problems as when it is read whole (steps started early are stopped, and being read-only, they
//! changed nothing), and a valid one runs on as if it had been read whole. Until the plan is
//! complete no output is released (a step not yet written may read it); outputs count against the
//! run's budget as always.

use std::borrow::Cow;
use std::pin::Pin;

use futures::Stream;
use serde_json::Value;

use super::{Driver, State, enqueue};
use crate::dialect::incremental::{ItemScanner, ScanError};
use crate::dialect::{self, Dialect};
use crate::error::{InvalidPlan, Problem};
use crate::limits::{DEFAULT_MAX_VALUE_DEPTH, Limits};
use crate::plan::{DraftPlan, Plan, Prefix, validate_prefix};
use crate::run::StepStatus;
use crate::scheduler::config::Schedule;
use crate::scheduler::slot::Slot;
use crate::tool::ToolRegistry;

/// A plan's text as it arrives: chunks of any size, cut anywhere; the end of the stream (or a
/// [`PlanPiece::Whole`]) is the end of the text.
pub(crate) type PlanText<'a> = Pin<Box<dyn Stream<Item = PlanPiece> + Send + 'a>>;

/// A piece of a plan that is still being written
/// ([`Engine::run_streamed_pieces`](crate::Engine::run_streamed_pieces)).
#[derive(Debug, Clone, PartialEq)]
pub enum PlanPiece {
    /// The next chunk of the plan's JSON text, cut anywhere.
    Text(String),
    /// The text has ended, and this is the plan to run, as the caller will have it: the text as
    /// the caller read it whole, and changed where it had to (a field filled in, a step added at
    /// the end). It is compiled instead of the text. Steps written in the text that it keeps as
    /// they were, at the same places (with the same dependencies, for those that started), go on
    /// (their early work counts); otherwise the plan runs from the start. The run's deadline
    /// counts from the end of the text (given by pieces, the caller bounds the writing). Pieces
    /// after it are not read.
    Whole(Value),
}

/// How a streamed plan's text is read: its [`Dialect`], with what the dialect keeps beside the
/// plan once the whole plan is compiled.
pub(in crate::scheduler) trait Reader: Send {
    /// The name of the plan's list of steps.
    fn list_key(&self) -> &'static str;
    /// The steps written so far, drafted, and the problems the rest cannot undo.
    fn prefix(
        &self,
        items: Vec<Value>,
        tools: &ToolRegistry,
        limits: &Limits,
    ) -> (DraftPlan, Vec<Problem>);
    /// The whole plan, from its text.
    fn whole_text(
        &mut self,
        text: &str,
        tools: &ToolRegistry,
        limits: &Limits,
    ) -> Result<Plan, InvalidPlan>;
    /// The whole plan, from its JSON.
    fn whole_value(
        &mut self,
        value: Value,
        tools: &ToolRegistry,
        limits: &Limits,
    ) -> Result<Plan, InvalidPlan>;
}

/// A [`Reader`] of plans of dialect `D`; `extra` is what the dialect kept beside the whole plan.
pub(in crate::scheduler) struct DialectReader<'d, D: Dialect> {
    pub(in crate::scheduler) dialect: &'d D,
    pub(in crate::scheduler) extra: Option<D::Extra>,
}

impl<D> Reader for DialectReader<'_, D>
where
    D: Dialect + Sync,
    D::Extra: Send,
{
    fn list_key(&self) -> &'static str {
        self.dialect.list_key()
    }

    fn prefix(
        &self,
        items: Vec<Value>,
        tools: &ToolRegistry,
        limits: &Limits,
    ) -> (DraftPlan, Vec<Problem>) {
        self.dialect.draft_prefix(items, tools, limits)
    }

    fn whole_text(
        &mut self,
        text: &str,
        tools: &ToolRegistry,
        limits: &Limits,
    ) -> Result<Plan, InvalidPlan> {
        let (plan, extra) = dialect::compile(self.dialect, text, tools, limits)?;
        self.extra = Some(extra);
        Ok(plan)
    }

    fn whole_value(
        &mut self,
        value: Value,
        tools: &ToolRegistry,
        limits: &Limits,
    ) -> Result<Plan, InvalidPlan> {
        let (plan, extra) = dialect::compile_value(self.dialect, value, tools, limits)?;
        self.extra = Some(extra);
        Ok(plan)
    }
}

/// What the driver keeps while the plan is being written.
pub(in crate::scheduler) struct Writing<'p> {
    pub(super) text: PlanText<'p>,
    /// How the plan's format is read.
    reader: &'p mut dyn Reader,
    scanner: ItemScanner,
    /// The text so far (at most the plan size limit).
    whole: String,
    /// The steps' JSON, as written.
    items: Vec<Value>,
    limits: &'p Limits,
    /// The keys that lead from the document's top-level object to the plan (`["arguments"]` when
    /// the text is a whole tool call).
    plan_path: Vec<String>,
    /// Per step: whether it may start before the plan is complete.
    early: Vec<bool>,
    /// Per step: whether it names a step not yet written. Such a step is not skipped before the
    /// plan is complete (its dependencies are not all known: those a skipped step read are kept).
    pending: Vec<bool>,
    /// Whether the steps written so far have a problem, or the text cannot be followed: nothing
    /// more joins the run before the whole plan is compiled.
    halted: bool,
    /// The plan the caller gave at the end of the text ([`PlanPiece::Whole`]), compiled instead of
    /// the text.
    pub(super) given: Option<Value>,
    /// Whether the run's deadline starts when the text ends (the caller bounds the writing), not
    /// when the run starts.
    pub(super) deadline_after_text: bool,
}

/// How the text of a streamed plan ended.
pub(in crate::scheduler) enum Written {
    /// The whole plan is valid, and its steps are those the run has.
    Plan,
    /// The whole plan is valid but its steps are not those streamed (a document that names its
    /// list of steps twice): the run starts again from the plan.
    Differs(Box<Plan>),
    /// The plan is not valid.
    Invalid(InvalidPlan),
    /// The whole plan is valid and must be approved before any step runs (nothing started).
    NeedsApproval(Box<Plan>),
}

impl<'p> Writing<'p> {
    /// Reads `text`, a plan (`plan_path` empty) or a JSON document holding the plan at `plan_path`,
    /// within `limits`, in the format `reader` reads.
    pub(in crate::scheduler) fn new(
        text: PlanText<'p>,
        reader: &'p mut dyn Reader,
        plan_path: &[&str],
        limits: &'p Limits,
        deadline_after_text: bool,
    ) -> Self {
        let mut list: Vec<&str> = plan_path.to_vec();
        list.push(reader.list_key());
        Self {
            text,
            reader,
            scanner: ItemScanner::new(&list, limits.max_plan_bytes, DEFAULT_MAX_VALUE_DEPTH),
            whole: String::new(),
            items: Vec::new(),
            limits,
            plan_path: plan_path.iter().map(|k| (*k).to_owned()).collect(),
            early: Vec::new(),
            pending: Vec::new(),
            halted: false,
            given: None,
            deadline_after_text,
        }
    }
}

impl Driver<'_> {
    /// The next chunk of a streamed plan's text: new steps join the run. Returns the end of the
    /// text, judged, when the text is too large to read on.
    pub(super) fn on_chunk(&mut self, chunk: &str) -> Option<Written> {
        let writing = self.writing.as_mut()?;
        if writing.whole.len() + chunk.len() > writing.limits.max_plan_bytes {
            return Some(Written::Invalid(InvalidPlan {
                problems: vec![Problem::PlanTooLarge {
                    size: writing.whole.len() + chunk.len(),
                    limit: writing.limits.max_plan_bytes,
                }],
            }));
        }
        writing.whole.push_str(chunk);
        if writing.halted {
            return None;
        }
        let items = match writing.scanner.push(chunk) {
            Ok(items) => items,
            Err(
                ScanError::TooLarge { .. }
                | ScanError::TooDeep { .. }
                | ScanError::Malformed { .. },
            ) => {
                // The whole text's compile says what is wrong with it.
                writing.halted = true;
                return None;
            }
        };
        if items.is_empty() {
            return None;
        }
        writing.items.extend(items);
        if writing.items.len() > writing.limits.max_steps {
            writing.halted = true;
            return None;
        }
        let (draft, problems) =
            writing
                .reader
                .prefix(writing.items.clone(), self.tools, writing.limits);
        match validate_prefix(draft, problems, self.tools) {
            Ok(prefix) => self.adopt_prefix(prefix),
            Err(_) => {
                if let Some(writing) = self.writing.as_mut() {
                    writing.halted = true;
                }
            }
        }
        None
    }

    /// The steps written so far, checked: new ones join the run, and those that may start early
    /// and have what they need are queued.
    fn adopt_prefix(&mut self, prefix: Prefix) {
        let Prefix {
            steps,
            pending,
            repeat,
        } = prefix;
        let at = self.now();
        let early_allowed =
            self.config.schedule == Schedule::Dependency && self.config.approval.is_none();
        let Some(writing) = self.writing.as_mut() else {
            return;
        };
        for (i, step) in steps.iter().enumerate().skip(self.slots.len()) {
            let read_only = self
                .tools
                .get(&step.tool)
                .is_some_and(|t| t.tool().annotations().read_only == Some(true));
            writing
                .early
                .push(early_allowed && read_only && !pending[i] && !repeat[i]);
            self.slots.push(Slot::waiting());
            self.written.push(Some(at));
        }
        writing.pending = pending;
        self.steps = Cow::Owned(steps);
        self.refresh_waiting(true);
    }

    /// Works out again what each waiting step still waits for: a step whose dependency failed or
    /// was skipped is skipped; one with nothing left to wait for is queued (while the plan is
    /// being written, only if it may start early).
    fn refresh_waiting(&mut self, writing: bool) {
        for i in 0..self.slots.len() {
            if self.slots[i].state != State::Waiting {
                continue;
            }
            let mut missing = 0;
            let mut failed = None;
            for &d in &self.steps[i].deps {
                match (self.slots[d].state, self.slots[d].status) {
                    (State::Done, StepStatus::Ok) => {}
                    (State::Done, _) => failed = failed.or(Some(d)),
                    _ => missing += 1,
                }
            }
            if let Some(d) = failed
                && !(writing && waits_for_more(self.writing.as_deref(), i))
            {
                let reason = format!("Skipped because dependency '{}' failed", self.steps[d].id);
                self.decide(i, StepStatus::Skipped, None, Some(reason));
                continue;
            }
            self.slots[i].missing = missing;
            let may_start = !writing || may_start_early(self.writing.as_deref(), i);
            if missing == 0 && may_start {
                enqueue(&mut self.slots, &mut self.ready, i);
            }
        }
    }

    /// The end of a streamed plan's text: the whole plan is compiled, and the run goes on with it
    /// (or stops, when it is not valid).
    pub(super) fn on_text_end(&mut self) -> Written {
        let Some(mut writing) = self.writing.take() else {
            return Written::Plan;
        };
        let plan = match compile_whole(&mut writing, self.tools) {
            Ok(plan) => plan,
            Err(invalid) => return Written::Invalid(invalid),
        };
        if self.config.approval.is_some() {
            return Written::NeedsApproval(Box::new(plan));
        }
        // Steps not yet started take the plan's version; one that started (or was skipped) must
        // also wait for the same steps it waited for.
        let same = plan.len() >= self.slots.len()
            && plan
                .steps()
                .iter()
                .zip(self.steps.iter())
                .zip(&self.slots)
                .all(|((a, b), slot)| {
                    a.id == b.id
                        && a.tool == b.tool
                        && a.arguments == b.arguments
                        && (slot.state == State::Waiting
                            || (a.deps == b.deps && a.same_call_as == b.same_call_as))
                });
        if !same {
            return Written::Differs(Box::new(plan));
        }
        self.adopt_plan(plan);
        Written::Plan
    }

    /// The whole plan, valid and starting with the steps the run has: the rest of its steps join,
    /// its outputs and waves are known, and outputs nobody will read are released.
    fn adopt_plan(&mut self, plan: Plan) {
        let at = self.now();
        while self.slots.len() < plan.len() {
            self.slots.push(Slot::waiting());
            self.written.push(Some(at));
        }
        self.outputs = Cow::Owned(plan.outputs().to_vec());
        self.explicit_outputs = plan.has_explicit_outputs();
        self.waves = Cow::Owned(plan.waves().to_vec());
        self.wave_left = plan.waves().iter().map(Vec::len).collect();
        self.steps = Cow::Owned(plan.steps().to_vec());
        for &i in plan.outputs() {
            self.slots[i].is_output = true;
        }
        for i in 0..self.slots.len() {
            let consumers = self.steps[i]
                .dependents
                .iter()
                .filter(|&&d| self.slots[d].state != State::Done)
                .count();
            self.slots[i].consumers = consumers;
        }
        if self.config.schedule == Schedule::WaveBarrier {
            // Nothing started early: the waves open as for a whole plan.
            self.open_wave(0);
        } else {
            self.refresh_waiting(false);
        }
        // Outputs held while the plan was written that nothing will read now.
        for i in 0..self.slots.len() {
            if self.slots[i].state == State::Done {
                self.release_output(i);
            }
        }
    }
}

/// Whether step `i` of a plan being written names a step not yet written.
pub(super) fn waits_for_more(writing: Option<&Writing<'_>>, i: usize) -> bool {
    writing.is_some_and(|w| w.pending.get(i).copied().unwrap_or(true))
}

/// Whether step `i` may start while the plan is being written (always, once it is not).
pub(super) fn may_start_early(writing: Option<&Writing<'_>>, i: usize) -> bool {
    writing.is_none_or(|w| w.early.get(i).copied().unwrap_or(false))
}

/// Compiles the whole text of a streamed plan as a plan read whole is compiled: only the JSON
/// document the scanner followed (text around it, such as a `<tool_call>` tag, left out), and the
/// plan at the writing's path inside it.
fn compile_whole(writing: &mut Writing<'_>, tools: &ToolRegistry) -> Result<Plan, InvalidPlan> {
    let Writing {
        reader,
        scanner,
        whole,
        plan_path,
        given,
        limits,
        ..
    } = writing;
    match given.take() {
        Some(Value::String(text)) => return reader.whole_text(&text, tools, limits),
        Some(plan) => return reader.whole_value(plan, tools, limits),
        None => {}
    }
    let text = match scanner.document() {
        Some((start, Some(end))) => &whole[start..end],
        Some((start, None)) => &whole[start..],
        None => whole.as_str(),
    };
    if plan_path.is_empty() {
        return reader.whole_text(text, tools, limits);
    }
    let not_json = |e: serde_json::Error| InvalidPlan {
        problems: vec![Problem::NotJson(e.to_string())],
    };
    let mut value: Value = serde_json::from_str(text).map_err(not_json)?;
    for key in plan_path.iter() {
        value = match value {
            Value::Object(mut fields) => fields.remove(key).unwrap_or(Value::Null),
            _ => Value::Null,
        };
    }
    // Tool-call arguments may come as a JSON string.
    if let Value::String(inner) = &value {
        value = serde_json::from_str(inner).map_err(not_json)?;
    }
    reader.whole_value(value, tools, limits)
}
