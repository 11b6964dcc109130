//! What a real MCP server says of its tools changes how plans are checked and run (issue 21), with
//! server-everything, whose tools declare annotations and, for `get-structured-content`, an output
//! schema with `structuredContent`: references into that result are checked against its fields
//! and their types before anything runs, a tool that is neither read-only nor idempotent (`toggle-simulated-logging`)
//! keeps the order its steps were written in and is not deduplicated, and a read-only one is.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;

use serde_json::json;
use toolplan_core::{Engine, Limits, Problem, RepeatedCalls, RunControl, ToolRegistry};
use toolplan_mcp::{McpServer, connect_all};

async fn engine() -> (Vec<Arc<McpServer>>, Engine) {
    let (servers, tools) = connect_all(&[common::everything("everything")], &[])
        .await
        .unwrap();
    let mut registry = ToolRegistry::new();
    registry.register_all(tools).unwrap();
    (servers, Engine::new(Arc::new(registry)))
}

#[tokio::test(flavor = "multi_thread")]
async fn annotations_and_output_schemas_are_read() {
    let (servers, engine) = engine().await;
    let tool = |name: &str| engine.tools().get(name).unwrap().tool().clone();
    let weather = tool("get-structured-content");
    let a = weather.annotations();
    assert_eq!(
        (a.read_only, a.idempotent, a.destructive),
        (Some(true), Some(true), Some(false))
    );
    let output = weather.output_schema().unwrap();
    for field in ["temperature", "conditions", "humidity"] {
        assert!(output["properties"].get(field).is_some(), "{output}");
    }
    let toggle = tool("toggle-simulated-logging").annotations();
    assert_eq!(
        (toggle.read_only, toggle.idempotent),
        (Some(false), Some(false))
    );
    assert!(!toggle.repeat_is_harmless());
    for s in servers {
        s.close().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn references_into_a_declared_result_are_checked_before_anything_runs() {
    let (servers, engine) = engine().await;
    let plan = |path: &str| {
        json!({"steps": [
            {"id": "w", "tool": "get-structured-content", "arguments": {"location": "Chicago"}},
            {"id": "e", "tool": "echo", "arguments": {"message": format!("$ref:w.{path}")}}]})
    };
    let problems = engine
        .compile_value(plan("temprature"))
        .unwrap_err()
        .problems;
    match problems.as_slice() {
        [
            Problem::UnknownOutputField {
                suggestion, has, ..
            },
        ] => {
            assert_eq!(suggestion.as_deref(), Some("temperature"));
            assert!(has.contains("humidity"), "{has}");
        }
        other => panic!("{other:?}"),
    }
    // A number where a string is expected is a problem too.
    let problems = engine
        .compile_value(plan("temperature"))
        .unwrap_err()
        .problems;
    assert!(
        matches!(problems.as_slice(), [Problem::ReferenceTypeMismatch { expected, .. }] if expected == "a string"),
        "{problems:?}"
    );
    let compiled = engine.compile_value(plan("conditions")).unwrap();
    let run = engine.run(&compiled, RunControl::default()).await;
    assert!(run.all_ok(), "{}", run.to_json());
    // The structured result's field, not its text.
    assert_eq!(run.outputs_map()["e"], "Echo: Light rain / drizzle");
    // Inside text, the number is written out.
    let compiled = engine
        .compile_value(json!({"steps": [
            {"id": "w", "tool": "get-structured-content", "arguments": {"location": "Chicago"}},
            {"id": "e", "tool": "echo", "arguments": {"message": "It is $ref:w.temperature°C"}}]}))
        .unwrap();
    let run = engine.run(&compiled, RunControl::default()).await;
    assert_eq!(
        run.outputs_map()["e"],
        "Echo: It is 36°C",
        "{}",
        run.to_json()
    );
    for s in servers {
        s.close().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stateful_tool_keeps_its_written_order_and_its_repeats() {
    let (servers, engine) = engine().await;
    let plan = engine
        .compile_value(json!({"steps": [
            {"id": "on", "tool": "toggle-simulated-logging", "arguments": {}},
            {"id": "a", "tool": "get-structured-content", "arguments": {"location": "Chicago"}},
            {"id": "off", "tool": "toggle-simulated-logging", "arguments": {}},
            {"id": "b", "tool": "get-structured-content", "arguments": {"location": "Chicago"}}]}))
        .unwrap();
    let steps = plan.steps();
    // Toggling twice toggles twice, in the order written.
    assert_eq!(steps[2].deps, [0]);
    assert_eq!(steps[2].same_call_as, None);
    // The second read-only lookup shares the first's result.
    assert_eq!(steps[3].same_call_as, Some(1));
    assert!(steps[1].deps.is_empty());
    let run = engine.run(&plan, RunControl::default()).await;
    assert!(run.all_ok(), "{}", run.to_json());
    let out = run.outputs_map();
    assert_eq!(out["a"], out["b"]);
    let started = |id: &str| {
        run.steps
            .iter()
            .find(|s| s.id == id)
            .unwrap()
            .started
            .unwrap()
    };
    assert!(started("on") <= started("off"));

    // Where model plans are held to it, the repeated toggle is a problem in the plan.
    let strict = Engine::new(Arc::clone(engine.tools())).with_limits(Limits {
        repeated_calls: RepeatedCalls::ShareOrReject,
        ..Limits::default()
    });
    let problems = strict
        .compile_value(json!({"steps": [
            {"id": "on", "tool": "toggle-simulated-logging", "arguments": {}},
            {"id": "off", "tool": "toggle-simulated-logging", "arguments": {}}]}))
        .unwrap_err()
        .problems;
    assert!(
        matches!(problems.as_slice(), [Problem::RepeatedCall { step, first, .. }] if step == "off" && first == "on"),
        "{problems:?}"
    );
    for s in servers {
        s.close().await;
    }
}
