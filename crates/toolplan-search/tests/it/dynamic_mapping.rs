//! Issue 25.2: fields a document brings that the mapping does not have are mapped as OpenSearch
//! maps them by default, and searched; `dynamic: true | false | strict` is honoured per object;
//! the put-mapping API adds fields; what documents may add to a mapping is bounded.

use serde_json::{Value, json};
use toolplan_search::{EmbeddedBackend, SearchBackend, SearchLimits};

fn bulk_body(docs: &[(&str, Value)]) -> String {
    docs.iter()
        .map(|(id, doc)| format!("{}\n{doc}\n", json!({"index": {"_id": id}})))
        .collect()
}

use crate::fixtures::hit_ids as ids;

#[tokio::test]
async fn documents_without_a_mapping_are_mapped_and_searched() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    // No index yet: the first write creates it, as OpenSearch does.
    let summary = b
        .bulk(
            Some("books"),
            &bulk_body(&[
                (
                    "1",
                    json!({"title": "Moby Dick", "pages": 635, "price": 9.5, "in_print": true,
                           "published": "1851-10-18", "author": {"name": "Herman Melville"},
                           "reviews": [{"stars": 5, "by": "ann"}, {"stars": 2, "by": "bob"}]}),
                ),
                (
                    "2",
                    json!({"title": "Dracula", "pages": 418, "price": 12.0, "in_print": false,
                           "published": "1897-05-26", "author": {"name": "Bram Stoker"},
                           "reviews": [{"stars": 4, "by": "cy"}]}),
                ),
            ]),
        )
        .await
        .unwrap();
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    let mapping = b.get_mapping("books").await.unwrap();
    let p = &mapping["properties"];
    assert_eq!(p["title"]["type"], "text");
    assert_eq!(p["title"]["fields"]["keyword"]["type"], "keyword");
    assert_eq!(p["pages"]["type"], "long");
    assert_eq!(p["price"]["type"], "float");
    assert_eq!(p["in_print"]["type"], "boolean");
    assert_eq!(p["published"]["type"], "date");
    assert_eq!(p["author"]["properties"]["name"]["type"], "text");

    assert_eq!(
        ids(&b, "books", json!({"match": {"title": "moby"}})).await,
        ["1"]
    );
    assert_eq!(
        ids(&b, "books", json!({"term": {"title.keyword": "Dracula"}})).await,
        ["2"]
    );
    assert_eq!(
        ids(&b, "books", json!({"range": {"pages": {"gt": 500}}})).await,
        ["1"]
    );
    assert_eq!(
        ids(
            &b,
            "books",
            json!({"range": {"published": {"gte": "1890-01-01"}}})
        )
        .await,
        ["2"]
    );
    assert_eq!(
        ids(&b, "books", json!({"term": {"in_print": true}})).await,
        ["1"]
    );
    assert_eq!(
        ids(&b, "books", json!({"match": {"author.name": "stoker"}})).await,
        ["2"]
    );
    // Every element of an array of objects, as OpenSearch flattens them.
    assert_eq!(
        ids(&b, "books", json!({"term": {"reviews.by.keyword": "bob"}})).await,
        ["1"]
    );
    let aggs = b
        .search(
            "books",
            &json!({"size": 0, "aggs": {"stars": {"max": {"field": "reviews.stars"}}}}),
        )
        .await
        .unwrap();
    assert_eq!(aggs["aggregations"]["stars"]["value"], 5.0);
}

#[tokio::test]
async fn a_new_field_in_an_index_with_documents_is_searched_in_old_and_new_ones() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    b.create_index("t", &json!({"properties": {"name": {"type": "keyword"}}}))
        .await
        .unwrap();
    b.bulk(
        Some("t"),
        &bulk_body(&[
            ("1", json!({"name": "a", "color": "red"})),
            ("2", json!({"name": "b"})),
            ("3", json!({"name": "c"})),
        ]),
    )
    .await
    .unwrap();
    b.bulk(Some("t"), "{\"delete\": {\"_id\": \"3\"}}\n")
        .await
        .unwrap();
    // A second load brings a new field: the index is rebuilt with it.
    b.bulk(
        Some("t"),
        &bulk_body(&[("4", json!({"name": "d", "size": 7, "color": "red"}))]),
    )
    .await
    .unwrap();
    assert_eq!(
        ids(&b, "t", json!({"term": {"color.keyword": "red"}})).await,
        ["1", "4"]
    );
    assert_eq!(
        ids(&b, "t", json!({"range": {"size": {"gte": 7}}})).await,
        ["4"]
    );
    // The deleted document stays deleted, the others keep their order.
    // match_all scores every document alike, so hits come in index order.
    let r = b.search("t", &json!({"size": 10})).await.unwrap();
    let all: Vec<&str> = r["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_id"].as_str().unwrap())
        .collect();
    assert_eq!(all, ["1", "2", "4"]);
    // The grown index is what a new backend on the same directory opens.
    drop(b);
    let again = EmbeddedBackend::open(dir.path()).unwrap();
    assert_eq!(
        ids(&again, "t", json!({"range": {"size": {"gte": 7}}})).await,
        ["4"]
    );
    assert_eq!(
        again.get_mapping("t").await.unwrap()["properties"]["size"]["type"],
        "long"
    );
    // One generation of the index is kept on disk.
    let generations: Vec<String> = std::fs::read_dir(dir.path().join("t"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("tantivy"))
        .collect();
    assert_eq!(generations.len(), 1, "{generations:?}");
}

