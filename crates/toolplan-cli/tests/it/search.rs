//! `toolplan index` and `toolplan search` end to end on the embedded backend, with the shared iris
//! data set (`shared/data`) in a temporary data directory.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::PathBuf;

use assert_cmd::Command;
use serde_json::Value;

fn shared(file: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(file)
        .to_string_lossy()
        .into_owned()
}

fn toolplan(data: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::cargo_bin("toolplan")
        .unwrap()
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .env_remove("TOOLPLAN_DATA_DIR")
        .output()
        .unwrap()
}

/// The JSON a successful run printed (the run's stderr if it failed).
fn success_json(out: &std::process::Output) -> Value {
    common::assert_ok(out);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A data directory with the iris index created and loaded through the CLI.
fn iris() -> tempfile::TempDir {
    let data = tempfile::tempdir().unwrap();
    let mapping = shared("iris-mapping.json");
    for args in [
        &["index", "create", "iris-index", "--mapping", &mapping][..],
        &["index", "bulk", &shared("iris.ndjson")][..],
    ] {
        let out = toolplan(data.path(), args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    data
}

#[test]
fn create_load_list_search_delete() {
    let data = tempfile::tempdir().unwrap();
    let out = toolplan(
        data.path(),
        &[
            "index",
            "create",
            "iris-index",
            "--mapping",
            &shared("iris-mapping.json"),
        ],
    );
    common::assert_ok(&out);
    let out = toolplan(data.path(), &["index", "bulk", &shared("iris.ndjson")]);
    common::assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("indexed 150, deleted 0, 0 failed"));
    let out = toolplan(data.path(), &["index", "list", "--json"]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        list,
        serde_json::json!([{"index": "iris-index", "docs": 150}])
    );

    let out = toolplan(
        data.path(),
        &[
            "search",
            "iris-index",
            "--dsl",
            r#"{"size": 0, "query": {"term": {"species.keyword": "setosa"}}}"#,
        ],
    );
    common::assert_ok(&out);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["hits"]["total"]["value"], 50);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Valid DSL on a field the mapping lacks runs (no hits) and warns.
    let dsl = data.path().join("q.json");
    std::fs::write(&dsl, r#"{"query": {"match": {"colour": "red"}}}"#).unwrap();
    let out = toolplan(
        data.path(),
        &[
            "search",
            "iris-index",
            "--dsl",
            &format!("@{}", dsl.display()),
        ],
    );
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["hits"]["total"]["value"], 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "warning: query.match: field 'colour' is not in the mapping"
    );

    let out = toolplan(
        data.path(),
        &[
            "search",
            "iris-index",
            "--dsl",
            r#"{"query": {"neural": {"v": {}}}}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("query.neural: the neural clause is not supported by the embedded backend")
    );

    // An alias with a filter: searches through it see what the filter keeps.
    let out = toolplan(
        data.path(),
        &[
            "index",
            "alias",
            "setosa",
            "--index",
            "iris-index",
            "--filter",
            r#"{"term": {"species": "setosa"}}"#,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = success_json(&toolplan(
        data.path(),
        &["search", "setosa", "--dsl", r#"{"size": 0}"#],
    ));
    assert_eq!(v["hits"]["total"]["value"], 50);
    let v = success_json(&toolplan(
        data.path(),
        &["search", "setosa", "--filter-path", "hits.total.value"],
    ));
    assert_eq!(v, serde_json::json!({"hits": {"total": {"value": 50}}}));
    let v = success_json(&toolplan(data.path(), &["index", "aliases"]));
    assert_eq!(
        v["iris-index"]["aliases"]["setosa"]["filter"]["term"]["species"],
        "setosa"
    );
    let out = toolplan(
        data.path(),
        &[
            "index",
            "alias",
            "setosa",
            "--index",
            "iris-index",
            "--remove",
        ],
    );
    assert!(out.status.success());
    let out = toolplan(data.path(), &["search", "setosa"]);
    assert_eq!(out.status.code(), Some(1));

    let out = toolplan(data.path(), &["index", "delete", "iris-index"]);
    assert!(out.status.success());
    let out = toolplan(data.path(), &["search", "iris-index"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such index 'iris-index'"));
}

#[test]
fn documents_without_a_mapping_are_loaded_mapped_and_the_mapping_updated() {
    let data = tempfile::tempdir().unwrap();
    let docs = data.path().join("books.ndjson");
    std::fs::write(
        &docs,
        "{\"index\": {\"_id\": \"1\"}}\n{\"title\": \"Moby Dick\", \"pages\": 635}\n",
    )
    .unwrap();
    let d = data.path().join("indices");
    // No `index create`: the load makes the index and maps its fields.
    common::assert_ok(&toolplan(
        &d,
        &["index", "bulk", docs.to_str().unwrap(), "--index", "books"],
    ));
    let mapping = success_json(&toolplan(&d, &["index", "mapping", "books"]));
    assert_eq!(mapping["properties"]["pages"]["type"], "long");
    let hits = success_json(&toolplan(
        &d,
        &[
            "search",
            "books",
            "--dsl",
            r#"{"query": {"range": {"pages": {"gt": 600}}}}"#,
        ],
    ));
    assert_eq!(hits["hits"]["total"]["value"], 1);
    let hits = success_json(&toolplan(
        &d,
        &["search", "books", "-q", "moby AND pages:>600"],
    ));
    assert_eq!(hits["hits"]["total"]["value"], 1);
    let update = data.path().join("update.json");
    std::fs::write(&update, r#"{"properties": {"pages": {"type": "text"}}}"#).unwrap();
    let out = toolplan(
        &d,
        &[
            "index",
            "mapping",
            "books",
            "--update",
            update.to_str().unwrap(),
        ],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("mapper [pages] cannot be changed from type [long] to [text]")
    );
    std::fs::write(&update, r#"{"properties": {"year": {"type": "integer"}}}"#).unwrap();
    let mapping = success_json(&toolplan(
        &d,
        &[
            "index",
            "mapping",
            "books",
            "--update",
            update.to_str().unwrap(),
        ],
    ));
    assert_eq!(mapping["properties"]["year"]["type"], "integer");
}

#[test]
fn bad_input_is_named() {
    let data = tempfile::tempdir().unwrap();
    let mapping = data.path().join("m.json");
    std::fs::write(&mapping, r#"{"properties": {"a": {"type": "integer"}}}"#).unwrap();
    let out = toolplan(
        data.path(),
        &[
            "index",
            "create",
            "Bad Name",
            "--mapping",
            mapping.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid index name 'Bad Name'"));
    let out = toolplan(
        data.path(),
        &[
            "index",
            "create",
            "nums",
            "--mapping",
            mapping.to_str().unwrap(),
        ],
    );
    assert!(out.status.success());
    let bulk = data.path().join("b.ndjson");
    std::fs::write(&bulk, "{\"index\": {\"_id\": \"1\"}}\n{\"a\": 5}\n{\"index\": {\"_id\": \"2\"}}\n{\"a\": \"five\"}\n").unwrap();
    let out = toolplan(
        data.path(),
        &["index", "bulk", bulk.to_str().unwrap(), "--index", "nums"],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("indexed 1, deleted 0, 1 failed"), "{err}");
    assert!(
        err.contains("line 3: failed to parse field [a] of type [long]"),
        "{err}"
    );
}

#[test]
fn search_runs_on_an_opensearch_cluster_too() {
    // A loopback stand-in for the cluster: the mapping (for the warnings), then the search.
    let answer = serde_json::json!({"took": 1, "timed_out": false,
        "hits": {"total": {"value": 50, "relation": "eq"}, "max_score": null, "hits": []}});
    let (url, seen) = common::serve(vec![
        serde_json::json!({"iris-index": {"mappings": {"properties": {"species": {"type": "text"}}}}}),
        answer.clone(),
    ]);
    let base = url.trim_end_matches("/v1").to_owned();
    let dsl = r#"{"size": 0, "query": {"match": {"species": "setosa"}}}"#;
    let out = Command::cargo_bin("toolplan")
        .unwrap()
        .args([
            "search",
            "iris-index",
            "--backend",
            "opensearch",
            "--url",
            &base,
            "--dsl",
            dsl,
        ])
        .env_remove("OPENSEARCH_API_KEY")
        .env_remove("OPENSEARCH_USER")
        .output()
        .unwrap();
    common::assert_ok(&out);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r, answer);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1], serde_json::from_str::<Value>(dsl).unwrap());
    let out = Command::cargo_bin("toolplan")
        .unwrap()
        .args(["index", "list", "--backend", "opensearch"])
        .env_remove("OPENSEARCH_URL")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--backend opensearch needs --url (or OPENSEARCH_URL)")
    );
}

#[test]
fn dsl_repairs_through_the_model_and_runs() {
    let data = iris();
    let (url, seen) = common::serve(vec![
        common::text_reply(
            "```json\n{\"size\": 0, \"query\": {\"term\": {\"kind\": \"setosa\"}}}\n```",
        ),
        common::text_reply(
            "{\"size\": 0, \"query\": {\"term\": {\"species.keyword\": \"setosa\"}}}",
        ),
    ]);
    let out = toolplan(
        data.path(),
        &[
            "dsl",
            "How many iris flowers of type setosa are there?",
            "--index",
            "iris-index",
            "--model",
            "openai:test",
            "--base-url",
            &url,
            "--execute",
            "--json",
        ],
    );
    let v = success_json(&out);
    assert_eq!(v["llm_calls"], 2);
    assert_eq!(
        v["attempts"][0]["problems"],
        serde_json::json!(["query.term: field 'kind' is not in the mapping"])
    );
    assert_eq!(v["attempts"][1]["problems"], serde_json::json!([]));
    assert_eq!(v["fallback"], Value::Null);
    assert_eq!(v["response"]["hits"]["total"]["value"], 50);
    let requests = seen.lock().unwrap();
    let repair = requests[1]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        repair.contains("- query.term: field 'kind' is not in the mapping"),
        "{repair}"
    );
}

#[test]
fn templates_are_stored_and_offered_to_the_model() {
    let data = iris();
    let template = data.path().join("species.json");
    std::fs::write(
        &template,
        r#"{"size": "{{size}}", "query": {"match": {"species": "{{species}}"}}}"#,
    )
    .unwrap();
    let put = toolplan(
        data.path(),
        &[
            "template",
            "put",
            "species_template",
            "--source",
            &format!("@{}", template.display()),
        ],
    );
    assert!(
        put.status.success(),
        "{}",
        String::from_utf8_lossy(&put.stderr)
    );
    let get = toolplan(data.path(), &["template", "get", "species_template"]);
    let script: Value = serde_json::from_slice(&get.stdout).unwrap();
    assert_eq!(script["lang"], "mustache");
    assert_eq!(script["source"]["query"]["match"]["species"], "{{species}}");

    let (url, seen) = common::serve(vec![
        common::text_reply("species_template"),
        common::text_reply("{\"size\": 0, \"query\": {\"match\": {\"species\": \"setosa\"}}}"),
    ]);
    let out = toolplan(
        data.path(),
        &[
            "dsl",
            "How many setosa?",
            "--index",
            "iris-index",
            "--model",
            "openai:test",
            "--base-url",
            &url,
            "--json",
            "--execute",
            "--template",
            "species_template=Flowers of one species, by a match query.",
            "--template",
            "petal_range=Flowers in a petal length range.",
            "--response-filter",
            "$.choices[0].message.content",
            "--param",
            "tone=terse",
        ],
    );
    let v = success_json(&out);
    assert_eq!(v["template"]["selected"], "species_template");
    assert_eq!(v["template"]["note"], Value::Null);
    assert_eq!(v["llm_calls"], 2);
    assert_eq!(v["response"]["hits"]["total"]["value"], 50);
    let requests = seen.lock().unwrap();
    let selection = requests[0]["messages"][1]["content"].as_str().unwrap();
    assert!(
        selection.contains("Flowers in a petal length range."),
        "{selection}"
    );
    let system = requests[1]["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains(r#"{"size":"{{size}}","query":{"match":{"species":"{{species}}"}}}"#));

    let bad = toolplan(
        data.path(),
        &[
            "dsl",
            "q",
            "--index",
            "iris-index",
            "--model",
            "openai:test",
            "--base-url",
            &url,
            "--param",
            "generation_type=user_templates",
        ],
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("needs search_templates"));

    let del = toolplan(data.path(), &["template", "delete", "species_template"]);
    assert!(del.status.success());
    let gone = toolplan(data.path(), &["template", "get", "species_template"]);
    assert!(!gone.status.success());
    assert!(
        String::from_utf8_lossy(&gone.stderr).contains("no stored template 'species_template'")
    );
}

#[test]
fn plans_call_the_search_tools() {
    let data = iris();
    let plan = data.path().join("plan.json");
    std::fs::write(
        &plan,
        serde_json::json!({"steps": [
            {"id": "list", "tool": "list_indices", "arguments": {}},
            {"id": "count", "tool": "search_index", "arguments": {"index": "$ref:list.0.index",
                "query": {"size": 0, "query": {"term": {"species.keyword": "virginica"}}}}}
        ], "output_steps": ["count"]})
        .to_string(),
    )
    .unwrap();
    let out = Command::cargo_bin("toolplan")
        .unwrap()
        .args(["run", plan.to_str().unwrap(), "--tools", "search", "--json"])
        .env("TOOLPLAN_DATA_DIR", data.path())
        .output()
        .unwrap();
    let v = success_json(&out);
    assert_eq!(v["outputs"]["count"]["hits"]["total"]["value"], 50, "{v}");
}
