//! Query plans end to end: the dialect compiled into the core plan IR, run by the core scheduler,
//! branches answered by the synthesizer through a test model that records every request.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolplan_core::{FnTool, RunControl, StepStatus, Tool, ToolContext, ToolError, ToolResult};
use toolplan_llm::{ChatModel, ChatRequest, ChatResponse, LlmError, Message, StopReason, Usage};
use toolplan_query::{QueryError, QueryPlanTool, QueryPlanner, Synthesizer};

/// A test model: waits `latency`, then answers "answer #N" and keeps every prompt.
struct TestModel {
    latency: Duration,
    prompts: Mutex<Vec<String>>,
}

impl TestModel {
    fn new(latency_ms: u64) -> Arc<Self> {
        Arc::new(Self {
            latency: Duration::from_millis(latency_ms),
            prompts: Mutex::new(Vec::new()),
        })
    }

    fn prompts(&self) -> Vec<String> {
        self.prompts.lock().expect("lock").clone()
    }
}

#[async_trait]
impl ChatModel for TestModel {
    fn name(&self) -> &str {
        "test"
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        let prompt = request
            .messages
            .last()
            .map(|m| m.content.clone())
            .unwrap_or_default();
        let n = {
            let mut prompts = self.prompts.lock().expect("lock");
            prompts.push(prompt.clone());
            prompts.len()
        };
        tokio::select! {
            _ = tokio::time::sleep(self.latency) => {}
            _ = cancel.cancelled() => return Err(LlmError::Cancelled),
        }
        // The answer names the question it answers, so tests can follow answers up the tree.
        let question = prompt
            .rsplit_once("Question: ")
            .map(|(_, q)| q.trim_end_matches("\nAnswer:").to_owned())
            .unwrap_or_default();
        Ok(ChatResponse {
            message: Message::assistant(format!("answer #{n} to {question}"), vec![]),
            usage: Usage {
                input_tokens: 10,
                output_tokens: 3,
            },
            stop: StopReason::EndTurn,
            raw: None,
        })
    }
}

/// A leaf tool that sleeps `delay` and counts its calls.
struct Source {
    name: String,
    delay: Duration,
    calls: AtomicUsize,
}

impl Source {
    fn new(name: &str, delay_ms: u64) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            delay: Duration::from_millis(delay_ms),
            calls: AtomicUsize::new(0),
        })
    }
}

#[async_trait]
impl Tool for Source {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        "Answers questions about one source."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]})
    }
    async fn call(&self, arguments: Value, _ctx: ToolContext) -> ToolResult {
        self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        let q = arguments["input"].as_str().unwrap_or_default();
        if q.contains("FAIL") {
            return Err(ToolError::failed(format!("{} cannot answer", self.name)));
        }
        Ok(json!(format!("{} says: {q}", self.name)))
    }
}

fn sources(n: usize, delay_ms: u64) -> Vec<Arc<Source>> {
    (1..=n)
        .map(|i| Source::new(&format!("source_{i}"), delay_ms))
        .collect()
}

fn planner(sources: &[Arc<Source>], synthesizer: Synthesizer) -> QueryPlanner {
    let tools: Vec<Arc<dyn Tool>> = sources
        .iter()
        .map(|s| Arc::clone(s) as Arc<dyn Tool>)
        .collect();
    QueryPlanner::new(tools, synthesizer).expect("tools register")
}

fn leaf(id: u64, tool: &str, q: &str) -> Value {
    json!({"id": id, "query_str": q, "tool_name": tool, "dependencies": []})
}

fn branch(id: u64, q: &str, deps: &[u64]) -> Value {
    json!({"id": id, "query_str": q, "tool_name": null, "dependencies": deps})
}

