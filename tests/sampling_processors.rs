//! The processors the texts define without printed numbers (Table 9-8, XTC, Mirostat v2,
//! watermark, sequence masks, counting scopes), checked against hand-computed values, plus
//! property tests that the partial-selection truncations equal their full-sort definitions.

#[path = "support/sampling_common.rs"]
mod common;
use common::*;
use proptest::prelude::*;
use serde_json::json;
use stencil::sampling::processors::dry::SequenceBreakers;
use stencil::sampling::processors::truncation::{
    top_k_positions, top_p_positions_partial, top_p_positions_sorted,
};
use stencil::sampling::processors::watermark::detect;
use stencil::sampling::rng::RngStream;
use stencil::sampling::{
    select, DecoderState, Sampler, SamplingConfig, SelectionDistribution, StepOptions,
    Unconstrained,
};

fn support(cfg: serde_json::Value, history: &[u32], row: &[f32]) -> Vec<u32> {
    step(&sampler(cfg), history, row, Some(0.5)).support.ids
}

#[test]
fn typical_can_drop_the_argmax() {
    // H = 1.0003 nats; -ln p = 0.452, 1.452, ...: token 1 is the most "typical".
    assert_eq!(support(json!({"typical_p": 0.2}), &[], &ROW), [1]);
    assert_eq!(support(json!({"typical_p": 0.5}), &[], &ROW), [0, 1]);
    assert_eq!(support(json!({"typical_p": 1.0}), &[], &ROW).len(), 5);
}

#[test]
fn epsilon_and_eta() {
    assert_eq!(
        support(json!({"epsilon_cutoff": 0.05}), &[], &ROW),
        [0, 1, 2]
    );
    assert_eq!(
        support(json!({"epsilon_cutoff": 0.9}), &[], &ROW),
        [0],
        "keeps the top token"
    );
    // eta = min(0.05, sqrt(0.05) e^-H = 0.0822) = 0.05.
    assert_eq!(support(json!({"eta_cutoff": 0.05}), &[], &ROW), [0, 1, 2]);
    // eta = min(0.3, sqrt(0.3) e^-H = 0.2015) = 0.2015: tokens 0 and 1 stay.
    assert_eq!(support(json!({"eta_cutoff": 0.3}), &[], &ROW), [0, 1]);
}

#[test]
fn top_n_sigma() {
    // mean 0, population sigma sqrt(2).
    assert_eq!(support(json!({"top_n_sigma": 1.0}), &[], &ROW), [0, 1]);
    assert_eq!(support(json!({"top_n_sigma": 2.0}), &[], &ROW), [0, 1, 2]);
}

#[test]
fn xtc_removes_all_but_the_least_likely_top_choice() {
    let on = json!({"xtc": {"threshold": 0.1, "probability": 1.0}});
    assert_eq!(support(on, &[], &ROW), [1, 2, 3, 4]);
    assert_eq!(
        support(
            json!({"xtc": {"threshold": 0.3, "probability": 1.0}}),
            &[],
            &ROW
        )
        .len(),
        5
    );
    assert_eq!(
        support(
            json!({"xtc": {"threshold": 0.1, "probability": 0.0}}),
            &[],
            &ROW
        )
        .len(),
        5
    );
    // With probability 0.5 it fires on about half the steps, decided by the request's draw.
    let s = sampler(json!({"xtc": {"threshold": 0.1, "probability": 0.5}}));
    let mut st: DecoderState<Unconstrained> = s.new_state(vec![], Some(3), None);
    let mut fired = 0;
    for _ in 0..400 {
        let o = s.step(&st, &ROW, &StepOptions::default()).unwrap();
        fired += usize::from(o.support.len() == 4);
        st.commit(o.commit, b"").unwrap();
    }
    assert!((150..250).contains(&fired), "fired {fired} / 400");
}

#[test]
fn mirostat_v2_truncates_by_surprise_and_adapts_mu() {
    let s = sampler(json!({"mirostat": {"tau": 1.0, "eta": 0.5}}));
    let mut st: DecoderState<Unconstrained> = s.new_state(vec![], Some(1), None);
    // mu = 2 tau = 2 bits: -log2(0.2341) = 2.095 > 2, so only token 0 survives.
    let o = s.step(&st, &ROW, &StepOptions::default()).unwrap();
    assert_eq!(o.support.ids, [0]);
    // Selected with probability 1: surprise 0, mu <- 2 - 0.5 (0 - 1) = 2.5.
    assert_eq!(o.commit.processor_state.mirostat_mu, Some(2.5));
    st.commit(o.commit, b"").unwrap();
    let o2 = s.step(&st, &ROW, &StepOptions::default()).unwrap();
    assert_eq!(o2.support.ids, [0, 1], "-log2(0.0861) = 3.54 > 2.5");
}

