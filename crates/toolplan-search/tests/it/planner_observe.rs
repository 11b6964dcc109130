//! Query-DSL planning with what the index knows: the frequent values of the keyword fields in the
//! prompt (bounded), and the execution-guided checks — a valid body is run, and what its run shows
//! (no hits, a named value ignored …) goes back to the model once, on the embedded backend, with a
//! scripted model.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolplan_search::planner::values::{MAX_VALUE_CHARS, MAX_VALUES_PER_FIELD};
use toolplan_search::{
    DslPlan, DslPlanner, EmbeddedBackend, PlanParameters, SearchBackend, SearchError,
};

use crate::planner::{Replay, replay};

/// An embedded backend with a `tickets` index: text subject, keyword category and status, a float
/// price; `shipping` the most frequent category, then `billing`, then `login`.
async fn tickets() -> (tempfile::TempDir, Arc<dyn SearchBackend>) {
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(EmbeddedBackend::open(dir.path()).unwrap());
    backend
        .create_index(
            "tickets",
            &json!({"mappings": {"properties": {
                "subject": {"type": "text"},
                "category": {"type": "keyword"},
                "status": {"type": "keyword"},
                "price": {"type": "float"}
            }}}),
        )
        .await
        .unwrap();
    let docs = [
        ("parcel arrived damaged", "shipping", "open", 5.0),
        ("delivery is late", "shipping", "closed", 7.5),
        ("parcel lost", "shipping", "open", 12.0),
        ("wrong address", "shipping", "closed", 3.0),
        ("charged twice", "billing", "open", 20.0),
        ("refund missing", "billing", "closed", 9.0),
        ("password reset fails", "login", "closed", 1.0),
    ];
    let mut ndjson = String::new();
    for (i, (subject, category, status, price)) in docs.iter().enumerate() {
        ndjson.push_str(&format!("{{\"index\": {{\"_id\": \"t{i}\"}}}}\n"));
        ndjson.push_str(
            &json!({"subject": subject, "category": category, "status": status, "price": price})
                .to_string(),
        );
        ndjson.push('\n');
    }
    let summary = backend.bulk(Some("tickets"), &ndjson).await.unwrap();
    assert!(summary.errors.is_empty(), "{:?}", summary.errors);
    (dir, backend)
}

async fn ask(planner: &DslPlanner, question: &str, index: &str) -> DslPlan {
    planner
        .plan(
            question,
            index,
            &PlanParameters::default(),
            &CancellationToken::new(),
        )
        .await
        .unwrap()
}

/// The user prompt of the `n`th request.
fn user_prompt(model: &Replay, n: usize) -> String {
    model.requests.lock().unwrap()[n].messages[1]
        .content
        .clone()
}

const NOT_CLOSED: &str = "How many shipping tickets are not closed?";
const IGNORES_SHIPPING: &str =
    r#"{"size": 0, "query": {"bool": {"must_not": [{"term": {"status": "closed"}}]}}}"#;
const FILTERS_SHIPPING: &str = r#"{"size": 0, "query": {"bool": {"filter": [{"term": {"category": "shipping"}}], "must_not": [{"term": {"status": "closed"}}]}}}"#;

