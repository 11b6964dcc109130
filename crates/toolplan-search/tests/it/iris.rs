//! The iris walk-through on the embedded backend: the mapping and the 150 flowers of
//! `../shared/data`, loaded through `_bulk`, counted the ways a generated DSL would count them.

use std::sync::Arc;

use serde_json::{Value, json};
use toolplan_search::{EmbeddedBackend, SearchBackend};

use crate::fixtures::iris_index;

fn total(response: &Value) -> u64 {
    response["hits"]["total"]["value"].as_u64().unwrap()
}

#[tokio::test]
async fn fifty_setosa_however_the_dsl_counts_them() {
    let (_dir, backend) = iris_index().await;
    let term = backend
        .search(
            "iris-index",
            &json!({"size": 0, "query": {"term": {"species.keyword": "setosa"}}}),
        )
        .await
        .unwrap();
    assert_eq!(total(&term), 50);
    assert_eq!(term["hits"]["hits"], json!([]));
    let matched = backend
        .search(
            "iris-index",
            &json!({"query": {"match": {"species": "Setosa"}}, "size": 3}),
        )
        .await
        .unwrap();
    assert_eq!(total(&matched), 50);
    assert_eq!(matched["hits"]["hits"].as_array().unwrap().len(), 3);
    assert_eq!(matched["hits"]["hits"][0]["_source"]["species"], "setosa");
    let aggs = backend
        .search(
            "iris-index",
            &json!({"size": 0, "aggs": {"by_species": {"terms": {"field": "species.keyword"}}}}),
        )
        .await
        .unwrap();
    let buckets = aggs["aggregations"]["by_species"]["buckets"]
        .as_array()
        .unwrap();
    assert_eq!(buckets.len(), 3);
    assert!(buckets.iter().all(|b| b["doc_count"] == 50), "{buckets:?}");
    let count = backend
        .search("iris-index", &json!({"size": 0, "query": {"match": {"species": "setosa"}},
                                      "aggs": {"n": {"value_count": {"field": "petal_length_in_cm"}}}}))
        .await
        .unwrap();
    assert_eq!(count["aggregations"]["n"]["value"], 50.0);
}

#[tokio::test]
async fn ranges_sorting_metrics_and_sources() {
    let (_dir, backend) = iris_index().await;
    let r = backend
        .search(
            "iris-index",
            &json!({
                "query": {"bool": {"filter": [{"range": {"petal_length_in_cm": {"gte": 6}}}]}},
                "sort": [{"petal_length_in_cm": {"order": "desc"}}],
                "size": 2,
                "_source": ["petal_length_in_cm", "species"]
            }),
        )
        .await
        .unwrap();
    assert_eq!(total(&r), 11);
    let hits = r["hits"]["hits"].as_array().unwrap();
    assert_eq!(
        hits[0]["_source"],
        json!({"petal_length_in_cm": 6.9, "species": "virginica"})
    );
    assert_eq!(hits[0]["sort"], json!([6.9]));
    assert_eq!(hits[0]["_score"], Value::Null);
    let stats = backend
        .search(
            "iris-index",
            &json!({"size": 0, "query": {"term": {"species.keyword": "versicolor"}},
                                      "aggs": {"s": {"stats": {"field": "sepal_length_in_cm"}}}}),
        )
        .await
        .unwrap();
    let s = &stats["aggregations"]["s"];
    assert_eq!(s["count"], 50);
    assert!((s["avg"].as_f64().unwrap() - 5.936).abs() < 1e-6, "{s}");
    let mapping = backend.get_mapping("iris-index").await.unwrap();
    assert_eq!(
        mapping["properties"]["species"]["fields"]["keyword"]["type"],
        "keyword"
    );
    let sample = backend
        .sample_document("iris-index")
        .await
        .unwrap()
        .unwrap();
    assert!(sample.get("species").is_some());
    let listed = backend.list_indices().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].docs, 150);
}

