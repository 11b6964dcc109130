//! OpenAI-compatible chat completions: `POST {base_url}/chat/completions`.
//!
//! Works with OpenAI itself and with the servers that speak its protocol: Ollama
//! (`http://localhost:11434/v1`), vLLM, the llama.cpp server, LM Studio … The API key is sent as
//! `Authorization: Bearer …` when there is one; local servers usually need none.
//!
//! Mapping:
//! * tools → `tools: [{type: "function", function: {name, description, parameters}}]`, with
//!   `tool_choice` `"auto"`, `"none"` or `"required"` (both only sent when there are tools);
//! * an assistant message with tool calls → `tool_calls: [{id, type: "function", function: {name,
//!   arguments}}]`, the arguments as a JSON string;
//! * a tool result → `{role: "tool", tool_call_id, content}`; OpenAI has no error flag, so a failed
//!   call's content is prefixed with `Error: `;
//! * `usage.prompt_tokens` / `usage.completion_tokens` → [`Usage`];
//! * `finish_reason` `stop` → [`StopReason::EndTurn`], `tool_calls` → [`StopReason::ToolUse`]
//!   (also when a server says `stop` but sent tool calls), `length` → [`StopReason::MaxTokens`].
//! * The token limit goes out as `max_completion_tokens` to the official API (newer models reject
//!   `max_tokens`) and as `max_tokens` to every other server (not all know the new name).
//! * A streamed call adds `"stream": true` and `"stream_options": {"include_usage": true}`; its
//!   events are read by the `stream` module.

mod stream;

use std::fmt;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::http;
use crate::error::LlmError;
use crate::message::{
    ChatRequest, ChatResponse, Message, Role, StopReason, ToolCall, ToolChoice, Usage,
    parse_arguments,
};
use crate::model::CallPolicy;

/// The official OpenAI API.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The environment variable holding the API key.
pub const API_KEY_ENV: &str = "OPENAI_API_KEY";

/// The environment variable that may override the base URL.
pub const BASE_URL_ENV: &str = "OPENAI_BASE_URL";

/// How to reach an OpenAI-compatible server.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// The API base, up to and including `/v1` (`https://api.openai.com/v1`,
    /// `http://localhost:11434/v1`).
    pub base_url: String,
    /// The API key, sent as a bearer token; `None` sends no `Authorization` header.
    pub api_key: Option<String>,
    /// The model name (`gpt-4o-mini`, `qwen2.5:7b` …).
    pub model: String,
    /// Timeout and retries of each call.
    pub policy: CallPolicy,
    /// Token limit used when a request sets none; `None` leaves it to the server.
    pub max_tokens: Option<u32>,
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &http::redacted(&self.api_key))
            .field("model", &self.model)
            .field("policy", &self.policy)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

impl OpenAiConfig {
    /// A config for `model` on the official API, without a key and with the default policy.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            model: model.into(),
            policy: CallPolicy::default(),
            max_tokens: None,
        }
    }

    /// A config from the environment: the key from `OPENAI_API_KEY`; the base URL from
    /// `base_url`, else `OPENAI_BASE_URL`, else the official API. The key is required only for the
    /// official API.
    pub fn from_env(model: impl Into<String>, base_url: Option<String>) -> Result<Self, LlmError> {
        let base_url = http::base_url(base_url, BASE_URL_ENV, DEFAULT_BASE_URL);
        let api_key = http::env_var(API_KEY_ENV);
        if api_key.is_none() && is_official(&base_url) {
            return Err(LlmError::Config(format!(
                "openai: {API_KEY_ENV} is not set (it is needed for {DEFAULT_BASE_URL}; for a local \
                 OpenAI-compatible server pass its base URL, e.g. http://localhost:11434/v1)"
            )));
        }
        Ok(Self {
            base_url,
            api_key,
            ..Self::new(model)
        })
    }
}

fn is_official(base_url: &str) -> bool {
    reqwest::Url::parse(base_url).is_ok_and(|u| u.host_str() == Some("api.openai.com"))
}

/// A chat model behind an OpenAI-compatible chat-completions endpoint.
#[derive(Debug)]
pub struct OpenAiModel {
    config: OpenAiConfig,
    endpoint: http::Endpoint,
}

impl OpenAiModel {
    /// A model for `config` (checks the base URL and builds the HTTP client; sends nothing).
    pub fn new(config: OpenAiConfig) -> Result<Self, LlmError> {
        let endpoint = http::Endpoint::new(&http::Site {
            provider: "openai",
            base_url: &config.base_url,
            default_base_url: DEFAULT_BASE_URL,
            path: "chat/completions",
            stream_path: "chat/completions",
            credentials: config.api_key.is_some(),
            model: &config.model,
            policy: &config.policy,
            model_noun: "name",
        })?;
        Ok(Self { config, endpoint })
    }

