//! What the HTTP providers share: the client, sending a request and sorting its failures into
//! [`LlmError`]s, decoding JSON answers, reading the environment, and the pieces of the message
//! mapping that several wire formats have in common.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::error::LlmError;
use crate::message::{StopReason, ToolCall};

/// How much of an error body is kept in an [`LlmError`].
const MAX_ERROR_BODY: usize = 2000;

/// How long connecting may take (the whole call is bounded by the [`crate::CallPolicy`]).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Builds the HTTP client of one model.
pub(crate) fn client(provider: &str) -> Result<reqwest::Client, LlmError> {
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(concat!("toolplan/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| {
            LlmError::Config(format!(
                "{provider}: cannot build the HTTP client: {}",
                chain(&e)
            ))
        })
}

/// Sends a request and returns the body of a successful answer. Connection failures become
/// [`LlmError::Transport`], error statuses [`LlmError::Http`] with the (shortened) body.
/// The body is read up to `max_bytes` ([`crate::CallPolicy::max_response_bytes`]): a longer one is
/// [`LlmError::TooLarge`] (an error body is cut at that size instead).
pub(crate) async fn send(
    provider: &str,
    request: reqwest::RequestBuilder,
    max_bytes: usize,
) -> Result<Vec<u8>, LlmError> {
    let transport = |e: reqwest::Error| LlmError::Transport {
        provider: provider.to_owned(),
        message: chain(&e),
    };
    let mut response = request.send().await.map_err(transport)?;
    let status = response.status();
    let mut body: Vec<u8> = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(transport)? {
        if body.len().saturating_add(chunk.len()) > max_bytes {
            if !status.is_success() {
                break;
            }
            return Err(LlmError::TooLarge {
                provider: provider.to_owned(),
                limit: max_bytes,
            });
        }
        body.extend_from_slice(&chunk);
    }
    if !status.is_success() {
        return Err(LlmError::Http {
            provider: provider.to_owned(),
            status: status.as_u16(),
            body: shorten(&String::from_utf8_lossy(&body), MAX_ERROR_BODY),
        });
    }
    Ok(body)
}

/// Decodes a JSON answer into the provider's response type.
pub(crate) fn decode<T: DeserializeOwned>(provider: &str, body: &[u8]) -> Result<T, LlmError> {
    serde_json::from_slice(body).map_err(|e| LlmError::Decode {
        provider: provider.to_owned(),
        message: format!(
            "{e} (body: {})",
            shorten(&String::from_utf8_lossy(body), 500)
        ),
    })
}

/// A [`LlmError::Decode`] for an answer that parsed but does not make sense.
pub(crate) fn bad_answer(provider: &str, message: impl Into<String>) -> LlmError {
    LlmError::Decode {
        provider: provider.to_owned(),
        message: message.into(),
    }
}

/// An error with its causes, `outer: inner: innermost`.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// `text` cut to at most `max` characters, with a marker when it was cut.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}… ({} bytes in all)", &text[..cut], text.len()),
        None => text.to_owned(),
    }
}

