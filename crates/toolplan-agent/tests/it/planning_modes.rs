//! What each [`Planning`] mode shows the model, pinned word for word against
//! `snapshots/planning_modes.json`: the system prompt (with and without the caller's instructions),
//! the tools offered, and `execute_tool_plan` as offered (description, schema, typed schema). A change
//! here changes what models are shown: make it on purpose, and update the file.

use std::sync::Arc;

use serde_json::{Value, json};
use toolplan_agent::scripted::ScriptedModel;
use toolplan_agent::{Agent, Planning};
use toolplan_demo as demo;

const SNAPSHOTS: &str = include_str!("snapshots/planning_modes.json");

fn agent(planning: Planning, instructions: &str) -> Agent {
    Agent::builder("t")
        .model(Arc::new(ScriptedModel::new([])))
        .instructions(instructions)
        .tools(demo::tools())
        .planning(planning)
        .build()
        .unwrap()
}

#[test]
fn every_planning_mode_shows_the_model_the_same_text() {
    let snapshots: Value = serde_json::from_str(SNAPSHOTS).unwrap();
    let modes = [
        ("none", Planning::Off),
        ("offered", Planning::Offered),
        ("offered_with_answer", Planning::OfferedWithAnswer),
        ("only", Planning::Only),
        ("only_with_answer", Planning::OnlyWithAnswer),
    ];
    assert_eq!(snapshots.as_object().unwrap().len(), modes.len());
    // `UPDATE_SNAPSHOTS=1 cargo test …` writes what is shown now into the file instead (then review
    // the diff: it is what models will read).
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    let mut now = serde_json::Map::new();
    for (name, planning) in modes {
        let expected = &snapshots[name];
        let with = agent(planning, "You compare data.");
        let without = agent(planning, "");
        let tools = with.tool_definitions();
        let mut shown = json!({
            "system": with.system_prompt(),
            "system_without_instructions": without.system_prompt(),
            "tool_names": tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        });
        if let Some(planner) = tools.first().filter(|t| t.name == "execute_tool_plan") {
            shown["planner"] = serde_json::to_value(planner).unwrap();
            assert_eq!(without.tool_definitions()[0], *planner, "{name}");
        }
        if update {
            now.insert(name.to_owned(), shown);
            continue;
        }
        // Compared as text: the order of a schema's keys is part of what the model reads.
        assert_eq!(shown.to_string(), expected.to_string(), "{name}");
    }
    if update {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/it/snapshots/planning_modes.json"
        );
        let text = serde_json::to_string_pretty(&Value::Object(now)).unwrap() + "\n";
        std::fs::write(path, text).unwrap();
    }
}
