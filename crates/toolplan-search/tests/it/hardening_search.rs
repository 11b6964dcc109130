//! Search work that cannot run away: every request body a plan or an agent can send is
//! bounded by the embedded backend's `SearchLimits` — refused with an error naming the limit, or
//! stopped by the body's `timeout`, the time budget or the caller going away.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolplan_core::{ToolContext, ToolError};
use toolplan_search::tools::search_index;
use toolplan_search::{EmbeddedBackend, SearchBackend, SearchError, SearchLimits};

const WORDS: [&str; 5] = ["alpha", "beta", "gamma", "delta", "eps"];

/// A backend with index `t`: `docs` documents of `words` words each (five words in a shifting
/// order, so phrases with slop match everywhere), a keyword `k` (distinct per document) and a
/// number `n`.
async fn backend(
    limits: SearchLimits,
    docs: usize,
    words: usize,
) -> (tempfile::TempDir, EmbeddedBackend) {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open_with_limits(dir.path(), limits).unwrap();
    let mapping = json!({"properties": {"body": {"type": "text"}, "k": {"type": "keyword"}, "n": {"type": "float"}}});
    b.create_index("t", &mapping).await.unwrap();
    let mut nd = String::new();
    for i in 0..docs {
        let text: Vec<&str> = (0..words)
            .map(|j| WORDS[(i * 7 + j * 3 + j / 5) % 5])
            .collect();
        let doc = json!({"body": text.join(" "), "k": format!("key{i}"), "n": i});
        nd.push_str(&format!("{{\"index\":{{\"_id\":\"{i}\"}}}}\n{doc}\n"));
    }
    assert_eq!(b.bulk(Some("t"), &nd).await.unwrap().indexed, docs as u64);
    (dir, b)
}

/// A phrase query that costs position work in every document (seconds on the slow index).
fn slow_phrase() -> Value {
    json!({"query": {"match_phrase": {"body": {"query": "alpha beta gamma delta eps", "slop": 50}}}})
}

/// 300 documents of 3000 words: the slow phrase takes many seconds on them.
async fn slow_index(limits: SearchLimits) -> (tempfile::TempDir, EmbeddedBackend) {
    backend(limits, 300, 3000).await
}

async fn refused(b: &EmbeddedBackend, body: Value) -> String {
    let started = Instant::now();
    let err = match tokio::time::timeout(Duration::from_secs(10), b.search("t", &body))
        .await
        .expect("a refusal is quick")
    {
        Ok(r) => panic!(
            "not refused: took {}, timed_out {}",
            r["took"], r["timed_out"]
        ),
        Err(e) => e,
    };
    assert!(started.elapsed() < Duration::from_secs(5), "{err}");
    assert!(err.is_rejection(), "{err}");
    err.to_string()
}

#[tokio::test]
async fn a_huge_slop_is_refused_naming_the_limit() {
    let (_dir, b) = backend(SearchLimits::default(), 50, 200).await;
    let body = json!({"query": {"match_phrase": {"body": {"query": "alpha beta gamma", "slop": 100_000}}}});
    let err = refused(&b, body).await;
    assert!(
        err.contains("slop 100000 is more than 50 (search limit max_slop)"),
        "{err}"
    );
    // Within the limit the phrase runs.
    let ok =
        json!({"query": {"match_phrase": {"body": {"query": "alpha beta gamma", "slop": 10}}}});
    let r = b.search("t", &ok).await.unwrap();
    assert_eq!(r["hits"]["total"]["value"], 50);
}

#[tokio::test]
async fn from_plus_size_is_checked_against_the_result_window() {
    let (_dir, b) = backend(SearchLimits::default(), 5, 10).await;
    let err = refused(&b, json!({"from": 10_000, "size": 1})).await;
    assert!(
        err.contains("Result window is too large, from + size must be less than or equal to: [10000] but was [10001]"),
        "{err}"
    );
    // Sums that overflow 64 bits are refused the same way, not wrapped.
    let err = refused(&b, json!({"from": u64::MAX, "size": u64::MAX})).await;
    assert!(err.contains("but was [36893488147419103230]"), "{err}");
    let r = b
        .search("t", &json!({"from": 9_999, "size": 1}))
        .await
        .unwrap();
    assert_eq!(r["hits"]["hits"], json!([]));
}

