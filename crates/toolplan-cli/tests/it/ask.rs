//! `toolplan ask` end to end against a loopback OpenAI-compatible server that replays chat-completions
//! responses (a test double: the real providers' wire formats are tested in toolplan-llm).
#![allow(clippy::unwrap_used)]

use crate::common;

use assert_cmd::Command;
use common::{completion, serve};
use serde_json::{Value, json};

#[test]
fn ask_runs_a_plan_in_two_model_calls() {
    let plan = json!({"steps": [
        {"id": "tokyo", "tool": "get_weather", "arguments": {"location": "Tokyo"}},
        {"id": "london", "tool": "get_weather", "arguments": {"location": "London"}},
        {"id": "cmp", "tool": "compare_data", "arguments": {"data_a": "$ref:tokyo", "data_b": "$ref:london"}}
    ], "output_steps": ["cmp"]});
    let (url, seen) = serve(vec![
        completion(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                   "function": {"name": "execute_tool_plan", "arguments": plan.to_string()}}]}),
            900,
            120,
        ),
        completion(
            json!({"role": "assistant", "content": "Tokyo is 6 °C warmer than London."}),
            1100,
            15,
        ),
    ]);
    let out = Command::cargo_bin("toolplan")
        .unwrap()
        .args([
            "ask",
            "Compare the weather in Tokyo and London",
            "--model",
            "openai:test",
            "--base-url",
            &url,
            "--json",
        ])
        .env_remove("OPENAI_API_KEY")
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    common::assert_ok(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["answer"], "Tokyo is 6 °C warmer than London.");
    assert_eq!(v["llm_calls"], 2);
    assert_eq!(v["input_tokens"], 2000);
    assert_eq!(v["output_tokens"], 135);
    assert_eq!(v["tool_calls"], 1);
    assert_eq!(v["plans"], 1);
    assert_eq!(v["plan_steps"], 3);
    assert_eq!(v["model"], "openai:test");
    assert!(v["elapsed_ms"].as_f64().unwrap() > 0.0);

    let requests = seen.lock().unwrap();
    let tools: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"get_weather") && tools.contains(&"execute_tool_plan"),
        "{tools:?}"
    );
    // The plan's summary went back as the tool result: the comparison only.
    let last = requests[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "call_1");
    let content = last["content"].as_str().unwrap();
    assert!(
        content.starts_with("Plan executed successfully (3 steps)."),
        "{content}"
    );
    assert!(content.contains("\"difference\":6"), "{content}");
}

#[test]
fn no_plan_does_not_offer_the_planner() {
    let (url, seen) = serve(vec![completion(
        json!({"role": "assistant", "content": "Hello."}),
        10,
        2,
    )]);
    let out = Command::cargo_bin("toolplan")
        .unwrap()
        .args([
            "ask",
            "hi",
            "--model",
            "openai:test",
            "--base-url",
            &url,
            "--no-plan",
        ])
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    common::assert_ok(&out);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "Hello.\n");
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("1 model call, 10 input / 2 output tokens")
    );
    let requests = seen.lock().unwrap();
    assert!(
        requests[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["function"]["name"] != "execute_tool_plan")
    );
}

