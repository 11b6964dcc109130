#![allow(clippy::unwrap_used)]
//! Property tests of the scheduler: random DAGs (references of every kind and `depends_on`), random
//! failures (in the tool, or resolving a path into a text output), random global and per-tool
//! concurrency limits and both schedules, checked against an independent model of what must happen;
//! and the makespan of sleeping plans against the critical path.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestCaseError;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use toolplan_core::{
    Engine, Plan, PlanRun, RunConfig, RunControl, RunOutcome, Schedule, StepStatus, Tool,
    ToolContext, ToolError, ToolRegistry, ToolResult,
};

// ---------------------------------------------------------------------------------------------------
// Random DAGs
// ---------------------------------------------------------------------------------------------------

/// How a step names one of its dependencies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edge {
    /// `"$ref:dep"`: the whole output, typed.
    Whole,
    /// `"$ref:dep.nested.list.0"`: a field path through an object and an array.
    Field,
    /// `"… $ref:dep.id, …"`: interpolated into text.
    Text,
    /// `"depends_on": ["dep"]`: ordering only.
    DependsOn,
}

#[derive(Debug, Clone)]
struct StepSpec {
    /// Dependencies (indexes of earlier steps) and how each is named; the same dependency may appear
    /// several times.
    deps: Vec<(usize, Edge)>,
    /// Whether the tool call fails.
    fail: bool,
    /// How long the tool call sleeps.
    ms: u64,
    /// Whether `arguments` is written as a JSON string (seed style) rather than an object.
    args_as_string: bool,
    /// Whether the step calls the second recording tool (`rec2`) instead of `rec`.
    second_tool: bool,
    /// Whether the tool returns text rather than an object: a field path into it (a `Field` or `Text`
    /// edge of a dependent) then fails the dependent before its tool is called.
    text_output: bool,
}

impl StepSpec {
    fn dep_set(&self) -> BTreeSet<usize> {
        self.deps.iter().map(|&(d, _)| d).collect()
    }
}

#[derive(Debug, Clone)]
struct Dag {
    steps: Vec<StepSpec>,
    /// The order the steps are listed in the plan (a permutation of `0..n`).
    order: Vec<usize>,
    /// `output_steps` (empty: omitted).
    outputs: Vec<usize>,
}

fn edge() -> impl Strategy<Value = Edge> {
    prop_oneof![
        Just(Edge::Whole),
        Just(Edge::Field),
        Just(Edge::Text),
        Just(Edge::DependsOn),
    ]
}

/// DAGs of 1..=`max_n` steps; each step depends on a random subset of earlier steps. `fail_p` is the
/// chance that a step's tool fails (and, when not zero, some steps return text, so that dependents
/// following a path into it fail before their tool is called).
fn dag(
    max_n: usize,
    fail_p: f64,
    ms: std::ops::Range<u64>,
    with_outputs: bool,
) -> impl Strategy<Value = Dag> {
    (1..=max_n)
        .prop_flat_map(move |n| {
            let step = (
                prop::collection::vec((any::<Index>(), edge()), 0..5),
                prop::bool::weighted(fail_p),
                ms.clone(),
                any::<bool>(),
                prop::bool::weighted(0.4),
                // Plans without failures have no text outputs either.
                prop::bool::weighted(if fail_p > 0.0 { 0.08 } else { 0.0 }),
            );
            let outputs = if with_outputs {
                prop::collection::vec(any::<Index>(), 0..4).boxed()
            } else {
                Just(Vec::new()).boxed()
            };
            (
                prop::collection::vec(step, n),
                Just((0..n).collect::<Vec<usize>>()).prop_shuffle(),
                outputs,
            )
        })
        .prop_map(|(raw, order, outputs)| {
            let n = raw.len();
            let steps = raw
                .into_iter()
                .enumerate()
                .map(
                    |(i, (picks, fail, ms, args_as_string, second_tool, text_output))| StepSpec {
                        deps: if i == 0 {
                            Vec::new()
                        } else {
                            picks.into_iter().map(|(ix, e)| (ix.index(i), e)).collect()
                        },
                        fail,
                        ms,
                        args_as_string,
                        second_tool,
                        text_output,
                    },
                )
                .collect();
            Dag {
                steps,
                order,
                outputs: outputs.into_iter().map(|ix| ix.index(n)).collect(),
            }
        })
}

