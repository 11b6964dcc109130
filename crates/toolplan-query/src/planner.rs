//! [`QueryPlanner`]: the user's tools and a synthesizer in one registry; query plans compiled by the
//! core dialect and run by the core scheduler.

use std::sync::Arc;

use crate::dialect::{self as query_plan, QueryNode, QueryPlan};
use serde_json::Value;
use toolplan_core::{
    Engine, InvalidPlan, Limits, PlanRun, RunConfig, RunControl, RunOutcome, StepStatus, Tool,
    ToolRegistry, value_as_text,
};

use crate::error::QueryError;
use crate::synthesize::{LlmUsage, SYNTHESIZE, Synthesizer, synthesize_tool};

/// Compiles and runs query plans over a set of tools.
pub struct QueryPlanner {
    engine: Engine,
    synthesizer: Arc<Synthesizer>,
}

impl std::fmt::Debug for QueryPlanner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryPlanner")
            .field("tools", &self.engine.tools().names().collect::<Vec<_>>())
            .field("synthesizer", &self.synthesizer)
            .finish()
    }
}

impl QueryPlanner {
    /// A planner over `tools`, whose branches use `synthesizer`. Fails when two tools share a name or
    /// a tool is named [`SYNTHESIZE`].
    pub fn new(
        tools: impl IntoIterator<Item = Arc<dyn Tool>>,
        synthesizer: Synthesizer,
    ) -> Result<Self, QueryError> {
        let synthesizer = Arc::new(synthesizer);
        let mut registry = ToolRegistry::new();
        registry.register_all(tools)?;
        registry.register(synthesize_tool(Arc::clone(&synthesizer)))?;
        Ok(Self {
            engine: Engine::new(Arc::new(registry)),
            synthesizer,
        })
    }

    /// Concurrency, timeouts and deadline of runs.
    pub fn with_config(mut self, config: RunConfig) -> Self {
        self.engine = self.engine.with_config(config);
        self
    }

    /// Size limits of plans.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.engine = self.engine.with_limits(limits);
        self
    }

    /// The tools a node may name (the synthesizer left out), in registration order.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.engine
            .tools()
            .plan_tools()
            .filter(|t| t.tool().name() != SYNTHESIZE)
            .map(|t| t.tool())
    }

    /// The size limits of plans.
    pub fn limits(&self) -> &Limits {
        self.engine.limits()
    }

    /// The synthesizer (its mode and LLM usage).
    pub fn synthesizer(&self) -> &Synthesizer {
        &self.synthesizer
    }

    /// Parses and validates query-plan text.
    pub fn compile(&self, text: &str) -> Result<QueryPlan, InvalidPlan> {
        query_plan::compile(text, self.engine.tools(), SYNTHESIZE, self.engine.limits())
    }

    /// Parses and validates a query plan in JSON form.
    pub fn compile_value(&self, plan: Value) -> Result<QueryPlan, InvalidPlan> {
        query_plan::compile_value(plan, self.engine.tools(), SYNTHESIZE, self.engine.limits())
    }

    /// Runs a compiled plan. The run's LLM usage is what the synthesizer used during it (exact when
    /// runs of one planner do not overlap).
    pub async fn run(&self, plan: &QueryPlan, control: RunControl) -> QueryRun {
        let before = self.synthesizer.usage();
        let run = self.engine.run(&plan.plan, control).await;
        QueryRun {
            root: plan.root.clone(),
            nodes: plan.nodes.clone(),
            run,
            llm: self.synthesizer.usage().since(before),
        }
    }

    /// Runs query-plan text while it is still being written (by a model, a pipe): each node joins
    /// the run as soon as its text is complete, and a node on a read-only tool (the synthesizer,
    /// the document tools) whose children are written and answered starts before the rest of the
    /// plan is written. The result is what [`compile`](Self::compile) and [`run`](Self::run) of the
    /// whole text give, apart from timings: the same problems for an invalid plan, the same run for
    /// a valid one (text around the plan's JSON document is ignored, as in a model's reply). The
    /// text is bounded by the plan size limit, waiting for it by the run's deadline and
    /// cancellation; a run that stopped before the text ended has no root or nodes (its answer
    /// says why it stopped).
    pub async fn run_streamed(
        &self,
        text: impl futures::Stream<Item = String> + Send,
        control: RunControl,
    ) -> Result<QueryRun, InvalidPlan> {
        self.run_streamed_after(text, false, control).await
    }

    /// [`run_streamed`](Self::run_streamed); with `deadline_after_text` the run's deadline counts
    /// from the end of the text, for a caller that bounds the writing itself (a model call).
    pub async fn run_streamed_after(
        &self,
        text: impl futures::Stream<Item = String> + Send,
        deadline_after_text: bool,
        control: RunControl,
    ) -> Result<QueryRun, InvalidPlan> {
        let before = self.synthesizer.usage();
        let (run, nodes) =
            query_plan::run_streamed(&self.engine, text, SYNTHESIZE, deadline_after_text, control)
                .await?;
        let (root, nodes) = nodes.unwrap_or_default();
        Ok(QueryRun {
            root,
            nodes,
            run,
            llm: self.synthesizer.usage().since(before),
        })
    }
}

/// A finished query-plan run.
#[derive(Debug, Clone)]
pub struct QueryRun {
    /// The root node's id (empty when a streamed plan stopped before it was written whole).
    pub root: String,
    /// The plan's nodes, in source order (empty when a streamed plan stopped before it was written
    /// whole).
    pub nodes: Vec<QueryNode>,
    /// The run of the compiled plan: every node's status, timing and error.
    pub run: PlanRun,
    /// What the synthesizer's model used during the run.
    pub llm: LlmUsage,
}

impl QueryRun {
    /// The root's answer, or why there is none: the first node that failed (by finish time), or why
    /// the run stopped.
    pub fn answer(&self) -> Result<&Value, QueryError> {
        if let Some(value) = self.run.output(&self.root) {
            return Ok(value);
        }
        let first_failure = self
            .run
            .steps
            .iter()
            .filter(|s| s.status == StepStatus::Failed)
            .min_by_key(|s| s.finished);
        if self.run.outcome != RunOutcome::Completed {
            let reason = match self.run.outcome {
                RunOutcome::Cancelled => "the run was cancelled".to_owned(),
                RunOutcome::Declined => "the plan was not approved".to_owned(),
                _ => "the deadline passed".to_owned(),
            };
            return Err(QueryError::Stopped {
                root: self.root.clone(),
                reason,
            });
        }
        match first_failure {
            Some(step) => Err(QueryError::NodeFailed {
                node: step.id.clone(),
                error: step.error.clone().unwrap_or_default(),
            }),
            None => Err(QueryError::NodeFailed {
                node: self.root.clone(),
                error: "no answer".into(),
            }),
        }
    }

    /// The root's answer as text (JSON answers as compact JSON).
    pub fn answer_text(&self) -> Result<String, QueryError> {
        self.answer().map(|v| value_as_text(v).into_owned())
    }

    /// Tool calls made (synthesis steps not counted).
    pub fn tool_calls(&self) -> usize {
        self.run
            .steps
            .iter()
            .filter(|s| s.tool != SYNTHESIZE && s.started.is_some())
            .count()
    }
}
