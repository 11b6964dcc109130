//! The agent loop with a scripted model: round-trips with and without planning, errors the model can
//! act on, the turn limit, parallel calls in one turn.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolplan_agent::scripted::ScriptedModel;
use toolplan_agent::{Agent, AgentError, PLANNING_INSTRUCTIONS};
use toolplan_core::demo;
use toolplan_llm::{Message, Role, ToolChoice};

fn agent(model: Arc<ScriptedModel>, planning: bool) -> Agent {
    Agent::builder("test")
        .model(model)
        .instructions("You compare data.")
        .tools(demo::tools())
        .tool_planning(planning)
        .max_turns(6)
        .build()
        .unwrap()
}

fn tool_messages(messages: &[Message]) -> Vec<&Message> {
    messages.iter().filter(|m| m.role == Role::Tool).collect()
}

const FINAL: &str = "Tokyo is 6 degrees warmer than London.";

#[tokio::test]
async fn one_call_per_tool_costs_n_plus_one_model_calls() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("get_weather", json!({"location": "Tokyo"}))]),
        ScriptedModel::calls(&[("get_weather", json!({"location": "London"}))]),
        ScriptedModel::calls(&[(
            "compare_data",
            json!({"data_a": {"temp": 18}, "data_b": {"temp": 12}}),
        )]),
        ScriptedModel::answer(FINAL),
    ]));
    let out = agent(Arc::clone(&model), false)
        .interact("Compare the weather in Tokyo and London")
        .await
        .unwrap();
    assert_eq!(out.answer, FINAL);
    assert_eq!(out.record.llm_calls, 4);
    assert_eq!(out.record.turns, 4);
    assert_eq!(out.record.tool_calls, 3);
    assert_eq!(out.record.plans, 0);
    // Without planning, execute_tool_plan is not offered and the prompt does not mention it.
    let first = &model.requests()[0];
    assert!(first.tools.iter().all(|t| t.name != "execute_tool_plan"));
    assert!(!first.messages[0].content.contains(PLANNING_INSTRUCTIONS));
    // Each tool result went back to the model with the call's id.
    let results = tool_messages(&out.messages);
    assert_eq!(
        results[0].content,
        r#"{"temp":18,"condition":"sunny","city":"Tokyo"}"#
    );
    assert_eq!(results[0].tool_call_id.as_deref(), Some("call_0"));
    assert!(!results[0].is_error);
}

fn weather_plan() -> Value {
    json!({
        "steps": [
            {"id": "tokyo", "tool": "get_weather", "arguments": "{\"location\": \"Tokyo\"}"},
            {"id": "london", "tool": "get_weather", "arguments": {"location": "London"}},
            {"id": "cmp", "tool": "compare_data", "arguments": {"data_a": "$ref:tokyo", "data_b": "$ref:london"}}
        ],
        "output_steps": ["cmp"]
    })
}

#[tokio::test]
async fn a_plan_costs_two_model_calls_and_returns_only_output_steps() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", weather_plan())]),
        ScriptedModel::answer(FINAL),
    ]));
    let out = agent(Arc::clone(&model), true)
        .interact("Compare the weather in Tokyo and London")
        .await
        .unwrap();
    assert_eq!(out.answer, FINAL);
    assert_eq!(out.record.llm_calls, 2);
    assert_eq!(out.record.tool_calls, 1);
    assert_eq!(out.record.plans, 1);
    assert_eq!(out.record.plan_steps, 3);
    assert_eq!(out.record.tool_errors, 0);
    // Only the first call wrote a plan: its output tokens are the planning tokens.
    assert_eq!(
        out.record.planning_output_tokens,
        weather_plan().to_string().len() as u64 / 4
    );
    assert!(out.record.planning_elapsed <= out.record.model_elapsed);
    assert!(out.record.model_elapsed <= out.record.elapsed);

    let requests = model.requests();
    let first = &requests[0];
    assert_eq!(first.tools[0].name, "execute_tool_plan");
    assert!(
        first.messages[0]
            .content
            .starts_with("You compare data.\n\n")
    );
    assert!(first.messages[0].content.ends_with(PLANNING_INSTRUCTIONS));
    // The second request carries the plan summary: the comparison, not the intermediate weather.
    let summary = &requests[1].messages.last().unwrap().content;
    assert!(
        summary.starts_with("Plan executed successfully (3 steps)."),
        "{summary}"
    );
    assert!(summary.contains("- cmp: {\"equal\":false"), "{summary}");
    assert!(
        !summary.contains("\"condition\":\"sunny\",\"city\""),
        "intermediate result leaked: {summary}"
    );
}

