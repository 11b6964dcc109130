//! Issue 25.1: answers the embedded engine used to get wrong without a word, each checked the way a
//! user would meet it, with OpenSearch's answer as the expected one; and what it does not implement
//! refused by name, as OpenSearch answers 400, instead of ignored.

use serde_json::{Value, json};
use toolplan_search::{EmbeddedBackend, SearchBackend, SearchLimits};

async fn index(mapping: Value, docs: &[Value]) -> (tempfile::TempDir, EmbeddedBackend) {
    let dir = tempfile::tempdir().unwrap();
    let backend = EmbeddedBackend::open(dir.path()).unwrap();
    backend.create_index("t", &mapping).await.unwrap();
    let mut ndjson = String::new();
    for (i, doc) in docs.iter().enumerate() {
        ndjson.push_str(&format!(
            "{}\n{doc}\n",
            json!({"index": {"_id": i.to_string()}})
        ));
    }
    let summary = backend.bulk(Some("t"), &ndjson).await.unwrap();
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    (dir, backend)
}

async fn ids(b: &EmbeddedBackend, query: Value) -> Vec<String> {
    crate::fixtures::hit_ids(b, "t", query).await
}

async fn refused(b: &EmbeddedBackend, query: Value) -> String {
    match b.search("t", &json!({"query": query})).await {
        Ok(r) => panic!("{query} was answered: {r}"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn every_element_of_an_array_of_objects_is_indexed() {
    let mapping = json!({"properties": {"payload": {"properties": {"commits": {"properties": {
        "message": {"type": "text"}, "sha": {"type": "keyword"}}}}}}});
    let event = json!({"payload": {"commits": [
        {"message": "fix the parser", "sha": "a1"},
        {"message": "update docs", "sha": "b2"},
        {"message": "bump version", "sha": "c3"}]}});
    let (_d, b) = index(mapping, &[event, json!({"payload": {"commits": []}})]).await;
    assert_eq!(
        ids(&b, json!({"match": {"payload.commits.message": "bump"}})).await,
        ["0"]
    );
    assert_eq!(
        ids(&b, json!({"term": {"payload.commits.sha": "c3"}})).await,
        ["0"]
    );
    assert_eq!(
        ids(&b, json!({"exists": {"field": "payload.commits.sha"}})).await,
        ["0"]
    );
}

#[tokio::test]
async fn a_question_mark_in_a_wildcard_is_any_one_character() {
    let (_d, b) = index(
        json!({"properties": {"code": {"type": "keyword"}}}),
        &[
            json!({"code": "AB-1"}),
            json!({"code": "AB-12"}),
            json!({"code": "A?-1"}),
        ],
    )
    .await;
    assert_eq!(ids(&b, json!({"wildcard": {"code": "AB-?"}})).await, ["0"]);
    assert_eq!(
        ids(&b, json!({"wildcard": {"code": "A?-1"}})).await,
        ["0", "2"]
    );
    assert_eq!(
        ids(&b, json!({"wildcard": {"code": {"value": "A\\?-1"}}})).await,
        ["2"]
    );
    assert_eq!(
        ids(&b, json!({"wildcard": {"code": "AB-*"}})).await,
        ["0", "1"]
    );
}

#[tokio::test]
async fn a_lowercase_normalizer_applies_to_values_and_to_queries() {
    let (_d, b) = index(
        json!({"properties": {"name": {"type": "keyword", "normalizer": "lowercase"}}}),
        &[
            json!({"name": "Alice"}),
            json!({"name": "BOB"}),
            json!({"name": "carol"}),
        ],
    )
    .await;
    assert_eq!(ids(&b, json!({"term": {"name": "ALICE"}})).await, ["0"]);
    assert_eq!(
        ids(&b, json!({"terms": {"name": ["bob", "Carol"]}})).await,
        ["1", "2"]
    );
    assert_eq!(
        ids(&b, json!({"range": {"name": {"gte": "B", "lt": "C"}}})).await,
        ["1"]
    );
    assert_eq!(ids(&b, json!({"prefix": {"name": "AL"}})).await, ["0"]);
    let response = b
        .search(
            "t",
            &json!({"size": 0, "aggs": {"n": {"terms": {"field": "name"}}}}),
        )
        .await
        .unwrap();
    let mut keys: Vec<&str> = response["aggregations"]["n"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["key"].as_str().unwrap())
        .collect();
    keys.sort();
    assert_eq!(keys, ["alice", "bob", "carol"]);
}

#[tokio::test]
async fn zero_terms_query_decides_what_text_without_tokens_matches() {
    let (_d, b) = index(
        json!({"properties": {"title": {"type": "text", "analyzer": "stop"}}}),
        &[
            json!({"title": "the quick fox"}),
            json!({"title": "lazy dogs"}),
        ],
    )
    .await;
    assert!(ids(&b, json!({"match": {"title": "the"}})).await.is_empty());
    assert!(
        ids(
            &b,
            json!({"match": {"title": {"query": "the", "zero_terms_query": "none"}}})
        )
        .await
        .is_empty()
    );
    assert_eq!(
        ids(
            &b,
            json!({"match": {"title": {"query": "to be or not", "zero_terms_query": "all"}}})
        )
        .await,
        ["0", "1"]
    );
    assert!(
        refused(
            &b,
            json!({"match": {"title": {"query": "the", "zero_terms_query": "some"}}})
        )
        .await
        .contains("zero_terms_query")
    );
}

#[tokio::test]
async fn analyzers_are_the_ones_named_and_an_unknown_one_is_refused() {
    let (_d, b) = index(
        json!({"properties": {
            "plain": {"type": "text", "analyzer": "whitespace"},
            "stemmed": {"type": "text", "analyzer": "english"}}}),
        &[json!({"plain": "Quick-Foxes", "stemmed": "The foxes were running"})],
    )
    .await;
    // Whitespace keeps case and punctuation.
    assert_eq!(
        ids(&b, json!({"match": {"plain": "Quick-Foxes"}})).await,
        ["0"]
    );
    assert!(
        ids(&b, json!({"match": {"plain": "quick"}}))
            .await
            .is_empty()
    );
    // English stems: "fox" finds "foxes", "run" finds "running".
    assert_eq!(
        ids(
            &b,
            json!({"match": {"stemmed": {"query": "fox run", "operator": "and"}}})
        )
        .await,
        ["0"]
    );

    let dir = tempfile::tempdir().unwrap();
    let other = EmbeddedBackend::open(dir.path()).unwrap();
    for (mapping, named) in [
        (
            json!({"properties": {"t": {"type": "text", "analyzer": "my_custom"}}}),
            "my_custom",
        ),
        (
            json!({"properties": {"k": {"type": "keyword", "normalizer": "my_norm"}}}),
            "my_norm",
        ),
        (
            json!({"properties": {"t": {"type": "text", "copy_to": "all"}}}),
            "copy_to",
        ),
        (
            json!({"properties": {"d": {"type": "date", "format": "yyyy-qq"}}}),
            "q",
        ),
    ] {
        let err = other
            .create_index("x", &mapping)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(named), "{mapping}: {err}");
    }
}

#[tokio::test]
async fn query_options_the_engine_does_not_implement_are_refused_by_name() {
    let (_d, b) = index(
        json!({"properties": {"title": {"type": "text"}, "code": {"type": "keyword"}}}),
        &[json!({"title": "hello world", "code": "x"})],
    )
    .await;
    for (query, option) in [
        (
            json!({"match": {"title": {"query": "hello", "cutoff_frequency": 0.1}}}),
            "cutoff_frequency",
        ),
        (
            json!({"match_phrase": {"title": {"query": "hello world", "operator": "and"}}}),
            "operator",
        ),
        (
            json!({"term": {"code": {"value": "x", "_name": "q1"}}}),
            "_name",
        ),
        (
            json!({"wildcard": {"code": {"value": "x*", "flags": "ALL"}}}),
            "flags",
        ),
        (
            json!({"multi_match": {"query": "hello", "fields": ["title"], "analyzer": "nope"}}),
            "analyzer [nope] has not been configured",
        ),
        (
            json!({"range": {"title": {"gte": "a", "time_zone": "+01:00"}}}),
            "time_zone",
        ),
    ] {
        let err = refused(&b, query.clone()).await;
        assert!(err.contains(option), "{query}: {err}");
    }
    // And what is implemented still answers.
    assert_eq!(ids(&b, json!({"match": {"title": {"query": "helo", "fuzziness": 1, "fuzzy_transpositions": false}}})).await, ["0"]);
}

#[tokio::test]
async fn dates_read_with_their_format_in_the_mapping_and_in_a_range() {
    let (_d, b) = index(
        json!({"properties": {
            "day": {"type": "date", "format": "dd/MM/yyyy"},
            "at": {"type": "date", "format": "epoch_second"}}}),
        &[
            json!({"day": "02/01/2024", "at": 1_700_000_000}),
            json!({"day": "31/12/2023", "at": "1600000000"}),
        ],
    )
    .await;
    // 2 January 2024, not 1 February; query dates are read with the field's format, and one in
    // another form is an error, as in OpenSearch.
    assert_eq!(
        ids(
            &b,
            json!({"range": {"day": {"gte": "01/01/2024", "lt": "03/01/2024"}}})
        )
        .await,
        ["0"]
    );
    assert!(
        refused(&b, json!({"range": {"day": {"gte": "2024-01-01"}}}))
            .await
            .contains("date format")
    );
    assert_eq!(ids(&b, json!({"term": {"day": "31/12/2023"}})).await, ["1"]);
    assert_eq!(
        ids(
            &b,
            json!({"range": {"day": {"gte": "2024-01-01", "format": "yyyy-MM-dd"}}})
        )
        .await,
        ["0"]
    );
    // Seconds, not milliseconds.
    assert_eq!(
        ids(&b, json!({"range": {"at": {"gte": "1650000000"}}})).await,
        ["0"]
    );
    assert_eq!(
        ids(&b, json!({"range": {"at": {"lt": 1_650_000_000}}})).await,
        ["1"]
    );
}

#[tokio::test]
async fn from_and_to_follow_include_lower_and_include_upper() {
    let (_d, b) = index(
        json!({"properties": {"n": {"type": "integer"}}}),
        &[json!({"n": 1}), json!({"n": 2}), json!({"n": 3})],
    )
    .await;
    assert_eq!(
        ids(&b, json!({"range": {"n": {"from": 1, "to": 3}}})).await,
        ["0", "1", "2"]
    );
    assert_eq!(
        ids(&b, json!({"range": {"n": {"from": 1, "to": 3, "include_lower": false, "include_upper": false}}})).await,
        ["1"]
    );
}

#[tokio::test]
async fn a_field_that_is_not_indexed_cannot_be_searched_and_a_disabled_object_is_left_out() {
    let (_d, b) = index(
        json!({"properties": {
            "secret": {"type": "keyword", "index": false},
            "raw": {"type": "object", "enabled": false}}}),
        &[json!({"secret": "s", "raw": {"anything": [1, "two"]}})],
    )
    .await;
    assert!(
        refused(&b, json!({"term": {"secret": "s"}}))
            .await
            .contains("not indexed")
    );
    // The disabled object's content is kept, not searchable: no field there matches.
    assert!(
        ids(&b, json!({"match": {"raw.anything": "two"}}))
            .await
            .is_empty()
    );
    let hit = b.search("t", &json!({})).await.unwrap();
    assert_eq!(
        hit["hits"]["hits"][0]["_source"]["raw"]["anything"][1],
        "two"
    );
}

#[tokio::test]
async fn a_malformed_value_fails_its_document_unless_the_field_ignores_it() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    b.create_index(
        "t",
        &json!({"properties": {"strict": {"type": "integer"}, "lax": {"type": "integer", "ignore_malformed": true}}}),
    )
    .await
    .unwrap();
    let body = "{\"index\":{\"_id\":\"1\"}}\n{\"strict\":\"x\"}\n{\"index\":{\"_id\":\"2\"}}\n{\"lax\":\"x\",\"strict\":5}\n";
    let summary = b.bulk(Some("t"), body).await.unwrap();
    assert_eq!(summary.indexed, 1);
    assert_eq!(summary.errors.len(), 1, "{:?}", summary.errors);
    assert_eq!(ids(&b, json!({"term": {"strict": 5}})).await, ["2"]);
}

#[tokio::test]
async fn ignored_malformed_values_are_listed_in_ignored_and_ip_values_are_checked() {
    let (_d, b) = index(
        json!({"properties": {"d": {"type": "date", "ignore_malformed": true},
                              "ip": {"type": "ip", "ignore_malformed": true},
                              "strict_ip": {"type": "ip"}}}),
        &[
            json!({"d": "2018-05-11", "ip": ":::1"}),
            json!({"d": "bar", "ip": "192.168.1.42"}),
            json!({"d": "bar", "ip": "quux"}),
            json!({"d": "2020-01-01", "ip": "::1", "strict_ip": "10.0.0.1"}),
        ],
    )
    .await;
    assert_eq!(
        ids(&b, json!({"exists": {"field": "_ignored"}})).await,
        ["0", "1", "2"]
    );
    assert_eq!(
        ids(&b, json!({"term": {"_ignored": "d"}})).await,
        ["1", "2"]
    );
    assert_eq!(
        ids(&b, json!({"terms": {"_ignored": ["d", "ip"]}})).await,
        ["0", "1", "2"]
    );
    let r = b
        .search("t", &json!({"query": {"ids": {"values": ["2"]}}}))
        .await
        .unwrap();
    assert_eq!(r["hits"]["hits"][0]["_ignored"], json!(["d", "ip"]));
    let clean = b
        .search("t", &json!({"query": {"ids": {"values": ["3"]}}}))
        .await
        .unwrap();
    assert!(clean["hits"]["hits"][0].get("_ignored").is_none());
    // Without ignore_malformed, a value that is not an IP address fails its document.
    let summary = b
        .bulk(Some("t"), "{\"index\":{}}\n{\"strict_ip\":\"not an ip\"}\n")
        .await
        .unwrap();
    assert_eq!(summary.indexed, 0);
    assert!(
        summary.errors[0].contains("failed to parse field [strict_ip] of type [ip]"),
        "{:?}",
        summary.errors
    );
}

#[tokio::test]
async fn a_date_past_what_the_index_stores_is_refused_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    b.create_index("t", &json!({"properties": {"d": {"type": "date"}}}))
        .await
        .unwrap();
    let body = "{\"index\":{\"_id\":\"far\"}}\n{\"d\":\"9999-01-01\"}\n{\"index\":{\"_id\":\"near\"}}\n{\"d\":\"2024-01-01\"}\n";
    let summary = b.bulk(Some("t"), body).await.unwrap();
    assert_eq!(summary.indexed, 1);
    assert!(
        summary.errors[0].contains("1677 to 2262"),
        "{:?}",
        summary.errors
    );
    // Bounds past it are as good as the furthest stored date.
    assert_eq!(
        ids(
            &b,
            json!({"range": {"d": {"gte": "0001-01-01", "lte": "9999-12-31"}}})
        )
        .await,
        ["near"]
    );
}

