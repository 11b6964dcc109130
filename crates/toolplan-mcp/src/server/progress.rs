//! MCP progress notifications of a running plan: one per finished step.

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use toolplan_core::{Observer, StepFinished};

/// Sends a progress notification per finished step: `progress` is the number of steps done,
/// `total` the plan's size, the message names the step and how it ended.
pub(super) struct ProgressReporter {
    tx: std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedSender<(usize, String)>>>,
    sender: tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    done: std::sync::atomic::AtomicUsize,
}

impl ProgressReporter {
    pub(super) fn new(
        peer: Peer<RoleServer>,
        token: ProgressToken,
        total: usize,
    ) -> ProgressReporter {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, String)>();
        let sender = tokio::spawn(async move {
            while let Some((done, message)) = rx.recv().await {
                let _ = peer
                    .notify_progress(
                        ProgressNotificationParam::new(token.clone(), done as f64)
                            .with_total(total as f64)
                            .with_message(message),
                    )
                    .await;
            }
        });
        ProgressReporter {
            tx: std::sync::Mutex::new(Some(tx)),
            sender: tokio::sync::Mutex::new(Some(sender)),
            done: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Waits until every notification so far has been sent.
    pub(super) async fn flush(&self) {
        self.tx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(sender) = self.sender.lock().await.take() {
            let _ = sender.await;
        }
    }
}

impl Observer for ProgressReporter {
    fn step_finished(&self, event: &StepFinished<'_>) {
        let done = self.done.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let how = match event.error {
            None => event.status.as_str().to_owned(),
            Some(e) => format!("{}: {e}", event.status.as_str()),
        };
        if let Some(tx) = self
            .tx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
        {
            let _ = tx.send((done, format!("step {} ({}) {how}", event.id, event.tool)));
        }
    }
}
