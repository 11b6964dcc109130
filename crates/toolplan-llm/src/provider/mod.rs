//! The providers: each turns a [`ChatRequest`](crate::ChatRequest) into its wire format, sends it
//! under the model's [`CallPolicy`](crate::CallPolicy) and turns the answer back into a
//! [`ChatResponse`](crate::ChatResponse).
//!
//! * [`openai`] — OpenAI-compatible chat completions (OpenAI, Ollama, vLLM, llama.cpp server,
//!   LM Studio …).
//! * [`anthropic`] — Anthropic Messages.
//! * [`bedrock`] — Amazon Bedrock Converse, signed with SigV4.
//! * `local` (feature `local`) — an in-process GGUF model through llama.cpp.
//!
//! The three HTTP providers keep only their wire format (request body, response parsing,
//! authentication); the request path they share (base-URL checks, client, timeout, retries with
//! backoff, the response-size cap, error mapping, settings from the environment) is the private
//! module `http`; so is the reading of streamed answers, whose events each provider maps in its
//! own `stream` module.

pub mod anthropic;
pub mod bedrock;
mod http;
#[cfg(feature = "local")]
pub mod local;
pub mod openai;

pub use anthropic::{AnthropicConfig, AnthropicModel};
pub use bedrock::{AwsCredentials, BedrockConfig, BedrockModel};
pub use openai::{OpenAiConfig, OpenAiModel};
