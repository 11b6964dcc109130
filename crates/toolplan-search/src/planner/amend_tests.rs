//! Unit tests of the amendments ([`super`]): small mappings, bodies and responses.

use serde_json::json;

use super::*;
use crate::planner::fixtures::with_context;

/// The amended body of `body` for `question` (its run answering `hits` hits), or `None`.
fn amended(question: &str, body: Value, hits: Option<u64>) -> Option<Value> {
    let response = hits.map(|n| json!({"hits": {"total": {"value": n}, "hits": []}}));
    with_context(question, |cx| amend(cx, &body, response.as_ref())).map(|(b, notes)| {
        assert!(!notes.is_empty());
        b
    })
}

#[test]
fn a_named_value_becomes_a_filter() {
    let body = json!({"size": 0, "aggs": {"a": {"avg": {"field": "sepal_length_in_cm"}}}});
    assert_eq!(
        amended(
            "What is the average sepal length of virginica flowers?",
            body,
            Some(150)
        ),
        Some(
            json!({"size": 0, "aggs": {"a": {"avg": {"field": "sepal_length_in_cm"}}},
            "query": {"bool": {"filter": [{"term": {"species.keyword": "virginica"}}]}}})
        )
    );
    // Beside a query that is not a bool; a match_all is dropped; a plural names the value.
    assert_eq!(
        amended(
            "Which billing tickets mention a refund?",
            json!({"query": {"match": {"subject": "refund"}}}),
            Some(3)
        ),
        Some(
            json!({"query": {"bool": {"must": [{"match": {"subject": "refund"}}],
            "filter": [{"term": {"category": "billing"}}]}}})
        )
    );
    assert_eq!(
        amended(
            "How many billing or login tickets are there?",
            json!({"query": {"match_all": {}}}),
            Some(9)
        ),
        Some(
            json!({"query": {"bool": {"filter": [{"terms": {"category": ["billing", "login"]}}]}}})
        )
    );
}

#[test]
fn a_negated_value_is_excluded() {
    let body = json!({"size": 0, "query": {"bool": {"filter": [
        {"term": {"category": "billing"}}, {"term": {"status": "open"}}]}}});
    // "open" is the sample's status and not in the question: it goes; "closed" is excluded.
    assert_eq!(
        amended("How many billing tickets are not closed?", body, Some(4)),
        Some(json!({"size": 0, "query": {"bool": {
            "filter": [{"term": {"category": "billing"}}],
            "must_not": [{"term": {"status": "closed"}}]}}}))
    );
}

#[test]
fn copied_sample_values_are_dropped() {
    let body = json!({"query": {"bool": {
        "filter": [{"range": {"price": {"gte": 4.99, "lte": 100}}}],
        "must": [{"match": {"sepal_length_in_cm": "5.1"}}, {"match": {"subject": "parcel"}}]}}});
    assert_eq!(
        amended(
            "Which tickets about a parcel cost at most 100?",
            body,
            Some(2)
        ),
        Some(json!({"query": {"bool": {
            "filter": [{"range": {"price": {"lte": 100}}}],
            "must": [{"match": {"subject": "parcel"}}]}}}))
    );
    // A value the question names stays, and a body with nothing to amend gives none.
    let kept = json!({"query": {"range": {"price": {"gte": 4.99}}}});
    assert_eq!(
        amended("Which tickets cost at least 4.99?", kept, Some(1)),
        None
    );
    // A range of one value the question never names goes, and so does the emptied query.
    let instant = json!({"query": {"bool": {"filter": [
        {"range": {"created_at": {"gte": "2025-01-01", "lte": "2025-01-01"}}}]}}});
    assert_eq!(
        amended("List the tickets", instant, Some(0)),
        Some(json!({}))
    );
}

#[test]
fn terms_that_exclude_each_other_merge_when_nothing_matched() {
    let body = json!({"query": {"bool": {"filter": [
        {"term": {"category": "billing"}}, {"term": {"category": "login"}}]}}});
    assert_eq!(
        amended("How many billing or login tickets?", body.clone(), Some(0)),
        Some(json!({"query": {"bool": {"filter": [
            {"terms": {"category": ["billing", "login"]}}]}}}))
    );
    // With hits, the query is left as it is.
    assert_eq!(
        amended("How many billing or login tickets?", body, Some(2)),
        None
    );
}

#[test]
fn the_aggregation_the_question_asks_for_is_added() {
    // The one numeric field the question names best: "sepal length", not "sepal width".
    assert_eq!(
        amended(
            "What is the total sepal length of setosa flowers?",
            json!({"query": {"term": {"species.keyword": "setosa"}}}),
            Some(50)
        ),
        Some(
            json!({"query": {"term": {"species.keyword": "setosa"}}, "size": 0,
            "aggs": {"sum_sepal_length_in_cm": {"sum": {"field": "sepal_length_in_cm"}}}})
        )
    );
    // Documents: a sort and as many hits as the question names.
    assert_eq!(
        amended(
            "Which 3 tickets have the highest price?",
            json!({"size": 10}),
            Some(10)
        ),
        Some(json!({"size": 3, "sort": [{"price": {"order": "desc"}}]}))
    );
    assert_eq!(
        amended(
            "Which ticket was created most recently?",
            json!({}),
            Some(10)
        ),
        Some(json!({"sort": [{"created_at": {"order": "desc"}}], "size": 1}))
    );
    // A count per group: the keyword field named after "each".
    assert_eq!(
        amended(
            "How many tickets are there for each status?",
            json!({"size": 0}),
            Some(10)
        ),
        Some(json!({"size": 0, "aggs": {"by_status": {"terms": {"field": "status", "size": 50}}}}))
    );
    // Two fields named equally well ("sepal"), or none: nothing is guessed.
    assert_eq!(
        amended("Which flower has the longest sepal?", json!({}), Some(10)),
        None
    );
    assert_eq!(
        amended("What is the average of it all?", json!({}), Some(10)),
        None
    );
    // An aggregation already there is left alone.
    let has = json!({"size": 0, "aggs": {"m": {"max": {"field": "price"}}}});
    assert_eq!(amended("What is the highest price?", has, Some(10)), None);
}