#[tokio::test]
async fn a_body_timeout_answers_with_partial_results() {
    let (_dir, b) = slow_index(SearchLimits::default()).await;
    let mut body = slow_phrase();
    body["timeout"] = json!("300ms");
    let started = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(10), b.search("t", &body))
        .await
        .expect("the timeout is honoured")
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(r["timed_out"], true, "{}", r["hits"]["total"]);
    assert!(r["hits"]["total"]["value"].as_u64().unwrap() < 300);
    let err = refused(&b, json!({"timeout": "soon"})).await;
    assert!(
        err.contains("failed to parse [soon] as a time value"),
        "{err}"
    );
}

#[tokio::test]
async fn the_time_budget_stops_a_search() {
    let limits = SearchLimits {
        timeout: Duration::from_millis(300),
        ..SearchLimits::default()
    };
    let (_dir, b) = slow_index(limits).await;
    let started = Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(10), b.search("t", &slow_phrase()))
        .await
        .expect("the budget is honoured")
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(matches!(err, SearchError::TimedOut { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("ran longer than the search time budget of 300ms"),
        "{err}"
    );
}

/// One blocking thread: a search still running in the background would hold it, and the next
/// search would wait for it.
fn one_blocking_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

async fn next_search_is_quick(b: &EmbeddedBackend) {
    let started = Instant::now();
    let quick = json!({"size": 0, "query": {"term": {"k": "key1"}}});
    let r = tokio::time::timeout(Duration::from_secs(5), b.search("t", &quick))
        .await
        .expect("the abandoned search stopped and freed its thread")
        .unwrap();
    assert_eq!(r["hits"]["total"]["value"], 1);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn dropping_a_search_stops_its_work() {
    one_blocking_thread().block_on(async {
        let (_dir, b) = slow_index(SearchLimits::default()).await;
        let abandoned =
            tokio::time::timeout(Duration::from_millis(300), b.search("t", &slow_phrase())).await;
        assert!(abandoned.is_err(), "the slow search is still running");
        next_search_is_quick(&b).await;
    });
}

#[test]
fn a_cancelled_search_index_call_stops_its_work() {
    one_blocking_thread().block_on(async {
        let (_dir, b) = slow_index(SearchLimits::default()).await;
        let tool = search_index(
            Arc::new(b.clone()),
            SearchLimits::default().max_filter_paths,
        );
        let ctx = ToolContext::detached();
        let cancel = ctx.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            cancel.cancel();
        });
        let started = Instant::now();
        let args = json!({"index": "t", "query": slow_phrase()});
        let out = tokio::time::timeout(Duration::from_secs(5), tool.call(args, ctx))
            .await
            .expect("the call ends when cancelled");
        assert!(matches!(out, Err(ToolError::Cancelled)), "{out:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        next_search_is_quick(&b).await;
    });
}

#[tokio::test]
async fn a_filter_path_of_too_many_paths_is_refused_before_the_search() {
    let (_dir, b) = backend(SearchLimits::default(), 3, 5).await;
    let tool = search_index(Arc::new(b), 5);
    let many = ["hits.total"; 6].join(",");
    let err = tool
        .call(
            json!({"index": "t", "q": "*", "filter_path": many}),
            ToolContext::detached(),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("filter_path has more than 5 paths (search limit max_filter_paths)"),
        "{err}"
    );
    let ok = tool
        .call(
            json!({"index": "t", "q": "*", "filter_path": (["hits.total"; 5].join(","))}),
            ToolContext::detached(),
        )
        .await
        .unwrap();
    assert_eq!(ok["hits"]["total"]["value"], 3);
}

#[tokio::test]
async fn interval_patterns_and_nesting_are_bounded() {
    // 300 distinct keys `key0` … `key299` in a text field.
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    b.create_index("t", &json!({"properties": {"body": {"type": "text"}}}))
        .await
        .unwrap();
    let nd: String = (0..300)
        .map(|i| format!("{{\"index\":{{}}}}\n{{\"body\":\"key{i} word\"}}\n"))
        .collect();
    b.bulk(Some("t"), &nd).await.unwrap();
    let err = refused(
        &b,
        json!({"query": {"intervals": {"body": {"prefix": {"prefix": "key"}}}}}),
    )
    .await;
    assert!(
        err.contains("Automaton [key*] expanded to too many terms (limit 128)"),
        "{err}"
    );
    let mut deep = json!({"match": {"query": "word"}});
    for _ in 0..25 {
        deep = json!({"any_of": {"intervals": [deep]}});
    }
    let err = refused(&b, json!({"query": {"intervals": {"body": deep}}})).await;
    assert!(err.contains("(search limit max_nested_depth)"), "{err}");
    let r = b
        .search(
            "t",
            &json!({"query": {"intervals": {"body": {"prefix": {"prefix": "key29"}}}}}),
        )
        .await
        .unwrap();
    assert_eq!(r["hits"]["total"]["value"], 11);
}

/// One long document full of a rule's terms: the intervals are worked out in time that grows
/// with the positions (times their logarithm), not with their square, so the answer comes at
/// once instead of after minutes inside one document, where no timeout is checked.
#[tokio::test]
async fn intervals_over_a_long_document_answer_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    b.create_index("t", &json!({"properties": {"body": {"type": "text"}}}))
        .await
        .unwrap();
    let body = vec!["alpha beta gamma"; 40_000].join(" ");
    let nd = format!("{{\"index\":{{}}}}\n{}\n", json!({"body": body}));
    b.bulk(Some("t"), &nd).await.unwrap();
    let rules = [
        json!({"match": {"query": "gamma alpha beta"}}),
        json!({"match": {"query": "alpha beta gamma", "mode": "ordered"}}),
        json!({"match": {"query": "alpha gamma", "mode": "unordered_no_overlap"}}),
        json!({"match": {"query": "alpha gamma", "filter": {"containing": {"match": {"query": "beta"}}}}}),
        json!({"match": {"query": "beta", "filter": {"not_overlapping": {"match": {"query": "alpha gamma alpha"}}}}}),
    ];
    for rule in rules {
        let body = json!({"query": {"intervals": {"body": rule}}});
        let search = b.search("t", &body);
        let r = tokio::time::timeout(std::time::Duration::from_secs(20), search)
            .await
            .unwrap_or_else(|_| panic!("{rule} took more than 20 s"))
            .unwrap();
        assert!(r["hits"]["total"]["value"].as_u64().is_some(), "{r}");
    }
}

