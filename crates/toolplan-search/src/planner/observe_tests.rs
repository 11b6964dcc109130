//! Unit tests of the execution-guided checks ([`super`]): small mappings, bodies and responses.

use serde_json::json;

use super::*;
use crate::planner::fixtures::with_context;

/// The observations of `body` for `question`, with `response` as its run's answer.
fn seen(question: &str, body: Value, response: Option<Value>) -> Vec<String> {
    with_context(question, |cx| observations(cx, &body, response.as_ref()))
}

fn hits(n: u64) -> Option<Value> {
    Some(json!({"hits": {"total": {"value": n, "relation": "eq"}, "hits": []}}))
}

#[test]
fn words_and_whole_word_names() {
    assert_eq!(
        words("How many Science-Fiction books?"),
        " how many science fiction books "
    );
    let q = words("How many shipping tickets are not closed? Mysteries and boxes");
    assert!(names(&q, "shipping"));
    assert!(names(&q, "Closed"));
    assert!(names(&q, "mystery"));
    assert!(names(&q, "box"));
    assert!(!names(&q, "ship"));
    assert!(!names(&q, ""));
    assert_eq!(
        numbers_in("between 3.0 and 3.2 cm, 550 pages."),
        [3.0, 3.2, 550.0]
    );
}

#[test]
fn the_observation_run_caps_the_size() {
    assert_eq!(observation_body(&json!({"query": {}}))["size"], 10);
    assert_eq!(observation_body(&json!({"size": 500}))["size"], 10);
    assert_eq!(observation_body(&json!({"size": 0}))["size"], 0);
    assert_eq!(
        observation_body(&json!({"size": 3, "aggs": {}}))["aggs"],
        json!({})
    );
    assert_eq!(total_hits(&json!({"hits": {"total": 4}})), Some(4));
    assert_eq!(total_hits(&json!({})), None);
}

#[test]
fn no_hits_is_observed_unless_the_question_is_yes_or_no() {
    let body = json!({"query": {"match": {"subject": "dragon"}}});
    let found = seen("Which tickets mention a dragon?", body.clone(), hits(0));
    assert_eq!(
        found,
        [
            "it matched no documents; check the field names and that values are spelled as stored (see the values of keyword fields)"
        ]
    );
    assert!(seen("Which tickets mention a dragon?", body.clone(), hits(3)).is_empty());
    assert!(
        seen(
            "Are there any tickets about a dragon?",
            body.clone(),
            hits(0)
        )
        .is_empty()
    );
    assert!(seen("Which tickets, if any, mention a dragon?", body, hits(0)).is_empty());
}

#[test]
fn a_named_keyword_value_the_query_ignores_is_observed() {
    let found = seen(
        "How many shipping or billing tickets are not closed?",
        json!({"size": 0, "query": {"bool": {"must_not": [{"term": {"status": "closed"}}]}}}),
        hits(5),
    );
    assert_eq!(
        found,
        [
            "the question names 'shipping', 'billing' (values of category) but the query does not filter on them"
        ]
    );
    // Named anywhere in the body (another spelling of the separators, another case) is enough.
    let found = seen(
        "How many in-progress tickets about Shipping?",
        json!({"size": 0, "query": {"bool": {"filter": [{"term": {"status": "in progress"}}],
               "must": [{"match": {"subject": "SHIPPING"}}]}}}),
        hits(2),
    );
    assert!(found.is_empty(), "{found:?}");
    // Short values and words inside other words are not looked for.
    assert!(
        seen(
            "Is it ok to ship?",
            json!({"query": {"match_all": {}}}),
            hits(2)
        )
        .is_empty()
    );
    // Plurals count.
    let found = seen(
        "List the gardens.",
        json!({"query": {"match_all": {}}}),
        hits(9),
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("the question names 'Garden' (a value of category)"));
}

#[test]
fn a_keyword_value_in_another_case_is_observed() {
    let found = seen(
        "Find garden tickets.",
        json!({"query": {"term": {"category": "garden"}}}),
        hits(0),
    );
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(
        found[1],
        "category stores 'Garden', not 'garden': keyword values match exactly, in the stored case"
    );
}

#[test]
fn a_range_of_one_instant_is_observed() {
    let body = json!({"query": {"bool": {"filter": [{"range": {"created_at": {
        "gte": "2026-11-23T09:51:50Z", "lte": "2026-11-23T09:51:50Z"}}}],
        "must": [{"match": {"subject": "password"}}]}}});
    let found = seen("Find tickets about a password.", body, hits(1));
    assert_eq!(
        found,
        [
            "the range on created_at allows one instant only (\"2026-11-23T09:51:50Z\"); filter on dates only when the question asks"
        ]
    );
    let found = seen(
        "Which tickets cost 3?",
        json!({"query": {"range": {"price": {"gte": 3, "lte": 3.0}}}}),
        hits(1),
    );
    assert!(found.is_empty(), "a value the question names: {found:?}");
    let found = seen(
        "Which tickets are cheap?",
        json!({"query": {"range": {"price": {"gte": 2, "lte": 2}}}}),
        hits(1),
    );
    assert_eq!(
        found,
        [
            "the range on price allows the one value 2 only; filter on price only as the question asks"
        ]
    );
}