#[tokio::test]
async fn unsupported_and_wrong_requests_say_where() {
    let (_dir, backend) = iris_index().await;
    let err = backend
        .search("iris-index", &json!({"query": {"bool": {"must": [{"match_all": {}}, {"nested": {"path": "x", "query": {"match_all": {}}}}]}}}))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "query.bool.must[1].nested: the nested clause is not supported by the embedded backend"
    );
    let err = backend
        .search("iris-index", &json!({"size": "ten"}))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("size: size must be a whole number"),
        "{err}"
    );
    let err = backend
        .search(
            "iris-index",
            &json!({"size": 0, "aggs": {"t": {"terms": {"field": "species"}}}}),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("use 'species.keyword'"), "{err}");
    let err = backend.search("nope", &json!({})).await.unwrap_err();
    assert_eq!(err.to_string(), "no such index 'nope'");
    // A field the mapping does not have matches nothing, as in OpenSearch.
    let r = backend
        .search("iris-index", &json!({"query": {"term": {"colour": "red"}}}))
        .await
        .unwrap();
    assert_eq!(total(&r), 0);
}

#[tokio::test]
async fn the_index_persists_and_can_be_deleted() {
    let (dir, backend) = iris_index().await;
    drop(backend);
    let reopened = Arc::new(EmbeddedBackend::open(dir.path()).unwrap());
    let r = reopened
        .search("iris-index", &json!({"size": 0}))
        .await
        .unwrap();
    assert_eq!(total(&r), 150);
    let err = reopened
        .create_index("iris-index", &json!({"properties": {}}))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "index 'iris-index' exists already");
    reopened.delete_index("iris-index").await.unwrap();
    assert!(reopened.list_indices().await.unwrap().is_empty());
}

#[tokio::test]
async fn the_search_tools_run_in_a_plan() {
    use toolplan_core::{Engine, RunControl, ToolRegistry};
    let (_dir, backend) = iris_index().await;
    let mut registry = ToolRegistry::new();
    registry
        .register_all(toolplan_search::tools::backend_tools(backend))
        .unwrap();
    let engine = Engine::new(Arc::new(registry));
    let plan = engine
        .compile_value(json!({"steps": [
            {"id": "list", "tool": "list_indices", "arguments": {}},
            {"id": "map", "tool": "index_mapping", "arguments": {"index": "$ref:list.0.index"}},
            {"id": "count", "tool": "search_index", "arguments": {"index": "$ref:list.0.index",
                "query": {"size": 0, "query": {"term": {"species.keyword": "setosa"}}}}}
        ]}))
        .unwrap();
    let run = engine.run(&plan, RunControl::default()).await;
    assert!(run.all_ok(), "{}", run.summary());
    assert_eq!(
        run.output("list"),
        Some(&json!([{"index": "iris-index", "docs": 150}]))
    );
    assert_eq!(
        run.output("map").unwrap()["mapping"]["properties"]["species"]["type"],
        "text"
    );
    assert_eq!(run.output("count").unwrap()["hits"]["total"]["value"], 50);
}

#[tokio::test]
async fn two_backends_over_one_directory_both_read() {
    // Reading never takes the write lock: a second backend (another process, or the search tools
    // beside query_planning) searches the index the first one loaded while the first is still open.
    let (dir, first) = iris_index().await;
    let second = EmbeddedBackend::open(dir.path()).unwrap();
    let r = second
        .search("iris-index", &json!({"size": 0}))
        .await
        .unwrap();
    assert_eq!(total(&r), 150);
    let r = first
        .search("iris-index", &json!({"size": 0}))
        .await
        .unwrap();
    assert_eq!(total(&r), 150);
}

#[tokio::test]
async fn a_term_query_counts_only_live_documents() {
    // A term query is counted apart from its page of hits (from the term's document frequency
    // while nothing is deleted): the count must still leave out replaced documents.
    let (_dir, backend) = iris_index().await;
    let body = r#"{"index": {"_index": "iris-index", "_id": "x1"}}
{"species": "setosa", "sepal_length_in_cm": 5.0}
{"index": {"_index": "iris-index", "_id": "x2"}}
{"species": "setosa", "sepal_length_in_cm": 5.1}
{"index": {"_index": "iris-index", "_id": "x1"}}
{"species": "virginica", "sepal_length_in_cm": 7.0}
"#;
    let summary = backend.bulk(None, body).await.unwrap();
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    for (species, expected) in [("setosa", 51), ("virginica", 51), ("versicolor", 50)] {
        for size in [0, 3, 100] {
            let r = backend
                .search(
                    "iris-index",
                    &json!({"size": size, "query": {"term": {"species.keyword": species}}}),
                )
                .await
                .unwrap();
            assert_eq!(total(&r), expected, "{species}, size {size}");
            let hits = r["hits"]["hits"].as_array().unwrap();
            assert_eq!(hits.len(), size.min(expected as usize), "{species}");
            assert!(hits.iter().all(|h| h["_source"]["species"] == species));
        }
    }
}
