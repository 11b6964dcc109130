//! Output schemas: a reference into the result of a tool that says what it returns is checked
//! before anything runs (a field it does not return, a type the argument cannot take), and an
//! output that breaks its schema fails its step. Hostile output schemas are refused at
//! registration or read within bounds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use toolplan_core::{
    Engine, FnTool, Problem, RegistryError, RunControl, StepStatus, Tool, ToolContext,
    ToolRegistry, ToolResult,
};

/// A tool that returns `output` and declares `schema` as its output schema.
fn returning(name: &str, output: Value, schema: Value) -> Arc<dyn Tool> {
    Arc::new(
        FnTool::new(
            name,
            "Returns a fixed value.",
            json!({"type": "object"}),
            move |_, _| {
                let output = output.clone();
                async move { Ok(output) }
            },
        )
        .with_output_schema(schema),
    )
}

/// A tool that counts its calls and takes a number `n`.
fn counting_number_taker(calls: Arc<AtomicUsize>) -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "half",
        "Halves n.",
        json!({"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}),
        move |arguments, _| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move { Ok(json!(arguments["n"].as_f64().unwrap_or_default() / 2.0)) }
        },
    ))
}

fn engine_with(extra: Vec<Arc<dyn Tool>>) -> Engine {
    let mut tools = toolplan_demo::registry();
    tools.register_all(extra).unwrap();
    Engine::new(Arc::new(tools))
}

