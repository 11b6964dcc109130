//! Hardening of the MCP side, driven from outside as an attacker or a careless client would: the
//! real `toolplan` binary as an MCP server over stdio (JSON-RPC lines) and streamable HTTP (raw
//! HTTP on 127.0.0.1), and as an MCP client of a small stdio server written for these tests
//! (`fake_mcp_server.py`, run with the Python of the test servers' virtualenv).
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[path = "../../toolplan-mcp/tests/common/mod.rs"]
mod servers;

mod common;

fn toolplan() -> PathBuf {
    assert_cmd::cargo::cargo_bin("toolplan")
}

fn python() -> PathBuf {
    servers::servers_dir().join("venv/bin/python")
}

fn fake_server() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fake_mcp_server.py")
        .to_string_lossy()
        .into_owned()
}

/// A `toolplan.toml` in `dir` with `text` and the fake server as `fake` (with `args`).
fn config(dir: &Path, text: &str, command: &str, args: &[&str]) -> String {
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
fn fake_config(dir: &Path, args: &[&str]) -> String {
    let script = fake_server();
    let all: Vec<&str> = std::iter::once(script.as_str())
        .chain(args.iter().copied())
        .collect();
    config(dir, "", &python().to_string_lossy(), &all)
}

/// `toolplan run - --json --config CONFIG` with `env` added, started, `plan` on its stdin.
fn start_plan(config: &str, plan: &Value, env: &[(&str, &str)]) -> Child {
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
fn run_plan(config: &str, plan: &Value, env: &[(&str, &str)]) -> std::process::Output {
    start_plan(config, plan, env).wait_with_output().unwrap()
}

// ---------------------------------------------------------------------------------------------
// stdio: `toolplan mcp` as a client drives it, one JSON-RPC message per line.

struct Stdio_ {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Stdio_ {
    fn start(args: &[&str]) -> Stdio_ {
        let mut child = Command::new(toolplan())
            .arg("mcp")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut s = Stdio_ {
            child,
            stdin,
            stdout,
            next: 0,
        };
        s.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "hardening", "version": "1"}}),
        );
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and returns its result (or error), skipping notifications.
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "no answer to {method}"
            );
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == json!(id) {
                return if message.get("error").is_some() {
                    message["error"].clone()
                } else {
                    message["result"].clone()
                };
            }
        }
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
    }
}

impl Drop for Stdio_ {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

#[test]
fn direct_calls_are_checked_against_the_schema_and_bounded_by_the_step_timeout() {
    let mut server = Stdio_::start(&["--tools", "demo", "--expose-tools", "--step-timeout", "1s"]);
    // Before: the tool ran with whatever it got.
    let bad = server.call("sleep", json!({"ms": "soon"}));
    assert_eq!(bad["isError"], true, "{bad}");
    assert!(text_of(&bad).contains("schema"), "{bad}");
    // Before: it slept its 5 s whatever --step-timeout said.
    let started = Instant::now();
    let slow = server.call("sleep", json!({"ms": 5000}));
    assert!(started.elapsed() < Duration::from_secs(4), "{slow}");
    assert_eq!(slow["isError"], true, "{slow}");
    assert!(text_of(&slow).contains("timed out"), "{slow}");
    // A good call still works, and its text is data (no $ref resolution).
    let ok = server.call("echo", json!({"text": "$ref:x"}));
    assert_ne!(ok["isError"], true, "{ok}");
    assert_eq!(text_of(&ok), "$ref:x");
}

#[test]
fn calls_beyond_the_most_running_at_once_are_refused() {
    let mut server = Stdio_::start(&["--tools", "demo", "--expose-tools", "--max-calls", "1"]);
    // Two calls at once: a slow one, then a quick one while it runs. Before: no limit, any
    // number of plans ran at once.
    let slow = json!({"steps": [{"id": "s", "tool": "sleep", "arguments": {"ms": 1500}}]});
    server.send(&json!({"jsonrpc": "2.0", "id": 101, "method": "tools/call",
        "params": {"name": "execute_tool_plan", "arguments": slow}}));
    std::thread::sleep(Duration::from_millis(300));
    let refused = server.call("echo", json!({"text": "hi"}));
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(text_of(&refused).contains("--max-calls"), "{refused}");
    // Once it has finished, calls run again.
    std::thread::sleep(Duration::from_millis(1600));
    let ok = server.call("echo", json!({"text": "hi"}));
    assert_eq!(text_of(&ok), "hi", "{ok}");
}

#[test]
fn the_limits_of_the_configuration_apply_and_a_plan_has_a_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toolplan.toml");
    std::fs::write(&path, "[limits]\nstep_timeout = \"1s\"\n").unwrap();
    let path = path.to_string_lossy().into_owned();
    let sleepy = json!({"steps": [{"id": "s", "tool": "sleep", "arguments": {"ms": 5000}}]});

