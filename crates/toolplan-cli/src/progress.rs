//! Live progress on a terminal: a bar of decided steps and the names of the steps running now.

use std::collections::BTreeSet;
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use toolplan_core::{Observer, StepFinished, StepStarted, StepStatus};

/// A progress bar on standard error, fed by the scheduler's observer events.
pub struct Progress {
    bar: ProgressBar,
    running: Mutex<BTreeSet<String>>,
}

impl Progress {
    /// A bar for a plan of `total` steps.
    pub fn new(total: usize) -> Self {
        let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{spinner} {elapsed_precise} [{bar:30}] {pos}/{len} {wide_msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        bar.set_style(style);
        bar.enable_steady_tick(std::time::Duration::from_millis(100));
        Self {
            bar,
            running: Mutex::new(BTreeSet::new()),
        }
    }

    fn show_running(&self, running: &BTreeSet<String>) {
        let names: Vec<&str> = running.iter().map(String::as_str).take(8).collect();
        let more = running.len().saturating_sub(names.len());
        let mut msg = format!("running: {}", names.join(", "));
        if more > 0 {
            msg.push_str(&format!(" (+{more})"));
        }
        self.bar.set_message(msg);
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Observer for Progress {
    fn step_started(&self, event: &StepStarted<'_>) {
        if let Ok(mut running) = self.running.lock() {
            running.insert(event.id.to_owned());
            self.show_running(&running);
        }
    }

    fn step_finished(&self, event: &StepFinished<'_>) {
        if let Ok(mut running) = self.running.lock() {
            running.remove(event.id);
            self.show_running(&running);
        }
        if event.status == StepStatus::Failed {
            self.bar.println(format!(
                "✗ {}: {}",
                event.id,
                event.error.unwrap_or("failed")
            ));
        }
        // A plan run while it is written grows.
        self.bar.set_length(event.total as u64);
        self.bar.set_position(event.done as u64);
    }
}
