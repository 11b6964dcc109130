//! Turns a [`ChatRequest`] into the turns of a chat (role and text), ready for the model's chat
//! template: the tools and the reply format go into the system message; tool results come back as a
//! user turn of `<tool_response>` blocks (as Qwen2.5's own template does); earlier assistant tool
//! calls are written in the same JSON form the model is asked to reply in. `apply_template` then
//! writes the turns in the model's own chat template.

use std::io;

use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use serde::Serialize;
use serde_json::{Value, json};

use super::reply::ReplyMode;
use crate::error::LlmError;
use crate::message::{ChatRequest, Message, ReplyStart, Role, ToolCall};

/// The system message used when a request has none.
pub const DEFAULT_SYSTEM: &str = "You are a helpful assistant.";

/// One turn of the chat, as the chat template takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// `system`, `user` or `assistant`.
    pub role: &'static str,
    /// The text.
    pub content: String,
}

impl Turn {
    fn new(role: &'static str, content: impl Into<String>) -> Self {
        // The chat template takes C strings: a NUL byte would end the text early.
        let content: String = content.into();
        let content = if content.contains('\0') {
            content.replace('\0', "")
        } else {
            content
        };
        Self { role, content }
    }
}

/// JSON with `", "` and `": "` between items, the way Python's `json.dumps` writes it: the form
/// the Qwen models saw in training, and the form they write themselves.
struct SpacedFormatter;

impl serde_json::ser::Formatter for SpacedFormatter {
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b": ")
    }
}

/// Writes a value as spaced JSON (`SpacedFormatter`).
pub fn spaced_json(value: &impl Serialize) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, SpacedFormatter);
    if value.serialize(&mut ser).is_err() {
        // Serializing a `serde_json::Value` or plain data cannot fail; keep compact JSON regardless.
        return serde_json::to_string(value).unwrap_or_default();
    }
    String::from_utf8(out).unwrap_or_default()
}

/// The system-message section that lists the tools and says how to reply.
fn tools_section(request: &ChatRequest, mode: ReplyMode) -> String {
    let mut s = String::from(
        "# Tools\n\nYou can call the tools below. Each line inside <tools></tools> is one tool: its name, what it \
         does, and the JSON Schema of its arguments (\"parameters\").\n<tools>\n",
    );
    for tool in &request.tools {
        let line = json!({"name": tool.name, "description": tool.description, "parameters": tool.parameters});
        s.push_str(&spaced_json(&line));
        s.push('\n');
    }
    s.push_str("</tools>\n\n");
    let callable: Vec<&str> = request
        .tools
        .iter()
        .filter(|t| !t.listed_only)
        .map(|t| t.name.as_str())
        .collect();
    if callable.len() < request.tools.len() {
        s.push_str(&format!(
            "Only {} can be called; the other tools are the tools its steps use.\n\n",
            callable.join(", ")
        ));
    }
    s.push_str("# Reply format\n\nReply with exactly one JSON object and nothing else");
    // With think_first, each form opens with a thought (the grammar asks for it in the same place).
    let (why, call_thought, answer_thought) = if request.think_first {
        (
            " (what you know so far and what you still need)",
            "\"thought\": \"<what you know, what you still need>\", ",
            "\"thought\": \"<what you know>\", ",
        )
    } else {
        ("", "", "")
    };
    let calls = "\"tool_calls\": [{\"name\": \"<tool name>\", \"arguments\": {<arguments that match the tool's parameters>}}]}\n";
    match mode {
        ReplyMode::ToolsOnly => {
            let after = if request.think_first {
                ", after your thought"
            } else {
                ""
            };
            s.push_str(&format!(
                ". You must call at least one tool now{after}{why}:\n{{{call_thought}{calls}"
            ));
        }
        ReplyMode::AnswerOnly => {
            let after = if request.think_first {
                ", after your thought (what you know)"
            } else {
                ""
            };
            s.push_str(&format!(
                ". Tool calls are over: give your final answer now, from the tool results you have{after}:\n\
                 {{{answer_thought}\"answer\": \"<your answer to the user>\"}}\n"
            ));
            return s;
        }
        _ => {
            let each = if request.think_first {
                ", each starting with your thought"
            } else {
                ""
            };
            s.push_str(&format!(
                ", in one of two forms{each}{why}:\n\
                 1. To call tools: {{{call_thought}{calls}\
                 2. To give your final answer: {{{answer_thought}\"answer\": \"<your answer to the user>\"}}\n"
            ));
        }
    }
    if request.parallel_tool_calls == Some(false) {
        s.push_str("Call one tool per reply. ");
    } else {
        s.push_str("Several independent calls can go into one reply. ");
    }
    s.push_str(
        "Tool results come back to you inside <tool_response></tool_response> tags. Call a tool when you need \
         what it provides; once you have what you need, give your final answer.",
    );
    s
}

