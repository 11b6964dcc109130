//! What an interaction cost: turns, model calls, tokens, tool calls, plans, time.

use std::time::Duration;

use serde::Serialize;

/// The record of one interaction.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Record {
    /// Model turns taken (one model call each).
    pub turns: usize,
    /// Model calls made.
    pub llm_calls: usize,
    /// Prompt tokens over all model calls.
    pub input_tokens: u64,
    /// Generated tokens over all model calls.
    pub output_tokens: u64,
    /// Tool calls the model made (an `execute_tool_plan` call counts once).
    pub tool_calls: usize,
    /// Plans run through `execute_tool_plan`.
    pub plans: usize,
    /// Steps run inside those plans.
    pub plan_steps: usize,
    /// Tool calls and plan steps that failed or were rejected.
    pub tool_errors: usize,
    /// Wall time of the whole interaction.
    #[serde(rename = "elapsed_ms", serialize_with = "as_ms")]
    pub elapsed: Duration,
}

fn as_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 1_000_000.0).round() / 1000.0)
}
