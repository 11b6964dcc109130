//! Plans answered with their results (`AgentBuilder::results_answer`): one model call when the plan
//! succeeds and brings no answer of its own; the model answers as usual a question that asks for a
//! judgement, and a plan that failed.

use std::sync::Arc;

use serde_json::{Value, json};
use toolplan_agent::scripted::ScriptedModel;
use toolplan_agent::{Agent, Interaction, Planning};
use toolplan_demo as demo;
use toolplan_llm::Role;

/// An agent in plan-answer mode whose model sends `plan` and then answers, answering with results
/// or not.
async fn ask(plan: Value, question: &str, with_results: bool) -> Interaction {
    ask_model(plan, question, with_results).await.0
}

/// As [`ask`], also giving the model (for its requests).
async fn ask_model(
    plan: Value,
    question: &str,
    with_results: bool,
) -> (Interaction, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", plan)]),
        ScriptedModel::answer("the model's own answer"),
    ]));
    let out = agent(Arc::clone(&model), with_results)
        .interact(question)
        .await
        .unwrap();
    (out, model)
}

/// A plan-answer agent on `model`, answering with results or not.
fn agent(model: Arc<ScriptedModel>, with_results: bool) -> Agent {
    Agent::builder("test")
        .model(model)
        .tools(demo::tools())
        .planning(Planning::OnlyWithAnswer)
        .results_answer(with_results)
        .max_turns(4)
        .build()
        .unwrap()
}

fn chain(answer: Value) -> Value {
    json!({"thought": "Where Dave lives, then its weather.", "steps": [
        {"id": "u", "tool": "get_user", "arguments": {"name": "Dave"}},
        {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}}],
        "answer": answer})
}

#[tokio::test]
async fn a_plan_without_an_answer_answers_with_its_results_in_one_model_call() {
    let out = ask(chain(Value::Null), "How cold is it where Dave lives?", true).await;
    assert_eq!(out.record.llm_calls, 1);
    assert!(out.record.answered_with_results);
    assert!(!out.record.answered_by_plan);
    // The final step first, then the step it read; literal arguments shown, references not.
    let lines: Vec<&str> = out.answer.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.answer);
    assert!(lines[0].starts_with("get_weather: "), "{}", out.answer);
    assert!(
        lines[0].contains("Oslo") && lines[0].contains('3'),
        "{}",
        out.answer
    );
    assert!(lines[1].starts_with("get_user(Dave): "), "{}", out.answer);
    assert_eq!(out.messages.last().unwrap().role, Role::Assistant);
    assert_eq!(out.messages.last().unwrap().content, out.answer);
}

#[tokio::test]
async fn a_guessed_answer_is_replaced_by_the_results() {
    // An answer that inserts no result is a guess the agent does not take: the results answer.
    let out = ask(
        chain(json!("It is mild where Dave lives.")),
        "How cold is it where Dave lives?",
        true,
    )
    .await;
    assert_eq!(out.record.llm_calls, 1);
    assert!(out.answer.contains("Oslo"), "{}", out.answer);
    assert!(!out.answer.contains("mild"), "{}", out.answer);
}

#[tokio::test]
async fn the_plans_own_answer_comes_before_its_results() {
    let out = ask(
        chain(json!("In $ref:u.city it is $ref:w.temp °C.")),
        "How cold is it where Dave lives?",
        true,
    )
    .await;
    assert_eq!(out.answer, "In Oslo it is 3 °C.");
    assert!(out.record.answered_by_plan);
    assert!(!out.record.answered_with_results);
}

#[tokio::test]
async fn an_answer_that_inserts_a_missing_value_gives_way_to_the_results() {
    // `e.temp` is not in the echoed result (a tool that declares no output schema, so the plan
    // passes validation): the answer step fails, the lookup did not.
    let plan = json!({"thought": "x", "steps": [
        {"id": "e", "tool": "echo", "arguments": {"text": {"city": "Oslo"}}}],
        "answer": "It is $ref:e.temp °C in $ref:e.city."});
    let out = ask(plan.clone(), "How cold is it in Oslo?", true).await;
    assert_eq!(out.record.llm_calls, 1);
    assert!(out.record.answered_with_results);
    assert_eq!(out.answer, "Oslo");
    // Without results answers the model reads the error and answers.
    let out = ask(plan, "How cold is it in Oslo?", false).await;
    assert_eq!(out.record.llm_calls, 2);
}

#[tokio::test]
async fn a_plan_sent_back_before_goes_back_to_the_model() {
    // Sent back once by the first-plan check (its thought names a tool no step calls), then
    // completed: the completed plan, whole by its thought, is still the model's to answer from.
    let mut first = chain(Value::Null);
    first["thought"] =
        json!("get_user gives Dave's city, get_weather its weather, calculator the difference.");
    let mut completed = first.clone();
    completed["steps"].as_array_mut().unwrap().push(
        json!({"id": "c", "tool": "calculator", "arguments": {"expression": "$ref:w.temp - 1"}}),
    );
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", first)]),
        ScriptedModel::calls(&[("execute_tool_plan", completed)]),
        ScriptedModel::answer("the model's own answer"),
    ]));
    let out = agent(model, true)
        .interact("How cold is it where Dave lives?")
        .await
        .unwrap();
    assert_eq!(out.record.llm_calls, 3);
    assert!(!out.record.answered_with_results);
    assert_eq!(out.answer, "the model's own answer");
}

#[tokio::test]
async fn named_output_steps_are_the_answer_and_one_result_is_written_alone() {
    let mut plan = chain(Value::Null);
    plan["output_steps"] = json!(["u"]);
    let out = ask(plan, "Which team is Dave on?", true).await;
    assert_eq!(out.record.llm_calls, 1);
    assert!(!out.answer.contains("get_user"), "{}", out.answer);
    assert!(out.answer.contains("team: "), "{}", out.answer);
    assert!(!out.answer.contains("temp"), "{}", out.answer);
}

#[tokio::test]
async fn a_judgement_on_the_results_is_the_models() {
    for question in [
        "Is it raining where Dave lives? Answer yes or no.",
        "Which is colder, Berlin or Oslo?",
    ] {
        let (out, model) = ask_model(chain(Value::Null), question, true).await;
        assert_eq!(out.record.llm_calls, 2, "{question}");
        assert_eq!(out.answer, "the model's own answer");
        assert!(!out.record.answered_with_results);
        // Asked the usual way: the whole conversation, the tools offered.
        assert_eq!(out.record.compact_answers, 0);
        assert!(!model.requests()[1].tools.is_empty());
    }
}

#[tokio::test]
async fn a_plan_with_a_failed_step_goes_back_to_the_model() {
    let plan = json!({"thought": "x", "steps": [
        {"id": "w", "tool": "get_weather", "arguments": {"location": "Atlantis"}}],
        "answer": null});
    let (out, model) = ask_model(plan, "How cold is it in Atlantis?", true).await;
    assert_eq!(out.record.llm_calls, 2);
    assert_eq!(out.answer, "the model's own answer");
    // The whole conversation, the tools offered, so that the model can plan again.
    assert!(!model.requests()[1].tools.is_empty());
}

#[tokio::test]
async fn off_by_default_the_model_answers_from_the_results() {
    let out = ask(
        chain(Value::Null),
        "How cold is it where Dave lives?",
        false,
    )
    .await;
    assert_eq!(out.record.llm_calls, 2);
    assert_eq!(out.answer, "the model's own answer");
}
