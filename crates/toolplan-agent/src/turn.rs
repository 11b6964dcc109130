//! One turn's tool calls: plans run through the planner, the other calls directly on the engine
//! ([`Engine::run_calls`](toolplan_core::Engine::run_calls)), each answered with one tool-result
//! message the model reads.

use std::sync::Arc;
use tokio::time::Instant;

use tokio_util::sync::CancellationToken;
use toolplan_core::limits::truncate_string;
use toolplan_core::{
    DirectCall, EXECUTE_TOOL_PLAN, PlanRun, RunControl, RunOutcome, StepRecord, StepStatus,
    value_as_text,
};
use toolplan_llm::{Message, ReplyStart, ToolCall};
use toolplan_planner::{ANSWER_FAILED_HINT, BUSY_HINT, FIX_PLAN_HINT, REPLAN_HINT, plan_not_run};

use crate::agent::Agent;
use crate::answer::ANSWER_TOOL;
use crate::record::Record;
use crate::streamed::StreamedPlan;

/// What one turn's tool calls gave.
pub(crate) struct TurnResults {
    /// One tool-result message per call, in call order.
    pub messages: Vec<Message>,
    /// The answer, when the turn was one plan that succeeded with its answer
    /// ([`Planning::answer_in_plan`](toolplan_planner::Planning::answer_in_plan)).
    pub answer: Option<String>,
    /// Plans of the turn that were rejected before they ran.
    pub rejected_plans: usize,
    /// Plans of the turn that passed validation and ran.
    pub run_plans: usize,
    /// Of those, the plans whose every step succeeded.
    pub clean_plans: usize,
    /// Of those that ran, the plans whose every step succeeded but the `answer` step the plan's
    /// answer field became (it inserted a value that was not there): their results are whole.
    pub clean_but_answer: usize,
    /// Plans that ran and whose failed steps all failed on a reference that found no value (the
    /// plan's fault), when `may_fix` was given: their summaries ask for a corrected plan.
    pub faulty_plans: usize,
    /// Of those, the plans whose failed steps all failed with an error that asks to try again
    /// ([`asks_to_try_again`]): their summaries ask for the failed steps again, on the results
    /// the plan has.
    pub busy_plans: usize,
    /// Where the reply that follows the turn's plan starts, when the turn was that one plan and it
    /// was faulty (the steps that succeeded, open for more) or busy (the steps that did not,
    /// open for more or an end) ([`plan_start`]).
    pub restart: Option<ReplyStart>,
    /// The results of the output steps that succeeded, and of the steps that failed steps read,
    /// of every plan of the turn, by step id: a later plan may refer to them
    /// ([`crate::earlier`]).
    pub outputs: serde_json::Map<String, serde_json::Value>,
}

/// The start of the reply that follows `plan`: the plan's arguments before its steps (its thought)
/// and the steps `kept` names, open for more steps (with `may_end`, the model may also end the plan
/// there). The steps it takes are the model's own. For a plan whose failed steps used references
/// that found no value, the steps that succeeded: the correction adds the missing lookups instead
/// of writing the same plan again. For a plan whose
/// failed steps' tools asked to be tried again, the steps that did not succeed: they run again on
/// the results the plan has (their references to its other steps name earlier results), and the
/// model may add to them or not.
fn plan_start(plan: &ToolCall, kept: &[&str], may_end: bool) -> Option<ReplyStart> {
    let mut plan = plan.clone();
    let steps = plan.arguments.get_mut("steps")?.as_array_mut()?;
    steps.retain(|step| {
        step.get("id")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|id| kept.contains(&id))
    });
    Some(ReplyStart {
        thought: String::new(),
        calls: vec![plan],
        open_in: Some("steps".to_owned()),
        may_end,
    })
}

