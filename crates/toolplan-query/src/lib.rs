//! # toolplan-query
//!
//! Query plans (the system of LlamaIndex's `QueryPlanTool`) on toolplan's one engine: a model writes a
//! DAG of sub-questions; leaves ask tools, branches combine their children's answers with an LLM, and
//! the root's answer is the plan's answer.
//!
//! ## How the parts fit
//!
//! * `dialect` — the query-plan format as a `Dialect` of toolplan-core: parsing, the one-root rule,
//!   node errors, compiling nodes into plan steps ([`QueryPlan`], [`QueryNode`]). Nothing here
//!   executes plans: [`QueryPlanner`] hands compiled plans to the core scheduler, so independent nodes
//!   run in parallel, a shared child runs once, cycles never start, and a failed child skips its
//!   parents.
//! * [`synthesize`] — the [`Synthesizer`]: `compact` (all children in one prompt; when they exceed the
//!   context budget, later chunks refine the first answer), `tree_summarize` (chunks answered in
//!   parallel, then their answers combined until one is left) and `concat` (no LLM). It is registered
//!   as an ordinary tool, [`SYNTHESIZE`], that branch steps call.
//! * [`planner`] — [`QueryPlanner`]: the user's tools plus the synthesizer in one registry, compile and
//!   run, the root's answer or the failure that stopped it, LLM usage.
//! * [`documents`] — [`DocumentTool`]: one tool per text file, answering with its best passages
//!   (what leaves ask in the examples).
//! * [`progress`] — [`NodeLog`]: every node's answer as it completes, optionally printed.
//! * [`tool`] — [`QueryPlanTool`]: query planning offered to an agent as one tool, with LlamaIndex's
//!   dynamic description (a prefix, then every tool's name and description), the plan's JSON Schema,
//!   and a verbose mode that prints each node's query and answer as it completes.
//!
//! ## Example
//!
//! ```
//! use std::sync::Arc;
//! use toolplan_core::RunControl;
//! use toolplan_query::{QueryPlanner, Synthesizer};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! // `concat` needs no model; `Synthesizer::compact(model)` answers with an LLM.
//! let planner = QueryPlanner::new(toolplan_demo::tools(), Synthesizer::concat()).expect("tools register");
//! let plan = planner.compile(r#"{"nodes": [
//!   {"id": 1, "query_str": "Tokyo",  "tool_name": "get_weather", "dependencies": []},
//!   {"id": 2, "query_str": "London", "tool_name": "get_weather", "dependencies": []},
//!   {"id": 3, "query_str": "Compare the weather", "tool_name": null, "dependencies": [1, 2]}
//! ]}"#).expect("valid plan");
//! let run = planner.run(&plan, RunControl::default()).await;
//! let answer = run.answer_text().expect("answered");
//! assert!(answer.starts_with("Query: Tokyo\nResponse: {\"temp\":18"));
//! # });
//! ```

mod dialect;
pub mod documents;
pub mod error;
pub mod planner;
pub mod progress;
pub mod synthesize;
pub mod tool;

pub use dialect::{
    QUERY_ARGUMENT_NAMES, QueryNode, QueryPlan, SYNTH_CONTEXT, SYNTH_QUERY, compile as compile_plan,
};
pub use documents::{DocumentError, DocumentTool};
pub use error::QueryError;
pub use planner::{QueryPlanner, QueryRun};
pub use progress::NodeLog;
pub use synthesize::{Child, LlmUsage, SYNTHESIZE, SynthesisMode, Synthesizer};
pub use tool::{MAX_WAITING_STARTS, QueryPlanTool};