    /// The config this model was made with.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The JSON body of the chat-completions request for `request`.
    pub fn request_body(&self, request: &ChatRequest) -> Result<Value, LlmError> {
        let messages = request
            .messages
            .iter()
            .enumerate()
            .map(|(i, m)| wire_message(self.endpoint.label(), i, m))
            .collect::<Result<Vec<_>, _>>()?;
        let mut body = Map::new();
        body.insert("model".into(), json!(self.config.model));
        body.insert("messages".into(), Value::Array(messages));
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": http::parameters_schema(&t.parameters),
                    }})
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
            let choice = match request.tool_choice {
                ToolChoice::Auto => "auto",
                ToolChoice::None => "none",
                ToolChoice::Required => "required",
            };
            body.insert("tool_choice".into(), json!(choice));
            if let Some(parallel) = request.parallel_tool_calls {
                body.insert("parallel_tool_calls".into(), json!(parallel));
            }
        }
        if let Some(max) = request.max_tokens.or(self.config.max_tokens) {
            let field = if is_official(&self.config.base_url) {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            body.insert(field.into(), json!(max));
        }
        if let Some(t) = request.temperature {
            body.insert("temperature".into(), json!(t));
        }
        Ok(Value::Object(body))
    }
}

fn wire_message(provider: &str, index: usize, m: &Message) -> Result<Value, LlmError> {
    Ok(match m.role {
        Role::System => json!({"role": "system", "content": m.content}),
        Role::User => json!({"role": "user", "content": m.content}),
        Role::Assistant if m.tool_calls.is_empty() => {
            json!({"role": "assistant", "content": m.content})
        }
        Role::Assistant => {
            let calls: Vec<Value> = m
                .tool_calls
                .iter()
                .map(|c| {
                    json!({"id": c.id, "type": "function", "function": {
                        "name": c.name,
                        "arguments": arguments_text(c),
                    }})
                })
                .collect();
            let content = if m.content.is_empty() {
                Value::Null
            } else {
                json!(m.content)
            };
            json!({"role": "assistant", "content": content, "tool_calls": calls})
        }
        Role::Tool => {
            let id = http::tool_call_id(provider, index, m.tool_call_id.as_deref())?;
            let content = if m.is_error && !m.content.starts_with("Error") {
                format!("Error: {}", m.content)
            } else {
                m.content.clone()
            };
            json!({"role": "tool", "tool_call_id": id, "content": content})
        }
    })
}

/// The arguments as the JSON string OpenAI expects; text that was not JSON goes back as it was.
fn arguments_text(call: &ToolCall) -> String {
    match &call.arguments {
        Value::String(text) => text.clone(),
        Value::Null => "{}".to_owned(),
        other => other.to_string(),
    }
}

#[derive(Deserialize)]
struct WireResponse {
    #[serde(default)]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: WireMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Deserialize)]
struct WireToolCall {
    #[serde(default)]
    id: Option<String>,
    function: WireFunction,
}

#[derive(Deserialize)]
struct WireFunction {
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(u: WireUsage) -> Self {
        Usage {
            input_tokens: u.prompt_tokens.unwrap_or(0),
            output_tokens: u.completion_tokens.unwrap_or(0),
        }
    }
}

/// The stop reason of a `finish_reason`: `length` is the token limit; otherwise tool calls mean
/// tool use (also when a server says `stop`), and `stop` or none the end of the turn.
fn stop_reason(finish_reason: Option<&str>, has_tool_calls: bool) -> StopReason {
    match finish_reason {
        Some("length") => StopReason::MaxTokens,
        _ if has_tool_calls => StopReason::ToolUse,
        Some("stop") | None => StopReason::EndTurn,
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some(_) => StopReason::Other,
    }
}

/// Turns a chat-completions answer into a [`ChatResponse`].
fn parse_response(provider: &str, body: &[u8]) -> Result<ChatResponse, LlmError> {
    let wire: WireResponse = http::decode(provider, body)?;
    let Some(choice) = wire.choices.into_iter().next() else {
        return Err(match wire.error {
            Some(error) => {
                http::bad_answer(provider, format!("the server reported an error: {error}"))
            }
            None => http::bad_answer(provider, "the answer has no choices"),
        });
    };
    let content = match choice.message.content {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text,
        // Content parts: keep the text ones.
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        Some(other) => {
            return Err(http::bad_answer(
                provider,
                format!("unexpected message content {other}"),
            ));
        }
    };
    let tool_calls: Vec<ToolCall> = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, c)| ToolCall {
            id: c
                .id
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| format!("call_{i}")),
            name: c.function.name,
            arguments: match c.function.arguments {
                None | Some(Value::Null) => Value::Object(Map::new()),
                Some(Value::String(text)) => parse_arguments(&text),
                Some(other) => other,
            },
        })
        .collect();
    let stop = stop_reason(choice.finish_reason.as_deref(), !tool_calls.is_empty());
    let usage = wire.usage.map_or_else(Usage::default, Usage::from);
    Ok(ChatResponse {
        raw: serde_json::from_slice(body).ok(),
        message: Message::assistant(content, tool_calls),
        usage,
        stop,
    })
}

