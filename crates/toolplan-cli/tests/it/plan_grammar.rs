//! The typed plan schema of the demo tools turns into a llama.cpp grammar, so the local model's plans
//! are held to each tool's arguments (and a schema llama.cpp cannot convert would silently fall back
//! to the looser one: this test is what notices).
#![cfg(feature = "local")]
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use toolplan_core::{Engine, Tool};
use toolplan_demo as demo;
use toolplan_llm::ToolDefinition;
use toolplan_llm::provider::local::reply::ReplyMode;
use toolplan_llm::provider::local::reply_grammar;
use toolplan_planner::ExecuteToolPlan;

#[test]
fn the_typed_plan_schema_of_the_demo_tools_converts_into_a_grammar() {
    let planner = ExecuteToolPlan::new(Arc::new(Engine::new(Arc::new(demo::registry()))));
    let shown = ToolDefinition::new(planner.name(), planner.description(), planner.parameters());
    let loose = reply_grammar(std::slice::from_ref(&shown), ReplyMode::AnswerOrTools)
        .unwrap()
        .unwrap();
    let strict = reply_grammar(
        &[shown.with_strict_parameters(planner.typed_parameters())],
        ReplyMode::AnswerOrTools,
    )
    .unwrap()
    .unwrap();
    // Argument names appear only in the typed grammar; `$ref:` is allowed for the non-text `ms`.
    for name in ["location", "expression", "data_a", "ref:"] {
        assert!(!loose.contains(name), "{name} in the loose grammar");
        assert!(strict.contains(name), "{name} missing from\n{strict}");
    }
}

#[test]
fn the_plan_schema_with_an_answer_converts_into_a_grammar() {
    let planner = ExecuteToolPlan::new(Arc::new(Engine::new(Arc::new(demo::registry()))));
    let shown = ToolDefinition::new(planner.name(), planner.description(), planner.parameters());
    let grammar_of = |strict| {
        reply_grammar(
            &[shown.clone().with_strict_parameters(strict)],
            ReplyMode::ToolsOnly,
        )
        .unwrap()
        .unwrap()
    };
    let plain = grammar_of(planner.typed_parameters());
    let grammar = grammar_of(
        ExecuteToolPlan::new(Arc::clone(planner.engine()))
            .with_answer_field()
            .typed_parameters(),
    );
    // Tool calls only: "answer" can come from the plan's field alone.
    assert!(!plain.contains("answer"), "{plain}");
    for piece in ["answer", "null", "output_steps"] {
        assert!(grammar.contains(piece), "{piece} missing from\n{grammar}");
    }
}

/// The local model's default output budget holds a plan of the agent's default maximum number of
/// steps, written as the model writes it (a thought at its longest, then each step a lookup or a
/// comparison of two earlier ones), counted with the model's own tokenizer.
#[tokio::test]
async fn the_default_token_budget_fits_a_plan_of_the_default_maximum_steps() {
    use serde_json::json;
    use toolplan_llm::provider::local::{self, LocalModel, LocalOptions};

    let n = toolplan_agent::DEFAULT_MAX_PLAN_STEPS;
    let cities = [
        "San Francisco, CA",
        "Buenos Aires",
        "Kuala Lumpur",
        "Johannesburg",
    ];
    let steps: Vec<_> = (0..n)
        .map(|i| {
            if i % 3 == 2 {
                json!({"id": format!("compare_{i}"), "tool": "compare_data",
                       "arguments": {"data_a": format!("$ref:weather_{}.temp", i - 2),
                                     "data_b": format!("$ref:weather_{}.temp", i - 1)}})
            } else {
                json!({"id": format!("weather_{i}"), "tool": "get_weather",
                       "arguments": {"location": cities[i % cities.len()]}})
            }
        })
        .collect();
    let thought =
        "x".repeat(toolplan_planner::THOUGHT_MAX_CHARS as usize / 2) + &" the weather".repeat(16);
    let reply = json!({"tool_calls": [{"name": "execute_tool_plan",
        "arguments": {"thought": thought, "steps": steps}}]});
    let text = serde_json::to_string_pretty(&reply).unwrap();
    let options = LocalOptions::default();
    let budget = options.default_max_tokens as usize;
    let model = LocalModel::load(&local::small_model_path(), options)
        .await
        .unwrap();
    let tokens = model.count_tokens(&text);
    assert!(
        tokens <= budget,
        "a plan of {n} steps takes {tokens} tokens, over the default budget of {budget}"
    );
    // And the limit is what the agent's plans are held to.
    let agent = toolplan_agent::Agent::builder("t")
        .model(Arc::new(toolplan_agent::scripted::ScriptedModel::new([])))
        .tools(demo::tools())
        .planning(toolplan_agent::Planning::Only)
        .build()
        .unwrap();
    let plan_tool = &agent.tool_definitions()[0];
    let strict = plan_tool.strict_parameters.as_ref().unwrap();
    assert_eq!(strict["properties"]["steps"]["maxItems"], json!(n));
}
