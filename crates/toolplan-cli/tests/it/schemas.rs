//! Tool schemas that contradict themselves (issue 26.4), from the outside: a `--tool-defs` file and
//! an MCP server whose tool says `{"type": "boolean", "enum": ["True", "False", "dontcare"]}`, and a
//! Python-ish `"type": "dict"`. The user is warned once per contradiction on stderr, the model is
//! shown the one reading the argument check uses, and `toolplan tools` lists the warnings.

use std::process::Command;

use assert_cmd::prelude::*;
use serde_json::{Value, json};

use crate::common;
use common::fake_mcp::{fake_config, run_plan, toolplan};
use common::{completion, serve};

const LAUNDRY_WARNING: &str = r#"/properties/has_laundry/enum: the values "True", "False", "dontcare" are not boolean; read as enum [true, false]"#;

/// The definitions an attacker (or a careless benchmark) hands over.
fn definitions() -> Value {
    json!([
        {"type": "function", "function": {"name": "find_place", "description": "Finds a place to stay.",
         "parameters": {"type": "object", "properties": {
             "has_laundry": {"type": "boolean", "enum": ["True", "False", "dontcare"]}},
             "required": ["has_laundry"]}}},
        {"name": "book", "description": "Books a place.",
         "parameters": {"type": "dict", "properties": {"nights": {"type": "int"}}}}
    ])
}

#[test]
fn declared_tools_are_read_one_way_and_the_user_is_warned() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs.json");
    std::fs::write(&defs, definitions().to_string()).unwrap();
    let plan = json!({"steps": [
        {"id": "yes", "tool": "find_place", "arguments": {"has_laundry": true}},
        {"id": "any", "tool": "find_place", "arguments": {"has_laundry": "dontcare"}},
        {"id": "stay", "tool": "book", "arguments": {"nights": 2}}
    ]});
    let (url, seen) = serve(vec![completion(
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "execute_tool_plan", "arguments": plan.to_string()}}]}),
        700,
        90,
    )]);
    let out = Command::cargo_bin("toolplan")
        .unwrap()
        .args(["ask", "Find a place with laundry", "--model", "openai:test"])
        .args([
            "--base-url",
            &url,
            "--json",
            "--dry-run",
            "--repairs",
            "0",
            "--tool-defs",
        ])
        .arg(&defs)
        .current_dir(dir.path())
        .output()
        .unwrap();
    common::assert_ok(&out);
    let stderr = String::from_utf8(out.stderr).unwrap();
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning: tool"))
        .collect();
    // Without the reading: `book` could not be registered at all ("dict" is no JSON Schema type),
    // and the model was offered "dontcare", which the argument check then refused.
    assert_eq!(
        warnings,
        [
            format!("warning: tool 'find_place': {LAUNDRY_WARNING}").as_str(),
            r#"warning: tool 'book': /type: "dict" is not a JSON Schema type; read as "object""#,
            r#"warning: tool 'book': /properties/nights/type: "int" is not a JSON Schema type; read as "integer""#,
        ],
        "{stderr}"
    );
    // Only the step that says "dontcare" is a problem, and the problem says why.
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let problems = v["plan_problems"][0].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    let problem = problems[0].as_str().unwrap();
    assert!(problem.contains("any"), "{problem}");
    assert!(problem.contains("\"dontcare\""), "{problem}");
    // The model was shown the reading that the check uses.
    let requests = seen.lock().unwrap();
    let tools = requests[0]["tools"].as_array().unwrap();
    let shown = |name: &str| {
        tools
            .iter()
            .find(|t| t["function"]["name"] == name)
            .map(|t| t["function"]["parameters"].clone())
            .unwrap_or(Value::Null)
    };
    assert_eq!(
        shown("find_place")["properties"]["has_laundry"],
        json!({"type": "boolean", "enum": [true, false]})
    );
    assert_eq!(
        shown("book"),
        json!({"type": "object", "properties": {"nights": {"type": "integer"}}})
    );
    let planner = serde_json::to_string(&shown("execute_tool_plan")).unwrap();
    assert!(!planner.contains("dontcare"), "{planner}");
}

