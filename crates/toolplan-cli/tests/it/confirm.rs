//! `--confirm` (issue 21.2): a plan with a step that may change or destroy something runs only once
//! it is approved on the terminal, shown whole, once. The tool that changes things is the fake MCP
//! server's `write` (it writes a file, and says nothing of its effects). The terminal is a real
//! pseudo-terminal (`script`); without one the plan is declined with the reason, and nothing runs.
//! Under `toolplan mcp` the client is asked through elicitation; one that cannot be asked, or never
//! answers, gets the plan declined.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common;
use common::fake_mcp::{config, fake_server, python, toolplan};
use common::mcp_stdio::McpStdio;

/// A directory with a configuration naming the fake MCP server (after `limits`, a `[limits]`
/// table), and the file its `write` step writes.
struct Setup {
    dir: tempfile::TempDir,
    config: String,
    out: PathBuf,
}

impl Setup {
    fn new(limits: &str) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let config = config(
            dir.path(),
            limits,
            &python().to_string_lossy(),
            &[&fake_server()],
        );
        let out = dir.path().join("out.txt");
        Setup { dir, config, out }
    }

    /// A plan that looks up the weather (read-only), then writes its condition to the file.
    fn plan(&self) -> Value {
        json!({"steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}},
            {"id": "s", "tool": "write", "arguments": {"path": self.out, "text": "$ref:w.condition"}}]})
    }

    fn plan_file(&self) -> String {
        let path = self.dir.path().join("plan.json");
        std::fs::write(&path, self.plan().to_string()).unwrap();
        path.to_string_lossy().into_owned()
    }

    /// `toolplan run PLAN --tools demo --config CONFIG --json` and `flags`.
    fn run_args<'a>(&'a self, plan: &'a str, flags: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec![
            "run",
            plan,
            "--tools",
            "demo",
            "--config",
            &self.config,
            "--json",
        ];
        args.extend_from_slice(flags);
        args
    }

    fn written(&self) -> Option<String> {
        std::fs::read_to_string(&self.out).ok()
    }

    /// The plan's `write` step as the approval shows it.
    fn shown_write(&self) -> String {
        format!(
            "! s = write({})",
            json!({"path": self.out, "text": "$ref:w.condition"})
        )
    }
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
    let setup = Setup::new("");
    let plan = setup.plan_file();
    let (report, text) = on_terminal(&setup.run_args(&plan, &["--confirm", "destructive"]), "y\n");
    assert_eq!(report["outcome"], "completed", "{text}");
    assert_eq!(setup.written().as_deref(), Some("snow"));
    // Both steps shown, the one that needs approval marked.
    assert!(
        text.contains(r#"  w = get_weather({"location":"Oslo"})"#),
        "{text}"
    );
    assert!(text.contains(&setup.shown_write()), "{text}");
    assert_eq!(
        text.matches("Run it? [y/N]").count(),
        1,
        "asked once: {text}"
    );
}

#[test]
fn a_plan_not_approved_runs_nothing() {
    let setup = Setup::new("");
    let plan = setup.plan_file();
    let (report, text) = on_terminal(&setup.run_args(&plan, &["--confirm", "all"]), "n\n");
    assert_eq!(report["outcome"], "declined", "{text}");
    assert_eq!(report["steps"]["w"]["status"], "skipped");
    assert_eq!(setup.written(), None);
    let error = report["errors"]["w"].as_str().unwrap();
    assert!(
        error.contains("the answer on the terminal was 'n'"),
        "{report}"
    );
}

#[test]
fn without_a_terminal_the_plan_is_declined_with_the_reason() {
    let setup = Setup::new("");
    let plan = setup.plan_file();
    let out = without_terminal(&setup.run_args(&plan, &["--confirm", "destructive"]));
    common::assert_ok(&out);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["outcome"], "declined");
    let error = report["errors"]["s"].as_str().unwrap();
    assert!(error.contains("there is none"), "{error}");
    assert_eq!(setup.written(), None);
}

