//! `toolplan mcp` driven from outside by real MCP clients — the official Python SDK and the MCP
//! inspector CLI, over stdio and over streamable HTTP (with a bearer token) — and plans over a real
//! MCP server configured in `toolplan.toml`. The clients and servers are installed by
//! `bash scripts/mcp-servers.sh` (which the test script and CI run).
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::common;

use common::servers::servers_dir;

/// A `toolplan.toml` declaring stdio MCP servers: (name, command, args).
fn config_file(dir: &std::path::Path, servers: &[(&str, &std::path::Path, &[&str])]) -> PathBuf {
    let mut text = String::new();
    for (name, command, args) in servers {
        text.push_str(&format!(
            "[[mcp_servers]]\nname = {name:?}\ncommand = {:?}\nargs = {args:?}\ntimeout = \"20s\"\n",
            command.to_string_lossy()
        ));
    }
    let path = dir.join("toolplan.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn toolplan() -> String {
    assert_cmd::cargo::cargo_bin("toolplan")
        .to_string_lossy()
        .into_owned()
}

/// Runs the Python SDK driver; its JSON report.
fn python_client(args: &[&str]) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let out = Command::new(servers_dir().join("venv/bin/python"))
        .arg(script)
        .args(args)
        .output()
        .unwrap();
    common::assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn check_report(report: &Value, exposed: bool) {
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(tools[0], "execute_tool_plan");
    assert_eq!(tools.contains(&"get_weather"), exposed, "{tools:?}");
    assert!(report["planner_schema"]["properties"]["steps"].is_object());
    // Tokyo 18 °C, London 12 °C.
    assert_eq!(report["structured"]["outputs"]["diff"].as_f64(), Some(6.0));
    assert_eq!(report["structured"]["outcome"], "completed");
    assert!(
        report["text"].as_str().unwrap().contains("diff"),
        "{}",
        report["text"]
    );
    assert_ne!(report["is_error"], json!(true));
    // One notification per step, out of 3.
    let progress = report["progress"].as_array().unwrap();
    assert_eq!(progress.len(), 3, "{progress:?}");
    assert!(progress.iter().all(|p| p["total"] == json!(3.0)));
    assert!(progress.iter().any(|p| {
        p["message"]
            .as_str()
            .unwrap()
            .starts_with("step diff (calculator) ok")
    }));
    assert_eq!(report["invalid"]["is_error"], json!(true));
    assert!(
        report["invalid"]["text"]
            .as_str()
            .unwrap()
            .contains("no_such_tool")
    );
}

#[test]
fn the_python_sdk_plans_over_stdio() {
    let bin = toolplan();
    let report = python_client(&["stdio", &bin, "mcp", "--tools", "demo", "--expose-tools"]);
    check_report(&report, true);
    assert_eq!(report["direct"]["text"], "hi");
    let report = python_client(&["stdio", &bin, "mcp", "--tools", "demo"]);
    check_report(&report, false);
}

/// `toolplan mcp --http 0 …` started, and the URL it serves.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(extra: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let mut child = Command::new(toolplan())
            .args(["mcp", "--tools", "demo", "--http", "0"])
            .args(extra)
            .envs(env.iter().copied())
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let mut line = String::new();
        BufReader::new(stderr).read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("toolplan MCP server on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line}"))
            .to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        HttpServer { child, url }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_python_sdk_plans_over_http_with_a_token() {
    let server = HttpServer::start(
        &["--token-env", "TOOLPLAN_TEST_TOKEN"],
        &[("TOOLPLAN_TEST_TOKEN", "s3cret")],
    );
    let report = python_client(&["http", &server.url, "s3cret"]);
    check_report(&report, false);
    // With a wrong token, the SDK's initialize fails; on the wire it is a 401.
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let out = Command::new(servers_dir().join("venv/bin/python"))
        .arg(script)
        .args(["http", &server.url, "wrong"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let hostport = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp");
    for auth in ["", "Authorization: Bearer wrong\r\n"] {
        let mut stream = std::net::TcpStream::connect(hostport).unwrap();
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: {hostport}\r\n{auth}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut status = String::new();
        BufReader::new(stream).read_line(&mut status).unwrap();
        assert!(status.starts_with("HTTP/1.1 401"), "{status}");
    }
}

#[test]
fn a_public_address_needs_a_token() {
    let out = Command::new(toolplan())
        .args(["mcp", "--tools", "demo", "--http", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token-env"));
}

fn inspector(args: &[&str]) -> Value {
    inspector_in(&std::env::current_dir().unwrap(), args)
}

/// The inspector CLI run in `dir` (a server it starts reads `dir/toolplan.toml`: the inspector
/// keeps `--config` for itself).
fn inspector_in(dir: &std::path::Path, args: &[&str]) -> Value {
    let out = Command::new(servers_dir().join("node_modules/.bin/mcp-inspector"))
        .arg("--cli")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "inspector failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_inspector_cli_lists_and_calls_over_stdio_and_http() {
    let bin = toolplan();
    let plan_args = [
        "--method",
        "tools/call",
        "--tool-name",
        "execute_tool_plan",
        "--tool-arg",
        r#"steps=[{"id": "p", "tool": "get_weather", "arguments": {"location": "Paris"}}]"#,
    ];
    let listed = inspector(&[&bin, "mcp", "--tools", "demo", "--method", "tools/list"]);
    assert_eq!(listed["tools"][0]["name"], "execute_tool_plan");
    let called = inspector(
        &[
            &[bin.as_str(), "mcp", "--tools", "demo"][..],
            &plan_args[..],
        ]
        .concat(),
    );
    assert_eq!(called["structuredContent"]["outputs"]["p"]["city"], "Paris");

    let server = HttpServer::start(&[], &[]);
    let listed = inspector(&[&server.url, "--transport", "http", "--method", "tools/list"]);
    assert_eq!(listed["tools"][0]["name"], "execute_tool_plan");
    let called = inspector(
        &[
            &[server.url.as_str(), "--transport", "http"][..],
            &plan_args[..],
        ]
        .concat(),
    );
    assert_eq!(called["structuredContent"]["outputs"]["p"]["city"], "Paris");
}

#[test]
fn plans_call_the_tools_of_configured_mcp_servers() {
    let dir = tempfile::tempdir().unwrap();
    let everything = servers_dir().join("node_modules/.bin/mcp-server-everything");
    let config = config_file(dir.path(), &[("everything", &everything, &[])]);
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        json!({"steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}},
            {"id": "s", "tool": "get-sum", "arguments": {"a": "$ref:w.temp", "b": 100}},
            {"id": "e", "tool": "everything.echo", "arguments": {"message": "$ref:s"}}],
            "output_steps": ["e"]})
        .to_string(),
    )
    .unwrap();
    let out = Command::new(toolplan())
        .args([
            "run",
            &plan.to_string_lossy(),
            "--json",
            "--tools",
            "demo",
            "--config",
            &config.to_string_lossy(),
        ])
        .output()
        .unwrap();
    common::assert_ok(&out);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let echoed = report["outputs"]["e"].as_str().unwrap();
    assert!(
        echoed.starts_with("Echo: The sum of ") && echoed.contains(" and 100 is "),
        "{echoed}"
    );
    let listed = Command::new(toolplan())
        .args([
            "tools",
            "--json",
            "--tools",
            "demo",
            "--config",
            &config.to_string_lossy(),
        ])
        .output()
        .unwrap();
    let tools: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    // Both the demo set (asked for: beside MCP servers it is not there by default) and
    // server-everything have `echo`: the server's is prefixed.
    for name in ["get_weather", "echo", "get-sum", "everything.echo"] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
}

#[test]
fn plans_call_the_tools_of_a_streamable_http_server_with_headers_from_the_environment() {
    // The remote server: `toolplan mcp --http` exposing the demo tools behind a bearer token.
    let server = HttpServer::start(
        &["--expose-tools", "--token-env", "TOOLPLAN_REMOTE_TOKEN"],
        &[("TOOLPLAN_REMOTE_TOKEN", "r3mote")],
    );
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toolplan.toml");
    std::fs::write(
        &config,
        format!(
            "[[mcp_servers]]\nname = \"remote\"\nurl = \"{}\"\ntimeout = \"20s\"\n\
             headers = {{ Authorization = \"Bearer ${{TOOLPLAN_REMOTE_TOKEN}}\" }}\n",
            server.url
        ),
    )
    .unwrap();
    let config = config.to_string_lossy().into_owned();
    // The remote weather, then the local calculator on it: the remote tools clash with the local
    // demo set (asked for with --tools demo) and are prefixed.
    let plan = json!({"steps": [
        {"id": "w", "tool": "remote.get_weather", "arguments": {"location": "Oslo"}},
        {"id": "f", "tool": "calculator", "arguments": {"expression": "$ref:w.temp * 9 / 5 + 32"}}],
        "output_steps": ["w", "f"]});
    let run = |token: &str| {
        Command::new(toolplan())
            .args(["run", "-", "--json", "--tools", "demo", "--config", &config])
            .env("TOOLPLAN_REMOTE_TOKEN", token)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                child
                    .stdin
                    .take()
                    .unwrap()
                    .write_all(plan.to_string().as_bytes())?;
                child.wait_with_output()
            })
            .unwrap()
    };
    let out = run("r3mote");
    common::assert_ok(&out);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["outputs"]["w"]["city"], "Oslo", "{report}");
    // Oslo is 3 °C.
    assert_eq!(report["outputs"]["f"].as_f64(), Some(37.4), "{report}");
    // The header's value comes from the environment: with the wrong token the server refuses, and
    // the error names the server.
    let out = run("wrong");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("remote"), "{stderr}");
}

