//! Amazon Bedrock Converse: `POST {base_url}/model/{modelId}/converse`, signed with AWS SigV4
//! (service `bedrock`) by the `aws-sigv4` crate.
//!
//! The base URL defaults to `https://bedrock-runtime.{region}.amazonaws.com`. The model id is
//! percent-encoded in the path (model ids contain `:`, inference-profile ARNs also `/`), and the
//! signature covers exactly the path that is sent.
//!
//! Mapping:
//! * system messages → `system: [{text}]`;
//! * tools → `toolConfig: {tools: [{toolSpec: {name, description, inputSchema: {json}}}]}`, with
//!   `toolChoice: {any: {}}` when a tool call is required ([`ToolChoice::Auto`] is the API's
//!   default and is not sent, as not every model accepts `toolChoice`; [`ToolChoice::None`] sends
//!   no tools unless the conversation already has tool blocks, which need the `toolConfig`);
//! * an assistant message → content blocks `{text}` and `{toolUse: {toolUseId, name, input}}`;
//! * tool results → `{toolResult: {toolUseId, content: [{json}] or [{text}], status}}` blocks in a
//!   user message (`json` when the result is a JSON object), `status: "error"` for failed calls;
//!   consecutive messages of the same role are merged, as the API wants roles to alternate;
//! * `inferenceConfig: {maxTokens, temperature}`;
//! * `usage.inputTokens` / `usage.outputTokens` → [`Usage`];
//! * `stopReason` `end_turn` / `stop_sequence` → [`StopReason::EndTurn`](crate::StopReason::EndTurn), `tool_use` →
//!   [`StopReason::ToolUse`](crate::StopReason::ToolUse), `max_tokens` → [`StopReason::MaxTokens`](crate::StopReason::MaxTokens), anything else (guardrails,
//!   content filters) → [`StopReason::Other`](crate::StopReason::Other).
//! * A streamed call goes to `POST {base_url}/model/{modelId}/converse-stream` with the same body,
//!   signed the same way; its answer comes in the AWS event-stream framing (the `frames` module)
//!   and its events are read by the `stream` module.

mod frames;
mod stream;

use std::fmt;
use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::http;
use crate::error::LlmError;
use crate::message::{ChatRequest, ChatResponse, Message, Role, ToolCall, ToolChoice, Usage};
use crate::model::CallPolicy;

/// The SigV4 service name of the Bedrock runtime.
pub const SIGNING_SERVICE: &str = "bedrock";

/// The token limit used when neither the request nor the config sets one.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Characters left as they are in a path segment: RFC 3986 unreserved.
const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// AWS credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: String,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: String,
    /// `AWS_SESSION_TOKEN`, for temporary credentials.
    pub session_token: Option<String>,
}

impl fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl AwsCredentials {
    /// Credentials from `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and (optional)
    /// `AWS_SESSION_TOKEN`.
    pub fn from_env() -> Result<Self, LlmError> {
        match (http::env_var("AWS_ACCESS_KEY_ID"), http::env_var("AWS_SECRET_ACCESS_KEY")) {
            (Some(access_key_id), Some(secret_access_key)) => Ok(Self {
                access_key_id,
                secret_access_key,
                session_token: http::env_var("AWS_SESSION_TOKEN"),
            }),
            _ => Err(LlmError::Config(
                "bedrock: AWS credentials not found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY \
                 (and AWS_SESSION_TOKEN for temporary credentials)"
                    .into(),
            )),
        }
    }
}

/// How to reach Bedrock.
#[derive(Clone, Debug)]
pub struct BedrockConfig {
    /// The runtime endpoint (`https://bedrock-runtime.us-east-1.amazonaws.com`).
    pub base_url: String,
    /// The region requests are signed for.
    pub region: String,
    /// The credentials requests are signed with.
    pub credentials: AwsCredentials,
    /// The model id or inference-profile id/ARN (`anthropic.claude-3-haiku-20240307-v1:0`).
    pub model: String,
    /// Timeout and retries of each call.
    pub policy: CallPolicy,
    /// Token limit used when a request sets none.
    pub max_tokens: u32,
}

