//! Query-DSL planning on the iris index with a test model that replays replies and keeps every
//! request: the prompt's contents, extraction past stray braces and fences, the repair round trip,
//! the backend's own validation, the fallback with its reason, template selection, response
//! filters on the raw provider response, and registration versus execution parameters.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolplan_core::{Tool, ToolContext};
use toolplan_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, Message, StopReason, Usage};
use toolplan_search::tools::QueryPlanning;
use toolplan_search::{DslPlan, DslPlanner, PlanParameters, SearchBackend};

use crate::fixtures::iris_index;

/// Replays replies; each comes back as the reply text and, as the raw provider response, in an
/// OpenAI-compatible body — or a reply `RAW:{json}` is the raw response itself, with the text
/// "(see raw)".
pub struct Replay {
    replies: Mutex<VecDeque<String>>,
    /// Every request, in order.
    pub requests: Mutex<Vec<ChatRequest>>,
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
        let reply = self.replies.lock().unwrap().pop_front().unwrap_or_default();
        let (text, raw) = match reply.strip_prefix("RAW:") {
            Some(raw) => ("(see raw)".to_owned(), serde_json::from_str(raw).unwrap()),
            None => (
                reply.clone(),
                json!({"choices": [{"message": {"role": "assistant", "content": reply}}]}),
            ),
        };
        Ok(ChatResponse {
            message: Message::assistant(text, vec![]),
            usage: Usage {
                input_tokens: 100,
                output_tokens: 20,
            },
            stop: StopReason::EndTurn,
            raw: Some(raw),
        })
    }
}

/// A [`Replay`] of `replies`.
pub fn replay(replies: &[&str]) -> Arc<Replay> {
    Arc::new(Replay {
        replies: Mutex::new(replies.iter().map(|s| s.to_string()).collect()),
        requests: Mutex::new(Vec::new()),
    })
}

async fn iris() -> (tempfile::TempDir, Arc<dyn SearchBackend>) {
    let (dir, backend) = iris_index().await;
    (dir, backend)
}

fn params(v: Value) -> PlanParameters {
    PlanParameters::from_json(v.as_object().unwrap()).unwrap()
}

/// Plans [`QUESTION`] on the iris index with `planner`.
async fn ask(planner: DslPlanner) -> DslPlan {
    planner
        .plan(
            QUESTION,
            "iris-index",
            &PlanParameters::default(),
            &CancellationToken::new(),
        )
        .await
        .unwrap()
}

/// Plans [`QUESTION`] on the iris index with registration and execution parameters.
async fn plan_iris(
    model: &Arc<Replay>,
    backend: &Arc<dyn SearchBackend>,
    registered: Value,
    run: Value,
) -> DslPlan {
    DslPlanner::new(model.clone(), Arc::clone(backend))
        .with_parameters(&params(registered))
        .unwrap()
        .plan(
            QUESTION,
            "iris-index",
            &params(run),
            &CancellationToken::new(),
        )
        .await
        .unwrap()
}

const QUESTION: &str = "How many iris flowers of type setosa are there?";

#[tokio::test]
async fn a_wrong_field_is_repaired_and_the_dsl_counts_fifty() {
    let (_dir, backend) = iris().await;
    let model = replay(&[
        "Here is the query {as asked}:\n```json\n{\"size\": 0.0, \"query\": {\"term\": {\"kind\": \"setosa\"}}}\n```",
        "{\"size\": 0, \"query\": {\"term\": {\"species.keyword\": \"setosa\"}}, \"track_total_hits\": true}",
    ]);
    let planner = DslPlanner::new(model.clone(), Arc::clone(&backend));
    let plan = planner
        .plan(
            QUESTION,
            "iris-index",
            &PlanParameters {
                query_fields: Some(vec!["species".to_owned()]),
                ..PlanParameters::default()
            },
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(plan.fallback, None);
    assert_eq!(plan.attempts.len(), 2);
    assert_eq!(
        plan.attempts[0].dsl,
        Some(json!({"size": 0, "query": {"term": {"kind": "setosa"}}}))
    );
    assert_eq!(
        plan.attempts[0].problems,
        ["query.term: field 'kind' is not in the mapping"]
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
        "That query cannot be used:\n- query.term: field 'kind' is not in the mapping"
    ));
}

#[tokio::test]
async fn without_valid_dsl_the_fallback_stands_in_with_its_reason() {
    let (_dir, backend) = iris().await;
    let model = replay(&["I cannot help with that.", "Still {no json here"]);
    let plan = plan_iris(&model, &backend, json!({}), json!({})).await;
    assert_eq!(plan.dsl, json!({"size": 10, "query": {"match_all": {}}}));
    assert_eq!(
        plan.fallback.as_deref(),
        Some("no valid DSL after 2 attempts: the reply holds no JSON object")
    );

    let model = replay(&["{\"query\": {\"nested\": {\"path\": \"x\"}}}"]);
    let plan = ask(DslPlanner::new(model, backend)
        .with_max_repairs(0)
        .with_fallback_query(json!({"query": {"match": {"species": "setosa"}}})))
    .await;
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
    let run = params(json!({"tone": "terse"}));
    DslPlanner::new(model.clone(), backend)
        .with_system_prompt("Be ${parameters.tone:-kind}. Index ${parameters.index_name}.")
        .with_user_prompt("Q=${parameters.question} F=${parameters.query_fields:-none}")
        .plan("hi", "iris-index", &run, &CancellationToken::new())
        .await
        .unwrap();
    let requests = model.requests.lock().unwrap();
    assert_eq!(
        requests[0].messages[0].content,
        "Be terse. Index iris-index."
    );
    assert_eq!(requests[0].messages[1].content, "Q=hi F=none");
}

