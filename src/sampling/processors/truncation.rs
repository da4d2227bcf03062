//! Support truncation (§3.7, §9.3.2-9.3.5, Table 9-8): top-k, top-p, min-p, typical,
//! epsilon, eta and top-nσ, plus the explicit softmax stage of the reference order.
//!
//! Every rule ranks by value descending with ties broken by token id ascending, and every
//! probability-based rule renormalises over the current support first (so a truncation
//! placed after another reads the renormalised distribution, as in Hugging Face).
//! Probability rules keep at least the top token; top-k uses partial selection and top-p
//! grows a partially selected prefix instead of sorting the whole row.

use super::{desc_then_id, sorted_desc, Processor, StageNotes};
use crate::sampling::error::Result;
use crate::sampling::logits::{entropy_nats, Candidates};
use crate::sampling::state::StateView;
use serde_json::json;

/// Positions of the `k` highest values (ties: lower position first), ascending position.
/// Small `k`: one scan with a bounded min-heap (most values lose a single comparison with
/// the heap's worst); large `k`: `select_nth_unstable`. Neither sorts the whole row.
pub fn top_k_positions(v: &[f32], k: usize) -> Vec<usize> {
    if k == 0 {
        return Vec::new();
    }
    let mut idx: Vec<usize> = if k.saturating_mul(8) < v.len() {
        top_k_heap(v, k)
    } else {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        if k < v.len() {
            idx.select_nth_unstable_by(k - 1, |&a, &b| desc_then_id(v, a, b));
            idx.truncate(k);
        }
        idx
    };
    idx.sort_unstable();
    idx
}

/// Heap key: greater is better. `+ 0.0` turns -0.0 into +0.0 so `total_cmp` agrees with
/// numeric equality (values are never NaN here); equal values prefer the lower position.
#[derive(PartialEq, Eq)]
struct Key(u32, usize);

fn key(z: f32, pos: usize) -> Key {
    let b = (z + 0.0).to_bits();
    // Monotone map of f32 order onto u32 order.
    let m = if b >> 31 == 1 { !b } else { b | 0x8000_0000 };
    Key(m, pos)
}

impl Ord for Key {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.cmp(&o.0).then(o.1.cmp(&self.1))
    }
}
impl PartialOrd for Key {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

fn top_k_heap(v: &[f32], k: usize) -> Vec<usize> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut heap: BinaryHeap<Reverse<Key>> = BinaryHeap::with_capacity(k + 1);
    for (i, &z) in v.iter().enumerate() {
        let kz = key(z, i);
        if heap.len() < k {
            heap.push(Reverse(kz));
        } else if let Some(Reverse(worst)) = heap.peek() {
            // Scanning in ascending position, a tie never displaces the incumbent.
            if kz.0 > worst.0 {
                heap.pop();
                heap.push(Reverse(kz));
            }
        }
    }
    heap.into_iter().map(|Reverse(Key(_, i))| i).collect()
}

/// Top-p by a full sort: the shortest prefix (descending, ties by id) whose cumulative
/// probability reaches `p`; the whole support if rounding never reaches it.
pub fn top_p_positions_sorted(probs: &[f64], p: f64) -> Vec<usize> {
    let order = sorted_desc(probs);
    let k = nucleus_len(probs, &order, p).unwrap_or(order.len());
    order[..k].to_vec()
}