/// Mirostat v1 on an exact Zipf row (`p_i ∝ 1/(i+1)^2`, so ŝ = 2 and ε̂ = 1):
/// `k = (2^μ / (1 - 1/N))^(1/2)` with N = 6: μ = 2τ = 2 gives k = 2.19 -> 2
/// tokens; τ = 2 (μ = 4) gives 4.38 -> 4. μ then moves as in v2.
#[test]
fn mirostat_v1_keeps_the_zipf_top_k() {
    let row: Vec<f32> = (0..6).map(|i| -2.0 * ((i + 1) as f32).ln()).collect();
    for (tau, kept) in [(1.0, 2), (2.0, 4)] {
        let s = sampler(json!({"mirostat": {"tau": tau, "eta": 0.5, "version": 1}}));
        let st: DecoderState<Unconstrained> = s.new_state(vec![], Some(1), None);
        let o = s.step(&st, &row, &StepOptions::default()).unwrap();
        assert_eq!(o.support.ids, (0..kept).collect::<Vec<u32>>(), "tau {tau}");
        let p = o.selection.prob(o.token);
        let mu = 2.0 * tau - 0.5 * (-p.log2() - tau);
        let got = o.commit.processor_state.mirostat_mu.unwrap();
        assert!((got - mu).abs() < 1e-12, "{got} vs {mu}");
    }
}

#[test]
fn watermark_is_detected_only_when_applied() {
    let width = 500;
    let run = |wm: bool, seed: u64| -> Vec<u32> {
        let mut cfg = json!({"temperature": 1.0});
        if wm {
            cfg["watermark"] = json!({"gamma": 0.5, "delta": 2.0, "key": 77});
        }
        let s = sampler(cfg);
        let mut st: DecoderState<Unconstrained> = s.new_state(vec![7], Some(seed), None);
        let mut out = vec![7];
        for t in 0..200u32 {
            let row: Vec<f32> = (0..width)
                .map(|i| ((i as u32 * 7919 + t * 104729) % 97) as f32 / 97.0)
                .collect();
            let o = s.step(&st, &row, &StepOptions::default()).unwrap();
            out.push(o.token);
            st.commit(o.commit, b"").unwrap();
        }
        out
    };
    let marked = detect(77, 0.5, &run(true, 5));
    assert_eq!(marked.scored, 200);
    assert!(marked.z > 4.0, "watermarked z = {}", marked.z);
    let plain = detect(77, 0.5, &run(false, 5));
    assert!(plain.z.abs() < 4.0, "plain z = {}", plain.z);
    // The wrong key sees no watermark.
    assert!(detect(78, 0.5, &run(true, 5)).z.abs() < 4.0);
}

/// DRY under the llama.cpp preset: second in its chain, right after the penalties and
/// before top-k. Prompt `0 1 2`, output `3 0 1`: token 2 would repeat "0 1 2", a
/// repeat of 2 across the prompt boundary, so it loses 0.8 · 1.75^(2 - 2) = 0.8.
#[test]
fn dry_follows_the_penalties_in_the_llama_cpp_order() {
    let cfg = json!({
        "order": "llama.cpp",
        "repetition_penalty": 1.5,
        "presence_penalty": 0.5,
        "dry": {"multiplier": 0.8},
        "top_k": 4,
    });
    let row = [1.0f32, 2.0, 3.0, 0.5, 0.0, -1.0];
    let run = |s: &Sampler| {
        let mut st: DecoderState<Unconstrained> = s.new_state(vec![0, 1, 2], None, None);
        st.replay(&[3, 0, 1]).unwrap();
        let opts = StepOptions {
            detail: true,
            ..StepOptions::default()
        };
        s.step(&st, &row, &opts).unwrap()
    };
    let o = run(&sampler(cfg.clone()));
    assert_eq!(
        o.trace.order,
        [
            "grammar",
            "repetition_penalty",
            "presence_penalty",
            "dry",
            "top_k"
        ]
    );
    // Repetition (prompt and output): z / 1.5 for 0..=3; presence (output): -0.5 for
    // 0, 1, 3; DRY: -0.8 for 2.
    let want = [
        1.0 / 1.5 - 0.5,
        2.0 / 1.5 - 0.5,
        3.0 / 1.5 - 0.8,
        0.5 / 1.5 - 0.5,
        0.0,
        -1.0,
    ];
    let got = stage_logits(&o, "dry");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-6, "{got:?} vs {want:?}");
    }
    assert_eq!(
        stage_logits(&o, "presence_penalty")[2],
        f64::from(3.0f32 / 1.5)
    );
    // Top-k sees the penalised logits: 3 (0.33 - 0.5) falls below 4 (0).
    assert_eq!(stage_ids(&o, "top_k"), [0, 1, 2, 4]);
    // Token 1 as a breaker (given as ids, or derived from a vocabulary) ends the
    // history, so no repeat is counted.
    let mut with_ids = cfg.clone();
    with_ids["dry"]["sequence_breaker_ids"] = json!([[1]]);
    assert_eq!(stage_logits(&run(&sampler(with_ids)), "dry")[2], 2.0);
    let c: SamplingConfig = serde_json::from_value(cfg).unwrap();
    let derived = SequenceBreakers::from_sequences([[1u32]]);
    let s = Sampler::from_config_with_breakers(&c, derived).unwrap();
    assert_eq!(stage_logits(&run(&s), "dry")[2], 2.0);
}

