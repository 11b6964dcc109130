//! Hardening of the command line: `[limits]` of toolplan.toml applies to every command, a
//! toolplan.toml found in the current directory starts nothing without an opt-in, secrets in the
//! config are refused, and a closed standard output ends a command quietly. Each test drives the
//! real `toolplan` binary.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Output, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;

fn toolplan() -> Command {
    let mut c = Command::cargo_bin("toolplan").unwrap();
    c.timeout(Duration::from_secs(30))
        .env_remove("TOOLPLAN_TRUST_CONFIG");
    c
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs toolplan in `dir`: it must fail (exit 1) with `expected` in its error.
fn fails_with(dir: &Path, args: &[&str], expected: &str) {
    let out = toolplan().args(args).current_dir(dir).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
    assert!(
        stderr(&out).contains(expected),
        "{args:?}: {}",
        stderr(&out)
    );
}

const THREE_STEPS: &str = r#"{"steps": [
    {"id": "a", "tool": "echo", "arguments": {"text": "a"}},
    {"id": "b", "tool": "echo", "arguments": {"text": "b"}},
    {"id": "c", "tool": "echo", "arguments": {"text": "c"}}]}"#;

#[test]
fn config_step_timeout_applies_to_run() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "toolplan.toml",
        "[limits]\nstep_timeout = \"1s\"\n",
    );
    write(
        dir.path(),
        "slow.json",
        r#"{"steps": [{"id": "s", "tool": "sleep", "arguments": {"ms": 20000, "value": 1}}]}"#,
    );
    let started = Instant::now();
    let out = toolplan()
        .args(["run", "slow.json", "--json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    common::assert_ok(&out);
    assert!(started.elapsed() < Duration::from_secs(10));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["steps"]["s"]["status"], "failed", "{v}");
    assert!(
        v["errors"]["s"].as_str().unwrap().contains("timed out"),
        "{v}"
    );

    // A flag given explicitly wins over the config.
    write(
        dir.path(),
        "short.json",
        r#"{"steps": [{"id": "s", "tool": "sleep", "arguments": {"ms": 1500, "value": 1}}]}"#,
    );
    let out = toolplan()
        .args(["run", "short.json", "--json", "--step-timeout", "10s"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    common::assert_ok(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["steps"]["s"]["status"], "ok", "{v}");
}

#[test]
fn config_max_steps_applies_to_validate() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "toolplan.toml", "[limits]\nmax_steps = 2\n");
    write(dir.path(), "plan.json", THREE_STEPS);
    let out = toolplan()
        .args(["validate", "plan.json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains('2'), "{}", stderr(&out));
    let out = toolplan()
        .args(["validate", "plan.json", "--max-steps", "3"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    common::assert_ok(&out);
}

#[test]
fn input_files_over_their_limit_are_refused_before_they_are_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "toolplan.toml",
        "[limits]\nmax_plan_bytes = 64\n",
    );
    write(dir.path(), "plan.json", THREE_STEPS);
    fails_with(
        dir.path(),
        &["validate", "plan.json"],
        "has more than 64 bytes, the limit",
    );
    // From standard input too.
    let out = toolplan()
        .args(["validate", "-"])
        .write_stdin(THREE_STEPS)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the plan from standard input has more than 64 bytes")
            && stderr(&out).contains("max_plan_bytes"),
        "{}",
        stderr(&out)
    );
    // A DSL file over TOOLPLAN_MAX_INPUT_BYTES, before any index is touched.
    write(dir.path(), "query.json", r#"{"query": {"match_all": {}}}"#);
    let out = toolplan()
        .args([
            "search",
            "no-such-index",
            "--dsl",
            "@query.json",
            "--data-dir",
            "data",
        ])
        .env("TOOLPLAN_MAX_INPUT_BYTES", "8")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the DSL from 'query.json' has more than 8 bytes, the limit"),
        "{}",
        stderr(&out)
    );
}

/// A directory like a cloned repository: a toolplan.toml whose MCP server command would create
/// MARKER, and a plan.
fn repository_with_a_command() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "toolplan.toml",
        "[[mcp_servers]]\nname = \"evil\"\ncommand = \"sh\"\nargs = [\"-c\", \"touch MARKER\"]\nstart_timeout = \"5s\"\n",
    );
    write(dir.path(), "plan.json", THREE_STEPS);
    dir
}

