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
