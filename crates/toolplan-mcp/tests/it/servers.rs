//! Plans over real MCP servers (server-everything, server-filesystem and server-memory from npm,
//! mcp-server-time from PyPI): data flowing from one server's result into another's arguments, a
//! tool error, a slow tool timing out, a server killed in the middle of a plan and started again,
//! a server that does not start, and names that clash.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolplan_core::{Engine, PlanRun, RunControl, ToolRegistry};
use toolplan_mcp::{McpError, McpServer, McpServerConfig, connect_all};

async fn engine(configs: &[McpServerConfig]) -> (Vec<Arc<McpServer>>, Engine) {
    let (servers, tools) = connect_all(configs, &[]).await.unwrap();
    let mut registry = ToolRegistry::new();
    registry.register_all(tools).unwrap();
    (servers, Engine::new(Arc::new(registry)))
}

async fn run(engine: &Engine, plan: Value) -> PlanRun {
    let plan = engine.compile_value(plan).unwrap();
    engine
        .run(&plan, RunControl::with_cancel(CancellationToken::new()))
        .await
}

fn step<'a>(run: &'a PlanRun, id: &str) -> &'a toolplan_core::StepRecord {
    run.steps.iter().find(|s| s.id == id).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn one_plan_over_four_servers_passes_results_between_them() {
    let dir = tempfile::tempdir().unwrap();
    let (servers, engine) = engine(&[
        common::time(),
        common::everything("everything"),
        common::filesystem(dir.path()),
        common::memory(&dir.path().join("memory.jsonl")),
    ])
    .await;
    let file = dir.path().join("now.txt").to_string_lossy().into_owned();
    let run = run(
        &engine,
        json!({"steps": [
            {"id": "t", "tool": "get_current_time", "arguments": {"timezone": "Etc/UTC"}},
            {"id": "e", "tool": "echo", "arguments": {"message": "It is $ref:t.day_of_week"}},
            {"id": "w", "tool": "write_file", "arguments": {"path": file, "content": "$ref:e"}},
            {"id": "r", "tool": "read_text_file", "arguments": {"path": file}, "depends_on": ["w"]},
            {"id": "m", "tool": "create_entities", "arguments": {"entities": [
                {"name": "clock", "entityType": "reading", "observations": ["$ref:t.datetime"]}]}},
            {"id": "o", "tool": "open_nodes", "arguments": {"names": ["clock"]}, "depends_on": ["m"]}],
            "output_steps": ["t", "r", "o"]}),
    )
    .await;
    assert!(run.all_ok(), "{}", run.to_json());
    let out = run.outputs_map();
    let day = out["t"]["day_of_week"].as_str().unwrap();
    assert_eq!(out["r"]["content"], format!("Echo: It is {day}"));
    assert_eq!(
        out["o"]["entities"][0]["observations"][0],
        out["t"]["datetime"]
    );
    // echo (server-everything) and create_entities (server-memory) both needed only t: one wave.
    assert_eq!(run.waves, [vec![0], vec![1, 4], vec![2, 5], vec![3]]);
    for s in servers {
        s.close().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_error_fails_its_step_and_skips_what_needs_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir
        .path()
        .join("missing.txt")
        .to_string_lossy()
        .into_owned();
    let (_servers, engine) = engine(&[
        common::filesystem(dir.path()),
        common::everything("everything"),
    ])
    .await;
    let run = run(
        &engine,
        json!({"steps": [
            {"id": "r", "tool": "read_text_file", "arguments": {"path": missing}},
            {"id": "e", "tool": "echo", "arguments": {"message": "$ref:r.content"}},
            {"id": "s", "tool": "get-sum", "arguments": {"a": 2, "b": 3}}]}),
    )
    .await;
    let r = step(&run, "r");
    assert_eq!(r.status, toolplan_core::StepStatus::Failed);
    assert!(
        r.error.as_deref().unwrap().contains("ENOENT"),
        "{:?}",
        r.error
    );
    assert_eq!(step(&run, "e").status, toolplan_core::StepStatus::Skipped);
    assert_eq!(run.outputs_map()["s"], "The sum of 2 and 3 is 5.");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_tool_times_out_and_the_server_stays_usable() {
    let mut config = common::everything("everything");
    config.timeout = Some("1s".into());
    let (_servers, engine) = engine(&[config]).await;
    let started = Instant::now();
    let run = run(
        &engine,
        json!({"steps": [
            {"id": "slow", "tool": "trigger-long-running-operation", "arguments": {"duration": 5, "steps": 5}},
            {"id": "echo", "tool": "echo", "arguments": {"message": "still here"}}]}),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    let slow = step(&run, "slow");
    assert!(
        slow.error
            .as_deref()
            .unwrap()
            .contains("timed out after 1 s"),
        "{:?}",
        slow.error
    );
    assert_eq!(run.outputs_map()["echo"], "Echo: still here");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_killed_mid_plan_fails_that_call_and_is_started_again() {
    let (servers, engine) = engine(&[common::everything("everything")]).await;
    let server = Arc::clone(&servers[0]);
    let pgid = server.process_group().unwrap();
    let killer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let status = std::process::Command::new("kill")
            .args(["-9", "--", &format!("-{pgid}")])
            .status()
            .unwrap();
        assert!(status.success());
    });
    let run1 = run(
        &engine,
        json!({"steps": [{"id": "slow", "tool": "trigger-long-running-operation",
                          "arguments": {"duration": 5, "steps": 5}}]}),
    )
    .await;
    killer.await.unwrap();
    let error = step(&run1, "slow").error.clone().unwrap();
    assert!(
        error.contains("MCP server 'everything': the server exited during the call"),
        "{error}"
    );
    // The next plan starts it again.
    let run2 = run(
        &engine,
        json!({"steps": [{"id": "e", "tool": "echo", "arguments": {"message": "back"}}]}),
    )
    .await;
    assert!(run2.all_ok(), "{}", run2.to_json());
    assert_ne!(server.process_group(), Some(pgid));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_does_not_start_is_named_with_its_stderr() {
    let broken = McpServerConfig::stdio(
        "broken",
        "sh",
        &["-c", "echo 'fatal: no config' >&2; exit 3"],
    );
    let err = McpServer::connect(&broken).await.unwrap_err();
    assert!(matches!(err, McpError::Start { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.starts_with("MCP server 'broken' did not start"),
        "{text}"
    );
    assert!(text.contains("fatal: no config"), "{text}");

    let missing = McpServerConfig::stdio("ghost", "/nonexistent/mcp-server", &[]);
    let text = McpServer::connect(&missing).await.unwrap_err().to_string();
    assert!(
        text.contains("MCP server 'ghost' did not start: cannot run '/nonexistent/mcp-server'"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn clashing_names_are_prefixed_with_their_server() {
    let (servers, tools) = connect_all(
        &[common::everything("a"), common::everything("b")],
        &["get-sum".to_owned()],
    )
    .await
    .unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    assert!(
        names.contains(&"a.echo") && names.contains(&"b.echo"),
        "{names:?}"
    );
    assert!(names.contains(&"a.get-sum"), "{names:?}");
    assert!(!names.contains(&"echo"));
    let (_s, tools) = connect_all(&[common::everything("only")], &[])
        .await
        .unwrap();
    assert!(tools.iter().any(|t| t.name() == "echo"));
    drop(servers);
}
