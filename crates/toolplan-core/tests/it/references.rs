//! `$ref:` substitution as a plan sees it: typed insertion, field paths, missing fields, text outputs,
//! escaping, interpolation inside longer strings, array indexes, hyphenated ids, and the dependency
//! edges derived from references.

use std::sync::Arc;

use serde_json::{Value, json};
use toolplan_core::{Engine, FnTool, Plan, PlanRun, RunControl, StepStatus, Tool, ToolRegistry};

/// Returns its arguments unchanged, so a test can see exactly what references resolved to.
fn capture() -> Arc<dyn Tool> {
    Arc::new(
        FnTool::new(
            "capture",
            "Returns its arguments.",
            json!({"type": "object"}),
            |arguments, _| async move { Ok(arguments) },
        )
        .with_annotations(toolplan_core::ToolAnnotations::READ_ONLY),
    )
}

fn engine() -> Engine {
    let mut tools: ToolRegistry = toolplan_demo::registry();
    tools.register(capture()).unwrap();
    Engine::new(Arc::new(tools))
}

fn compile(plan: Value) -> Plan {
    engine().compile_value(plan).unwrap()
}

async fn run(plan: Value) -> PlanRun {
    let engine = engine();
    let plan = engine.compile_value(plan).unwrap();
    engine.run(&plan, RunControl::default()).await
}

/// Runs `producer` (an `echo` of `text`, so the output is parsed like a tool's text output) and a
/// `capture` step with `arguments`; returns what `capture` received.
async fn captured(text: &str, arguments: Value) -> Value {
    let run = run(json!({
        "steps": [
            {"id": "s1", "tool": "echo", "arguments": {"text": text}},
            {"id": "s2", "tool": "capture", "arguments": arguments}
        ],
        "output_steps": ["s2"]
    }))
    .await;
    assert!(run.all_ok(), "{}", run.summary());
    run.output("s2").unwrap().clone()
}

// ---- typed insertion (agentle4j) ----

#[tokio::test]
async fn text_output_is_inserted_as_a_string() {
    assert_eq!(
        captured("plain text output", json!({"v": "$ref:s1"})).await,
        json!({"v": "plain text output"})
    );
}