/// The value of an environment variable, when it is set and not blank.
pub(crate) fn env_var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// `base` and `path` joined by exactly one `/`.
pub(crate) fn join_url(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// Checks that a base URL is an absolute `http(s)` URL with a host.
/// With `credentials` (an API key, a signature), plain http is allowed to loopback hosts only: the
/// credentials would otherwise cross the network in clear text.
pub(crate) fn check_base_url(
    provider: &str,
    base_url: &str,
    credentials: bool,
) -> Result<reqwest::Url, LlmError> {
    let url = reqwest::Url::parse(base_url)
        .map_err(|e| LlmError::Config(format!("{provider}: invalid base URL {base_url:?}: {e}")))?;
    let Some(host) = url.host_str().map(str::to_owned) else {
        return Err(LlmError::Config(format!(
            "{provider}: invalid base URL {base_url:?}: expected http://HOST… or https://HOST…"
        )));
    };
    if !matches!(url.scheme(), "http" | "https") {
        return Err(LlmError::Config(format!(
            "{provider}: invalid base URL {base_url:?}: expected http://HOST… or https://HOST…"
        )));
    }
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if credentials && url.scheme() == "http" && !loopback {
        return Err(LlmError::Config(format!(
            "{provider}: the credentials would be sent in clear text to {host}: use https://, or a loopback address for a local server"
        )));
    }
    Ok(url)
}

/// The provider's label in errors: its name, plus the base URL when it is not the default one.
pub(crate) fn label(provider: &str, base_url: &str, default_base_url: &str) -> String {
    if base_url.trim_end_matches('/') == default_base_url.trim_end_matches('/') {
        provider.to_owned()
    } else {
        format!("{provider} at {base_url}")
    }
}

/// A tool's parameter schema; a missing schema becomes the schema of an empty object (providers
/// that require one reject `null`).
pub(crate) fn parameters_schema(parameters: &Value) -> Value {
    match parameters {
        Value::Null => json!({"type": "object", "properties": {}}),
        other => other.clone(),
    }
}

/// A tool call's arguments as a JSON object, for providers whose wire format requires one.
/// Arguments that are not an object (text the model sent that was not JSON) are wrapped as
/// `{"arguments": …}` so nothing is lost.
pub(crate) fn arguments_object(call: &ToolCall) -> Value {
    match &call.arguments {
        Value::Object(_) => call.arguments.clone(),
        Value::Null => Value::Object(Map::new()),
        other => json!({ "arguments": other }),
    }
}

/// Messages of a provider that wants strictly alternating roles with content blocks: appends
/// `blocks` as a message of `role`, or to the last message when it has the same role (so the
/// results of several tool calls land in one user message).
pub(crate) fn push_blocks(
    messages: &mut Vec<(&'static str, Vec<Value>)>,
    role: &'static str,
    blocks: Vec<Value>,
) {
    if blocks.is_empty() {
        return;
    }
    match messages.last_mut() {
        Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
        _ => messages.push((role, blocks)),
    }
}

/// The tool call id of a tool message, or an error naming the message.
pub(crate) fn tool_call_id<'a>(
    provider: &str,
    index: usize,
    id: Option<&'a str>,
) -> Result<&'a str, LlmError> {
    match id {
        Some(id) if !id.is_empty() => Ok(id),
        _ => Err(LlmError::InvalidRequest(format!(
            "{provider}: message {index} is a tool result without the id of the tool call it answers"
        ))),
    }
}

/// The stop reason of Anthropic Messages and Bedrock Converse, which name them alike
/// (`end_turn`, `stop_sequence`, `tool_use`, `max_tokens`); without one, tool calls mean tool use.
pub(crate) fn stop_reason(reason: Option<&str>, has_tool_calls: bool) -> StopReason {
    match reason {
        Some("end_turn" | "stop_sequence") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        None if has_tool_calls => StopReason::ToolUse,
        None => StopReason::EndTurn,
        Some(_) => StopReason::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortens_on_char_boundaries() {
        assert_eq!(shorten("  abc ", 5), "abc");
        let cut = shorten("ééééé", 2);
        assert!(cut.starts_with("éé…"), "{cut}");
        assert!(cut.contains("10 bytes"), "{cut}");
    }

    #[test]
    fn joins_urls_and_checks_them() {
        assert_eq!(join_url("http://h/v1/", "/chat"), "http://h/v1/chat");
        assert_eq!(join_url("http://h/v1", "chat"), "http://h/v1/chat");
        assert!(check_base_url("p", "http://127.0.0.1:8080/v1", true).is_ok());
        for bad in ["", "localhost:8080", "ftp://h", "unix:/x"] {
            assert!(
                matches!(check_base_url("p", bad, false), Err(LlmError::Config(_))),
                "{bad}"
            );
        }
        // A key goes over plain http to loopback only.
        for local in [
            "http://localhost:11434/v1",
            "http://[::1]:80",
            "https://example.com",
        ] {
            assert!(check_base_url("p", local, true).is_ok(), "{local}");
        }
        let e = check_base_url("p", "http://models.example.com/v1", true).unwrap_err();
        assert!(
            e.to_string()
                .contains("in clear text to models.example.com"),
            "{e}"
        );
        assert!(check_base_url("p", "http://models.example.com/v1", false).is_ok());
    }

    #[test]
    fn merges_blocks_of_the_same_role() {
        let mut m = Vec::new();
        push_blocks(&mut m, "user", vec![json!(1)]);
        push_blocks(&mut m, "user", vec![json!(2)]);
        push_blocks(&mut m, "assistant", vec![]);
        push_blocks(&mut m, "assistant", vec![json!(3)]);
        assert_eq!(
            m,
            vec![
                ("user", vec![json!(1), json!(2)]),
                ("assistant", vec![json!(3)])
            ]
        );
    }

    #[test]
    fn wraps_arguments_that_are_not_objects() {
        let call = |arguments| ToolCall {
            id: "c".into(),
            name: "t".into(),
            arguments,
        };
        assert_eq!(arguments_object(&call(json!({"a": 1}))), json!({"a": 1}));
        assert_eq!(arguments_object(&call(Value::Null)), json!({}));
        assert_eq!(
            arguments_object(&call(json!("oops"))),
            json!({"arguments": "oops"})
        );
    }
}
