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
    // The model replies from the lookup's result, told that only the answer failed; its error is
    // not shown (the 1.5B model wrote such an error out as its reply).
    assert!(result.contains("celsius"), "{result}");
    assert!(
        result.ends_with(toolplan_planner::ANSWER_FAILED_HINT),
        "{result}"
    );
    assert!(!result.contains("fahrenheit"), "{result}");
    // With get_weather's output schema, the same answer does not get past validation: the plan
    // runs without it (as one that names a step the plan lacks), and the model replies from the
    // results; the conversation keeps the plan without its answer.
    let (model, result) = plan_then_reply(
        json!({"steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}}],
            "answer": "It is $ref:w.fahrenheit °F.", "output_steps": ["w"]}),
        "It is 3 °C in Oslo.",
        "How cold is it in Oslo?",
    )
    .await;
    assert!(
        result.starts_with("Plan executed successfully (1 steps)"),
        "{result}"
    );
    assert!(result.contains("\"temp\":3"), "{result}");
    let kept = &model.requests()[1].messages;
    assert!(
        kept.iter()
            .flat_map(|m| &m.tool_calls)
            .all(|c| c.arguments["answer"].is_null())
    );
    // The same for a choice that reads a field the lookup does not return.
    let (_, result) = plan_then_reply(
        json!({"steps": [
            {"id": "u", "tool": "get_user", "arguments": {"name": "Grace"}}],
            "answer": {"if": "$ref:u.temp > 20", "then": "Grace", "else": "Heidi"}}),
        "Grace",
        "Who lives in the warmer city, Grace or Heidi?",
    )
    .await;
    assert!(result.contains("\"city\":\"Berlin\""), "{result}");
    // A plan with problems of its own still goes back whole.
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[(
            "execute_tool_plan",
            json!({"steps": [
                {"id": "u", "tool": "get_user", "arguments": {"name": "Grace"}},
                {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:u.town"}}],
                "answer": "It is $ref:w.fahrenheit °F."}),
        )]),
        ScriptedModel::answer("Sorry."),
    ]));
    let out = answering_agent(Arc::clone(&model))
        .interact("How warm is it where Grace lives?")
        .await
        .unwrap();
    let result = &tool_messages(&out.messages)[0].content;
    assert!(result.contains("invalid plan"), "{result}");
    assert!(result.contains("u.town"), "{result}");
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
async fn a_judgement_written_as_a_choice_answers_in_one_model_call() {
    let question = "Is it raining where Bob lives? Answer yes or no.";
    let model = Arc::new(ScriptedModel::new([ScriptedModel::calls(&[(
        "execute_tool_plan",
        json!({"thought": "Bob's city, then its weather.", "steps": [
            {"id": "u", "tool": "get_user", "arguments": {"name": "Bob"}},
            {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}}],
            // London is "rainy": the condition compares words by their stems.
            "answer": {"if": "$ref:w.condition == 'rain'",
                       "then": "Yes, it is $ref:w.condition in $ref:u.city.", "else": "No."}}),
    )])]));
    let out = answering_agent(Arc::clone(&model))
        .interact(question)
        .await
        .unwrap();
    assert_eq!(out.answer, "Yes, it is rainy in London.");
    assert_eq!(out.record.llm_calls, 1);
    assert!(out.record.answered_by_plan);

    // Which of two: the other branch.
    let model = Arc::new(ScriptedModel::new([ScriptedModel::calls(&[(
        "execute_tool_plan",
        json!({"thought": "Both cities' weather.", "steps": [
            {"id": "b", "tool": "get_weather", "arguments": {"location": "Berlin"}},
            {"id": "l", "tool": "get_weather", "arguments": {"location": "London"}}],
            "answer": {"if": "$ref:b.temp > $ref:l.temp", "then": "London", "else": "Berlin"}}),
    )])]));
    let out = answering_agent(model)
        .interact("Which city is colder right now, Berlin or London?")
        .await
        .unwrap();
    assert_eq!(out.answer, "Berlin");
    assert_eq!(out.record.llm_calls, 1);
}

#[tokio::test]
async fn a_choice_that_cannot_be_evaluated_goes_back_to_the_model() {
    // The condition compares a whole result, not one of its values: the steps' results stand,
    // the answer step fails, and the model replies from the results.
    let plan = json!({"thought": "Oslo's weather.", "steps": [
        {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}}],
        "answer": {"if": "$ref:w > 0", "then": "Yes", "else": "No"}});
    let (_, result) = plan_then_reply(plan, "No", "Is it warm in Oslo?").await;
    assert!(
        result.starts_with("Plan executed successfully (1 steps)"),
        "{result}"
    );
    assert!(result.contains("\"temp\":3"), "{result}");
    assert!(
        result.ends_with(toolplan_planner::ANSWER_FAILED_HINT),
        "{result}"
    );

    // A choice whose condition reads no result is a guess: dropped, and the model replies.
    let plan = json!({"thought": "Oslo's weather.", "steps": [
        {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}}],
        "answer": {"if": "1 > 0", "then": "Yes, $ref:w.condition", "else": "No"}});
    let (model, _) = plan_then_reply(plan, "No", "Is it warm in Oslo?").await;
    let kept = &model.requests()[1].messages;
    assert!(
        kept.iter()
            .flat_map(|m| &m.tool_calls)
            .all(|c| c.arguments["answer"].is_null()),
        "the unused choice is not kept in the conversation"
    );
}

