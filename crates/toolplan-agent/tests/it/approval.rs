//! A library callback approves plans (issue 21.2): asked once per plan with the whole plan; a
//! declined plan runs nothing, and the model reads why.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use toolplan_agent::scripted::ScriptedModel;
use toolplan_agent::{Agent, Planning};
use toolplan_core::approval::{Approval, ApprovalGate, Confirm, FnApprover};
use toolplan_core::{FnTool, ToolAnnotations};

use crate::support::tool_messages;

#[tokio::test]
async fn the_callback_sees_the_whole_plan_once_and_a_decline_runs_nothing() {
    let deleted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&deleted);
    let delete = FnTool::new(
        "delete_user",
        "Deletes a user.",
        json!({"type": "object"}),
        move |_, _| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok(json!("deleted")) }
        },
    )
    .with_annotations(ToolAnnotations {
        destructive: Some(true),
        ..Default::default()
    });
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&asked);
    let approver = FnApprover(move |request: toolplan_core::approval::ApprovalRequest| {
        seen.lock().unwrap().push(request.describe());
        async { Approval::Declined("not today".into()) }
    });
    let plan = json!({"steps": [
        {"id": "u", "tool": "get_user", "arguments": {"name": "Bob"}},
        {"id": "d", "tool": "delete_user", "arguments": {"name": "$ref:u.name"}}]});
    let model = Arc::new(ScriptedModel::new([
        ScriptedModel::calls(&[("execute_tool_plan", plan)]),
        ScriptedModel::answer("Bob was not deleted."),
    ]));
    let mut tools = toolplan_demo::tools();
    tools.push(Arc::new(delete));
    let out = Agent::builder("test")
        .model(model)
        .tools(tools)
        .planning(Planning::Offered)
        .approval(ApprovalGate::new(Confirm::Destructive, Arc::new(approver)))
        .build()
        .unwrap()
        .interact("Delete Bob.")
        .await
        .unwrap();
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
    let asked = asked.lock().unwrap();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].contains(r#"! d = delete_user({"name":"$ref:u.name"})"#),
        "{}",
        asked[0]
    );
    let result = &tool_messages(&out.messages)[0].content;
    assert!(
        result.contains("the plan was declined (not today)"),
        "{result}"
    );
    assert_eq!(out.answer, "Bob was not deleted.");
}
