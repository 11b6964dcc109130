//! Steps on a tool that changes things keep the order the plan wrote them in (issue 21.3), unless
//! the data flow puts them the other way; read-only tools stay parallel; `WrittenOrder::Free`
//! turns the rule off; a hostile plan of 10,000 such steps validates in bounded time.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolplan_core::{
    Engine, FnTool, Limits, RunControl, StepStatus, ToolAnnotations, ToolRegistry, WrittenOrder,
};

/// `press` (changes things: says nothing of itself), `look` (read-only), both taking `ms` to run
/// and logging `start NAME` / `end NAME`; `press` fails when its `name` is "bad".
fn tools(order: WrittenOrder) -> (Engine, Arc<Mutex<Vec<String>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut registry = ToolRegistry::new();
    for (tool, annotations) in [
        ("press", ToolAnnotations::default()),
        ("look", ToolAnnotations::READ_ONLY),
    ] {
        let log = Arc::clone(&log);
        registry
            .register(Arc::new(
                FnTool::new(
                    tool,
                    "t",
                    json!({"type": "object"}),
                    move |args: Value, _| {
                        let log = Arc::clone(&log);
                        async move {
                            let name = args["name"].as_str().unwrap_or("?").to_owned();
                            log.lock().unwrap().push(format!("start {name}"));
                            let ms = args["ms"].as_u64().unwrap_or(0);
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                            log.lock().unwrap().push(format!("end {name}"));
                            if name == "bad" {
                                return Err(toolplan_core::ToolError::failed("bad press"));
                            }
                            Ok(json!({"name": name}))
                        }
                    },
                )
                .with_annotations(annotations),
            ))
            .unwrap();
    }
    let limits = Limits {
        written_order: order,
        ..Limits::default()
    };
    (Engine::new(Arc::new(registry)).with_limits(limits), log)
}

fn step(id: &str, tool: &str, name: &str, ms: u64) -> Value {
    json!({"id": id, "tool": tool, "arguments": {"name": name, "ms": ms}})
}

async fn run(engine: &Engine, steps: Vec<Value>) -> toolplan_core::PlanRun {
    let plan = engine.compile_value(json!({"steps": steps})).unwrap();
    engine.run(&plan, RunControl::default()).await
}

