//! Replanning that reuses results (issue 21.5): a plan after a plan that partly failed refers to
//! the earlier plan's results by id instead of calling those tools again.

use std::sync::Arc;

use serde_json::json;
use toolplan_agent::scripted::ScriptedModel;
use toolplan_llm::ToolChoice;
use toolplan_planner::BUSY_HINT;

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

#[tokio::test]
async fn a_plan_after_a_busy_tool_uses_the_lookup_the_failed_step_read() {
    // Only `w` is an output step; it fails, so the summary lists `u`, which it read, and the
    // follow-up plan uses `u` instead of looking Erin up again.
    let first = json!({"steps": [
        {"id": "u", "tool": "get_user", "arguments": {"name": "Erin"}},
        {"id": "w", "tool": "fail", "arguments": {"message": "the weather service for $ref:u.city is busy, try again"}}],
        "output_steps": ["w"]});
    let second = json!({"steps": [
        {"id": "w2", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}}]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", first)]),
        ScriptedModel::calls(&[("execute_tool_plan", second)]),
        ScriptedModel::answer("sunny"),
    ]));
    let out = agent(Arc::clone(&model), true)
        .interact("What is the weather where Erin lives?")
        .await
        .unwrap();
    let results = tool_messages(&out.messages);
    assert!(results[0].is_error, "{}", results[0].content);
    assert!(
        results[0]
            .content
            .contains("Results the failed steps used:\n- u: {\"name\":\"Erin\",\"city\":\"Cairo\""),
        "{}",
        results[0].content
    );
    // The tool asked to be tried again: the next reply must call a tool, and starts with the
    // failed step as the plan wrote it (its reference to `u` now names the earlier result); the
    // model may end the plan there.
    assert!(
        results[0].content.ends_with(BUSY_HINT),
        "{}",
        results[0].content
    );
    assert_eq!(out.record.busy_replans, 1);
    let requests = model.requests();
    assert_eq!(requests[1].tool_choice, ToolChoice::Required);
    let start = requests[1].reply_start.as_ref().expect("a reply start");
    assert!(start.may_end);
    assert_eq!(start.open_in.as_deref(), Some("steps"));
    assert_eq!(
        start.calls[0].arguments["steps"],
        json!([{"id": "w", "tool": "fail", "arguments": {"message": "the weather service for $ref:u.city is busy, try again"}}])
    );
    assert!(!results[1].is_error, "{}", results[1].content);
    assert!(
        results[1].content.contains("Cairo"),
        "{}",
        results[1].content
    );
    assert_eq!(out.record.reused_results, 1);
    assert_eq!(out.record.plan_steps, 3);
}
