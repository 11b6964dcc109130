//! # toolplan-agent
//!
//! The agent loop: a model decides, toolplan executes. An [`Agent`] holds a chat model
//! (`toolplan-llm`), instructions and tools (`toolplan-core`); [`Agent::interact`] sends the
//! conversation to the model, runs the tool calls it asks for, sends the results back, and repeats
//! until the model answers — returning the answer and a [`Record`] of turns, model calls, tokens, tool
//! calls, plans and wall time.
//!
//! Tool planning is opt-in ([`AgentBuilder::planning`] with a [`Planning`] mode): the model is then
//! offered `execute_tool_plan` beside the individual tools (or alone) and told when to use it, so a
//! task of N dependent tool calls costs 2 model calls instead of N + 1. What the model reads of plans
//! (the planner's description, schemas, examples and instructions) is toolplan-planner's.
//!
//! ## Layout
//!
//! * `builder` — [`AgentBuilder`]: model, instructions, tools, planning mode and limits, turned into
//!   the tool definitions and system prompt the model reads.
//! * `agent` — [`Agent`] and its loop ([`Agent::interact`]).
//! * `turn` — one turn's tool calls: plans through the planner, the other calls directly on the
//!   engine (`Engine::run_calls`), each answered with a tool-result message.
//! * `answer` — the plan's `answer` field that lets a plan end the interaction
//!   ([`Planning::OnlyWithAnswer`]): the answer step and its tool; and a plan's results written
//!   out as the answer ([`AgentBuilder::results_answer`]).
//! * `choice` — the choice answer, for a question that asks for a judgement on the results: a
//!   condition on them and a reply for each outcome, evaluated by the answer step.
//! * `compact` — the answer turn after a plan whose steps all succeeded, asked with the question and
//!   the results instead of the whole prompt again, when [`AgentBuilder::compact_answer`] says so.
//! * `record` — [`Record`], what an interaction cost.
//! * `earlier` — the results of the interaction's earlier plans, which a follow-up plan may name by
//!   id (`$ref:u.city`) instead of calling those tools again.
//! * `repeats` — the calls of an interaction, so that a call repeated with the same arguments is
//!   answered from memory instead of run again, where its tool says repeating it is harmless.
//! * `error` — [`AgentError`].
//! * `scripted` (feature `test-util`) — a scripted model for tests.

mod agent;
mod answer;
mod builder;
mod choice;
mod compact;
mod earlier;
mod error;
mod record;
mod repeats;
#[cfg(feature = "test-util")]
pub mod scripted;
mod streamed;
mod turn;

pub use agent::{Agent, Interaction, Proposal, REPEAT_TURNS_BEFORE_ANSWER};
pub use answer::ANSWER_TOOL;
pub use builder::{
    AgentBuilder, DEFAULT_MAX_PLAN_STEPS, DEFAULT_MAX_RESULT_BYTES, DEFAULT_REPAIRS,
};
pub use choice::{MAX_CONDITION_CHARS, MAX_CONDITION_DEPTH};
pub use compact::{COMPACT_SYSTEM, MORE_TOOLS};
pub use error::AgentError;
pub use record::Record;
pub use repeats::{REPEATED_CALL, REPEATED_CALL_HINT, REPEATED_FAILURE, REPEATED_FAILURE_HINT};
pub use toolplan_planner::{Planning, ToolListing};