#[test]
fn sample_values_the_question_does_not_name_are_observed() {
    let found = seen(
        "Which tickets are about billing?",
        json!({"query": {"bool": {"filter": [{"range": {"price": {"gte": 4.99}}}, {"term": {"category": "billing"}}]}}}),
        hits(4),
    );
    assert_eq!(
        found,
        [
            "the range on price uses 4.99, the sample document's value, which the question does not mention; filter only on what the question asks"
        ]
    );
    // The question names the number: no observation.
    let found = seen(
        "Which billing tickets cost at least 4.99?",
        json!({"query": {"bool": {"filter": [{"range": {"price": {"gte": 4.99}}}, {"term": {"category": "billing"}}]}}}),
        hits(4),
    );
    assert!(found.is_empty(), "{found:?}");
    // Text copied from the sample, through a sub-field too.
    let found = seen(
        "Which ticket is the oldest?",
        json!({"query": {"term": {"name.keyword": "Ann Lee"}}, "sort": [{"created_at": "asc"}]}),
        hits(1),
    );
    assert_eq!(
        found,
        [
            "the query looks for \"Ann Lee\" in name.keyword, the sample document's value, which the question does not mention; filter only on what the question asks"
        ]
    );
    assert!(
        seen(
            "What did Ann Lee ask?",
            json!({"query": {"match": {"name": {"query": "ann lee"}}}}),
            hits(1)
        )
        .is_empty()
    );
}

#[test]
fn missing_aggregations_are_observed() {
    let plain = json!({"size": 0, "query": {"term": {"category": "billing"}}});
    let found = seen(
        "What is the average price of billing tickets?",
        plain.clone(),
        hits(3),
    );
    assert_eq!(
        found,
        [
            "the question asks for the 'average' but the query has no aggregation that gives it: use an avg aggregation on the field (size 0)"
        ]
    );
    let avg = json!({"size": 0, "query": {"term": {"category": "billing"}},
                     "aggs": {"a": {"avg": {"field": "price"}}}});
    assert!(
        seen(
            "What is the average price of billing tickets?",
            avg,
            hits(3)
        )
        .is_empty()
    );

    let found = seen(
        "What is the total price of billing tickets?",
        plain.clone(),
        hits(3),
    );
    assert!(found[0].contains("use a sum aggregation"), "{found:?}");
    assert!(seen("How many billing tickets in total?", plain.clone(), hits(3)).is_empty());

    let found = seen(
        "What is the highest price of a billing ticket?",
        plain.clone(),
        hits(3),
    );
    assert!(
        found[0].contains("'highest'") && found[0].contains("or sort"),
        "{found:?}"
    );
    let sorted =
        json!({"size": 1, "query": {"term": {"category": "billing"}}, "sort": [{"price": "desc"}]});
    assert!(
        seen(
            "Which billing ticket is the most expensive?",
            sorted,
            hits(3)
        )
        .is_empty()
    );
    let found = seen(
        "Which billing ticket is the cheapest?",
        plain.clone(),
        hits(3),
    );
    assert!(found[0].contains("'cheapest'"), "{found:?}");

    let found = seen(
        "How many tickets are there per status?",
        json!({"size": 0}),
        hits(9),
    );
    assert_eq!(
        found,
        [
            "the question asks for the 'per' but the query has no aggregation that gives it: use a terms aggregation on the field to group by"
        ]
    );
    let grouped = json!({"size": 0, "aggs": {"s": {"terms": {"field": "status"}}}});
    assert!(
        seen(
            "How many tickets are there for each status?",
            grouped,
            hits(9)
        )
        .is_empty()
    );
}

#[test]
fn a_count_only_body_for_a_question_asking_for_documents_is_observed() {
    let body = json!({"size": 0, "query": {"range": {"price": {"gt": 550}}}});
    let found = seen(
        "List the tickets with a price above 550.",
        body.clone(),
        hits(2),
    );
    assert_eq!(
        found,
        [
            "it returns only the number of matches (size 0, no aggregations), while the question asks for documents: set size to the number of documents wanted"
        ]
    );
    assert!(
        seen(
            "How many tickets have a price above 550?",
            body.clone(),
            hits(2)
        )
        .is_empty()
    );
    assert!(seen("Is there a ticket with a price above 550?", body, hits(2)).is_empty());
}
