//! Running plans: single steps, chains, independent steps, diamonds, output_steps, fail-forward, waves,
//! and the two renderings of a run (the summary for the LLM and the JSON report).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolplan_core::{Engine, PlanRun, RunControl, RunOutcome, StepStatus};

fn engine() -> Engine {
    Engine::new(Arc::new(toolplan_demo::registry()))
}

async fn run(plan: Value) -> PlanRun {
    let engine = engine();
    let plan = engine.compile_value(plan).unwrap();
    engine.run(&plan, RunControl::default()).await
}

fn statuses(run: &PlanRun) -> Vec<(&str, StepStatus)> {
    run.steps
        .iter()
        .map(|s| (s.id.as_str(), s.status))
        .collect()
}

#[tokio::test]
async fn single_step() {
    let run = run(json!({"steps": [
        {"id": "s1", "tool": "get_weather", "arguments": "{\"location\": \"Tokyo\"}"}
    ]}))
    .await;
    assert!(run.all_ok());
    assert_eq!(run.outcome, RunOutcome::Completed);
    assert_eq!(
        run.output("s1"),
        Some(&json!({"temp": 18, "condition": "sunny", "city": "Tokyo"}))
    );
    assert_eq!(run.waves, vec![vec![0]]);
    assert_eq!(run.steps[0].error, None);
    assert_eq!(run.steps[0].tool, "get_weather");
}

#[tokio::test]
async fn chain_of_two() {
    let run = run(json!({"steps": [
        {"id": "s1", "tool": "get_weather", "arguments": {"location": "Berlin"}},
        {"id": "s2", "tool": "calculator", "arguments": {"expression": "$ref:s1.temp * 3 + 1"}}
    ]}))
    .await;
    assert!(run.all_ok(), "{}", run.summary());
    assert_eq!(run.output("s2"), Some(&json!(31)));
    assert_eq!(run.waves, vec![vec![0], vec![1]]);
}

#[tokio::test]
async fn chain_of_three() {
    let run = run(json!({
        "steps": [
            {"id": "s1", "tool": "echo", "arguments": {"text": "a"}},
            {"id": "s2", "tool": "concat", "arguments": {"a": "$ref:s1", "b": "b"}},
            {"id": "s3", "tool": "concat", "arguments": {"a": "$ref:s2", "b": "c"}}
        ],
        "output_steps": ["s3"]
    }))
    .await;
    assert!(run.all_ok());
    assert_eq!(run.output("s3"), Some(&json!("abc")));
    assert_eq!(run.output("s1"), None, "not an output step");
    assert_eq!(run.waves, vec![vec![0], vec![1], vec![2]]);
}

#[tokio::test]
async fn three_independent_steps() {
    let run = run(json!({"steps": [
        {"id": "t", "tool": "get_weather", "arguments": {"location": "Tokyo"}},
        {"id": "l", "tool": "get_weather", "arguments": {"location": "London"}},
        {"id": "p", "tool": "get_weather", "arguments": {"location": "Paris"}}
    ]}))
    .await;
    assert!(run.all_ok());
    assert_eq!(run.waves, vec![vec![0, 1, 2]]);
    let temps: Vec<&Value> = ["t", "l", "p"]
        .iter()
        .map(|id| &run.output(id).unwrap()["temp"])
        .collect();
    assert_eq!(temps, [&json!(18), &json!(12), &json!(15)]);
    assert_eq!(
        run.outputs_map().keys().collect::<Vec<_>>(),
        ["t", "l", "p"]
    );
}

#[tokio::test]
async fn diamond_with_output_steps() {
    let run = run(json!({
        "steps": [
            {"id": "top", "tool": "get_weather", "arguments": {"location": "Sydney"}},
            {"id": "left", "tool": "calculator", "arguments": {"expression": "$ref:top.temp + 1"}},
            {"id": "right", "tool": "calculator", "arguments": {"expression": "$ref:top.temp * 2"}},
            {"id": "bottom", "tool": "compare_data", "arguments": {"data_a": "$ref:left", "data_b": "$ref:right"}}
        ],
        "output_steps": ["bottom"]
    }))
    .await;
    assert!(run.all_ok(), "{}", run.summary());
    assert_eq!(run.waves, vec![vec![0], vec![1, 2], vec![3]]);
    assert_eq!(
        run.outputs_map(),
        json!({"bottom": {"equal": false, "a": 25, "b": 48, "difference": -23}})
            .as_object()
            .unwrap()
            .clone()
    );
    for id in ["top", "left", "right"] {
        assert_eq!(run.output(id), None, "{id} is not an output step");
        assert_eq!(run.step(id).unwrap().status, StepStatus::Ok);
    }
    assert!(run.explicit_outputs);
    assert_eq!(run.outputs, vec![3]);
}

