//! Query-DSL planning on the iris index with a test model that replays replies and keeps every
//! request: the prompt's contents, extraction past stray braces and fences, the repair round trip,
//! and the fallback with its reason.
#![allow(clippy::unwrap_used)]

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolplan_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, Message, StopReason, Usage};
use toolplan_search::{DslPlanner, EmbeddedBackend, SearchBackend};

struct Replay {
    replies: Mutex<VecDeque<String>>,
    requests: Mutex<Vec<ChatRequest>>,
}

#[async_trait]
impl ChatModel for Replay {
    fn name(&self) -> &str {
        "replay"
    }
    async fn chat(
        &self,
        request: &ChatRequest,
        _cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        self.requests.lock().unwrap().push(request.clone());
        let text = self.replies.lock().unwrap().pop_front().unwrap_or_default();
        Ok(ChatResponse {
            message: Message::assistant(text, vec![]),
            usage: Usage {
                input_tokens: 100,
                output_tokens: 20,
            },
            stop: StopReason::EndTurn,
        })
    }
}

fn replay(replies: &[&str]) -> Arc<Replay> {
    Arc::new(Replay {
        replies: Mutex::new(replies.iter().map(|s| s.to_string()).collect()),
        requests: Mutex::new(Vec::new()),
    })
}

async fn iris() -> (tempfile::TempDir, Arc<dyn SearchBackend>) {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    let dir = tempfile::tempdir().unwrap();
    let backend = Arc::new(EmbeddedBackend::open(dir.path()).unwrap());
    let mapping: Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("iris-mapping.json")).unwrap())
            .unwrap();
    backend.create_index("iris-index", &mapping).await.unwrap();
    backend
        .bulk(
            None,
            &std::fs::read_to_string(data.join("iris.ndjson")).unwrap(),
        )
        .await
        .unwrap();
    (dir, backend)
}

const QUESTION: &str = "How many iris flowers of type setosa are there?";

#[tokio::test]
async fn a_wrong_field_is_repaired_and_the_dsl_counts_fifty() {
    let (_dir, backend) = iris().await;
    let model = replay(&[
        "Here is the query {as asked}:\n```json\n{\"size\": 0.0, \"query\": {\"term\": {\"species\": \"setosa\"}}}\n```",
        "{\"size\": 0, \"query\": {\"term\": {\"species.keyword\": \"setosa\"}}, \"track_total_hits\": true}",
    ]);
    let planner = DslPlanner::new(model.clone(), Arc::clone(&backend));
    let plan = planner
        .plan(
            QUESTION,
            "iris-index",
            &["species".to_owned()],
            &HashMap::new(),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(plan.fallback, None);
    assert_eq!(plan.attempts.len(), 2);
    assert_eq!(
        plan.attempts[0].dsl,
        Some(json!({"size": 0, "query": {"term": {"species": "setosa"}}}))
    );
    assert_eq!(
        plan.attempts[0].problems,
        [
            "query.term: term on the analysed text field 'species' compares against single lower-cased words; use 'species.keyword' for exact values"
        ]
    );
    assert_eq!(plan.llm_calls, 2);
    assert_eq!(plan.input_tokens, 200);
    let r = backend.search("iris-index", &plan.dsl).await.unwrap();
    assert_eq!(r["hits"]["total"]["value"], 50);

    let requests = model.requests.lock().unwrap();
    let first = &requests[0].messages;
    assert!(
        first[0]
            .content
            .starts_with("==== PURPOSE ====\nYou are an OpenSearch DSL expert.")
    );
    assert!(
        first[0].content.contains("Example 6"),
        "examples fill the system prompt"
    );
    let user = &first[1].content;
    assert!(
        user.starts_with(&format!("Question: {QUESTION}\nMapping: {{\"properties\":")),
        "{user}"
    );
    assert!(user.contains("Query Fields: [\"species\"]"), "{user}");
    assert!(user.contains("Sample Document from index: {\""), "{user}");
    assert!(
        user.contains("Embedding Model ID for Neural Search:  not provided"),
        "{user}"
    );
    // The repair round: the reply, then the problems.
    let second = &requests[1].messages;
    assert_eq!(second.len(), 4);
    assert!(second[3].content.starts_with(
        "That query cannot be used:\n- query.term: term on the analysed text field 'species'"
    ));
}

#[tokio::test]
async fn without_valid_dsl_the_fallback_stands_in_with_its_reason() {
    let (_dir, backend) = iris().await;
    let model = replay(&["I cannot help with that.", "Still {no json here"]);
    let plan = DslPlanner::new(model, Arc::clone(&backend))
        .plan(
            QUESTION,
            "iris-index",
            &[],
            &HashMap::new(),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(plan.dsl, json!({"size": 10, "query": {"match_all": {}}}));
    assert_eq!(
        plan.fallback.as_deref(),
        Some("no valid DSL after 2 attempts: the reply holds no JSON object")
    );

    let model = replay(&["{\"query\": {\"nested\": {\"path\": \"x\"}}}"]);
    let plan = DslPlanner::new(model, backend)
        .with_max_repairs(0)
        .with_fallback_query(json!({"query": {"match": {"species": "setosa"}}}))
        .plan(
            QUESTION,
            "iris-index",
            &[],
            &HashMap::new(),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(plan.dsl, json!({"query": {"match": {"species": "setosa"}}}));
    assert_eq!(plan.attempts.len(), 1);
    assert!(
        plan.fallback
            .unwrap()
            .contains("query.nested: the nested clause cannot run on this index")
    );
}

#[tokio::test]
async fn custom_prompts_and_parameters_are_filled() {
    let (_dir, backend) = iris().await;
    let model = replay(&["{\"query\": {\"match_all\": {}}}"]);
    let mut extra = HashMap::new();
    extra.insert("tone".to_owned(), "terse".to_owned());
    DslPlanner::new(model.clone(), backend)
        .with_system_prompt("Be ${parameters.tone:-kind}. Index ${parameters.index_name}.")
        .with_user_prompt("Q=${parameters.question} F=${parameters.query_fields:-none}")
        .plan("hi", "iris-index", &[], &extra, &CancellationToken::new())
        .await
        .unwrap();
    let requests = model.requests.lock().unwrap();
    assert_eq!(
        requests[0].messages[0].content,
        "Be terse. Index iris-index."
    );
    assert_eq!(requests[0].messages[1].content, "Q=hi F=none");
}
