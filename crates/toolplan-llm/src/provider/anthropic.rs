//! Anthropic Messages: `POST {base_url}/v1/messages` with `x-api-key` and
//! `anthropic-version: 2023-06-01`.
//!
//! Mapping:
//! * system messages → the top-level `system` text (several are joined by blank lines);
//! * tools → `tools: [{name, description, input_schema}]`, with `tool_choice` `{type: auto}`,
//!   `{type: any}` or `{type: none}`;
//! * an assistant message → content blocks `text` and `tool_use {id, name, input}`;
//! * tool results → `tool_result {tool_use_id, content, is_error}` blocks in a user message;
//!   consecutive messages of the same role (several tool results, a tool result and a user
//!   message) are merged into one message, as the API wants roles to alternate;
//! * `max_tokens` is required: the request's, else the config's (default 4096);
//! * `usage.input_tokens` (plus cache reads and writes) / `usage.output_tokens` → [`Usage`];
//! * `stop_reason` `end_turn` / `stop_sequence` → [`StopReason::EndTurn`](crate::StopReason::EndTurn), `tool_use` →
//!   [`StopReason::ToolUse`](crate::StopReason::ToolUse), `max_tokens` → [`StopReason::MaxTokens`](crate::StopReason::MaxTokens).
//! * A streamed call adds `"stream": true`; its events are read by the `stream` module.

mod stream;

use std::fmt;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::http;
use crate::error::LlmError;
use crate::message::{ChatRequest, ChatResponse, Message, Role, ToolCall, ToolChoice, Usage};
use crate::model::CallPolicy;

/// The Anthropic API.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The environment variable holding the API key.
pub const API_KEY_ENV: &str = "ANTHROPIC_API_KEY";

/// The environment variable that may override the base URL.
pub const BASE_URL_ENV: &str = "ANTHROPIC_BASE_URL";

/// The API version sent with every request.
pub const API_VERSION: &str = "2023-06-01";

/// The token limit used when neither the request nor the config sets one.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// How to reach Anthropic.
#[derive(Clone)]
pub struct AnthropicConfig {
    /// The API base, without `/v1` (`https://api.anthropic.com`).
    pub base_url: String,
    /// The API key, sent as `x-api-key`; `None` sends none (for proxies that add it).
    pub api_key: Option<String>,
    /// The model name (`claude-sonnet-4-5` …).
    pub model: String,
    /// Timeout and retries of each call.
    pub policy: CallPolicy,
    /// Token limit used when a request sets none (the API requires one).
    pub max_tokens: u32,
}

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &http::redacted(&self.api_key))
            .field("model", &self.model)
            .field("policy", &self.policy)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

impl AnthropicConfig {
    /// A config for `model` on the Anthropic API, without a key and with the default policy.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.to_owned(),
            api_key: None,
            model: model.into(),
            policy: CallPolicy::default(),
            max_tokens: DEFAULT_MAX_TOKENS,
        }
    }

    /// A config from the environment: the key from `ANTHROPIC_API_KEY`; the base URL from
    /// `base_url`, else `ANTHROPIC_BASE_URL`, else the Anthropic API. The key is required unless
    /// another base URL is given.
    pub fn from_env(model: impl Into<String>, base_url: Option<String>) -> Result<Self, LlmError> {
        let base_url = http::base_url(base_url, BASE_URL_ENV, DEFAULT_BASE_URL);
        let api_key = http::env_var(API_KEY_ENV);
        if api_key.is_none() && base_url.trim_end_matches('/') == DEFAULT_BASE_URL {
            return Err(LlmError::Config(format!(
                "anthropic: {API_KEY_ENV} is not set"
            )));
        }
        Ok(Self {
            base_url,
            api_key,
            ..Self::new(model)
        })
    }
}

/// A chat model behind the Anthropic Messages API.
#[derive(Debug)]
pub struct AnthropicModel {
    config: AnthropicConfig,
    endpoint: http::Endpoint,
}

impl AnthropicModel {
    /// A model for `config` (checks the base URL and builds the HTTP client; sends nothing).
    pub fn new(config: AnthropicConfig) -> Result<Self, LlmError> {
        let endpoint = http::Endpoint::new(&http::Site {
            provider: "anthropic",
            base_url: &config.base_url,
            default_base_url: DEFAULT_BASE_URL,
            path: "v1/messages",
            stream_path: "v1/messages",
            credentials: config.api_key.is_some(),
            model: &config.model,
            policy: &config.policy,
            model_noun: "name",
        })?;
        Ok(Self { config, endpoint })
    }

