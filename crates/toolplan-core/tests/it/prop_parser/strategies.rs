//! Strategies: arbitrary JSON, plan-shaped JSON (mostly valid plans among them) and limits.

use super::*;

// ---------------------------------------------------------------------------------------------------
// Strategies: arbitrary JSON
// ---------------------------------------------------------------------------------------------------

/// Strings, many of them with `$ref:` fragments (valid, broken, embedded, adjacent).
pub(super) fn string_with_refs() -> BoxedStrategy<String> {
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

pub(super) fn number() -> BoxedStrategy<Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        (-3i64..300).prop_map(Value::from),
    ]
    .boxed()
}

pub(super) fn leaf() -> BoxedStrategy<Value> {
    prop_oneof![
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        2 => number(),
        4 => string_with_refs().prop_map(Value::String),
    ]
    .boxed()
}

pub(super) fn key() -> BoxedStrategy<String> {
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
pub(super) fn arb_json() -> BoxedStrategy<Value> {
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

pub(super) const IDS: &[&str] = &["a", "b", "c", "s1", "step-2", "x_y"];
pub(super) const DEMO_TOOLS: &[&str] = &[
    "echo",
    "concat",
    "sleep",
    "fail",
    "get_weather",
    "calculator",
    "compare_data",
];

pub(super) fn id_string() -> BoxedStrategy<String> {
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

pub(super) fn id_value() -> BoxedStrategy<Value> {
    prop_oneof![8 => id_string().prop_map(Value::String), 1 => arb_json()].boxed()
}

pub(super) fn tool_value() -> BoxedStrategy<Value> {
    prop_oneof![
        10 => prop::sample::select(DEMO_TOOLS).prop_map(|t| json!(t)),
        2 => prop::sample::select(vec!["execute_tool_plan", "", "  ", "get_wether", "nope", "ECHO"])
            .prop_map(|t| json!(t)),
        1 => arb_json(),
    ]
    .boxed()
}

/// `$ref:` strings pointing at ids of the pool (or not), whole or inside text.
pub(super) fn ref_string() -> BoxedStrategy<String> {
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

pub(super) fn arg_value() -> BoxedStrategy<Value> {
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

pub(super) fn arguments_object() -> BoxedStrategy<Value> {
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
pub(super) fn truncate(s: &str, at: usize) -> &str {
    let mut cut = at.min(s.len());
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    &s[..cut]
}

/// The `arguments` field: absent, an object, a JSON string (whole or truncated), or anything.
pub(super) fn arguments_field() -> BoxedStrategy<Option<Value>> {
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

pub(super) fn depends_on_value() -> BoxedStrategy<Value> {
    prop_oneof![
        4 => prop::collection::vec(id_value(), 0..3).prop_map(Value::Array),
        1 => arb_json(),
    ]
    .boxed()
}

pub(super) fn step_value() -> BoxedStrategy<Value> {
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
pub(super) fn plan_shaped() -> BoxedStrategy<Value> {
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
pub(super) fn mostly_valid_plan() -> BoxedStrategy<Value> {
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

pub(super) fn limits() -> BoxedStrategy<Limits> {
    prop_oneof![
        4 => Just(Limits::default()),
        1 => (1usize..400, 1usize..6, 1usize..120, 1usize..6).prop_map(|(p, s, a, i)| Limits {
            max_plan_bytes: p,
            max_steps: s,
            max_argument_bytes: a,
            max_id_len: i,
            ..Limits::default()
        }),
    ]
    .boxed()
}
