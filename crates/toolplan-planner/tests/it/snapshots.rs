//! The text a model reads, pinned word for word: `execute_tool_plan`'s description and schemas in
//! every listing, against `snapshots/execute_tool_plan.json`. A change here changes what models are
//! shown (and what the agent benchmarks measured): make it on purpose, and update the file.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use toolplan_core::{Engine, FnTool, Tool, ToolRegistry};
use toolplan_demo as demo;
use toolplan_planner::{ArgumentsStyle, ExecuteToolPlan, ToolListing};

const SNAPSHOTS: &str = include_str!("snapshots/execute_tool_plan.json");

fn demo_engine() -> Arc<Engine> {
    Arc::new(Engine::new(Arc::new(demo::registry())))
}

fn empty_engine() -> Arc<Engine> {
    Arc::new(Engine::new(Arc::new(ToolRegistry::new())))
}

/// The demo tools and a tool named `answer` (an agent's answer step).
fn answer_engine() -> Arc<Engine> {
    let mut tools = demo::registry();
    let answer = FnTool::new(
        "answer",
        "The final answer.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}}),
        |arguments, _| async move { Ok(arguments) },
    );
    tools.register(Arc::new(answer)).unwrap();
    Arc::new(Engine::new(Arc::new(tools)))
}

/// The description, and the schemas the snapshot holds for this case.
fn shown(planner: &ExecuteToolPlan, expected: &Value) -> Value {
    let mut out = Map::new();
    out.insert("description".into(), json!(planner.description()));
    if expected.get("parameters").is_some() {
        out.insert("parameters".into(), planner.parameters());
    }
    if expected.get("typed_parameters").is_some() {
        out.insert("typed_parameters".into(), planner.typed_parameters());
    }
    Value::Object(out)
}

#[test]
fn what_a_model_reads_is_unchanged_word_for_word() {
    let snapshots: Value = serde_json::from_str(SNAPSHOTS).unwrap();
    let mut cases: Vec<(String, ExecuteToolPlan)> = Vec::new();
    for (name, listing) in [
        ("descriptions", ToolListing::Descriptions),
        ("schemas", ToolListing::Schemas),
        ("signatures", ToolListing::Signatures),
    ] {
        let demo = ExecuteToolPlan::new(demo_engine()).listing(listing);
        let empty = ExecuteToolPlan::new(empty_engine()).listing(listing);
        let hiding = ExecuteToolPlan::new(demo_engine())
            .hiding(&["fail", "compare_data"])
            .listing(listing);
        cases.push((name.to_owned(), demo));
        cases.push((format!("{name}_empty"), empty));
        cases.push((format!("{name}_hiding"), hiding));
    }
    let omitted = ExecuteToolPlan::new(demo_engine()).listing(ToolListing::Omitted);
    cases.push(("omitted".to_owned(), omitted));
    // The default listing, with arguments as JSON text.
    let json_string =
        ExecuteToolPlan::new(demo_engine()).with_arguments_style(ArgumentsStyle::JsonString);
    cases.push(("json_string_arguments".to_owned(), json_string));
    let cases_len = cases.len();
    // `UPDATE_SNAPSHOTS=1 cargo test …` writes what is shown now into the file instead (then review
    // the diff: it is what models will read).
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    let mut now = Map::new();
    for (name, planner) in cases {
        let expected = &snapshots[name.as_str()];
        let shown = shown(&planner, expected);
        if update {
            now.insert(name, shown);
            continue;
        }
        // Compared as text: the order of a schema's keys is part of what the model reads.
        assert_eq!(shown.to_string(), expected.to_string(), "{name}");
    }
    // The answer example (its schemas are pinned with the agent's planning modes).
    let planner = ExecuteToolPlan::new(answer_engine())
        .listing(ToolListing::Signatures)
        .with_answer_field();
    if update {
        now.insert(
            "signatures_answer_example".to_owned(),
            json!({"description": planner.description()}),
        );
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/it/snapshots/execute_tool_plan.json"
        );
        let text = serde_json::to_string_pretty(&Value::Object(now)).unwrap() + "\n";
        std::fs::write(path, text).unwrap();
        return;
    }
    assert_eq!(
        planner.description(),
        snapshots["signatures_answer_example"]["description"]
    );
    assert_eq!(snapshots.as_object().unwrap().len(), cases_len + 1);
}
