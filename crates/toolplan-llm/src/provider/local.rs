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
//!   places of a call must all differ ([`ToolDefinition::unique_values`], a plan's step ids), the
//!   sampler enforces as the model writes ([`unique::UniqueValues`]).
//! * Decoding is greedy (deterministic) unless the request sets a temperature; it runs in
//!   `spawn_blocking` and checks the [`CancellationToken`] and the [`CallPolicy`] timeout between
//!   tokens. The KV cache of the previous call is kept and its common prefix reused, so the system
//!   prompt and the history are not evaluated again on every turn of an agent. (Evaluating the rest
//!   of a prompt on top of a cache can tip a near-tie of greedy decoding the other way than a cold
//!   evaluation would: the same sequence of calls always gives the same replies, and
//!   [`LocalOptions::reuse_prompt_cache`] `= false` makes each reply depend on its request alone.)
//!
//! Models for offline use are fetched by `bash scripts/fetch-model.sh [default|small]` into
//! [`model_dir`]; see [`default_model_path`] and [`small_model_path`].

pub mod prompt;
pub mod reply;
pub mod unique;

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::session::LlamaStateSeqFlags;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use llama_cpp_2::{LogOptions, SeqState, send_logs_to_tracing};
use serde_json::Value;
use tokio::sync::OwnedMutexGuard;
use tokio_util::sync::CancellationToken;

use self::reply::{Reply, ReplyMode};
use self::unique::UniqueValues;
use crate::ConnectOptions;
use crate::error::LlmError;
use crate::message::{ChatRequest, ChatResponse, Message, StopReason, ToolDefinition, Usage};
use crate::model::{CallPolicy, ChatModel};

/// File name of the default model: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M.
pub const DEFAULT_MODEL_FILE: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
/// File name of the small model (for tests): Qwen2.5-Coder-0.5B-Instruct, Q4_K_M.
pub const SMALL_MODEL_FILE: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
/// The environment variable naming the model directory (default `~/.cache/toolplan/models`).
pub const MODEL_DIR_ENV: &str = "TOOLPLAN_MODEL_DIR";

/// The directory the models are fetched into and looked up in: `$TOOLPLAN_MODEL_DIR`, or
/// `~/.cache/toolplan/models`.
pub fn model_dir() -> PathBuf {
    match std::env::var_os(MODEL_DIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => std::env::home_dir()
            .unwrap_or_default()
            .join(".cache/toolplan/models"),
    }
}

/// Where the default model ([`DEFAULT_MODEL_FILE`]) is expected.
pub fn default_model_path() -> PathBuf {
    model_dir().join(DEFAULT_MODEL_FILE)
}

/// Where the small model ([`SMALL_MODEL_FILE`]) is expected.
pub fn small_model_path() -> PathBuf {
    model_dir().join(SMALL_MODEL_FILE)
}

/// The command that fetches the model expected at `path`, if it is one of the known ones.
pub fn fetch_command(path: &Path) -> Option<&'static str> {
    match path.file_name().and_then(|n| n.to_str()) {
        Some(DEFAULT_MODEL_FILE) => Some("bash scripts/fetch-model.sh default"),
        Some(SMALL_MODEL_FILE) => Some("bash scripts/fetch-model.sh small"),
        _ => None,
    }
}

/// The error for a model file that is not there, naming the command that fetches it.
fn missing_model(path: &Path) -> LlmError {
    let how = match fetch_command(path) {
        Some(command) => format!(
            "fetch it with `{command}` (run in the toolplan repository; it honours ${MODEL_DIR_ENV})"
        ),
        None => "give the path of a GGUF chat model, or fetch the default one with \
                 `bash scripts/fetch-model.sh default` (run in the toolplan repository)"
            .to_owned(),
    };
    LlmError::Config(format!("no local model at {}: {how}", path.display()))
}

/// How a [`LocalModel`] runs.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalOptions {
    /// Context size in tokens (prompt and reply); capped at what the model was trained for.
    pub context_size: u32,
    /// Threads for llama.cpp; `None` is every available core.
    pub threads: Option<usize>,
    /// Tokens evaluated per batch while reading the prompt.
    pub batch_size: u32,
    /// Most tokens to generate when a request sets no `max_tokens`.
    pub default_max_tokens: u32,
    /// Seed of the sampler when a request sets a temperature above zero (greedy otherwise).
    pub seed: u32,
    /// Reuse the KV cache of the previous call for the prefix its prompt shares with this one.
    pub reuse_prompt_cache: bool,
    /// Timeout of every call (`max_retries` and backoff do not apply: a local failure is not
    /// transient).
    pub policy: CallPolicy,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            context_size: 8192,
            threads: None,
            batch_size: 512,
            default_max_tokens: 1024,
            seed: 0x5eed,
            reuse_prompt_cache: true,
            policy: CallPolicy::default(),
        }
    }
}

