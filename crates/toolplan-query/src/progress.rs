//! [`NodeLog`]: watches a query-plan run — keeps every node's answer as it completes (the run
//! itself keeps only the root's) and, when asked, prints each node's question and answer on standard
//! error. The verbose mode of [`crate::QueryPlanTool`] and `toolplan query-plan` both use it.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::dialect::QueryPlan;
use serde_json::Value;
use toolplan_core::StepStatus;
use toolplan_core::{Observer, StepFinished};

/// Every node's answer, and optionally a line per node as it completes.
#[derive(Debug)]
pub struct NodeLog {
    queries: HashMap<String, String>,
    answers: Mutex<HashMap<String, Value>>,
    print: bool,
}

impl NodeLog {
    /// A log for `plan`; `print` prints each node as it completes.
    pub fn new(plan: &QueryPlan, print: bool) -> Self {
        Self {
            queries: plan
                .nodes
                .iter()
                .map(|n| (n.id.clone(), n.query.clone()))
                .collect(),
            answers: Mutex::new(HashMap::new()),
            print,
        }
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
        let query = self.queries.get(event.id).map_or("", String::as_str);
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