impl http::WireFormat for OpenAiModel {
    type Stream = stream::OpenAiStream;

    fn endpoint(&self) -> &http::Endpoint {
        &self.endpoint
    }

    fn authorize(
        &self,
        http_request: reqwest::RequestBuilder,
        _url: &str,
        _body: &[u8],
    ) -> Result<reqwest::RequestBuilder, LlmError> {
        Ok(match &self.config.api_key {
            Some(key) => http_request.bearer_auth(key),
            None => http_request,
        })
    }

    fn parse_response(provider: &str, body: &[u8]) -> Result<ChatResponse, LlmError> {
        parse_response(provider, body)
    }

    fn streamed_body(&self, mut body: Value) -> Value {
        if let Value::Object(fields) = &mut body {
            fields.insert("stream".into(), json!(true));
            fields.insert("stream_options".into(), json!({"include_usage": true}));
        }
        body
    }

    fn reply_stream(provider: &str, max_bytes: usize) -> Self::Stream {
        stream::OpenAiStream::new(provider, max_bytes)
    }

    fn unstreamed_on_refusal(&self) -> bool {
        true
    }
}

http::impl_chat_model!(OpenAiModel);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_reasons_and_odd_answers() {
        let r = parse_response(
            "p",
            br#"{"choices":[{"message":{"content":null,"tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},"finish_reason":"stop"}]}"#,
        )
        .unwrap();
        assert_eq!(r.stop, StopReason::ToolUse);
        assert_eq!(r.message.tool_calls[0].id, "call_0");
        assert_eq!(r.message.tool_calls[0].arguments, json!({"a": 1}));
        assert_eq!(r.usage, Usage::default());
        let r = parse_response(
            "p",
            br#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},"finish_reason":"length"}]}"#,
        )
        .unwrap();
        assert_eq!(
            (r.message.content.as_str(), r.stop),
            ("ab", StopReason::MaxTokens)
        );
        let e = parse_response("p", br#"{"error":{"message":"boom"}}"#).unwrap_err();
        assert!(e.to_string().contains("boom"), "{e}");
        assert!(matches!(
            parse_response("p", b"<html>"),
            Err(LlmError::Decode { .. })
        ));
    }

    #[test]
    fn config_debug_hides_the_key() {
        let config = OpenAiConfig {
            api_key: Some("sk-secret".into()),
            ..OpenAiConfig::new("m")
        };
        assert!(!format!("{config:?}").contains("sk-secret"));
    }

    #[test]
    fn official_api_gets_max_completion_tokens() {
        let request = ChatRequest {
            messages: vec![Message::user("hi")],
            max_tokens: Some(9),
            ..ChatRequest::default()
        };
        let official = OpenAiModel::new(OpenAiConfig::new("m")).unwrap();
        assert_eq!(
            official.request_body(&request).unwrap()["max_completion_tokens"],
            9
        );
        let local = OpenAiModel::new(OpenAiConfig {
            base_url: "http://localhost:11434/v1".into(),
            ..OpenAiConfig::new("m")
        })
        .unwrap();
        let body = local.request_body(&request).unwrap();
        assert_eq!(body["max_tokens"], 9);
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
    }

    #[test]
    fn parallel_tool_calls_switch() {
        let model = OpenAiModel::new(OpenAiConfig::new("m")).unwrap();
        let mut request = ChatRequest {
            messages: vec![Message::user("hi")],
            tools: vec![crate::ToolDefinition {
                name: "f".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
                ..Default::default()
            }],
            ..ChatRequest::default()
        };
        let body = model.request_body(&request).unwrap();
        assert_eq!(body.get("parallel_tool_calls"), None);
        request.parallel_tool_calls = Some(false);
        let body = model.request_body(&request).unwrap();
        assert_eq!(body["parallel_tool_calls"], json!(false));
    }
}
