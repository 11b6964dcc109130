//! A time-budgeted fuzzer of the plan parser, the validator, the reference resolver and the
//! scheduler: it mutates seed plans (the repository's examples and generated ones) as bytes and as
//! JSON, compiles each result against the demo tools, runs the ones that compile under tight limits,
//! and splits random strings into references. A panic anywhere, or a run that does not end within
//! its deadline, is a finding; findings are written to a folder to replay.
//!
//!     cargo run --release -p toolplan-core --example fuzz_plans -- [--seconds N] [--seed S] [--out DIR]
//!
//! It prints iterations per kind and the findings; `bench/fuzz.sh` runs it with the MCP fuzzer.
#![allow(clippy::unwrap_used)]

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};
use toolplan_core::{Engine, RunConfig, RunControl, reference};

struct Options {
    seconds: u64,
    seed: u64,
    out: PathBuf,
}

fn options() -> Options {
    let mut o = Options {
        seconds: 60,
        seed: 0x7001_91a2,
        out: PathBuf::from("fuzz-findings"),
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--seconds" => o.seconds = value.parse().expect("--seconds N"),
            "--seed" => o.seed = value.parse().expect("--seed S"),
            "--out" => o.out = PathBuf::from(value),
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    o
}

/// Seeds: the example plans and a few generated shapes (chains, fan-in, interpolation, paths).
fn seeds() -> Vec<Value> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut seeds: Vec<Value> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                .filter_map(|e| std::fs::read(e.path()).ok())
                .filter_map(|bytes| serde_json::from_slice(&bytes).ok())
                .collect()
        })
        .unwrap_or_default();
    seeds.push(json!({"steps": [
        {"id": "u", "tool": "get_user", "arguments": {"name": "Alice"}},
        {"id": "w", "tool": "get_weather", "arguments": {"location": "$ref:u.city"}},
        {"id": "c", "tool": "calculator", "arguments": {"expression": "$ref:w.temp * 9 / 5 + 32"}},
        {"id": "t", "tool": "concat", "arguments": {"a": "It is $ref:c F in $ref:w.city", "b": ["$ref:u.team", "$ref:w"]}}
    ], "output_steps": ["t", "c"]}));
    seeds.push(json!({"steps": [
        {"id": "a", "tool": "echo", "arguments": "{\"text\": [1, {\"x\": [2, 3]}]}"},
        {"id": "b", "tool": "echo", "arguments": {"text": "$ref:a.1.x.-1"}},
        {"id": "c", "tool": "compare_data", "arguments": {"data_a": "$ref:a", "data_b": "$ref:b"}, "depends_on": ["a"]},
        {"id": "d", "tool": "fail", "arguments": {}},
        {"id": "e", "tool": "echo", "arguments": {"text": "$ref:d"}}
    ]}));
    seeds
}

const IDS: [&str; 8] = ["a", "b", "c", "u", "w", "t", "s1", "x-y_z"];
/// Tool names plans may name: the demo tools, the planner itself (refused in plans) and an unknown.
fn tool_names() -> &'static [String] {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names: Vec<String> = toolplan_demo::registry()
            .names()
            .map(str::to_owned)
            .collect();
        names.extend(["execute_tool_plan".to_owned(), "nope".to_owned()]);
        names
    })
}

fn random_string(rng: &mut StdRng) -> String {
    match rng.random_range(0..8) {
        0 => format!("$ref:{}", IDS[rng.random_range(0..IDS.len())]),
        1 => format!(
            "$ref:{}.{}.{}",
            IDS[rng.random_range(0..IDS.len())],
            ["temp", "city", "0", "-1", "items", "x"][rng.random_range(0..6)],
            rng.random_range(-3i32..5)
        ),
        2 => format!(
            "text $ref:{} and $ref:{}.temp-",
            IDS[rng.random_range(0..IDS.len())],
            IDS[rng.random_range(0..IDS.len())]
        ),
        3 => "$ref:".repeat(rng.random_range(1..50)),
        4 => "x".repeat(rng.random_range(0..5000)),
        5 => (0..rng.random_range(0..40))
            .map(|_| char::from_u32(rng.random_range(0..0x3000)).unwrap_or('?'))
            .collect(),
        6 => format!("{}", rng.random::<f64>() * 1e300),
        _ => {
            let tools = tool_names();
            tools[rng.random_range(0..tools.len())].clone()
        }
    }
}

