//! The limits on plans (steps, argument bytes, plan bytes, id length), validation against a registry, and thoughts.

use super::*;

// ---- limits ----

fn limited(limits: Limits) -> Engine {
    engine().with_limits(limits)
}

#[test]
fn max_steps() {
    let limits = Limits {
        max_steps: 2,
        ..Limits::default()
    };
    let step = |id: &str| json!({"id": id, "tool": "echo", "arguments": {"text": "x"}});
    let engine = limited(limits);
    assert!(
        engine
            .compile_value(json!({"steps": [step("a"), step("b")]}))
            .is_ok()
    );
    let err = engine
        .compile_value(json!({"steps": [step("a"), step("b"), step("c")]}))
        .unwrap_err();
    assert_eq!(
        err.problems,
        vec![Problem::TooManySteps { count: 3, limit: 2 }]
    );
    assert_eq!(
        err.problems[0].to_string(),
        "the plan has 3 steps, more than the limit of 2"
    );
}

#[test]
fn a_plan_over_max_steps_does_not_also_claim_its_output_steps_are_unknown() {
    // The steps were not parsed because there are too many; "c" is in the plan, so calling it unknown
    // would be false.
    let engine = limited(Limits {
        max_steps: 2,
        ..Limits::default()
    });
    let step = |id: &str| json!({"id": id, "tool": "echo", "arguments": {"text": "x"}});
    let err = engine
        .compile_value(json!({"steps": [step("a"), step("b"), step("c")], "output_steps": ["c"]}))
        .unwrap_err();
    assert_eq!(
        err.problems,
        vec![Problem::TooManySteps { count: 3, limit: 2 }]
    );
}

#[test]
fn max_argument_bytes() {
    let engine = limited(Limits {
        max_argument_bytes: 20,
        ..Limits::default()
    });
    // {"text":"12345678"} is exactly 19 bytes of compact JSON.
    assert!(
        engine
            .compile_value(
                json!({"steps": [{"id": "s1", "tool": "echo", "arguments": {"text": "12345678"}}]})
            )
            .is_ok()
    );
    let text_args = "{\"text\": \"0123456789abcdef\"}";
    let err = engine
        .compile_value(json!({"steps": [
            {"id": "s1", "tool": "echo", "arguments": {"text": "0123456789abcdef"}},
            {"id": "s2", "tool": "echo", "arguments": text_args}
        ]}))
        .unwrap_err();
    assert_eq!(
        err.problems,
        vec![
            Problem::ArgumentsTooLarge {
                step: "s1".into(),
                size: 27,
                limit: 20
            },
            Problem::ArgumentsTooLarge {
                step: "s2".into(),
                size: text_args.len(),
                limit: 20
            },
        ]
    );
    assert_eq!(
        err.problems[0].to_string(),
        "step 's1': arguments are 27 bytes, more than the limit of 20 bytes"
    );
}

#[test]
fn max_plan_bytes() {
    let text = r#"{"steps": [{"id": "s1", "tool": "echo", "arguments": {"text": "hello"}}]}"#;
    let fits = limited(Limits {
        max_plan_bytes: text.len(),
        ..Limits::default()
    });
    assert!(fits.compile(text).is_ok());
    let too_small = limited(Limits {
        max_plan_bytes: text.len() - 1,
        ..Limits::default()
    });
    let err = too_small.compile(text).unwrap_err();
    assert_eq!(
        err.problems,
        vec![Problem::PlanTooLarge {
            size: text.len(),
            limit: text.len() - 1
        }]
    );
    assert_eq!(
        err.problems[0].to_string(),
        format!(
            "the plan is {} bytes, more than the limit of {} bytes",
            text.len(),
            text.len() - 1
        )
    );
    // The size is checked before parsing: an oversized plan that is not JSON reports only its size.
    let err = too_small.compile(&"x".repeat(text.len())).unwrap_err();
    assert!(matches!(err.problems[..], [Problem::PlanTooLarge { .. }]));
}

#[test]
fn max_id_len() {
    let engine = limited(Limits {
        max_id_len: 4,
        ..Limits::default()
    });
    assert!(
        engine
            .compile_value(
                json!({"steps": [{"id": "abcd", "tool": "echo", "arguments": {"text": "x"}}]})
            )
            .is_ok()
    );
    assert_eq!(
        engine
            .compile_value(
                json!({"steps": [{"id": "abcde", "tool": "echo", "arguments": {"text": "x"}}]})
            )
            .unwrap_err()
            .problems,
        vec![Problem::InvalidId {
            index: 0,
            id: "abcde".into(),
            max_len: 4
        }]
    );
}

#[test]
fn validation_needs_the_registry() {
    let empty = Engine::new(Arc::new(ToolRegistry::new()));
    assert_eq!(
        empty
            .compile_value(
                json!({"steps": [{"id": "s1", "tool": "echo", "arguments": {"text": "x"}}]})
            )
            .unwrap_err()
            .problems,
        vec![Problem::UnknownTool {
            step: "s1".into(),
            tool: "echo".into(),
            suggestion: None
        }]
    );
}

#[test]
fn a_thought_is_accepted_and_kept_out_of_execution() {
    let plan = json!({"thought": "Look up Oslo.", "steps": [
        {"id": "a", "tool": "get_weather", "arguments": {"location": "Oslo"}}]});
    let compiled = engine().compile_value(plan).unwrap();
    assert_eq!(compiled.steps().len(), 1);
    assert!(
        engine()
            .compile_value(json!({"thought": null, "steps": [{"id": "a", "tool": "echo", "arguments": {"text": 1}}]}))
            .is_ok()
    );
    assert_eq!(
        messages(
            json!({"thought": ["no"], "steps": [{"id": "a", "tool": "echo", "arguments": {"text": 1}}]})
        ),
        ["\"thought\" must be text, found an array"]
    );
}