impl BedrockConfig {
    /// A config for `model` in `region` on its default endpoint, with the default policy.
    pub fn new(
        model: impl Into<String>,
        region: impl Into<String>,
        credentials: AwsCredentials,
    ) -> Self {
        let region = region.into();
        Self {
            base_url: default_base_url(&region),
            region,
            credentials,
            model: model.into(),
            policy: CallPolicy::default(),
            max_tokens: DEFAULT_MAX_TOKENS,
        }
    }

    /// A config from the environment: credentials as in [`AwsCredentials::from_env`], the region
    /// from `AWS_REGION` or `AWS_DEFAULT_REGION`, the endpoint from `base_url` or the region.
    pub fn from_env(model: impl Into<String>, base_url: Option<String>) -> Result<Self, LlmError> {
        let region = http::env_var("AWS_REGION")
            .or_else(|| http::env_var("AWS_DEFAULT_REGION"))
            .ok_or_else(|| {
                LlmError::Config(
                    "bedrock: no AWS region: set AWS_REGION or AWS_DEFAULT_REGION".into(),
                )
            })?;
        let mut config = Self::new(model, region, AwsCredentials::from_env()?);
        if let Some(base_url) = http::given(base_url) {
            config.base_url = base_url;
        }
        Ok(config)
    }
}

/// The Bedrock runtime endpoint of `region`.
pub fn default_base_url(region: &str) -> String {
    format!("https://bedrock-runtime.{region}.amazonaws.com")
}

/// A chat model behind the Bedrock Converse API.
#[derive(Debug)]
pub struct BedrockModel {
    config: BedrockConfig,
    endpoint: http::Endpoint,
}

impl BedrockModel {
    /// A model for `config` (checks the base URL and region and builds the HTTP client; sends
    /// nothing).
    pub fn new(config: BedrockConfig) -> Result<Self, LlmError> {
        let model = utf8_percent_encode(&config.model, PATH_SEGMENT);
        let path = format!("model/{model}/converse");
        let stream_path = format!("model/{model}/converse-stream");
        let endpoint = http::Endpoint::new(&http::Site {
            provider: "bedrock",
            base_url: &config.base_url,
            default_base_url: &default_base_url(&config.region),
            path: &path,
            stream_path: &stream_path,
            credentials: true,
            model: &config.model,
            policy: &config.policy,
            model_noun: "id",
        })?;
        if config.region.trim().is_empty() {
            return Err(LlmError::Config("bedrock: the region is empty".into()));
        }
        Ok(Self { config, endpoint })
    }

    /// The config this model was made with.
    pub fn config(&self) -> &BedrockConfig {
        &self.config
    }

    /// The URL requests go to (with the model id percent-encoded).
    pub fn url(&self) -> &str {
        self.endpoint.url()
    }

    /// The URL streamed requests go to (ConverseStream).
    pub fn stream_url(&self) -> &str {
        self.endpoint.stream_url()
    }

