//! `--confirm` (issue 21.2): a plan with a step that may change or destroy something runs only once
//! it is approved on the terminal, shown whole, once. The terminal is a real pseudo-terminal
//! (`script`); without one the plan is declined with the reason, and nothing runs. Under
//! `toolplan mcp` the client is asked through elicitation; one that cannot be asked, or never
//! answers, gets the plan declined.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common;
use common::fake_mcp::toolplan;

/// A plan whose second step (`sleep`, which says nothing of its effects) may change something.
fn plan_file(dir: &std::path::Path) -> String {
    let path = dir.join("plan.json");
    std::fs::write(
        &path,
        json!({"steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}},
            {"id": "s", "tool": "sleep", "arguments": {"ms": 1, "value": "$ref:w.temp"}}]})
        .to_string(),
    )
    .unwrap();
    path.to_string_lossy().into_owned()
}

/// `toolplan ARGS` on a pseudo-terminal that types `typed`; the report is the last line.
fn on_terminal(args: &[&str], typed: &str) -> (Value, String) {
    let line = std::iter::once(toolplan().to_string_lossy().into_owned())
        .chain(args.iter().map(|a| a.to_string()))
        .collect::<Vec<_>>()
        .join(" ");
    let mut child = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(typed.as_bytes())
        .unwrap();
    // Bounded: a prompt that never got its answer fails the test instead of hanging it.
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("toolplan did not finish on the terminal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let report = text
        .lines()
        .rev()
        .find_map(|l| l.find('{').and_then(|i| serde_json::from_str(&l[i..]).ok()))
        .unwrap_or_else(|| panic!("no report in {text}"));
    (report, text)
}

/// `toolplan ARGS` in a new session, which has no controlling terminal (stdin is not asked).
fn without_terminal(args: &[&str]) -> std::process::Output {
    Command::new("setsid")
        .arg(toolplan())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn an_approved_plan_runs_after_the_whole_plan_was_shown() {
    let dir = tempfile::tempdir().unwrap();
    let plan = plan_file(dir.path());
    let (report, text) = on_terminal(&["run", &plan, "--confirm", "destructive", "--json"], "y\n");
    assert_eq!(report["outcome"], "completed", "{text}");
    assert_eq!(report["outputs"]["s"], json!(3));
    // Both steps shown, the one that needs approval marked.
    assert!(
        text.contains(r#"  w = get_weather({"location":"Oslo"})"#),
        "{text}"
    );
    assert!(
        text.contains(r#"! s = sleep({"ms":1,"value":"$ref:w.temp"})"#),
        "{text}"
    );
    assert_eq!(
        text.matches("Run it? [y/N]").count(),
        1,
        "asked once: {text}"
    );
}

#[test]
fn a_plan_not_approved_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let plan = plan_file(dir.path());
    let (report, text) = on_terminal(&["run", &plan, "--confirm", "all", "--json"], "n\n");
    assert_eq!(report["outcome"], "declined", "{text}");
    assert_eq!(report["steps"]["w"]["status"], "skipped");
    assert!(
        report["errors"]["w"]
            .as_str()
            .unwrap()
            .contains("the answer on the terminal was 'n'"),
        "{report}"
    );
}

#[test]
fn without_a_terminal_the_plan_is_declined_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let plan = plan_file(dir.path());
    let out = without_terminal(&["run", &plan, "--confirm", "destructive", "--json"]);
    common::assert_ok(&out);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["outcome"], "declined");
    let error = report["errors"]["s"].as_str().unwrap();
    assert!(error.contains("there is none"), "{error}");
}

#[test]
fn a_plan_of_read_only_steps_is_not_asked_about() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("read.json");
    std::fs::write(
        &path,
        r#"{"steps": [{"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}}]}"#,
    )
    .unwrap();
    let out = Command::new("setsid")
        .arg(toolplan())
        .args([
            "run",
            path.to_str().unwrap(),
            "--confirm",
            "destructive",
            "--json",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    common::assert_ok(&out);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["outcome"], "completed");
}

#[test]
fn the_config_sets_the_policy_and_refuses_an_unknown_one() {
    let dir = tempfile::tempdir().unwrap();
    let plan = plan_file(dir.path());
    let config = dir.path().join("toolplan.toml");
    std::fs::write(
        &config,
        "[limits]\nconfirm = \"destructive\"\napproval_timeout = \"2s\"\n",
    )
    .unwrap();
    let out = without_terminal(&["run", &plan, "--json", "--config", config.to_str().unwrap()]);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["outcome"], "declined");
    std::fs::write(&config, "[limits]\nconfirm = \"sometimes\"\n").unwrap();
    let out = without_terminal(&["run", &plan, "--config", config.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("limits.confirm: 'sometimes' is not one of never, destructive, all"),
        "{stderr}"
    );
}

/// `toolplan mcp --confirm destructive` with a client that declares `capabilities`.
fn mcp_server(capabilities: Value) -> common::mcp_stdio::McpStdio {
    common::mcp_stdio::McpStdio::start_with(
        &[
            "--tools",
            "demo",
            "--confirm",
            "destructive",
            "--expose-tools",
        ],
        capabilities,
    )
}

fn plan() -> Value {
    json!({"steps": [
        {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}},
        {"id": "s", "tool": "sleep", "arguments": {"ms": 1, "value": "$ref:w.temp"}}]})
}