#[tokio::test]
async fn a_named_value_the_query_ignores_is_filtered_by_the_planner_itself() {
    let (_dir, backend) = tickets().await;
    let model = replay(&[IGNORES_SHIPPING, FILTERS_SHIPPING]);
    let planner = DslPlanner::new(model.clone(), Arc::clone(&backend));
    let plan = ask(&planner, NOT_CLOSED, "tickets").await;
    assert_eq!(plan.fallback, None);
    assert_eq!(plan.llm_calls, 1);
    assert_eq!(plan.attempts.len(), 1);
    assert!(!plan.attempts[0].observed && plan.attempts[0].problems.is_empty());
    assert_eq!(
        plan.attempts[0].fixes,
        [r#"filter: {"term":{"category":"shipping"}}, a value the question names"#]
    );
    assert_eq!(
        plan.dsl["query"]["bool"]["filter"][0]["term"]["category"],
        "shipping"
    );
    let r = backend.search("tickets", &plan.dsl).await.unwrap();
    assert_eq!(r["hits"]["total"]["value"], 2);
}

#[tokio::test]
async fn a_named_value_the_query_ignores_goes_back_once_and_the_second_reply_is_taken() {
    let (_dir, backend) = tickets().await;
    let model = replay(&[IGNORES_SHIPPING, FILTERS_SHIPPING]);
    let planner = DslPlanner::new(model.clone(), Arc::clone(&backend)).with_amendments(false);
    let plan = ask(&planner, NOT_CLOSED, "tickets").await;
    assert_eq!(plan.fallback, None);
    assert_eq!(plan.llm_calls, 2);
    assert_eq!(plan.attempts.len(), 2);
    assert!(plan.attempts[0].observed);
    assert_eq!(
        plan.attempts[0].problems,
        ["the question names 'shipping' (a value of category) but the query does not filter on it"]
    );
    assert!(!plan.attempts[1].observed && plan.attempts[1].problems.is_empty());
    let r = backend.search("tickets", &plan.dsl).await.unwrap();
    assert_eq!(r["hits"]["total"]["value"], 2);

    let requests = model.requests.lock().unwrap();
    let second = &requests[1].messages;
    assert_eq!(second.len(), 4);
    assert_eq!(second[2].content, IGNORES_SHIPPING);
    assert!(
        second[3]
            .content
            .starts_with("That query ran on the index, and:\n- the question names 'shipping'"),
        "{}",
        second[3].content
    );
}

#[tokio::test]
async fn a_query_that_matches_nothing_goes_back_with_the_observation() {
    let (_dir, backend) = tickets().await;
    let model = replay(&[
        r#"{"query": {"term": {"category": "Delivery"}}}"#,
        r#"{"query": {"match": {"subject": "delivery"}}}"#,
    ]);
    let planner = DslPlanner::new(model.clone(), Arc::clone(&backend));
    let plan = ask(&planner, "Which tickets are about a delivery?", "tickets").await;
    assert_eq!(
        plan.attempts[0].problems,
        [
            "it matched no documents; check the field names and that values are spelled as stored (see the values of keyword fields)"
        ]
    );
    assert_eq!(plan.dsl["query"]["match"]["subject"], "delivery");
    let r = backend.search("tickets", &plan.dsl).await.unwrap();
    assert_eq!(r["hits"]["total"]["value"], 1);
    assert!(
        model.requests.lock().unwrap()[1].messages[3]
            .content
            .contains("- it matched no documents")
    );
}

#[tokio::test]
async fn a_worse_repair_keeps_the_first_valid_body() {
    let (_dir, backend) = tickets().await;
    // The repair names a field the mapping does not have: the observed first body stands.
    let model = replay(&[
        IGNORES_SHIPPING,
        r#"{"size": 0, "query": {"term": {"kind": "shipping"}}}"#,
    ]);
    let planner = DslPlanner::new(model.clone(), Arc::clone(&backend)).with_amendments(false);
    let plan = ask(&planner, NOT_CLOSED, "tickets").await;
    assert_eq!(plan.fallback, None);
    assert_eq!(plan.attempts.len(), 2);
    assert!(!plan.attempts[1].observed);
    assert_eq!(
        plan.dsl,
        serde_json::from_str::<Value>(IGNORES_SHIPPING).unwrap()
    );

    // The same observation is not sent twice, whatever the budget: the repeat ends the rounds.
    let model = replay(&[IGNORES_SHIPPING, IGNORES_SHIPPING, FILTERS_SHIPPING]);
    let planner = DslPlanner::new(model.clone(), Arc::clone(&backend))
        .with_max_repairs(3)
        .with_amendments(false);
    let plan = ask(&planner, NOT_CLOSED, "tickets").await;
    assert_eq!(plan.llm_calls, 2);
    assert_eq!(
        plan.dsl,
        serde_json::from_str::<Value>(IGNORES_SHIPPING).unwrap()
    );

    // Without repairs, the observed body is used as it is; switched off, nothing is observed.
    let model = replay(&[IGNORES_SHIPPING]);
    let planner = DslPlanner::new(model.clone(), Arc::clone(&backend)).with_max_repairs(0);
    let plan = ask(&planner, NOT_CLOSED, "tickets").await;
    assert_eq!((plan.llm_calls, plan.fallback), (1, None));
    let model = replay(&[IGNORES_SHIPPING]);
    let planner = DslPlanner::new(model.clone(), backend).with_observations(false);
    let plan = ask(&planner, NOT_CLOSED, "tickets").await;
    assert_eq!(plan.llm_calls, 1);
    assert!(plan.attempts[0].problems.is_empty() && !plan.attempts[0].observed);
}

#[tokio::test]
async fn keyword_values_are_in_the_prompt_most_frequent_first() {
    let (_dir, backend) = tickets().await;
    let model = replay(&[FILTERS_SHIPPING]);
    let planner = DslPlanner::new(model.clone(), Arc::clone(&backend));
    ask(&planner, NOT_CLOSED, "tickets").await;
    let user = user_prompt(&model, 0);
    assert!(
        user.contains(
            "\nValues of keyword fields (most frequent first): category: shipping, billing, login; status: closed, open\n"
        ),
        "{user}"
    );

    // Off: the line says none, and a caller's own text stands in for the search.
    let model = replay(&[FILTERS_SHIPPING]);
    let planner = DslPlanner::new(model.clone(), Arc::clone(&backend)).with_keyword_values(false);
    ask(&planner, NOT_CLOSED, "tickets").await;
    assert!(user_prompt(&model, 0).contains("(most frequent first): none\n"));
    let model = replay(&[FILTERS_SHIPPING]);
    let planner = DslPlanner::new(model.clone(), backend).with_parameter("keyword_values", "given");
    ask(&planner, NOT_CLOSED, "tickets").await;
    assert!(user_prompt(&model, 0).contains("(most frequent first): given\n"));
}

#[tokio::test]
async fn many_long_keyword_values_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn SearchBackend> = Arc::new(EmbeddedBackend::open(dir.path()).unwrap());
    backend
        .create_index(
            "codes",
            &json!({"properties": {"code": {"type": "keyword"}, "id": {"type": "keyword"}}}),
        )
        .await
        .unwrap();
    // 1,000 distinct values of 80 characters; the first 12 twice. `id` is unique per document.
    let mut ndjson = String::new();
    let mut n = 0;
    for i in 0..1000 {
        for _ in 0..if i < 12 { 2 } else { 1 } {
            ndjson.push_str("{\"index\": {}}\n");
            let code = format!("{i:04}{}", "v".repeat(76));
            ndjson.push_str(&json!({"code": code, "id": format!("doc{n}")}).to_string());
            ndjson.push('\n');
            n += 1;
        }
    }
    let summary = backend.bulk(Some("codes"), &ndjson).await.unwrap();
    assert_eq!(summary.indexed, 1012);

    let model = replay(&[r#"{"query": {"match_all": {}}}"#]);
    let planner = DslPlanner::new(model.clone(), backend);
    ask(&planner, "List some codes.", "codes").await;
    let user = user_prompt(&model, 0);
    let line = user
        .lines()
        .find_map(|l| l.strip_prefix("Values of keyword fields (most frequent first): "))
        .unwrap();
    let shown = line.strip_prefix("code: ").unwrap();
    assert!(
        !line.contains("id:"),
        "unique identifiers are left out: {line}"
    );
    let values: Vec<&str> = shown.split(", ").collect();
    assert_eq!(values.len(), MAX_VALUES_PER_FIELD, "{line}");
    for v in &values {
        let kept = v.strip_suffix("...").unwrap();
        assert_eq!(kept.chars().count(), MAX_VALUE_CHARS);
        let i: usize = kept[..4].parse().unwrap();
        assert!(i < 12, "a value that occurs twice comes first: {v}");
    }
}

#[tokio::test]
async fn a_cancelled_plan_stops() {
    let (_dir, backend) = tickets().await;
    let cancel = CancellationToken::new();
    cancel.cancel();
    let err = DslPlanner::new(replay(&[FILTERS_SHIPPING]), backend)
        .plan(NOT_CLOSED, "tickets", &PlanParameters::default(), &cancel)
        .await
        .unwrap_err();
    assert!(matches!(err, SearchError::Cancelled(_)), "{err}");
}
