//! What a caller gives each run and hears back from it: [`RunControl`] (cancellation, an
//! [`Observer`], an approver) and the events the observer is told, [`StepStarted`] and [`StepFinished`].

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::approval::Approver;
use crate::run::StepStatus;
use crate::tool::RunExtension;

/// A step has started.
#[derive(Debug, Clone)]
pub struct StepStarted<'a> {
    /// Index of the step in the plan.
    pub index: usize,
    /// Its id.
    pub id: &'a str,
    /// Its tool.
    pub tool: &'a str,
    /// When, from the start of the run.
    pub at: Duration,
}

/// A step has finished, failed or been skipped.
#[derive(Debug, Clone)]
pub struct StepFinished<'a> {
    /// Index of the step in the plan.
    pub index: usize,
    /// Its id.
    pub id: &'a str,
    /// Its tool.
    pub tool: &'a str,
    /// How it ended.
    pub status: StepStatus,
    /// Why it failed or was skipped.
    pub error: Option<&'a str>,
    /// What it returned (`None` unless it succeeded).
    pub output: Option<&'a Value>,
    /// When it started (`None` when skipped).
    pub started: Option<Duration>,
    /// When it ended, from the start of the run.
    pub at: Duration,
    /// Steps decided so far, this one included.
    pub done: usize,
    /// Steps in the plan.
    pub total: usize,
}

/// Watches a run: progress displays, tracing, tests. Called on the driver task, so keep it quick.
pub trait Observer: Send + Sync {
    /// A step has started.
    fn step_started(&self, _event: &StepStarted<'_>) {}
    /// A step has ended.
    fn step_finished(&self, _event: &StepFinished<'_>) {}
}

/// Per-run controls: cancellation, an observer, and who approves this run.
#[derive(Clone, Default)]
pub struct RunControl {
    /// Cancels the run when cancelled.
    pub cancel: CancellationToken,
    /// Told about every step start and end.
    pub observer: Option<Arc<dyn Observer>>,
    /// Who approves this run when it needs approval ([`RunConfig::approval`](crate::RunConfig::approval)
    /// says when), in place of the gate's approver: an MCP server asks the client that sent the
    /// plan.
    pub approver: Option<Arc<dyn Approver>>,
    /// Handed to every tool call of the run ([`ToolContext::extension`](crate::ToolContext::extension)).
    pub extension: Option<RunExtension>,
}

impl RunControl {
    /// Controls with this cancellation token, no observer and the gate's approver.
    pub fn with_cancel(cancel: CancellationToken) -> Self {
        Self {
            cancel,
            ..Self::default()
        }
    }
}
