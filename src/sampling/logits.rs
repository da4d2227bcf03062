//! The four objects of §3.1, kept as distinct types so they cannot be confused:
//! [`RawLogits`] (the model's row), [`ProcessedLogits`] (after the declared processors),
//! [`CandidateSupport`] (what is still selectable) and [`SelectionDistribution`]
//! (renormalised over the final support). A [`Logprob`] always names its [`Layer`].
//!
//! While the pipeline runs, the working set is [`Candidates`]: the current support as
//! ascending token ids with their current processed logits (struct of arrays). Value
//! transforms touch only the support; a token that leaves the support reads as `-inf`
//! thereafter (the "support mask" of §3.3), so processed logits and support stay coherent.

use super::error::{Result, SamplingError};
use serde::Serialize;

/// The model's logits row, validated: no NaN, no `+inf` (spec §3.7 boundary list). `-inf`
/// is accepted and means "never selectable".
#[derive(Debug, Clone, Copy)]
pub struct RawLogits<'a> {
    values: &'a [f32],
}

impl<'a> RawLogits<'a> {
    pub fn new(values: &'a [f32]) -> Result<Self> {
        if values.is_empty() {
            return Err(SamplingError::EmptyLogits);
        }
        if let Some((position, v)) = values
            .iter()
            .enumerate()
            .find(|(_, v)| v.is_nan() || **v == f32::INFINITY)
        {
            let value = if v.is_nan() { "NaN" } else { "+inf" }.to_string();
            return Err(SamplingError::NonFiniteLogit { position, value });
        }
        Ok(Self { values })
    }

    pub fn width(&self) -> usize {
        self.values.len()
    }

    pub fn values(&self) -> &'a [f32] {
        self.values
    }

    /// Log-softmax over the whole raw row (layer [`Layer::Raw`]).
    pub fn logprob(&self, id: u32) -> Logprob {
        let z = self.values[id as usize];
        Logprob {
            layer: Layer::Raw,
            value: f64::from(z) - log_sum_exp(self.values.iter().copied()),
        }
    }
}

/// Which normalisation a logprob was taken under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// Softmax of the raw logits over the full vocabulary.
    Raw,
    /// Softmax of the processed logits (§3.1's `z^proc`: the masks and value
    /// transforms, penalties and temperature among them, in the declared order;
    /// no truncation) over every token no mask removed.
    Processed,
    /// The selection distribution: processed logits renormalised over the final support.
    Selection,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Logprob {
    pub layer: Layer,
    pub value: f64,
}

/// Processed logits: the score of every token after the declared processors, `-inf`
/// for tokens masked or truncated away.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessedLogits {
    pub(crate) width: usize,
    pub(crate) ids: Vec<u32>,
    pub(crate) values: Vec<f32>,
}

impl ProcessedLogits {
    pub fn width(&self) -> usize {
        self.width
    }
    pub fn get(&self, id: u32) -> f32 {
        match self.ids.binary_search(&id) {
            Ok(i) => self.values[i],
            Err(_) => f32::NEG_INFINITY,
        }
    }
    /// Finite entries, ascending id.
    pub fn finite(&self) -> impl Iterator<Item = (u32, f32)> + '_ {
        self.ids.iter().copied().zip(self.values.iter().copied())
    }
    /// Full-width dense copy (`-inf` outside the support).
    pub fn to_dense(&self) -> Vec<f32> {
        let mut d = vec![f32::NEG_INFINITY; self.width];
        for (id, v) in self.finite() {
            d[id as usize] = v;
        }
        d
    }
}

/// The set of still-selectable tokens, ascending id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CandidateSupport {
    pub ids: Vec<u32>,
}

impl CandidateSupport {
    pub fn len(&self) -> usize {
        self.ids.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
    pub fn contains(&self, id: u32) -> bool {
        self.ids.binary_search(&id).is_ok()
    }
}

/// The distribution the selector draws from: ascending ids, probabilities summing to 1.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SelectionDistribution {
    pub ids: Vec<u32>,
    pub probs: Vec<f64>,
}

