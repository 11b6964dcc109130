//! Aggregations the embedded backend runs beyond tantivy's own engine: calendar `date_histogram`
//! (week, month, quarter, year) and `top_hits`, on the evaluation set's tickets index (60 tickets,
//! January to June 2025). Expected figures were counted from `bench/dsl_eval/tickets.ndjson`.

use serde_json::{Value, json};
use toolplan_search::{EmbeddedBackend, SearchBackend, SearchError};

use crate::fixtures::{eval_set, read_json};

async fn tickets() -> (tempfile::TempDir, EmbeddedBackend) {
    let dir = tempfile::tempdir().unwrap();
    let backend = EmbeddedBackend::open(dir.path()).unwrap();
    let mapping = read_json(&eval_set("tickets-mapping.json"));
    backend.create_index("tickets", &mapping).await.unwrap();
    let data = std::fs::read_to_string(eval_set("tickets.ndjson")).unwrap();
    assert_eq!(backend.bulk(None, &data).await.unwrap().indexed, 60);
    (dir, backend)
}

fn keys_and_counts(buckets: &Value) -> Vec<(String, u64)> {
    buckets
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["key_as_string"].as_str().unwrap().to_owned(),
                b["doc_count"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn ids(hits: &Value) -> Vec<&str> {
    hits["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_id"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn calendar_months_quarters_years_and_weeks() {
    let (_dir, b) = tickets().await;
    let per = |interval: &str| json!({"size": 0, "aggs": {"t": {"date_histogram": {"field": "created_at", "calendar_interval": interval}}}});
    let r = b.search("tickets", &per("month")).await.unwrap();
    let months = keys_and_counts(&r["aggregations"]["t"]["buckets"]);
    let expected: Vec<(String, u64)> = (1..=6)
        .map(|m| (format!("2025-{m:02}-01T00:00:00.000Z"), 10))
        .collect();
    assert_eq!(months, expected);
    assert_eq!(
        r["aggregations"]["t"]["buckets"][1]["key"],
        json!(1_738_368_000_000_i64)
    );

    let r = b.search("tickets", &per("1q")).await.unwrap();
    assert_eq!(
        keys_and_counts(&r["aggregations"]["t"]["buckets"]),
        [
            ("2025-01-01T00:00:00.000Z".to_owned(), 30),
            ("2025-04-01T00:00:00.000Z".to_owned(), 30)
        ]
    );
    let r = b.search("tickets", &per("year")).await.unwrap();
    assert_eq!(
        keys_and_counts(&r["aggregations"]["t"]["buckets"]),
        [("2025-01-01T00:00:00.000Z".to_owned(), 60)]
    );

    // Weeks start on Monday: 2025-01-01 is a Wednesday, so the first week is 2024-12-30's.
    let r = b.search("tickets", &per("week")).await.unwrap();
    let weeks = r["aggregations"]["t"]["buckets"].as_array().unwrap();
    assert_eq!(weeks[0]["key_as_string"], "2024-12-30T00:00:00.000Z");
    assert_eq!(weeks.len(), 26);
    assert!(
        weeks.windows(2).all(
            |w| w[1]["key"].as_i64().unwrap() - w[0]["key"].as_i64().unwrap() == 7 * 86_400_000
        )
    );
    assert_eq!(
        weeks
            .iter()
            .map(|w| w["doc_count"].as_u64().unwrap())
            .sum::<u64>(),
        60
    );
}

#[tokio::test]
async fn calendar_buckets_inside_terms_keep_inner_gaps_and_their_sub_aggregations() {
    let (_dir, b) = tickets().await;
    let r = b
        .search(
            "tickets",
            &json!({"size": 0, "query": {"term": {"category": "billing"}},
                    "aggs": {"c": {"terms": {"field": "category"},
                        "aggs": {"m": {"date_histogram": {"field": "created_at", "calendar_interval": "month"},
                            "aggs": {"slowest": {"max": {"field": "response_minutes"}}}}}}}}),
        )
        .await
        .unwrap();
    let months = &r["aggregations"]["c"]["buckets"][0]["m"]["buckets"];
    // Billing tickets fall in January, March and May: February and April are empty buckets
    // between them, June (after the last) is not there.
    assert_eq!(
        keys_and_counts(months)
            .into_iter()
            .map(|(k, n)| (k[..7].to_owned(), n))
            .collect::<Vec<_>>(),
        [
            ("2025-01".to_owned(), 5),
            ("2025-02".to_owned(), 0),
            ("2025-03".to_owned(), 5),
            ("2025-04".to_owned(), 0),
            ("2025-05".to_owned(), 5)
        ]
    );
    assert_eq!(months[2]["slowest"]["value"], 237.0);

    let r = b
        .search(
            "tickets",
            &json!({"size": 0, "query": {"term": {"category": "billing"}},
                    "aggs": {"m": {"date_histogram": {"field": "created_at", "calendar_interval": "month", "min_doc_count": 1}}}}),
        )
        .await
        .unwrap();
    assert_eq!(
        r["aggregations"]["m"]["buckets"].as_array().unwrap().len(),
        3
    );
}

#[tokio::test]
async fn top_hits_per_bucket_and_for_the_whole_query() {
    let (_dir, b) = tickets().await;
    let r = b
        .search(
            "tickets",
            &json!({"size": 0, "aggs": {"c": {"terms": {"field": "category"},
                "aggs": {"slowest": {"top_hits": {"size": 2, "sort": [{"response_minutes": "desc"}],
                                                  "_source": ["subject", "response_minutes"]}}}}}}),
        )
        .await
        .unwrap();
    let mut seen = Vec::new();
    for bucket in r["aggregations"]["c"]["buckets"].as_array().unwrap() {
        let top = &bucket["slowest"];
        assert_eq!(top["hits"]["total"]["value"], 15);
        seen.push((bucket["key"].as_str().unwrap().to_owned(), ids(top)));
        let source = &top["hits"]["hits"][0]["_source"];
        assert!(source.get("subject").is_some() && source.get("category").is_none());
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            ("billing".to_owned(), vec!["t9", "t17"]),
            ("bug".to_owned(), vec!["t8", "t16"]),
            ("login".to_owned(), vec!["t34", "t42"]),
            ("shipping".to_owned(), vec!["t7", "t15"]),
        ]
    );

    // Per calendar month, and at the top level with the query.
    let r = b
        .search(
            "tickets",
            &json!({"size": 0, "aggs": {
                "m": {"date_histogram": {"field": "created_at", "calendar_interval": "month"},
                      "aggs": {"top": {"top_hits": {"size": 1, "sort": [{"response_minutes": "desc"}]}}}},
                "open": {"top_hits": {"sort": [{"response_minutes": "asc"}]}}},
                "query": {"term": {"status": "open"}}}),
        )
        .await
        .unwrap();
    let open = &r["aggregations"]["open"];
    assert_eq!(open["hits"]["total"]["value"], 12);
    assert_eq!(open["hits"]["hits"].as_array().unwrap().len(), 3);
    for month in r["aggregations"]["m"]["buckets"].as_array().unwrap() {
        let top = &month["top"]["hits"]["hits"][0]["_source"];
        assert_eq!(top["status"], "open");
        assert!(
            top["created_at"]
                .as_str()
                .unwrap()
                .starts_with(&month["key_as_string"].as_str().unwrap()[..7])
        );
    }
    let r = b
        .search(
            "tickets",
            &json!({"size": 0, "aggs": {"m": {"date_histogram": {"field": "created_at", "calendar_interval": "month"},
                "aggs": {"top": {"top_hits": {"size": 1, "sort": [{"response_minutes": "desc"}]}}}}}}),
        )
        .await
        .unwrap();
    let firsts: Vec<&str> = r["aggregations"]["m"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| ids(&m["top"])[0])
        .collect();
    assert_eq!(firsts, ["t25", "t50", "t9", "t34", "t17", "t42"]);
}

#[tokio::test]
async fn what_cannot_run_is_named() {
    let (_dir, b) = tickets().await;
    let err = |body: Value| {
        let b = &b;
        async move { b.search("tickets", &body).await.unwrap_err() }
    };
    let e = err(json!({"aggs": {"m": {"date_histogram": {"field": "created_at", "calendar_interval": "fortnight"}}}})).await;
    assert!(
        e.to_string().starts_with(
            "aggs.m.date_histogram.calendar_interval: unknown calendar_interval 'fortnight'"
        ),
        "{e}"
    );
    let e = err(json!({"aggs": {"t": {"top_hits": {"highlight": {}}}}})).await;
    assert!(
        matches!(e, SearchError::Unsupported { ref path, .. } if path == "aggs.t.top_hits.highlight"),
        "{e}"
    );
    let e = err(
        json!({"aggs": {"t": {"top_hits": {}, "aggs": {"x": {"max": {"field": "satisfaction"}}}}}}),
    )
    .await;
    assert!(
        e.to_string().contains("cannot have sub-aggregations"),
        "{e}"
    );
}

#[tokio::test]
async fn a_field_the_mapping_lacks_aggregates_as_no_values() {
    let (_dir, b) = tickets().await;
    let r = b
        .search(
            "tickets",
            &json!({"size": 0, "aggs": {
                "t": {"terms": {"field": "nope"}},
                "avg": {"avg": {"field": "nope"}},
                "min": {"min": {"field": "nope"}},
                "sum": {"sum": {"field": "nope"}},
                "count": {"value_count": {"field": "nope"}},
                "card": {"cardinality": {"field": "nope"}},
                "stats": {"stats": {"field": "nope"}},
                "pct": {"percentiles": {"field": "nope", "percents": [50]}},
                "h": {"histogram": {"field": "nope", "interval": 5}},
                "d": {"date_histogram": {"field": "nope", "calendar_interval": "month"}},
                "r": {"range": {"field": "nope", "ranges": [{"to": 5}]}},
                "with_missing": {"avg": {"field": "nope", "missing": 3}}
            }}),
        )
        .await
        .unwrap();
    let a = &r["aggregations"];
    assert_eq!(a["t"]["buckets"], json!([]));
    assert_eq!(a["avg"]["value"], Value::Null);
    assert_eq!(a["min"]["value"], Value::Null);
    assert_eq!(a["sum"]["value"], 0.0);
    assert_eq!(a["count"]["value"], json!(0));
    assert_eq!(a["card"]["value"], json!(0));
    assert_eq!(a["stats"]["count"], 0);
    assert_eq!(a["h"]["buckets"], json!([]));
    assert_eq!(a["d"]["buckets"], json!([]));
    assert_eq!(a["r"]["buckets"][0]["doc_count"], 0);
    assert_eq!(a["with_missing"]["value"], 3.0);
}

/// Checks that the tickets index refuses aggregation `agg` with an error saying `message`.
async fn assert_refused(b: &EmbeddedBackend, agg: Value, message: &str) {
    assert_aggs_refused(b, "tickets", json!({"a": agg}), message).await;
}

/// Checks that `index` refuses the aggregations `aggs` with an error saying `message`.
async fn assert_aggs_refused(b: &EmbeddedBackend, index: &str, aggs: Value, message: &str) {
    let err = b
        .search(index, &json!({"size": 0, "aggs": aggs}))
        .await
        .unwrap_err();
    assert!(err.to_string().contains(message), "{aggs}: {err}");
}

/// The number of tickets a query selects.
async fn count(b: &EmbeddedBackend, query: Value) -> u64 {
    let r = b
        .search("tickets", &json!({"size": 0, "query": query}))
        .await
        .unwrap();
    r["hits"]["total"]["value"].as_u64().unwrap()
}

#[tokio::test]
async fn filter_filters_and_missing_count_what_their_queries_select() {
    let (_dir, b) = tickets().await;
    let high = json!({"term": {"priority": "high"}});
    let billing = json!({"term": {"category": "billing"}});
    let r = b
        .search(
            "tickets",
            &json!({"size": 0, "query": {"term": {"status": "closed"}}, "aggs": {
                "high": {"filter": high, "aggs": {"minutes": {"avg": {"field": "response_minutes"}}}},
                "named": {"filters": {"filters": {"high": high, "billing": billing}, "other_bucket_key": "rest"}},
                "listed": {"filters": {"filters": [high, billing]}},
                "unrated": {"missing": {"field": "satisfaction"}}}}),
        )
        .await
        .unwrap();
    let open = json!({"term": {"status": "closed"}});
    let both = |q: &Value| json!({"bool": {"filter": [open, q]}});
    let aggs = &r["aggregations"];
    let open_high = count(&b, both(&high)).await;
    assert!(open_high > 0, "the test needs closed high tickets");
    assert_eq!(aggs["high"]["doc_count"], open_high);
    // The sub-aggregation runs on the bucket's documents.
    let avg = b
        .search(
            "tickets",
            &json!({"size": 0, "query": both(&high), "aggs": {"m": {"avg": {"field": "response_minutes"}}}}),
        )
        .await
        .unwrap();
    assert_eq!(
        aggs["high"]["minutes"]["value"],
        avg["aggregations"]["m"]["value"]
    );
    assert_eq!(aggs["named"]["buckets"]["high"]["doc_count"], open_high);
    let open_billing = count(&b, both(&billing)).await;
    assert_eq!(
        aggs["named"]["buckets"]["billing"]["doc_count"],
        open_billing
    );
    let neither = json!({"bool": {"filter": [open], "must_not": [high, billing]}});
    assert_eq!(
        aggs["named"]["buckets"]["rest"]["doc_count"],
        count(&b, neither).await
    );
    assert_eq!(aggs["listed"]["buckets"][0]["doc_count"], open_high);
    assert_eq!(aggs["listed"]["buckets"][1]["doc_count"], open_billing);
    let unrated =
        json!({"bool": {"filter": [open], "must_not": {"exists": {"field": "satisfaction"}}}});
    assert_eq!(aggs["unrated"]["doc_count"], count(&b, unrated).await);

    // Inside terms buckets: each bucket's own documents.
    let r = b
        .search(
            "tickets",
            &json!({"size": 0, "aggs": {"s": {"terms": {"field": "status"}, "aggs": {"high": {"filter": high}}}}}),
        )
        .await
        .unwrap();
    for bucket in r["aggregations"]["s"]["buckets"].as_array().unwrap() {
        let status = json!({"term": {"status": bucket["key"].clone()}});
        let expected = count(&b, json!({"bool": {"filter": [status, high]}})).await;
        assert_eq!(bucket["high"]["doc_count"], expected, "{bucket}");
    }
}

#[tokio::test]
async fn malformed_filter_aggregations_are_refused_by_name() {
    let (_dir, b) = tickets().await;
    for (agg, message) in [
        (json!({"filter": {}}), "takes one query"),
        (
            json!({"filters": {"other_bucket": true}}),
            "needs [filters]",
        ),
        (json!({"filters": {"filters": {}, "bogus": 1}}), "[bogus]"),
        (json!({"missing": {}}), "needs a field"),
        (
            json!({"missing": {"field": "x", "size": 2}}),
            "unknown option [size]",
        ),
    ] {
        assert_refused(&b, agg, message).await;
    }
}

#[tokio::test]
async fn multi_terms_counts_each_combination_and_its_top_hits() {
    let (_dir, b) = tickets().await;
    let r = b
        .search(
            "tickets",
            &json!({"size": 0, "aggs": {"m": {"multi_terms": {"terms": [{"field": "status"}, {"field": "response_minutes"}], "size": 3},
                                              "aggs": {"first": {"top_hits": {"size": 1, "_source": ["status", "response_minutes"]}}}}}}),
        )
        .await
        .unwrap();
    let buckets = r["aggregations"]["m"]["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 3);
    let mut last = u64::MAX;
    for bucket in buckets {
        let key = bucket["key"].as_array().unwrap();
        let (status, minutes) = (key[0].clone(), key[1].clone());
        assert_eq!(
            bucket["key_as_string"],
            format!("{}|{}", status.as_str().unwrap(), minutes)
        );
        let n = bucket["doc_count"].as_u64().unwrap();
        assert!(n <= last, "by count, descending");
        last = n;
        let both = json!({"bool": {"filter": [{"term": {"status": status}}, {"term": {"response_minutes": minutes}}]}});
        assert_eq!(n, count(&b, both).await, "{bucket}");
        let top = &bucket["first"]["hits"]["hits"][0]["_source"];
        assert_eq!(
            (&top["status"], &top["response_minutes"]),
            (&status, &minutes)
        );
    }
    for (agg, message) in [
        (
            json!({"multi_terms": {"terms": [{"field": "status"}]}}),
            "at least 2",
        ),
        (
            json!({"multi_terms": {"terms": [{"field": "status"}, {"field": "subject"}]}}),
            "text field 'subject'",
        ),
        (
            json!({"multi_terms": {"terms": [{"field": "status"}, {"field": "agent"}], "min_doc_count": 0},
                   "aggs": {"slowest": {"max": {"field": "response_minutes"}}}}),
            "multi_terms with min_doc_count 0 and sub-aggregations",
        ),
        (
            json!({"multi_terms": {"terms": [{"field": "status"}, {"field": "agent"}], "collect_mode": "breadth_first"}}),
            "multi_terms option collect_mode",
        ),
    ] {
        assert_refused(&b, agg, message).await;
    }
}

/// A fresh backend with index `name` created with `mapping`.
async fn new_index(name: &str, mapping: Value) -> (tempfile::TempDir, EmbeddedBackend) {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    b.create_index(name, &mapping).await.unwrap();
    (dir, b)
}

#[tokio::test]
async fn a_field_of_a_type_the_engine_does_not_index_is_refused_not_answered_empty() {
    let (_dir, b) = new_index(
        "hosts",
        json!({"mappings": {"properties": {"ports": {"type": "integer_range"}, "name": {"type": "keyword"}}}}),
    )
    .await;
    b.bulk(
        Some("hosts"),
        "{\"index\": {}}\n{\"ports\": {\"gte\": 80, \"lte\": 90}, \"name\": \"a\"}\n",
    )
    .await
    .unwrap();
    for body in [
        json!({"size": 0, "aggs": {"a": {"terms": {"field": "ports"}}}}),
        json!({"size": 0, "aggs": {"a": {"multi_terms": {"terms": [{"field": "name"}, {"field": "ports"}]}}}}),
        json!({"sort": [{"ports": {"order": "asc", "unmapped_type": "keyword"}}]}),
        json!({"collapse": {"field": "ports"}}),
    ] {
        let err = b.search("hosts", &body).await.unwrap_err();
        assert!(
            err.to_string().contains(
                "field 'ports' is of type integer_range, which the embedded backend does not index"
            ),
            "{body}: {err}"
        );
    }
}

/// Index `hosts`: addresses in an `ip` field, IPv4 and IPv6, one document without one.
async fn hosts() -> (tempfile::TempDir, EmbeddedBackend) {
    let (dir, b) = new_index(
        "hosts",
        json!({"mappings": {"properties": {"addr": {"type": "ip"}, "name": {"type": "keyword"}}}}),
    )
    .await;
    let docs = [
        ("a", json!("10.0.0.1")),
        ("b", json!("10.0.0.7")),
        ("c", json!("10.0.0.7")),
        ("d", json!("192.168.1.1")),
        ("e", json!("0:0:0:0:0:0:0:1")),
        ("f", Value::Null),
    ];
    let mut nd = String::new();
    for (name, addr) in docs {
        nd.push_str(&format!(
            "{{\"index\": {{\"_id\": \"{name}\"}}}}\n{}\n",
            json!({"name": name, "addr": addr})
        ));
    }
    assert_eq!(b.bulk(Some("hosts"), &nd).await.unwrap().indexed, 6);
    (dir, b)
}

async fn host_ids(b: &EmbeddedBackend, query: Value) -> Vec<String> {
    let r = b
        .search(
            "hosts",
            &json!({"query": query, "sort": [{"name": "asc"}], "size": 10}),
        )
        .await
        .unwrap();
    ids(&r).into_iter().map(str::to_owned).collect()
}

#[tokio::test]
async fn ip_addresses_are_searched_by_address_block_and_range() {
    let (_dir, b) = hosts().await;
    let q = |query: Value| host_ids(&b, query);
    assert_eq!(q(json!({"term": {"addr": "10.0.0.7"}})).await, ["b", "c"]);
    // Any spelling of the address; IPv4 inside IPv6 space.
    assert_eq!(q(json!({"term": {"addr": "::1"}})).await, ["e"]);
    assert_eq!(q(json!({"term": {"addr": "::ffff:10.0.0.1"}})).await, ["a"]);
    assert_eq!(
        q(json!({"term": {"addr": "10.0.0.0/8"}})).await,
        ["a", "b", "c"]
    );
    assert_eq!(
        q(json!({"terms": {"addr": ["192.168.0.0/16", "::1"]}})).await,
        ["d", "e"]
    );
    assert_eq!(
        q(json!({"range": {"addr": {"gt": "10.0.0.1", "lte": "192.168.1.1"}}})).await,
        ["b", "c", "d"]
    );
    assert_eq!(
        q(json!({"query_string": {"query": "addr:10.0.0.7 OR name:a"}})).await,
        ["a", "b", "c"]
    );
    assert_eq!(q(json!({"exists": {"field": "addr"}})).await.len(), 5);
    // What is not an address is refused, in a query and in a document.
    let err = b
        .search("hosts", &json!({"query": {"term": {"addr": "10.0.0"}}}))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("'10.0.0' is not an IP string literal"),
        "{err}"
    );
    let summary = b
        .bulk(
            Some("hosts"),
            "{\"index\": {}}\n{\"addr\": \"not-an-ip\"}\n",
        )
        .await
        .unwrap();
    assert_eq!(summary.indexed, 0);
    // Fetched as the index keeps it.
    let r = b
        .search(
            "hosts",
            &json!({"query": {"ids": {"values": ["e"]}}, "docvalue_fields": ["addr"]}),
        )
        .await
        .unwrap();
    assert_eq!(r["hits"]["hits"][0]["fields"]["addr"], json!(["::1"]));
}

#[tokio::test]
async fn ip_addresses_are_counted_by_value_and_by_range() {
    let (_dir, b) = hosts().await;
    let aggs = |aggs: Value| {
        let b = &b;
        async move {
            b.search("hosts", &json!({"size": 0, "aggs": aggs}))
                .await
                .map(|r| r["aggregations"].clone())
        }
    };
    let a = aggs(json!({
        "t": {"terms": {"field": "addr"}},
        "only": {"terms": {"field": "addr", "include": ["10.0.0.1", "::1"]}},
        "but": {"terms": {"field": "addr", "exclude": ["10.0.0.7"], "size": 1}},
        "distinct": {"cardinality": {"field": "addr"}},
        "r": {"ip_range": {"field": "addr", "ranges": [
            {"to": "10.0.0.5"}, {"from": "10.0.0.5", "key": "upper"}, {"mask": "10.0.0.0/8"}]}}
    }))
    .await
    .unwrap();
    let keys = |buckets: &Value| -> Vec<(String, u64)> {
        buckets
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                (
                    b["key"].as_str().unwrap().to_owned(),
                    b["doc_count"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(
        keys(&a["t"]["buckets"]),
        [
            ("10.0.0.7".into(), 2),
            ("::1".into(), 1),
            ("10.0.0.1".into(), 1),
            ("192.168.1.1".into(), 1)
        ]
    );
    assert_eq!(
        keys(&a["only"]["buckets"]),
        [("::1".into(), 1), ("10.0.0.1".into(), 1)]
    );
    // Filtered first, then the size asked for; the rest counted as others.
    assert_eq!(keys(&a["but"]["buckets"]), [("::1".into(), 1)]);
    assert_eq!(a["but"]["sum_other_doc_count"], 2);
    assert_eq!(a["distinct"]["value"], 4);
    let ranges = &a["r"]["buckets"];
    assert_eq!(
        keys(ranges),
        // In the order of their first addresses, as OpenSearch returns them.
        [
            ("*-10.0.0.5".into(), 2),
            ("10.0.0.0/8".into(), 3),
            ("upper".into(), 3)
        ]
    );
    assert_eq!(ranges[0]["to"], "10.0.0.5");
    assert!(ranges[0].get("from").is_none());
    assert_eq!(ranges[1]["from"], "10.0.0.0");
    assert_eq!(ranges[1]["to"], "11.0.0.0");
    // What cannot be asked of addresses is refused in OpenSearch's words.
    for (agg, message) in [
        (
            json!({"avg": {"field": "addr"}}),
            "Field [addr] of type [ip] is not supported for aggregation [avg]",
        ),
        (
            json!({"terms": {"field": "addr", "include": "10.*"}}),
            "cannot support regular expression style include/exclude settings",
        ),
        (
            json!({"ip_range": {"field": "name", "ranges": [{"to": "10.0.0.1"}]}}),
            "Field [name] of type [keyword] is not supported for aggregation [ip_range]",
        ),
        (
            json!({"ip_range": {"field": "addr", "ranges": [{"mask": "10.0.0.0/40"}]}}),
            "'10.0.0.0/40' is not a CIDR mask",
        ),
    ] {
        assert_aggs_refused(&b, "hosts", json!({"a": agg}), message).await;
    }
    let err = b
        .search("hosts", &json!({"sort": [{"addr": "asc"}]}))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("sorting on the ip field 'addr'"),
        "{err}"
    );
}

#[tokio::test]
async fn include_and_exclude_lists_filter_the_terms_of_numbers() {
    let (_dir, b) = tickets().await;
    let all = b
        .search(
            "tickets",
            &json!({"size": 0, "aggs": {"t": {"terms": {"field": "response_minutes", "size": 1000}}}}),
        )
        .await
        .unwrap();
    let all = all["aggregations"]["t"]["buckets"]
        .as_array()
        .unwrap()
        .clone();
    let (first, second) = (all[0]["key"].clone(), all[1]["key"].clone());
    let r = b
        .search(
            "tickets",
            &json!({"size": 0, "aggs": {
                "in": {"terms": {"field": "response_minutes", "include": [first, second.to_string()]}},
                "out": {"terms": {"field": "response_minutes", "exclude": [first], "size": 1}}}}),
        )
        .await
        .unwrap();
    let a = &r["aggregations"];
    // Before, tantivy dropped the column of a number field filtered so: no buckets at all.
    assert_eq!(a["in"]["buckets"], json!([all[0], all[1]]));
    assert_eq!(a["out"]["buckets"], json!([all[1]]));
    let rest: u64 = all[2..]
        .iter()
        .map(|b| b["doc_count"].as_u64().unwrap())
        .sum();
    assert_eq!(a["out"]["sum_other_doc_count"], rest);
}

#[tokio::test]
async fn rare_terms_are_the_terms_with_at_most_max_doc_count_documents_rarest_first() {
    let (_dir, b) = tickets().await;
    let all = b
        .search(
            "tickets",
            &json!({"size": 0, "aggs": {"t": {"terms": {"field": "response_minutes", "size": 1000}}}}),
        )
        .await
        .unwrap();
    for max in [1_u64, 2, 5] {
        let mut expected: Vec<(i64, u64)> = all["aggregations"]["t"]["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| (b["key"].as_i64().unwrap(), b["doc_count"].as_u64().unwrap()))
            .filter(|(_, n)| *n <= max)
            .collect();
        // Rarest first, then by key.
        expected.sort_by_key(|&(key, n)| (n, key));
        let r = b
            .search(
                "tickets",
                &json!({"size": 0, "aggs": {"r": {"rare_terms": {"field": "response_minutes", "max_doc_count": max}}}}),
            )
            .await
            .unwrap();
        let rare: Vec<(i64, u64)> = r["aggregations"]["r"]["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| (b["key"].as_i64().unwrap(), b["doc_count"].as_u64().unwrap()))
            .collect();
        assert_eq!(rare, expected, "max_doc_count {max}");
    }
    for (agg, message) in [
        (
            json!({"rare_terms": {"field": "agent", "max_doc_count": 101}}),
            "smaller than or equal to [100]",
        ),
        (
            json!({"rare_terms": {"field": "agent", "size": 3}}),
            "rare_terms option size",
        ),
    ] {
        assert_refused(&b, agg, message).await;
    }
}

#[tokio::test]
async fn meta_comes_back_with_each_aggregation() {
    let (_dir, b) = tickets().await;
    let r = b
        .search(
            "tickets",
            &json!({"size": 0, "aggs": {"s": {"terms": {"field": "status"}, "meta": {"a": 1},
                                              "aggs": {"m": {"avg": {"field": "response_minutes"}, "meta": {"b": [2]}}}},
                                        "h": {"top_hits": {"size": 1}, "meta": {"c": "x"}}}}),
        )
        .await
        .unwrap();
    let aggs = &r["aggregations"];
    assert_eq!(aggs["s"]["meta"], json!({"a": 1}));
    assert_eq!(aggs["s"]["buckets"][0]["m"]["meta"], json!({"b": [2]}));
    assert_eq!(aggs["h"]["meta"], json!({"c": "x"}));
}

#[tokio::test]
async fn date_range_counts_each_range_in_from_order_with_its_bounds_shown() {
    let (_dir, b) = tickets().await;
    let r = b
        .search(
            "tickets",
            &json!({"size": 0, "aggs": {
                "d": {"date_range": {"field": "created_at", "ranges": [
                    {"from": "2025-04-01"},
                    {"from": "2025-02-01", "to": "2025-04-01", "key": "feb-mar"},
                    {"to": "2025-02-01"}]},
                    "aggs": {"high": {"filter": {"term": {"priority": "high"}}}}},
                "m": {"date_range": {"field": "created_at", "format": "dd/MM/yyyy", "keyed": true,
                    "ranges": [{"from": "01/03/2025", "to": "01/05/2025"}]}}}}),
        )
        .await
        .unwrap();
    let a = &r["aggregations"];
    let range = |from: Option<&str>, to: Option<&str>| {
        let mut bounds = serde_json::Map::new();
        if let Some(f) = from {
            bounds.insert("gte".into(), json!(f));
        }
        if let Some(t) = to {
            bounds.insert("lt".into(), json!(t));
        }
        json!({"range": {"created_at": bounds}})
    };
    let buckets = a["d"]["buckets"].as_array().unwrap();
    let keys: Vec<&str> = buckets.iter().map(|b| b["key"].as_str().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "*-2025-02-01T00:00:00.000Z",
            "feb-mar",
            "2025-04-01T00:00:00.000Z-*"
        ]
    );
    let expected = [
        range(None, Some("2025-02-01")),
        range(Some("2025-02-01"), Some("2025-04-01")),
        range(Some("2025-04-01"), None),
    ];
    let mut total = 0;
    for (bucket, query) in buckets.iter().zip(expected) {
        let n = count(&b, query.clone()).await;
        total += n;
        assert_eq!(bucket["doc_count"], n, "{bucket}");
        let high = count(
            &b,
            json!({"bool": {"filter": [query, {"term": {"priority": "high"}}]}}),
        )
        .await;
        assert_eq!(bucket["high"]["doc_count"], high, "{bucket}");
    }
    assert_eq!(total, 60);
    assert!(buckets[0].get("from").is_none());
    assert_eq!(buckets[1]["from"], 1_738_368_000_000.0);
    assert_eq!(buckets[1]["from_as_string"], "2025-02-01T00:00:00.000Z");
    assert_eq!(buckets[1]["to_as_string"], "2025-04-01T00:00:00.000Z");
    // The request's format reads the bounds and writes them.
    let march_april = &a["m"]["buckets"]["01/03/2025-01/05/2025"];
    assert_eq!(march_april["from_as_string"], "01/03/2025");
    assert_eq!(
        march_april["doc_count"],
        count(&b, range(Some("2025-03-01"), Some("2025-05-01"))).await
    );
    // Not on other fields; unknown options and bounds that are not dates are refused.
    for (agg, message) in [
        (
            json!({"date_range": {"field": "priority", "ranges": [{"to": "2025-01-01"}]}}),
            "Field [priority] of type [keyword] is not supported for aggregation [date_range]",
        ),
        (
            json!({"date_range": {"field": "created_at", "ranges": [{"to": "soon"}]}}),
            "ranges[0].to",
        ),
        (
            json!({"date_range": {"field": "created_at", "interval": "1d", "ranges": []}}),
            "unknown option [interval] of a date_range aggregation",
        ),
        (
            json!({"date_range": {"field": "created_at", "ranges": []}}),
            "No [ranges] specified",
        ),
    ] {
        assert_refused(&b, agg, message).await;
    }
}

#[tokio::test]
async fn date_range_counts_documents_without_a_date_as_the_missing_one() {
    let (_dir, b) = new_index(
        "people",
        json!({"mappings": {"properties": {"born": {"type": "date", "format": "epoch_second"}}}}),
    )
    .await;
    let nd = "{\"index\": {}}\n{\"born\": 10000}\n{\"index\": {}}\n{\"born\": 400000}\n{\"index\": {}}\n{\"name\": \"x\"}\n";
    assert_eq!(b.bulk(Some("people"), nd).await.unwrap().indexed, 3);
    let r = b
        .search(
            "people",
            &json!({"size": 0, "aggs": {"d": {"date_range": {"field": "born", "missing": "0",
                "ranges": [{"key": "late", "from": "200000"}, {"key": "early", "to": "200000"}]}}}}),
        )
        .await
        .unwrap();
    let buckets = &r["aggregations"]["d"]["buckets"];
    assert_eq!(buckets[0]["key"], "early");
    assert_eq!(buckets[0]["doc_count"], 2);
    assert_eq!(buckets[0]["to"], 200_000_000.0);
    assert_eq!(buckets[0]["to_as_string"], "200000");
    assert_eq!(buckets[1]["key"], "late");
    assert_eq!(buckets[1]["doc_count"], 1);
}

#[tokio::test]
async fn pipelines_compute_from_the_buckets_of_other_aggregations() {
    let (_dir, b) = tickets().await;
    let r = b
        .search(
            "tickets",
            &json!({"size": 0, "aggs": {
                "by_category": {"terms": {"field": "category"},
                    "aggs": {"sat": {"avg": {"field": "satisfaction"}},
                             "top2": {"bucket_sort": {"sort": [{"sat": {"order": "desc"}}], "size": 2}}}},
                "all_categories": {"terms": {"field": "category"},
                    "aggs": {"sat": {"avg": {"field": "satisfaction"}}}},
                "avg_sat": {"avg_bucket": {"buckets_path": "all_categories>sat"}},
                "best": {"max_bucket": {"buckets_path": "all_categories.sat"}},
                "worst": {"min_bucket": {"buckets_path": "all_categories>sat"}},
                "tickets": {"sum_bucket": {"buckets_path": "all_categories>_count"}},
                "stats": {"stats_bucket": {"buckets_path": "all_categories>sat"}},
                "monthly": {"date_histogram": {"field": "created_at", "calendar_interval": "month"},
                    "aggs": {"refunds": {"sum": {"field": "refund_amount"}},
                             "so_far": {"cumulative_sum": {"buckets_path": "refunds"}},
                             "change": {"derivative": {"buckets_path": "_count"}},
                             "change2": {"derivative": {"buckets_path": "change"}}}}}}),
        )
        .await
        .unwrap();
    let a = &r["aggregations"];
    let categories = a["all_categories"]["buckets"].as_array().unwrap();
    let sats: Vec<f64> = categories
        .iter()
        .map(|c| c["sat"]["value"].as_f64().unwrap())
        .collect();
    let mean = sats.iter().sum::<f64>() / sats.len() as f64;
    assert!(
        (a["avg_sat"]["value"].as_f64().unwrap() - mean).abs() < 1e-9,
        "{}",
        a["avg_sat"]
    );
    let max = sats.iter().copied().fold(f64::MIN, f64::max);
    let min = sats.iter().copied().fold(f64::MAX, f64::min);
    assert_eq!(a["best"]["value"], max);
    assert_eq!(a["worst"]["value"], min);
    let best_key = categories
        .iter()
        .find(|c| c["sat"]["value"] == max)
        .unwrap()["key"]
        .clone();
    assert_eq!(a["best"]["keys"][0], best_key);
    assert_eq!(a["tickets"]["value"], 60.0);
    assert_eq!(a["stats"]["count"], sats.len());
    assert_eq!(a["stats"]["max"], max);
    // bucket_sort: the two categories with the best satisfaction, best first.
    let mut sorted = sats.clone();
    sorted.sort_by(|x, y| y.partial_cmp(x).unwrap());
    let top: Vec<f64> = a["by_category"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["sat"]["value"].as_f64().unwrap())
        .collect();
    assert_eq!(top, sorted[..2]);
    // Parent pipelines: a running sum and the change from the month before.
    let months = a["monthly"]["buckets"].as_array().unwrap();
    assert_eq!(months.len(), 6);
    let mut running = 0.0;
    for (i, month) in months.iter().enumerate() {
        running += month["refunds"]["value"].as_f64().unwrap();
        assert!(
            (month["so_far"]["value"].as_f64().unwrap() - running).abs() < 1e-9,
            "{month}"
        );
        if i == 0 {
            assert!(month.get("change").is_none(), "{month}");
        } else {
            let before = months[i - 1]["doc_count"].as_f64().unwrap();
            assert_eq!(
                month["change"]["value"],
                month["doc_count"].as_f64().unwrap() - before
            );
        }
        // A derivative of the derivative: none in the first month, null in the second (the first
        // has no value to start from), then the change of the change.
        match i {
            0 => assert!(month.get("change2").is_none(), "{month}"),
            1 => assert_eq!(month["change2"]["value"], Value::Null, "{month}"),
            _ => assert_eq!(
                month["change2"]["value"].as_f64().unwrap(),
                month["change"]["value"].as_f64().unwrap()
                    - months[i - 1]["change"]["value"].as_f64().unwrap()
            ),
        }
    }
    // Misplaced and misdirected pipelines are refused in OpenSearch's words.
    for (aggs, message) in [
        (
            json!({"c": {"cumulative_sum": {"buckets_path": "_count"}}}),
            "cumulative_sum aggregation [c] must have a histogram or date_histogram as parent",
        ),
        (
            json!({"s": {"bucket_sort": {"sort": ["_count"]}}}),
            "bucket_sort aggregation [s] must be declared inside of another aggregation",
        ),
        (
            json!({"m": {"max_bucket": {"buckets_path": "nope>sat"}}}),
            "No aggregation found for path [nope>sat]",
        ),
        (
            json!({"t": {"terms": {"field": "category"}, "aggs": {"p": {"percentiles": {"field": "satisfaction"}}}},
                   "m": {"max_bucket": {"buckets_path": "t>p"}}}),
            "[p] contains multiple values. Please specify which to use.",
        ),
        (
            json!({"m": {"avg_bucket": {"buckets_path": "x", "format": "0.0"}}}),
            "avg_bucket option format",
        ),
    ] {
        assert_aggs_refused(&b, "tickets", aggs, message).await;
    }
}

#[tokio::test]
async fn date_histogram_keys_take_the_format_asked_for_and_other_zones_are_refused() {
    let (_dir, b) = tickets().await;
    let r = b
        .search(
            "tickets",
            &json!({"size": 0, "aggs": {
                "m": {"date_histogram": {"field": "created_at", "calendar_interval": "month", "format": "dd/MM/yyyy"}},
                "d": {"date_histogram": {"field": "created_at", "fixed_interval": "1d", "time_zone": "UTC"}}}}),
        )
        .await
        .unwrap();
    let a = &r["aggregations"];
    assert_eq!(a["m"]["buckets"][0]["key_as_string"], "01/01/2025");
    assert_eq!(
        a["d"]["buckets"][0]["key_as_string"],
        "2025-01-01T00:00:00.000Z"
    );
    // Days in another zone would be other buckets: refused, not answered in UTC.
    assert_refused(
        &b,
        json!({"date_histogram": {"field": "created_at", "fixed_interval": "1d", "time_zone": "America/Phoenix"}}),
        "date_histogram time_zone \"America/Phoenix\" (only UTC)",
    )
    .await;
}

#[tokio::test]
async fn hdr_percentiles_are_the_bucket_values_opensearch_gives_also_per_bucket() {
    let (_dir, b) = new_index(
        "lat",
        json!({"mappings": {"properties": {"ms": {"type": "integer"}, "zone": {"type": "keyword"}}}}),
    )
    .await;
    let mut nd = String::new();
    // Several values in one document each count.
    for (i, (ms, zone)) in [
        (json!(1), "a"),
        (json!(51), "a"),
        (json!(101), "b"),
        (json!(151), "b"),
        (json!([126, 127]), "b"),
    ]
    .iter()
    .enumerate()
    {
        nd.push_str(&format!(
            "{{\"index\":{{\"_id\":\"{i}\"}}}}\n{}\n",
            json!({"ms": ms, "zone": zone})
        ));
    }
    b.bulk(Some("lat"), &nd).await.unwrap();
    let r = b
        .search(
            "lat",
            &json!({"size": 0, "aggs": {
                "p": {"percentiles": {"field": "ms", "percents": [0, 25, 50, 60, 99], "hdr": {}}},
                "list": {"percentiles": {"field": "ms", "percents": [50], "keyed": false,
                                         "hdr": {"number_of_significant_value_digits": 1}}},
                "z": {"terms": {"field": "zone", "order": {"_key": "asc"}},
                      "aggs": {"p": {"percentiles": {"field": "ms", "percents": [50], "hdr": {}}}}},
                "none": {"percentiles": {"field": "ms", "percents": [50], "hdr": {}, "missing": 7}}}}),
        )
        .await
        .unwrap();
    let a = &r["aggregations"];
    // Six values from 1 (without 127, 60% would be 101): the unit is 1/1024, a value near 100
    // lies in a bucket 1/16 wide.
    assert_eq!(
        a["p"]["values"],
        json!({"0.0": 1.0, "25.0": 51.0302734375, "50.0": 101.0615234375,
               "60.0": 126.0615234375, "99.0": 151.1240234375})
    );
    // One significant digit: buckets of 1/16 of their power of two (101 in [100, 104)).
    assert_eq!(
        a["list"]["values"],
        json!([{"key": 50.0, "value": 103.9375}])
    );
    // Per bucket, each from its own smallest value: zone b starts at 101 (unit 1/16).
    let zones = a["z"]["buckets"].as_array().unwrap();
    assert_eq!(zones[0]["p"]["values"]["50.0"], 1.0);
    assert_eq!(zones[1]["p"]["values"]["50.0"], 126.0);
    assert_eq!(a["none"]["values"]["50.0"], 101.0615234375);
}

/// OpenSearch records a value repeated inside one document each time; the listing tantivy gives
/// counts it once, so such a field is refused by name rather than answered wrongly. Distinct
/// values in one document are fine.
#[tokio::test]
async fn hdr_percentiles_refuse_a_value_repeated_in_a_document() {
    let (_dir, b) = new_index(
        "rep",
        json!({"mappings": {"properties": {"ms": {"type": "integer"}, "other": {"type": "integer"}}}}),
    )
    .await;
    let nd = "{\"index\":{}}\n{\"ms\":[1,1,1],\"other\":[1,2]}\n{\"index\":{}}\n{\"ms\":2,\"other\":2}\n";
    b.bulk(Some("rep"), nd).await.unwrap();
    let agg = |field: &str| {
        json!({"size": 0, "aggs": {
        "p": {"percentiles": {"field": field, "percents": [60], "hdr": {}}}}})
    };
    let err = b.search("rep", &agg("ms")).await.unwrap_err().to_string();
    assert!(
        err.contains(
            "percentiles with hdr on a field that holds a value more than once in a document ([ms])"
        ),
        "{err}"
    );
    let r = b.search("rep", &agg("other")).await.unwrap();
    assert_eq!(
        r["aggregations"]["p"]["values"],
        json!({"60.0": 2.0009765625})
    );
    // The percents come back in order, as OpenSearch sorts them, by either method.
    for method in [json!({"hdr": {}}), json!({"tdigest": {}})] {
        let mut p = json!({"field": "other", "percents": [90, 10], "keyed": false});
        p.as_object_mut()
            .unwrap()
            .extend(method.as_object().unwrap().clone());
        let r = b
            .search(
                "rep",
                &json!({"size": 0, "aggs": {"p": {"percentiles": p}}}),
            )
            .await
            .unwrap();
        let keys: Vec<f64> = r["aggregations"]["p"]["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["key"].as_f64().unwrap())
            .collect();
        assert_eq!(keys, [10.0, 90.0], "{method}");
    }
}

#[tokio::test]
async fn hdr_percentiles_refuse_what_opensearch_refuses() {
    let (_dir, b) = tickets().await;
    for (agg, message) in [
        (
            json!({"percentiles": {"field": "response_minutes", "hdr": {"number_of_significant_value_digits": 6}}}),
            "[numberOfSignificantValueDigits] must be between 0 and 5",
        ),
        (
            json!({"percentiles": {"field": "response_minutes", "hdr": {"number_of_significant_value_digits": null}}}),
            "must be a whole number",
        ),
        (
            json!({"percentiles": {"field": "response_minutes", "percents": []}}),
            "[percents] must not be empty",
        ),
        (
            json!({"percentiles": {"field": "response_minutes", "percents": ["x"]}}),
            "[percents] must be numbers",
        ),
        (
            json!({"percentiles": {"field": "response_minutes", "tdigest": {"compression": -1}}}),
            "[compression] must be greater than or equal to 0. Found [-1.0]",
        ),
        (
            json!({"percentiles": {"field": "response_minutes", "hdr": {}, "tdigest": {}}}),
            "one method: hdr or tdigest",
        ),
        (
            json!({"percentiles": {"field": "status", "hdr": {}}}),
            "Field [status] of type [keyword] is not supported for aggregation [percentiles]",
        ),
        (
            json!({"percentiles": {"field": "response_minutes", "format": "0.0"}}),
            "percentiles option format",
        ),
    ] {
        assert_refused(&b, agg, message).await;
    }
    // HdrHistogram records no negative value: an error, not a made-up answer.
    let (_dir, b) = new_index(
        "neg",
        json!({"mappings": {"properties": {"n": {"type": "integer"}}}}),
    )
    .await;
    b.bulk(
        Some("neg"),
        "{\"index\":{}}\n{\"n\":-10}\n{\"index\":{}}\n{\"n\":5}\n",
    )
    .await
    .unwrap();
    assert_aggs_refused(
        &b,
        "neg",
        json!({"p": {"percentiles": {"field": "n", "hdr": {}}}}),
        "cannot record negative values (found [-10.0])",
    )
    .await;
}

#[tokio::test]
async fn partitions_orders_formats_and_unmapped_value_types_answer_as_opensearch() {
    let (_dir, b) = new_index(
        "p",
        json!({"mappings": {"properties": {"str": {"type": "keyword"}, "n": {"type": "long"}}}}),
    )
    .await;
    b.bulk(
        Some("p"),
        "{\"index\":{}}\n{\"str\":\"abc\",\"n\":1234}\n{\"index\":{}}\n{\"str\":\"abc\",\"n\":1234}\n{\"index\":{}}\n{\"str\":\"bcd\",\"n\":5678}\n",
    )
    .await
    .unwrap();
    let keys = |r: &Value, name: &str| -> Vec<Value> {
        r["aggregations"][name]["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["key"].clone())
            .collect()
    };
    // OpenSearch's own test puts "bcd" and 5678 in partition 0 of 2, "abc" and 1234 in 1.
    let part = |p: u64| {
        json!({"size": 0, "aggs": {
            "s": {"terms": {"field": "str", "include": {"partition": p, "num_partitions": 2}}},
            "n": {"terms": {"field": "n", "include": {"partition": p, "num_partitions": 2}}}}})
    };
    let r = b.search("p", &part(0)).await.unwrap();
    assert_eq!(
        (keys(&r, "s"), keys(&r, "n")),
        (vec![json!("bcd")], vec![json!(5678)])
    );
    let r = b.search("p", &part(1)).await.unwrap();
    assert_eq!(
        (keys(&r, "s"), keys(&r, "n")),
        (vec![json!("abc")], vec![json!(1234)])
    );
    let r = b
        .search(
            "p",
            &json!({"size": 0, "aggs": {
                "h": {"histogram": {"field": "n", "interval": 1000, "min_doc_count": 1, "format": "Value is #,##0.0",
                                    "order": {"_count": "asc"}}},
                "t": {"terms": {"field": "str", "order": {"_term": "desc"}}},
                "b": {"terms": {"field": "nope", "value_type": "boolean", "missing": true}},
                "d": {"terms": {"field": "nope", "value_type": "date", "missing": "2016-05-11"}}}}),
        )
        .await
        .unwrap();
    let a = &r["aggregations"];
    assert_eq!(
        a["h"]["buckets"],
        json!([{"key": 5000.0, "key_as_string": "Value is 5,000.0", "doc_count": 1},
               {"key": 1000.0, "key_as_string": "Value is 1,000.0", "doc_count": 2}])
    );
    assert_eq!(keys(&r, "t"), [json!("bcd"), json!("abc")]);
    assert_eq!(
        a["b"]["buckets"],
        json!([{"key": 1, "key_as_string": "true", "doc_count": 3}])
    );
    assert_eq!(a["d"]["buckets"][0]["key"], 1_462_924_800_000_i64);
    assert_eq!(
        a["d"]["buckets"][0]["key_as_string"],
        "2016-05-11T00:00:00.000Z"
    );
    assert_aggs_refused(
        &b,
        "p",
        json!({"s": {"terms": {"field": "str", "include": {"partition": 2, "num_partitions": 2}}}}),
        "[partition] must be at least 0 and below [num_partitions]",
    )
    .await;
}

/// A keyed histogram is ordered and its keys written as asked, then named by its keys' text; an
/// order naming no metric sub-aggregation is refused as OpenSearch refuses it.
#[tokio::test]
async fn keyed_histograms_keep_order_and_format_and_bad_order_paths_are_refused() {
    let (_dir, b) = new_index(
        "h",
        json!({"mappings": {"properties": {"n": {"type": "integer"}}}}),
    )
    .await;
    let nd: String = [1, 2, 7, 7, 7]
        .iter()
        .map(|n| format!("{{\"index\":{{}}}}\n{{\"n\":{n}}}\n"))
        .collect();
    b.bulk(Some("h"), &nd).await.unwrap();
    let histogram = |extra: Value| {
        let mut h = json!({"field": "n", "interval": 5, "keyed": true});
        h.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({"size": 0, "aggs": {"h": {"histogram": h, "aggs": {"top": {"max": {"field": "n"}}, "s": {"stats": {"field": "n"}}}}}})
    };
    let r = b
        .search(
            "h",
            &histogram(json!({"order": {"_count": "desc"}, "format": "0.00"})),
        )
        .await
        .unwrap();
    let buckets = r["aggregations"]["h"]["buckets"].as_object().unwrap();
    let names: Vec<&String> = buckets.keys().collect();
    assert_eq!(names, ["5.00", "0.00"]);
    assert_eq!(buckets["5.00"]["doc_count"], 3);
    let r = b.search("h", &histogram(json!({}))).await.unwrap();
    let names: Vec<String> = r["aggregations"]["h"]["buckets"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(names, ["0.0", "5.0"]);
    for (order, message) in [
        (
            json!({"nope": "asc"}),
            "Invalid aggregator order path [nope]",
        ),
        (json!({"s": "asc"}), "a metric name must be specified"),
    ] {
        let err = b
            .search("h", &histogram(json!({"order": order})))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(message), "{err}");
    }
    let r = b
        .search(
            "h",
            &histogram(json!({"order": [{"s.max": "desc"}, {"top": "asc"}]})),
        )
        .await
        .unwrap();
    let names: Vec<&String> = r["aggregations"]["h"]["buckets"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(names, ["5.0", "0.0"]);
}

/// `adjacency_matrix`: a bucket per filter and per pair of filters with documents, by key, with
/// sub-aggregations; too many filters are refused in OpenSearch's words.
#[tokio::test]
async fn adjacency_matrix_counts_each_filter_and_each_pair() {
    let (_dir, b) = new_index(
        "adj",
        json!({"mappings": {"properties": {"num": {"type": "integer"}}}}),
    )
    .await;
    let nd = "{\"index\":{}}\n{\"num\":[1,2]}\n{\"index\":{}}\n{\"num\":[2,3]}\n{\"index\":{}}\n{\"num\":[3,4]}\n";
    b.bulk(Some("adj"), nd).await.unwrap();
    let r = b
        .search(
            "adj",
            &json!({"size": 0, "aggs": {"conns": {"adjacency_matrix": {"separator": "+", "filters": {
                "4": {"term": {"num": 4}}, "1": {"term": {"num": 1}}, "2": {"term": {"num": 2}}}},
                "aggs": {"top": {"max": {"field": "num"}}}}}}),
        )
        .await
        .unwrap();
    let buckets: Vec<String> = r["aggregations"]["conns"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            format!(
                "{}:{}:{}",
                b["key"].as_str().unwrap(),
                b["doc_count"],
                b["top"]["value"]
            )
        })
        .collect();
    assert_eq!(buckets, ["1:1:2.0", "1+2:1:2.0", "2:2:3.0", "4:1:4.0"]);
    let many: serde_json::Map<String, Value> = (0..101)
        .map(|i| (format!("f{i}"), json!({"term": {"num": i}})))
        .collect();
    let err = b
        .search(
            "adj",
            &json!({"size": 0, "aggs": {"m": {"adjacency_matrix": {"filters": many}}}}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "Number of filters is too large, must be less than or equal to: [100] but was [101]"
        ),
        "{err}"
    );
}

/// `median_absolute_deviation`: the median of the distances from the median, per bucket too, with
/// `missing`; `compression` checked as OpenSearch checks it.
#[tokio::test]
async fn median_absolute_deviation_is_the_median_distance_from_the_median() {
    let (_dir, b) = new_index(
        "mad",
        json!({"mappings": {"properties": {"n": {"type": "integer"}, "k": {"type": "keyword"}}}}),
    )
    .await;
    let nd: String = [
        (100, "a"),
        (200, "a"),
        (300, "a"),
        (1, "b"),
        (2, "b"),
        (9, "b"),
        (10, "b"),
    ]
    .iter()
    .map(|(n, k)| format!("{{\"index\":{{}}}}\n{{\"n\":{n},\"k\":\"{k}\"}}\n"))
    .collect();
    let nd = format!("{nd}{{\"index\":{{}}}}\n{{\"k\":\"a\"}}\n");
    b.bulk(Some("mad"), &nd).await.unwrap();
    let r = b
        .search(
            "mad",
            &json!({"size": 0, "aggs": {
                "by_k": {"terms": {"field": "k", "order": {"_key": "asc"}},
                         "aggs": {"m": {"median_absolute_deviation": {"field": "n"}}}},
                "with_missing": {"median_absolute_deviation": {"field": "n", "missing": 1000, "compression": 500}},
                "none": {"median_absolute_deviation": {"field": "nothing"}}}}),
        )
        .await
        .unwrap();
    let a = &r["aggregations"];
    assert_eq!(a["by_k"]["buckets"][0]["m"]["value"], 100.0);
    // 1, 2, 9, 10: median 5.5; distances 4.5, 3.5, 3.5, 4.5: median 4.
    assert_eq!(a["by_k"]["buckets"][1]["m"]["value"], 4.0);
    // 1, 2, 9, 10, 100, 200, 300, 1000: median 55; distances 45, 45, 46, 53, 54, 145, 245, 945.
    assert_eq!(a["with_missing"]["value"], 53.5);
    assert_eq!(a["none"]["value"], Value::Null);
    for c in [0, -1] {
        let err = b
            .search(
                "mad",
                &json!({"aggs": {"mad": {"median_absolute_deviation": {"field": "n", "compression": c}}}}),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!(
                "[compression] must be greater than 0. Found [{c}.0] in [mad]"
            )),
            "{err}"
        );
    }
}

/// `auto_date_histogram`: the first interval that gives at most `buckets` buckets, periods from
/// the first date's, empty ones kept, sub-aggregations and sibling pipelines on them.
#[tokio::test]
async fn auto_date_histogram_chooses_its_interval() {
    let (_dir, b) = new_index(
        "auto",
        json!({"mappings": {"properties": {"date": {"type": "date"}, "v": {"type": "integer"}}}}),
    )
    .await;
    let nd: String = [
        ("2020-03-01", 1),
        ("2020-03-02", 2),
        ("2020-03-08", 3),
        ("2020-03-09", 4),
        ("2020-03-20", 5),
    ]
    .iter()
    .map(|(d, v)| format!("{{\"index\":{{}}}}\n{{\"date\":\"{d}\",\"v\":{v}}}\n"))
    .collect();
    b.bulk(Some("auto"), &nd).await.unwrap();
    let r = b
        .search(
            "auto",
            &json!({"size": 0, "aggs": {
                "histo": {"auto_date_histogram": {"field": "date", "buckets": 3},
                          "aggs": {"v": {"sum": {"field": "v"}}}},
                "avg_v": {"avg_bucket": {"buckets_path": "histo.v"}}}}),
        )
        .await
        .unwrap();
    let histo = &r["aggregations"]["histo"];
    assert_eq!(histo["interval"], "7d");
    let buckets: Vec<String> = histo["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            format!(
                "{}:{}:{}",
                b["key_as_string"].as_str().unwrap(),
                b["doc_count"],
                b["v"]["value"]
            )
        })
        .collect();
    assert_eq!(
        buckets,
        [
            "2020-03-01T00:00:00.000Z:2:3.0",
            "2020-03-08T00:00:00.000Z:2:7.0",
            "2020-03-15T00:00:00.000Z:1:5.0"
        ]
    );
    assert_eq!(r["aggregations"]["avg_v"]["value"], 5.0);
    let err = b
        .search(
            "auto",
            &json!({"aggs": {"t": {"terms": {"field": "v"},
                "aggs": {"h": {"auto_date_histogram": {"field": "date"}}}}}}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("auto_date_histogram inside another aggregation"),
        "{err}"
    );
}

/// `multi_terms` on a date field (its part written as a date), an unmapped field's `missing`
/// read by `value_type`, and `min_doc_count: 0` listing the index's combinations the query missed.
#[tokio::test]
async fn multi_terms_take_dates_unmapped_values_and_empty_combinations() {
    let (_dir, b) = new_index(
        "mt",
        json!({"mappings": {"properties": {"s": {"type": "keyword"}, "d": {"type": "date"}, "i": {"type": "integer"}}}}),
    )
    .await;
    let nd: String = [
        ("a", "2022-03-23", 1),
        ("a", "2022-03-25", 1),
        ("b", "2022-03-23", 1),
        ("c", "2022-03-23", 1),
    ]
    .iter()
    .map(|(s, d, i)| format!("{{\"index\":{{}}}}\n{{\"s\":\"{s}\",\"d\":\"{d}\",\"i\":{i}}}\n"))
    .collect();
    b.bulk(Some("mt"), &nd).await.unwrap();
    let keys = |r: &Value| -> Vec<String> {
        r["aggregations"]["m"]["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                format!(
                    "{}:{}",
                    b["key_as_string"].as_str().unwrap(),
                    b["doc_count"]
                )
            })
            .collect()
    };
    let r = b
        .search(
            "mt",
            &json!({"size": 0, "aggs": {"m": {"multi_terms": {"terms": [{"field": "s"}, {"field": "d"}]}}}}),
        )
        .await
        .unwrap();
    assert_eq!(
        keys(&r),
        [
            "a|2022-03-23T00:00:00.000Z:1",
            "a|2022-03-25T00:00:00.000Z:1",
            "b|2022-03-23T00:00:00.000Z:1",
            "c|2022-03-23T00:00:00.000Z:1"
        ]
    );
    let r = b
        .search(
            "mt",
            &json!({"size": 0, "query": {"term": {"s": "a"}}, "aggs": {"m": {"multi_terms": {"terms": [
                {"field": "s"}, {"field": "nothing", "value_type": "string", "missing": "x"}]}}}}),
        )
        .await
        .unwrap();
    assert_eq!(keys(&r), ["a|x:2"]);
    let r = b
        .search(
            "mt",
            &json!({"size": 0, "query": {"terms": {"s": ["a", "b"]}}, "aggs": {"m": {"multi_terms": {
                "terms": [{"field": "s"}, {"field": "i"}], "min_doc_count": 0}}}}),
        )
        .await
        .unwrap();
    assert_eq!(keys(&r), ["a|1:2", "b|1:1", "c|1:0"]);
    let err = b
        .search(
            "mt",
            &json!({"aggs": {"m": {"multi_terms": {"terms": [
                {"field": "s"}, {"field": "i", "value_type": "string", "missing": "x"}]}}}}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("multi_terms value_type"), "{err}");
}

/// `terms` ordered by a `filter` sub-aggregation's count: every term counted, ordered once the
/// filters' searches are done, cut to `size` with the rest in `sum_other_doc_count`.
#[tokio::test]
async fn terms_order_by_a_filter_sub_aggregation() {
    let (_dir, b) = new_index(
        "ord",
        json!({"mappings": {"properties": {"c": {"type": "keyword"}, "v": {"type": "integer"}}}}),
    )
    .await;
    let nd: String = [
        ("foo", 7),
        ("bar", 8),
        ("bar", 9),
        ("bar", 0),
        ("baz", 1),
        ("baz", 2),
    ]
    .iter()
    .map(|(c, v)| format!("{{\"index\":{{}}}}\n{{\"c\":\"{c}\",\"v\":{v}}}\n"))
    .collect();
    b.bulk(Some("ord"), &nd).await.unwrap();
    for (order, size, expected, other) in [
        (
            json!({"high.doc_count": "desc"}),
            10,
            vec!["bar:2", "foo:1", "baz:0"],
            0,
        ),
        (json!({"high": "asc"}), 2, vec!["baz:0", "foo:1"], 3),
    ] {
        let r = b
            .search(
                "ord",
                &json!({"size": 0, "aggs": {"c": {"terms": {"field": "c", "order": order, "size": size},
                    "aggs": {"high": {"filter": {"range": {"v": {"gte": 7}}}}}}}}),
            )
            .await
            .unwrap();
        let got: Vec<String> = r["aggregations"]["c"]["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| format!("{}:{}", b["key"].as_str().unwrap(), b["high"]["doc_count"]))
            .collect();
        assert_eq!(got, expected, "{r}");
        assert_eq!(r["aggregations"]["c"]["sum_other_doc_count"], other);
    }
}
