//! An in-process GGUF chat model through llama.cpp (crate `llama-cpp-2`, CPU), behind the cargo
//! feature `local`.
//!
//! * The model file is loaded once per path and process ([`Arc`], in `spawn_blocking`) and shared by
//!   every [`LocalModel`] on that path; calls on one model run one at a time.
//! * The prompt is the model's own chat template (from the GGUF, through llama.cpp) over the turns
//!   [`prompt::render`] makes: tools and the reply format in the system message, tool results as
//!   `<tool_response>` blocks in a user turn.
//! * Whenever tools are offered the reply is **constrained** by a grammar that llama.cpp builds from
//!   the JSON Schema of the allowed replies ([`reply::reply_schema`]): `{"answer": …}` or
//!   `{"tool_calls": [{"name": <an offered tool>, "arguments": <that tool's schema>}]}`, so every
//!   reply parses and names only offered tools. What a grammar cannot say, that values at some
//!   places of a call must all differ
//!   ([`ToolDefinition::unique_values`](crate::ToolDefinition::unique_values), a plan's step ids)
//!   and that a plan's references name steps written before them (and, into the result of a tool
//!   that declares an output schema, a path the schema has)
//!   ([`ToolDefinition::step_references`](crate::ToolDefinition::step_references)), the sampler
//!   enforces as the model writes ([`rules::ValueRules`]).
//! * Decoding is greedy (deterministic) unless the request sets a temperature; it runs in
//!   `spawn_blocking` and checks the [`CancellationToken`] and the
//!   [`CallPolicy`](crate::CallPolicy) timeout between tokens. The KV cache of the previous call is kept and its common prefix reused, so the system
//!   prompt and the history are not evaluated again on every turn of an agent. (Evaluating the rest
//!   of a prompt on top of a cache can tip a near-tie of greedy decoding the other way than a cold
//!   evaluation would: the same sequence of calls always gives the same replies, and
//!   [`LocalOptions::reuse_prompt_cache`] `= false` makes each reply depend on its request alone.)
//!
//! Models for offline use are fetched by `bash scripts/fetch-model.sh [default|small]` into
//! [`model_dir`]; see [`default_model_path`] and [`small_model_path`].
//!
//! ## Layout
//!
//! * `files` — where the models live ([`model_dir`], [`default_model_path`], [`fetch_command`]).
//! * `options` — [`LocalOptions`] and the timings of a call ([`GenerationStats`]).
//! * `loading` — llama.cpp's backend and the model files, loaded once per path and process.
//! * [`prompt`] — the request as chat turns, then through the model's chat template.
//! * [`reply`] — the JSON Schema of the allowed replies, and parsing a reply.
//! * `grammar` — that schema as a llama.cpp grammar ([`reply_grammar`]).
//! * [`rules`] — values that must differ within one tool call, and references that must name an
//!   earlier step, enforced while sampling.
//! * `sampling` — picking each token under the grammar and the value rules.
//! * `stream` — a reply's pieces (calls, their arguments, the answer) sent while it is sampled.
//! * `kv_cache` — reusing the previous call's KV cache for the prefix two prompts share.
//! * `generate` — one call on the blocking pool: prompt evaluation, then generation.
//! * `response` — the reply as a [`ChatResponse`].

mod files;
mod generate;
mod grammar;
mod kv_cache;
mod loading;
mod options;
pub mod prompt;
pub mod reply;
mod response;
pub mod rules;
mod sampling;
mod stream;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use self::files::missing_model;
pub use self::files::{
    DEFAULT_MODEL_FILE, MODEL_DIR_ENV, SMALL_MODEL_FILE, default_model_path, fetch_command,
    model_dir, small_model_path,
};
use self::generate::Job;
pub use self::grammar::{GrammarOptions, reply_grammar, reply_grammar_with};
use self::loading::Shared;
pub use self::options::{GenerationStats, LocalOptions};
use self::reply::ReplyMode;
use crate::ConnectOptions;
use crate::error::LlmError;
use crate::message::{ChatRequest, ChatResponse, ReplySink};
use crate::model::ChatModel;

