//! The plan schemas: the typed schema holds each step to its tool and accepts only plans the engine
//! compiles; the `answer` field sits after the steps; a registry that holds `execute_tool_plan` still
//! refuses plans that call it.

use std::sync::Arc;

use serde_json::{Value, json};
use toolplan_core::{Engine, Problem};
use toolplan_demo as demo;
use toolplan_planner::{ANSWER_MAX_CHARS, ArgumentsStyle, ExecuteToolPlan, typed_plan_schema};

fn valid(schema: &Value, instance: &Value) -> bool {
    jsonschema::validator_for(schema)
        .expect("a valid JSON Schema")
        .is_valid(instance)
}

#[test]
fn typed_schema_holds_each_step_to_its_tool() {
    let schema = typed_plan_schema(&demo::registry());
    for ok in [
        json!({"thought": "t", "steps": [{"id": "a", "tool": "get_weather", "arguments": {"location": "Tokyo"}}]}),
        json!({"thought": "Weather, then twice its temperature.", "steps": [
            {"id": "a", "tool": "get_weather", "arguments": {"location": "Tokyo"}},
            {"id": "b", "tool": "calculator", "arguments": {"expression": "$ref:a.temp * 2"}},
            {"id": "c", "tool": "sleep", "arguments": {"ms": "$ref:b", "value": "$ref:a"}}],
         "output_steps": ["b", "c"]}),
    ] {
        assert!(valid(&schema, &ok), "{ok}");
    }
    for bad in [
        json!({"steps": [{"id": "a", "tool": "get_weather", "arguments": {"location": "Tokyo"}}]}),
        json!({"thought": "t", "steps": []}),
        json!({"thought": "t", "steps": [{"id": "a", "tool": "get_weather", "arguments": {"city": "Tokyo"}}]}),
        json!({"thought": "t", "steps": [{"id": "a", "tool": "get_weather", "arguments": "{\"location\": \"Tokyo\"}"}]}),
        json!({"thought": "t", "steps": [{"id": "a", "tool": "nope", "arguments": {}}]}),
        json!({"thought": "t", "steps": [{"id": "a b", "tool": "echo", "arguments": {"text": 1}}]}),
        json!({"thought": "t", "steps": [{"id": "c", "tool": "sleep", "arguments": {"ms": "soon"}}]}),
        json!({"thought": "t", "steps": [{"id": "c", "tool": "execute_tool_plan", "arguments": {"steps": []}}]}),
    ] {
        assert!(!valid(&schema, &bad), "{bad}");
    }
}

#[test]
fn every_plan_the_typed_schema_accepts_compiles() {
    let engine = Engine::new(Arc::new(demo::registry()));
    let plan = json!({"thought": "Oslo's weather, then arithmetic.", "steps": [
        {"id": "a", "tool": "get_weather", "arguments": {"location": "Oslo"}},
        {"id": "b", "tool": "calculator", "arguments": {"expression": "$ref:a.temp + 1"}},
        {"id": "c", "tool": "sleep", "arguments": {"ms": "$ref:b", "value": "$ref:a.city"}}],
        "output_steps": ["c"]});
    assert!(valid(&typed_plan_schema(engine.tools()), &plan));
    assert!(engine.compile_value(plan).is_ok());
}

#[test]
fn the_answer_field_sits_after_the_steps() {
    let planner =
        ExecuteToolPlan::new(Arc::new(Engine::new(Arc::new(demo::registry())))).with_answer_field();
    let strict = planner.typed_parameters();
    let order: Vec<&String> = strict["properties"].as_object().unwrap().keys().collect();
    assert_eq!(order, ["thought", "steps", "answer", "output_steps"]);
    assert_eq!(strict["required"], json!(["thought", "steps", "answer"]));
    let validator = jsonschema::validator_for(&strict).unwrap();
    let plan = |answer: Value| {
        json!({"thought": "t", "steps": [{"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}}],
               "answer": answer})
    };
    assert!(validator.is_valid(&plan(json!("It is $ref:w.temp °C in Oslo."))));
    assert!(validator.is_valid(&plan(json!(null))));
    let long = "a".repeat(ANSWER_MAX_CHARS as usize + 1);
    for bad in [json!(""), json!(long), json!(3)] {
        assert!(!validator.is_valid(&plan(bad.clone())), "{bad}");
    }
    let mut without = plan(json!(null));
    without.as_object_mut().unwrap().remove("answer");
    assert!(!validator.is_valid(&without));
    // The schema the model reads: the field is optional and explained.
    let loose = toolplan_core::Tool::parameters(&planner);
    let order: Vec<&String> = loose["properties"].as_object().unwrap().keys().collect();
    assert_eq!(order, ["thought", "steps", "answer", "output_steps"]);
    assert_eq!(
        loose["required"],
        toolplan_planner::plan_schema(ArgumentsStyle::Either)["required"]
    );
    assert!(loose["properties"]["answer"]["description"].is_string());
}

#[test]
fn recursion_is_rejected_even_when_the_meta_tool_is_registered() {
    let inner = Arc::new(Engine::new(Arc::new(demo::registry())));
    let mut tools = demo::registry();
    tools
        .register(Arc::new(ExecuteToolPlan::new(inner)))
        .unwrap();
    let outer = Engine::new(Arc::new(tools));
    let err = outer
        .compile_value(json!({"steps": [
            {"id": "s1", "tool": "execute_tool_plan",
             "arguments": {"steps": [{"id": "x", "tool": "echo", "arguments": {"text": "hi"}}]}}
        ]}))
        .unwrap_err();
    assert_eq!(
        err.problems,
        vec![Problem::RecursivePlan { step: "s1".into() }]
    );
}
