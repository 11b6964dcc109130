//! Index aliases on the embedded backend: searches through an alias (and its filter), patterns
//! over alias names, writes to its write index, `indices_boost` by alias, and the alias table
//! kept across a restart.

use serde_json::{Value, json};
use toolplan_search::{EmbeddedBackend, SearchBackend, SearchError, SearchLimits};

/// Indices `logs-1` (levels info, error) and `logs-2` (warn, error), one `level` keyword each.
async fn logs(limits: SearchLimits) -> (tempfile::TempDir, EmbeddedBackend) {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open_with_limits(dir.path(), limits).unwrap();
    let mapping = json!({"mappings": {"properties": {"level": {"type": "keyword"}, "msg": {"type": "text"}}}});
    for (index, levels) in [("logs-1", ["info", "error"]), ("logs-2", ["warn", "error"])] {
        b.create_index(index, &mapping).await.unwrap();
        let mut nd = String::new();
        for (i, level) in levels.iter().enumerate() {
            nd.push_str(&format!(
                "{{\"index\":{{\"_id\":\"{i}\"}}}}\n{}\n",
                json!({"level": level, "msg": format!("{level} message")})
            ));
        }
        b.bulk(Some(index), &nd).await.unwrap();
    }
    (dir, b)
}

/// `index:id` of each hit, in order.
fn hits(r: &Value) -> Vec<String> {
    r["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            format!(
                "{}:{}",
                h["_index"].as_str().unwrap(),
                h["_id"].as_str().unwrap()
            )
        })
        .collect()
}

async fn search(b: &EmbeddedBackend, target: &str, body: Value) -> Vec<String> {
    let mut body = body;
    body["sort"] = json!([{"level": "asc"}]);
    hits(&b.search(target, &body).await.unwrap())
}

#[tokio::test]
async fn an_alias_searches_its_indices_and_a_filtered_one_only_what_its_filter_keeps() {
    let (_dir, b) = logs(SearchLimits::default()).await;
    b.put_alias("logs-*", "all-logs", &json!({})).await.unwrap();
    b.put_alias(
        "logs-1,logs-2",
        "errors",
        &json!({"filter": {"term": {"level": "error"}}}),
    )
    .await
    .unwrap();
    assert_eq!(
        search(&b, "all-logs", json!({})).await,
        ["logs-1:1", "logs-2:1", "logs-1:0", "logs-2:0"]
    );
    assert_eq!(
        search(&b, "errors", json!({})).await,
        ["logs-1:1", "logs-2:1"]
    );
    // The alias's filter and the request's query both hold.
    assert_eq!(
        search(
            &b,
            "errors",
            json!({"query": {"match": {"msg": "message"}}})
        )
        .await,
        ["logs-1:1", "logs-2:1"]
    );
    // Named by itself as well, an index is not filtered.
    assert_eq!(
        search(&b, "errors,logs-2", json!({})).await,
        ["logs-1:1", "logs-2:1", "logs-2:0"]
    );
    // A pattern matches alias names; `-` leaves an alias's indices out.
    assert_eq!(
        search(&b, "err*", json!({})).await,
        ["logs-1:1", "logs-2:1"]
    );
    assert_eq!(
        search(&b, "all-logs,-logs-1", json!({})).await,
        ["logs-2:1", "logs-2:0"]
    );
    // The mapping of an alias of one index is that index's.
    b.put_alias("logs-1", "first", &Value::Null).await.unwrap();
    assert_eq!(
        b.get_mapping("first").await.unwrap(),
        b.get_mapping("logs-1").await.unwrap()
    );
    assert_eq!(
        b.resolve_indices("first,errors").await.unwrap(),
        ["logs-1", "logs-2"]
    );
}