    /// The JSON body of the Converse request for `request`.
    pub fn request_body(&self, request: &ChatRequest) -> Result<Value, LlmError> {
        let mut system = Vec::new();
        let mut messages: Vec<(&'static str, Vec<Value>)> = Vec::new();
        let mut has_tool_blocks = false;
        for (i, m) in request.messages.iter().enumerate() {
            match m.role {
                Role::System => {
                    if !m.content.trim().is_empty() {
                        system.push(json!({"text": m.content}));
                    }
                }
                Role::User => http::push_blocks(&mut messages, "user", text_block(&m.content)),
                Role::Assistant => {
                    let mut blocks = text_block(&m.content);
                    blocks.extend(m.tool_calls.iter().map(tool_use_block));
                    has_tool_blocks |= !m.tool_calls.is_empty();
                    http::push_blocks(&mut messages, "assistant", blocks);
                }
                Role::Tool => {
                    let id =
                        http::tool_call_id(self.endpoint.label(), i, m.tool_call_id.as_deref())?;
                    let content = match serde_json::from_str::<Value>(&m.content) {
                        Ok(value @ Value::Object(_)) => json!({"json": value}),
                        _ => json!({"text": m.content}),
                    };
                    let mut result = json!({"toolUseId": id, "content": [content]});
                    if m.is_error {
                        result["status"] = json!("error");
                    }
                    has_tool_blocks = true;
                    http::push_blocks(&mut messages, "user", vec![json!({ "toolResult": result })]);
                }
            }
        }
        let mut body = Map::new();
        body.insert("messages".into(), http::messages(messages));
        if !system.is_empty() {
            body.insert("system".into(), Value::Array(system));
        }
        let mut inference = Map::new();
        inference.insert(
            "maxTokens".into(),
            json!(request.max_tokens.unwrap_or(self.config.max_tokens)),
        );
        if let Some(t) = request.temperature {
            inference.insert("temperature".into(), json!(t));
        }
        body.insert("inferenceConfig".into(), Value::Object(inference));
        let send_tools = match request.tool_choice {
            ToolChoice::None => has_tool_blocks,
            ToolChoice::Auto | ToolChoice::Required => true,
        };
        if send_tools && !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    json!({"toolSpec": {
                        "name": t.name,
                        "description": t.description,
                        "inputSchema": {"json": http::parameters_schema(&t.parameters)},
                    }})
                })
                .collect();
            let mut tool_config = json!({ "tools": tools });
            if request.tool_choice == ToolChoice::Required {
                tool_config["toolChoice"] = json!({"any": {}});
            }
            body.insert("toolConfig".into(), tool_config);
        }
        Ok(Value::Object(body))
    }

    /// The SigV4 headers (`authorization`, `x-amz-date`, `x-amz-security-token`) for a POST of
    /// `body` to `url` (one of this model's URLs) at `time`.
    fn signature_headers(
        &self,
        url: &str,
        body: &[u8],
        time: SystemTime,
    ) -> Result<Vec<(String, String)>, LlmError> {
        let credentials = &self.config.credentials;
        let identity: Identity = Credentials::new(
            credentials.access_key_id.clone(),
            credentials.secret_access_key.clone(),
            credentials.session_token.clone(),
            None,
            "toolplan",
        )
        .into();
        let signing_error = |e: &dyn std::error::Error| {
            LlmError::Config(format!(
                "{}: cannot sign the request: {}",
                self.endpoint.label(),
                http::chain(e)
            ))
        };
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.config.region)
            .name(SIGNING_SERVICE)
            .time(time)
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| signing_error(&e))?
            .into();
        let signable = SignableRequest::new(
            "POST",
            url,
            [("content-type", "application/json")].into_iter(),
            SignableBody::Bytes(body),
        )
        .map_err(|e| signing_error(&e))?;
        let (instructions, _signature) = sign(signable, &params)
            .map_err(|e| signing_error(&e))?
            .into_parts();
        Ok(instructions
            .headers()
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect())
    }
}

/// A text block, or none for empty text (the API rejects blank text blocks).
fn text_block(text: &str) -> Vec<Value> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![json!({ "text": text })]
    }
}

