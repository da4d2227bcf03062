//! What one engine measured over a `stencil bench` run ([`Tally`]) and the
//! figures a run reports from it: percentiles, the summary object, and times
//! to first mask over the workloads both engines compiled.
//!
//! Kept apart from the bench loop (`bench.rs`) so the loop reads as the
//! protocol and this as the arithmetic over its results.

use std::hash::{Hash, Hasher};

use serde_json::{json, Value};

/// Timings and verdicts of one engine over the whole run.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) ttfm_us: Vec<f64>,
    /// Per workload: its time to first mask, `None` where it did not compile
    /// (for the slowest compiles, and TTFM over what both engines compiled).
    pub(super) first_masks: Vec<Option<f64>>,
    pub(super) tbm_us: Vec<f64>,
    pub(super) compiled: usize,
    pub(super) failed: usize,
    pub(super) valid_rejected: usize,
    pub(super) invalid_accepted: usize,
    pub(super) memory: Vec<usize>,
    /// What the engine kept for all grammars, after each instance.
    pub(super) shared_memory: Vec<usize>,
    /// Per workload, per instance, per step: a fingerprint of the mask.
    pub(super) fingerprints: Vec<Vec<Vec<u64>>>,
    /// Per mask: (microseconds, workload, instance, step), for `--slowest`.
    pub(super) steps: Vec<(f64, usize, usize, usize)>,
    pub(super) errors: Vec<String>,
    /// Valid instances refused: (workload, instance, step of the refused token,
    /// or the token count where the text was not accepted at its end).
    pub(super) refusals: Vec<(usize, usize, usize)>,
}

pub(super) fn fingerprint(mask: &[u32], text_tokens: &[u32]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    for (w, &bits) in mask.iter().enumerate().take(text_tokens.len()) {
        (bits & text_tokens[w]).hash(&mut h);
    }
    h.finish()
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let rank = ((p * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// p50, p90, p99 and max of times to first mask.
fn ttfm_percentiles(ttfm: &mut [f64]) -> Value {
    json!({
        "p50": round(percentile(ttfm, 0.5)), "p90": round(percentile(ttfm, 0.9)),
        "p99": round(percentile(ttfm, 0.99)), "max": round(percentile(ttfm, 1.0)),
    })
}

/// Times to first mask over the workloads both engines compiled: an engine that
/// compiles more (harder) schemas carries them in its own tail, so this is the
/// like-for-like comparison beside each engine's own.
#[cfg(feature = "peers")]
pub(super) fn ttfm_common(ours: &Tally, peer: &Tally) -> Value {
    let (mut a, mut b): (Vec<f64>, Vec<f64>) = ours
        .first_masks
        .iter()
        .zip(&peer.first_masks)
        .filter_map(|(a, b)| Some(((*a)?, (*b)?)))
        .unzip();
    json!({
        "workloads": a.len(),
        "stencil": ttfm_percentiles(&mut a),
        "peer": ttfm_percentiles(&mut b),
    })
}

pub(super) fn summary(engine: &str, tokenizer: &str, tally: &mut Tally) -> Value {
    let ttfm_json = ttfm_percentiles(&mut tally.ttfm_us);
    let tbm = &mut tally.tbm_us;
    let tbm_json = json!({
        "p50": round(percentile(tbm, 0.5)), "p90": round(percentile(tbm, 0.9)),
        "p99": round(percentile(tbm, 0.99)), "p999": round(percentile(tbm, 0.999)),
        "max": round(percentile(tbm, 1.0)),
    });
    let memory_max = tally.memory.iter().copied().max().unwrap_or(0);
    json!({
        "engine": engine,
        "tokenizer": tokenizer,
        "ttfm_us": ttfm_json,
        "tbm_us": tbm_json,
        "masks": tally.tbm_us.len(),
        "schemas": {"compiled": tally.compiled, "failed": tally.failed},
        "instances": {"valid_rejected": tally.valid_rejected, "invalid_accepted": tally.invalid_accepted},
        "memory_bytes_max": memory_max,
    })
}