#[tokio::test]
async fn writes_through_an_alias_go_to_its_write_index() {
    let (_dir, b) = logs(SearchLimits::default()).await;
    b.put_alias("logs-1", "current", &json!({})).await.unwrap();
    b.bulk(
        Some("current"),
        "{\"index\":{\"_id\":\"new\"}}\n{\"level\":\"debug\"}\n",
    )
    .await
    .unwrap();
    assert_eq!(
        search(&b, "logs-1", json!({"query": {"term": {"level": "debug"}}})).await,
        ["logs-1:new"]
    );
    // An alias of two indices takes writes only with a write index.
    b.put_alias("logs-2", "current", &json!({})).await.unwrap();
    let summary = b
        .bulk(Some("current"), "{\"index\":{}}\n{\"level\":\"x\"}\n")
        .await
        .unwrap();
    assert!(summary.errors[0].contains("no write index is defined for alias [current]"));
    b.put_alias("logs-2", "current", &json!({"is_write_index": true}))
        .await
        .unwrap();
    b.bulk(
        None,
        "{\"index\":{\"_index\":\"current\",\"_id\":\"w\"}}\n{\"level\":\"x\"}\n",
    )
    .await
    .unwrap();
    assert_eq!(
        search(&b, "current", json!({"query": {"term": {"level": "x"}}})).await,
        ["logs-2:w"]
    );
    let err = b
        .put_alias("logs-1", "current", &json!({"is_write_index": true}))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("more than one write index"),
        "{err}"
    );
}

#[tokio::test]
async fn aliases_are_shown_kept_across_a_restart_and_go_with_their_index() {
    let (dir, b) = logs(SearchLimits::default()).await;
    b.put_alias("logs-1", "routed", &json!({"routing": "b"}))
        .await
        .unwrap();
    b.put_alias(
        "logs-1",
        "errors",
        &json!({"filter": {"term": {"level": "error"}}}),
    )
    .await
    .unwrap();
    let shown = json!({"logs-1": {"aliases": {
        "errors": {"filter": {"term": {"level": "error"}}},
        "routed": {"index_routing": "b", "search_routing": "b"}}}});
    assert_eq!(b.get_aliases("logs-1").await.unwrap(), shown);
    assert_eq!(
        b.get_aliases("logs-2").await.unwrap(),
        json!({"logs-2": {"aliases": {}}})
    );
    drop(b);
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    assert_eq!(b.get_aliases("logs-1").await.unwrap(), shown);
    b.delete_alias("logs-1", "routed").await.unwrap();
    assert!(matches!(
        b.delete_alias("logs-1", "routed").await,
        Err(SearchError::NoSuchAlias(a)) if a == "routed"
    ));
    b.delete_index("logs-1").await.unwrap();
    assert!(matches!(
        b.search("errors", &json!({})).await,
        Err(SearchError::NoSuchIndex(_))
    ));
}

#[tokio::test]
async fn alias_names_and_options_are_checked_before_anything_is_kept() {
    let (_dir, b) = logs(SearchLimits::default()).await;
    for (index, alias, options, message) in [
        (
            "logs-1",
            "logs-2",
            json!({}),
            "an index exists with the same name as the alias",
        ),
        ("logs-1", "Upper", json!({}), "Invalid alias name [Upper]"),
        (
            "logs-1",
            "a",
            json!({"is_hidden": true}),
            "alias option [is_hidden] is not supported",
        ),
        ("logs-1", "a", json!({"filter": {"nope": {}}}), "nope"),
        ("missing", "a", json!({}), "no such index 'missing'"),
    ] {
        let err = b.put_alias(index, alias, &options).await.unwrap_err();
        assert!(err.to_string().contains(message), "{alias}: {err}");
    }
    assert_eq!(
        b.get_aliases("_all").await.unwrap(),
        json!({"logs-1": {"aliases": {}}, "logs-2": {"aliases": {}}})
    );
    // An index cannot take an alias's name.
    b.put_alias("logs-1", "taken", &json!({})).await.unwrap();
    let err = b
        .create_index("taken", &json!({"mappings": {"properties": {}}}))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("an alias of that name exists"),
        "{err}"
    );
}

