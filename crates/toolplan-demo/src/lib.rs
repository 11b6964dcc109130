//! # toolplan-demo
//!
//! The demo tool set of toolplan (`--tools demo`): small, deterministic tools for trying plans out,
//! for examples, tests and benchmarks. None of them touches the network or the file system. Each is a
//! [`FnTool`](toolplan_core::FnTool) of toolplan-core.
//!
//! | tool | arguments | result |
//! |---|---|---|
//! | `echo` | `{text}` | the text (JSON text comes back as JSON) |
//! | `concat` | `{a, b}` | `a` followed by `b`, as text |
//! | `sleep` | `{ms, value}` | `value`, after `ms` milliseconds |
//! | `fail` | `{message?}` | always an error |
//! | `get_weather` | `{location}` | `{"temp", "condition", "city"}` from a fixed table |
//! | `get_user` | `{name}` | `{"name", "city", "team"}` from a fixed directory (data a model cannot know) |
//! | `calculator` | `{expression}` | the number |
//! | `compare_data` | `{data_a, data_b}` | which fields are equal and how the others differ |
//!
//! ## Layout
//!
//! * `text` — `echo` and `concat`.
//! * `control` — `sleep` and `fail`, for trying out timing, timeouts and error handling.
//! * `directory` — `get_weather` and `get_user` over their fixed tables.
//! * `calculator` — `calculator` (arithmetic by the exmex crate, with its own size and nesting limits).
//! * `compare` — `compare_data`.
//! * `latency` — [`tools_with_latency`]: the lookups answering after a delay, as a remote API would.
//!
//! [`tools`] lists them all and [`registry`] registers them all.
//!
//! ```
//! let registry = toolplan_demo::registry();
//! assert!(registry.contains("calculator"));
//! ```

use std::sync::Arc;

use toolplan_core::{Tool, ToolRegistry};

mod calculator;
mod compare;
mod control;
mod directory;
mod latency;
#[cfg(test)]
mod tests;
mod text;

pub use calculator::{MAX_EXPRESSION_CHARS, MAX_EXPRESSION_NESTING, calculator};
pub use compare::compare_data;
pub use control::{MAX_SLEEP_MS, fail, sleep};
pub use directory::{get_user, get_weather};
pub use latency::tools_with_latency;
pub use text::{concat, echo};

/// Every demo tool.
pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        echo(),
        concat(),
        sleep(),
        fail(),
        get_weather(),
        get_user(),
        calculator(),
        compare_data(),
    ]
}

/// A registry holding every demo tool.
pub fn registry() -> ToolRegistry {
    let mut r = ToolRegistry::new();
    for t in tools() {
        // The demo tools have distinct names and valid schemas; a failure here is a bug caught by tests.
        if let Err(e) = r.register(t) {
            debug_assert!(false, "demo tool failed to register: {e}");
        }
    }
    r
}
