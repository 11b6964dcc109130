//! The replies a local model may give: the JSON Schema they must match (turned into a llama.cpp
//! grammar for constrained decoding), and parsing a reply back into text or tool calls.
//!
//! When tools are offered the model answers with exactly one JSON object:
//!
//! * `{"answer": "<text>"}` — its final answer, or
//! * `{"tool_calls": [{"name": "<tool>", "arguments": {…}}, …]}` — calls of registered tools, each
//!   with arguments that match that tool's parameters schema (`anyOf` over the tools, the name a
//!   `const`), so every call the grammar lets through names a registered tool.
//!
//! With [`ToolChoice::Required`] only the second form is allowed; with [`ToolChoice::None`] and
//! tools offered, only the first (the model has been calling tools and must now answer); with no
//! tools the reply is free text.
//!
//! The schema of each mode is built in the submodule `schema` (its items are re-exported here);
//! this module says which mode a request asks for and parses what the model replied.

mod repeats;
mod salvage;
mod schema;

use serde_json::{Map, Value};

pub use self::repeats::{drop_repeats, repeats_in};
pub use self::salvage::salvage;
pub use self::schema::{THOUGHT_MAX_CHARS, any_object_schema, limit_to_one_call, reply_schema};
use crate::message::{ChatRequest, ToolCall, ToolChoice, ToolDefinition};

/// The arrays of a reply whose complete elements are kept when it is cut off ([`salvage`]): the
/// tool calls, and the steps of a plan.
pub const SALVAGED_ARRAYS: &[&str] = &["/tool_calls", "/tool_calls/*/arguments/steps"];

/// How the model must reply to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyMode {
    /// Free text: no tools offered.
    Text,
    /// Only `{"answer": …}`: tools offered but switched off with [`ToolChoice::None`] (a chat whose
    /// earlier replies were tool calls in JSON goes on in JSON; free text would imitate them).
    AnswerOnly,
    /// `{"answer": …}` or `{"tool_calls": […]}`.
    AnswerOrTools,
    /// Only `{"tool_calls": […]}` ([`ToolChoice::Required`]).
    ToolsOnly,
}

impl ReplyMode {
    /// The mode a request asks for, or why it cannot be served (tools required but none offered).
    pub fn of(request: &ChatRequest) -> Result<ReplyMode, String> {
        let no_tools = request.tools.iter().all(|t| t.listed_only);
        match (&request.tool_choice, no_tools) {
            (ToolChoice::Required, true) => {
                Err("tool_choice is `required` but the request offers no tools".to_owned())
            }
            (ToolChoice::None | ToolChoice::Auto, true) => Ok(ReplyMode::Text),
            (ToolChoice::None, false) => Ok(ReplyMode::AnswerOnly),
            (ToolChoice::Auto, false) => Ok(ReplyMode::AnswerOrTools),
            (ToolChoice::Required, false) => Ok(ReplyMode::ToolsOnly),
        }
    }

    /// Whether replies in this mode are constrained JSON.
    pub fn is_constrained(self) -> bool {
        self != ReplyMode::Text
    }
}

/// What the model replied, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A text answer.
    Answer(String),
    /// Calls of offered tools (at least one), and the thought that led to them (empty when the
    /// reply had none).
    ToolCalls {
        /// The calls, in the order the model wrote them.
        calls: Vec<ToolCall>,
        /// The reply's `thought` ([`ChatRequest::think_first`]).
        thought: String,
    },
}