/// An in-process GGUF chat model; share it behind an `Arc` (see the [module docs](self)).
pub struct LocalModel {
    name: String,
    shared: Arc<Shared>,
    options: LocalOptions,
    next_call_id: AtomicU64,
    last_stats: Mutex<Option<GenerationStats>>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("name", &self.name)
            .field("path", &self.shared.path)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl LocalModel {
    /// Loads the GGUF model at `path` (in `spawn_blocking`; once per path and process: a model
    /// already loaded is shared). A missing file is an [`LlmError::Config`] naming the command that
    /// fetches it.
    pub async fn load(path: &Path, options: LocalOptions) -> Result<LocalModel, LlmError> {
        if !path.is_file() {
            return Err(missing_model(path));
        }
        let owned = path.to_owned();
        let shared = tokio::task::spawn_blocking(move || loading::load_shared(&owned))
            .await
            .map_err(|e| LlmError::Local(format!("loading the model failed: {e}")))??;
        let file = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        Ok(LocalModel {
            name: format!("local:{file}"),
            shared,
            options,
            next_call_id: AtomicU64::new(0),
            last_stats: Mutex::new(None),
        })
    }

    /// The model file (canonical path).
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// How long loading the model file took (when it was first loaded in this process).
    pub fn load_time(&self) -> Duration {
        self.shared.load_time
    }

    /// The options the model runs with.
    pub fn options(&self) -> &LocalOptions {
        &self.options
    }

    /// Timings of the last successful call.
    pub fn last_stats(&self) -> Option<GenerationStats> {
        *self
            .last_stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The number of tokens of `text` with the model's tokenizer (special tokens parsed).
    pub fn count_tokens(&self, text: &str) -> usize {
        self.shared
            .model
            .vocab()
            .tokenize(text.as_bytes(), false, true)
            .len()
    }

    /// The prompt the model would be given for `request` (chat template applied).
    pub fn render_prompt(&self, request: &ChatRequest) -> Result<String, LlmError> {
        let mode = ReplyMode::of(request).map_err(LlmError::Config)?;
        self.shared.prompt(request, mode)
    }

    fn next_call_id(&self) -> String {
        format!("call_{}", self.next_call_id.fetch_add(1, Ordering::Relaxed))
    }
}

/// Makes the local chat model at `path` (`None`: [`default_model_path`]) and loads it.
pub async fn connect(
    path: Option<&Path>,
    options: &ConnectOptions,
) -> Result<Arc<dyn ChatModel>, LlmError> {
    let path = path.map_or_else(default_model_path, Path::to_path_buf);
    let options = LocalOptions {
        policy: options.policy.clone(),
        ..LocalOptions::default()
    };
    Ok(Arc::new(LocalModel::load(&path, options).await?))
}

#[async_trait]
impl ChatModel for LocalModel {
    fn name(&self) -> &str {
        &self.name
    }

    async fn chat(
        &self,
        request: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        self.call(request, None, cancel).await
    }

    /// Sends each token's text as it is sampled (module `stream`): a call's name once written, its
    /// arguments as they grow. The response is the reply as it ended; where a reply is corrected
    /// after it was written (a plan's repeated steps dropped, the complete calls of a reply cut at
    /// the token limit kept), it holds less than the pieces did.
    async fn chat_streamed(
        &self,
        request: &ChatRequest,
        sink: &ReplySink,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        self.call(request, Some(sink.clone()), cancel).await
    }
}

impl LocalModel {
    /// One call, streamed to `sink` when there is one.
    async fn call(
        &self,
        request: &ChatRequest,
        sink: Option<ReplySink>,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        let mode = ReplyMode::of(request).map_err(LlmError::Config)?;
        let timeout = self.options.policy.timeout;
        // Stops the worker when the call is cancelled, times out, or this future is dropped.
        let stop = cancel.child_token();
        let _stop_on_drop = stop.clone().drop_guard();
        let job = Job {
            request: request.clone(),
            mode,
            options: self.options.clone(),
            deadline: Instant::now() + timeout,
            stop,
            sink,
        };
        let shared = Arc::clone(&self.shared);
        let work = async move {
            let session = Arc::clone(&shared.session).lock_owned().await;
            tokio::task::spawn_blocking(move || generate::generate(&shared, session, &job))
                .await
                .map_err(|e| LlmError::Local(format!("the inference task failed: {e}")))?
        };
        let generated = tokio::select! {
            _ = cancel.cancelled() => return Err(LlmError::Cancelled),
            _ = tokio::time::sleep(timeout) => return Err(LlmError::Timeout(timeout)),
            r = work => r?,
        };
        *self
            .last_stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(generated.stats);
        response::response(
            &self.name,
            &generated,
            mode,
            &request.callable_tools(),
            || self.next_call_id(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_model_names_the_fetch_command() {
        let dir = std::env::temp_dir().join("toolplan-no-such-dir");
        let err = LocalModel::load(&dir.join(DEFAULT_MODEL_FILE), LocalOptions::default())
            .await
            .expect_err("missing");
        let LlmError::Config(message) = err else {
            panic!("expected a config error, got {err:?}");
        };
        assert!(
            message.contains("bash scripts/fetch-model.sh default"),
            "{message}"
        );
        let err = LocalModel::load(&dir.join("mine.gguf"), LocalOptions::default())
            .await
            .expect_err("missing");
        assert!(err.to_string().contains("mine.gguf"), "{err}");
    }

    #[tokio::test]
    async fn a_file_that_is_not_gguf_is_a_local_error() {
        let dir = std::env::temp_dir().join(format!("toolplan-bad-gguf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("bad.gguf");
        std::fs::write(&path, b"not a gguf file").expect("write");
        let err = LocalModel::load(&path, LocalOptions::default())
            .await
            .expect_err("bad file");
        assert!(matches!(err, LlmError::Local(_)), "{err:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
