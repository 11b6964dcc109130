#![allow(clippy::unwrap_used)]
//! Makespan benchmark: how close each schedule comes to the critical path of a plan.
//!
//! Seeded random DAGs (30–60 steps; each step is the demo `sleep` tool sleeping 5–50 ms and refers to
//! 0–3 random earlier steps with `"$ref:sK.i"`) are run for real (wall clock, tokio multi-thread
//! runtime) three ways by the same engine:
//!
//! * `ours` — `Schedule::Dependency`: a step starts when its last dependency finishes;
//! * `wave` — `Schedule::WaveBarrier`: a wave starts when the whole previous wave has finished (how
//!   agentle4j schedules plans);
//! * `seq`  — concurrency 1: one step at a time (how LlamaIndex's `QueryPlanTool` runs).
//!
//! For each DAG it prints the critical path (`Plan::critical_path` over the steps' sleep times), each
//! mode's makespan (median of the repetitions) and makespan ÷ critical path; then the mean and max
//! of that ratio per mode. `cp*` columns divide by the critical path over the durations the steps
//! actually took in that run (tokio's timer rounds every sleep up to the next millisecond), which
//! isolates the time the scheduler itself adds.
//!
//! Run: `cargo bench -p toolplan-core --bench makespan` (about a minute); `-- --quick` for a smoke run.
//! Arguments: `--quick` (4 DAGs, 1 repetition), `--dags N`, `--reps N`, `--seed N`; others (such as
//! the `--bench` that `cargo bench` passes) are ignored.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared, join_all};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use toolplan_core::{Engine, Plan, PlanRun, RunConfig, RunControl, Schedule};

struct Dag {
    text: String,
    /// Dependencies of each step (all earlier steps), by step index.
    deps: Vec<Vec<usize>>,
    /// Sleep of each step, in milliseconds, by step index.
    ms: Vec<u64>,
}

fn random_dag(rng: &mut StdRng) -> Dag {
    let n = rng.random_range(30..=60);
    let mut ms = Vec::with_capacity(n);
    let mut all_deps = Vec::with_capacity(n);
    let mut steps = Vec::with_capacity(n);
    for i in 0..n {
        let sleep: u64 = rng.random_range(5..=50);
        let k = rng.random_range(0..=3.min(i));
        let mut deps: Vec<usize> = (0..k).map(|_| rng.random_range(0..i)).collect();
        deps.sort_unstable();
        deps.dedup();
        let after: Vec<Value> = deps.iter().map(|d| json!(format!("$ref:s{d}.i"))).collect();
        steps.push(json!({
            "id": format!("s{i}"),
            "tool": "sleep",
            "arguments": {"ms": sleep, "value": {"i": i, "after": after}}
        }));
        ms.push(sleep);
        all_deps.push(deps);
    }
    Dag {
        text: json!({"steps": steps}).to_string(),
        deps: all_deps,
        ms,
    }
}

#[derive(Clone, Copy)]
struct Mode {
    name: &'static str,
    schedule: Schedule,
    concurrency: usize,
}

const MODES: [Mode; 3] = [
    Mode {
        name: "ours",
        schedule: Schedule::Dependency,
        concurrency: 1 << 20,
    },
    Mode {
        name: "wave",
        schedule: Schedule::WaveBarrier,
        concurrency: 1 << 20,
    },
    Mode {
        name: "seq",
        schedule: Schedule::Dependency,
        concurrency: 1,
    },
];

/// The floor for any dependency-driven executor on this runtime: the same DAG as hand-wired tokio
/// tasks (each awaits its dependencies' shared futures, then sleeps), with no engine at all. Returns
/// the makespan in milliseconds.
async fn ideal(dag: &Dag) -> f64 {
    let start = Instant::now();
    let mut steps: Vec<Shared<BoxFuture<'static, ()>>> = Vec::with_capacity(dag.ms.len());
    for (deps, &ms) in dag.deps.iter().zip(&dag.ms) {
        let deps: Vec<_> = deps.iter().map(|&d| steps[d].clone()).collect();
        let step = async move {
            join_all(deps).await;
            tokio::time::sleep(Duration::from_millis(ms)).await;
        };
        steps.push(step.boxed().shared());
    }
    let tasks: Vec<_> = steps.iter().map(|s| tokio::spawn(s.clone())).collect();
    for t in tasks {
        t.await.unwrap();
    }
    start.elapsed().as_secs_f64() * 1000.0
}

