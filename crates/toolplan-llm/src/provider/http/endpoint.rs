//! The one request path of the HTTP providers: a model's [`Endpoint`] checks its base URL and builds
//! its client; [`chat`] sends each call's JSON body under the model's [`CallPolicy`] (timeout,
//! retries with backoff, cancellation), with what a provider's [`WireFormat`] adds, and
//! [`chat_streamed`] does the same for a streamed call, reading the answer with the provider's
//! [`ReplyStream`] as it comes. The answer is read up to `max_response_bytes`, and failures become
//! [`LlmError`]s: connection failures [`LlmError::Transport`], error statuses [`LlmError::Http`]
//! with the (shortened) body, an answer too large [`LlmError::TooLarge`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::stream::{BodyReader, ReplyStream, run_streamed};
use crate::error::LlmError;
use crate::message::{ChatResponse, ReplyDelta, ReplySink};
use crate::model::CallPolicy;

/// How much of an error body is kept in an [`LlmError`].
const MAX_ERROR_BODY: usize = 2000;

/// How long connecting may take (the whole call is bounded by the [`CallPolicy`]).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a provider's model lives, as [`Endpoint::new`] checks it.
pub(crate) struct Site<'a> {
    /// The provider's name, also the prefix of the model's name (`openai`).
    pub(crate) provider: &'static str,
    /// The API base the requests go to.
    pub(crate) base_url: &'a str,
    /// The provider's official API base (errors name a base URL only when it is another one).
    pub(crate) default_base_url: &'a str,
    /// The path of the call below the base URL (`chat/completions`).
    pub(crate) path: &'a str,
    /// The path of a streamed call below the base URL (the same one when the request body asks
    /// for a stream).
    pub(crate) stream_path: &'a str,
    /// Whether requests carry credentials (an API key, a signature): then plain http is allowed to
    /// loopback hosts only.
    pub(crate) credentials: bool,
    /// The model name or id.
    pub(crate) model: &'a str,
    /// What the provider calls it in errors (`name`, `id`).
    pub(crate) model_noun: &'static str,
    /// Timeout, retries and response-size cap of each call.
    pub(crate) policy: &'a CallPolicy,
}

/// One model's HTTP endpoint: its client, the URL its calls go to, and its names.
#[derive(Debug)]
pub(crate) struct Endpoint {
    client: reqwest::Client,
    url: String,
    stream_url: String,
    name: String,
    label: String,
    policy: CallPolicy,
}

impl Endpoint {
    /// Checks the base URL and the model name, and builds the client (sends nothing).
    pub(crate) fn new(site: &Site<'_>) -> Result<Self, LlmError> {
        check_base_url(site.provider, site.base_url, site.credentials)?;
        if site.model.trim().is_empty() {
            return Err(LlmError::Config(format!(
                "{}: the model {} is empty",
                site.provider, site.model_noun
            )));
        }
        let label = label(site.provider, site.base_url, site.default_base_url);
        Ok(Self {
            client: client(&label)?,
            url: join_url(site.base_url, site.path),
            stream_url: join_url(site.base_url, site.stream_path),
            name: format!("{}:{}", site.provider, site.model),
            label,
            policy: site.policy.clone(),
        })
    }

    /// The URL the calls go to.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The URL the streamed calls go to.
    pub(crate) fn stream_url(&self) -> &str {
        &self.stream_url
    }

    /// The model's name, `provider:model`.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The provider's label in errors: its name, plus the base URL when it is not the default one.
    pub(crate) fn label(&self) -> &str {
        &self.label
    }
}

/// What differs between the HTTP providers besides the request body: authentication and the
/// answer's format, whole or streamed. [`chat`] and [`chat_streamed`] do the rest.
pub(crate) trait WireFormat: Sync {
    /// The reading of a streamed answer (the provider's events, beside its wire format).
    type Stream: ReplyStream;

    /// The model's endpoint.
    fn endpoint(&self) -> &Endpoint;

    /// `http_request` to `url` with the provider's headers (authentication, API version). Runs
    /// again on every attempt, with the URL and body a signature covers.
    fn authorize(
        &self,
        http_request: reqwest::RequestBuilder,
        url: &str,
        body: &[u8],
    ) -> Result<reqwest::RequestBuilder, LlmError>;

    /// The answer `body` as a [`ChatResponse`]; `provider` is the label for errors.
    fn parse_response(provider: &str, body: &[u8]) -> Result<ChatResponse, LlmError>;