impl SelectionDistribution {
    pub fn prob(&self, id: u32) -> f64 {
        self.ids
            .binary_search(&id)
            .map(|i| self.probs[i])
            .unwrap_or(0.0)
    }
    pub fn logprob(&self, id: u32) -> Logprob {
        Logprob {
            layer: Layer::Selection,
            value: self.prob(id).ln(),
        }
    }
    pub fn pairs(&self) -> Vec<(u32, f64)> {
        self.ids
            .iter()
            .copied()
            .zip(self.probs.iter().copied())
            .collect()
    }
}

/// The pipeline's working set (see module doc).
#[derive(Debug, Clone)]
pub struct Candidates {
    pub(crate) width: usize,
    pub(crate) ids: Vec<u32>,
    pub(crate) logits: Vec<f32>,
}

impl Candidates {
    /// The tokens with a finite raw logit that `mask` allows (the shared bit
    /// layout; ids past its words are not allowed): the same as [`from_raw`]
    /// followed by the grammar stage, in one pass over the mask's words.
    ///
    /// [`from_raw`]: Self::from_raw
    pub fn from_raw_masked(raw: &RawLogits<'_>, mask: &[u32]) -> Self {
        let v = raw.values();
        let mut ids = Vec::new();
        let mut logits = Vec::new();
        for (w, &word) in mask.iter().enumerate().take(v.len().div_ceil(32)) {
            let mut bits = word;
            while bits != 0 {
                let i = w * 32 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                if i < v.len() && v[i] != f32::NEG_INFINITY {
                    ids.push(i as u32);
                    logits.push(v[i]);
                }
            }
        }
        Self {
            width: v.len(),
            ids,
            logits,
        }
    }

    /// All tokens with a finite raw logit.
    pub fn from_raw(raw: &RawLogits<'_>) -> Self {
        let v = raw.values();
        let mut ids = Vec::with_capacity(v.len());
        let mut logits = Vec::with_capacity(v.len());
        for (i, &z) in v.iter().enumerate() {
            if z != f32::NEG_INFINITY {
                ids.push(i as u32);
                logits.push(z);
            }
        }
        Self {
            width: v.len(),
            ids,
            logits,
        }
    }

    pub fn width(&self) -> usize {
        self.width
    }
    pub fn len(&self) -> usize {
        self.ids.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }
    pub fn logits(&self) -> &[f32] {
        &self.logits
    }

    /// Index of `id` in the support, if present.
    pub fn position(&self, id: u32) -> Option<usize> {
        // Fast path while the support is still the identity prefix.
        let i = id as usize;
        if i < self.ids.len() && self.ids[i] == id {
            return Some(i);
        }
        self.ids.binary_search(&id).ok()
    }

    /// Keep the candidates for which `keep(index)` is true; order is preserved.
    pub fn retain_by_index(&mut self, mut keep: impl FnMut(usize) -> bool) {
        let mut w = 0;
        for r in 0..self.ids.len() {
            if keep(r) {
                self.ids[w] = self.ids[r];
                self.logits[w] = self.logits[r];
                w += 1;
            }
        }
        self.ids.truncate(w);
        self.logits.truncate(w);
    }

    /// Keep exactly the candidates at `positions` (any order, no duplicates).
    pub fn keep_positions(&mut self, positions: &[usize]) {
        let mut flags = vec![false; self.ids.len()];
        for &p in positions {
            flags[p] = true;
        }
        self.retain_by_index(|i| flags[i]);
    }

    /// Stable softmax over the support (§3.6), accumulated in f64.
    pub fn softmax(&self) -> Vec<f64> {
        softmax_f32(&self.logits)
    }

