//! The query-plan dialect (LlamaIndex's `QueryPlanTool`): a DAG of sub-questions, a
//! [`Dialect`] of toolplan-core compiled into its plan IR.
//!
//! ```json
//! {"nodes": [
//!   {"id": 1, "query_str": "Revenue in March?", "tool_name": "march_report", "dependencies": []},
//!   {"id": 2, "query_str": "Revenue in June?",  "tool_name": "june_report",  "dependencies": []},
//!   {"id": 3, "query_str": "Compare revenue growth", "tool_name": null, "dependencies": [1, 2]}
//! ]}
//! ```
//!
//! Exactly one node is the **root**: the node no other node depends on; its answer is the plan's
//! answer. A **leaf** (no dependencies) calls its tool with its `query_str`. A **branch** hands its
//! children's answers to the synthesizer tool, whose name the caller gives (the synthesizer is an
//! ordinary tool in the registry, usually LLM-backed); a branch that also names a registered tool calls
//! that tool with its `query_str` once its children are done, as LlamaIndex does (there the synthesized
//! answer is computed and then replaced by the tool's; here the synthesis whose answer would be thrown
//! away is not run).
//!
//! Every node becomes one step of the plan IR with the node's id as step id, so the one scheduler
//! runs query plans too: independent nodes in parallel, a child shared by several parents once, cycles
//! rejected before anything runs, a failed child skipping its parents.
//!
//! A tool gets the query as its one text argument: the parameter named `input`, `query`, `query_str`
//! or `question` if it has one, else its only required parameter, else its only parameter
//! ([`query_argument`]).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

use toolplan_core::dialect::{self, Dialect, json_type, take_items};
use toolplan_core::plan::{DraftPlan, DraftStep};
use toolplan_core::reference::{Reference, is_valid_id};
use toolplan_core::template::Template;
use toolplan_core::{
    EXECUTE_TOOL_PLAN, Engine, InvalidPlan, Limits, Plan, PlanRun, Problem, RunControl,
    ToolRegistry,
};

/// Parameter names taken, in this order, as the one text argument of a tool called with a query.
pub const QUERY_ARGUMENT_NAMES: &[&str] = &["input", "query", "query_str", "question"];

/// The synthesizer's argument holding the branch's own question.
pub const SYNTH_QUERY: &str = "query";
/// The synthesizer's argument holding the children: `[{"query": …, "response": …}, …]`.
pub const SYNTH_CONTEXT: &str = "context";

const PLAN_FIELDS: &str = "\"nodes\"";
const NODE_FIELDS: &str = "\"id\", \"query_str\", \"tool_name\", \"dependencies\"";

/// One node as written, after parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryNode {
    /// The node id (an integer id is kept as its decimal text).
    pub id: String,
    /// The question this node answers.
    pub query: String,
    /// The tool that answers it (leaves), or that a branch calls after its children.
    pub tool: Option<String>,
    /// The nodes whose answers this one needs, without repeats.
    pub dependencies: Vec<String>,
}

/// A query plan compiled into the plan IR.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryPlan {
    /// The runnable plan: one step per node, the root as its only output step.
    pub plan: Plan,
    /// The root node's id.
    pub root: String,
    /// The nodes, in source order.
    pub nodes: Vec<QueryNode>,
}

impl QueryPlan {
    /// The node with this id.
    pub fn node(&self, id: &str) -> Option<&QueryNode> {
        self.nodes.iter().find(|n| n.id == id)
    }
}

/// What a query plan keeps beside the IR: the root (when there is exactly one) and the nodes.
struct Nodes {
    root: Option<String>,
    nodes: Vec<QueryNode>,
}

/// The query-plan format as a core [`Dialect`]: branches call the tool named `synthesizer`.
struct QueryPlanDialect<'a> {
    synthesizer: &'a str,
}

impl Dialect for QueryPlanDialect<'_> {
    type Extra = Nodes;

    fn draft(
        &self,
        value: Value,
        tools: &ToolRegistry,
        limits: &Limits,
        problems: &mut Vec<Problem>,
    ) -> Option<(DraftPlan, Self::Extra)> {
        let (nodes, found) = parse_value(value, limits);
        problems.extend(found);
        if nodes.is_empty() {
            return None;
        }
        let root = find_root(&nodes, problems);
        let draft = to_draft(
            &nodes,
            root.as_deref(),
            tools,
            self.synthesizer,
            false,
            problems,
        );
        Some((draft, Nodes { root, nodes }))
    }

    fn list_key(&self) -> &'static str {
        "nodes"
    }

    fn draft_prefix(
        &self,
        items: Vec<Value>,
        tools: &ToolRegistry,
        limits: &Limits,
    ) -> (DraftPlan, Vec<Problem>) {
        let mut top = Map::new();
        top.insert("nodes".to_owned(), Value::Array(items));
        let (nodes, mut problems) = parse_value(Value::Object(top), limits);
        let draft = to_draft(&nodes, None, tools, self.synthesizer, true, &mut problems);
        (draft, problems)
    }
}

