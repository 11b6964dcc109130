//! [`Engine`]: a tool registry with limits and run settings — the one object most users need. It
//! compiles and runs plans, and runs tools called directly ([`Engine::run_calls`]) with everything a
//! plan step gets.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::dialect::tool_plan;
use crate::error::{InvalidPlan, Problem};
use crate::limits::{Limits, RepeatedCalls};
use crate::plan::{self, DraftPlan, DraftStep, Plan};
use crate::run::{PlanRun, StepRecord};
use crate::scheduler::{self, PlanPiece, RunConfig, RunControl};
use crate::template::Template;
use crate::tool::ToolRegistry;

/// A tool called directly, outside any plan (a model's tool call, an MCP client's `tools/call`).
#[derive(Debug, Clone, PartialEq)]
pub struct DirectCall {
    /// The id of the call's step: records and problems name the call by it. Unique within one
    /// [`Engine::run_calls`].
    pub id: String,
    /// The tool to call.
    pub tool: String,
    /// The arguments, taken literally: a `"$ref:…"` in them is text, not a reference.
    pub arguments: Value,
}

impl DirectCall {
    /// A call of `tool` with `arguments`, named `id`.
    pub fn new(id: impl Into<String>, tool: impl Into<String>, arguments: Value) -> Self {
        Self {
            id: id.into(),
            tool: tool.into(),
            arguments,
        }
    }
}

/// Validates and runs plans over one set of tools.
#[derive(Debug, Clone)]
pub struct Engine {
    tools: Arc<ToolRegistry>,
    limits: Limits,
    config: RunConfig,
}

impl Engine {
    /// An engine over these tools with default limits and settings.
    pub fn new(tools: Arc<ToolRegistry>) -> Self {
        Self {
            tools,
            limits: Limits::default(),
            config: RunConfig::default(),
        }
    }

    /// Replaces the plan size limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Replaces the run settings (concurrency, timeouts, schedule).
    pub fn with_config(mut self, config: RunConfig) -> Self {
        self.config = config;
        self
    }

    /// The tools plans may call.
    pub fn tools(&self) -> &Arc<ToolRegistry> {
        &self.tools
    }

    /// The plan size limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The run settings.
    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// Parses and validates a tool plan given as JSON text.
    pub fn compile(&self, text: &str) -> Result<Plan, InvalidPlan> {
        tool_plan::compile(text, &self.tools, &self.limits)
    }

    /// Parses and validates a tool plan given as a JSON value.
    pub fn compile_value(&self, plan: Value) -> Result<Plan, InvalidPlan> {
        tool_plan::compile_value(plan, &self.tools, &self.limits)
    }

    /// Runs a validated plan.
    pub async fn run(&self, plan: &Plan, control: RunControl) -> PlanRun {
        scheduler::run(plan, &self.tools, &self.config, control).await
    }

    /// Runs a tool plan while its JSON text is still being written (by a model, a pipe): each step
    /// joins the run when its text is complete, and steps on read-only tools whose references are
    /// done start before the rest is written. The result is what [`compile`](Self::compile) and
    /// [`run`](Self::run) of the whole text give, apart from timings: the same problems for an
    /// invalid plan, the same report for a valid one, with when each step was written
    /// ([`StepRecord::written`]). See [`run_streamed_at`](Self::run_streamed_at) for a plan inside a
    /// larger JSON document.
    pub async fn run_streamed(
        &self,
        text: impl futures::Stream<Item = String> + Send,
        control: RunControl,
    ) -> Result<PlanRun, InvalidPlan> {
        self.run_streamed_at(text, &[], control).await
    }

    /// [`run_streamed`](Self::run_streamed) for a caller that reads the text too and ends it with
    /// the plan as it will have it run ([`PlanPiece::Whole`]): an agent that fills in a field of
    /// the model's plan or adds an answer step at its end before it runs. Steps start early from
    /// the text; the whole plan given is what is compiled and run (the early steps count where it
    /// keeps them, at the same places). The run's deadline counts from the end of the text: the
    /// caller bounds the writing (a model call's own timeout). To drop the plan instead, cancel
    /// the run ([`RunControl`]).
    pub async fn run_streamed_pieces(
        &self,
        pieces: impl futures::Stream<Item = PlanPiece> + Send,
        control: RunControl,
    ) -> Result<PlanRun, InvalidPlan> {
        scheduler::run_streamed(
            &tool_plan::ToolPlan,
            pieces,
            &[],
            true,
            &self.tools,
            &self.limits,
            &self.config,
            control,
        )
        .await
        .map(|(run, _)| run)
    }

    /// [`run_streamed`](Self::run_streamed) for a plan at `plan_path` inside the JSON document
    /// the text holds: `["arguments"]` for a whole tool call, `{"name": "execute_tool_plan",
    /// "arguments": {…}}`. Text around the document (a `<tool_call>` tag) is ignored.
    pub async fn run_streamed_at(
        &self,
        text: impl futures::Stream<Item = String> + Send,
        plan_path: &[&str],
        control: RunControl,
    ) -> Result<PlanRun, InvalidPlan> {
        self.run_streamed_dialect(&tool_plan::ToolPlan, text, plan_path, false, control)
            .await
            .map(|(run, _)| run)
    }

