//! The provider-neutral chat vocabulary: messages, tool definitions, tool calls, requests, responses
//! and token usage. Every provider translates these to and from its own wire format.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who speaks a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// The result of a tool call, answering one of the assistant's tool calls.
    Tool,
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call; tool results refer to it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as JSON (providers that send a JSON string have it parsed; text that is not
    /// JSON is kept as a JSON string so the tool can report it).
    pub arguments: Value,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// The text (may be empty for an assistant message that only calls tools).
    pub content: String,
    /// Tool calls of an assistant message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a tool message: the id of the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For a tool message: the tool's name (some providers want it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// For a tool message: whether the call failed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

impl Message {
    fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            is_error: false,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }

    /// An assistant message with text and tool calls.
    pub fn assistant(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            tool_calls,
            ..Self::new(Role::Assistant, content)
        }
    }

    /// The result of a tool call.
    pub fn tool_result(call: &ToolCall, content: impl Into<String>, is_error: bool) -> Self {
        Self {
            tool_call_id: Some(call.id.clone()),
            tool_name: Some(call.name.clone()),
            is_error,
            ..Self::new(Role::Tool, content)
        }
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON Schema of its arguments object: what the model is shown, and what providers that
    /// enforce a schema hold the arguments to when there is no [`strict_parameters`](Self::strict_parameters).
    pub parameters: Value,
    /// A stricter schema of the arguments, enforced instead of `parameters` by providers that
    /// constrain decoding (the local model's grammar) but never shown to the model: for example a plan
    /// whose steps are each typed by their tool, described to the model in a few lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict_parameters: Option<Value>,
    /// Places in the arguments whose values must all differ within one call, as paths of object
    /// keys and `*` for any array index: `/steps/*/id` is every step's id. JSON Schema cannot say
    /// "all different" across array items (nor can a grammar), so providers that constrain decoding
    /// enforce it as the model writes (the local model); the tool itself must still check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unique_values: Vec<String>,
    /// Shown to the model with its schema, but not callable: a tool a plan's steps may use when only
    /// the planner may be called. The local model lists it among the tools in its own format and
    /// its grammar leaves it out; hosted providers, which cannot show a tool without letting the
    /// model call it, list it in the system message instead ([`ChatRequest::with_listed_in_system`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub listed_only: bool,
    /// How the arguments name steps and refer to them, when the tool takes a plan: providers that
    /// constrain decoding let a reference name only a step written before it (the local model), so
    /// a plan cannot refer to itself, to a later step or to a step it never wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_references: Option<StepReferences>,
}

/// Where a plan tool's arguments name steps and refer to them ([`ToolDefinition::step_references`]),
/// as keys of its arguments object: `{"steps": [{"id": …, "tool": …, "arguments": {…}}, …],
/// "output_steps": […], "answer": …}` with references written `$ref:ID…` inside strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepReferences {
    /// The marker that starts a reference inside a string: `$ref:`, then a step id.
    pub prefix: String,
    /// The key of the array of steps.
    pub steps: String,
    /// The key of a step's id.
    pub id: String,
    /// The key of a step's tool name.
    pub tool: String,
    /// The key of a step's arguments: references in their strings name earlier steps only.
    pub arguments: String,
    /// The key of an array whose strings each name a step of the plan (`output_steps`).
    pub names: Option<String>,
    /// The key of a text whose references may name any step of the plan (an `answer`).
    pub text: Option<String>,
    /// Per tool, the arguments whose value can be a string only as a reference (a number, say, or
    /// an array): in a plan's first step, such an argument cannot be a string at all.
    #[serde(default)]
    pub reference_only: BTreeMap<String, Vec<String>>,
    /// Per tool, the JSON Schema of its output, for the tools that declare one: a reference into
    /// the result of a step of such a tool names only a path the schema has
    /// ([`toolplan_core::output`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, Value>,
    /// Numbers the plan's steps must write in their arguments before the steps end, each as the
    /// values that count for it, in decimal (a percentage, 2%, as `["2", "0.02"]`; compared by
    /// value, so `"3"` is met by `3.0`): the numbers the question gives,
    /// which a small model often leaves to a step it never writes. Providers that constrain
    /// decoding (the local model) keep the steps open for one more step when the plan closes them
    /// with a number unwritten; the caller still checks the plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_numbers: Vec<Vec<String>>,
    /// The key of the plan's thought (`thought`), when its steps are held to the tools it names
    /// ([`thought_tools`](Self::thought_tools)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thought: Option<String>,
    /// Tools that, once the thought names one (its name as a word of its own), some step must call
    /// before the steps end: a small model often names the whole chain in its thought and closes
    /// the steps after the first lookup. Providers that constrain decoding keep the steps open for
    /// one more step (once, as for [`required_numbers`](Self::required_numbers)); the caller still
    /// checks the plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thought_tools: Vec<String>,
    /// Words the plan's steps must write in their arguments before the steps end, each as a word
    /// of its own, ASCII case ignored: the options a question names to choose between ("Which
    /// city is colder, Berlin or London?"), which a small model often looks up only the first of.
    /// Providers that constrain decoding keep the steps open for one more step (once, as for
    /// [`required_numbers`](Self::required_numbers)); the local sampler reads the first 64.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_words: Vec<String>,
}

