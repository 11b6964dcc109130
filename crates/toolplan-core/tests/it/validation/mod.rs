//! Plan validation: every problem is found before anything runs, and all of them are reported at once.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolplan_core::{Engine, InvalidPlan, Limits, Problem, RunControl, StepStatus, ToolRegistry};

mod agentle4j_cases;
mod extensions;
mod limits;

fn engine() -> Engine {
    Engine::new(Arc::new(toolplan_demo::registry()))
}

fn problems(plan: Value) -> Vec<Problem> {
    engine().compile_value(plan).unwrap_err().problems
}

fn messages(plan: Value) -> Vec<String> {
    problems(plan).iter().map(ToString::to_string).collect()
}

fn text_problems(text: &str) -> Vec<Problem> {
    engine().compile(text).unwrap_err().problems
}
