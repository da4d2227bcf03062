//! The §3.12 failure table and the parameter domains, each as a test through the public API.

#[path = "support/sampling_common.rs"]
mod common;
use common::*;
use serde_json::json;
use stencil::sampling::{
    DecoderState, Layer, Sampler, SamplingConfig, SamplingError, StepOptions, TokenConstraint,
    Unconstrained,
};

fn config_error(v: serde_json::Value) -> SamplingError {
    let cfg: SamplingConfig = serde_json::from_value(v).unwrap();
    Sampler::from_config(&cfg).unwrap_err()
}

fn step_error(s: &Sampler, row: &[f32]) -> SamplingError {
    let st: DecoderState<Unconstrained> = s.new_state(vec![], None, None);
    s.step(&st, row, &StepOptions::default()).unwrap_err()
}

#[test]
fn empty_support_is_a_constraint_error_before_any_draw() {
    let s = sampler(json!({"control_token_ids": [0, 1, 2]}));
    let e = step_error(&s, &[1.0, 2.0, 3.0]);
    assert_eq!(
        e,
        SamplingError::EmptySupport {
            after: "control_mask"
        }
    );
    assert!(e.to_string().contains("constraint error"));
    // All -inf raw logits.
    let e = step_error(&sampler(json!({})), &[f32::NEG_INFINITY; 4]);
    assert!(matches!(e, SamplingError::EmptySupport { .. }));
    // A grammar mask allowing nothing (explicit view): no draw, even with a forced u.
    let st: DecoderState<Unconstrained> = s.new_state(vec![], None, None);
    let plain = sampler(json!({}));
    let mask = [0u32; 1];
    let opts = StepOptions {
        forced_u: Some(0.5),
        ..Default::default()
    };
    let e = plain
        .run(&st.view(Some(&mask)), &[1.0, 2.0], &opts)
        .unwrap_err();
    assert_eq!(e, SamplingError::EmptySupport { after: "grammar" });
    assert_eq!(st.step_index(), 1, "state untouched");
}

#[derive(Clone)]
struct Nothing;
impl TokenConstraint for Nothing {
    fn fill_mask(&self, _mask: &mut [u32]) {}
    fn accept(&mut self, _t: u32) -> bool {
        false
    }
    fn is_accepting(&self) -> bool {
        false
    }
}

#[test]
fn grammar_state_that_allows_nothing_fails_and_rejections_are_reported() {
    let s = sampler(json!({}));
    let st = s.new_state(vec![], None, Some(Nothing));
    let e = s
        .step(&st, &[0.0; 40], &StepOptions::default())
        .unwrap_err();
    assert_eq!(e, SamplingError::EmptySupport { after: "grammar" });
    let mut st2 = s.new_state(vec![], None, Some(Nothing));
    assert_eq!(
        st2.replay(&[3]).unwrap_err(),
        SamplingError::ConstraintRejected(3)
    );
}

