//! Beam search (§3.11): a set of hypotheses, each owning its decoder state, and so its
//! grammar matcher fork, counts and processor state. The model is a closure from a token
//! prefix to a logits row (the caller maps prefixes to KV branches).
//!
//! Rules, all explicit:
//! - A hypothesis scores `sum log p_sel`: each token's logprob under the log-softmax of
//!   the processed logits over the final support (the request's processors apply; its
//!   selector does not).
//! - Each step ranks every (hypothesis, token) extension by score descending, then
//!   hypothesis index ascending, then token id ascending (the tie-break), keeping at most
//!   `2 · width` extensions per hypothesis.
//! - An EOS extension (or one the stop matcher ends) completes a hypothesis only if it
//!   ranks among the first `width` extensions; otherwise it is skipped. Other extensions
//!   fill the next beam up to `width`.
//! - Final score: `sum log p / len^length_penalty`, `len` counting generated tokens
//!   including EOS. Search stops once `width` hypotheses are complete (early stopping),
//!   when no beam is alive, or at `max_new_tokens`, where live beams complete as `Length`.

use super::constraint::TokenConstraint;
use super::error::{invalid, Result};
use super::logits::log_sum_exp;
use super::sampler::{Sampler, StepOptions};
use super::state::{Commit, DecoderState, FinishStatus};
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq)]
pub struct BeamConfig {
    pub width: usize,
    pub max_new_tokens: usize,
    pub length_penalty: f64,
    pub eos_token_ids: BTreeSet<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BeamResult {
    pub tokens: Vec<u32>,
    pub sum_logprob: f64,
    pub score: f64,
    pub finish: FinishStatus,
}

struct Hyp<C: TokenConstraint> {
    tokens: Vec<u32>,
    sum: f64,
    state: DecoderState<C>,
}

fn finish(tokens: Vec<u32>, sum: f64, lp: f64, status: FinishStatus) -> BeamResult {
    let len = tokens.len().max(1) as f64;
    BeamResult {
        score: sum / len.powf(lp),
        tokens,
        sum_logprob: sum,
        finish: status,
    }
}

pub fn beam_search<C, M>(
    sampler: &Sampler,
    prompt: Vec<u32>,
    grammar: Option<C>,
    cfg: &BeamConfig,
    mut model: M,
) -> Result<Vec<BeamResult>>
where
    C: TokenConstraint,
    M: FnMut(&[u32]) -> Vec<f32>,
{
    if cfg.width == 0 {
        return Err(invalid("beam width", 0, "an integer >= 1"));
    }
    if !cfg.length_penalty.is_finite() {
        return Err(invalid(
            "length_penalty",
            cfg.length_penalty,
            "a finite number",
        ));
    }
    let w = cfg.width;
    let mut alive = vec![Hyp {
        tokens: Vec::new(),
        sum: 0.0,
        state: sampler.new_state(prompt.clone(), None, grammar),
    }];
    let mut done: Vec<BeamResult> = Vec::new();
    let opts = StepOptions::default();
    for _ in 0..cfg.max_new_tokens {
        if alive.is_empty() || done.len() >= w {
            break;
        }
        // (score, hypothesis, token, processor state)
        let mut ext: Vec<(f64, usize, u32, Commit)> = Vec::new();
        for (b, h) in alive.iter().enumerate() {
            let mut prefix = prompt.clone();
            prefix.extend(&h.tokens);
            let row = model(&prefix);
            let out = sampler.step(&h.state, &row, &opts)?;
            let lse = log_sum_exp(out.processed.values.iter().copied());
            let mut mine: Vec<(f64, usize, u32, Commit)> = out
                .processed
                .finite()
                .map(|(id, z)| {
                    let c = Commit {
                        token: id,
                        processor_state: out.commit.processor_state,
                    };
                    (h.sum + f64::from(z) - lse, b, id, c)
                })
                .collect();
            mine.sort_by(rank);
            mine.truncate(2 * w);
            ext.extend(mine);
        }
        ext.sort_by(rank);
        let mut next = Vec::with_capacity(w);
        for (rank_i, (score, b, id, commit)) in ext.into_iter().enumerate() {
            if next.len() >= w {
                break;
            }
            let h = &alive[b];
            let mut tokens = h.tokens.clone();
            tokens.push(id);
            if cfg.eos_token_ids.contains(&id) {
                if rank_i < w {
                    done.push(finish(
                        tokens,
                        score,
                        cfg.length_penalty,
                        FinishStatus::Eos(id),
                    ));
                }
                continue;
            }
            let mut state = h.state.clone();
            match state.commit(commit, b"")? {
                FinishStatus::Running => next.push(Hyp {
                    tokens,
                    sum: score,
                    state,
                }),
                status => {
                    if rank_i < w {
                        done.push(finish(tokens, score, cfg.length_penalty, status));
                    }
                }
            }
        }
        alive = next;
    }
    for h in alive {
        done.push(finish(
            h.tokens,
            h.sum,
            cfg.length_penalty,
            FinishStatus::Length,
        ));
    }
    done.sort_by(|a, b| {
        b.score
            .partial_cmp(&a.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.tokens.cmp(&b.tokens))
    });
    done.truncate(w);
    Ok(done)
}

fn rank(a: &(f64, usize, u32, Commit), b: &(f64, usize, u32, Commit)) -> Ordering {
    b.0.partial_cmp(&a.0)
        .unwrap_or(Ordering::Equal)
        .then(a.1.cmp(&b.1))
        .then(a.2.cmp(&b.2))
}
