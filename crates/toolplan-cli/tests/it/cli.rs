//! The `toolplan` binary, driven as a user would: real processes, real files, exit codes and output.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::PathBuf;

use assert_cmd::Command;
use serde_json::Value;

fn toolplan() -> Command {
    Command::cargo_bin("toolplan").unwrap()
}

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

fn run_json(args: &[&str]) -> Value {
    let out = toolplan()
        .arg("run")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is exactly one JSON object")
}

#[test]
fn the_weather_comparison_example_runs() {
    let v = run_json(&[example("weather.json").to_str().unwrap()]);
    assert_eq!(
        v["outputs"]["comparison"]["different"]["temp"]["difference"],
        6
    );
    assert_eq!(v["errors"], serde_json::json!({}));
    assert_eq!(
        v["waves"],
        serde_json::json!([["weather_tokyo", "weather_london"], ["comparison"]])
    );
    for id in ["weather_tokyo", "weather_london", "comparison"] {
        assert_eq!(v["steps"][id]["status"], "ok", "{id}");
        assert!(v["steps"][id]["started_ms"].as_f64().unwrap() >= 0.0);
    }
    assert!(v["elapsed_ms"].as_f64().unwrap() >= 0.0);
    // Only the output step is returned.
    assert!(v["outputs"].get("weather_tokyo").is_none());
}

#[test]
fn fail_forward_reports_failed_and_skipped_steps() {
    let v = run_json(&[example("fail-forward.json").to_str().unwrap()]);
    assert_eq!(v["outcome"], "completed");
    assert_eq!(v["steps"]["s1"]["status"], "failed");
    assert_eq!(v["steps"]["s3"]["status"], "skipped");
    assert_eq!(v["errors"]["s1"], "flaky_api: upstream returned 503");
    assert_eq!(v["errors"]["s3"], "Skipped because dependency 's1' failed");
    assert_eq!(v["outputs"]["s4"], "Paris: cloudy");
    assert_eq!(v["outputs"]["s2"]["city"], "Paris");
    assert!(v["outputs"].get("s3").is_none());
}

#[test]
fn diamond_resolves_references() {
    let v = run_json(&[example("diamond.json").to_str().unwrap()]);
    assert_eq!(v["outputs"]["join"], "diamond: left=20, right=10");
}