fn two_step_plan(output_steps: Option<Value>) -> Value {
    let mut plan = json!({"steps": [
        {"id": "a", "tool": "echo", "arguments": {"text": "A"}},
        {"id": "b", "tool": "echo", "arguments": {"text": "B"}}
    ]});
    if let Some(o) = output_steps {
        plan["output_steps"] = o;
    }
    plan
}

#[tokio::test]
async fn output_steps_filter() {
    let run = run(two_step_plan(Some(json!(["b"])))).await;
    assert_eq!(
        run.outputs_map(),
        json!({"b": "B"}).as_object().unwrap().clone()
    );
    assert_eq!(run.output("a"), None);
    assert!(run.explicit_outputs);
}

#[tokio::test]
async fn output_steps_order_is_kept_and_repeats_collapse() {
    let run = run(two_step_plan(Some(json!(["b", "a", "b"])))).await;
    assert_eq!(run.outputs, vec![1, 0]);
    assert_eq!(run.outputs_map().keys().collect::<Vec<_>>(), ["b", "a"]);
}

#[tokio::test]
async fn output_steps_null_empty_or_omitted_return_everything() {
    let everything = json!({"a": "A", "b": "B"}).as_object().unwrap().clone();
    for output_steps in [None, Some(Value::Null), Some(json!([]))] {
        let label = format!("{output_steps:?}");
        let run = run(two_step_plan(output_steps)).await;
        assert_eq!(run.outputs_map(), everything, "{label}");
        assert!(!run.explicit_outputs, "{label}");
        assert_eq!(run.outputs, vec![0, 1], "{label}");
    }
}

#[tokio::test]
async fn fail_forward() {
    let run = run(json!({"steps": [
        {"id": "s1", "tool": "fail", "arguments": {"message": "upstream exploded"}},
        {"id": "s2", "tool": "echo", "arguments": {"text": "independent"}},
        {"id": "s3", "tool": "echo", "arguments": {"text": "$ref:s1"}},
        {"id": "s4", "tool": "concat", "arguments": {"a": "$ref:s3", "b": "$ref:s2"}},
        {"id": "s5", "tool": "echo", "arguments": {"text": "$ref:s2"}}
    ]}))
    .await;
    assert_eq!(run.outcome, RunOutcome::Completed);
    assert!(!run.all_ok());
    assert_eq!(
        statuses(&run),
        [
            ("s1", StepStatus::Failed),
            ("s2", StepStatus::Ok),
            ("s3", StepStatus::Skipped),
            ("s4", StepStatus::Skipped),
            ("s5", StepStatus::Ok)
        ]
    );
    let error = |id: &str| run.step(id).unwrap().error.clone();
    assert_eq!(error("s1").as_deref(), Some("upstream exploded"));
    assert_eq!(error("s2"), None);
    assert_eq!(
        error("s3").as_deref(),
        Some("Skipped because dependency 's1' failed")
    );
    assert_eq!(
        error("s4").as_deref(),
        Some("Skipped because dependency 's3' failed")
    );
    assert_eq!(run.output("s2"), Some(&json!("independent")));
    assert_eq!(run.output("s5"), Some(&json!("independent")));
    assert_eq!(run.output("s1"), None);
    assert_eq!(run.step("s3").unwrap().started, None);
    assert_eq!(run.count(StepStatus::Failed), 1);
    assert_eq!(run.count(StepStatus::Skipped), 2);
    assert_eq!(
        run.errors_map(),
        json!({
            "s1": "upstream exploded",
            "s3": "Skipped because dependency 's1' failed",
            "s4": "Skipped because dependency 's3' failed"
        })
        .as_object()
        .unwrap()
        .clone()
    );
}

