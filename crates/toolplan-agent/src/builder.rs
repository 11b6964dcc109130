//! [`AgentBuilder`]: what an agent is made of (model, instructions, tools, planning mode, limits),
//! and how [`build`](AgentBuilder::build) turns it into the tool definitions and system prompt the
//! model reads.

use std::sync::Arc;

use toolplan_core::{
    EXECUTE_TOOL_PLAN, Engine, Limits, RepeatedCalls, RunConfig, Tool, ToolRegistry,
};
use toolplan_llm::{ChatModel, StepReferences, ToolDefinition};
use toolplan_planner::{ANSWER_FIELD, Planning, ToolListing};

use crate::agent::Agent;
use crate::answer::{ANSWER_TOOL, answer_tool};
use crate::error::AgentError;

/// Default of [`AgentBuilder::max_result_bytes`]: 32 KB, about 8,000 tokens.
pub const DEFAULT_MAX_RESULT_BYTES: usize = toolplan_core::limits::DEFAULT_MAX_SUMMARY_BYTES;

/// Default of [`AgentBuilder::repairs`]: one rejected plan per interaction is sent back with the
/// request to fix it, and the reply must call a tool.
pub const DEFAULT_REPAIRS: usize = 1;

/// Default of [`AgentBuilder::max_plan_steps`]. A plan of this many steps fits the local model's
/// default output budget (a test writes one with its tokenizer); the plans a question needs are far
/// shorter, and a longer one is far more often a plan written in a loop.
pub const DEFAULT_MAX_PLAN_STEPS: usize = 24;

/// Builds an [`Agent`].
pub struct AgentBuilder {
    name: String,
    model: Option<Arc<dyn ChatModel>>,
    instructions: String,
    tools: Vec<Arc<dyn Tool>>,
    planning: Planning,
    plan_listing: Option<ToolListing>,
    parallel_tool_calls: Option<bool>,
    think_first: Option<bool>,
    max_turns: usize,
    max_repairs: usize,
    max_plan_steps: usize,
    max_result_bytes: usize,
    run_config: RunConfig,
    limits: Limits,
    stream_plans: bool,
    compact_answer: Option<bool>,
    results_answer: bool,
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
    /// ([`ChatRequest::think_first`](toolplan_llm::ChatRequest::think_first); models with constrained replies, the local ones, honour it).
    /// Default: on without tool planning, where a model that answers from half the results it needs
    /// is the common failure; with planning, only in the turn after a plan (a plan
    /// carries its own `thought`, and a thought outside it leads small models to plan one step at a
    /// time; but the reply written from a plan's results, a judgement on them more often than not, is
    /// better for the thought that reads them first).
    pub fn think_first(mut self, on: bool) -> Self {
        self.think_first = Some(on);
        self
    }

    /// Whether a plan starts running while the model writes it (default: on): each step on a
    /// read-only tool starts as soon as its text and the steps it refers to are complete, the
    /// rest when the reply is done; the results are those of the plan run after the reply. Off,
    /// a plan runs once the whole reply has come. Models that cannot stream hand over their reply
    /// whole, which is the same as off.
    pub fn stream_plans(mut self, on: bool) -> Self {
        self.stream_plans = on;
        self
    }

    /// Whether the answer turn after a plan whose steps all succeeded is asked compactly (default:
    /// off): the instructions, the question, the plan's steps and its results, with one tool,
    /// `call_more_tools`, for when the results do not answer the question; not the tool
    /// definitions and planning instructions again. The turn then costs a few hundred input tokens
    /// instead of the whole prompt. When the model calls `call_more_tools`, the next turn has the
    /// whole conversation and the tools, and must call one (and the interaction's later answer
    /// turns are asked the usual way). Off by default: with the local 1.5B model it answered fewer
    /// of the agent bench's questions right (bench/README.md).
    pub fn compact_answer(mut self, on: bool) -> Self {
        self.compact_answer = Some(on);
        self
    }