#[test]
fn an_mcp_client_approves_the_plan_through_elicitation() {
    for (approve, outcome) in [(true, "completed"), (false, "declined")] {
        let mut server = mcp_server(json!({"elicitation": {}}));
        let mut asked = Vec::new();
        let result = server.request_answering(
            "tools/call",
            json!({"name": "execute_tool_plan", "arguments": plan()}),
            |request| {
                asked.push(request.clone());
                json!({"action": "accept", "content": {"approve": approve}})
            },
        );
        assert_eq!(result["structuredContent"]["outcome"], outcome, "{result}");
        assert_eq!(asked.len(), 1, "asked once per plan");
        assert_eq!(asked[0]["method"], "elicitation/create");
        let message = asked[0]["params"]["message"].as_str().unwrap();
        assert!(
            message.contains(r#"! s = sleep({"ms":1,"value":"$ref:w.temp"})"#),
            "{message}"
        );
        assert_eq!(
            asked[0]["params"]["requestedSchema"]["properties"]["approve"]["type"],
            "boolean"
        );
    }
}

#[test]
fn an_mcp_client_that_cannot_be_asked_gets_the_plan_declined() {
    let mut server = mcp_server(json!({}));
    let result = server.call("execute_tool_plan", plan());
    assert_eq!(
        result["structuredContent"]["outcome"], "declined",
        "{result}"
    );
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("does not support MCP elicitation"), "{text}");
    // A direct call of such a tool too; a read-only one runs.
    let direct = server.call("sleep", json!({"ms": 1}));
    assert_eq!(direct["isError"], true, "{direct}");
    let weather = server.call("get_weather", json!({"location": "Oslo"}));
    assert_ne!(weather["isError"], true, "{weather}");
}

#[test]
fn an_mcp_client_that_never_answers_gets_the_plan_declined_at_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toolplan.toml");
    std::fs::write(&config, "[limits]\napproval_timeout = \"300ms\"\n").unwrap();
    let mut server = common::mcp_stdio::McpStdio::start_with(
        &[
            "--tools",
            "demo",
            "--confirm",
            "all",
            "--config",
            config.to_str().unwrap(),
        ],
        json!({"elicitation": {}}),
    );
    let started = std::time::Instant::now();
    let result = server.request_answering(
        "tools/call",
        json!({"name": "execute_tool_plan", "arguments": plan()}),
        |_| Value::Null,
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(
        result["structuredContent"]["outcome"], "declined",
        "{result}"
    );
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("none came within 300ms"), "{text}");
    // The server still serves.
    assert_eq!(
        server.request("tools/list", json!({}))["tools"][0]["name"],
        "execute_tool_plan"
    );
}
