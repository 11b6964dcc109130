//! The scheduler: timeouts, the plan deadline, cancellation, panics, concurrency limits, dependency-driven
//! starts versus wave barriers, observer events and the output size limit. Time-based tests run on
//! tokio's paused clock, so their times are exact.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolplan_core::{
    Engine, FnTool, Observer, Plan, PlanRun, RunConfig, RunControl, RunOutcome, Schedule,
    StepFinished, StepStarted, StepStatus, Tool, ToolContext, ToolRegistry, ToolResult,
};

mod events;
mod limits;
mod stopping;

const MS: Duration = Duration::from_millis(1);

fn ms(n: u64) -> Duration {
    MS * n as u32
}

// ---- test tools ----

/// Never returns. Remembers the cancellation tokens it was given and notices when its call is dropped.
#[derive(Default)]
struct Hang {
    tokens: Mutex<Vec<CancellationToken>>,
    calls: AtomicUsize,
    dropped: Arc<AtomicUsize>,
}

struct SetOnDrop(Arc<AtomicUsize>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[async_trait]
impl Tool for Hang {
    fn name(&self) -> &str {
        "hang"
    }
    fn description(&self) -> &str {
        "Never returns."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn call(&self, _arguments: Value, ctx: ToolContext) -> ToolResult {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.tokens.lock().unwrap().push(ctx.cancel.clone());
        let _guard = SetOnDrop(Arc::clone(&self.dropped));
        std::future::pending::<()>().await;
        Ok(Value::Null)
    }
}

/// Panics with the given message (a `String` payload) or a fixed `&str`.
fn panic_tool() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "panic",
        "Panics.",
        json!({"type": "object", "properties": {"message": {"type": "string"}}}),
        |arguments: Value, _| async move {
            match arguments["message"].as_str() {
                Some(m) => panic!("{m}"),
                None => panic!("boom"),
            }
        },
    ))
}

/// Counts calls running at once (its own and, through `global`, those of all counting tools); each call
/// sleeps `ms` (default 10) and returns its step id.
struct Counting {
    name: &'static str,
    current: AtomicUsize,
    max: AtomicUsize,
    calls: AtomicUsize,
    global: Arc<(AtomicUsize, AtomicUsize)>,
    order: Mutex<Vec<String>>,
}

impl Counting {
    fn new(name: &'static str, global: &Arc<(AtomicUsize, AtomicUsize)>) -> Arc<Self> {
        Arc::new(Self {
            name,
            current: AtomicUsize::new(0),
            max: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
            global: Arc::clone(global),
            order: Mutex::new(Vec::new()),
        })
    }
}

#[async_trait]
impl Tool for Counting {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "Counts concurrent calls."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"ms": {"type": "integer"}}})
    }
    async fn call(&self, arguments: Value, ctx: ToolContext) -> ToolResult {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.order.lock().unwrap().push(ctx.step_id.to_string());
        let now = self.current.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
        let all = self.global.0.fetch_add(1, Ordering::SeqCst) + 1;
        self.global.1.fetch_max(all, Ordering::SeqCst);
        let wait = arguments["ms"].as_u64().unwrap_or(10);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        self.current.fetch_sub(1, Ordering::SeqCst);
        self.global.0.fetch_sub(1, Ordering::SeqCst);
        Ok(Value::String(ctx.step_id.to_string()))
    }
}

/// Records every observer event as a line of text.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<String>>,
}

impl Observer for Recorder {
    fn step_started(&self, e: &StepStarted<'_>) {
        self.events.lock().unwrap().push(format!(
            "start {} #{} {} @{}ms",
            e.id,
            e.index,
            e.tool,
            e.at.as_millis()
        ));
    }
    fn step_finished(&self, e: &StepFinished<'_>) {
        self.events.lock().unwrap().push(format!(
            "finish {} #{} {} {} started={:?} @{}ms {}/{} error={:?}",
            e.id,
            e.index,
            e.tool,
            e.status.as_str(),
            e.started.map(|d| d.as_millis()),
            e.at.as_millis(),
            e.done,
            e.total,
            e.error
        ));
    }
}

// ---- helpers ----

fn registry_with(extra: Vec<Arc<dyn Tool>>) -> Arc<ToolRegistry> {
    let mut r = toolplan_demo::registry();
    r.register_all(extra).unwrap();
    Arc::new(r)
}

/// An engine over the demo tools and `extra`. The scheduler's tests give it the dependencies to
/// run by: steps on their test tools (which say nothing of their effects) are not put in written
/// order ([`WrittenOrder::Free`]; `written_order.rs` tests that rule).
fn engine_with(extra: Vec<Arc<dyn Tool>>, config: RunConfig) -> Engine {
    Engine::new(registry_with(extra))
        .with_config(config)
        .with_limits(toolplan_core::Limits {
            written_order: toolplan_core::WrittenOrder::Free,
            ..toolplan_core::Limits::default()
        })
}

fn compile(engine: &Engine, plan: Value) -> Plan {
    engine.compile_value(plan).unwrap()
}

async fn run(engine: &Engine, plan: Value) -> PlanRun {
    let plan = compile(engine, plan);
    engine.run(&plan, RunControl::default()).await
}

fn status_and_error(run: &PlanRun, id: &str) -> (StepStatus, Option<String>) {
    let s = run.step(id).unwrap();
    (s.status, s.error.clone())
}

fn sleep_step(id: &str, ms: u64) -> Value {
    json!({"id": id, "tool": "sleep", "arguments": {"ms": ms, "value": id}})
}

fn independent(tool: &str, n: usize, prefix: &str) -> Vec<Value> {
    (0..n)
        .map(|i| json!({"id": format!("{prefix}{i}"), "tool": tool}))
        .collect()
}
