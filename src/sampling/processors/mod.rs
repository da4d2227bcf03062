//! Logits processors, one file per family. Each processor declares its name, version and
//! the state it reads, and acts on the working [`Candidates`]: masks and truncations shrink
//! the support, transforms rewrite logits of the support. None touches history.

pub mod dry;
pub mod logit_bias;
pub mod masks;
pub mod mirostat;
pub mod penalties;
pub mod temperature;
pub mod truncation;
pub mod watermark;
pub mod xtc;

use super::error::{Result, SamplingError};
use super::logits::Candidates;
use super::state::{StateField, StateView};
use std::cmp::Ordering;
use std::fmt::Debug;

/// What a stage leaves besides the candidates: the RNG draws it consumed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StageNotes {
    pub draws: Vec<u64>,
}

pub trait Processor: Debug + Send + Sync {
    fn name(&self) -> &'static str;
    fn version(&self) -> u32 {
        1
    }
    /// The state fields this processor reads; anything else is hidden from it.
    fn reads(&self) -> &'static [StateField] {
        &[]
    }
    /// Its parameters as configured, for traces (§3.3: the order, each version and
    /// its parameters are recorded); `null` for a processor without any.
    fn params(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
    /// True for a truncation: it only narrows the support, by a rule that reads the
    /// whole distribution (top-k, top-p, ...). Masks and value transforms are not:
    /// they act token by token, so the processed layer (§3.1's `z^proc`) is theirs
    /// alone, and a mask may move before them without changing any result.
    fn truncates(&self) -> bool {
        false
    }
    fn apply(&self, c: &mut Candidates, view: &StateView<'_>, notes: &mut StageNotes)
        -> Result<()>;
}

/// Order "higher value first, then lower position" (positions follow ascending ids), the
/// stable tie-break every ranking in this module uses. Values are never NaN here.
#[inline]
pub(crate) fn desc_then_id<T: PartialOrd>(v: &[T], a: usize, b: usize) -> Ordering {
    v[b].partial_cmp(&v[a])
        .unwrap_or(Ordering::Equal)
        .then(a.cmp(&b))
}

/// Positions of the support sorted by probability, highest first, ties by id.
pub(crate) fn sorted_desc(probs: &[f64]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..probs.len()).collect();
    idx.sort_unstable_by(|&a, &b| desc_then_id(probs, a, b));
    idx
}

pub(crate) fn need<T>(v: Option<T>, name: &'static str) -> Result<T> {
    v.ok_or(SamplingError::UndeclaredRead(name))
}

/// Fail if a transform produced a non-finite logit (e.g. overflow under a tiny temperature).
pub(crate) fn check_finite(c: &Candidates, processor: &'static str) -> Result<()> {
    match c.logits.iter().position(|z| !z.is_finite()) {
        None => Ok(()),
        Some(i) => Err(SamplingError::NonFiniteProcessed {
            processor,
            position: c.ids[i] as usize,
            value: c.logits[i].to_string(),
        }),
    }
}