#[tokio::test]
async fn a_hostile_condition_fails_the_answer_alone() {
    // Nested past the limit, as the model wrote it: the answer fails, the results stand.
    let deep = format!("{}$ref:w.temp > 0{}", "(".repeat(40), ")".repeat(40));
    let plan = json!({"thought": "Oslo's weather.", "steps": [
        {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}}],
        "answer": {"if": deep, "then": "Yes", "else": "No"}});
    let (_, result) = plan_then_reply(plan, "Yes", "Is it above zero in Oslo?").await;
    assert!(result.contains("\"temp\":3"), "{result}");
    // An answer step written by hand, in the evaluator's own syntax: held to the same limits.
    let plan = json!({"thought": "Oslo's weather.", "steps": [
        {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}},
        {"id": "a", "tool": "answer", "arguments": {
            "if": format!("v0 > 0{}", " && true".repeat(300)),
            "operands": ["$ref:w.temp"], "then": "Yes", "else": "No"}}]});
    let (_, result) = plan_then_reply(plan, "Yes", "Is it above zero in Oslo?").await;
    assert!(result.contains("\"temp\":3"), "{result}");
    let plan = json!({"thought": "Oslo's weather.", "steps": [
        {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}},
        {"id": "a", "tool": "answer", "arguments": {
            "if": format!("{}v0 > 0{}", "(".repeat(500), ")".repeat(500)),
            "operands": ["$ref:w.temp"], "then": "Yes", "else": "No"}}]});
    let (_, result) = plan_then_reply(plan, "Yes", "Is it above zero in Oslo?").await;
    assert!(result.contains("\"temp\":3"), "{result}");
}

#[tokio::test]
async fn a_question_that_needs_a_judgement_is_decoded_with_a_choice_answer() {
    let plan = json!({"thought": "Bob's city, then its weather.", "steps": [
        {"id": "u", "tool": "get_user", "arguments": {"name": "Bob"}},
        {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}}],
        "answer": null});
    let (model, _) = plan_then_reply(plan, "Yes", "Is it raining where Bob lives?").await;
    let answer_field = |r: &toolplan_llm::ChatRequest| {
        r.tools[0].strict_parameters.as_ref().unwrap()["properties"]["answer"].clone()
    };
    let requests = model.requests();
    assert_eq!(
        answer_field(&requests[0]),
        toolplan_planner::choice_answer_schema()
    );
    // The schema shown and the description say so too.
    assert_eq!(
        requests[0].tools[0].parameters["properties"]["answer"],
        toolplan_planner::choice_answer_shown(false)
    );
    assert!(
        requests[0].tools[0]
            .description
            .contains("This question asks for a judgement on the results, so answer is a choice"),
        "{}",
        requests[0].tools[0].description
    );
    // The worked example is a plan for a yes-or-no judgement: its lookups, and a choice that
    // compares them, with no calculator step.
    let description = &requests[0].tools[0].description;
    assert!(
        description.contains(r#""if": "$ref:p1.price > $ref:p2.price", "then": "Yes, "#),
        "{description}"
    );
    assert!(
        !description.contains("calculator subtracts"),
        "{description}"
    );

    // A question that chooses between named options reads the example for that form.
    let plan = json!({"steps": [
        {"id": "b", "tool": "get_weather", "arguments": {"location": "Berlin"}},
        {"id": "l", "tool": "get_weather", "arguments": {"location": "London"}}],
        "answer": null});
    let (model, _) = plan_then_reply(plan, "Berlin", "Which is colder, Berlin or London?").await;
    let description = &model.requests()[0].tools[0].description;
    assert!(
        description.contains(r#""then": "A7", "else": "B2""#),
        "{description}"
    );

    // A question answered by the results in words may take text.
    let (model, _) = plan_then_reply(
        json!({"steps": [{"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}}],
               "answer": null}),
        "3 °C.",
        "How cold is it in Oslo?",
    )
    .await;
    let request = &model.requests()[0];
    assert!(answer_field(request)["anyOf"].is_array());
    assert_eq!(
        request.tools[0].parameters["properties"]["answer"]["type"],
        json!(["string", "null"])
    );
    assert!(!request.tools[0].description.contains("choice"));
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