    /// [`run_streamed_at`](Self::run_streamed_at) for a plan in another format, a
    /// [`Dialect`](crate::dialect::Dialect) (toolplan-query's query plans): each item of the
    /// dialect's list joins the run when its text is complete, as a tool plan's steps do, and the
    /// whole text is compiled by the dialect at the end (an invalid plan gives the problems its
    /// `compile` gives). Besides the run, what the dialect keeps beside the plan (a query plan's
    /// root and nodes); `None` when the run stopped before the text ended. With
    /// `deadline_after_text` the run's deadline counts from the end of the text (a caller that
    /// bounds the writing itself: a model call's timeout); otherwise from the start of the run,
    /// so that it also bounds a writer that stalls.
    pub async fn run_streamed_dialect<D>(
        &self,
        dialect: &D,
        text: impl futures::Stream<Item = String> + Send,
        plan_path: &[&str],
        deadline_after_text: bool,
        control: RunControl,
    ) -> Result<(PlanRun, Option<D::Extra>), InvalidPlan>
    where
        D: crate::dialect::Dialect + Sync,
        D::Extra: Send,
    {
        use futures::StreamExt;
        scheduler::run_streamed(
            dialect,
            text.map(PlanPiece::Text),
            plan_path,
            deadline_after_text,
            &self.tools,
            &self.limits,
            &self.config,
            control,
        )
        .await
    }

