//! [`QueryPlanTool`]: query planning offered to an agent (or any caller of tools) as one tool.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use toolplan_core::Observer;
use toolplan_core::{RunControl, Tool, ToolContext, ToolError, ToolResult};

use crate::planner::QueryPlanner;
use crate::progress::NodeLog;

/// The tool's default name.
pub const DEFAULT_NAME: &str = "query_plan_tool";

/// The default start of the tool's description; the available tools follow it.
pub const DEFAULT_DESCRIPTION_PREFIX: &str = "\
This tool answers a question through a query plan: a graph of sub-questions that you write. Each node \
has an id and a question (query_str). A leaf node names the tool that answers its question \
(tool_name) and has no dependencies. A branch node lists the nodes it depends on (dependencies); its \
answer is written from their answers. Exactly one node, the root, is not a dependency of any other \
node: its answer is the tool's result, so make the root's question the whole question. Nodes that do \
not depend on each other are answered at the same time. Write the leaves first and the root last, \
with every other node among its dependencies; use as few nodes as the question needs. For \
example, to compare two things that two tools know: {\"nodes\": [{\"id\": 1, \"query_str\": \"What is the \
first thing?\", \"tool_name\": \"tool_a\", \"dependencies\": []}, {\"id\": 2, \"query_str\": \"What is the second \
thing?\", \"tool_name\": \"tool_b\", \"dependencies\": []}, {\"id\": 3, \"query_str\": \"How do the first and \
second thing compare?\", \"tool_name\": null, \"dependencies\": [1, 2]}]}. The tools a leaf can name:";

const QUERY_STR_DESC: &str = "The question this node answers. For a leaf, the input of its tool; \
for a branch, what to answer from its dependencies' answers.";
const TOOL_NAME_DESC: &str = "The tool that answers this node's question (leaves). Leave it null on \
a branch, which is answered from its dependencies.";
const DEPENDENCIES_DESC: &str = "The ids of the nodes whose answers this node needs. Empty for a \
leaf, which names a tool instead.";

/// Query planning as a tool: its arguments are a query plan, its result the root's answer.
pub struct QueryPlanTool {
    planner: Arc<QueryPlanner>,
    name: String,
    prefix: String,
    custom_description: Option<String>,
    description: String,
    verbose: bool,
}

impl QueryPlanTool {
    /// The tool over a planner, with the default name and description prefix.
    pub fn new(planner: Arc<QueryPlanner>) -> Self {
        let mut tool = Self {
            planner,
            name: DEFAULT_NAME.to_owned(),
            prefix: DEFAULT_DESCRIPTION_PREFIX.to_owned(),
            custom_description: None,
            description: String::new(),
            verbose: false,
        };
        tool.describe();
        tool
    }

    /// Sets the tool's name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets the start of the description (the tool list still follows it).
    pub fn with_description_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self.describe();
        self
    }

    /// Replaces the whole description (no tool list is added).
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.custom_description = Some(description.into());
        self.describe();
        self
    }

    /// Prints each node's question and answer on standard error as it completes.
    pub fn verbose(mut self, on: bool) -> Self {
        self.verbose = on;
        self
    }

    /// The planner the tool runs plans on.
    pub fn planner(&self) -> &Arc<QueryPlanner> {
        &self.planner
    }

    fn describe(&mut self) {
        self.description = match &self.custom_description {
            Some(d) => d.clone(),
            None => {
                let mut d = self.prefix.clone();
                for tool in self.planner.tools() {
                    d.push_str(&format!(
                        "\n\nTool Name: {}\nTool Description: {}",
                        tool.name(),
                        tool.description()
                    ));
                }
                d
            }
        };
    }
}

/// The JSON Schema of a query plan over these tools: `tool_name` is one of them, or null.
pub fn query_plan_schema_for(tools: &[&str]) -> Value {
    let mut schema = query_plan_schema();
    let mut names: Vec<Value> = tools.iter().map(|t| json!(t)).collect();
    names.push(Value::Null);
    schema["properties"]["nodes"]["items"]["properties"]["tool_name"]["enum"] = Value::Array(names);
    schema
}

/// The JSON Schema of a query plan, with the field descriptions a model reads.
pub fn query_plan_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "nodes": {
                "type": "array",
                "description": "The nodes of the query plan.",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer", "description": "Unique id of the node."},
                        "query_str": {"type": "string", "description": QUERY_STR_DESC},
                        "tool_name": {"type": ["string", "null"], "description": TOOL_NAME_DESC},
                        "dependencies": {"type": "array", "items": {"type": "integer"}, "description": DEPENDENCIES_DESC}
                    },
                    "required": ["id", "query_str", "tool_name", "dependencies"]
                }
            }
        },
        "required": ["nodes"]
    })
}

#[async_trait]
impl Tool for QueryPlanTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        let names: Vec<&str> = self.planner.tools().map(|t| t.name()).collect();
        query_plan_schema_for(&names)
    }

    async fn call(&self, arguments: Value, ctx: ToolContext) -> ToolResult {
        let plan = self
            .planner
            .compile_value(arguments)
            .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        let observer: Option<Arc<dyn Observer>> = self
            .verbose
            .then(|| Arc::new(NodeLog::new(&plan, true)) as Arc<dyn Observer>);
        let control = RunControl {
            cancel: ctx.cancel.clone(),
            observer,
            ..RunControl::default()
        };
        let run = self.planner.run(&plan, control).await;
        match run.answer() {
            Ok(v) => Ok(v.clone()),
            Err(e) => Err(ToolError::failed(e.to_string())),
        }
    }
}
