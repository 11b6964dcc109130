//! Property tests of the tool-plan parser and validator (nothing panics on any input, every rejection
//! names at least one problem, the text and value entry points agree, cycles and duplicate ids are
//! reported correctly) and of `$ref` resolution (typed insertion and text interpolation).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestCaseError;
use serde_json::{Map, Value, json};
use toolplan_core::dialect::tool_plan;
use toolplan_core::reference::{self, Piece};
use toolplan_core::template::Template;
use toolplan_core::{
    Engine, FnTool, InvalidPlan, Limits, Plan, Problem, RunConfig, RunControl, RunOutcome,
    StepStatus, Tool, ToolRegistry,
};

mod cycles;
mod never_panics;
mod references;
mod strategies;

use strategies::*;

// ---------------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------------

const DEADLINE: Duration = Duration::from_millis(50);

/// `n` cases, and no regression files written next to the tests.
fn cases(n: u32) -> ProptestConfig {
    ProptestConfig {
        cases: n,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

fn demo_engine() -> Engine {
    Engine::new(Arc::new(toolplan_demo::registry())).with_config(RunConfig {
        deadline: Some(DEADLINE),
        step_timeout: Some(Duration::from_millis(40)),
        ..RunConfig::default()
    })
}