/// Parses and validates query-plan text. Branches call the tool named `synthesizer`, which must be
/// registered.
pub fn compile(
    text: &str,
    tools: &ToolRegistry,
    synthesizer: &str,
    limits: &Limits,
) -> Result<QueryPlan, InvalidPlan> {
    with_root(dialect::compile(
        &QueryPlanDialect { synthesizer },
        text,
        tools,
        limits,
    ))
}

/// Parses and validates a query plan already in JSON form (see [`compile`]).
pub fn compile_value(
    value: Value,
    tools: &ToolRegistry,
    synthesizer: &str,
    limits: &Limits,
) -> Result<QueryPlan, InvalidPlan> {
    with_root(dialect::compile_value(
        &QueryPlanDialect { synthesizer },
        value,
        tools,
        limits,
    ))
}

/// Runs query-plan text on `engine` while it is still being written
/// ([`Engine::run_streamed_dialect`], whose `deadline_after_text` this passes on): each node joins
/// the run when its text is complete. Besides the run, the root and the nodes, when the text was
/// written whole before the run stopped.
pub async fn run_streamed(
    engine: &Engine,
    text: impl futures::Stream<Item = String> + Send,
    synthesizer: &str,
    deadline_after_text: bool,
    control: RunControl,
) -> Result<(PlanRun, Option<(String, Vec<QueryNode>)>), InvalidPlan> {
    let dialect = QueryPlanDialect { synthesizer };
    let (run, nodes) = engine
        .run_streamed_dialect(&dialect, text, &[], deadline_after_text, control)
        .await?;
    // A plan that compiled has its root (`find_root` reports a plan without one).
    let nodes = nodes.and_then(|Nodes { root, nodes }| Some((root?, nodes)));
    Ok((run, nodes))
}

/// A compiled plan with its root, or why not.
fn with_root(compiled: Result<(Plan, Nodes), InvalidPlan>) -> Result<QueryPlan, InvalidPlan> {
    let (plan, Nodes { root, nodes }) = compiled?;
    match root {
        Some(root) => Ok(QueryPlan { plan, root, nodes }),
        // `find_root` reported why; `validate` only returns Ok without problems.
        None => Err(InvalidPlan {
            problems: vec![Problem::NoRoot],
        }),
    }
}

/// Parses the nodes and reports every syntax problem (graph and tool checks come later).
pub fn parse_value(value: Value, limits: &Limits) -> (Vec<QueryNode>, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut nodes: Vec<QueryNode> = Vec::new();
    let Value::Object(mut top) = value else {
        problems.push(Problem::WrongType {
            what: "the query plan".into(),
            expected: "a JSON object with a \"nodes\" array",
            found: json_type(&value),
        });
        return (nodes, problems);
    };
    for key in top.keys() {
        if key != "nodes" {
            problems.push(Problem::UnknownField {
                what: "the query plan".into(),
                field: key.clone(),
                known: PLAN_FIELDS,
            });
        }
    }
    let Some(raw) = take_items(&mut top, "nodes", "the query plan", limits, &mut problems) else {
        return (nodes, problems);
    };
    let mut first: HashMap<String, usize> = HashMap::with_capacity(raw.len());
    for (position, raw) in raw.into_iter().enumerate() {
        let Some(node) = parse_node(position, raw, limits, &mut problems) else {
            continue;
        };
        if let Some(&earlier) = first.get(&node.id) {
            problems.push(Problem::DuplicateId {
                id: node.id,
                first: earlier,
                second: position,
            });
            continue;
        }
        first.insert(node.id.clone(), position);
        nodes.push(node);
    }
    (nodes, problems)
}

/// A node id: an integer (LlamaIndex's type) or a string of id characters.
fn node_id(value: &Value, limits: &Limits) -> Option<String> {
    let id = match value {
        Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
        Value::String(s) => s.clone(),
        _ => return None,
    };
    (is_valid_id(&id) && id.len() <= limits.max_id_len).then_some(id)
}

