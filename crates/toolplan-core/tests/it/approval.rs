//! Plans that need approval: asked once with the whole plan, run only when approved; an approver
//! that declines, never answers, or is still thinking when the run is cancelled runs nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use toolplan_core::approval::{
    Approval, ApprovalGate, ApprovalRequest, Approver, Confirm, FnApprover,
};
use toolplan_core::{
    DirectCall, Engine, FnTool, RunConfig, RunControl, RunOutcome, StepStatus, ToolAnnotations,
    ToolRegistry,
};

/// An engine with `lookup` (read-only) and `delete` (destructive), counting the deletes made.
fn engine(
    confirm: Confirm,
    approver: Arc<dyn Approver>,
    timeout: Duration,
) -> (Engine, Arc<AtomicUsize>) {
    let deleted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&deleted);
    let mut registry = ToolRegistry::new();
    registry
        .register(Arc::new(
            FnTool::new(
                "lookup",
                "Finds a file.",
                json!({"type": "object"}),
                |_, _| async { Ok(json!({"path": "/tmp/x"})) },
            )
            .with_annotations(ToolAnnotations::READ_ONLY),
        ))
        .unwrap();
    registry
        .register(Arc::new(
            FnTool::new(
                "delete",
                "Deletes a file.",
                json!({"type": "object"}),
                move |_, _| {
                    counter.fetch_add(1, Ordering::SeqCst);
                    async { Ok(json!("deleted")) }
                },
            )
            .with_annotations(ToolAnnotations {
                destructive: Some(true),
                ..Default::default()
            }),
        ))
        .unwrap();
    let config = RunConfig {
        approval: Some(ApprovalGate::new(confirm, approver).with_timeout(timeout)),
        ..RunConfig::default()
    };
    (Engine::new(Arc::new(registry)).with_config(config), deleted)
}

fn plan() -> serde_json::Value {
    json!({"steps": [
        {"id": "f", "tool": "lookup", "arguments": {"name": "x"}},
        {"id": "d", "tool": "delete", "arguments": {"path": "$ref:f.path"}}]})
}

/// An approver that records what it was asked and answers `answer`.
struct Recording {
    asked: std::sync::Mutex<Vec<ApprovalRequest>>,
    answer: Approval,
}

#[async_trait::async_trait]
impl Approver for Recording {
    async fn approve(&self, request: &ApprovalRequest) -> Approval {
        self.asked.lock().unwrap().push(request.clone());
        self.answer.clone()
    }
}

#[tokio::test]
async fn an_approved_plan_runs_after_one_question_with_the_whole_plan() {
    let approver = Arc::new(Recording {
        asked: Default::default(),
        answer: Approval::Approved,
    });
    let (engine, deleted) = engine(
        Confirm::Destructive,
        approver.clone(),
        Duration::from_secs(5),
    );
    let run = engine
        .run(
            &engine.compile_value(plan()).unwrap(),
            RunControl::default(),
        )
        .await;
    assert!(run.all_ok(), "{}", run.summary());
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
    let asked = approver.asked.lock().unwrap();
    assert_eq!(asked.len(), 1, "one question per plan");
    assert_eq!(asked[0].steps.len(), 2, "the whole plan is shown");
    assert_eq!(asked[0].steps[1].arguments, json!({"path": "$ref:f.path"}));
    assert!(asked[0].steps[1].flagged && !asked[0].steps[0].flagged);
}

#[tokio::test]
async fn a_read_only_plan_is_not_asked_about() {
    let approver = Arc::new(Recording {
        asked: Default::default(),
        answer: Approval::Declined("no".into()),
    });
    let (engine, _) = engine(
        Confirm::Destructive,
        approver.clone(),
        Duration::from_secs(5),
    );
    let plan = engine
        .compile_value(json!({"steps": [{"id": "f", "tool": "lookup", "arguments": {}}]}))
        .unwrap();
    assert!(engine.run(&plan, RunControl::default()).await.all_ok());
    assert!(approver.asked.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_declined_plan_runs_no_step_and_says_why() {
    let approver = Arc::new(FnApprover(|_| async {
        Approval::Declined("the user said no".into())
    }));
    let (engine, deleted) = engine(Confirm::Destructive, approver, Duration::from_secs(5));
    let run = engine
        .run(
            &engine.compile_value(plan()).unwrap(),
            RunControl::default(),
        )
        .await;
    assert_eq!(run.outcome, RunOutcome::Declined);
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
    assert!(run.steps.iter().all(|s| s.status == StepStatus::Skipped));
    assert_eq!(
        run.summary(),
        "Plan not run (2 steps): the plan was declined (the user said no)"
    );
    assert_eq!(run.to_json()["outcome"], json!("declined"));
}

#[tokio::test]
async fn an_approver_that_never_answers_is_a_decline_at_the_timeout() {
    // The attacker's approver: never answers.
    let approver = Arc::new(FnApprover(|_| std::future::pending::<Approval>()));
    let (engine, deleted) = engine(Confirm::All, approver, Duration::from_millis(50));
    let started = std::time::Instant::now();
    let run = tokio::time::timeout(
        Duration::from_secs(10),
        engine.run(
            &engine.compile_value(plan()).unwrap(),
            RunControl::default(),
        ),
    )
    .await
    .expect("the gate's timeout ends the wait");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(run.outcome, RunOutcome::Declined);
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
    let error = run.steps[1].error.as_deref().unwrap();
    assert!(error.contains("none came within 50ms"), "{error}");
}

#[tokio::test]
async fn a_run_cancelled_while_it_waits_for_approval_runs_nothing() {
    let approver = Arc::new(FnApprover(|_| std::future::pending::<Approval>()));
    let (engine, deleted) = engine(Confirm::Destructive, approver, Duration::from_secs(600));
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        stop.cancel();
    });
    let run = tokio::time::timeout(
        Duration::from_secs(10),
        engine.run(
            &engine.compile_value(plan()).unwrap(),
            RunControl::with_cancel(cancel),
        ),
    )
    .await
    .expect("cancellation ends the wait");
    assert_eq!(run.outcome, RunOutcome::Cancelled);
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn direct_calls_of_a_destructive_tool_need_approval_too() {
    let approver = Arc::new(FnApprover(|_| async { Approval::Declined("no".into()) }));
    let (engine, deleted) = engine(Confirm::Destructive, approver, Duration::from_secs(5));
    let outcomes = engine
        .run_calls(
            vec![DirectCall::new("c", "delete", json!({"path": "/tmp/x"}))],
            RunControl::default(),
        )
        .await;
    let step = outcomes[0].as_ref().unwrap();
    assert_eq!(step.status, StepStatus::Skipped);
    assert!(step.error.as_deref().unwrap().contains("declined"));
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
}