impl Agent {
    /// Runs one turn's tool calls: plans through the planner, the other calls together as one plan of
    /// independent steps. With `may_fix`, a plan that failed through its own references is counted
    /// in [`TurnResults::faulty_plans`] and its summary asks for a corrected plan. `streamed` is
    /// the run of the turn's one call, a plan, that started while the model wrote it: the plan
    /// runs on there.
    pub(crate) async fn run_calls(
        &self,
        calls: &[ToolCall],
        may_fix: bool,
        streamed: Option<StreamedPlan>,
        cancel: &CancellationToken,
        record: &mut Record,
    ) -> TurnResults {
        let mut results: Vec<Option<Message>> = vec![None; calls.len()];
        let mut direct: Vec<usize> = Vec::new();
        let mut plans = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            if call.name == EXECUTE_TOOL_PLAN {
                match &self.planner {
                    Some(p) => plans.push((i, Arc::clone(p))),
                    None => {
                        results[i] = Some(self.unknown_tool(call));
                        record.tool_errors += 1;
                    }
                }
            } else if !self
                .definitions
                .iter()
                .any(|d| d.name == call.name && !d.listed_only)
            {
                // Only the tools offered to the model may be called (in plan-only mode, the tools
                // are reachable through plans alone).
                results[i] = Some(self.unknown_tool(call));
                record.tool_errors += 1;
            } else if !call.arguments.is_object() {
                results[i] = Some(Message::tool_result(
                    call,
                    format!(
                        "Error: the arguments of {} must be a JSON object, got: {}",
                        call.name, call.arguments
                    ),
                    true,
                ));
                record.tool_errors += 1;
            } else {
                direct.push(i);
            }
        }

        if streamed.is_some() {
            record.streamed_plans += 1;
        }
        let mut streamed = streamed;
        let plan_runs = futures::future::join_all(plans.iter().map(|(i, planner)| {
            let control = RunControl::with_cancel(cancel.child_token());
            let arguments = self.plan_as_run(&calls[*i].arguments);
            let streamed = streamed.take();
            async move {
                match streamed {
                    Some(run) => {
                        let began = run.began;
                        (began, run.finish(arguments, planner, control).await)
                    }
                    None => (Instant::now(), planner.execute(arguments, control).await),
                }
            }
        }));
        let direct_run = self.run_direct(calls, &direct, cancel);
        let (plan_runs, (direct_results, first_direct)) = tokio::join!(plan_runs, direct_run);
        if let Some(at) = first_direct {
            record.tool_started(at);
        }