#[tokio::test]
async fn object_output_is_inserted_as_an_object() {
    assert_eq!(
        captured(r#"{"temp": 18, "city": "Tokyo"}"#, json!({"v": "$ref:s1"})).await,
        json!({"v": {"temp": 18, "city": "Tokyo"}})
    );
}

#[tokio::test]
async fn array_output_is_inserted_as_an_array() {
    assert_eq!(
        captured(r#"[1, "two", {"three": 3}]"#, json!({"v": "$ref:s1"})).await,
        json!({"v": [1, "two", {"three": 3}]})
    );
}

#[tokio::test]
async fn number_output_is_inserted_as_a_number() {
    let v = captured("42", json!({"int": "$ref:s1"})).await;
    assert_eq!(v, json!({"int": 42}));
    assert!(v["int"].is_u64());
    let v = captured("-2.5", json!({"float": "$ref:s1"})).await;
    assert_eq!(v, json!({"float": -2.5}));
}

#[tokio::test]
async fn boolean_output_is_inserted_as_a_boolean() {
    assert_eq!(
        captured("true", json!({"v": "$ref:s1"})).await,
        json!({"v": true})
    );
    assert_eq!(
        captured("false", json!({"v": "$ref:s1"})).await,
        json!({"v": false})
    );
}

#[tokio::test]
async fn json_string_and_null_outputs_keep_their_type() {
    assert_eq!(
        captured(r#""quoted""#, json!({"v": "$ref:s1"})).await,
        json!({"v": "quoted"})
    );
    assert_eq!(
        captured("null", json!({"v": "$ref:s1"})).await,
        json!({"v": null})
    );
}

#[tokio::test]
async fn nan_output_is_text_not_a_bare_token() {
    // agentle4j could insert NaN unquoted and break the JSON; here it is text.
    assert_eq!(
        captured("NaN", json!({"v": "$ref:s1"})).await,
        json!({"v": "NaN"})
    );
}

#[tokio::test]
async fn field_path_selects_a_field() {
    assert_eq!(
        captured(
            r#"{"temp": 18, "city": "Tokyo", "ok": true}"#,
            json!({"t": "$ref:s1.temp", "c": "$ref:s1.city", "ok": "$ref:s1.ok"})
        )
        .await,
        json!({"t": 18, "c": "Tokyo", "ok": true})
    );
}

#[tokio::test]
async fn nested_field_path() {
    assert_eq!(
        captured(
            r#"{"user": {"address": {"city": "Oslo", "geo": {"lat": 59.9}}}}"#,
            json!({"city": "$ref:s1.user.address.city", "geo": "$ref:s1.user.address.geo", "lat": "$ref:s1.user.address.geo.lat"})
        )
        .await,
        json!({"city": "Oslo", "geo": {"lat": 59.9}, "lat": 59.9})
    );
}

#[tokio::test]
async fn several_references_in_one_argument() {
    let run = run(json!({
        "steps": [
            {"id": "a", "tool": "get_weather", "arguments": {"location": "Tokyo"}},
            {"id": "b", "tool": "get_weather", "arguments": {"location": "London"}},
            {"id": "c", "tool": "capture", "arguments": {
                "pair": ["$ref:a.temp", "$ref:b.temp"],
                "nested": {"first": "$ref:a.city", "second": {"whole": "$ref:b"}},
                "text": "$ref:a.condition"
            }}
        ],
        "output_steps": ["c"]
    }))
    .await;
    assert_eq!(
        run.output("c").unwrap(),
        &json!({
            "pair": [18, 12],
            "nested": {"first": "Tokyo", "second": {"whole": {"temp": 12, "condition": "rainy", "city": "London"}}},
            "text": "sunny"
        })
    );
}

#[tokio::test]
async fn missing_field_is_null() {
    assert_eq!(
        captured(
            r#"{"temp": 18, "nested": {"a": 1}, "none": null}"#,
            json!({"m": "$ref:s1.nope", "deep": "$ref:s1.nested.b.c", "through_null": "$ref:s1.none.x"})
        )
        .await,
        json!({"m": null, "deep": null, "through_null": null})
    );
}

#[tokio::test]
async fn a_step_that_fails_on_a_missing_field_says_which_fields_there_are() {
    // A model that reads `temperature` from a user record learns what the record has; the null
    // stays (a missing field is null), and a step that copes with it succeeds. (`echo` declares no
    // output schema: with one, the plan would not have run, see `output_schemas.rs`.)
    let run = run(json!({
        "steps": [
            {"id": "e", "tool": "echo", "arguments": {"text": r#"{"name": "Erin", "city": "Cairo", "team": "engineering"}"#}},
            {"id": "d", "tool": "echo", "arguments": {"text": r#"{"name": "Dave", "city": "Oslo", "team": "support"}"#}},
            {"id": "t", "tool": "calculator", "arguments": {"expression": "$ref:e.temperature - $ref:d.temperature"}},
            {"id": "c", "tool": "capture", "arguments": {"t": "$ref:e.temperature"}}
        ]
    }))
    .await;
    let t = run.step("t").unwrap();
    assert_eq!(t.status, StepStatus::Failed);
    let error = t.error.as_deref().unwrap();
    for part in [
        "null - null",
        "($ref:e.temperature found no value: the output of step 'e' has no field 'temperature' \
         (its fields: name, city, team); $ref:d.temperature found no value: the output of step 'd' \
         has no field 'temperature' (its fields: name, city, team))",
    ] {
        assert!(error.contains(part), "{part:?} not in {error:?}");
    }
    assert_eq!(run.output("c"), Some(&json!({"t": null})));
}

#[tokio::test]
async fn a_path_into_a_text_or_number_field_fails_the_step_saying_where() {
    // A model that writes `$ref:u.city.temp` gets told that `city` is text, not a null to compute with.
    let run = run(json!({
        "steps": [
            {"id": "u", "tool": "echo", "arguments": {"text": r#"{"name": "Erin", "city": "Cairo", "age": 31}"#}},
            {"id": "t", "tool": "capture", "arguments": {"e": "$ref:u.city.temp - 1"}},
            {"id": "n", "tool": "capture", "arguments": {"e": "$ref:u.age.years"}},
            {"id": "ok", "tool": "capture", "arguments": {"e": "$ref:u.city"}}
        ]
    }))
    .await;
    let t = run.step("t").unwrap();
    assert_eq!(t.status, StepStatus::Failed);
    assert_eq!(
        t.error.as_deref(),
        Some(
            "'$ref:u.city.temp': 'city' of step 'u' is the text \"Cairo\", so it has no field 'temp'"
        )
    );
    let n = run.step("n").unwrap();
    assert!(
        n.error
            .as_deref()
            .unwrap()
            .contains("'age' of step 'u' is the number 31, so it has no field 'years'"),
        "{:?}",
        n.error
    );
    assert_eq!(run.output("ok"), Some(&json!({"e": "Cairo"})));
}

#[tokio::test]
async fn field_path_on_text_output_fails_the_step_naming_the_referenced_step() {
    let run = run(json!({
        "steps": [
            {"id": "s1", "tool": "echo", "arguments": {"text": "sunny and warm"}},
            {"id": "s2", "tool": "capture", "arguments": {"t": "$ref:s1.temp"}},
            {"id": "s3", "tool": "capture", "arguments": {"t": "$ref:s2"}}
        ]
    }))
    .await;
    let s2 = run.step("s2").unwrap();
    assert_eq!(s2.status, StepStatus::Failed);
    assert_eq!(
        s2.error.as_deref(),
        Some(
            "'$ref:s1.temp': the output of step 's1' is text (14 characters), not JSON, so it has no field 'temp'"
        )
    );
    assert_eq!(s2.started, None, "the tool was never called");
    assert_eq!(run.step("s1").unwrap().status, StepStatus::Ok);
    let s3 = run.step("s3").unwrap();
    assert_eq!(s3.status, StepStatus::Skipped);
    assert_eq!(
        s3.error.as_deref(),
        Some("Skipped because dependency 's2' failed")
    );
}

#[tokio::test]
async fn field_path_on_text_inside_longer_string_also_fails() {
    let run = run(json!({
        "steps": [
            {"id": "s1", "tool": "echo", "arguments": {"text": "sunny"}},
            {"id": "s2", "tool": "capture", "arguments": {"t": "It is $ref:s1.temp degrees"}}
        ]
    }))
    .await;
    let s2 = run.step("s2").unwrap();
    assert_eq!(s2.status, StepStatus::Failed);
    assert_eq!(
        s2.error.as_deref(),
        Some(
            "'$ref:s1.temp': the output of step 's1' is text (5 characters), not JSON, so it has no field 'temp'"
        )
    );
}

#[tokio::test]
async fn empty_output_is_the_empty_string() {
    assert_eq!(
        captured("", json!({"v": "$ref:s1"})).await,
        json!({"v": ""})
    );
    assert_eq!(
        captured("", json!({"v": "<$ref:s1>"})).await,
        json!({"v": "<>"})
    );
}

#[tokio::test]
async fn newlines_tabs_quotes_and_backslashes_survive() {
    let nasty = "line1\nline2\tcol \"quoted\" back\\slash 'single' {not json";
    let v = captured(
        nasty,
        json!({"whole": "$ref:s1", "inside": "[$ref:s1]", "list": ["$ref:s1"]}),
    )
    .await;
    assert_eq!(v["whole"], json!(nasty));
    assert_eq!(v["inside"], json!(format!("[{nasty}]")));
    assert_eq!(v["list"], json!([nasty]));
    // The resolved arguments serialise to JSON that parses back to the same value.
    let text = serde_json::to_string(&v).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v);
}

#[tokio::test]
async fn arguments_given_as_a_json_string_with_escapes_resolve_the_same() {
    let run = run(json!({
        "steps": [
            {"id": "s1", "tool": "echo", "arguments": "{\"text\": \"a\\nb\\t\\\"c\\\"\"}"},
            {"id": "s2", "tool": "capture", "arguments": "{\"v\": \"$ref:s1\"}"}
        ],
        "output_steps": ["s2"]
    }))
    .await;
    assert_eq!(run.output("s2").unwrap(), &json!({"v": "a\nb\t\"c\""}));
}

// ---- extensions ----

#[tokio::test]
async fn reference_inside_longer_string_is_interpolated_as_text() {
    let v = captured(
        r#"{"temp": 18, "city": "Tokyo", "tags": ["a", "b"], "none": null}"#,
        json!({
            "msg": "Weather: $ref:s1.temp degrees in $ref:s1.city.",
            "obj": "tags=$ref:s1.tags",
            "whole": "all: $ref:s1",
            "missing": "x=$ref:s1.nope;",
            "null": "n=$ref:s1.none",
            "adjacent": "$ref:s1.temp$ref:s1.city",
            "dollar": "costs $5 and $ref: nothing"
        }),
    )
    .await;
    assert_eq!(
        v,
        json!({
            "msg": "Weather: 18 degrees in Tokyo.",
            "obj": "tags=[\"a\",\"b\"]",
            "whole": "all: {\"temp\":18,\"city\":\"Tokyo\",\"tags\":[\"a\",\"b\"],\"none\":null}",
            "missing": "x=null;",
            "null": "n=null",
            "adjacent": "18Tokyo",
            "dollar": "costs $5 and $ref: nothing"
        })
    );
}

#[tokio::test]
async fn array_index_paths() {
    let v = captured(
        r#"{"items": [{"name": "first"}, {"name": "middle"}, {"name": "last"}], "matrix": [[1, 2], [3, 4]]}"#,
        json!({
            "zero": "$ref:s1.items.0.name",
            "one": "$ref:s1.items.1",
            "last": "$ref:s1.items.-1.name",
            "second_last": "$ref:s1.items.-2.name",
            "out_of_range": "$ref:s1.items.3",
            "too_negative": "$ref:s1.items.-4",
            "matrix": "$ref:s1.matrix.1.0",
            "text": "first is $ref:s1.items.0.name"
        }),
    )
    .await;
    assert_eq!(
        v,
        json!({
            "zero": "first",
            "one": {"name": "middle"},
            "last": "last",
            "second_last": "middle",
            "out_of_range": null,
            "too_negative": null,
            "matrix": 3,
            "text": "first is first"
        })
    );
}

#[tokio::test]
async fn index_into_a_top_level_array_output() {
    assert_eq!(
        captured(
            r#"[10, 20, 30]"#,
            json!({"a": "$ref:s1.0", "b": "$ref:s1.-1"})
        )
        .await,
        json!({"a": 10, "b": 30})
    );
}

#[tokio::test]
async fn hyphenated_ids() {
    let run = run(json!({
        "steps": [
            {"id": "weather-tokyo", "tool": "get_weather", "arguments": {"location": "Tokyo"}},
            {"id": "weather-london", "tool": "get_weather", "arguments": {"location": "London"}},
            {"id": "temp-diff", "tool": "calculator",
             "arguments": {"expression": "$ref:weather-tokyo.temp - $ref:weather-london.temp"}},
            {"id": "report", "tool": "capture",
             "arguments": {"diff": "$ref:temp-diff", "text": "Tokyo is $ref:temp-diff degrees warmer"}}
        ],
        "output_steps": ["report"]
    }))
    .await;
    assert!(run.all_ok(), "{}", run.summary());
    assert_eq!(
        run.output("report").unwrap(),
        &json!({"diff": 6, "text": "Tokyo is 6 degrees warmer"})
    );
    assert_eq!(run.waves, vec![vec![0, 1], vec![2], vec![3]]);
}

// ---- dependency extraction ----

#[test]
fn dependencies_are_extracted_from_references() {
    let plan = compile(json!({
        "steps": [
            {"id": "a", "tool": "echo", "arguments": {"text": "x"}},
            {"id": "b", "tool": "echo", "arguments": {"text": "y"}},
            {"id": "c", "tool": "capture", "arguments": {"x": "$ref:b", "y": "$ref:a.f"}},
            {"id": "d", "tool": "capture", "arguments": {"deep": [{"z": "see $ref:c.q"}]}}
        ]
    }));
    let deps: Vec<Vec<usize>> = plan.steps().iter().map(|s| s.deps.clone()).collect();
    assert_eq!(deps, vec![vec![], vec![], vec![0, 1], vec![2]]);
    let dependents: Vec<Vec<usize>> = plan.steps().iter().map(|s| s.dependents.clone()).collect();
    assert_eq!(dependents, vec![vec![2], vec![2], vec![3], vec![]]);
    let waves: Vec<usize> = plan.steps().iter().map(|s| s.wave).collect();
    assert_eq!(waves, vec![0, 0, 1, 2]);
}

#[test]
fn repeated_references_give_one_dependency() {
    let plan = compile(json!({
        "steps": [
            {"id": "s1", "tool": "get_weather", "arguments": {"location": "Tokyo"}},
            {"id": "s2", "tool": "get_weather", "arguments": {"location": "Oslo"}},
            {"id": "s3", "tool": "capture", "arguments": {
                "a": "$ref:s2", "b": "$ref:s1.temp", "c": "$ref:s1.city",
                "d": "$ref:s1 and $ref:s1 and $ref:s2.temp", "e": ["$ref:s1", "$ref:s2"]
            }}
        ]
    }));
    assert_eq!(plan.steps()[2].deps, vec![0, 1]);
    assert_eq!(plan.steps()[0].dependents, vec![2]);
    assert_eq!(plan.steps()[1].dependents, vec![2]);
}

#[test]
fn literal_dollar_text_creates_no_dependency() {
    let plan = compile(json!({
        "steps": [
            {"id": "s1", "tool": "echo", "arguments": {"text": "costs $5; $ref: is the marker; $refs"}}
        ]
    }));
    assert!(plan.steps()[0].deps.is_empty());
    assert!(plan.steps()[0].arguments.is_literal());
}
