//! [`Engine`]: a tool registry with limits and run settings — the one object most users need — and
//! [`ExecuteToolPlan`], the engine offered to an LLM as the `execute_tool_plan` tool.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::dialect::tool_plan;
use crate::error::{InvalidPlan, ToolError};
use crate::limits::Limits;
use crate::plan::{EXECUTE_TOOL_PLAN, Plan};
use crate::run::PlanRun;
use crate::scheduler::{self, RunConfig, RunControl};
use crate::signature::{tool_signature, typed_plan_schema_of};
use crate::tool::{RegisteredTool, Tool, ToolContext, ToolRegistry, ToolResult};

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
}

/// How the `arguments` field of a step is described to an LLM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ArgumentsStyle {
    /// A JSON string or a JSON object (both are accepted whatever the style).
    #[default]
    Either,
    /// A JSON string, exactly as the seed's `execute_tool_plan` (for models tuned on that schema).
    JsonString,
}

/// The `execute_tool_plan` tool: an LLM hands it a plan, it runs the plan on an [`Engine`] and answers
/// with [`PlanRun::summary`].
pub struct ExecuteToolPlan {
    engine: Arc<Engine>,
    description: String,
    style: ArgumentsStyle,
    tool_names: Vec<String>,
    hidden: Vec<String>,
}

const PLAN_DESCRIPTION: &str = "\
Run several tool calls as one plan instead of one call per turn. Each step is {id, tool, arguments}. \
A step uses an earlier step's result by putting \"$ref:<step_id>\" as an argument value (the whole \
result, keeping its JSON type) or \"$ref:<step_id>.<field>\" (a field; nested fields and array \
indexes with more dots, e.g. \"$ref:s1.items.0.name\"; a missing field gives null); \"$ref:\" inside \
longer text inserts the value as text. Steps that do not depend on each other run in parallel. \
List in output_steps only the steps whose results you need (all are returned if omitted). If a step \
fails, the steps that depend on it are skipped and every failure is reported; the others still run. \
A plan cannot call execute_tool_plan.";

/// The plan format in few words, for descriptions that list the tools as signatures (small models,
/// short prompts).
const COMPACT_DESCRIPTION: &str = "\
Runs tool calls as one plan. steps: [{id, tool, arguments}]. An argument value \"$ref:ID\" is the \
result of step ID, \"$ref:ID.field\" one field of it; inside longer text it is inserted as text. \
Steps run in parallel unless one refers to another. output_steps: the ids whose results you need. \
A failed step skips the steps that depend on it.";

/// A worked example of a chain, for descriptions meant for small models (they copy the shape of its
/// plan closely): the price in euros of the product of order A7, through `get_order`, `get_product`
/// and `calculator`. `thought_end` goes at the end of the plan's thought, after the lookups it lists;
/// `ending` is the plan's last field as JSON text (the default example's is `"output_steps": ["e"]`).
pub fn worked_example(thought_end: Option<&str>, ending: &str) -> String {
    let thought_end = thought_end.map(|t| format!(", {t}")).unwrap_or_default();
    format!(
        "\nExample, for the price in euros of the product of order A7: {{\"thought\": \"get_order gives \
         the sku of order A7, get_product gives the price of that sku, calculator converts the \
         price{thought_end}.\", \"steps\": [{{\"id\": \"o\", \"tool\": \"get_order\", \"arguments\": \
         {{\"order_id\": \"A7\"}}}}, {{\"id\": \"p\", \"tool\": \"get_product\", \"arguments\": \
         {{\"sku\": \"$ref:o.sku\"}}}}, {{\"id\": \"e\", \"tool\": \"calculator\", \"arguments\": \
         {{\"expression\": \"$ref:p.price * 0.92\"}}}}], {ending}}}. A field can only be referenced from \
         a step whose tool returns it: plan a step for every lookup the answer needs."
    )
}

impl ExecuteToolPlan {
    /// The tool over an engine; its description lists the engine's tools.
    pub fn new(engine: Arc<Engine>) -> Self {
        Self::hiding_tools(engine, &[])
    }

    /// The tool over an engine whose tools named in `hidden` are left out of the description, the
    /// tool names of [`parameters`](Tool::parameters) and [`typed_parameters`](Self::typed_parameters):
    /// plans can still call them, for a caller that writes such steps into plans itself (an agent's
    /// `answer` step). The other builders keep them hidden.
    pub fn hiding_tools(engine: Arc<Engine>, hidden: &[&str]) -> Self {
        let mut planner = Self {
            engine,
            description: String::new(),
            style: ArgumentsStyle::default(),
            tool_names: Vec::new(),
            hidden: hidden.iter().map(|h| (*h).to_owned()).collect(),
        };
        planner.tool_names = planner
            .listed_tools()
            .map(|t| t.tool().name().to_owned())
            .collect();
        let tools: Vec<String> = planner
            .listed_tools()
            .map(|t| format!("- {}: {}", t.tool().name(), t.tool().description()))
            .collect();
        planner.description = PLAN_DESCRIPTION.to_owned();
        if !tools.is_empty() {
            planner.description.push_str("\nTools a plan can call:\n");
            planner.description.push_str(&tools.join("\n"));
        }
        planner
    }

