//! Plans run while their text is still being written (issue 22): a read-only step starts as soon
//! as its text is complete, other steps wait for the whole plan, an invalid plan fails with the
//! problems of the plan read whole, and a hostile stream (endless, stalled, deep) ends in a clear
//! error within the limits.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc;
use serde_json::{Value, json};
use toolplan_core::approval::{Approval, ApprovalGate, ApprovalRequest, Approver, Confirm};
use toolplan_core::{
    Engine, FnTool, Limits, PlanPiece, Problem, RunConfig, RunControl, RunOutcome, StepStatus,
    ToolAnnotations, ToolRegistry,
};

/// `look` (read-only) and `press` (says nothing of itself), each sleeping `ms` and logging
/// `start NAME` / `end NAME`.
fn engine(config: RunConfig) -> (Engine, Arc<Mutex<Vec<String>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut registry = ToolRegistry::new();
    for (tool, annotations) in [
        ("look", ToolAnnotations::READ_ONLY),
        ("press", ToolAnnotations::default()),
    ] {
        let log = Arc::clone(&log);
        registry
            .register(Arc::new(
                FnTool::new(
                    tool,
                    "t",
                    json!({"type": "object"}),
                    move |args: Value, _| {
                        let log = Arc::clone(&log);
                        async move {
                            let name = args["name"].as_str().unwrap_or("?").to_owned();
                            log.lock().unwrap().push(format!("start {name}"));
                            let ms = args["ms"].as_u64().unwrap_or(0);
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                            log.lock().unwrap().push(format!("end {name}"));
                            Ok(json!({"name": name, "n": args["n"]}))
                        }
                    },
                )
                .with_annotations(annotations),
            ))
            .unwrap();
    }
    (Engine::new(Arc::new(registry)).with_config(config), log)
}

/// A text stream the test writes into, chunk by chunk.
fn pipe() -> (
    mpsc::UnboundedSender<String>,
    mpsc::UnboundedReceiver<String>,
) {
    mpsc::unbounded()
}

fn logged(log: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    log.lock().unwrap().clone()
}

#[tokio::test(start_paused = true)]
async fn a_read_only_step_starts_while_the_rest_of_the_plan_is_written() {
    let (engine, log) = engine(RunConfig::default());
    let (tx, text) = pipe();
    let run = tokio::spawn(async move { engine.run_streamed(text, RunControl::default()).await });
    tx.unbounded_send(
        r#"{"steps": [{"id": "a", "tool": "look", "arguments": {"name": "A", "ms": 100}}"#.into(),
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        logged(&log),
        ["start A"],
        "A runs before the plan is complete"
    );
    // The second step reads the first; the press waits for the whole plan.
    tx.unbounded_send(
        r#", {"id": "b", "tool": "look", "arguments": {"name": "B", "n": "$ref:a.name"}}"#.into(),
    )
    .unwrap();
    tx.unbounded_send(r#", {"id": "p", "tool": "press", "arguments": {"name": "P"}}"#.into())
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(logged(&log), ["start A", "end A", "start B", "end B"]);
    tx.unbounded_send("]}".into()).unwrap();
    drop(tx);
    let run = run.await.unwrap().unwrap();
    assert!(run.all_ok(), "{}", run.summary());
    assert_eq!(run.output("b").unwrap()["n"], "A");
    let step = |id: &str| run.steps.iter().find(|s| s.id == id).unwrap();
    let (a, p) = (step("a"), step("p"));
    assert!(a.started.unwrap() < p.written.unwrap());
    assert!(
        p.started.unwrap() >= Duration::from_millis(210),
        "the press waited for the end"
    );
    let report = run.to_json();
    assert!(report["steps"]["a"]["written_ms"].is_number(), "{report}");
}

#[tokio::test(start_paused = true)]
async fn an_invalid_plan_fails_with_the_problems_of_the_plan_read_whole() {
    let (engine, log) = engine(RunConfig::default());
    let text = r#"{"steps": [{"id": "a", "tool": "look", "arguments": {"name": "A", "ms": 5000}},
        {"id": "b", "tool": "nope", "arguments": {}},
        {"id": "c", "tool": "look", "arguments": {"name": "C", "n": "$ref:zz"}}]}"#;
    let whole = engine.compile(text).unwrap_err();
    let chunks: Vec<String> = text
        .as_bytes()
        .chunks(7)
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .collect();
    let stream = futures::stream::iter(chunks).then(|c| async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        c
    });
    let started = tokio::time::Instant::now();
    let streamed = engine
        .run_streamed(stream, RunControl::default())
        .await
        .unwrap_err();
    assert_eq!(streamed, whole);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "the early step was stopped"
    );
    // A ran early; nothing else did (b's problem stopped the rest).
    assert_eq!(logged(&log), ["start A"]);
}