#[test]
fn nan_and_positive_infinity_fail_with_the_position() {
    let s = sampler(json!({}));
    assert_eq!(
        step_error(&s, &[0.0, 1.0, f32::NAN]),
        SamplingError::NonFiniteLogit {
            position: 2,
            value: "NaN".into()
        }
    );
    assert_eq!(
        step_error(&s, &[f32::INFINITY, 1.0]),
        SamplingError::NonFiniteLogit {
            position: 0,
            value: "+inf".into()
        }
    );
    assert_eq!(step_error(&s, &[]), SamplingError::EmptyLogits);
    // Overflow inside a processor is caught too (tiny temperature).
    let e = step_error(&sampler(json!({"temperature": 1e-38})), &[1.0e3, 0.0]);
    assert!(
        matches!(
            e,
            SamplingError::NonFiniteProcessed {
                processor: "temperature",
                position: 0,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn parameter_domains() {
    for (cfg, name) in [
        (json!({"top_k": 0}), "top_k"),
        (json!({"top_k": -1}), "top_k"),
        (json!({"top_p": 0.0}), "top_p"),
        (json!({"top_p": 1.01}), "top_p"),
        (json!({"top_p": -0.5}), "top_p"),
        (json!({"temperature": -0.1}), "temperature"),
        (json!({"min_p": 1.5}), "min_p"),
        (json!({"typical_p": 0.0}), "typical_p"),
        (json!({"epsilon_cutoff": 1.0}), "epsilon_cutoff"),
        (json!({"eta_cutoff": 0.0}), "eta_cutoff"),
        (json!({"top_n_sigma": 0.0}), "top_n_sigma"),
        (json!({"repetition_penalty": 0.0}), "repetition_penalty"),
        // The texts take r >= 1 (§3.5): below 1 it would reward repetition.
        (json!({"repetition_penalty": 0.8}), "repetition_penalty"),
        (json!({"logit_bias": {"x": 1.0}}), "logit_bias"),
        (json!({"no_repeat_ngram_size": 0}), "no_repeat_ngram_size"),
        (json!({"banned_sequences": [[]]}), "banned_sequences"),
        (
            json!({"mirostat": {"tau": 0.0, "eta": 0.1}}),
            "mirostat.tau",
        ),
        (
            json!({"mirostat": {"tau": 1.0, "eta": 0.1, "version": 3}}),
            "mirostat.version",
        ),
        (
            json!({"mirostat": {"tau": 1.0, "eta": 0.1, "m": 10}}),
            "mirostat.m",
        ),
        (
            json!({"mirostat": {"tau": 1.0, "eta": 0.1, "version": 1, "m": 0}}),
            "mirostat.m",
        ),
        (
            json!({"watermark": {"gamma": 1.0, "delta": 2.0}}),
            "watermark.gamma",
        ),
        (
            json!({"xtc": {"threshold": 0.7, "probability": 0.5}}),
            "xtc.threshold",
        ),
        (json!({"min_tokens": 3}), "min_tokens"),
        (json!({"dry": {"multiplier": -0.5}}), "dry.multiplier"),
        // llama.cpp resets a base below 1 to the default; refused here.
        (json!({"dry": {"multiplier": 0.8, "base": 0.9}}), "dry.base"),
        (
            json!({"dry": {"multiplier": 0.8, "allowed_length": -1}}),
            "dry.allowed_length",
        ),
        (
            json!({"dry": {"multiplier": 0.8, "penalty_last_n": -2}}),
            "dry.penalty_last_n",
        ),
        (
            json!({"dry": {"multiplier": 0.8, "sequence_breakers": [""]}}),
            "dry.sequence_breakers",
        ),
        // llama.cpp truncates a breaker to 40 bytes; refused here.
        (
            json!({"dry": {"multiplier": 0.8, "sequence_breakers": ["x".repeat(41)]}}),
            "dry.sequence_breakers",
        ),
        (
            json!({"dry": {"multiplier": 0.8, "sequence_breaker_ids": [[]]}}),
            "dry.sequence_breaker_ids",
        ),
        (
            json!({"dry": {"multiplier": 0.8, "sequence_breaker_ids": [vec![1; 22]]}}),
            "dry.sequence_breaker_ids",
        ),
    ] {
        match config_error(cfg.clone()) {
            SamplingError::InvalidParameter { name: n, .. } => assert_eq!(n, name, "{cfg}"),
            other => panic!("{cfg}: {other}"),
        }
    }
    // Boundaries that are valid.
    for cfg in [
        json!({"top_p": 1.0}),
        json!({"top_k": 1}),
        json!({"temperature": 0.0}),
        json!({"min_p": 0.0}),
        json!({"dry": {"multiplier": 0.0, "base": 1.0, "allowed_length": 0,
            "penalty_last_n": -1, "sequence_breakers": [],
            "sequence_breaker_ids": [vec![1; 21]]}}),
    ] {
        let c: SamplingConfig = serde_json::from_value(cfg.clone()).unwrap();
        assert!(Sampler::from_config(&c).is_ok(), "{cfg}");
    }
}

#[test]
fn order_validation() {
    assert!(matches!(
        config_error(json!({"order": "nope"})),
        SamplingError::InvalidOrder(_)
    ));
    assert!(
        matches!(config_error(json!({"order": ["top_k", "bogus"], "top_k": 2})), SamplingError::InvalidOrder(m) if m.contains("bogus"))
    );
    assert!(
        matches!(config_error(json!({"order": ["top_k", "top_k"], "top_k": 2})), SamplingError::InvalidOrder(m) if m.contains("twice"))
    );
    let e = config_error(json!({"order": ["temperature"], "temperature": 0.5, "top_k": 3}));
    assert!(
        matches!(e, SamplingError::InvalidOrder(ref m) if m.contains("top_k")),
        "{e}"
    );
    // Unknown config keys never pass silently.
    assert!(serde_json::from_value::<SamplingConfig>(json!({"topk": 3})).is_err());
    assert!(serde_json::from_value::<SamplingConfig>(
        json!({"dry": {"multiplier": 1, "dry_base": 2}})
    )
    .is_err());
    // DRY configured but left out of a user order.
    let e = config_error(json!({"order": ["top_k"], "top_k": 2, "dry": {"multiplier": 1}}));
    assert!(
        matches!(e, SamplingError::InvalidOrder(ref m) if m.contains("dry")),
        "{e}"
    );
}

#[test]
fn temperature_zero_contradicting_a_random_strategy_is_rejected() {
    assert!(matches!(
        config_error(json!({"temperature": 0.0, "strategy": "categorical"})),
        SamplingError::Conflict(_)
    ));
    assert!(matches!(
        config_error(json!({"temperature": 0.0, "strategy": "exponential_race"})),
        SamplingError::Conflict(_)
    ));
}

#[test]
fn stop_token_masked_by_min_length_needs_a_declared_priority() {
    let base = json!({"min_tokens": 2, "eos_token_ids": [3], "stop_token_ids": [3]});
    assert!(
        matches!(config_error(base.clone()), SamplingError::Conflict(m) if m.contains("min_length_priority"))
    );
    let row = [0.0, 0.0, 0.0, 10.0];
    let mut with = base.clone();
    with["min_length_priority"] = json!("min_length");
    with["strategy"] = json!("greedy");
    let s = sampler(with);
    assert_eq!(
        step(&s, &[], &row, None).token,
        0,
        "EOS/stop masked before min length"
    );
    assert_eq!(
        step(&s, &[1, 1], &row, None).token,
        3,
        "allowed from min length on"
    );
    let mut stop_first = base;
    stop_first["min_length_priority"] = json!("stop");
    stop_first["strategy"] = json!("greedy");
    assert_eq!(
        step(&sampler(stop_first), &[], &row, None).token,
        3,
        "stop token exempt"
    );
}

#[test]
fn traces_version_the_order_and_name_logprob_layers() {
    let o = step(
        &sampler(json!({"top_k": 2, "temperature": 0.7})),
        &[],
        &ROW,
        Some(0.3),
    );
    assert_eq!(o.trace.order.len(), o.trace.versions.len());
    assert_eq!(o.trace.order_source, "reference");
    let layers: Vec<Layer> = o.logprobs.iter().map(|l| l.layer).collect();
    assert_eq!(layers, [Layer::Selection, Layer::Processed, Layer::Raw]);
    let values: Vec<f64> = o.logprobs.iter().map(|l| l.value).collect();
    assert!(
        values[0] != values[1] && values[1] != values[2] && values[0] != values[2],
        "the three layers differ: {values:?}"
    );
    assert_eq!(o.trace.params.len(), o.trace.order.len());
    let v = serde_json::to_value(&o.trace).unwrap();
    for key in [
        "step",
        "raw",
        "order",
        "stages",
        "selection",
        "u",
        "rng",
        "token",
        "logprobs",
    ] {
        assert!(v.get(key).is_some(), "trace lacks {key}");
    }
}

#[test]
fn mask_width_and_token_range_are_checked() {
    let s = sampler(json!({}));
    let st: DecoderState<Unconstrained> = s.new_state(vec![], None, None);
    let e = s
        .run(
            &st.view(Some(&[u32::MAX])),
            &[0.0; 33],
            &StepOptions::default(),
        )
        .unwrap_err();
    assert_eq!(
        e,
        SamplingError::MaskWidth {
            words: 1,
            needed: 2,
            width: 33
        }
    );
    let b = sampler(json!({"logit_bias": {"5": 1.0}}));
    assert!(matches!(
        step_error(&b, &[0.0; 5]),
        SamplingError::TokenOutOfRange { id: 5, .. }
    ));
}

#[test]
fn finished_requests_refuse_further_steps() {
    let s = sampler(json!({"eos_token_ids": [1], "strategy": "greedy"}));
    let mut st: DecoderState<Unconstrained> = s.new_state(vec![], None, None);
    let o = s.step(&st, &[0.0, 5.0], &StepOptions::default()).unwrap();
    assert_eq!(o.token, 1);
    st.commit(o.commit, b"").unwrap();
    assert!(matches!(
        s.step(&st, &[0.0, 5.0], &StepOptions::default()),
        Err(SamplingError::Finished(_))
    ));
    assert!(matches!(
        st.commit(o.commit, b""),
        Err(SamplingError::Finished(_))
    ));
}