fn parse_node(
    position: usize,
    raw: Value,
    limits: &Limits,
    problems: &mut Vec<Problem>,
) -> Option<QueryNode> {
    let what = || format!("node #{position}");
    let Value::Object(mut fields) = raw else {
        problems.push(Problem::WrongType {
            what: what(),
            expected: "an object with \"id\", \"query_str\", \"tool_name\" and \"dependencies\"",
            found: json_type(&raw),
        });
        return None;
    };
    for key in fields.keys() {
        if !matches!(
            key.as_str(),
            "id" | "query_str" | "tool_name" | "dependencies"
        ) {
            problems.push(Problem::UnknownField {
                what: what(),
                field: key.clone(),
                known: NODE_FIELDS,
            });
        }
    }
    let id = match fields.remove("id") {
        None | Some(Value::Null) => {
            problems.push(Problem::MissingField {
                what: what(),
                field: "id",
            });
            None
        }
        Some(v) => match node_id(&v, limits) {
            Some(id) => Some(id),
            None => {
                problems.push(Problem::InvalidId {
                    index: position,
                    id: v.to_string(),
                    max_len: limits.max_id_len,
                });
                None
            }
        },
    };
    let query = match fields.remove("query_str") {
        Some(Value::String(q)) => Some(q),
        None | Some(Value::Null) => {
            problems.push(Problem::MissingField {
                what: what(),
                field: "query_str",
            });
            None
        }
        Some(other) => {
            problems.push(Problem::WrongType {
                what: format!("\"query_str\" of node #{position}"),
                expected: "text",
                found: json_type(&other),
            });
            None
        }
    };
    let tool = match fields.remove("tool_name") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) if t.trim().is_empty() => None,
        Some(Value::String(t)) => Some(t),
        Some(other) => {
            problems.push(Problem::WrongType {
                what: format!("\"tool_name\" of node #{position}"),
                expected: "a tool name or null",
                found: json_type(&other),
            });
            None
        }
    };
    let mut dependencies = Vec::new();
    match fields.remove("dependencies") {
        None | Some(Value::Null) => {}
        Some(Value::Array(deps)) => {
            for (i, dep) in deps.iter().enumerate() {
                match node_id(dep, limits) {
                    Some(d) if !dependencies.contains(&d) => dependencies.push(d),
                    Some(_) => {}
                    None => problems.push(Problem::WrongType {
                        what: format!("\"dependencies\"[{i}] of node #{position}"),
                        expected: "a node id",
                        found: json_type(dep),
                    }),
                }
            }
        }
        Some(other) => problems.push(Problem::WrongType {
            what: format!("\"dependencies\" of node #{position}"),
            expected: "an array of node ids",
            found: json_type(&other),
        }),
    }
    Some(QueryNode {
        id: id?,
        query: query?,
        tool,
        dependencies,
    })
}

/// The one node no other node depends on; reports none or several.
fn find_root(nodes: &[QueryNode], problems: &mut Vec<Problem>) -> Option<String> {
    let needed: HashSet<&str> = nodes
        .iter()
        .flat_map(|n| n.dependencies.iter().map(String::as_str))
        .collect();
    let roots: Vec<&QueryNode> = nodes
        .iter()
        .filter(|n| !needed.contains(n.id.as_str()))
        .collect();
    match roots.as_slice() {
        [root] => Some(root.id.clone()),
        [] => {
            problems.push(Problem::NoRoot);
            None
        }
        many => {
            problems.push(Problem::SeveralRoots {
                roots: many.iter().map(|n| n.id.clone()).collect(),
            });
            None
        }
    }
}

/// The parameter of a tool's schema that takes the query (see the module documentation).
pub fn query_argument(schema: &Value) -> Result<String, String> {
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| "it declares no parameters".to_owned())?;
    if let Some(name) = QUERY_ARGUMENT_NAMES
        .iter()
        .find(|n| properties.contains_key(**n))
    {
        return Ok((*name).to_owned());
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match (required.as_slice(), properties.len()) {
        ([only], _) => Ok((*only).to_owned()),
        ([], 1) => Ok(properties.keys().next().cloned().unwrap_or_default()),
        _ => {
            let names: Vec<&str> = properties.keys().map(String::as_str).collect();
            Err(format!(
                "it takes several parameters ({}); a query-plan node passes one text, to a parameter named {} or to a tool's only parameter",
                names.join(", "),
                QUERY_ARGUMENT_NAMES.join("/")
            ))
        }
    }
}

