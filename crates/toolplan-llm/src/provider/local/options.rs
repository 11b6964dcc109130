//! How a local model runs ([`LocalOptions`]) and what one call cost ([`GenerationStats`]).

use std::time::Duration;

use crate::model::CallPolicy;

/// How a [`LocalModel`](super::LocalModel) runs.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalOptions {
    /// Context size in tokens (prompt and reply); capped at what the model was trained for.
    pub context_size: u32,
    /// Threads for llama.cpp; `None` is every available core.
    pub threads: Option<usize>,
    /// Tokens evaluated per batch while reading the prompt.
    pub batch_size: u32,
    /// Most tokens to generate when a request sets no `max_tokens` (default 2,048: a plan of the
    /// agent's default maximum of 24 steps, written with a thought, takes about 1,200 tokens).
    pub default_max_tokens: u32,
    /// Seed of the sampler when a request sets a temperature above zero (greedy otherwise).
    pub seed: u32,
    /// Reuse the KV cache of the previous call for the prefix its prompt shares with this one.
    pub reuse_prompt_cache: bool,
    /// Timeout of every call (`max_retries` and backoff do not apply: a local failure is not
    /// transient).
    pub policy: CallPolicy,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            context_size: 8192,
            threads: None,
            batch_size: 512,
            default_max_tokens: 2048,
            seed: 0x5eed,
            reuse_prompt_cache: true,
            policy: CallPolicy::default(),
        }
    }
}

/// Timings of one call, for reports and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GenerationStats {
    /// Tokens of the prompt.
    pub prompt_tokens: u64,
    /// Of those, tokens whose KV cache was reused from the previous call (not evaluated again).
    pub cached_tokens: u64,
    /// Time spent evaluating the prompt tokens that were not cached.
    pub prompt_time: Duration,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Time spent generating them (sampling included).
    pub generation_time: Duration,
}

impl GenerationStats {
    /// Prompt tokens evaluated per second (cached tokens not counted).
    pub fn prompt_tokens_per_second(&self) -> f64 {
        per_second(
            self.prompt_tokens.saturating_sub(self.cached_tokens),
            self.prompt_time,
        )
    }

    /// Tokens generated per second.
    pub fn generated_tokens_per_second(&self) -> f64 {
        per_second(self.generated_tokens, self.generation_time)
    }
}

fn per_second(tokens: u64, time: Duration) -> f64 {
    let secs = time.as_secs_f64();
    if secs > 0.0 {
        tokens as f64 / secs
    } else {
        0.0
    }
}
