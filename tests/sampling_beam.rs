//! Beam search (§3.11): finds a better sequence than greedy, respects the grammar fork of
//! each hypothesis, and applies the length-penalty and EOS rules as documented.

#[path = "support/sampling_common.rs"]
mod common;
use common::*;
use serde_json::json;
use stencil::sampling::beam::{beam_search, BeamConfig};
use stencil::sampling::{FinishStatus, TokenConstraint, Unconstrained};

const EOS: u32 = 3;

fn ln(p: &[f64]) -> Vec<f32> {
    p.iter().map(|x| x.ln() as f32).collect()
}

/// Step 1: A (0) 0.5, B (1) 0.4, C (2) 0.1. After A: flat over 0..2 plus a little EOS.
/// After B: B again at 0.9. Then EOS.
fn toy(prefix: &[u32]) -> Vec<f32> {
    match prefix {
        [] => ln(&[0.5, 0.4, 0.1, 1e-6]),
        [0] => ln(&[0.33, 0.33, 0.33, 0.01]),
        [1] => ln(&[0.05, 0.9, 0.04, 0.01]),
        _ => ln(&[0.01, 0.01, 0.01, 0.97]),
    }
}

fn cfg(width: usize, lp: f64) -> BeamConfig {
    BeamConfig {
        width,
        max_new_tokens: 5,
        length_penalty: lp,
        eos_token_ids: [EOS].into(),
    }
}

#[test]
fn beam_beats_greedy_and_width_one_is_greedy() {
    let s = sampler(json!({}));
    let greedy = beam_search::<Unconstrained, _>(&s, vec![], None, &cfg(1, 0.0), toy).unwrap();
    assert_eq!(
        greedy[0].tokens[..2],
        [0, 0],
        "greedy: A then the lowest-id tie"
    );
    let beam = beam_search::<Unconstrained, _>(&s, vec![], None, &cfg(2, 0.0), toy).unwrap();
    assert_eq!(beam[0].tokens, [1, 1, EOS]);
    assert_eq!(beam[0].finish, FinishStatus::Eos(EOS));
    let want = (0.4f64 * 0.9 * 0.97).ln();
    assert!(
        (beam[0].sum_logprob - want).abs() < 1e-5,
        "{}",
        beam[0].sum_logprob
    );
    assert!(beam[0].score > greedy[0].score);
}

#[test]
fn length_penalty_divides_by_length_including_eos() {
    let s = sampler(json!({}));
    let r = beam_search::<Unconstrained, _>(&s, vec![], None, &cfg(2, 1.0), toy).unwrap();
    for b in &r {
        assert!((b.score - b.sum_logprob / b.tokens.len() as f64).abs() < 1e-12);
    }
}

#[test]
fn max_new_tokens_completes_live_beams_as_length() {
    let s = sampler(json!({}));
    let mut c = cfg(2, 0.0);
    c.max_new_tokens = 1;
    let r = beam_search::<Unconstrained, _>(&s, vec![], None, &c, toy).unwrap();
    assert_eq!(r.len(), 2);
    assert!(r
        .iter()
        .all(|b| b.finish == FinishStatus::Length && b.tokens.len() == 1));
    assert_eq!(r[0].tokens, [0]);
}

/// Grammar: tokens must alternate between 0 and 1 (starting with either); EOS only after
/// two tokens.
#[derive(Clone, Default)]
struct Alternate {
    last: Option<u32>,
    n: usize,
}

impl TokenConstraint for Alternate {
    fn fill_mask(&self, mask: &mut [u32]) {
        let allow = |m: &mut [u32], t: u32| m[(t / 32) as usize] |= 1 << (t % 32);
        match self.last {
            None => {
                allow(mask, 0);
                allow(mask, 1);
            }
            Some(t) => allow(mask, 1 - t),
        }
        if self.n >= 2 {
            allow(mask, EOS);
        }
    }
    fn accept(&mut self, t: u32) -> bool {
        let ok = t < 2 && self.last != Some(t);
        if ok {
            self.last = Some(t);
            self.n += 1;
        }
        ok
    }
    fn is_accepting(&self) -> bool {
        self.n >= 2
    }
}

#[test]
fn every_hypothesis_owns_its_grammar_fork() {
    let s = sampler(json!({}));
    let r = beam_search(&s, vec![], Some(Alternate::default()), &cfg(3, 0.0), toy).unwrap();
    assert!(!r.is_empty());
    for b in &r {
        let body: Vec<u32> = b.tokens.iter().copied().filter(|&t| t != EOS).collect();
        for w in body.windows(2) {
            assert_ne!(w[0], w[1], "{:?} breaks the grammar", b.tokens);
        }
        if b.tokens.last() == Some(&EOS) {
            assert!(
                body.len() >= 2,
                "EOS before the grammar accepts: {:?}",
                b.tokens
            );
        }
    }
}

#[test]
fn zero_width_is_rejected() {
    let s = sampler(json!({}));
    assert!(beam_search::<Unconstrained, _>(&s, vec![], None, &cfg(0, 0.0), toy).is_err());
}