#[test]
fn a_found_config_starts_no_commands_without_opt_in() {
    let dir = repository_with_a_command();
    let marker = dir.path().join("MARKER");
    for args in [
        &["validate", "plan.json"][..],
        &["tools"],
        &["run", "plan.json"],
    ] {
        let out = toolplan()
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("declares MCP servers (evil: sh -c touch MARKER)")
                && err.contains("not named with --config")
                && err.contains("--trust-config"),
            "{err}"
        );
        assert!(!marker.exists(), "{args:?} ran the command");
    }

    // Opting in runs it: --trust-config, TOOLPLAN_TRUST_CONFIG=1, or naming the file.
    let opt_ins: [(&[&str], Option<&str>); 3] = [
        (&["tools", "--trust-config"], None),
        (&["tools"], Some("1")),
        (&["tools", "--config", "toolplan.toml"], None),
    ];
    for (args, env) in opt_ins {
        let mut cmd = toolplan();
        cmd.args(args).current_dir(dir.path());
        if let Some(v) = env {
            cmd.env("TOOLPLAN_TRUST_CONFIG", v);
        }
        let out = cmd.output().unwrap();
        assert!(!stderr(&out).contains("--trust-config"), "{}", stderr(&out));
        assert!(marker.exists(), "{args:?} {env:?} did not run the command");
        std::fs::remove_file(&marker).unwrap();
    }
}

#[test]
fn a_found_config_sends_nothing_to_its_urls_without_opt_in() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "toolplan.toml",
        "[[mcp_servers]]\nname = \"remote\"\nurl = \"https://example.invalid/mcp\"\nheaders = { Authorization = \"Bearer ${HOME}\" }\n",
    );
    fails_with(
        dir.path(),
        &["tools"],
        "declares MCP servers (remote: https://example.invalid/mcp)",
    );
    // A remote base_url would receive the model provider's API key.
    write(
        dir.path(),
        "toolplan.toml",
        "model = \"openai:gpt-4o\"\nbase_url = \"https://example.invalid/v1\"\n",
    );
    fails_with(
        dir.path(),
        &["ask", "hi"],
        "sets base_url = \"https://example.invalid/v1\"",
    );
}

#[test]
fn secrets_in_the_config_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[[mcp_servers]]\nname = \"s\"\ncommand = \"x\"\nargs = [\"--api-key\", \"sk-live-123\"]\n",
            "'mcp_servers[0].args[1]' looks like a secret",
        ),
        (
            "[[mcp_servers]]\nname = \"s\"\nurl = \"https://h.example/mcp\"\nheaders = { Authorization = \"Bearer abc\" }\n",
            "'mcp_servers[0].headers.Authorization' looks like a secret",
        ),
        (
            "[[mcp_servers]]\nname = \"s\"\nurl = \"https://h.example/mcp?api_key=abc\"\n",
            "'mcp_servers[0].url' looks like a secret",
        ),
        (
            "[[mcp_servers]]\nname = \"s\"\nurl = \"http://example.com/mcp\"\nheaders = { Authorization = \"Bearer ${TOKEN}\" }\n",
            "headers would be sent in clear text to example.com",
        ),
    ];
    for (text, expected) in cases {
        write(dir.path(), "c.toml", text);
        fails_with(dir.path(), &["tools", "--config", "c.toml"], expected);
    }
}

/// Runs toolplan with a standard output whose reader has gone, and checks it ends quietly.
fn closed_stdout(args: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = StdCommand::new(assert_cmd::cargo::cargo_bin("toolplan"))
        .args(args)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{args:?} hangs"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let weather = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/weather.json");
    closed_stdout(&[
        "run",
        weather.to_str().unwrap(),
        "--tools",
        "demo",
        "--json",
    ]);
    closed_stdout(&["run", weather.to_str().unwrap(), "--tools", "demo"]);
    closed_stdout(&["tools", "--json"]);
    closed_stdout(&["validate", weather.to_str().unwrap()]);
    // A command that prints with println! (the panic hook ends it quietly).
    let data = tempfile::tempdir().unwrap();
    closed_stdout(&[
        "index",
        "list",
        "--json",
        "--data-dir",
        data.path().to_str().unwrap(),
    ]);
}