#[tokio::test(start_paused = true)]
async fn multi_level_synthesis_hands_children_as_query_and_response() {
    let model = TestModel::new(200);
    let src = sources(4, 100);
    let p = planner(&src, Synthesizer::compact(model.clone()));
    let plan = p
        .compile_value(json!({"nodes": [
            leaf(1, "source_1", "March?"), leaf(2, "source_2", "June?"),
            leaf(3, "source_3", "September?"), leaf(4, "source_4", "December?"),
            branch(5, "First half?", &[1, 2]), branch(6, "Second half?", &[3, 4]),
            branch(7, "The whole year?", &[5, 6])
        ]}))
        .expect("valid");
    let run = p.run(&plan, RunControl::default()).await;
    let answer = run.answer_text().expect("answered");
    assert!(answer.ends_with("to The whole year?"), "{answer}");
    let prompts = model.prompts();
    assert_eq!(prompts.len(), 3);
    // Each branch's prompt holds its children exactly as `Query: …\nResponse: …`.
    let first_half = prompts
        .iter()
        .find(|p| p.contains("Question: First half?"))
        .expect("first half asked");
    assert!(first_half.contains(
        "Query: March?\nResponse: source_1 says: March?\n\nQuery: June?\nResponse: source_2 says: June?"
    ), "{first_half}");
    let root = prompts.last().expect("root asked");
    assert!(root.contains("Question: The whole year?"), "{root}");
    assert!(
        root.contains("Query: First half?\nResponse: answer #"),
        "{root}"
    );
    assert!(
        root.contains("to First half?\n\nQuery: Second half?\nResponse: answer #"),
        "{root}"
    );
    assert_eq!(run.llm.calls, 3);
    assert_eq!(run.llm.input_tokens, 30);
    // Leaves in parallel (100 ms), the two branches in parallel (200 ms), then the root (200 ms).
    assert_eq!(run.run.elapsed, Duration::from_millis(500));
}