#[test]
fn banned_sequences_and_no_repeat_ngrams_forbid_only_the_completing_token() {
    let row = [0.0f32; 8];
    let cfg = json!({"banned_sequences": [[1, 2]]});
    assert_eq!(support(cfg.clone(), &[3], &row).len(), 8);
    assert_eq!(support(cfg.clone(), &[3, 1], &row), [0, 1, 3, 4, 5, 6, 7]);
    let ng = json!({"no_repeat_ngram_size": 2});
    assert_eq!(support(ng.clone(), &[5, 6, 5], &row), [0, 1, 2, 3, 4, 5, 7]);
    assert_eq!(support(ng, &[5, 6], &row).len(), 8);
}

#[test]
fn counting_scopes_are_explicit() {
    let s = sampler(
        json!({"repetition_penalty": 2.0, "presence_penalty": 1.0, "special_token_ids": [1]}),
    );
    let mut st: DecoderState<Unconstrained> = s.new_state(vec![0], None, None);
    st.replay(&[1]).unwrap();
    let o = s
        .step(&st, &[4.0, 4.0, 4.0], &StepOptions::default())
        .unwrap();
    // Token 0 is only in the prompt: repetition (prompt included) applies, presence does not.
    assert_eq!(o.processed.get(0), 2.0);
    assert_eq!(o.processed.get(1), 1.0, "4 / 2 - 1");
    let excl = sampler(json!({"repetition_penalty": 2.0, "special_token_ids": [1],
        "repetition_scope": {"include_prompt": false, "exclude_special": true}}));
    let mut st: DecoderState<Unconstrained> = excl.new_state(vec![0], None, None);
    st.replay(&[1, 2]).unwrap();
    let o = excl
        .step(&st, &[4.0, 4.0, 4.0], &StepOptions::default())
        .unwrap();
    assert_eq!(
        [o.processed.get(0), o.processed.get(1), o.processed.get(2)],
        [4.0, 4.0, 2.0]
    );
}

/// A `last_n` window (llama.cpp's `penalty_last_n`) counts only the newest tokens:
/// reaching back into the prompt when the scope includes it, never past the output
/// when it does not; 0 counts nothing.
#[test]
fn penalty_windows_count_the_last_n_tokens() {
    let row = [4.0f32; 5];
    // Prompt 0 1, output 2 3 2.
    let penalised = |scope: serde_json::Value| {
        let s = sampler(json!({"frequency_penalty": 1.0, "frequency_scope": scope}));
        let mut st: DecoderState<Unconstrained> = s.new_state(vec![0, 1], None, None);
        st.replay(&[2, 3, 2]).unwrap();
        let o = s.step(&st, &row, &StepOptions::default()).unwrap();
        (0..5).map(|i| 4.0 - o.processed.get(i)).collect::<Vec<_>>()
    };
    assert_eq!(
        penalised(json!({"include_prompt": true})),
        [1.0, 1.0, 2.0, 1.0, 0.0]
    );
    assert_eq!(
        penalised(json!({"include_prompt": true, "last_n": 4})),
        [0.0, 1.0, 2.0, 1.0, 0.0]
    );
    assert_eq!(penalised(json!({"last_n": 2})), [0.0, 0.0, 1.0, 1.0, 0.0]);
    assert_eq!(penalised(json!({"last_n": 9})), [0.0, 0.0, 2.0, 1.0, 0.0]);
    assert_eq!(
        penalised(json!({"include_prompt": true, "last_n": 0})),
        [0.0; 5]
    );
}

