//! Concurrency limits (global and per tool) and when steps start: dependency-driven versus the wave barrier.

use super::*;

// ---- concurrency limits ----

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
                "'$ref:src.field': the output of step 'src' is text (10 characters), not JSON, so it has no field 'field'"
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