#[tokio::test]
async fn query_shapes_are_bounded_naming_the_limit() {
    let (_dir, b) = backend(SearchLimits::default(), 20, 10).await;
    // Nesting.
    let mut deep = json!({"match_all": {}});
    for _ in 0..25 {
        deep = json!({"bool": {"must": [deep]}});
    }
    let err = refused(&b, json!({"query": deep})).await;
    assert!(
        err.contains("nests more than 20 levels deep (search limit max_nested_depth)"),
        "{err}"
    );
    // Clauses: a match of 2000 words.
    let long = vec!["alpha"; 2000].join(" ");
    let err = refused(&b, json!({"query": {"match": {"body": long}}})).await;
    assert!(
        err.contains("more than 1024 (search limit max_clause_count)"),
        "{err}"
    );
    // Terms.
    let many: Vec<String> = (0..70_000).map(|i| format!("key{i}")).collect();
    let err = refused(&b, json!({"query": {"terms": {"k": many}}})).await;
    assert!(
        err.contains("70000 values are more than 65536 (search limit max_terms_count)"),
        "{err}"
    );
    // Wildcard patterns.
    let err = refused(&b, json!({"query": {"wildcard": {"k": "*a".repeat(600)}}})).await;
    assert!(
        err.contains("more than 1000 (search limit max_pattern_length)"),
        "{err}"
    );
    // What stays within the limits runs.
    let r = b
        .search("t", &json!({"query": {"wildcard": {"k": "key1*"}}}))
        .await
        .unwrap();
    assert_eq!(r["hits"]["total"]["value"], 11);
}

