//! [`QueryPlanTool`]: query planning offered to an agent (or any caller of tools) as one tool.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use toolplan_core::{InvalidPlan, Observer, StreamedStart};
use toolplan_core::{RunControl, Tool, ToolContext, ToolError, ToolResult};

use crate::planner::{QueryPlanner, QueryRun};
use crate::progress::NodeLog;

/// Most query plans begun while they are written ([`Tool::begin_streamed`]) kept waiting for
/// their call at once; one more stops the oldest.
pub const MAX_WAITING_STARTS: usize = 4;

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

/// A query plan begun while a model writes it, waiting for the call that takes it up.
struct Early {
    /// The arguments' text as written.
    text: Arc<Mutex<Written>>,
    /// The run.
    run: JoinHandle<Result<QueryRun, InvalidPlan>>,
    /// Stops the run.
    cancel: CancellationToken,
    /// Set when a call takes the run up: the start that began it no longer stops it.
    taken: Arc<AtomicBool>,
}

/// The arguments' text of a begun call, as far as it is kept.
#[derive(Default)]
struct Written {
    text: String,
    /// The text passed the plan size limit (no call will match it).
    overflowed: bool,
    /// The text has ended ([`StreamedStart::end`], or the start was dropped).
    ended: bool,
}

/// Marks the text ended when the start lets go of its pieces.
struct EndsText(Arc<Mutex<Written>>);

impl Drop for EndsText {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).ended = true;
    }
}

/// Query planning as a tool: its arguments are a query plan, its result the root's answer. Begun
/// while the model writes its arguments ([`Tool::begin_streamed`]), the plan's nodes start as they
/// are written.
pub struct QueryPlanTool {
    planner: Arc<QueryPlanner>,
    early: Mutex<Vec<Early>>,
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
            early: Mutex::new(Vec::new()),
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

    /// The plan begun from text, ended, whose JSON is `arguments`, if one was; it is taken (the
    /// start that began it no longer stops it).
    fn take_early(&self, arguments: &Value) -> Option<Early> {
        let mut early = self.early.lock().unwrap_or_else(PoisonError::into_inner);
        early.retain(|e| !e.cancel.is_cancelled());
        let at = early.iter().position(|e| {
            let written = e.text.lock().unwrap_or_else(PoisonError::into_inner);
            written.ended
                && !written.overflowed
                && serde_json::from_str::<Value>(&written.text).ok().as_ref() == Some(arguments)
        })?;
        let taken = early.remove(at);
        taken.taken.store(true, Ordering::SeqCst);
        Some(taken)
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

    fn begins_streamed(&self) -> bool {
        true
    }

    fn begin_streamed(&self) -> Option<StreamedStart> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (sender, chunks) = futures::channel::mpsc::unbounded::<String>();
        let text = Arc::new(Mutex::new(Written::default()));
        let ends = EndsText(Arc::clone(&text));
        let max = self.planner.limits().max_plan_bytes;
        // The text is kept as it is written, to know the call that takes the run up; past the size
        // limit the run fails, and no call takes it up (the call's own run then judges the plan).
        let push = move |chunk: String| {
            let mut written = ends.0.lock().unwrap_or_else(PoisonError::into_inner);
            if written.text.len() + chunk.len() > max {
                written.overflowed = true;
                written.text = String::new();
            } else if !written.overflowed {
                written.text.push_str(&chunk);
            }
            let _ = sender.unbounded_send(chunk);
        };
        let log = self.verbose.then(|| Arc::new(NodeLog::streamed(true)));
        let chunks = match &log {
            Some(log) => log.follow(chunks, self.planner.limits()).boxed(),
            None => chunks.boxed(),
        };
        let cancel = CancellationToken::new();
        let control = RunControl {
            cancel: cancel.clone(),
            observer: log.map(|l| l as Arc<dyn Observer>),
            ..RunControl::default()
        };
        let planner = Arc::clone(&self.planner);
        // The writing is bounded by whoever writes (a model call's timeout): the run's deadline
        // counts from the end of the text, as for a call of the whole arguments.
        let run =
            runtime.spawn(async move { planner.run_streamed_after(chunks, true, control).await });
        // The start stops the run when it is dropped, unless a call has taken the run up.
        let taken = Arc::new(AtomicBool::new(false));
        let stop = {
            let (taken, cancel) = (Arc::clone(&taken), cancel.clone());
            move || {
                if !taken.load(Ordering::SeqCst) {
                    cancel.cancel();
                }
            }
        };
        let mut early = self.early.lock().unwrap_or_else(PoisonError::into_inner);
        early.retain(|e| !e.cancel.is_cancelled());
        if early.len() >= MAX_WAITING_STARTS {
            early.remove(0).cancel.cancel();
        }
        early.push(Early {
            text,
            run,
            cancel,
            taken,
        });
        Some(StreamedStart::new(push, stop))
    }

    async fn call(&self, arguments: Value, ctx: ToolContext) -> ToolResult {
        if let Some(Early {
            mut run, cancel, ..
        }) = self.take_early(&arguments)
        {
            // The plan begun while the model wrote it, now this call's: the call's cancellation
            // stops it, and so does dropping the call.
            let _stop = cancel.clone().drop_guard();
            let outcome = tokio::select! {
                outcome = &mut run => outcome,
                () = ctx.cancel.cancelled() => {
                    cancel.cancel();
                    run.await
                }
            };
            return match outcome {
                Ok(Ok(run)) => answer_of(&run),
                Ok(Err(invalid)) => Err(ToolError::InvalidArguments(invalid.to_string())),
                Err(e) => Err(ToolError::failed(format!(
                    "the query plan's run stopped: {e}"
                ))),
            };
        }
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
            extension: ctx.extension.clone(),
            ..RunControl::default()
        };
        answer_of(&self.planner.run(&plan, control).await)
    }
}

/// The tool's result for a finished run: the root's answer, or why there is none.
fn answer_of(run: &QueryRun) -> ToolResult {
    run.answer()
        .cloned()
        .map_err(|e| ToolError::failed(e.to_string()))
}
