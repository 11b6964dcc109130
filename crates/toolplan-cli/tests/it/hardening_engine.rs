//! Hostile plans against the engine, played black-box through the `toolplan` binary as a model or
//! an MCP client would send them: values nested deeper with every step, one output referenced
//! thousands of times, outputs kept until memory runs out, huge errors, a synchronous tool handed a
//! huge input. Each must end as a clear error on the step at fault, with the process alive and its
//! memory bounded (the memory-hungry cases run under an address-space cap that the old behaviour
//! broke through).
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn toolplan() -> String {
    assert_cmd::cargo::cargo_bin("toolplan")
        .to_string_lossy()
        .into_owned()
}

fn write_plan(dir: &Path, plan: &Value) -> PathBuf {
    let path = dir.join("plan.json");
    std::fs::write(&path, serde_json::to_vec(plan).unwrap()).unwrap();
    path
}

/// Runs `toolplan run PLAN --tools demo --json EXTRA…` with an address-space cap of `cap_mib`
/// (through the shell's `ulimit -v`), and returns what it printed.
fn run_capped(plan: &Path, extra: &[&str], cap_mib: u64) -> Output {
    let mut command = format!(
        "ulimit -v {} && exec \"$0\" run \"$1\" --tools demo --json",
        cap_mib * 1024
    );
    for (i, _) in extra.iter().enumerate() {
        command.push_str(&format!(" \"${}\"", i + 2));
    }
    Command::new("sh")
        .arg("-c")
        .arg(command)
        .arg(toolplan())
        .arg(plan)
        .args(extra)
        .output()
        .unwrap()
}

/// The process ended by itself (an exit code, not a signal: a stack overflow or an allocation
/// failure aborts), and printed one JSON report.
fn report(out: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code().is_some(),
        "killed by a signal ({:?}); stderr: {}",
        out.status,
        &stderr[..stderr.len().min(2000)]
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON report ({e}); stderr: {}",
            &stderr[..stderr.len().min(2000)]
        )
    })
}

/// `levels` arrays around `inner`.
fn nest(inner: Value, levels: usize) -> Value {
    (0..levels).fold(inner, |v, _| Value::Array(vec![v]))
}

/// 1,000 steps, each wrapping the previous step's output in 30 more arrays: without a depth limit
/// the resolved arguments grow 30 levels a step until copying or dropping them overflows the stack.
fn deepening_plan(steps: usize) -> Value {
    let mut plan =
        vec![json!({"id": "s0", "tool": "echo", "arguments": {"text": nest(json!("x"), 30)}})];
    for i in 1..steps {
        plan.push(json!({"id": format!("s{i}"), "tool": "echo",
                         "arguments": {"text": nest(json!(format!("$ref:s{}", i - 1)), 30)}}));
    }
    json!({"steps": plan, "output_steps": [format!("s{}", steps - 1)]})
}

#[test]
fn references_that_nest_deeper_every_step_fail_the_step_at_the_depth_limit() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path(), &deepening_plan(1000));
    let out = run_capped(&plan, &[], 4096);
    let v = report(&out);
    // s0 is 31 levels deep, s1 62, s2 93, s3 124; s4 would be 155.
    for ok in ["s0", "s1", "s2", "s3"] {
        assert_eq!(v["steps"][ok]["status"], "ok", "{ok}: {}", v["errors"]);
    }
    let error = v["errors"]["s4"].as_str().unwrap();
    assert!(
        error.contains("nest deeper than the limit of 128 levels (max_value_depth)")
            && error.contains("$ref:s3"),
        "{error}"
    );
    assert_eq!(
        v["errors"]["s999"],
        "Skipped because dependency 's998' failed"
    );
}

/// A 1 MB output built by doubling (the plan itself stays small): `d20` holds 2^20 characters.
fn megabyte_steps() -> Vec<Value> {
    let mut steps = vec![json!({"id": "d0", "tool": "echo", "arguments": {"text": "x"}})];
    for i in 1..=20 {
        let prev = format!("$ref:d{}", i - 1);
        steps.push(json!({"id": format!("d{i}"), "tool": "concat",
                          "arguments": {"a": prev, "b": prev}}));
    }
    steps
}

