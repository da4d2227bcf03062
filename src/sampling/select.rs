//! Selectors (§3.8, §9.3.8): greedy, the reference categorical draw and the exponential
//! race. All read the final support in ascending token id; ties go to the lowest id.
//!
//! The categorical selector and the race sample the same distribution but consume
//! randomness differently (one uniform vs one per candidate), so for a given seed they
//! agree in distribution, not token by token.

use super::logits::{Candidates, SelectionDistribution};
use super::rng::RngStream;

/// Position of the highest processed logit; ties to the lowest id.
pub fn greedy(c: &Candidates) -> Option<usize> {
    c.argmax()
}

/// Reference categorical: candidates by id ascending, the first whose cumulative
/// probability exceeds `u`; the last candidate if rounding leaves the total below `u`.
pub fn categorical(sel: &SelectionDistribution, u: f64) -> Option<usize> {
    let mut cum = 0.0;
    for (i, &p) in sel.probs.iter().enumerate() {
        cum += p;
        if u < cum {
            return Some(i);
        }
    }
    // Rounding guard.
    sel.probs.len().checked_sub(1)
}

/// Exponential race: `argmax_i p_i / q_i` with `q_i = -ln(1 - U_i) ~ Exp(1)`, where `U_i`
/// is the request's draw indexed by token id at this step, so a token's noise does not
/// depend on which other tokens are in the support. Ties to the lowest id.
pub fn exponential_race(sel: &SelectionDistribution, rng: RngStream, step: u64) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    let mut cached: Option<(u64, [u32; 4])> = None;
    for (i, (&id, &p)) in sel.ids.iter().zip(&sel.probs).enumerate() {
        let d = u64::from(id);
        let block = match cached {
            Some((b, blk)) if b == d >> 1 => blk,
            _ => {
                let blk = rng.block(step, d >> 1);
                cached = Some((d >> 1, blk));
                blk
            }
        };
        let u = super::rng::uniform_from_half(block, (d & 1) as usize);
        let q = -(-u).ln_1p();
        let score = p / q;
        if best.is_none_or(|(_, s)| score > s) {
            best = Some((i, score));
        }
    }
    best.map(|(i, _)| i)
}
