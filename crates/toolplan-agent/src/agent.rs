//! [`Agent`]: a model, instructions and tools, and the loop model → tool calls → results → model
//! until the model answers in text.
//!
//! With tool planning on ([`Planning`](toolplan_planner::Planning)), `execute_tool_plan` is offered
//! beside the individual tools (or alone) and the instructions explain when to use it. The other tool
//! calls of a turn run directly on the same engine, all at once, so they get the same validation,
//! timeouts, panic containment and parallelism as planned steps.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolplan_core::{EXECUTE_TOOL_PLAN, Engine, InvalidPlan, Problem, StreamedStart};
use toolplan_llm::{
    ChatModel, ChatRequest, LlmError, Message, ReplyStart, Role, StopReason, ToolCall, ToolChoice,
    ToolDefinition,
};
use toolplan_planner::{
    CUT_OFF_NOTE, ExecuteToolPlan, THOUGHT_FIELD, calls_with_made_up_dates, calls_without_options,
    dates_not_given, drop_contradicted_twins, drop_made_up_steps, drop_repeats_with_additions,
    incomplete_calls, incomplete_plan, mark_bare_references, numbers_to_use, options_left_out,
    percentages_as_fractions, plan_arguments, plan_not_run, plan_short_of_thought,
    plan_with_made_up_dates, plan_without_options, set_option, settled_options, tool_text,
    tools_left_out, unasked_plan, unasked_steps, unused_numbers,
};

use crate::answer::{
    ANSWER_TOOL, answer_shaped, asked_fields_left_out, forget_unused_answer, named_options,
    needs_judgement, prepare_answers, results_answer, without_echoed_question,
};
use crate::compact::{asked_for_more, compact_request, more_tools_note};
use crate::earlier::EarlierResults;
use crate::error::AgentError;
use crate::record::Record;
use crate::repeats::CallMemory;
use crate::streamed::{self, StreamedPlan};

/// Turns in a row made only of repeated calls after which the model must answer (no tools offered).
/// One: with the local 1.5B model, a second turn after a repeat brought the same call again.
pub const REPEAT_TURNS_BEFORE_ANSWER: usize = 1;

/// What a dry run's rejected plan is answered with, beside it, for the calls that were fine.
const DRY_RUN_NOT_RUN: &str = "Not run (dry run).";

/// Marks the references the model wrote without `$ref:` in its plans
/// ([`toolplan_planner::mark_bare_references`]).
fn mark_plans(calls: &mut [ToolCall]) {
    for call in plans_of(calls) {
        mark_bare_references(&mut call.arguments);
    }
}

/// The `execute_tool_plan` calls among `calls`.
fn plans_of(calls: &mut [ToolCall]) -> impl Iterator<Item = &mut ToolCall> {
    calls.iter_mut().filter(|c| c.name == EXECUTE_TOOL_PLAN)
}

/// The start of the reply that completes `message`, a turn sent back for leaving part of the
/// question out: its direct calls open for one more, or its one plan open for more steps. `None`
/// for a turn that mixes plans and calls, or whose plan is not a JSON object with a `steps` array.
fn completing(message: &Message) -> Option<ReplyStart> {
    let calls = &message.tool_calls;
    let open_in = match calls.as_slice() {
        [] => return None,
        [plan] if plan.name == EXECUTE_TOOL_PLAN => {
            plan.arguments.get("steps")?.as_array()?;
            Some("steps".to_owned())
        }
        _ if calls.iter().all(|c| c.name != EXECUTE_TOOL_PLAN) => None,
        _ => return None,
    };
    Some(ReplyStart {
        thought: message.content.clone(),
        calls: calls.clone(),
        open_in,
        may_end: false,
    })
}

/// What the model reads when `calls` (direct calls and plan steps) write dates the question never
/// gives ([`toolplan_planner::dates_not_given`]), if they do: told of the plan when there is one,
/// of the calls otherwise.
fn made_up_dates(input: &str, calls: &[ToolCall]) -> Option<String> {
    let (each, _) = call_arguments(calls);
    told_of(
        calls,
        &dates_not_given(input, each),
        plan_with_made_up_dates,
        calls_with_made_up_dates,
    )
}

/// What the model reads of `found`, what a check found in `calls`: nothing when it is empty; else
/// told of the plan (`plan`) when the turn has one, of the direct calls (`direct`) otherwise.
fn told_of<T>(
    calls: &[ToolCall],
    found: &[T],
    plan: fn(&[T]) -> String,
    direct: fn(&[T]) -> String,
) -> Option<String> {
    if found.is_empty() {
        None
    } else if calls.iter().any(|c| c.name == EXECUTE_TOOL_PLAN) {
        Some(plan(found))
    } else {
        Some(direct(found))
    }
}

/// Drops from the plans of `calls` the steps that write dates `input` never gives and stand alone
/// ([`toolplan_planner::drop_made_up_steps`]), and returns how many.
fn drop_made_up(input: &str, calls: &mut [ToolCall]) -> usize {
    plans_of(calls)
        .map(|call| drop_made_up_steps(input, &mut call.arguments).len())
        .sum()
}

/// A call's or a plan step's `(id, tool, arguments)`.
type CallArguments<'a> = (&'a str, &'a str, &'a Value);