#[tokio::test]
async fn planning_uses_fewer_input_tokens_than_one_call_per_tool() {
    let per_tool = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("get_weather", json!({"location": "Tokyo"}))]),
        ScriptedModel::calls(&[("get_weather", json!({"location": "London"}))]),
        ScriptedModel::calls(&[(
            "compare_data",
            json!({"data_a": {"temp": 18}, "data_b": {"temp": 12}}),
        )]),
        ScriptedModel::answer(FINAL),
    ]));
    let planned = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", weather_plan())]),
        ScriptedModel::answer(FINAL),
    ]));
    let a = agent(per_tool, true)
        .interact("Compare the weather in Tokyo and London")
        .await
        .unwrap();
    let b = agent(planned, true)
        .interact("Compare the weather in Tokyo and London")
        .await
        .unwrap();
    assert!(
        b.record.input_tokens < a.record.input_tokens,
        "{:?} vs {:?}",
        b.record,
        a.record
    );
}

#[tokio::test]
async fn fail_forward_errors_reach_the_model() {
    let plan = json!({"steps": [
        {"id": "s1", "tool": "fail", "arguments": {"message": "upstream 503"}},
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
    assert!(result.content.contains("- s1 (failed): upstream 503"));
    assert!(
        result
            .content
            .contains("- s3 (skipped): Skipped because dependency 's1' failed")
    );
    assert!(result.content.contains("\"city\":\"Paris\""));
    // The model is told it may plan again.
    assert!(result.content.ends_with(toolplan_agent::REPLAN_HINT));
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

#[tokio::test(start_paused = true)]
async fn calls_of_one_turn_run_in_parallel() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[
            ("sleep", json!({"ms": 200, "value": "a"})),
            ("sleep", json!({"ms": 200, "value": "b"})),
            ("sleep", json!({"ms": 200, "value": "c"})),
        ]),
        ScriptedModel::answer("abc"),
    ]));
    let start = tokio::time::Instant::now();
    let out = agent(model, false).interact("go").await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(200));
    let texts: Vec<_> = tool_messages(&out.messages)
        .iter()
        .map(|m| m.content.clone())
        .collect();
    assert_eq!(texts, ["a", "b", "c"]);
}

#[tokio::test]
async fn max_turns_stops_a_loop() {
    let model = Arc::new(ScriptedModel::new((0..10).map(|n| {
        ScriptedModel::calls(&[("echo", json!({"text": format!("again {n}")}))])
    })));
    let err = agent(Arc::clone(&model), true)
        .interact("loop")
        .await
        .unwrap_err();
    match err {
        AgentError::MaxTurns { record, messages } => {
            assert_eq!(record.turns, 6);
            assert_eq!(record.llm_calls, 6);
            assert_eq!(record.tool_calls, 6);
            assert_eq!(record.repeated_calls, 0);
            // The conversation comes with the error: six calls, six results.
            assert_eq!(tool_messages(&messages).len(), 6);
            assert_eq!(tool_messages(&messages)[5].content, "again 5");
        }
        other => panic!("expected MaxTurns, got {other:?}"),
    }
    assert_eq!(model.requests().len(), 6);
}