#[tokio::test(start_paused = true)]
async fn a_shared_child_runs_once() {
    let model = TestModel::new(50);
    let src = sources(3, 100);
    let p = planner(&src, Synthesizer::compact(model.clone()));
    let plan = p
        .compile_value(json!({"nodes": [
            leaf(1, "source_1", "a"), leaf(2, "source_2", "b"), leaf(3, "source_3", "c"),
            branch(4, "x", &[1, 2]), branch(5, "y", &[2, 3]), branch(6, "root", &[4, 5])
        ]}))
        .expect("valid");
    let run = p.run(&plan, RunControl::default()).await;
    run.answer().expect("answered");
    let calls: Vec<usize> = src.iter().map(|s| s.calls.load(Ordering::SeqCst)).collect();
    assert_eq!(calls, [1, 1, 1], "LlamaIndex calls the shared child twice");
    assert_eq!(run.tool_calls(), 3);
    assert_eq!(model.prompts().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn independent_leaves_run_in_parallel() {
    let src = sources(10, 100);
    let p = planner(&src, Synthesizer::compact(TestModel::new(200)));
    let mut nodes: Vec<Value> = (1..=10)
        .map(|i| leaf(i, &format!("source_{i}"), "q"))
        .collect();
    nodes.push(branch(11, "all", &(1..=10).collect::<Vec<_>>()));
    let plan = p.compile_value(json!({ "nodes": nodes })).expect("valid");
    let run = p.run(&plan, RunControl::default()).await;
    run.answer().expect("answered");
    // The critical path: one leaf, then the synthesis. Sequential execution would take 1,200 ms.
    assert_eq!(run.run.elapsed, Duration::from_millis(300));
}

#[tokio::test(start_paused = true)]
async fn a_branch_naming_a_tool_calls_it_and_skips_synthesis() {
    let model = TestModel::new(50);
    let src = sources(3, 10);
    let p = planner(&src, Synthesizer::compact(model.clone()));
    let plan = p
        .compile_value(json!({"nodes": [
            leaf(1, "source_1", "a"), leaf(2, "source_2", "b"),
            {"id": 3, "query_str": "final", "tool_name": "source_3", "dependencies": [1, 2]}
        ]}))
        .expect("valid");
    let run = p.run(&plan, RunControl::default()).await;
    assert_eq!(run.answer_text().expect("answered"), "source_3 says: final");
    assert!(model.prompts().is_empty());
    // The tool ran after its children.
    let root = run.run.step("3").expect("root");
    let child = run.run.step("1").expect("child");
    assert!(root.started >= Some(child.finished));
}

#[tokio::test(start_paused = true)]
async fn a_failed_child_skips_its_parents_and_reaches_the_caller() {
    let model = TestModel::new(50);
    let src = sources(3, 10);
    let p = planner(&src, Synthesizer::compact(model.clone()));
    let plan = p
        .compile_value(json!({"nodes": [
            leaf(1, "source_1", "ok"), leaf(2, "source_2", "FAIL please"), leaf(3, "source_3", "ok"),
            branch(4, "x", &[1, 2]), branch(5, "root", &[4, 3])
        ]}))
        .expect("valid");
    let run = p.run(&plan, RunControl::default()).await;
    let err = run.answer().expect_err("root cannot be answered");
    assert_eq!(err.to_string(), "node 2 failed: source_2 cannot answer");
    assert!(matches!(err, QueryError::NodeFailed { .. }));
    let status = |id: &str| run.run.step(id).expect("step").status;
    assert_eq!(status("1"), StepStatus::Ok);
    assert_eq!(status("3"), StepStatus::Ok);
    assert_eq!(status("4"), StepStatus::Skipped);
    assert_eq!(status("5"), StepStatus::Skipped);
    assert_eq!(
        run.run.step("4").and_then(|s| s.error.as_deref()),
        Some("Skipped because dependency '2' failed")
    );
    assert!(model.prompts().is_empty());
}

#[tokio::test(start_paused = true)]
async fn compact_refines_when_children_exceed_the_budget() {
    let model = TestModel::new(10);
    let src = sources(3, 10);
    let synthesizer = Synthesizer::compact(model.clone()).with_context_budget(256);
    let p = planner(&src, synthesizer);
    let long = "x".repeat(200);
    let plan = p
        .compile_value(json!({"nodes": [
            leaf(1, "source_1", &long), leaf(2, "source_2", &long), leaf(3, "source_3", &long),
            branch(4, "sum up", &[1, 2, 3])
        ]}))
        .expect("valid");
    let run = p.run(&plan, RunControl::default()).await;
    run.answer().expect("answered");
    let prompts = model.prompts();
    assert!(prompts.len() >= 3, "{}", prompts.len());
    assert!(prompts[0].starts_with("Information"));
    // Each later chunk refines the answer so far.
    assert!(
        prompts[1].starts_with("Question: sum up\nAnswer so far: answer #1"),
        "{}",
        prompts[1]
    );
}

#[tokio::test(start_paused = true)]
async fn tree_summarize_answers_chunks_in_parallel_then_combines() {
    let model = TestModel::new(100);
    let src = sources(4, 10);
    let synthesizer = Synthesizer::tree_summarize(model.clone()).with_context_budget(300);
    let p = planner(&src, synthesizer);
    let long = "y".repeat(100);
    let mut nodes: Vec<Value> = (1..=4)
        .map(|i| leaf(i, &format!("source_{i}"), &long))
        .collect();
    nodes.push(branch(5, "summary", &[1, 2, 3, 4]));
    let plan = p.compile_value(json!({ "nodes": nodes })).expect("valid");
    let run = p.run(&plan, RunControl::default()).await;
    let answer = run.answer_text().expect("answered");
    let prompts = model.prompts();
    // Four chunks answered at once (one level, 100 ms), then their answers in one prompt (100 ms).
    assert_eq!(prompts.len(), 5, "{prompts:?}");
    assert!(!prompts[4].contains("Query: ") && prompts[4].contains("answer #4 to summary"));
    assert_eq!(answer, "answer #5 to summary");
    assert_eq!(run.run.elapsed, Duration::from_millis(10 + 200));
}

#[tokio::test(start_paused = true)]
async fn cancelling_stops_the_plan() {
    let model = TestModel::new(10_000);
    let src = sources(2, 10);
    let p = planner(&src, Synthesizer::compact(model));
    let plan = p
        .compile_value(json!({"nodes": [leaf(1, "source_1", "a"), branch(2, "b", &[1])]}))
        .expect("valid");
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        trigger.cancel();
    });
    let run = p.run(&plan, RunControl::with_cancel(cancel)).await;
    let err = run.answer().expect_err("cancelled");
    assert_eq!(
        err.to_string(),
        "the query plan stopped before node 2 was answered: the run was cancelled"
    );
    assert!(run.run.elapsed < Duration::from_millis(200));
}

