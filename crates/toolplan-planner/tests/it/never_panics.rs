//! A property test: `execute_tool_plan` handed anything (arbitrary JSON, objects shaped like plans,
//! plans that are valid more often than not; as an object or as text) answers with a summary or a
//! list of problems, and never panics.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use toolplan_core::{Engine, RunConfig, Tool, ToolContext, ToolError};
use toolplan_demo as demo;
use toolplan_planner::ExecuteToolPlan;

const IDS: &[&str] = &["a", "b", "c", "s1", "step-2", "x_y", "", "a b", "$ref:a"];
const TOOLS: &[&str] = &[
    "echo",
    "concat",
    "sleep",
    "fail",
    "get_weather",
    "calculator",
    "compare_data",
    "execute_tool_plan",
    "get_wether",
    "",
];

/// Strings, many of them with `$ref:` fragments.
fn text() -> BoxedStrategy<String> {
    prop_oneof![
        2 => ".{0,12}",
        2 => "[a-z <>]{0,4}\\$ref:[a-c1](\\.[a-z0-9-]{1,3}){0,3}[ .,!]?[a-z]{0,3}",
        1 => prop::sample::select(vec!["$ref:", "$ref:a.", "$ref:a..b", "{\"a\":1}", "[1,2", ""])
            .prop_map(str::to_owned),
    ]
    .boxed()
}

/// Arbitrary JSON trees.
fn arb_json() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-3i64..300).prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    let key = prop_oneof![
        prop::sample::select(vec![
            "steps",
            "output_steps",
            "id",
            "tool",
            "arguments",
            "text",
            "ms"
        ])
        .prop_map(str::to_owned),
        "[a-z0-9_-]{1,4}",
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
    .boxed()
}

/// Objects that look like plans: steps of random ids, tools and arguments, sometimes output steps.
fn plan_shaped() -> BoxedStrategy<Value> {
    let step = (
        prop::option::weighted(0.9, prop::sample::select(IDS)),
        prop::option::weighted(0.9, prop::sample::select(TOOLS)),
        prop::option::weighted(0.9, arb_json()),
    )
        .prop_map(|(id, tool, arguments)| {
            let mut m = Map::new();
            for (k, v) in [
                ("id", id.map(|i| json!(i))),
                ("tool", tool.map(|t| json!(t))),
                ("arguments", arguments),
            ] {
                if let Some(v) = v {
                    m.insert(k.to_owned(), v);
                }
            }
            Value::Object(m)
        });
    (
        prop_oneof![8 => prop::collection::vec(step, 0..8).prop_map(Value::Array), 1 => arb_json()],
        prop::option::weighted(0.3, prop::collection::vec(prop::sample::select(IDS), 0..3)),
    )
        .prop_map(|(steps, outputs)| {
            let mut m = Map::new();
            m.insert("steps".into(), steps);
            if let Some(o) = outputs {
                m.insert("output_steps".into(), json!(o));
            }
            Value::Object(m)
        })
        .boxed()
}

/// Plans over the demo tools whose references point at earlier steps (or at missing fields).
fn mostly_valid_plan() -> BoxedStrategy<Value> {
    let step = (0usize..5, any::<prop::sample::Index>(), 0usize..3);
    prop::collection::vec(step, 1..8)
        .prop_map(|steps| {
            let steps: Vec<Value> = steps
                .iter()
                .enumerate()
                .map(|(i, (tool, pick, variant))| {
                    let earlier = if i == 0 {
                        json!("Tokyo")
                    } else {
                        json!(format!("$ref:g{}{}", pick.index(i), [".temp", "", ".city"][*variant]))
                    };
                    let (tool, arguments) = match tool {
                        0 => ("echo", json!({"text": earlier})),
                        1 => ("get_weather", json!({"location": earlier})),
                        2 => ("calculator", json!({"expression": format!("{} + 1", earlier.as_str().unwrap_or("1"))})),
                        3 => {
                            let ms = [0, 30, 600_000][*variant];
                            ("sleep", json!({"ms": ms, "value": earlier}))
                        }
                        _ => ("compare_data", json!({"data_a": earlier, "data_b": {"temp": 3}})),
                    };
                    json!({"id": format!("g{i}"), "tool": tool, "arguments": arguments})
                })
                .collect();
            json!({"steps": steps})
        })
        .boxed()
}

fn demo_engine() -> Engine {
    Engine::new(Arc::new(demo::registry())).with_config(RunConfig {
        deadline: Some(Duration::from_millis(50)),
        step_timeout: Some(Duration::from_millis(40)),
        ..RunConfig::default()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// The `execute_tool_plan` tool itself, handed anything (an object, or text of one).
    #[test]
    fn execute_tool_plan_never_panics(
        value in prop_oneof![plan_shaped(), mostly_valid_plan(), arb_json()],
        as_text in any::<bool>(),
    ) {
        let tool = ExecuteToolPlan::new(Arc::new(demo_engine()));
        let value = if as_text { Value::String(value.to_string()) } else { value };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        match rt.block_on(tool.call(value, ToolContext::detached())) {
            Ok(summary) => prop_assert!(summary.as_str().is_some_and(|s| !s.is_empty())),
            Err(e) => prop_assert!(matches!(e, ToolError::InvalidArguments(_)), "{e:?}"),
        }
    }
}
