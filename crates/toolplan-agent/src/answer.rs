//! The `answer` step: a plan that ends with the answer itself, so that a plan that succeeds costs
//! one model call instead of two (the plan, then the answer written from its results).
//!
//! With [`AgentBuilder::answer_in_plan`](crate::AgentBuilder::answer_in_plan), plans may call the
//! built-in `answer` tool, whose text refers to results with `$ref:` (the engine inserts them). When
//! every step of such a plan succeeds, the agent returns that text as the answer without asking the
//! model again; when a step fails, the model reads the plan's summary as usual and plans again or
//! answers.

use async_trait::async_trait;
use serde_json::{Value, json};
use toolplan_core::reference::{Piece, REF_PREFIX, Reference, split_pieces};
use toolplan_core::{Tool, ToolContext, ToolError, ToolResult};

/// The name of the built-in answer tool.
pub const ANSWER_TOOL: &str = "answer";

/// What the system prompt adds when plans may end with an `answer` step.
pub const ANSWER_IN_PLAN_INSTRUCTIONS: &str = "\
A plan may end with an answer step, as in the example: its text goes to the user as it is.";

/// The worked example of the planner's description when plans may end with an `answer` step: the
/// chain of the default example, then the answer written with the result inserted.
pub const ANSWER_EXAMPLE: &str = "\nExample, for the price in euros of the product of order A7: \
{\"thought\": \"get_order gives the sku of order A7, get_product gives the price of that sku, calculator \
converts the price, answer tells the user.\", \
\"steps\": [{\"id\": \"o\", \"tool\": \"get_order\", \"arguments\": {\"order_id\": \"A7\"}}, \
{\"id\": \"p\", \"tool\": \"get_product\", \"arguments\": {\"sku\": \"$ref:o.sku\"}}, \
{\"id\": \"e\", \"tool\": \"calculator\", \"arguments\": {\"expression\": \"$ref:p.price * 0.92\"}}, \
{\"id\": \"a\", \"tool\": \"answer\", \"arguments\": {\"text\": \"The product of order A7 costs $ref:e euros.\"}}], \
\"output_steps\": [\"a\"]}. A field can only be referenced from a step whose tool returns it: \
plan a step for every lookup the answer needs. End with an answer step when the answer is the \
results put into words; leave it out when the answer needs a judgement on them (yes or no, which \
one is larger): you then answer when the results come back.";

/// The `answer` tool: returns its text (with the results its `$ref:`s name inserted). A reference
/// that found no value (a missing field, a null result) fails the step instead of putting "null" in
/// front of the user: [`prepare_answers`] lists the text's references as whole values beside it.
pub struct AnswerTool;

#[async_trait]
impl Tool for AnswerTool {
    fn name(&self) -> &str {
        ANSWER_TOOL
    }

    fn description(&self) -> &str {
        "The final answer to the user, written with $ref:<step>.<field> where results go; returned to the user as it is when the plan succeeds."
    }

    fn parameters(&self) -> Value {
        // Only `text` is the model's; `values` and `names` are added by `prepare_answers`.
        json!({"type": "object",
               "properties": {"text": {"type": "string", "description": "The answer, with $ref:<step>.<field> where results go."}},
               "required": ["text"]})
    }

    async fn call(&self, arguments: Value, _ctx: ToolContext) -> ToolResult {
        let values = arguments.get("values").and_then(Value::as_array);
        let names = arguments.get("names").and_then(Value::as_array);
        if let (Some(values), Some(names)) = (values, names) {
            let empty: Vec<&str> = values
                .iter()
                .zip(names)
                .filter(|(v, _)| v.is_null())
                .filter_map(|(_, n)| n.as_str())
                .collect();
            if !empty.is_empty() {
                return Err(ToolError::failed(format!(
                    "the answer refers to {} with no value (no such field in that step's result): \
                     refer to a field the step returns",
                    empty
                        .iter()
                        .map(|n| format!("$ref:{n}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        Ok(match arguments.get("text") {
            Some(Value::String(s)) => Value::String(s.clone()),
            Some(other) => Value::String(other.to_string()),
            None => Value::String(String::new()),
        })
    }
}

/// A plan's arguments made ready for its `answer` steps: each one's references are listed beside its
/// text, as whole values (`values`) and by name (`names`), so that the tool can tell a reference
/// that found nothing; and the steps are added to `output_steps` (when the plan lists output steps
/// and leaves them out), so that their text is kept.
pub fn prepare_answers(mut plan: Value) -> Value {
    let mut answers = Vec::new();
    if let Some(steps) = plan.get_mut("steps").and_then(Value::as_array_mut) {
        for step in steps {
            if step.get("tool").and_then(Value::as_str) != Some(ANSWER_TOOL) {
                continue;
            }
            if let Some(id) = step.get("id") {
                answers.push(id.clone());
            }
            let Some(arguments) = step.get_mut("arguments").and_then(Value::as_object_mut) else {
                continue;
            };
            let refs: Vec<Reference> = arguments
                .get("text")
                .and_then(Value::as_str)
                .and_then(split_pieces)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|p| match p {
                    Piece::Ref(r) => Some(r),
                    Piece::Text(_) => None,
                })
                .collect();
            if refs.is_empty() {
                continue;
            }
            let names = refs
                .iter()
                .map(|r| Value::String(r.to_string().trim_start_matches(REF_PREFIX).to_owned()))
                .collect();
            let values = refs.iter().map(|r| Value::String(r.to_string())).collect();
            arguments.insert("names".into(), Value::Array(names));
            arguments.insert("values".into(), Value::Array(values));
        }
    }
    if let Some(Value::Array(outputs)) = plan.get_mut("output_steps") {
        for id in answers {
            if !outputs.contains(&id) {
                outputs.push(id);
            }
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_steps_list_their_references_and_become_output_steps() {
        let plan = json!({"steps": [
            {"id": "w", "tool": "get_weather", "arguments": {"location": "Oslo"}},
            {"id": "a", "tool": "answer", "arguments": {"text": "$ref:w.temp °C in $ref:w.city"}}],
            "output_steps": ["w"]});
        let plan = prepare_answers(plan);
        assert_eq!(plan["output_steps"], json!(["w", "a"]));
        assert_eq!(
            plan["steps"][1]["arguments"],
            json!({"text": "$ref:w.temp °C in $ref:w.city",
                   "values": ["$ref:w.temp", "$ref:w.city"], "names": ["w.temp", "w.city"]})
        );
        // No output_steps: every step's result is kept already; no references: nothing to list.
        let plan = json!({"steps": [{"id": "a", "tool": "answer", "arguments": {"text": "x"}}]});
        assert_eq!(prepare_answers(plan.clone()), plan);
        // Not a plan: left alone (validation says what is wrong).
        assert_eq!(prepare_answers(json!("text")), json!("text"));
    }

    #[tokio::test]
    async fn the_tool_returns_its_text() {
        let ctx = ToolContext {
            step_id: std::sync::Arc::from("a"),
            cancel: tokio_util::sync::CancellationToken::new(),
        };
        let out = AnswerTool
            .call(
                json!({"text": "It is 3 °C", "values": [3], "names": ["w.temp"]}),
                ctx.clone(),
            )
            .await;
        assert_eq!(out.ok(), Some(json!("It is 3 °C")));
        // A reference that found nothing fails the step, naming it.
        let out = AnswerTool
            .call(
                json!({"text": "It is null °F", "values": [null, 3], "names": ["c.f", "w.temp"]}),
                ctx,
            )
            .await;
        let error = out.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("$ref:c.f with no value"), "{error}");
    }
}