impl StepReferences {
    /// The shape of a plan: `$ref:` references, `steps` of `id`, `tool` and `arguments`, and the
    /// `output_steps` they name.
    pub fn plan() -> Self {
        StepReferences {
            prefix: "$ref:".into(),
            steps: "steps".into(),
            id: "id".into(),
            tool: "tool".into(),
            arguments: "arguments".into(),
            names: Some("output_steps".into()),
            text: None,
            reference_only: BTreeMap::new(),
            outputs: BTreeMap::new(),
            required_numbers: Vec::new(),
            thought: None,
            thought_tools: Vec::new(),
            required_words: Vec::new(),
        }
    }

    /// Sets the text field whose references may name any step (see [`text`](Self::text)).
    pub fn with_text(mut self, key: impl Into<String>) -> Self {
        self.text = Some(key.into());
        self
    }

    /// Sets the output schemas of the tools that declare one (see [`outputs`](Self::outputs)).
    pub fn with_outputs(mut self, outputs: BTreeMap<String, Value>) -> Self {
        self.outputs = outputs;
        self
    }

    /// Sets the arguments that can be strings only as references (see
    /// [`reference_only`](Self::reference_only)).
    pub fn with_reference_only(mut self, fields: BTreeMap<String, Vec<String>>) -> Self {
        self.reference_only = fields;
        self
    }
}

impl ToolDefinition {
    /// A tool definition with no stricter schema.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
            strict_parameters: None,
            unique_values: Vec::new(),
            listed_only: false,
            step_references: None,
        }
    }

    /// Makes the tool shown but not callable (see [`listed_only`](Self::listed_only)).
    pub fn listed_only(mut self) -> Self {
        self.listed_only = true;
        self
    }

    /// Sets the stricter schema that constrained decoding enforces.
    pub fn with_strict_parameters(mut self, schema: Value) -> Self {
        self.strict_parameters = Some(schema);
        self
    }

    /// Adds a place in the arguments whose values must all differ within one call (see
    /// [`unique_values`](Self::unique_values)): `"/steps/*/id"`.
    pub fn with_unique_values(mut self, path: impl Into<String>) -> Self {
        self.unique_values.push(path.into());
        self
    }

    /// Says how the arguments name and refer to steps (see
    /// [`step_references`](Self::step_references)).
    pub fn with_step_references(mut self, references: StepReferences) -> Self {
        self.step_references = Some(references);
        self
    }
}

/// Whether the model may, must or must not call tools.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must answer in text.
    None,
    /// The model must call some tool.
    Required,
}

/// One call to a chat model.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    /// The conversation so far; system messages first.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    pub tools: Vec<ToolDefinition>,
    /// Whether it may call them.
    pub tool_choice: ToolChoice,
    /// Whether one reply may hold several tool calls (`None`: the provider's default). An agent that
    /// offers a plan tool turns this off, so that several calls go into one plan.
    pub parallel_tool_calls: Option<bool>,
    /// Most tokens to generate.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Asks for a short thought (what is known so far, what is still needed) before the reply: a
    /// scratchpad that keeps a small model from answering before it has made every call a question
    /// needs. The local provider puts a `thought` field first in its constrained replies and keeps it
    /// as the content of a tool-call message; hosted providers, which reason on their own, ignore it.
    pub think_first: bool,
    /// Where the reply must start: an earlier reply of the model's, kept and left open so that the
    /// model adds to it instead of writing it again (see [`ReplyStart`]). The local provider writes
    /// it into the reply and the model goes on from there; hosted providers, which cannot be made
    /// to start a reply with given text, ignore it (the conversation still says what to add).
    pub reply_start: Option<ReplyStart>,
}

