//! Every expected DSL of `../shared/data/dsl_examples.json` (the worked examples of OpenSearch's
//! QueryPlanningTool prompt) run on the embedded backend, over documents made for its mapping: the
//! supported ones return the documents a person would expect; the unsupported ones (nested, neural)
//! fail with an error naming the clause and where it is.

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{Duration, Utc};
use serde_json::{Value, json};
use toolplan_search::{EmbeddedBackend, SearchBackend};

use crate::fixtures::{read_json, shared_data};

fn examples() -> Vec<Value> {
    let all = read_json(&shared_data("dsl_examples.json"));
    all["examples"].as_array().unwrap().clone()
}

/// Documents for example `i` (id → source), and what its DSL should give.
enum Expect {
    /// These ids, in any order.
    Ids(&'static [&'static str]),
    /// These ids, in this order.
    Ordered(&'static [&'static str]),
    /// This aggregation (name → [(key, doc_count)]), in order.
    Buckets(&'static str, &'static [(&'static str, u64)]),
    /// An error with this text.
    Error(&'static str),
}

fn case(i: usize) -> (Vec<(&'static str, Value)>, Expect) {
    let days_ago = |d: i64| (Utc::now() - Duration::days(d)).to_rfc3339();
    match i {
        0 => (
            vec![
                (
                    "a",
                    json!({"price": 60, "created_at": days_ago(5), "color": "red"}),
                ),
                ("b", json!({"price": 40, "created_at": days_ago(5)})),
                ("c", json!({"price": 80, "created_at": days_ago(60)})),
            ],
            Expect::Ids(&["a"]),
        ),
        1 => (
            vec![
                ("a", json!({"city": "London", "status": "active"})),
                ("b", json!({"city": "Londn", "status": "active"})),
                ("c", json!({"city": "London", "status": "inactive"})),
                ("d", json!({"city": "Paris", "status": "active"})),
            ],
            Expect::Ids(&["a", "b"]),
        ),
        2 => (
            vec![
                ("a", json!({"city": "New York City", "department": "sales"})),
                ("b", json!({"city": "York New City"})),
                ("c", json!({"city": "New York"})),
            ],
            Expect::Ids(&["a"]),
        ),
        3 => (
            vec![
                (
                    "a",
                    json!({"title": "Data engineering basics", "type": "blog"}),
                ),
                (
                    "b",
                    json!({"summary": "Notes about data enginering at scale", "type": "research paper"}),
                ),
                ("c", json!({"title": "Data engineering", "type": "news"})),
                ("d", json!({"title": "Cooking", "type": "blog"})),
            ],
            Expect::Ids(&["a", "b"]),
        ),
        4 => (
            vec![
                (
                    "a",
                    json!({"email": "sam@example.com", "phone": "555-1234"}),
                ),
                ("b", json!({"email": "samantha@example.com"})),
                (
                    "c",
                    json!({"email": "tom@example.com", "phone": "555-9876"}),
                ),
            ],
            Expect::Ids(&["a"]),
        ),
        5 => (
            vec![(
                "a",
                json!({"author": {"first_name": "John", "last_name": "Doe"}, "title": "x"}),
            )],
            Expect::Error(
                "query.nested: the nested clause is not supported by the embedded backend",
            ),
        ),
        6 => (
            vec![
                ("a", json!({"status": "shipped", "order_id": "1"})),
                ("b", json!({"status": "shipped", "order_id": "2"})),
                ("c", json!({"status": "pending", "order_id": "3"})),
            ],
            Expect::Buckets("orders_by_status", &[("shipped", 2), ("pending", 1)]),
        ),
        7 => (
            vec![
                (
                    "a",
                    json!({"category": "electronics", "rating": 4.5, "reviews_count": 10}),
                ),
                (
                    "b",
                    json!({"category": "electronics", "rating": 4.5, "reviews_count": 20}),
                ),
                (
                    "c",
                    json!({"category": "electronics", "rating": 3.0, "reviews_count": 100}),
                ),
                (
                    "d",
                    json!({"category": "books", "rating": 5.0, "reviews_count": 1}),
                ),
            ],
            Expect::Ordered(&["b", "a", "c"]),
        ),
        8 => (
            vec![
                ("a", json!({"category": "A", "sales": 10.0})),
                ("b", json!({"category": "A", "sales": 5.0})),
                ("c", json!({"category": "B", "sales": 30.0})),
                ("d", json!({"category": "C", "sales": 1.0})),
                ("e", json!({"category": "D", "sales": 2.0})),
            ],
            Expect::Buckets("top_categories", &[("B", 1), ("A", 2), ("D", 1)]),
        ),
        9 => (
            vec![
                (
                    "a",
                    json!({"product_category": "medicines", "country": "Vietnam", "ship_status": "shipped"}),
                ),
                (
                    "b",
                    json!({"product_category": "medicines", "country": "Vietnam", "ship_status": "pending"}),
                ),
                (
                    "c",
                    json!({"product_category": "food", "country": "Vietnam", "ship_status": "shipped"}),
                ),
            ],
            Expect::Ids(&["a"]),
        ),
        10 => (
            vec![
                ("a", json!({"name": "x"})),
                ("b", json!({"name": "y", "color": "red"})),
                ("c", json!({})),
            ],
            Expect::Ids(&["a", "b", "c"]),
        ),
        11 => (
            vec![
                (
                    "a",
                    json!({"content": "Why LLM hallucinations happen", "tags": ["ai"], "content_vector": [0.1, 0.2]}),
                ),
                ("b", json!({"content": "Cooking pasta"})),
            ],
            Expect::Ids(&["a"]),
        ),
        12 => (
            vec![("a", json!({"content": "x"}))],
            Expect::Error(
                "query.neural: the neural clause is not supported by the embedded backend",
            ),
        ),
        13 => (
            vec![(
                "a",
                json!({"title": "Sony WH-1000", "brand": "Sony", "price": 150}),
            )],
            Expect::Error(
                "query.bool.must[0].neural: the neural clause is not supported by the embedded backend",
            ),
        ),
        _ => unreachable!("dsl_examples.json has 14 examples"),
    }
}

#[tokio::test]
async fn every_example_runs_or_fails_clearly() {
    let examples = examples();
    assert_eq!(examples.len(), 14);
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(EmbeddedBackend::open(dir.path()).unwrap());
    for (i, example) in examples.iter().enumerate() {
        let name = format!("example-{i}");
        let question = example["question"].as_str().unwrap();
        backend
            .create_index(&name, &example["mapping"])
            .await
            .unwrap();
        let (docs, expect) = case(i);
        let mut body = String::new();
        for (id, doc) in &docs {
            body.push_str(&format!("{}\n{doc}\n", json!({"index": {"_id": id}})));
        }
        let loaded = backend.bulk(Some(&name), &body).await.unwrap();
        assert!(loaded.errors.is_empty(), "example {i}: {:?}", loaded.errors);
        let result = backend.search(&name, &example["expected_dsl"]).await;
        match expect {
            Expect::Error(text) => {
                let err = result.expect_err(question);
                assert_eq!(err.to_string(), text, "example {i}: {question}");
            }
            Expect::Ids(ids) => {
                let r = result.unwrap_or_else(|e| panic!("example {i} ({question}): {e}"));
                let got: BTreeSet<String> = r["hits"]["hits"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| h["_id"].as_str().unwrap().to_owned())
                    .collect();
                let want: BTreeSet<String> = ids.iter().map(|s| s.to_string()).collect();
                assert_eq!(got, want, "example {i}: {question}");
                assert_eq!(r["hits"]["total"]["value"], ids.len(), "example {i}");
            }
            Expect::Ordered(ids) => {
                let r = result.unwrap_or_else(|e| panic!("example {i} ({question}): {e}"));
                let got: Vec<&str> = r["hits"]["hits"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| h["_id"].as_str().unwrap())
                    .collect();
                assert_eq!(got, ids, "example {i}: {question}");
            }
            Expect::Buckets(agg, want) => {
                let r = result.unwrap_or_else(|e| panic!("example {i} ({question}): {e}"));
                assert_eq!(r["hits"]["hits"], json!([]), "size 0");
                let got: Vec<(String, u64)> = r["aggregations"][agg]["buckets"]
                    .as_array()
                    .unwrap_or_else(|| panic!("example {i}: {r}"))
                    .iter()
                    .map(|b| {
                        (
                            b["key"].as_str().unwrap().to_owned(),
                            b["doc_count"].as_u64().unwrap(),
                        )
                    })
                    .collect();
                let want: Vec<(String, u64)> =
                    want.iter().map(|(k, n)| (k.to_string(), *n)).collect();
                assert_eq!(got, want, "example {i}: {question}");
            }
        }
    }
}