fn random_value(rng: &mut StdRng, depth: usize) -> Value {
    match rng.random_range(0..if depth > 6 { 5 } else { 8 }) {
        0 => Value::Null,
        1 => json!(rng.random::<bool>()),
        2 => json!(rng.random_range(-1_000_000_000i64..1_000_000_000)),
        3 => json!(rng.random::<f64>() * 1e6),
        4 => Value::String(random_string(rng)),
        5 => {
            // Deep nesting now and then.
            let levels = if rng.random_range(0..10) == 0 { 100 } else { 3 };
            (0..levels).fold(Value::String(random_string(rng)), |v, _| json!([v]))
        }
        6 => Value::Array(
            (0..rng.random_range(0..6))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        _ => Value::Object(
            (0..rng.random_range(0..6))
                .map(|_| (random_string(rng), random_value(rng, depth + 1)))
                .collect::<Map<String, Value>>(),
        ),
    }
}

/// Picks a random place in `v` and changes it: a new value, a removed member, a duplicated step.
fn mutate_json(rng: &mut StdRng, v: &mut Value, depth: usize) {
    let descend = depth < 8 && rng.random_range(0..3) != 0;
    match v {
        Value::Object(map) if !map.is_empty() => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = keys[rng.random_range(0..keys.len())].clone();
            match rng.random_range(0..6) {
                0 => {
                    map.remove(&key);
                }
                1 => {
                    map.insert(random_string(rng), random_value(rng, depth));
                }
                _ if descend => mutate_json(rng, map.get_mut(&key).unwrap(), depth + 1),
                _ => {
                    map.insert(key, random_value(rng, depth));
                }
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let i = rng.random_range(0..items.len());
            match rng.random_range(0..6) {
                0 => {
                    items.remove(i);
                }
                1 => {
                    let copy = items[i].clone();
                    items.push(copy);
                }
                2 => {
                    let j = rng.random_range(0..items.len());
                    items.swap(i, j);
                }
                _ if descend => mutate_json(rng, &mut items[i], depth + 1),
                _ => items[i] = random_value(rng, depth),
            }
        }
        _ => *v = random_value(rng, depth),
    }
}

fn mutate_bytes(rng: &mut StdRng, text: &mut Vec<u8>) {
    for _ in 0..rng.random_range(1..8) {
        if text.is_empty() {
            text.push(b'{');
        }
        let i = rng.random_range(0..text.len());
        match rng.random_range(0..5) {
            0 => text[i] = rng.random(),
            1 => {
                text.remove(i);
            }
            2 => text.insert(i, b"{}[]\",:$.\\0-"[rng.random_range(0..12)]),
            3 => {
                let end = (i + rng.random_range(1..40)).min(text.len());
                let chunk = text[i..end].to_vec();
                text.splice(i..i, chunk);
            }
            _ => text.truncate(i),
        }
    }
}

#[derive(Default)]
struct Counts {
    inputs: u64,
    compiled: u64,
    runs: u64,
    steps: u64,
    reference_strings: u64,
    findings: u64,
}

fn main() {
    let o = options();
    let mut rng = StdRng::seed_from_u64(o.seed);
    let engine = Engine::new(Arc::new(toolplan_demo::registry())).with_config(RunConfig {
        step_timeout: Some(Duration::from_millis(50)),
        deadline: Some(Duration::from_millis(200)),
        ..RunConfig::default()
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    // Panics are findings, reported below: keep the default hook from printing each one.
    std::panic::set_hook(Box::new(|_| {}));
    let seeds = seeds();
    let mut corpus: Vec<Value> = seeds.clone();
    let mut counts = Counts::default();
    let start = Instant::now();
    let budget = Duration::from_secs(o.seconds);
    std::fs::create_dir_all(&o.out).unwrap();

    while start.elapsed() < budget {
        counts.inputs += 1;
        let base = corpus[rng.random_range(0..corpus.len())].clone();
        let text: Vec<u8> = if rng.random_range(0..3) == 0 {
            let mut bytes = serde_json::to_vec(&base).unwrap();
            mutate_bytes(&mut rng, &mut bytes);
            bytes
        } else {
            let mut v = base;
            for _ in 0..rng.random_range(1..4) {
                mutate_json(&mut rng, &mut v, 0);
            }
            serde_json::to_vec(&v).unwrap()
        };
        let text = String::from_utf8_lossy(&text).into_owned();

        // The reference grammar on its own, on a random string.
        let s = random_string(&mut rng);
        counts.reference_strings += 1;
        let split = std::panic::catch_unwind(|| reference::split_pieces(&s));

        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let plan = engine.compile(&text).ok()?;
            let started = Instant::now();
            let run = runtime.block_on(engine.run(&plan, RunControl::default()));
            let _ = run.to_json();
            let _ = run.summary_within(4096);
            Some((run.steps.len() as u64, started.elapsed()))
        }));
        let finding = match (&split, &outcome) {
            (Err(_), _) => Some(("reference", s.clone())),
            (_, Err(_)) => Some(("panic", text.clone())),
            // The deadline is 200 ms; a run that took far longer did not honour it.
            (_, Ok(Some((_, took)))) if *took > Duration::from_secs(2) => {
                Some(("slow", text.clone()))
            }
            _ => None,
        };
        if let Ok(Some((steps, _))) = outcome {
            counts.compiled += 1;
            counts.runs += 1;
            counts.steps += steps;
            // Plans that compile are good material for further mutation.
            if corpus.len() < 2000
                && let Ok(v) = serde_json::from_str::<Value>(&text)
            {
                corpus.push(v);
            }
        }
        if let Some((kind, input)) = finding {
            counts.findings += 1;
            let path = o.out.join(format!("{kind}-{}.json", counts.findings));
            std::fs::write(&path, input).unwrap();
            println!("finding: {kind}, input saved to {}", path.display());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "fuzz_plans: {} inputs in {secs:.0} s ({:.0}/s), seed {}: {} compiled and ran ({} steps), {} reference strings; findings: {}",
        counts.inputs,
        counts.inputs as f64 / secs,
        o.seed,
        counts.compiled,
        counts.steps,
        counts.reference_strings,
        counts.findings
    );
    if counts.findings > 0 {
        std::process::exit(1);
    }
}