/// Same result as [`top_p_positions_sorted`], by partial selection: repeatedly select
/// and sort the next chunk (64, then ×8) of the unsorted remainder, extending the
/// cumulative sum, until it reaches `p`. The order visited is exactly the full sort's
/// prefix, so the cumulative sums, and the result, are bit-identical.
pub fn top_p_positions_partial(probs: &[f64], p: f64) -> Vec<usize> {
    let n = probs.len();
    let cmp = |a: &usize, b: &usize| desc_then_id(probs, *a, *b);
    let mut idx: Vec<usize> = (0..n).collect();
    let (mut done, mut chunk, mut cum) = (0usize, 64usize, 0.0f64);
    while done < n {
        let end = n.min(done + chunk);
        if end < n {
            idx[done..].select_nth_unstable_by(end - done - 1, cmp);
        }
        idx[done..end].sort_unstable_by(cmp);
        for r in done..end {
            cum += probs[idx[r]];
            if cum >= p {
                idx.truncate(r + 1);
                return idx;
            }
        }
        done = end;
        chunk = chunk.saturating_mul(8);
    }
    idx
}

/// Smallest `m >= 1` with `sum_{r<m} p[order[r]] >= p`, if reached within `order`.
fn nucleus_len(probs: &[f64], order: &[usize], p: f64) -> Option<usize> {
    let mut cum = 0.0;
    for (r, &i) in order.iter().enumerate() {
        cum += probs[i];
        if cum >= p {
            return Some(r + 1);
        }
    }
    None
}

/// §3.3 step 8: the stable softmax. It changes no logit or support; it exists so the
/// reference order (and its trace) names the point where probabilities are formed.
#[derive(Debug, Clone, Default)]
pub struct Softmax;

impl Processor for Softmax {
    fn name(&self) -> &'static str {
        "softmax"
    }
    fn apply(&self, _: &mut Candidates, _: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct TopK {
    pub k: usize,
}

impl Processor for TopK {
    fn name(&self) -> &'static str {
        "top_k"
    }
    fn params(&self) -> serde_json::Value {
        json!({"k": self.k})
    }
    fn truncates(&self) -> bool {
        true
    }
    fn apply(&self, c: &mut Candidates, _: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        if self.k < c.len() {
            let keep = top_k_positions(&c.logits, self.k);
            c.keep_positions(&keep);
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct TopP {
    pub p: f64,
    /// Use the full sort (for comparison benchmarks); results are identical.
    pub full_sort: bool,
}

impl Processor for TopP {
    fn name(&self) -> &'static str {
        "top_p"
    }
    fn params(&self) -> serde_json::Value {
        json!({"p": self.p})
    }
    fn truncates(&self) -> bool {
        true
    }
    fn apply(&self, c: &mut Candidates, _: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        if self.p >= 1.0 {
            return Ok(());
        }
        let probs = c.softmax();
        let keep = if self.full_sort {
            top_p_positions_sorted(&probs, self.p)
        } else {
            top_p_positions_partial(&probs, self.p)
        };
        c.keep_positions(&keep);
        Ok(())
    }
}

/// Keep `p_i >= α · p_max`.
#[derive(Debug, Clone)]
pub struct MinP {
    pub alpha: f64,
}

impl Processor for MinP {
    fn name(&self) -> &'static str {
        "min_p"
    }
    fn params(&self) -> serde_json::Value {
        json!({"alpha": self.alpha})
    }
    fn truncates(&self) -> bool {
        true
    }
    fn apply(&self, c: &mut Candidates, _: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        let probs = c.softmax();
        let pmax = probs.iter().copied().fold(0.0, f64::max);
        let thr = self.alpha * pmax;
        c.retain_by_index(|i| probs[i] >= thr);
        Ok(())
    }
}

/// Locally typical sampling (Meister et al.; HF `TypicalLogitsWarper`): rank by
/// `|(-ln p_i) - H|` ascending and keep the shortest prefix whose mass reaches `mass`.
#[derive(Debug, Clone)]
pub struct Typical {
    pub mass: f64,
}

impl Processor for Typical {
    fn name(&self) -> &'static str {
        "typical"
    }
    fn params(&self) -> serde_json::Value {
        json!({"mass": self.mass})
    }
    fn truncates(&self) -> bool {
        true
    }
    fn apply(&self, c: &mut Candidates, _: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        if self.mass >= 1.0 {
            return Ok(());
        }
        let probs = c.softmax();
        let h = entropy_nats(&probs);
        let dist: Vec<f64> = probs.iter().map(|&p| -(-p.ln() - h).abs()).collect();
        // Rank by -distance descending == distance ascending, ties by id.
        let order = sorted_desc(&dist);
        let k = nucleus_len(&probs, &order, self.mass).unwrap_or(order.len());
        c.keep_positions(&order[..k]);
        Ok(())
    }
}