        let mut answer = None;
        let mut outputs = serde_json::Map::new();
        let mut rejected_plans = 0;
        let mut faulty_plans = 0;
        let mut busy_plans = 0;
        let mut clean_plans = 0;
        let mut clean_but_answer = 0;
        let mut restart = None;
        let only_call = calls.len() == 1;
        for ((i, _), (began, outcome)) in plans.iter().zip(plan_runs) {
            record.plans += 1;
            if let Ok(run) = &outcome
                && let Some(first) = run.steps.iter().filter_map(|s| s.started).min()
            {
                record.tool_started(began + first);
            }
            let message = match outcome {
                Ok(run) => {
                    // Only its answer failed: the lookups stand, and the model replies from them.
                    let only_answer_failed = !run.all_ok()
                        && run.outcome == RunOutcome::Completed
                        && run
                            .problems()
                            .all(|s| s.tool == ANSWER_TOOL && s.status == StepStatus::Failed);
                    if run.all_ok() {
                        clean_plans += 1;
                    } else if only_answer_failed {
                        clean_but_answer += 1;
                    }
                    if only_call && run.all_ok() {
                        answer = run
                            .steps
                            .iter()
                            .rev()
                            .filter(|s| s.tool == ANSWER_TOOL)
                            .find_map(|s| s.output.as_ref().map(|v| value_as_text(v).into_owned()));
                    }
                    record.plan_steps += run.steps.len();
                    // The results the failed steps read too: the summary lists them, and a
                    // follow-up plan may use them by id.
                    outputs.extend(run.outputs_map());
                    outputs.extend(run.failure_inputs());
                    record.tool_errors += run.problems().count();
                    // A plan whose answer alone failed is summed up without it: the model,
                    // reading the answer's error, wrote it out as its reply.
                    let mut summary = if only_answer_failed {
                        without_answers(&run).summary_within(self.max_result_bytes)
                    } else {
                        run.summary_within(self.max_result_bytes)
                    };
                    // Whether steps failed, and every one of them as `why` says.
                    let all_failed = |why: fn(&StepRecord) -> bool| {
                        let mut failed =
                            run.steps.iter().filter(|s| s.status == StepStatus::Failed);
                        failed.next().is_some_and(why) && failed.all(why)
                    };
                    let faulty =
                        may_fix && !only_answer_failed && all_failed(|s| s.unresolved_reference);
                    let busy = may_fix
                        && run.outcome == RunOutcome::Completed
                        && all_failed(|s| asks_to_try_again(s.error.as_deref()));
                    let ids = |ok: bool| -> Vec<&str> {
                        run.steps
                            .iter()
                            .filter(|s| (s.status == StepStatus::Ok) == ok)
                            .map(|s| s.id.as_str())
                            .collect()
                    };
                    if faulty {
                        faulty_plans += 1;
                        summary.push_str(FIX_PLAN_HINT);
                        if only_call {
                            restart = plan_start(&calls[*i], &ids(true), false);
                        }
                    } else if busy {
                        faulty_plans += 1;
                        busy_plans += 1;
                        summary.push_str(BUSY_HINT);
                        if only_call {
                            restart = plan_start(&calls[*i], &ids(false), true);
                        }
                    } else if only_answer_failed {
                        summary.push_str(ANSWER_FAILED_HINT);
                    } else if !run.all_ok() {
                        summary.push_str(REPLAN_HINT);
                    }
                    Message::tool_result(&calls[*i], summary, !run.all_ok() && !only_answer_failed)
                }
                Err(invalid) => {
                    record.tool_errors += 1;
                    rejected_plans += 1;
                    Message::tool_result(&calls[*i], plan_not_run(&invalid), true)
                }
            };
            results[*i] = Some(message);
        }
        for (i, message) in direct_results {
            if message.is_error {
                record.tool_errors += 1;
            }
            results[i] = Some(message);
        }
        let messages = results
            .into_iter()
            .zip(calls)
            .map(|(m, call)| {
                let mut m = m.unwrap_or_else(|| {
                    Message::tool_result(call, "Error: the call was not run", true)
                });
                // A plan's summary is within the limit already (each result cut to its share).
                truncate_string(&mut m.content, self.max_result_bytes.saturating_add(200));
                m
            })
            .collect();
        TurnResults {
            messages,
            answer,
            rejected_plans,
            run_plans: plans.len() - rejected_plans,
            clean_plans,
            clean_but_answer,
            faulty_plans,
            busy_plans,
            restart,
            outputs,
        }
    }

    /// Runs individual calls (known tools, object arguments) directly on the engine, all at once
    /// ([`Engine::run_calls`]). The arguments are taken literally: a `$ref:` in them is text, not a
    /// reference. Also when the first of them started.
    async fn run_direct(
        &self,
        calls: &[ToolCall],
        indexes: &[usize],
        cancel: &CancellationToken,
    ) -> (Vec<(usize, Message)>, Option<Instant>) {
        if indexes.is_empty() {
            return (Vec::new(), None);
        }
        let direct = indexes
            .iter()
            .map(|&i| {
                DirectCall::new(
                    format!("call{i}"),
                    &calls[i].name,
                    calls[i].arguments.clone(),
                )
            })
            .collect();
        let began = Instant::now();
        let outcomes = self
            .engine
            .run_calls(direct, RunControl::with_cancel(cancel.child_token()))
            .await;
        let first = outcomes
            .iter()
            .filter_map(|o| o.as_ref().ok()?.started)
            .min()
            .map(|d| began + d);
        let messages = indexes
            .iter()
            .zip(outcomes)
            .map(|(&i, outcome)| {
                let message = match outcome {
                    // Arguments that break the tool's schema, say.
                    Err(problem) => {
                        Message::tool_result(&calls[i], format!("Error: {problem}"), true)
                    }
                    Ok(step) => match (step.status, &step.output) {
                        (StepStatus::Ok, Some(value)) => {
                            Message::tool_result(&calls[i], value_as_text(value), false)
                        }
                        _ => Message::tool_result(
                            &calls[i],
                            format!(
                                "Error: {}",
                                step.error.as_deref().unwrap_or("the call failed")
                            ),
                            true,
                        ),
                    },
                };
                (i, message)
            })
            .collect();
        (messages, first)
    }

    fn unknown_tool(&self, call: &ToolCall) -> Message {
        let names: Vec<&str> = self
            .definitions
            .iter()
            .filter(|d| !d.listed_only)
            .map(|d| d.name.as_str())
            .collect();
        Message::tool_result(
            call,
            format!(
                "Error: unknown tool '{}'. Available tools: {}",
                call.name,
                names.join(", ")
            ),
            true,
        )
    }
}

