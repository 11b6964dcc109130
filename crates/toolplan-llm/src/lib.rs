//! # toolplan-llm
//!
//! One chat-model trait with tool calling and token usage ([`ChatModel`]), and its providers:
//! OpenAI-compatible chat completions, Anthropic Messages, Amazon Bedrock Converse, and (feature
//! `local`) an in-process GGUF model through llama.cpp whose replies are constrained by a grammar built
//! from the JSON Schema of the allowed replies.
//!
//! ## Layout
//!
//! * [`message`] — the provider-neutral vocabulary: messages, tool definitions and calls, usage.
//! * [`model`] — the [`ChatModel`] trait and the shared timeout/retry [`CallPolicy`].
//! * [`spec`] — model specs as users write them (`openai:gpt-4o-mini`, `local`, …).
//! * [`provider`] — the providers; [`connect`] makes the right one for a [`ModelSpec`]. The HTTP
//!   providers ([`provider::openai`], [`provider::anthropic`], [`provider::bedrock`]) keep only
//!   their wire format and share one request path (base-URL checks, client, timeout and retries
//!   under the [`CallPolicy`], the response-size cap, error mapping, settings from the
//!   environment). Each streams its replies ([`ChatModel::chat_streamed`]) through that path's
//!   bounded stream reader, with its own event mapping beside its wire format (`openai/stream`,
//!   `anthropic/stream`, `bedrock/stream` and `bedrock/frames`, the AWS event-stream framing).
//!   The local provider (`provider::local`) is split by job: model files and
//!   loading, prompt rendering, the reply schema and its grammar, sampling, KV-cache reuse,
//!   generation, and turning the reply into a [`ChatResponse`].
//! * [`error`] — [`LlmError`].

pub mod error;
pub mod message;
pub mod model;
pub mod provider;
pub mod spec;

pub use error::LlmError;
pub use message::{
    ChatRequest, ChatResponse, Message, ReplyDelta, ReplySink, ReplyStart, Role, StepReferences,
    StopReason, ToolCall, ToolChoice, ToolDefinition, Usage,
};
pub use model::{CallPolicy, ChatModel};
pub use spec::ModelSpec;

use std::sync::Arc;

/// How [`connect`] sets up a model beyond its [`ModelSpec`].
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// Another endpoint than the provider's default: an OpenAI-compatible server
    /// (`http://localhost:11434/v1`), a proxy, a test server. `None` uses the provider's
    /// environment variable (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`) or its official endpoint.
    pub base_url: Option<String>,
    /// Timeout and retries of every call.
    pub policy: CallPolicy,
}

/// Makes the chat model `spec` names, with keys and credentials from the environment
/// (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` /
/// `AWS_SESSION_TOKEN` / `AWS_REGION`). Nothing is sent: a missing key or a bad base URL is
/// reported here, an unreachable server on the first call.
pub async fn connect(
    spec: &ModelSpec,
    options: &ConnectOptions,
) -> Result<Arc<dyn ChatModel>, LlmError> {
    match spec {
        ModelSpec::OpenAi(model) => {
            let mut config =
                provider::OpenAiConfig::from_env(model.as_str(), options.base_url.clone())?;
            config.policy = options.policy.clone();
            Ok(Arc::new(provider::OpenAiModel::new(config)?))
        }
        ModelSpec::Anthropic(model) => {
            let mut config =
                provider::AnthropicConfig::from_env(model.as_str(), options.base_url.clone())?;
            config.policy = options.policy.clone();
            Ok(Arc::new(provider::AnthropicModel::new(config)?))
        }
        ModelSpec::Bedrock(model) => {
            let mut config =
                provider::BedrockConfig::from_env(model.as_str(), options.base_url.clone())?;
            config.policy = options.policy.clone();
            Ok(Arc::new(provider::BedrockModel::new(config)?))
        }
        #[cfg(feature = "local")]
        ModelSpec::Local(path) => provider::local::connect(path.as_deref(), options).await,
        #[cfg(not(feature = "local"))]
        ModelSpec::Local(_) => Err(LlmError::Config(
            "this build has no local model support (build with the `local` feature)".into(),
        )),
    }
}
