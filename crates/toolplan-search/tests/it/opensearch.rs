//! The OpenSearch backend against a loopback server that records every request and replays
//! OpenSearch-shaped answers. No cluster can run here; this checks the requests we send (paths,
//! methods, auth headers, bodies, content types) and how answers and errors are read.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use serde_json::{Value, json};
use toolplan_search::{Auth, OpenSearchBackend, OpenSearchConfig, SearchBackend, SearchError};

#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    auth: Option<String>,
    content_type: Option<String>,
    body: String,
}

type Replies = Vec<(&'static str, &'static str, u16, Value)>;

#[derive(Clone)]
struct Stub {
    seen: Arc<Mutex<Vec<Seen>>>,
    replies: Arc<Replies>,
    delay: Duration,
}

async fn handle(
    State(stub): State<Stub>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let path = uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    stub.seen.lock().unwrap().push(Seen {
        method: method.to_string(),
        path: path.clone(),
        auth: header("authorization"),
        content_type: header("content-type"),
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    tokio::time::sleep(stub.delay).await;
    for (m, p, status, reply) in stub.replies.iter() {
        if *m == method.as_str() && *p == path {
            return (StatusCode::from_u16(*status).unwrap(), reply.to_string());
        }
    }
    (
        StatusCode::NOT_FOUND,
        json!({"error": "no stub"}).to_string(),
    )
}

async fn serve(replies: Replies, delay: Duration) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let stub = Stub {
        seen: Arc::clone(&seen),
        replies: Arc::new(replies),
        delay,
    };
    let app = Router::new().fallback(handle).with_state(stub);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, app).await.ok();
    });
    (url, seen)
}

fn backend(url: &str, auth: Auth) -> OpenSearchBackend {
    let mut config = OpenSearchConfig::new(url);
    config.auth = auth;
    config.timeout = Duration::from_secs(5);
    OpenSearchBackend::new(config).unwrap()
}

#[tokio::test]
async fn search_sends_the_body_with_basic_auth() {
    let answer = json!({"took": 2, "timed_out": false, "hits": {"total": {"value": 50, "relation": "eq"}, "max_score": null, "hits": []}});
    let (url, seen) = serve(
        vec![("POST", "/iris-index/_search", 200, answer.clone())],
        Duration::ZERO,
    )
    .await;
    let b = backend(
        &url,
        Auth::Basic {
            user: "admin".into(),
            password: "s3cret".into(),
        },
    );
    let body = json!({"size": 0, "query": {"term": {"species.keyword": "setosa"}}});
    assert_eq!(b.search("iris-index", &body).await.unwrap(), answer);
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].method, "POST");
    // base64("admin:s3cret")
    assert_eq!(seen[0].auth.as_deref(), Some("Basic YWRtaW46czNjcmV0"));
    assert_eq!(seen[0].content_type.as_deref(), Some("application/json"));
    assert_eq!(serde_json::from_str::<Value>(&seen[0].body).unwrap(), body);
}

#[tokio::test]
async fn indices_mappings_and_samples() {
    let (url, seen) = serve(
        vec![
            ("GET", "/_cat/indices?format=json&h=index,docs.count", 200,
             json!([{"index": "iris-index", "docs.count": "150"}, {"index": ".kibana", "docs.count": "3"}, {"index": "books", "docs.count": "7"}])),
            ("PUT", "/books", 200, json!({"acknowledged": true, "index": "books"})),
            ("PUT", "/iris-index", 400, json!({"error": {"type": "resource_already_exists_exception"}, "status": 400})),
            ("GET", "/iris-index/_mapping", 200, json!({"iris-index": {"mappings": {"properties": {"species": {"type": "text"}}}}})),
            ("POST", "/iris-index/_search", 200, json!({"hits": {"hits": [{"_id": "1", "_source": {"species": "setosa"}}]}})),
            ("DELETE", "/books", 200, json!({"acknowledged": true})),
            ("PUT", "/books/_mapping", 200, json!({"acknowledged": true})),
        ],
        Duration::ZERO,
    )
    .await;
    let b = backend(&url, Auth::ApiKey("a2V5OnNlY3JldA==".into()));
    let list = b.list_indices().await.unwrap();
    let names: Vec<(&str, u64)> = list.iter().map(|i| (i.name.as_str(), i.docs)).collect();
    assert_eq!(names, [("books", 7), ("iris-index", 150)]);
    b.create_index("books", &json!({"properties": {"title": {"type": "text"}}}))
        .await
        .unwrap();
    let err = b
        .create_index("iris-index", &json!({"mappings": {"properties": {}}}))
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "index 'iris-index' exists already");
    assert_eq!(
        b.get_mapping("iris-index").await.unwrap(),
        json!({"properties": {"species": {"type": "text"}}})
    );
    assert_eq!(
        b.sample_document("iris-index").await.unwrap(),
        Some(json!({"species": "setosa"}))
    );
    b.put_mapping(
        "books",
        &json!({"mappings": {"properties": {"year": {"type": "integer"}}}}),
    )
    .await
    .unwrap();
    b.delete_index("books").await.unwrap();
    let seen = seen.lock().unwrap();
    let put = seen.iter().find(|s| s.path == "/books/_mapping").unwrap();
    // The update is sent as the put-mapping API takes it: the mapping itself.
    assert_eq!(
        serde_json::from_str::<Value>(&put.body).unwrap(),
        json!({"properties": {"year": {"type": "integer"}}})
    );
    assert!(
        seen.iter()
            .all(|s| s.auth.as_deref() == Some("ApiKey a2V5OnNlY3JldA=="))
    );
    let create = seen
        .iter()
        .find(|s| s.method == "PUT" && s.path == "/books")
        .unwrap();
    // A bare properties object is sent as {"mappings": …}.
    assert_eq!(
        serde_json::from_str::<Value>(&create.body).unwrap(),
        json!({"mappings": {"properties": {"title": {"type": "text"}}}})
    );
}

