//! Shared helpers for the integration tests: build a sampler from JSON, run one step
//! with a detailed trace, and compare with a number printed in the spec texts.
#![allow(dead_code)]

use stencil::sampling::trace::StageRecord;
use stencil::sampling::{
    DecoderState, Sampler, SamplingConfig, StepOptions, StepOutcome, Unconstrained,
};

pub fn sampler(v: serde_json::Value) -> Sampler {
    let cfg: SamplingConfig = serde_json::from_value(v).expect("config parses");
    Sampler::from_config(&cfg).expect("config validates")
}

pub fn state(s: &Sampler, history: &[u32]) -> DecoderState<Unconstrained> {
    let mut st = s.new_state(Vec::new(), None, None);
    st.replay(history).expect("history replays");
    st
}

pub fn step(s: &Sampler, history: &[u32], logits: &[f32], u: Option<f64>) -> StepOutcome {
    let st = state(s, history);
    let opts = StepOptions {
        forced_u: u,
        detail: true,
        raw_logprob: true,
        processed_logprob: true,
    };
    s.step(&st, logits, &opts).expect("step succeeds")
}

/// `x` equals the printed decimal to its printed precision (half a unit in the last place).
pub fn assert_printed(x: f64, printed: &str) {
    let want: f64 = printed.parse().unwrap();
    let decimals = printed.split('.').nth(1).map_or(0, |d| d.len());
    let tol = 0.5 * 10f64.powi(-(decimals as i32)) + 1e-12;
    assert!(
        (x - want).abs() <= tol,
        "got {x}, text prints {printed} (tolerance {tol})"
    );
}

pub fn assert_all_printed(xs: &[f64], printed: &[&str]) {
    assert_eq!(xs.len(), printed.len(), "length: {xs:?} vs {printed:?}");
    for (x, p) in xs.iter().zip(printed) {
        assert_printed(*x, p);
    }
}

pub fn stage<'a>(o: &'a StepOutcome, name: &str) -> &'a StageRecord {
    o.trace
        .stages
        .iter()
        .find(|s| s.processor == name)
        .unwrap_or_else(|| panic!("no stage {name} in {:?}", o.trace.order))
}

/// The logits recorded after a stage, ascending id.
pub fn stage_logits(o: &StepOutcome, name: &str) -> Vec<f64> {
    let c = stage(o, name).candidates.as_ref().expect("detailed stage");
    c.iter().map(|&(_, z, _)| f64::from(z)).collect()
}

pub fn stage_probs(o: &StepOutcome, name: &str) -> Vec<f64> {
    let c = stage(o, name).candidates.as_ref().expect("detailed stage");
    c.iter().map(|&(_, _, p)| p).collect()
}

pub fn stage_ids(o: &StepOutcome, name: &str) -> Vec<u32> {
    let c = stage(o, name).candidates.as_ref().expect("detailed stage");
    c.iter().map(|&(i, _, _)| i).collect()
}

/// The five-token row of §9.3: logits [2, 1, 0, -1, -2].
pub const ROW: [f32; 5] = [2.0, 1.0, 0.0, -1.0, -2.0];

/// Probabilities in descending order (the texts list them that way).
pub fn desc(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| b.partial_cmp(a).unwrap());
    v
}