/// The arguments of a tool call that asks `query`, or the problem.
fn tool_call(
    node: &QueryNode,
    tool: &str,
    tools: &ToolRegistry,
    problems: &mut Vec<Problem>,
) -> Option<Template> {
    let registered = tools.get(tool)?;
    match query_argument(registered.schema()) {
        Ok(name) => {
            let mut args = Map::new();
            args.insert(name, Value::String(node.query.clone()));
            Some(Template::Literal(Value::Object(args)))
        }
        Err(reason) => {
            problems.push(Problem::ToolTakesNoQuery {
                node: node.id.clone(),
                tool: tool.to_owned(),
                reason,
            });
            None
        }
    }
}

/// The synthesizer's arguments for a branch: its query and each child's query and answer. Built as a
/// template directly (not parsed from text), so a `$ref:` written inside a question stays text.
fn synthesis(node: &QueryNode, by_id: &HashMap<&str, &QueryNode>) -> Template {
    let children = node
        .dependencies
        .iter()
        .map(|child| {
            let query = by_id.get(child.as_str()).map(|c| c.query.clone());
            Template::Object(vec![
                (
                    SYNTH_QUERY.to_owned(),
                    Template::Literal(json!(query.unwrap_or_default())),
                ),
                (
                    "response".to_owned(),
                    Template::Ref(Reference::whole(child)),
                ),
            ])
        })
        .collect();
    Template::Object(vec![
        (
            SYNTH_QUERY.to_owned(),
            Template::Literal(Value::String(node.query.clone())),
        ),
        (SYNTH_CONTEXT.to_owned(), Template::Array(children)),
    ])
}

/// The nodes as steps of the plan IR. With `prefix` the nodes are the first ones written of a
/// plan still being written: a dependency not yet written is kept (the step waits for it) instead
/// of being a problem.
fn to_draft(
    nodes: &[QueryNode],
    root: Option<&str>,
    tools: &ToolRegistry,
    synthesizer: &str,
    prefix: bool,
    problems: &mut Vec<Problem>,
) -> DraftPlan {
    let by_id: HashMap<&str, &QueryNode> = nodes.iter().map(|n| (n.id.as_str(), n)).collect();
    let mut steps = Vec::with_capacity(nodes.len());
    for (position, node) in nodes.iter().enumerate() {
        let mut dependencies = Vec::with_capacity(node.dependencies.len());
        for dep in &node.dependencies {
            if prefix || by_id.contains_key(dep.as_str()) {
                dependencies.push(dep.clone());
            } else {
                problems.push(Problem::UnknownNode {
                    node: node.id.clone(),
                    target: dep.clone(),
                });
            }
        }
        let usable = |t: &&String| {
            t.as_str() != EXECUTE_TOOL_PLAN && t.as_str() != synthesizer && tools.contains(t)
        };
        let (tool, arguments, depends_on) = if node.dependencies.is_empty() {
            match node.tool.as_ref() {
                None => {
                    problems.push(Problem::LeafWithoutTool {
                        node: node.id.clone(),
                    });
                    (None, None, Vec::new())
                }
                Some(t) if !usable(&t) => {
                    problems.push(Problem::UnknownNodeTool {
                        node: node.id.clone(),
                        tool: t.clone(),
                        suggestion: tools
                            .closest_name(t)
                            .filter(|s| *s != synthesizer && *s != EXECUTE_TOOL_PLAN)
                            .map(str::to_owned),
                    });
                    (None, None, Vec::new())
                }
                Some(t) => {
                    let args = tool_call(node, t, tools, problems);
                    (Some(t.clone()), args, Vec::new())
                }
            }
        } else if let Some(t) = node.tool.as_ref().filter(usable) {
            // A branch naming a tool: the tool answers once the children are done.
            let args = tool_call(node, t, tools, problems);
            (Some(t.clone()), args, dependencies)
        } else {
            let known: Vec<String> = dependencies;
            let mut branch = node.clone();
            branch.dependencies = known;
            (
                Some(synthesizer.to_owned()),
                Some(synthesis(&branch, &by_id)),
                Vec::new(),
            )
        };
        steps.push(DraftStep {
            position,
            id: node.id.clone(),
            tool,
            arguments,
            depends_on,
        });
    }
    DraftPlan {
        steps,
        output_steps: root.map(|r| vec![r.to_owned()]).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests;