#[test]
fn odd_bodies_are_left_alone() {
    assert_eq!(
        amended("What is the highest price?", json!([1, 2]), None),
        None
    );
    assert_eq!(
        amended(
            "Which billing tickets?",
            json!({"query": {"bool": {"filter": "x"}}}),
            None
        ),
        Some(json!({"query": {"bool": {"filter": ["x", {"term": {"category": "billing"}}]}}}))
    );
}

#[test]
fn a_value_the_question_does_not_name_goes_when_it_names_another() {
    let body = json!({"size": 0, "query": {"bool": {"must": [
        {"term": {"species.keyword": "virginica"}}]}}});
    assert_eq!(
        amended("How many flowers are not setosa?", body, Some(50)),
        Some(json!({"size": 0, "query": {"bool": {
            "must_not": [{"term": {"species.keyword": "setosa"}}]}}}))
    );
    // The query itself, not in a bool.
    assert_eq!(
        amended(
            "How many flowers are not setosa?",
            json!({"query": {"term": {"species.keyword": "virginica"}}}),
            Some(50)
        ),
        Some(json!({"query": {"bool": {"must_not": [{"term": {"species.keyword": "setosa"}}]}}}))
    );
    let terms = json!({"query": {"terms": {"category": ["billing", "shipping"]}}});
    let kept =
        json!({"query": {"bool": {"filter": [{"terms": {"category": ["billing", "shipping"]}}]}}});
    // Named: both stay. Not named, and no other value named: left to the model's reading.
    assert_eq!(
        amended("Which billing or shipping tickets?", terms.clone(), Some(3)),
        None
    );
    assert_eq!(
        amended("Which tickets about parcels?", terms, Some(3)),
        None
    );
    assert_eq!(
        amended("Which billing tickets?", kept, Some(3)),
        Some(json!({"query": {"bool": {"filter": [{"terms": {"category": ["billing"]}}]}}}))
    );
}

#[test]
fn words_are_looked_for_in_the_text_field_when_nothing_matched() {
    let body =
        json!({"query": {"bool": {"must": [{"match_phrase": {"species.keyword": "seto"}}]}}});
    let text = json!({"query": {"bool": {"must": [{"match_phrase": {"species": "seto"}}]}}});
    assert_eq!(
        amended("Which flowers look like seto?", body.clone(), Some(0)),
        Some(text)
    );
    assert_eq!(
        amended("Which flowers look like seto?", body, Some(2)),
        None
    );
}

#[test]
fn a_value_nothing_in_the_question_asks_for_goes_beside_one_it_names() {
    // "open" is named; neither "billing" nor the category is: the category filter goes.
    let body = json!({"query": {"bool": {"filter": [
        {"term": {"status": "open"}}, {"match": {"category": "billing"}}]}}});
    assert_eq!(
        amended("How many open tickets mention a refund?", body, Some(4)),
        Some(json!({"query": {"bool": {"filter": [{"term": {"status": "open"}}]}}}))
    );
    // Named by its field, it stays.
    let body = json!({"query": {"bool": {"filter": [
        {"term": {"status": "open"}}, {"term": {"category": "billing"}}]}}});
    assert_eq!(
        amended("How many open tickets have a category?", body, Some(4)),
        None
    );
}

#[test]
fn a_named_value_looked_for_in_text_goes_to_its_keyword_field() {
    let body = json!({"size": 0, "query": {"bool": {"must": [
        {"match_phrase": {"subject": "Billing"}}], "filter": [{"term": {"status": "open"}}]}}});
    assert_eq!(
        amended(
            "How many open billing tickets are there?",
            body.clone(),
            Some(2)
        ),
        Some(json!({"size": 0, "query": {"bool": {"must": [
            {"term": {"category": "billing"}}], "filter": [{"term": {"status": "open"}}]}}}))
    );
    // The question's words around the value, too; not two values at once.
    assert_eq!(
        amended(
            "How many open billing tickets are there?",
            json!({"query": {"match_phrase": {"subject": "billing tickets"}}}),
            Some(0)
        ),
        Some(
            json!({"query": {"bool": {"filter": [{"term": {"status": "open"}}],
            "must": [{"term": {"category": "billing"}}]}}})
        )
    );
    assert_eq!(
        amended(
            "Which billing or login tickets?",
            json!({"query": {"match": {"subject": "billing login"}}}),
            Some(0)
        ),
        None
    );
    // Words the question does not have: the model's own reading, left alone.
    assert_eq!(
        amended(
            "How many billing tickets?",
            json!({"query": {"bool": {"must": [{"match": {"subject": "billing refund"}}],
                "filter": [{"term": {"category": "billing"}}]}}}),
            Some(2)
        ),
        None
    );
    // The question names the text field: the words are looked for there.
    assert_eq!(
        amended(
            "How many open tickets have billing in the subject?",
            body,
            Some(2)
        ),
        None
    );
    // A word that is no keyword value stays in the text.
    assert_eq!(
        amended(
            "How many tickets mention a refund?",
            json!({"query": {"match": {"subject": "refund"}}}),
            Some(2)
        ),
        None
    );
}
