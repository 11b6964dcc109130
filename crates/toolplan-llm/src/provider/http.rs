//! What the HTTP providers share, so that each of them keeps only its wire format (request body,
//! response parsing, authentication):
//!
//! * [`endpoint`] — the one request path: checking the base URL, building the client, sending a
//!   JSON body under the model's [`CallPolicy`](crate::CallPolicy) (timeout, retries with backoff,
//!   cancellation), reading the answer up to `max_response_bytes`, and sorting failures into
//!   [`LlmError`](crate::LlmError)s.
//! * [`settings`] — where a provider's settings come from: environment variables, the base URL,
//!   secrets kept out of `Debug` output.
//! * [`wire`] — the pieces of the message mapping that several wire formats have in common, and
//!   decoding JSON answers.
//! * [`stream`] — what streamed answers share: reading the body chunk by chunk under the limits,
//!   splitting Server-Sent Events, the [`ReplyStream`] a provider's event mapping implements, and
//!   retries only until a piece of the reply was sent.

mod endpoint;
mod settings;
mod stream;
mod wire;

pub(crate) use endpoint::{
    Endpoint, Site, WireFormat, chain, chat, chat_streamed, impl_chat_model, shorten,
};
pub(crate) use settings::{base_url, env_var, given, redacted};
pub(crate) use stream::{ReplyStream, SseEvent, SseSplitter, StreamedReply, cut};
pub(crate) use wire::{
    arguments_object, bad_answer, decode, messages, parameters_schema, push_blocks, stop_reason,
    tool_call_id,
};