/// The arguments of `calls` as the option checks read them, in order: each direct call's (its id
/// its tool's name), and each step's of each plan (`(id, tool, arguments)`); beside them, where
/// each is: the call, and the step in its plan.
fn call_arguments(calls: &[ToolCall]) -> (Vec<CallArguments<'_>>, Vec<(usize, Option<usize>)>) {
    let mut each = Vec::new();
    let mut at = Vec::new();
    for (i, call) in calls.iter().enumerate() {
        if call.name != EXECUTE_TOOL_PLAN {
            each.push((call.name.as_str(), call.name.as_str(), &call.arguments));
            at.push((i, None));
            continue;
        }
        let steps = call.arguments.get("steps").and_then(Value::as_array);
        for (j, step) in steps.into_iter().flatten().enumerate() {
            let text = |key: &str| step.get(key).and_then(Value::as_str).unwrap_or_default();
            if let Some(arguments) = step.get("arguments") {
                each.push((text("id"), text("tool"), arguments));
                at.push((i, Some(j)));
            }
        }
    }
    (each, at)
}

/// What a call is answered with when the turn it belongs to went back to be completed.
const NOT_RUN_WITH_OTHERS: &str = "Not run: this turn's calls went back to be completed; make the \
call again if it is still needed.";

/// A first turn sent back by [`Agent::check_against_question`].
struct SentBack {
    /// One result per call of the turn.
    results: Vec<Message>,
    /// Whether the reply continues the turn (it left part of the question out) rather than being
    /// written anew (it did more than the question asks).
    completes: bool,
    /// Steps sent back as not asked for by the question.
    unasked: usize,
    /// Whether it went back for dates the question never gives
    /// ([`toolplan_planner::dates_not_given`]): the reply's steps that still make them up, alone,
    /// are dropped ([`toolplan_planner::drop_made_up_steps`]).
    made_up_dates: bool,
}

/// How much of the end of a reply that was cut off unusable [`cut_off_retry`] quotes.
const CUT_RETRY_TAIL_CHARS: usize = 120;

/// What the model reads, after the conversation, when its reply was cut off at the token limit
/// before any call in it was whole: how it ended, and to write a shorter reply.
fn cut_off_retry(tokens: u64, reply: &str) -> String {
    let count = reply.chars().count();
    let ended: String = reply
        .chars()
        .skip(count.saturating_sub(CUT_RETRY_TAIL_CHARS))
        .collect();
    format!(
        "Your last reply was cut off at the output-token limit ({tokens} tokens) before any call \
         in it was complete, so nothing ran; it ended: …{ended}\nReply again, shorter: write each \
         call, step and value once."
    )
}

/// A model reply as [`Agent::send`] returns it: the message, whether it was cut off at the token
/// limit with tool calls in it, the plan that started while it was written, and the calls begun.
type Asked = (
    Message,
    bool,
    Option<StreamedPlan>,
    Vec<(usize, StreamedStart)>,
);

/// What the next model reply may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    /// Call tools or answer, as the model decides.
    Tools,
    /// Call a tool: a rejected plan went back to be fixed.
    Required,
    /// Answer in text: no tools offered.
    Answer,
}

impl Choice {
    /// The choice for a turn: answering wins over repairing.
    fn of(answer_now: bool, repairing: bool) -> Self {
        match (answer_now, repairing) {
            (true, _) => Choice::Answer,
            (false, true) => Choice::Required,
            (false, false) => Choice::Tools,
        }
    }
}

/// The result of [`Agent::interact`].
#[derive(Debug, Clone, PartialEq)]
pub struct Interaction {
    /// The model's final answer.
    pub answer: String,
    /// What it cost.
    pub record: Record,
    /// The whole conversation, system prompt first.
    pub messages: Vec<Message>,
}

/// The model's first turn, not run: what [`Agent::propose`] returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// The text the model wrote (its answer when it asked for no tools).
    pub text: String,
    /// The tool calls it asked for, as it wrote them (`execute_tool_plan` calls hold the plan).
    pub calls: Vec<ToolCall>,
    /// For each `execute_tool_plan` call, in order: the problems that would stop its plan from
    /// running (empty when it is valid).
    pub plan_problems: Vec<Vec<String>>,
    /// What the model call cost.
    pub record: Record,
}

/// A model with instructions and tools.
pub struct Agent {
    pub(crate) name: String,
    pub(crate) model: Arc<dyn ChatModel>,
    pub(crate) system: String,
    /// The caller's instructions alone (the system prompt without the planner's): the compact
    /// answer turn's system message starts with them.
    pub(crate) instructions: String,
    pub(crate) engine: Arc<Engine>,
    pub(crate) planner: Option<Arc<ExecuteToolPlan>>,
    pub(crate) definitions: Vec<ToolDefinition>,
    pub(crate) answer_in_plan: bool,
    /// Whether plans start running while the model writes them
    /// ([`AgentBuilder::stream_plans`](crate::AgentBuilder::stream_plans)).
    pub(crate) stream_plans: bool,
    /// Whether an offered tool takes its arguments as they are written (a query-plan tool).
    pub(crate) begins_streamed: bool,
    pub(crate) max_turns: usize,
    pub(crate) max_repairs: usize,
    pub(crate) max_result_bytes: usize,
    pub(crate) parallel_tool_calls: Option<bool>,
    pub(crate) think_first: bool,
    /// Whether the reply after a plan is written with a thought first (see
    /// [`AgentBuilder::think_first`](crate::AgentBuilder::think_first)).
    pub(crate) think_after_plan: bool,
    /// Whether the answer turn after a plan that succeeded is asked compactly
    /// ([`AgentBuilder::compact_answer`](crate::AgentBuilder::compact_answer)).
    pub(crate) compact_answer: bool,
    /// Whether a plan that succeeded without an answer of its own is answered with its results
    /// ([`AgentBuilder::results_answer`](crate::AgentBuilder::results_answer)).
    pub(crate) results_answer: bool,
}

