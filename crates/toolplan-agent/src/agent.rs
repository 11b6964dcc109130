//! The agent: a model, instructions and tools, and the loop model → tool calls → results → model
//! until the model answers in text.
//!
//! With tool planning enabled, `execute_tool_plan` is offered beside the individual tools and the
//! instructions explain when to use it. Individual tool calls of one turn run together as one plan of
//! independent steps on the same engine, so they get the same validation, timeouts, panic containment
//! and parallelism as planned steps.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolplan_core::limits::truncate_string;
use toolplan_core::plan::{self, DraftPlan, DraftStep};
use toolplan_core::signature::strip_annotations;
use toolplan_core::template::Template;
use toolplan_core::{
    EXECUTE_TOOL_PLAN, Engine, ExecuteToolPlan, Limits, RunConfig, RunControl, StepStatus, Tool,
    ToolRegistry,
};
use toolplan_llm::{ChatModel, ChatRequest, Message, ToolCall, ToolChoice, ToolDefinition};

use crate::answer::{
    ANSWER_IN_PLAN_INSTRUCTIONS, ANSWER_TOOL, AnswerTool, answer_example, forget_unused_answer,
    prepare_answers, with_answer_field,
};
use crate::error::AgentError;
use crate::record::Record;
use crate::repeats::CallMemory;

/// What the system prompt adds when tool planning is enabled.
pub const PLANNING_INSTRUCTIONS: &str = "\
Tool planning: when answering needs more than one tool call, do not call the tools one by one. Call \
execute_tool_plan once, with every tool call as a step. Each step has an id, a tool and its arguments; \
a step uses an earlier step's result through \"$ref:<step_id>\" or \"$ref:<step_id>.<field>\"; \
output_steps lists the steps whose results you need. Independent steps run in parallel. For example, \
to look up two things and combine them, call execute_tool_plan with {\"steps\": [{\"id\": \"a\", \
\"tool\": \"lookup\", \"arguments\": {\"query\": \"first thing\"}}, {\"id\": \"b\", \"tool\": \
\"lookup\", \"arguments\": {\"query\": \"second thing\"}}, {\"id\": \"c\", \"tool\": \"combine\", \
\"arguments\": {\"x\": \"$ref:a\", \"y\": \"$ref:b\"}}], \"output_steps\": [\"c\"]}. When the plan's \
results come back, answer the user from them. Call a tool directly only when one call is enough.";

/// What the system prompt adds in plan-only mode, where `execute_tool_plan` is the only tool and its
/// description explains plans.
pub const PLAN_ONLY_INSTRUCTIONS: &str = "\
Use the tools through execute_tool_plan: one plan with every call the answer needs, then answer from \
its results.";

/// Follows the summary of a plan in which steps failed: the model may plan again (a replan costs one
/// model call; answering from a broken plan costs the answer).
pub const REPLAN_HINT: &str = "\nIf a failed step was planned wrong (a missing step, a wrong \
reference or argument), call execute_tool_plan again with a corrected plan; otherwise answer from the \
results you have.";

/// Turns in a row made only of repeated calls after which the model must answer (no tools offered).
/// One: with the local 1.5B model, a second turn after a repeat brought the same call again.
pub const REPEAT_TURNS_BEFORE_ANSWER: usize = 1;

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

/// Default of [`AgentBuilder::max_result_bytes`]: 32 KB, about 8,000 tokens.
pub const DEFAULT_MAX_RESULT_BYTES: usize = toolplan_core::limits::DEFAULT_MAX_SUMMARY_BYTES;

/// Builds an [`Agent`].
pub struct AgentBuilder {
    name: String,
    model: Option<Arc<dyn ChatModel>>,
    instructions: String,
    tools: Vec<Arc<dyn Tool>>,
    planning: bool,
    plan_only: bool,
    answer_in_plan: bool,
    parallel_tool_calls: Option<bool>,
    think_first: Option<bool>,
    max_turns: usize,
    max_result_bytes: usize,
    run_config: RunConfig,
    limits: Limits,
}

