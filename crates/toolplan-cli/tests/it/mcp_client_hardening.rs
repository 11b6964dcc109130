//! Hardening of toolplan as an MCP client: the real `toolplan` binary over a small stdio server
//! written for these tests (`fake_mcp_server.py`): the environment a server gets, tools that
//! cannot be used, and no server process left behind after Ctrl-C, a signal or an error.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;

use common::fake_mcp::{config, fake_config, fake_server, python, run_plan, start_plan};
use common::mcp_stdio::McpStdio;

#[test]
fn stdio_servers_get_a_small_environment_without_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let config = fake_config(dir.path(), &[]);
    // A variable the server's `env` names is passed on.
    let text = std::fs::read_to_string(&config).unwrap()
        + "env = { GIVEN = \"${TOOLPLAN_TEST_GIVEN}\" }\n";
    std::fs::write(&config, text).unwrap();
    let plan = json!({"steps": [{"id": "e", "tool": "env"}]});
    let out = run_plan(
        &config,
        &plan,
        &[
            ("OPENAI_API_KEY", "sk-test-leak"),
            ("TOOLPLAN_TEST_GIVEN", "yes"),
        ],
    );
    common::assert_ok(&out);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let env = report["outputs"]["e"].as_object().unwrap();
    // Without the guard: the server saw every variable of toolplan's environment.
    assert!(!env.contains_key("OPENAI_API_KEY"), "{env:?}");
    assert!(!env.contains_key("TOOLPLAN_TEST_GIVEN"), "{env:?}");
    assert!(
        env.contains_key("PATH") && env.contains_key("HOME"),
        "{env:?}"
    );
    assert_eq!(env["GIVEN"], "yes");
}

#[test]
fn a_tool_with_an_invalid_schema_is_left_out_and_the_others_work() {
    let dir = tempfile::tempdir().unwrap();
    let config = fake_config(dir.path(), &["--bad-schema"]);
    let plan = json!({"steps": [{"id": "s", "tool": "add", "arguments": {"a": 2, "b": 3}}]});
    // Without the guard: "tool 'broken' has an invalid schema" and nothing ran.
    let out = run_plan(&config, &plan, &[]);
    common::assert_ok(&out);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["outputs"]["s"], 5, "{report}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning: tool 'broken' of MCP server 'fake'"),
        "{stderr}"
    );
}

/// Whether a process is gone (or a zombie waiting to be reaped).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

fn wait_gone(pid: u32, what: &str) {
    let until = Instant::now() + Duration::from_secs(5);
    while !gone(pid) {
        assert!(
            Instant::now() < until,
            "{what} (pid {pid}) outlived toolplan"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A server command that starts a grandchild (`sleep 300`) and writes both pids to `dir`.
fn spawning_server(dir: &Path) -> String {
    slow_spawning_server(dir, 0)
}

/// [`spawning_server`] that waits `delay` seconds before it serves.
fn slow_spawning_server(dir: &Path, delay: u32) -> String {
    let script = dir.join("server.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nsleep 300 &\necho $! > {dir}/grandchild.pid\necho $$ > {dir}/child.pid\nsleep {delay}\nexec {} {}\n",
            python().display(),
            fake_server(),
            dir = dir.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    script.to_string_lossy().into_owned()
}

fn pids(dir: &Path) -> (u32, u32) {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let read = |f: &str| {
            std::fs::read_to_string(dir.join(f))
                .ok()
                .and_then(|t| t.trim().parse::<u32>().ok())
        };
        if let (Some(c), Some(g)) = (read("child.pid"), read("grandchild.pid")) {
            return (c, g);
        }
        assert!(Instant::now() < until, "the server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Both processes of [`spawning_server`] in `dir` are gone.
fn server_gone(dir: &Path) {
    let (server, grandchild) = pids(dir);
    wait_gone(server, "the server");
    wait_gone(grandchild, "what the server started");
}

/// `toolplan run` of `plan` over a server that waits `delay` s before serving, sent `sig` once the
/// server runs; then neither the server nor what it started may be left.
fn signalled_run(plan: &Value, delay: u32, sig: &str) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        "",
        &slow_spawning_server(dir.path(), delay),
        &[],
    );
    let mut child = start_plan(&cfg, plan, &[]);
    pids(dir.path());
    std::thread::sleep(Duration::from_millis(500));
    signal(child.id(), sig);
    let _ = child.wait();
    server_gone(dir.path());
}

#[test]
fn no_server_process_outlives_toolplan_after_ctrl_c_or_an_error() {
    let plan = json!({"steps": [
        {"id": "a", "tool": "add", "arguments": {"a": 1, "b": 2}},
        {"id": "s", "tool": "sleep", "arguments": {"ms": 20000}}]});
    // Ctrl-C during a plan. Without the guard: what the server started lived on (the kill was left to a task
    // the exiting runtime never ran).
    signalled_run(&plan, 0, "-INT");
    // Ctrl-C or SIGTERM while the server starts, SIGTERM during a plan. Without the guard: toolplan died and
    // left them all (they are in a process group of their own, which the signal does not reach).
    signalled_run(&plan, 30, "-INT");
    signalled_run(&plan, 30, "-TERM");
    signalled_run(&plan, 0, "-TERM");

    // A second server that fails to start (a second in): toolplan exits with an error, and the
    // first, started meanwhile, is stopped.
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "", &spawning_server(dir.path()), &[]);
    let text = std::fs::read_to_string(&cfg).unwrap()
        + "[[mcp_servers]]\nname = \"failing\"\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"sleep 1; exit 3\"]\n";
    std::fs::write(&cfg, text).unwrap();
    let out = run_plan(&cfg, &plan, &[]);
    assert!(!out.status.success());
    server_gone(dir.path());

    // `toolplan mcp` stopped with SIGTERM.
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "", &spawning_server(dir.path()), &[]);
    let mut mcp = McpStdio::start(&["--tools", "demo", "--config", &cfg]);
    pids(dir.path());
    signal(mcp.child.id(), "-TERM");
    let until = Instant::now() + Duration::from_secs(10);
    while mcp.child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < until,
            "toolplan mcp did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server_gone(dir.path());
}