    // Before: [limits] was ignored, the step ran its 5 s.
    let mut server = Stdio_::start(&["--tools", "demo", "--config", &path]);
    let started = Instant::now();
    let result = server.call("execute_tool_plan", sleepy.clone());
    assert!(started.elapsed() < Duration::from_secs(4), "{result}");
    let report = &result["structuredContent"];
    assert_eq!(report["steps"]["s"]["status"], "failed", "{report}");
    drop(server);

    // --deadline bounds the whole plan (the flag wins over the file's step timeout).
    let mut server = Stdio_::start(&[
        "--tools",
        "demo",
        "--config",
        &path,
        "--step-timeout",
        "none",
        "--deadline",
        "1500ms",
    ]);
    let started = Instant::now();
    let result = server.call("execute_tool_plan", sleepy);
    assert!(started.elapsed() < Duration::from_secs(4), "{result}");
    assert_eq!(
        result["structuredContent"]["outcome"], "deadline_exceeded",
        "{result}"
    );
}

// ---------------------------------------------------------------------------------------------
// streamable HTTP, raw.

struct HttpServer {
    child: Child,
    hostport: String,
}

impl HttpServer {
    fn start(extra: &[&str]) -> HttpServer {
        let (child, url) = common::start_mcp_http(extra);
        HttpServer {
            hostport: url
                .trim_start_matches("http://")
                .trim_end_matches("/mcp")
                .to_owned(),
            child,
        }
    }

    /// One request; (status, headers lower-cased, body).
    fn send(&self, method: &str, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
        let mut stream = TcpStream::connect(&self.hostport).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut head = format!(
            "{method} /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.hostport,
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        write!(stream, "{head}\r\n{body}").unwrap();
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        let response = String::from_utf8_lossy(&response).into_owned();
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, head.to_ascii_lowercase(), body.to_owned())
    }

    /// An `initialize`; (status, session id, body).
    fn initialize(&self, headers: &[(&str, &str)]) -> (u16, Option<String>, String) {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "hardening", "version": "1"}}});
        let (status, head, body) = self.send("POST", headers, &body.to_string());
        let session = head
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id:"))
            .map(|s| s.trim().to_owned());
        (status, session, body)
    }

    /// A session ready for calls.
    fn session(&self) -> String {
        let (status, session, body) = self.initialize(&[]);
        assert_eq!(status, 200, "{body}");
        let session = session.unwrap();
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let (status, _, _) = self.send(
            "POST",
            &[
                ("Mcp-Session-Id", &session),
                ("MCP-Protocol-Version", "2025-06-18"),
            ],
            &note.to_string(),
        );
        assert_eq!(status, 202);
        session
    }

    fn delete(&self, session: &str) -> u16 {
        self.send(
            "DELETE",
            &[
                ("Mcp-Session-Id", session),
                ("MCP-Protocol-Version", "2025-06-18"),
            ],
            "",
        )
        .0
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn sessions_are_capped_and_idle_ones_end() {
    let server = HttpServer::start(&[
        "--tools",
        "demo",
        "--max-sessions",
        "2",
        "--session-idle",
        "2s",
    ]);
    let a = server.session();
    let _b = server.session();
    // Before: every initialize made one more session, for ever (10,000 took ~580 MB).
    let (status, session, body) = server.initialize(&[]);
    assert_eq!(status, 503, "{body}");
    assert!(session.is_none());
    let error: Value = serde_json::from_str(&body).unwrap();
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("--max-sessions") && message.contains('2'),
        "{message}"
    );
    // Ending one makes room.
    assert_eq!(server.delete(&a), 202);
    let _c = server.session();
    assert_eq!(server.initialize(&[]).0, 503);
    // Idle sessions end: after 2 s without requests both places are free again.
    std::thread::sleep(Duration::from_millis(2600));
    let _d = server.session();
    let _e = server.session();
}

