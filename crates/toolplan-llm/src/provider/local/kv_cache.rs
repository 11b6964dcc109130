//! Reusing the KV cache between calls: the tokens and llama.cpp's saved state of the last call on a
//! model are kept, and the next call restores them and evaluates only the part of its prompt after
//! the prefix the two share (the system prompt and the history, on every turn of an agent).

use llama_cpp_2::SeqState;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::session::LlamaStateSeqFlags;
use llama_cpp_2::token::LlamaToken;

/// The KV cache of the last call on a model: its tokens and llama.cpp's saved state of them.
struct KvCache {
    tokens: Vec<LlamaToken>,
    state: SeqState,
    context_size: u32,
}

/// What calls on one model share and take turns with.
#[derive(Default)]
pub(super) struct Session {
    cache: Option<KvCache>,
}

impl Session {
    /// Restores the cached state into `ctx` for the prefix the cache shares with `tokens`, and
    /// returns the number of tokens that need no evaluation. At least the last prompt token is
    /// evaluated again, for its logits. The cache is used up either way: only a call that finishes
    /// [keeps](Session::keep) one for the next.
    pub(super) fn reuse(
        &mut self,
        ctx: &mut LlamaContext<'_>,
        tokens: &[LlamaToken],
        context_size: u32,
        enabled: bool,
    ) -> usize {
        let mut start = 0;
        if let Some(cache) = self.cache.take()
            && cache.context_size == context_size
            && enabled
        {
            let keep = common_prefix(&cache.tokens, tokens).min(tokens.len() - 1);
            if keep > 0 {
                let restored = ctx.state_seq_set(&cache.state, 0).is_ok()
                    && u32::try_from(keep)
                        .is_ok_and(|k| ctx.kv_cache_seq_rm(0, Some(k), None).is_ok());
                if restored {
                    start = keep;
                } else {
                    ctx.clear_kv_cache();
                }
            }
        }
        start
    }

    /// Keeps the KV cache of `ctx`, which holds `tokens` (a call's prompt and reply), for the next
    /// call.
    pub(super) fn keep(
        &mut self,
        ctx: &LlamaContext<'_>,
        tokens: Vec<LlamaToken>,
        context_size: u32,
    ) {
        self.cache = ctx
            .state_seq_get(0, LlamaStateSeqFlags::empty())
            .ok()
            .map(|state| KvCache {
                tokens,
                state,
                context_size,
            });
    }
}

/// The length of the common prefix of two token lists.
fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
