//! Output schemas from the outside (issue 21.1): an MCP server whose tools declare
//! `outputSchema` (`fake_mcp_server.py --typed`). `toolplan tools` shows them, a plan that names
//! a field the tool does not return, or passes a text where a number goes, is refused before
//! anything runs, and a result that breaks its schema fails its step.

use std::process::Command;

use serde_json::{Value, json};

use crate::common;
use common::fake_mcp::{fake_config, run_plan, toolplan};

fn typed_config(dir: &std::path::Path) -> String {
    fake_config(dir, &["--typed"])
}

#[test]
fn tools_lists_each_output_schema() {
    let dir = tempfile::tempdir().unwrap();
    let config = typed_config(dir.path());
    let out = Command::new(toolplan())
        .args(["tools", "--tools", "none", "--config", &config, "--json"])
        .output()
        .unwrap();
    common::assert_ok(&out);
    let tools: Value = serde_json::from_slice(&out.stdout).unwrap();
    let lookup = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "lookup")
        .unwrap();
    assert_eq!(
        lookup["output"]["properties"]["city"],
        json!({"type": "string"})
    );
}

#[test]
fn a_plan_is_checked_against_what_the_tools_return_before_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let config = typed_config(dir.path());
    let marker = dir.path().join("written.txt");
    let marker_path = marker.to_string_lossy().into_owned();
    // A typo in a field, and a text where `add` takes a number; the `write` step would leave a
    // file if anything ran.
    let plan = json!({"steps": [
        {"id": "u", "tool": "lookup", "arguments": {"name": "Carol"}},
        {"id": "w", "tool": "write", "arguments": {"path": marker_path, "text": "$ref:u.cty"}},
        {"id": "s", "tool": "add", "arguments": {"a": "$ref:u.team", "b": 1}}
    ]});
    let out = run_plan(&config, &plan, &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for part in [
        "step 'w': $ref:u.cty names no field of what step 'u' returns: lookup's result has name, city, team; did you mean city?",
        "step 's': argument 'a' must be a number, but $ref:u.team is a string (the output schema of lookup)",
    ] {
        assert!(stderr.contains(part), "{part:?} not in {stderr}");
    }
    assert!(!marker.exists());
    // Fixed, it runs: the structured content is the step's output.
    let plan = json!({"steps": [
        {"id": "u", "tool": "lookup", "arguments": {"name": "Carol"}},
        {"id": "w", "tool": "write", "arguments": {"path": marker_path, "text": "$ref:u.city"}}
    ]});
    let out = run_plan(&config, &plan, &[]);
    common::assert_ok(&out);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "Paris");
}

#[test]
fn a_result_that_breaks_its_output_schema_fails_its_step() {
    let dir = tempfile::tempdir().unwrap();
    let config = typed_config(dir.path());
    let plan = json!({"steps": [
        {"id": "l", "tool": "liar", "arguments": {}},
        {"id": "e", "tool": "echo", "arguments": {"text": "$ref:l.city"}}
    ]});
    let out = run_plan(&config, &plan, &[]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = report["errors"]["l"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.contains("the output does not match the output schema of tool 'liar'")
            && error.contains("/city"),
        "{report}"
    );
    assert_eq!(report["steps"]["e"]["status"], "skipped", "{report}");
}
