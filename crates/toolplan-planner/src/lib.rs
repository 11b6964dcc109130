//! # toolplan-planner
//!
//! Everything a model reads to write a toolplan plan, in one place: the `execute_tool_plan` tool with
//! its description and schemas, the one-line tool signatures, the worked examples, the plan schemas
//! (plain, and typed by each step's tool for constrained decoding, both optionally with the plan's
//! `answer` field), and the planning modes of an agent with the instructions they add to its system
//! prompt. The engine that validates and runs the plans is `toolplan-core`; the agent loop that
//! offers them is `toolplan-agent`.
//!
//! ## Layout
//!
//! * `execute_tool_plan` — [`ExecuteToolPlan`], the engine offered to an LLM as a tool, built from the
//!   parts below.
//! * `description` — its description: the plan format, then the tools as [`ToolListing`] says, and
//!   the worked examples.
//! * `signature` — a tool as one line, `name(arg: type): what it does`, or with a line per argument
//!   that says more than its type.
//! * `schema` — the plan schemas: [`plan_schema`] as the model reads it, [`typed_plan_schema`] for
//!   constrained decoding, with the `answer` field when asked.
//! * `planning` — [`Planning`], how an agent offers planning, the instructions each mode adds, and
//!   what the model reads when a plan fails or is rejected.
//! * `self_check` — a first plan checked against its question before it runs (numbers the
//!   question gives that no step uses), and references written without their marker marked.
//! * `options` — a first plan checked for the options its question names (an enum value, "high"
//!   for `windStrength`) that no step sets ([`options_left_out`]): set where the question leaves
//!   no doubt ([`settled_options`]), sent back otherwise; steps that are another step's twin but
//!   for an option the question contradicts ("in Celsius", and the weather fetched in Celsius and
//!   again in Fahrenheit) taken out ([`drop_contradicted_twins`]); and options a lone step sets
//!   that the question contradicts ([`options_contradicted`], measured, not used).
//! * `dates` — a first plan checked for dates its question never gives ([`dates_not_given`]).
//! * `relevance` — steps of a first plan that its question does not ask for ([`unasked_steps`]).
//! * `repeats` — steps that repeat another step with additions the question does not give
//!   ([`repeats_with_additions`]), taken out ([`drop_repeats_with_additions`]).
//!
//! ## Example
//!
//! ```
//! use std::sync::Arc;
//! use toolplan_core::{Engine, Tool, ToolRegistry};
//! use toolplan_planner::{ExecuteToolPlan, ToolListing};
//!
//! let engine = Arc::new(Engine::new(Arc::new(ToolRegistry::new())));
//! let planner = ExecuteToolPlan::new(engine).listing(ToolListing::Signatures);
//! assert_eq!(planner.name(), "execute_tool_plan");
//! assert!(planner.description().starts_with("Runs tool calls as one plan."));
//! ```

mod dates;
mod description;
mod execute_tool_plan;
mod options;
mod planning;
mod relevance;
mod repeats;
mod schema;
mod self_check;
mod signature;

pub use dates::{
    MAX_CHECKED_TEXTS, MadeUpDate, calls_with_made_up_dates, dates_not_given, drop_made_up_steps,
    plan_with_made_up_dates,
};
pub use description::{
    EXAMPLE_ANSWER, Judgement, ToolListing, answer_example, copies_example_answer,
    judgement_description,
};
pub use execute_tool_plan::ExecuteToolPlan;
pub use options::{
    ContradictedOption, LeftOutOption, MAX_CHECKED_OPTIONS, MIN_OPTION_CHARS,
    calls_without_options, contradicted_twins, drop_contradicted_twins, options_contradicted,
    options_left_out, plan_without_options, set_option, settled_options,
};
pub use planning::{
    ANSWER_FAILED_HINT, ANSWER_IN_PLAN_INSTRUCTIONS, BUSY_HINT, CUT_OFF_NOTE, FIX_PLAN_HINT,
    PLAN_ONLY_INSTRUCTIONS, PLANNING_INSTRUCTIONS, Planning, REPLAN_HINT, plan_not_run,
};
pub use relevance::{
    MAX_CHECKED_STEPS, MAX_COMPARED_WORDS, UnaskedStep, final_steps, references_in, tool_text,
    unasked_plan, unasked_steps,
};
pub use repeats::{MAX_COMPARED_CALLS, drop_repeats_with_additions, repeats_with_additions};
pub use schema::{
    ANSWER_FIELD, ANSWER_MAX_CHARS, ArgumentsStyle, CONDITION_MAX_CHARS, MAX_STATED_STEPS,
    THOUGHT_FIELD, THOUGHT_MAX_CHARS, choice_answer_schema, choice_answer_shown, plan_schema,
    plan_schema_for_tools, typed_plan_schema,
};
pub use self_check::{
    MAX_CHECKED_NUMBERS, incomplete_calls, incomplete_plan, mark_bare_references, numbers_to_use,
    percentages_as_fractions, plan_arguments, plan_short_of_thought, tools_left_out,
    unused_numbers,
};
pub use signature::{documented_signature, tool_signature};