#[tokio::test]
async fn indices_boost_orders_indices_by_name_alias_or_pattern_first_match_wins() {
    let (_dir, b) = logs(SearchLimits::default()).await;
    b.put_alias("logs-2", "second", &json!({})).await.unwrap();
    let top = |boost: Value| {
        let b = b.clone();
        async move {
            let r = b
                .search(
                    "_all",
                    &json!({"query": {"term": {"level": "error"}}, "indices_boost": boost}),
                )
                .await
                .unwrap();
            hits(&r)
        }
    };
    assert_eq!(
        top(json!([{"logs-1": 2.0}])).await,
        ["logs-1:1", "logs-2:1"]
    );
    assert_eq!(
        top(json!([{"second": 2.0}])).await,
        ["logs-2:1", "logs-1:1"]
    );
    assert_eq!(
        top(json!({"logs-1": 1.0, "logs-2": 3.0})).await,
        ["logs-2:1", "logs-1:1"]
    );
    // The first entry naming an index gives its factor.
    assert_eq!(
        top(json!([{"*-2": 0.5}, {"second": 4.0}, {"logs-1": 1.0}])).await,
        ["logs-1:1", "logs-2:1"]
    );
    // The boost is the query's: `min_score` compares boosted scores.
    let plain = b
        .search("_all", &json!({"query": {"term": {"level": "error"}}}))
        .await
        .unwrap();
    let score = plain["hits"]["max_score"].as_f64().unwrap();
    let r = b
        .search(
            "_all",
            &json!({"query": {"term": {"level": "error"}}, "min_score": score * 2.0,
                    "indices_boost": [{"logs-1": 3.0}]}),
        )
        .await
        .unwrap();
    assert_eq!(hits(&r), ["logs-1:1"]);
    let err = b
        .search("_all", &json!({"indices_boost": [{"nonexistent": 2.0}]}))
        .await
        .unwrap_err();
    assert!(matches!(err, SearchError::NoSuchIndex(n) if n == "nonexistent"));
}

#[tokio::test]
async fn the_alias_table_is_bounded_by_max_aliases() {
    let mut limits = SearchLimits::default();
    limits.apply_overrides("max_aliases=3").unwrap();
    let (_dir, b) = logs(limits).await;
    b.put_alias("logs-*", "a", &json!({})).await.unwrap();
    b.put_alias("logs-1", "b", &json!({})).await.unwrap();
    let err = b.put_alias("logs-2", "c", &json!({})).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("more than 3 aliases (search limit max_aliases)"),
        "{err}"
    );
    // Nothing of the refused alias was kept.
    assert_eq!(
        b.resolve_indices("a,b").await.unwrap(),
        ["logs-1", "logs-2"]
    );
    assert!(b.resolve_indices("c").await.is_err());
}