#[tokio::test]
async fn model_errors_and_cancellation_end_the_interaction() {
    let model = Arc::new(ScriptedModel::new([]));
    let err = agent(model, true).interact("hi").await.unwrap_err();
    assert!(matches!(err, AgentError::Llm(_)), "{err:?}");

    let model = Arc::new(ScriptedModel::new([ScriptedModel::answer("never")]));
    let cancel = tokio_util::sync::CancellationToken::new();
    cancel.cancel();
    let err = agent(model, true)
        .interact_with("hi", &cancel)
        .await
        .unwrap_err();
    assert_eq!(err, AgentError::Cancelled);
}

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
        .tool(Arc::new(toolplan_core::ExecuteToolPlan::new(engine)))
        .build()
        .err()
        .unwrap();
    assert!(err.to_string().contains("enable_tool_planning"));
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
        .enable_tool_planning()
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
        .enable_tool_planning()
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
        .plan_only()
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
            .contains("\n- get_weather(location: string): Current weather of a city"),
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
        system.ends_with(toolplan_agent::PLAN_ONLY_INSTRUCTIONS),
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
        .plan_only()
        .build()
        .unwrap();
    let out = agent.interact("x").await.unwrap();
    assert!(
        tool_messages(&out.messages)[0]
            .content
            .starts_with("Error: unknown tool 'get_weather'. Available tools: execute_tool_plan")
    );
}

fn answering_agent(model: Arc<ScriptedModel>) -> Agent {
    Agent::builder("test")
        .model(model)
        .tools(demo::tools())
        .plan_only()
        .answer_in_plan(true)
        .max_turns(4)
        .build()
        .unwrap()
}

/// Runs a plan-answer agent whose model sends `plan` and then answers `reply`; checks that the plan
/// did not end the interaction (2 model calls, the reply is the answer) and returns the model and the
/// plan's result as the model read it.
async fn plan_then_reply(plan: Value, reply: &str, question: &str) -> (Arc<ScriptedModel>, String) {
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", plan)]),
        ScriptedModel::answer(reply),
    ]));
    let out = answering_agent(Arc::clone(&model))
        .interact(question)
        .await
        .unwrap();
    assert_eq!(out.answer, reply);
    assert_eq!(out.record.llm_calls, 2);
    assert!(!out.record.answered_by_plan);
    let result = tool_messages(&out.messages)[0].content.clone();
    (model, result)
}