#[tokio::test(start_paused = true)]
async fn a_plan_inside_a_tool_call_is_followed_through_the_wrapping() {
    let (engine, log) = engine(RunConfig::default());
    let (tx, text) = pipe();
    let run = tokio::spawn(async move {
        engine
            .run_streamed_at(text, &["arguments"], RunControl::default())
            .await
    });
    tx.unbounded_send(
        "<tool_call>\n{\"name\": \"execute_tool_plan\", \"arguments\": {\"steps\": [".into(),
    )
    .unwrap();
    tx.unbounded_send(r#"{"id": "a", "tool": "look", "arguments": {"name": "A"}}"#.into())
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(logged(&log), ["start A", "end A"]);
    tx.unbounded_send("], \"output_steps\": [\"a\"]}}\n</tool_call>".into())
        .unwrap();
    drop(tx);
    let run = run.await.unwrap().unwrap();
    assert_eq!(run.output("a").unwrap()["name"], "A");
}

#[tokio::test(start_paused = true)]
async fn endless_text_is_refused_at_the_plan_size_limit() {
    let (engine, log) = engine(RunConfig::default());
    let engine = engine.with_limits(Limits {
        max_plan_bytes: 4096,
        ..Limits::default()
    });
    let head = futures::stream::iter([
        r#"{"steps": [{"id": "a", "tool": "look", "arguments": {"name": "A", "pad": ""#.to_owned(),
    ]);
    let endless = head.chain(futures::stream::repeat("x".repeat(100)));
    let err = engine
        .run_streamed(endless, RunControl::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err.problems[..],
            [Problem::PlanTooLarge { limit: 4096, .. }]
        ),
        "{err}"
    );
    assert!(logged(&log).is_empty());
}