#[tokio::test]
async fn terms_on_index_and_bounded_totals_across_indices() {
    let (_dir, b) = logs(SearchLimits::default()).await;
    let r = b
        .search(
            "logs-*",
            &json!({"size": 0, "query": {"term": {"level": "error"}},
                    "aggs": {"by_index": {"terms": {"field": "_index"},
                                          "aggs": {"levels": {"terms": {"field": "level"}}}}}}),
        )
        .await
        .unwrap();
    let buckets = &r["aggregations"]["by_index"]["buckets"];
    assert_eq!(buckets.as_array().unwrap().len(), 2);
    assert_eq!(buckets[0]["key"], "logs-1");
    assert_eq!(buckets[0]["doc_count"], 1);
    assert_eq!(buckets[1]["levels"]["buckets"][0]["key"], "error");
    // include / exclude name indices (a regular expression or a list); min_doc_count 0 shows an
    // index without matches; size 1 keeps the first bucket.
    let keys = |terms: Value| {
        let b = b.clone();
        async move {
            let r = b
                .search(
                    "logs-*",
                    &json!({"size": 0, "query": {"term": {"level": "warn"}},
                            "aggs": {"i": {"terms": terms}}}),
                )
                .await
                .unwrap();
            r["aggregations"]["i"]["buckets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| format!("{}:{}", b["key"].as_str().unwrap(), b["doc_count"]))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(keys(json!({"field": "_index"})).await, ["logs-2:1"]);
    assert_eq!(
        keys(json!({"field": "_index", "min_doc_count": 0})).await,
        ["logs-2:1", "logs-1:0"]
    );
    assert_eq!(
        keys(json!({"field": "_index", "min_doc_count": 0, "exclude": "logs-2"})).await,
        ["logs-1:0"]
    );
    assert_eq!(
        keys(json!({"field": "_index", "min_doc_count": 0, "include": ["logs-1"]})).await,
        ["logs-1:0"]
    );
    assert_eq!(
        keys(json!({"field": "_index", "min_doc_count": 0, "size": 1})).await,
        ["logs-2:1"]
    );
    // Beside an aggregation only one index's answer can give, still answered from it.
    let r = b
        .search(
            "logs-*",
            &json!({"size": 0, "query": {"term": {"level": "warn"}},
                    "aggs": {"i": {"terms": {"field": "_index", "min_doc_count": 0}},
                             "c": {"cardinality": {"field": "level"}}}}),
        )
        .await
        .unwrap();
    assert_eq!(r["aggregations"]["c"]["value"], 1);
    assert_eq!(
        r["aggregations"]["i"]["buckets"].as_array().unwrap().len(),
        2
    );
    // The empty buckets of an index without matches reach only top-level terms: deeper, or in
    // multi_terms, they would be missed without a word, so that is refused by name.
    for aggs in [
        json!({"f": {"filter": {"match_all": {}},
                     "aggs": {"l": {"terms": {"field": "level", "min_doc_count": 0}}}}}),
        json!({"m": {"multi_terms": {"terms": [{"field": "level"}, {"field": "level"}],
                                     "min_doc_count": 0}}}),
    ] {
        let body = json!({"size": 0, "query": {"term": {"level": "warn"}}, "aggs": aggs});
        let e = b.search("logs-*", &body).await.unwrap_err().to_string();
        assert!(
            e.contains("with min_doc_count 0") && e.contains("over several indices"),
            "{e}"
        );
        // One index, or every index with matches: answered.
        b.search("logs-2", &body).await.unwrap();
        let all = json!({"size": 0, "aggs": body["aggs"]});
        b.search("logs-*", &all).await.unwrap();
    }
    // A bound on the count holds for the sum over indices too.
    let r = b
        .search("logs-*", &json!({"size": 0, "track_total_hits": 3}))
        .await
        .unwrap();
    assert_eq!(r["hits"]["total"], json!({"value": 3, "relation": "gte"}));
    let r = b
        .search("logs-1", &json!({"size": 0, "track_total_hits": -1}))
        .await
        .unwrap();
    assert!(r["hits"].get("total").is_none());
    let err = b
        .search("logs-1", &json!({"track_total_hits": -2}))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("[track_total_hits] parameter must be positive or equals to -1, got -2"),
        "{err}"
    );
    let err = b
        .search(
            "logs-1",
            &json!({"aggs": {"c": {"cardinality": {"field": "_index"}}}}),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("cardinality aggregation on _index"),
        "{err}"
    );
}

/// Another process changing the aliases (here: holding the data directory's lock on the alias
/// table) makes a change wait, at most the `timeout` limit, then fail naming it; once the other
/// process lets go, changes and new indices go through.
#[tokio::test]
async fn another_process_holding_the_alias_table_delays_changes_within_the_timeout() {
    let limits = SearchLimits {
        timeout: std::time::Duration::from_millis(300),
        ..SearchLimits::default()
    };
    let (dir, b) = logs(limits).await;
    let other = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.path().join("_aliases.lock"))
        .unwrap();
    other.lock().unwrap();
    let err = b
        .put_alias("logs-1", "recent", &json!({}))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("another process held the alias table")
            && err.contains("(search limit timeout)"),
        "{err}"
    );
    assert!(b.create_index("logs-3", &json!({})).await.is_err());
    other.unlock().unwrap();
    b.put_alias("logs-1", "recent", &json!({})).await.unwrap();
    b.create_index("logs-3", &json!({})).await.unwrap();
    let r = b.search("recent", &json!({})).await.unwrap();
    assert_eq!(r["hits"]["total"]["value"], 2);
}

/// The `index_mapping` tool answers for an alias of one index as for the index: its mapping and
/// a document the alias shows (its filter applied).
#[tokio::test]
async fn the_index_mapping_tool_reads_through_an_alias() {
    let (_dir, b) = logs(SearchLimits::default()).await;
    b.put_alias(
        "logs-2",
        "warnings",
        &json!({"filter": {"term": {"level": "warn"}}}),
    )
    .await
    .unwrap();
    let backend: std::sync::Arc<dyn SearchBackend> = std::sync::Arc::new(b);
    let tool = toolplan_search::tools::index_mapping(backend);
    let out = tool
        .call(
            json!({"index": "warnings"}),
            toolplan_core::ToolContext::detached(),
        )
        .await
        .unwrap();
    assert_eq!(out["mapping"]["properties"]["level"]["type"], "keyword");
    assert_eq!(out["sample_document"]["level"], "warn");
}