/// The critical path over the durations the steps took in this run, in milliseconds.
fn measured_critical_path(plan: &Plan, run: &PlanRun) -> f64 {
    plan.critical_path(|s| {
        let r = &run.steps[plan.index_of(&s.id).unwrap()];
        (r.finished - r.started.unwrap()).as_secs_f64() * 1000.0
    })
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let m = xs.len() / 2;
    if xs.len() % 2 == 1 {
        xs[m]
    } else {
        (xs[m - 1] + xs[m]) / 2.0
    }
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

fn max(xs: &[f64]) -> f64 {
    xs.iter().copied().fold(f64::MIN, f64::max)
}

fn arg_value(args: &[String], name: &str) -> Option<u64> {
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1)?.parse().ok()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let dags = arg_value(&args, "--dags").unwrap_or(if quick { 4 } else { 20 }) as usize;
    let reps = arg_value(&args, "--reps")
        .unwrap_or(if quick { 1 } else { 3 })
        .max(1) as usize;
    let seed = arg_value(&args, "--seed").unwrap_or(42);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let tools = Arc::new(toolplan_demo::registry());
    let engines: Vec<Engine> = MODES
        .iter()
        .map(|m| {
            Engine::new(Arc::clone(&tools)).with_config(RunConfig {
                concurrency: m.concurrency,
                schedule: m.schedule,
                ..RunConfig::default()
            })
        })
        .collect();

    println!(
        "makespan: {dags} random DAGs (seed {seed}), {reps} repetition(s) per mode, median shown; \
         tokio multi-thread runtime, {} worker threads",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!("cp    = critical path over the nominal sleep times (Plan::critical_path)");
    println!("cp*   = critical path over the step durations measured in that run");
    println!(
        "ideal = the same DAG as hand-wired tokio tasks, no engine (the floor on this runtime)\n"
    );
    println!(
        "{:>3} {:>5} {:>5} {:>6} | {:>8} {:>6} | {:>8} {:>6} {:>6} {:>7} | {:>8} {:>6} {:>6} | {:>8} {:>5}",
        "dag",
        "steps",
        "waves",
        "cp ms",
        "ideal ms",
        "/cp",
        "ours ms",
        "/cp",
        "/cp*",
        "/ideal",
        "wave ms",
        "/cp",
        "/cp*",
        "seq ms",
        "/cp"
    );

    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(seed);
    // Over DAGs, per mode: makespan ÷ cp, makespan ÷ cp*.
    let mut ratio: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    let mut ratio_measured: Vec<Vec<f64>> = vec![Vec::new(); MODES.len()];
    let mut ideal_ratio = Vec::new();
    let mut ours_over_ideal = Vec::new();
    let mut wave_over_ours = Vec::new();
    // Measured step duration minus its nominal sleep, over every step of every `ours` run (ms).
    let mut overshoot = Vec::new();
    for d in 0..dags {
        let dag = random_dag(&mut rng);
        let plan = engines[0].compile(&dag.text).unwrap();
        let cp = plan.critical_path(|s| dag.ms[plan.index_of(&s.id).unwrap()]) as f64;

        let floor = median((0..reps).map(|_| rt.block_on(ideal(&dag))).collect());
        ideal_ratio.push(floor / cp);
        let mut row = format!(
            "{:>3} {:>5} {:>5} {:>6.0} | {:>8.1} {:>6.3}",
            d,
            plan.len(),
            plan.waves().len(),
            cp,
            floor,
            floor / cp
        );
        let mut makespans = Vec::new();
        for (m, engine) in engines.iter().enumerate() {
            let mut spans = Vec::new();
            let mut measured = Vec::new();
            for _ in 0..reps {
                let run = rt.block_on(engine.run(&plan, RunControl::default()));
                assert!(run.all_ok(), "DAG {d} failed in mode {}", MODES[m].name);
                let span = run.elapsed.as_secs_f64() * 1000.0;
                spans.push(span);
                measured.push(span / measured_critical_path(&plan, &run));
                if m == 0 {
                    for (r, &ms) in run.steps.iter().zip(&dag.ms) {
                        let took = (r.finished - r.started.unwrap()).as_secs_f64() * 1000.0;
                        overshoot.push(took - ms as f64);
                    }
                }
            }
            let span = median(spans);
            let r = span / cp;
            let r_measured = median(measured);
            ratio[m].push(r);
            ratio_measured[m].push(r_measured);
            makespans.push(span);
            match MODES[m].name {
                "ours" => {
                    ours_over_ideal.push(span / floor);
                    row.push_str(&format!(
                        " | {span:>8.1} {r:>6.3} {r_measured:>6.3} {:>7.3}",
                        span / floor
                    ));
                }
                "wave" => row.push_str(&format!(" | {span:>8.1} {r:>6.3} {r_measured:>6.3}")),
                _ => row.push_str(&format!(" | {span:>8.1} {r:>5.2}")),
            }
        }
        wave_over_ours.push(makespans[1] / makespans[0]);
        println!("{row}");
    }

    println!("\nmakespan ÷ critical path, over {dags} DAGs:");
    println!(
        "{:>6} {:>9} {:>9} {:>10} {:>10}",
        "mode", "mean /cp", "max /cp", "mean /cp*", "max /cp*"
    );
    println!(
        "{:>6} {:>9.3} {:>9.3} {:>10} {:>10}",
        "ideal",
        mean(&ideal_ratio),
        max(&ideal_ratio),
        "-",
        "-"
    );
    for (m, mode) in MODES.iter().enumerate() {
        println!(
            "{:>6} {:>9.3} {:>9.3} {:>10.3} {:>10.3}",
            mode.name,
            mean(&ratio[m]),
            max(&ratio[m]),
            mean(&ratio_measured[m]),
            max(&ratio_measured[m])
        );
    }
    println!(
        "\nours ÷ ideal: mean {:.3}, max {:.3}",
        mean(&ours_over_ideal),
        max(&ours_over_ideal)
    );
    println!(
        "wave ÷ ours:  mean {:.3}, max {:.3}",
        mean(&wave_over_ours),
        max(&wave_over_ours)
    );
    println!(
        "step duration − nominal sleep (ours): mean {:.2} ms, median {:.2} ms, max {:.2} ms",
        mean(&overshoot),
        median(overshoot.clone()),
        max(&overshoot)
    );
    println!(
        "target ours mean /cp ≤ 1.02: {} ({:.3})",
        if mean(&ratio[0]) <= 1.02 {
            "met"
        } else {
            "missed"
        },
        mean(&ratio[0])
    );
    println!("total bench time: {:.1} s", started.elapsed().as_secs_f64());
}
