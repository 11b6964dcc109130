//! toolplan as the client of a small stdio MCP server written for the tests
//! (`fake_mcp_server.py`, run with the Python of the test servers' virtualenv): `toolplan.toml`
//! files that declare it, and `toolplan run` over it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::servers;

pub fn toolplan() -> PathBuf {
    assert_cmd::cargo::cargo_bin("toolplan")
}

pub fn python() -> PathBuf {
    servers::servers_dir().join("venv/bin/python")
}

pub fn fake_server() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fake_mcp_server.py")
        .to_string_lossy()
        .into_owned()
}

/// A `toolplan.toml` in `dir` with `text` and the fake server as `fake` (with `args`).
pub fn config(dir: &Path, text: &str, command: &str, args: &[&str]) -> String {
    let path = dir.join("toolplan.toml");
    std::fs::write(
        &path,
        format!(
            "{text}\n[[mcp_servers]]\nname = \"fake\"\ncommand = {command:?}\nargs = {args:?}\ntimeout = \"20s\"\n"
        ),
    )
    .unwrap();
    path.to_string_lossy().into_owned()
}

/// A `toolplan.toml` in `dir` with the fake server (given `args`) as `fake`.
pub fn fake_config(dir: &Path, args: &[&str]) -> String {
    let script = fake_server();
    let all: Vec<&str> = std::iter::once(script.as_str())
        .chain(args.iter().copied())
        .collect();
    config(dir, "", &python().to_string_lossy(), &all)
}

/// `toolplan run - --json --config CONFIG` with `env` added, started, `plan` on its stdin.
pub fn start_plan(config: &str, plan: &Value, env: &[(&str, &str)]) -> Child {
    let mut child = Command::new(toolplan())
        .args(["run", "-", "--json", "--tools", "demo", "--config", config])
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(plan.to_string().as_bytes())
        .unwrap();
    child
}

/// `toolplan run` of `plan`, finished.
pub fn run_plan(config: &str, plan: &Value, env: &[(&str, &str)]) -> std::process::Output {
    start_plan(config, plan, env).wait_with_output().unwrap()
}
