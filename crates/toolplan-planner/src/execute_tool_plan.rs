//! [`ExecuteToolPlan`]: the engine offered to an LLM as the `execute_tool_plan` tool, with the
//! description and schemas the model reads.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use toolplan_core::limits::DEFAULT_MAX_SUMMARY_BYTES;
use toolplan_core::{
    EXECUTE_TOOL_PLAN, Engine, InvalidPlan, Plan, PlanRun, RunControl, Tool, ToolContext,
    ToolError, ToolResult,
};

use crate::description::{ListedTool, ToolListing, describe};
use crate::schema::{
    ANSWER_FIELD, ArgumentsStyle, plan_schema_with, reference_only_fields, strip_annotations,
    typed_plan_schema_of,
};

/// The `execute_tool_plan` tool: an LLM hands it a plan, it runs the plan on an [`Engine`] and answers
/// with [`PlanRun::summary`].
///
/// What the model reads is set by a few builder methods: which tools the description lists and how
/// ([`listing`](Self::listing), [`hiding`](Self::hiding)), whether plans carry an `answer` field
/// ([`with_answer_field`](Self::with_answer_field)), and how step arguments are described
/// ([`with_arguments_style`](Self::with_arguments_style)).
pub struct ExecuteToolPlan {
    engine: Arc<Engine>,
    hidden: Vec<String>,
    listing: ToolListing,
    style: ArgumentsStyle,
    answer_field: bool,
    /// Set by [`with_description`](Self::with_description); else the description is rendered.
    custom_description: Option<String>,
    description: String,
}

impl ExecuteToolPlan {
    /// The tool over an engine; its description lists the engine's tools with their descriptions.
    pub fn new(engine: Arc<Engine>) -> Self {
        Self {
            engine,
            hidden: Vec::new(),
            listing: ToolListing::default(),
            style: ArgumentsStyle::default(),
            answer_field: false,
            custom_description: None,
            description: String::new(),
        }
        .rendered()
    }

    /// Leaves the tools named in `hidden` out of the description, the tool names of
    /// [`parameters`](Tool::parameters) and [`typed_parameters`](Self::typed_parameters): plans can
    /// still call them, for a caller that writes such steps into plans itself.
    pub fn hiding(mut self, hidden: &[&str]) -> Self {
        self.hidden.extend(hidden.iter().map(|h| (*h).to_owned()));
        self.rendered()
    }

    /// Sets how the description lists the tools (default: [`ToolListing::Descriptions`]).
    pub fn listing(mut self, listing: ToolListing) -> Self {
        self.listing = listing;
        self.rendered()
    }

    /// Gives plans an `answer` field ([`ANSWER_FIELD`]) after `steps`: the reply to the user, with
    /// `$ref:` where results go, or null. [`parameters`](Tool::parameters) explain it, the typed
    /// schema requires it, and the compact description's example ends with one. A tool named like
    /// the field is hidden (the field is the one way to reach it). The engine knows no such field: the
    /// caller turns it into a step before the plan runs (an agent's answer step).
    pub fn with_answer_field(mut self) -> Self {
        self.answer_field = true;
        self.hidden.push(ANSWER_FIELD.to_owned());
        self.rendered()
    }

    /// Sets how step arguments are described in the schema.
    pub fn with_arguments_style(mut self, style: ArgumentsStyle) -> Self {
        self.style = style;
        self
    }

    /// Replaces the description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.custom_description = Some(description.into());
        self.rendered()
    }

    /// The tool with its description rendered from the settings (unless one was given).
    fn rendered(mut self) -> Self {
        self.description = match &self.custom_description {
            Some(custom) => custom.clone(),
            None => {
                let tools: Vec<ListedTool<'_>> = self.listed_tools().collect();
                describe(self.listing, self.answer_field, &tools)
            }
        };
        self
    }

    /// The tools the model is told about: those a plan may call, less the hidden ones.
    fn listed_tools(&self) -> impl Iterator<Item = ListedTool<'_>> {
        self.engine
            .tools()
            .plan_tools()
            .filter(|t| !self.hidden.iter().any(|h| h == t.tool().name()))
            .map(|t| ListedTool {
                name: t.tool().name(),
                description: t.tool().description(),
                schema: t.schema(),
                output: t.output_schema(),
            })
    }

    /// The plan's JSON Schema with every step typed by its tool
    /// ([`typed_plan_schema`](crate::typed_plan_schema)): each step's arguments must be an object that
    /// matches its tool's schema, `"$ref:…"` allowed for any value. Stricter than
    /// [`parameters`](Tool::parameters), for providers that constrain decoding.
    pub fn typed_parameters(&self) -> Value {
        typed_plan_schema_of(
            self.listed_tools().map(|t| (t.name, t.schema)),
            self.answer_field,
            Some(self.engine.limits().max_steps),
        )
    }

    /// Per tool a plan may use, the arguments whose value in a step can be a string only as a
    /// `$ref:` reference (a number, a boolean, an array, an object: see
    /// [`typed_parameters`](Self::typed_parameters)). A decoder that knows the steps written so far
    /// can keep a first step from opening such a string at all.
    pub fn reference_only_arguments(&self) -> BTreeMap<String, Vec<String>> {
        self.listed_tools()
            .map(|t| (t.name.to_owned(), reference_only_fields(t.schema)))
            .filter(|(_, fields)| !fields.is_empty())
            .collect()
    }

    /// The output schema of each tool a plan may call that declares one, by tool name: the fields
    /// a `$ref:step.field` into its result can name (for decoders that hold references to them).
    pub fn output_schemas(&self) -> BTreeMap<String, Value> {
        self.listed_tools()
            .filter_map(|t| Some((t.name.to_owned(), t.output?.clone())))
            .collect()
    }

    /// Whether plans carry an `answer` text, whose `$ref:` references may name any step
    /// ([`with_answer_field`](Self::with_answer_field)).
    pub fn has_answer_field(&self) -> bool {
        self.answer_field
    }

    /// The engine plans run on.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Validates a plan as the tool receives it: an object, or the whole plan as one JSON string
    /// (models sometimes send that), parsed as plan text with the plan size limit.
    pub fn compile(&self, plan: Value) -> Result<Plan, InvalidPlan> {
        match plan {
            Value::String(text) => self.engine.compile(&text),
            other => self.engine.compile_value(other),
        }
    }

    /// Validates and runs a plan, returning the full run (the tool call returns its summary).
    pub async fn execute(&self, plan: Value, control: RunControl) -> Result<PlanRun, InvalidPlan> {
        let plan = self.compile(plan)?;
        Ok(self.engine.run(&plan, control).await)
    }
}

#[async_trait]
impl Tool for ExecuteToolPlan {
    fn name(&self) -> &str {
        EXECUTE_TOOL_PLAN
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        let names: Vec<String> = self.listed_tools().map(|t| t.name.to_owned()).collect();
        let schema = plan_schema_with(self.style, &names, self.answer_field);
        if matches!(
            self.listing,
            ToolListing::Signatures | ToolListing::Documented | ToolListing::Native
        ) {
            // The compact description explains every field already.
            strip_annotations(&schema)
        } else {
            schema
        }
    }

    async fn call(&self, arguments: Value, ctx: ToolContext) -> ToolResult {
        let run = self
            .execute(
                arguments,
                RunControl {
                    extension: ctx.extension,
                    ..RunControl::with_cancel(ctx.cancel)
                },
            )
            .await
            .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        Ok(Value::String(run.summary_within(DEFAULT_MAX_SUMMARY_BYTES)))
    }
}
