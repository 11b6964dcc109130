//! The scheduler: timeouts, the plan deadline, cancellation, panics, concurrency limits, dependency-driven
//! starts versus wave barriers, observer events and the output size limit. Time-based tests run on
//! tokio's paused clock, so their times are exact.
#![allow(clippy::unwrap_used)]

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

fn engine_with(extra: Vec<Arc<dyn Tool>>, config: RunConfig) -> Engine {
    Engine::new(registry_with(extra)).with_config(config)
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

// ---- per-step timeout ----

#[tokio::test(start_paused = true)]
async fn a_hanging_tool_times_out_and_fails_only_its_step() {
    let hang = Arc::new(Hang::default());
    let engine = engine_with(
        vec![hang.clone()],
        RunConfig {
            step_timeout: Some(Duration::from_secs(1)),
            ..RunConfig::default()
        },
    );
    let run = run(
        &engine,
        json!({"steps": [
            {"id": "h", "tool": "hang", "arguments": {}},
            sleep_step("s", 10),
            {"id": "after_h", "tool": "echo", "arguments": {"text": "$ref:h"}},
            {"id": "after_s", "tool": "sleep", "arguments": {"ms": 20, "value": "$ref:s"}}
        ]}),
    )
    .await;
    assert_eq!(run.outcome, RunOutcome::Completed);
    assert_eq!(
        status_and_error(&run, "h"),
        (StepStatus::Failed, Some("timed out after 1s".into()))
    );
    assert_eq!(
        status_and_error(&run, "after_h"),
        (
            StepStatus::Skipped,
            Some("Skipped because dependency 'h' failed".into())
        )
    );
    assert_eq!(status_and_error(&run, "s"), (StepStatus::Ok, None));
    assert_eq!(run.output("after_s"), Some(&json!("s")));
    assert_eq!(run.step("after_s").unwrap().finished, ms(30));
    assert_eq!(run.step("h").unwrap().started, Some(Duration::ZERO));
    assert_eq!(run.step("h").unwrap().finished, Duration::from_secs(1));
    assert_eq!(run.elapsed, Duration::from_secs(1));
    // The tool's cancellation token fired, and its future was dropped.
    let tokens = hang.tokens.lock().unwrap();
    assert_eq!(tokens.len(), 1);
    assert!(tokens[0].is_cancelled());
    assert_eq!(hang.dropped.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn sub_second_timeouts_are_named_in_milliseconds() {
    let engine = engine_with(
        vec![],
        RunConfig {
            step_timeout: Some(ms(250)),
            ..RunConfig::default()
        },
    );
    let run = run(
        &engine,
        json!({"steps": [sleep_step("slow", 1000), sleep_step("quick", 249)]}),
    )
    .await;
    assert_eq!(
        status_and_error(&run, "slow"),
        (StepStatus::Failed, Some("timed out after 250ms".into()))
    );
    assert_eq!(run.step("slow").unwrap().finished, ms(250));
    assert_eq!(status_and_error(&run, "quick"), (StepStatus::Ok, None));
}

// ---- overall deadline ----

#[tokio::test(start_paused = true)]
async fn deadline_fails_running_steps_and_skips_the_rest() {
    let engine = engine_with(
        vec![],
        RunConfig {
            deadline: Some(ms(500)),
            ..RunConfig::default()
        },
    );
    let run = run(
        &engine,
        json!({"steps": [
            sleep_step("quick", 100),
            sleep_step("slow", 1000),
            {"id": "after_slow", "tool": "echo", "arguments": {"text": "$ref:slow"}},
            {"id": "after_quick", "tool": "sleep", "arguments": {"ms": 1000, "value": "$ref:quick"}}
        ]}),
    )
    .await;
    assert_eq!(run.outcome, RunOutcome::DeadlineExceeded);
    assert_eq!(run.elapsed, ms(500));
    assert_eq!(status_and_error(&run, "quick"), (StepStatus::Ok, None));
    let stopped = Some("Stopped while running: the plan deadline of 500ms passed".to_owned());
    assert_eq!(
        status_and_error(&run, "slow"),
        (StepStatus::Failed, stopped.clone())
    );
    assert_eq!(
        status_and_error(&run, "after_quick"),
        (StepStatus::Failed, stopped)
    );
    assert_eq!(run.step("after_quick").unwrap().started, Some(ms(100)));
    assert_eq!(
        status_and_error(&run, "after_slow"),
        (
            StepStatus::Skipped,
            Some("Not run: the plan deadline of 500ms passed".into())
        )
    );
    assert_eq!(run.step("after_slow").unwrap().started, None);
    for id in ["slow", "after_quick", "after_slow"] {
        assert_eq!(run.step(id).unwrap().finished, ms(500), "{id}");
    }
    assert!(!run.all_ok());
    assert_eq!(run.to_json()["outcome"], json!("deadline_exceeded"));
    assert!(
        run.summary()
            .starts_with("Plan stopped at its deadline: 2 steps failed, 1 not run, of 4."),
        "{}",
        run.summary()
    );
}

#[tokio::test(start_paused = true)]
async fn deadline_skips_steps_still_waiting_for_a_concurrency_slot() {
    let engine = engine_with(
        vec![],
        RunConfig {
            deadline: Some(ms(150)),
            concurrency: 1,
            ..RunConfig::default()
        },
    );
    let run = run(
        &engine,
        json!({"steps": [sleep_step("a", 100), sleep_step("b", 100), sleep_step("c", 100)]}),
    )
    .await;
    assert_eq!(run.outcome, RunOutcome::DeadlineExceeded);
    assert_eq!(status_and_error(&run, "a"), (StepStatus::Ok, None));
    assert_eq!(run.step("b").unwrap().status, StepStatus::Failed);
    assert_eq!(run.step("b").unwrap().started, Some(ms(100)));
    assert_eq!(
        status_and_error(&run, "c"),
        (
            StepStatus::Skipped,
            Some("Not run: the plan deadline of 150ms passed".into())
        )
    );
    assert_eq!(run.elapsed, ms(150));
}

#[tokio::test(start_paused = true)]
async fn a_plan_that_finishes_before_its_deadline_is_completed() {
    let engine = engine_with(
        vec![],
        RunConfig {
            deadline: Some(ms(500)),
            ..RunConfig::default()
        },
    );
    let run = run(&engine, json!({"steps": [sleep_step("a", 499)]})).await;
    assert_eq!(run.outcome, RunOutcome::Completed);
    assert!(run.all_ok());
    assert_eq!(run.elapsed, ms(499));
}

#[tokio::test(start_paused = true)]
async fn the_deadline_cancels_the_tools_token() {
    let hang = Arc::new(Hang::default());
    let engine = engine_with(
        vec![hang.clone()],
        RunConfig {
            deadline: Some(ms(50)),
            step_timeout: None,
            ..RunConfig::default()
        },
    );
    let run = run(&engine, json!({"steps": [{"id": "h", "tool": "hang"}]})).await;
    assert_eq!(run.outcome, RunOutcome::DeadlineExceeded);
    assert_eq!(run.elapsed, ms(50));
    assert!(hang.tokens.lock().unwrap()[0].is_cancelled());
}

// ---- cancellation ----

#[tokio::test(start_paused = true)]
async fn cancellation_mid_run() {
    let hang = Arc::new(Hang::default());
    let engine = engine_with(vec![hang.clone()], RunConfig::default());
    let plan = compile(
        &engine,
        json!({"steps": [
            sleep_step("done_early", 10),
            sleep_step("running", 1000),
            {"id": "h", "tool": "hang"},
            {"id": "waiting", "tool": "echo", "arguments": {"text": "$ref:running"}}
        ]}),
    );
    let cancel = CancellationToken::new();
    let canceller = {
        let cancel = cancel.clone();
        async move {
            tokio::time::sleep(ms(50)).await;
            cancel.cancel();
        }
    };
    let (run, ()) = tokio::join!(
        engine.run(&plan, RunControl::with_cancel(cancel.clone())),
        canceller
    );
    assert_eq!(run.outcome, RunOutcome::Cancelled);
    assert_eq!(run.elapsed, ms(50));
    assert_eq!(run.output("done_early"), Some(&json!("done_early")));
    let stopped = Some("Stopped while running: the plan was cancelled".to_owned());
    assert_eq!(
        status_and_error(&run, "running"),
        (StepStatus::Failed, stopped.clone())
    );
    assert_eq!(status_and_error(&run, "h"), (StepStatus::Failed, stopped));
    assert_eq!(
        status_and_error(&run, "waiting"),
        (
            StepStatus::Skipped,
            Some("Not run: the plan was cancelled".into())
        )
    );
    assert_eq!(run.to_json()["outcome"], json!("cancelled"));
    assert_eq!(
        run.summary(),
        "Plan cancelled: 2 steps failed, 1 not run, of 4.\nResults:\n- done_early: done_early\nErrors:\n- running (failed): Stopped while running: the plan was cancelled\n- h (failed): Stopped while running: the plan was cancelled\n- waiting (skipped): Not run: the plan was cancelled"
    );
    // The tool saw the cancellation, and its call was dropped.
    assert!(hang.tokens.lock().unwrap()[0].is_cancelled());
    tokio::task::yield_now().await;
    assert_eq!(hang.dropped.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_run_cancelled_before_it_starts_calls_no_tool() {
    let global = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let counting = Counting::new("count", &global);
    let engine = engine_with(vec![counting.clone()], RunConfig::default());
    let plan = compile(
        &engine,
        json!({"steps": [
            {"id": "a", "tool": "count"},
            {"id": "b", "tool": "count", "arguments": {"ms": "$ref:a"}}
        ]}),
    );
    let cancel = CancellationToken::new();
    cancel.cancel();
    let run = engine.run(&plan, RunControl::with_cancel(cancel)).await;
    tokio::task::yield_now().await;
    assert_eq!(run.outcome, RunOutcome::Cancelled);
    assert_eq!(counting.calls.load(Ordering::SeqCst), 0);
    // Nothing ran, so nothing "stopped while running": every step was not run.
    for id in ["a", "b"] {
        assert_eq!(
            status_and_error(&run, id),
            (
                StepStatus::Skipped,
                Some("Not run: the plan was cancelled".into())
            ),
            "{id}"
        );
        assert_eq!(run.step(id).unwrap().started, None, "{id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_cancelled_before_it_starts_calls_no_tool_on_a_multi_threaded_runtime() {
    // On worker threads a spawned call can start before it is aborted, so only a scheduler that
    // starts nothing once cancelled keeps this at zero.
    let global = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let counting = Counting::new("count", &global);
    let engine = engine_with(vec![counting.clone()], RunConfig::default());
    let plan = compile(&engine, json!({"steps": independent("count", 8, "s")}));
    let mut skipped = 0;
    for _ in 0..50 {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let run = engine.run(&plan, RunControl::with_cancel(cancel)).await;
        assert_eq!(run.outcome, RunOutcome::Cancelled);
        skipped += run.count(StepStatus::Skipped);
    }
    tokio::time::sleep(ms(20)).await;
    assert_eq!(
        counting.calls.load(Ordering::SeqCst),
        0,
        "tools were called although the run was cancelled before it started"
    );
    assert_eq!(skipped, 50 * 8);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_run_future_stops_the_tools() {
    let hang = Arc::new(Hang::default());
    let engine = engine_with(
        vec![hang.clone()],
        RunConfig {
            step_timeout: None,
            ..RunConfig::default()
        },
    );
    let plan = compile(
        &engine,
        json!({"steps": [{"id": "h1", "tool": "hang"}, {"id": "h2", "tool": "hang"}]}),
    );
    let gave_up = tokio::time::timeout(ms(30), engine.run(&plan, RunControl::default())).await;
    assert!(gave_up.is_err());
    tokio::time::sleep(MS).await;
    assert_eq!(hang.calls.load(Ordering::SeqCst), 2);
    assert_eq!(hang.dropped.load(Ordering::SeqCst), 2);
    assert!(hang.tokens.lock().unwrap().iter().all(|t| t.is_cancelled()));
}

// ---- panics ----

#[tokio::test]
async fn a_panicking_tool_fails_only_its_step() {
    let engine = engine_with(vec![panic_tool()], RunConfig::default());
    let run = run(
        &engine,
        json!({"steps": [
            {"id": "p", "tool": "panic"},
            {"id": "p2", "tool": "panic", "arguments": {"message": "formatted 42"}},
            {"id": "fine", "tool": "echo", "arguments": {"text": "still here"}},
            {"id": "after_p", "tool": "echo", "arguments": {"text": "$ref:p"}}
        ]}),
    )
    .await;
    assert_eq!(run.outcome, RunOutcome::Completed);
    assert_eq!(
        status_and_error(&run, "p"),
        (StepStatus::Failed, Some("the tool panicked: boom".into()))
    );
    assert_eq!(
        status_and_error(&run, "p2"),
        (
            StepStatus::Failed,
            Some("the tool panicked: formatted 42".into())
        )
    );
    assert!(
        run.step("p")
            .unwrap()
            .error
            .as_deref()
            .unwrap()
            .contains("panicked")
    );
    assert_eq!(run.output("fine"), Some(&json!("still here")));
    assert_eq!(
        status_and_error(&run, "after_p"),
        (
            StepStatus::Skipped,
            Some("Skipped because dependency 'p' failed".into())
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_tool_is_contained_on_a_multi_threaded_runtime() {
    let engine = engine_with(vec![panic_tool()], RunConfig::default());
    let run = run(
        &engine,
        json!({"steps": [
            {"id": "p", "tool": "panic"},
            {"id": "fine", "tool": "calculator", "arguments": {"expression": "1 + 1"}}
        ]}),
    )
    .await;
    assert_eq!(
        status_and_error(&run, "p"),
        (StepStatus::Failed, Some("the tool panicked: boom".into()))
    );
    assert_eq!(run.output("fine"), Some(&json!(2)));
}

// ---- concurrency limits ----

fn independent(tool: &str, n: usize, prefix: &str) -> Vec<Value> {
    (0..n)
        .map(|i| json!({"id": format!("{prefix}{i}"), "tool": tool}))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn global_concurrency_limit_is_respected() {
    let global = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let counting = Counting::new("count", &global);
    let engine = engine_with(
        vec![counting.clone()],
        RunConfig {
            concurrency: 2,
            ..RunConfig::default()
        },
    );
    let run = run(&engine, json!({"steps": independent("count", 10, "s")})).await;
    assert!(run.all_ok(), "{}", run.summary());
    assert_eq!(counting.calls.load(Ordering::SeqCst), 10);
    assert_eq!(counting.max.load(Ordering::SeqCst), 2);
    assert_eq!(counting.current.load(Ordering::SeqCst), 0);
    // Five rounds of two 10ms calls.
    assert_eq!(run.elapsed, ms(50));
    let starts: Vec<u128> = run
        .steps
        .iter()
        .map(|s| s.started.unwrap().as_millis())
        .collect();
    assert_eq!(starts, [0, 0, 10, 10, 20, 20, 30, 30, 40, 40]);
}

#[tokio::test(start_paused = true)]
async fn without_a_tight_limit_independent_steps_all_run_at_once() {
    let global = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let counting = Counting::new("count", &global);
    let engine = engine_with(vec![counting.clone()], RunConfig::default());
    let run = run(&engine, json!({"steps": independent("count", 10, "s")})).await;
    assert!(run.all_ok());
    assert_eq!(counting.max.load(Ordering::SeqCst), 10);
    assert_eq!(run.elapsed, ms(10));
}

#[tokio::test(start_paused = true)]
async fn concurrency_one_runs_steps_one_at_a_time_in_plan_order() {
    let global = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let counting = Counting::new("count", &global);
    let engine = engine_with(
        vec![counting.clone()],
        RunConfig {
            concurrency: 1,
            ..RunConfig::default()
        },
    );
    let run = run(
        &engine,
        json!({"steps": [
            {"id": "c", "tool": "count"},
            {"id": "a", "tool": "count"},
            {"id": "d", "tool": "count", "arguments": {"ms": 5}},
            {"id": "b", "tool": "count"}
        ]}),
    )
    .await;
    assert!(run.all_ok());
    assert_eq!(counting.max.load(Ordering::SeqCst), 1);
    assert_eq!(*counting.order.lock().unwrap(), ["c", "a", "d", "b"]);
    assert_eq!(run.elapsed, ms(35));
}

#[tokio::test(start_paused = true)]
async fn per_tool_concurrency_limits() {
    let global = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let limited = Counting::new("limited", &global);
    let free = Counting::new("free", &global);
    let engine = engine_with(
        vec![limited.clone(), free.clone()],
        RunConfig {
            tool_concurrency: HashMap::from([("limited".to_owned(), 1)]),
            ..RunConfig::default()
        },
    );
    let mut steps = independent("limited", 4, "l");
    steps.extend(independent("free", 4, "f"));
    let run = run(&engine, json!({ "steps": steps })).await;
    assert!(run.all_ok(), "{}", run.summary());
    assert_eq!(limited.calls.load(Ordering::SeqCst), 4);
    assert_eq!(limited.max.load(Ordering::SeqCst), 1);
    assert_eq!(free.max.load(Ordering::SeqCst), 4);
    assert_eq!(global.1.load(Ordering::SeqCst), 5);
    // The limited tool's calls run back to back; the free ones do not wait for them.
    assert_eq!(run.elapsed, ms(40));
    let starts: Vec<u128> = run
        .steps
        .iter()
        .map(|s| s.started.unwrap().as_millis())
        .collect();
    assert_eq!(starts, [0, 10, 20, 30, 0, 0, 0, 0]);
}

#[tokio::test(start_paused = true)]
async fn per_tool_and_global_limits_together() {
    let global = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let limited = Counting::new("limited", &global);
    let free = Counting::new("free", &global);
    let engine = engine_with(
        vec![limited.clone(), free.clone()],
        RunConfig {
            concurrency: 3,
            tool_concurrency: HashMap::from([("limited".to_owned(), 2)]),
            ..RunConfig::default()
        },
    );
    let mut steps = independent("limited", 6, "l");
    steps.extend(independent("free", 6, "f"));
    let run = run(&engine, json!({ "steps": steps })).await;
    assert!(run.all_ok(), "{}", run.summary());
    assert_eq!(limited.calls.load(Ordering::SeqCst), 6);
    assert_eq!(free.calls.load(Ordering::SeqCst), 6);
    assert_eq!(limited.max.load(Ordering::SeqCst), 2);
    assert_eq!(global.1.load(Ordering::SeqCst), 3);
    // 12 calls of 10ms, 3 at a time: 40ms.
    assert_eq!(run.elapsed, ms(40));
}

#[tokio::test(start_paused = true)]
async fn a_step_failing_before_its_call_does_not_strand_steps_waiting_for_the_same_tool() {
    // `bad` and `good` both wait for `src` and for the one slot of `limited`. When the slot frees, `bad`
    // fails while its arguments are resolved (a field of a text output), so the slot is free again:
    // `good` must still run.
    let global = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let limited = Counting::new("limited", &global);
    let engine = engine_with(
        vec![limited.clone()],
        RunConfig {
            tool_concurrency: HashMap::from([("limited".to_owned(), 1)]),
            ..RunConfig::default()
        },
    );
    let run = run(
        &engine,
        json!({"steps": [
            {"id": "src", "tool": "echo", "arguments": {"text": "plain text"}},
            {"id": "first", "tool": "limited", "arguments": {"ms": 10}},
            {"id": "bad", "tool": "limited", "arguments": {"ms": 10, "x": "$ref:src.field"}},
            {"id": "good", "tool": "limited", "arguments": {"ms": 10, "y": "$ref:src"}}
        ]}),
    )
    .await;
    assert_eq!(run.outcome, RunOutcome::Completed);
    assert_eq!(
        status_and_error(&run, "bad"),
        (
            StepStatus::Failed,
            Some(
                "'$ref:src.field': the output of step 'src' is text, not JSON, so it has no field 'field'"
                    .into()
            )
        )
    );
    assert_eq!(status_and_error(&run, "good"), (StepStatus::Ok, None));
    assert_eq!(run.output("good"), Some(&json!("good")));
    assert_eq!(run.step("good").unwrap().started, Some(ms(10)));
    assert_eq!(run.elapsed, ms(20));
    assert_eq!(limited.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_plan_run_against_a_registry_without_its_tool_fails_that_step() {
    let engine = engine_with(vec![], RunConfig::default());
    let plan = compile(
        &engine,
        json!({"steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}},
            {"id": "e", "tool": "echo", "arguments": {"text": "ok"}}
        ]}),
    );
    let mut other = ToolRegistry::new();
    other.register(toolplan_demo::echo()).unwrap();
    let run = Engine::new(Arc::new(other))
        .run(&plan, RunControl::default())
        .await;
    assert_eq!(run.outcome, RunOutcome::Completed);
    assert_eq!(
        status_and_error(&run, "w"),
        (
            StepStatus::Failed,
            Some("tool 'get_weather' is not in the registry this plan runs against".into())
        )
    );
    assert_eq!(run.output("e"), Some(&json!("ok")));
}

// ---- no wave barrier ----

fn barrier_plan() -> Value {
    json!({"steps": [
        sleep_step("a", 100),
        sleep_step("b", 10),
        {"id": "c", "tool": "sleep", "arguments": {"ms": 10, "value": "$ref:b"}}
    ]})
}

#[tokio::test(start_paused = true)]
async fn a_step_starts_when_its_own_dependencies_finish() {
    let engine = engine_with(vec![], RunConfig::default());
    let run = run(&engine, barrier_plan()).await;
    assert!(run.all_ok());
    assert_eq!(run.waves, vec![vec![0, 1], vec![2]]);
    let (a, c) = (run.step("a").unwrap(), run.step("c").unwrap());
    assert_eq!(a.finished, ms(100));
    assert_eq!(c.started, Some(ms(10)));
    assert_eq!(c.finished, ms(20));
    assert!(c.started.unwrap() < a.finished);
    assert_eq!(run.elapsed, ms(100));
    assert_eq!(run.output("c"), Some(&json!("b")));
}

#[tokio::test(start_paused = true)]
async fn wave_barrier_waits_for_the_whole_previous_wave() {
    let engine = engine_with(
        vec![],
        RunConfig {
            schedule: Schedule::WaveBarrier,
            ..RunConfig::default()
        },
    );
    let run = run(&engine, barrier_plan()).await;
    assert!(run.all_ok());
    let (a, c) = (run.step("a").unwrap(), run.step("c").unwrap());
    assert_eq!(a.finished, ms(100));
    assert_eq!(c.started, Some(ms(100)));
    assert_eq!(c.finished, ms(110));
    assert_eq!(run.elapsed, ms(110));
    assert_eq!(run.output("c"), Some(&json!("b")));
}

#[tokio::test(start_paused = true)]
async fn wave_barrier_with_failures_and_empty_later_waves() {
    let engine = engine_with(
        vec![],
        RunConfig {
            schedule: Schedule::WaveBarrier,
            ..RunConfig::default()
        },
    );
    let run = run(
        &engine,
        json!({"steps": [
            {"id": "f", "tool": "fail"},
            sleep_step("slow", 50),
            {"id": "x", "tool": "echo", "arguments": {"text": "$ref:f"}},
            {"id": "y", "tool": "echo", "arguments": {"text": "$ref:x"}},
            {"id": "z", "tool": "sleep", "arguments": {"ms": 5, "value": "$ref:slow"}}
        ]}),
    )
    .await;
    assert_eq!(run.outcome, RunOutcome::Completed);
    assert_eq!(run.step("x").unwrap().status, StepStatus::Skipped);
    assert_eq!(run.step("y").unwrap().status, StepStatus::Skipped);
    assert_eq!(run.step("z").unwrap().started, Some(ms(50)));
    assert_eq!(run.output("z"), Some(&json!("slow")));
    assert_eq!(run.elapsed, ms(55));
}

#[tokio::test(start_paused = true)]
async fn dependency_schedule_meets_the_critical_path() {
    let engine = engine_with(vec![], RunConfig::default());
    let plan = compile(
        &engine,
        json!({"steps": [
            sleep_step("a", 30),
            sleep_step("b", 70),
            {"id": "c", "tool": "sleep", "arguments": {"ms": 60, "value": "$ref:a"}},
            {"id": "d", "tool": "sleep", "arguments": {"ms": 10, "value": "$ref:b"}},
            {"id": "e", "tool": "sleep", "arguments": {"ms": 5, "value": ["$ref:c", "$ref:d"]}}
        ]}),
    );
    let durations = HashMap::from([("a", 30), ("b", 70), ("c", 60), ("d", 10), ("e", 5)]);
    let cost = |s: &toolplan_core::Step| ms(durations[s.id.as_str()]);
    let run = engine.run(&plan, RunControl::default()).await;
    assert!(run.all_ok());
    assert_eq!(plan.critical_path(cost), ms(95));
    assert_eq!(run.elapsed, ms(95));
    assert_eq!(run.output("e"), Some(&json!(["a", "b"])));
}

// ---- observer ----

#[tokio::test(start_paused = true)]
async fn observer_sees_every_start_and_finish() {
    let recorder = Arc::new(Recorder::default());
    let engine = engine_with(vec![], RunConfig::default());
    let plan = compile(
        &engine,
        json!({"steps": [
            sleep_step("a", 10),
            {"id": "f", "tool": "fail", "arguments": {"message": "nope"}},
            {"id": "s", "tool": "echo", "arguments": {"text": "$ref:f"}},
            {"id": "b", "tool": "sleep", "arguments": {"ms": 10, "value": "$ref:a"}}
        ]}),
    );
    let control = RunControl {
        observer: Some(recorder.clone()),
        ..RunControl::default()
    };
    let run = engine.run(&plan, control).await;
    assert_eq!(run.count(StepStatus::Skipped), 1);
    let events = recorder.events.lock().unwrap().clone();
    assert_eq!(
        events,
        [
            "start a #0 sleep @0ms",
            "start f #1 fail @0ms",
            "finish f #1 fail failed started=Some(0) @0ms 1/4 error=Some(\"nope\")",
            "finish s #2 echo skipped started=None @0ms 2/4 error=Some(\"Skipped because dependency 'f' failed\")",
            "finish a #0 sleep ok started=Some(0) @10ms 3/4 error=None",
            "start b #3 sleep @10ms",
            "finish b #3 sleep ok started=Some(10) @20ms 4/4 error=None",
        ]
    );
    // One finish per step, one start per step that was not skipped.
    for step in &run.steps {
        let starts = events
            .iter()
            .filter(|e| e.starts_with(&format!("start {} ", step.id)))
            .count();
        let finishes = events
            .iter()
            .filter(|e| e.starts_with(&format!("finish {} ", step.id)))
            .count();
        assert_eq!(finishes, 1, "{}", step.id);
        assert_eq!(
            starts,
            usize::from(step.status != StepStatus::Skipped),
            "{}",
            step.id
        );
    }
}

#[tokio::test(start_paused = true)]
async fn observer_sees_steps_stopped_by_cancellation() {
    let recorder = Arc::new(Recorder::default());
    let engine = engine_with(vec![], RunConfig::default());
    let plan = compile(
        &engine,
        json!({"steps": [
            sleep_step("long", 1000),
            {"id": "next", "tool": "echo", "arguments": {"text": "$ref:long"}}
        ]}),
    );
    let cancel = CancellationToken::new();
    let control = RunControl {
        cancel: cancel.clone(),
        observer: Some(recorder.clone()),
    };
    let stop = async {
        tokio::time::sleep(ms(20)).await;
        cancel.cancel();
    };
    let (run, ()) = tokio::join!(engine.run(&plan, control), stop);
    assert_eq!(run.outcome, RunOutcome::Cancelled);
    assert_eq!(
        *recorder.events.lock().unwrap(),
        [
            "start long #0 sleep @0ms",
            "finish long #0 sleep failed started=Some(0) @20ms 1/2 error=Some(\"Stopped while running: the plan was cancelled\")",
            "finish next #1 echo skipped started=None @20ms 2/2 error=Some(\"Not run: the plan was cancelled\")",
        ]
    );
}

// ---- output size limit ----

#[tokio::test]
async fn an_output_over_max_output_bytes_fails_its_step() {
    let engine = engine_with(
        vec![],
        RunConfig {
            max_output_bytes: 20,
            ..RunConfig::default()
        },
    );
    let run = run(
        &engine,
        json!({"steps": [
            // "\"" + 30 x + "\"" is 32 bytes of JSON text.
            {"id": "big", "tool": "echo", "arguments": {"text": "x".repeat(30)}},
            // 18 x: 20 bytes, exactly the limit.
            {"id": "edge", "tool": "echo", "arguments": {"text": "x".repeat(18)}},
            {"id": "small", "tool": "echo", "arguments": {"text": "hi"}},
            {"id": "after_big", "tool": "echo", "arguments": {"text": "$ref:big"}}
        ]}),
    )
    .await;
    assert_eq!(
        status_and_error(&run, "big"),
        (
            StepStatus::Failed,
            Some(
                "the output is 32 bytes, more than the limit of 20 bytes (max_output_bytes)".into()
            )
        )
    );
    assert_eq!(run.output("edge"), Some(&json!("x".repeat(18))));
    assert_eq!(run.output("small"), Some(&json!("hi")));
    assert_eq!(
        status_and_error(&run, "after_big"),
        (
            StepStatus::Skipped,
            Some("Skipped because dependency 'big' failed".into())
        )
    );
}

// ---- long runs of instant steps (completed inline by the driver) ----

fn instant_chain(n: usize) -> String {
    let mut steps = vec![json!({"id": "s0", "tool": "echo", "arguments": {"text": "0"}})];
    for i in 1..n {
        steps.push(json!({"id": format!("s{i}"), "tool": "calculator",
                          "arguments": {"expression": format!("$ref:s{} + 1", i - 1)}}));
    }
    json!({"steps": steps, "output_steps": [format!("s{}", n - 1)]}).to_string()
}

#[tokio::test]
async fn a_long_chain_of_instant_steps_completes_in_order() {
    let engine = Engine::new(Arc::new(toolplan_demo::registry()));
    let plan = engine.compile(&instant_chain(3000)).unwrap();
    let run = engine.run(&plan, RunControl::default()).await;
    assert!(run.all_ok(), "{}", run.summary());
    assert_eq!(run.output("s2999"), Some(&json!(2999)));
}

#[tokio::test]
async fn instant_steps_still_yield_so_cancellation_is_seen() {
    // On this single-threaded runtime the cancelling task can only run when the driver yields, which
    // it must do after at most 1024 inline completions.
    let engine = Engine::new(Arc::new(toolplan_demo::registry()));
    let plan = engine.compile(&instant_chain(5000)).unwrap();
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move { canceller.cancel() });
    let run = engine.run(&plan, RunControl::with_cancel(cancel)).await;
    assert_eq!(run.outcome, RunOutcome::Cancelled);
    let ok = run.count(StepStatus::Ok);
    assert!(
        (1..=1024).contains(&ok),
        "{ok} steps ran before the cancellation was seen"
    );
    assert_eq!(run.count(StepStatus::Skipped), 5000 - ok);
}
