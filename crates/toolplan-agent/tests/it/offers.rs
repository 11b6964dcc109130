//! What the model is offered: the planner beside the tools or alone, its description, one call or
//! several per turn, thinking first; and what the builder refuses.

use std::sync::Arc;

use serde_json::json;
use toolplan_agent::scripted::ScriptedModel;
use toolplan_agent::{Agent, Planning};
use toolplan_demo as demo;
use toolplan_planner::PLANNING_INSTRUCTIONS;

use crate::support::{FINAL, agent, tool_messages, weather_plan};

#[test]
fn building_needs_a_model_and_rejects_the_meta_tool_as_a_tool() {
    let err = Agent::builder("x")
        .tools(demo::tools())
        .build()
        .err()
        .unwrap();
    assert!(err.to_string().contains("has no model"));
    let engine = Arc::new(toolplan_core::Engine::new(Arc::new(demo::registry())));
    let err = Agent::builder("x")
        .model(Arc::new(ScriptedModel::new([])))
        .tool(Arc::new(toolplan_planner::ExecuteToolPlan::new(engine)))
        .build()
        .err()
        .unwrap();
    assert!(err.to_string().contains("AgentBuilder::planning"));
}

#[tokio::test]
async fn parallel_tool_calls_setting_reaches_the_model() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::answer("a"),
        ScriptedModel::answer("b"),
    ]));
    let default = agent(Arc::clone(&model), true);
    default.interact("x").await.unwrap();
    let single = Agent::builder("t")
        .model(Arc::clone(&model) as Arc<dyn toolplan_llm::ChatModel>)
        .tools(demo::tools())
        .planning(Planning::Offered)
        .parallel_tool_calls(false)
        .build()
        .unwrap();
    single.interact("y").await.unwrap();
    let requests = model.requests();
    assert_eq!(requests[0].parallel_tool_calls, None);
    assert_eq!(requests[1].parallel_tool_calls, Some(false));
}

#[tokio::test]
async fn models_think_first_without_planning_unless_told_otherwise() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::answer("a"),
        ScriptedModel::answer("b"),
        ScriptedModel::answer("c"),
    ]));
    agent(Arc::clone(&model), false)
        .interact("x")
        .await
        .unwrap();
    agent(Arc::clone(&model), true).interact("y").await.unwrap();
    Agent::builder("t")
        .model(Arc::clone(&model) as Arc<dyn toolplan_llm::ChatModel>)
        .tools(demo::tools())
        .planning(Planning::Offered)
        .think_first(true)
        .build()
        .unwrap()
        .interact("z")
        .await
        .unwrap();
    let thinking: Vec<bool> = model.requests().iter().map(|r| r.think_first).collect();
    assert_eq!(thinking, [true, false, true]);
}

#[tokio::test]
async fn the_planner_does_not_repeat_the_tool_list() {
    let model = Arc::new(ScriptedModel::new([ScriptedModel::answer("ok")]));
    agent(Arc::clone(&model), true).interact("x").await.unwrap();
    let planner = &model.requests()[0].tools[0];
    assert_eq!(planner.name, "execute_tool_plan");
    assert!(
        !planner.description.contains("get_weather"),
        "{}",
        planner.description
    );
}

#[tokio::test]
async fn plan_only_offers_just_the_planner_with_every_tool_signature() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", weather_plan())]),
        ScriptedModel::answer(FINAL),
    ]));
    let agent = Agent::builder("t")
        .model(Arc::clone(&model) as Arc<dyn toolplan_llm::ChatModel>)
        .tools(demo::tools())
        .planning(Planning::Only)
        .build()
        .unwrap();
    let out = agent
        .interact("Compare the weather in Tokyo and London")
        .await
        .unwrap();
    assert_eq!(out.record.plans, 1);
    assert_eq!(out.record.llm_calls, 2);
    let tools = &model.requests()[0].tools;
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "execute_tool_plan");
    assert!(
        tools[0]
            .description
            .contains("\n- get_weather(location: string) -> {temp, condition, city}: Current weather of a city"),
        "{}",
        tools[0].description
    );
    assert!(
        tools[0]
            .description
            .contains("\n- sleep(ms: integer, value?: any): "),
        "{}",
        tools[0].description
    );
    // The model is shown the plain plan schema; constrained decoding holds each step to its tool.
    assert!(
        tools[0].parameters["properties"]["steps"]["items"]["properties"]["tool"]["enum"]
            .is_array()
    );
    let strict = tools[0].strict_parameters.as_ref().expect("typed steps");
    let weather_step = &strict["properties"]["steps"]["items"]["anyOf"][4];
    assert_eq!(
        weather_step["properties"]["tool"],
        json!({"const": "get_weather"})
    );
    assert_eq!(
        weather_step["properties"]["arguments"]["required"],
        json!(["location"])
    );
    // …and gives no two steps one id (a grammar cannot say so; the local sampler does).
    assert_eq!(tools[0].unique_values, ["/steps/*/id"]);
    // The short plan-only instructions, not the longer ones written for agents that offer both.
    let system = &model.requests()[0].messages[0].content;
    assert!(
        system.ends_with(toolplan_planner::PLAN_ONLY_INSTRUCTIONS),
        "{system}"
    );
    assert!(!system.contains(PLANNING_INSTRUCTIONS));
    // One plan per turn.
    assert_eq!(model.requests()[0].parallel_tool_calls, Some(false));
    // A direct call of a tool that is only reachable through plans is an unknown tool.
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("get_weather", json!({"location": "Oslo"}))]),
        ScriptedModel::answer("ok"),
    ]));
    let agent = Agent::builder("t")
        .model(Arc::clone(&model) as Arc<dyn toolplan_llm::ChatModel>)
        .tools(demo::tools())
        .planning(Planning::Only)
        .build()
        .unwrap();
    let out = agent.interact("x").await.unwrap();
    assert!(
        tool_messages(&out.messages)[0]
            .content
            .starts_with("Error: unknown tool 'get_weather'. Available tools: execute_tool_plan")
    );
}

#[tokio::test]
async fn plan_only_with_the_native_listing_shows_the_tools_but_only_the_planner_is_callable() {
    let model = Arc::new(ScriptedModel::new([
        // A direct call of a tool shown only for plans is refused like an unknown tool …
        ScriptedModel::calls(&[("get_weather", json!({"location": "Tokyo"}))]),
        // … and a plan over it runs.
        ScriptedModel::calls(&[("execute_tool_plan", weather_plan())]),
        ScriptedModel::answer(FINAL),
    ]));
    let agent = Agent::builder("t")
        .model(model.clone())
        .tools(demo::tools())
        .planning(Planning::Only)
        .plan_listing(toolplan_agent::ToolListing::Native)
        .build()
        .unwrap();
    let tools = agent.tool_definitions();
    assert_eq!(tools[0].name, "execute_tool_plan");
    assert!(!tools[0].listed_only);
    assert!(tools.len() > 1 && tools[1..].iter().all(|t| t.listed_only));
    // The planner's description does not list the tools again.
    assert!(!tools[0].description.contains("Tools a plan can call"));
    let out = agent.interact("Weather in Tokyo?").await.unwrap();
    assert_eq!(out.answer, FINAL);
    let results = tool_messages(&out.messages);
    assert!(results[0].is_error);
    assert!(
        results[0]
            .content
            .starts_with("Error: unknown tool 'get_weather'. Available tools: execute_tool_plan"),
        "{}",
        results[0].content
    );
    assert!(!results[1].is_error, "{}", results[1].content);
}
