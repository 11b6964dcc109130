//! `toolplan query-plan`, and `toolplan ask --planner query-plan`, end to end: the example plan over
//! the example reports, invalid plans, and synthesis by a model behind a loopback OpenAI-compatible
//! server (a test double that records the prompts).
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::PathBuf;

use assert_cmd::Command;
use common::{completion, serve};
use serde_json::{Value, json};

fn example(path: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/query-plan");
    root.join(path).to_string_lossy().into_owned()
}

fn toolplan(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("toolplan")
        .unwrap()
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap()
}

#[test]
fn the_example_plan_runs_with_concat() {
    let plan = example("plan.json");
    let docs = example("reports");
    let out = toolplan(&[
        "query-plan",
        &plan,
        "--docs",
        &docs,
        "--synthesizer",
        "concat",
        "--json",
    ]);
    common::assert_ok(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let answer = v["answer"].as_str().unwrap();
    assert!(
        answer.starts_with(
            "Query: What was the revenue and its growth in the quarter ending March 2022?\nResponse: "
        ),
        "{answer}"
    );
    for figure in ["$612 million", "$698 million", "$747 million"] {
        assert!(answer.contains(figure), "{figure} missing: {answer}");
    }
    assert_eq!(v["root"], "4");
    assert_eq!(v["tool_calls"], 3);
    assert_eq!(v["llm_calls"], 0);
    assert_eq!(v["synthesizer"], "concat");
    assert_eq!(v["waves"], json!([["1", "2", "3"], ["4"]]));
    assert_eq!(v["nodes"]["2"]["tool"], "june_2022");
    assert_eq!(v["nodes"]["2"]["status"], "ok");
    assert!(
        v["nodes"]["2"]["answer"]
            .as_str()
            .unwrap()
            .contains("$698 million")
    );
}

#[test]
fn invalid_plans_exit_2_naming_each_node() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("bad.json");
    std::fs::write(
        &plan,
        json!({"nodes": [
            {"id": 1, "query_str": "a", "tool_name": "get_wether", "dependencies": []},
            {"id": 2, "query_str": "b", "tool_name": null, "dependencies": [1, 7]},
            {"id": 3, "query_str": "c", "tool_name": null, "dependencies": []}
        ]})
        .to_string(),
    )
    .unwrap();
    let out = toolplan(&[
        "query-plan",
        plan.to_str().unwrap(),
        "--synthesizer",
        "concat",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("3 problems") || err.contains("4 problems"),
        "{err}"
    );
    assert!(err.contains("found 2: 2, 3"), "{err}");
    assert!(
        err.contains("node 1 names unknown tool 'get_wether' (did you mean 'get_weather'?)"),
        "{err}"
    );
    assert!(err.contains("node 2 depends on unknown node 7"), "{err}");
    assert!(
        err.contains("node 3 has neither dependencies nor a tool_name"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn compact_synthesis_sends_each_child_as_query_and_response() {
    let (url, seen) = serve(vec![completion(
        json!({"role": "assistant", "content": "Tokyo is warmer than London."}),
        120,
        8,
    )]);
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        json!({"nodes": [
            {"id": 1, "query_str": "Tokyo", "tool_name": "get_weather", "dependencies": []},
            {"id": 2, "query_str": "London", "tool_name": "get_weather", "dependencies": []},
            {"id": 3, "query_str": "Which city is warmer?", "tool_name": null, "dependencies": [1, 2]}
        ]})
        .to_string(),
    )
    .unwrap();
    let out = toolplan(&[
        "query-plan",
        plan.to_str().unwrap(),
        "--model",
        "openai:test",
        "--base-url",
        &url,
        "--json",
    ]);
    common::assert_ok(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["answer"], "Tokyo is warmer than London.");
    assert_eq!(v["llm_calls"], 1);
    assert_eq!(v["input_tokens"], 120);
    assert_eq!(v["model"], "openai:test");
    let requests = seen.lock().unwrap();
    let prompt = requests[0]["messages"][1]["content"].as_str().unwrap();
    assert!(
        prompt.contains(
            "Query: Tokyo\nResponse: {\"temp\":18,\"condition\":\"sunny\",\"city\":\"Tokyo\"}\n\n\
         Query: London\nResponse: {\"temp\":12,\"condition\":\"rainy\",\"city\":\"London\"}"
        ),
        "{prompt}"
    );
    assert!(
        prompt.ends_with("Question: Which city is warmer?\nAnswer:"),
        "{prompt}"
    );
}

#[test]
fn ask_can_offer_the_query_planner() {
    let plan = json!({"nodes": [
        {"id": 1, "query_str": "Tokyo", "tool_name": "get_weather", "dependencies": []},
        {"id": 2, "query_str": "London", "tool_name": "get_weather", "dependencies": []},
        {"id": 3, "query_str": "Compare the weather in Tokyo and London", "tool_name": null, "dependencies": [1, 2]}
    ]});
    let (url, seen) = serve(vec![
        completion(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                   "function": {"name": "query_plan_tool", "arguments": plan.to_string()}}]}),
            700,
            90,
        ),
        completion(
            json!({"role": "assistant", "content": "Tokyo: sunny, 18. London: rain, 12."}),
            150,
            12,
        ),
        completion(
            json!({"role": "assistant", "content": "Tokyo is sunny and 6 degrees warmer."}),
            800,
            10,
        ),
    ]);
    let out = toolplan(&[
        "ask",
        "Compare the weather in Tokyo and London",
        "--planner",
        "query-plan",
        "--model",
        "openai:test",
        "--base-url",
        &url,
        "--json",
    ]);
    common::assert_ok(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["answer"], "Tokyo is sunny and 6 degrees warmer.");
    let requests = seen.lock().unwrap();
    assert_eq!(requests.len(), 3);
    // The agent sees query_plan_tool only, described with every tool.
    let tools = requests[0]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0]["function"]["name"], "query_plan_tool");
    let description = tools[0]["function"]["description"].as_str().unwrap();
    assert!(
        description.contains("Tool Name: get_weather"),
        "{description}"
    );
    // The synthesis call, then the root's answer back to the agent as the tool result.
    assert!(
        requests[1]["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("Query: London\nResponse: ")
    );
    let last = requests[2]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["content"], "Tokyo: sunny, 18. London: rain, 12.");
}