    /// The config this model was made with.
    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }

    /// The JSON body of the Messages request for `request`.
    pub fn request_body(&self, request: &ChatRequest) -> Result<Value, LlmError> {
        let mut system = Vec::new();
        let mut messages: Vec<(&'static str, Vec<Value>)> = Vec::new();
        for (i, m) in request.messages.iter().enumerate() {
            match m.role {
                Role::System => {
                    if !m.content.trim().is_empty() {
                        system.push(m.content.as_str());
                    }
                }
                Role::User => http::push_blocks(&mut messages, "user", text_block(&m.content)),
                Role::Assistant => {
                    let mut blocks = text_block(&m.content);
                    blocks.extend(m.tool_calls.iter().map(tool_use_block));
                    http::push_blocks(&mut messages, "assistant", blocks);
                }
                Role::Tool => {
                    let id =
                        http::tool_call_id(self.endpoint.label(), i, m.tool_call_id.as_deref())?;
                    let mut block =
                        json!({"type": "tool_result", "tool_use_id": id, "content": m.content});
                    if m.is_error {
                        block["is_error"] = json!(true);
                    }
                    http::push_blocks(&mut messages, "user", vec![block]);
                }
            }
        }
        let mut body = Map::new();
        body.insert("model".into(), json!(self.config.model));
        body.insert(
            "max_tokens".into(),
            json!(request.max_tokens.unwrap_or(self.config.max_tokens)),
        );
        if !system.is_empty() {
            body.insert("system".into(), json!(system.join("\n\n")));
        }
        body.insert("messages".into(), http::messages(messages));
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "description": t.description,
                        "input_schema": http::parameters_schema(&t.parameters),
                    })
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
            let choice = match request.tool_choice {
                ToolChoice::Auto => "auto",
                ToolChoice::None => "none",
                ToolChoice::Required => "any",
            };
            let mut tool_choice = json!({"type": choice});
            if request.parallel_tool_calls == Some(false) && choice != "none" {
                tool_choice["disable_parallel_tool_use"] = json!(true);
            }
            body.insert("tool_choice".into(), tool_choice);
        }
        if let Some(t) = request.temperature {
            body.insert("temperature".into(), json!(t));
        }
        Ok(Value::Object(body))
    }
}

/// A text block, or none for empty text (the API rejects empty text blocks).
fn text_block(text: &str) -> Vec<Value> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![json!({"type": "text", "text": text})]
    }
}

fn tool_use_block(call: &ToolCall) -> Value {
    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": http::arguments_object(call)})
}

#[derive(Deserialize)]
struct WireResponse {
    content: Vec<WireBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type")]
enum WireBlock {
    #[serde(rename = "text")]
    Text { text: String },
    #[serde(rename = "tool_use")]
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    /// Thinking and other blocks this crate does not use.
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Default, Debug)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Takes the counts `later` has (a stream's counts are cumulative: the last one holds).
    fn update(&mut self, later: WireUsage) {
        self.input_tokens = later.input_tokens.or(self.input_tokens);
        self.output_tokens = later.output_tokens.or(self.output_tokens);
        self.cache_creation_input_tokens = later
            .cache_creation_input_tokens
            .or(self.cache_creation_input_tokens);
        self.cache_read_input_tokens = later
            .cache_read_input_tokens
            .or(self.cache_read_input_tokens);
    }
}

impl From<WireUsage> for Usage {
    /// Input tokens count cache reads and writes too.
    fn from(u: WireUsage) -> Self {
        Usage {
            input_tokens: u.input_tokens.unwrap_or(0)
                + u.cache_creation_input_tokens.unwrap_or(0)
                + u.cache_read_input_tokens.unwrap_or(0),
            output_tokens: u.output_tokens.unwrap_or(0),
        }
    }
}

/// Turns a Messages answer into a [`ChatResponse`].
fn parse_response(provider: &str, body: &[u8]) -> Result<ChatResponse, LlmError> {
    let wire: WireResponse = http::decode(provider, body)?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in wire.content {
        match block {
            WireBlock::Text { text: t } => text.push_str(&t),
            WireBlock::ToolUse { id, name, input } => tool_calls.push(ToolCall {
                id,
                name,
                arguments: input,
            }),
            WireBlock::Other => {}
        }
    }
    let stop = http::stop_reason(wire.stop_reason.as_deref(), !tool_calls.is_empty());
    let usage = wire.usage.map_or_else(Usage::default, Usage::from);
    Ok(ChatResponse {
        raw: serde_json::from_slice(body).ok(),
        message: Message::assistant(text, tool_calls),
        usage,
        stop,
    })
}

impl http::WireFormat for AnthropicModel {
    type Stream = stream::AnthropicStream;