impl AgentBuilder {
    /// Whether one model reply may hold several tool calls (default: the provider's default). Turning
    /// it off with planning on pushes a model that follows instructions well to batch calls into one
    /// plan; small local models may instead just make fewer calls.
    pub fn parallel_tool_calls(mut self, allowed: bool) -> Self {
        self.parallel_tool_calls = Some(allowed);
        self
    }

    /// Whether the model is asked to write a short thought before each reply
    /// ([`ChatRequest::think_first`]; models with constrained replies, the local ones, honour it).
    /// Default: on without tool planning, where a model that answers from half the results it needs
    /// is the common failure; with planning, only in the turn after a plan (a plan
    /// carries its own `thought`, and a thought outside it leads small models to plan one step at a
    /// time; but the reply written from a plan's results, a judgement on them more often than not, is
    /// better for the thought that reads them first).
    pub fn think_first(mut self, on: bool) -> Self {
        self.think_first = Some(on);
        self
    }

    /// The model that decides.
    pub fn model(mut self, model: Arc<dyn ChatModel>) -> Self {
        self.model = Some(model);
        self
    }

    /// The system instructions.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = instructions.into();
        self
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds several tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Offers `execute_tool_plan` beside the individual tools (off by default).
    pub fn enable_tool_planning(mut self) -> Self {
        self.planning = true;
        self
    }

    /// Offers only `execute_tool_plan` (its description lists every tool as a one-line signature):
    /// every tool use is then a plan, one step or many, and one plan per turn unless
    /// [`parallel_tool_calls`](Self::parallel_tool_calls) says otherwise. For models that do not pick
    /// the planner on their own when the tools are also offered one by one. Implies tool planning.
    pub fn plan_only(mut self) -> Self {
        self.planning = true;
        self.plan_only = true;
        self
    }

    /// Gives plans an `answer` field (run as a last step of the built-in [`AnswerTool`]) whose text,
    /// with results inserted through `$ref:`, is the answer: a plan whose steps all succeed then ends
    /// the interaction without another model call. Only with tool planning; off by default.
    pub fn answer_in_plan(mut self, on: bool) -> Self {
        self.answer_in_plan = on;
        self
    }

    /// Sets whether tool planning is offered.
    pub fn tool_planning(mut self, on: bool) -> Self {
        self.planning = on;
        self
    }

    /// Most model turns per interaction (default 10).
    pub fn max_turns(mut self, turns: usize) -> Self {
        self.max_turns = turns.max(1);
        self
    }

    /// Longest text one tool or plan result may put into the model's context, in bytes (default
    /// [`DEFAULT_MAX_RESULT_BYTES`]); a longer one is cut, with a note of how much was left out.
    pub fn max_result_bytes(mut self, bytes: usize) -> Self {
        self.max_result_bytes = bytes.max(1);
        self
    }

    /// Concurrency, timeouts and deadline for tool calls and plans.
    pub fn run_config(mut self, config: RunConfig) -> Self {
        self.run_config = config;
        self
    }