#[tokio::test]
async fn several_indices_are_searched_as_one_by_list_pattern_and_exclusion() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    let mapping = json!({"properties": {"msg": {"type": "text"}, "n": {"type": "integer"}}});
    for (index, docs) in [
        (
            "logs-1",
            vec![
                json!({"msg": "disk full", "n": 3}),
                json!({"msg": "all good", "n": 1}),
            ],
        ),
        ("logs-2", vec![json!({"msg": "disk slow", "n": 2})]),
        ("logs-old", vec![json!({"msg": "disk gone", "n": 9})]),
    ] {
        b.create_index(index, &mapping).await.unwrap();
        let mut ndjson = String::new();
        for (i, d) in docs.iter().enumerate() {
            ndjson.push_str(&format!(
                "{}\n{d}\n",
                json!({"index": {"_id": format!("{index}-{i}")}})
            ));
        }
        b.bulk(Some(index), &ndjson).await.unwrap();
    }
    let search = |expr: &'static str, body: Value| {
        let b = &b;
        async move { b.search(expr, &body).await.unwrap() }
    };
    let ids = crate::fixtures::ids_of;
    let disk = json!({"query": {"match": {"msg": "disk"}}, "sort": [{"n": "asc"}]});
    let r = search("logs-*", disk.clone()).await;
    assert_eq!(r["hits"]["total"]["value"], 3);
    assert_eq!(ids(&r), ["logs-2-0", "logs-1-0", "logs-old-0"]);
    let r = search("logs-*,-logs-old", disk.clone()).await;
    assert_eq!(ids(&r), ["logs-2-0", "logs-1-0"]);
    let r = search(
        "logs-1,logs-2",
        json!({"query": {"match_all": {}}, "sort": [{"n": "desc"}], "from": 1, "size": 1}),
    )
    .await;
    assert_eq!(ids(&r), ["logs-2-0"]);
    assert_eq!(r["hits"]["total"]["value"], 3);
    assert_eq!(
        search("_all", json!({"size": 0})).await["hits"]["total"]["value"],
        4
    );
    assert_eq!(
        search("nothing-*", json!({})).await["hits"]["total"]["value"],
        0
    );
    assert!(
        b.search("logs-1,missing", &json!({}))
            .await
            .unwrap_err()
            .to_string()
            .contains("missing")
    );
    // Aggregations combine across indices; one that cannot be combined is refused by name.
    let r = b
        .search(
            "logs-*",
            &json!({"size": 0, "aggs": {"n": {"max": {"field": "n"}},
                    "words": {"terms": {"field": "n", "size": 2}}}}),
        )
        .await
        .unwrap();
    assert_eq!(r["aggregations"]["n"]["value"], 9.0);
    assert_eq!(
        r["aggregations"]["words"]["buckets"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(r["aggregations"]["words"]["sum_other_doc_count"], 2);
    assert!(
        b.search("logs-*", &json!({"aggs": {"n": {"avg": {"field": "n"}}}}))
            .await
            .unwrap_err()
            .to_string()
            .contains("avg aggregation over several indices")
    );
    // Over the one index that matches, any aggregation is exact.
    let r = b
        .search(
            "logs-*",
            &json!({"query": {"term": {"n": 9}}, "aggs": {"n": {"avg": {"field": "n"}}}}),
        )
        .await
        .unwrap();
    assert_eq!(r["aggregations"]["n"]["value"], 9.0);
}

#[tokio::test]
async fn match_bool_prefix_takes_the_last_word_as_a_prefix() {
    let (_d, b) = index(
        json!({"properties": {"a": {"type": "text"}, "b": {"type": "text"}}}),
        &[
            json!({"a": "brown fox jump", "b": "xylophone"}),
            json!({"a": "brown emu jump", "b": "xylophone"}),
            json!({"a": "jumparound", "b": "emu"}),
            json!({"a": "dog", "b": "brown fox jump lazy"}),
        ],
    )
    .await;
    assert_eq!(
        ids(&b, json!({"match_bool_prefix": {"a": "brown fox ju"}})).await,
        ["0", "1", "2"]
    );
    assert_eq!(
        ids(
            &b,
            json!({"match_bool_prefix": {"a": {"query": "brown fox ju", "operator": "and"}}})
        )
        .await,
        ["0"]
    );
    assert_eq!(
        ids(&b, json!({"multi_match": {"query": "brown fox ju", "type": "bool_prefix", "fields": ["a", "b"], "operator": "and"}}))
            .await,
        ["0", "3"]
    );
    // Fuzziness on the words before the last (with its prefix and expansion bounds), and an
    // analyzer by name.
    assert_eq!(
        ids(
            &b,
            json!({"match_bool_prefix": {"b": {"query": "xylophoen foo", "fuzziness": 1,
            "prefix_length": 1, "max_expansions": 10, "fuzzy_transpositions": true,
            "fuzzy_rewrite": "constant_score"}}})
        )
        .await,
        ["0", "1"]
    );
    assert!(
        ids(
            &b,
            json!({"match_bool_prefix": {"b": {"query": "xylophoen foo", "fuzziness": 1,
            "prefix_length": 1, "fuzzy_transpositions": false}}})
        )
        .await
        .is_empty()
    );
    assert!(
        ids(
            &b,
            json!({"match_bool_prefix": {"b": {"query": "yxlophone foo", "fuzziness": 2,
            "prefix_length": 1}}})
        )
        .await
        .is_empty()
    );
    assert_eq!(
        ids(
            &b,
            json!({"match_bool_prefix": {"a": {"query": "BROWN dog", "analyzer": "whitespace"}}})
        )
        .await,
        ["3"]
    );
    assert_eq!(
        ids(
            &b,
            json!({"multi_match": {"query": "dob nomatch", "type": "bool_prefix",
            "fields": ["a", "b"], "fuzziness": 1}})
        )
        .await,
        ["3"]
    );
    for (key, value) in [("slop", json!(1)), ("cutoff_frequency", json!(0.001))] {
        let mut q = json!({"query": "brown", "type": "bool_prefix", "fields": ["a", "b"]});
        q[key] = value;
        let err = refused(&b, json!({"multi_match": q})).await;
        assert!(
            err.contains(&format!("[{key}] not allowed for type [bool_prefix]")),
            "{err}"
        );
    }
    assert!(
        refused(
            &b,
            json!({"match": {"a": {"query": "x", "fuzziness": 1, "fuzzy_rewrite": "top_terms_10"}}})
        )
        .await
        .contains("fuzzy_rewrite top_terms_10")
    );
}

#[tokio::test]
async fn exists_finds_fields_of_types_the_engine_does_not_index_and_metadata_fields() {
    let (_d, b) = index(
        json!({"properties": {"addr": {"type": "ip"}, "loc": {"type": "geo_point"}, "n": {"type": "integer"}}}),
        &[
            json!({"addr": "10.0.0.1", "loc": {"lat": 1.0, "lon": 2.0}}),
            json!({"addr": null, "n": 1}),
            json!({"n": 2}),
        ],
    )
    .await;
    assert_eq!(ids(&b, json!({"exists": {"field": "addr"}})).await, ["0"]);
    assert_eq!(ids(&b, json!({"exists": {"field": "loc"}})).await, ["0"]);
    assert_eq!(
        ids(&b, json!({"exists": {"field": "_id"}})).await,
        ["0", "1", "2"]
    );
    // Searching a field of a type the engine does not index is refused by name.
    assert!(
        refused(&b, json!({"term": {"loc": "1,2"}}))
            .await
            .contains("geo_point")
    );
}

#[tokio::test]
async fn regexp_takes_lucene_syntax_and_fuzzy_finds_near_terms() {
    let (_d, b) = index(
        json!({"properties": {"name": {"type": "keyword"}, "bio": {"type": "text"}}}),
        &[
            json!({"name": "john", "bio": "Likes Kimchy"}),
            json!({"name": "joan", "bio": "likes chimchy"}),
            json!({"name": "jo.n", "bio": "x<y and 42"}),
            json!({"name": "mary", "bio": "nothing"}),
        ],
    )
    .await;
    assert_eq!(
        ids(&b, json!({"regexp": {"name": "jo.n"}})).await,
        ["0", "1", "2"]
    );
    assert_eq!(ids(&b, json!({"regexp": {"name": "jo\\.n"}})).await, ["2"]);
    assert_eq!(
        ids(&b, json!({"regexp": {"name": "\"jo.n\""}})).await,
        ["2"]
    );
    assert_eq!(
        ids(&b, json!({"regexp": {"name": "j@"}})).await,
        ["0", "1", "2"]
    );
    assert_eq!(
        ids(
            &b,
            json!({"regexp": {"name": {"value": "JO.N", "case_insensitive": true}}})
        )
        .await,
        ["0", "1", "2"]
    );
    // On text, the terms: lower-cased tokens.
    assert_eq!(ids(&b, json!({"regexp": {"bio": "k.*y"}})).await, ["0"]);
    assert_eq!(ids(&b, json!({"regexp": {"bio": "<40-45>"}})).await, ["2"]);
    assert_eq!(
        ids(&b, json!({"wildcard": {"bio": {"value": "x<y"}}})).await,
        Vec::<String>::new()
    );
    assert!(
        refused(&b, json!({"regexp": {"name": "jo&n"}}))
            .await
            .contains("[&] (intersection) is not supported")
    );
    assert_eq!(ids(&b, json!({"fuzzy": {"bio": "kimchi"}})).await, ["0"]);
    assert_eq!(
        ids(
            &b,
            json!({"fuzzy": {"bio": {"value": "kimchy", "fuzziness": 2}}})
        )
        .await,
        ["0", "1"]
    );
    assert_eq!(
        ids(
            &b,
            json!({"fuzzy": {"bio": {"value": "kimchy", "fuzziness": 1}}})
        )
        .await,
        ["0"]
    );
    assert_eq!(
        ids(&b, json!({"fuzzy": {"name": {"value": "jhon"}}})).await,
        ["0"]
    );
    assert_eq!(
        ids(
            &b,
            json!({"fuzzy": {"name": {"value": "jhon", "transpositions": false}}})
        )
        .await,
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn query_string_reads_lucene_syntax_and_simple_query_string_its_own() {
    let (_d, b) = index(
        json!({"properties": {
            "title": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
            "year": {"type": "integer"}, "tag": {"type": "keyword"}
        }}),
        &[
            json!({"title": "The quick brown fox", "year": 2001, "tag": "animal"}),
            json!({"title": "Brown bread recipes", "year": 2010, "tag": "food"}),
            json!({"title": "Quick bread", "year": 2020}),
            json!({"title": "A slow turtle", "year": 1999, "tag": "animal"}),
        ],
    )
    .await;
    let qs = |q: &str| json!({"query_string": {"query": q}});
    assert_eq!(ids(&b, qs("quick")).await, ["0", "2"]);
    assert_eq!(ids(&b, qs("title:brown AND year:>2005")).await, ["1"]);
    assert_eq!(ids(&b, qs("bread -quick")).await, ["1"]);
    assert_eq!(ids(&b, qs("+bread +(quick OR recipes)")).await, ["1", "2"]);
    assert_eq!(ids(&b, qs("\"brown fox\"")).await, ["0"]);
    assert_eq!(ids(&b, qs("\"quick fox\"~1")).await, ["0"]);
    assert_eq!(ids(&b, qs("year:[2000 TO 2010}")).await, ["0"]);
    assert_eq!(ids(&b, qs("tag:anim*")).await, ["0", "3"]);
    assert_eq!(ids(&b, qs("title:qu?ck")).await, ["0", "2"]);
    assert_eq!(ids(&b, qs("title:/tu.*e/")).await, ["3"]);
    assert_eq!(ids(&b, qs("turtel~1")).await, ["3"]);
    assert_eq!(
        ids(&b, qs("_exists_:tag AND NOT tag:food")).await,
        ["0", "3"]
    );
    assert_eq!(ids(&b, qs("tag:*")).await, ["0", "1", "3"]);
    assert_eq!(ids(&b, qs("title.raw:Quick\\ bread")).await, ["2"]);
    assert_eq!(
        ids(
            &b,
            json!({"query_string": {"query": "quick bread", "default_operator": "AND"}})
        )
        .await,
        ["2"]
    );
    assert_eq!(
        ids(
            &b,
            json!({"query_string": {"query": "2001", "default_field": "year"}})
        )
        .await,
        ["0"]
    );
    // Over all fields (the default) the query is lenient, as OpenSearch's: a word no number
    // field can hold is skipped; unless leniency is turned off.
    assert_eq!(ids(&b, qs("recipes")).await, ["1"]);
    assert!(ids(&b, qs("year:recipes")).await.is_empty());
    assert!(
        refused(
            &b,
            json!({"query_string": {"query": "year:recipes", "lenient": false}})
        )
        .await
        .contains("year")
    );
    assert!(
        refused(&b, qs("title:(quick"))
            .await
            .contains("Failed to parse query")
    );

    let sqs = |q: &str| json!({"simple_query_string": {"query": q, "fields": ["title"]}});
    assert_eq!(ids(&b, sqs("quick | turtle")).await, ["0", "2", "3"]);
    assert_eq!(ids(&b, sqs("quick +bread")).await, ["2"]);
    assert_eq!(ids(&b, sqs("bre*")).await, ["1", "2"]);
    assert_eq!(ids(&b, sqs("\"quick brown\"")).await, ["0"]);
    assert_eq!(
        ids(&b, json!({"simple_query_string": {"query": "bread -quick", "fields": ["title"], "default_operator": "and"}})).await,
        ["1"]
    );
    // Broken syntax is read as text, never an error.
    assert_eq!(ids(&b, sqs("(quick \"")).await, ["0", "2"]);
}

#[tokio::test]
async fn the_q_shorthand_in_the_search_tool() {
    use std::sync::Arc;
    use toolplan_core::ToolContext;
    let (_d, b) = index(
        json!({"properties": {"title": {"type": "text"}, "year": {"type": "integer"}}}),
        &[
            json!({"title": "quick fox", "year": 2001}),
            json!({"title": "slow fox", "year": 1990}),
        ],
    )
    .await;
    let tool =
        toolplan_search::tools::search_index(Arc::new(b), SearchLimits::default().max_filter_paths);
    let r = tool
        .call(
            json!({"index": "t", "q": "fox AND year:<2000"}),
            ToolContext::detached(),
        )
        .await
        .unwrap();
    assert_eq!(r["hits"]["total"]["value"], 1);
    assert_eq!(r["hits"]["hits"][0]["_id"], "1");
    let r = tool
        .call(
            json!({"index": "t", "q": "fox", "query": {"size": 0, "query": {"match_none": {}}}}),
            ToolContext::detached(),
        )
        .await
        .unwrap();
    assert_eq!(r["hits"]["total"]["value"], 2);
    assert!(
        tool.call(json!({"index": "t"}), ToolContext::detached())
            .await
            .is_err()
    );
    // filter_path keeps the parts of the response it names, as OpenSearch's does.
    let r = tool
        .call(
            json!({"index": "t", "q": "fox", "filter_path": "hits.hits._source.title,hits.total.value,-**.relation"}),
            ToolContext::detached(),
        )
        .await
        .unwrap();
    assert_eq!(
        r,
        json!({"hits": {"total": {"value": 2}, "hits": [
            {"_source": {"title": "quick fox"}}, {"_source": {"title": "slow fox"}}]}})
    );
}

#[tokio::test]
async fn count_and_multi_search_tools_answer_as_count_and_msearch() {
    use std::sync::Arc;
    use toolplan_core::ToolContext;
    use toolplan_search::tools::{count_index, multi_search};
    let (_d, b) = index(
        json!({"properties": {"title": {"type": "text"}, "year": {"type": "integer"}}}),
        &[
            json!({"title": "quick fox", "year": 2001}),
            json!({"title": "slow fox", "year": 1990}),
        ],
    )
    .await;
    let b: Arc<dyn SearchBackend> = Arc::new(b);
    let count = count_index(Arc::clone(&b));
    let call = |tool: &Arc<dyn toolplan_core::Tool>, args: Value| {
        let tool = Arc::clone(tool);
        async move { tool.call(args, ToolContext::detached()).await }
    };
    assert_eq!(
        call(&count, json!({"index": "t"})).await.unwrap(),
        json!({"count": 2})
    );
    assert_eq!(
        call(
            &count,
            json!({"index": "t", "query": {"query": {"range": {"year": {"gt": 2000}}}}})
        )
        .await
        .unwrap(),
        json!({"count": 1})
    );
    assert_eq!(
        call(&count, json!({"index": "t", "q": "slow"}))
            .await
            .unwrap(),
        json!({"count": 1})
    );
    let multi = multi_search(Arc::clone(&b), 3);
    let r = call(
        &multi,
        json!({"searches": [
            {"index": "t", "q": "quick"},
            {"index": "nope", "query": {}},
            {"index": "t", "query": {"size": 0, "aggs": {"y": {"max": {"field": "year"}}}}}
        ]}),
    )
    .await
    .unwrap();
    assert_eq!(r["responses"][0]["hits"]["total"]["value"], 1);
    assert!(
        r["responses"][1]["error"]["reason"]
            .as_str()
            .unwrap()
            .contains("nope")
    );
    assert_eq!(r["responses"][2]["aggregations"]["y"]["value"], 2001.0);
    // The attacker's side: one call cannot fan out past the limit.
    let many: Vec<Value> = (0..4).map(|_| json!({"index": "t", "q": "fox"})).collect();
    let err = call(&multi, json!({"searches": many})).await.unwrap_err();
    assert!(err.to_string().contains("max_multi_searches"), "{err}");
}

#[tokio::test]
async fn sorting_as_opensearch_sorts_and_search_after_pages() {
    let (_d, b) = index(
        json!({"properties": {"n": {"type": "integer"}, "tag": {"type": "keyword"}, "x": {"type": "double"}}}),
        &[
            json!({"n": 3, "tag": "b", "x": [1.0, 9.0]}),
            json!({"tag": "a", "x": 5.0}),
            json!({"n": 1, "tag": "b"}),
            json!({"n": 2, "tag": "a", "x": [4.0, 6.0]}),
        ],
    )
    .await;
    let order = |sort: Value| {
        let b = &b;
        async move {
            let r = b
                .search("t", &json!({"sort": sort, "size": 10}))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            r["hits"]["hits"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h["_id"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    // A document without the field goes last in both directions, unless `missing` says.
    assert_eq!(order(json!([{"n": "asc"}])).await, ["2", "3", "0", "1"]);
    assert_eq!(order(json!([{"n": "desc"}])).await, ["0", "3", "2", "1"]);
    assert_eq!(
        order(json!([{"n": {"order": "asc", "missing": "_first"}}])).await,
        ["1", "2", "3", "0"]
    );
    assert_eq!(
        order(json!([{"n": {"order": "asc", "missing": 2.5}}])).await,
        ["2", "3", "1", "0"]
    );
    assert_eq!(order(json!(["_doc"])).await, ["0", "1", "2", "3"]);
    assert_eq!(
        order(json!([{"tag": "asc"}, {"n": "desc"}])).await,
        ["3", "1", "0", "2"]
    );
    // Several values: the smallest ascending, the largest descending, or as `mode` says.
    assert_eq!(order(json!([{"x": "asc"}])).await, ["0", "3", "1", "2"]);
    assert_eq!(order(json!([{"x": "desc"}])).await, ["0", "3", "1", "2"]);
    assert_eq!(
        order(json!([{"x": {"order": "asc", "mode": "sum"}}])).await,
        ["1", "0", "3", "2"]
    );
    assert_eq!(
        order(json!([{"x": {"order": "desc", "mode": "min"}}])).await,
        ["1", "3", "0", "2"]
    );
    // A field the mapping lacks: an error, unless `unmapped_type` makes every document missing it.
    assert!(
        b.search("t", &json!({"sort": [{"nope": "asc"}]}))
            .await
            .is_err()
    );
    assert_eq!(
        order(json!([{"nope": {"unmapped_type": "long"}}, "_doc"])).await,
        ["0", "1", "2", "3"]
    );
    // search_after: the page strictly after the last hit's sort values.
    let first = b
        .search(
            "t",
            &json!({"sort": [{"tag": "asc"}, {"n": "asc"}], "size": 2}),
        )
        .await
        .unwrap();
    let last_sort = first["hits"]["hits"][1]["sort"].clone();
    // The second hit has no `n`: it shows the largest long, where it sorts.
    assert_eq!(last_sort, json!(["a", i64::MAX]));
    let next = b
        .search(
            "t",
            &json!({"sort": [{"tag": "asc"}, {"n": "asc"}], "size": 2, "search_after": last_sort}),
        )
        .await
        .unwrap();
    let ids: Vec<&str> = next["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["2", "0"]);
    assert!(
        b.search("t", &json!({"sort": ["_doc"], "search_after": [1, 2]}))
            .await
            .unwrap_err()
            .to_string()
            .contains("search_after has 2 value(s)")
    );
}

#[tokio::test]
async fn multi_match_cross_fields_and_phrase_prefix() {
    let (_d, b) = index(
        json!({"properties": {"first": {"type": "text"}, "last": {"type": "text"}}}),
        &[
            json!({"first": "John", "last": "Smith"}),
            json!({"first": "Smith", "last": "Jones"}),
            json!({"first": "John Smithson", "last": "Brown"}),
        ],
    )
    .await;
    let mm = |kind: &str, q: &str| json!({"multi_match": {"query": q, "type": kind, "fields": ["first", "last"], "operator": "and"}});
    // Every word in some field: only cross_fields finds John Smith across first and last.
    assert_eq!(ids(&b, mm("cross_fields", "john smith")).await, ["0"]);
    assert!(ids(&b, mm("best_fields", "john smith")).await.is_empty());
    assert_eq!(
        ids(&b, json!({"multi_match": {"query": "john smi", "type": "phrase_prefix", "fields": ["first", "last"]}})).await,
        ["2"]
    );
}

#[tokio::test]
async fn fields_docvalue_fields_and_stored_fields_show_values_as_the_mapping_reads_them() {
    let (_d, b) = index(
        json!({"properties": {"n": {"type": "integer"}, "d": {"type": "date"}, "price": {"type": "double"},
                              "tags": {"type": "keyword"}, "body": {"type": "text"},
                              "kept": {"type": "keyword", "store": true},
                              "obj": {"properties": {"a": {"type": "keyword"}, "b": {"type": "keyword"}}}}}),
        &[json!({"n": "7", "d": "2018-05-11", "price": 3.5, "tags": ["z", "a", "z"], "body": "Hello",
                 "kept": "k", "obj": {"a": "x", "b": "y"}})],
    )
    .await;
    let hit = |body: Value| {
        let b = &b;
        async move {
            let r = b.search("t", &body).await.unwrap();
            r["hits"]["hits"][0].clone()
        }
    };
    let h =
        hit(json!({"fields": ["n", "d", "tags", "obj.*", {"field": "price", "format": "0.00"}]}))
            .await;
    assert_eq!(h["fields"]["n"], json!([7]), "{h}");
    assert_eq!(h["fields"]["d"], json!(["2018-05-11T00:00:00.000Z"]));
    assert_eq!(h["fields"]["tags"], json!(["z", "a", "z"]));
    assert_eq!(h["fields"]["obj.a"], json!(["x"]));
    assert_eq!(h["fields"]["obj.b"], json!(["y"]));
    assert_eq!(h["fields"]["price"], json!(["3.50"]));
    assert!(h["_source"].is_object());
    let h =
        hit(json!({"docvalue_fields": ["tags", {"field": "d", "format": "epoch_millis"}]})).await;
    assert_eq!(h["fields"]["tags"], json!(["a", "z"]));
    assert_eq!(h["fields"]["d"], json!(["1525996800000"]));
    // stored_fields: only fields mapped with store; the source only when named.
    let h = hit(json!({"stored_fields": ["kept", "tags"]})).await;
    assert_eq!(h["fields"], json!({"kept": ["k"]}));
    assert!(h.get("_source").is_none() && h["_id"] == "0");
    let h = hit(json!({"stored_fields": ["_source"]})).await;
    assert!(h["_source"].is_object());
    let h = hit(json!({"stored_fields": "_none_"})).await;
    assert!(h.get("_id").is_none() && h.get("_source").is_none(), "{h}");
    for (body, message) in [
        (
            json!({"docvalue_fields": ["body"]}),
            "Can't load fielddata on [body]",
        ),
        (
            json!({"fields": [{"field": "tags", "format": "x"}]}),
            "does not support custom formats",
        ),
        (
            json!({"fields": [{"field": "n", "format": "0.0E0"}]}),
            "the number format [0.0E0] is not supported: exponents (E) are not",
        ),
        (
            json!({"stored_fields": ["_none_", "kept"]}),
            "cannot be used if [_none_] is used with other fields",
        ),
    ] {
        let err = b.search("t", &body).await.unwrap_err();
        assert!(err.to_string().contains(message), "{body}: {err}");
    }
}

#[tokio::test]
async fn terms_lookup_takes_its_values_from_another_document() {
    let (_d, b) = index(
        json!({"properties": {"user": {"type": "keyword"}}}),
        &[
            json!({"user": "ann"}),
            json!({"user": "bob"}),
            json!({"user": "cy"}),
        ],
    )
    .await;
    b.bulk(
        Some("people"),
        "{\"index\":{\"_id\":\"1\"}}\n{\"follows\":{\"names\":[\"ann\",\"cy\"]}}\n",
    )
    .await
    .unwrap();
    let lookup = |id: &str| json!({"terms": {"user": {"index": "people", "id": id, "path": "follows.names"}}});
    assert_eq!(ids(&b, lookup("1")).await, ["0", "2"]);
    // A document that is not there gives no terms.
    assert!(ids(&b, lookup("9")).await.is_empty());
    // In a filter aggregation too.
    let r = b
        .search(
            "t",
            &json!({"size": 0, "aggs": {"f": {"filter": lookup("1"), "meta": {"by": "lookup"}}}}),
        )
        .await
        .unwrap();
    assert_eq!(r["aggregations"]["f"]["doc_count"], 2);
    assert_eq!(r["aggregations"]["f"]["meta"], json!({"by": "lookup"}));
    let missing = b
        .search(
            "t",
            &json!({"query": {"terms": {"user": {"index": "nope", "id": "1", "path": "x"}}}}),
        )
        .await
        .unwrap_err();
    assert!(missing.to_string().contains("nope"), "{missing}");
}

/// A term named twice needs two occurrences, and removed stop words keep their positions, as
/// in Lucene's interval builder.
#[tokio::test]
async fn intervals_count_repeated_terms_and_removed_stop_words() {
    let (_d, b) = index(
        json!({"properties": {"text": {"type": "text", "analyzer": "stop"}}}),
        &[
            json!({"text": "cold the rain"}),
            json!({"text": "cold rain"}),
            json!({"text": "cold cold rain"}),
            json!({"text": "cold snow cold"}),
        ],
    )
    .await;
    let q = |rule: Value| json!({"intervals": {"text": rule}});
    assert_eq!(
        ids(&b, q(json!({"match": {"query": "cold cold"}}))).await,
        ["2", "3"]
    );
    // One rule is itself: `max_gaps` of a combination of one is not read, as in OpenSearch.
    assert_eq!(
        ids(
            &b,
            q(json!({"all_of": {"max_gaps": 0, "intervals": [{"match": {"query": "cold cold"}}]}}))
        )
        .await,
        ["2", "3"]
    );
    assert_eq!(
        ids(&b, q(json!({"all_of": {"intervals": [
            {"match": {"query": "cold"}}, {"match": {"query": "rain"}}, {"match": {"query": "cold"}}]}}))).await,
        ["2"]
    );
    // "the" holds a position between "cold" and "rain" in the query, as in the first text
    // (any word there will do: the second "cold" of the third text).
    assert_eq!(
        ids(
            &b,
            q(json!({"match": {"query": "cold the rain", "mode": "ordered", "max_gaps": 0}}))
        )
        .await,
        ["0", "2"]
    );
    assert_eq!(
        ids(
            &b,
            q(json!({"match": {"query": "cold rain", "mode": "ordered", "max_gaps": 0}}))
        )
        .await,
        ["1", "2"]
    );
}

#[tokio::test]
async fn intervals_match_terms_in_order_within_gaps_and_filters() {
    let (_d, b) = index(
        json!({"properties": {"text": {"type": "text"}, "k": {"type": "keyword"}}}),
        &[
            json!({"text": "the quick brown fox jumps"}),
            json!({"text": "brown the quick fox"}),
            json!({"text": "a fox is quick and very brown"}),
        ],
    )
    .await;
    let q = |rule: Value| json!({"intervals": {"text": rule}});
    assert_eq!(
        ids(
            &b,
            q(json!({"match": {"query": "quick fox", "mode": "ordered"}}))
        )
        .await,
        ["0", "1"]
    );
    // A phrase: no gaps.
    assert_eq!(
        ids(
            &b,
            q(json!({"match": {"query": "quick fox", "max_gaps": 0, "ordered": true}}))
        )
        .await,
        ["1"]
    );
    // Unordered: either order.
    assert_eq!(
        ids(&b, q(json!({"match": {"query": "fox quick"}}))).await,
        ["0", "1", "2"]
    );
    assert_eq!(
        ids(&b, q(json!({"all_of": {"ordered": true, "intervals": [
            {"match": {"query": "quick"}},
            {"any_of": {"intervals": [{"match": {"query": "fox"}}, {"match": {"query": "jumps"}}]}}]}}))).await,
        ["0", "1"]
    );
    // Filters compare spans: "quick … fox" around "brown" only in the first.
    assert_eq!(
        ids(
            &b,
            q(json!({"match": {"query": "quick fox", "mode": "ordered",
                                   "filter": {"containing": {"match": {"query": "brown"}}}}}))
        )
        .await,
        ["0"]
    );
    assert_eq!(
        ids(&b, q(json!({"match": {"query": "brown", "filter": {"before": {"match": {"query": "quick"}}}}}))).await,
        ["1"]
    );
    // Patterns expand to the terms of the field.
    assert_eq!(
        ids(
            &b,
            q(json!({"all_of": {"ordered": true, "intervals": [
            {"prefix": {"prefix": "QUI"}}, {"wildcard": {"pattern": "f?x"}}]}}))
        )
        .await,
        ["0", "1"]
    );
    assert_eq!(ids(&b, q(json!({"fuzzy": {"term": "jumsp"}}))).await, ["0"]);
    assert_eq!(
        ids(&b, q(json!({"regexp": {"pattern": "br.*n"}}))).await,
        ["0", "1", "2"]
    );
    // What the engine does not run, or OpenSearch refuses, is said.
    for (rule, message) in [
        (
            json!({"match": {"query": "fox", "use_field": "k"}}),
            "intervals use_field",
        ),
        (
            json!({"match": {"query": "fox", "filter": {"script": {}}}}),
            "intervals filter script",
        ),
        (
            json!({"match": {"query": "fox", "slop": 2}}),
            "[match] query does not support [slop]",
        ),
        (json!({"span": {}}), "Unknown interval type [span]"),
    ] {
        let err = refused(&b, q(rule.clone())).await;
        assert!(err.contains(message), "{rule}: {err}");
    }
    let err = refused(&b, json!({"intervals": {"k": {"match": {"query": "x"}}}})).await;
    assert!(
        err.contains("Can only use interval queries on text fields"),
        "{err}"
    );
}

/// `min_score` keeps the documents scoring at least it: in the hits, the total and the
/// aggregations, as OpenSearch does (it was accepted and ignored before).
#[tokio::test]
async fn min_score_leaves_out_lower_scores_everywhere() {
    let (_d, b) = index(
        json!({"properties": {"text": {"type": "text"}, "k": {"type": "keyword"}}}),
        &[
            json!({"text": "fox fox fox", "k": "a"}),
            json!({"text": "a fox among many other words in a long line", "k": "b"}),
            json!({"text": "no animals", "k": "c"}),
        ],
    )
    .await;
    let plain = b
        .search("t", &json!({"query": {"match": {"text": "fox"}}}))
        .await
        .unwrap();
    let scores: Vec<f64> = plain["hits"]["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["_score"].as_f64().unwrap())
        .collect();
    assert_eq!(scores.len(), 2);
    let between = (scores[0] + scores[1]) / 2.0;
    for size in [10, 0] {
        let r = b
            .search(
                "t",
                &json!({"query": {"match": {"text": "fox"}}, "min_score": between, "size": size,
                        "aggs": {"k": {"terms": {"field": "k"}}}}),
            )
            .await
            .unwrap();
        assert_eq!(r["hits"]["total"]["value"], 1, "{r}");
        assert_eq!(
            r["aggregations"]["k"]["buckets"],
            json!([{"key": "a", "doc_count": 1}])
        );
    }
    let err = b
        .search("t", &json!({"min_score": "high"}))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("[min_score] must be a number"), "{err}");
}

/// An index's settings lower its search limits (kept across a restart), in OpenSearch's words;
/// shard settings are accepted, and any other setting is refused by name.
#[tokio::test]
async fn index_settings_lower_the_limits_of_their_index() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    b.create_index(
        "small",
        &json!({"settings": {"index": {"max_result_window": 5, "number_of_shards": 2},
                             "index.max_docvalue_fields_search": "1",
                             "index.max_script_fields": 1, "index.max_regex_length": 3},
                "mappings": {"properties": {"k": {"type": "keyword"}, "n": {"type": "integer"}}}}),
    )
    .await
    .unwrap();
    b.create_index("plain", &json!({"mappings": {"properties": {}}}))
        .await
        .unwrap();
    let check = |b: EmbeddedBackend| async move {
        for (body, message) in [
            (
                json!({"from": 3, "size": 3}),
                "must be less than or equal to: [5] but was [6]. See the scroll api",
            ),
            (
                json!({"size": 1, "docvalue_fields": ["k", "n"]}),
                "Must be less than or equal to: [1] but was [2]. This limit can be set by changing the [index.max_docvalue_fields_search] index level setting.",
            ),
            (
                json!({"size": 1, "script_fields": {"a": {"script": "1"}, "b": {"script": "2"}}}),
                "too many script_fields. Must be less than or equal to: [1] but was [2]",
            ),
            (
                json!({"size": 1, "query": {"regexp": {"k": "abcd"}}}),
                "The length of regex [4] used in the Regexp Query request has exceeded the allowed maximum of [3]",
            ),
            (
                json!({"size": 1, "rescore": {"window_size": 20000, "query": {"rescore_query": {"match_all": {}}}}}),
                "Rescore window [20000] is too large. It must be less than [10000].",
            ),
        ] {
            let err = b.search("small", &body).await.unwrap_err().to_string();
            assert!(err.contains(message), "{body}: {err}");
        }
        // Another index keeps the backend's limits.
        b.search("plain", &json!({"from": 3, "size": 3}))
            .await
            .unwrap();
    };
    check(b).await;
    check(EmbeddedBackend::open(dir.path()).unwrap()).await;
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    for settings in [
        json!({"analysis": {"analyzer": {"mine": {"type": "custom", "tokenizer": "standard"}}}}),
        json!({"index.codec": "best_compression"}),
    ] {
        let err = b
            .create_index("refused", &json!({"settings": settings}))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("index setting [index."), "{err}");
    }
    assert!(b.search("refused", &json!({})).await.is_err());
}

/// Fuzzy terms kept as Lucene keeps them: over the whole index (not per segment), the most alike
/// first (1 - edits / the shorter length), then in term order; a constant-score rewrite keeps
/// them all; fuzzy options on a field compared whole are refused by name.
#[tokio::test]
async fn fuzzy_expansions_are_the_most_alike_terms_of_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let b = EmbeddedBackend::open(dir.path()).unwrap();
    b.create_index(
        "t",
        &json!({"mappings": {"properties": {"w": {"type": "text"}, "k": {"type": "keyword"}}}}),
    )
    .await
    .unwrap();
    // Two bulk requests: two segments.
    for (id, w) in [("1", "abe"), ("2", "abd"), ("3", "abc"), ("4", "abcde")] {
        let nd = format!("{{\"index\":{{\"_id\":\"{id}\"}}}}\n{{\"w\":\"{w}\",\"k\":\"{w}\"}}\n");
        b.bulk(Some("t"), &nd).await.unwrap();
    }
    let ids = |r: Value| -> Vec<String> {
        let mut v: Vec<String> = r["hits"]["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["_id"].as_str().unwrap().to_owned())
            .collect();
        v.sort();
        v
    };
    let search = |q: Value| {
        let b = b.clone();
        async move { b.search("t", &json!({"query": q})).await.unwrap() }
    };
    // "abc", "abd" and "abe" (in three segments) are as alike to "abf"; "abc" comes first in
    // term order.
    assert_eq!(
        ids(
            search(json!({"fuzzy": {"w": {"value": "abf", "fuzziness": 1, "max_expansions": 1}}}))
                .await
        ),
        ["3"]
    );
    // "abcde" (1 - 1/4) is more alike to "abcd" than "abc" (1 - 1/3).
    assert_eq!(
        ids(search(
            json!({"match": {"w": {"query": "abcd", "fuzziness": 1, "max_expansions": 1}}})
        )
        .await),
        ["4"]
    );
    assert_eq!(
        ids(search(
            json!({"fuzzy": {"w": {"value": "abf", "fuzziness": 1, "max_expansions": 1,
            "rewrite": "constant_score"}}})
        )
        .await),
        ["1", "2", "3"]
    );
    // A keyword's whole value matched fuzzily; an analyzer on it is refused by name.
    assert_eq!(
        ids(search(json!({"match": {"k": {"query": "abcdf", "fuzziness": 1}}})).await),
        ["4"]
    );
    let err = b
        .search(
            "t",
            &json!({"query": {"match": {"k": {"query": "abd", "analyzer": "standard"}}}}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("analyzer on a field that is not text"),
        "{err}"
    );
    let err = b
        .search("t", &json!({"query": {"match": {"w": {"query": "abd", "fuzziness": 1, "max_expansions": 5000}}}}))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("(search limit max_clause_count)"), "{err}");
}

/// Found by a held-out check (another engine's Elasticsearch compatibility suite, run once): each
/// answered here as Elasticsearch and OpenSearch answer.
mod held_out {
    use super::*;

    async fn events() -> (tempfile::TempDir, EmbeddedBackend) {
        let mapping = json!({"properties": {
            "type": {"type": "text", "fielddata": true},
            "message": {"type": "text"},
            "login": {"type": "keyword"},
            "size": {"type": "integer"}}});
        let docs = [
            json!({"type": "PushEvent", "message": "fix the parser", "login": "ann", "size": 1}),
            json!({"type": "PushEvent", "message": "fixes for docs", "login": "bob", "size": 2}),
            json!({"type": "IssuesEvent", "message": "fixture added", "login": "ann", "size": 3}),
            json!({"type": "WatchEvent", "message": "fixed", "login": "cid", "size": 4}),
        ];
        index(mapping, &docs).await
    }

    #[tokio::test]
    async fn minimum_should_match_above_the_should_clauses_matches_nothing() {
        let (_d, b) = events().await;
        let query = |msm: Value| {
            json!({"bool": {"must": [{"match": {"type": "PushEvent"}}],
                            "should": [{"term": {"login": "ann"}}],
                            "minimum_should_match": msm}})
        };
        assert_eq!(ids(&b, query(json!(1))).await, ["0"]);
        assert!(ids(&b, query(json!(2))).await.is_empty());
        // The same in a match query: three words cannot match four.
        let words = json!({"match": {"message": {"query": "fix the parser",
                                                  "minimum_should_match": 4}}});
        assert!(ids(&b, words).await.is_empty());
    }

    #[tokio::test]
    async fn query_string_refuses_default_field_beside_fields() {
        let (_d, b) = events().await;
        let e = refused(
            &b,
            json!({"query_string": {"query": "fix", "default_field": "message",
                                    "fields": ["type"]}}),
        )
        .await;
        assert!(
            e.contains("cannot use [fields] parameter in conjunction with [default_field]"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn one_word_of_match_phrase_prefix_expands_to_max_expansions_words() {
        let (_d, b) = events().await;
        let prefix = |n: Option<u64>| {
            let mut body = json!({"query": "fix"});
            if let Some(n) = n {
                body["max_expansions"] = json!(n);
            }
            json!({"match_phrase_prefix": {"message": body}})
        };
        // fix, fixed, fixes, fixture: all four by default (50), the first two in term order
        // (fix, fixed) with max_expansions 2.
        assert_eq!(ids(&b, prefix(None)).await.len(), 4);
        let mut two = ids(&b, prefix(Some(2))).await;
        two.sort();
        assert_eq!(two, ["0", "3"]);
    }

    #[tokio::test]
    async fn multi_match_phrase_takes_lenient() {
        let (_d, b) = events().await;
        let query = json!({"multi_match": {"query": "fix the", "type": "phrase",
                                           "fields": ["message", "size"], "lenient": true}});
        assert_eq!(ids(&b, query).await, ["0"]);
        // Without it, the number field cannot take the text.
        let strict = json!({"multi_match": {"query": "fix the", "type": "phrase",
                                            "fields": ["message", "size"]}});
        refused(&b, strict).await;
    }

    #[tokio::test]
    async fn a_text_field_with_fielddata_is_aggregated_by_its_words() {
        let (_d, b) = events().await;
        let r = b
            .search(
                "t",
                &json!({"size": 0, "aggs": {"types": {"terms": {"field": "type"}}}}),
            )
            .await
            .unwrap();
        let buckets: Vec<(String, u64)> = r["aggregations"]["types"]["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                (
                    b["key"].as_str().unwrap().to_owned(),
                    b["doc_count"].as_u64().unwrap(),
                )
            })
            .collect();
        // The analysed words (lowercased), as OpenSearch's field data holds them.
        assert_eq!(
            buckets,
            [
                ("pushevent".into(), 2),
                ("issuesevent".into(), 1),
                ("watchevent".into(), 1)
            ]
        );
        // Without field data, still refused by name.
        let e = b
            .search(
                "t",
                &json!({"size": 0, "aggs": {"m": {"terms": {"field": "message"}}}}),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot be aggregated"), "{e}");
    }

    #[tokio::test]
    async fn fielddata_is_read_strictly() {
        let dir = tempfile::tempdir().unwrap();
        let b = EmbeddedBackend::open(dir.path()).unwrap();
        for (mapping, says) in [
            (
                json!({"login": {"type": "keyword", "fielddata": true}}),
                "text fields only",
            ),
            (
                json!({"t": {"type": "text", "fielddata_frequency_filter": {"min": 0.1}}}),
                "[fielddata_frequency_filter] is not supported",
            ),
        ] {
            let e = b
                .create_index("x", &json!({"properties": mapping}))
                .await
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{e}");
        }
    }

    #[tokio::test]
    async fn custom_normalizers_from_the_settings_apply_to_keywords() {
        let dir = tempfile::tempdir().unwrap();
        let b = EmbeddedBackend::open(dir.path()).unwrap();
        let body = json!({
            "settings": {"analysis": {"normalizer": {
                "folded": {"type": "custom", "filter": ["lowercase", "asciifolding"]},
                "keepcase": {"type": "custom"}}}},
            "mappings": {"properties": {
                "city": {"type": "keyword", "normalizer": "folded"},
                "code": {"type": "keyword", "normalizer": "keepcase"}}}});
        b.create_index("t", &body).await.unwrap();
        let docs = "{\"index\":{\"_id\":\"0\"}}\n{\"city\":\"Zürich\",\"code\":\"AbC\"}\n";
        assert!(b.bulk(Some("t"), docs).await.unwrap().errors.is_empty());
        assert_eq!(ids(&b, json!({"term": {"city": "ZURICH"}})).await, ["0"]);
        assert_eq!(ids(&b, json!({"term": {"code": "AbC"}})).await, ["0"]);
        assert!(ids(&b, json!({"term": {"code": "abc"}})).await.is_empty());
        // The aggregation reads the normalized value.
        let r = b
            .search(
                "t",
                &json!({"size": 0, "aggs": {"c": {"terms": {"field": "city"}}}}),
            )
            .await
            .unwrap();
        assert_eq!(r["aggregations"]["c"]["buckets"][0]["key"], "zurich");
        // Reopened from disk, the normalizers are there again.
        drop(b);
        let b = EmbeddedBackend::open(dir.path()).unwrap();
        assert_eq!(ids(&b, json!({"term": {"city": "zurich"}})).await, ["0"]);
        // A mapping update may name them; a name the index lacks is refused.
        b.put_mapping(
            "t",
            &json!({"properties": {"town": {"type": "keyword", "normalizer": "folded"}}}),
        )
        .await
        .unwrap();
        let e = b
            .put_mapping(
                "t",
                &json!({"properties": {"x": {"type": "keyword", "normalizer": "nope"}}}),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("normalizer [nope] has not been configured"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn what_a_custom_normalizer_cannot_do_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let b = EmbeddedBackend::open(dir.path()).unwrap();
        for (normalizer, says) in [
            (
                json!({"type": "custom", "filter": ["uppercase"]}),
                "[uppercase]",
            ),
            (
                json!({"type": "custom", "char_filter": ["html_strip"]}),
                "[char_filter]",
            ),
            (json!({"type": "pattern"}), "of type [pattern]"),
        ] {
            let body = json!({"settings": {"analysis": {"normalizer": {"n": normalizer}}},
                              "mappings": {"properties": {"k": {"type": "keyword", "normalizer": "n"}}}});
            let e = b.create_index("x", &body).await.unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
        // A normalizer the settings do not define.
        let body =
            json!({"mappings": {"properties": {"k": {"type": "keyword", "normalizer": "n"}}}});
        let e = b.create_index("x", &body).await.unwrap_err().to_string();
        assert!(e.contains("normalizer [n] has not been configured"), "{e}");
    }

    #[tokio::test]
    async fn an_index_analysed_by_an_earlier_english_analyzer_is_indexed_again_when_opened() {
        let dir = tempfile::tempdir().unwrap();
        let mapping = json!({"properties": {"t": {"type": "text", "analyzer": "english"},
                                            "k": {"type": "keyword"}}});
        let b = EmbeddedBackend::open(dir.path()).unwrap();
        b.create_index("e", &mapping).await.unwrap();
        b.create_index("k", &json!({"properties": {"k": {"type": "keyword"}}}))
            .await
            .unwrap();
        for (name, doc) in [
            ("e", r#"{"t":"the dog's bone","k":"x"}"#),
            ("k", r#"{"k":"x"}"#),
        ] {
            let docs = format!("{{\"index\":{{\"_id\":\"0\"}}}}\n{doc}\n");
            assert!(b.bulk(Some(name), &docs).await.unwrap().errors.is_empty());
        }
        drop(b);
        // As a build before the analysis version was written left them.
        let state = |name: &str| -> Value {
            let text = std::fs::read_to_string(dir.path().join(name).join("mapping.json")).unwrap();
            serde_json::from_str(&text).unwrap()
        };
        for name in ["e", "k"] {
            let mut old = state(name);
            assert_eq!(old["analysis"], 2);
            old.as_object_mut().unwrap().remove("analysis");
            std::fs::write(dir.path().join(name).join("mapping.json"), old.to_string()).unwrap();
        }
        let b = EmbeddedBackend::open(dir.path()).unwrap();
        let phrase = json!({"match_phrase": {"t": "dog's bone"}});
        assert_eq!(crate::fixtures::hit_ids(&b, "e", phrase).await, ["0"]);
        assert_eq!(
            crate::fixtures::hit_ids(&b, "k", json!({"term": {"k": "x"}})).await,
            ["0"]
        );
        // The index with an English text field was indexed again (a new generation) and says so;
        // the other was left as it was.
        assert_eq!(
            (
                state("e")["generation"].clone(),
                state("e")["analysis"].clone()
            ),
            (json!(1), json!(2))
        );
        assert_eq!(state("k")["generation"], 0);
    }

    #[tokio::test]
    async fn aggregations_over_a_pattern_that_matches_no_index_are_left_out() {
        let (_d, b) = events().await;
        let r = b
            .search(
                "nothing-*",
                &json!({"aggs": {"logins": {"terms": {"field": "login"}}}}),
            )
            .await
            .unwrap();
        assert_eq!(r["hits"]["total"]["value"], 0);
        assert!(r.get("aggregations").is_none(), "{r}");
    }
}