#[test]
fn only_loopback_or_allowed_origins_are_served() {
    let server = HttpServer::start(&[
        "--tools",
        "demo",
        "--allow-origin",
        "https://app.example.com",
    ]);
    // Before: a page of any site could drive the server through the browser (DNS rebinding).
    let (status, _, body) = server.initialize(&[("Origin", "http://evil.example")]);
    assert_eq!(status, 403, "{body}");
    for origin in [
        "http://localhost:5173",
        "http://127.0.0.1:8080",
        "https://app.example.com",
    ] {
        let (status, _, body) = server.initialize(&[("Origin", origin)]);
        assert_eq!(status, 200, "{origin}: {body}");
    }
    // Without Origin (not a browser): served.
    assert_eq!(server.initialize(&[]).0, 200);
}

#[test]
fn a_plan_whose_session_ends_or_client_goes_away_is_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let config = fake_config(dir.path(), &[]);
    let server = HttpServer::start(&[
        "--tools",
        "demo",
        "--config",
        &config,
        "--disconnect-grace",
        "300ms",
    ]);
    let plan = |file: &Path| {
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "execute_tool_plan", "arguments": {"steps": [
                {"id": "slow", "tool": "sleep", "arguments": {"ms": 2500, "value": "late"}},
                {"id": "w", "tool": "write", "arguments": {"path": file, "text": "$ref:slow"}}]}}})
        .to_string()
    };
    // The call; with `hang_up`, the client closes the connection once the response has begun.
    let call = |session: String, body: String, hang_up: bool| {
        let hostport = server.hostport.clone();
        std::thread::spawn(move || {
            let mut stream = TcpStream::connect(&hostport).unwrap();
            write!(
                stream,
                "POST /mcp HTTP/1.1\r\nHost: {hostport}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-06-18\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            if hang_up {
                let mut first = [0u8; 64];
                let _ = stream.read(&mut first);
                return String::new();
            }
            let mut out = Vec::new();
            let _ = stream.read_to_end(&mut out);
            String::from_utf8_lossy(&out).into_owned()
        })
    };

    // Left alone, the plan writes its file.
    let done = dir.path().join("done.txt");
    let answer = call(server.session(), plan(&done), false).join().unwrap();
    assert!(answer.contains("completed"), "{answer}");
    assert_eq!(std::fs::read_to_string(&done).unwrap(), "late");

    // Its session ended (HTTP DELETE) half a second in, it does not. Before, it ran on.
    let session = server.session();
    let cancelled = dir.path().join("cancelled.txt");
    let pending = call(session.clone(), plan(&cancelled), false);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(server.delete(&session), 202);
    let _ = pending.join();

    // Its client gone (the connection closed, and nothing more from its session), it does not.
    // Before, it ran on.
    let gone = dir.path().join("gone.txt");
    call(server.session(), plan(&gone), true).join().unwrap();
    std::thread::sleep(Duration::from_millis(3500));
    assert!(
        !cancelled.exists(),
        "the plan went on after its session ended"
    );
    assert!(
        !gone.exists(),
        "the plan went on after its client went away"
    );
}

// ---------------------------------------------------------------------------------------------
// toolplan as an MCP client.

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
    // Before: the server saw every variable of toolplan's environment.
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
    // Before: "tool 'broken' has an invalid schema" and nothing ran.
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
    // Ctrl-C during a plan. Before: what the server started lived on (the kill was left to a task
    // the exiting runtime never ran).
    signalled_run(&plan, 0, "-INT");
    // Ctrl-C or SIGTERM while the server starts, SIGTERM during a plan. Before: toolplan died and
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
    let mut mcp = Stdio_::start(&["--tools", "demo", "--config", &cfg]);
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
