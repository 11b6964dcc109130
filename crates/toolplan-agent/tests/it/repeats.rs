//! Repeated calls: answered from memory where repeating them is harmless (read-only or idempotent
//! tools), run again where it is not, not run a third time after two failures, and the next turn
//! must answer.

use std::sync::Arc;

use serde_json::json;
use toolplan_agent::scripted::ScriptedModel;
use toolplan_llm::ToolChoice;

use crate::support::{agent, tool_messages};

#[tokio::test]
async fn a_repeated_call_gets_the_earlier_result_and_the_next_turn_must_answer() {
    let weather = || ("get_weather", json!({"location": "Cairo"}));
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[weather()]),
        // The same call again, beside a new one: only the new one runs.
        ScriptedModel::calls(&[weather(), ("get_weather", json!({"location": "Oslo"}))]),
        // Nothing new: both are repeats.
        ScriptedModel::calls(&[("get_weather", json!({"location": "Oslo"})), weather()]),
        ScriptedModel::answer("Cairo is 28 degrees warmer."),
    ]));
    let out = agent(Arc::clone(&model), false)
        .interact("How much warmer is Cairo than Oslo?")
        .await
        .unwrap();
    assert_eq!(out.record.tool_calls, 5);
    assert_eq!(out.record.repeated_calls, 3);
    let results = tool_messages(&out.messages);
    let cairo = r#"{"temp":31,"condition":"clear","city":"Cairo"}"#;
    assert_eq!(results[0].content, cairo);
    assert!(
        results[1]
            .content
            .starts_with(toolplan_agent::REPEATED_CALL)
    );
    assert!(results[1].content.contains(cairo), "{}", results[1].content);
    assert!(!results[1].is_error);
    assert!(results[2].content.contains("Oslo"));
    assert!(
        !results[2]
            .content
            .starts_with(toolplan_agent::REPEATED_CALL)
    );
    // Each result answers its own call, in order.
    assert_eq!(results[3].tool_call_id.as_deref(), Some("call_0"));
    assert!(results[3].content.contains("Oslo"));
    assert!(results[4].content.contains("Cairo"));
    // Tools stay offered while calls bring something new; after a turn of repeats only, the model
    // is asked to answer.
    assert_answer_forced_on_fourth_turn(&model);
}

#[tokio::test]
async fn a_call_that_fails_twice_is_not_run_a_third_time() {
    // A tool call, and a plan: the same plan sent again is no correction either.
    let calls = [
        (false, "calculator", json!({"expression": "Tokyo * Paris"})),
        (
            true,
            "execute_tool_plan",
            json!({"steps": [
                {"id": "u", "tool": "echo", "arguments": {"text": r#"{"name": "Erin", "city": "Cairo"}"#}},
                {"id": "t", "tool": "calculator", "arguments": {"expression": "$ref:u.city.temp - 1"}}]}),
        ),
    ];
    for (planning, tool, arguments) in calls {
        let bad = || (tool, arguments.clone());
        let model = Arc::new(ScriptedModel::new([
            ScriptedModel::calls(&[bad()]),
            ScriptedModel::calls(&[bad()]),
            ScriptedModel::calls(&[bad()]),
            ScriptedModel::answer("I cannot compute it."),
        ]));
        let out = agent(Arc::clone(&model), planning)
            .interact("Multiply the temperatures of Tokyo and Paris")
            .await
            .unwrap();
        assert_eq!(out.record.tool_calls, 3, "{tool}");
        assert_eq!(out.record.repeated_calls, 1, "{tool}");
        // Two runs failed; the third was not made.
        assert_eq!(out.record.plans, if planning { 2 } else { 0 });
        assert_eq!(out.record.tool_errors, 2, "{tool}");
        let results = tool_messages(&out.messages);
        assert!(results.iter().all(|r| r.is_error));
        assert!(
            !results[1]
                .content
                .starts_with(toolplan_agent::REPEATED_FAILURE)
        );
        assert!(
            results[2]
                .content
                .starts_with(toolplan_agent::REPEATED_FAILURE),
            "{}",
            results[2].content
        );
        assert!(results[2].content.contains(&results[1].content));
        // The third turn brought nothing new: the fourth must answer.
        assert_answer_forced_on_fourth_turn(&model);
    }
}

/// The tool choice of each request: tools offered for three turns, switched off for the fourth.
fn assert_answer_forced_on_fourth_turn(model: &ScriptedModel) {
    let choices: Vec<_> = model
        .requests()
        .iter()
        .map(|r| r.tool_choice.clone())
        .collect();
    assert_eq!(
        choices,
        [
            ToolChoice::Auto,
            ToolChoice::Auto,
            ToolChoice::Auto,
            ToolChoice::None
        ]
    );
}

/// A pager whose every call advances (no annotations: repeating it is not harmless), and how
/// many times it ran.
fn pager() -> (
    Arc<dyn toolplan_core::Tool>,
    Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let pages = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&pages);
    let tool = toolplan_core::FnTool::new(
        "next_page",
        "Shows the next page.",
        json!({"type": "object", "properties": {}}),
        move |_, _| {
            let page = counter.fetch_add(1, Ordering::SeqCst) + 1;
            async move { Ok(json!({"page": page})) }
        },
    );
    (Arc::new(tool), pages)
}

#[tokio::test]
async fn a_repeated_call_of_a_tool_that_changes_things_runs_again() {
    use std::sync::atomic::Ordering;
    let next = || ("next_page", json!({}));
    let plan = json!({"steps": [
        {"id": "p", "tool": "next_page", "arguments": {}},
        {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}}]});
    let (tool, pages) = pager();
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[next()]),
        ScriptedModel::calls(&[next()]),
        ScriptedModel::calls(&[("execute_tool_plan", plan.clone())]),
        // The same plan again: its pager step advances again.
        ScriptedModel::calls(&[("execute_tool_plan", plan)]),
        // A read-only tool repeated is still answered from memory.
        ScriptedModel::calls(&[("get_weather", json!({"location": "Oslo"}))]),
        ScriptedModel::calls(&[("get_weather", json!({"location": "Oslo"}))]),
        ScriptedModel::answer("Page 4."),
    ]));
    let mut tools = toolplan_demo::tools();
    tools.push(tool);
    let out = toolplan_agent::Agent::builder("test")
        .model(model)
        .tools(tools)
        .planning(toolplan_agent::Planning::Offered)
        .max_turns(8)
        .build()
        .unwrap()
        .interact("Page through.")
        .await
        .unwrap();
    assert_eq!(pages.load(Ordering::SeqCst), 4, "every pager call ran");
    assert_eq!(
        out.record.repeated_calls, 1,
        "only the weather call was a repeat"
    );
    let results = tool_messages(&out.messages);
    assert!(
        results[1].content.contains(r#""page":2"#),
        "{}",
        results[1].content
    );
    assert!(
        results[3].content.contains(r#""page":4"#),
        "{}",
        results[3].content
    );
    assert!(
        results[5]
            .content
            .starts_with(toolplan_agent::REPEATED_CALL)
    );
}
