//! Search hardening through `toolplan`: names cannot escape their path on an OpenSearch
//! cluster, one damaged index does not break the others, and search limits come from the
//! environment.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::io::Write;
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread;

use assert_cmd::Command;
use serde_json::{Value, json};

/// A loopback "cluster" that records each request line (`DELETE /x`) and answers every request
/// with `{"acknowledged": true}`.
fn recording_cluster() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let (request, _) = common::read_request(&stream);
            log.lock()
                .unwrap()
                .push(request.trim_end_matches(" HTTP/1.1").to_owned());
            let reply = json!({"acknowledged": true}).to_string();
            write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                reply.len()
            )
            .unwrap();
        }
    });
    (url, seen)
}

fn toolplan(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("toolplan")
        .unwrap()
        .args(args)
        .env_remove("TOOLPLAN_DATA_DIR")
        .env_remove("TOOLPLAN_SEARCH_LIMITS")
        .env_remove("OPENSEARCH_URL")
        .timeout(std::time::Duration::from_secs(30))
        .output()
        .unwrap()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn names_cannot_escape_their_path_on_the_cluster() {
    let (url, seen) = recording_cluster();
    let on = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--backend", "opensearch", "--url", &url]);
        toolplan(&all)
    };
    // A valid OpenSearch name with percent signs is one literal segment, never `DELETE /`.
    common::assert_ok(&on(&["index", "delete", "%2e%2e"]));
    common::assert_ok(&on(&["index", "delete", "a%2fb"]));
    // Names OpenSearch refuses are refused before any request.
    for bad in ["..", ".", "_all", "*", "a/../b", "A", "a,b", "a:b", "a b"] {
        let out = on(&["index", "delete", bad]);
        assert!(!out.status.success(), "{bad} was accepted");
        assert!(
            stderr(&out).contains("invalid index name"),
            "{}",
            stderr(&out)
        );
    }
    for bad in ["%2e%2e", "..", "a/b"] {
        let out = on(&["template", "delete", bad]);
        assert!(!out.status.success(), "template {bad} was accepted");
        assert!(
            stderr(&out).contains("invalid script id"),
            "{}",
            stderr(&out)
        );
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen, ["DELETE /%252e%252e", "DELETE /a%252fb"]);
}

/// Creates index `name` with one document through the binary.
fn create(data: &Path, name: &str) {
    let mapping = data.join("mapping.json");
    std::fs::write(&mapping, r#"{"properties": {"title": {"type": "text"}}}"#).unwrap();
    let data_dir = data.to_str().unwrap();
    let out = toolplan(&[
        "index",
        "create",
        name,
        "--mapping",
        mapping.to_str().unwrap(),
        "--data-dir",
        data_dir,
    ]);
    common::assert_ok(&out);
    let docs = data.join("docs.ndjson");
    std::fs::write(
        &docs,
        "{\"index\": {\"_id\": \"1\"}}\n{\"title\": \"hello\"}\n",
    )
    .unwrap();
    let out = toolplan(&[
        "index",
        "bulk",
        docs.to_str().unwrap(),
        "--index",
        name,
        "--data-dir",
        data_dir,
    ]);
    common::assert_ok(&out);
}

#[test]
fn a_damaged_index_is_skipped_with_a_warning() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("indices");
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["good", "broken-meta", "broken-mapping"] {
        create(&dir, name);
    }
    std::fs::write(dir.join("broken-meta/tantivy/meta.json"), "{not json").unwrap();
    std::fs::write(dir.join("broken-mapping/mapping.json"), "").unwrap();
    let d = dir.to_str().unwrap();

    let out = toolplan(&["index", "list", "--json", "--data-dir", d]);
    common::assert_ok(&out);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list, json!([{"index": "good", "docs": 1}]));
    let warnings = stderr(&out);
    for name in ["broken-meta", "broken-mapping"] {
        assert!(
            warnings.contains(&format!(
                "warning: index {name} cannot be read and is left out"
            )),
            "{warnings}"
        );
    }

    let out = toolplan(&["search", "good", "--data-dir", d]);
    common::assert_ok(&out);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["hits"]["total"]["value"], 1);

    for name in ["broken-meta", "broken-mapping"] {
        let out = toolplan(&["search", name, "--data-dir", d]);
        assert!(!out.status.success());
        assert!(
            stderr(&out).contains(&format!("index '{name}' cannot be read")),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn search_limits_come_from_the_environment() {
    let data = tempfile::tempdir().unwrap();
    create(data.path(), "docs");
    let d = data.path().to_str().unwrap();
    let search = |limits: &str, dsl: &str| {
        Command::cargo_bin("toolplan")
            .unwrap()
            .args(["search", "docs", "--dsl", dsl, "--data-dir", d])
            .env("TOOLPLAN_SEARCH_LIMITS", limits)
            .timeout(std::time::Duration::from_secs(30))
            .output()
            .unwrap()
    };
    let out = search("max_result_window=5", r#"{"size": 6}"#);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "Result window is too large, from + size must be less than or equal to: [5] but was [6]"
        ),
        "{}",
        stderr(&out)
    );
    common::assert_ok(&search("max_result_window=5", r#"{"size": 5}"#));
    let out = search("max_windows=5", r#"{"size": 1}"#);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("unknown search limit 'max_windows'"),
        "{}",
        stderr(&out)
    );
}
