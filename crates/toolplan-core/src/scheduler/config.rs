//! How plans run: [`RunConfig`] (concurrency, timeouts, the run budgets) and [`Schedule`] (when a
//! step may start).

use std::collections::HashMap;
use std::time::Duration;

use crate::approval::ApprovalGate;

/// When a step may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Schedule {
    /// As soon as its last dependency has finished.
    #[default]
    Dependency,
    /// Only once every step of the previous wave has finished (how wave executors run plans).
    WaveBarrier,
}

/// How plans run: limits on concurrency and time. Set once, used for many runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunConfig {
    /// Most tool calls running at once (at least 1; 1 runs steps one at a time in plan order).
    pub concurrency: usize,
    /// Most calls of one tool running at once, for the tools named here.
    pub tool_concurrency: HashMap<String, usize>,
    /// Longest time one tool call may take; it then fails with a timeout.
    pub step_timeout: Option<Duration>,
    /// Longest time the whole run may take.
    pub deadline: Option<Duration>,
    /// When steps may start.
    pub schedule: Schedule,
    /// Largest output of one step, in bytes of JSON text; a larger output fails its step.
    pub max_output_bytes: usize,
    /// Most bytes that the references of one step's arguments may insert, all together; past it the
    /// step fails before anything is copied (one output referenced thousands of times cannot fill
    /// memory).
    pub max_resolved_argument_bytes: usize,
    /// Most bytes of outputs that a run holds at once (outputs that steps still read or are
    /// running on, and output steps' results); a step whose output would go past it fails.
    pub max_kept_output_bytes: usize,
    /// Most bytes of the results that failed or skipped steps read, kept to the end of the run
    /// once no other step needs them ([`PlanRun::failure_inputs`](crate::PlanRun::failure_inputs));
    /// a result that does not fit is let go (the report then lacks it; no step fails for it).
    pub max_failure_input_bytes: usize,
    /// Deepest nesting of arrays and objects in a step's output and in its arguments once references
    /// are resolved; deeper fails the step. Bounds every recursive walk over values (copying,
    /// schema checks, serialisation, dropping).
    pub max_value_depth: usize,
    /// Longest error message kept for one step, in bytes; longer ones are cut, with a note of how
    /// much was left out.
    pub max_error_bytes: usize,
    /// Which plans need approval before they run, and who approves them (default: none).
    pub approval: Option<ApprovalGate>,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            concurrency: 64,
            tool_concurrency: HashMap::new(),
            step_timeout: Some(Duration::from_secs(300)),
            deadline: None,
            schedule: Schedule::Dependency,
            max_output_bytes: crate::limits::DEFAULT_MAX_OUTPUT_BYTES,
            max_resolved_argument_bytes: crate::limits::DEFAULT_MAX_RESOLVED_ARGUMENT_BYTES,
            max_kept_output_bytes: crate::limits::DEFAULT_MAX_KEPT_OUTPUT_BYTES,
            max_failure_input_bytes: crate::limits::DEFAULT_MAX_FAILURE_INPUT_BYTES,
            max_value_depth: crate::limits::DEFAULT_MAX_VALUE_DEPTH,
            max_error_bytes: crate::limits::DEFAULT_MAX_ERROR_BYTES,
            approval: None,
        }
    }
}
