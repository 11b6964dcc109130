//! Property tests of the scheduler: random DAGs (references of every kind and `depends_on`), random
//! failures (in the tool, or resolving a path into a text output), random global and per-tool
//! concurrency limits and both schedules, checked against an independent model of what must happen;
//! and the makespan of sleeping plans against the critical path.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestCaseError;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use toolplan_core::{
    Engine, Plan, PlanRun, RunConfig, RunControl, RunOutcome, Schedule, StepStatus, Tool,
    ToolContext, ToolError, ToolRegistry, ToolResult,
};

mod dags;
mod makespan;
mod model;
mod recorder;
mod streamed;

use dags::*;
use model::*;
use recorder::*;
