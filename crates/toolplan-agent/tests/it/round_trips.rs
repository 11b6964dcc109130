//! The agent loop with a scripted model: what a task costs with and without planning, calls of one
//! turn in parallel, the turn limit, model errors and cancellation.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toolplan_agent::AgentError;
use toolplan_agent::scripted::ScriptedModel;
use toolplan_llm::StopReason;
use toolplan_planner::{CUT_OFF_NOTE, PLANNING_INSTRUCTIONS};

use crate::support::{FINAL, agent, tool_messages, weather_plan};

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
    match &err {
        AgentError::Llm { record, .. } => {
            // The failed call is not counted; the turn it was for is.
            assert_eq!(record.llm_calls, 0);
            assert_eq!(record.turns, 1);
        }
        other => panic!("expected Llm, got {other:?}"),
    }
    assert!(err.record().is_some());

    let model = Arc::new(ScriptedModel::new([ScriptedModel::answer("never")]));
    let cancel = tokio_util::sync::CancellationToken::new();
    cancel.cancel();
    let err = agent(model, true)
        .interact_with("hi", &cancel)
        .await
        .unwrap_err();
    assert_eq!(err, AgentError::Cancelled);
}

#[tokio::test]
async fn a_plan_cut_off_at_the_token_limit_runs_its_whole_steps_and_says_so() {
    let plan = json!({"steps": [{"id": "a", "tool": "echo", "arguments": {"text": "first"}}]});
    let mut cut = ScriptedModel::calls(&[("execute_tool_plan", plan)]);
    cut.stop = StopReason::MaxTokens;
    let model = Arc::new(ScriptedModel::new([cut, ScriptedModel::answer("done")]));
    let interaction = agent(Arc::clone(&model), true)
        .interact("go")
        .await
        .unwrap();
    assert_eq!(interaction.answer, "done");
    assert_eq!(interaction.record.cut_replies, 1);
    assert_eq!(interaction.record.plan_steps, 1);
    let results = tool_messages(&interaction.messages);
    assert!(
        results[0].content.contains("first"),
        "{}",
        results[0].content
    );
    assert!(
        results[0].content.ends_with(CUT_OFF_NOTE),
        "{}",
        results[0].content
    );
}

#[tokio::test]
async fn a_reply_cut_off_before_any_call_was_whole_is_asked_once_more_and_then_fails() {
    // The reply wrote one value again and again until the token limit: nothing in it is usable.
    let looping = format!(
        r#"{{"tool_calls": [{{"name": "execute_tool_plan", "arguments": {{"steps": [{{"items": [{}"#,
        r#""pumpkin", "#.repeat(200)
    );
    let plan = json!({"steps": [{"id": "a", "tool": "echo", "arguments": {"text": "pumpkin"}}]});
    let model = Arc::new(ScriptedModel::with_errors([
        Err(ScriptedModel::cut_off(2048, &looping)),
        Ok(ScriptedModel::calls(&[("execute_tool_plan", plan)])),
        Ok(ScriptedModel::answer("done")),
    ]));
    let out = agent(Arc::clone(&model), true)
        .interact("go")
        .await
        .unwrap();
    assert_eq!(out.answer, "done");
    assert_eq!(out.record.unusable_cut_replies, 1);
    assert_eq!(out.record.llm_calls, 3);
    assert!(out.record.output_tokens >= 2048);
    // The second request is the first with a note after it that quotes how the reply ended; the
    // note is not kept in the conversation.
    let requests = model.requests();
    let first = &requests[0].messages;
    let second = &requests[1].messages;
    assert_eq!(second.len(), first.len() + 1);
    let note = &second[first.len()].content;
    assert!(note.starts_with("Your last reply was cut off"), "{note}");
    assert!(note.contains(r#""pumpkin", "pumpkin""#), "{note}");
    assert!(
        note.len() < 600,
        "the note quotes only the reply's end: {note}"
    );
    assert!(
        requests[2]
            .messages
            .iter()
            .all(|m| !m.content.starts_with("Your last reply was cut off"))
    );

    // Cut off twice: the second error ends the interaction, with both calls counted.
    let model = Arc::new(ScriptedModel::with_errors([
        Err(ScriptedModel::cut_off(2048, &looping)),
        Err(ScriptedModel::cut_off(2048, &looping)),
    ]));
    let err = agent(Arc::clone(&model), true)
        .interact("go")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cut off"), "{err}");
    let record = err.record().expect("a model error carries its record");
    assert_eq!(record.llm_calls, 1);
    assert_eq!(record.unusable_cut_replies, 1);
    assert_eq!(model.requests().len(), 2);
}
