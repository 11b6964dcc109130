//! What several test modules load: the shared example data (`../shared/data`, the iris index), the
//! query-DSL evaluation set (`bench/dsl_eval/`) and JSON files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use toolplan_search::{EmbeddedBackend, SearchBackend};

/// A file of the shared example data.
pub fn shared_data(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(file)
}

/// A file of the query-DSL evaluation set.
pub fn eval_set(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../bench/dsl_eval")
        .join(file)
}

/// The ids of the hits of `query` on `index` (up to 100), sorted.
/// The `_id`s of a search response's hits, in order.
pub fn ids_of(response: &Value) -> Vec<String> {
    response["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_id"].as_str().unwrap().to_owned())
        .collect()
}

pub async fn hit_ids(b: &EmbeddedBackend, index: &str, query: Value) -> Vec<String> {
    let response = b
        .search(index, &serde_json::json!({"query": query, "size": 100}))
        .await
        .unwrap_or_else(|e| panic!("{query}: {e}"));
    let mut ids: Vec<String> = response["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

/// A JSON file, parsed.
pub fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// An embedded backend in a new directory with `iris-index`: the iris mapping and its 150 flowers,
/// loaded through `_bulk`.
pub async fn iris_index() -> (tempfile::TempDir, Arc<EmbeddedBackend>) {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(EmbeddedBackend::open(dir.path()).unwrap());
    let mapping = read_json(&shared_data("iris-mapping.json"));
    backend.create_index("iris-index", &mapping).await.unwrap();
    let body = std::fs::read_to_string(shared_data("iris.ndjson")).unwrap();
    let summary = backend.bulk(None, &body).await.unwrap();
    assert_eq!(summary.indexed, 150, "{:?}", summary.errors);
    assert!(summary.errors.is_empty());
    (dir, backend)
}