#[test]
fn config_file_names_the_model_and_rejects_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let (url, _) = serve(vec![completion(
        json!({"role": "assistant", "content": "From config."}),
        5,
        2,
    )]);
    std::fs::write(
        dir.path().join("toolplan.toml"),
        format!("model = \"openai:cfg\"\nbase_url = \"{url}\"\nplanning = false\n[limits]\nconcurrency = 4\n"),
    )
    .unwrap();
    let out = Command::cargo_bin("toolplan")
        .unwrap()
        .args(["ask", "hi", "--json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    common::assert_ok(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["answer"], "From config.");
    assert_eq!(v["model"], "openai:cfg");
    assert_eq!(v["planning"], false);

    std::fs::write(
        dir.path().join("toolplan.toml"),
        "model = \"openai:x\"\napi_key = \"sk-1\"\n",
    )
    .unwrap();
    let out = Command::cargo_bin("toolplan")
        .unwrap()
        .args(["ask", "hi"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("secrets come from the environment"));
}

#[test]
fn instructions_from_config_and_flag_add_to_toolplans_own() {
    let dir = tempfile::tempdir().unwrap();
    let (url, seen) = serve(vec![completion(
        json!({"role": "assistant", "content": "Bonjour."}),
        5,
        2,
    )]);
    std::fs::write(
        dir.path().join("toolplan.toml"),
        format!("model = \"openai:cfg\"\nbase_url = \"{url}\"\ninstructions = \"House rule: answer in French.\"\n"),
    )
    .unwrap();
    let out = Command::cargo_bin("toolplan")
        .unwrap()
        .args([
            "ask",
            "hi",
            "--instructions",
            "Benchmark turn: you are an expert.",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    common::assert_ok(&out);
    let requests = seen.lock().unwrap();
    let system = requests[0]["messages"][0].clone();
    assert_eq!(system["role"], "system");
    let text = system["content"].as_str().unwrap();
    let own = text.find("Use the tools to get facts").expect(text);
    let house = text.find("House rule: answer in French.").expect(text);
    let flag = text.find("Benchmark turn: you are an expert.").expect(text);
    let plans = text.find("execute_tool_plan").expect(text);
    assert!(own < house && house < flag && flag < plans, "{text}");
}

#[test]
fn bad_model_spec_is_a_clear_error() {
    let out = Command::cargo_bin("toolplan")
        .unwrap()
        .args(["ask", "hi", "--model", "gpt-4o"])
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown model spec \"gpt-4o\""));
}

#[test]
fn running_out_of_turns_still_reports_the_cost_in_json() {
    let call = |id: &str| {
        completion(
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
                   "function": {"name": "get_weather", "arguments": "{\"location\": \"Tokyo\"}"}}]}),
            500,
            20,
        )
    };
    let (url, _seen) = serve(vec![call("call_1"), call("call_2")]);
    let out = Command::cargo_bin("toolplan")
        .unwrap()
        .args([
            "ask",
            "Weather in Tokyo?",
            "--model",
            "openai:test",
            "--base-url",
            &url,
            "--no-plan",
            "--max-turns",
            "2",
            "--json",
        ])
        .env_remove("OPENAI_API_KEY")
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no answer after 2 turns"), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["answer"], Value::Null, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("2 model calls"),
        "{v}"
    );
    assert_eq!(v["llm_calls"], 2, "{v}");
    assert_eq!(v["input_tokens"], 1000, "{v}");
    assert_eq!(v["tool_calls"], 2, "{v}");
}

/// Writes `text` to a fresh file in the temp dir and returns its path.
fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("toolplan-{}-{name}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn dry_run_shows_the_plan_and_runs_nothing() {
    // The plan calls a declared tool, which has no implementation: running it would fail.
    let defs = temp_file(
        "defs.json",
        &json!([
            {"type": "function", "function": {"name": "spotify_play", "description": "Play an artist.",
             "parameters": {"type": "object", "properties": {"artist": {"type": "string"}, "duration": {"type": "integer"}},
                            "required": ["artist"]}}},
            {"name": "mcp_style", "description": "An MCP tool.", "inputSchema": {"type": "object"}}
        ])
        .to_string(),
    );
    let plan = json!({"steps": [
        {"id": "a", "tool": "spotify_play", "arguments": {"artist": "Taylor Swift", "duration": 20}},
        {"id": "b", "tool": "spotify_play", "arguments": {"artist": "Maroon 5", "duration": 15}},
        {"id": "c", "tool": "get_weather", "arguments": {"location": "$ref:a"}}
    ]});
    let (url, seen) = serve(vec![completion(
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "execute_tool_plan", "arguments": plan.to_string()}},
            {"id": "call_2", "type": "function", "function": {"name": "mcp_style", "arguments": "{}"}}]}),
        700,
        90,
    )]);
    let out = Command::cargo_bin("toolplan")
        .unwrap()
        .args([
            "ask",
            "Play Taylor Swift for 20 minutes and Maroon 5 for 15",
            "--model",
            "openai:test",
        ])
        // The plan's problem is shown, not sent back to be fixed.
        .args([
            "--base-url",
            &url,
            "--json",
            "--dry-run",
            "--repairs",
            "0",
            "--tool-defs",
        ])
        .arg(&defs)
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    common::assert_ok(&out);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["dry_run"], true);
    assert_eq!(v["answer"], Value::Null);
    assert_eq!(v["llm_calls"], 1);
    assert_eq!(v["input_tokens"], 700);
    assert_eq!(v["calls"][0]["name"], "execute_tool_plan");
    assert_eq!(
        v["calls"][0]["arguments"]["steps"][1]["arguments"]["artist"],
        "Maroon 5"
    );
    assert_eq!(v["calls"][1]["name"], "mcp_style");
    // The demo tools are not there with declared tools: the plan's third step names an unknown tool.
    let problems = v["plan_problems"][0].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].as_str().unwrap().contains("get_weather"),
        "{problems:?}"
    );
    // One model call: nothing ran, so nothing went back to the model.
    let requests = seen.lock().unwrap();
    assert_eq!(requests.len(), 1);
    let tools: Vec<&str> = requests[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["execute_tool_plan", "spotify_play", "mcp_style"]);
    let _ = std::fs::remove_file(defs);
}

