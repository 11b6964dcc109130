//! Validation of the extensions: references to unknown steps, every problem at once, arguments and their schemas, depends_on, output_steps, unknown fields.

use super::*;

// ---- extensions ----

#[test]
fn reference_to_an_unknown_step_is_rejected_before_running() {
    let plan = json!({"steps": [
        {"id": "s1", "tool": "echo", "arguments": {"text": "x"}},
        {"id": "s2", "tool": "echo", "arguments": {"text": "$ref:nowhere.temp and $ref:nowhere"}}
    ]});
    assert_eq!(
        problems(plan.clone()),
        vec![Problem::UnknownReference {
            step: "s2".into(),
            target: "nowhere".into(),
            reference: "$ref:nowhere.temp".into()
        }]
    );
    assert_eq!(
        messages(plan),
        ["step 's2' references unknown step 'nowhere' in \"$ref:nowhere.temp\""]
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let err = engine()
        .compile_value(json!({
            "steps": [
                {"id": "a", "tool": "get_wether", "arguments": {"location": "Tokyo"}},
                {"id": "a", "tool": "echo", "arguments": {"text": "dup"}},
                {"id": "b", "tool": "echo", "arguments": {"text": "$ref:c"}},
                {"id": "c", "tool": "echo", "arguments": {"text": "$ref:b"}},
                {"id": "d", "tool": "echo", "arguments": "{not json"},
                {"id": "e", "tool": "execute_tool_plan", "arguments": {}},
                {"id": "f", "tool": "echo", "arguments": {"text": "$ref:nowhere"}},
                {"id": "g", "tool": "get_weather", "arguments": {"location": 5}},
                {"id": "h", "tool": "echo", "arguments": {"text": "x"}, "extra": 1}
            ],
            "output_steps": ["zzz"],
            "comment": "hi"
        }))
        .unwrap_err();
    let kinds: Vec<&str> = err
        .problems
        .iter()
        .map(|p| match p {
            Problem::UnknownField { .. } => "unknown field",
            Problem::DuplicateId { .. } => "duplicate",
            Problem::ArgumentsNotJson { .. } => "not json",
            Problem::UnknownTool { .. } => "unknown tool",
            Problem::RecursivePlan { .. } => "recursive",
            Problem::UnknownReference { .. } => "unknown reference",
            Problem::SchemaViolation { .. } => "schema",
            Problem::UnknownOutputStep { .. } => "unknown output",
            Problem::Cycle { .. } => "cycle",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "unknown field",
            "duplicate",
            "not json",
            "unknown field",
            "unknown tool",
            "recursive",
            "unknown reference",
            "schema",
            "unknown output",
            "cycle"
        ],
        "{err}"
    );
    let steps: Vec<Option<&str>> = err.problems.iter().map(Problem::step).collect();
    assert_eq!(
        steps,
        [
            None,
            Some("a"),
            Some("d"),
            None,
            Some("a"),
            Some("e"),
            Some("f"),
            Some("g"),
            None,
            None
        ]
    );
    let text = err.to_string();
    assert!(text.starts_with("invalid plan: 10 problems:\n- "), "{text}");
    for needle in [
        "the plan has an unknown field \"comment\" (known: \"steps\", \"output_steps\", \"thought\")",
        "Duplicate step ID: 'a' (steps #0 and #1)",
        "step 'd': arguments are not valid JSON: ",
        "step 'h' has an unknown field \"extra\" (known: \"id\", \"tool\", \"arguments\", \"depends_on\")",
        "Unknown tool 'get_wether' in step 'a' (did you mean 'get_weather'?)",
        "step 'e' calls execute_tool_plan: recursive plans are not allowed",
        "step 'f' references unknown step 'nowhere' in \"$ref:nowhere\"",
        "step 'g': arguments do not match the schema of tool 'get_weather': /location",
        "\"output_steps\" names unknown step 'zzz'",
        "Cycle detected in tool plan dependencies: b -> c -> b",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

#[test]
fn a_single_problem_is_displayed_on_one_line() {
    let err: InvalidPlan = engine()
        .compile_value(json!({"steps": [{"id": "s1", "tool": "x", "arguments": {}}]}))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid plan: Unknown tool 'x' in step 's1'"
    );
}

#[tokio::test]
async fn arguments_as_object_and_as_json_string_are_equivalent() {
    let engine = engine();
    let as_object = engine
        .compile_value(json!({"steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "Paris"}},
            {"id": "e", "tool": "echo", "arguments": {"text": "$ref:w.condition"}}
        ]}))
        .unwrap();
    let as_string = engine
        .compile_value(json!({"steps": [
            {"id": "w", "tool": "get_weather", "arguments": "{\"location\": \"Paris\"}"},
            {"id": "e", "tool": "echo", "arguments": "{\"text\": \"$ref:w.condition\"}"}
        ]}))
        .unwrap();
    assert_eq!(as_object, as_string);
    let run = engine.run(&as_string, RunControl::default()).await;
    assert_eq!(run.output("e"), Some(&json!("cloudy")));
    assert_eq!(
        run.output("w"),
        Some(&json!({"temp": 15, "condition": "cloudy", "city": "Paris"}))
    );
}

#[tokio::test]
async fn missing_null_or_blank_arguments_mean_an_empty_object() {
    let engine = engine();
    let plan = engine
        .compile_value(json!({"steps": [
            {"id": "a", "tool": "fail"},
            {"id": "b", "tool": "fail", "arguments": null},
            {"id": "c", "tool": "fail", "arguments": "  "}
        ]}))
        .unwrap();
    // All three are the same call (`fail` with no arguments): `fail` is read-only, so b and c
    // share a's outcome instead of running again.
    let same: Vec<Option<usize>> = plan.steps().iter().map(|s| s.same_call_as).collect();
    assert_eq!(same, [None, Some(0), Some(0)]);
    let run = engine.run(&plan, RunControl::default()).await;
    assert_eq!(
        run.step("a").unwrap().error.as_deref(),
        Some("this tool always fails")
    );
}

#[test]
fn arguments_string_that_is_not_json_names_the_step() {
    let p = problems(json!({"steps": [
        {"id": "ok", "tool": "echo", "arguments": "{\"text\": \"x\"}"},
        {"id": "broken", "tool": "echo", "arguments": "{\"text\": \"x\""}
    ]}));
    assert_eq!(p.len(), 1, "{p:?}");
    let Problem::ArgumentsNotJson { step, error } = &p[0] else {
        panic!("expected ArgumentsNotJson, got {p:?}");
    };
    assert_eq!(step, "broken");
    assert!(error.contains("line 1 column"), "{error}");
    assert!(
        p[0].to_string()
            .starts_with("step 'broken': arguments are not valid JSON: "),
        "{}",
        p[0]
    );
}

#[test]
fn arguments_that_are_json_but_not_an_object() {
    assert_eq!(
        messages(json!({"steps": [
            {"id": "s1", "tool": "echo", "arguments": "[1, 2]"},
            {"id": "s2", "tool": "echo", "arguments": 5}
        ]})),
        [
            "step 's1': arguments must be a JSON object, found an array",
            "step 's2': arguments must be a JSON object, found a number"
        ]
    );
}

#[test]
fn literal_arguments_that_break_the_schema_are_rejected_naming_the_field() {
    let p = problems(json!({"steps": [
        {"id": "s1", "tool": "get_weather", "arguments": {"location": 5}},
        {"id": "s2", "tool": "get_weather", "arguments": {}},
        {"id": "s3", "tool": "sleep", "arguments": {"ms": 10, "colour": "red"}}
    ]}));
    assert_eq!(p.len(), 3, "{p:?}");
    let details: Vec<(&str, &str, &str)> = p
        .iter()
        .map(|p| match p {
            Problem::SchemaViolation { step, tool, detail } => {
                (step.as_str(), tool.as_str(), detail.as_str())
            }
            other => panic!("expected a schema violation, got {other:?}"),
        })
        .collect();
    assert_eq!((details[0].0, details[0].1), ("s1", "get_weather"));
    assert!(details[0].2.starts_with("/location: "), "{}", details[0].2);
    assert!(details[0].2.contains("\"string\""), "{}", details[0].2);
    assert_eq!((details[1].0, details[1].1), ("s2", "get_weather"));
    assert!(details[1].2.contains("\"location\""), "{}", details[1].2);
    assert_eq!((details[2].0, details[2].1), ("s3", "sleep"));
    assert!(details[2].2.contains("colour"), "{}", details[2].2);
    assert!(
        p[0].to_string().starts_with(
            "step 's1': arguments do not match the schema of tool 'get_weather': /location: "
        ),
        "{}",
        p[0]
    );
}

#[tokio::test]
async fn resolved_arguments_that_break_the_schema_fail_only_that_step() {
    let engine = engine();
    let plan = engine
        .compile_value(json!({"steps": [
            {"id": "n", "tool": "echo", "arguments": {"text": "{\"num\": 5, \"city\": \"Oslo\"}"}},
            {"id": "bad", "tool": "get_weather", "arguments": {"location": "$ref:n.num"}},
            {"id": "good", "tool": "get_weather", "arguments": {"location": "$ref:n.city"}},
            {"id": "after_bad", "tool": "echo", "arguments": {"text": "$ref:bad"}}
        ]}))
        .unwrap();
    let run = engine.run(&plan, RunControl::default()).await;
    let bad = run.step("bad").unwrap();
    assert_eq!(bad.status, StepStatus::Failed);
    let error = bad.error.as_deref().unwrap();
    assert!(
        error.starts_with(
            "invalid arguments: arguments do not match the schema of tool 'get_weather': /location: 5 "
        ),
        "{error}"
    );
    assert_eq!(run.step("good").unwrap().status, StepStatus::Ok);
    assert_eq!(
        run.output("good"),
        Some(&json!({"temp": 3, "condition": "snow", "city": "Oslo"}))
    );
    assert_eq!(
        run.step("after_bad").unwrap().error.as_deref(),
        Some("Skipped because dependency 'bad' failed")
    );
}

#[tokio::test(start_paused = true)]
async fn depends_on_orders_steps_that_pass_no_data() {
    let engine = engine();
    let plan = engine
        .compile_value(json!({"steps": [
            {"id": "write", "tool": "sleep", "arguments": {"ms": 50, "value": "written"}},
            {"id": "read", "tool": "echo", "arguments": {"text": "read"}, "depends_on": ["write"]},
            {"id": "both", "tool": "echo", "arguments": {"text": "$ref:read"}, "depends_on": ["write", "read"]}
        ]}))
        .unwrap();
    assert_eq!(plan.steps()[1].deps, vec![0]);
    assert_eq!(plan.steps()[2].deps, vec![0, 1]);
    assert_eq!(plan.waves(), &[vec![0], vec![1], vec![2]]);
    let run = engine.run(&plan, RunControl::default()).await;
    assert!(run.all_ok());
    let write = run.step("write").unwrap();
    let read = run.step("read").unwrap();
    assert_eq!(write.finished, Duration::from_millis(50));
    assert_eq!(read.started, Some(Duration::from_millis(50)));
    assert_eq!(run.output("both"), Some(&json!("read")));
}

#[test]
fn depends_on_problems() {
    assert_eq!(
        messages(json!({"steps": [
            {"id": "a", "tool": "echo", "arguments": {"text": "x"}, "depends_on": ["ghost"]},
            {"id": "b", "tool": "echo", "arguments": {"text": "x"}, "depends_on": "a"},
            {"id": "c", "tool": "echo", "arguments": {"text": "x"}, "depends_on": [1]}
        ]})),
        [
            "step 'b' field \"depends_on\" must be an array of step ids, found a string",
            "step 'c' field \"depends_on\" entry must be a step id string, found a number",
            "step 'a' depends on unknown step 'ghost'"
        ]
    );
}

#[test]
fn output_steps_problems() {
    assert_eq!(
        messages(json!({
            "steps": [{"id": "a", "tool": "echo", "arguments": {"text": "x"}}],
            "output_steps": ["a", "b", 3]
        })),
        [
            "\"output_steps\"[2] must be a step id string, found a number",
            "\"output_steps\" names unknown step 'b'"
        ]
    );
    assert_eq!(
        messages(json!({
            "steps": [{"id": "a", "tool": "echo", "arguments": {"text": "x"}}],
            "output_steps": "a"
        })),
        ["\"output_steps\" must be an array of step ids, found a string"]
    );
}

#[test]
fn unknown_fields_are_reported() {
    let mut p = problems(json!({
        "steps": [{"id": "s1", "tool": "echo", "arguments": {"text": "x"}, "args": {}, "name": "n"}],
        "output": ["s1"]
    }));
    // The two unknown fields of the step are not necessarily reported in source order.
    p[1..].sort_by_key(ToString::to_string);
    assert_eq!(
        p,
        vec![
            Problem::UnknownField {
                what: "the plan".into(),
                field: "output".into(),
                known: "\"steps\", \"output_steps\", \"thought\""
            },
            Problem::UnknownField {
                what: "step 's1'".into(),
                field: "args".into(),
                known: "\"id\", \"tool\", \"arguments\", \"depends_on\""
            },
            Problem::UnknownField {
                what: "step 's1'".into(),
                field: "name".into(),
                known: "\"id\", \"tool\", \"arguments\", \"depends_on\""
            },
        ]
    );
    assert_eq!(
        p[0].to_string(),
        "the plan has an unknown field \"output\" (known: \"steps\", \"output_steps\", \"thought\")"
    );
}