impl Agent {
    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tools offered to the model, `execute_tool_plan` first when planning is on.
    pub fn tool_definitions(&self) -> &[ToolDefinition] {
        &self.definitions
    }

    /// The system prompt.
    pub fn system_prompt(&self) -> &str {
        &self.system
    }

    /// Answers one user input.
    pub async fn interact(&self, input: &str) -> Result<Interaction, AgentError> {
        self.interact_with(input, &CancellationToken::new()).await
    }

    /// Answers one user input; `cancel` stops the model call or the tools running.
    pub async fn interact_with(
        &self,
        input: &str,
        cancel: &CancellationToken,
    ) -> Result<Interaction, AgentError> {
        let start = Instant::now();
        let mut record = Record {
            began: Some(tokio::time::Instant::now()),
            ..Record::default()
        };
        let mut messages = self.opening(input);
        // The direct calls of this interaction: a call repeated with the same arguments is answered
        // from here instead of another run.
        let mut memory = CallMemory::new();
        let mut earlier = EarlierResults::new();
        // Turns in a row whose calls were all answered from memory: a model that has every result
        // it asked for and keeps asking is not helped by more turns (small models repeat a call even
        // when told they have its result), so after such a turn the next one offers no tools and it
        // answers.
        let mut repeat_turns = 0;
        // Whether the last turn ran a plan: the next reply is written from its results.
        let mut after_plan = false;
        // Whether the last turn's plan was rejected and sent back to be fixed: the next reply must
        // call a tool (a small model otherwise often apologises and stops).
        let mut repairing = false;
        // Where the next reply starts: the turn it completes, open for more.
        let mut reply_start = None;
        // Whether the last turn went back for dates the question never gives: the steps of the
        // reply that still make them up, alone, are dropped.
        let mut drop_dates = false;
        // The next turn's request when the last turn's plans all succeeded: asked compactly (the
        // question and the results, not the tools).
        let mut compact: Option<ChatRequest> = None;
        // Whether the model asked for more tool calls in a compact answer turn: the next reply
        // must call a tool.
        let mut more_asked = false;

        while record.turns < self.max_turns {
            if cancel.is_cancelled() {
                return Err(AgentError::Cancelled);
            }
            if let Some(request) = compact.take() {
                record.turns += 1;
                record.compact_answers += 1;
                let reply = self
                    .send(&request, false, &mut record, cancel)
                    .await
                    .map_err(|e| AgentError::model(e, &record))?
                    .0;
                if let Some(need) = asked_for_more(&reply) {
                    record.more_tools_asked += 1;
                    more_asked = true;
                    messages.push(Message::user(more_tools_note(&need)));
                    continue;
                }
                record.elapsed = start.elapsed();
                let answer = without_echoed_question(reply.content.clone(), input);
                messages.push(Message::assistant(answer.clone(), Vec::new()));
                return Ok(Interaction {
                    answer,
                    record,
                    messages,
                });
            }
            let (mut message, cut_off, streamed, mut begun) = self
                .ask_model_streaming(
                    &messages,
                    Choice::of(
                        repeat_turns >= REPEAT_TURNS_BEFORE_ANSWER,
                        repairing || std::mem::take(&mut more_asked),
                    ),
                    after_plan,
                    reply_start.take(),
                    self.stream_plans,
                    &mut record,
                    cancel,
                )
                .await
                .map_err(|e| AgentError::model(e, &record))?;
            mark_plans(&mut message.tool_calls);
            self.fit_to_question(input, &mut message.tool_calls, &mut record);
            if std::mem::take(&mut drop_dates) {
                record.dropped_steps += drop_made_up(input, &mut message.tool_calls);
            }
            if self.answer_in_plan {
                for call in plans_of(&mut message.tool_calls) {
                    forget_unused_answer(&mut call.arguments, input);
                    self.forget_answer_short_of_question(&mut call.arguments, input);
                    // One the plan runs without is left out of the conversation too.
                    self.forget_invalid_answer(&mut call.arguments);
                }
            }
            // A plan after a plan may use the earlier plans' results by their ids.
            for call in plans_of(&mut message.tool_calls) {
                record.reused_results += earlier.inline(&mut call.arguments);
            }
            let calls = message.tool_calls.clone();
            // The first plan is checked against the question before it runs: one that leaves part
            // of it out goes back once to be completed, and the reply starts with it, open for
            // more.
            if record.turns == 1
                && record.repairs < self.max_repairs
                && let Some(returned) = self.check_against_question(input, &calls)
            {
                record.tool_calls += calls.len();
                record.repairs += 1;
                record.unasked_steps += returned.unasked;
                drop_dates = returned.made_up_dates;
                repairing = true;
                reply_start = returned.completes.then(|| completing(&message)).flatten();
                messages.push(message);
                messages.extend(returned.results);
                continue;
            }
            messages.push(message);
            if calls.is_empty() {
                record.elapsed = start.elapsed();
                let answer = messages
                    .last()
                    .map(|m| without_echoed_question(m.content.clone(), input))
                    .unwrap_or_default();
                return Ok(Interaction {
                    answer,
                    record,
                    messages,
                });
            }
            record.tool_calls += calls.len();
            let repeats: Vec<Option<Message>> = calls
                .iter()
                .map(|c| memory.answer(c, self.repeat_is_harmless(c)))
                .collect();
            let fresh: Vec<ToolCall> = calls
                .iter()
                .zip(&repeats)
                .filter(|(_, r)| r.is_none())
                .map(|(c, _)| c.clone())
                .collect();
            record.repeated_calls += calls.len() - fresh.len();
            // Calls begun while the model wrote them go on only where the call is made now.
            begun.retain(|(i, _)| repeats.get(*i).is_some_and(Option::is_none));
            repeat_turns = if fresh.is_empty() {
                repeat_turns + 1
            } else {
                0
            };
            let may_fix = record.repairs < self.max_repairs;
            // A plan that started while the model wrote it goes on if it is the reply's one call
            // and runs now (not answered from memory).
            let streamed =
                streamed.filter(|s| s.is_the_plan_of(&calls) && fresh.len() == calls.len());
            let turn = self
                .run_calls(&fresh, may_fix, streamed, cancel, &mut record)
                .await;
            if cancel.is_cancelled() {
                return Err(AgentError::Cancelled);
            }
            // A plan that succeeded without an answer of its own (none, or one that inserted a
            // value that was not there) answers with its results, when the agent says so, the
            // question asks for no judgement on them, the plan was not sent back before (a plan
            // completed on request may still stop short: the model completed a sum's plan with the
            // weather of every city and no sum), and it does what its thought says (one that
            // leaves out a tool its thought names stopped short). The model, reading the results,
            // may finish the work.
            let answer = turn.answer.or_else(|| {
                let one_clean_plan = record.repairs == 0
                    && calls.len() == 1
                    && fresh.len() == 1
                    && turn.clean_plans + turn.clean_but_answer == 1
                    && fresh[0].name == EXECUTE_TOOL_PLAN
                    && self.thought_left_out(&fresh).is_none();
                (self.results_answer && one_clean_plan && !cut_off && !needs_judgement(input))
                    .then(|| {
                        results_answer(&fresh[0].arguments, &turn.outputs, self.max_result_bytes)
                    })
                    .flatten()
                    .inspect(|_| record.answered_with_results = true)
            });
            if repairing && turn.run_plans > 0 && turn.rejected_plans == 0 {
                record.repaired += 1;
            }
            // A plan answered with its results needs no repair (its answer step may have failed).
            repairing = answer.is_none()
                && (turn.rejected_plans > 0 || turn.faulty_plans > 0)
                && record.repairs < self.max_repairs;
            if repairing {
                record.repairs += 1;
                record.busy_replans += turn.busy_plans;
                reply_start = turn.restart;
            }
            earlier.remember(turn.outputs);
            let fresh_results = turn.messages;
            for (call, result) in fresh.iter().zip(&fresh_results) {
                memory.remember(call, result);
            }
            after_plan = fresh.iter().any(|c| c.name == EXECUTE_TOOL_PLAN);
            let mut fresh_results = fresh_results.into_iter();
            let cut_note = cut_off.then_some(CUT_OFF_NOTE);
            let results: Vec<Message> = repeats
                .into_iter()
                .filter_map(|r| r.or_else(|| fresh_results.next()))
                .map(|mut m| {
                    // The calls that were written whole ran; the model learns the rest did not.
                    if let Some(note) = cut_note {
                        m.content.push_str(note);
                    }
                    m
                })
                .collect();
            // Once the model has asked for more in a compact turn, the answer turns that follow are
            // asked the usual way: a model that misjudged its results once is not asked again
            // the same way (small models otherwise ask for more again and again). A turn that is
            // not all plans gets no compact request.
            if self.compact_answer
                && !repairing
                && !cut_off
                && answer.is_none()
                && record.more_tools_asked == 0
                && fresh.len() == calls.len()
                && turn.clean_plans == calls.len()
            {
                compact = compact_request(
                    &self.instructions,
                    input,
                    &calls,
                    &results,
                    self.think_first || self.think_after_plan,
                );
            }
            messages.extend(results);
            if let Some(answer) = answer {
                record.answered_by_plan = !record.answered_with_results;
                record.elapsed = start.elapsed();
                messages.push(Message::assistant(answer.clone(), Vec::new()));
                return Ok(Interaction {
                    answer,
                    record,
                    messages,
                });
            }
        }
        record.elapsed = start.elapsed();
        Err(AgentError::MaxTurns {
            record: Box::new(record),
            messages,
        })
    }

