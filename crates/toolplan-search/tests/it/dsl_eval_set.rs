//! The query-DSL evaluation set (`bench/dsl_eval/`): every question's gold body, run on the embedded
//! index, returns the answer computed in Python from the documents — so the benchmark's expected
//! answers and the engine agree — and a wrong body is judged wrong.

use serde_json::json;
use tokio_util::sync::CancellationToken;
use toolplan_search::eval::{Question, judge};
use toolplan_search::mapping::Mapping;
use toolplan_search::planner::{amend, observe, values};
use toolplan_search::{EmbeddedBackend, SearchBackend};

use crate::fixtures::{eval_set, read_json};

#[tokio::test]
async fn every_gold_body_returns_the_expected_answer() {
    let set = read_json(&eval_set("questions.json"));
    let dir = tempfile::tempdir().unwrap();
    let backend = EmbeddedBackend::open(dir.path()).unwrap();
    for (name, files) in set["indices"].as_object().unwrap() {
        let mapping = read_json(&eval_set(files["mapping"].as_str().unwrap()));
        backend.create_index(name, &mapping).await.unwrap();
        let body = std::fs::read_to_string(eval_set(files["data"].as_str().unwrap())).unwrap();
        let summary = backend.bulk(Some(name), &body).await.unwrap();
        assert!(summary.errors.is_empty(), "{name}: {:?}", summary.errors);
    }
    let questions: Vec<Question> = serde_json::from_value(set["questions"].clone()).unwrap();
    assert!(questions.len() >= 40, "{}", questions.len());
    let indices: std::collections::BTreeSet<&str> =
        questions.iter().map(|q| q.index.as_str()).collect();
    assert_eq!(indices.len(), 3);
    for q in &questions {
        let response = backend.search(&q.index, &q.gold).await.unwrap();
        assert!(
            judge(q, &response),
            "{} {}: {} → {response}",
            q.id,
            q.question,
            q.gold
        );
        let wrong = backend
            .search(&q.index, &json!({"size": 10, "query": {"match_all": {}}}))
            .await
            .unwrap();
        assert!(!judge(q, &wrong), "{} is answered by match_all", q.id);
    }
}

/// The planner's observations and amendments are general rules: run on the gold bodies (right
/// answers the model could have written), with the sample document and the frequent keyword values
/// the planner would see, none is observed and none is changed.
#[tokio::test]
async fn the_observations_and_amendments_leave_every_gold_body_as_it_is() {
    let set = read_json(&eval_set("questions.json"));
    let dir = tempfile::tempdir().unwrap();
    let backend = EmbeddedBackend::open(dir.path()).unwrap();
    let cancel = CancellationToken::new();
    let mut contexts = std::collections::BTreeMap::new();
    for (name, files) in set["indices"].as_object().unwrap() {
        let mapping_json = read_json(&eval_set(files["mapping"].as_str().unwrap()));
        backend.create_index(name, &mapping_json).await.unwrap();
        let body = std::fs::read_to_string(eval_set(files["data"].as_str().unwrap())).unwrap();
        backend.bulk(Some(name), &body).await.unwrap();
        let mapping = Mapping::parse(&mapping_json).unwrap();
        let values = values::keyword_values(&backend, name, &mapping, &cancel)
            .await
            .unwrap();
        let sample = backend.sample_document(name).await.unwrap();
        contexts.insert(name.clone(), (mapping, values, sample));
    }
    let questions: Vec<Question> = serde_json::from_value(set["questions"].clone()).unwrap();
    let mut changed = Vec::new();
    for q in &questions {
        let (mapping, values, sample) = &contexts[&q.index];
        let cx = observe::Context {
            question: &q.question,
            mapping,
            values,
            sample: sample.as_ref(),
        };
        let response = backend.search(&q.index, &q.gold).await.unwrap();
        let seen = observe::observations(&cx, &q.gold, Some(&response));
        if !seen.is_empty() {
            changed.push(format!("{} {}: observed {seen:?}", q.id, q.question));
        }
        if let Some((body, notes)) = amend::amend(&cx, &q.gold, Some(&response)) {
            changed.push(format!(
                "{} {}: {} → {body} ({notes:?})",
                q.id, q.question, q.gold
            ));
        }
    }
    assert!(changed.is_empty(), "{changed:#?}");
}