#[test]
fn exact_boundaries_follow_the_stated_comparisons() {
    // Two equal tokens: cumulative 0.5 reaches p = 0.5 exactly, so top-p keeps one (>=),
    // and it is the lower id.
    assert_eq!(support(json!({"top_p": 0.5}), &[], &[1.0, 1.0]), [0]);
    // Categorical takes the first cumulative strictly greater than u.
    let s = sampler(json!({}));
    assert_eq!(step(&s, &[], &[1.0, 1.0], Some(0.5)).token, 1);
    assert_eq!(step(&s, &[], &[1.0, 1.0], Some(0.4999)).token, 0);
    // min-p keeps p_i >= alpha * p_max: alpha = 1 keeps every token equal to the peak.
    assert_eq!(
        support(json!({"min_p": 1.0}), &[], &[1.0, 1.0, 1.0, 0.0]),
        [0, 1, 2]
    );
    // Top-k ties at the boundary keep the lower ids.
    assert_eq!(
        support(json!({"top_k": 2}), &[], &[0.0, 1.0, 1.0, 1.0]),
        [1, 2]
    );
}

#[test]
fn control_mask_and_logit_bias() {
    let o = support(json!({"control_token_ids": [0, 4]}), &[], &ROW);
    assert_eq!(o, [1, 2, 3]);
    let g = step(
        &sampler(json!({"logit_bias": {"4": 10.0}, "strategy": "greedy"})),
        &[],
        &ROW,
        None,
    );
    assert_eq!(g.token, 4);
}

fn probs_strategy() -> impl Strategy<Value = Vec<f64>> {
    // Quantised values make ties common, which is where tie-breaks matter.
    prop::collection::vec(0u32..20, 1..300).prop_map(|v| {
        let w: Vec<f64> = v.iter().map(|&x| f64::from(x) + 0.5).collect();
        let s: f64 = w.iter().sum();
        w.iter().map(|x| x / s).collect()
    })
}

proptest! {
    #[test]
    fn partial_top_p_equals_the_full_sort(p in probs_strategy(), p0 in 0.01f64..1.0) {
        prop_assert_eq!(top_p_positions_partial(&p, p0), top_p_positions_sorted(&p, p0));
    }

    #[test]
    fn top_k_equals_sorting_by_value_then_id(v in prop::collection::vec(-5i32..5, 1..200), k in 1usize..50) {
        let z: Vec<f32> = v.iter().map(|&x| x as f32).collect();
        let mut idx: Vec<usize> = (0..z.len()).collect();
        idx.sort_by(|&a, &b| z[b].partial_cmp(&z[a]).unwrap().then(a.cmp(&b)));
        idx.truncate(k);
        idx.sort_unstable();
        prop_assert_eq!(top_k_positions(&z, k), idx);
    }

    #[test]
    fn categorical_is_the_first_cumulative_above_u(p in probs_strategy(), u in 0.0f64..1.0) {
        let sel = SelectionDistribution { ids: (0..p.len() as u32).collect(), probs: p.clone() };
        let got = select::categorical(&sel, u).unwrap();
        let mut cum = 0.0;
        let mut want = p.len() - 1;
        for (i, x) in p.iter().enumerate() {
            cum += x;
            if u < cum { want = i; break; }
        }
        prop_assert_eq!(got, want);
    }

    #[test]
    fn race_ignores_tokens_outside_the_support(seed in 0u64..1000, step in 0u64..1000) {
        // A token's noise depends only on (seed, step, id): removing a losing token never
        // changes the winner.
        let full = SelectionDistribution { ids: vec![0, 1, 2, 3], probs: vec![0.4, 0.3, 0.2, 0.1] };
        let rng = RngStream::new(seed);
        let w = full.ids[select::exponential_race(&full, rng, step).unwrap()];
        let keep: Vec<usize> = (0..4).filter(|&i| i as u32 == w || i % 2 == 0).collect();
        let s: f64 = keep.iter().map(|&i| full.probs[i]).sum();
        let sub = SelectionDistribution {
            ids: keep.iter().map(|&i| i as u32).collect(),
            probs: keep.iter().map(|&i| full.probs[i] / s).collect(),
        };
        prop_assert_eq!(sub.ids[select::exponential_race(&sub, rng, step).unwrap()], w);
    }
}
