//! Query plans run while they are written (`QueryPlanner::run_streamed`): a node joins the run when
//! its text is complete, leaves start before the rest is written, and the result is what the whole
//! text compiled and run gives: the same problems for an invalid plan, the same run for a valid one.

use std::time::Duration;

use futures::StreamExt;
use proptest::prelude::*;
use serde_json::{Value, json};
use toolplan_core::{InvalidPlan, RunControl, StepStatus};
use toolplan_query::{QueryPlanner, QueryRun, Synthesizer};

fn planner() -> QueryPlanner {
    QueryPlanner::new(toolplan_demo::tools(), Synthesizer::concat()).unwrap()
}

/// `parts` as a stream, each after `pause` (the first at once).
fn written_slowly(
    parts: Vec<String>,
    pause: Duration,
) -> impl futures::Stream<Item = String> + Send {
    futures::stream::iter(parts.into_iter().enumerate()).then(move |(i, part)| async move {
        if i > 0 {
            tokio::time::sleep(pause).await;
        }
        part
    })
}

/// Runs `text` cut at `cuts` (byte offsets), streamed.
async fn streamed(
    planner: &QueryPlanner,
    text: &str,
    cuts: &[usize],
) -> Result<QueryRun, InvalidPlan> {
    let mut parts = Vec::new();
    let mut at = 0;
    for &cut in cuts {
        if cut > at && cut < text.len() && text.is_char_boundary(cut) {
            parts.push(text[at..cut].to_owned());
            at = cut;
        }
    }
    parts.push(text[at..].to_owned());
    planner
        .run_streamed(futures::stream::iter(parts), RunControl::default())
        .await
}

/// Compiles and runs `text` whole.
async fn whole(planner: &QueryPlanner, text: &str) -> Result<QueryRun, InvalidPlan> {
    let plan = planner.compile(text)?;
    Ok(planner.run(&plan, RunControl::default()).await)
}

/// The prefix of a skipped step's error, before the name of the failed dependency.
const SKIPPED: &str = "Skipped because dependency '";

/// What a run says apart from timings: each node's status, output and error, the root, the answer.
/// A skipped node's error keeps its reason but not the dependency it names: of two that failed,
/// which one a node hears of first is a matter of timing.
fn outcome(run: &QueryRun) -> Value {
    let nodes: Vec<Value> = run
        .run
        .steps
        .iter()
        .map(|s| {
            let error = match s.error.as_deref() {
                Some(e) if e.starts_with(SKIPPED) => Some(SKIPPED),
                other => other,
            };
            json!([s.id, s.tool, s.status.as_str(), s.output, error])
        })
        .collect();
    json!({
        "root": run.root,
        "nodes": nodes,
        "queries": run.nodes.iter().map(|n| n.query.clone()).collect::<Vec<_>>(),
        "answer": run.answer_text().unwrap_or_else(|e| e.to_string()),
    })
}

#[tokio::test(start_paused = true)]
async fn leaves_start_before_the_plan_is_written() {
    let planner = QueryPlanner::new(
        toolplan_demo::tools_with_latency(Duration::from_millis(300)),
        Synthesizer::concat(),
    )
    .unwrap();
    let parts = vec![
        r#"{"nodes": [{"id": 1, "query_str": "Tokyo", "tool_name": "get_weather", "dependencies": []},"#.to_owned(),
        r#"{"id": 2, "query_str": "London", "tool_name": "get_weather", "dependencies": []},"#.to_owned(),
        r#"{"id": 3, "query_str": "Compare", "tool_name": null, "dependencies": [1, 2]}]}"#.to_owned(),
    ];
    let run = planner
        .run_streamed(
            written_slowly(parts, Duration::from_secs(1)),
            RunControl::default(),
        )
        .await
        .unwrap();
    assert_eq!(run.root, "3");
    let step = |id: &str| run.run.steps.iter().find(|s| s.id == id).unwrap();
    let (one, two, three) = (step("1"), step("2"), step("3"));
    assert!(run.run.steps.iter().all(|s| s.status == StepStatus::Ok));
    // Node 1 starts as soon as it is written, and is done before node 2 is written.
    assert!(one.started.unwrap() < Duration::from_millis(100), "{one:?}");
    assert!(one.finished < two.written.unwrap(), "{one:?} {two:?}");
    // The branch starts when it is written (its children are answered by then), not later.
    let written = three.written.unwrap();
    assert!(written >= Duration::from_secs(2));
    assert!(three.started.unwrap() - written < Duration::from_millis(50));
    assert!(run.answer_text().unwrap().contains("Query: London"));
    // The whole run took the writing and the branch, not the writing plus both leaves.
    assert!(
        run.run.elapsed < Duration::from_millis(2100),
        "{:?}",
        run.run.elapsed
    );
}

