//! The answer turn after a plan that succeeded, asked compactly: the question, the plan and its
//! results, with `call_more_tools` the one tool; the whole conversation again when the model calls
//! it (and for the rest of the interaction), or when a step failed, or with the compact turn
//! not switched on (the default).

use std::sync::Arc;

use serde_json::json;
use toolplan_agent::scripted::ScriptedModel;
use toolplan_agent::{Agent, COMPACT_SYSTEM, MORE_TOOLS, Planning};
use toolplan_demo as demo;
use toolplan_llm::{Role, ToolChoice};

use crate::support::{FINAL, weather_plan};

/// An agent over the demo tools, the planner beside them, the answer turn compact.
fn agent(model: Arc<ScriptedModel>, compact: bool) -> Agent {
    Agent::builder("test")
        .model(model)
        .instructions("You compare data.")
        .tools(demo::tools())
        .planning(Planning::Offered)
        .compact_answer(compact)
        .max_turns(6)
        .build()
        .unwrap()
}

const QUESTION: &str = "Compare the weather in Tokyo and London";

#[tokio::test]
async fn the_turn_after_a_plan_that_succeeded_has_the_question_and_results_not_the_tools() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", weather_plan())]),
        ScriptedModel::answer(FINAL),
    ]));
    let out = agent(Arc::clone(&model), true)
        .interact(QUESTION)
        .await
        .unwrap();
    assert_eq!(out.answer, FINAL);
    assert_eq!(out.record.llm_calls, 2);
    assert_eq!(out.record.compact_answers, 1);
    assert_eq!(out.record.more_tools_asked, 0);

    let requests = model.requests();
    let second = &requests[1];
    assert_eq!(second.messages.len(), 2);
    assert_eq!(second.messages[0].role, Role::System);
    assert_eq!(
        second.messages[0].content,
        format!("You compare data.\n\n{COMPACT_SYSTEM}")
    );
    let user = &second.messages[1].content;
    assert!(user.starts_with(QUESTION), "{user}");
    assert!(user.contains("\n- cmp: compare_data "), "{user}");
    assert!(
        user.contains("Plan executed successfully (3 steps)."),
        "{user}"
    );
    assert!(user.contains("- cmp: {\"equal\":false"), "{user}");
    let tools: Vec<&str> = second.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, [MORE_TOOLS]);
    assert_eq!(second.tool_choice, ToolChoice::Auto);
    // The compact turn is far shorter than the first request, which lists every tool.
    let size = |r: &toolplan_llm::ChatRequest| serde_json::to_string(&r.tools).unwrap().len();
    assert!(size(second) * 5 < size(&requests[0]));
    // The conversation kept is the whole one: plan, results, answer.
    let roles: Vec<Role> = out.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant
        ]
    );
}

#[tokio::test]
async fn asking_for_more_goes_back_to_the_whole_conversation_and_a_tool_call() {
    let first = json!({
        "steps": [{"id": "tokyo", "tool": "get_weather", "arguments": {"location": "Tokyo"}}]
    });
    let second = json!({
        "steps": [{"id": "london", "tool": "get_weather", "arguments": {"location": "London"}}]
    });
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", first)]),
        ScriptedModel::calls(&[(MORE_TOOLS, json!({"need": "the weather in London"}))]),
        ScriptedModel::calls(&[("execute_tool_plan", second)]),
        ScriptedModel::answer(FINAL),
    ]));
    let out = agent(Arc::clone(&model), true)
        .interact(QUESTION)
        .await
        .unwrap();
    assert_eq!(out.answer, FINAL);
    assert_eq!(out.record.llm_calls, 4);
    assert_eq!(out.record.plans, 2);
    assert_eq!(out.record.compact_answers, 1);
    assert_eq!(out.record.more_tools_asked, 1);
    let requests = model.requests();
    // The turn after the request for more: every tool, the whole conversation, a call required.
    let third = &requests[2];
    assert_eq!(third.tools[0].name, "execute_tool_plan");
    assert_eq!(third.tool_choice, ToolChoice::Required);
    let note = &third.messages.last().unwrap().content;
    assert_eq!(third.messages.last().unwrap().role, Role::User);
    assert!(
        note.contains("still needed: the weather in London."),
        "{note}"
    );
    assert!(third.messages.iter().any(|m| m.role == Role::Tool));
    // The model asked for more once: the answer turns after that are asked the usual way.
    let last = &requests[3];
    assert_eq!(last.tools[0].name, "execute_tool_plan");
    assert!(last.messages.len() > 2);
}

#[tokio::test]
async fn a_plan_with_a_failed_step_is_answered_with_the_tools_offered() {
    let plan = json!({
        "steps": [{"id": "x", "tool": "get_weather", "arguments": {"location": "Atlantis"}}]
    });
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", plan)]),
        ScriptedModel::answer("There is no weather data for Atlantis."),
    ]));
    let out = agent(Arc::clone(&model), true)
        .interact("What is the weather in Atlantis?")
        .await
        .unwrap();
    assert_eq!(out.record.tool_errors, 1);
    assert_eq!(out.record.compact_answers, 0);
    let second = &model.requests()[1];
    assert_eq!(second.tools[0].name, "execute_tool_plan");
    assert!(second.messages.len() > 2);
}

#[tokio::test]
async fn by_default_the_turn_after_a_plan_is_asked_like_any_other() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", weather_plan())]),
        ScriptedModel::answer(FINAL),
    ]));
    // Off by default.
    let out = Agent::builder("test")
        .model(Arc::clone(&model) as Arc<_>)
        .tools(demo::tools())
        .planning(Planning::Offered)
        .build()
        .unwrap()
        .interact(QUESTION)
        .await
        .unwrap();
    assert_eq!(out.answer, FINAL);
    assert_eq!(out.record.compact_answers, 0);
    let second = &model.requests()[1];
    assert_eq!(second.tools[0].name, "execute_tool_plan");
    assert_eq!(second.messages.last().unwrap().role, Role::Tool);
}