    /// The model's first turn for `input`, with nothing run: the answer it wrote or the tool calls
    /// (and plans) it asked for. For a dry run (`toolplan ask --dry-run`), and for benchmarks that
    /// score the calls a model makes rather than their results. A plan's answer field, if any, is
    /// left in its arguments.
    pub async fn propose(
        &self,
        input: &str,
        cancel: &CancellationToken,
    ) -> Result<Proposal, AgentError> {
        let start = Instant::now();
        let mut record = Record::default();
        let mut messages = self.opening(input);
        let (mut message, _) = self
            .ask_model(&messages, Choice::Tools, false, None, &mut record, cancel)
            .await
            .map_err(|e| AgentError::model(e, &record))?;
        mark_plans(&mut message.tool_calls);
        self.fit_to_question(input, &mut message.tool_calls, &mut record);
        let mut problems = self.plan_problems(&message.tool_calls);
        let mut reply_start = None;
        let mut drop_dates = false;
        let returned = if problems.iter().any(|p| p.is_err()) {
            // The rejected plans go back as they would in a run, once, and the reply must call a
            // tool; the other calls are reported as not run.
            Some(
                message
                    .tool_calls
                    .iter()
                    .zip(&problems)
                    .map(|(call, problem)| match problem {
                        Err(invalid) => Message::tool_result(call, plan_not_run(invalid), true),
                        Ok(()) => Message::tool_result(call, DRY_RUN_NOT_RUN, false),
                    })
                    .collect::<Vec<_>>(),
            )
        } else {
            let returned = self.check_against_question(input, &message.tool_calls);
            if let Some(sent) = &returned {
                record.unasked_steps += sent.unasked;
                drop_dates = sent.made_up_dates;
                if sent.completes {
                    reply_start = completing(&message);
                }
            }
            returned.map(|sent| sent.results)
        };
        if self.max_repairs > 0
            && let Some(results) = returned
        {
            record.repairs += 1;
            messages.push(message.clone());
            messages.extend(results);
            let (mut repaired, _) = self
                .ask_model(
                    &messages,
                    Choice::Required,
                    false,
                    reply_start,
                    &mut record,
                    cancel,
                )
                .await
                .map_err(|e| AgentError::model(e, &record))?;
            mark_plans(&mut repaired.tool_calls);
            self.fit_to_question(input, &mut repaired.tool_calls, &mut record);
            if drop_dates {
                record.dropped_steps += drop_made_up(input, &mut repaired.tool_calls);
            }
            // A reply without calls repairs nothing: the first one stands.
            if !repaired.tool_calls.is_empty() {
                problems = self.plan_problems(&repaired.tool_calls);
                let plans = repaired
                    .tool_calls
                    .iter()
                    .any(|c| c.name == EXECUTE_TOOL_PLAN);
                if plans && problems.iter().all(|p| p.is_ok()) {
                    record.repaired += 1;
                }
                message = repaired;
            }
        }
        record.tool_calls = message.tool_calls.len();
        record.elapsed = start.elapsed();
        let plan_problems = message
            .tool_calls
            .iter()
            .zip(problems)
            .filter(|(c, _)| c.name == EXECUTE_TOOL_PLAN)
            .map(|(_, p)| match p {
                Ok(()) => Vec::new(),
                Err(invalid) => invalid.problems.iter().map(|p| p.to_string()).collect(),
            })
            .collect();
        Ok(Proposal {
            text: message.content,
            calls: message.tool_calls,
            plan_problems,
            record,
        })
    }