fn tool_use_block(call: &ToolCall) -> Value {
    json!({"toolUse": {"toolUseId": call.id, "name": call.name, "input": http::arguments_object(call)}})
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireResponse {
    output: WireOutput,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireOutput {
    message: WireMessage,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Vec<WireBlock>,
}

/// A content block: a union keyed by its one field; blocks of other kinds (reasoning …) are
/// ignored.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireBlock {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_use: Option<WireToolUse>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireToolUse {
    tool_use_id: String,
    name: String,
    #[serde(default)]
    input: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_write_input_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    /// Input tokens count cache reads and writes too.
    fn from(u: WireUsage) -> Self {
        Usage {
            input_tokens: u.input_tokens.unwrap_or(0)
                + u.cache_read_input_tokens.unwrap_or(0)
                + u.cache_write_input_tokens.unwrap_or(0),
            output_tokens: u.output_tokens.unwrap_or(0),
        }
    }
}

/// Turns a Converse answer into a [`ChatResponse`].
fn parse_response(provider: &str, body: &[u8]) -> Result<ChatResponse, LlmError> {
    let wire: WireResponse = http::decode(provider, body)?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in wire.output.message.content {
        if let Some(t) = block.text {
            text.push_str(&t);
        }
        if let Some(call) = block.tool_use {
            tool_calls.push(ToolCall {
                id: call.tool_use_id,
                name: call.name,
                arguments: match call.input {
                    Value::Null => Value::Object(Map::new()),
                    other => other,
                },
            });
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

impl http::WireFormat for BedrockModel {
    type Stream = stream::BedrockStream;

    fn endpoint(&self) -> &http::Endpoint {
        &self.endpoint
    }

    fn authorize(
        &self,
        http_request: reqwest::RequestBuilder,
        url: &str,
        body: &[u8],
    ) -> Result<reqwest::RequestBuilder, LlmError> {
        // Signed per attempt: a signature is valid for a few minutes only.
        let mut http_request = http_request;
        for (name, value) in self.signature_headers(url, body, SystemTime::now())? {
            http_request = http_request.header(name, value);
        }
        Ok(http_request)
    }

    fn parse_response(provider: &str, body: &[u8]) -> Result<ChatResponse, LlmError> {
        parse_response(provider, body)
    }

    /// ConverseStream takes the Converse body as it is: the URL asks for the stream.
    fn streamed_body(&self, body: Value) -> Value {
        body
    }

    fn reply_stream(provider: &str, max_bytes: usize) -> Self::Stream {
        stream::BedrockStream::new(provider, max_bytes)
    }
}

http::impl_chat_model!(BedrockModel);

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(session_token: Option<&str>) -> AwsCredentials {
        AwsCredentials {
            access_key_id: "AKID".into(),
            secret_access_key: "SECRET".into(),
            session_token: session_token.map(str::to_owned),
        }
    }

    #[test]
    fn encodes_the_model_id_in_the_path() {
        let model = BedrockModel::new(BedrockConfig::new(
            "anthropic.claude-3-haiku-20240307-v1:0",
            "eu-west-1",
            credentials(None),
        ))
        .unwrap();
        assert_eq!(
            model.url(),
            "https://bedrock-runtime.eu-west-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
        );
        let arn = BedrockModel::new(BedrockConfig::new(
            "arn:aws:bedrock:us-east-1:1:inference-profile/x",
            "us-east-1",
            credentials(None),
        ))
        .unwrap();
        assert!(arn.url().ends_with(
            "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fx/converse"
        ));
        assert!(arn.stream_url().ends_with(
            "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fx/converse-stream"
        ));
    }

    #[test]
    fn signs_with_the_session_token() {
        let model = BedrockModel::new(BedrockConfig::new(
            "m:0",
            "us-west-2",
            credentials(Some("TOKEN")),
        ))
        .unwrap();
        let headers = model
            .signature_headers(model.url(), b"{}", SystemTime::UNIX_EPOCH)
            .unwrap();
        let get = |n: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(n))
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("x-amz-date").as_deref(), Some("19700101T000000Z"));
        assert_eq!(get("x-amz-security-token").as_deref(), Some("TOKEN"));
        let auth = get("authorization").unwrap();
        assert!(
            auth.starts_with(
                "AWS4-HMAC-SHA256 Credential=AKID/19700101/us-west-2/bedrock/aws4_request, "
            ),
            "{auth}"
        );
        assert!(
            auth.contains("SignedHeaders=content-type;host;x-amz-date;x-amz-security-token"),
            "{auth}"
        );
        assert!(!format!("{:?}", model.config()).contains("SECRET"));
    }

    #[test]
    fn tool_choice_none_keeps_tools_only_when_the_history_needs_them() {
        let model =
            BedrockModel::new(BedrockConfig::new("m", "us-east-1", credentials(None))).unwrap();
        let tool = crate::message::ToolDefinition {
            name: "f".into(),
            description: "d".into(),
            parameters: json!({"type": "object"}),
            ..Default::default()
        };
        let mut request = ChatRequest {
            messages: vec![Message::user("hi")],
            tools: vec![tool],
            tool_choice: ToolChoice::None,
            ..ChatRequest::default()
        };
        assert!(
            model
                .request_body(&request)
                .unwrap()
                .get("toolConfig")
                .is_none()
        );
        let call = ToolCall {
            id: "t1".into(),
            name: "f".into(),
            arguments: json!({}),
        };
        request
            .messages
            .push(Message::assistant("", vec![call.clone()]));
        request
            .messages
            .push(Message::tool_result(&call, "[1,2]", false));
        let body = model.request_body(&request).unwrap();
        assert!(body["toolConfig"].get("toolChoice").is_none());
        assert_eq!(
            body["messages"][2]["content"][0]["toolResult"],
            json!({"toolUseId": "t1", "content": [{"text": "[1,2]"}]})
        );
    }
}
