//! # toolplan-core
//!
//! The engine of toolplan: an LLM emits **one plan** — a DAG of tool calls whose arguments reference
//! earlier results — and this crate validates it, runs every independent step at once, and returns only
//! the results that were asked for. It knows nothing of LLMs, HTTP or MCP: those crates build on it.
//!
//! ## Layout
//!
//! A plan goes text → [`dialect`] → [`plan`] (validated IR) → the scheduler → a [`PlanRun`].
//!
//! * [`reference`](mod@reference) — the `$ref:step.path` grammar and path lookup into a step's output.
//! * [`text_shapes`] — tool output that is text but not JSON: Python literals read as the JSON
//!   they mean, and the shapes named in errors (a table, `key: value` lines …).
//! * [`words`] — where a name stands in a model's free text as a word of its own (a plan's thought
//!   naming its tools), for the planner's check and the local sampler's hold alike.
//! * [`template`] — a step's arguments with their references found once, rendered per run.
//! * [`dialect`] — the [`Dialect`](dialect::Dialect) interface a plan format implements to produce the
//!   IR, and the native format, [`dialect::tool_plan`] (toolplan-query brings LlamaIndex query plans);
//!   [`dialect::incremental`] hands over a plan's steps one by one while its text is still arriving.
//! * [`output`](mod@output) — tools' output schemas: what a `$ref:step.path` can find, and its
//!   type, looked up before the plan runs.
//! * [`plan`] — the IR ([`Plan`], [`Step`]) and [`plan::validate`]: unknown tools and steps, cycles,
//!   schema checks of literal arguments; waves (Kahn levels).
//! * `tool` — the object-safe async [`Tool`] trait and the [`ToolRegistry`] (schemas compiled once);
//!   [`value_as_text`] and [`output_from_text`] turn JSON values into the text a model reads and a
//!   tool's text back into JSON. `fn_tool` — [`FnTool`], a tool defined by a closure.
//! * `schema_check` — [`reconcile`]: a tool schema that contradicts itself (`"type": "boolean"` with
//!   `"enum": ["True", "dontcare"]`, `"type": "dict"`) gets one consistent reading and warnings;
//!   the registry keeps that reading ([`RegisteredTool::schema`], [`RegisteredTool::warnings`]).
//! * `scheduler` — the one scheduler: dependency-driven, concurrency limits, timeouts, deadline,
//!   cancellation, fail-forward, [`Observer`] events; configured by [`RunConfig`] and [`RunControl`].
//! * `run` — the [`PlanRun`] record, its JSON report and the summary an LLM reads.
//! * [`approval`] — plans that need approval before they run ([`approval::Confirm`], an
//!   [`approval::Approver`] asked once per plan with the whole plan), set in [`RunConfig::approval`].
//! * `engine` — [`Engine`] (registry + limits + settings): compile and run plans, run direct calls.
//! * `error` and [`limits`] — problems ([`Problem`], [`InvalidPlan`]), [`ToolError`], and the
//!   [`Limits`] that bound every plan.
//!
//! The modules in `code` style are private: everything of theirs that is public is re-exported here.
//! The demo tools live in the toolplan-demo crate, and what a model reads to write a plan (the
//! `execute_tool_plan` tool, signatures, plan schemas) in toolplan-planner.
//!
//! ## Example
//!
//! ```
//! use std::sync::Arc;
//! use toolplan_core::{Engine, RunControl};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let engine = Engine::new(Arc::new(toolplan_demo::registry()));
//! let plan = engine.compile(r#"{
//!   "steps": [
//!     {"id": "tokyo",  "tool": "get_weather", "arguments": "{\"location\": \"Tokyo\"}"},
//!     {"id": "london", "tool": "get_weather", "arguments": {"location": "London"}},
//!     {"id": "diff",   "tool": "calculator",
//!      "arguments": {"expression": "$ref:tokyo.temp - $ref:london.temp"}}
//!   ],
//!   "output_steps": ["diff"]
//! }"#).expect("valid plan");
//! let run = engine.run(&plan, RunControl::default()).await;
//! assert_eq!(run.output("diff"), Some(&serde_json::json!(6)));
//! # });
//! ```

pub mod approval;
pub mod dialect;
mod engine;
mod error;
mod fn_tool;
pub mod limits;
pub mod output;
pub mod plan;
pub mod reference;
mod run;
mod scheduler;
mod schema_check;
pub mod template;
pub mod text_shapes;
mod tool;
pub mod words;

pub use engine::{DirectCall, Engine};
pub use error::{InvalidPlan, Problem, RegistryError, ToolError};
pub use fn_tool::FnTool;
pub use limits::{Limits, RepeatedCalls, WrittenOrder};
pub use plan::{EXECUTE_TOOL_PLAN, Plan, Step};
pub use run::{PlanRun, RunOutcome, StepRecord, StepStatus};
pub use scheduler::{
    Observer, PlanPiece, RunConfig, RunControl, Schedule, StepFinished, StepStarted,
};
pub use schema_check::{MAX_SCHEMA_DEPTH, Reconciled, reconcile};
pub use tool::{
    RegisteredTool, RunExtension, StreamedStart, Tool, ToolAnnotations, ToolContext, ToolRegistry,
    ToolResult, output_from_text, value_as_text,
};

/// The README's Rust examples, compiled and run as doc tests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