/// A tool call as replies write it: `{"name": …, "arguments": …}`.
fn call_value(call: &ToolCall) -> Value {
    json!({"name": call.name, "arguments": call.arguments})
}

/// How an earlier assistant message is written back into the chat: a tool-call message keeps its
/// thought (its text) when the replies start with one.
fn assistant_text(message: &Message, mode: ReplyMode, think: bool) -> String {
    if !message.tool_calls.is_empty() {
        let calls: Vec<Value> = message.tool_calls.iter().map(call_value).collect();
        if think && !message.content.trim().is_empty() {
            spaced_json(&json!({"thought": message.content, "tool_calls": calls}))
        } else {
            spaced_json(&json!({"tool_calls": calls}))
        }
    } else if mode.is_constrained() {
        spaced_json(&json!({"answer": message.content}))
    } else {
        message.content.clone()
    }
}

/// The text a reply starts with for [`ChatRequest::reply_start`]: the earlier calls written as the
/// reply grammar has them (with the thought first when `think`), left open where the model must
/// add; `None` when `start` has no calls, or its `open_in` names no array argument of its last
/// call.
pub fn reply_start_text(start: &ReplyStart, think: bool) -> Option<String> {
    let (last, before) = start.calls.split_last()?;
    let call = |c: &ToolCall| spaced_json(&call_value(c));
    let mut text = String::from("{");
    if think {
        text.push_str(&format!("\"thought\": {}, ", spaced_json(&start.thought)));
    }
    text.push_str("\"tool_calls\": [");
    for c in before {
        text.push_str(&call(c));
        text.push_str(", ");
    }
    // After the last item: a separator, so the model adds one more, unless it may end there.
    let separator = if start.may_end { "" } else { ", " };
    let Some(key) = &start.open_in else {
        text.push_str(&call(last));
        text.push_str(separator);
        return Some(text);
    };
    let Value::Object(arguments) = &last.arguments else {
        return None;
    };
    let Some(Value::Array(items)) = arguments.get(key) else {
        return None;
    };
    text.push_str(&format!(
        "{{\"name\": {}, \"arguments\": {{",
        spaced_json(&last.name)
    ));
    for (k, v) in arguments.iter().take_while(|(k, _)| *k != key) {
        text.push_str(&format!("{}: {}, ", spaced_json(k), spaced_json(v)));
    }
    text.push_str(&format!("{}: [", spaced_json(key)));
    let items: Vec<String> = items.iter().map(spaced_json).collect();
    text.push_str(&items.join(", "));
    if !items.is_empty() {
        text.push_str(separator);
    }
    Some(text)
}

/// One `<tool_response>` block for a tool message.
fn tool_response(message: &Message) -> String {
    let name = message.tool_name.as_deref().unwrap_or("tool");
    let body = if message.is_error {
        json!({"name": name, "error": message.content})
    } else {
        // A result that is JSON goes in as JSON, anything else as a string.
        let result = serde_json::from_str::<Value>(&message.content)
            .unwrap_or_else(|_| Value::String(message.content.clone()));
        json!({"name": name, "result": result})
    };
    format!("<tool_response>\n{}\n</tool_response>", spaced_json(&body))
}