/// Timings of one call, for reports and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GenerationStats {
    /// Tokens of the prompt.
    pub prompt_tokens: u64,
    /// Of those, tokens whose KV cache was reused from the previous call (not evaluated again).
    pub cached_tokens: u64,
    /// Time spent evaluating the prompt tokens that were not cached.
    pub prompt_time: Duration,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Time spent generating them (sampling included).
    pub generation_time: Duration,
}

impl GenerationStats {
    /// Prompt tokens evaluated per second (cached tokens not counted).
    pub fn prompt_tokens_per_second(&self) -> f64 {
        per_second(
            self.prompt_tokens.saturating_sub(self.cached_tokens),
            self.prompt_time,
        )
    }

    /// Tokens generated per second.
    pub fn generated_tokens_per_second(&self) -> f64 {
        per_second(self.generated_tokens, self.generation_time)
    }
}

fn per_second(tokens: u64, time: Duration) -> f64 {
    let secs = time.as_secs_f64();
    if secs > 0.0 {
        tokens as f64 / secs
    } else {
        0.0
    }
}

/// llama.cpp's backend, initialised once per process (its logs go to `tracing`).
fn backend() -> Result<&'static LlamaBackend, LlmError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            send_logs_to_tracing(LogOptions::default());
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| LlmError::Local(format!("cannot initialise llama.cpp: {e}")))
}

/// The KV cache of the last call on a model: its tokens and llama.cpp's saved state of them.
struct KvCache {
    tokens: Vec<LlamaToken>,
    state: SeqState,
    context_size: u32,
}

/// What calls on one model share and take turns with.
#[derive(Default)]
struct Session {
    cache: Option<KvCache>,
}

/// A loaded model file, shared by every [`LocalModel`] on its path.
struct Shared {
    path: PathBuf,
    model: LlamaModel,
    template: LlamaChatTemplate,
    load_time: Duration,
    session: Arc<tokio::sync::Mutex<Session>>,
}

/// Loads `path`, or returns the model already loaded from it.
fn load_shared(path: &Path) -> Result<Arc<Shared>, LlmError> {
    static LOADED: OnceLock<Mutex<HashMap<PathBuf, Weak<Shared>>>> = OnceLock::new();
    let key = std::fs::canonicalize(path).map_err(|_| missing_model(path))?;
    if !key.is_file() {
        return Err(missing_model(path));
    }
    let mut loaded = LOADED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(shared) = loaded.get(&key).and_then(Weak::upgrade) {
        return Ok(shared);
    }
    let backend = backend()?;
    let start = Instant::now();
    let model =
        LlamaModel::load_from_file(backend, &key, &LlamaModelParams::default()).map_err(|e| {
            LlmError::Local(format!(
                "cannot load the GGUF model {}: {e}",
                path.display()
            ))
        })?;
    // The GGUF's own template when it has one; ChatML (the Qwen family's) otherwise.
    let template = model
        .chat_template(None)
        .or_else(|_| LlamaChatTemplate::new("chatml"))
        .map_err(|e| LlmError::Local(format!("no usable chat template: {e}")))?;
    let shared = Arc::new(Shared {
        path: key.clone(),
        model,
        template,
        load_time: start.elapsed(),
        session: Arc::default(),
    });
    loaded.retain(|_, weak| weak.strong_count() > 0);
    loaded.insert(key, Arc::downgrade(&shared));
    Ok(shared)
}

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
        let shared = tokio::task::spawn_blocking(move || load_shared(&owned))
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
        apply_template(&self.shared, &prompt::render(request, mode))
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