/// Step ids of a few shapes, all matching `[A-Za-z0-9_-]+`.
fn id_of(i: usize) -> String {
    match i % 3 {
        0 => format!("s{i}"),
        1 => format!("step-{i}"),
        _ => format!("n_{i}"),
    }
}

/// What the recording tool returns for step `id`.
fn output_of(id: &str, text_output: bool) -> Value {
    if text_output {
        json!(format!("plain text from {id}"))
    } else {
        json!({"id": id, "nested": {"list": [id, 7]}})
    }
}

/// Whether step `i` must fail before its tool is called: it follows a field path into a dependency's
/// text output.
fn fails_to_render(dag: &Dag, i: usize) -> bool {
    dag.steps[i]
        .deps
        .iter()
        .any(|&(d, e)| matches!(e, Edge::Field | Edge::Text) && dag.steps[d].text_output)
}

/// The arguments the recording tool must receive for step `i`, once references are resolved, and the
/// arguments as written in the plan.
fn arguments_of(dag: &Dag, i: usize) -> (Value, Value) {
    let s = &dag.steps[i];
    let (mut whole, mut field) = (Vec::new(), Vec::new());
    let (mut whole_rendered, mut field_rendered) = (Vec::new(), Vec::new());
    let mut text = String::from("from");
    let mut text_rendered = String::from("from");
    for &(d, e) in &s.deps {
        let dep = id_of(d);
        match e {
            Edge::Whole => {
                whole.push(json!(format!("$ref:{dep}")));
                whole_rendered.push(output_of(&dep, dag.steps[d].text_output));
            }
            Edge::Field => {
                field.push(json!(format!("$ref:{dep}.nested.list.0")));
                field_rendered.push(json!(dep));
            }
            Edge::Text => {
                text.push_str(&format!(" $ref:{dep}.id,"));
                text_rendered.push_str(&format!(" {dep},"));
            }
            Edge::DependsOn => {}
        }
    }
    let common = json!({"me": id_of(i), "fail": s.fail, "ms": s.ms, "text_output": s.text_output});
    let mut written = common.clone();
    written["whole"] = json!(whole);
    written["field"] = json!(field);
    written["text"] = json!(text);
    let mut rendered = common;
    rendered["whole"] = json!(whole_rendered);
    rendered["field"] = json!(field_rendered);
    rendered["text"] = json!(text_rendered);
    (written, rendered)
}

fn tool_of(s: &StepSpec) -> &'static str {
    if s.second_tool { "rec2" } else { "rec" }
}

fn plan_json(dag: &Dag) -> Value {
    let steps: Vec<Value> = dag
        .order
        .iter()
        .map(|&i| {
            let s = &dag.steps[i];
            let (written, _) = arguments_of(dag, i);
            let arguments = if s.args_as_string {
                Value::String(written.to_string())
            } else {
                written
            };
            let tool = tool_of(s);
            let mut step = json!({"id": id_of(i), "tool": tool, "arguments": arguments});
            let depends_on: Vec<String> = s
                .deps
                .iter()
                .filter(|(_, e)| *e == Edge::DependsOn)
                .map(|&(d, _)| id_of(d))
                .collect();
            if !depends_on.is_empty() {
                step["depends_on"] = json!(depends_on);
            }
            step
        })
        .collect();
    let mut plan = json!({"steps": steps});
    if !dag.outputs.is_empty() {
        let ids: Vec<String> = dag.outputs.iter().map(|&i| id_of(i)).collect();
        plan["output_steps"] = json!(ids);
    }
    plan
}

// ---------------------------------------------------------------------------------------------------
// The recording tool
// ---------------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    Start,
    End,
}

#[derive(Default)]
struct Log {
    events: Vec<(Ev, String)>,
    running: usize,
    max_running: usize,
    tool_running: HashMap<&'static str, usize>,
    tool_max: HashMap<&'static str, usize>,
    args: HashMap<String, Vec<Value>>,
}

/// Logs every call's start and end (in one global order), how many calls run at once, and the
/// arguments it got; sleeps `ms`; fails when `fail` is true.
struct Rec {
    name: &'static str,
    log: Arc<Mutex<Log>>,
}