#[tokio::test]
async fn a_step_whose_tool_refused_its_arguments_is_told_from_one_whose_tool_failed() {
    let run = run(json!({"steps": [
        // A person where a city belongs, text where numbers belong: the plan's fault.
        {"id": "p", "tool": "get_weather", "arguments": {"location": "Dave"}},
        {"id": "u", "tool": "get_user", "arguments": {"name": "Erin"}},
        {"id": "c", "tool": "calculator", "arguments": {"expression": "$ref:u.city - 1"}},
        // A reference into a result that lacks the field (echo declares no output schema, so the
        // plan runs), the calculator then refusing `null`.
        {"id": "e", "tool": "echo", "arguments": {"text": "{\"name\": \"Carol\"}"}},
        {"id": "m", "tool": "calculator", "arguments": {"expression": "$ref:e.temperature - 1"}},
        // The tools' own failures.
        {"id": "a", "tool": "get_weather", "arguments": {"location": "Atlantis"}},
        {"id": "f", "tool": "fail", "arguments": {"message": "down"}}
    ]}))
    .await;
    let flags = |id: &str| {
        let s = run.step(id).unwrap();
        (s.status, s.invalid_arguments, s.unresolved_reference)
    };
    assert_eq!(flags("p"), (StepStatus::Failed, true, false));
    assert_eq!(flags("u"), (StepStatus::Ok, false, false));
    assert_eq!(flags("c"), (StepStatus::Failed, true, false));
    assert_eq!(flags("m"), (StepStatus::Failed, true, true));
    assert_eq!(flags("a"), (StepStatus::Failed, false, false));
    assert_eq!(flags("f"), (StepStatus::Failed, false, false));
    let error = run.step("c").unwrap().error.clone().unwrap();
    assert!(
        error.starts_with(
            "invalid arguments: cannot evaluate \"Cairo - 1\": 'Cairo' is not a number"
        ),
        "{error}"
    );
}

#[tokio::test]
async fn an_error_result_is_a_failure_not_data_for_dependents() {
    // agentle4j counted a tool's error value as success and passed its text on; here it fails.
    let run = run(json!({"steps": [
        {"id": "w", "tool": "get_weather", "arguments": {"location": "Atlantis"}},
        {"id": "e", "tool": "echo", "arguments": {"text": "$ref:w"}}
    ]}))
    .await;
    assert_eq!(run.step("w").unwrap().status, StepStatus::Failed);
    assert!(
        run.step("w")
            .unwrap()
            .error
            .as_deref()
            .unwrap()
            .starts_with("no weather data for 'Atlantis'")
    );
    assert_eq!(
        run.step("e").unwrap().error.as_deref(),
        Some("Skipped because dependency 'w' failed")
    );
}

#[test]
fn wave_shape_of_a_chain_of_three() {
    let plan = engine()
        .compile_value(json!({"steps": [
            {"id": "a", "tool": "echo", "arguments": {"text": "1"}},
            {"id": "b", "tool": "echo", "arguments": {"text": "$ref:a"}},
            {"id": "c", "tool": "echo", "arguments": {"text": "$ref:b"}}
        ]}))
        .unwrap();
    assert_eq!(plan.waves(), &[vec![0], vec![1], vec![2]]);
    assert_eq!(
        plan.steps().iter().map(|s| s.wave).collect::<Vec<_>>(),
        [0, 1, 2]
    );
}

#[tokio::test]
async fn wave_shape_of_a_mixed_plan() {
    let run = run(json!({"steps": [
        {"id": "a", "tool": "echo", "arguments": {"text": "1"}},
        {"id": "b", "tool": "echo", "arguments": {"text": "2"}},
        {"id": "c", "tool": "concat", "arguments": {"a": "$ref:a", "b": "$ref:b"}}
    ]}))
    .await;
    assert_eq!(run.waves, vec![vec![0, 1], vec![2]]);
    assert_eq!(run.to_json()["waves"], json!([["a", "b"], ["c"]]));
    assert_eq!(run.output("c"), Some(&json!("12")));
    assert_eq!(
        run.steps.iter().map(|s| s.wave).collect::<Vec<_>>(),
        [0, 0, 1]
    );
}