    /// Whether a plan whose steps all succeeded, and that brings no answer of its own (no
    /// `answer` field, or one the agent does not take), is answered with its results, written out
    /// instead of asking the model again (default: off).
    /// LlamaIndex's `return_direct` tools and `execute_tool_plan`'s output steps return results the
    /// same way. Not for a question that asks for a judgement on the results (yes or no, one of
    /// named options), nor for a plan that leaves out a tool its own thought names (it stopped
    /// short): the model answers those as usual. A plan whose only failed step is its answer (a
    /// value inserted that was not there) counts as succeeded. The interaction then costs one model call
    /// when the first plan is whole and succeeds; the answer lists what the plan found out (its
    /// output steps, or its final steps first and then the steps they read) rather than a sentence.
    pub fn results_answer(mut self, on: bool) -> Self {
        self.results_answer = on;
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

    /// Whether and how `execute_tool_plan` is offered (default: [`Planning::Off`]). With
    /// [`Planning::Only`] every tool use is a plan, one plan per turn unless
    /// [`parallel_tool_calls`](Self::parallel_tool_calls) says otherwise. With an answer field
    /// ([`Planning::OnlyWithAnswer`], [`Planning::OfferedWithAnswer`]), a plan's `answer` runs as a
    /// last step of the built-in `answer` tool, and a plan whose steps all succeed ends the
    /// interaction without another model call.
    pub fn planning(mut self, planning: Planning) -> Self {
        self.planning = planning;
        self
    }

    /// How `execute_tool_plan`'s description lists the tools when it is offered alone (default:
    /// [`ToolListing::Documented`] for [`Planning::Only`] and [`Planning::OnlyWithAnswer`]; beside
    /// the tools, the description omits them, as the model reads them as tools).
    pub fn plan_listing(mut self, listing: ToolListing) -> Self {
        self.plan_listing = Some(listing);
        self
    }

    /// Most model turns per interaction (default 10).
    pub fn max_turns(mut self, turns: usize) -> Self {
        self.max_turns = turns.max(1);
        self
    }

    /// How many times per interaction a rejected plan is sent back with the request to fix it and the
    /// next reply made to call a tool (default [`DEFAULT_REPAIRS`]): small models otherwise often
    /// apologise and stop instead of sending the plan again. 0 leaves the choice to the model.
    pub fn repairs(mut self, repairs: usize) -> Self {
        self.max_repairs = repairs;
        self
    }

    /// Most steps of a plan the model writes (default [`DEFAULT_MAX_PLAN_STEPS`]; the engine's
    /// [`Limits::max_steps`] still applies when lower). A longer plan is refused with that problem,
    /// and providers that constrain decoding stop the model at that many steps.
    pub fn max_plan_steps(mut self, steps: usize) -> Self {
        self.max_plan_steps = steps.max(1);
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

    /// Plans (and direct tool calls) that need approval before they run, and who approves them:
    /// a callback ([`FnApprover`](toolplan_core::approval::FnApprover)), the terminal, an MCP
    /// client. Each plan is shown whole, once; a declined plan runs nothing, and the model reads
    /// why. Sets [`RunConfig::approval`] (call after [`run_config`](Self::run_config)).
    pub fn approval(mut self, gate: toolplan_core::approval::ApprovalGate) -> Self {
        self.run_config.approval = Some(gate);
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
        let planning = self.planning;
        let answer_in_plan = planning.answer_in_plan();
        let mut registry = ToolRegistry::new();
        if answer_in_plan {
            registry
                .register(answer_tool())
                .map_err(|e| AgentError::Config(e.to_string()))?;
        }
        for tool in self.tools {
            if tool.name() == EXECUTE_TOOL_PLAN {
                return Err(AgentError::Config(
                    "execute_tool_plan is added by the planning mode (AgentBuilder::planning), not as a tool".into(),
                ));
            }
            if answer_in_plan && tool.name() == ANSWER_TOOL {
                return Err(AgentError::Config(format!(
                    "a tool named '{ANSWER_TOOL}' clashes with the plan answers of Planning::{planning:?}"
                )));
            }
            registry
                .register(tool)
                .map_err(|e| AgentError::Config(e.to_string()))?;
        }
        // Plans here are written by a model: a repeated call of a tool that is not read-only or
        // idempotent is far more often a plan written in a loop than a call meant twice.
        let limits = Limits {
            repeated_calls: RepeatedCalls::ShareOrReject,
            max_steps: self.limits.max_steps.min(self.max_plan_steps),
            ..self.limits
        };
        let engine = Arc::new(
            Engine::new(Arc::new(registry))
                .with_limits(limits)
                .with_config(self.run_config),
        );
        // Plan-only: the tools are reached through plans alone; listed natively (shown, not
        // callable) when the listing says so, else in the planner's description.
        let native = planning.plan_only() && self.plan_listing == Some(ToolListing::Native);
        let mut definitions: Vec<ToolDefinition> = if planning.plan_only() && !native {
            Vec::new()
        } else {
            engine
                .tools()
                .iter()
                // The answer tool runs the plan's answer field only.
                .filter(|t| t.tool().name() != ANSWER_TOOL || !answer_in_plan)
                .map(|t| ToolDefinition {
                    name: t.tool().name().to_owned(),
                    description: t.tool().description().to_owned(),
                    parameters: t.schema().clone(),
                    listed_only: native,
                    ..Default::default()
                })
                .collect()
        };
        let planner = planning
            .execute_tool_plan(Arc::clone(&engine))
            .map(|p| match self.plan_listing {
                Some(listing) if planning.plan_only() => p.listing(listing),
                _ => p,
            })
            .map(Arc::new);
        if let Some(p) = &planner {
            // First in the list: small models favour the tools they read first. Providers that
            // constrain decoding hold every step to its tool's arguments, give no two steps one
            // id, and let a reference name only a step written before it.
            let mut references = StepReferences::plan()
                .with_reference_only(p.reference_only_arguments())
                .with_outputs(p.output_schemas());
            if p.has_answer_field() {
                references = references.with_text(ANSWER_FIELD);
            }
            definitions.insert(
                0,
                ToolDefinition::new(p.name(), p.description(), p.parameters())
                    .with_strict_parameters(p.typed_parameters())
                    .with_unique_values("/steps/*/id")
                    .with_step_references(references),
            );
        }
        let instructions = self.instructions.clone();
        let compact_answer = planner.is_some() && self.compact_answer.unwrap_or(false);
        let mut system = self.instructions;
        if let Some(instructions) = planning.instructions() {
            if !system.is_empty() {
                system.push_str("\n\n");
            }
            system.push_str(&instructions);
        }
        let begins_streamed = definitions.iter().any(|d| {
            !d.listed_only
                && engine
                    .tools()
                    .get(&d.name)
                    .is_some_and(|t| t.tool().begins_streamed())
        });
        Ok(Agent {
            name: self.name,
            model,
            system,
            instructions,
            engine,
            planner,
            definitions,
            answer_in_plan,
            stream_plans: self.stream_plans,
            begins_streamed,
            max_turns: self.max_turns,
            max_repairs: self.max_repairs,
            max_result_bytes: self.max_result_bytes,
            // Plan-only: one plan per turn (a plan holds the parallel calls; plans of one turn could
            // not refer to each other), unless the caller says otherwise.
            parallel_tool_calls: self
                .parallel_tool_calls
                .or(planning.plan_only().then_some(false)),
            think_first: self.think_first.unwrap_or(!planning.offers_planner()),
            think_after_plan: self.think_first.is_none() && planning.offers_planner(),
            compact_answer,
            results_answer: self.results_answer,
        })
    }
}

impl Agent {
    /// Starts building an agent.
    pub fn builder(name: impl Into<String>) -> AgentBuilder {
        AgentBuilder {
            name: name.into(),
            model: None,
            instructions: String::new(),
            tools: Vec::new(),
            planning: Planning::Off,
            plan_listing: None,
            parallel_tool_calls: None,
            think_first: None,
            max_turns: 10,
            max_repairs: DEFAULT_REPAIRS,
            max_plan_steps: DEFAULT_MAX_PLAN_STEPS,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            run_config: RunConfig::default(),
            limits: Limits::default(),
            stream_plans: true,
            compact_answer: None,
            results_answer: false,
        }
    }
}
