#![allow(clippy::unwrap_used)]
//! Property tests of the tool-plan parser and validator (nothing panics on any input, every rejection
//! names at least one problem, the text and value entry points agree, cycles and duplicate ids are
//! reported correctly) and of `$ref` resolution (typed insertion and text interpolation).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestCaseError;
use serde_json::{Map, Value, json};
use toolplan_core::dialect::tool_plan;
use toolplan_core::reference::{self, Piece};
use toolplan_core::template::Template;
use toolplan_core::{
    Engine, FnTool, InvalidPlan, Limits, Plan, Problem, RunConfig, RunControl, RunOutcome,
    StepStatus, Tool, ToolRegistry,
};

// ---------------------------------------------------------------------------------------------------
// Strategies: arbitrary JSON
// ---------------------------------------------------------------------------------------------------

/// Strings, many of them with `$ref:` fragments (valid, broken, embedded, adjacent).
fn string_with_refs() -> BoxedStrategy<String> {
    prop_oneof![
        2 => ".{0,12}",
        1 => "\\$ref:[A-Za-z0-9_.-]{0,10}",
        2 => "[a-z <>]{0,4}\\$ref:[a-c1](\\.[a-z0-9-]{1,3}){0,3}[ .,!]?[a-z]{0,3}",
        1 => "(\\$ref:[a-c]?\\.?){1,4}",
        1 => prop::sample::select(vec![
            "$ref:", "$ref:.", "$ref:a.", "$ref:a..b", "$ref:$ref:a", "x$ref:a$ref:b", "$ref:a.-1",
            "$REF:a", "$ref :a", "{\"a\":1}", "[1,2", "", " ",
        ])
        .prop_map(str::to_owned),
    ]
    .boxed()
}

fn number() -> BoxedStrategy<Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        (-3i64..300).prop_map(Value::from),
    ]
    .boxed()
}

fn leaf() -> BoxedStrategy<Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        2 => number(),
        4 => string_with_refs().prop_map(Value::String),
    ]
    .boxed()
}

fn key() -> BoxedStrategy<String> {
    prop_oneof![
        2 => prop::sample::select(vec![
            "steps", "output_steps", "id", "tool", "arguments", "depends_on", "text", "ms",
        ])
        .prop_map(str::to_owned),
        2 => "[a-z0-9_-]{1,4}",
        1 => ".{0,6}",
    ]
    .boxed()
}