/// `toolplan tools --tool-defs`: the declared tools in the reading the argument check uses, each
/// contradiction warned of once and listed, and execute_tool_plan listing them as plan-only mode
/// shows them to the model.
#[test]
fn tools_lists_declared_tools_as_the_model_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs.json");
    std::fs::write(&defs, definitions().to_string()).unwrap();
    let list = |args: &[&str]| {
        Command::cargo_bin("toolplan")
            .unwrap()
            .arg("tools")
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let defs = defs.to_str().unwrap();

    let out = list(&[
        "--json",
        "--with-planner",
        "--plan-listing",
        "documented",
        "--tool-defs",
        defs,
    ]);
    common::assert_ok(&out);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.matches("warning: tool").count(), 3, "{stderr}");
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    // No built-in tool set beside declared tools unless one is named.
    assert_eq!(names, ["find_place", "book", "execute_tool_plan"]);
    assert_eq!(listed[0]["warnings"], json!([LAUNDRY_WARNING]));
    assert_eq!(
        listed[1]["parameters"],
        json!({"type": "object", "properties": {"nights": {"type": "integer"}}})
    );
    let description = listed[2]["description"].as_str().unwrap_or_default();
    for shown in [
        "- find_place(has_laundry: true|false): Finds a place to stay.",
        "- book(nights?: integer)",
    ] {
        assert!(description.contains(shown), "{description}");
    }
    assert!(!description.contains("dontcare"), "{description}");

    // Without --plan-listing, as the MCP server offers it beside the tools: names and descriptions.
    let out = list(&["--json", "--with-planner", "--tool-defs", defs]);
    common::assert_ok(&out);
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let description = listed[2]["description"].as_str().unwrap_or_default();
    assert!(
        description.contains("- find_place: Finds a place to stay."),
        "{description}"
    );

    // --plan-listing lists the planner's tools: it needs --with-planner.
    let out = list(&["--plan-listing", "documented"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--with-planner"));
}

#[test]
fn an_mcp_tool_is_read_one_way_listed_with_its_warning_and_run() {
    let dir = tempfile::tempdir().unwrap();
    let config = fake_config(dir.path(), &["--contradictory-schema"]);

    let out = Command::new(toolplan())
        .args(["tools", "--tools", "none", "--config", &config])
        .output()
        .unwrap();
    common::assert_ok(&out);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let listing = stdout
        .split("\n\n")
        .find(|t| t.starts_with("find_place\n"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let lines: Vec<&str> = listing.lines().collect();
    assert!(
        lines[2].contains(r#""has_laundry":{"type":"boolean","enum":[true,false]}"#),
        "{listing}"
    );
    assert_eq!(
        lines[3],
        format!("  warning: {LAUNDRY_WARNING}"),
        "{listing}"
    );
    // Said once on stderr, however many parts read the schema.
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.matches("warning: tool").count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("warning: tool 'find_place': {LAUNDRY_WARNING}")),
        "{stderr}"
    );

    let out = Command::new(toolplan())
        .args(["tools", "--json", "--tools", "none", "--config", &config])
        .output()
        .unwrap();
    common::assert_ok(&out);
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    let find_place = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "find_place")
        .unwrap();
    assert_eq!(find_place["warnings"], json!([LAUNDRY_WARNING]));
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["name"] != "find_place")
            .all(|t| t.get("warnings").is_none()),
        "{listed}"
    );

    // A plan that says true runs on the server; one that says "dontcare" is refused before it.
    let plan =
        json!({"steps": [{"id": "p", "tool": "find_place", "arguments": {"has_laundry": true}}]});
    let out = run_plan(&config, &plan, &[]);
    common::assert_ok(&out);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["outputs"]["p"],
        json!({"has_laundry": true}),
        "{report}"
    );
    let plan = json!({"steps": [{"id": "p", "tool": "find_place", "arguments": {"has_laundry": "dontcare"}}]});
    let out = run_plan(&config, &plan, &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("\"dontcare\""), "{stderr}");
    assert!(stderr.contains("/has_laundry"), "{stderr}");
}
