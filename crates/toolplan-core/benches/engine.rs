#![allow(clippy::unwrap_used)]
//! Engine overhead benchmarks (criterion).
//!
//! * `run/<shape>/<n>` — [`Engine::run`] of an `n`-step plan of instant tools (a no-op tool that returns
//!   at once), compiled once outside the timed loop, on a tokio multi-thread runtime, with a
//!   concurrency limit far above `n` and no step timeout. Throughput is in steps, so criterion's
//!   `thrpt` line is steps per second and `time ÷ n` is the engine's cost per step.
//! * `run_timeout/<shape>/10000` — the same at 10,000 steps with the default step timeout (300 s): the
//!   difference to `run/<shape>/10000` is what arming one timer per step costs.
//! * `run_in_task/<shape>/10000` — the same at 10,000 steps with `Engine::run` itself inside a spawned
//!   task (so the scheduler's driver runs on a runtime worker thread, as it does when an agent running
//!   in a task calls it) instead of on the thread that calls `Runtime::block_on` (as in a
//!   `#[tokio::main]` binary): the difference is the cost of cross-thread wake-ups.
//!   `run_in_task_timeout/<shape>/10000` adds the default step timeout to that.
//! * `compile/<shape>/<n>` — [`Engine::compile`] (parse JSON text + validate) of the same plans.
//!
//! Shapes: `chain` (each step refers to the previous one), `fanout` (`n - 1` independent steps and one
//! join step referring to all of them), `random` (a seeded random DAG: each step refers to 0–3 random
//! earlier steps).
//!
//! Run: `cargo bench -p toolplan-core --bench engine -- --warm-up-time 1 --measurement-time 3`
//! (or see `bench/run.sh`).

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use toolplan_core::{
    Engine, FnTool, Limits, Plan, RunConfig, RunControl, Schedule, Tool, ToolRegistry, WrittenOrder,
};

/// A tool that returns at once: all the time a plan of these takes is engine overhead.
fn noop() -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "noop",
        "Returns true at once.",
        json!({"type": "object", "properties": {"in": {"description": "Ignored."}},
               "additionalProperties": false}),
        |_, _| async { Ok(Value::Bool(true)) },
    ))
}

const SIZES: [usize; 4] = [10, 100, 1_000, 10_000];
const SHAPES: [&str; 3] = ["chain", "fanout", "random"];

fn step(i: usize, refs: &[usize]) -> Value {
    let refs: Vec<Value> = refs.iter().map(|r| json!(format!("$ref:s{r}"))).collect();
    json!({"id": format!("s{i}"), "tool": "noop", "arguments": {"in": refs}})
}

/// The plan text of one shape with `n` steps; the last step is the output step.
fn plan_text(shape: &str, n: usize) -> String {
    let steps: Vec<Value> = match shape {
        "chain" => (0..n)
            .map(|i| {
                if i == 0 {
                    step(0, &[])
                } else {
                    step(i, &[i - 1])
                }
            })
            .collect(),
        "fanout" => {
            let mut steps: Vec<Value> = (0..n - 1).map(|i| step(i, &[])).collect();
            let all: Vec<usize> = (0..n - 1).collect();
            steps.push(step(n - 1, &all));
            steps
        }
        "random" => {
            let mut rng = StdRng::seed_from_u64(0x7001_9a11 ^ n as u64);
            (0..n)
                .map(|i| {
                    let k = rng.random_range(0..=3.min(i));
                    let mut refs: Vec<usize> = (0..k).map(|_| rng.random_range(0..i)).collect();
                    refs.sort_unstable();
                    refs.dedup();
                    step(i, &refs)
                })
                .collect()
        }
        other => panic!("unknown shape {other}"),
    };
    json!({"steps": steps, "output_steps": [format!("s{}", n - 1)]}).to_string()
}

fn registry() -> Arc<ToolRegistry> {
    let mut r = ToolRegistry::new();
    r.register(noop()).unwrap();
    Arc::new(r)
}