/// The chat template applied to the turns, with the assistant's turn opened.
fn apply_template(shared: &Shared, turns: &[prompt::Turn]) -> Result<String, LlmError> {
    let messages = turns
        .iter()
        .map(|t| LlamaChatMessage::new(t.role.to_owned(), t.content.clone()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| LlmError::Local(format!("bad chat message: {e}")))?;
    match shared
        .model
        .apply_chat_template(&shared.template, &messages, true)
    {
        Ok(text) => Ok(text),
        // llama.cpp recognises templates by their markers; one it does not know falls back to ChatML.
        Err(first) => LlamaChatTemplate::new("chatml")
            .ok()
            .and_then(|chatml| {
                shared
                    .model
                    .apply_chat_template(&chatml, &messages, true)
                    .ok()
            })
            .ok_or_else(|| LlmError::Local(format!("cannot apply the chat template: {first}"))),
    }
}

/// The GBNF grammar for the replies allowed in `mode`, from llama.cpp's JSON-Schema converter. A
/// tool's [`strict_parameters`](ToolDefinition::strict_parameters) are enforced when it has them (and
/// llama.cpp can convert them), its `parameters` otherwise; a tool whose schema llama.cpp cannot
/// convert takes any JSON object as arguments instead.
pub fn reply_grammar(
    tools: &[ToolDefinition],
    mode: ReplyMode,
) -> Result<Option<String>, LlmError> {
    reply_grammar_with(tools, mode, GrammarOptions::default())
}

/// How [`reply_grammar_with`] shapes the replies beyond their mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrammarOptions {
    /// Whether one reply may hold several tool calls ([`ChatRequest::parallel_tool_calls`]).
    pub parallel: bool,
    /// Whether every reply starts with a thought ([`ChatRequest::think_first`]).
    pub think: bool,
}

impl Default for GrammarOptions {
    fn default() -> Self {
        GrammarOptions {
            parallel: true,
            think: false,
        }
    }
}

impl GrammarOptions {
    /// The options `request` asks for.
    pub fn of(request: &ChatRequest) -> Self {
        GrammarOptions {
            parallel: request.parallel_tool_calls != Some(false),
            think: request.think_first,
        }
    }
}

/// [`reply_grammar`], shaped by `options`.
pub fn reply_grammar_with(
    tools: &[ToolDefinition],
    mode: ReplyMode,
    options: GrammarOptions,
) -> Result<Option<String>, LlmError> {
    let converts = |schema: &Value| {
        schema.is_object() && llama_cpp_2::json_schema_to_grammar(&schema.to_string()).is_ok()
    };
    // Each tool's stricter schema when it has one that converts, else its parameters schema, else
    // any object.
    let overrides: Vec<(usize, Value)> = tools
        .iter()
        .enumerate()
        .filter_map(|(i, tool)| match &tool.strict_parameters {
            Some(strict) if converts(strict) => Some((i, strict.clone())),
            _ if tool.parameters.is_object() && !converts(&tool.parameters) => {
                Some((i, reply::any_object_schema()))
            }
            _ => None,
        })
        .collect();
    let Some(mut schema) = reply::reply_schema(tools, mode, &overrides, options.think) else {
        return Ok(None);
    };
    if !options.parallel {
        reply::limit_to_one_call(&mut schema);
    }
    llama_cpp_2::json_schema_to_grammar(&schema.to_string())
        .map(Some)
        .map_err(|e| LlmError::Local(format!("cannot build the reply grammar: {e}")))
}

/// One call, as the blocking worker runs it.
struct Job {
    request: ChatRequest,
    mode: ReplyMode,
    options: LocalOptions,
    deadline: Instant,
    stop: CancellationToken,
}

impl Job {
    /// Fails when the call was cancelled or ran out of time.
    fn check(&self) -> Result<(), LlmError> {
        if self.stop.is_cancelled() {
            Err(LlmError::Cancelled)
        } else if Instant::now() >= self.deadline {
            Err(LlmError::Timeout(self.options.policy.timeout))
        } else {
            Ok(())
        }
    }
}

/// What the worker produced.
struct Generated {
    text: String,
    hit_limit: bool,
    stats: GenerationStats,
}

fn local_err(what: &str) -> impl FnOnce(String) -> LlmError + '_ {
    move |e| LlmError::Local(format!("{what}: {e}"))
}

/// A token's text.
type Piece<'a> = dyn Fn(LlamaToken) -> Vec<u8> + 'a;

/// Picks tokens: greedy or seeded sampling, the reply grammar when there is one, and the values
/// that must not repeat ([`UniqueValues`]).
struct Sampler {
    chain: LlamaSampler,
    greedy: bool,
    grammar: Option<LlamaSampler>,
    unique: Option<UniqueValues>,
}

