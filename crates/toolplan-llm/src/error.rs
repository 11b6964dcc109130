//! Errors of the LLM layer.

use std::time::Duration;

/// Why a chat call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The provider answered with an HTTP error status.
    #[error("{provider} answered HTTP {status}: {body}")]
    Http {
        /// The provider.
        provider: String,
        /// The status code.
        status: u16,
        /// The response body (cut to a readable length).
        body: String,
    },
    /// The request did not reach the provider or the connection broke.
    #[error("{provider}: request failed: {message}")]
    Transport {
        /// The provider.
        provider: String,
        /// What went wrong.
        message: String,
    },
    /// The response could not be understood.
    #[error("{provider}: unexpected response: {message}")]
    Decode {
        /// The provider.
        provider: String,
        /// What was wrong with it.
        message: String,
    },
    /// The reply was cut off at the output-token limit before anything in it could be used: its JSON
    /// was incomplete and no tool call in it was written whole. The error shows how it ended;
    /// `reply` holds all of it (for a verbose view).
    #[error(
        "{provider}: the reply was cut off at the token limit ({tokens} tokens) before its JSON was complete; it ended: …{}",
        tail(reply, CUT_REPLY_TAIL_CHARS)
    )]
    CutOff {
        /// The provider.
        provider: String,
        /// The tokens it generated.
        tokens: u64,
        /// The whole reply as it was cut.
        reply: String,
    },
    /// The response body is larger than [`crate::CallPolicy::max_response_bytes`].
    #[error(
        "{provider}: the response is larger than the limit of {limit} bytes (max_response_bytes)"
    )]
    TooLarge {
        /// The provider.
        provider: String,
        /// The limit, in bytes.
        limit: usize,
    },
    /// The call took longer than its timeout.
    #[error("the model call timed out after {0:?}")]
    Timeout(Duration),
    /// The call was cancelled.
    #[error("the model call was cancelled")]
    Cancelled,
    /// The model or provider is not set up right (missing key, bad spec, missing model file).
    #[error("{0}")]
    Config(String),
    /// The request cannot be sent as it is (for example a tool result that does not say which
    /// tool call it answers).
    #[error("invalid chat request: {0}")]
    InvalidRequest(String),
    /// The local model failed.
    #[error("local model: {0}")]
    Local(String),
}

/// How much of the end of a reply that was cut off, and could not be kept, an error shows.
const CUT_REPLY_TAIL_CHARS: usize = 200;

/// The last `n` characters of `text`.
fn tail(text: &str, n: usize) -> &str {
    let count = text.chars().count();
    match text.char_indices().nth(count.saturating_sub(n)) {
        Some((i, _)) => &text[i..],
        None => text,
    }
}

impl LlmError {
    /// Whether trying again may help (rate limits, server errors, broken connections).
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Http { status, .. } => *status == 429 || *status >= 500,
            LlmError::Transport { .. } | LlmError::Timeout(_) => true,
            _ => false,
        }
    }
}