/// Words of a tool's error that say the failure is passing (a busy or rate-limited service):
/// the same call may succeed when tried again. Compared in lower case.
const TRY_AGAIN_WORDS: &[&str] = &[
    "try again",
    "retry",
    "temporarily",
    "service unavailable",
    "too many requests",
    "rate limit",
    "busy",
    "overloaded",
];

/// HTTP statuses that say the same: 429 (too many requests), 502, 503, 504 (a gateway or the
/// service unavailable), when they stand as words of the error.
const TRY_AGAIN_STATUSES: &[&str] = &["429", "502", "503", "504"];

/// Whether a failed step's error says to try again ([`TRY_AGAIN_WORDS`], [`TRY_AGAIN_STATUSES`]).
/// The engine's own messages (a step timeout, a limit, a skip) never do.
pub(crate) fn asks_to_try_again(error: Option<&str>) -> bool {
    let Some(error) = error else {
        return false;
    };
    let error = error.to_lowercase();
    TRY_AGAIN_WORDS.iter().any(|w| error.contains(w))
        || error
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|word| TRY_AGAIN_STATUSES.contains(&word))
}

/// `run` without its answer steps: the lookups of a plan whose answer alone failed, as the model
/// reads them before it replies.
fn without_answers(run: &PlanRun) -> PlanRun {
    let mut kept = run.clone();
    let mut index = Vec::with_capacity(run.steps.len());
    let mut next = 0;
    for step in &run.steps {
        if step.tool == ANSWER_TOOL {
            index.push(None);
        } else {
            index.push(Some(next));
            next += 1;
        }
    }
    let renumber = |ids: &[usize]| -> Vec<usize> {
        ids.iter()
            .filter_map(|&i| index.get(i).copied().flatten())
            .collect()
    };
    kept.steps.retain(|s| s.tool != ANSWER_TOOL);
    kept.outputs = renumber(&run.outputs);
    kept.waves = run.waves.iter().map(|w| renumber(w)).collect();
    kept
}

#[cfg(test)]
mod tests {
    use super::asks_to_try_again as again;

    #[test]
    fn errors_that_ask_to_try_again() {
        assert!(again(Some(
            "503 Service Unavailable: the weather service is busy, try again"
        )));
        assert!(again(Some("HTTP status 429")));
        assert!(again(Some("Rate limit exceeded")));
        assert!(!again(Some("no weather data for 'Atlantis'")));
        assert!(!again(Some("found 4290 results, more than the limit")));
        assert!(!again(Some("the step timed out after 30s (step_timeout)")));
        assert!(!again(None));
    }
}
