//! Errors of the agent loop.

use toolplan_llm::{LlmError, Message};

use crate::record::Record;

/// Why an interaction ended without an answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The model call failed (after the provider's retries). The message includes the model error's,
    /// so it is not also given as a source (that would print it twice).
    #[error("model call failed: {0}")]
    Llm(LlmError),
    /// The model was still calling tools when the turn limit was reached.
    #[error("no answer after {} turns (the limit): the model kept calling tools", .record.turns)]
    MaxTurns {
        /// What was done until then.
        record: Box<Record>,
        /// The conversation until then, system prompt first: what the model kept calling.
        messages: Vec<Message>,
    },
    /// The agent was built wrong (no model, clashing tool names …).
    #[error("agent configuration: {0}")]
    Config(String),
    /// The interaction was cancelled.
    #[error("the interaction was cancelled")]
    Cancelled,
}

impl From<LlmError> for AgentError {
    fn from(e: LlmError) -> Self {
        match e {
            LlmError::Cancelled => AgentError::Cancelled,
            other => AgentError::Llm(other),
        }
    }
}
