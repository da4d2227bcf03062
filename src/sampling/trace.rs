//! The per-step record of §3.12: step, a comparable summary of the raw logits, the ordered
//! processors with versions, each stage's support size (and, on request, its candidates),
//! the final candidates with selection logprobs, the RNG identity and counter, the
//! selected token and the constraint state before and after. Serialisable as JSON.

use super::logits::Logprob;
use super::rng::RngRecord;
use serde::Serialize;

/// Stage details are recorded only for supports up to this size.
pub const DETAIL_LIMIT: usize = 1024;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RawSummary {
    pub width: usize,
    pub finite: usize,
    pub argmax: u32,
    pub max: f32,
    /// The selected token's raw logit.
    pub selected_logit: f32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageRecord {
    pub processor: &'static str,
    pub version: u32,
    pub support_size: usize,
    /// `(id, processed logit, probability over this stage's support)`, ascending id;
    /// present in detailed traces when the support is at most [`DETAIL_LIMIT`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates: Option<Vec<(u32, f32, f64)>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub draws: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConstraintRecord {
    pub accepting: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepTrace {
    pub step: u64,
    pub raw: RawSummary,
    /// Where the order came from: a preset name or `user`.
    pub order_source: String,
    /// Active processors, in the order applied.
    pub order: Vec<&'static str>,
    pub versions: Vec<u32>,
    /// Each active processor's parameters, in `order`.
    pub params: Vec<serde_json::Value>,
    pub stages: Vec<StageRecord>,
    pub strategy: &'static str,
    /// Final support, ascending id, with selection probabilities.
    pub selection: Vec<(u32, f64)>,
    pub u: Option<f64>,
    pub rng: RngRecord,
    pub token: u32,
    pub logprobs: Vec<Logprob>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraint_before: Option<ConstraintRecord>,
    /// Filled by detailed steps (a forked matcher consumes the token); otherwise the
    /// caller may fill it after commit from [`DecoderState::constraint_record`].
    ///
    /// [`DecoderState::constraint_record`]: super::state::DecoderState::constraint_record
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraint_after: Option<ConstraintRecord>,
}