    /// Whether making `call` again changes nothing, so that a repeat may be answered with the
    /// earlier result: its tool says it is read-only or idempotent, or, for a plan, every step's
    /// tool does. A tool that is not registered runs nothing (the call fails), and so neither does a
    /// plan that is not a list of steps.
    fn repeat_is_harmless(&self, call: &ToolCall) -> bool {
        let tools = self.engine.tools();
        let harmless = |name: &str| {
            tools
                .get(name)
                .is_none_or(|t| t.tool().annotations().repeat_is_harmless())
        };
        if call.name != EXECUTE_TOOL_PLAN {
            return harmless(&call.name);
        }
        let Some(Value::Array(steps)) = call.arguments.get("steps") else {
            return true;
        };
        steps
            .iter()
            .filter_map(|s| s.get("tool").and_then(Value::as_str))
            .all(harmless)
    }

    /// A plan call's arguments as a run takes them: with plans that end with their answer, the
    /// answer field becomes the plan's last step ([`prepare_answers`]).
    ///
    /// An answer that reads what its steps do not return (a field missing from the output schema
    /// of the step's tool) is left out, as one that names a step the plan lacks is: the steps run,
    /// and the model replies from their results, instead of the whole plan going back.
    pub(crate) fn plan_as_run(&self, arguments: &Value) -> Value {
        if !self.answer_in_plan {
            return arguments.clone();
        }
        let mut arguments = arguments.clone();
        self.forget_invalid_answer(&mut arguments);
        prepare_answers(arguments)
    }

    /// Sets a plan's `answer` field to null when the answer step it becomes is the plan's only
    /// problem ([`plan_as_run`](Self::plan_as_run)).
    fn forget_invalid_answer(&self, plan: &mut Value) {
        if self.answer_fails_validation(plan, &prepare_answers(plan.clone()))
            && let Some(object) = plan.as_object_mut()
        {
            object.insert(ANSWER_TOOL.into(), Value::Null);
        }
    }

