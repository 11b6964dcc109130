//! The `execute_tool_plan` tool ([`ExecuteToolPlan`]): what an LLM sees (name, schema, description) and
//! what it gets back (a summary, or the list of problems of an invalid plan).

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolplan_core::{
    EXECUTE_TOOL_PLAN, Engine, Limits, Problem, RunControl, RunOutcome, StepStatus, Tool,
    ToolContext, ToolError, ToolRegistry,
};
use toolplan_demo as demo;
use toolplan_planner::{
    ArgumentsStyle, ExecuteToolPlan, ToolListing, plan_schema, plan_schema_for_tools,
};

fn meta_tool() -> ExecuteToolPlan {
    ExecuteToolPlan::new(Arc::new(Engine::new(Arc::new(demo::registry()))))
}

fn weather_plan() -> Value {
    json!({
        "steps": [
            {"id": "weather_tokyo", "tool": "get_weather", "arguments": "{\"location\": \"Tokyo\"}"},
            {"id": "weather_london", "tool": "get_weather", "arguments": {"location": "London"}},
            {"id": "comparison", "tool": "compare_data",
             "arguments": {"data_a": "$ref:weather_tokyo", "data_b": "$ref:weather_london"}}
        ],
        "output_steps": ["comparison"]
    })
}

const WEATHER_SUMMARY: &str = "Plan executed successfully (3 steps).\nResults:\n- comparison: {\"equal\":false,\"same\":[],\"different\":{\"temp\":{\"a\":18,\"b\":12,\"difference\":6},\"condition\":{\"a\":\"sunny\",\"b\":\"rainy\"},\"city\":{\"a\":\"Tokyo\",\"b\":\"London\"}}}";

#[test]
fn name() {
    assert_eq!(meta_tool().name(), "execute_tool_plan");
    assert_eq!(meta_tool().name(), EXECUTE_TOOL_PLAN);
}

#[test]
fn schema() {
    let schema = meta_tool().parameters();
    let names: Vec<String> = demo::registry().names().map(str::to_owned).collect();
    assert_eq!(
        schema,
        plan_schema_for_tools(ArgumentsStyle::Either, &names)
    );
    // Steps may only name the engine's tools.
    assert_eq!(
        schema["properties"]["steps"]["items"]["properties"]["tool"]["enum"],
        json!([
            "echo",
            "concat",
            "sleep",
            "fail",
            "get_weather",
            "get_user",
            "calculator",
            "compare_data"
        ])
    );
    let mut without_enum = schema.clone();
    without_enum["properties"]["steps"]["items"]["properties"]["tool"]
        .as_object_mut()
        .unwrap()
        .remove("enum");
    assert_eq!(without_enum, plan_schema(ArgumentsStyle::Either));
    assert_eq!(schema["type"], json!("object"));
    assert_eq!(schema["required"], json!(["steps"]));
    assert_eq!(schema["additionalProperties"], json!(false));
    let step = &schema["properties"]["steps"]["items"];
    assert_eq!(step["required"], json!(["id", "tool", "arguments"]));
    assert_eq!(step["additionalProperties"], json!(false));
    assert_eq!(
        step["properties"]["id"]["pattern"],
        json!("^[A-Za-z0-9_-]+$")
    );
    assert_eq!(
        step["properties"]["arguments"]["type"],
        json!(["object", "string"])
    );
    assert_eq!(
        schema["properties"]["output_steps"]["items"]["type"],
        json!("string")
    );

    let strict = meta_tool().with_arguments_style(ArgumentsStyle::JsonString);
    assert_eq!(
        strict.parameters()["properties"]["steps"]["items"]["properties"]["arguments"]["type"],
        json!("string")
    );
}

#[test]
fn the_schema_is_a_valid_json_schema_that_accepts_the_weather_plan() {
    // Registering compiles the schema; a broken schema would be refused.
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(meta_tool())).unwrap();
    let registered = registry.get(EXECUTE_TOOL_PLAN).unwrap();
    registered.check_arguments(&weather_plan()).unwrap();
    let err = registered
        .check_arguments(&json!({"steps": [{"id": "a b", "tool": "echo", "arguments": {}}]}))
        .unwrap_err();
    assert!(err.contains("/steps/0/id"), "{err}");
}

