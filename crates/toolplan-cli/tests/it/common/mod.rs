//! Shared by the CLI tests: a loopback OpenAI-compatible server that replays chat-completions
//! responses (a test double; the providers' wire formats are tested in toolplan-llm), the check
//! that a command succeeded, `toolplan mcp --http` started, a hand-written stdio MCP client
//! ([`mcp_stdio`]) and the small fake MCP server's configuration ([`fake_mcp`]).
#![allow(clippy::unwrap_used, dead_code)]

pub mod fake_mcp;
pub mod mcp_stdio;
/// The real MCP servers and the Python virtualenv the tests run (shared with toolplan-mcp's tests).
#[path = "../../../../toolplan-mcp/tests/it/common.rs"]
pub mod servers;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::thread;

use serde_json::{Value, json};

/// Serves the replies in order, one per request, and records the request bodies.
pub fn serve(replies: Vec<Value>) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    thread::spawn(move || {
        for (reply, stream) in replies.into_iter().zip(listener.incoming()) {
            let mut stream = stream.unwrap();
            let (_, body) = read_request(&stream);
            log.lock()
                .unwrap()
                .push(serde_json::from_slice(&body).unwrap_or(Value::Null));
            let text = reply.to_string();
            write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                text.len()
            )
            .unwrap();
        }
    });
    (url, seen)
}

/// Reads one HTTP/1.1 request from `stream`: its request line (`DELETE /x HTTP/1.1`) and body.
pub fn read_request(stream: &std::net::TcpStream) -> (String, Vec<u8>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request = String::new();
    reader.read_line(&mut request).unwrap();
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    (request.trim_end().to_owned(), body)
}

pub fn completion(message: Value, prompt: u64, completion: u64) -> Value {
    json!({"id": "x", "object": "chat.completion", "model": "test",
           "choices": [{"index": 0, "message": message,
                        "finish_reason": if message.get("tool_calls").is_some() { "tool_calls" } else { "stop" }}],
           "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}})
}

/// A chat completion whose reply is the text `content`.
#[allow(dead_code)]
pub fn text_reply(content: &str) -> Value {
    completion(json!({"role": "assistant", "content": content}), 500, 20)
}

/// Asserts that a finished command succeeded, showing its stderr when it did not.
pub fn assert_ok(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{} failed: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `toolplan mcp --http 0 EXTRA…` started, with the URL it printed on its first line of stderr
/// (`http://127.0.0.1:PORT/mcp`). The caller kills it.
pub fn start_mcp_http(extra: &[&str]) -> (std::process::Child, String) {
    use std::process::{Command, Stdio};
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("toolplan"))
        .args(["mcp", "--http", "0"])
        .args(extra)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("toolplan MCP server on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_owned();
    (child, url)
}

/// The `name` of every object of a JSON array (a tool list).
pub fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}
