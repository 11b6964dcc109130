//! Errors the model can act on: failed steps, plans to fix, unknown tools and bad arguments, and
//! results too large for its context.

use std::sync::Arc;

use serde_json::json;
use toolplan_agent::scripted::ScriptedModel;
use toolplan_agent::{Agent, Planning};
use toolplan_demo as demo;
use toolplan_llm::ToolChoice;

use crate::support::{agent, tool_messages};

#[tokio::test]
async fn fail_forward_errors_reach_the_model() {
    let plan = json!({"steps": [
        {"id": "s1", "tool": "fail", "arguments": {"message": "upstream broke"}},
        {"id": "s2", "tool": "get_weather", "arguments": {"location": "Paris"}},
        {"id": "s3", "tool": "echo", "arguments": {"text": "$ref:s1"}}
    ], "output_steps": ["s2", "s3"]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", plan)]),
        ScriptedModel::answer("Paris is cloudy; the other source failed."),
    ]));
    let out = agent(Arc::clone(&model), true)
        .interact("weather?")
        .await
        .unwrap();
    let result = tool_messages(&out.messages)[0];
    assert!(result.is_error);
    assert!(
        result
            .content
            .starts_with("Plan completed with errors: 1 of 3 steps failed, 1 skipped."),
        "{}",
        result.content
    );
    assert!(result.content.contains("- s1 (failed): upstream broke"));
    assert!(
        result
            .content
            .contains("- s3 (skipped): Skipped because dependency 's1' failed")
    );
    assert!(result.content.contains("\"city\":\"Paris\""));
    // The model is told it may plan again.
    assert!(result.content.ends_with(toolplan_planner::REPLAN_HINT));
    assert_eq!(out.record.tool_errors, 2);
}

#[tokio::test]
async fn a_plan_that_failed_can_be_planned_again() {
    // A chain that skipped a lookup: the calculator gets a city, not a temperature.
    let wrong = json!({"steps": [
        {"id": "u", "tool": "get_user", "arguments": {"name": "Frank"}},
        {"id": "f", "tool": "calculator", "arguments": {"expression": "$ref:u.city * 9 / 5 + 32"}}
    ], "output_steps": ["f"]});
    let fixed = json!({"steps": [
        {"id": "u", "tool": "get_user", "arguments": {"name": "Frank"}},
        {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}},
        {"id": "f", "tool": "calculator", "arguments": {"expression": "$ref:w.temp * 9 / 5 + 32"}}
    ], "output_steps": ["f"]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", wrong)]),
        ScriptedModel::calls(&[("execute_tool_plan", fixed)]),
        ScriptedModel::answer("75.2 °F"),
    ]));
    let out = agent(Arc::clone(&model), true)
        .interact("Fahrenheit where Frank lives?")
        .await
        .unwrap();
    let results = tool_messages(&out.messages);
    assert!(results[0].is_error);
    assert!(
        results[0]
            .content
            .contains("cannot evaluate \"Sydney * 9 / 5 + 32\""),
        "{}",
        results[0].content
    );
    assert!(!results[1].is_error);
    assert_eq!(
        results[1].content,
        "Plan executed successfully (3 steps).\nResults:\n- f: 75.2"
    );
    assert_eq!(
        (
            out.record.plans,
            out.record.llm_calls,
            out.record.plan_steps
        ),
        (2, 3, 5)
    );
}

