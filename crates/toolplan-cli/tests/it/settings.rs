//! The settings every command resolves once (a flag, then the environment, then `toolplan.toml`,
//! then the built-in default), seen from outside through the real binary: `[limits]` applies
//! alike to run, validate and mcp; one step-timeout default for every command; the demo tools
//! only when the configuration names no MCP servers, unless asked for.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::common;

use common::fake_mcp::{config, fake_config, toolplan};
use common::mcp_stdio::{McpStdio, text_of};
use common::servers::servers_dir;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `toolplan ARGS…` run in `dir`, finished.
fn toolplan_in(dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(toolplan())
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn the_limits_of_the_configuration_apply_to_run_validate_and_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolplan.toml");
    std::fs::write(&path, "[limits]\nmax_steps = 2\n").unwrap();
    let plan = json!({"steps": [
        {"id": "a", "tool": "echo", "arguments": {"text": "a"}},
        {"id": "b", "tool": "echo", "arguments": {"text": "b"}},
        {"id": "c", "tool": "echo", "arguments": {"text": "c"}}]});
    std::fs::write(dir.path().join("plan.json"), plan.to_string()).unwrap();
    let refused = "the plan has 3 steps, more than the limit of 2";

    for command in ["run", "validate"] {
        let out = toolplan_in(dir.path(), &[command, "plan.json"]);
        assert_eq!(out.status.code(), Some(2), "{command}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(refused),
            "{command}: {}",
            stderr(&out)
        );
    }

    let mut server = McpStdio::start(&["--config", &path.to_string_lossy()]);
    let result = server.call("execute_tool_plan", plan);
    assert_eq!(result["isError"], true, "{result}");
    assert!(text_of(&result).contains(refused), "{result}");
}

#[test]
fn every_command_that_runs_plans_has_the_same_step_timeout_default() {
    let dir = tempfile::tempdir().unwrap();
    for command in ["run", "query-plan", "mcp"] {
        let out = toolplan_in(dir.path(), &[command, "--help"]);
        common::assert_ok(&out);
        let help = String::from_utf8_lossy(&out.stdout);
        let (_, step_timeout) = help.split_once("--step-timeout").unwrap();
        let (step_timeout, _) = step_timeout
            .split_once("\n  -")
            .unwrap_or((step_timeout, ""));
        assert!(
            step_timeout.contains("else 5m"),
            "{command}: {step_timeout}"
        );
    }
}

/// The names of the tools `toolplan tools --json ARGS…` lists, run in `dir`.
fn tool_names(dir: &Path, args: &[&str]) -> Vec<String> {
    let out = toolplan_in(dir, &[&["tools", "--json"], args].concat());
    common::assert_ok(&out);
    common::names(&serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn the_demo_tools_come_only_when_no_mcp_server_is_configured_or_when_asked_for() {
    let empty = tempfile::tempdir().unwrap();
    let names = tool_names(empty.path(), &[]);
    assert!(names.iter().any(|n| n == "get_weather"), "{names:?}");

    let dir = tempfile::tempdir().unwrap();
    let servers = fake_config(dir.path(), &[]);
    let names = tool_names(dir.path(), &["--config", &servers]);
    assert_eq!(names, ["env", "add", "write", "sleep"]);

    // Asked for with the flag, or with the config's `tools`.
    let names = tool_names(dir.path(), &["--config", &servers, "--tools", "demo"]);
    assert!(
        names.iter().any(|n| n == "get_weather") && names.iter().any(|n| n == "add"),
        "{names:?}"
    );
    let asked = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(&servers).unwrap();
    let asked_config = asked.path().join("toolplan.toml");
    std::fs::write(&asked_config, format!("tools = \"demo\"\n{text}")).unwrap();
    let names = tool_names(asked.path(), &["--config", &asked_config.to_string_lossy()]);
    assert!(
        names.iter().any(|n| n == "get_weather") && names.iter().any(|n| n == "add"),
        "{names:?}"
    );

    // toolplan mcp follows the same rule.
    let mut server = McpStdio::start(&["--expose-tools", "--config", &servers]);
    let listed = server.request("tools/list", json!({}));
    assert_eq!(
        common::names(&listed["tools"]),
        ["execute_tool_plan", "env", "add", "write", "sleep"],
        "{listed}"
    );
}

#[test]
fn a_server_echo_is_not_shadowed_by_the_demo_echo() {
    let dir = tempfile::tempdir().unwrap();
    let everything = servers_dir().join("node_modules/.bin/mcp-server-everything");
    let servers = config(dir.path(), "", &everything.to_string_lossy(), &[]);
    let names = tool_names(dir.path(), &["--config", &servers]);
    assert!(names.iter().any(|n| n == "echo"), "{names:?}");
    assert!(
        !names
            .iter()
            .any(|n| n == "everything.echo" || n == "get_weather"),
        "{names:?}"
    );

    let plan = json!({"steps": [{"id": "e", "tool": "echo", "arguments": {"message": "hi"}}]});
    std::fs::write(dir.path().join("plan.json"), plan.to_string()).unwrap();
    let out = toolplan_in(
        dir.path(),
        &["run", "plan.json", "--json", "--config", &servers],
    );
    common::assert_ok(&out);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["outputs"]["e"], "Echo: hi", "{report}");
}