#[async_trait]
impl Tool for Rec {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "records its calls"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"ms": {"type": "integer"}, "fail": {"type": "boolean"}},
               "required": ["ms", "fail"]})
    }
    async fn call(&self, arguments: Value, ctx: ToolContext) -> ToolResult {
        let id = ctx.step_id.to_string();
        {
            let mut log = self.log.lock().unwrap();
            log.events.push((Ev::Start, id.clone()));
            log.running += 1;
            log.max_running = log.max_running.max(log.running);
            let now = {
                let n = log.tool_running.entry(self.name).or_default();
                *n += 1;
                *n
            };
            let max = log.tool_max.entry(self.name).or_default();
            *max = (*max).max(now);
            log.args
                .entry(id.clone())
                .or_default()
                .push(arguments.clone());
        }
        let ms = arguments["ms"].as_u64().unwrap_or(0);
        if ms > 0 {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        } else {
            tokio::task::yield_now().await;
        }
        {
            let mut log = self.log.lock().unwrap();
            log.events.push((Ev::End, id.clone()));
            log.running -= 1;
            *log.tool_running.get_mut(self.name).unwrap() -= 1;
        }
        if arguments["fail"] == json!(true) {
            Err(ToolError::failed(format!("{id} failed on purpose")))
        } else {
            Ok(output_of(&id, arguments["text_output"] == json!(true)))
        }
    }
}

fn engine(log: &Arc<Mutex<Log>>, config: RunConfig) -> Engine {
    let mut tools = ToolRegistry::new();
    for name in ["rec", "rec2"] {
        tools
            .register(Arc::new(Rec {
                name,
                log: Arc::clone(log),
            }))
            .unwrap();
    }
    Engine::new(Arc::new(tools)).with_config(config)
}

