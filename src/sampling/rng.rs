//! Counter-based randomness: Philox4x32-10 keyed by the request seed.
//!
//! Every uniform a request consumes is a pure function of (seed, step, draw index), so a
//! request's draws never depend on which other requests share its batch, nor on how many
//! draws earlier steps used (spec §3.8, §3.12 "seed 相同但 RNG 流共享"). Implemented here
//! (≈40 lines) rather than pulled in: no well-maintained crate exists, and the published
//! Random123 known-answer vectors pin it (see the tests below).

use serde::Serialize;

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// Name recorded in every trace.
pub const ALGORITHM: &str = "philox4x32-10";

/// Draw index of the reference categorical selector's single uniform.
pub const DRAW_CATEGORICAL: u64 = 0;
/// Draw indices at and above this are reserved for processors (XTC); the exponential race
/// uses the token id as draw index, so ids stay below it.
pub const DRAW_PROCESSOR_BASE: u64 = 1 << 40;

/// The Philox4x32 bijection with `rounds` rounds (10 is the standard choice).
pub fn philox4x32(rounds: u32, ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (ctr, key);
    for r in 0..rounds {
        if r > 0 {
            k[0] = k[0].wrapping_add(W0);
            k[1] = k[1].wrapping_add(W1);
        }
        let p0 = u64::from(M0) * u64::from(c[0]);
        let p1 = u64::from(M1) * u64::from(c[2]);
        c = [
            ((p1 >> 32) as u32) ^ c[1] ^ k[0],
            p1 as u32,
            ((p0 >> 32) as u32) ^ c[3] ^ k[1],
            p0 as u32,
        ];
    }
    c
}

/// One request's stream: key = seed, counter = (block, step).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RngStream {
    pub seed: u64,
}

impl RngStream {
    pub fn new(seed: u64) -> Self {
        Self { seed }
    }

    fn key(&self) -> [u32; 2] {
        [self.seed as u32, (self.seed >> 32) as u32]
    }

    /// The 128-bit block for (step, block index): counter words are
    /// `[block lo, block hi, step lo, step hi]`.
    pub fn block(&self, step: u64, block: u64) -> [u32; 4] {
        let ctr = [
            block as u32,
            (block >> 32) as u32,
            step as u32,
            (step >> 32) as u32,
        ];
        philox4x32(10, ctr, self.key())
    }

    /// Uniform in [0, 1) with 53 random bits for draw `draw` of step `step`. Draws 2b and
    /// 2b+1 share block b (each takes one 64-bit half), so a race over n tokens costs n/2
    /// Philox calls.
    pub fn uniform(&self, step: u64, draw: u64) -> f64 {
        let b = self.block(step, draw >> 1);
        uniform_from_half(b, (draw & 1) as usize)
    }
}

/// Uniform in [0, 1) from half `h` (0 or 1) of a Philox block.
pub fn uniform_from_half(b: [u32; 4], h: usize) -> f64 {
    let hi = u64::from(b[2 * h]);
    let lo = u64::from(b[2 * h + 1]);
    let bits = ((hi << 32) | lo) >> 11;
    bits as f64 * (1.0 / (1u64 << 53) as f64)
}

/// What the trace records about randomness for one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RngRecord {
    pub algorithm: &'static str,
    pub seed: Option<u64>,
    pub step: u64,
    /// Draw indices consumed this step, e.g. `[0]` for the categorical selector; a race
    /// records the range `[first_id, last_id]` of ids it drew for.
    pub draws: Vec<u64>,
    /// True when `u` was supplied by the caller instead of drawn.
    pub forced_u: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    // Random123 kat_vectors, "philox4x32 10" lines: counter[4] key[2] -> output[4].
    #[test]
    fn random123_known_answers() {
        let cases: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
            (
                [0; 4],
                [0; 2],
                [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8],
            ),
            (
                [u32::MAX; 4],
                [u32::MAX; 2],
                [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd],
            ),
            (
                [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
                [0xa4093822, 0x299f31d0],
                [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1],
            ),
        ];
        for (ctr, key, want) in cases {
            assert_eq!(philox4x32(10, ctr, key), want);
        }
    }

    #[test]
    fn uniform_is_in_unit_interval_and_counter_addressed() {
        let s = RngStream::new(42);
        for step in 0..50 {
            for d in 0..50 {
                let u = s.uniform(step, d);
                assert!((0.0..1.0).contains(&u));
                assert_eq!(u, RngStream::new(42).uniform(step, d));
            }
        }
        assert_ne!(s.uniform(1, 0), s.uniform(2, 0));
        assert_ne!(s.uniform(1, 0), RngStream::new(43).uniform(1, 0));
    }
}