/// Arbitrary JSON trees.
fn arb_json() -> BoxedStrategy<Value> {
    leaf()
        .prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((key(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
        .boxed()
}

// ---------------------------------------------------------------------------------------------------
// Strategies: plan-shaped JSON
// ---------------------------------------------------------------------------------------------------

const IDS: &[&str] = &["a", "b", "c", "s1", "step-2", "x_y"];
const DEMO_TOOLS: &[&str] = &[
    "echo",
    "concat",
    "sleep",
    "fail",
    "get_weather",
    "calculator",
    "compare_data",
];

fn id_string() -> BoxedStrategy<String> {
    prop_oneof![
        12 => prop::sample::select(IDS).prop_map(str::to_owned),
        2 => prop::sample::select(vec!["", "a b", "x.y", "é", "$ref:a", "a/b", " a", "a\n"])
            .prop_map(str::to_owned),
        2 => "[A-Za-z0-9_-]{1,8}",
        1 => Just("L".repeat(130)),
        1 => ".{0,6}",
    ]
    .boxed()
}

fn id_value() -> BoxedStrategy<Value> {
    prop_oneof![8 => id_string().prop_map(Value::String), 1 => arb_json()].boxed()
}

fn tool_value() -> BoxedStrategy<Value> {
    prop_oneof![
        10 => prop::sample::select(DEMO_TOOLS).prop_map(|t| json!(t)),
        2 => prop::sample::select(vec!["execute_tool_plan", "", "  ", "get_wether", "nope", "ECHO"])
            .prop_map(|t| json!(t)),
        1 => arb_json(),
    ]
    .boxed()
}

/// `$ref:` strings pointing at ids of the pool (or not), whole or inside text.
fn ref_string() -> BoxedStrategy<String> {
    let path = prop::collection::vec(
        prop::sample::select(vec!["temp", "city", "0", "-1", "x", "1", "items", "-0"]),
        0..3,
    );
    let affix = || prop_oneof![3 => Just(String::new()), 1 => "[a-z *+]{0,4}", 1 => ".{0,3}"];
    (id_string(), path, affix(), affix())
        .prop_map(|(id, path, pre, suf)| {
            let path: String = path.iter().map(|p| format!(".{p}")).collect();
            format!("{pre}$ref:{id}{path}{suf}")
        })
        .boxed()
}

fn arg_value() -> BoxedStrategy<Value> {
    prop_oneof![
        4 => ref_string().prop_map(Value::String),
        3 => prop::sample::select(vec![
            "Tokyo", "London", "Atlantis", "1 + 2", "7/2", "2^10", "1/0", "sqrt(16)", "hello",
            "{\"a\":1}", "[1,2]", "", "((((1))))", "ln(-1)",
        ])
        .prop_map(|s| json!(s)),
        2 => (0u64..200).prop_map(Value::from),
        1 => prop::sample::select(vec![json!(600_001), json!(-1), json!(1.5), json!(u64::MAX)]),
        1 => "[0-9+*/^() .a-z-]{0,20}".prop_map(Value::String),
        2 => arb_json(),
    ]
    .boxed()
}

fn arguments_object() -> BoxedStrategy<Value> {
    prop::collection::vec(
        (
            prop::sample::select(vec![
                "text",
                "a",
                "b",
                "ms",
                "value",
                "message",
                "location",
                "expression",
                "data_a",
                "data_b",
                "extra",
            ]),
            arg_value(),
        ),
        0..4,
    )
    .prop_map(|kv| {
        Value::Object(
            kv.into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect::<Map<String, Value>>(),
        )
    })
    .boxed()
}

/// Cuts `s` at a char boundary at or before `at`.
fn truncate(s: &str, at: usize) -> &str {
    let mut cut = at.min(s.len());
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    &s[..cut]
}

/// The `arguments` field: absent, an object, a JSON string (whole or truncated), or anything.
fn arguments_field() -> BoxedStrategy<Option<Value>> {
    prop_oneof![
        6 => arguments_object().prop_map(Some),
        3 => arguments_object().prop_map(|v| Some(Value::String(v.to_string()))),
        1 => (arguments_object(), any::<Index>()).prop_map(|(v, ix)| {
            let text = v.to_string();
            let cut = ix.index(text.len() + 1);
            Some(Value::String(truncate(&text, cut).to_owned()))
        }),
        1 => Just(None),
        1 => Just(Some(Value::Null)),
        1 => Just(Some(json!("  "))),
        1 => arb_json().prop_map(Some),
    ]
    .boxed()
}

fn depends_on_value() -> BoxedStrategy<Value> {
    prop_oneof![
        4 => prop::collection::vec(id_value(), 0..3).prop_map(Value::Array),
        1 => arb_json(),
    ]
    .boxed()
}

fn step_value() -> BoxedStrategy<Value> {
    let object = (
        prop::option::weighted(0.92, id_value()),
        prop::option::weighted(0.92, tool_value()),
        arguments_field(),
        prop::option::weighted(0.3, depends_on_value()),
        prop::option::weighted(0.05, (key(), arb_json())),
    )
        .prop_map(|(id, tool, arguments, depends_on, extra)| {
            let mut m = Map::new();
            // Extra first, so that a known field of the same name wins.
            if let Some((k, v)) = extra {
                m.insert(k, v);
            }
            for (k, v) in [
                ("id", id),
                ("tool", tool),
                ("arguments", arguments),
                ("depends_on", depends_on),
            ] {
                if let Some(v) = v {
                    m.insert(k.to_owned(), v);
                }
            }
            Value::Object(m)
        });
    prop_oneof![14 => object, 1 => arb_json()].boxed()
}

/// Objects that look like plans: steps of random fields, output_steps, stray fields.
fn plan_shaped() -> BoxedStrategy<Value> {
    let steps = prop_oneof![
        12 => prop::collection::vec(step_value(), 0..8).prop_map(|s| Some(Value::Array(s))),
        1 => Just(None),
        1 => arb_json().prop_map(Some),
    ];
    let outputs = prop::option::weighted(
        0.3,
        prop_oneof![
            4 => prop::collection::vec(id_value(), 0..3).prop_map(Value::Array),
            1 => arb_json(),
        ],
    );
    (
        steps,
        outputs,
        prop::option::weighted(0.05, (key(), arb_json())),
    )
        .prop_map(|(steps, outputs, extra)| {
            let mut m = Map::new();
            if let Some((k, v)) = extra {
                m.insert(k, v);
            }
            if let Some(s) = steps {
                m.insert("steps".into(), s);
            }
            if let Some(o) = outputs {
                m.insert("output_steps".into(), o);
            }
            Value::Object(m)
        })
        .boxed()
}

/// Plans that are valid more often than not: demo tools with arguments of the right shape, whose
/// references point at earlier steps (or, now and then, later ones, which may make cycles).
fn mostly_valid_plan() -> BoxedStrategy<Value> {
    let step = (
        0..DEMO_TOOLS.len(),
        prop::collection::vec(any::<Index>(), 2),
        0usize..6,
        any::<bool>(),
        prop::option::weighted(0.1, any::<Index>()),
    );
    (
        prop::collection::vec(step, 1..10),
        prop::option::weighted(0.3, prop::collection::vec(any::<Index>(), 0..3)),
    )
        .prop_map(|(steps, outputs)| {
            let n = steps.len();
            let id = |i: usize| format!("g{i}");
            let plan_steps: Vec<Value> = steps
                .iter()
                .enumerate()
                .map(|(i, (tool, picks, variant, as_string, back))| {
                    let r = |k: usize, path: &str| -> Value {
                        if i == 0 {
                            json!("Tokyo")
                        } else {
                            json!(format!("$ref:{}{path}", id(picks[k].index(i))))
                        }
                    };
                    let v = *variant;
                    let arguments = match DEMO_TOOLS[*tool] {
                        "echo" => {
                            let text = [r(0, ""), json!("hi"), r(0, ".temp")][v % 3].clone();
                            json!({"text": text})
                        }
                        "concat" => {
                            let b = [r(1, ""), json!(1)][v % 2].clone();
                            json!({"a": r(0, ".city"), "b": b})
                        }
                        "sleep" => {
                            let ms = [0, 5, 30, 1000, 600_000, 2][v];
                            json!({"ms": ms, "value": r(0, "")})
                        }
                        "fail" => [json!({}), json!({"message": "boom"})][v % 2].clone(),
                        "get_weather" => {
                            let location = [
                                json!("Tokyo"),
                                json!("Oslo"),
                                json!("Atlantis"),
                                r(0, ".city"),
                                r(0, ""),
                                r(0, ".0"),
                            ][v]
                                .clone();
                            json!({"location": location})
                        }
                        "calculator" => {
                            let x = r(0, ".temp");
                            let x = x.as_str().unwrap_or("3");
                            let expression = [
                                "1+2".to_owned(),
                                format!("{x} * 2"),
                                format!("{x} / 0"),
                                x.to_owned(),
                                format!("2^{x}"),
                                "(((".to_owned(),
                            ][v]
                                .clone();
                            json!({"expression": expression})
                        }
                        _ => json!({"data_a": r(0, ""), "data_b": r(1, ".temp")}),
                    };
                    let arguments = if *as_string {
                        Value::String(arguments.to_string())
                    } else {
                        arguments
                    };
                    let mut step =
                        json!({"id": id(i), "tool": DEMO_TOOLS[*tool], "arguments": arguments});
                    if let Some(back) = back {
                        step["depends_on"] = json!([id(back.index(n))]);
                    }
                    step
                })
                .collect();
            let mut plan = json!({"steps": plan_steps});
            if let Some(outputs) = outputs {
                let ids: Vec<String> = outputs.iter().map(|ix| id(ix.index(n))).collect();
                plan["output_steps"] = json!(ids);
            }
            plan
        })
        .boxed()
}

fn limits() -> BoxedStrategy<Limits> {
    prop_oneof![
        4 => Just(Limits::default()),
        1 => (1usize..400, 1usize..6, 1usize..120, 1usize..6).prop_map(|(p, s, a, i)| Limits {
            max_plan_bytes: p,
            max_steps: s,
            max_argument_bytes: a,
            max_id_len: i,
        }),
    ]
    .boxed()
}

// ---------------------------------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------------------------------

const DEADLINE: Duration = Duration::from_millis(50);

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

fn demo_engine() -> Engine {
    Engine::new(Arc::new(toolplan_demo::registry())).with_config(RunConfig {
        deadline: Some(DEADLINE),
        step_timeout: Some(Duration::from_millis(40)),
        ..RunConfig::default()
    })
}

/// Runs a valid plan with the demo tools under a short deadline (virtual time) and checks the record.
fn run_demo(plan: &Plan) -> Result<(), TestCaseError> {
    let engine = demo_engine();
    let rt = paused_runtime();
    let run = rt.block_on(engine.run(plan, RunControl::default()));
    prop_assert_eq!(run.steps.len(), plan.len());
    for s in &run.steps {
        match s.status {
            StepStatus::Ok => prop_assert!(s.error.is_none() && s.started.is_some()),
            StepStatus::Failed => {
                let err = s.error.as_deref().unwrap_or("");
                prop_assert!(!err.is_empty());
                prop_assert!(
                    !err.contains("the tool panicked"),
                    "demo tool panicked in step {}: {}",
                    s.id,
                    err
                );
            }
            StepStatus::Skipped => {
                let err = s.error.as_deref().unwrap_or("");
                prop_assert!(s.started.is_none());
                if run.outcome == RunOutcome::Completed {
                    prop_assert!(
                        err.starts_with("Skipped because dependency '"),
                        "step {}: {}",
                        s.id,
                        err
                    );
                }
            }
        }
    }
    match run.outcome {
        RunOutcome::Completed => prop_assert!(run.elapsed <= DEADLINE),
        RunOutcome::DeadlineExceeded => prop_assert!(
            run.elapsed >= DEADLINE && run.elapsed <= DEADLINE + Duration::from_millis(1),
            "stopped at {:?}",
            run.elapsed
        ),
        RunOutcome::Cancelled => prop_assert!(false, "nobody cancelled the run"),
    }
    let report = run.to_json();
    prop_assert!(serde_json::to_string(&report).is_ok());
    prop_assert!(!run.summary().is_empty());
    Ok(())
}

/// Ok, or an error that names at least one problem (all of them printable). Valid plans also run.
fn check_result(result: &Result<Plan, InvalidPlan>) -> Result<(), TestCaseError> {
    match result {
        Ok(plan) => {
            prop_assert!(!plan.is_empty());
            prop_assert!(plan.outputs().iter().all(|&i| i < plan.len()));
            prop_assert_eq!(plan.waves().iter().map(Vec::len).sum::<usize>(), plan.len());
            run_demo(plan)?;
        }
        Err(e) => {
            prop_assert!(!e.problems.is_empty(), "rejected without a problem");
            prop_assert!(!e.to_string().is_empty());
            for p in &e.problems {
                prop_assert!(!p.to_string().is_empty());
                let _ = p.step();
            }
        }
    }
    Ok(())
}

/// Whether the id is one the parser accepts under these limits.
fn valid_id(id: &str, limits: &Limits) -> bool {
    !id.is_empty()
        && id.len() <= limits.max_id_len
        && id
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

/// Problems that must be among those reported, derived from the plan directly: duplicate ids, and for
/// each (first) step with a valid id and a string tool, blank, recursive or unknown tools.
fn required_problems(value: &Value, limits: &Limits) -> Vec<Problem> {
    let mut out = Vec::new();
    let Some(steps) = value.get("steps").and_then(Value::as_array) else {
        return out;
    };
    if !value.is_object() || steps.is_empty() || steps.len() > limits.max_steps {
        return out;
    }
    let registry = toolplan_demo::registry();
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (pos, step) in steps.iter().enumerate() {
        let Some(id) = step.get("id").and_then(Value::as_str) else {
            continue;
        };
        if !step.is_object() || !valid_id(id, limits) {
            continue;
        }
        if let Some(&f) = first.get(id) {
            out.push(Problem::DuplicateId {
                id: id.to_owned(),
                first: f,
                second: pos,
            });
            continue;
        }
        first.insert(id, pos);
        match step.get("tool").and_then(Value::as_str) {
            Some(t) if t.trim().is_empty() => out.push(Problem::BlankTool {
                step: id.to_owned(),
            }),
            Some("execute_tool_plan") => out.push(Problem::RecursivePlan {
                step: id.to_owned(),
            }),
            Some(t) if !registry.contains(t) => out.push(Problem::UnknownTool {
                step: id.to_owned(),
                tool: t.to_owned(),
                suggestion: registry.closest_name(t).map(str::to_owned),
            }),
            _ => {}
        }
    }
    out
}

/// Compiles a value both ways (value, and its text) and checks both results.
fn check_value(value: &Value, limits: &Limits) -> Result<(), TestCaseError> {
    let registry = toolplan_demo::registry();
    let text = value.to_string();
    let by_value = tool_plan::compile_value(value.clone(), &registry, limits);
    check_result(&by_value)?;
    let by_text = tool_plan::compile(&text, &registry, limits);
    if text.len() <= limits.max_plan_bytes {
        // The two entry points agree (compared on the value the text parses back to, since float
        // parsing may differ from the original in the last bit).
        let reparsed: Value = serde_json::from_str(&text).unwrap();
        let by_reparsed = tool_plan::compile_value(reparsed, &registry, limits);
        prop_assert_eq!(&by_text, &by_reparsed);
        prop_assert_eq!(by_text.is_ok(), by_value.is_ok());
    } else {
        let Err(e) = &by_text else {
            return Err(TestCaseError::fail(
                "a plan over the size limit was accepted",
            ));
        };
        let too_large = matches!(e.problems[..], [Problem::PlanTooLarge { .. }]);
        prop_assert!(too_large, "{:?}", e.problems);
    }
    let required = required_problems(value, limits);
    if !required.is_empty() {
        let Err(e) = &by_value else {
            return Err(TestCaseError::fail(format!(
                "accepted a plan with problems {required:?}"
            )));
        };
        for p in &required {
            prop_assert!(
                e.problems.contains(p),
                "missing {:?} in {:?}",
                p,
                e.problems
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// Property 3: the parser and validator never panic
// ---------------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(cases(256))]

    /// Any JSON value at all.
    #[test]
    fn arbitrary_json_never_panics(value in arb_json(), limits in limits()) {
        check_value(&value, &limits)?;
    }

    /// Plan-shaped values: steps with random fields of random types, `$ref:` fragments, cycles,
    /// duplicate ids, bad tools, truncated argument strings.
    #[test]
    fn plan_shaped_values_never_panic(value in plan_shaped(), limits in limits()) {
        check_value(&value, &limits)?;
    }

    /// Plans that are often valid, so that the run half is exercised too.
    #[test]
    fn mostly_valid_plans_compile_and_run(value in mostly_valid_plan(), limits in limits()) {
        check_value(&value, &limits)?;
    }

    /// Text: truncated plans, and arbitrary or JSON-ish character soup.
    #[test]
    fn arbitrary_text_never_panics(
        value in prop_oneof![plan_shaped(), mostly_valid_plan()],
        cut in any::<Index>(),
        soup in prop_oneof![".{0,40}", "[\\[\\]{}\":,0-9a-z$. -]{0,60}"],
        limits in limits(),
    ) {
        let registry = toolplan_demo::registry();
        let text = serde_json::to_string_pretty(&value).unwrap();
        let truncated = truncate(&text, cut.index(text.len() + 1));
        for t in [truncated, soup.as_str()] {
            let result = tool_plan::compile(t, &registry, &limits);
            check_result(&result)?;
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// Cycles and graph structure
// ---------------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Graph {
    /// `deps[i]`: the steps step `i` waits for, each with whether it is named by a `$ref` (else by
    /// `depends_on`). May include `i` itself and later steps.
    deps: Vec<Vec<(usize, bool)>>,
}

impl Graph {
    fn dep_set(&self, i: usize) -> BTreeSet<usize> {
        self.deps[i].iter().map(|&(d, _)| d).collect()
    }

    /// `reach[a][b]`: b is reachable from a along one or more dependency edges.
    fn reach(&self) -> Vec<Vec<bool>> {
        let n = self.deps.len();
        let mut reach = vec![vec![false; n]; n];
        for (a, row) in reach.iter_mut().enumerate() {
            let mut stack: Vec<usize> = self.dep_set(a).into_iter().collect();
            while let Some(x) = stack.pop() {
                if !row[x] {
                    row[x] = true;
                    stack.extend(self.dep_set(x));
                }
            }
        }
        reach
    }
}

fn graph() -> impl Strategy<Value = Graph> {
    (1usize..=12)
        .prop_flat_map(|n| {
            (
                prop::collection::vec(
                    prop::collection::vec((any::<Index>(), any::<bool>()), 0..3),
                    n,
                ),
                prop::collection::vec((any::<Index>(), any::<Index>(), any::<bool>()), 0..3),
            )
        })
        .prop_map(|(earlier, extra)| {
            let n = earlier.len();
            let mut deps: Vec<Vec<(usize, bool)>> = earlier
                .into_iter()
                .enumerate()
                .map(|(i, picks)| {
                    if i == 0 {
                        Vec::new()
                    } else {
                        picks.into_iter().map(|(ix, r)| (ix.index(i), r)).collect()
                    }
                })
                .collect();
            for (from, to, r) in extra {
                deps[from.index(n)].push((to.index(n), r));
            }
            Graph { deps }
        })
}

fn gid(i: usize) -> String {
    format!("v{i}")
}

fn graph_plan(g: &Graph) -> Value {
    let steps: Vec<Value> = g
        .deps
        .iter()
        .enumerate()
        .map(|(i, deps)| {
            let refs: Vec<Value> = deps
                .iter()
                .filter(|(_, r)| *r)
                .map(|&(d, _)| json!(format!("$ref:{}", gid(d))))
                .collect();
            let after: Vec<String> = deps
                .iter()
                .filter(|(_, r)| !*r)
                .map(|&(d, _)| gid(d))
                .collect();
            json!({"id": gid(i), "tool": "echo", "arguments": {"text": refs}, "depends_on": after})
        })
        .collect();
    json!({"steps": steps})
}

/// The cycles a rejected plan names, each checked to be a real cycle of `g` (the first step repeated
/// at the end, each step depending on the next, no other repeats), as sets of steps.
fn named_cycles(
    g: &Graph,
    result: &Result<Plan, InvalidPlan>,
) -> Result<Vec<BTreeSet<usize>>, TestCaseError> {
    let Err(e) = result else {
        return Err(TestCaseError::fail("a cyclic plan was accepted"));
    };
    let n = g.deps.len();
    let index: HashMap<String, usize> = (0..n).map(|i| (gid(i), i)).collect();
    let mut named = Vec::new();
    for p in &e.problems {
        let Problem::Cycle { cycle } = p else {
            return Err(TestCaseError::fail(format!("unexpected problem {p:?}")));
        };
        prop_assert!(cycle.len() >= 2, "{:?}", cycle);
        prop_assert_eq!(cycle.first(), cycle.last());
        let steps: Vec<usize> = cycle.iter().map(|id| index[id]).collect();
        let inner: HashSet<usize> = steps[..steps.len() - 1].iter().copied().collect();
        prop_assert_eq!(
            inner.len(),
            steps.len() - 1,
            "cycle repeats a step: {:?}",
            cycle
        );
        for w in steps.windows(2) {
            prop_assert!(
                g.dep_set(w[0]).contains(&w[1]),
                "{} does not depend on {} in {:?}",
                gid(w[0]),
                gid(w[1]),
                cycle
            );
        }
        named.push(inner.into_iter().collect());
    }
    prop_assert!(!named.is_empty());
    Ok(named)
}

proptest! {
    #![proptest_config(cases(256))]

    /// A plan is rejected exactly when its dependencies have a cycle, and every cycle it names is a
    /// real cycle. Acyclic plans get exactly the right edges and Kahn levels.
    #[test]
    fn cycles_are_found_and_real(g in graph()) {
        let n = g.deps.len();
        let reach = g.reach();
        let registry = toolplan_demo::registry();
        let result = tool_plan::compile_value(graph_plan(&g), &registry, &Limits::default());
        if (0..n).any(|i| reach[i][i]) {
            named_cycles(&g, &result)?;
        } else {
            let plan = match &result {
                Ok(plan) => plan,
                Err(e) => return Err(TestCaseError::fail(format!("acyclic plan rejected: {e}"))),
            };
            // Kahn levels: the longest dependency chain below each step (edges may point forward, so
            // relax n times).
            let mut level = vec![0usize; n];
            for _ in 0..n {
                for i in 0..n {
                    for d in g.dep_set(i) {
                        level[i] = level[i].max(level[d] + 1);
                    }
                }
            }
            for (i, &want_wave) in level.iter().enumerate() {
                let p = plan.index_of(&gid(i)).unwrap();
                let step = &plan.steps()[p];
                let deps: BTreeSet<String> =
                    step.deps.iter().map(|&d| plan.steps()[d].id.clone()).collect();
                let want: BTreeSet<String> = g.dep_set(i).into_iter().map(gid).collect();
                prop_assert_eq!(&deps, &want, "deps of {}", gid(i));
                prop_assert!(step.deps.windows(2).all(|w| w[0] < w[1]), "deps ascending, no repeats");
                prop_assert_eq!(step.wave, want_wave, "wave of {}", gid(i));
                prop_assert!(plan.waves()[want_wave].contains(&p));
                for &d in &step.deps {
                    prop_assert!(plan.steps()[d].dependents.contains(&p));
                }
            }
        }
    }

    /// "Every problem named": each separate group of steps that wait for each other (a strongly
    /// connected component with a cycle, a self-reference included) has one of its cycles named, so
    /// that fixing the named cycles leaves no other cycle behind.
    #[test]
    fn every_cyclic_group_is_named(g in graph()) {
        let n = g.deps.len();
        let reach = g.reach();
        prop_assume!((0..n).any(|i| reach[i][i]));
        let registry = toolplan_demo::registry();
        let result = tool_plan::compile_value(graph_plan(&g), &registry, &Limits::default());
        let named = named_cycles(&g, &result)?;
        let mut seen = vec![false; n];
        for i in 0..n {
            if !reach[i][i] || seen[i] {
                continue;
            }
            let group: BTreeSet<usize> =
                (0..n).filter(|&j| j == i || (reach[i][j] && reach[j][i])).collect();
            for &j in &group {
                seen[j] = true;
            }
            prop_assert!(
                named.iter().any(|c| c.is_subset(&group)),
                "no cycle named among {:?}; named: {:?}; problems: {}",
                group.iter().map(|&j| gid(j)).collect::<Vec<_>>(),
                named.iter().map(|c| c.iter().map(|&j| gid(j)).collect::<Vec<_>>()).collect::<Vec<_>>(),
                result.as_ref().err().map(ToString::to_string).unwrap_or_default()
            );
        }
    }
}

/// The smallest cases `every_cyclic_group_is_named` finds, fixed: two separate cycles where the second
/// also waits for a step of the first must both be named.
#[test]
fn separate_cycles_are_each_named() {
    let registry = toolplan_demo::registry();
    // v0 -> v0, and v1 -> v1 where v1 also waits for v0.
    let self_loops = Graph {
        deps: vec![vec![(0, true)], vec![(0, false), (1, true)]],
    };
    // v0 <-> v1, and v2 <-> v3 where v2 also waits for v0.
    let two_pairs = Graph {
        deps: vec![
            vec![(1, true)],
            vec![(0, true)],
            vec![(0, true), (3, true)],
            vec![(2, true)],
        ],
    };
    for g in [self_loops, two_pairs] {
        let result = tool_plan::compile_value(graph_plan(&g), &registry, &Limits::default());
        let text = result.as_ref().err().map(ToString::to_string).unwrap();
        let named = named_cycles(&g, &result).unwrap();
        let last = g.deps.len() - 1;
        assert!(
            named.iter().any(|c| c.contains(&last)),
            "the cycle through {} is not named: {text}",
            gid(last)
        );
    }
}

// ---------------------------------------------------------------------------------------------------
// Property 4: reference resolution
// ---------------------------------------------------------------------------------------------------

/// JSON outputs whose keys are mostly usable as path segments.
fn output_json() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        ".{0,8}".prop_map(Value::String),
        Just(json!("line\n\"quoted\"\\ tab\t")),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(
                (prop_oneof![4 => "[a-z0-9_-]{1,3}", 1 => ".{0,4}"], inner),
                0..6
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
    .boxed()
}

/// One step of a path: which way to go at each level.
#[derive(Debug, Clone)]
enum Seg {
    /// An existing key or index (by position), written as a positive index for arrays.
    Existing(Index),
    /// An existing array element written as a negative index, or an object key by position.
    FromEnd(Index),
    /// Any segment text.
    Random(String),
}

fn seg() -> impl Strategy<Value = Seg> {
    prop_oneof![
        5 => any::<Index>().prop_map(Seg::Existing),
        2 => any::<Index>().prop_map(Seg::FromEnd),
        2 => prop_oneof!["[A-Za-z0-9_-]{1,4}", "-?[0-9]{1,3}", Just("-0".to_owned())]
            .prop_map(Seg::Random),
    ]
}

/// Turns path choices into segments by walking `output`.
fn build_path(output: &Value, choices: &[Seg]) -> Vec<String> {
    let mut cur = Some(output);
    let mut path = Vec::new();
    for c in choices {
        let s = match (cur, c) {
            (Some(Value::Object(m)), Seg::Existing(ix) | Seg::FromEnd(ix)) if !m.is_empty() => {
                let k = m.keys().nth(ix.index(m.len())).unwrap().clone();
                if reference::is_valid_id(&k) {
                    k
                } else {
                    "k".to_owned()
                }
            }
            (Some(Value::Array(a)), Seg::Existing(ix)) if !a.is_empty() => {
                ix.index(a.len()).to_string()
            }
            (Some(Value::Array(a)), Seg::FromEnd(ix)) if !a.is_empty() => {
                format!("-{}", a.len() - ix.index(a.len()))
            }
            (_, Seg::Random(s)) => s.clone(),
            _ => "zz".to_owned(),
        };
        cur = walk_one(cur, &s);
        path.push(s);
    }
    path
}

/// The documented lookup of one segment: object member by key; array element by index when the
/// segment is an integer, negative counting from the end.
fn walk_one<'v>(cur: Option<&'v Value>, seg: &str) -> Option<&'v Value> {
    match cur? {
        Value::Object(m) => m.get(seg),
        Value::Array(a) => {
            let i = if let Some(back) = seg.strip_prefix('-') {
                let back: usize = back.parse().ok()?;
                if back == 0 || back > a.len() {
                    return None;
                }
                a.len() - back
            } else {
                seg.parse::<usize>().ok()?
            };
            a.get(i)
        }
        _ => None,
    }
}

/// What a reference must resolve to: `Err` for a path on a text output, else the value or `None`.
/// The model of `reference::follow`: a path into text, a number or a boolean (the whole output or a
/// value on the way) is an error; a missing field, index or null on the way gives `None`.
fn expected(output: &Value, path: &[String]) -> Result<Option<Value>, ()> {
    let mut cur = Some(output);
    for s in path {
        if matches!(
            cur,
            Some(Value::String(_) | Value::Number(_) | Value::Bool(_))
        ) {
            return Err(());
        }
        cur = walk_one(cur, s);
    }
    Ok(cur.cloned())
}

fn as_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(other) => serde_json::to_string(other).unwrap(),
        None => "null".to_owned(),
    }
}

fn ref_text(step: &str, path: &[String]) -> String {
    let mut s = format!("$ref:{step}");
    for p in path {
        s.push('.');
        s.push_str(p);
    }
    s
}

/// Text around references: no `$`, and never starting with an id character or `.` + id character,
/// so that it cannot extend the reference before it.
fn separator() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[ ,;:!<>()\\[\\]{}\"'][a-z .]{0,4}",
        Just(".".to_owned()),
        Just(". end".to_owned()),
        Just("..".to_owned()),
    ]
}

/// Returns a fixed output.
fn constant(value: Value) -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "const",
        "returns a fixed value",
        json!({"type": "object"}),
        move |_, _| {
            let value = value.clone();
            async move { Ok(value) }
        },
    ))
}

/// Records the arguments it is called with.
fn capture(seen: Arc<Mutex<Vec<Value>>>) -> Arc<dyn Tool> {
    Arc::new(FnTool::new(
        "capture",
        "records its arguments",
        json!({"type": "object"}),
        move |arguments, _| {
            seen.lock().unwrap().push(arguments);
            async { Ok(json!("captured")) }
        },
    ))
}

proptest! {
    #![proptest_config(cases(256))]

    /// `$ref` paths: whole-value insertion gives exactly the sub-value at the path (or null), text
    /// interpolation renders text raw and everything else as compact JSON; both through a template and
    /// through a real plan run.
    #[test]
    fn references_resolve_to_the_value_at_the_path(
        (output, choices) in output_json().prop_flat_map(|o| {
            (Just(o), prop::collection::vec(prop::collection::vec(seg(), 0..5), 1..4))
        }),
        step in prop_oneof![Just("src".to_owned()), "[A-Za-z0-9_-]{1,6}"],
        pre in "[a-z <>:]{1,4}",
        seps in prop::collection::vec(separator(), 3),
    ) {
        prop_assume!(step != "t");
        let paths: Vec<Vec<String>> = choices.iter().map(|c| build_path(&output, c)).collect();
        let wants: Vec<Result<Option<Value>, ()>> =
            paths.iter().map(|p| expected(&output, p)).collect();

        // The interpolated string: pre, then each reference followed by its separator.
        let mut text = pre.clone();
        for (k, p) in paths.iter().enumerate() {
            text.push_str(&ref_text(&step, p));
            text.push_str(&seps[k]);
        }
        let whole: Vec<Value> = paths.iter().map(|p| json!(ref_text(&step, p))).collect();
        let args = json!({"whole": whole, "text": text});

        // Parsing: each whole reference is one typed reference with exactly that path.
        let mut template = Template::compile(args.clone());
        let mut seen = Vec::new();
        template.for_each_ref_mut(&mut |r| {
            r.slot = 0;
            seen.push((r.step.clone(), r.path.clone()));
        });
        let mut want_refs: Vec<(String, Vec<String>)> =
            paths.iter().map(|p| (step.clone(), p.clone())).collect();
        want_refs.extend(want_refs.clone());
        prop_assert_eq!(&seen, &want_refs);

        // The string splits losslessly into text and references.
        let pieces = reference::split_pieces(&text).unwrap();
        let rejoined: String = pieces
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.clone(),
                Piece::Ref(r) => r.to_string(),
            })
            .collect();
        prop_assert_eq!(&rejoined, &text);

        // Rendering.
        let rendered = template.render(&|slot| (slot == 0).then_some(&output));
        if wants.iter().any(Result::is_err) {
            prop_assert!(rendered.is_err(), "a path into text, a number or a boolean must fail");
        } else {
            let rendered = rendered.unwrap();
            let want_whole: Vec<Value> =
                wants.iter().map(|w| w.clone().unwrap().unwrap_or(Value::Null)).collect();
            prop_assert_eq!(&rendered["whole"], &json!(want_whole));
            let mut want_text = pre.clone();
            for (k, w) in wants.iter().enumerate() {
                want_text.push_str(&as_text(w.as_ref().unwrap().as_ref()));
                want_text.push_str(&seps[k]);
            }
            prop_assert_eq!(&rendered["text"], &json!(want_text));
        }

        // The same through a plan: a step returning `output`, and a step that captures its arguments.
        let captured = Arc::new(Mutex::new(Vec::new()));
        let mut tools = ToolRegistry::new();
        tools.register(constant(output.clone())).unwrap();
        tools.register(capture(Arc::clone(&captured))).unwrap();
        let engine = Engine::new(Arc::new(tools));
        let plan = engine
            .compile_value(json!({"steps": [
                {"id": "t", "tool": "capture", "arguments": args},
                {"id": step, "tool": "const"},
            ]}))
            .unwrap();
        let rt = paused_runtime();
        let run = rt.block_on(engine.run(&plan, RunControl::default()));
        let t = run.step("t").unwrap();
        if wants.iter().any(Result::is_err) {
            prop_assert_eq!(t.status, StepStatus::Failed);
            let err = t.error.as_deref().unwrap_or("");
            let named = format!("step '{step}'");
            prop_assert!(err.contains(&named), "{}", err);
        } else {
            prop_assert_eq!(t.status, StepStatus::Ok, "{:?}", t.error);
            let got = captured.lock().unwrap().pop().unwrap();
            let rendered = template.render(&|slot| (slot == 0).then_some(&output)).unwrap();
            prop_assert_eq!(got, rendered);
        }
    }

    /// Any string splits into text and references that join back into the same string; text pieces
    /// are never empty nor adjacent; a string without a reference stays literal.
    #[test]
    fn split_pieces_is_lossless(s in prop_oneof![string_with_refs(), ".{0,30}"]) {
        match reference::split_pieces(&s) {
            Some(pieces) => {
                prop_assert!(!pieces.is_empty());
                let mut rejoined = String::new();
                let mut last_text = false;
                for p in &pieces {
                    match p {
                        Piece::Text(t) => {
                            prop_assert!(!t.is_empty() && !last_text);
                            rejoined.push_str(t);
                            last_text = true;
                        }
                        Piece::Ref(r) => {
                            prop_assert!(reference::is_valid_id(&r.step));
                            prop_assert!(r.path.iter().all(|p| reference::is_valid_id(p)));
                            rejoined.push_str(&r.to_string());
                            last_text = false;
                        }
                    }
                }
                prop_assert_eq!(&rejoined, &s);
            }
            None => {
                // No `$ref:` is followed by an id character.
                let bytes = s.as_bytes();
                for (at, _) in s.match_indices("$ref:") {
                    let next = bytes.get(at + 5).copied();
                    prop_assert!(!next.is_some_and(reference::is_id_char), "{:?}", s);
                }
                prop_assert!(Template::compile(json!(s)).is_literal());
            }
        }
    }
}