#[test]
fn description_lists_every_tool() {
    let tool = meta_tool();
    let description = tool.description();
    assert!(
        description.starts_with("Run several tool calls as one plan"),
        "{description}"
    );
    assert!(description.contains("$ref:<step_id>"), "{description}");
    assert!(
        description.contains("\nTools a plan can call:\n"),
        "{description}"
    );
    for t in demo::tools() {
        let line = format!("- {}: {}", t.name(), t.description());
        assert!(
            description.contains(&line),
            "{line:?} missing from {description}"
        );
    }
    assert_eq!(
        description.lines().filter(|l| l.starts_with("- ")).count(),
        demo::tools().len()
    );
    assert!(!description.contains("- execute_tool_plan:"));
}

#[test]
fn description_can_be_replaced() {
    assert_eq!(
        meta_tool().with_description("custom").description(),
        "custom"
    );
}

#[tokio::test]
async fn valid_plan_returns_the_summary_text() {
    let out = meta_tool()
        .call(weather_plan(), ToolContext::detached())
        .await
        .unwrap();
    assert_eq!(out, Value::String(WEATHER_SUMMARY.to_owned()));
}

#[tokio::test]
async fn a_plan_with_failures_is_still_a_successful_call() {
    let out = meta_tool()
        .call(
            json!({"steps": [
                {"id": "s1", "tool": "fail", "arguments": {"message": "no"}},
                {"id": "s2", "tool": "echo", "arguments": {"text": "$ref:s1"}}
            ]}),
            ToolContext::detached(),
        )
        .await
        .unwrap();
    assert_eq!(
        out,
        json!(
            "Plan completed with errors: 1 of 2 steps failed, 1 skipped.\nErrors:\n- s1 (failed): no\n- s2 (skipped): Skipped because dependency 's1' failed"
        )
    );
}

