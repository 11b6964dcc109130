//! A client of `toolplan mcp` over stdio, written out by hand: one JSON-RPC message per line.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

use super::fake_mcp::toolplan;

/// `toolplan mcp ARGS…` started and initialized; killed when dropped.
pub struct McpStdio {
    pub child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl McpStdio {
    pub fn start(args: &[&str]) -> McpStdio {
        Self::start_with(args, json!({}))
    }

    /// Started with these client `capabilities` declared.
    pub fn start_with(args: &[&str], capabilities: Value) -> McpStdio {
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
        let mut s = McpStdio {
            child,
            stdin,
            stdout,
            next: 0,
        };
        s.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": capabilities,
                   "clientInfo": {"name": "hardening", "version": "1"}}),
        );
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
    }

    pub fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and returns its result (or error), skipping notifications.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.request_answering(method, params, |request| {
            panic!("unexpected request from the server: {request}")
        })
    }

    /// [`request`](Self::request), answering each request the server sends meanwhile with
    /// `answer(request)` (its result; none when that is null: a client that never answers).
    pub fn request_answering(
        &mut self,
        method: &str,
        params: Value,
        mut answer: impl FnMut(&Value) -> Value,
    ) -> Value {
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
            if message.get("method").is_some() && message.get("id").is_some() {
                let result = answer(&message);
                if !result.is_null() {
                    self.send(&json!({"jsonrpc": "2.0", "id": message["id"], "result": result}));
                }
                continue;
            }
            if message["id"] == json!(id) {
                return if message.get("error").is_some() {
                    message["error"].clone()
                } else {
                    message["result"].clone()
                };
            }
        }
    }

    /// Calls `tool` with `arguments`; its result (or error).
    pub fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
    }
}

impl Drop for McpStdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text of a tool result's first content block.
pub fn text_of(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}