/// Remove `p_i < threshold` but always keep the top token (HF `min_tokens_to_keep = 1`).
fn cut_below(c: &mut Candidates, probs: &[f64], threshold: f64) {
    let top = c.argmax();
    c.retain_by_index(|i| probs[i] >= threshold || Some(i) == top);
}

/// ε sampling (Hewitt et al.): keep `p_i >= ε`.
#[derive(Debug, Clone)]
pub struct Epsilon {
    pub epsilon: f64,
}

impl Processor for Epsilon {
    fn name(&self) -> &'static str {
        "epsilon"
    }
    fn params(&self) -> serde_json::Value {
        json!({"epsilon": self.epsilon})
    }
    fn truncates(&self) -> bool {
        true
    }
    fn apply(&self, c: &mut Candidates, _: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        let probs = c.softmax();
        cut_below(c, &probs, self.epsilon);
        Ok(())
    }
}

/// η sampling (Hewitt et al.; HF `EtaLogitsWarper`): `η = min(ε, √ε · e^{-H})`, H in nats.
///
/// The second specification text's table writes `η = min(ε, √ε, e^{-H})` (three
/// terms). We follow the paper and Hugging Face, whose threshold is the product
/// `√ε · e^{-H}`: it is what the method was defined and tuned as (the cut falls as
/// the entropy rises, scaled by `√ε`), and a model trained or evaluated with
/// `eta_cutoff` elsewhere then keeps the same tokens here. The three-term reading
/// would make the cut for a flat distribution as large as `e^{-H}` alone.
#[derive(Debug, Clone)]
pub struct Eta {
    pub epsilon: f64,
}

/// The η threshold for a distribution.
pub fn eta_threshold(epsilon: f64, probs: &[f64]) -> f64 {
    epsilon.min(epsilon.sqrt() * (-entropy_nats(probs)).exp())
}

impl Processor for Eta {
    fn name(&self) -> &'static str {
        "eta"
    }
    fn params(&self) -> serde_json::Value {
        json!({"epsilon": self.epsilon})
    }
    fn truncates(&self) -> bool {
        true
    }
    fn apply(&self, c: &mut Candidates, _: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        let probs = c.softmax();
        let thr = eta_threshold(self.epsilon, &probs);
        cut_below(c, &probs, thr);
        Ok(())
    }
}

/// Top-nσ (Tang et al.; llama.cpp): keep logits `>= max - n·σ`, σ the population standard
/// deviation of the support's logits.
#[derive(Debug, Clone)]
pub struct TopNSigma {
    pub n: f64,
}

impl Processor for TopNSigma {
    fn name(&self) -> &'static str {
        "top_n_sigma"
    }
    fn params(&self) -> serde_json::Value {
        json!({"n": self.n})
    }
    fn truncates(&self) -> bool {
        true
    }
    fn apply(&self, c: &mut Candidates, _: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        let len = c.len() as f64;
        let max = c
            .logits
            .iter()
            .map(|&z| f64::from(z))
            .fold(f64::MIN, f64::max);
        let mean = c.logits.iter().map(|&z| f64::from(z)).sum::<f64>() / len;
        let var = c
            .logits
            .iter()
            .map(|&z| (f64::from(z) - mean).powi(2))
            .sum::<f64>()
            / len;
        let thr = max - self.n * var.sqrt();
        let z = c.logits.clone();
        c.retain_by_index(|i| f64::from(z[i]) >= thr);
        Ok(())
    }
}
