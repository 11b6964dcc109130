//! Issue 25: documents keep a version and a sequence number (internal and external versioning,
//! `if_seq_no`), searches show them when asked (`version`, `seq_no_primary_term`), and `collapse`
//! gives one hit per group with each group's `inner_hits`, on one index and across several.

use serde_json::{Value, json};
use toolplan_search::{EmbeddedBackend, SearchBackend};

fn line(action: Value, doc: Option<Value>) -> String {
    match doc {
        Some(d) => format!("{action}\n{d}\n"),
        None => format!("{action}\n"),
    }
}

async fn write(
    b: &EmbeddedBackend,
    action: Value,
    doc: Option<Value>,
) -> Result<(u64, String), String> {
    let summary = b
        .bulk(Some("docs"), &line(action, doc))
        .await
        .map_err(|e| e.to_string())?;
    match (summary.items.first(), summary.errors.first()) {
        (Some(item), _) => Ok((item.version, item.result.as_str().to_owned())),
        (None, Some(e)) => Err(e.clone()),
        (None, None) => Err("nothing happened".into()),
    }
}

#[tokio::test]
async fn versions_count_writes_and_external_versions_must_grow() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    let doc = Some(json!({"n": 1}));
    assert_eq!(
        write(&b, json!({"index": {"_id": "a"}}), doc.clone()).await,
        Ok((1, "created".into()))
    );
    assert_eq!(
        write(&b, json!({"index": {"_id": "a"}}), doc.clone()).await,
        Ok((2, "updated".into()))
    );
    // Within one load too: the second write sees the first before it is committed.
    let two = format!(
        "{}{}",
        line(json!({"index": {"_id": "b"}}), doc.clone()),
        line(json!({"index": {"_id": "b"}}), doc.clone())
    );
    let summary = b.bulk(Some("docs"), &two).await.unwrap();
    let versions: Vec<u64> = summary.items.iter().map(|i| i.version).collect();
    assert_eq!(versions, [1, 2]);
    // External: the given version, only when higher than the stored one.
    let external =
        |v: u64| json!({"index": {"_id": "a", "version": v, "version_type": "external"}});
    assert_eq!(
        write(&b, external(10), doc.clone()).await,
        Ok((10, "updated".into()))
    );
    let conflict = write(&b, external(10), doc.clone()).await.unwrap_err();
    assert!(
        conflict.contains(
            "version conflict, current version [10] is higher or equal to the one provided [10]"
        ),
        "{conflict}"
    );
    let gte = json!({"index": {"_id": "a", "version": 10, "version_type": "external_gte"}});
    assert_eq!(
        write(&b, gte, doc.clone()).await,
        Ok((10, "updated".into()))
    );
    // A create of an id that exists fails, naming its version.
    let exists = write(&b, json!({"create": {"_id": "a"}}), doc.clone())
        .await
        .unwrap_err();
    assert!(
        exists.contains("document already exists (current version [10])"),
        "{exists}"
    );
    // Deleted in one load, then made again: version 1.
    let again = format!(
        "{}{}",
        line(json!({"delete": {"_id": "a"}}), None),
        line(json!({"create": {"_id": "a"}}), doc.clone())
    );
    let summary = b.bulk(Some("docs"), &again).await.unwrap();
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    assert_eq!(
        summary.items[0].result,
        toolplan_search::BulkResult::Deleted
    );
    assert_eq!(summary.items[1].version, 1);

    // Searches show versions and sequence numbers when asked, and only then.
    let r = b
        .search(
            "docs",
            &json!({"query": {"ids": {"values": ["a"]}}, "version": true, "seq_no_primary_term": true}),
        )
        .await
        .unwrap();
    let hit = &r["hits"]["hits"][0];
    assert_eq!(hit["_version"], 1);
    assert_eq!(hit["_primary_term"], 1);
    let seq_no = hit["_seq_no"].as_u64().unwrap();
    assert_eq!(seq_no, summary.items[1].seq_no);
    let plain = b.search("docs", &json!({})).await.unwrap();
    assert!(plain["hits"]["hits"][0].get("_version").is_none());

    // Optimistic concurrency control on the sequence number.
    let stale = json!({"index": {"_id": "a", "if_seq_no": seq_no + 100, "if_primary_term": 1}});
    let err = write(&b, stale, doc.clone()).await.unwrap_err();
    assert!(err.contains("required seqNo"), "{err}");
    let fresh = json!({"index": {"_id": "a", "if_seq_no": seq_no, "if_primary_term": 1}});
    assert_eq!(
        write(&b, fresh, doc.clone()).await,
        Ok((2, "updated".into()))
    );

    // Versions and sequence numbers survive a rebuild under a grown mapping, and reopening.
    write(
        &b,
        json!({"index": {"_id": "c"}}),
        Some(json!({"new_field": "x"})),
    )
    .await
    .unwrap();
    drop(b);
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    let r = b
        .search(
            "docs",
            &json!({"query": {"ids": {"values": ["a"]}}, "version": true}),
        )
        .await
        .unwrap();
    assert_eq!(r["hits"]["hits"][0]["_version"], 2);
    let next = write(&b, json!({"index": {"_id": "d"}}), doc.clone()).await;
    assert_eq!(next, Ok((1, "created".into())));
    let r = b
        .search(
            "docs",
            &json!({"query": {"ids": {"values": ["d"]}}, "seq_no_primary_term": true}),
        )
        .await
        .unwrap();
    assert!(
        r["hits"]["hits"][0]["_seq_no"].as_u64().unwrap() > seq_no + 1,
        "sequence numbers go on after reopening: {r}"
    );
}