#[tokio::test]
async fn the_tool_lists_every_tool_and_its_schema_describes_the_fields() {
    let p = Arc::new(
        QueryPlanner::new(toolplan_demo::tools(), Synthesizer::concat()).expect("registers"),
    );
    let tool = QueryPlanTool::new(Arc::clone(&p));
    assert_eq!(tool.name(), "query_plan_tool");
    let d = tool.description();
    assert!(
        d.starts_with("This tool answers a question through a query plan"),
        "{d}"
    );
    assert!(
        d.contains("\n\nTool Name: get_weather\nTool Description: Current weather of a city"),
        "{d}"
    );
    assert!(!d.contains("Tool Name: synthesize"), "{d}");
    let schema = tool.parameters();
    let node = &schema["properties"]["nodes"]["items"]["properties"];
    for field in ["id", "query_str", "tool_name", "dependencies"] {
        assert!(node[field]["description"].is_string(), "{field}");
    }
    // Leaves can name the planner's tools (not the synthesizer), or null on branches.
    let names = node["tool_name"]["enum"].as_array().expect("enum");
    assert!(names.contains(&json!("get_weather")) && names.contains(&Value::Null));
    assert!(!names.contains(&json!("synthesize")));
    let named = QueryPlanTool::new(Arc::clone(&p))
        .with_name("plan_questions")
        .with_description_prefix("Plans questions.");
    assert_eq!(named.name(), "plan_questions");
    assert!(
        named
            .description()
            .starts_with("Plans questions.\n\nTool Name: echo")
    );
    let custom = QueryPlanTool::new(p).with_description("Only this.");
    assert_eq!(custom.description(), "Only this.");
}

#[tokio::test]
async fn the_tool_runs_plans_and_reports_llamaindex_error_cases() {
    let p = Arc::new(
        QueryPlanner::new(toolplan_demo::tools(), Synthesizer::concat()).expect("registers"),
    );
    let tool = QueryPlanTool::new(p).verbose(true);
    let call = |plan: Value| tool.call(plan, ToolContext::detached());
    // A single root that is a leaf executes.
    let out = call(json!({"nodes": [leaf(1, "get_weather", "Oslo")]}))
        .await
        .expect("runs");
    assert_eq!(out, json!({"temp": 3, "condition": "snow", "city": "Oslo"}));
    let err = call(json!({"nodes": []})).await.expect_err("empty");
    assert_eq!(
        err.to_string(),
        "invalid arguments: invalid plan: the plan is empty: it has no steps"
    );
    let err = call(json!({"nodes": [leaf(1, "echo", "a"), branch(2, "b", &[1, 3])]}))
        .await
        .expect_err("dangling");
    assert!(
        err.to_string().contains("node 2 depends on unknown node 3"),
        "{err}"
    );
    let err = call(json!({"nodes": [leaf(1, "nope", "a")]}))
        .await
        .expect_err("unknown tool");
    assert!(
        err.to_string().contains("node 1 names unknown tool 'nope'"),
        "{err}"
    );
    let err = call(json!({"nodes": [leaf(1, "fail", "a"), branch(2, "b", &[1])]}))
        .await
        .expect_err("failed leaf");
    assert!(err.to_string().starts_with("node 1 failed:"), "{err}");
}

#[test]
fn a_tool_named_like_the_synthesizer_is_refused() {
    let clash = FnTool::new("synthesize", "", json!({"type": "object"}), |_, _| async {
        Ok(Value::Null)
    });
    let err = QueryPlanner::new([Arc::new(clash) as Arc<dyn Tool>], Synthesizer::concat())
        .expect_err("clash");
    assert_eq!(
        err.to_string(),
        "a tool named 'synthesize' is registered already"
    );
}
