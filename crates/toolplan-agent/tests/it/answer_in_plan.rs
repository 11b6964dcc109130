//! Plans that end with their answer: one model call when the plan succeeds, back to the model when
//! its answer is null, a guess, or refers to nothing.

use std::sync::Arc;

use serde_json::{Value, json};
use toolplan_agent::scripted::ScriptedModel;
use toolplan_agent::{Agent, Planning};
use toolplan_demo as demo;
use toolplan_llm::Role;

use crate::support::tool_messages;

fn answering_agent(model: Arc<ScriptedModel>) -> Agent {
    Agent::builder("test")
        .model(model)
        .tools(demo::tools())
        .planning(Planning::OnlyWithAnswer)
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
            .contains(&toolplan_planner::answer_example())
    );
    assert!(tools[0].parameters["properties"]["answer"].is_object());
    let strict = tools[0].strict_parameters.as_ref().unwrap();
    assert_eq!(strict["required"], json!(["thought", "steps", "answer"]));
    let step_tools = strict["properties"]["steps"]["items"]["anyOf"].to_string();
    assert!(!step_tools.contains(r#""const":"answer""#), "{step_tools}");
    assert!(
        agent
            .system_prompt()
            .contains(toolplan_planner::ANSWER_IN_PLAN_INSTRUCTIONS)
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
async fn an_answer_copied_from_the_worked_example_is_not_the_answer() {
    // The 1.5B model, asked a yes-or-no question, wrote the example's sentence around its own step.
    let (model, result) = plan_then_reply(
        json!({"steps": [
            {"id": "u", "tool": "get_user", "arguments": {"name": "Bob"}},
            {"id": "r", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}}],
            "answer": "The product of order A7 costs $ref:r the user>"}),
        "Yes",
        "Is it raining where Bob lives? Answer yes or no.",
    )
    .await;
    assert!(result.contains("\"rainy\""), "{result}");
    assert!(!result.contains("order A7"), "{result}");
    let requests = model.requests();
    assert!(!format!("{:?}", requests[1].messages).contains("order A7 costs $ref:r"));
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
        .planning(Planning::Only)
        .build()
        .unwrap();
    assert!(!agent.tool_definitions()[0].description.contains("answer("));
    assert!(
        !agent
            .system_prompt()
            .contains(toolplan_planner::ANSWER_IN_PLAN_INSTRUCTIONS)
    );
}

#[tokio::test]
async fn an_answer_that_refers_to_nothing_goes_back_to_the_model() {
    // `echo` declares no output schema, so the missing field is found when the answer is written.
    let (_, result) = plan_then_reply(
        json!({"steps": [
            {"id": "w", "tool": "echo", "arguments": {"text": r#"{"celsius": 3}"#}}],
            "answer": "It is $ref:w.fahrenheit °F.", "output_steps": ["w"]}),
        "It is 3 °C in Oslo.",
        "How cold is it in Oslo?",
    )
    .await;
    assert!(
        result.contains("$ref:w.fahrenheit with no value"),
        "{result}"
    );
    // With get_weather's output schema, the same answer does not get past validation.
    let (_, result) = plan_then_reply(
        json!({"steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}}],
            "answer": "It is $ref:w.fahrenheit °F.", "output_steps": ["w"]}),
        "It is 3 °C in Oslo.",
        "How cold is it in Oslo?",
    )
    .await;
    assert!(
        result.contains("get_weather's result has temp, condition, city"),
        "{result}"
    );
}

#[tokio::test]
async fn an_answer_that_leaves_out_the_final_step_is_a_guess() {
    // The answer inserts where Dave lives but not its weather, the last thing the plan finds out:
    // "sunny" was written before the results.
    let (_, result) = plan_then_reply(
        json!({"thought": "Where Dave lives, then its weather.", "steps": [
            {"id": "u", "tool": "get_user", "arguments": {"name": "Dave"}},
            {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}}],
            "answer": "It is sunny in $ref:u.city."}),
        "It is clear in Oslo.",
        "What is the weather like where Dave lives?",
    )
    .await;
    assert!(result.contains("\"Oslo\""), "{result}");
}

#[tokio::test]
async fn a_question_that_needs_a_judgement_is_decoded_with_a_null_answer() {
    let plan = json!({"thought": "Bob's city, then its weather.", "steps": [
        {"id": "u", "tool": "get_user", "arguments": {"name": "Bob"}},
        {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}}],
        "answer": null});
    let (model, _) = plan_then_reply(plan, "Yes", "Is it raining where Bob lives?").await;
    let answer_field = |r: &toolplan_llm::ChatRequest| {
        r.tools[0].strict_parameters.as_ref().unwrap()["properties"]["answer"].clone()
    };
    let requests = model.requests();
    assert_eq!(answer_field(&requests[0]), json!({"type": "null"}));
    // The schema shown is the same for every question.
    assert!(
        requests[0].tools[0].parameters["properties"]["answer"]["type"]
            == json!(["string", "null"])
    );

    // A question answered by the results in words may take text.
    let (model, _) = plan_then_reply(
        json!({"steps": [{"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}}],
               "answer": null}),
        "3 °C.",
        "How cold is it in Oslo?",
    )
    .await;
    assert!(answer_field(&model.requests()[0])["anyOf"].is_array());
}

#[tokio::test]
async fn a_dry_run_takes_the_answer_field_as_a_run_does() {
    let model = Arc::new(ScriptedModel::new([ScriptedModel::calls(&[(
        "execute_tool_plan",
        json!({"thought": "Oslo's weather.", "steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}}],
            "answer": "It is $ref:w.temp °C in Oslo."}),
    )])]));
    let proposal = answering_agent(Arc::clone(&model))
        .propose("How cold is it in Oslo?", &Default::default())
        .await
        .unwrap();
    // No problem, so nothing was sent back to be fixed; the answer stays in the call.
    assert_eq!(proposal.plan_problems, vec![Vec::<String>::new()]);
    assert_eq!((proposal.record.llm_calls, proposal.record.repairs), (1, 0));
    assert_eq!(
        proposal.calls[0].arguments["answer"],
        json!("It is $ref:w.temp °C in Oslo.")
    );
}