impl Sampler {
    fn new(
        model: &LlamaModel,
        grammar: Option<&str>,
        unique: Option<UniqueValues>,
        temperature: f32,
        seed: u32,
    ) -> Result<Self, LlmError> {
        let chain = if temperature > 0.0 {
            LlamaSampler::chain_simple([
                LlamaSampler::top_k(40),
                LlamaSampler::top_p(0.95, 1),
                LlamaSampler::temp(temperature),
                LlamaSampler::dist(seed),
            ])
        } else {
            LlamaSampler::greedy()
        };
        let grammar = grammar
            .map(|g| LlamaSampler::grammar(model, g, "root"))
            .transpose()
            .map_err(|e| LlmError::Local(format!("llama.cpp rejected the reply grammar: {e}")))?;
        Ok(Self {
            chain,
            greedy: temperature <= 0.0,
            grammar,
            unique,
        })
    }

    /// The next token from the logits of batch position `idx` (`piece` gives a token's text). The
    /// unconstrained choice is kept when the grammar allows it and it repeats no unique value (the
    /// common case, and cheap to check); otherwise the whole vocabulary is filtered first.
    fn sample(
        &mut self,
        ctx: &LlamaContext<'_>,
        idx: i32,
        piece: &Piece<'_>,
    ) -> Result<LlamaToken, LlmError> {
        let mut token = if self.greedy {
            // The argmax straight from the logits, without building the candidate array.
            argmax(ctx.get_logits_ith(idx))
        } else {
            let mut candidates = ctx.token_data_array_ith(idx);
            self.chain.apply(&mut candidates);
            candidates.selected_token()
        }
        .ok_or_else(|| LlmError::Local("the sampler chose no token".into()))?;
        if let Some(grammar) = &mut self.grammar {
            let mut single =
                LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 0.0, 1.0)], false);
            grammar.apply(&mut single);
            let allowed = single.data.first().is_some_and(|d| d.logit().is_finite());
            // Choosing again among the tokens the grammar allows, then (only when that choice would
            // repeat a unique value) among those that repeat none, draws from the same distribution
            // as filtering by both at once, without reading every token's text on each fallback.
            if !allowed {
                token = resample(&mut self.chain, grammar, ctx, idx, None)?;
            }
            if let Some(unique) = &self.unique
                && !unique.allows(&piece(token))
            {
                token = resample(&mut self.chain, grammar, ctx, idx, Some((unique, piece)))?;
            }
            grammar
                .try_accept(token)
                .map_err(|e| LlmError::Local(format!("the reply grammar rejected a token: {e}")))?;
        }
        if let Some(unique) = &mut self.unique {
            unique.feed(&piece(token));
        }
        Ok(token)
    }
}

/// Chooses a token with `chain` among those `grammar` allows and, with `unique`, that repeat no
/// unique value (`piece` gives a token's text).
fn resample(
    chain: &mut LlamaSampler,
    grammar: &mut LlamaSampler,
    ctx: &LlamaContext<'_>,
    idx: i32,
    unique: Option<(&UniqueValues, &Piece<'_>)>,
) -> Result<LlamaToken, LlmError> {
    let mut candidates = ctx.token_data_array_ith(idx);
    grammar.apply(&mut candidates);
    if let Some((unique, piece)) = unique {
        for d in candidates.data.iter_mut() {
            if d.logit().is_finite() && !unique.allows(&piece(d.id())) {
                d.set_logit(f32::NEG_INFINITY);
            }
        }
    }
    if !candidates.data.iter().any(|d| d.logit().is_finite()) {
        return Err(LlmError::Local(
            "the reply grammar (with its unique values) allows no next token".into(),
        ));
    }
    chain.apply(&mut candidates);
    candidates
        .selected_token()
        .ok_or_else(|| LlmError::Local("the sampler chose no token".into()))
}

/// The token with the highest logit.
fn argmax(logits: &[f32]) -> Option<LlamaToken> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &logit) in logits.iter().enumerate() {
        if best.is_none_or(|(_, b)| logit > b) {
            best = Some((i, logit));
        }
    }
    best.and_then(|(i, _)| i32::try_from(i).ok())
        .map(LlamaToken)
}