#[tokio::test]
async fn summary_of_a_successful_run() {
    let run = run(json!({
        "steps": [
            {"id": "tokyo", "tool": "get_weather", "arguments": {"location": "Tokyo"}},
            {"id": "label", "tool": "echo", "arguments": {"text": "It is $ref:tokyo.condition"}},
            {"id": "hidden", "tool": "echo", "arguments": {"text": "intermediate"}}
        ],
        "output_steps": ["tokyo", "label"]
    }))
    .await;
    assert_eq!(
        run.summary(),
        "Plan executed successfully (3 steps).\nResults:\n- tokyo: {\"temp\":18,\"condition\":\"sunny\",\"city\":\"Tokyo\"}\n- label: It is sunny"
    );
}

#[tokio::test]
async fn summary_lists_failed_and_skipped_steps() {
    let run = run(json!({"steps": [
        {"id": "s1", "tool": "fail", "arguments": {"message": "boom"}},
        {"id": "s2", "tool": "echo", "arguments": {"text": "fine"}},
        {"id": "s3", "tool": "echo", "arguments": {"text": "$ref:s1"}}
    ]}))
    .await;
    assert_eq!(
        run.summary(),
        "Plan completed with errors: 1 of 3 steps failed, 1 skipped.\nResults:\n- s2: fine\nErrors:\n- s1 (failed): boom\n- s3 (skipped): Skipped because dependency 's1' failed"
    );
}

#[tokio::test]
async fn the_results_failed_steps_read_are_kept_and_listed() {
    // A replan can use `u` instead of calling get_user again: the summary shows it, though it is
    // not an output step; `side`, read by a step that succeeded, is not kept.
    let run = run(json!({
        "steps": [
            {"id": "u", "tool": "get_user", "arguments": {"name": "Alice"}},
            {"id": "side", "tool": "echo", "arguments": {"text": "fine"}},
            {"id": "w", "tool": "fail", "arguments": {"message": "busy in $ref:u.city, try again"}},
            {"id": "n", "tool": "echo", "arguments": {"text": "label"}},
            {"id": "x", "tool": "concat", "arguments": {"a": "$ref:w", "b": "$ref:n"}},
            {"id": "y", "tool": "echo", "arguments": {"text": "$ref:side"}}
        ],
        "output_steps": ["x", "y"]
    }))
    .await;
    let kept: Vec<String> = run.failure_inputs().keys().cloned().collect();
    assert_eq!(kept, ["u", "n"]);
    assert_eq!(run.step("side").unwrap().output, None);
    assert_eq!(
        run.summary(),
        "Plan completed with errors: 1 of 6 steps failed, 1 skipped.\nResults:\n- y: fine\nErrors:\n- w (failed): busy in Tokyo, try again\n- x (skipped): Skipped because dependency 'w' failed\nResults the failed steps used:\n- u: {\"name\":\"Alice\",\"city\":\"Tokyo\",\"team\":\"research\"}\n- n: label"
    );
}

#[tokio::test]
async fn results_failed_steps_read_are_kept_within_their_own_budget() {
    // Two 600-byte results read by a step that fails, and a budget of 1,000 bytes for them: the
    // first fits, the second is let go; no step fails for the budget.
    let big = |c: char| c.to_string().repeat(598);
    let engine = engine().with_config(toolplan_core::RunConfig {
        max_failure_input_bytes: 1000,
        ..toolplan_core::RunConfig::default()
    });
    let plan = engine
        .compile_value(json!({
            "steps": [
                {"id": "a", "tool": "echo", "arguments": {"text": big('a')}},
                {"id": "b", "tool": "echo", "arguments": {"text": big('b')}},
                {"id": "x", "tool": "fail", "arguments": {"message": "$ref:a$ref:b"}}
            ],
            "output_steps": ["x"]
        }))
        .unwrap();
    let run = engine.run(&plan, RunControl::default()).await;
    assert_eq!(run.count(StepStatus::Failed), 1);
    let kept: Vec<String> = run.failure_inputs().keys().cloned().collect();
    assert_eq!(kept, ["a"]);
}

