//! Errors of the agent loop.

use toolplan_llm::{LlmError, Message};

use crate::record::Record;

/// Why an interaction ended without an answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The model call failed (after the provider's retries). The message includes the model error's,
    /// so it is not also given as a source (that would print it twice).
    #[error("model call failed: {error}")]
    Llm {
        /// What the model call answered.
        error: LlmError,
        /// What the interaction cost until then, the failed call not counted.
        record: Box<Record>,
    },
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

impl AgentError {
    /// The error for a failed model call, after `record`.
    pub(crate) fn model(error: LlmError, record: &Record) -> Self {
        match error {
            LlmError::Cancelled => AgentError::Cancelled,
            error => AgentError::Llm {
                error,
                record: Box::new(record.clone()),
            },
        }
    }

    /// What the interaction cost until it ended with this error, where that is known.
    pub fn record(&self) -> Option<&Record> {
        match self {
            AgentError::Llm { record, .. } | AgentError::MaxTurns { record, .. } => Some(record),
            _ => None,
        }
    }
}