/// The length of the common prefix of two token lists.
fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Runs one call on the blocking pool: prompt, grammar, prompt evaluation (reusing the cached prefix),
/// generation.
fn generate(
    shared: &Shared,
    mut session: OwnedMutexGuard<Session>,
    job: &Job,
) -> Result<Generated, LlmError> {
    job.check()?;
    let backend = backend()?;
    let model = &shared.model;
    let prompt_text = apply_template(shared, &prompt::render(&job.request, job.mode))?;
    let grammar = reply_grammar_with(
        &job.request.tools,
        job.mode,
        GrammarOptions::of(&job.request),
    )?;
    let temperature = job.request.temperature.unwrap_or(0.0);
    // Unique values are a constraint on constrained replies only.
    let unique = grammar
        .as_ref()
        .and_then(|_| UniqueValues::for_tools(&job.request.tools));
    let mut sampler = Sampler::new(
        model,
        grammar.as_deref(),
        unique,
        temperature,
        job.options.seed,
    )?;

    let vocab = model.vocab();
    let piece = |token| vocab.token_to_piece(token, false, None);
    // Special tokens in the template's text are parsed; BOS is added only when the model wants one
    // and the template did not write it already.
    let mut tokens = vocab.tokenize(prompt_text.as_bytes(), false, true);
    if vocab.should_add_bos() && tokens.first() != Some(&vocab.bos()) {
        tokens.insert(0, vocab.bos());
    }
    let context_size = job
        .options
        .context_size
        .min(model.n_ctx_train().max(512))
        .max(512);
    let n_ctx = context_size as usize;
    if tokens.is_empty() || tokens.len() >= n_ctx {
        return Err(LlmError::Local(format!(
            "the prompt has {} tokens; the context holds {n_ctx}",
            tokens.len()
        )));
    }
    let max_new = (job
        .request
        .max_tokens
        .unwrap_or(job.options.default_max_tokens) as usize)
        .min(n_ctx - tokens.len())
        .max(1);
    let threads = job
        .options
        .threads
        .or_else(|| std::thread::available_parallelism().ok().map(usize::from))
        .unwrap_or(1)
        .clamp(1, 512) as i32;
    let batch_size = job.options.batch_size.clamp(16, context_size);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(context_size))
        .with_n_batch(batch_size)
        .with_n_ubatch(batch_size)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let mut ctx = model
        .new_context(backend, params)
        .map_err(|e| LlmError::Local(format!("cannot create a llama.cpp context: {e}")))?;

    // Reuse the KV cache of the previous call for the common prefix; at least the last prompt token
    // is evaluated again, for its logits.
    let mut start = 0;
    if let Some(cache) = session.cache.take()
        && cache.context_size == context_size
        && job.options.reuse_prompt_cache
    {
        let keep = common_prefix(&cache.tokens, &tokens).min(tokens.len() - 1);
        if keep > 0 {
            let restored = ctx.state_seq_set(&cache.state, 0).is_ok()
                && u32::try_from(keep).is_ok_and(|k| ctx.kv_cache_seq_rm(0, Some(k), None).is_ok());
            if restored {
                start = keep;
            } else {
                ctx.clear_kv_cache();
            }
        }
    }

    let prompt_started = Instant::now();
    let mut batch = LlamaBatch::new(batch_size as usize, 1);
    let mut pos = start;
    while pos < tokens.len() {
        job.check()?;
        batch.clear();
        let end = (pos + batch_size as usize).min(tokens.len());
        for (p, token) in tokens.iter().enumerate().take(end).skip(pos) {
            batch
                .add(*token, p as i32, &[0], p + 1 == tokens.len())
                .map_err(|e| local_err("batch")(e.to_string()))?;
        }
        ctx.decode(&mut batch)
            .map_err(|e| local_err("evaluating the prompt failed")(e.to_string()))?;
        pos = end;
    }
    let prompt_time = prompt_started.elapsed();

    let generation_started = Instant::now();
    let mut kv_tokens = tokens.clone();
    let mut logits_at = batch.n_tokens() - 1;
    let mut bytes = Vec::new();
    let mut generated = 0usize;
    let hit_limit = loop {
        job.check()?;
        let token = sampler.sample(&ctx, logits_at, &piece)?;
        if vocab.is_eog(token) {
            break false;
        }
        generated += 1;
        bytes.extend(piece(token));
        if generated >= max_new {
            break true;
        }
        batch.clear();
        batch
            .add(token, kv_tokens.len() as i32, &[0], true)
            .map_err(|e| local_err("batch")(e.to_string()))?;
        ctx.decode(&mut batch)
            .map_err(|e| local_err("generating failed")(e.to_string()))?;
        kv_tokens.push(token);
        logits_at = 0;
    };
    let generation_time = generation_started.elapsed();

    // Keep this call's KV cache (prompt and reply) for the next call.
    session.cache = ctx
        .state_seq_get(0, LlamaStateSeqFlags::empty())
        .ok()
        .map(|state| KvCache {
            tokens: kv_tokens,
            state,
            context_size,
        });

    Ok(Generated {
        text: String::from_utf8_lossy(&bytes).into_owned(),
        hit_limit,
        stats: GenerationStats {
            prompt_tokens: tokens.len() as u64,
            cached_tokens: start as u64,
            prompt_time,
            generated_tokens: generated as u64,
            generation_time,
        },
    })
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
        };
        let shared = Arc::clone(&self.shared);
        let work = async move {
            let session = Arc::clone(&shared.session).lock_owned().await;
            tokio::task::spawn_blocking(move || generate(&shared, session, &job))
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
        let usage = Usage {
            input_tokens: generated.stats.prompt_tokens,
            output_tokens: generated.stats.generated_tokens,
        };
        let (message, stop) = match reply::parse_reply(
            &generated.text,
            mode,
            &request.tools,
            || self.next_call_id(),
        ) {
            Ok(Reply::Answer(text)) => {
                let stop = if generated.hit_limit && mode == ReplyMode::Text {
                    StopReason::MaxTokens
                } else {
                    StopReason::EndTurn
                };
                (Message::assistant(text, Vec::new()), stop)
            }
            Ok(Reply::ToolCalls { calls, thought }) => {
                (Message::assistant(thought, calls), StopReason::ToolUse)
            }
            // Cut off by the token limit: a JSON reply that never closed is nothing to act on
            // (handing it back as an answer would pass a fragment of a tool call off as one).
            Err(_) if generated.hit_limit => {
                return Err(LlmError::Decode {
                    provider: self.name.clone(),
                    message: format!(
                        "the reply was cut off at the token limit ({} tokens) before its JSON was complete",
                        generated.stats.generated_tokens
                    ),
                });
            }
            Err(e) => {
                return Err(LlmError::Decode {
                    provider: self.name.clone(),
                    message: e,
                });
            }
        };
        let raw = openai_shaped(&self.name, &message, stop, usage);
        Ok(ChatResponse {
            message,
            usage,
            stop,
            raw: Some(raw),
        })
    }
}

