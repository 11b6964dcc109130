//! The answer turn after a plan whose steps all succeeded, asked compactly: the question, the
//! plan's steps and its results, without the tool definitions and planning instructions every other
//! turn re-sends, when [`AgentBuilder::compact_answer`](crate::AgentBuilder::compact_answer) says so
//! (off by default).
//!
//! A plan that ran without a failure holds what the model decided the question needs, so the turn
//! after it is a synthesis: LLMCompiler's joiner and LlamaIndex's response synthesizer are asked the
//! same way. The tools are not offered, but one: [`MORE_TOOLS`], which the model calls when the
//! results do not answer the question (its plan stopped short, or a result calls for another
//! lookup). The agent then goes back to the whole conversation, tools offered, with what the
//! model said it still needs, and asks the interaction's later answer turns that way too.
//!
//! The plan and its results are written into one user message, not replayed as a tool call and
//! its result: every provider takes that, also those that refuse a tool call in the history of a
//! request that does not offer the tool.

use serde_json::{Value, json};
use toolplan_core::EXECUTE_TOOL_PLAN;
use toolplan_llm::{ChatRequest, Message, ToolCall, ToolChoice, ToolDefinition};
use toolplan_planner::ANSWER_FIELD;

/// The one tool the compact answer turn offers: called when the plan's results do not answer the
/// question.
pub const MORE_TOOLS: &str = "call_more_tools";

/// The system message of the compact answer turn, after the caller's own instructions.
pub const COMPACT_SYSTEM: &str = "You answer the user's question from the results of the tool \
calls made for it. Use the results as they are: the values they hold, not guesses. If the results \
do not hold what the question needs (a lookup is missing, or a result calls for another one), call \
call_more_tools with what is missing instead of answering.";

/// What the user message of the compact answer turn ends with.
const ANSWER_NOW: &str = "Answer the question from these results.";

/// What the model reads after the results when it asked for more tool calls, before the turn that
/// must make them (the whole conversation, tools offered).
pub fn more_tools_note(need: &str) -> String {
    let need = need.trim();
    if need.is_empty() {
        "The results above do not answer the question yet: make the tool calls that are missing."
            .to_owned()
    } else {
        format!(
            "The results above do not answer the question yet; still needed: {need}. Make the \
             tool calls that are missing."
        )
    }
}

/// The definition of [`MORE_TOOLS`].
fn more_tools_definition() -> ToolDefinition {
    ToolDefinition::new(
        MORE_TOOLS,
        "Call this instead of answering when the tool results do not hold what the question \
         needs; say what is missing.",
        json!({
            "type": "object",
            "properties": {
                "need": {"type": "string", "description": "what is still missing"}
            },
            "required": ["need"],
            "additionalProperties": false
        }),
    )
}

/// A plan's steps as the compact turn shows them, one line each: `- ID: TOOL {arguments}`.
/// Arguments that are not an object with a `steps` array show nothing.
fn plan_lines(plan: &Value, out: &mut String) {
    let Some(steps) = plan.get("steps").and_then(Value::as_array) else {
        return;
    };
    for step in steps {
        let id = step.get("id").and_then(Value::as_str).unwrap_or("?");
        let tool = step.get("tool").and_then(Value::as_str).unwrap_or("?");
        let arguments = step.get("arguments").cloned().unwrap_or(Value::Null);
        out.push_str(&format!("\n- {id}: {tool} {arguments}"));
    }
}

