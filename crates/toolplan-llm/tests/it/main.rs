//! The integration tests of toolplan-llm, in one test binary:
//!
//! * `common` — a scripted loopback HTTP server and the failure-mode checks every HTTP provider
//!   must pass;
//! * `openai_wire`, `anthropic_wire`, `bedrock_wire` — each HTTP provider against that server: the
//!   requests it sends, the answers it understands, how it fails;
//! * `streaming_wire` — streamed calls of each HTTP provider against streams written in awkward
//!   pieces: the deltas, the response they add up to, cut and broken streams, limits, cancellation;
//! * `connect` — the right provider for each model spec, and clear errors;
//! * `local_model` (feature `local`) — the local GGUF provider against a real small model.

mod anthropic_wire;
mod bedrock_wire;
mod common;
mod connect;
#[cfg(feature = "local")]
mod local_model;
mod openai_wire;
mod streaming_wire;