    /// Whether the answer step that `prepared` (a plan as [`prepare_answers`] made it from
    /// `arguments`) adds is the plan's only problem.
    fn answer_fails_validation(&self, arguments: &Value, prepared: &Value) -> bool {
        let ids = |plan: &Value| -> Vec<String> {
            plan.get("steps")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|s| s.get("tool").and_then(Value::as_str) == Some(ANSWER_TOOL))
                .filter_map(|s| s.get("id").and_then(Value::as_str).map(str::to_owned))
                .collect()
        };
        let written = ids(arguments);
        let added: Vec<String> = ids(prepared)
            .into_iter()
            .filter(|id| !written.contains(id))
            .collect();
        let Some(planner) = self.planner.as_ref().filter(|_| !added.is_empty()) else {
            return false;
        };
        match planner.compile(prepared.clone()) {
            Ok(_) => false,
            Err(invalid) => invalid
                .problems
                .iter()
                .all(|p| p.step().is_some_and(|s| added.iter().any(|a| a == s))),
        }
    }

    /// For each call, in order: for a plan, whether it passes validation (its problems if not);
    /// other calls pass.
    fn plan_problems(&self, calls: &[ToolCall]) -> Vec<Result<(), InvalidPlan>> {
        calls
            .iter()
            .map(|c| {
                if c.name != EXECUTE_TOOL_PLAN {
                    return Ok(());
                }
                match &self.planner {
                    Some(planner) => planner.compile(self.plan_as_run(&c.arguments)).map(|_| ()),
                    None => Err(InvalidPlan {
                        problems: vec![Problem::UnknownTool {
                            step: String::new(),
                            tool: EXECUTE_TOOL_PLAN.into(),
                            suggestion: None,
                        }],
                    }),
                }
            })
            .collect()
    }

    /// The first turn's calls checked against the question when planning is on: `None` when they
    /// pass, otherwise one result per call (nothing is run). Without planning the model's calls are
    /// taken as they are.
    ///
    /// Five checks, the first that fails goes back: numbers the question gives that no call uses
    /// ([`toolplan_planner::unused_numbers`]; named with the first plan, or the first call when
    /// there is none; the reply then continues the turn, open for more), tools a plan's thought
    /// names that none of its steps calls ([`toolplan_planner::tools_left_out`]; the reply
    /// continues that plan, open for more steps), options the question names that no call or
    /// step sets ([`toolplan_planner::options_left_out`]; named with the first plan, or the
    /// first call when there is none; the reply is written anew, the calls having to change),
    /// dates calls write that the question never gives ([`toolplan_planner::dates_not_given`];
    /// the same way), and steps of a plan that the question does not ask for
    /// ([`toolplan_planner::unasked_steps`]; the reply is written anew).
    fn check_against_question(&self, input: &str, calls: &[ToolCall]) -> Option<SentBack> {
        if self.planner.is_none() || calls.is_empty() {
            return None;
        }
        let arguments = calls.iter().flat_map(|c| {
            let plan = c.name == EXECUTE_TOOL_PLAN;
            let steps = plan
                .then(|| plan_arguments(&c.arguments))
                .into_iter()
                .flatten();
            (!plan).then_some(&c.arguments).into_iter().chain(steps)
        });
        let unused = unused_numbers(input, arguments);
        let first_plan = calls.iter().position(|c| c.name == EXECUTE_TOOL_PLAN);
        let mut made_up = false;
        let (told, told_what, completes, unasked) =
            if let Some(what) = told_of(calls, &unused, incomplete_plan, incomplete_calls) {
                (first_plan.unwrap_or(0), what, true, 0)
            } else if let Some((told, left_out)) = self.thought_left_out(calls) {
                (told, plan_short_of_thought(&left_out), true, 0)
            } else if let Some(what) = self.options_left_out(input, calls) {
                (first_plan.unwrap_or(0), what, false, 0)
            } else if let Some(what) = made_up_dates(input, calls) {
                made_up = true;
                (first_plan.unwrap_or(0), what, false, 0)
            } else {
                let tools = self.engine.tools();
                let text_of = |name: &str| {
                    tools
                        .get(name)
                        .map(|t| tool_text(name, t.tool().description(), t.schema()))
                };
                let (told, unasked) = calls.iter().enumerate().find_map(|(i, c)| {
                    let unasked = if c.name == EXECUTE_TOOL_PLAN {
                        unasked_steps(input, &c.arguments, text_of)
                    } else {
                        Vec::new()
                    };
                    (!unasked.is_empty()).then_some((i, unasked))
                })?;
                (told, unasked_plan(&unasked), false, unasked.len())
            };
        let results = calls
            .iter()
            .enumerate()
            .map(|(i, call)| {
                if i == told {
                    Message::tool_result(call, told_what.clone(), true)
                } else {
                    Message::tool_result(call, NOT_RUN_WITH_OTHERS, true)
                }
            })
            .collect();
        Some(SentBack {
            results,
            completes,
            unasked,
            made_up_dates: made_up,
        })
    }

    /// The names of the tools a plan's steps can call: the engine's, but the answer tool (which a
    /// plan's `answer` field becomes).
    fn step_tool_names(&self) -> Vec<String> {
        self.engine
            .tools()
            .iter()
            .map(|t| t.tool().name().to_owned())
            .filter(|n| n != ANSWER_TOOL)
            .collect()
    }

    /// The first plan of `calls` whose thought names tools that none of its steps calls
    /// ([`toolplan_planner::tools_left_out`]; the answer tool, a plain word, is not looked for),
    /// with those tools.
    fn thought_left_out(&self, calls: &[ToolCall]) -> Option<(usize, Vec<String>)> {
        let names = self.step_tool_names();
        calls.iter().enumerate().find_map(|(i, c)| {
            if c.name != EXECUTE_TOOL_PLAN {
                return None;
            }
            let left_out = tools_left_out(&c.arguments, names.iter().map(String::as_str));
            (!left_out.is_empty()).then_some((i, left_out))
        })
    }

    /// Sets a plan's text answer to null when it leaves out a field of a result that `question`
    /// asks for ([`asked_fields_left_out`]): the plan then answers with its results.
    fn forget_answer_short_of_question(&self, plan: &mut Value, question: &str) {
        let tools = self.engine.tools();
        let left_out = asked_fields_left_out(plan, question, |name| {
            tools.get(name).and_then(|t| t.tool().output_schema())
        });
        if !left_out.is_empty()
            && let Some(object) = plan.as_object_mut()
        {
            object.insert(ANSWER_TOOL.into(), Value::Null);
        }
    }

    /// What the model reads when `calls` (direct calls and plan steps) leave out options the
    /// question names ([`toolplan_planner::options_left_out`]), if they do: told of the plan when
    /// there is one, of the calls otherwise.
    fn options_left_out(&self, input: &str, calls: &[ToolCall]) -> Option<String> {
        let tools = self.engine.tools();
        let (each, _) = call_arguments(calls);
        let left_out = options_left_out(input, each, |name| tools.get(name).map(|t| t.schema()));
        told_of(
            calls,
            &left_out,
            plan_without_options,
            calls_without_options,
        )
    }

    /// Where planning is on, `calls` (direct calls and plan steps) made to fit the question where
    /// it leaves no doubt: percentages as fractions ([`Agent::fit_percentages`]), the options it
    /// names set ([`Agent::fill_options`], counted in `record.filled_options`), and steps that
    /// repeat another with a difference it does not ask for taken out ([`Agent::drop_repeats`],
    /// counted in `record.dropped_steps`).
    fn fit_to_question(&self, input: &str, calls: &mut [ToolCall], record: &mut Record) {
        self.fit_percentages(input, calls);
        record.filled_options += self.fill_options(input, calls);
        record.dropped_steps += self.drop_repeats(input, calls);
    }

    /// Where planning is on, takes out of the plans of `calls` the steps that repeat another step
    /// with a difference the question does not ask for, where they stand alone, and returns how
    /// many; without planning the model's calls are taken as they are. Two kinds: a twin but for
    /// an option the question contradicts ([`toolplan_planner::drop_contradicted_twins`]: asked
    /// for the weather "in Celsius", a plan that fetches it in Celsius and again in Fahrenheit
    /// loses the second), and a repeat with additions the question does not give
    /// ([`toolplan_planner::drop_repeats_with_additions`]: the same emissions call again with a
    /// made-up `"efficiency_reduction": 10`).
    fn drop_repeats(&self, input: &str, calls: &mut [ToolCall]) -> usize {
        if self.planner.is_none() {
            return 0;
        }
        let tools = self.engine.tools();
        plans_of(calls)
            .map(|call| {
                let twins = drop_contradicted_twins(input, &mut call.arguments, |name| {
                    tools.get(name).map(|t| t.schema())
                });
                twins.len() + drop_repeats_with_additions(input, &mut call.arguments).len()
            })
            .sum()
    }

    /// Where planning is on, sets in `calls` (direct calls and plan steps) the options the
    /// question names that they leave out and that leave no doubt
    /// ([`toolplan_planner::settled_options`]: "high wind strength", one step that sets no
    /// `windStrength`), and returns how many it set; without planning the model's calls are taken
    /// as they are. A small model told what it left out often sends the same plan again.
    fn fill_options(&self, input: &str, calls: &mut [ToolCall]) -> usize {
        if self.planner.is_none() {
            return 0;
        }
        let tools = self.engine.tools();
        let (each, at) = call_arguments(calls);
        let left_out = options_left_out(input, each, |name| tools.get(name).map(|t| t.schema()));
        let mut set = 0;
        for option in settled_options(&left_out) {
            let Some(&(call, step)) = at.get(option.call) else {
                continue;
            };
            let arguments = match step {
                None => calls.get_mut(call).map(|c| &mut c.arguments),
                Some(step) => calls
                    .get_mut(call)
                    .and_then(|c| c.arguments.get_mut("steps"))
                    .and_then(|steps| steps.get_mut(step))
                    .and_then(|s| s.get_mut("arguments")),
            };
            if let Some(arguments) = arguments
                && set_option(arguments, option)
            {
                set += 1;
            }
        }
        set
    }

    /// Where planning is on, the percentages of the question that `calls` (direct calls and plan
    /// steps) pass as whole numbers to parameters that take fractions are made fractions
    /// ([`percentages_as_fractions`]); without planning the model's calls are taken as they are.
    fn fit_percentages(&self, input: &str, calls: &mut [ToolCall]) {
        if self.planner.is_none() {
            return;
        }
        let tools = self.engine.tools();
        let fit = |tool: &str, arguments: &mut Value| {
            if let Some(tool) = tools.get(tool) {
                percentages_as_fractions(input, tool.schema(), arguments);
            }
        };
        for call in calls {
            if call.name != EXECUTE_TOOL_PLAN {
                fit(&call.name, &mut call.arguments);
                continue;
            }
            let steps = call
                .arguments
                .get_mut("steps")
                .and_then(Value::as_array_mut);
            for step in steps.into_iter().flatten() {
                let tool = step.get("tool").and_then(Value::as_str).map(str::to_owned);
                if let (Some(tool), Some(arguments)) = (tool, step.get_mut("arguments")) {
                    fit(&tool, arguments);
                }
            }
        }
    }

    /// A conversation's first messages: the system prompt (if any) and the user's input.
    fn opening(&self, input: &str) -> Vec<Message> {
        let mut messages = Vec::with_capacity(8);
        if !self.system.is_empty() {
            messages.push(Message::system(self.system.clone()));
        }
        messages.push(Message::user(input));
        messages
    }

    /// One model call on `messages`: the request this agent sends at that point of a conversation
    /// (tools offered unless `answer_now`; a thought first where the builder says; the reply's
    /// start when one is given), its cost added to
    /// `record`, and the reply with whether it was cut off at the token limit with tool calls in it
    /// (the calls written whole; counted in `record.cut_replies`).
    async fn ask_model(
        &self,
        messages: &[Message],
        choice: Choice,
        after_plan: bool,
        reply_start: Option<ReplyStart>,
        record: &mut Record,
        cancel: &CancellationToken,
    ) -> Result<(Message, bool), LlmError> {
        let (message, cut_off, _, _) = self
            .ask_model_streaming(
                messages,
                choice,
                after_plan,
                reply_start,
                false,
                record,
                cancel,
            )
            .await?;
        Ok((message, cut_off))
    }

    /// [`ask_model`](Self::ask_model); with `stream` (and a planner, or a tool that takes its
    /// arguments as they are written), a plan the reply begins starts running while it is written
    /// ([`crate::streamed`]), and comes back with the reply, as do the calls begun of such tools
    /// (keep them until the turn's calls have run).
    #[allow(clippy::too_many_arguments)]
    async fn ask_model_streaming(
        &self,
        messages: &[Message],
        choice: Choice,
        after_plan: bool,
        reply_start: Option<ReplyStart>,
        stream: bool,
        record: &mut Record,
        cancel: &CancellationToken,
    ) -> Result<Asked, LlmError> {
        record.turns += 1;
        // The question is the conversation's first user message (`opening`).
        let question = messages
            .iter()
            .find(|m| m.role == Role::User)
            .map_or("", |m| m.content.as_str());
        let mut tools = self
            .answer_in_plan
            .then(|| answer_shaped(&self.definitions, question))
            .flatten();
        // The first plan is checked for the question's numbers, and for the tools its thought
        // names, after it is written (`check_against_question`); a provider that constrains
        // decoding holds it to them while it is written, so that the plan comes whole in one call.
        if record.turns == 1 && self.max_repairs > 0 && self.planner.is_some() {
            let numbers = numbers_to_use(question);
            let options = named_options(question);
            let named = self.step_tool_names();
            let shaped = tools.get_or_insert_with(|| self.definitions.clone());
            for definition in shaped.iter_mut().filter(|d| d.name == EXECUTE_TOOL_PLAN) {
                if let Some(references) = &mut definition.step_references {
                    references.required_numbers = numbers.clone();
                    references.thought = Some(THOUGHT_FIELD.to_owned());
                    references.thought_tools = named.clone();
                    references.required_words = options.clone();
                }
            }
        }
        let request = ChatRequest {
            messages: messages.to_vec(),
            tools: tools.unwrap_or_else(|| self.definitions.clone()),
            tool_choice: match choice {
                _ if self.definitions.is_empty() => ToolChoice::None,
                Choice::Answer => ToolChoice::None,
                Choice::Tools => ToolChoice::Auto,
                Choice::Required => ToolChoice::Required,
            },
            parallel_tool_calls: self.parallel_tool_calls,
            think_first: self.think_first || (self.think_after_plan && after_plan),
            reply_start,
            ..ChatRequest::default()
        };
        self.send(&request, stream, record, cancel).await
    }

    /// Sends `request` to the model (streamed as [`ask_model_streaming`](Self::ask_model_streaming)
    /// says), its cost added to `record`; a reply cut off before anything in it could be used is
    /// asked once more, told so.
    async fn send(
        &self,
        request: &ChatRequest,
        stream: bool,
        record: &mut Record,
        cancel: &CancellationToken,
    ) -> Result<Asked, LlmError> {
        let asked = Instant::now();
        let (response, mut streamed, mut begun) =
            if stream && (self.planner.is_some() || self.begins_streamed) {
                let begin = |name: &str| self.begin_streamed(name);
                let engine = self.planner.as_ref().map(|p| p.engine());
                match streamed::ask(self.model.as_ref(), request, engine, &begin, cancel).await {
                    // A stream that broke after its first piece is not retried by the provider
                    // (the pieces were the start of a reply that will not come); the agent drops
                    // what it had and asks again, as a call that is not streamed is retried.
                    (Err(e), _, _) if e.is_retryable() => {
                        (self.model.chat(request, cancel).await, None, Vec::new())
                    }
                    other => other,
                }
            } else {
                (self.model.chat(request, cancel).await, None, Vec::new())
            };
        let response = match response {
            // A reply cut off before anything in it could be used (a value written again and
            // again): asked once more, told so; the note is not kept in the conversation.
            Err(LlmError::CutOff { tokens, reply, .. }) => {
                record.llm_calls += 1;
                record.output_tokens += tokens;
                record.unusable_cut_replies += 1;
                record.turns += 1;
                streamed = None;
                begun.clear();
                let mut again = request.clone();
                again
                    .messages
                    .push(Message::user(cut_off_retry(tokens, &reply)));
                self.model.chat(&again, cancel).await?
            }
            other => other?,
        };
        let took = asked.elapsed();
        record.llm_calls += 1;
        record.input_tokens += response.usage.input_tokens;
        record.output_tokens += response.usage.output_tokens;
        record.model_elapsed += took;
        if response
            .message
            .tool_calls
            .iter()
            .any(|c| c.name == EXECUTE_TOOL_PLAN)
        {
            record.planning_elapsed += took;
            record.planning_output_tokens += response.usage.output_tokens;
        }
        let cut_off =
            response.stop == StopReason::MaxTokens && !response.message.tool_calls.is_empty();
        if cut_off {
            record.cut_replies += 1;
        }
        Ok((response.message, cut_off, streamed, begun))
    }

    /// Begins a call of the offered tool `name` from its arguments as the model writes them, when
    /// the tool takes them so ([`toolplan_core::Tool::begin_streamed`]).
    fn begin_streamed(&self, name: &str) -> Option<StreamedStart> {
        if !self
            .definitions
            .iter()
            .any(|d| d.name == name && !d.listed_only)
        {
            return None;
        }
        self.engine.tools().get(name)?.tool().begin_streamed()
    }
}
