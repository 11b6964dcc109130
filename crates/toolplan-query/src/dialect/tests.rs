//! The query-plan dialect on its own: parsing, the one-root rule, node errors, and the steps nodes
//! compile into.

use std::sync::Arc;

use super::*;
use toolplan_core::FnTool;

fn tools() -> ToolRegistry {
    let mut r = toolplan_demo::registry();
    // Stands in for the LLM synthesizer: compile checks only need its name registered.
    let synth = FnTool::new(
        "synthesize",
        "test synthesizer",
        json!({"type": "object"}),
        |arguments, _| async move { Ok(arguments) },
    );
    r.register(Arc::new(synth)).expect("registers");
    r
}

fn compile(plan: Value) -> Result<QueryPlan, InvalidPlan> {
    compile_value(plan, &tools(), "synthesize", &Limits::default())
}

fn problems(plan: Value) -> Vec<String> {
    match compile(plan) {
        Ok(_) => panic!("plan should be invalid"),
        Err(e) => e.problems.iter().map(ToString::to_string).collect(),
    }
}

fn leaf(id: u64, tool: &str) -> Value {
    json!({"id": id, "query_str": format!("q{id}"), "tool_name": tool, "dependencies": []})
}

#[test]
fn fan_in_compiles_to_steps_with_the_root_as_output() {
    let qp = compile(json!({"nodes": [
        leaf(1, "get_weather"), leaf(2, "get_weather"),
        {"id": 3, "query_str": "compare", "tool_name": null, "dependencies": [1, 2]}
    ]}))
    .expect("valid");
    assert_eq!(qp.root, "3");
    let plan = &qp.plan;
    assert_eq!(plan.len(), 3);
    assert_eq!(plan.outputs(), &[2]);
    assert_eq!(plan.steps()[0].tool, "get_weather");
    // A leaf passes its query to the tool's only parameter.
    assert_eq!(
        plan.steps()[0].arguments.as_literal(),
        Some(&json!({"location": "q1"}))
    );
    assert_eq!(plan.steps()[2].tool, "synthesize");
    assert_eq!(plan.steps()[2].deps, vec![0, 1]);
    assert_eq!(plan.waves().len(), 2);
}

#[test]
fn a_single_leaf_is_its_own_root() {
    let qp = compile(json!({"nodes": [leaf(7, "echo")]})).expect("valid");
    assert_eq!(qp.root, "7");
    assert_eq!(
        qp.plan.steps()[0].arguments.as_literal(),
        Some(&json!({"text": "q7"}))
    );
}

#[test]
fn llamaindex_error_cases_name_the_node() {
    assert_eq!(
        problems(json!({"nodes": []})),
        ["the plan is empty: it has no steps"]
    );
    let p = problems(json!({"nodes": [
        leaf(1, "get_weather"),
        {"id": 2, "query_str": "x", "dependencies": [1, 9]}
    ]}));
    assert_eq!(p, ["node 2 depends on unknown node 9"]);
    let p = problems(json!({"nodes": [leaf(1, "get_wether")]}));
    assert_eq!(
        p,
        ["node 1 names unknown tool 'get_wether' (did you mean 'get_weather'?)"]
    );
}

#[test]
fn leaves_need_a_tool_and_plans_one_root() {
    let p = problems(json!({"nodes": [{"id": 1, "query_str": "alone"}]}));
    assert_eq!(
        p,
        [
            "node 1 has neither dependencies nor a tool_name: a leaf must name the tool that answers it"
        ]
    );
    let p = problems(json!({"nodes": [leaf(1, "echo"), leaf(2, "echo")]}));
    assert_eq!(
        p,
        [
            "the query plan must have exactly one root (the node no other node depends on); found 2: 1, 2"
        ]
    );
}

#[test]
fn cycles_are_rejected_before_anything_runs() {
    let p = problems(json!({"nodes": [
        {"id": 1, "query_str": "a", "dependencies": [2]},
        {"id": 2, "query_str": "b", "dependencies": [1]}
    ]}));
    assert_eq!(
        p[0],
        "the query plan has no root: every node is a dependency of another node"
    );
    assert!(p[1].contains("Cycle") && p[1].contains("1 -> 2"), "{p:?}");
    // A cycle below a root.
    let p = problems(json!({"nodes": [
        {"id": 1, "query_str": "root", "dependencies": [2]},
        {"id": 2, "query_str": "b", "dependencies": [3]},
        {"id": 3, "query_str": "c", "dependencies": [2]}
    ]}));
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].contains("Cycle"), "{p:?}");
}

#[test]
fn duplicate_ids_and_bad_fields_are_all_reported() {
    let p = problems(json!({"nodes": [
        leaf(1, "echo"), leaf(1, "echo"),
        {"id": 2.5, "query_str": 3, "extra": true}
    ], "more": 1}));
    assert!(
        p.iter().any(|m| m.contains("unknown field \"more\"")),
        "{p:?}"
    );
    assert!(
        p.iter().any(|m| m.contains("Duplicate step ID: '1'")),
        "{p:?}"
    );
    assert!(
        p.iter().any(|m| m.contains("unknown field \"extra\"")),
        "{p:?}"
    );
    assert!(
        p.iter()
            .any(|m| m.contains("\"query_str\" of node #2 must be text")),
        "{p:?}"
    );
}

#[test]
fn a_branch_naming_a_tool_calls_it_after_its_children() {
    let qp = compile(json!({"nodes": [
        leaf(1, "get_weather"),
        {"id": 2, "query_str": "final", "tool_name": "echo", "dependencies": [1]}
    ]}))
    .expect("valid");
    let root = &qp.plan.steps()[1];
    assert_eq!(root.tool, "echo");
    assert_eq!(root.deps, vec![0]);
    assert_eq!(root.arguments.as_literal(), Some(&json!({"text": "final"})));
    // A branch naming an unknown tool synthesizes, as in LlamaIndex.
    let qp = compile(json!({"nodes": [
        leaf(1, "get_weather"),
        {"id": 2, "query_str": "final", "tool_name": "nope", "dependencies": [1]}
    ]}))
    .expect("valid");
    assert_eq!(qp.plan.steps()[1].tool, "synthesize");
}

#[test]
fn references_written_in_questions_stay_text() {
    let qp = compile(json!({"nodes": [
        {"id": "a", "query_str": "$ref:b", "tool_name": "echo"},
        {"id": "b", "query_str": "why $ref:a?", "dependencies": ["a"]}
    ]}))
    .expect("valid");
    let steps = qp.plan.steps();
    assert_eq!(
        steps[0].arguments.as_literal(),
        Some(&json!({"text": "$ref:b"}))
    );
    assert_eq!(steps[1].deps, vec![0]);
}

#[test]
fn tools_with_several_parameters_need_a_query_parameter() {
    assert_eq!(
        query_argument(&json!({"properties": {"a": {}, "query": {}}})),
        Ok("query".into())
    );
    assert_eq!(
        query_argument(&json!({"properties": {"a": {}, "b": {}}, "required": ["b"]})),
        Ok("b".into())
    );
    let p = problems(json!({"nodes": [leaf(1, "compare_data")]}));
    assert!(
        p[0].starts_with("node 1: tool 'compare_data' cannot take a query: it takes several parameters (data_a, data_b)"),
        "{p:?}"
    );
    let p = problems(json!({"nodes": [leaf(1, "synthesize")]}));
    assert!(p[0].contains("unknown tool 'synthesize'"), "{p:?}");
}