#[test]
fn one_output_referenced_thousands_of_times_fails_at_the_argument_budget() {
    let dir = tempfile::tempdir().unwrap();
    let mut steps = megabyte_steps();
    // 5,000 copies of 1 MB: 5 GB if expanded, under a 2 GiB cap.
    let copies: Vec<Value> = (0..5000).map(|_| json!("$ref:d20")).collect();
    steps.push(json!({"id": "amplify", "tool": "echo", "arguments": {"text": copies}}));
    steps.push(json!({"id": "after", "tool": "echo", "arguments": {"text": "still running"}}));
    let plan = write_plan(
        dir.path(),
        &json!({"steps": steps, "output_steps": ["amplify", "after"]}),
    );
    let started = Instant::now();
    let v = report(&run_capped(&plan, &[], 2048));
    let error = v["errors"]["amplify"].as_str().unwrap();
    assert!(
        error.contains("exceed the limit of 33554432 bytes (max_resolved_argument_bytes)")
            && error.contains("$ref:d20"),
        "{error}"
    );
    assert_eq!(v["outputs"]["after"], "still running");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn outputs_a_run_keeps_stay_within_their_budget() {
    let dir = tempfile::tempdir().unwrap();
    let mut steps = megabyte_steps();
    // 300 outputs of 1 MB that the last step waits for: 300 MB if all are kept.
    let ids: Vec<String> = (0..300).map(|i| format!("copy{i}")).collect();
    for id in &ids {
        steps.push(json!({"id": id, "tool": "echo", "arguments": {"text": "$ref:d20"}}));
    }
    steps.push(
        json!({"id": "last", "tool": "echo", "arguments": {"text": "done"}, "depends_on": ids}),
    );
    let plan = write_plan(
        dir.path(),
        &json!({"steps": steps, "output_steps": ["last"]}),
    );
    let v = report(&run_capped(&plan, &[], 2048));
    let errors = v["errors"].as_object().unwrap();
    let over: Vec<&String> = errors
        .iter()
        .filter(|(_, e)| {
            e.as_str()
                .unwrap()
                .contains("past the limit of 268435456 bytes (max_kept_output_bytes)")
        })
        .map(|(id, _)| id)
        .collect();
    // About 255 copies fit (the 1 MB source is kept too while copies still read it); the copy that
    // would go past the budget fails, which skips `last`, and with `last` gone nobody needs the
    // copies any more: they are let go, and the copies after it are not kept.
    assert_eq!(over.len(), 1, "{over:?}");
    let failed = over[0];
    let n: usize = failed.trim_start_matches("copy").parse().unwrap();
    assert!((250..260).contains(&n), "{failed}");
    assert_eq!(v["steps"]["copy0"]["status"], "ok");
    assert_eq!(v["steps"]["copy299"]["status"], "ok");
    assert_eq!(
        v["errors"]["last"],
        format!("Skipped because dependency '{failed}' failed")
    );
}

#[test]
fn a_huge_tool_error_is_cut_with_a_note_of_what_was_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut steps = megabyte_steps();
    // 8 MB of error text.
    for i in 21..=23 {
        let prev = format!("$ref:d{}", i - 1);
        steps.push(
            json!({"id": format!("d{i}"), "tool": "concat", "arguments": {"a": prev, "b": prev}}),
        );
    }
    steps.push(json!({"id": "boom", "tool": "fail", "arguments": {"message": "$ref:d23"}}));
    let plan = write_plan(
        dir.path(),
        &json!({"steps": steps, "output_steps": ["boom"]}),
    );
    let out = run_capped(&plan, &[], 4096);
    let v = report(&out);
    let error = v["errors"]["boom"].as_str().unwrap();
    assert!(error.len() < 70_000, "{} bytes of error", error.len());
    assert!(
        error.ends_with(" MB more"),
        "{}",
        &error[error.len() - 40..]
    );
    assert!(
        out.stdout.len() < 200_000,
        "{} bytes of report",
        out.stdout.len()
    );
}