    fn endpoint(&self) -> &http::Endpoint {
        &self.endpoint
    }

    fn authorize(
        &self,
        http_request: reqwest::RequestBuilder,
        _url: &str,
        _body: &[u8],
    ) -> Result<reqwest::RequestBuilder, LlmError> {
        let http_request = http_request.header("anthropic-version", API_VERSION);
        Ok(match &self.config.api_key {
            Some(key) => http_request.header("x-api-key", key),
            None => http_request,
        })
    }

    fn parse_response(provider: &str, body: &[u8]) -> Result<ChatResponse, LlmError> {
        parse_response(provider, body)
    }

    fn streamed_body(&self, mut body: Value) -> Value {
        if let Value::Object(fields) = &mut body {
            fields.insert("stream".into(), json!(true));
        }
        body
    }

    fn reply_stream(provider: &str, max_bytes: usize) -> Self::Stream {
        stream::AnthropicStream::new(provider, max_bytes)
    }
}

http::impl_chat_model!(AnthropicModel);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{StopReason, ToolDefinition};

    #[test]
    fn maps_a_conversation() {
        let model = AnthropicModel::new(AnthropicConfig::new("claude")).unwrap();
        let call = ToolCall {
            id: "toolu_1".into(),
            name: "f".into(),
            arguments: json!({"x": 1}),
        };
        let request = ChatRequest {
            messages: vec![
                Message::system("be brief"),
                Message::user("hi"),
                Message::assistant("", vec![call.clone()]),
                Message::tool_result(&call, "boom", true),
                Message::user("and?"),
            ],
            tools: vec![ToolDefinition {
                name: "f".into(),
                description: "d".into(),
                parameters: Value::Null,
                ..Default::default()
            }],
            tool_choice: ToolChoice::Required,
            ..ChatRequest::default()
        };
        let body = model.request_body(&request).unwrap();
        assert_eq!(body["system"], "be brief");
        assert_eq!(body["max_tokens"], 4096);
        assert_eq!(body["tool_choice"], json!({"type": "any"}));
        assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"x": 1}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "boom", "is_error": true},
                    {"type": "text", "text": "and?"}
                ]}
            ])
        );
        let mut bad = Message::tool_result(&call, "x", false);
        bad.tool_call_id = None;
        let request = ChatRequest {
            messages: vec![bad],
            ..ChatRequest::default()
        };
        assert!(matches!(
            model.request_body(&request),
            Err(LlmError::InvalidRequest(_))
        ));
    }

    #[test]
    fn ignores_unknown_blocks() {
        let r = parse_response(
            "p",
            br#"{"content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"ok"}],"stop_reason":"refusal"}"#,
        )
        .unwrap();
        assert_eq!(
            (r.message.content.as_str(), r.stop),
            ("ok", StopReason::Other)
        );
    }

    #[test]
    fn parallel_tool_calls_switch() {
        let model = AnthropicModel::new(AnthropicConfig::new("claude")).unwrap();
        let mut request = ChatRequest {
            messages: vec![Message::user("hi")],
            tools: vec![ToolDefinition {
                name: "f".into(),
                description: "d".into(),
                parameters: json!({"type": "object"}),
                ..Default::default()
            }],
            ..ChatRequest::default()
        };
        let body = model.request_body(&request).unwrap();
        assert_eq!(body["tool_choice"], json!({"type": "auto"}));
        request.parallel_tool_calls = Some(false);
        let body = model.request_body(&request).unwrap();
        assert_eq!(
            body["tool_choice"],
            json!({"type": "auto", "disable_parallel_tool_use": true})
        );
    }
}