#[tokio::test]
async fn summary_when_nothing_succeeded() {
    let run = run(json!({"steps": [
        {"id": "s1", "tool": "fail", "arguments": {}}
    ]}))
    .await;
    assert_eq!(
        run.summary(),
        "Plan completed with errors: 1 of 1 steps failed, 0 skipped.\nErrors:\n- s1 (failed): this tool always fails"
    );
}

#[tokio::test(start_paused = true)]
async fn elapsed_time_is_measured() {
    let run = run(json!({"steps": [
        {"id": "a", "tool": "sleep", "arguments": {"ms": 120, "value": 1}},
        {"id": "b", "tool": "sleep", "arguments": {"ms": 80, "value": "$ref:a"}},
        {"id": "c", "tool": "sleep", "arguments": {"ms": 150}}
    ]}))
    .await;
    assert!(run.all_ok());
    assert!(run.elapsed >= Duration::ZERO);
    // Critical path a -> b: 200ms of (paused, exact) time; c runs alongside.
    assert_eq!(run.elapsed, Duration::from_millis(200));
    assert_eq!(run.to_json()["elapsed_ms"], json!(200.0));
    assert_eq!(run.output("b"), Some(&json!(1)));
    assert_eq!(run.output("c"), Some(&Value::Null));
}

#[tokio::test]
async fn elapsed_is_non_negative_and_steps_finish_after_they_start() {
    let run = run(two_step_plan(None)).await;
    assert!(run.elapsed >= Duration::ZERO);
    for s in &run.steps {
        assert!(s.started.unwrap() <= s.finished);
        assert!(s.finished <= run.elapsed);
    }
}

#[tokio::test(start_paused = true)]
async fn json_report() {
    let run = run(json!({
        "steps": [
            {"id": "s1", "tool": "fail", "arguments": {"message": "boom"}},
            {"id": "s2", "tool": "sleep", "arguments": {"ms": 30, "value": {"x": 1}}},
            {"id": "s3", "tool": "echo", "arguments": {"text": "$ref:s1"}},
            {"id": "s4", "tool": "echo", "arguments": {"text": "hidden"}}
        ],
        "output_steps": ["s2", "s3"]
    }))
    .await;
    let report = run.to_json();
    let keys: Vec<&String> = report.as_object().unwrap().keys().collect();
    for key in ["outputs", "errors", "waves", "elapsed_ms", "steps"] {
        assert!(
            keys.iter().any(|k| *k == key),
            "{key} missing from {report}"
        );
    }
    assert_eq!(report["outputs"], json!({"s2": {"x": 1}}));
    assert_eq!(
        report["errors"],
        json!({"s1": "boom", "s3": "Skipped because dependency 's1' failed"})
    );
    assert_eq!(report["waves"], json!([["s1", "s2", "s4"], ["s3"]]));
    assert_eq!(report["elapsed_ms"], json!(30.0));
    assert_eq!(report["outcome"], json!("completed"));
    let steps = &report["steps"];
    assert_eq!(
        steps.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["s1", "s2", "s3", "s4"]
    );
    assert_eq!(steps["s1"]["status"], json!("failed"));
    assert_eq!(steps["s2"]["status"], json!("ok"));
    assert_eq!(steps["s3"]["status"], json!("skipped"));
    assert_eq!(steps["s4"]["status"], json!("ok"));
    assert_eq!(
        steps["s2"],
        json!({"tool": "sleep", "status": "ok", "started_ms": 0.0, "finished_ms": 30.0, "wave": 0})
    );
    assert_eq!(steps["s3"]["started_ms"], Value::Null);
    assert_eq!(steps["s3"]["wave"], json!(1));
}

#[tokio::test]
async fn a_plan_runs_again_with_the_same_result() {
    let engine = engine();
    let plan = engine
        .compile_value(json!({"steps": [
            {"id": "a", "tool": "calculator", "arguments": {"expression": "6 * 7"}},
            {"id": "b", "tool": "echo", "arguments": {"text": "answer=$ref:a"}}
        ]}))
        .unwrap();
    let first = engine.run(&plan, RunControl::default()).await;
    let second = engine.run(&plan, RunControl::default()).await;
    assert_eq!(first.output("b"), Some(&json!("answer=42")));
    assert_eq!(first.outputs_map(), second.outputs_map());
}