    /// Runs tools called directly, all at once, each as an independent step of one plan (calls of a
    /// tool that does not say it is read-only keep the order they were made in, as plan steps do:
    /// [`WrittenOrder`](crate::WrittenOrder)): a call gets
    /// what a plan step gets (its arguments checked against the tool's schema, the concurrency limits,
    /// the step timeout and the deadline, the output limit, panic isolation, cancellation).
    ///
    /// Returns one outcome per call, in call order: the record of its step, or the problem that kept
    /// it from running (an unknown tool, `execute_tool_plan`, arguments that break the tool's schema,
    /// an id used by an earlier call). A call that is refused does not keep the others from running.
    pub async fn run_calls(
        &self,
        calls: Vec<DirectCall>,
        control: RunControl,
    ) -> Vec<Result<StepRecord, Problem>> {
        let mut outcomes: Vec<Option<Result<StepRecord, Problem>>> = vec![None; calls.len()];
        // The first call of each id.
        let mut ids: HashMap<String, usize> = HashMap::with_capacity(calls.len());
        // The calls still to run, by index, as steps.
        let mut pending: Vec<(usize, DraftStep)> = Vec::with_capacity(calls.len());
        for (i, call) in calls.into_iter().enumerate() {
            if let Some(&first) = ids.get(&call.id) {
                outcomes[i] = Some(Err(Problem::DuplicateId {
                    id: call.id,
                    first,
                    second: i,
                }));
                continue;
            }
            ids.insert(call.id.clone(), i);
            pending.push((
                i,
                DraftStep {
                    position: i,
                    id: call.id,
                    tool: Some(call.tool),
                    arguments: Some(Template::Literal(call.arguments)),
                    depends_on: Vec::new(),
                },
            ));
        }
        // Each problem names one call's step (the steps share nothing): a refused call is answered
        // with its problem and left out, and the rest are validated again.
        let plan = loop {
            if pending.is_empty() {
                break None;
            }
            let draft = DraftPlan {
                steps: pending.iter().map(|(_, s)| s.clone()).collect(),
                output_steps: Vec::new(),
            };
            // Calls of one turn on a tool that changes things run in the order they were made.
            match plan::validate(
                draft,
                Vec::new(),
                &self.tools,
                RepeatedCalls::RunEach,
                self.limits.written_order,
            ) {
                Ok(plan) => break Some(plan),
                Err(invalid) => {
                    let mut refused = false;
                    for problem in invalid.problems {
                        let call = problem
                            .step()
                            .and_then(|id| pending.iter().find(|(_, s)| s.id == id))
                            .map(|(i, _)| *i);
                        match call {
                            Some(i) => {
                                refused = true;
                                outcomes[i].get_or_insert(Err(problem));
                            }
                            // A problem that names no call: every call still pending gets it.
                            None => {
                                for (i, _) in &pending {
                                    outcomes[*i].get_or_insert_with(|| Err(problem.clone()));
                                }
                            }
                        }
                    }
                    if !refused {
                        break None;
                    }
                    pending.retain(|(i, _)| outcomes[*i].is_none());
                }
            }
        };
        if let Some(plan) = plan {
            let run = self.run(&plan, control).await;
            for ((i, _), step) in pending.iter().zip(run.steps) {
                outcomes[*i] = Some(Ok(step));
            }
        }
        // Every call has its outcome by now (a run records every step of its plan); a call without
        // one would be reported as not run.
        outcomes
            .into_iter()
            .map(|o| o.unwrap_or(Err(Problem::EmptyPlan)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::run::StepStatus;
    use crate::tool::Tool;
    use crate::{FnTool, ToolError};

    /// `echo` (its `text` back, after `ms` milliseconds) and `boom` (panics).
    fn engine() -> Engine {
        let echo = FnTool::new(
            "echo",
            "Returns its text.",
            json!({"type": "object", "properties": {"text": {"type": "string"}, "ms": {"type": "integer"}},
                   "required": ["text"]}),
            |arguments: Value, _| async move {
                let ms = arguments.get("ms").and_then(Value::as_u64).unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(arguments.get("text").cloned().unwrap_or(Value::Null))
            },
        )
        .with_annotations(crate::ToolAnnotations::READ_ONLY);
        let boom = FnTool::new("boom", "Panics.", json!({"type": "object"}), |_, _| async {
            if true {
                panic!("boom");
            }
            Err(ToolError::failed("unreachable"))
        });
        let mut tools = ToolRegistry::new();
        for tool in [Arc::new(echo) as Arc<dyn Tool>, Arc::new(boom)] {
            tools.register(tool).expect("a valid tool");
        }
        Engine::new(Arc::new(tools)).with_config(RunConfig {
            step_timeout: Some(Duration::from_millis(500)),
            ..RunConfig::default()
        })
    }

    fn echo(id: &str, text: &str, ms: u64) -> DirectCall {
        DirectCall::new(id, "echo", json!({"text": text, "ms": ms}))
    }

    #[tokio::test(start_paused = true)]
    async fn calls_run_at_once_and_answer_in_call_order() {
        let start = tokio::time::Instant::now();
        let outcomes = engine()
            .run_calls(
                vec![echo("a", "first", 200), echo("b", "$ref:a", 100)],
                RunControl::default(),
            )
            .await;
        assert_eq!(start.elapsed(), Duration::from_millis(200));
        let outputs: Vec<Value> = outcomes
            .into_iter()
            .map(|o| o.expect("ran").output.expect("an output"))
            .collect();
        // A direct call's "$ref:" is text.
        assert_eq!(outputs, [json!("first"), json!("$ref:a")]);
        assert!(
            engine()
                .run_calls(Vec::new(), RunControl::default())
                .await
                .is_empty()
        );
    }

    #[tokio::test]
    async fn a_refused_call_keeps_no_other_from_running() {
        let outcomes = engine()
            .run_calls(
                vec![
                    DirectCall::new("call0", "ecco", json!({"text": "x"})),
                    DirectCall::new("call1", "echo", json!({"text": 5})),
                    echo("call2", "runs", 0),
                    DirectCall::new("call3", "execute_tool_plan", json!({"steps": []})),
                    echo("call2", "same id", 0),
                ],
                RunControl::default(),
            )
            .await;
        let messages: Vec<String> = outcomes
            .iter()
            .map(|o| match o {
                Ok(step) => format!("ok {}", step.output.clone().unwrap_or_default()),
                Err(problem) => problem.to_string(),
            })
            .collect();
        assert_eq!(
            messages[0],
            "Unknown tool 'ecco' in step 'call0' (did you mean 'echo'?)"
        );
        assert!(
            messages[1]
                .starts_with("step 'call1': arguments do not match the schema of tool 'echo': ")
                && messages[1].contains("/text"),
            "{}",
            messages[1]
        );
        assert_eq!(messages[2], "ok \"runs\"");
        assert_eq!(
            messages[3],
            "step 'call3' calls execute_tool_plan: recursive plans are not allowed"
        );
        assert_eq!(messages[4], "Duplicate step ID: 'call2' (steps #2 and #4)");
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_is_bounded_as_a_step_is() {
        let outcomes = engine()
            .run_calls(
                vec![
                    echo("slow", "late", 10_000),
                    DirectCall::new("boom", "boom", json!({})),
                    echo("fine", "ok", 0),
                ],
                RunControl::default(),
            )
            .await;
        let records: Vec<StepRecord> = outcomes.into_iter().map(|o| o.expect("ran")).collect();
        for (record, why) in records[..2].iter().zip(["timed out", "panicked"]) {
            assert_eq!(record.status, StepStatus::Failed);
            let error = record.error.as_deref().unwrap_or_default();
            assert!(error.contains(why), "{error}");
        }
        assert_eq!(records[2].output, Some(json!("ok")));
    }

    #[tokio::test]
    async fn cancelled_calls_do_not_run() {
        let control = RunControl::default();
        control.cancel.cancel();
        let outcomes = engine().run_calls(vec![echo("a", "x", 0)], control).await;
        let record = outcomes
            .into_iter()
            .next()
            .expect("one outcome")
            .expect("a record");
        assert_ne!(record.status, StepStatus::Ok);
    }
}