#[tokio::test]
async fn an_invalid_plan_comes_back_as_an_error_the_model_can_fix() {
    let bad = json!({"steps": [
        {"id": "a", "tool": "get_wether", "arguments": {"location": "Tokyo"}},
        {"id": "b", "tool": "echo", "arguments": {"text": "$ref:c"}}
    ]});
    let good =
        json!({"steps": [{"id": "a", "tool": "get_weather", "arguments": {"location": "Tokyo"}}]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", bad)]),
        ScriptedModel::calls(&[("execute_tool_plan", good)]),
        ScriptedModel::answer("18 degrees"),
    ]));
    let out = agent(Arc::clone(&model), true)
        .interact("Tokyo?")
        .await
        .unwrap();
    assert_eq!(out.answer, "18 degrees");
    let results = tool_messages(&out.messages);
    assert!(results[0].is_error);
    for needle in [
        "the plan was not run",
        "Unknown tool 'get_wether' in step 'a' (did you mean 'get_weather'?)",
        "step 'b' references unknown step 'c'",
        "Fix the plan",
    ] {
        assert!(
            results[0].content.contains(needle),
            "{needle:?} in {}",
            results[0].content
        );
    }
    assert!(!results[1].is_error);
    assert_eq!(out.record.plans, 2);
    // The fix was asked for once: the reply after the rejection had to call a tool.
    assert_eq!((out.record.repairs, out.record.repaired), (1, 1));
    let requests = model.requests();
    assert_eq!(requests[0].tool_choice, ToolChoice::Auto);
    assert_eq!(requests[1].tool_choice, ToolChoice::Required);
    assert_eq!(requests[2].tool_choice, ToolChoice::Auto);
}

#[tokio::test]
async fn a_rejected_plan_is_repaired_once_then_the_model_decides() {
    let bad = || json!({"steps": [{"id": "a", "tool": "get_wether", "arguments": {"location": "Tokyo"}}]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", bad())]),
        ScriptedModel::calls(&[("execute_tool_plan", bad())]),
        ScriptedModel::answer("Sorry, I cannot."),
    ]));
    let out = agent(Arc::clone(&model), true)
        .interact("Tokyo?")
        .await
        .unwrap();
    assert_eq!(out.answer, "Sorry, I cannot.");
    assert_eq!((out.record.repairs, out.record.repaired), (1, 0));
    let choices: Vec<ToolChoice> = model
        .requests()
        .iter()
        .map(|r| r.tool_choice.clone())
        .collect();
    assert_eq!(
        choices,
        [ToolChoice::Auto, ToolChoice::Required, ToolChoice::Auto]
    );

    // With repairs off the model is never pushed.
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", bad())]),
        ScriptedModel::answer("Sorry."),
    ]));
    let out = Agent::builder("t")
        .model(model.clone())
        .tools(demo::tools())
        .planning(Planning::Offered)
        .repairs(0)
        .build()
        .unwrap()
        .interact("Tokyo?")
        .await
        .unwrap();
    assert_eq!(out.record.repairs, 0);
    assert!(
        model
            .requests()
            .iter()
            .all(|r| r.tool_choice == ToolChoice::Auto)
    );
}

#[tokio::test]
async fn a_dry_run_sends_a_rejected_plan_back_once() {
    let bad =
        json!({"steps": [{"id": "a", "tool": "get_wether", "arguments": {"location": "Tokyo"}}]});
    let good =
        json!({"steps": [{"id": "a", "tool": "get_weather", "arguments": {"location": "Tokyo"}}]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", bad.clone())]),
        ScriptedModel::calls(&[("execute_tool_plan", good.clone())]),
    ]));
    let agent = agent(Arc::clone(&model), true);
    let proposal = agent.propose("Tokyo?", &Default::default()).await.unwrap();
    assert_eq!(proposal.calls[0].arguments, good);
    assert_eq!(proposal.plan_problems, vec![Vec::<String>::new()]);
    assert_eq!(
        (
            proposal.record.llm_calls,
            proposal.record.repairs,
            proposal.record.repaired
        ),
        (2, 1, 1)
    );
    let second = &model.requests()[1];
    assert_eq!(second.tool_choice, ToolChoice::Required);
    let sent_back = second.messages.last().unwrap();
    assert!(sent_back.is_error && sent_back.content.contains("did you mean 'get_weather'?"));

    // A repair that answers in text leaves the first plan, with its problems.
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", bad.clone())]),
        ScriptedModel::answer("Sorry."),
    ]));
    let proposal = crate::support::agent(model, true)
        .propose("Tokyo?", &Default::default())
        .await
        .unwrap();
    assert_eq!(proposal.calls[0].arguments, bad);
    assert_eq!(proposal.plan_problems[0].len(), 1);
    assert_eq!((proposal.record.repairs, proposal.record.repaired), (1, 0));
}