#[tokio::test]
async fn dynamic_false_keeps_new_fields_in_source_and_strict_refuses_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    b.create_index(
        "t",
        &json!({"mappings": {"dynamic": "strict", "properties": {
            "name": {"type": "keyword"},
            "extra": {"type": "object", "dynamic": false}
        }}}),
    )
    .await
    .unwrap();
    let summary = b
        .bulk(
            Some("t"),
            &bulk_body(&[
                ("1", json!({"name": "a", "extra": {"note": "kept"}})),
                ("2", json!({"name": "b", "surprise": 1})),
            ]),
        )
        .await
        .unwrap();
    assert_eq!(summary.indexed, 1);
    assert_eq!(
        summary.errors,
        [
            "line 3: mapping set to strict, dynamic introduction of [surprise] within [_doc] is not allowed"
        ]
    );
    // Unmapped: in _source, found by nothing, as in OpenSearch.
    assert!(
        ids(&b, "t", json!({"match": {"extra.note": "kept"}}))
            .await
            .is_empty()
    );
    let hit = b.search("t", &json!({})).await.unwrap();
    assert_eq!(hit["hits"]["hits"][0]["_source"]["extra"]["note"], "kept");
    assert_eq!(
        b.get_mapping("t").await.unwrap()["properties"]["extra"],
        json!({"type": "object", "dynamic": false})
    );
}

#[tokio::test]
async fn put_mapping_adds_fields_that_documents_already_indexed_get() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    b.create_index(
        "t",
        &json!({"mappings": {"dynamic": false, "properties": {"name": {"type": "keyword"}}}}),
    )
    .await
    .unwrap();
    b.bulk(
        Some("t"),
        &bulk_body(&[
            ("1", json!({"name": "a", "year": 1999})),
            ("2", json!({"name": "b", "year": "not a year"})),
        ]),
    )
    .await
    .unwrap();
    assert!(
        ids(&b, "t", json!({"range": {"year": {"gte": 1990}}}))
            .await
            .is_empty()
    );
    b.put_mapping("t", &json!({"properties": {"year": {"type": "integer"}}}))
        .await
        .unwrap();
    // A value that does not fit the new field is left out of it, not a failure.
    assert_eq!(
        ids(&b, "t", json!({"range": {"year": {"gte": 1990}}})).await,
        ["1"]
    );
    let err = b
        .put_mapping("t", &json!({"properties": {"year": {"type": "text"}}}))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("mapper [year] cannot be changed from type [integer] to [text]"),
        "{err}"
    );
    // Root options change without a rebuild; `strict` then refuses new fields.
    b.put_mapping("t", &json!({"dynamic": "strict"}))
        .await
        .unwrap();
    let summary = b
        .bulk(
            Some("t"),
            &bulk_body(&[("3", json!({"name": "c", "x": 1}))]),
        )
        .await
        .unwrap();
    assert_eq!(summary.indexed, 0);
    assert_eq!(
        b.get_mapping("t").await.unwrap()["dynamic"],
        json!("strict")
    );
}

/// The attacker's side: documents built to grow the mapping without bound.
#[tokio::test]
async fn documents_cannot_grow_a_mapping_past_its_limits() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    let wide: serde_json::Map<String, Value> =
        (0..5000).map(|i| (format!("f{i}"), json!(i))).collect();
    let mut deep = json!(1);
    for _ in 0..60 {
        deep = json!({ "d": deep });
    }
    let summary = b
        .bulk(
            Some("t"),
            &bulk_body(&[
                ("wide", Value::Object(wide)),
                ("deep", deep),
                ("fine", json!({"ok": 1})),
            ]),
        )
        .await
        .unwrap();
    assert_eq!(summary.indexed, 1);
    assert_eq!(summary.errors.len(), 2);
    assert!(
        summary.errors[0].contains("Limit of total fields [1000] has been exceeded"),
        "{:?}",
        summary.errors
    );
    assert!(
        summary.errors[1].contains("Limit of mapping depth [20] has been exceeded"),
        "{:?}",
        summary.errors
    );
    let fields = b.get_mapping("t").await.unwrap()["properties"]
        .as_object()
        .map_or(0, serde_json::Map::len);
    assert_eq!(fields, 1);
    // A mapping given whole is held to the same limit.
    let big: serde_json::Map<String, Value> = (0..1001)
        .map(|i| (format!("f{i}"), json!({"type": "long"})))
        .collect();
    let err = b
        .create_index("big", &json!({"properties": big}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("max_mapped_fields"), "{err}");
    // The owner can raise them.
    let mut limits = SearchLimits::default();
    limits
        .apply_overrides("max_mapped_fields=6000,max_mapping_depth=100")
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open_with_limits(dir.path(), limits).unwrap();
    let wide: serde_json::Map<String, Value> =
        (0..5000).map(|i| (format!("f{i}"), json!(i))).collect();
    let summary = b
        .bulk(Some("t"), &bulk_body(&[("wide", Value::Object(wide))]))
        .await
        .unwrap();
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    assert_eq!(
        ids(&b, "t", json!({"term": {"f4999": 4999}})).await,
        ["wide"]
    );
}