#[tokio::test]
async fn aggregations_are_bounded_naming_the_limit() {
    let (_dir, b) = backend(SearchLimits::default(), 300, 5).await;
    let agg = |a: Value| json!({"size": 0, "aggs": {"a": a}});
    let err = refused(
        &b,
        agg(json!({"terms": {"field": "k", "size": 4_294_967_295_u64}})),
    )
    .await;
    assert!(
        err.contains("size 4294967295 is more than the 65535 buckets one request may make (search limit max_buckets)"),
        "{err}"
    );
    let err = refused(
        &b,
        agg(json!({"terms": {"field": "k"}, "aggs": {"h": {"top_hits": {"size": 101}}}})),
    )
    .await;
    assert!(
        err.contains("the top hits aggregator [h]'s from + size must be less than or equal to: [100] but was [101]"),
        "{err}"
    );
    // All top_hits together return at most max_result_window hits: 300 buckets of one hit are
    // more than 100.
    let mut limits = SearchLimits::default();
    limits.apply_overrides("max_result_window=100").unwrap();
    let (_small_dir, small) = backend(limits, 300, 5).await;
    let err = refused(
        &small,
        agg(
            json!({"terms": {"field": "k", "size": 300}, "aggs": {"h": {"top_hits": {"size": 1}}}}),
        ),
    )
    .await;
    assert!(
        err.contains("return more than 100 hits; ask for fewer buckets or a smaller size (search limit max_result_window)"),
        "{err}"
    );
    // Too many histogram buckets fail instead of exhausting memory.
    let err = b
        .search(
            "t",
            &agg(json!({"histogram": {"field": "n", "interval": 0.000_001}})),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("limit"), "{err}");
    // Nested aggregations.
    let mut deep = json!({"terms": {"field": "k"}});
    for _ in 0..25 {
        deep = json!({"terms": {"field": "k"}, "aggs": {"a": deep}});
    }
    let err = refused(&b, agg(deep)).await;
    assert!(
        err.contains("aggregations nest more than 20 levels deep (search limit max_nested_depth)"),
        "{err}"
    );
    // Filter buckets are searches: at most max_buckets of them in one request, however they nest
    // (300 terms buckets, each with a filters aggregation of 300 filters, would be 90,000).
    let many: serde_json::Map<String, Value> = (0..300)
        .map(|i| (format!("f{i}"), json!({"term": {"k": format!("key{i}")}})))
        .collect();
    let err = refused(
        &small,
        agg(json!({"terms": {"field": "k", "size": 300}, "aggs": {"f": {"filters": {"filters": many.clone()}}}})),
    )
    .await;
    assert!(
        err.contains("make more than 65535 searches (search limit max_buckets)")
            || err.contains("a filters aggregation of more than"),
        "{err}"
    );
    let mut fewer = SearchLimits::default();
    fewer.apply_overrides("max_buckets=50").unwrap();
    let (_fewer_dir, few) = backend(fewer, 300, 5).await;
    let err = refused(
        &few,
        agg(json!({"terms": {"field": "k", "size": 30},
                   "aggs": {"f": {"filters": {"filters": {"a": {"match_all": {}}, "b": {"match_all": {}}}}}}})),
    )
    .await;
    assert!(
        err.contains("the filter aggregations of all buckets make more than 50 searches (search limit max_buckets)"),
        "{err}"
    );
    let err = refused(&few, agg(json!({"filters": {"filters": many}}))).await;
    assert!(
        err.contains("a filters aggregation of more than 50 filters (search limit max_buckets)"),
        "{err}"
    );
    // An auto_date_histogram's buckets are searches too: at most max_buckets of them.
    let err = refused(
        &few,
        agg(json!({"auto_date_histogram": {"field": "when", "buckets": 51}})),
    )
    .await;
    assert!(
        err.contains("[buckets] must be a whole number from 1 to 50 (search limit max_buckets)"),
        "{err}"
    );
    // An adjacency matrix of 10 filters is 55 searches (each filter and each pair).
    let ten: serde_json::Map<String, Value> = (0..10)
        .map(|i| (format!("f{i}"), json!({"match_all": {}})))
        .collect();
    let err = refused(&few, agg(json!({"adjacency_matrix": {"filters": ten}}))).await;
    assert!(
        err.contains("an adjacency_matrix of 10 filters makes more than 50 searches (search limit max_buckets)"),
        "{err}"
    );
    // An ip_range's ranges are searches too.
    let ranges: Vec<Value> = (0..60)
        .map(|i| json!({"to": format!("10.0.0.{i}")}))
        .collect();
    let err = refused(
        &few,
        agg(json!({"ip_range": {"field": "ip", "ranges": ranges}})),
    )
    .await;
    assert!(
        err.contains("an ip_range aggregation of more than 50 ranges (search limit max_buckets)"),
        "{err}"
    );
    let ranges: Vec<Value> = (0..60)
        .map(|i| json!({"to": format!("now-{i}d")}))
        .collect();
    let err = refused(
        &few,
        agg(json!({"date_range": {"field": "when", "ranges": ranges}})),
    )
    .await;
    assert!(
        err.contains("a date_range aggregation of more than 50 ranges (search limit max_buckets)"),
        "{err}"
    );
    // Include lists on a number field are applied to every term, which must fit max_buckets:
    // past it, the answer could not be told, and the request fails instead of guessing.
    let err = refused(
        &few,
        agg(json!({"terms": {"field": "n", "include": [1, 2]}})),
    )
    .await;
    assert!(
        err.contains("more distinct values than include / exclude can filter exactly (search limit max_buckets)"),
        "{err}"
    );
    // Percentiles with hdr read every distinct value of the field: past max_buckets the request
    // fails instead of guessing.
    let err = refused(&few, agg(json!({"percentiles": {"field": "n", "hdr": {}}}))).await;
    assert!(
        err.contains(
            "more distinct values than percentiles with hdr can read (search limit max_buckets)"
        ),
        "{err}"
    );
    // Filters nested in filters count toward the nesting depth.
    let mut deep = json!({"filter": {"match_all": {}}});
    for _ in 0..25 {
        deep = json!({"filter": {"match_all": {}}, "aggs": {"a": deep}});
    }
    let err = refused(&b, agg(deep)).await;
    assert!(err.contains("(search limit max_nested_depth)"), "{err}");
    // Within the limits.
    let r = b
        .search(
            "t",
            &agg(json!({"terms": {"field": "k", "size": 3}, "aggs": {"h": {"top_hits": {"size": 1}}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        r["aggregations"]["a"]["buckets"].as_array().unwrap().len(),
        3
    );
}

#[tokio::test]
async fn docvalue_fields_are_bounded() {
    let (_dir, b) = backend(SearchLimits::default(), 5, 5).await;
    let many: Vec<Value> = (0..101).map(|_| json!("k")).collect();
    let err = refused(&b, json!({"docvalue_fields": many})).await;
    assert!(
        err.contains("Trying to retrieve too many docvalue_fields. Must be less than or equal to: [100] but was [101].")
            && err.contains("(search limit max_docvalue_fields)"),
        "{err}"
    );
}

#[tokio::test]
async fn collapse_searches_are_bounded() {
    let (_dir, b) = backend(SearchLimits::default(), 50, 5).await;
    // Each group's inner hits are a search: their window is the inner result window's.
    let err = refused(
        &b,
        json!({"collapse": {"field": "k", "inner_hits": {"name": "i", "size": 101}}}),
    )
    .await;
    assert!(
        err.contains("the inner hit definition's [i]'s from + size must be less than or equal to: [100] but was [101] (search limit max_inner_result_window)"),
        "{err}"
    );
    // Inner hits of inner hits would multiply the searches: a second level has none.
    let err = refused(
        &b,
        json!({"collapse": {"field": "k", "inner_hits": {"collapse": {"field": "n", "inner_hits": {}}}}}),
    )
    .await;
    assert!(err.contains("cannot have inner_hits of its own"), "{err}");
    // The page of groups is the result window's.
    let err = refused(&b, json!({"size": 10_001, "collapse": {"field": "k"}})).await;
    assert!(err.contains("Result window is too large"), "{err}");
}

#[tokio::test]
async fn limits_can_be_raised() {
    let mut limits = SearchLimits::default();
    limits
        .apply_overrides("max_result_window=20000,max_slop=200")
        .unwrap();
    let (_dir, b) = backend(limits, 5, 10).await;
    let body = json!({"from": 15_000, "size": 1, "query": {"match_phrase": {"body": {"query": "alpha beta", "slop": 150}}}});
    assert!(b.search("t", &body).await.is_ok());
}

/// Words where a number is stored cannot match, and OpenSearch answers 400: so does the embedded
/// index (it used to match nothing without a word). `lenient: true` asks for nothing instead.
#[tokio::test]
async fn a_match_of_words_on_a_number_field_is_refused_unless_lenient() {
    let (_dir, b) = backend(SearchLimits::default(), 5, 5).await;
    let err = refused(&b, json!({"query": {"match": {"n": "average"}}})).await;
    assert!(err.contains("number"), "{err}");
    let lenient = b
        .search(
            "t",
            &json!({"query": {"match": {"n": {"query": "average", "lenient": true}}}}),
        )
        .await
        .unwrap();
    assert_eq!(lenient["hits"]["total"]["value"], json!(0));
    let number = b
        .search("t", &json!({"query": {"match": {"n": "3"}}}))
        .await
        .unwrap();
    assert_eq!(number["hits"]["total"]["value"], json!(1));
}