#[test]
fn the_calculator_refuses_huge_expressions_and_stays_within_the_step_timeout() {
    let dir = tempfile::tempdir().unwrap();
    // "1+" doubled 19 times: a 1 MB expression built at run time (so only the run-time schema check
    // sees it).
    let mut steps = vec![json!({"id": "e0", "tool": "echo", "arguments": {"text": "1+"}})];
    for i in 1..=19 {
        let prev = format!("$ref:e{}", i - 1);
        steps.push(
            json!({"id": format!("e{i}"), "tool": "concat", "arguments": {"a": prev, "b": prev}}),
        );
    }
    steps.push(
        json!({"id": "sum", "tool": "calculator", "arguments": {"expression": "$ref:e19 1"}}),
    );
    // Within the limits, a long sum still works.
    steps.push(json!({"id": "ok", "tool": "calculator",
                      "arguments": {"expression": format!("{}1", "1+".repeat(4000))}}));
    let plan = write_plan(
        dir.path(),
        &json!({"steps": steps, "output_steps": ["sum", "ok"]}),
    );
    let started = Instant::now();
    let v = report(&run_capped(&plan, &["--step-timeout", "2s"], 4096));
    assert!(started.elapsed() < Duration::from_secs(20));
    let error = v["errors"]["sum"].as_str().unwrap();
    assert!(
        error.contains("arguments do not match the schema of tool 'calculator'")
            && error.contains("/expression: the value (1.0 MB) is longer than 10000 characters"),
        "{error}"
    );
    assert_eq!(v["outputs"]["ok"], 4001);

    // Literal arguments are checked before anything runs.
    let plan = write_plan(
        dir.path(),
        &json!({"steps": [{"id": "c", "tool": "calculator",
                           "arguments": {"expression": "1+".repeat(200_000) + "1"}}]}),
    );
    let out = Command::new(toolplan())
        .args(["run", plan.to_str().unwrap(), "--tools", "demo"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("/expression: the value (400.0 KB) is longer than 10000 characters"),
        "{stderr}"
    );

    // Parentheses nested past the parser's depth: an error, not a stack overflow.
    let nested = format!("{}1{}", "(".repeat(3000), ")".repeat(3000));
    let plan = write_plan(
        dir.path(),
        &json!({"steps": [{"id": "c", "tool": "calculator", "arguments": {"expression": nested}}]}),
    );
    let v = report(&run_capped(&plan, &[], 4096));
    let error = v["errors"]["c"].as_str().unwrap();
    assert!(error.contains("deeper than the limit of 64"), "{error}");
}

/// `toolplan mcp --http` on a free loopback port.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start() -> HttpServer {
        let (child, url) = common::start_mcp_http(&["--tools", "demo"]);
        HttpServer { child, url }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Calls execute_tool_plan with each PLAN file over streamable HTTP (the official Python SDK), each in
/// a session of its own, then a small plan: prints the text results as a JSON list.
const PLAN_CLIENT: &str = r#"
import asyncio, json, sys
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

async def call(url, plan):
    async with streamable_http_client(url) as (read, write, *_):
        async with ClientSession(read, write) as session:
            await session.initialize()
            r = await session.call_tool("execute_tool_plan", plan)
            return r.content[0].text if r.content else ""

async def main():
    url, paths = sys.argv[1], sys.argv[2:]
    small = {"steps": [{"id": "w", "tool": "get_weather", "arguments": {"location": "Tokyo"}}]}
    texts = [await call(url, json.load(open(p))) for p in paths] + [await call(url, small)]
    print(json.dumps(texts))

asyncio.run(main())
"#;

#[test]
fn a_deepening_plan_fails_its_step_and_the_mcp_server_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let server = HttpServer::start();
    // 100 steps: about 30 KB of plan.
    let deep = write_plan(dir.path(), &deepening_plan(100));
    // A 512 KB result: the text a client's model reads is cut, the structured report is whole
    // (the Python SDK refuses server-sent events over 1 MiB).
    let big = dir.path().join("big.json");
    let mut steps = megabyte_steps();
    steps.pop();
    std::fs::write(
        &big,
        json!({"steps": steps, "output_steps": ["d19"]}).to_string(),
    )
    .unwrap();
    let out = Command::new(common::servers::servers_dir().join("venv/bin/python"))
        .arg("-c")
        .arg(PLAN_CLIENT)
        .arg(&server.url)
        .arg(&deep)
        .arg(&big)
        .output()
        .unwrap();
    common::assert_ok(&out);
    let texts: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    assert!(texts[0].contains("max_value_depth"), "{}", texts[0]);
    assert!(
        texts[1].len() < 40_000 && texts[1].ends_with("… 491.5 KB more"),
        "{} bytes: …{}",
        texts[1].len(),
        &texts[1][texts[1].len().saturating_sub(40)..]
    );
    assert!(
        texts[2].contains("Plan executed successfully"),
        "{}",
        texts[2]
    );
}

#[test]
fn the_budgets_are_set_in_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("limits.toml");
    std::fs::write(
        &config,
        "[limits]\nmax_value_depth = 3\nmax_resolved_argument_bytes = 100\nmax_error_bytes = 200\n",
    )
    .unwrap();
    let plan = write_plan(
        dir.path(),
        &json!({"steps": [
            {"id": "deep", "tool": "echo", "arguments": {"text": nest(json!(1), 2)}},
            {"id": "deeper", "tool": "echo", "arguments": {"text": ["$ref:deep"]}},
            {"id": "big", "tool": "echo", "arguments": {"text": "x".repeat(60)}},
            {"id": "twice", "tool": "concat", "arguments": {"a": "$ref:big", "b": "$ref:big"}},
            {"id": "loud", "tool": "fail", "arguments": {"message": "y".repeat(500)}}
        ]}),
    );
    let out = Command::new(toolplan())
        .args([
            "run",
            plan.to_str().unwrap(),
            "--tools",
            "demo",
            "--json",
            "--config",
        ])
        .arg(&config)
        .output()
        .unwrap();
    let v = report(&out);
    assert_eq!(v["steps"]["deep"]["status"], "ok");
    let deeper = v["errors"]["deeper"].as_str().unwrap();
    assert!(deeper.contains("limit of 3 levels"), "{deeper}");
    let twice = v["errors"]["twice"].as_str().unwrap();
    assert!(twice.contains("limit of 100 bytes"), "{twice}");
    assert_eq!(
        v["errors"]["loud"],
        format!("{}… 300 bytes more", "y".repeat(200))
    );
}

#[test]
fn an_api_key_is_never_sent_over_plain_http_to_another_machine() {
    // `.invalid` never resolves: nothing could be sent even if the check were gone.
    let out = Command::new(toolplan())
        .args(["ask", "hi", "--model", "openai:m", "--tools", "none"])
        .args(["--base-url", "http://models.invalid/v1"])
        .env("OPENAI_API_KEY", "sk-test-not-a-key")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("the credentials would be sent in clear text to models.invalid"),
        "{stderr}"
    );
}