#[tokio::test(start_paused = true)]
async fn steps_on_a_tool_that_changes_things_run_in_written_order() {
    let (engine, log) = tools(WrittenOrder::Kept);
    let run = run(
        &engine,
        vec![
            step("a", "press", "A", 100),
            step("b", "press", "B", 10),
            step("l", "look", "L", 50),
        ],
    )
    .await;
    assert!(run.all_ok());
    let log = log.lock().unwrap().clone();
    // B waits for A, though it is shorter; the read-only look runs beside them.
    let pos = |e: &str| log.iter().position(|l| l == e).unwrap();
    assert!(pos("end A") < pos("start B"), "{log:?}");
    assert!(pos("start L") < pos("end A"), "{log:?}");
    assert_eq!(run.waves.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn read_only_steps_and_free_order_run_at_once() {
    let (engine, log) = tools(WrittenOrder::Kept);
    run(
        &engine,
        vec![step("a", "look", "A", 100), step("b", "look", "B", 10)],
    )
    .await;
    assert_eq!(log.lock().unwrap()[..2], ["start A", "start B"]);
    let (engine, log) = tools(WrittenOrder::Free);
    run(
        &engine,
        vec![step("a", "press", "A", 100), step("b", "press", "B", 10)],
    )
    .await;
    assert_eq!(log.lock().unwrap()[..2], ["start A", "start B"]);
}

#[tokio::test(start_paused = true)]
async fn the_data_flow_wins_over_the_written_order() {
    let (engine, log) = tools(WrittenOrder::Kept);
    // a needs c's result; b was written after a: c, then a, then b.
    let run = run(
        &engine,
        vec![
            json!({"id": "a", "tool": "press", "arguments": {"name": "$ref:c.name", "ms": 10}}),
            step("b", "press", "B", 10),
            step("c", "press", "C", 10),
        ],
    )
    .await;
    assert!(run.all_ok(), "{}", run.summary());
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log,
        ["start C", "end C", "start C", "end C", "start B", "end B"],
        "a (named after c's result, C) runs before b"
    );
}

#[tokio::test(start_paused = true)]
async fn a_later_step_is_skipped_when_the_one_before_it_fails() {
    let (engine, log) = tools(WrittenOrder::Kept);
    let run = run(
        &engine,
        vec![step("a", "press", "bad", 10), step("b", "press", "B", 10)],
    )
    .await;
    assert_eq!(run.steps[1].status, StepStatus::Skipped);
    assert!(!log.lock().unwrap().iter().any(|l| l == "start B"));
}

#[test]
fn ten_thousand_steps_that_invert_the_order_validate_in_bounded_time() {
    let (engine, _) = tools(WrittenOrder::Kept);
    // Each step needs the one written after it: the data flow inverts every order edge.
    let n = 10_000;
    let steps: Vec<Value> = (0..n)
        .map(|i| {
            let name = if i + 1 < n {
                json!(format!("$ref:s{}.name", i + 1))
            } else {
                json!("last")
            };
            json!({"id": format!("s{i}"), "tool": "press", "arguments": {"name": name}})
        })
        .collect();
    let waves = |steps: Vec<Value>| {
        let started = Instant::now();
        let plan = engine.compile_value(json!({"steps": steps})).unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        plan.waves().len()
    };
    assert_eq!(waves(steps), n);
    // Independent steps on the same tool: one chain, in written order.
    assert_eq!(
        waves(
            (0..n)
                .map(|i| step(&format!("s{i}"), "press", "x", 0))
                .collect()
        ),
        n
    );
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    /// Plans of up to 24 steps on `press` or `look` whose references go in any written direction
    /// but follow one hidden order (so the plan has no cycle).
    fn plans() -> impl Strategy<Value = Vec<(bool, Vec<usize>)>> {
        (1usize..24).prop_flat_map(|n| {
            (
                Just(n),
                Just((0..n).collect::<Vec<usize>>()).prop_shuffle(),
                proptest::collection::vec(
                    (
                        any::<bool>(),
                        proptest::collection::vec(any::<prop::sample::Index>(), 0..3),
                    ),
                    n,
                ),
            )
                .prop_map(|(_, rank, raw)| {
                    raw.into_iter()
                        .enumerate()
                        .map(|(i, (press, picks))| {
                            // References only to steps ranked before this one.
                            let earlier: Vec<usize> =
                                (0..rank.len()).filter(|&j| rank[j] < rank[i]).collect();
                            let mut refs: Vec<usize> = if earlier.is_empty() {
                                Vec::new()
                            } else {
                                picks
                                    .iter()
                                    .map(|p| earlier[p.index(earlier.len())])
                                    .collect()
                            };
                            refs.sort_unstable();
                            refs.dedup();
                            (press, refs)
                        })
                        .collect()
                })
        })
    }

    /// Whether `a` reaches `b` following `next` (each step's dependencies).
    fn reaches<'s>(n: usize, next: impl Fn(usize) -> &'s [usize], a: usize, b: usize) -> bool {
        let mut stack = vec![a];
        let mut seen = vec![false; n];
        while let Some(i) = stack.pop() {
            for &d in next(i) {
                if d == b {
                    return true;
                }
                if !seen[d] {
                    seen[d] = true;
                    stack.push(d);
                }
            }
        }
        false
    }

    /// Whether step `a` of `steps` reads step `b`'s result, directly or not.
    fn reads(steps: &[(bool, Vec<usize>)], a: usize, b: usize) -> bool {
        reaches(steps.len(), |i| &steps[i].1, a, b)
    }

    /// Whether step `a` waits, directly or not, for step `b`.
    fn waits_for(plan: &toolplan_core::Plan, a: usize, b: usize) -> bool {
        reaches(plan.len(), |i| &plan.steps()[i].deps, a, b)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn every_plan_without_cycles_stays_valid_and_keeps_the_order_it_can(steps in plans()) {
            let (engine, _) = tools(WrittenOrder::Kept);
            let plan = json!({"steps": steps.iter().enumerate().map(|(i, (press, refs))| {
                let refs: Vec<Value> = refs.iter().map(|r| json!(format!("$ref:s{r}"))).collect();
                json!({"id": format!("s{i}"), "tool": if *press { "press" } else { "look" },
                       "arguments": {"i": i, "after": refs}})
            }).collect::<Vec<_>>()});
            // Whatever the references, the order rule never makes a valid plan invalid.
            let plan = engine.compile_value(plan);
            prop_assert!(plan.is_ok(), "{:?}", plan.err());
            let plan = plan.unwrap();
            // `look` steps gain no wait.
            for (i, (press, refs)) in steps.iter().enumerate() {
                if !press {
                    prop_assert_eq!(&plan.steps()[i].deps, refs);
                }
            }
            // When no `press` step reads a later-written `press` step, directly or not, the
            // `press` steps run in written order, each after the one before.
            let presses: Vec<usize> = (0..steps.len()).filter(|&i| steps[i].0).collect();
            let reads_later = presses.iter().any(|&p| {
                presses.iter().any(|&q| q > p && reads(&steps, p, q))
            });
            if !reads_later {
                for pair in presses.windows(2) {
                    prop_assert!(waits_for(&plan, pair[1], pair[0]),
                        "s{} does not wait for s{}", pair[1], pair[0]);
                }
            }
        }
    }
}
