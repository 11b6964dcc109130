//! Tool schemas that contradict themselves (issue 26.4): registered with one consistent reading and
//! warnings, which the argument check and everything a model reads share; schemas of any depth
//! register or are refused without a crash.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};
use toolplan_core::{
    Engine, FnTool, MAX_SCHEMA_DEPTH, RegistryError, RunControl, StepStatus, Tool, ToolContext,
    ToolRegistry, ToolResult, reconcile,
};

/// A tool that returns its arguments.
fn echoing(name: &str, schema: Value) -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        name,
        "Returns its arguments.",
        schema,
        |a, _| async move { Ok(a) },
    ))
}

/// The laundry tool of BFCL, whose boolean parameter lists strings as its values.
fn laundry_schema() -> Value {
    json!({"type": "dict", "properties": {
        "has_laundry": {"type": "boolean", "enum": ["True", "False", "dontcare"],
                        "description": "Whether the place has a laundry service."},
        "city": {"type": "str"}},
        "required": ["has_laundry"]})
}

fn laundry_engine() -> Engine {
    let mut registry = ToolRegistry::new();
    registry
        .register(echoing("find_place", laundry_schema()))
        .unwrap();
    registry
        .register(echoing(
            "say",
            json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        ))
        .unwrap();
    Engine::new(Arc::new(registry))
}

#[test]
fn a_contradictory_schema_registers_with_one_reading_and_warnings() {
    let engine = laundry_engine();
    let registry = engine.tools();
    let tool = registry.get("find_place").unwrap();
    assert_eq!(
        tool.schema(),
        &json!({"type": "object", "properties": {
            "has_laundry": {"type": "boolean", "enum": [true, false],
                            "description": "Whether the place has a laundry service."},
            "city": {"type": "string"}},
            "required": ["has_laundry"]})
    );
    let warnings: Vec<(&str, &str)> = registry.warnings().collect();
    assert_eq!(
        warnings,
        [
            (
                "find_place",
                r#"/type: "dict" is not a JSON Schema type; read as "object""#
            ),
            (
                "find_place",
                r#"/properties/has_laundry/enum: the values "True", "False", "dontcare" are not boolean; read as enum [true, false]"#
            ),
            (
                "find_place",
                r#"/properties/city/type: "str" is not a JSON Schema type; read as "string""#
            ),
        ]
    );
    assert_eq!(tool.warnings().len(), 3);
    assert!(registry.get("say").unwrap().warnings().is_empty());
}

#[tokio::test]
async fn true_is_accepted_and_dontcare_refused_clearly() {
    let engine = laundry_engine();
    let plan = engine
        .compile_value(json!({"steps": [
            {"id": "a", "tool": "find_place", "arguments": {"has_laundry": true, "city": "Oslo"}}]}))
        .unwrap();
    let run = engine.run(&plan, RunControl::default()).await;
    assert!(run.all_ok(), "{}", run.summary());
    assert_eq!(
        run.output("a"),
        Some(&json!({"has_laundry": true, "city": "Oslo"}))
    );

    let invalid = engine
        .compile_value(json!({"steps": [
            {"id": "a", "tool": "find_place", "arguments": {"has_laundry": "dontcare"}}]}))
        .unwrap_err();
    let text = invalid.to_string();
    assert!(text.contains("/has_laundry"), "{text}");
    assert!(text.contains("\"dontcare\""), "{text}");
    assert!(text.contains("boolean"), "{text}");

    // The same value arriving by reference fails its step when it runs.
    let plan = engine
        .compile_value(json!({"steps": [
            {"id": "pick", "tool": "say", "arguments": {"text": "dontcare"}},
            {"id": "a", "tool": "find_place", "arguments": {"has_laundry": "$ref:pick.text"}}]}))
        .unwrap();
    let run = engine.run(&plan, RunControl::default()).await;
    let step = run.steps.iter().find(|s| s.id == "a").unwrap();
    assert_eq!(step.status, StepStatus::Failed);
    let error = step.error.as_deref().unwrap_or_default();
    assert!(error.contains("/has_laundry"), "{error}");
    assert!(error.contains("\"dontcare\""), "{error}");
}

#[test]
fn a_schema_that_stays_invalid_is_refused_as_before() {
    let mut registry = ToolRegistry::new();
    for schema in [
        json!({"type": 12}),
        json!({"type": "dict", "enum": 5}),
        json!({"type": "object", "properties": {"x": {"type": "string", "pattern": "("}}}),
    ] {
        assert!(
            matches!(
                registry.register(echoing("bad", schema.clone())),
                Err(RegistryError::InvalidSchema { .. })
            ),
            "{schema}"
        );
    }
    assert!(registry.is_empty());
}

/// A tool whose schema nests `not` `depth` levels deep, built (and dropped by the caller) without
/// recursion, so that only the registry is tested.
struct Deep {
    depth: usize,
}

impl Deep {
    fn schema(&self) -> Value {
        let mut schema = json!({"type": "boolean", "enum": ["True"]});
        for _ in 0..self.depth {
            let mut map = Map::new();
            map.insert("not".to_owned(), schema);
            schema = Value::Object(map);
        }
        schema
    }
}

#[async_trait]
impl Tool for Deep {
    fn name(&self) -> &str {
        "deep"
    }
    fn description(&self) -> &str {
        "A tool with a very deep schema."
    }
    fn parameters(&self) -> Value {
        self.schema()
    }
    async fn call(&self, arguments: Value, _ctx: ToolContext) -> ToolResult {
        Ok(arguments)
    }
}

#[test]
fn a_schema_ten_thousand_levels_deep_is_refused_without_a_crash() {
    let mut registry = ToolRegistry::new();
    let err = registry
        .register(Arc::new(Deep { depth: 10_000 }))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "tool 'deep' has an invalid parameter schema: it nests deeper than 128 levels"
    );
    assert!(registry.is_empty());
}

#[test]
fn a_schema_as_deep_as_json_text_allows_registers_with_a_warning() {
    // 125 levels of `not` above a leaf of 2: 127 levels of JSON, as deep as serde_json parses.
    let deep = Deep { depth: 125 };
    let text = deep.schema().to_string();
    assert!(serde_json::from_str::<Value>(&text).is_ok());
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(deep)).unwrap();
    let tool = registry.get("deep").unwrap();
    assert_eq!(tool.warnings().len(), 1, "{:?}", tool.warnings());
    assert!(
        tool.warnings()[0].contains(&format!("deeper than {MAX_SCHEMA_DEPTH} levels")),
        "{:?}",
        tool.warnings()
    );
    // The part below the limit is left as it is: its enum allows no boolean, so every value fails
    // the leaf, and so passes an odd number of `not`s above it.
    assert!(tool.check_arguments(&json!({})).is_ok());
    assert!(tool.check_arguments(&json!(true)).is_ok());
    // One level more does not parse.
    let text = format!("[{}]", "[".repeat(127) + &"]".repeat(127));
    assert!(serde_json::from_str::<Value>(&text).is_err());
}

#[test]
fn the_demo_tools_schemas_are_consistent() {
    for tool in toolplan_demo::tools() {
        let schema = tool.parameters();
        let r = reconcile(schema.clone());
        assert!(r.warnings.is_empty(), "{}: {:?}", tool.name(), r.warnings);
        assert_eq!(r.schema, schema, "{}", tool.name());
    }
    assert_eq!(toolplan_demo::registry().warnings().count(), 0);
}
