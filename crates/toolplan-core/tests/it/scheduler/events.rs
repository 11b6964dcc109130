//! Observer events, the output size limit, and long runs of instant steps completed inline by the driver.

use super::*;

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
        ..RunControl::default()
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

// ---- run extensions ----

/// What a run attaches reaches each of its tool calls, and nothing reaches a run that attaches
/// nothing.
#[tokio::test]
async fn tools_read_what_their_run_attached() {
    #[derive(Debug)]
    struct Caller(&'static str);
    let reader: Arc<dyn Tool> = Arc::new(FnTool::new(
        "caller",
        "Says which caller's run this is.",
        json!({"type": "object", "properties": {}}),
        |_: Value, ctx: ToolContext| async move {
            Ok(json!(
                ctx.extension
                    .as_ref()
                    .and_then(|e| e.get::<Caller>())
                    .map(|c| c.0)
            ))
        },
    ));
    let engine = engine_with(vec![reader], RunConfig::default());
    let plan = compile(
        &engine,
        json!({"steps": [{"id": "a", "tool": "caller", "arguments": {}},
                         {"id": "b", "tool": "caller", "arguments": {}}]}),
    );
    let control = RunControl {
        extension: Some(toolplan_core::RunExtension::new(Caller("python"))),
        ..RunControl::default()
    };
    let run = engine.run(&plan, control).await;
    assert_eq!(run.output("a"), Some(&json!("python")));
    assert_eq!(run.output("b"), Some(&json!("python")));
    let run = engine.run(&plan, RunControl::default()).await;
    assert_eq!(run.output("a"), Some(&Value::Null));
}
