//! Hardening of `toolplan mcp` as an MCP server, driven from outside as an attacker or a careless
//! client would: the real binary over stdio (JSON-RPC lines) and streamable HTTP (raw HTTP on
//! 127.0.0.1).
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;

use common::fake_mcp::fake_config;
use common::mcp_stdio::{McpStdio, text_of};

// ---------------------------------------------------------------------------------------------
// stdio: `toolplan mcp` as a client drives it, one JSON-RPC message per line.

#[test]
fn direct_calls_are_checked_against_the_schema_and_bounded_by_the_step_timeout() {
    let mut server =
        McpStdio::start(&["--tools", "demo", "--expose-tools", "--step-timeout", "1s"]);
    // Without the guard: the tool ran with whatever it got.
    let bad = server.call("sleep", json!({"ms": "soon"}));
    assert_eq!(bad["isError"], true, "{bad}");
    assert!(text_of(&bad).contains("schema"), "{bad}");
    // Without the guard: it slept its 5 s whatever --step-timeout said.
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
    let mut server = McpStdio::start(&["--tools", "demo", "--expose-tools", "--max-calls", "1"]);
    // Two calls at once: a slow one, then a quick one while it runs. Without the guard: no limit, any
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

    // Without the guard: [limits] was ignored, the step ran its 5 s.
    let mut server = McpStdio::start(&["--tools", "demo", "--config", &path]);
    let started = Instant::now();
    let result = server.call("execute_tool_plan", sleepy.clone());
    assert!(started.elapsed() < Duration::from_secs(4), "{result}");
    let report = &result["structuredContent"];
    assert_eq!(report["steps"]["s"]["status"], "failed", "{report}");
    drop(server);

    // --deadline bounds the whole plan (the flag wins over the file's step timeout).
    let mut server = McpStdio::start(&[
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
    // Without the guard: every initialize made one more session, for ever (10,000 took ~580 MB).
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
    // Without the guard: a page of any site could drive the server through the browser (DNS rebinding).
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

    // Its session ended (HTTP DELETE) half a second in, it does not. Unguarded, it ran on.
    let session = server.session();
    let cancelled = dir.path().join("cancelled.txt");
    let pending = call(session.clone(), plan(&cancelled), false);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(server.delete(&session), 202);
    let _ = pending.join();

    // Its client gone (the connection closed, and nothing more from its session), it does not.
    // Unguarded, it ran on.
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