    /// Size limits for plans.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Builds the agent.
    pub fn build(self) -> Result<Agent, AgentError> {
        let model = self
            .model
            .ok_or_else(|| AgentError::Config(format!("agent '{}' has no model", self.name)))?;
        let answer_in_plan = self.planning && self.answer_in_plan;
        let mut registry = ToolRegistry::new();
        if answer_in_plan {
            registry
                .register(Arc::new(AnswerTool))
                .map_err(|e| AgentError::Config(e.to_string()))?;
        }
        for tool in self.tools {
            if tool.name() == EXECUTE_TOOL_PLAN {
                return Err(AgentError::Config(
                    "execute_tool_plan is added by enable_tool_planning(), not as a tool".into(),
                ));
            }
            if answer_in_plan && tool.name() == ANSWER_TOOL {
                return Err(AgentError::Config(format!(
                    "a tool named '{ANSWER_TOOL}' clashes with the plan answers of answer_in_plan()"
                )));
            }
            registry
                .register(tool)
                .map_err(|e| AgentError::Config(e.to_string()))?;
        }
        let engine = Arc::new(
            Engine::new(Arc::new(registry))
                .with_limits(self.limits)
                .with_config(self.run_config),
        );
        let mut definitions: Vec<ToolDefinition> = engine
            .tools()
            .iter()
            // The answer tool runs the plan's answer field only.
            .filter(|t| t.tool().name() != ANSWER_TOOL || !answer_in_plan)
            .map(|t| ToolDefinition {
                name: t.tool().name().to_owned(),
                description: t.tool().description().to_owned(),
                parameters: t.schema().clone(),
                ..Default::default()
            })
            .collect();
        if self.plan_only {
            definitions.clear();
        }
        let plan_only = self.plan_only;
        let planner = self.planning.then(|| {
            // The answer tool is reached through the plan's answer field alone.
            let hidden: &[&str] = if answer_in_plan { &[ANSWER_TOOL] } else { &[] };
            let planner = ExecuteToolPlan::hiding_tools(Arc::clone(&engine), hidden);
            Arc::new(if plan_only && answer_in_plan {
                planner.with_tool_signatures_and_example(&answer_example())
            } else if plan_only {
                planner.with_tool_signatures()
            } else {
                // The tools are offered one by one beside the planner: no need to list them again.
                planner.without_tool_list()
            })
        });
        if let Some(p) = &planner {
            // First in the list: small models favour the tools they read first.
            let mut parameters = p.parameters();
            let mut strict = p.typed_parameters();
            if answer_in_plan {
                parameters = with_answer_field(parameters, false);
                strict = with_answer_field(strict, true);
            }
            if plan_only {
                // Its description explains every field already.
                parameters = strip_annotations(&parameters);
            }
            definitions.insert(
                0,
                // Providers that constrain decoding hold every step to its tool's arguments, and
                // give no two steps one id.
                ToolDefinition::new(p.name(), p.description(), parameters)
                    .with_strict_parameters(strict)
                    .with_unique_values("/steps/*/id"),
            );
        }
        let mut system = self.instructions;
        if self.planning {
            if !system.is_empty() {
                system.push_str("\n\n");
            }
            // Plan-only: the planner's description already explains plans with an example.
            system.push_str(if self.plan_only {
                PLAN_ONLY_INSTRUCTIONS
            } else {
                PLANNING_INSTRUCTIONS
            });
            if answer_in_plan {
                system.push(' ');
                system.push_str(ANSWER_IN_PLAN_INSTRUCTIONS);
            }
        }
        Ok(Agent {
            name: self.name,
            model,
            system,
            engine,
            planner,
            definitions,
            answer_in_plan,
            max_turns: self.max_turns,
            max_result_bytes: self.max_result_bytes,
            // Plan-only: one plan per turn (a plan holds the parallel calls; plans of one turn could
            // not refer to each other), unless the caller says otherwise.
            parallel_tool_calls: self.parallel_tool_calls.or(self.plan_only.then_some(false)),
            think_first: self.think_first.unwrap_or(!self.planning),
            think_after_plan: self.think_first.is_none() && self.planning,
        })
    }
}

/// A model with instructions and tools.
pub struct Agent {
    name: String,
    model: Arc<dyn ChatModel>,
    system: String,
    engine: Arc<Engine>,
    planner: Option<Arc<ExecuteToolPlan>>,
    definitions: Vec<ToolDefinition>,
    answer_in_plan: bool,
    max_turns: usize,
    max_result_bytes: usize,
    parallel_tool_calls: Option<bool>,
    think_first: bool,
    think_after_plan: bool,
}

