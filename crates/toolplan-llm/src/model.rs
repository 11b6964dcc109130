//! The chat-model trait every provider implements, and the timeout/retry policy they share.

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::error::LlmError;
use crate::message::{ChatRequest, ChatResponse, ReplyDelta, ReplySink};

/// A chat model with tool calling. Object-safe: agents hold `Arc<dyn ChatModel>`.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// A short description for messages and reports (`openai:gpt-4o-mini`, `local:qwen…gguf`).
    fn name(&self) -> &str;

    /// Sends one request. Implementations honour `cancel` and their own [`CallPolicy`].
    async fn chat(
        &self,
        request: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError>;

    /// [`chat`](Self::chat), handing over the reply to `sink` while it is written
    /// ([`ReplyDelta`]): text as it comes, each tool call's name as soon as it is known and its
    /// arguments' JSON text in pieces. The response returned is the one `chat` would return, and
    /// the pieces sent add up to it (or to more, where the provider corrects a reply after writing
    /// it, see [`ReplyDelta`]). A provider retries a failed attempt only before it has sent
    /// anything; a stream that breaks after that fails the call (the pieces sent were the start of
    /// a reply that will not come). The default sends the whole reply once it has come, for
    /// providers that cannot stream.
    async fn chat_streamed(
        &self,
        request: &ChatRequest,
        sink: &ReplySink,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        let response = self.chat(request, cancel).await?;
        ReplyDelta::send_whole(&response.message, sink);
        Ok(response)
    }
}

/// Per-call timeout and retries with exponential backoff on retryable errors (429, 5xx, transport).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallPolicy {
    /// Longest one attempt may take.
    pub timeout: Duration,
    /// Attempts after the first.
    pub max_retries: u32,
    /// Wait before the first retry; doubled each time.
    pub initial_backoff: Duration,
    /// Longest wait between attempts.
    pub max_backoff: Duration,
    /// Largest response body read from an HTTP provider, in bytes (default 16 MiB); a longer one
    /// fails the call instead of filling memory.
    pub max_response_bytes: usize,
}

impl Default for CallPolicy {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(120),
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            max_response_bytes: 16 * 1024 * 1024,
        }
    }
}

impl CallPolicy {
    /// Runs `attempt` under the timeout, retrying retryable failures with backoff, until it succeeds,
    /// fails for good, runs out of retries, or `cancel` fires.
    pub async fn run<T, F, Fut>(
        &self,
        cancel: &CancellationToken,
        mut attempt: F,
    ) -> Result<T, LlmError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, LlmError>>,
    {
        let mut backoff = self.initial_backoff;
        let mut tries = 0;
        loop {
            let result = tokio::select! {
                _ = cancel.cancelled() => return Err(LlmError::Cancelled),
                r = tokio::time::timeout(self.timeout, attempt()) => r.unwrap_or(Err(LlmError::Timeout(self.timeout))),
            };
            match result {
                Err(e) if e.is_retryable() && tries < self.max_retries => {
                    tries += 1;
                    tokio::select! {
                        _ = cancel.cancelled() => return Err(LlmError::Cancelled),
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(self.max_backoff);
                }
                other => return other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn http(status: u16) -> LlmError {
        LlmError::Http {
            provider: "test".into(),
            status,
            body: String::new(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn retries_retryable_errors_with_backoff() {
        let calls = AtomicU32::new(0);
        let policy = CallPolicy::default();
        let start = tokio::time::Instant::now();
        let r = policy
            .run(&CancellationToken::new(), || async {
                match calls.fetch_add(1, Ordering::SeqCst) {
                    0 => Err(http(429)),
                    1 => Err(http(503)),
                    _ => Ok(7),
                }
            })
            .await;
        assert_eq!(r, Ok(7));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(start.elapsed(), Duration::from_millis(500 + 1000));
    }

    #[tokio::test(start_paused = true)]
    async fn does_not_retry_client_errors_and_gives_up() {
        let calls = AtomicU32::new(0);
        let policy = CallPolicy::default();
        let r: Result<(), _> = policy
            .run(&CancellationToken::new(), || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(http(400))
            })
            .await;
        assert_eq!(r, Err(http(400)));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        calls.store(0, Ordering::SeqCst);
        let r: Result<(), _> = policy
            .run(&CancellationToken::new(), || async {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(http(500))
            })
            .await;
        assert_eq!(r, Err(http(500)));
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn times_out_and_cancels() {
        let policy = CallPolicy {
            max_retries: 0,
            timeout: Duration::from_secs(1),
            ..CallPolicy::default()
        };
        let r: Result<(), _> = policy
            .run(&CancellationToken::new(), std::future::pending)
            .await;
        assert_eq!(r, Err(LlmError::Timeout(Duration::from_secs(1))));
        let cancel = CancellationToken::new();
        cancel.cancel();
        let r: Result<(), _> = policy.run(&cancel, std::future::pending).await;
        assert_eq!(r, Err(LlmError::Cancelled));
    }
}