/// `n` cases, and no regression files written next to the tests.
fn cases(n: u32) -> ProptestConfig {
    ProptestConfig {
        cases: n,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

fn config(concurrency: usize, schedule: Schedule) -> RunConfig {
    RunConfig {
        concurrency,
        schedule,
        ..RunConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------------
// The model and the checks
// ---------------------------------------------------------------------------------------------------

/// What must happen to each step, computed without the engine: a step is skipped when a dependency did
/// not succeed, else it fails when its tool fails.
fn expected_statuses(dag: &Dag) -> Vec<StepStatus> {
    let mut status = Vec::with_capacity(dag.steps.len());
    for (i, s) in dag.steps.iter().enumerate() {
        let st = if s.deps.iter().any(|&(d, _)| status[d] != StepStatus::Ok) {
            StepStatus::Skipped
        } else if s.fail || fails_to_render(dag, i) {
            StepStatus::Failed
        } else {
            StepStatus::Ok
        };
        status.push(st);
    }
    status
}

/// Every step that transitively depends on one of `roots` (roots excluded unless reachable).
fn transitive_dependents(dag: &Dag, roots: &[usize]) -> BTreeSet<usize> {
    let n = dag.steps.len();
    let mut dependents = vec![Vec::new(); n];
    for (i, s) in dag.steps.iter().enumerate() {
        for d in s.dep_set() {
            dependents[d].push(i);
        }
    }
    let mut seen = BTreeSet::new();
    let mut stack = roots.to_vec();
    while let Some(i) = stack.pop() {
        for &d in &dependents[i] {
            if seen.insert(d) {
                stack.push(d);
            }
        }
    }
    seen
}

const SKIP_PREFIX: &str = "Skipped because dependency '";
const SKIP_SUFFIX: &str = "' failed";

fn check_run(
    dag: &Dag,
    plan: &Plan,
    run: &PlanRun,
    log: &Log,
    config: &RunConfig,
) -> Result<(), TestCaseError> {
    let (limit, schedule) = (config.concurrency, config.schedule);
    let n = dag.steps.len();
    prop_assert_eq!(plan.len(), n);
    prop_assert_eq!(run.steps.len(), n);
    prop_assert_eq!(run.outcome, RunOutcome::Completed);
    let pidx: Vec<usize> = (0..n).map(|i| plan.index_of(&id_of(i)).unwrap()).collect();

    // Statuses, against the model.
    let expected = expected_statuses(dag);
    for i in 0..n {
        let rec = &run.steps[pidx[i]];
        prop_assert_eq!(&rec.id, &id_of(i));
        prop_assert_eq!(rec.status, expected[i], "step {}: {:?}", rec.id, rec.error);
    }

    // Skipped = exactly the transitive dependents of the failed steps (computed here, and by the plan).
    let failed: Vec<usize> = (0..n)
        .filter(|&i| run.steps[pidx[i]].status == StepStatus::Failed)
        .collect();
    let skipped: BTreeSet<usize> = (0..n)
        .filter(|&i| run.steps[pidx[i]].status == StepStatus::Skipped)
        .collect();
    prop_assert_eq!(&skipped, &transitive_dependents(dag, &failed));
    let failed_p: Vec<usize> = failed.iter().map(|&i| pidx[i]).collect();
    let skipped_p: BTreeSet<usize> = skipped.iter().map(|&i| pidx[i]).collect();
    let by_plan: BTreeSet<usize> = plan.transitive_dependents(&failed_p).into_iter().collect();
    prop_assert_eq!(&skipped_p, &by_plan);

    // Positions of each step's start and end in the global event order.
    let mut starts: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut ends: HashMap<&str, Vec<usize>> = HashMap::new();
    for (pos, (ev, id)) in log.events.iter().enumerate() {
        match ev {
            Ev::Start => starts.entry(id.as_str()).or_default().push(pos),
            Ev::End => ends.entry(id.as_str()).or_default().push(pos),
        }
    }
    let start_of = |i: usize| {
        starts
            .get(id_of(i).as_str())
            .and_then(|v| v.first().copied())
    };
    let end_of = |i: usize| ends.get(id_of(i).as_str()).and_then(|v| v.first().copied());

    for (i, s) in dag.steps.iter().enumerate() {
        let id = id_of(i);
        let rec = &run.steps[pidx[i]];
        let n_starts = starts.get(id.as_str()).map_or(0, Vec::len);
        let n_ends = ends.get(id.as_str()).map_or(0, Vec::len);
        if rec.status == StepStatus::Skipped {
            // Skipped steps never run, and say which failed dependency they were skipped for.
            prop_assert_eq!(n_starts, 0, "skipped step {} ran", id);
            prop_assert!(rec.started.is_none());
            let err = rec.error.as_deref().unwrap_or("");
            prop_assert!(
                err.starts_with(SKIP_PREFIX) && err.ends_with(SKIP_SUFFIX),
                "step {}: unexpected skip message {:?}",
                id,
                err
            );
            let named = &err[SKIP_PREFIX.len()..err.len() - SKIP_SUFFIX.len()];
            prop_assert!(
                s.dep_set()
                    .iter()
                    .any(|&d| id_of(d) == named && expected[d] != StepStatus::Ok),
                "step {}: skip names {:?}, which is not a direct dependency that did not succeed",
                id,
                named
            );
        } else if fails_to_render(dag, i) {
            // Failed resolving a path into a text output: the tool was never called.
            prop_assert_eq!(rec.status, StepStatus::Failed);
            prop_assert_eq!(n_starts, 0, "step {} called its tool", id);
            let err = rec.error.as_deref().unwrap_or("");
            prop_assert!(err.contains("is text, not JSON"), "step {}: {}", id, err);
        } else {
            // Ran exactly once, after every dependency finished successfully.
            prop_assert_eq!(n_starts, 1, "step {} started {} times", id, n_starts);
            prop_assert_eq!(n_ends, 1, "step {} ended {} times", id, n_ends);
            prop_assert!(rec.started.is_some());
            let start = start_of(i).unwrap();
            for d in s.dep_set() {
                prop_assert_eq!(run.steps[pidx[d]].status, StepStatus::Ok);
                let end = end_of(d).unwrap();
                prop_assert!(
                    end < start,
                    "step {} started before its dependency {} ended",
                    id,
                    id_of(d)
                );
            }
            // References resolved to the dependencies' outputs.
            let (_, rendered) = arguments_of(dag, i);
            let got = &log.args[id.as_str()][0];
            prop_assert_eq!(got, &rendered, "arguments of step {}", id);
            if rec.status == StepStatus::Failed {
                let want = format!("{id} failed on purpose");
                prop_assert_eq!(rec.error.as_deref(), Some(want.as_str()));
            }
        }
    }

    // Outputs: the successful output steps (all steps when output_steps is omitted).
    let outputs: BTreeSet<usize> = if dag.outputs.is_empty() {
        (0..n).collect()
    } else {
        dag.outputs.iter().copied().collect()
    };
    for (i, &status) in expected.iter().enumerate() {
        let id = id_of(i);
        let want = (outputs.contains(&i) && status == StepStatus::Ok)
            .then(|| output_of(&id, dag.steps[i].text_output));
        prop_assert_eq!(run.output(&id), want.as_ref(), "output of {}", id);
    }

    // Wave barrier: a step of wave w starts after every step of the earlier waves that ran has ended.
    if schedule == Schedule::WaveBarrier {
        for i in 0..n {
            let Some(start) = start_of(i) else { continue };
            let wave = plan.steps()[pidx[i]].wave;
            for (j, &pj) in pidx.iter().enumerate() {
                if plan.steps()[pj].wave < wave
                    && let Some(end) = end_of(j)
                {
                    prop_assert!(
                        end < start,
                        "wave barrier: {} (wave {}) started before {} ended",
                        id_of(i),
                        wave,
                        id_of(j)
                    );
                }
            }
        }
    }

    prop_assert!(
        log.max_running <= limit,
        "{} calls ran at once, limit {}",
        log.max_running,
        limit
    );
    prop_assert_eq!(log.running, 0);
    for (tool, &max) in &log.tool_max {
        if let Some(&tool_limit) = config.tool_concurrency.get(*tool) {
            prop_assert!(
                max <= tool_limit,
                "{} calls of {} ran at once, limit {}",
                max,
                tool,
                tool_limit
            );
        }
    }
    Ok(())
}

fn run_dag(dag: &Dag, rt: &tokio::runtime::Runtime, cfg: &RunConfig) -> (Plan, PlanRun, Log) {
    let log = Arc::new(Mutex::new(Log::default()));
    let engine = engine(&log, cfg.clone());
    let plan = engine
        .compile_value(plan_json(dag))
        .unwrap_or_else(|e| panic!("generated plan is valid: {e}"));
    let run = rt.block_on(engine.run(&plan, RunControl::default()));
    drop(engine);
    let log = std::mem::take(&mut *log.lock().unwrap());
    (plan, run, log)
}

proptest! {
    #![proptest_config(cases(192))]

    /// Random DAGs with random failures, limits 1..=8 and both schedules, on paused virtual time.
    #[test]
    fn random_dags_fail_forward_and_respect_limits(
        dag in dag(60, 0.15, 0..5, true),
        limit in 1usize..=8,
        wave in prop::bool::weighted(0.25),
        rec_limit in prop::option::weighted(0.3, 1usize..=3),
        rec2_limit in prop::option::weighted(0.3, 1usize..=3),
    ) {
        let schedule = if wave { Schedule::WaveBarrier } else { Schedule::Dependency };
        let mut cfg = config(limit, schedule);
        for (tool, tool_limit) in [("rec", rec_limit), ("rec2", rec2_limit)] {
            if let Some(l) = tool_limit {
                cfg.tool_concurrency.insert(tool.to_owned(), l);
            }
        }
        let rt = paused_runtime();
        let (plan, run, log) = run_dag(&dag, &rt, &cfg);
        check_run(&dag, &plan, &run, &log, &cfg)?;
    }

    /// The same with no effective limit.
    #[test]
    fn random_dags_unlimited(dag in dag(60, 0.1, 0..5, false)) {
        let rt = paused_runtime();
        let cfg = config(usize::MAX, Schedule::Dependency);
        let (plan, run, log) = run_dag(&dag, &rt, &cfg);
        check_run(&dag, &plan, &run, &log, &cfg)?;
    }
}

proptest! {
    #![proptest_config(cases(24))]

    /// The same invariants on a multi-threaded runtime in real time (tool calls really overlap).
    #[test]
    fn random_dags_multi_thread(
        dag in dag(40, 0.15, 0..2, true),
        limit in 1usize..=8,
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .unwrap();
        let cfg = config(limit, Schedule::Dependency);
        let (plan, run, log) = run_dag(&dag, &rt, &cfg);
        check_run(&dag, &plan, &run, &log, &cfg)?;
    }
}

// ---------------------------------------------------------------------------------------------------
// Makespan
// ---------------------------------------------------------------------------------------------------

/// The longest chain of sleeps, computed from the DAG alone (steps depend only on earlier ones).
fn longest_chain_ms(dag: &Dag) -> u64 {
    let mut finish = vec![0u64; dag.steps.len()];
    for (i, s) in dag.steps.iter().enumerate() {
        let start = s.dep_set().iter().map(|&d| finish[d]).max().unwrap_or(0);
        finish[i] = start + s.ms;
    }
    finish.into_iter().max().unwrap_or(0)
}

fn ms_by_id(dag: &Dag) -> HashMap<String, u64> {
    (0..dag.steps.len())
        .map(|i| (id_of(i), dag.steps[i].ms))
        .collect()
}

const TOLERANCE: Duration = Duration::from_millis(2);

proptest! {
    #![proptest_config(cases(128))]

    /// With unlimited concurrency, a dependency-driven run takes the critical path (virtual time); a
    /// wave-barrier run takes the sum of each wave's longest step, which is never less.
    #[test]
    fn makespan_is_the_critical_path(dag in dag(60, 0.0, 1..51, false)) {
        let ms = ms_by_id(&dag);
        let cost = |s: &toolplan_core::Step| ms[&s.id];

        let rt = paused_runtime();
        let (plan, run, _) = run_dag(&dag, &rt, &config(usize::MAX, Schedule::Dependency));
        prop_assert!(run.all_ok());
        let critical = plan.critical_path(cost);
        prop_assert_eq!(critical, longest_chain_ms(&dag), "Plan::critical_path");
        let critical = Duration::from_millis(critical);
        prop_assert!(
            run.elapsed >= critical && run.elapsed <= critical + TOLERANCE,
            "dependency makespan {:?}, critical path {:?}", run.elapsed, critical
        );

        let rt = paused_runtime();
        let (plan_w, run_w, _) = run_dag(&dag, &rt, &config(usize::MAX, Schedule::WaveBarrier));
        prop_assert!(run_w.all_ok());
        prop_assert!(
            run_w.elapsed >= run.elapsed,
            "wave-barrier makespan {:?} < dependency makespan {:?}", run_w.elapsed, run.elapsed
        );
        let by_waves: u64 = plan_w
            .waves()
            .iter()
            .map(|w| w.iter().map(|&i| cost(&plan_w.steps()[i])).max().unwrap_or(0))
            .sum();
        let by_waves = Duration::from_millis(by_waves);
        prop_assert!(
            run_w.elapsed >= by_waves && run_w.elapsed <= by_waves + TOLERANCE,
            "wave-barrier makespan {:?}, sum of wave maxima {:?}", run_w.elapsed, by_waves
        );
    }
}

/// Real time, a few random DAGs of 10–50 ms sleeps: the makespan stays within 1.5× the critical path.
#[test]
fn makespan_real_time_close_to_critical_path() {
    let mut rng = StdRng::seed_from_u64(0x7001_91a4);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    for round in 0..5 {
        let n = rng.random_range(5..=30);
        let steps: Vec<StepSpec> = (0..n)
            .map(|i| StepSpec {
                deps: if i == 0 {
                    Vec::new()
                } else {
                    (0..rng.random_range(0..4))
                        .map(|_| (rng.random_range(0..i), Edge::Whole))
                        .collect()
                },
                fail: false,
                ms: rng.random_range(10..=50),
                args_as_string: false,
                second_tool: false,
                text_output: false,
            })
            .collect();
        let dag = Dag {
            steps,
            order: (0..n).collect(),
            outputs: Vec::new(),
        };
        let (plan, run, _) = run_dag(&dag, &rt, &config(usize::MAX, Schedule::Dependency));
        assert!(run.all_ok(), "round {round}: {}", run.summary());
        let ms = ms_by_id(&dag);
        let critical = Duration::from_millis(plan.critical_path(|s| ms[&s.id]));
        let ratio = run.elapsed.as_secs_f64() / critical.as_secs_f64();
        assert!(
            run.elapsed >= critical && ratio <= 1.5,
            "round {round}: makespan {:?}, critical path {critical:?}, ratio {ratio:.2}",
            run.elapsed
        );
    }
}
