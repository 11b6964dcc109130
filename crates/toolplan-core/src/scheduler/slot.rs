//! What the driver keeps per step while a run goes on: its state, how many dependencies it still
//! waits for and dependents still read it, its output and its trouble.

use std::time::Duration;

use serde_json::Value;

use crate::run::StepStatus;

/// Where a step is in its run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    Waiting,
    Queued,
    Running,
    Done,
}

/// One step's bookkeeping.
pub(super) struct Slot {
    pub(super) state: State,
    pub(super) missing: usize,
    pub(super) consumers: usize,
    pub(super) is_output: bool,
    /// Whether a step that read this output failed or was skipped: the output is then kept to the
    /// end of the run and reported.
    pub(super) used_by_failure: bool,
    pub(super) status: StepStatus,
    pub(super) output: Option<Value>,
    /// The size of `output` in bytes of JSON text, counted in the run's kept bytes while it is held.
    pub(super) size: usize,
    /// Its error and notes; boxed, as most steps have none (a run holds a slot per step, so slots
    /// stay small).
    pub(super) trouble: Option<Box<Trouble>>,
    pub(super) started: Option<Duration>,
    pub(super) finished: Duration,
}

/// What went wrong with a step.
#[derive(Default)]
pub(super) struct Trouble {
    /// Why it failed or was skipped.
    pub(super) error: Option<String>,
    /// Why references of the step's arguments found no value (inserted as `null`), added to its
    /// error if it fails.
    pub(super) note: Option<String>,
    /// Whether a reference of the step's arguments found no value (the note may be gone: it moves
    /// into the error).
    pub(super) unresolved: bool,
    /// Whether the step's tool refused its arguments ([`ToolError::InvalidArguments`]).
    ///
    /// [`ToolError::InvalidArguments`]: crate::ToolError::InvalidArguments
    pub(super) refused: bool,
}

impl Slot {
    /// A step that waits to start, its dependencies not yet counted.
    pub(super) fn waiting() -> Self {
        Self {
            state: State::Waiting,
            missing: 0,
            consumers: 0,
            is_output: false,
            used_by_failure: false,
            status: StepStatus::Skipped,
            output: None,
            size: 0,
            trouble: None,
            started: None,
            finished: Duration::ZERO,
        }
    }

    pub(super) fn error(&self) -> Option<&str> {
        self.trouble.as_ref()?.error.as_deref()
    }

    pub(super) fn set_error(&mut self, error: Option<String>) {
        match (&mut self.trouble, error) {
            (Some(t), error) => t.error = error,
            (None, None) => {}
            (None, error) => {
                self.trouble = Some(Box::new(Trouble {
                    error,
                    ..Trouble::default()
                }));
            }
        }
    }
}