#[tokio::test]
async fn bulk_sends_ndjson_and_reports_failed_items_by_line() {
    let answer = json!({"took": 3, "errors": true, "items": [
        {"index": {"_index": "iris", "_id": "1", "status": 201, "result": "created"}},
        {"index": {"_index": "iris", "_id": "2", "status": 400,
                   "error": {"type": "mapper_parsing_exception", "reason": "failed to parse field [a] of type [long]"}}},
        {"delete": {"_index": "iris", "_id": "3", "status": 200, "result": "deleted"}}
    ]});
    let (url, seen) = serve(vec![("POST", "/iris/_bulk", 200, answer)], Duration::ZERO).await;
    let b = backend(&url, Auth::None);
    let body = "{\"index\": {\"_id\": \"1\"}}\n{\"a\": 1}\n{\"index\": {\"_id\": \"2\"}}\n{\"a\": \"x\"}\n{\"delete\": {\"_id\": \"3\"}}";
    let summary = b.bulk(Some("iris"), body).await.unwrap();
    assert_eq!(summary.indexed, 1);
    assert_eq!(summary.deleted, 1);
    assert_eq!(
        summary.errors,
        ["line 3: mapper_parsing_exception: failed to parse field [a] of type [long]"]
    );
    // A malformed body fails before anything is sent.
    let err = b.bulk(Some("iris"), "{\"index\": {}}").await.unwrap_err();
    assert!(matches!(err, SearchError::Bulk { line: 1, .. }));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].content_type.as_deref(),
        Some("application/x-ndjson")
    );
    assert!(
        seen[0].body.ends_with("{\"delete\": {\"_id\": \"3\"}}\n"),
        "{}",
        seen[0].body
    );
    assert_eq!(seen[0].auth, None);
}

#[tokio::test]
async fn errors_are_named() {
    let (url, _) = serve(
        vec![
            ("POST", "/missing/_search", 404, json!({"error": {"type": "index_not_found_exception"}, "status": 404})),
            ("POST", "/iris/_search", 400, json!({"error": {"type": "parsing_exception", "reason": "unknown query [nope]"}, "status": 400})),
        ],
        Duration::ZERO,
    )
    .await;
    let b = backend(&url, Auth::None);
    let err = b.search("missing", &json!({})).await.unwrap_err();
    assert_eq!(err.to_string(), "no such index 'missing'");
    let err = b
        .search("iris", &json!({"query": {"nope": {}}}))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("OpenSearch answered HTTP 400: {\"error\""),
        "{err}"
    );
    assert!(err.to_string().contains("unknown query [nope]"));
    assert!(OpenSearchBackend::new(OpenSearchConfig::new("localhost:9200")).is_err());
}

#[tokio::test]
async fn a_slow_cluster_times_out() {
    let (url, _) = serve(
        vec![("POST", "/iris/_search", 200, json!({}))],
        Duration::from_secs(3),
    )
    .await;
    let mut config = OpenSearchConfig::new(url);
    config.timeout = Duration::from_millis(200);
    let b = OpenSearchBackend::new(config).unwrap();
    let started = std::time::Instant::now();
    let err = b.search("iris", &json!({})).await.unwrap_err();
    assert!(matches!(err, SearchError::Transport(_)), "{err}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn stored_scripts_and_the_validating_dry_run() {
    let script =
        json!({"lang": "mustache", "source": {"query": {"match": {"species": "{{species}}"}}}});
    let (url, seen) = serve(
        vec![
            ("PUT", "/_scripts/species_template", 200, json!({"acknowledged": true})),
            ("GET", "/_scripts/species_template", 200,
             json!({"_id": "species_template", "found": true, "script": script.clone()})),
            ("GET", "/_scripts/missing", 404, json!({"_id": "missing", "found": false})),
            ("DELETE", "/_scripts/species_template", 200, json!({"acknowledged": true})),
            ("POST", "/iris-index/_search", 400,
             json!({"error": {"type": "parsing_exception", "reason": "[range] query does not support [eq]"}, "status": 400})),
        ],
        Duration::ZERO,
    )
    .await;
    let b = backend(&url, Auth::None);
    b.put_script("species_template", &json!({"script": script.clone()}))
        .await
        .unwrap();
    assert_eq!(
        b.get_script("species_template").await.unwrap(),
        Some(script.clone())
    );
    assert_eq!(b.get_script("missing").await.unwrap(), None);
    b.delete_script("species_template").await.unwrap();
    assert!(b.put_script("a/b", &script).await.is_err());

    let body = json!({"size": 10, "query": {"range": {"petal_length_in_cm": {"eq": 1.4}}}});
    let err = b.validate("iris-index", &body).await.unwrap_err();
    assert!(err.is_rejection(), "{err}");
    assert!(err.to_string().contains("does not support [eq]"), "{err}");

    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].method, "PUT");
    assert_eq!(
        serde_json::from_str::<Value>(&seen[0].body).unwrap(),
        json!({"script": script})
    );
    assert_eq!(seen.len(), 5, "the invalid id was never sent");
    // The dry run asks for no hits and stops at the first match.
    let dry: Value = serde_json::from_str(&seen[4].body).unwrap();
    assert_eq!(dry["size"], 0);
    assert_eq!(dry["terminate_after"], 1);
    assert_eq!(dry["query"], body["query"]);
}