#[test]
fn a_plan_of_read_only_steps_is_not_asked_about() {
    let setup = Setup::new("");
    let path = setup.dir.path().join("read.json");
    std::fs::write(
        &path,
        r#"{"steps": [{"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}}]}"#,
    )
    .unwrap();
    let path = path.to_string_lossy().into_owned();
    let out = without_terminal(&setup.run_args(&path, &["--confirm", "destructive"]));
    common::assert_ok(&out);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["outcome"], "completed");
}

#[test]
fn the_config_sets_the_policy_and_refuses_an_unknown_one() {
    let setup = Setup::new("[limits]\nconfirm = \"destructive\"\napproval_timeout = \"2s\"\n");
    let plan = setup.plan_file();
    let out = without_terminal(&setup.run_args(&plan, &[]));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["outcome"], "declined");
    let unknown = Setup::new("[limits]\nconfirm = \"sometimes\"\n");
    let out = without_terminal(&unknown.run_args(&plan, &[]));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("limits.confirm: 'sometimes' is not one of never, destructive, all"),
        "{stderr}"
    );
}

/// `toolplan mcp --tools demo --config CONFIG --expose-tools` and `flags`, with a client that
/// declares `capabilities`.
fn mcp_server(setup: &Setup, flags: &[&str], capabilities: Value) -> McpStdio {
    let mut args = vec![
        "--tools",
        "demo",
        "--config",
        &setup.config,
        "--expose-tools",
    ];
    args.extend_from_slice(flags);
    McpStdio::start_with(&args, capabilities)
}

#[test]
fn an_mcp_client_approves_the_plan_through_elicitation() {
    for (approve, outcome, written) in
        [(true, "completed", Some("snow")), (false, "declined", None)]
    {
        let setup = Setup::new("");
        let mut server = mcp_server(
            &setup,
            &["--confirm", "destructive"],
            json!({"elicitation": {}}),
        );
        let mut asked = Vec::new();
        let result = server.request_answering(
            "tools/call",
            json!({"name": "execute_tool_plan", "arguments": setup.plan()}),
            |request| {
                asked.push(request.clone());
                json!({"action": "accept", "content": {"approve": approve}})
            },
        );
        assert_eq!(result["structuredContent"]["outcome"], outcome, "{result}");
        assert_eq!(setup.written().as_deref(), written);
        assert_eq!(asked.len(), 1, "asked once per plan");
        assert_eq!(asked[0]["method"], "elicitation/create");
        let message = asked[0]["params"]["message"].as_str().unwrap();
        assert!(message.contains(&setup.shown_write()), "{message}");
        assert_eq!(
            asked[0]["params"]["requestedSchema"]["properties"]["approve"]["type"],
            "boolean"
        );
    }
}

#[test]
fn an_mcp_client_that_cannot_be_asked_gets_the_plan_declined() {
    let setup = Setup::new("");
    let mut server = mcp_server(&setup, &["--confirm", "destructive"], json!({}));
    let result = server.call("execute_tool_plan", setup.plan());
    assert_eq!(
        result["structuredContent"]["outcome"], "declined",
        "{result}"
    );
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("does not support MCP elicitation"), "{text}");
    // A direct call of such a tool too; a read-only one runs.
    let direct = server.call("write", json!({"path": setup.out, "text": "x"}));
    assert_eq!(direct["isError"], true, "{direct}");
    assert_eq!(setup.written(), None);
    let weather = server.call("get_weather", json!({"location": "Oslo"}));
    assert_ne!(weather["isError"], true, "{weather}");
}

#[test]
fn an_mcp_client_that_never_answers_gets_the_plan_declined_at_the_timeout() {
    let setup = Setup::new("[limits]\napproval_timeout = \"300ms\"\n");
    let mut server = mcp_server(&setup, &["--confirm", "all"], json!({"elicitation": {}}));
    let started = std::time::Instant::now();
    let result = server.request_answering(
        "tools/call",
        json!({"name": "execute_tool_plan", "arguments": setup.plan()}),
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
    let tools = server.request("tools/list", json!({}));
    assert_eq!(tools["tools"][0]["name"], "execute_tool_plan");
}