#[tokio::test(start_paused = true)]
async fn a_branch_waits_for_a_child_written_after_it() {
    let planner = planner();
    let parts = vec![
        r#"{"nodes": [{"id": "r", "query_str": "Both", "tool_name": null, "dependencies": ["a", "b"]},"#.to_owned(),
        r#"{"id": "a", "query_str": "Tokyo", "tool_name": "get_weather", "dependencies": []},"#.to_owned(),
        r#"{"id": "b", "query_str": "Paris", "tool_name": "get_weather", "dependencies": []}]}"#.to_owned(),
    ];
    let run = planner
        .run_streamed(
            written_slowly(parts, Duration::from_millis(500)),
            RunControl::default(),
        )
        .await
        .unwrap();
    let step = |id: &str| run.run.steps.iter().find(|s| s.id == id).unwrap();
    let root = step("r");
    assert_eq!(root.status, StepStatus::Ok);
    // `a` started when it was written, and that early start was kept (the plan did not run again
    // from the start once it was whole).
    assert!(step("a").started.unwrap() < step("b").written.unwrap());
    assert!(root.started.unwrap() >= Duration::from_millis(1000));
    // Its synthesis names both children's questions, which it learned only once they were written.
    let answer = run.answer_text().unwrap();
    assert!(
        answer.contains("Query: Tokyo") && answer.contains("Query: Paris"),
        "{answer}"
    );
}

#[tokio::test]
async fn an_invalid_plan_fails_with_the_problems_of_the_whole_text() {
    let planner = planner();
    for text in [
        // A dependency never written.
        r#"{"nodes": [{"id": 1, "query_str": "Tokyo", "tool_name": "get_weather", "dependencies": [7]}]}"#,
        // Two roots.
        r#"{"nodes": [{"id": 1, "query_str": "a", "tool_name": "get_weather", "dependencies": []},
                      {"id": 2, "query_str": "b", "tool_name": "get_weather", "dependencies": []}]}"#,
        // A cycle, and a duplicate id.
        r#"{"nodes": [{"id": 1, "query_str": "a", "tool_name": null, "dependencies": [2]},
                      {"id": 2, "query_str": "b", "tool_name": null, "dependencies": [1]},
                      {"id": 2, "query_str": "c", "tool_name": "get_weather", "dependencies": []}]}"#,
        // An unknown tool, and text that ends early.
        r#"{"nodes": [{"id": 1, "query_str": "a", "tool_name": "get_wether", "dependencies": []}"#,
        "not json",
    ] {
        let expected = planner.compile(text).unwrap_err();
        let got = streamed(&planner, text, &[10, 40, 90]).await.unwrap_err();
        assert_eq!(got.problems, expected.problems, "{text}");
    }
}