#[tokio::test]
async fn unknown_tools_and_bad_arguments_are_errors_the_model_sees() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[
            ("get_wether", json!({"location": "Tokyo"})),
            ("get_weather", json!({"location": 5})),
            ("calculator", json!({"expression": "$ref:x + 1"})),
            ("echo", json!({"text": "still runs"})),
            ("execute_tool_plan", json!({"steps": []})),
        ]),
        ScriptedModel::answer("done"),
    ]));
    let out = agent(Arc::clone(&model), false)
        .interact("go")
        .await
        .unwrap();
    let results = tool_messages(&out.messages);
    assert_eq!(results.len(), 5);
    assert_eq!(
        results[0].content,
        "Error: unknown tool 'get_wether'. Available tools: echo, concat, sleep, fail, get_weather, get_user, calculator, compare_data"
    );
    assert!(
        results[1].is_error && results[1].content.contains("/location"),
        "{}",
        results[1].content
    );
    // Arguments of individual calls are literal: "$ref:x" is text, so the calculator fails on it.
    assert!(
        results[2].is_error && results[2].content.contains("cannot evaluate"),
        "{}",
        results[2].content
    );
    assert_eq!(results[3].content, "still runs");
    assert!(!results[3].is_error);
    // Planning is off: the meta-tool is unknown.
    assert!(
        results[4]
            .content
            .starts_with("Error: unknown tool 'execute_tool_plan'")
    );
    // The results are in call order, each answering its own call.
    let ids: Vec<_> = results
        .iter()
        .map(|m| m.tool_call_id.clone().unwrap())
        .collect();
    assert_eq!(ids, ["call_0", "call_1", "call_2", "call_3", "call_4"]);
    assert_eq!(out.record.tool_errors, 4);
}

#[tokio::test]
async fn a_huge_result_is_cut_before_it_reaches_the_model() {
    // 200,000 characters from the demo tools: "x" doubled by concat in a plan, and echoed directly.
    let mut steps = vec![json!({"id": "d0", "tool": "echo", "arguments": {"text": "x"}})];
    for i in 1..=17 {
        let prev = format!("$ref:d{}", i - 1);
        steps.push(
            json!({"id": format!("d{i}"), "tool": "concat", "arguments": {"a": prev, "b": prev}}),
        );
    }
    let plan = json!({"steps": steps, "output_steps": ["d17"]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[
            ("execute_tool_plan", plan),
            ("echo", json!({"text": "y".repeat(200_000)})),
        ]),
        ScriptedModel::answer("done"),
    ]));
    let agent = Agent::builder("test")
        .model(Arc::clone(&model) as Arc<_>)
        .tools(demo::tools())
        .planning(Planning::Offered)
        .max_result_bytes(10_000)
        .build()
        .unwrap();
    let out = agent.interact("Make something big").await.unwrap();
    let results = tool_messages(&out.messages);
    assert_eq!(results.len(), 2);
    for r in &results {
        assert!(r.content.len() < 10_300, "{} bytes", r.content.len());
    }
    assert!(
        results[0].content.ends_with("… 121.1 KB more"),
        "{}",
        &results[0].content[results[0].content.len() - 40..]
    );
    assert!(results[1].content.ends_with("… 189.8 KB more"));
    // What the model read the next turn is the cut text.
    let second = &model.requests()[1];
    assert!(second.messages.iter().all(|m| m.content.len() < 10_300));
}

#[tokio::test]
async fn a_plan_over_the_agents_step_limit_is_refused_and_sent_back() {
    let steps: Vec<_> = (0..toolplan_agent::DEFAULT_MAX_PLAN_STEPS + 1)
        .map(|i| json!({"id": format!("s{i}"), "tool": "echo", "arguments": {"text": format!("{i}")}}))
        .collect();
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", json!({"steps": steps}))]),
        ScriptedModel::answer("too long"),
    ]));
    let out = agent(Arc::clone(&model), true)
        .interact("echo a lot")
        .await
        .unwrap();
    let result = tool_messages(&out.messages)[0];
    assert!(result.is_error, "{}", result.content);
    assert!(
        result.content.contains("25 steps") && result.content.contains("24"),
        "{}",
        result.content
    );
    assert_eq!(out.record.plan_steps, 0);
}
