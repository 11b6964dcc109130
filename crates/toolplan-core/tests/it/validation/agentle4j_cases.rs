//! agentle4j's validation cases: empty plans, wrong types, duplicate ids, unknown and recursive tools, invalid ids, cycles.

use super::*;

// ---- agentle4j's validation cases ----

#[test]
fn empty_plan() {
    assert_eq!(problems(json!({"steps": []})), vec![Problem::EmptyPlan]);
    assert_eq!(
        messages(json!({"steps": []})),
        ["the plan is empty: it has no steps"]
    );
}

#[test]
fn steps_null_or_missing() {
    let missing = vec![Problem::MissingField {
        what: "the plan".into(),
        field: "steps",
    }];
    assert_eq!(problems(json!({"steps": null})), missing);
    assert_eq!(problems(json!({})), missing);
    assert_eq!(problems(json!({"output_steps": []})), missing);
    assert_eq!(messages(json!({})), ["the plan has no \"steps\""]);
}

#[test]
fn steps_of_the_wrong_type() {
    assert_eq!(
        messages(json!({"steps": {"id": "a"}})),
        ["\"steps\" must be an array, found an object"]
    );
    assert_eq!(
        messages(json!(["not", "an", "object"])),
        ["the plan must be a JSON object with a \"steps\" array, found an array"]
    );
    assert_eq!(
        messages(json!({"steps": ["echo"]})),
        ["step #0 must be an object with \"id\", \"tool\" and \"arguments\", found a string"]
    );
}

#[test]
fn plan_text_that_is_not_json() {
    let p = text_problems("{\"steps\": [");
    assert_eq!(p.len(), 1);
    let Problem::NotJson(detail) = &p[0] else {
        panic!("expected NotJson, got {p:?}");
    };
    assert!(detail.contains("line 1"), "{detail}");
    assert!(
        p[0].to_string().starts_with("the plan is not valid JSON: "),
        "{}",
        p[0]
    );
}

#[test]
fn duplicate_id() {
    let plan = json!({"steps": [
        {"id": "s1", "tool": "echo", "arguments": {"text": "a"}},
        {"id": "s1", "tool": "echo", "arguments": {"text": "b"}}
    ]});
    assert_eq!(
        problems(plan.clone()),
        vec![Problem::DuplicateId {
            id: "s1".into(),
            first: 0,
            second: 1
        }]
    );
    assert_eq!(
        messages(plan),
        ["Duplicate step ID: 's1' (steps #0 and #1)"]
    );
}

#[test]
fn unknown_tool() {
    let plan = json!({"steps": [{"id": "s1", "tool": "x", "arguments": {}}]});
    assert_eq!(
        problems(plan.clone()),
        vec![Problem::UnknownTool {
            step: "s1".into(),
            tool: "x".into(),
            suggestion: None
        }]
    );
    assert_eq!(messages(plan), ["Unknown tool 'x' in step 's1'"]);
}

#[test]
fn unknown_tool_with_a_close_name_gets_a_suggestion() {
    assert_eq!(
        messages(
            json!({"steps": [{"id": "s1", "tool": "get_wether", "arguments": {"location": "Oslo"}}]})
        ),
        ["Unknown tool 'get_wether' in step 's1' (did you mean 'get_weather'?)"]
    );
}

#[test]
fn recursive_execute_tool_plan() {
    let plan = json!({"steps": [
        {"id": "s1", "tool": "execute_tool_plan", "arguments": {"steps": []}}
    ]});
    assert_eq!(
        problems(plan.clone()),
        vec![Problem::RecursivePlan { step: "s1".into() }]
    );
    assert_eq!(
        messages(plan),
        ["step 's1' calls execute_tool_plan: recursive plans are not allowed"]
    );
}

#[test]
fn blank_tool() {
    assert_eq!(
        problems(json!({"steps": [{"id": "s1", "tool": "  ", "arguments": {}}]})),
        vec![Problem::BlankTool { step: "s1".into() }]
    );
}

#[test]
fn missing_tool_and_id() {
    assert_eq!(
        messages(json!({"steps": [
            {"id": "s1", "arguments": {}},
            {"tool": "echo", "arguments": {"text": "x"}}
        ]})),
        ["step 's1' has no \"tool\"", "step #1 has no \"id\""]
    );
}

#[test]
fn invalid_ids() {
    let p = problems(json!({"steps": [
        {"id": "", "tool": "echo", "arguments": {"text": "x"}},
        {"id": "has space", "tool": "echo", "arguments": {"text": "x"}},
        {"id": "dot.ted", "tool": "echo", "arguments": {"text": "x"}},
        {"id": 7, "tool": "echo", "arguments": {"text": "x"}}
    ]}));
    assert_eq!(
        p,
        vec![
            Problem::InvalidId {
                index: 0,
                id: "".into(),
                max_len: 128
            },
            Problem::InvalidId {
                index: 1,
                id: "has space".into(),
                max_len: 128
            },
            Problem::InvalidId {
                index: 2,
                id: "dot.ted".into(),
                max_len: 128
            },
            Problem::WrongType {
                what: "step #3 field \"id\"".into(),
                expected: "a string",
                found: "a number"
            },
        ]
    );
    assert_eq!(
        p[1].to_string(),
        "step #1: id \"has space\" is not valid: ids are 1 to 128 characters of A-Z, a-z, 0-9, '_' and '-'"
    );
}

#[test]
fn cycle_of_two() {
    let plan = json!({"steps": [
        {"id": "a", "tool": "echo", "arguments": {"text": "$ref:b"}},
        {"id": "b", "tool": "echo", "arguments": {"text": "$ref:a"}}
    ]});
    assert_eq!(
        problems(plan.clone()),
        vec![Problem::Cycle {
            cycle: vec!["a".into(), "b".into(), "a".into()]
        }]
    );
    assert_eq!(
        messages(plan),
        ["Cycle detected in tool plan dependencies: a -> b -> a"]
    );
}

#[test]
fn self_reference() {
    let plan = json!({"steps": [
        {"id": "a", "tool": "echo", "arguments": {"text": "me: $ref:a.x"}}
    ]});
    assert_eq!(
        messages(plan),
        ["Cycle detected in tool plan dependencies: a -> a"]
    );
}

#[test]
fn longer_cycle_behind_a_valid_prefix_and_two_separate_cycles() {
    let plan = json!({"steps": [
        {"id": "root", "tool": "echo", "arguments": {"text": "r"}},
        {"id": "x", "tool": "echo", "arguments": {"text": "$ref:root $ref:z"}},
        {"id": "y", "tool": "echo", "arguments": {"text": "$ref:x"}},
        {"id": "z", "tool": "echo", "arguments": {"text": "$ref:y"}},
        {"id": "p", "tool": "echo", "arguments": {"text": "$ref:p"}},
        {"id": "after", "tool": "echo", "arguments": {"text": "$ref:z"}}
    ]});
    assert_eq!(
        messages(plan),
        [
            "Cycle detected in tool plan dependencies: x -> z -> y -> x",
            "Cycle detected in tool plan dependencies: p -> p"
        ]
    );
}

#[test]
fn cycle_through_depends_on() {
    assert_eq!(
        messages(json!({"steps": [
            {"id": "a", "tool": "echo", "arguments": {"text": "1"}, "depends_on": ["b"]},
            {"id": "b", "tool": "echo", "arguments": {"text": "$ref:a"}}
        ]})),
        ["Cycle detected in tool plan dependencies: a -> b -> a"]
    );
}
