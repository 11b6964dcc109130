//! What streaming plans saves, without a model's noise: a scripted model writes fixed plans at a
//! fixed token rate (25 tokens/s, about the local 1.5B model on 2 cores) over tools that take
//! 0.5–2 s (read-only, as lookups are), and the agent runs each plan streamed and not streamed.
//! Reported per plan: when the first tool started, when the interaction ended, and two floors:
//! the longer of writing the plan and the tools' critical path, and the tighter bound for a plan
//! run while it is written (each step starts when its text is written and what it reads is done);
//! both plus writing the answer.
//!
//! `cargo run --release -p toolplan-agent --features test-util --example stream_bench [-- ROUNDS]`

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolplan_agent::scripted::{ScriptedModel, TOKEN_BYTES};
use toolplan_agent::{Agent, Planning};
use toolplan_core::{FnTool, Tool, ToolAnnotations};

/// The scripted model's speed.
const TOKENS_PER_SECOND: f64 = 25.0;

/// The answer after each plan.
const ANSWER: &str = "Done.";

/// `fetch`, read-only: waits `ms` and returns `{"got": name}`; logs when each call starts.
fn fetch(starts: Arc<Mutex<Vec<Instant>>>) -> Arc<dyn Tool> {
    Arc::new(
        FnTool::new(
            "fetch",
            "Fetches a thing (takes ms milliseconds).",
            json!({"type": "object", "properties": {
                "name": {"type": "string"}, "after": {}, "ms": {"type": "integer"}},
                "required": ["name", "ms"]}),
            move |args: Value, _| {
                let starts = Arc::clone(&starts);
                async move {
                    starts.lock().map(|mut s| s.push(Instant::now())).ok();
                    let ms = args["ms"].as_u64().unwrap_or(0);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok(json!({"got": args["name"]}))
                }
            },
        )
        .with_annotations(ToolAnnotations::READ_ONLY),
    )
}

/// A step of `fetch` taking `ms`, after the steps `after` names.
fn step(id: &str, ms: u64, after: &[&str]) -> Value {
    let mut arguments = json!({"name": id, "ms": ms});
    if !after.is_empty() {
        let refs: Vec<String> = after.iter().map(|a| format!("$ref:{a}.got")).collect();
        arguments["after"] = json!(refs);
    }
    json!({"id": id, "tool": "fetch", "arguments": arguments})
}

/// A plan's steps: each one's duration and the steps it reads, by index.
type Shape = Vec<(u64, Vec<usize>)>;

/// A step as written below: id, duration in ms, the ids it reads.
type StepSpec = (&'static str, u64, Vec<&'static str>);

/// The plans: name, the plan, its shape.
fn plans() -> Vec<(&'static str, Value, Shape)> {
    let shapes: Vec<(&str, &str, Vec<StepSpec>)> = vec![
        (
            "fan-out of 4",
            "Four independent lookups.",
            vec![
                ("a", 2000, vec![]),
                ("b", 1500, vec![]),
                ("c", 1000, vec![]),
                ("d", 500, vec![]),
            ],
        ),
        (
            "chain of 3",
            "Each lookup needs the one before.",
            vec![
                ("a", 1000, vec![]),
                ("b", 1000, vec!["a"]),
                ("c", 1000, vec!["b"]),
            ],
        ),
        (
            "two lookups, then one on both",
            "Two lookups, then a third that needs both.",
            vec![
                ("a", 2000, vec![]),
                ("b", 1000, vec![]),
                ("c", 500, vec!["a", "b"]),
            ],
        ),
    ];
    shapes
        .into_iter()
        .map(|(name, thought, steps)| {
            let ids: Vec<&str> = steps.iter().map(|s| s.0).collect();
            let plan = json!({
                "thought": thought,
                "steps": steps.iter().map(|(id, ms, after)| step(id, *ms, after)).collect::<Vec<_>>(),
                "output_steps": [ids[ids.len() - 1]],
            });
            let shape = steps
                .iter()
                .map(|(_, ms, after)| {
                    let deps = after
                        .iter()
                        .filter_map(|a| ids.iter().position(|i| i == a))
                        .collect();
                    (*ms, deps)
                })
                .collect();
            (name, plan, shape)
        })
        .collect()
}

