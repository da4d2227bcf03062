//! Statistical and reproducibility properties: each random selector samples the selection
//! distribution (chi-square, fixed seeds so the test is deterministic), greedy is the
//! argmax, and a request's tokens do not depend on what else is in the batch.

#[path = "support/sampling_common.rs"]
mod common;
use common::*;
use serde_json::json;
use stencil::sampling::{DecoderState, Sampler, StepOptions, Unconstrained};

/// Chi-square critical value for 7 degrees of freedom at p = 0.001.
const CHI2_DF7_P001: f64 = 24.322;

fn chi_square(counts: &[u64], probs: &[f64], n: u64) -> f64 {
    counts
        .iter()
        .zip(probs)
        .map(|(&o, &p)| {
            let e = p * n as f64;
            (o as f64 - e).powi(2) / e
        })
        .sum()
}

/// Decode `n` steps from a fixed row; returns token counts and the selection distribution.
fn draw_many(cfg: serde_json::Value, row: &[f32], n: u64, seed: u64) -> (Vec<u64>, Vec<f64>) {
    let s = sampler(cfg);
    let mut st: DecoderState<Unconstrained> = s.new_state(vec![], Some(seed), None);
    let opts = StepOptions::default();
    let first = s.step(&st, row, &opts).unwrap();
    let mut probs = vec![0.0; row.len()];
    for (id, p) in first.selection.pairs() {
        probs[id as usize] = p;
    }
    let mut counts = vec![0u64; row.len()];
    for _ in 0..n {
        let o = s.step(&st, row, &opts).unwrap();
        assert_eq!(
            o.selection.probs, first.selection.probs,
            "no history-dependent processor"
        );
        counts[o.token as usize] += 1;
        st.commit(o.commit, b"").unwrap();
    }
    (counts, probs)
}

const ROW8: [f32; 8] = [1.2, -0.3, 0.8, 2.0, 0.0, -1.5, 1.9, 0.4];

#[test]
fn categorical_and_race_sample_the_selection_distribution() {
    for strategy in ["categorical", "exponential_race"] {
        for seed in [1u64, 2] {
            let (counts, probs) = draw_many(
                json!({"strategy": strategy, "temperature": 0.9}),
                &ROW8,
                40_000,
                seed,
            );
            let chi = chi_square(&counts, &probs, 40_000);
            assert!(chi < CHI2_DF7_P001, "{strategy} seed {seed}: chi2 = {chi}");
        }
    }
}

#[test]
fn selectors_sample_the_truncated_distribution_not_the_raw_one() {
    // top-k 3 keeps ids 3, 6, 0: the other five must never appear, and the three follow
    // the renormalised probabilities (chi-square with 2 df, p = 0.001: 13.816).
    for strategy in ["categorical", "exponential_race"] {
        let (counts, probs) =
            draw_many(json!({"strategy": strategy, "top_k": 3}), &ROW8, 30_000, 5);
        let kept = [0usize, 3, 6];
        for (i, &c) in counts.iter().enumerate() {
            if !kept.contains(&i) {
                assert_eq!(c, 0, "{strategy}: token {i} outside the support");
            }
        }
        let c: Vec<u64> = kept.iter().map(|&i| counts[i]).collect();
        let p: Vec<f64> = kept.iter().map(|&i| probs[i]).collect();
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        let chi = chi_square(&c, &p, 30_000);
        assert!(chi < 13.816, "{strategy}: chi2 = {chi}");
    }
}

#[test]
fn a_wrong_distribution_is_rejected_by_the_same_test() {
    // The chi-square check has power: the raw (untruncated, T = 1) distribution fails it.
    let (counts, _) = draw_many(
        json!({"strategy": "categorical", "temperature": 0.9}),
        &ROW8,
        40_000,
        1,
    );
    let wrong = stencil::sampling::logits::softmax_f32(&ROW8);
    assert!(chi_square(&counts, &wrong, 40_000) > CHI2_DF7_P001);
}

#[test]
fn greedy_is_the_argmax_with_lowest_id_ties() {
    let s = sampler(json!({"strategy": "greedy", "top_k": 5}));
    let o = step(&s, &[], &[0.5, 2.0, -1.0, 2.0, 1.9], None);
    assert_eq!(o.token, 1);
    assert_eq!(o.selection.prob(1), 1.0);
    assert_eq!(o.trace.rng.draws, Vec::<u64>::new(), "greedy draws nothing");
}

/// A deterministic "model": logits depend on the request's own history only.
fn model(history: &[u32], width: usize, salt: u32) -> Vec<f32> {
    let h = history.iter().fold(salt.wrapping_mul(2654435761), |a, &t| {
        a.rotate_left(5) ^ t.wrapping_mul(40503)
    });
    (0..width)
        .map(|i| (((h ^ (i as u32).wrapping_mul(2246822519)) % 1000) as f32) / 250.0)
        .collect()
}

struct Req {
    sampler: Sampler,
    state: DecoderState<Unconstrained>,
    width: usize,
    salt: u32,
    tokens: Vec<u32>,
}

fn req(cfg: serde_json::Value, seed: u64, width: usize, salt: u32) -> Req {
    let sampler = sampler(cfg);
    let state = sampler.new_state(vec![], Some(seed), None);
    Req {
        sampler,
        state,
        width,
        salt,
        tokens: vec![],
    }
}

fn step_req(r: &mut Req) {
    let row = model(&r.tokens, r.width, r.salt);
    let o = r
        .sampler
        .step(&r.state, &row, &StepOptions::default())
        .unwrap();
    r.tokens.push(o.token);
    r.state.commit(o.commit, b"").unwrap();
}

#[test]
fn same_seed_same_tokens_whatever_the_batch() {
    for strategy in ["categorical", "exponential_race"] {
        let cfg = json!({"strategy": strategy, "temperature": 1.3, "top_k": 40, "top_p": 0.95});
        let mut alone = req(cfg.clone(), 1234, 300, 1);
        for _ in 0..60 {
            step_req(&mut alone);
        }
        // Same request in a batch whose membership and order change every step.
        let mut target = req(cfg.clone(), 1234, 300, 1);
        let mut others: Vec<Req> = (0..4)
            .map(|i| {
                req(
                    json!({"strategy": strategy, "temperature": 0.7 + i as f64}),
                    1234 + i,
                    100 + 50 * i as usize,
                    9 + i as u32,
                )
            })
            .collect();
        for t in 0..60 {
            if t % 7 == 3 {
                others.push(req(json!({"strategy": strategy}), t, 77, t as u32));
            }
            if t % 11 == 5 && !others.is_empty() {
                others.remove(0);
            }
            let k = t as usize % (others.len() + 1);
            for r in others.iter_mut().take(k) {
                step_req(r);
            }
            step_req(&mut target);
            for r in others.iter_mut().skip(k) {
                step_req(r);
            }
        }
        assert_eq!(alone.tokens, target.tokens, "{strategy}");
        // And the seed matters.
        let mut other_seed = req(cfg, 999, 300, 1);
        for _ in 0..60 {
            step_req(&mut other_seed);
        }
        assert_ne!(alone.tokens, other_seed.tokens);
    }
}
