//! Mirostat (Basu et al.), both versions as llama.cpp has them. The target
//! surprise τ and learning rate η steer μ, which lives in the decoder state's
//! processor state, starting at `2τ`; after selection μ moves by
//! `-η · (surprise(y) - τ)`, the surprise `-log2 p` read from the selection
//! distribution. The versions differ in the cut:
//!
//! * v2 (`mirostat_v2`): keep the tokens whose surprise is at most μ (at least the
//!   top one).
//! * v1 (`mirostat`, the paper's adaptive top-k): estimate the Zipf exponent `ŝ`
//!   from the `m` most probable tokens (least squares of `ln(p_i / p_{i+1})` on
//!   `ln((i+2)/(i+1))`), then keep the top
//!   `k = ((ε̂ · 2^μ) / (1 - N^(-ε̂)))^(1/ŝ)` tokens, `ε̂ = ŝ - 1`, N the vocabulary
//!   size (at least one; all when `k` is not finite, a flat top).

use super::{need, Processor, StageNotes};
use crate::sampling::error::Result;
use crate::sampling::logits::Candidates;
use crate::sampling::state::{StateField, StateView};
use serde_json::json;

/// Which cut μ steers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MirostatVersion {
    /// Adaptive top-k from a Zipf estimate over the `m` most probable tokens.
    V1 { m: usize },
    /// A surprise bound.
    V2,
}

#[derive(Debug, Clone)]
pub struct Mirostat {
    pub tau: f64,
    pub eta: f64,
    pub version: MirostatVersion,
}

impl Mirostat {
    pub fn initial_mu(&self) -> f64 {
        2.0 * self.tau
    }
    /// μ after selecting a token of selection probability `p`.
    pub fn update(&self, mu: f64, p: f64) -> f64 {
        mu - self.eta * (-p.log2() - self.tau)
    }
}

/// v1's k for probabilities `sorted` (descending) over a vocabulary of `n`.
pub fn mirostat_v1_k(sorted: &[f64], m: usize, n: usize, mu: f64) -> usize {
    let m = m.min(sorted.len().saturating_sub(1));
    let (mut sum_tb, mut sum_tt) = (0.0, 0.0);
    for i in 0..m {
        let t = ((i + 2) as f64 / (i + 1) as f64).ln();
        let b = (sorted[i] / sorted[i + 1]).ln();
        sum_tb += t * b;
        sum_tt += t * t;
    }
    let s_hat = sum_tb / sum_tt;
    let eps_hat = s_hat - 1.0;
    let k = ((eps_hat * 2f64.powf(mu)) / (1.0 - (n as f64).powf(-eps_hat))).powf(1.0 / s_hat);
    if k.is_finite() {
        (k as usize).max(1)
    } else {
        sorted.len()
    }
}

impl Processor for Mirostat {
    fn name(&self) -> &'static str {
        "mirostat"
    }
    fn params(&self) -> serde_json::Value {
        match self.version {
            MirostatVersion::V1 { m } => {
                json!({"version": 1, "tau": self.tau, "eta": self.eta, "m": m})
            }
            MirostatVersion::V2 => json!({"version": 2, "tau": self.tau, "eta": self.eta}),
        }
    }
    fn truncates(&self) -> bool {
        true
    }
    fn reads(&self) -> &'static [StateField] {
        &[StateField::ProcessorState]
    }
    fn apply(&self, c: &mut Candidates, v: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        let ps = need(v.processor_state, self.name())?;
        let mu = ps.mirostat_mu.unwrap_or(self.initial_mu());
        let probs = c.softmax();
        match self.version {
            MirostatVersion::V2 => {
                let top = c.argmax();
                c.retain_by_index(|i| -probs[i].log2() <= mu || Some(i) == top);
            }
            MirostatVersion::V1 { m } => {
                // Most probable first; ties to the lower id (ids are ascending).
                let mut order: Vec<usize> = (0..probs.len()).collect();
                order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
                let sorted: Vec<f64> = order.iter().map(|&i| probs[i]).collect();
                let k = mirostat_v1_k(&sorted, m, c.width(), mu);
                let mut keep = vec![false; probs.len()];
                for &i in order.iter().take(k) {
                    keep[i] = true;
                }
                c.retain_by_index(|i| keep[i]);
            }
        }
        Ok(())
    }
}