/// The start of a reply written for the model ([`ChatRequest::reply_start`]): tool calls it has
/// already made, left open where it must add something. A small model sent back to complete a
/// reply often writes the same reply again; starting it with what it had, open for more, makes it
/// add.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReplyStart {
    /// The thought the reply opens with, when replies open with one
    /// ([`ChatRequest::think_first`]); empty otherwise.
    pub thought: String,
    /// The tool calls the reply starts with (at least one).
    pub calls: Vec<ToolCall>,
    /// Where the reply is left open: `None`, after the last call (the model writes at least one
    /// more call); `Some(key)`, inside the last call's arguments, after the items of its array
    /// argument `key` (the model writes at least one more item, then the rest of that call's
    /// arguments). The arguments written after `key` are not kept: the model writes them again.
    pub open_in: Option<String>,
    /// Whether the model may end the reply's list there (close the array `open_in` names, or the
    /// list of calls) instead of adding at least one more item: for a start that may already be
    /// the whole reply.
    pub may_end: bool,
}

/// The heading of the system-message section that lists the tools shown but not callable, for
/// providers that cannot show a tool without letting the model call it.
pub const LISTED_TOOLS_HEADING: &str = "# Tools for plan steps\n\nThese tools cannot be called \
directly: they are the tools the steps of a plan can use. Each line is one tool: its name, what it \
does, and the JSON Schema of its arguments (\"parameters\").";

impl ChatRequest {
    /// The tools the model may call (every tool but the [`listed_only`](ToolDefinition::listed_only)
    /// ones).
    pub fn callable_tools(&self) -> Vec<ToolDefinition> {
        self.tools
            .iter()
            .filter(|t| !t.listed_only)
            .cloned()
            .collect()
    }

    /// The request as a provider that cannot show a tool without letting the model call it sends
    /// it: the tools shown but not callable are taken out of the tool list and listed, one JSON line
    /// each, at the end of the system message (a new one first when there is none). The request
    /// itself when there are none.
    pub fn with_listed_in_system(&self) -> std::borrow::Cow<'_, ChatRequest> {
        if !self.tools.iter().any(|t| t.listed_only) {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut section = format!("{LISTED_TOOLS_HEADING}\n");
        for t in self.tools.iter().filter(|t| t.listed_only) {
            let line = serde_json::json!({"name": t.name, "description": t.description, "parameters": t.parameters});
            section.push_str(&line.to_string());
            section.push('\n');
        }
        let mut request = self.clone();
        request.tools = self.callable_tools();
        match request.messages.iter_mut().find(|m| m.role == Role::System) {
            Some(system) => {
                system.content.push_str("\n\n");
                system.content.push_str(section.trim_end());
            }
            None => request
                .messages
                .insert(0, Message::system(section.trim_end().to_owned())),
        }
        std::borrow::Cow::Owned(request)
    }
}

/// Tokens a call consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Generated tokens.
    pub output_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// It finished its answer.
    EndTurn,
    /// It wants tool calls run.
    ToolUse,
    /// It hit the token limit.
    MaxTokens,
    /// Anything else the provider reported.
    Other,
}

/// What the model answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    /// The assistant message (text and/or tool calls).
    pub message: Message,
    /// Tokens used by this call.
    pub usage: Usage,
    /// Why it stopped.
    pub stop: StopReason,
    /// The provider's response body as it arrived, for callers that read provider-specific parts
    /// (a JSONPath `response_filter`). The local model gives its reply in the shape of an
    /// OpenAI-compatible chat completion, as llama.cpp's server does; `None` where there is none,
    /// as in a streamed reply of an HTTP provider (a stream of events has no one body).
    pub raw: Option<serde_json::Value>,
}