    /// The tools the model is told about: those a plan may call, less the hidden ones.
    fn listed_tools(&self) -> impl Iterator<Item = &Arc<RegisteredTool>> {
        self.engine
            .tools()
            .plan_tools()
            .filter(|t| !self.hidden.iter().any(|h| h == t.tool().name()))
    }

    /// The description with each tool's argument schema in the list, for callers that offer only the
    /// planner (every tool use is then a plan, and the model learns the arguments from here).
    pub fn with_tool_schemas(mut self) -> Self {
        let mut description = PLAN_DESCRIPTION.to_owned();
        description.push_str(
            "\nTools a plan can call (name, JSON Schema of its arguments, what it does):",
        );
        for t in self.listed_tools() {
            description.push_str(&format!(
                "\n- {} {}: {}",
                t.tool().name(),
                t.schema(),
                t.tool().description()
            ));
        }
        self.description = description;
        self
    }

    /// The description with each tool as a one-line signature (`name(arg: type): what it does`, see
    /// [`tool_signature`]) and a worked example of a chain: the shortest description that still tells a
    /// model every tool's arguments, for callers that offer only the planner. Pair it with
    /// [`typed_parameters`](Self::typed_parameters) where decoding can be constrained.
    pub fn with_tool_signatures(self) -> Self {
        self.with_tool_signatures_and_example(&worked_example(None, r#""output_steps": ["e"]"#))
    }

    /// [`with_tool_signatures`](Self::with_tool_signatures) with another worked example (text that
    /// follows the description; small models copy the shape of its plan closely).
    pub fn with_tool_signatures_and_example(mut self, example: &str) -> Self {
        let mut description = COMPACT_DESCRIPTION.to_owned();
        description.push_str(example);
        description.push_str("\nTools a plan can call:");
        for t in self.listed_tools() {
            description.push_str("\n- ");
            description.push_str(&tool_signature(
                t.tool().name(),
                t.tool().description(),
                t.schema(),
            ));
        }
        self.description = description;
        self
    }

    /// The plan's JSON Schema with every step typed by its tool ([`typed_plan_schema`](crate::signature::typed_plan_schema)): each step's
    /// arguments must be an object that matches its tool's schema, `"$ref:…"` allowed for any value.
    /// Stricter than [`parameters`](Tool::parameters), for providers that constrain decoding.
    pub fn typed_parameters(&self) -> Value {
        typed_plan_schema_of(self.listed_tools())
    }

    /// The description without the list of tools, for callers that offer the tools to the model
    /// separately anyway (an agent): the model reads each tool once, and the prompt is shorter.
    pub fn without_tool_list(mut self) -> Self {
        self.description = PLAN_DESCRIPTION.to_owned();
        self
    }

    /// Sets how step arguments are described in the schema.
    pub fn with_arguments_style(mut self, style: ArgumentsStyle) -> Self {
        self.style = style;
        self
    }

    /// Replaces the description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
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

/// The JSON Schema of a tool plan over these tools, as an LLM sees it: like [`plan_schema`], with each
/// step's `tool` limited to the tool names (so a grammar built from the schema can only name them).
pub fn plan_schema_for_tools(style: ArgumentsStyle, tools: &[String]) -> Value {
    let mut schema = plan_schema(style);
    if !tools.is_empty() {
        schema["properties"]["steps"]["items"]["properties"]["tool"]["enum"] = json!(tools);
    }
    schema
}

/// The JSON Schema of a tool plan, as an LLM sees it.
pub fn plan_schema(style: ArgumentsStyle) -> Value {
    let arguments = match style {
        ArgumentsStyle::Either => json!({
            "type": ["object", "string"],
            "description": "The tool's arguments: a JSON object, or a JSON string of one. String values may be \"$ref:<step_id>\" or \"$ref:<step_id>.<field>\" references."
        }),
        ArgumentsStyle::JsonString => json!({
            "type": "string",
            "description": "JSON string of the tool's arguments. May contain \"$ref:<step_id>\" or \"$ref:<step_id>.<field>\" references."
        }),
    };
    json!({
        "type": "object",
        "properties": {
            "thought": {
                "type": "string",
                "description": "Optional, written first: what the answer needs and which tool gives each piece. Not executed."
            },
            "steps": {
                "type": "array",
                "minItems": 1,
                "description": "The tool calls to make.",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "pattern": "^[A-Za-z0-9_-]+$", "description": "Unique step id, used by $ref references."},
                        "tool": {"type": "string", "description": "Name of the tool to call."},
                        "arguments": arguments
                    },
                    "required": ["id", "tool", "arguments"],
                    "additionalProperties": false
                }
            },
            "output_steps": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Ids of the steps whose results you need; all results are returned if omitted."
            }
        },
        "required": ["steps"],
        "additionalProperties": false
    })
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
        plan_schema_for_tools(self.style, &self.tool_names)
    }

    async fn call(&self, arguments: Value, ctx: ToolContext) -> ToolResult {
        let run = self
            .execute(arguments, RunControl::with_cancel(ctx.cancel))
            .await
            .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        Ok(Value::String(
            run.summary_within(crate::limits::DEFAULT_MAX_SUMMARY_BYTES),
        ))
    }
}
