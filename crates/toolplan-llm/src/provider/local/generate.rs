//! One call of a local model, as the blocking worker runs it: the prompt and the reply grammar, a
//! llama.cpp context, the prompt evaluated in batches on top of the reused KV cache, then tokens
//! sampled one at a time until the end of the reply or the token limit, checking the cancellation
//! token and the deadline between batches and tokens.

use std::num::NonZeroU32;
use std::time::Instant;

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_batch::LlamaBatch;
use tokio::sync::OwnedMutexGuard;
use tokio_util::sync::CancellationToken;

use super::grammar::{GrammarOptions, reply_grammar_with};
use super::kv_cache::Session;
use super::loading::{Shared, backend};
use super::options::{GenerationStats, LocalOptions};
use super::prompt::reply_start_text;
use super::reply::{ReplyMode, repeats_in};
use super::rules::ValueRules;
use super::sampling::Sampler;
use super::stream::ReplySplitter;
use crate::error::LlmError;
use crate::message::{ChatRequest, ReplySink};

/// One call, as the blocking worker runs it.
pub(super) struct Job {
    /// The request.
    pub(super) request: ChatRequest,
    /// How the model must reply to it.
    pub(super) mode: ReplyMode,
    /// The model's options.
    pub(super) options: LocalOptions,
    /// When the call times out.
    pub(super) deadline: Instant,
    /// Fires when the call is cancelled, times out, or its future is dropped.
    pub(super) stop: CancellationToken,
    /// Where the reply goes while it is sampled, for a streamed call.
    pub(super) sink: Option<ReplySink>,
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
pub(super) struct Generated {
    /// The reply's text.
    pub(super) text: String,
    /// Whether the reply was cut off at the token limit.
    pub(super) hit_limit: bool,
    /// Whether the reply was stopped because it had started to repeat a call or a plan step
    /// ([`repeats_in`]).
    pub(super) repeated: bool,
    /// The call's timings.
    pub(super) stats: GenerationStats,
}

/// Makes a [`LlmError::Local`] that says what failed.
fn local_err(what: &str) -> impl FnOnce(String) -> LlmError + '_ {
    move |e| LlmError::Local(format!("{what}: {e}"))
}

/// Runs one call on the blocking pool: prompt, grammar, prompt evaluation (reusing the cached prefix),
/// generation.
pub(super) fn generate(
    shared: &Shared,
    mut session: OwnedMutexGuard<Session>,
    job: &Job,
) -> Result<Generated, LlmError> {
    job.check()?;
    let backend = backend()?;
    let model = &shared.model;
    let prompt_text = shared.prompt(&job.request, job.mode)?;
    // Tools shown but not callable are in the prompt, not in the grammar.
    let grammar = reply_grammar_with(
        &job.request.callable_tools(),
        job.mode,
        GrammarOptions::of(&job.request),
    )?;
    let temperature = job.request.temperature.unwrap_or(0.0);
    // The value rules hold constrained replies only.
    let rules = grammar
        .as_ref()
        .map(|_| ValueRules::for_tools(&job.request.tools));
    let new_sampler = || {
        Sampler::new(
            model,
            grammar.as_deref(),
            rules.clone(),
            temperature,
            job.options.seed,
        )
    };
    let mut sampler = new_sampler()?;

    let vocab = model.vocab();
    let piece = |token| vocab.token_to_piece(token, false, None);
    // Special tokens in the template's text are parsed; BOS is added only when the model wants one
    // and the template did not write it already.
    let mut tokens = vocab.tokenize(prompt_text.as_bytes(), false, true);
    if vocab.should_add_bos() && tokens.first() != Some(&vocab.bos()) {
        tokens.insert(0, vocab.bos());
    }
    // A given start of the reply is written as if the model had: evaluated with the prompt, with
    // the grammar and the value rules moved past it. A start the grammar does not take (tools or
    // options changed since the reply it comes from) is dropped and the reply is written whole.
    let mut bytes = Vec::new();
    let mut splitter = job
        .sink
        .clone()
        .map(|sink| ReplySplitter::new(sink, grammar.is_none()));
    if let Some(text) = job
        .request
        .reply_start
        .as_ref()
        .filter(|_| grammar.is_some())
        .and_then(|start| reply_start_text(start, job.request.think_first))
    {
        let start = vocab.tokenize(text.as_bytes(), false, false);
        if start.iter().all(|&token| sampler.force(token, &piece)) {
            tokens.extend(start);
            if let Some(splitter) = &mut splitter {
                splitter.push(text.as_bytes());
            }
            bytes.extend(text.into_bytes());
        } else {
            sampler = new_sampler()?;
        }
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

    // Reuse the KV cache of the previous call for the common prefix.
    let start = session.reuse(
        &mut ctx,
        &tokens,
        context_size,
        job.options.reuse_prompt_cache,
    );

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
    let mut generated = 0usize;
    // A constrained reply is watched for a loop each time an object closes.
    let watch = grammar.is_some();
    let (hit_limit, repeated) = loop {
        job.check()?;
        let token = sampler.sample(&ctx, logits_at, &piece)?;
        if vocab.is_eog(token) {
            break (false, false);
        }
        generated += 1;
        let written = piece(token);
        let closes = written.contains(&b'}');
        if let Some(splitter) = &mut splitter {
            splitter.push(&written);
        }
        bytes.extend(written);
        if watch && closes && repeats_in(&String::from_utf8_lossy(&bytes)) {
            break (false, true);
        }
        if generated >= max_new {
            break (true, false);
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
    if let Some(splitter) = &mut splitter {
        splitter.finish();
    }

    // Keep this call's KV cache (prompt and reply) for the next call.
    session.keep(&ctx, kv_tokens, context_size);

    Ok(Generated {
        text: String::from_utf8_lossy(&bytes).into_owned(),
        hit_limit,
        repeated,
        stats: GenerationStats {
            prompt_tokens: tokens.len() as u64,
            cached_tokens: start as u64,
            prompt_time,
            generated_tokens: generated as u64,
            generation_time,
        },
    })
}