fn problems(engine: &Engine, plan: Value) -> Vec<String> {
    match engine.compile_value(plan) {
        Ok(_) => Vec::new(),
        Err(invalid) => invalid.problems.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn a_field_the_tool_does_not_return_is_a_problem_of_the_plan() {
    let engine = engine_with(vec![]);
    let found = problems(
        &engine,
        json!({"steps": [
            {"id": "e", "tool": "get_user", "arguments": {"name": "Erin"}},
            {"id": "t", "tool": "calculator", "arguments": {"expression": "$ref:e.temperature - 1"}},
            {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:e.cty"}},
            {"id": "f", "tool": "calculator", "arguments": {"expression": "$ref:w.temperature * 2"}}
        ]}),
    );
    assert_eq!(
        found,
        [
            "step 't': $ref:e.temperature names no field of what step 'e' returns: get_user's result has name, city, team",
            "step 'w': $ref:e.cty names no field of what step 'e' returns: get_user's result has name, city, team; did you mean city?",
            "step 'f': $ref:w.temperature names no field of what step 'w' returns: get_weather's result has temp, condition, city; did you mean temp?",
        ]
    );
    // The fields it does return are fine, whole or inside text.
    assert!(
        problems(
            &engine,
            json!({"steps": [
                {"id": "e", "tool": "get_user", "arguments": {"name": "Erin"}},
                {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:e.city"}},
                {"id": "t", "tool": "calculator", "arguments": {"expression": "$ref:w.temp * 9 / 5 + 32"}}
            ]})
        )
        .is_empty()
    );
}

#[test]
fn nested_fields_and_array_items_are_looked_up_where_they_are() {
    let schema = json!({"type": "object", "properties": {
        "address": {"type": "object", "properties": {"street": {"type": "string"}, "zip": {"type": "string"}}},
        "orders": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}},
        "label": {"type": "string"}}});
    let engine = engine_with(vec![returning("profile", json!({}), schema)]);
    let plan = |reference: &str| {
        json!({"steps": [
            {"id": "p", "tool": "profile", "arguments": {}},
            {"id": "e", "tool": "echo", "arguments": {"text": reference}}
        ]})
    };
    assert!(problems(&engine, plan("$ref:p.address.zip")).is_empty());
    assert!(problems(&engine, plan("$ref:p.orders.-1.sku")).is_empty());
    assert_eq!(
        problems(&engine, plan("$ref:p.address.town")),
        [
            "step 'e': $ref:p.address.town names no field of what step 'p' returns: 'p.address' of profile has street, zip"
        ]
    );
    assert_eq!(
        problems(&engine, plan("$ref:p.orders.0.skus")),
        [
            "step 'e': $ref:p.orders.0.skus names no field of what step 'p' returns: 'p.orders.0' of profile has sku; did you mean sku?"
        ]
    );
    assert_eq!(
        problems(&engine, plan("$ref:p.label.text")),
        [
            "step 'e': $ref:p.label.text names no field of what step 'p' returns: 'p.label' of profile has no fields"
        ]
    );
}

#[tokio::test]
async fn a_reference_whose_type_cannot_fit_its_argument_stops_the_plan_before_any_call() {
    let calls = Arc::new(AtomicUsize::new(0));
    let engine = engine_with(vec![counting_number_taker(Arc::clone(&calls))]);
    let found = problems(
        &engine,
        json!({"steps": [
            {"id": "u", "tool": "get_user", "arguments": {"name": "Erin"}},
            {"id": "h", "tool": "half", "arguments": {"n": "$ref:u.city"}}
        ]}),
    );
    assert_eq!(
        found,
        [
            "step 'h': argument 'n' must be a number, but $ref:u.city is a string (the output schema of get_user)"
        ]
    );
    // An integer is a number: this plan runs.
    let plan = engine
        .compile_value(json!({"steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}},
            {"id": "h", "tool": "half", "arguments": {"n": "$ref:w.temp"}}
        ]}))
        .unwrap();
    let run = engine.run(&plan, RunControl::default()).await;
    assert_eq!(run.output("h"), Some(&json!(1.5)));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_output_that_breaks_its_schema_fails_its_step_and_skips_what_depends_on_it() {
    let liar = returning(
        "liar",
        json!({"city": 7}),
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    );
    let engine = engine_with(vec![liar]);
    let plan = engine
        .compile_value(json!({"steps": [
            {"id": "l", "tool": "liar", "arguments": {}},
            {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:l.city"}}
        ]}))
        .unwrap();
    let run = engine.run(&plan, RunControl::default()).await;
    let l = run.step("l").unwrap();
    assert_eq!(l.status, StepStatus::Failed);
    let error = l.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("the output does not match the output schema of tool 'liar'")
            && error.contains("/city"),
        "{error}"
    );
    assert_eq!(run.step("w").unwrap().status, StepStatus::Skipped);
}

#[test]
fn tools_without_an_output_schema_or_with_an_open_one_take_any_path() {
    let open = returning("open", json!({}), json!({"type": "object"}));
    let engine = engine_with(vec![open]);
    for tool in ["echo", "open"] {
        let arguments = if tool == "echo" {
            json!({"text": "x"})
        } else {
            json!({})
        };
        assert!(
            problems(
                &engine,
                json!({"steps": [
                    {"id": "a", "tool": tool, "arguments": arguments},
                    {"id": "b", "tool": "echo", "arguments": {"text": "$ref:a.any.path.0"}}
                ]})
            )
            .is_empty(),
            "{tool}"
        );
    }
}

// ---- hostile output schemas (an MCP server or a config file supplies them) ----

/// A tool whose output schema is `depth` levels of `properties` deep, built when asked for (a
/// value that deep cannot even be cloned or dropped by recursion).
struct DeepOutput {
    depth: usize,
}

#[async_trait]
impl Tool for DeepOutput {
    fn name(&self) -> &str {
        "t"
    }
    fn description(&self) -> &str {
        "A tool with a very deep output schema."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn call(&self, _arguments: Value, _ctx: ToolContext) -> ToolResult {
        Ok(json!({}))
    }
    fn output_schema(&self) -> Option<Value> {
        let mut schema = json!({"type": "object"});
        for _ in 0..self.depth {
            let mut properties = Map::new();
            properties.insert("x".to_owned(), schema);
            let mut map = Map::new();
            map.insert("properties".to_owned(), Value::Object(properties));
            schema = Value::Object(map);
        }
        Some(schema)
    }
}

#[test]
fn output_schemas_that_are_not_schemas_or_nest_too_deep_are_refused_at_registration() {
    let refused: [(Arc<dyn Tool>, &str); 3] = [
        (
            Arc::new(DeepOutput { depth: 100_000 }),
            "it nests deeper than 128 levels",
        ),
        (
            returning("t", json!({}), json!([1, 2])),
            "it is not a JSON object",
        ),
        (returning("t", json!({}), json!({"type": 12})), ""),
    ];
    for (tool, why) in refused {
        let mut tools = ToolRegistry::new();
        let error = tools.register(tool).unwrap_err();
        assert!(
            matches!(error, RegistryError::InvalidOutputSchema { .. }),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(
            text.starts_with("tool 't' has an invalid output schema: ") && text.contains(why),
            "{text}"
        );
        assert!(tools.is_empty());
    }
    // Deep but within the limit: registered, and looked up without recursion trouble.
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(DeepOutput { depth: 60 })).unwrap();
}

#[test]
fn a_huge_union_is_read_within_bounds_and_claims_nothing() {
    let branches: Vec<Value> = (0..2_000)
        .map(|i| json!({"type": "object", "properties": {format!("f{i}"): {"type": "string"}}}))
        .collect();
    let engine = engine_with(vec![returning(
        "wide",
        json!({}),
        json!({"anyOf": branches}),
    )]);
    let started = std::time::Instant::now();
    let found = problems(
        &engine,
        json!({"steps": [
            {"id": "w", "tool": "wide", "arguments": {}},
            {"id": "e", "tool": "echo", "arguments": {"text": "$ref:w.nothing_like_it"}}
        ]}),
    );
    assert!(found.is_empty(), "{found:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // A problem names the plan, never panics: an unknown field of a known tool among many steps.
    let many: Vec<Value> = (0..200)
        .map(|i| json!({"id": format!("s{i}"), "tool": "echo", "arguments": {"text": "$ref:u.nope"}}))
        .chain([json!({"id": "u", "tool": "get_user", "arguments": {"name": "Bob"}})])
        .collect();
    let invalid = engine.compile_value(json!({"steps": many})).unwrap_err();
    assert_eq!(invalid.problems.len(), 200);
    assert!(matches!(
        invalid.problems[0],
        Problem::UnknownOutputField { .. }
    ));
}