impl Agent {
    /// Starts building an agent.
    pub fn builder(name: impl Into<String>) -> AgentBuilder {
        AgentBuilder {
            name: name.into(),
            model: None,
            instructions: String::new(),
            tools: Vec::new(),
            planning: false,
            plan_only: false,
            answer_in_plan: false,
            parallel_tool_calls: None,
            think_first: None,
            max_turns: 10,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            run_config: RunConfig::default(),
            limits: Limits::default(),
        }
    }

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
        let mut record = Record::default();
        let mut messages = Vec::with_capacity(8);
        if !self.system.is_empty() {
            messages.push(Message::system(self.system.clone()));
        }
        messages.push(Message::user(input));
        // The direct calls of this interaction: a call repeated with the same arguments is answered
        // from here instead of another run.
        let mut memory = CallMemory::new();
        // Turns in a row whose calls were all answered from memory: a model that has every result
        // it asked for and keeps asking is not helped by more turns (small models repeat a call even
        // when told they have its result), so after such a turn the next one offers no tools and it
        // answers.
        let mut repeat_turns = 0;
        // Whether the last turn ran a plan: the next reply is written from its results.
        let mut after_plan = false;

        while record.turns < self.max_turns {
            if cancel.is_cancelled() {
                return Err(AgentError::Cancelled);
            }
            record.turns += 1;
            let request = ChatRequest {
                messages: messages.clone(),
                tools: self.definitions.clone(),
                tool_choice: if self.definitions.is_empty()
                    || repeat_turns >= REPEAT_TURNS_BEFORE_ANSWER
                {
                    ToolChoice::None
                } else {
                    ToolChoice::Auto
                },
                parallel_tool_calls: self.parallel_tool_calls,
                think_first: self.think_first || (self.think_after_plan && after_plan),
                ..ChatRequest::default()
            };
            let asked = Instant::now();
            let response = self.model.chat(&request, cancel).await?;
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
            let mut message = response.message;
            if self.answer_in_plan {
                for call in &mut message.tool_calls {
                    if call.name == EXECUTE_TOOL_PLAN {
                        forget_unused_answer(&mut call.arguments);
                    }
                }
            }
            let calls = message.tool_calls.clone();
            messages.push(message);
            if calls.is_empty() {
                record.elapsed = start.elapsed();
                let answer = messages
                    .last()
                    .map(|m| m.content.clone())
                    .unwrap_or_default();
                return Ok(Interaction {
                    answer,
                    record,
                    messages,
                });
            }
            record.tool_calls += calls.len();
            let repeats: Vec<Option<Message>> = calls.iter().map(|c| memory.answer(c)).collect();
            let fresh: Vec<ToolCall> = calls
                .iter()
                .zip(&repeats)
                .filter(|(_, r)| r.is_none())
                .map(|(c, _)| c.clone())
                .collect();
            record.repeated_calls += calls.len() - fresh.len();
            repeat_turns = if fresh.is_empty() {
                repeat_turns + 1
            } else {
                0
            };
            let (fresh_results, answer) = self.run_calls(&fresh, cancel, &mut record).await;
            if cancel.is_cancelled() {
                return Err(AgentError::Cancelled);
            }
            for (call, result) in fresh.iter().zip(&fresh_results) {
                memory.remember(call, result);
            }
            after_plan = fresh.iter().any(|c| c.name == EXECUTE_TOOL_PLAN);
            let mut fresh_results = fresh_results.into_iter();
            let results: Vec<Message> = repeats
                .into_iter()
                .filter_map(|r| r.or_else(|| fresh_results.next()))
                .collect();
            messages.extend(results);
            if let Some(answer) = answer {
                record.answered_by_plan = true;
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

    /// Runs one turn's tool calls: plans through the planner, the other calls together as one plan of
    /// independent steps. Returns one tool-result message per call, in call order, and the answer
    /// when the turn was one plan that succeeded with its answer ([`AgentBuilder::answer_in_plan`]).
    async fn run_calls(
        &self,
        calls: &[ToolCall],
        cancel: &CancellationToken,
        record: &mut Record,
    ) -> (Vec<Message>, Option<String>) {
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
            } else if !self.definitions.iter().any(|d| d.name == call.name) {
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

        let plan_runs = futures::future::join_all(plans.iter().map(|(i, planner)| {
            let control = RunControl::with_cancel(cancel.child_token());
            let arguments = if self.answer_in_plan {
                prepare_answers(calls[*i].arguments.clone())
            } else {
                calls[*i].arguments.clone()
            };
            planner.execute(arguments, control)
        }));
        let direct_run = self.run_direct(calls, &direct, cancel);
        let (plan_runs, direct_results) = tokio::join!(plan_runs, direct_run);

        let mut answer = None;
        let only_call = calls.len() == 1;
        for ((i, _), outcome) in plans.iter().zip(plan_runs) {
            record.plans += 1;
            let message = match outcome {
                Ok(run) => {
                    if only_call && run.all_ok() {
                        answer = run
                            .steps
                            .iter()
                            .rev()
                            .filter(|s| s.tool == ANSWER_TOOL)
                            .find_map(|s| s.output.as_ref().map(value_text));
                    }
                    record.plan_steps += run.steps.len();
                    record.tool_errors += run.problems().count();
                    let mut summary = run.summary_within(self.max_result_bytes);
                    if !run.all_ok() {
                        summary.push_str(REPLAN_HINT);
                    }
                    Message::tool_result(&calls[*i], summary, !run.all_ok())
                }
                Err(invalid) => {
                    record.tool_errors += 1;
                    Message::tool_result(
                        &calls[*i],
                        format!(
                            "Error: the plan was not run. {invalid}. Fix the plan and call execute_tool_plan again."
                        ),
                        true,
                    )
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
        (messages, answer)
    }

    /// Runs individual calls (known tools, object arguments) as one plan of independent steps. The
    /// arguments are taken literally: a `$ref:` in them is text, not a reference.
    async fn run_direct(
        &self,
        calls: &[ToolCall],
        indexes: &[usize],
        cancel: &CancellationToken,
    ) -> Vec<(usize, Message)> {
        let mut out = Vec::with_capacity(indexes.len());
        let mut pending: Vec<usize> = indexes.to_vec();
        // A call whose arguments break its tool's schema is answered with that problem and left out;
        // the rest run.
        let plan = loop {
            if pending.is_empty() {
                return out;
            }
            let draft = DraftPlan {
                steps: pending
                    .iter()
                    .enumerate()
                    .map(|(position, &i)| DraftStep {
                        position,
                        id: format!("call{i}"),
                        tool: Some(calls[i].name.clone()),
                        arguments: Some(Template::Literal(calls[i].arguments.clone())),
                        depends_on: Vec::new(),
                    })
                    .collect(),
                output_steps: Vec::new(),
            };
            match plan::validate(draft, Vec::new(), self.engine.tools()) {
                Ok(plan) => break plan,
                Err(invalid) => {
                    let mut rejected = Vec::new();
                    for problem in &invalid.problems {
                        let Some(i) = problem
                            .step()
                            .and_then(|s| s.strip_prefix("call"))
                            .and_then(|n| n.parse::<usize>().ok())
                        else {
                            continue;
                        };
                        rejected.push(i);
                        out.push((
                            i,
                            Message::tool_result(&calls[i], format!("Error: {problem}"), true),
                        ));
                    }
                    if rejected.is_empty() {
                        // A problem that names no call: answer every call with it.
                        for &i in &pending {
                            out.push((
                                i,
                                Message::tool_result(&calls[i], format!("Error: {invalid}"), true),
                            ));
                        }
                        return out;
                    }
                    pending.retain(|i| !rejected.contains(i));
                }
            }
        };
        let run = self
            .engine
            .run(&plan, RunControl::with_cancel(cancel.child_token()))
            .await;
        for (step, &i) in run.steps.iter().zip(&pending) {
            let message = match (step.status, &step.output) {
                (StepStatus::Ok, Some(value)) => {
                    Message::tool_result(&calls[i], value_text(value), false)
                }
                _ => Message::tool_result(
                    &calls[i],
                    format!(
                        "Error: {}",
                        step.error.as_deref().unwrap_or("the call failed")
                    ),
                    true,
                ),
            };
            out.push((i, message));
        }
        out
    }

    fn unknown_tool(&self, call: &ToolCall) -> Message {
        let names: Vec<&str> = self.definitions.iter().map(|d| d.name.as_str()).collect();
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

/// A tool result as the model reads it: text as it is, anything else as compact JSON.
fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