#[test]
fn human_report_has_timeline_and_outputs() {
    let out = toolplan()
        .args(["run", example("fail-forward.json").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(
            "Plan completed with errors: 4 steps in 2 waves, 2 ok, 1 failed, 1 skipped"
        ),
        "{text}"
    );
    assert!(text.contains("timeline"), "{text}");
    assert!(text.contains("s4    concat       ok"), "{text}");
    assert!(
        text.contains("s3 (skipped): Skipped because dependency 's1' failed"),
        "{text}"
    );
}

#[test]
fn invalid_plan_exits_2_with_every_problem_on_stderr() {
    let out = toolplan()
        .args(["run", example("invalid.json").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    for needle in [
        "6 problems",
        "Duplicate step ID: 'a'",
        "Unknown tool 'get_wether' in step 'a' (did you mean 'get_weather'?)",
        "step 'd': arguments are not valid JSON",
        "step 'e' calls execute_tool_plan",
        "references unknown step 'nowhere'",
        "b -> c -> b",
    ] {
        assert!(err.contains(needle), "missing {needle:?} in:\n{err}");
    }
}

#[test]
fn validate_reports_waves_without_running() {
    let out = toolplan()
        .args([
            "validate",
            example("parallel.json").to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["valid"], true);
    assert_eq!(v["steps"], 6);
    assert_eq!(
        v["waves"],
        serde_json::json!([["tokyo", "b"], ["a", "c"], ["d"], ["sum"]])
    );

    let out = toolplan()
        .args(["validate", example("invalid.json").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("6 problems"));
}

#[test]
fn plan_from_stdin() {
    let out = toolplan()
        .args(["run", "-", "--json"])
        .write_stdin(
            r#"{"steps":[{"id":"x","tool":"calculator","arguments":{"expression":"6*7"}}]}"#,
        )
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["outputs"]["x"], 42);
}

#[test]
fn not_json_is_an_invalid_plan() {
    let out = toolplan()
        .args(["run", "-"])
        .write_stdin("{\"steps\": [")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not valid JSON"));
}

#[test]
fn missing_file_is_an_error_naming_it() {
    let out = toolplan()
        .args(["run", "no/such/plan.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot read plan file 'no/such/plan.json'")
    );
}

const SLEEPS: &str = r#"{"steps":[
  {"id":"a","tool":"sleep","arguments":{"ms":150,"value":1}},
  {"id":"b","tool":"sleep","arguments":{"ms":150,"value":2}},
  {"id":"c","tool":"sleep","arguments":{"ms":150,"value":3}}]}"#;

fn run_stdin(plan: &str, args: &[&str]) -> Value {
    let out = toolplan()
        .args(["run", "-", "--json"])
        .args(args)
        .write_stdin(plan)
        .output()
        .unwrap();
    common::assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn concurrency_flag_limits_parallelism() {
    let parallel = run_stdin(SLEEPS, &[]);
    assert!(
        parallel["elapsed_ms"].as_f64().unwrap() < 400.0,
        "{parallel}"
    );
    let serial = run_stdin(SLEEPS, &["--concurrency", "1"]);
    assert!(serial["elapsed_ms"].as_f64().unwrap() >= 450.0, "{serial}");
    let limited = run_stdin(SLEEPS, &["--tool-limit", "sleep=1"]);
    assert!(
        limited["elapsed_ms"].as_f64().unwrap() >= 450.0,
        "{limited}"
    );
}

#[test]
fn step_timeout_and_deadline() {
    let plan = r#"{"steps":[
      {"id":"slow","tool":"sleep","arguments":{"ms":5000}},
      {"id":"fast","tool":"sleep","arguments":{"ms":10,"value":"ok"}},
      {"id":"after","tool":"echo","arguments":{"text":"$ref:slow"}}]}"#;
    let v = run_stdin(plan, &["--step-timeout", "200ms"]);
    assert_eq!(v["errors"]["slow"], "timed out after 200ms");
    assert_eq!(
        v["errors"]["after"],
        "Skipped because dependency 'slow' failed"
    );
    assert_eq!(v["outputs"]["fast"], "ok");
    assert!(v["elapsed_ms"].as_f64().unwrap() < 2000.0);

    let v = run_stdin(plan, &["--deadline", "300ms", "--step-timeout", "none"]);
    assert_eq!(v["outcome"], "deadline_exceeded");
    assert_eq!(v["steps"]["slow"]["status"], "failed");
    assert_eq!(v["steps"]["after"]["status"], "skipped");
    assert_eq!(v["outputs"]["fast"], "ok");
}

#[test]
fn wave_barrier_schedule_waits_for_the_whole_wave() {
    let plan = r#"{"steps":[
      {"id":"long","tool":"sleep","arguments":{"ms":300}},
      {"id":"short","tool":"sleep","arguments":{"ms":10,"value":1}},
      {"id":"next","tool":"sleep","arguments":{"ms":10,"value":"$ref:short"}}]}"#;
    let dep = run_stdin(plan, &[]);
    assert!(
        dep["steps"]["next"]["started_ms"].as_f64().unwrap() < 200.0,
        "{dep}"
    );
    let wave = run_stdin(plan, &["--schedule", "wave-barrier"]);
    assert!(
        wave["steps"]["next"]["started_ms"].as_f64().unwrap() >= 300.0,
        "{wave}"
    );
}

#[test]
fn tools_lists_names_descriptions_and_schemas() {
    let out = toolplan()
        .args(["tools", "--json", "--with-planner"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "echo",
            "concat",
            "sleep",
            "fail",
            "get_weather",
            "get_user",
            "calculator",
            "compare_data",
            "execute_tool_plan"
        ]
    );
    assert_eq!(
        v[4]["parameters"]["required"],
        serde_json::json!(["location"])
    );
    assert!(
        v[8]["description"]
            .as_str()
            .unwrap()
            .contains("- get_weather:")
    );

    let out = toolplan().args(["tools"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("calculator\n  Evaluates an arithmetic expression"),
        "{text}"
    );
}

#[test]
fn every_subcommand_has_help() {
    for sub in ["run", "validate", "tools", "ask"] {
        let out = toolplan().args([sub, "--help"]).output().unwrap();
        assert!(out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage: toolplan"),
            "{sub}"
        );
    }
    let out = toolplan()
        .args(["run", "x.json", "--concurrency", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
