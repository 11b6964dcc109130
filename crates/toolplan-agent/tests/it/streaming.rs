//! Plans that start running while the model writes them (issue 22): with a model that writes at a
//! known speed, a read-only step starts before the reply is done, and nothing starts before it
//! with streaming off or in a dry run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;
use toolplan_agent::scripted::{ScriptedModel, TOKEN_BYTES};
use toolplan_agent::{Agent, Planning};
use toolplan_core::{FnTool, Tool, ToolAnnotations};

/// Tokens per second of the scripted model.
const RATE: f64 = 25.0;

/// `look`, read-only, which takes 500 ms and logs when each call started.
fn look(log: Arc<Mutex<Vec<(String, Instant)>>>) -> Arc<dyn Tool> {
    Arc::new(
        FnTool::new(
            "look",
            "Looks at a thing.",
            json!({"type": "object", "properties": {"name": {"type": "string"}},
                   "required": ["name"]}),
            move |args: Value, _| {
                let log = Arc::clone(&log);
                async move {
                    let name = args["name"].as_str().unwrap_or("?").to_owned();
                    log.lock().unwrap().push((name.clone(), Instant::now()));
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    Ok(json!({"seen": name}))
                }
            },
        )
        .with_annotations(ToolAnnotations::READ_ONLY),
    )
}

fn plan() -> Value {
    json!({"thought": "Look at both.", "steps": [
        {"id": "a", "tool": "look", "arguments": {"name": "A"}},
        {"id": "b", "tool": "look", "arguments": {"name": "B"}}],
        "output_steps": ["a", "b"]})
}

/// How long the model takes to write `plan`.
fn writing_time(plan: &Value) -> Duration {
    let tokens = plan.to_string().len().div_ceil(TOKEN_BYTES) as f64;
    Duration::from_secs_f64(tokens / RATE)
}

/// An agent over `look` whose model writes `plan()` then answers, at [`RATE`].
fn agent(stream: bool, log: &Arc<Mutex<Vec<(String, Instant)>>>) -> Agent {
    let model = ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", plan())]),
        ScriptedModel::answer("Seen."),
    ])
    .writing_at(RATE);
    Agent::builder("test")
        .model(Arc::new(model))
        .tool(look(Arc::clone(log)))
        .planning(Planning::Only)
        .stream_plans(stream)
        .build()
        .unwrap()
}

/// What the model read of the tools' results.
fn tool_results(out: &toolplan_agent::Interaction) -> Vec<String> {
    out.messages
        .iter()
        .filter(|m| m.role == toolplan_llm::Role::Tool)
        .map(|m| m.content.clone())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_read_only_step_starts_while_the_plan_is_written() {
    let writing = writing_time(&plan());
    assert!(writing > Duration::from_secs(1), "{writing:?}");
    let mut results = Vec::new();
    for stream in [true, false] {
        let log = Arc::new(Mutex::new(Vec::new()));
        let start = Instant::now();
        let out = agent(stream, &log)
            .interact("Look at A and B.")
            .await
            .unwrap();
        assert_eq!(out.answer, "Seen.");
        // What the model reads of the plan's results is the same either way.
        results.push(tool_results(&out));
        let log = log.lock().unwrap().clone();
        let names: Vec<&str> = log.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["A", "B"], "each step ran once");
        let a = log[0].1 - start;
        assert_eq!(out.record.streamed_plans, usize::from(stream));
        // The record says when the first tool started.
        let first = out.record.first_tool.unwrap();
        assert!(
            first.abs_diff(a) < Duration::from_millis(50),
            "{first:?} {a:?}"
        );
        if stream {
            // `a` starts as soon as its text is complete, well before the end of the reply.
            let text = plan().to_string();
            let a_written = text.find(r#""A"}}"#).unwrap() + 5;
            let a_tokens = a_written.div_ceil(TOKEN_BYTES) as f64;
            let at = Duration::from_secs_f64(a_tokens / RATE);
            assert!(
                a <= at + Duration::from_millis(100) && a + Duration::from_millis(300) < writing,
                "a started at {a:?}, written at {at:?} of {writing:?}"
            );
        } else {
            assert!(
                a >= writing,
                "a started at {a:?}, before the plan was written"
            );
        }
    }
    assert_eq!(results[0], results[1]);
    assert!(results[0][0].contains("\"seen\""), "{:?}", results[0]);
}

#[tokio::test(start_paused = true)]
async fn a_dry_run_starts_nothing() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let proposal = agent(true, &log)
        .propose(
            "Look at A and B.",
            &tokio_util::sync::CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(proposal.calls.len(), 1);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(log.lock().unwrap().is_empty());
}

/// A query plan over `look`: two leaves, then the root.
fn query_plan() -> Value {
    json!({"nodes": [
        {"id": 1, "query_str": "A", "tool_name": "look", "dependencies": []},
        {"id": 2, "query_str": "B", "tool_name": "look", "dependencies": []},
        {"id": 3, "query_str": "Both", "tool_name": null, "dependencies": [1, 2]}]})
}

/// An agent without `execute_tool_plan` whose one tool is the query-plan tool over `look`; its
/// model writes `query_plan()` then answers, at [`RATE`].
fn query_agent(stream: bool, log: &Arc<Mutex<Vec<(String, Instant)>>>) -> Agent {
    use toolplan_query::{QueryPlanTool, QueryPlanner, Synthesizer};
    let planner = QueryPlanner::new([look(Arc::clone(log))], Synthesizer::concat()).unwrap();
    let model = ScriptedModel::new([
        ScriptedModel::calls(&[("query_plan_tool", query_plan())]),
        ScriptedModel::answer("Seen."),
    ])
    .writing_at(RATE);
    Agent::builder("test")
        .model(Arc::new(model))
        .tool(Arc::new(QueryPlanTool::new(Arc::new(planner))))
        .planning(Planning::Off)
        .stream_plans(stream)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_query_plan_leaf_starts_while_the_plan_is_written() {
    let writing = writing_time(&query_plan());
    let mut results = Vec::new();
    for stream in [true, false] {
        let log = Arc::new(Mutex::new(Vec::new()));
        let start = Instant::now();
        let out = query_agent(stream, &log)
            .interact("Look at A and B.")
            .await
            .unwrap();
        assert_eq!(out.answer, "Seen.");
        results.push(tool_results(&out));
        let log = log.lock().unwrap().clone();
        let names: Vec<&str> = log.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["A", "B"], "each leaf ran once");
        let a = log[0].1 - start;
        if stream {
            assert!(
                a + Duration::from_millis(500) < writing,
                "leaf A started at {a:?}, the plan took {writing:?} to write"
            );
        } else {
            assert!(
                a >= writing,
                "leaf A started at {a:?}, before the plan was written"
            );
        }
    }
    // The tool's result (the root's answer) is the same either way.
    assert_eq!(results[0], results[1]);
    assert!(results[0][0].contains("Query: A"), "{:?}", results[0]);
}
