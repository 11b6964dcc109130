//! # toolplan-agent
//!
//! The agent loop: a model decides, toolplan executes. An [`Agent`] holds a chat model
//! (`toolplan-llm`), instructions and tools (`toolplan-core`); [`Agent::interact`] sends the
//! conversation to the model, runs the tool calls it asks for, sends the results back, and repeats
//! until the model answers — returning the answer and a [`Record`] of turns, model calls, tokens, tool
//! calls, plans and wall time.
//!
//! Tool planning is opt-in ([`AgentBuilder::enable_tool_planning`]): the model is then offered
//! `execute_tool_plan` beside the individual tools and told when to use it, so a task of N dependent
//! tool calls costs 2 model calls instead of N + 1.
//!
//! ## Layout
//!
//! * [`agent`] — the builder and the loop.
//! * [`answer`] — the plan's `answer` field that lets a plan end the interaction
//!   ([`AgentBuilder::answer_in_plan`]).
//! * [`record`] — what an interaction cost.
//! * [`repeats`] — the calls of an interaction, so that a call repeated with the same arguments is
//!   answered from memory instead of run again.
//! * [`error`] — [`AgentError`].
//! * `scripted` (feature `test-util`) — a scripted model for tests.

pub mod agent;
pub mod answer;
pub mod error;
pub mod record;
pub mod repeats;
#[cfg(feature = "test-util")]
pub mod scripted;

pub use agent::{
    Agent, AgentBuilder, DEFAULT_MAX_RESULT_BYTES, Interaction, PLAN_ONLY_INSTRUCTIONS,
    PLANNING_INSTRUCTIONS, REPLAN_HINT,
};
pub use answer::{ANSWER_IN_PLAN_INSTRUCTIONS, ANSWER_TOOL, AnswerTool, answer_example};
pub use error::AgentError;
pub use record::Record;
pub use repeats::{REPEATED_CALL, REPEATED_CALL_HINT, REPEATED_FAILURE, REPEATED_FAILURE_HINT};
