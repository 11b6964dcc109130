//! Steps that make the same call: shared when the tool says repeats are harmless, run each or
//! refused otherwise (`Limits::repeated_calls`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use toolplan_core::{
    Engine, FnTool, Limits, Problem, RepeatedCalls, RunControl, StepStatus, Tool, ToolAnnotations,
    ToolRegistry,
};

/// A registry of `count` (counts its calls, annotated as `annotations` say) and returns the
/// counter.
fn counting(annotations: ToolAnnotations) -> (ToolRegistry, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let tool = FnTool::new(
        "count",
        "Counts its calls.",
        json!({"type": "object"}),
        move |arguments: Value, _| {
            let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
            async move { Ok(json!({"n": n, "got": arguments})) }
        },
    )
    .with_annotations(annotations);
    let mut registry = ToolRegistry::new();
    let tool: Arc<dyn Tool> = Arc::new(tool);
    registry.register(tool).unwrap();
    (registry, calls)
}

fn engine(registry: ToolRegistry, repeated_calls: RepeatedCalls) -> Engine {
    Engine::new(Arc::new(registry)).with_limits(Limits {
        repeated_calls,
        ..Limits::default()
    })
}

/// Two copies of one call, a different call, and a step that reads the second copy.
fn plan() -> Value {
    json!({"steps": [
        {"id": "a", "tool": "count", "arguments": {"x": 1}},
        {"id": "b", "tool": "count", "arguments": {"x": 1}},
        {"id": "c", "tool": "count", "arguments": {"x": 2}},
        {"id": "d", "tool": "count", "arguments": {"from_b": "$ref:b.got.x"}},
        {"id": "e", "tool": "count", "arguments": {"from_b": "$ref:b.got.x"}}
    ]})
}

#[tokio::test]
async fn read_only_repeats_run_once_and_share_the_result() {
    let (registry, calls) = counting(ToolAnnotations::READ_ONLY);
    let engine = engine(registry, RepeatedCalls::ShareHarmless);
    let plan = engine.compile_value(plan()).unwrap();
    assert_eq!(plan.steps()[1].same_call_as, Some(0));
    assert_eq!(plan.steps()[4].same_call_as, Some(3));
    let run = engine.run(&plan, RunControl::default()).await;
    assert!(run.all_ok(), "{}", run.summary());
    // a, c and d ran; b shared a's result, e shared d's.
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(run.output("a"), run.output("b"));
    assert_eq!(run.output("d"), run.output("e"));
    assert_eq!(run.output("d").unwrap()["got"]["from_b"], 1);
    assert!(
        run.steps
            .iter()
            .all(|s| s.status == StepStatus::Ok && s.started.is_some())
    );
}

#[tokio::test]
async fn idempotent_repeats_are_shared_too() {
    let (registry, calls) = counting(ToolAnnotations {
        idempotent: Some(true),
        ..ToolAnnotations::default()
    });
    let engine = engine(registry, RepeatedCalls::ShareOrReject);
    let plan = engine.compile_value(plan()).unwrap();
    let run = engine.run(&plan, RunControl::default()).await;
    assert!(run.all_ok());
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn repeats_of_tools_that_say_nothing_run_each_by_default() {
    let (registry, calls) = counting(ToolAnnotations::default());
    let engine = engine(registry, RepeatedCalls::ShareHarmless);
    let plan = engine.compile_value(plan()).unwrap();
    assert!(plan.steps().iter().all(|s| s.same_call_as.is_none()));
    let run = engine.run(&plan, RunControl::default()).await;
    assert!(run.all_ok());
    assert_eq!(calls.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn run_each_runs_even_read_only_repeats() {
    let (registry, calls) = counting(ToolAnnotations::READ_ONLY);
    let engine = engine(registry, RepeatedCalls::RunEach);
    let plan = engine.compile_value(plan()).unwrap();
    engine.run(&plan, RunControl::default()).await;
    assert_eq!(calls.load(Ordering::SeqCst), 5);
}

#[test]
fn model_plans_that_repeat_a_stateful_call_are_refused_with_both_steps_named() {
    let (registry, _) = counting(ToolAnnotations {
        read_only: Some(false),
        ..ToolAnnotations::default()
    });
    let engine = engine(registry, RepeatedCalls::ShareOrReject);
    let invalid = engine.compile_value(plan()).unwrap_err();
    let repeats: Vec<&Problem> = invalid
        .problems
        .iter()
        .filter(|p| matches!(p, Problem::RepeatedCall { .. }))
        .collect();
    assert_eq!(repeats.len(), 2, "{invalid}");
    let text = invalid.to_string();
    assert!(
        text.contains("step 'b' makes the same call as step 'a' (count with the same arguments)"),
        "{text}"
    );
    assert!(
        text.contains("step 'e' makes the same call as step 'd'"),
        "{text}"
    );
}

#[tokio::test]
async fn a_plan_written_in_a_loop_runs_each_distinct_call_once() {
    // Two calls written thirteen times each, as a small model was seen to do.
    let (registry, calls) = counting(ToolAnnotations::READ_ONLY);
    let steps: Vec<Value> = (0..26)
        .map(|i| json!({"id": format!("s{i}"), "tool": "count", "arguments": {"city": if i % 2 == 0 { "Paris" } else { "Rome" }}}))
        .collect();
    let engine = engine(registry, RepeatedCalls::ShareOrReject);
    let plan = engine.compile_value(json!({"steps": steps})).unwrap();
    let run = engine.run(&plan, RunControl::default()).await;
    assert!(run.all_ok());
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_repeat_in_an_earlier_wave_runs_and_the_first_copy_shares() {
    // `a` waits for `z`; `b`, the same call as `a`, waits for `z` through its reference too, but
    // `c` (the same call as `w`) sits before `w` in the graph: the earlier copy in the graph runs.
    let (registry, calls) = counting(ToolAnnotations::READ_ONLY);
    let engine = engine(registry, RepeatedCalls::ShareHarmless);
    let plan = engine
        .compile_value(json!({"steps": [
            {"id": "w", "tool": "count", "arguments": {"k": 1}, "depends_on": ["z"]},
            {"id": "z", "tool": "count", "arguments": {"k": 0}},
            {"id": "c", "tool": "count", "arguments": {"k": 1}}
        ]}))
        .unwrap();
    // `c` is in wave 0 and `w` in wave 1: `w` takes `c`'s result (and still waits for `z`).
    assert_eq!(plan.steps()[0].same_call_as, Some(2));
    assert_eq!(plan.steps()[0].deps, vec![1, 2]);
    let run = engine.run(&plan, RunControl::default()).await;
    assert!(run.all_ok());
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(run.output("w"), run.output("c"));
}