#[tokio::test]
async fn dsl_the_index_cannot_run_goes_back_for_repair() {
    let (_dir, backend) = iris().await;
    // The mapping check passes an unknown operator; the backend's dry run does not.
    let model = replay(&[
        "{\"size\": 0, \"query\": {\"match\": {\"species\": {\"query\": \"setosa\", \"operator\": \"xor\"}}}}",
        "{\"size\": 0, \"query\": {\"term\": {\"species.keyword\": \"setosa\"}}}",
    ]);
    let plan = plan_iris(&model, &backend, json!({}), json!({})).await;
    assert_eq!(plan.fallback, None);
    assert_eq!(plan.attempts[0].problems.len(), 1);
    let problem = &plan.attempts[0].problems[0];
    assert!(
        problem.starts_with("the index rejects it: query.match")
            && problem.contains("unknown operator 'xor'"),
        "{problem}"
    );
    assert_eq!(plan.dsl["query"]["term"]["species.keyword"], "setosa");
    let requests = model.requests.lock().unwrap();
    assert!(
        requests[1].messages[3]
            .content
            .contains("unknown operator 'xor'")
    );
}

#[tokio::test]
async fn mistakes_with_one_correction_are_corrected_without_the_model() {
    let (_dir, backend) = iris().await;
    let model = replay(&[
        "{\"query\": {\"bool\": {\"filter\": [{\"range\": {\"species\": {\"eq\": \"setosa\"}}}], \"size\": 0}}}",
    ]);
    let plan = plan_iris(&model, &backend, json!({}), json!({})).await;
    assert_eq!(plan.llm_calls, 1);
    assert_eq!(
        plan.dsl,
        json!({"query": {"bool": {"filter": [{"term": {"species.keyword": "setosa"}}]}}, "size": 0})
    );
    assert_eq!(
        plan.attempts[0].fixes,
        [
            "query.bool.size: moved to the top level of the body",
            "query.bool.filter[0].range: eq is no range parameter; a term query",
            "query.bool.filter[0].term: species → species.keyword"
        ]
    );
    let r = backend.search("iris-index", &plan.dsl).await.unwrap();
    assert_eq!(r["hits"]["total"]["value"], 50);

    // Switched off, the same reply goes back to the model.
    let model = replay(&["{\"query\": {\"term\": {\"species\": \"setosa\"}}}", "{}"]);
    let plan = ask(DslPlanner::new(model, backend).with_autofix(false)).await;
    assert_eq!(plan.llm_calls, 2);
    assert!(plan.attempts[0].fixes.is_empty());
    assert!(plan.attempts[0].problems[0].contains("use 'species.keyword'"));
}

async fn with_templates(backend: &Arc<dyn SearchBackend>) {
    backend
        .put_script(
            "flower_species_search_template",
            &json!({"script": {"lang": "mustache",
                "source": {"size": "{{size}}", "query": {"match": {"species": "{{species}}"}}}}}),
        )
        .await
        .unwrap();
    backend
        .put_script(
            "flower_petal_length_range_template",
            &json!({"lang": "mustache",
                "source": "{\"query\": {\"range\": {\"petal_length_in_cm\": {\"gte\": \"{{min_length}}\"}}}}"}),
        )
        .await
        .unwrap();
}

fn flower_templates() -> Value {
    json!({"generation_type": "user_templates", "search_templates": [
        {"template_id": "flower_species_search_template",
         "template_description": "This template searches for flowers that match the given species using a match query."},
        {"template_id": "flower_petal_length_range_template",
         "template_description": "This template searches for flowers within a specific petal length range using a range query."}]})
}

#[tokio::test]
async fn user_templates_pick_one_and_show_its_stored_body() {
    let (_dir, backend) = iris().await;
    with_templates(&backend).await;
    let model = replay(&[
        "flower_species_search_template",
        "{\"size\": 0, \"query\": {\"match\": {\"species\": \"setosa\"}}}",
    ]);
    let plan = plan_iris(&model, &backend, flower_templates(), json!({})).await;
    let choice = plan.template.clone().unwrap();
    assert_eq!(
        choice.selected.as_deref(),
        Some("flower_species_search_template")
    );
    assert_eq!(choice.note, None);
    assert_eq!(
        choice.template,
        r#"{"size":"{{size}}","query":{"match":{"species":"{{species}}"}}}"#
    );
    assert_eq!(plan.llm_calls, 2);
    assert_eq!(plan.attempts.len(), 1);
    let r = backend.search("iris-index", &plan.dsl).await.unwrap();
    assert_eq!(r["hits"]["total"]["value"], 50);

    let requests = model.requests.lock().unwrap();
    let selection = &requests[0].messages;
    assert!(selection[0].content.contains("Reply with the template_id"));
    assert!(
        selection[1]
            .content
            .starts_with(&format!("Question: {QUESTION}\nSearch templates: ["))
    );
    assert!(selection[1].content.contains("using a range query."));
    // The template is reference text in the generation's system prompt, never rendered.
    assert!(requests[1].messages[0].content.contains(
        "reference to generate the query: {\"size\":\"{{size}}\",\"query\":{\"match\":{\"species\":\"{{species}}\"}}}"
    ));
}