#[test]
fn a_client_that_cancels_a_plan_stops_its_remaining_steps() {
    let dir = tempfile::tempdir().unwrap();
    let filesystem = servers_dir().join("node_modules/.bin/mcp-server-filesystem");
    let root = dir.path().to_string_lossy().into_owned();
    let config = config_file(dir.path(), &[("filesystem", &filesystem, &[&root])]);
    let config = config.to_string_lossy().into_owned();
    // A slow step, then a file written with its result: the file tells whether the plan went on.
    let plan = |file: &str| {
        json!({"steps": [
            {"id": "slow", "tool": "sleep", "arguments": {"ms": 1500, "value": "late"}},
            {"id": "w", "tool": "write_file",
             "arguments": {"path": dir.path().join(file), "content": "$ref:slow"}}]})
    };

    // Not cancelled, the plan writes its file.
    let plan_file = dir.path().join("plan.json");
    std::fs::write(&plan_file, plan("done.txt").to_string()).unwrap();
    let out = Command::new(toolplan())
        .args([
            "run",
            &plan_file.to_string_lossy(),
            "--tools",
            "demo",
            "--config",
            &config,
        ])
        .output()
        .unwrap();
    common::assert_ok(&out);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("done.txt")).unwrap(),
        "late"
    );

    // Cancelled by the client after 0.5 s, it does not; and the server goes on serving.
    let report = python_client(&[
        "cancel",
        &plan("cancelled.txt").to_string(),
        &toolplan(),
        "mcp",
        "--tools",
        "demo",
        "--config",
        &config,
    ]);
    assert_eq!(report["cancelled"], true, "{report}");
    assert!(
        report["abandoned_after_s"].as_f64().unwrap() < 1.4,
        "{report}"
    );
    assert_eq!(report["progress"], json!([]), "{report}");
    assert!(!dir.path().join("cancelled.txt").exists());
    assert_eq!(report["after"]["outputs"]["n"], 2.0, "{report}");
}