#[tokio::test]
async fn a_cancelled_run_has_no_root_and_says_why() {
    let planner = planner();
    let cancel = tokio_util::sync::CancellationToken::new();
    cancel.cancel();
    let text =
        futures::stream::iter(vec![r#"{"nodes": ["#.to_owned()]).chain(futures::stream::pending());
    let run = planner
        .run_streamed(text, RunControl::with_cancel(cancel))
        .await
        .unwrap();
    assert!(run.root.is_empty() && run.nodes.is_empty());
    assert!(run.answer().unwrap_err().to_string().contains("cancelled"));
}

/// A query plan over the demo tools: node `i` is a leaf (a tool, sometimes none or a misspelt one)
/// or a branch over some other nodes (forward references included, sometimes to a node that does
/// not exist); ids are sometimes repeated.
fn query_plan() -> impl Strategy<Value = String> {
    let node = (
        0u8..8,
        prop::sample::select(vec!["get_weather", "get_user", "", "get_wether"]),
        prop::collection::vec(0u8..9, 0..3),
        any::<bool>(),
    );
    prop::collection::vec(node, 1..7).prop_map(|nodes| {
        let count = nodes.len() as u8;
        let items: Vec<Value> = nodes
            .iter()
            .enumerate()
            .map(|(i, (dup, tool, deps, branch))| {
                let id = if *dup == 0 && i > 0 { i - 1 } else { i };
                let deps: Vec<u8> = if *branch {
                    deps.iter().map(|d| d % (count + 1)).filter(|&d| d as usize != id).collect()
                } else {
                    Vec::new()
                };
                let tool = if tool.is_empty() { Value::Null } else { json!(tool) };
                json!({"id": id, "query_str": format!("q{i} Tokyo"), "tool_name": tool, "dependencies": deps})
            })
            .collect();
        json!({ "nodes": items }).to_string()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn streamed_in_any_chunks_is_the_plan_read_whole(
        text in query_plan(),
        cuts in prop::collection::vec(0usize..400, 0..12),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let planner = planner();
        let mut cuts = cuts;
        cuts.sort_unstable();
        let (read_whole, read_streamed) = runtime.block_on(async {
            (whole(&planner, &text).await, streamed(&planner, &text, &cuts).await)
        });
        match (read_whole, read_streamed) {
            (Ok(a), Ok(b)) => prop_assert_eq!(outcome(&a), outcome(&b), "{}", text),
            (Err(a), Err(b)) => prop_assert_eq!(a.problems, b.problems, "{}", text),
            (a, b) => prop_assert!(false, "{text}: whole {:?}, streamed {:?}", a.map(|r| outcome(&r)), b.map(|r| outcome(&r))),
        }
    }
}

#[tokio::test]
async fn endless_text_ends_at_the_plan_size_limit() {
    let limits = toolplan_core::Limits {
        max_plan_bytes: 4096,
        ..toolplan_core::Limits::default()
    };
    let planner = planner().with_limits(limits);
    let endless = futures::stream::iter(vec![r#"{"nodes": ["#.to_owned()])
        .chain(futures::stream::repeat_with(|| " ".repeat(1000)));
    let problems = tokio::time::timeout(
        Duration::from_secs(10),
        planner.run_streamed(endless, RunControl::default()),
    )
    .await
    .expect("stops at the limit")
    .unwrap_err()
    .problems;
    assert!(
        matches!(
            problems.as_slice(),
            [toolplan_core::Problem::PlanTooLarge { limit: 4096, .. }]
        ),
        "{problems:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_writer_that_stalls_is_stopped_at_the_deadline_with_what_it_wrote() {
    let config = toolplan_core::RunConfig {
        deadline: Some(Duration::from_secs(5)),
        ..toolplan_core::RunConfig::default()
    };
    let planner = planner().with_config(config);
    let first = r#"{"nodes": [{"id": 1, "query_str": "Tokyo", "tool_name": "get_weather", "dependencies": []},"#;
    let stalled = futures::stream::iter(vec![first.to_owned()]).chain(futures::stream::pending());
    let run = planner
        .run_streamed(stalled, RunControl::default())
        .await
        .unwrap();
    assert_eq!(run.run.outcome, toolplan_core::RunOutcome::DeadlineExceeded);
    assert_eq!(run.run.steps.len(), 1);
    assert_eq!(run.run.steps[0].status, StepStatus::Ok);
    assert!(run.answer().unwrap_err().to_string().contains("deadline"));
}

/// The query-plan tool begun from its arguments' text while they are written: a call with those
/// arguments goes on from the run begun (a leaf ran before the call was made), and a call with other
/// arguments runs its own plan.
#[tokio::test(start_paused = true)]
async fn the_query_plan_tool_goes_on_from_a_begun_call_with_the_same_arguments() {
    use toolplan_core::{Tool, ToolContext};
    use toolplan_query::QueryPlanTool;
    let planner = QueryPlanner::new(
        toolplan_demo::tools_with_latency(Duration::from_secs(1)),
        Synthesizer::concat(),
    )
    .unwrap();
    let tool = QueryPlanTool::new(std::sync::Arc::new(planner));
    assert!(tool.begins_streamed());
    let plan = json!({"nodes": [
        {"id": 1, "query_str": "Tokyo", "tool_name": "get_weather", "dependencies": []},
        {"id": 2, "query_str": "Both", "tool_name": null, "dependencies": [1]}]});
    let other = json!({"nodes": [
        {"id": 1, "query_str": "Paris", "tool_name": "get_weather", "dependencies": []}]});

    let mut start = tool.begin_streamed().unwrap();
    let text = plan.to_string();
    let (head, tail) = text.split_at(text.find(r#"{"id":2"#).unwrap());
    start.push(head.to_owned());
    // The leaf runs while the rest is being written.
    tokio::time::sleep(Duration::from_secs(2)).await;
    start.push(tail.to_owned());
    start.end();
    let began = tokio::time::Instant::now();
    let answer = tool
        .call(plan.clone(), ToolContext::detached())
        .await
        .unwrap();
    // Nothing left to wait for: the leaf was answered before the call.
    assert!(
        began.elapsed() < Duration::from_millis(100),
        "{:?}",
        began.elapsed()
    );
    assert!(
        answer.as_str().unwrap().starts_with("Query: Tokyo"),
        "{answer}"
    );

    // A begun call whose arguments are not the call's is not taken up.
    let mut start = tool.begin_streamed().unwrap();
    start.push(plan.to_string());
    start.end();
    let answer = tool.call(other, ToolContext::detached()).await.unwrap();
    assert_eq!(answer["city"], "Paris", "{answer}");
    drop(start);
}

/// Begun calls that no call takes up are bounded: past [`MAX_WAITING_STARTS`] the oldest are
/// stopped.
#[tokio::test(start_paused = true)]
async fn begun_calls_never_taken_up_are_bounded() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use toolplan_core::Tool;
    use toolplan_query::{MAX_WAITING_STARTS, QueryPlanTool};
    let done = Arc::new(AtomicUsize::new(0));
    let slow = slow_tool(Arc::clone(&done));
    let planner = QueryPlanner::new([slow], Synthesizer::concat()).unwrap();
    let tool = QueryPlanTool::new(Arc::new(planner));
    // Starts kept alive and never taken up.
    let starts: Vec<_> = (0..MAX_WAITING_STARTS + 3)
        .map(|i| {
            let mut start = tool.begin_streamed().unwrap();
            let plan = json!({"nodes": [{"id": 1, "query_str": format!("q{i}"), "tool_name": "slow", "dependencies": []}]});
            start.push(plan.to_string());
            start.end();
            start
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(done.load(Ordering::SeqCst), MAX_WAITING_STARTS);
    drop(starts);
}

/// `slow`, read-only: answers "ok" after a second, and counts the calls that finished.
fn slow_tool(
    done: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> std::sync::Arc<dyn toolplan_core::Tool> {
    use toolplan_core::{FnTool, ToolAnnotations};
    std::sync::Arc::new(
        FnTool::new(
            "slow",
            "Answers after a second.",
            json!({"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}),
            move |_args: Value, _| {
                let done = std::sync::Arc::clone(&done);
                async move {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Ok(json!("ok"))
                }
            },
        )
        .with_annotations(ToolAnnotations::READ_ONLY),
    )
}

/// A run a call took up is the call's: the start that began it, dropped meanwhile (its turn
/// ended), does not stop it; and a start whose text has not ended is not taken up (the call runs
/// its own plan instead of waiting for the rest of a text).
#[tokio::test(start_paused = true)]
async fn a_taken_run_is_the_calls_and_an_unended_start_is_not_taken() {
    use std::sync::Arc;
    use toolplan_core::{Tool, ToolContext};
    use toolplan_query::QueryPlanTool;
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let planner = QueryPlanner::new([slow_tool(done)], Synthesizer::concat()).unwrap();
    let tool = QueryPlanTool::new(Arc::new(planner));
    let plan =
        json!({"nodes": [{"id": 1, "query_str": "q", "tool_name": "slow", "dependencies": []}]});

    let mut start = tool.begin_streamed().unwrap();
    start.push(plan.to_string());
    start.end();
    let drop_soon = async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(start);
    };
    let (answer, ()) = tokio::join!(tool.call(plan.clone(), ToolContext::detached()), drop_soon);
    assert_eq!(answer.unwrap(), "ok");

    let start = tool.begin_streamed().unwrap();
    start.push(plan.to_string());
    let answer = tokio::time::timeout(
        Duration::from_secs(30),
        tool.call(plan.clone(), ToolContext::detached()),
    )
    .await
    .expect("the call does not wait for a text that has not ended");
    assert_eq!(answer.unwrap(), "ok");
    drop(start);
}
