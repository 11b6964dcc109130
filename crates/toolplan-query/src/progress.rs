//! [`NodeLog`]: watches a query-plan run — keeps every node's answer as it completes (the run
//! itself keeps only the root's) and, when asked, prints each node's question and answer on standard
//! error. The verbose mode of [`crate::QueryPlanTool`] and `toolplan query-plan` both use it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::dialect::QueryPlan;
use futures::StreamExt;
use serde_json::Value;
use toolplan_core::dialect::incremental::ItemScanner;
use toolplan_core::limits::DEFAULT_MAX_VALUE_DEPTH;
use toolplan_core::{Limits, Observer, StepFinished, StepStatus};

/// Every node's answer, and optionally a line per node as it completes.
#[derive(Debug)]
pub struct NodeLog {
    queries: Mutex<HashMap<String, String>>,
    answers: Mutex<HashMap<String, Value>>,
    print: bool,
}

impl NodeLog {
    /// A log for `plan`; `print` prints each node as it completes.
    pub fn new(plan: &QueryPlan, print: bool) -> Self {
        Self {
            queries: Mutex::new(
                plan.nodes
                    .iter()
                    .map(|n| (n.id.clone(), n.query.clone()))
                    .collect(),
            ),
            answers: Mutex::new(HashMap::new()),
            print,
        }
    }

    /// A log for a plan still being written ([`QueryPlanner::run_streamed`](crate::QueryPlanner::run_streamed)):
    /// it learns each node's question from the text passed through [`follow`](Self::follow).
    pub fn streamed(print: bool) -> Self {
        Self {
            queries: Mutex::new(HashMap::new()),
            answers: Mutex::new(HashMap::new()),
            print,
        }
    }

    /// Passes a query plan's text through unchanged, learning each node's question as its text
    /// completes (within `limits`' plan size; text past it, or that is not JSON, teaches nothing).
    pub fn follow<S>(
        self: &Arc<Self>,
        text: S,
        limits: &Limits,
    ) -> impl futures::Stream<Item = String> + Send + use<S>
    where
        S: futures::Stream<Item = String> + Send,
    {
        let log = Arc::clone(self);
        let mut scanner =
            ItemScanner::new(&["nodes"], limits.max_plan_bytes, DEFAULT_MAX_VALUE_DEPTH);
        text.map(move |chunk| {
            if scanner.broken().is_none()
                && let Ok(items) = scanner.push(&chunk)
            {
                let mut queries = log.queries.lock().unwrap_or_else(PoisonError::into_inner);
                for item in items {
                    let id = match item.get("id") {
                        Some(Value::Number(n)) => n.to_string(),
                        Some(Value::String(s)) => s.clone(),
                        _ => continue,
                    };
                    if let Some(Value::String(query)) = item.get("query_str") {
                        queries.entry(id).or_insert_with(|| query.clone());
                    }
                }
            }
            chunk
        })
    }

    /// The answers of the nodes that succeeded so far, by node id.
    pub fn answers(&self) -> HashMap<String, Value> {
        self.answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Observer for NodeLog {
    fn step_finished(&self, event: &StepFinished<'_>) {
        if let Some(output) = event.output {
            self.answers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(event.id.to_owned(), output.clone());
        }
        if !self.print {
            return;
        }
        let query = self
            .queries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(event.id)
            .cloned()
            .unwrap_or_default();
        let outcome = match (event.status, event.output) {
            (StepStatus::Ok, Some(Value::String(s))) => s.clone(),
            (StepStatus::Ok, Some(v)) => v.to_string(),
            _ => format!(
                "{}: {}",
                event.status.as_str(),
                event.error.unwrap_or_default()
            ),
        };
        eprintln!(
            "\u{2192} node {} ({}, {:.1}s): {query}\n  {}",
            event.id,
            event.tool,
            event.at.as_secs_f64(),
            outcome.replace('\n', "\n  ")
        );
    }
}