#[test]
fn a_configured_model_adds_the_planners_that_need_one() {
    // The model is only named (an OpenAI-compatible endpoint nobody answers): listing the tools
    // does not call it.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("toolplan.toml"),
        "model = \"openai:some-model\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
    )
    .unwrap();
    let data = format!("TOOLPLAN_DATA_DIR={}", dir.path().join("data").display());
    let names = |set: &str| -> Vec<String> {
        let listed = inspector_in(
            dir.path(),
            &[
                "-e",
                &data,
                &toolplan(),
                "mcp",
                "--tools",
                set,
                "--method",
                "tools/list",
            ],
        );
        listed["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        names("search"),
        ["execute_tool_plan", "query_planning", "query_plan_tool"]
    );
    assert_eq!(names("demo"), ["execute_tool_plan", "query_plan_tool"]);
}

#[test]
fn the_readme_mcp_example_runs() {
    // examples/mcp as the README runs it, with each `npx -y PACKAGE@VERSION` replaced by that
    // package as the test setup installed it (same version, checked).
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/mcp");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("notes")).unwrap();
    for file in ["plan.json", "notes/q3.txt", "notes/q4.txt"] {
        std::fs::copy(example.join(file), dir.path().join(file)).unwrap();
    }
    let text = std::fs::read_to_string(example.join("toolplan.toml")).unwrap();
    let mut config: toml::Table = toml::from_str(&text).unwrap();
    let modules = servers_dir().join("node_modules");
    for server in config["mcp_servers"].as_array_mut().unwrap() {
        let server = server.as_table_mut().unwrap();
        assert_eq!(server["command"].as_str(), Some("npx"));
        let args = server["args"].as_array().unwrap().clone();
        let (package, version) = args[1].as_str().unwrap().rsplit_once('@').unwrap();
        let manifest: Value = serde_json::from_str(
            &std::fs::read_to_string(modules.join(package).join("package.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(manifest["version"], version, "{package}");
        let bin = package.replace("@modelcontextprotocol/", "mcp-");
        let command = modules.join(".bin").join(bin);
        server.insert("command".into(), command.to_string_lossy().as_ref().into());
        server.insert("args".into(), toml::Value::Array(args[2..].to_vec()));
    }
    std::fs::write(dir.path().join("toolplan.toml"), config.to_string()).unwrap();

    let out = Command::new(toolplan())
        .args([
            "run",
            "plan.json",
            "--tools",
            "none",
            "--json",
            "--trust-config",
        ])
        .current_dir(dir.path())
        .env("PWD", dir.path())
        .output()
        .unwrap();
    common::assert_ok(&out);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let outputs = &report["outputs"];
    let files = outputs["files"].to_string();
    assert!(
        files.contains("q3.txt") && files.contains("q4.txt"),
        "{files}"
    );
    assert_eq!(outputs["recall"]["entities"].as_array().unwrap().len(), 2);
    assert_eq!(
        outputs["say"],
        "Echo: Q3 and Q4 revenue (M): The sum of 4.2 and 4.5 is 8.7."
    );
    assert!(dir.path().join("memory.jsonl").exists());
}
