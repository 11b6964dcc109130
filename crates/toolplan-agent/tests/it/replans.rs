//! Replanning that reuses results (issue 21.5): a plan after a plan that partly failed refers to
//! the earlier plan's results by id instead of calling those tools again.

use std::sync::Arc;

use serde_json::json;
use toolplan_agent::scripted::ScriptedModel;

use crate::support::{agent, tool_messages};

#[tokio::test]
async fn a_follow_up_plan_uses_the_earlier_plans_results_by_id() {
    let first = json!({"steps": [
        {"id": "u", "tool": "get_user", "arguments": {"name": "Erin"}},
        {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}},
        {"id": "x", "tool": "calculator", "arguments": {"expression": "$ref:w.temp +"}}]});
    // The corrected plan: only the step that failed, on the first plan's results.
    let second = json!({"steps": [
        {"id": "x", "tool": "calculator", "arguments": {"expression": "$ref:w.temp + 1"}},
        {"id": "s", "tool": "concat", "arguments": {"a": "$ref:u.city", "b": " is warm"}}]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", first)]),
        ScriptedModel::calls(&[("execute_tool_plan", second)]),
        ScriptedModel::answer("32"),
    ]));
    let out = agent(Arc::clone(&model), true)
        .interact("How warm is it where Erin lives, plus one?")
        .await
        .unwrap();
    let results = tool_messages(&out.messages);
    assert!(results[0].is_error, "{}", results[0].content);
    assert!(
        results[0].content.contains("$ref:<id>"),
        "{}",
        results[0].content
    );
    assert!(!results[1].is_error, "{}", results[1].content);
    assert!(
        results[1].content.contains("- x: 32"),
        "{}",
        results[1].content
    );
    assert!(
        results[1].content.contains("- s: Cairo is warm"),
        "{}",
        results[1].content
    );
    assert_eq!(out.record.reused_results, 2);
    // Five steps ran in all: three in the first plan, two in the second; no lookup again.
    assert_eq!(out.record.plan_steps, 5);
}