#[tokio::test]
async fn a_plan_that_ends_with_its_answer_costs_one_model_call() {
    let model = Arc::new(ScriptedModel::new([ScriptedModel::calls(&[(
        "execute_tool_plan",
        json!({"thought": "Where Dave lives, then its weather.", "steps": [
            {"id": "u", "tool": "get_user", "arguments": {"name": "Dave"}},
            {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}}],
            "answer": "Dave lives in $ref:u.city, where it is $ref:w.temp °C.",
            "output_steps": ["w"]}),
    )])]));
    let agent = answering_agent(Arc::clone(&model));
    // The answer is a field of the plan (the tool behind it is not listed), and the prompt says how
    // to use it.
    let tools = agent.tool_definitions();
    assert_eq!(tools.len(), 1);
    assert!(!tools[0].description.contains("answer("));
    assert!(
        tools[0]
            .description
            .contains(&toolplan_agent::answer_example())
    );
    assert!(tools[0].parameters["properties"]["answer"].is_object());
    let strict = tools[0].strict_parameters.as_ref().unwrap();
    assert_eq!(strict["required"], json!(["thought", "steps", "answer"]));
    let step_tools = strict["properties"]["steps"]["items"]["anyOf"].to_string();
    assert!(!step_tools.contains(r#""const":"answer""#), "{step_tools}");
    assert!(
        agent
            .system_prompt()
            .contains(toolplan_agent::ANSWER_IN_PLAN_INSTRUCTIONS)
    );
    let out = agent
        .interact("How cold is it where Dave lives?")
        .await
        .unwrap();
    assert_eq!(out.answer, "Dave lives in Oslo, where it is 3 °C.");
    assert_eq!(out.record.llm_calls, 1);
    assert!(out.record.answered_by_plan);
    assert_eq!(out.messages.last().unwrap().role, Role::Assistant);
}

#[tokio::test]
async fn a_plan_whose_answer_is_null_goes_back_to_the_model() {
    let (model, result) = plan_then_reply(
        json!({"thought": "Both temperatures, then compare.", "steps": [
            {"id": "b", "tool": "get_weather", "arguments": {"location": "Berlin"}},
            {"id": "l", "tool": "get_weather", "arguments": {"location": "London"}}],
            "answer": null}),
        "Berlin",
        "Which city is colder, Berlin or London?",
    )
    .await;
    assert!(
        result.starts_with("Plan executed successfully (2 steps)"),
        "{result}"
    );
    // The plan is written without a thought outside it; the reply from its results with one.
    let thinking: Vec<bool> = model.requests().iter().map(|r| r.think_first).collect();
    assert_eq!(thinking, [false, true]);
}

#[tokio::test]
async fn a_guessed_answer_is_dropped_and_left_out_of_the_conversation() {
    let (model, result) = plan_then_reply(
        json!({"thought": "Both conditions.", "steps": [
            {"id": "p", "tool": "get_weather", "arguments": {"location": "Paris"}},
            {"id": "l", "tool": "get_weather", "arguments": {"location": "London"}}],
            "answer": "Paris is sunny and London is rainy."}),
        "Paris is cloudy and London is rainy.",
        "What are the weather conditions in Paris and in London?",
    )
    .await;
    assert!(result.contains("\"cloudy\""), "{result}");
    // The model answers from the results: the plan it reads back has no answer, not its guess.
    let requests = model.requests();
    let plan = requests[1]
        .messages
        .iter()
        .flat_map(|m| &m.tool_calls)
        .find(|c| c.name == "execute_tool_plan")
        .unwrap();
    assert_eq!(plan.arguments["answer"], Value::Null);
    assert_eq!(plan.arguments["steps"].as_array().unwrap().len(), 2);
    assert!(!format!("{:?}", requests[1].messages).contains("sunny"));
}

#[tokio::test]
async fn an_answer_step_written_by_hand_still_ends_the_interaction() {
    let model = Arc::new(ScriptedModel::new([ScriptedModel::calls(&[(
        "execute_tool_plan",
        json!({"steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}},
            {"id": "ans", "tool": "answer", "arguments": {"text": "It is $ref:w.temp °C."}}]}),
    )])]));
    let out = answering_agent(Arc::clone(&model))
        .interact("How cold is it in Oslo?")
        .await
        .unwrap();
    assert_eq!(out.answer, "It is 3 °C.");
    assert_eq!(out.record.llm_calls, 1);
}

#[tokio::test]
async fn a_failed_plan_goes_back_to_the_model_despite_its_answer() {
    let (_, result) = plan_then_reply(
        json!({"steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "Dave"}}],
            "answer": "It is $ref:w.temp °C."}),
        "I could not find out.",
        "How cold is it where Dave lives?",
    )
    .await;
    // The model read why: the person is not a city, and the answer step was skipped.
    assert!(result.contains("'Dave' is a person"), "{result}");
}

#[tokio::test]
async fn without_answer_in_plan_there_is_no_answer_tool() {
    let model = Arc::new(ScriptedModel::new([ScriptedModel::answer("hi")]));
    let agent = Agent::builder("test")
        .model(model)
        .tools(demo::tools())
        .plan_only()
        .build()
        .unwrap();
    assert!(!agent.tool_definitions()[0].description.contains("answer("));
    assert!(
        !agent
            .system_prompt()
            .contains(toolplan_agent::ANSWER_IN_PLAN_INSTRUCTIONS)
    );
}

#[tokio::test]
async fn an_answer_that_refers_to_nothing_goes_back_to_the_model() {
    let (_, result) = plan_then_reply(
        json!({"steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}}],
            "answer": "It is $ref:w.fahrenheit °F.", "output_steps": ["w"]}),
        "It is 3 °C in Oslo.",
        "How cold is it in Oslo?",
    )
    .await;
    assert!(
        result.contains("$ref:w.fahrenheit with no value"),
        "{result}"
    );
}

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
                {"id": "u", "tool": "get_user", "arguments": {"name": "Erin"}},
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
        .tool_planning(true)
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
