//! `toolplan ask` end to end with the real small local model (Qwen2.5-Coder-0.5B-Instruct, fetched by
//! `bash scripts/fetch-model.sh small`): the agent runs, every constrained reply parses, the tools
//! answer, and the answer comes back.
#![cfg(feature = "local")]
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::{Mutex, MutexGuard, PoisonError};

use assert_cmd::Command;
use serde_json::Value;

/// The tests that run the model take turns: each `toolplan` process uses every core for inference,
/// and three at once on a 2-core machine pushed a single model call past its 120 s timeout.
fn one_model_at_a_time() -> MutexGuard<'static, ()> {
    static MODEL: Mutex<()> = Mutex::new(());
    MODEL.lock().unwrap_or_else(PoisonError::into_inner)
}

fn small_model() -> String {
    let dir = std::env::var_os("TOOLPLAN_MODEL_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/toolplan/models")
        });
    let path = dir.join("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf");
    assert!(
        path.is_file(),
        "{} is missing: fetch it with `bash scripts/fetch-model.sh small`",
        path.display()
    );
    path.display().to_string()
}

#[test]
fn ask_answers_with_the_local_model_and_the_demo_tools() {
    let _turn = one_model_at_a_time();
    let model = format!("local:{}", small_model());
    // A slow CI machine may need more than the default 120 s for one call; the config's
    // limits.model_timeout gives it that.
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), "[limits]\nmodel_timeout = \"280s\"\n").unwrap();
    let out = Command::cargo_bin("toolplan")
        .unwrap()
        .args([
            "ask",
            "What is the weather in Tokyo? Use the tools.",
            "--model",
            &model,
            "--json",
            "--max-turns",
            "4",
        ])
        .arg("--config")
        .arg(config.path())
        .current_dir(std::env::temp_dir())
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap();
    common::assert_ok(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let answer = v["answer"].as_str().unwrap();
    assert!(!answer.trim().is_empty());
    // The local model's default: one plan that brings its answer, or is answered with its results,
    // so one model call may be all.
    assert!(v["llm_calls"].as_u64().unwrap() >= 1, "{v}");
    assert!(v["plans"].as_u64().unwrap() >= 1, "{v}");
    assert!(v["tool_calls"].as_u64().unwrap() >= 1, "{v}");
    assert!(v["input_tokens"].as_u64().unwrap() > 100, "{v}");
    assert!(v["output_tokens"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["tool_errors"], 0, "{v}");
    // The fixed table says 18 °C and sunny in Tokyo.
    assert!(
        answer.contains("18") || answer.to_lowercase().contains("sunny"),
        "{answer}"
    );
}

#[test]
fn a_missing_local_model_names_the_command_that_fetches_it() {
    let out = Command::cargo_bin("toolplan")
        .unwrap()
        .args(["ask", "hi", "--model", "local:/nonexistent/model.gguf"])
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/model.gguf"), "{err}");
}

#[test]
fn query_plan_branches_are_synthesized_by_the_local_model() {
    let _turn = one_model_at_a_time();
    let model = format!("local:{}", small_model());
    let root =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/query-plan");
    let out = Command::cargo_bin("toolplan")
        .unwrap()
        .args(["query-plan"])
        .arg(root.join("plan.json"))
        .arg("--docs")
        .arg(root.join("reports"))
        .args(["--tools", "none", "--model", &model, "--json"])
        .current_dir(std::env::temp_dir())
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap();
    common::assert_ok(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let answer = v["answer"].as_str().unwrap_or_default();
    assert!(!answer.trim().is_empty(), "{v}");
    assert_eq!(v["tool_calls"], 3, "{v}");
    assert_eq!(v["llm_calls"], 1, "{v}");
    assert!(v["input_tokens"].as_u64().unwrap() > 200, "{v}");
    // The three quarters' growth figures are in the reports the leaves read.
    assert!(
        ["18%", "14%", "7%"].iter().any(|f| answer.contains(f)),
        "{answer}"
    );
}

#[test]
fn the_iris_question_becomes_dsl_that_counts_fifty() {
    let _turn = one_model_at_a_time();
    let model = format!("local:{}", small_model());
    let shared = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    let data = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        Command::cargo_bin("toolplan")
            .unwrap()
            .args(args)
            .arg("--data-dir")
            .arg(data.path())
            .timeout(std::time::Duration::from_secs(300))
            .output()
            .unwrap()
    };
    let mapping = shared.join("iris-mapping.json");
    let bulk = shared.join("iris.ndjson");
    assert!(
        run(&[
            "index",
            "create",
            "iris-index",
            "--mapping",
            mapping.to_str().unwrap()
        ])
        .status
        .success()
    );
    assert!(
        run(&["index", "bulk", bulk.to_str().unwrap()])
            .status
            .success()
    );
    let out = run(&[
        "dsl",
        "How many iris flowers of type setosa are there?",
        "--index",
        "iris-index",
        "--model",
        &model,
        "--execute",
        "--json",
    ]);
    common::assert_ok(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["fallback"], Value::Null, "{v}");
    assert_eq!(v["response"]["hits"]["total"]["value"], 50, "{v}");
}