/// A piece of a reply, handed over while the model writes it
/// ([`ChatModel::chat_streamed`](crate::ChatModel::chat_streamed)). The pieces of a call that
/// succeeds add up to its [`ChatResponse`]: the [`Text`](Self::Text) pieces to the message's
/// content, and for each tool call a [`CallStart`](Self::CallStart) and then
/// [`Arguments`](Self::Arguments) pieces whose text, joined, is the JSON of its arguments (what
/// [`parse_arguments`] reads as the call's `arguments`). The response is what counts: a provider
/// that corrects a reply after writing it (the local model drops a plan's repeated steps) returns
/// less than its pieces held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyDelta {
    /// More of the reply's text.
    Text(String),
    /// Tool call `index` (its place among the reply's calls, from 0) begins.
    CallStart {
        /// Its place among the reply's calls.
        index: usize,
        /// The tool it calls.
        name: String,
    },
    /// More of the JSON text of tool call `index`'s arguments.
    Arguments {
        /// The call's place among the reply's calls.
        index: usize,
        /// The next piece of the text.
        text: String,
    },
}

/// Where a streamed call hands over the pieces of its reply. Unbounded: a reply is bounded by its
/// output-token limit, and the caller's reading never holds the model up.
pub type ReplySink = tokio::sync::mpsc::UnboundedSender<ReplyDelta>;

impl ReplyDelta {
    /// Sends the pieces of a whole reply at once (text, then each call and its arguments): what a
    /// provider that does not stream hands over when its reply has come. A closed sink is ignored
    /// (the caller stopped listening).
    pub fn send_whole(message: &Message, sink: &ReplySink) {
        if !message.content.is_empty() {
            let _ = sink.send(ReplyDelta::Text(message.content.clone()));
        }
        for (index, call) in message.tool_calls.iter().enumerate() {
            let _ = sink.send(ReplyDelta::CallStart {
                index,
                name: call.name.clone(),
            });
            let _ = sink.send(ReplyDelta::Arguments {
                index,
                text: call.arguments.to_string(),
            });
        }
    }
}

/// Parses a tool call's arguments text: JSON when it parses, otherwise the text as a JSON string.
pub fn parse_arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn tools_shown_but_not_callable_move_into_the_system_message() {
        let plan = ToolDefinition::new(
            "execute_tool_plan",
            "Runs a plan",
            json!({"type": "object"}),
        );
        let weather = ToolDefinition::new(
            "get_weather",
            "Weather of a city",
            json!({"type": "object", "properties": {"location": {"type": "string"}}}),
        )
        .listed_only();
        let request = ChatRequest {
            messages: vec![Message::system("Be brief."), Message::user("Tokyo?")],
            tools: vec![plan.clone(), weather.clone()],
            ..ChatRequest::default()
        };
        assert_eq!(request.callable_tools(), vec![plan.clone()]);
        let sent = request.with_listed_in_system();
        assert_eq!(sent.tools, vec![plan.clone()]);
        let system = &sent.messages[0].content;
        assert!(
            system.starts_with("Be brief.\n\n# Tools for plan steps"),
            "{system}"
        );
        let line = system.lines().last().unwrap_or_default();
        let listed: Value = serde_json::from_str(line).unwrap_or_default();
        assert_eq!(listed["name"], "get_weather", "{system}");
        assert_eq!(listed["parameters"], weather.parameters, "{system}");
        assert_eq!(sent.messages.len(), 2);
        // Without a system message, one is made; without listed tools, nothing changes.
        let bare = ChatRequest {
            messages: vec![Message::user("Tokyo?")],
            ..request
        };
        let sent = bare.with_listed_in_system();
        assert_eq!(sent.messages[0].role, Role::System);
        assert_eq!(sent.messages.len(), 2);
        let plain = ChatRequest {
            tools: vec![plan],
            ..bare.clone()
        };
        assert!(matches!(
            plain.with_listed_in_system(),
            std::borrow::Cow::Borrowed(_)
        ));
        // The flag is not serialized unless set.
        assert!(
            !serde_json::to_string(&plain.tools[0])
                .unwrap_or_default()
                .contains("listed_only")
        );
    }
}