/// How long the scripted model takes to write `text`.
fn writing(text: &str) -> Duration {
    Duration::from_secs_f64(text.len().div_ceil(TOKEN_BYTES) as f64 / TOKENS_PER_SECOND)
}

/// The tools' critical path: the longest chain of durations through the references.
fn critical_path(shape: &[(u64, Vec<usize>)]) -> Duration {
    let mut finish = vec![0u64; shape.len()];
    for (i, (ms, deps)) in shape.iter().enumerate() {
        finish[i] = ms + deps.iter().map(|&d| finish[d]).max().unwrap_or(0);
    }
    Duration::from_millis(finish.into_iter().max().unwrap_or(0))
}

/// The end of a plan whose steps each start as soon as their text is written and the steps they
/// read are done (`text` the plan as the model writes it).
fn streamed_bound(text: &str, shape: &[(u64, Vec<usize>)]) -> Duration {
    let mut finish: Vec<Duration> = Vec::new();
    for (i, (ms, deps)) in shape.iter().enumerate() {
        // A step's text ends with its arguments' closing braces: the `}}` after its name.
        let name = ["a", "b", "c", "d"].get(i).copied().unwrap_or("?");
        let at = text
            .find(&format!("\"name\":\"{name}\""))
            .and_then(|p| text[p..].find("}}").map(|e| p + e + 2))
            .unwrap_or(text.len());
        let written = writing(&text[..at]);
        let ready = deps.iter().map(|&d| finish[d]).max().unwrap_or_default();
        finish.push(written.max(ready) + Duration::from_millis(*ms));
    }
    finish.into_iter().max().unwrap_or_default()
}

/// One interaction: when the first tool started and when it ended, from the start.
async fn interact(plan: &Value, stream: bool) -> (Duration, Duration) {
    let starts = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", plan.clone())]),
        ScriptedModel::answer(ANSWER),
    ])
    .writing_at(TOKENS_PER_SECOND);
    let agent = Agent::builder("bench")
        .model(Arc::new(model))
        .tool(fetch(Arc::clone(&starts)))
        .planning(Planning::Only)
        .stream_plans(stream)
        .build()
        .expect("the agent builds");
    let start = Instant::now();
    let out = agent
        .interact("Fetch them.")
        .await
        .expect("the interaction succeeds");
    let end = start.elapsed();
    assert_eq!(out.answer, ANSWER);
    let first = starts
        .lock()
        .ok()
        .and_then(|s| s.iter().min().copied())
        .map_or(end, |t| t - start);
    (first, end)
}

fn secs(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64())
}

#[tokio::main]
async fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    println!(
        "# scripted model at {TOKENS_PER_SECOND} tokens/s ({TOKEN_BYTES} bytes a token), read-only tools of 0.5-2 s; median of {rounds} rounds; seconds"
    );
    println!(
        "{:<32} {:>7} {:>7} {:>7} {:>7} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "plan",
        "write",
        "tools",
        "floor",
        "bound",
        "first:no",
        "first:str",
        "end:no",
        "end:str",
        "saved"
    );
    for (name, plan, shape) in plans() {
        let write = writing(&plan.to_string());
        let tools = critical_path(&shape);
        let floor = write.max(tools) + writing(ANSWER);
        let bound = streamed_bound(&plan.to_string(), &shape) + writing(ANSWER);
        let mut runs = [Vec::new(), Vec::new()];
        for _ in 0..rounds {
            for (i, stream) in [false, true].into_iter().enumerate() {
                runs[i].push(interact(&plan, stream).await);
            }
        }
        let median = |v: &mut Vec<(Duration, Duration)>, end: bool| {
            let mut x: Vec<Duration> = v.iter().map(|r| if end { r.1 } else { r.0 }).collect();
            x.sort();
            x[x.len() / 2]
        };
        let (first_no, end_no) = (median(&mut runs[0], false), median(&mut runs[0], true));
        let (first_st, end_st) = (median(&mut runs[1], false), median(&mut runs[1], true));
        println!(
            "{:<32} {:>7} {:>7} {:>7} {:>7} {:>9} {:>9} {:>9} {:>9} {:>6.0}%",
            name,
            secs(write),
            secs(tools),
            secs(floor),
            secs(bound),
            secs(first_no),
            secs(first_st),
            secs(end_no),
            secs(end_st),
            (1.0 - end_st.as_secs_f64() / end_no.as_secs_f64()) * 100.0
        );
    }
}