/// A local reply as an OpenAI-compatible server (llama.cpp's) would send it, so that response
/// filters written for one (`$.choices[0].message.content`) work on the other.
fn openai_shaped(model: &str, message: &Message, stop: StopReason, usage: Usage) -> Value {
    let finish = match stop {
        StopReason::ToolUse => "tool_calls",
        StopReason::MaxTokens => "length",
        _ => "stop",
    };
    let calls: Vec<Value> = message
        .tool_calls
        .iter()
        .map(|c| {
            serde_json::json!({"id": c.id, "type": "function",
                "function": {"name": c.name, "arguments": c.arguments.to_string()}})
        })
        .collect();
    let mut msg = serde_json::json!({"role": "assistant", "content": message.content});
    if !calls.is_empty()
        && let Value::Object(o) = &mut msg
    {
        o.insert("tool_calls".into(), Value::Array(calls));
    }
    serde_json::json!({
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
        "usage": {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
                  "total_tokens": usage.input_tokens + usage.output_tokens},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn model_paths_follow_the_model_dir() {
        assert!(default_model_path().ends_with(DEFAULT_MODEL_FILE));
        assert!(small_model_path().ends_with(SMALL_MODEL_FILE));
        assert_eq!(default_model_path().parent(), Some(model_dir().as_path()));
        assert_eq!(
            fetch_command(&default_model_path()),
            Some("bash scripts/fetch-model.sh default")
        );
        assert_eq!(
            fetch_command(&small_model_path()),
            Some("bash scripts/fetch-model.sh small")
        );
        assert_eq!(fetch_command(Path::new("/x/other.gguf")), None);
    }

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

    fn tool(name: &str, parameters: Value) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: String::new(),
            parameters,
            ..Default::default()
        }
    }

    #[test]
    fn llama_cpp_turns_reply_schemas_into_grammars() {
        let tools = vec![
            tool(
                "get_weather",
                json!({"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}),
            ),
            tool(
                "execute_tool_plan",
                json!({
                    "type": "object",
                    "properties": {
                        "steps": {"type": "array", "minItems": 1, "items": {
                            "type": "object",
                            "properties": {
                                "id": {"type": "string"},
                                "tool": {"enum": ["get_weather", "calculator"]},
                                "arguments": {"type": ["object", "string"]},
                            },
                            "required": ["id", "tool", "arguments"],
                            "additionalProperties": false,
                        }},
                        "output_steps": {"type": "array", "items": {"type": "string"}},
                        "note": {},
                        "n": {"type": "integer"}, "x": {"type": "number"}, "b": {"type": "boolean"},
                        "z": {"type": "null"}, "c": {"const": 3}, "o": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                    },
                    "required": ["steps"],
                }),
            ),
        ];
        let grammar = reply_grammar(&tools, ReplyMode::AnswerOrTools)
            .expect("converts")
            .expect("constrained");
        assert!(grammar.contains("root ::="), "{grammar}");
        for literal in [
            "get_weather",
            "execute_tool_plan",
            "calculator",
            "tool_calls",
            "answer",
        ] {
            assert!(
                grammar.contains(literal),
                "{literal} missing from\n{grammar}"
            );
        }
        let required = reply_grammar(&tools, ReplyMode::ToolsOnly)
            .expect("converts")
            .expect("constrained");
        assert!(!required.contains("answer"), "{required}");
        assert_eq!(reply_grammar(&tools, ReplyMode::Text), Ok(None));
    }

    #[test]
    fn thinking_grammars_convert_and_start_with_the_thought() {
        let tools = vec![tool(
            "get_weather",
            json!({"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}),
        )];
        let think = GrammarOptions {
            parallel: false,
            think: true,
        };
        for mode in [
            ReplyMode::AnswerOrTools,
            ReplyMode::ToolsOnly,
            ReplyMode::AnswerOnly,
        ] {
            let grammar = reply_grammar_with(&tools, mode, think)
                .expect("converts")
                .expect("constrained");
            assert!(grammar.contains("thought"), "{grammar}");
            let plain = reply_grammar_with(&tools, mode, GrammarOptions::default())
                .expect("converts")
                .expect("constrained");
            assert!(!plain.contains("thought"), "{plain}");
        }
        let request = ChatRequest {
            parallel_tool_calls: Some(false),
            think_first: true,
            ..ChatRequest::default()
        };
        assert_eq!(GrammarOptions::of(&request), think);
        assert_eq!(
            GrammarOptions::of(&ChatRequest::default()),
            GrammarOptions::default()
        );
    }

    #[test]
    fn unconvertible_tool_schemas_fall_back_to_any_object() {
        let tools = vec![tool(
            "odd",
            json!({"type": "object", "properties": {"a": {"$ref": "http://example.com/s"}}}),
        )];
        assert!(llama_cpp_2::json_schema_to_grammar(&tools[0].parameters.to_string()).is_err());
        let grammar = reply_grammar(&tools, ReplyMode::ToolsOnly)
            .expect("falls back")
            .expect("constrained");
        assert!(grammar.contains("odd"), "{grammar}");
    }

    #[test]
    fn strict_parameters_are_enforced_instead_of_the_shown_schema() {
        let shown = json!({"type": "object", "properties": {"steps": {"type": "array"}}});
        let strict = json!({"type": "object", "properties": {"steps": {"type": "array", "items": {
            "type": "object", "properties": {"tool": {"const": "only_this_tool"}}, "required": ["tool"]}}},
            "required": ["steps"]});
        let plain = reply_grammar(&[tool("plan", shown.clone())], ReplyMode::ToolsOnly)
            .expect("converts")
            .expect("constrained");
        assert!(!plain.contains("only_this_tool"), "{plain}");
        let typed = tool("plan", shown).with_strict_parameters(strict);
        let grammar = reply_grammar(std::slice::from_ref(&typed), ReplyMode::ToolsOnly)
            .expect("converts")
            .expect("constrained");
        assert!(grammar.contains("only_this_tool"), "{grammar}");
        // A stricter schema llama.cpp cannot convert leaves the shown one in force.
        let odd = typed.with_strict_parameters(
            json!({"type": "object", "properties": {"a": {"$ref": "http://example.com/s"}}}),
        );
        let fallback = reply_grammar(&[odd], ReplyMode::ToolsOnly)
            .expect("converts")
            .expect("constrained");
        assert!(
            !fallback.contains("only_this_tool") && fallback.contains("steps"),
            "{fallback}"
        );
    }
}
