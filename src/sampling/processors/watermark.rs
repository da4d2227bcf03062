//! Kirchenbauer et al. green-list watermark and its one-sided z-test detector (§9.3.6).
//!
//! Green list: token `i` is green after previous token `prev` iff a Philox hash of
//! (key, prev, i) falls below `γ · 2^32`. That is an independent Bernoulli(γ) per token
//! rather than the paper's exact `γ|V|`-sized permutation: it costs one hash per token
//! instead of a vocabulary shuffle, and under the null hypothesis each scored token is
//! still green with probability γ (to within 2^-32), which is all the z-test needs.

use super::{need, Processor, StageNotes};
use crate::sampling::error::Result;
use crate::sampling::logits::Candidates;
use crate::sampling::rng::philox4x32;
use crate::sampling::state::{StateField, StateView};
use serde::Serialize;
use serde_json::json;

/// Domain-separation word so green-list hashes never coincide with sampling draws.
const DOMAIN: u32 = 0x5741_544D; // "WATM"

#[derive(Debug, Clone, Copy)]
pub struct Watermark {
    pub gamma: f64,
    pub delta: f32,
    pub key: u64,
}

pub fn is_green(key: u64, gamma: f64, prev: u32, id: u32) -> bool {
    let out = philox4x32(10, [id, prev, DOMAIN, 0], [key as u32, (key >> 32) as u32]);
    (f64::from(out[0])) < gamma * 4_294_967_296.0
}

/// `z = (|s|_G - γT) / sqrt(T γ (1-γ))`.
pub fn z_score(green: usize, scored: usize, gamma: f64) -> f64 {
    let t = scored as f64;
    (green as f64 - gamma * t) / (t * gamma * (1.0 - gamma)).sqrt()
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Detection {
    pub green: usize,
    pub scored: usize,
    pub z: f64,
}

/// Score a token sequence; token `k` is scored against token `k - 1`, so `tokens[0]` only
/// seeds the first green list.
pub fn detect(key: u64, gamma: f64, tokens: &[u32]) -> Detection {
    let green = tokens
        .windows(2)
        .filter(|w| is_green(key, gamma, w[0], w[1]))
        .count();
    let scored = tokens.len().saturating_sub(1);
    Detection {
        green,
        scored,
        z: z_score(green, scored, gamma),
    }
}

impl Processor for Watermark {
    fn name(&self) -> &'static str {
        "watermark"
    }
    fn params(&self) -> serde_json::Value {
        json!({"gamma": self.gamma, "delta": self.delta, "key": self.key})
    }
    fn reads(&self) -> &'static [StateField] {
        &[StateField::Prompt, StateField::Output]
    }
    fn apply(&self, c: &mut Candidates, v: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        let out = need(v.output, self.name())?;
        let prompt = need(v.prompt, self.name())?;
        // Nothing precedes the very first token of an empty context: nothing to seed.
        let Some(&prev) = out.last().or(prompt.last()) else {
            return Ok(());
        };
        for i in 0..c.len() {
            if is_green(self.key, self.gamma, prev, c.ids[i]) {
                c.logits[i] += self.delta;
            }
        }
        super::check_finite(c, self.name())
    }
}