fn engine(step_timeout: Option<Duration>) -> Engine {
    // The shapes' own dependencies are what is measured: `noop` says nothing of its effects, and
    // its steps are not put in written order.
    Engine::new(registry())
        .with_config(RunConfig {
            concurrency: 1 << 20,
            step_timeout,
            schedule: Schedule::Dependency,
            ..RunConfig::default()
        })
        .with_limits(Limits {
            written_order: WrittenOrder::Free,
            ..Limits::default()
        })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn compiled(engine: &Engine, shape: &str, n: usize) -> Plan {
    let plan = engine.compile(&plan_text(shape, n)).unwrap();
    assert_eq!(plan.len(), n);
    plan
}

fn bench_run(c: &mut Criterion) {
    let rt = runtime();
    let engine = engine(None);
    for shape in SHAPES {
        let mut group = c.benchmark_group(format!("run/{shape}"));
        for n in SIZES {
            let plan = compiled(&engine, shape, n);
            let check = rt.block_on(engine.run(&plan, RunControl::default()));
            assert!(check.all_ok(), "{shape}/{n} did not run cleanly");
            group.throughput(Throughput::Elements(n as u64));
            if n >= 1_000 {
                group.sample_size(20);
            }
            group.bench_with_input(BenchmarkId::from_parameter(n), &plan, |b, plan| {
                b.iter(|| black_box(rt.block_on(engine.run(plan, RunControl::default()))));
            });
        }
        group.finish();
    }
}

fn bench_run_timeout(c: &mut Criterion) {
    let rt = runtime();
    let engine = engine(RunConfig::default().step_timeout);
    assert!(engine.config().step_timeout.is_some());
    let n = 10_000;
    for shape in SHAPES {
        let mut group = c.benchmark_group(format!("run_timeout/{shape}"));
        let plan = compiled(&engine, shape, n);
        group.throughput(Throughput::Elements(n as u64));
        group.sample_size(20);
        group.bench_with_input(BenchmarkId::from_parameter(n), &plan, |b, plan| {
            b.iter(|| black_box(rt.block_on(engine.run(plan, RunControl::default()))));
        });
        group.finish();
    }
}

fn bench_run_in_task(c: &mut Criterion) {
    let rt = runtime();
    let n = 10_000;
    for (name, timeout) in [
        ("run_in_task", None),
        ("run_in_task_timeout", RunConfig::default().step_timeout),
    ] {
        let engine = Arc::new(engine(timeout));
        for shape in SHAPES {
            let mut group = c.benchmark_group(format!("{name}/{shape}"));
            let plan = Arc::new(compiled(&engine, shape, n));
            group.throughput(Throughput::Elements(n as u64));
            group.sample_size(20);
            group.bench_with_input(BenchmarkId::from_parameter(n), &plan, |b, plan| {
                b.iter(|| {
                    let (engine, plan) = (Arc::clone(&engine), Arc::clone(plan));
                    let run = rt.block_on(async move {
                        tokio::spawn(async move { engine.run(&plan, RunControl::default()).await })
                            .await
                            .unwrap()
                    });
                    black_box(run)
                });
            });
            group.finish();
        }
    }
}

fn bench_compile(c: &mut Criterion) {
    let engine = engine(None);
    for shape in SHAPES {
        let mut group = c.benchmark_group(format!("compile/{shape}"));
        for n in [1_000, 10_000] {
            let text = plan_text(shape, n);
            group.throughput(Throughput::Elements(n as u64));
            group.sample_size(if n >= 10_000 { 20 } else { 50 });
            group.bench_with_input(BenchmarkId::from_parameter(n), &text, |b, text| {
                b.iter(|| black_box(engine.compile(text).unwrap()));
            });
        }
        group.finish();
    }
}

criterion_group!(
    benches,
    bench_run,
    bench_run_timeout,
    bench_run_in_task,
    bench_compile
);
criterion_main!(benches);