/// Parses a reply given in `mode`. `next_id` gives each tool call its id (`call_0`, …).
///
/// Free text is taken as it is (trimmed). Constrained replies must be the JSON forms above and may
/// only name offered tools; the error says what is wrong otherwise.
pub fn parse_reply(
    text: &str,
    mode: ReplyMode,
    tools: &[ToolDefinition],
    mut next_id: impl FnMut() -> String,
) -> Result<Reply, String> {
    let text = text.trim();
    if !mode.is_constrained() {
        return Ok(Reply::Answer(text.to_owned()));
    }
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("the reply is not JSON ({e}): {text}"))?;
    let Value::Object(mut object) = value else {
        return Err(format!("the reply is not a JSON object: {text}"));
    };
    if let Some(answer) = object.remove("answer") {
        if mode == ReplyMode::ToolsOnly {
            return Err("the reply answers although a tool call is required".to_owned());
        }
        return match answer {
            Value::String(s) => Ok(Reply::Answer(s)),
            other => Err(format!("`answer` is not a string: {other}")),
        };
    }
    if mode == ReplyMode::AnswerOnly {
        return Err(format!(
            "the reply calls tools although tools are switched off: {text}"
        ));
    }
    let Some(Value::Array(calls)) = object.remove("tool_calls") else {
        return Err(format!(
            "the reply has neither `answer` nor a `tool_calls` array: {text}"
        ));
    };
    if calls.is_empty() {
        return Err("`tool_calls` is empty".to_owned());
    }
    let mut out = Vec::with_capacity(calls.len());
    for (i, call) in calls.into_iter().enumerate() {
        let Value::Object(mut call) = call else {
            return Err(format!("tool call {i} is not an object"));
        };
        let name = match call.remove("name") {
            Some(Value::String(name)) => name,
            _ => return Err(format!("tool call {i} has no `name` string")),
        };
        if !tools.iter().any(|t| t.name == name) {
            return Err(format!(
                "tool call {i} names `{name}`, which is not an offered tool"
            ));
        }
        let arguments = match call.remove("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            // A model that writes the arguments as a JSON string (as OpenAI does) gets them parsed.
            Some(Value::String(s)) => crate::message::parse_arguments(&s),
            Some(v) => v,
        };
        out.push(ToolCall {
            id: next_id(),
            name,
            arguments,
        });
    }
    let thought = match object.remove("thought") {
        Some(Value::String(thought)) => thought,
        _ => String::new(),
    };
    Ok(Reply::ToolCalls {
        calls: out,
        thought,
    })
}
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(super) fn tool(name: &str, parameters: Value) -> ToolDefinition {
        ToolDefinition {
            name: name.to_owned(),
            description: format!("the {name} tool"),
            parameters,
            ..Default::default()
        }
    }

    pub(super) fn weather_and_calculator() -> Vec<ToolDefinition> {
        vec![
            tool(
                "get_weather",
                json!({"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}),
            ),
            tool(
                "calculator",
                json!({"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}),
            ),
        ]
    }

    fn request(tools: Vec<ToolDefinition>, tool_choice: ToolChoice) -> ChatRequest {
        ChatRequest {
            tools,
            tool_choice,
            ..ChatRequest::default()
        }
    }

    fn ids() -> impl FnMut() -> String {
        let mut n = 0;
        move || {
            n += 1;
            format!("call_{}", n - 1)
        }
    }

    pub(super) fn valid(schema: &Value, instance: &Value) -> bool {
        jsonschema::validator_for(schema)
            .expect("the reply schema is a valid JSON Schema")
            .is_valid(instance)
    }

    #[test]
    fn modes_follow_tools_and_tool_choice() {
        let tools = weather_and_calculator();
        assert_eq!(
            ReplyMode::of(&request(vec![], ToolChoice::Auto)),
            Ok(ReplyMode::Text)
        );
        assert_eq!(
            ReplyMode::of(&request(vec![], ToolChoice::None)),
            Ok(ReplyMode::Text)
        );
        assert_eq!(
            ReplyMode::of(&request(tools.clone(), ToolChoice::None)),
            Ok(ReplyMode::AnswerOnly)
        );
        assert_eq!(
            ReplyMode::of(&request(tools.clone(), ToolChoice::Auto)),
            Ok(ReplyMode::AnswerOrTools)
        );
        assert_eq!(
            ReplyMode::of(&request(tools, ToolChoice::Required)),
            Ok(ReplyMode::ToolsOnly)
        );
        assert!(ReplyMode::of(&request(vec![], ToolChoice::Required)).is_err());
    }

    #[test]
    fn tools_switched_off_allow_only_an_answer() {
        let tools = weather_and_calculator();
        for think in [false, true] {
            let schema =
                reply_schema(&tools, ReplyMode::AnswerOnly, &[], think).expect("constrained");
            let call =
                json!({"tool_calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]});
            assert!(!valid(&schema, &call));
            let answer = if think {
                json!({"thought": "I have both.", "answer": "42"})
            } else {
                json!({"answer": "42"})
            };
            assert!(valid(&schema, &answer), "{answer}");
        }
        let parsed = parse_reply(r#"{"answer": "42"}"#, ReplyMode::AnswerOnly, &tools, ids());
        assert_eq!(parsed, Ok(Reply::Answer("42".into())));
        let call =
            r#"{"tool_calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]}"#;
        let err = parse_reply(call, ReplyMode::AnswerOnly, &tools, ids()).unwrap_err();
        assert!(err.contains("switched off"), "{err}");
    }

    #[test]
    fn parses_answers_and_tool_calls() {
        let tools = weather_and_calculator();
        assert_eq!(
            parse_reply(
                " {\"answer\": \"Hi\"} ",
                ReplyMode::AnswerOrTools,
                &tools,
                ids()
            ),
            Ok(Reply::Answer("Hi".into()))
        );
        let reply = r#"{"tool_calls": [{"name": "get_weather", "arguments": {"location": "Tokyo"}},
                        {"name": "calculator", "arguments": "{\"expression\": \"1+1\"}"}]}"#;
        let Ok(Reply::ToolCalls { calls, thought }) =
            parse_reply(reply, ReplyMode::AnswerOrTools, &tools, ids())
        else {
            panic!("expected tool calls");
        };
        assert_eq!(thought, "");
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("call_0", "get_weather")
        );
        assert_eq!(calls[0].arguments, json!({"location": "Tokyo"}));
        assert_eq!(
            (calls[1].id.as_str(), calls[1].name.as_str()),
            ("call_1", "calculator")
        );
        assert_eq!(calls[1].arguments, json!({"expression": "1+1"}));
    }

    #[test]
    fn thinking_puts_a_bounded_thought_before_every_form() {
        let tools = weather_and_calculator();
        let schema =
            reply_schema(&tools, ReplyMode::AnswerOrTools, &[], true).expect("constrained");
        let call = json!([{"name": "get_weather", "arguments": {"location": "Tokyo"}}]);
        assert!(valid(
            &schema,
            &json!({"thought": "I need the weather.", "tool_calls": call})
        ));
        assert!(valid(
            &schema,
            &json!({"thought": "I have it.", "answer": "18 °C"})
        ));
        // The thought is required, and bounded.
        assert!(!valid(&schema, &json!({"answer": "18 °C"})));
        assert!(!valid(&schema, &json!({"tool_calls": call})));
        let long = "x".repeat(THOUGHT_MAX_CHARS as usize + 1);
        assert!(!valid(
            &schema,
            &json!({"thought": long, "answer": "18 °C"})
        ));
        // It comes first, so that the model thinks before it chooses.
        let first = schema["anyOf"][1]["properties"]
            .as_object()
            .and_then(|p| p.keys().next().cloned());
        assert_eq!(first.as_deref(), Some("thought"));
        let required = reply_schema(&tools, ReplyMode::ToolsOnly, &[], true).expect("constrained");
        assert!(!valid(
            &required,
            &json!({"thought": "done", "answer": "18 °C"})
        ));
        assert!(valid(
            &required,
            &json!({"thought": "I need it.", "tool_calls": call})
        ));

        let reply = r#"{"thought": "Alice's city first.", "tool_calls": [{"name": "get_weather", "arguments": {"location": "Tokyo"}}]}"#;
        let Ok(Reply::ToolCalls { calls, thought }) =
            parse_reply(reply, ReplyMode::AnswerOrTools, &tools, ids())
        else {
            panic!("expected tool calls");
        };
        assert_eq!((calls.len(), thought.as_str()), (1, "Alice's city first."));
        assert_eq!(
            parse_reply(
                r#"{"thought": "I have it.", "answer": "18 °C"}"#,
                ReplyMode::AnswerOrTools,
                &tools,
                ids()
            ),
            Ok(Reply::Answer("18 °C".into()))
        );
    }

    #[test]
    fn free_text_is_kept_as_it_is() {
        assert_eq!(
            parse_reply("  Paris.\n", ReplyMode::Text, &[], ids()),
            Ok(Reply::Answer("Paris.".into()))
        );
        assert_eq!(
            parse_reply("{\"answer\": 1}", ReplyMode::Text, &[], ids()),
            Ok(Reply::Answer("{\"answer\": 1}".into()))
        );
    }

    #[test]
    fn rejects_bad_replies_with_a_reason() {
        let tools = weather_and_calculator();
        for (bad, why) in [
            (
                "{\"tool_calls\": [{\"name\": \"rm\", \"arguments\": {}}]}",
                "not an offered tool",
            ),
            ("{\"tool_calls\": []}", "empty"),
            ("{\"answer\": 1}", "not a string"),
            ("{\"tool_calls\": [{\"arguments\": {}}]}", "no `name`"),
            ("{\"other\": 1}", "neither"),
            ("[1]", "not a JSON object"),
            ("{\"answer\": \"cut", "not JSON"),
        ] {
            let err = parse_reply(bad, ReplyMode::AnswerOrTools, &tools, ids()).expect_err(bad);
            assert!(err.contains(why), "{bad}: {err}");
        }
        let err = parse_reply("{\"answer\": \"no\"}", ReplyMode::ToolsOnly, &tools, ids())
            .expect_err("required");
        assert!(err.contains("required"), "{err}");
    }
}