/// The request of the compact answer turn: `instructions` (the caller's own, may be empty), then
/// [`COMPACT_SYSTEM`]; one user message with `input`, the plans of `calls` (their `answer` field
/// left out) and `results` (one tool-result message per call); only [`MORE_TOOLS`] offered. `None`
/// when `calls` are not all plans or do not match `results` one to one.
pub fn compact_request(
    instructions: &str,
    input: &str,
    calls: &[ToolCall],
    results: &[Message],
    think_first: bool,
) -> Option<ChatRequest> {
    if calls.is_empty()
        || calls.len() != results.len()
        || calls.iter().any(|c| c.name != EXECUTE_TOOL_PLAN)
    {
        return None;
    }
    let mut text = format!(
        "{input}\n\nTool calls made for this question, as a plan (a \"$ref:ID.path\" argument is a \
         value taken from the result of step ID):"
    );
    for (call, result) in calls.iter().zip(results) {
        let mut plan = call.arguments.clone();
        if let Some(object) = plan.as_object_mut() {
            object.remove(ANSWER_FIELD);
        }
        plan_lines(&plan, &mut text);
        text.push_str("\n\n");
        text.push_str(result.content.trim());
    }
    text.push_str("\n\n");
    text.push_str(ANSWER_NOW);
    let mut system = instructions.trim().to_owned();
    if !system.is_empty() {
        system.push_str("\n\n");
    }
    system.push_str(COMPACT_SYSTEM);
    Some(ChatRequest {
        messages: vec![Message::system(system), Message::user(text)],
        tools: vec![more_tools_definition()],
        tool_choice: ToolChoice::Auto,
        parallel_tool_calls: Some(false),
        think_first,
        ..ChatRequest::default()
    })
}

/// What a compact answer turn's reply asks for, when it called [`MORE_TOOLS`] (or any tool: only
/// that one is offered): what is still needed, as the model wrote it. `None` for an answer.
pub fn asked_for_more(reply: &Message) -> Option<String> {
    let call = reply.tool_calls.first()?;
    let need = call
        .arguments
        .get("need")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some(need.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolplan_llm::Role;

    fn plan_call() -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: EXECUTE_TOOL_PLAN.into(),
            arguments: json!({
                "steps": [
                    {"id": "u", "tool": "get_user", "arguments": {"name": "Alice"}},
                    {"id": "w", "tool": "get_weather", "arguments": {"city": "$ref:u.city"}}
                ],
                "output_steps": ["w"],
                "answer": null
            }),
        }
    }

    #[test]
    fn the_request_holds_the_question_the_steps_and_the_results_and_one_tool() {
        let call = plan_call();
        let result = Message::tool_result(
            &call,
            "Plan executed successfully (2 steps).\nResults:\n- w: {\"condition\": \"sunny\"}",
            false,
        );
        let request = compact_request(
            "Answer in French.",
            "What is the weather where Alice lives?",
            std::slice::from_ref(&call),
            std::slice::from_ref(&result),
            true,
        )
        .expect("a plan turn");
        assert_eq!(request.messages.len(), 2);
        assert_eq!(request.messages[0].role, Role::System);
        assert_eq!(
            request.messages[0].content,
            format!("Answer in French.\n\n{COMPACT_SYSTEM}")
        );
        let user = &request.messages[1].content;
        assert!(user.starts_with("What is the weather where Alice lives?"));
        assert!(user.contains("\n- u: get_user {\"name\":\"Alice\"}"));
        assert!(user.contains("\n- w: get_weather {\"city\":\"$ref:u.city\"}"));
        assert!(user.contains("- w: {\"condition\": \"sunny\"}"));
        assert!(
            !user.contains("answer\""),
            "the answer field is left out: {user}"
        );
        assert!(user.ends_with(ANSWER_NOW));
        let names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, [MORE_TOOLS]);
        assert!(request.think_first);
    }

    #[test]
    fn only_turns_of_plans_are_asked_compactly() {
        let direct = ToolCall {
            id: "c2".into(),
            name: "get_user".into(),
            arguments: json!({"name": "Alice"}),
        };
        let result = Message::tool_result(&direct, "{}", false);
        assert!(
            compact_request("", "q", &[direct], std::slice::from_ref(&result), false).is_none()
        );
        assert!(compact_request("", "q", &[plan_call()], &[], false).is_none());
        assert!(compact_request("", "q", &[], &[], false).is_none());
    }

    #[test]
    fn a_call_of_the_one_tool_is_a_request_for_more() {
        let mut reply = Message::assistant("", Vec::new());
        assert_eq!(asked_for_more(&reply), None);
        reply.tool_calls.push(ToolCall {
            id: "m".into(),
            name: MORE_TOOLS.into(),
            arguments: json!({"need": "Dave's weather"}),
        });
        assert_eq!(asked_for_more(&reply).as_deref(), Some("Dave's weather"));
        assert!(more_tools_note("Dave's weather").contains("still needed: Dave's weather."));
        assert!(!more_tools_note(" ").contains("still needed"));
    }
}