#[tokio::test]
async fn bad_versioning_is_refused_in_opensearch_words() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    for (meta, message) in [
        (
            json!({"_id": "a", "version": 3}),
            "internal versioning can not be used",
        ),
        (
            json!({"_id": "a", "version_type": "external"}),
            "needs a version",
        ),
        (
            json!({"_id": "a", "pipeline": "p"}),
            "unknown parameter [pipeline]",
        ),
    ] {
        let err = b
            .bulk(Some("docs"), &line(json!({"index": meta}), Some(json!({}))))
            .await
            .unwrap_err();
        assert!(err.to_string().contains(message), "{err}");
    }
}

async fn groups() -> (tempfile::TempDir, EmbeddedBackend) {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    b.create_index(
        "g1",
        &json!({"mappings": {"properties": {"group": {"type": "integer"}, "tag": {"type": "keyword"},
                                            "rank": {"type": "integer"}, "text": {"type": "text"}}}}),
    )
    .await
    .unwrap();
    let docs = [
        ("1", 1, "A", 10),
        ("2", 1, "B", 6),
        ("3", 1, "A", 24),
        ("4", 25, "B", 10),
        ("5", 25, "A", 5),
        ("6", 3, "B", 36),
    ];
    let body: String = docs
        .iter()
        .map(|(id, g, t, r)| {
            line(
                json!({"index": {"_id": id}}),
                Some(json!({"group": g, "tag": t, "rank": r})),
            )
        })
        .collect();
    let s = b.bulk(Some("g1"), &body).await.unwrap();
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    (dir, b)
}

use crate::fixtures::ids_of as hit_ids;

#[tokio::test]
async fn collapse_keeps_the_best_hit_of_each_group_with_its_inner_hits() {
    let (_dir, b) = groups().await;
    let r = b
        .search(
            "g1",
            &json!({"collapse": {"field": "group", "inner_hits": {"name": "sub", "size": 2, "sort": [{"rank": "asc"}]}},
                    "sort": [{"rank": "desc"}]}),
        )
        .await
        .unwrap();
    // The total counts documents, not groups.
    assert_eq!(r["hits"]["total"]["value"], 6);
    assert_eq!(hit_ids(&r), ["6", "3", "4"]);
    assert_eq!(r["hits"]["hits"][1]["fields"]["group"], json!([1]));
    assert_eq!(r["hits"]["hits"][1]["sort"], json!([24]));
    let sub = &r["hits"]["hits"][1]["inner_hits"]["sub"]["hits"];
    assert_eq!(sub["total"]["value"], 3);
    assert_eq!(hit_ids(&json!({"hits": sub})), ["2", "1"]);
    // Paging counts groups.
    let page = b
        .search(
            "g1",
            &json!({"from": 2, "collapse": {"field": "group"}, "sort": [{"rank": "desc"}]}),
        )
        .await
        .unwrap();
    assert_eq!(hit_ids(&page), ["4"]);
    // On a keyword, by score (a match on every document ties; each group still comes once).
    let tags = b
        .search("g1", &json!({"collapse": {"field": "tag"}}))
        .await
        .unwrap();
    assert_eq!(tags["hits"]["hits"].as_array().unwrap().len(), 2);
    assert!(tags["hits"]["hits"][0]["_score"].is_number());
    assert!(tags["hits"]["hits"][0].get("sort").is_none());
    // A second level: inner hits collapsed again.
    let two = b
        .search(
            "g1",
            &json!({"collapse": {"field": "group", "inner_hits": {"name": "by_tag", "collapse": {"field": "tag"}}},
                    "sort": [{"rank": "desc"}]}),
        )
        .await
        .unwrap();
    let by_tag = &two["hits"]["hits"][1]["inner_hits"]["by_tag"]["hits"]["hits"];
    assert_eq!(by_tag.as_array().unwrap().len(), 2, "{two}");
}

#[tokio::test]
async fn collapse_refuses_fields_it_cannot_group_by() {
    let (_dir, b) = groups().await;
    for (collapse, message) in [
        (
            json!({"field": "nope"}),
            "no mapping found for `nope` in order to collapse on",
        ),
        (
            json!({"field": "text"}),
            "only keywords and numbers are accepted",
        ),
    ] {
        let err = b
            .search("g1", &json!({"collapse": collapse}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains(message), "{err}");
    }
    // A document with two values in the collapse field.
    b.bulk(
        Some("g1"),
        &line(
            json!({"index": {"_id": "7"}}),
            Some(json!({"group": [1, 2]})),
        ),
    )
    .await
    .unwrap();
    let err = b
        .search("g1", &json!({"collapse": {"field": "group"}}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("must be single valued"), "{err}");
}

#[tokio::test]
async fn collapse_across_indices_groups_once_and_counts_inner_hits_everywhere() {
    let (_dir, b) = groups().await;
    b.create_index(
        "g2",
        &json!({"mappings": {"properties": {"group": {"type": "integer"}, "rank": {"type": "integer"}}}}),
    )
    .await
    .unwrap();
    let body: String = [("a", 1, 7), ("b", 25, 100)]
        .iter()
        .map(|(id, g, r)| {
            line(
                json!({"index": {"_id": id}}),
                Some(json!({"group": g, "rank": r})),
            )
        })
        .collect();
    b.bulk(Some("g2"), &body).await.unwrap();
    let r = b
        .search(
            "g1,g2",
            &json!({"collapse": {"field": "group", "inner_hits": {"name": "all"}}, "sort": [{"rank": "desc"}]}),
        )
        .await
        .unwrap();
    assert_eq!(r["hits"]["total"]["value"], 8);
    assert_eq!(hit_ids(&r), ["b", "6", "3"]);
    let totals: Vec<Value> = r["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["inner_hits"]["all"]["hits"]["total"]["value"].clone())
        .collect();
    assert_eq!(totals, [json!(3), json!(1), json!(4)]);
}
