//! Errors of query planning.

use toolplan_core::{InvalidPlan, RegistryError};
use toolplan_llm::LlmError;

/// Why a query plan did not give an answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// The plan was rejected before anything ran.
    #[error(transparent)]
    Invalid(#[from] InvalidPlan),
    /// The tools could not be registered together with the synthesizer.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A node failed, so the root could not be answered.
    #[error("node {node} failed: {error}")]
    NodeFailed {
        /// The first node that failed.
        node: String,
        /// Its error.
        error: String,
    },
    /// The run stopped (cancelled, or past its deadline) before the root was answered.
    #[error("the query plan stopped before node {root} was answered: {reason}")]
    Stopped {
        /// The root node.
        root: String,
        /// Why.
        reason: String,
    },
    /// A synthesizer's model call failed.
    #[error("synthesis failed: {0}")]
    Llm(#[from] LlmError),
    /// A synthesizer that needs a model has none.
    #[error("the {0} synthesizer needs a model")]
    NoModel(&'static str),
}