#[tokio::test(start_paused = true)]
async fn text_that_stops_coming_ends_at_the_deadline_with_the_steps_it_had() {
    let config = RunConfig {
        deadline: Some(Duration::from_secs(2)),
        ..RunConfig::default()
    };
    let (engine, log) = engine(config);
    let head = futures::stream::iter([
        r#"{"steps": [{"id": "a", "tool": "look", "arguments": {"name": "A"}}, "#.to_owned(),
    ]);
    let stalled = head.chain(futures::stream::pending());
    let run = engine
        .run_streamed(stalled, RunControl::default())
        .await
        .unwrap();
    assert_eq!(run.outcome, RunOutcome::DeadlineExceeded);
    assert_eq!(run.steps.len(), 1);
    assert_eq!(run.steps[0].status, StepStatus::Ok);
    assert_eq!(logged(&log), ["start A", "end A"]);
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_run_whose_text_is_still_coming_ends_it() {
    let (engine, _log) = engine(RunConfig::default());
    let control = RunControl::default();
    let cancel = control.cancel.clone();
    let run = tokio::spawn(async move {
        engine
            .run_streamed(futures::stream::pending::<String>(), control)
            .await
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    cancel.cancel();
    let run = run.await.unwrap().unwrap();
    assert_eq!(run.outcome, RunOutcome::Cancelled);
    assert!(run.steps.is_empty());
}

#[tokio::test(start_paused = true)]
async fn deeply_nested_text_is_refused_as_the_whole_plan_would_be() {
    let (engine, log) = engine(RunConfig::default());
    let deep = format!(
        r#"{{"steps": [{{"id": "a", "tool": "look", "arguments": {{"x": {}1{}}}}}]}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let whole = engine.compile(&deep).unwrap_err();
    let stream = futures::stream::iter(vec![deep]);
    let streamed = engine
        .run_streamed(stream, RunControl::default())
        .await
        .unwrap_err();
    assert_eq!(streamed, whole);
    assert!(logged(&log).is_empty());
}

struct Yes(Arc<Mutex<usize>>);

#[async_trait::async_trait]
impl Approver for Yes {
    async fn approve(&self, _request: &ApprovalRequest) -> Approval {
        *self.0.lock().unwrap() += 1;
        Approval::Approved
    }
}

#[tokio::test(start_paused = true)]
async fn with_an_approval_gate_nothing_starts_before_the_plan_is_approved() {
    let asked = Arc::new(Mutex::new(0));
    let config = RunConfig {
        approval: Some(ApprovalGate::new(
            Confirm::parse("destructive").unwrap(),
            Arc::new(Yes(Arc::clone(&asked))),
        )),
        ..RunConfig::default()
    };
    let (engine, log) = engine(config);
    let (tx, text) = pipe();
    let run = tokio::spawn(async move { engine.run_streamed(text, RunControl::default()).await });
    tx.unbounded_send(
        r#"{"steps": [{"id": "a", "tool": "look", "arguments": {"name": "A"}}"#.into(),
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(logged(&log).is_empty(), "nothing runs before approval");
    tx.unbounded_send(r#", {"id": "p", "tool": "press", "arguments": {"name": "P"}}]}"#.into())
        .unwrap();
    drop(tx);
    let run = run.await.unwrap().unwrap();
    assert!(run.all_ok());
    assert_eq!(*asked.lock().unwrap(), 1);
    assert_eq!(logged(&log).len(), 4);
}

/// The pieces of a plan the test writes into: text chunks, then the plan as the caller runs it.
fn pieces() -> (
    mpsc::UnboundedSender<PlanPiece>,
    mpsc::UnboundedReceiver<PlanPiece>,
) {
    mpsc::unbounded()
}

#[tokio::test(start_paused = true)]
async fn the_plan_the_caller_gives_at_the_end_runs_and_keeps_the_early_work() {
    let text = r#"{"thought": "t", "steps": [{"id": "a", "tool": "look", "arguments": {"name": "A", "ms": 100}}],
        "answer": "A is $ref:a.name"}"#;
    // The caller turns the answer field (which the engine does not know) into a last step: the
    // early step goes on, once.
    let (planner, log) = engine(RunConfig::default());
    let (tx, stream) = pieces();
    let run = tokio::spawn(async move {
        planner
            .run_streamed_pieces(stream, RunControl::default())
            .await
    });
    tx.unbounded_send(PlanPiece::Text(text.into())).unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(logged(&log), ["start A"]);
    let mut whole: Value = serde_json::from_str(text).unwrap();
    whole.as_object_mut().unwrap().remove("answer");
    whole["steps"].as_array_mut().unwrap().push(
        json!({"id": "ans", "tool": "press", "arguments": {"name": "ANS", "n": "$ref:a.name"}}),
    );
    tx.unbounded_send(PlanPiece::Whole(whole)).unwrap();
    // Nothing after the whole plan is read.
    tx.unbounded_send(PlanPiece::Text("garbage".into()))
        .unwrap();
    let run = run.await.unwrap().unwrap();
    assert!(run.all_ok(), "{}", run.summary());
    assert_eq!(run.output("ans").unwrap()["n"], "A");
    assert_eq!(
        logged(&log),
        ["start A", "end A", "start ANS", "end ANS"],
        "A ran once"
    );

    // A whole plan that changed a step written early runs from the start.
    let (planner, log) = engine(RunConfig::default());
    let (tx, stream) = pieces();
    let run = tokio::spawn(async move {
        planner
            .run_streamed_pieces(stream, RunControl::default())
            .await
    });
    tx.unbounded_send(PlanPiece::Text(text.into())).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut changed: Value = serde_json::from_str(text).unwrap();
    changed.as_object_mut().unwrap().remove("answer");
    changed["steps"][0]["arguments"]["name"] = json!("A2");
    tx.unbounded_send(PlanPiece::Whole(changed)).unwrap();
    let run = run.await.unwrap().unwrap();
    assert!(run.all_ok(), "{}", run.summary());
    assert_eq!(run.output("a").unwrap()["name"], "A2");
    assert_eq!(logged(&log), ["start A", "end A", "start A2", "end A2"]);

    // A whole plan that is not valid fails with its own problems; the early step is stopped.
    let (planner, log) = engine(RunConfig::default());
    let (tx, stream) = pieces();
    let run = tokio::spawn(async move {
        planner
            .run_streamed_pieces(stream, RunControl::default())
            .await
    });
    tx.unbounded_send(PlanPiece::Text(
        r#"{"steps": [{"id": "a", "tool": "look", "arguments": {"name": "A", "ms": 5000}}"#.into(),
    ))
    .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    tx.unbounded_send(PlanPiece::Whole(json!({"steps": [
        {"id": "a", "tool": "look", "arguments": {"name": "A", "ms": 5000}},
        {"id": "b", "tool": "nope", "arguments": {}}]})))
        .unwrap();
    let invalid = run.await.unwrap().unwrap_err();
    assert!(
        invalid
            .problems
            .iter()
            .any(|p| matches!(p, Problem::UnknownTool { .. })),
        "{invalid}"
    );
    assert_eq!(logged(&log), ["start A"], "A was stopped");
}

#[tokio::test(start_paused = true)]
async fn the_deadline_counts_from_the_plan_the_caller_gives() {
    // Written over 3 s, given whole, then 1 s of tools: within a 2 s deadline from the plan given
    // (the caller bounded the writing), as the plan run whole would be.
    let (planner, log) = engine(RunConfig {
        deadline: Some(Duration::from_secs(2)),
        ..RunConfig::default()
    });
    let (tx, stream) = pieces();
    let run = tokio::spawn(async move {
        planner
            .run_streamed_pieces(stream, RunControl::default())
            .await
    });
    let text = r#"{"steps": [{"id": "a", "tool": "look", "arguments": {"name": "A", "ms": 1000}}"#;
    tx.unbounded_send(PlanPiece::Text(text.into())).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    tx.unbounded_send(PlanPiece::Whole(json!({"steps": [
        {"id": "a", "tool": "look", "arguments": {"name": "A", "ms": 1000}},
        {"id": "b", "tool": "press", "arguments": {"name": "B", "ms": 1000}}]})))
        .unwrap();
    let run = run.await.unwrap().unwrap();
    assert_eq!(run.outcome, RunOutcome::Completed, "{}", run.summary());
    assert!(run.all_ok(), "{}", run.summary());
    assert_eq!(logged(&log), ["start A", "end A", "start B", "end B"]);
}