#[tokio::test]
async fn an_unknown_or_missing_template_keeps_the_default() {
    let (_dir, backend) = iris().await;
    with_templates(&backend).await;
    let dsl = "{\"size\": 0, \"query\": {\"match\": {\"species\": \"setosa\"}}}";
    let model = replay(&["none of them", dsl]);
    let plan = plan_iris(&model, &backend, flower_templates(), json!({})).await;
    let choice = plan.template.unwrap();
    assert_eq!(choice.selected, None);
    assert_eq!(choice.template, r#"{"size":10,"query":{"match_all":{}}}"#);
    assert!(choice.note.unwrap().contains("named none of the templates"));

    // Offered at execution time, but never stored.
    let model = replay(&["petal_width_template", dsl]);
    let run = params(
        json!({"generation_type": "user_templates", "search_templates": [
        {"template_id": "petal_width_template", "template_description": "petal widths"}]}),
    );
    let plan = DslPlanner::new(model, Arc::clone(&backend))
        .plan(QUESTION, "iris-index", &run, &CancellationToken::new())
        .await
        .unwrap();
    let choice = plan.template.unwrap();
    assert_eq!(choice.selected.as_deref(), Some("petal_width_template"));
    assert_eq!(
        choice.note.as_deref(),
        Some(
            "template 'petal_width_template' is not stored in the embedded backend; the default template is used"
        )
    );
    assert_eq!(plan.fallback, None);
}

#[tokio::test]
async fn the_response_filter_reads_the_raw_provider_response() {
    let (_dir, backend) = iris().await;
    // A Bedrock Converse body: the DSL is in output.message.content[0].text, not in the text the
    // model client saw.
    let converse = r#"RAW:{"output": {"message": {"role": "assistant", "content": [{"text": "{\"size\": 0, \"query\": {\"term\": {\"species.keyword\": \"setosa\"}}}"}]}}}"#;
    let model = replay(&[converse]);
    let plan = plan_iris(
        &model,
        &backend,
        json!({"response_filter": "$.output.message.content[0].text"}),
        json!({}),
    )
    .await;
    assert_eq!(plan.fallback, None);
    assert_eq!(plan.dsl["query"]["term"]["species.keyword"], "setosa");

    // Registered for one provider, overridden at execution for another.
    let model = replay(&["{\"size\": 0, \"query\": {\"match\": {\"species\": \"setosa\"}}}"]);
    let plan = plan_iris(
        &model,
        &backend,
        json!({"response_filter": "$.output.message.content[0].text"}),
        json!({"response_filter": "$.choices[0].message.content"}),
    )
    .await;
    assert_eq!(plan.fallback, None);

    // A filter that matches nothing is a problem like any other, and ends in the fallback.
    let model = replay(&["{\"size\": 0}", "{\"size\": 0}"]);
    let plan = plan_iris(
        &model,
        &backend,
        json!({}),
        json!({"response_filter": "$.output.message.content[0].text"}),
    )
    .await;
    assert_eq!(
        plan.fallback.as_deref(),
        Some(
            "no valid DSL after 2 attempts: the response_filter '$.output.message.content[0].text' matches nothing in the provider's response"
        )
    );
}

#[tokio::test]
async fn the_query_planning_tool_takes_execution_parameters() {
    let (_dir, backend) = iris().await;
    let model = replay(&["{\"query\": {\"match_all\": {}}}"]);
    let planner = DslPlanner::new(model.clone(), backend)
        .with_user_prompt("registered ${parameters.question}")
        .with_parameter("tone", "kind");
    let tool = QueryPlanning(Arc::new(planner));
    let out = tool
        .call(
            json!({"question": "hi", "index_name": "iris-index",
                   "query_planner_user_prompt": "executed ${parameters.question} ${parameters.tone}",
                   "fallback_query": {"query": {"match_none": {}}}}),
            ToolContext::detached(),
        )
        .await
        .unwrap();
    assert_eq!(out["dsl"], json!({"query": {"match_all": {}}}));
    assert_eq!(
        model.requests.lock().unwrap()[0].messages[1].content,
        "executed hi kind"
    );
    let err = tool
        .call(
            json!({"question": "hi", "index_name": "iris-index", "generation_type": "user_templates"}),
            ToolContext::detached(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("needs search_templates"), "{err}");
}
