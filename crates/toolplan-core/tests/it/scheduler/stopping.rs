//! Steps that stop early: the per-step timeout, the plan deadline, cancellation, dropping the run, panics.

use super::*;

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