/// The turns of the chat for `request`, replying in `mode`.
pub fn render(request: &ChatRequest, mode: ReplyMode) -> Vec<Turn> {
    let mut system: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System && !m.content.trim().is_empty())
        .map(|m| m.content.as_str())
        .collect();
    if system.is_empty() {
        system.push(DEFAULT_SYSTEM);
    }
    let mut system = system.join("\n\n");
    if mode.is_constrained() {
        system.push_str("\n\n");
        system.push_str(&tools_section(request, mode));
    }
    let mut turns = vec![Turn::new("system", system)];
    let mut pending_results: Vec<String> = Vec::new();
    for message in &request.messages {
        if message.role != Role::Tool && !pending_results.is_empty() {
            turns.push(Turn::new("user", pending_results.join("\n")));
            pending_results.clear();
        }
        match message.role {
            Role::System => {}
            Role::User => turns.push(Turn::new("user", message.content.clone())),
            Role::Assistant => turns.push(Turn::new(
                "assistant",
                assistant_text(message, mode, request.think_first && mode.is_constrained()),
            )),
            Role::Tool => pending_results.push(tool_response(message)),
        }
    }
    if !pending_results.is_empty() {
        let mut results = pending_results.join("\n");
        // Small models tend to repeat a call whose result they already have: remind them.
        if mode == ReplyMode::AnswerOnly {
            results.push_str(ANSWER_NOW_REMINDER);
        } else if mode == ReplyMode::AnswerOrTools {
            let failed = request
                .messages
                .iter()
                .rev()
                .take_while(|m| m.role == Role::Tool)
                .any(|m| m.is_error);
            results.push_str(if failed {
                FAILED_RESULTS_REMINDER
            } else {
                RESULTS_REMINDER
            });
        }
        turns.push(Turn::new("user", results));
    }
    turns
}

/// Follows the tool results that end the chat, when the model may answer.
pub const RESULTS_REMINDER: &str = "\nThese are the results of your tool calls. If the question needs \
    another lookup or a calculation with these results, call that tool now. Reply with your final answer \
    ({\"answer\": ...}) only when the results hold every fact the question asks for; do not repeat a call \
    whose result you already have.";

/// Follows the tool results that end the chat when tools are switched off ([`ReplyMode::AnswerOnly`]).
pub const ANSWER_NOW_REMINDER: &str = "\nThese are the results of your tool calls. No more tool calls: \
give your final answer now ({\"answer\": ...}) from the results you have.";

/// Follows the tool results that end the chat when one of them is an error and the model may answer:
/// a failed call is worth a corrected call more often than an answer made up around it.
pub const FAILED_RESULTS_REMINDER: &str = "\nThese are the results of your tool calls; some failed. \
If an error shows that a call was wrong (a missing lookup, a wrong argument), call the tools again \
with the mistake fixed. Reply with your final answer ({\"answer\": ...}) only when the results give \
what the question needs.";