#[tokio::test]
async fn invalid_plan_is_invalid_arguments_listing_the_problems() {
    let err = meta_tool()
        .call(
            json!({"steps": [{"id": "s1", "tool": "x", "arguments": {}}]}),
            ToolContext::detached(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ToolError::InvalidArguments("invalid plan: Unknown tool 'x' in step 's1'".into())
    );
    assert_eq!(
        err.to_string(),
        "invalid arguments: invalid plan: Unknown tool 'x' in step 's1'"
    );

    let err = meta_tool()
        .call(
            json!({"steps": [
                {"id": "a", "tool": "echo", "arguments": {"text": "$ref:c"}},
                {"id": "b", "tool": "execute_tool_plan", "arguments": {}}
            ]}),
            ToolContext::detached(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ToolError::InvalidArguments(
            "invalid plan: 2 problems:\n- step 'a' references unknown step 'c' in \"$ref:c\"\n- step 'b' calls execute_tool_plan: recursive plans are not allowed".into()
        )
    );
}

#[tokio::test]
async fn plan_given_as_a_json_string() {
    let tool = meta_tool();
    let text = serde_json::to_string(&weather_plan()).unwrap();
    let run = tool
        .execute(Value::String(text.clone()), RunControl::default())
        .await
        .unwrap();
    assert!(run.all_ok());
    assert_eq!(run.summary(), WEATHER_SUMMARY);
    // And through the tool interface.
    assert_eq!(
        tool.call(Value::String(text), ToolContext::detached())
            .await
            .unwrap(),
        json!(WEATHER_SUMMARY)
    );
}

#[tokio::test]
async fn a_string_that_is_not_a_plan_is_rejected() {
    let err = meta_tool()
        .execute(json!("run the weather tools please"), RunControl::default())
        .await
        .unwrap_err();
    // A string is read as plan text; this one is not JSON.
    assert_eq!(err.problems.len(), 1, "{err}");
    assert!(
        matches!(&err.problems[0], Problem::NotJson(m) if m.contains("line 1 column 1")),
        "{err}"
    );
}

#[tokio::test]
async fn execute_returns_the_full_run() {
    let run = meta_tool()
        .execute(weather_plan(), RunControl::default())
        .await
        .unwrap();
    assert_eq!(run.steps.len(), 3);
    assert_eq!(run.outputs, vec![2]);
    assert_eq!(run.step("weather_tokyo").unwrap().status, StepStatus::Ok);
    assert_eq!(run.output("comparison").unwrap()["equal"], json!(false));
}

#[tokio::test]
async fn the_call_context_cancels_the_plan() {
    let cancel = CancellationToken::new();
    cancel.cancel();
    let ctx = ToolContext {
        step_id: Arc::from("outer"),
        cancel,
        extension: None,
    };
    let out = meta_tool()
        .call(
            json!({"steps": [{"id": "s", "tool": "sleep", "arguments": {"ms": 60000}}]}),
            ctx,
        )
        .await
        .unwrap();
    let text = out.as_str().unwrap();
    assert!(text.starts_with("Plan cancelled: "), "{text}");

    let cancel = CancellationToken::new();
    cancel.cancel();
    let run = meta_tool()
        .execute(
            json!({"steps": [{"id": "s", "tool": "sleep", "arguments": {"ms": 60000}}]}),
            RunControl::with_cancel(cancel),
        )
        .await
        .unwrap();
    assert_eq!(run.outcome, RunOutcome::Cancelled);
}

#[tokio::test]
async fn the_meta_tool_can_be_called_from_a_plan_of_another_engine_only_by_name_not_recursively() {
    // A registry that holds the meta tool still refuses plans that call it.
    let mut registry = demo::registry();
    registry.register(Arc::new(meta_tool())).unwrap();
    let outer = Arc::new(Engine::new(Arc::new(registry)));
    let tool = ExecuteToolPlan::new(Arc::clone(&outer));
    assert!(!tool.description().contains("- execute_tool_plan:"));
    let err = tool
        .call(
            json!({"steps": [{"id": "nested", "tool": "execute_tool_plan", "arguments": {}}]}),
            ToolContext::detached(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ToolError::InvalidArguments(
            "invalid plan: step 'nested' calls execute_tool_plan: recursive plans are not allowed"
                .into()
        )
    );
}

#[tokio::test]
async fn plan_text_over_max_plan_bytes_is_rejected_when_given_to_the_tool() {
    let text = serde_json::to_string(&weather_plan()).unwrap();
    let limits = Limits {
        max_plan_bytes: 100,
        ..Limits::default()
    };
    assert!(text.len() > 100);
    let engine = Arc::new(Engine::new(Arc::new(demo::registry())).with_limits(limits));
    // The engine enforces the limit on plan text ...
    assert_eq!(
        engine.compile(&text).unwrap_err().problems,
        vec![Problem::PlanTooLarge {
            size: text.len(),
            limit: 100
        }]
    );
    // ... and so must the tool, which receives the same text from the model.
    let err = ExecuteToolPlan::new(engine)
        .execute(Value::String(text.clone()), RunControl::default())
        .await
        .map(|run| run.summary())
        .unwrap_err();
    assert_eq!(
        err.problems,
        vec![Problem::PlanTooLarge {
            size: text.len(),
            limit: 100
        }]
    );
}

#[tokio::test]
async fn step_limits_apply_to_plans_given_to_the_tool() {
    let limits = Limits {
        max_steps: 2,
        max_argument_bytes: 30,
        ..Limits::default()
    };
    let tool = ExecuteToolPlan::new(Arc::new(
        Engine::new(Arc::new(demo::registry())).with_limits(limits),
    ));
    let mut plan = weather_plan();
    plan.as_object_mut().unwrap().remove("output_steps");
    let err = tool.execute(plan, RunControl::default()).await.unwrap_err();
    assert_eq!(
        err.problems,
        vec![Problem::TooManySteps { count: 3, limit: 2 }]
    );
    let err = tool
        .execute(
            json!({"steps": [{"id": "e", "tool": "echo", "arguments": {"text": "0123456789012345678901234567890"}}]}),
            RunControl::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.problems,
        vec![Problem::ArgumentsTooLarge {
            step: "e".into(),
            size: 42,
            limit: 30
        }]
    );
}

#[test]
fn the_tool_list_can_be_left_out_of_the_description() {
    let full = meta_tool();
    let short = meta_tool().listing(ToolListing::Omitted);
    assert!(full.description().contains("- get_weather:"));
    assert!(!short.description().contains("get_weather"));
    assert!(
        short
            .description()
            .starts_with("Run several tool calls as one plan")
    );
    // The schema still limits steps to the engine's tools.
    assert_eq!(full.parameters(), short.parameters());
}

#[test]
fn signatures_describe_every_tool_in_a_line() {
    let planner = meta_tool().listing(ToolListing::Signatures);
    let description = planner.description();
    assert!(description.starts_with("Runs tool calls as one plan"));
    assert!(description.contains(r#""$ref:o1.sku""#), "{description}");
    for line in [
        "\n- get_weather(location: string) -> {temp, condition, city}: Current weather of a city",
        "\n- get_user(name: string) -> {name, city, team}: A person in the company directory",
        "\n- calculator(expression: string) -> number: Evaluates",
        "\n- compare_data(data_a: any, data_b: any) -> {equal, a, b, difference, same, different}: Compares",
        "\n- fail(message?: string): Always fails",
    ] {
        assert!(
            description.contains(line),
            "{line} missing from {description}"
        );
    }
    assert!(!description.contains("execute_tool_plan("));
    // Far shorter than the description with every JSON Schema.
    let schemas = meta_tool().listing(ToolListing::Schemas);
    assert!(description.len() < schemas.description().len());
}

#[test]
fn typed_parameters_type_each_step_by_its_tool() {
    let planner = meta_tool();
    let typed = planner.typed_parameters();
    let steps = typed["properties"]["steps"]["items"]["anyOf"]
        .as_array()
        .expect("one branch per tool");
    assert_eq!(steps.len(), demo::registry().len());
    let validator = jsonschema::validator_for(&typed).expect("valid schema");
    assert!(validator.is_valid(
        &json!({"thought": "Where Erin lives, then its weather.", "steps": [
        {"id": "u", "tool": "get_user", "arguments": {"name": "Erin"}},
        {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}}],
        "output_steps": ["w"]})
    ));
    assert!(!validator.is_valid(&json!({"thought": "t", "steps": [
        {"id": "u", "tool": "get_user", "arguments": {"location": "Erin"}}]})));
}

#[tokio::test]
async fn hidden_tools_are_left_unlisted_but_still_run() {
    let engine = Arc::new(Engine::new(Arc::new(demo::registry())));
    let planner = ExecuteToolPlan::new(Arc::clone(&engine)).hiding(&["fail", "compare_data"]);
    for description in [
        planner.description().to_owned(),
        ExecuteToolPlan::new(Arc::clone(&engine))
            .hiding(&["fail", "compare_data"])
            .listing(ToolListing::Signatures)
            .description()
            .to_owned(),
        ExecuteToolPlan::new(Arc::clone(&engine))
            .hiding(&["fail", "compare_data"])
            .listing(ToolListing::Schemas)
            .description()
            .to_owned(),
    ] {
        assert!(description.contains("- get_weather"), "{description}");
        assert!(!description.contains("- fail"), "{description}");
        assert!(!description.contains("- compare_data"), "{description}");
    }
    let names =
        planner.parameters()["properties"]["steps"]["items"]["properties"]["tool"]["enum"].clone();
    assert_eq!(
        names,
        json!([
            "echo",
            "concat",
            "sleep",
            "get_weather",
            "get_user",
            "calculator"
        ])
    );
    let typed = planner.typed_parameters();
    let branches = typed["properties"]["steps"]["items"]["anyOf"]
        .as_array()
        .unwrap();
    assert_eq!(branches.len(), 6);
    // A plan that calls a hidden tool still runs it.
    let run = planner
        .execute(
            json!({"steps": [{"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}},
                             {"id": "c", "tool": "compare_data",
                              "arguments": {"data_a": "$ref:w", "data_b": "$ref:w"}}]}),
            RunControl::default(),
        )
        .await
        .unwrap();
    assert!(run.all_ok(), "{}", run.summary());
    assert_eq!(run.output("c").unwrap()["equal"], json!(true));
}

/// What the outer run attached to the call (the Python binding's event loop) reaches the tools of
/// the plan the meta tool runs.
#[tokio::test]
async fn the_call_context_extension_reaches_the_plans_tools() {
    let mut registry = ToolRegistry::new();
    registry
        .register(Arc::new(toolplan_core::FnTool::new(
            "whose",
            "The run's caller.",
            json!({"type": "object", "properties": {}}),
            |_: Value, ctx: ToolContext| async move {
                Ok(json!(
                    ctx.extension
                        .as_ref()
                        .and_then(|e| e.get::<&'static str>())
                        .copied()
                ))
            },
        )))
        .unwrap();
    let tool = ExecuteToolPlan::new(Arc::new(Engine::new(Arc::new(registry))));
    let ctx = ToolContext {
        extension: Some(toolplan_core::RunExtension::new("outer caller")),
        ..ToolContext::detached()
    };
    let out = tool
        .call(
            json!({"steps": [{"id": "w", "tool": "whose", "arguments": {}}]}),
            ctx,
        )
        .await
        .unwrap();
    assert!(out.as_str().unwrap().contains("outer caller"), "{out}");
}