    pub fn processed(&self) -> ProcessedLogits {
        ProcessedLogits {
            width: self.width,
            ids: self.ids.clone(),
            values: self.logits.clone(),
        }
    }

    pub fn support(&self) -> CandidateSupport {
        CandidateSupport {
            ids: self.ids.clone(),
        }
    }

    pub fn selection(&self) -> SelectionDistribution {
        SelectionDistribution {
            ids: self.ids.clone(),
            probs: self.softmax(),
        }
    }

    /// `ln p(id)` under the softmax of these logits (`-inf` outside the support).
    pub fn logprob(&self, id: u32) -> f64 {
        match self.position(id) {
            Some(i) => f64::from(self.logits[i]) - log_sum_exp(self.logits.iter().copied()),
            None => f64::NEG_INFINITY,
        }
    }

    /// Index of the maximum logit, ties to the lowest id (ids are ascending, so the first).
    pub fn argmax(&self) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (i, &z) in self.logits.iter().enumerate() {
            match best {
                Some(b) if self.logits[b] >= z => {}
                _ => best = Some(i),
            }
        }
        best
    }
}

/// `exp(z - max) / sum`, with the max subtracted for stability; f64 accumulation.
pub fn softmax_f32(z: &[f32]) -> Vec<f64> {
    let m = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let m = f64::from(m);
    let mut out: Vec<f64> = z.iter().map(|&v| (f64::from(v) - m).exp()).collect();
    let s: f64 = out.iter().sum();
    let inv = 1.0 / s;
    for p in &mut out {
        *p *= inv;
    }
    out
}

/// `ln sum exp z`, stable.
pub fn log_sum_exp(z: impl Iterator<Item = f32> + Clone) -> f64 {
    let m = f64::from(z.clone().fold(f32::NEG_INFINITY, f32::max));
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + z.map(|v| (f64::from(v) - m).exp()).sum::<f64>().ln()
}

/// Entropy in nats of a normalised distribution.
pub fn entropy_nats(p: &[f64]) -> f64 {
    -p.iter()
        .filter(|&&x| x > 0.0)
        .map(|&x| x * x.ln())
        .sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Large logits do not overflow: `[1000, 999]` is `[1/(1+e^-1), e^-1/(1+e^-1)]`.
    #[test]
    fn softmax_and_log_sum_exp_are_stable_on_large_logits() {
        let p = softmax_f32(&[1000.0, 999.0]);
        let e = (-1.0f64).exp();
        assert!((p[0] - 1.0 / (1.0 + e)).abs() < 1e-12, "{p:?}");
        assert!((p[1] - e / (1.0 + e)).abs() < 1e-12, "{p:?}");
        let lse = log_sum_exp([1000.0f32, 999.0].into_iter());
        assert!((lse - (1000.0 + (1.0 + e).ln())).abs() < 1e-9, "{lse}");
        // At the edge of f32: the max subtracted first, nothing overflows.
        let p = softmax_f32(&[f32::MAX, f32::MAX]);
        assert_eq!(p, vec![0.5, 0.5]);
        let p = softmax_f32(&[-f32::MAX, -f32::MAX, -f32::MAX]);
        assert!(p.iter().all(|&x| (x - 1.0 / 3.0).abs() < 1e-15), "{p:?}");
    }

    /// `-inf` entries get probability 0 and leave the others exact; a row of only
    /// `-inf` has no log-sum-exp (`-inf`), never NaN.
    #[test]
    fn negative_infinity_is_probability_zero() {
        let p = softmax_f32(&[f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY, 0.0]);
        assert_eq!(p, vec![0.0, 0.5, 0.0, 0.5]);
        assert_eq!(
            log_sum_exp([f32::NEG_INFINITY, f32::NEG_INFINITY].into_iter()),
            f64::NEG_INFINITY
        );
        let lse = log_sum_exp([f32::NEG_INFINITY, 0.0].into_iter());
        assert_eq!(lse, 0.0);
    }
}
