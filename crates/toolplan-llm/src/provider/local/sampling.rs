//! Picking each token of a reply: greedy (the argmax of the logits) or seeded sampling, filtered by
//! the reply grammar when there is one and by the rules on values a grammar cannot state
//! ([`ValueRules`]). The unconstrained choice is checked first and kept when it is allowed (the
//! common case); only otherwise is the whole vocabulary filtered.

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;

use super::rules::ValueRules;
use crate::error::LlmError;

/// A token's text.
pub(super) type Piece<'a> = dyn Fn(LlamaToken) -> Vec<u8> + 'a;

/// Picks tokens: greedy or seeded sampling, the reply grammar when there is one, and the rules on
/// values ([`ValueRules`]).
pub(super) struct Sampler {
    chain: LlamaSampler,
    greedy: bool,
    grammar: Option<LlamaSampler>,
    rules: Option<ValueRules>,
}

impl Sampler {
    pub(super) fn new(
        model: &LlamaModel,
        grammar: Option<&str>,
        rules: Option<ValueRules>,
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
            rules,
        })
    }

    /// The next token from the logits of batch position `idx` (`piece` gives a token's text). The
    /// unconstrained choice is kept when the grammar allows it and it breaks no value rule (the
    /// common case, and cheap to check); otherwise the whole vocabulary is filtered first. When the
    /// rules leave no token the grammar allows, the grammar alone decides that token: the reply
    /// goes on, and the tool's own checks refuse what the rules could not prevent.
    pub(super) fn sample(
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
            let allowed = allows(grammar, token);
            // Choosing again among the tokens the grammar allows, then (only when that choice
            // would break a value rule) among those that break none, draws from the same
            // distribution as filtering by both at once, without reading every token's text on
            // each fallback.
            if !allowed {
                token = resample(&mut self.chain, grammar, ctx, idx, None)?.ok_or_else(|| {
                    LlmError::Local("the reply grammar allows no next token".into())
                })?;
            }
            if let Some(rules) = &self.rules
                && !rules.allows(&piece(token))
                && let Some(kept) =
                    resample(&mut self.chain, grammar, ctx, idx, Some((rules, piece)))?
            {
                token = kept;
            }
            grammar
                .try_accept(token)
                .map_err(|e| LlmError::Local(format!("the reply grammar rejected a token: {e}")))?;
        }
        if let Some(rules) = &mut self.rules {
            rules.feed(&piece(token));
        }
        Ok(token)
    }

    /// Takes `token` as the next one without choosing it (a reply's given start,
    /// [`ChatRequest::reply_start`](crate::ChatRequest::reply_start)): the grammar and the value
    /// rules move on past it. `false`, and the grammar left in an unknown state, when the grammar
    /// does not allow it there.
    pub(super) fn force(&mut self, token: LlamaToken, piece: &Piece<'_>) -> bool {
        if let Some(grammar) = &mut self.grammar
            && (!allows(grammar, token) || grammar.try_accept(token).is_err())
        {
            return false;
        }
        if let Some(rules) = &mut self.rules {
            rules.feed(&piece(token));
        }
        true
    }
}

/// Whether `grammar` allows `token` next (checked on that one token, not the whole vocabulary).
fn allows(grammar: &mut LlamaSampler, token: LlamaToken) -> bool {
    let mut single = LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 0.0, 1.0)], false);
    grammar.apply(&mut single);
    single.data.first().is_some_and(|d| d.logit().is_finite())
}

/// Chooses a token with `chain` among those `grammar` allows and, with `rules`, that break no value
/// rule (`piece` gives a token's text); `None` when no token is left.
fn resample(
    chain: &mut LlamaSampler,
    grammar: &mut LlamaSampler,
    ctx: &LlamaContext<'_>,
    idx: i32,
    rules: Option<(&ValueRules, &Piece<'_>)>,
) -> Result<Option<LlamaToken>, LlmError> {
    let mut candidates = ctx.token_data_array_ith(idx);
    grammar.apply(&mut candidates);
    if let Some((rules, piece)) = rules {
        for d in candidates.data.iter_mut() {
            if d.logit().is_finite() && !rules.allows(&piece(d.id())) {
                d.set_logit(f32::NEG_INFINITY);
            }
        }
    }
    if !candidates.data.iter().any(|d| d.logit().is_finite()) {
        return Ok(None);
    }
    chain.apply(&mut candidates);
    candidates
        .selected_token()
        .map(Some)
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