#[test]
fn dry_run_without_json_prints_each_step() {
    let plan = json!({"steps": [
        {"id": "t", "tool": "get_weather", "arguments": {"location": "Tokyo"}}]});
    let (url, _seen) = serve(vec![completion(
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "execute_tool_plan", "arguments": plan.to_string()}}]}),
        10,
        5,
    )]);
    let out = Command::cargo_bin("toolplan")
        .unwrap()
        .args([
            "ask",
            "weather in Tokyo?",
            "--model",
            "openai:test",
            "--base-url",
            &url,
        ])
        .args(["--dry-run", "--tools", "demo"])
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    common::assert_ok(&out);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "execute_tool_plan:\n  t = get_weather({\"location\":\"Tokyo\"})\n"
    );
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("dry run: nothing was run")
    );
}

/// `toolplan ask hi` with an OpenAI-compatible model at the discard port, where nothing listens.
fn ask_unserved() -> Command {
    let mut cmd = Command::cargo_bin("toolplan").unwrap();
    cmd.args(["ask", "hi", "--model", "openai:test"])
        .args(["--base-url", "http://127.0.0.1:9"]);
    cmd
}

/// `toolplan ask hi --dry-run --tool-defs PATH` against a model nobody serves: what the definitions
/// file alone decides.
fn dry_run_with_defs(path: &std::path::Path) -> std::process::Output {
    ask_unserved()
        .args(["--dry-run", "--tool-defs"])
        .arg(path)
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap()
}

#[test]
fn bad_tool_definitions_are_clear_errors() {
    for (text, expected) in [
        ("{\"name\": \"x\"}", "must hold a JSON array"),
        ("[{\"description\": \"no name\"}]", "has no \"name\" string"),
        ("[1]", "is not an object"),
        ("[{\"name\": \"x\", \"parameters\": {\"type\": 5}}]", "x"),
        ("not json", "is not JSON"),
    ] {
        let defs = temp_file("bad-defs.json", text);
        let out = dry_run_with_defs(&defs);
        let _ = std::fs::remove_file(&defs);
        assert!(!out.status.success(), "{text}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains(expected), "{text}: {stderr}");
    }
    // Tool definitions describe tools to ask about, not to run.
    let out = Command::cargo_bin("toolplan")
        .unwrap()
        .args(["ask", "hi", "--tool-defs", "x.json"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8(out.stderr).unwrap().contains("--dry-run"));
}

#[test]
fn an_oversized_tool_definitions_file_is_refused_before_reading() {
    let path = std::env::temp_dir().join(format!("toolplan-{}-huge-defs.json", std::process::id()));
    let file = std::fs::File::create(&path).unwrap();
    // Sparse: no 9 MB written.
    file.set_len(9 << 20).unwrap();
    let out = dry_run_with_defs(&path);
    let _ = std::fs::remove_file(&path);
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("at most 8388608"), "{stderr}");
}

#[test]
fn json_prints_one_object_when_the_model_fails() {
    // Nothing listens on the discard port: the model call fails.
    let out = ask_unserved()
        .arg("--json")
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["answer"], Value::Null);
    assert!(v["error"].as_str().unwrap().len() > 5, "{v}");
}