    /// The request body of a streamed call, from the body of the same call unstreamed.
    fn streamed_body(&self, body: Value) -> Value;

    /// A reader of one streamed answer for `provider` (the label in errors), holding at most
    /// `max_bytes` of one event.
    fn reply_stream(provider: &str, max_bytes: usize) -> Self::Stream;

    /// Whether a 400 or 422 to a streamed request, before anything was streamed, is asked again
    /// unstreamed: servers that speak the format may not know its streaming options (default: no).
    fn unstreamed_on_refusal(&self) -> bool {
        false
    }
}

/// One chat call of an HTTP provider: POSTs `body` as JSON under the endpoint's [`CallPolicy`]
/// (timeout, retries with backoff, cancellation) and parses the answer.
pub(crate) async fn chat<W: WireFormat>(
    model: &W,
    body: &Value,
    cancel: &CancellationToken,
) -> Result<ChatResponse, LlmError> {
    let endpoint = model.endpoint();
    let body = serde_json::to_vec(body)
        .map_err(|e| LlmError::InvalidRequest(format!("{}: {e}", endpoint.label)))?;
    let policy = &endpoint.policy;
    policy
        .run(cancel, || async {
            let http_request = endpoint
                .client
                .post(&endpoint.url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
            let http_request = model.authorize(http_request, &endpoint.url, &body)?;
            let response = open(&endpoint.label, http_request, policy.max_response_bytes).await?;
            let answer =
                read_body(&endpoint.label, response, policy.max_response_bytes, cancel).await?;
            W::parse_response(&endpoint.label, &answer)
        })
        .await
}

/// One streamed chat call of an HTTP provider: POSTs the streamed form of `body` to the
/// endpoint's stream URL and reads the answer with the provider's [`ReplyStream`] as it comes,
/// sending each [`ReplyDelta`] to `sink` (a closed sink is ignored). The response is the one
/// [`chat`] would give, except that its `raw` body is `None` (a stream has no one body; a whole
/// answer, below, keeps its own).
///
/// Bounded as [`chat`]: each attempt under the policy's timeout, the body read up to
/// `max_response_bytes` (one event too), cancellation honoured between chunks. An error status
/// before the stream fails as in [`chat`]. A failed attempt is retried as in [`chat`] only while
/// nothing has been sent; after that the failure ends the call ([`run_streamed`]). A stream that
/// ends before its end marker is an error, never a partial response. A server that answers with a
/// whole JSON body instead of a stream (one that ignores the request for a stream) is read as
/// [`chat`] reads it, and its reply sent whole ([`ReplyDelta::send_whole`]); where the format
/// says so ([`WireFormat::unstreamed_on_refusal`]), one that refuses the streamed request with 400
/// or 422 before anything was streamed is asked again unstreamed, its reply sent whole.
pub(crate) async fn chat_streamed<W: WireFormat>(
    model: &W,
    body: &Value,
    sink: &ReplySink,
    cancel: &CancellationToken,
) -> Result<ChatResponse, LlmError> {
    let endpoint = model.endpoint();
    let label = endpoint.label.as_str();
    let bytes = serde_json::to_vec(&model.streamed_body(body.clone()))
        .map_err(|e| LlmError::InvalidRequest(format!("{label}: {e}")))?;
    let policy = &endpoint.policy;
    let max_bytes = policy.max_response_bytes;
    let sent = AtomicBool::new(false);
    let streamed = run_streamed(policy, cancel, &sent, || async {
        let http_request = endpoint
            .client
            .post(&endpoint.stream_url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(bytes.clone());
        let http_request = model.authorize(http_request, &endpoint.stream_url, &bytes)?;
        let response = open(label, http_request, max_bytes).await?;
        if is_json(&response) {
            let answer = read_body(label, response, max_bytes, cancel).await?;
            let whole = W::parse_response(label, &answer)?;
            sent.store(true, Ordering::SeqCst);
            ReplyDelta::send_whole(&whole.message, sink);
            return Ok(whole);
        }
        let mut reader = BodyReader::new(label, response, max_bytes, cancel);
        let mut stream = W::reply_stream(label, max_bytes);
        let mut deltas = Vec::new();
        while !stream.finished() {
            let Some(chunk) = reader.next().await? else {
                break;
            };
            stream.feed(&chunk, &mut deltas)?;
            if !deltas.is_empty() {
                sent.store(true, Ordering::SeqCst);
            }
            for delta in deltas.drain(..) {
                // A caller that stopped listening does not stop the call.
                let _ = sink.send(delta);
            }
        }
        stream.finish()
    })
    .await;
    match streamed {
        Err(LlmError::Http {
            status: 400 | 422, ..
        }) if model.unstreamed_on_refusal() && !sent.load(Ordering::SeqCst) => {
            let whole = chat(model, body, cancel).await?;
            ReplyDelta::send_whole(&whole.message, sink);
            Ok(whole)
        }
        other => other,
    }
}

/// Whether an answer says its body is one JSON document (not a stream of events).
fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

/// Implements [`ChatModel`](crate::ChatModel) for an HTTP provider's model: its name is its
/// endpoint's, and a call sends the body of its `request_body` method through [`chat`], a
/// streamed call through [`chat_streamed`].
macro_rules! impl_chat_model {
    ($model:ty) => {
        #[async_trait::async_trait]
        impl $crate::model::ChatModel for $model {
            fn name(&self) -> &str {
                $crate::provider::http::WireFormat::endpoint(self).name()
            }

            async fn chat(
                &self,
                request: &$crate::message::ChatRequest,
                cancel: &tokio_util::sync::CancellationToken,
            ) -> Result<$crate::message::ChatResponse, $crate::error::LlmError> {
                // Tools shown but not callable go into the system message: the wire formats
                // cannot show a tool without letting the model call it.
                let request = request.with_listed_in_system();
                $crate::provider::http::chat(self, &self.request_body(&request)?, cancel).await
            }

            /// Streams the reply as it is written (see the provider's streaming module); the
            /// response's `raw` body is `None`. Retried only before anything was sent.
            async fn chat_streamed(
                &self,
                request: &$crate::message::ChatRequest,
                sink: &$crate::message::ReplySink,
                cancel: &tokio_util::sync::CancellationToken,
            ) -> Result<$crate::message::ChatResponse, $crate::error::LlmError> {
                let request = request.with_listed_in_system();
                let body = self.request_body(&request)?;
                $crate::provider::http::chat_streamed(self, &body, sink, cancel).await
            }
        }
    };
}
pub(crate) use impl_chat_model;

/// Builds the HTTP client of one model.
fn client(provider: &str) -> Result<reqwest::Client, LlmError> {
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

/// Sends a request and returns a successful answer, its body still to be read. Connection
/// failures become [`LlmError::Transport`], error statuses [`LlmError::Http`] with the
/// (shortened) body, read up to `max_bytes` ([`CallPolicy::max_response_bytes`]) and cut there.
async fn open(
    provider: &str,
    request: reqwest::RequestBuilder,
    max_bytes: usize,
) -> Result<reqwest::Response, LlmError> {
    let transport = |e: reqwest::Error| LlmError::Transport {
        provider: provider.to_owned(),
        message: chain(&e),
    };
    let mut response = request.send().await.map_err(transport)?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let mut body: Vec<u8> = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(transport)? {
        if body.len().saturating_add(chunk.len()) > max_bytes {
            break;
        }
        body.extend_from_slice(&chunk);
    }
    Err(LlmError::Http {
        provider: provider.to_owned(),
        status: status.as_u16(),
        body: shorten(&String::from_utf8_lossy(&body), MAX_ERROR_BODY),
    })
}

/// The whole body of a successful answer, read up to `max_bytes`
/// ([`CallPolicy::max_response_bytes`]): a longer one is [`LlmError::TooLarge`].
async fn read_body(
    provider: &str,
    response: reqwest::Response,
    max_bytes: usize,
    cancel: &CancellationToken,
) -> Result<Vec<u8>, LlmError> {
    let mut reader = BodyReader::new(provider, response, max_bytes, cancel);
    let mut body: Vec<u8> = Vec::new();
    while let Some(chunk) = reader.next().await? {
        body.extend_from_slice(&chunk);
    }
    Ok(body)
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

/// `base` and `path` joined by exactly one `/`.
fn join_url(base: &str, path: &str) -> String {
    format!(
        "{}/{}",
        base.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// Checks that a base URL is an absolute `http(s)` URL with a host.
/// With `credentials` (an API key, a signature), plain http is allowed to loopback hosts only: the
/// credentials would otherwise cross the network in clear text.
fn check_base_url(
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
fn label(provider: &str, base_url: &str, default_base_url: &str) -> String {
    if base_url.trim_end_matches('/') == default_base_url.trim_end_matches('/') {
        provider.to_owned()
    } else {
        format!("{provider} at {base_url}")
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
}