/// `template` (the model's chat template) applied to the turns, with the assistant's turn opened.
pub(crate) fn apply_template(
    model: &LlamaModel,
    template: &LlamaChatTemplate,
    turns: &[Turn],
) -> Result<String, LlmError> {
    let messages = turns
        .iter()
        .map(|t| LlamaChatMessage::new(t.role.to_owned(), t.content.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| LlmError::Local(format!("bad chat message: {e}")))?;
    match model.apply_chat_template(template, &messages, true) {
        Ok(text) => Ok(text),
        // llama.cpp recognises templates by their markers; one it does not know falls back to ChatML.
        Err(first) => LlamaChatTemplate::new("chatml")
            .ok()
            .and_then(|chatml| model.apply_chat_template(&chatml, &messages, true).ok())
            .ok_or_else(|| LlmError::Local(format!("cannot apply the chat template: {first}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{ToolChoice, ToolDefinition};

    fn weather() -> ToolDefinition {
        ToolDefinition {
            name: "get_weather".into(),
            description: "Weather of a city".into(),
            parameters: json!({"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}),
            ..Default::default()
        }
    }

    #[test]
    fn spaced_json_writes_like_python() {
        assert_eq!(
            spaced_json(&json!({"a": [1, 2, {"b": null}], "c": "x"})),
            r#"{"a": [1, 2, {"b": null}], "c": "x"}"#
        );
    }

    #[test]
    fn plain_chat_gets_a_default_system_message() {
        let request = ChatRequest {
            messages: vec![Message::user("Hi")],
            ..ChatRequest::default()
        };
        let turns = render(&request, ReplyMode::Text);
        assert_eq!(
            turns,
            vec![Turn::new("system", DEFAULT_SYSTEM), Turn::new("user", "Hi")]
        );
    }

    #[test]
    fn tools_shown_but_not_callable_are_listed_with_the_others() {
        let planner = ToolDefinition::new(
            "execute_tool_plan",
            "Runs a plan",
            json!({"type": "object"}),
        );
        let request = ChatRequest {
            messages: vec![Message::user("Weather in Tokyo?")],
            tools: vec![planner, weather().listed_only()],
            tool_choice: ToolChoice::Required,
            ..ChatRequest::default()
        };
        assert_eq!(ReplyMode::of(&request), Ok(ReplyMode::ToolsOnly));
        let system = &render(&request, ReplyMode::ToolsOnly)[0].content;
        assert!(system.contains(r#"{"name": "get_weather""#), "{system}");
        assert!(
            system.contains(
                "Only execute_tool_plan can be called; the other tools are the tools its steps use."
            ),
            "{system}"
        );
        // With only tools that cannot be called, there is nothing to call.
        let listed = ChatRequest {
            tools: vec![weather().listed_only()],
            tool_choice: ToolChoice::Auto,
            ..request
        };
        assert_eq!(ReplyMode::of(&listed), Ok(ReplyMode::Text));
    }

    #[test]
    fn tools_and_format_go_into_the_system_message() {
        let request = ChatRequest {
            messages: vec![
                Message::system("Be brief."),
                Message::user("Weather in Tokyo?"),
            ],
            tools: vec![weather()],
            ..ChatRequest::default()
        };
        let turns = render(&request, ReplyMode::AnswerOrTools);
        assert_eq!(turns.len(), 2);
        let system = &turns[0].content;
        assert!(system.starts_with("Be brief.\n\n# Tools"), "{system}");
        assert!(system.contains(
            r#"{"name": "get_weather", "description": "Weather of a city", "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}"#
        ), "{system}");
        assert!(system.contains(r#"{"answer": "#), "{system}");
        let required = render(
            &ChatRequest {
                tool_choice: ToolChoice::Required,
                ..request
            },
            ReplyMode::ToolsOnly,
        );
        assert!(
            required[0]
                .content
                .contains("You must call at least one tool")
        );
        assert!(!required[0].content.contains(r#"{"answer": "#));
    }

    #[test]
    fn a_reply_start_is_written_as_the_reply_grammar_has_it_and_left_open() {
        let call = |name: &str, arguments: Value| ToolCall {
            id: "call_0".into(),
            name: name.into(),
            arguments,
        };
        let weather = call("get_weather", json!({"location": "Paris"}));
        let calls = ReplyStart {
            thought: "Paris first.".into(),
            calls: vec![weather.clone()],
            open_in: None,
            may_end: false,
        };
        assert_eq!(
            reply_start_text(&calls, false).unwrap(),
            r#"{"tool_calls": [{"name": "get_weather", "arguments": {"location": "Paris"}}, "#
        );
        assert_eq!(
            reply_start_text(&calls, true).unwrap(),
            r#"{"thought": "Paris first.", "tool_calls": [{"name": "get_weather", "arguments": {"location": "Paris"}}, "#
        );
        // A plan open in its steps: the arguments before them are kept, those after are not.
        let plan = call(
            "execute_tool_plan",
            json!({"thought": "t", "steps": [{"id": "a"}, {"id": "b"}], "answer": "x"}),
        );
        let open = ReplyStart {
            thought: String::new(),
            calls: vec![weather.clone(), plan.clone()],
            open_in: Some("steps".into()),
            may_end: false,
        };
        assert_eq!(
            reply_start_text(&open, false).unwrap(),
            r#"{"tool_calls": [{"name": "get_weather", "arguments": {"location": "Paris"}}, {"name": "execute_tool_plan", "arguments": {"thought": "t", "steps": [{"id": "a"}, {"id": "b"}, "#
        );
        // No steps yet: the array is open for its first one.
        let empty = ReplyStart {
            calls: vec![call("execute_tool_plan", json!({"steps": []}))],
            ..open.clone()
        };
        assert!(
            reply_start_text(&empty, false)
                .unwrap()
                .ends_with(r#""steps": ["#)
        );
        // A start that may be the whole reply ends after its last item: the model may close.
        let whole = ReplyStart {
            may_end: true,
            ..open.clone()
        };
        assert!(
            reply_start_text(&whole, false)
                .unwrap()
                .ends_with(r#""steps": [{"id": "a"}, {"id": "b"}"#)
        );
        let whole_calls = ReplyStart {
            may_end: true,
            ..calls.clone()
        };
        assert!(
            reply_start_text(&whole_calls, false)
                .unwrap()
                .ends_with(r#"{"location": "Paris"}}"#)
        );
        // Nothing to start with: no calls, or no such array.
        assert_eq!(reply_start_text(&ReplyStart::default(), false), None);
        for arguments in [json!({"steps": "a"}), json!("text"), json!({})] {
            let odd = ReplyStart {
                calls: vec![call("execute_tool_plan", arguments)],
                ..open.clone()
            };
            assert_eq!(reply_start_text(&odd, false), None);
        }
    }

    #[test]
    fn tool_calls_and_results_round_trip_into_turns() {
        let call = ToolCall {
            id: "call_0".into(),
            name: "get_weather".into(),
            arguments: json!({"location": "Tokyo"}),
        };
        let call2 = ToolCall {
            id: "call_1".into(),
            name: "get_weather".into(),
            arguments: json!({"location": "Oslo"}),
        };
        let request = ChatRequest {
            messages: vec![
                Message::user("Weather in Tokyo and Oslo?"),
                Message::assistant("", vec![call.clone(), call2.clone()]),
                Message::tool_result(&call, r#"{"temp": 21}"#, false),
                Message::tool_result(&call2, "no such city", true),
                Message::assistant("Tokyo is 21.", vec![]),
                Message::user("Thanks\0"),
            ],
            tools: vec![weather()],
            ..ChatRequest::default()
        };
        let turns = render(&request, ReplyMode::AnswerOrTools);
        let roles: Vec<&str> = turns.iter().map(|t| t.role).collect();
        assert_eq!(
            roles,
            ["system", "user", "assistant", "user", "assistant", "user"]
        );
        assert_eq!(
            turns[2].content,
            r#"{"tool_calls": [{"name": "get_weather", "arguments": {"location": "Tokyo"}}, {"name": "get_weather", "arguments": {"location": "Oslo"}}]}"#
        );
        assert_eq!(
            turns[3].content,
            "<tool_response>\n{\"name\": \"get_weather\", \"result\": {\"temp\": 21}}\n</tool_response>\n\
             <tool_response>\n{\"name\": \"get_weather\", \"error\": \"no such city\"}\n</tool_response>"
        );
        assert_eq!(turns[4].content, r#"{"answer": "Tokyo is 21."}"#);
        // NUL bytes would end the C string early: they are dropped.
        assert_eq!(turns[5].content, "Thanks");
        // Without tools, the earlier answer is plain text again.
        let plain = render(&request, ReplyMode::Text);
        assert_eq!(plain[4].content, "Tokyo is 21.");
    }

    #[test]
    fn thinking_first_shows_the_thought_in_the_format_and_keeps_it_in_the_history() {
        let call = ToolCall {
            id: "call_0".into(),
            name: "get_weather".into(),
            arguments: json!({"location": "Tokyo"}),
        };
        let request = ChatRequest {
            messages: vec![
                Message::user("Weather where Alice lives?"),
                Message::assistant("Alice lives in Tokyo.", vec![call.clone()]),
                Message::tool_result(&call, r#"{"temp": 18}"#, false),
            ],
            tools: vec![weather()],
            think_first: true,
            ..ChatRequest::default()
        };
        let turns = render(&request, ReplyMode::AnswerOrTools);
        assert!(
            turns[0].content.contains(r#"{"thought": "#),
            "{}",
            turns[0].content
        );
        assert_eq!(
            turns[2].content,
            r#"{"thought": "Alice lives in Tokyo.", "tool_calls": [{"name": "get_weather", "arguments": {"location": "Tokyo"}}]}"#
        );
        let required = render(&request, ReplyMode::ToolsOnly);
        assert!(required[0].content.contains(r#"{"thought": "#));
        // Without thinking, neither the format nor the history shows a thought.
        let plain = ChatRequest {
            think_first: false,
            ..request
        };
        let turns = render(&plain, ReplyMode::AnswerOrTools);
        assert!(
            !turns[0].content.contains("thought"),
            "{}",
            turns[0].content
        );
        assert!(turns[2].content.starts_with(r#"{"tool_calls": "#));
    }

    #[test]
    fn results_that_end_the_chat_get_a_reminder_that_depends_on_failures() {
        let call = ToolCall {
            id: "call_0".into(),
            name: "get_weather".into(),
            arguments: json!({"location": "Erin"}),
        };
        let chat = |is_error: bool| ChatRequest {
            messages: vec![
                Message::user("Weather where Erin lives?"),
                Message::assistant("", vec![call.clone()]),
                Message::tool_result(&call, "no weather data for 'Erin'", is_error),
            ],
            tools: vec![weather()],
            ..ChatRequest::default()
        };
        let failed = render(&chat(true), ReplyMode::AnswerOrTools);
        let last = &failed.last().expect("turns").content;
        assert!(last.ends_with(FAILED_RESULTS_REMINDER), "{last}");
        let ok = render(&chat(false), ReplyMode::AnswerOrTools);
        let last = &ok.last().expect("turns").content;
        assert!(last.ends_with(RESULTS_REMINDER), "{last}");
        // With tools switched off, the model is told to answer, in the system prompt and after
        // the results; the tools and the earlier calls stay in the chat as they were.
        let answer_only = render(&chat(false), ReplyMode::AnswerOnly);
        let last = &answer_only.last().expect("turns").content;
        assert!(last.ends_with(ANSWER_NOW_REMINDER), "{last}");
        let system = &answer_only[0].content;
        assert!(system.contains("give your final answer now"), "{system}");
        assert!(
            system.contains("results you have:\n{\"answer\": "),
            "{system}"
        );
        assert!(system.contains(r#""name": "get_weather""#), "{system}");
        assert!(!system.contains("To call tools"), "{system}");
        assert!(answer_only[2].content.starts_with(r#"{"tool_calls": "#));
        // No reminder where the model must call a tool anyway.
        let required = render(&chat(true), ReplyMode::ToolsOnly);
        assert!(
            required
                .last()
                .expect("turns")
                .content
                .ends_with("</tool_response>")
        );
    }
}
