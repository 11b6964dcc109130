//! `toolplan run -` runs a plan piped in while it is still being written: the first step starts
//! before the rest arrives; `--no-stream` waits for the whole plan; a plan piped in that is invalid
//! or too large fails as the same plan read whole does. `toolplan query-plan -` does the same with
//! a query plan's nodes.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::fake_mcp::toolplan;

/// Runs `toolplan run - --json ARGS`, writing `parts` to its standard input with `pause` between
/// them; returns the exit code and the JSON report (if stdout was JSON), and stderr.
fn run_piped(parts: &[&str], pause: Duration, args: &[&str]) -> (i32, Option<Value>, String) {
    let mut command = vec!["run", "-", "--json", "--tools", "demo"];
    command.extend(args);
    piped(&command, parts, pause)
}

/// Runs `toolplan COMMAND`, writing `parts` to its standard input with `pause` between them.
fn piped(command: &[&str], parts: &[&str], pause: Duration) -> (i32, Option<Value>, String) {
    let mut child = Command::new(toolplan())
        .args(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(pause);
        }
        stdin.write_all(part.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }
    drop(stdin);
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(30));
    let report = serde_json::from_slice(&out.stdout).ok();
    (
        out.status.code().unwrap_or(-1),
        report,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const FIRST: &str =
    r#"{"steps": [{"id": "a", "tool": "sleep", "arguments": {"ms": 10, "value": "é"}}"#;
const REST: &str = r#", {"id": "b", "tool": "concat", "arguments": {"a": "$ref:a", "b": "!"}}], "output_steps": ["b"]}"#;

#[test]
fn a_piped_plan_starts_before_it_is_complete() {
    let (code, report, stderr) = run_piped(&[FIRST, REST], Duration::from_millis(800), &[]);
    assert_eq!(code, 0, "{stderr}");
    let report = report.unwrap();
    assert_eq!(report["outputs"]["b"], "é!", "{report}");
    let steps = &report["steps"];
    let a_started = steps["a"]["started_ms"].as_f64().unwrap();
    let b_written = steps["b"]["written_ms"].as_f64().unwrap();
    assert!(
        a_started + 500.0 < b_written,
        "a started at {a_started} ms, b written at {b_written} ms"
    );
}

#[test]
fn a_character_cut_between_two_writes_is_read_whole() {
    // "é" is two bytes: the pipe gets them in two writes.
    let text = format!("{FIRST}{REST}");
    let cut = text.find('é').unwrap() + 1;
    let (a, b) = text.as_bytes().split_at(cut);
    let mut child = Command::new(toolplan())
        .args(["run", "-", "--json", "--tools", "demo"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(a).unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    stdin.write_all(b).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["outputs"]["b"], "é!");
}

#[test]
fn no_stream_waits_for_the_whole_plan() {
    let (code, report, stderr) =
        run_piped(&[FIRST, REST], Duration::from_millis(300), &["--no-stream"]);
    assert_eq!(code, 0, "{stderr}");
    let report = report.unwrap();
    assert!(report["steps"]["a"].get("written_ms").is_none(), "{report}");
    assert_eq!(report["outputs"]["b"], "é!");
}

#[test]
fn an_invalid_piped_plan_fails_as_when_read_whole() {
    let bad = r#", {"id": "b", "tool": "nope", "arguments": {}}]}"#;
    let (streamed, _, streamed_err) = run_piped(&[FIRST, bad], Duration::from_millis(50), &[]);
    let (whole, _, whole_err) =
        run_piped(&[FIRST, bad], Duration::from_millis(50), &["--no-stream"]);
    assert_ne!(streamed, 0);
    assert_eq!(streamed, whole);
    assert_eq!(streamed_err, whole_err);
    assert!(streamed_err.contains("nope"), "{streamed_err}");
}

#[test]
fn text_that_is_not_utf8_is_refused() {
    let mut child = Command::new(toolplan())
        .args(["run", "-", "--tools", "demo"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"{\"steps\": [\xff\xfe]}").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not UTF-8"));
}

const NODES: [&str; 2] = [
    r#"{"nodes": [{"id": 1, "query_str": "Tokyo", "tool_name": "get_weather", "dependencies": []},"#,
    r#"{"id": 2, "query_str": "Compare", "tool_name": null, "dependencies": [1]}]}"#,
];

#[test]
fn a_piped_query_plan_starts_before_it_is_complete() {
    let command = [
        "query-plan",
        "-",
        "--json",
        "--tools",
        "demo",
        "--synthesizer",
        "concat",
    ];
    let (code, report, stderr) = piped(&command, &NODES, Duration::from_millis(800));
    assert_eq!(code, 0, "{stderr}");
    let report = report.unwrap();
    assert_eq!(report["root"], "2", "{report}");
    assert!(answers_tokyo(&report), "{report}");
    let leaf_started = report["nodes"]["1"]["started_ms"].as_f64().unwrap();
    let root_written = report["nodes"]["2"]["written_ms"].as_f64().unwrap();
    assert_eq!(report["nodes"]["2"]["query"], "Compare");
    assert!(
        leaf_started + 500.0 < root_written,
        "node 1 started at {leaf_started} ms, node 2 written at {root_written} ms"
    );

    // With --no-stream the leaf waits for the whole plan.
    let mut whole = command.to_vec();
    whole.push("--no-stream");
    let (code, report, stderr) = piped(&whole, &NODES, Duration::from_millis(500));
    assert_eq!(code, 0, "{stderr}");
    let report = report.unwrap();
    assert!(answers_tokyo(&report), "{report}");
    assert!(report["nodes"]["1"]["written_ms"].is_null(), "{report}");
}

/// Whether the report's answer is the synthesis of the Tokyo node.
fn answers_tokyo(report: &Value) -> bool {
    report["answer"]
        .as_str()
        .is_some_and(|a| a.starts_with("Query: Tokyo"))
}

#[test]
fn an_invalid_piped_query_plan_fails_as_when_read_whole() {
    let plan = r#"{"nodes": [{"id": 1, "query_str": "a", "tool_name": "get_weather", "dependencies": [9]},
                             {"id": 2, "query_str": "b", "tool_name": "get_wether", "dependencies": []}]}"#;
    let (half, rest) = plan.split_at(60);
    let base = [
        "query-plan",
        "-",
        "--tools",
        "demo",
        "--synthesizer",
        "concat",
    ];
    let streamed = piped(&base, &[half, rest], Duration::from_millis(200));
    let mut no_stream = base.to_vec();
    no_stream.push("--no-stream");
    let whole = piped(&no_stream, &[plan], Duration::ZERO);
    assert_eq!(streamed.0, 2, "{}", streamed.2);
    assert_eq!((streamed.0, &streamed.2), (whole.0, &whole.2));
    assert!(streamed.2.contains("unknown node 9"), "{}", streamed.2);
}
