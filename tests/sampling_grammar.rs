//! The sampling pipeline driven by a real grammar matcher: the grammar mask is
//! applied before selection, EOS only when the grammar accepts, and beam search
//! forks the matcher per hypothesis.

#[path = "support/sampling_common.rs"]
mod common;

use std::sync::Arc;

use common::sampler;
use serde_json::json;
use stencil::matcher::TokenMatcher;
use stencil::sampling::beam::{beam_search, BeamConfig};
use stencil::sampling::{GrammarConstraint, StepOptions};
use stencil::tables::TokenTables;
use stencil::vocab::Vocabulary;

/// Tokens: 0 "a", 1 "b", 2 "ab", 3 "c", 4 = EOS.
fn constraint(pattern: &str) -> GrammarConstraint {
    let vocab = Vocabulary::from_token_bytes(
        vec![
            b"a".to_vec(),
            b"b".to_vec(),
            b"ab".to_vec(),
            b"c".to_vec(),
            Vec::new(),
        ],
        vec![(4, "</s>".into())],
        vec![4],
    );
    let grammar = stencil::compile_regex(pattern).unwrap();
    GrammarConstraint::new(TokenMatcher::new(Arc::new(TokenTables::new(
        grammar,
        Arc::new(vocab),
    ))))
}

#[test]
fn greedy_picks_the_best_token_the_grammar_allows() {
    let s = sampler(json!({"strategy": "greedy"}));
    let options = StepOptions::default();
    let mut state = s.new_state(Vec::new(), None, Some(constraint("(ab)+c")));
    // "c" and EOS score highest but are not allowed first; "ab" is the best allowed.
    let logits = [0.5, 0.1, 1.0, 3.0, 4.0];
    let out = s.step(&state, &logits, &options).unwrap();
    assert_eq!(out.token, 2);
    state.commit(out.commit, b"").unwrap();
    // After "ab": "c" is allowed now; EOS is not (the grammar does not accept yet).
    let out = s.step(&state, &logits, &options).unwrap();
    assert_eq!(out.token, 3);
    state.commit(out.commit, b"").unwrap();
    // After "abc": only EOS.
    let out = s
        .step(&state, &[9.0, 9.0, 9.0, 9.0, -5.0], &options)
        .unwrap();
    assert_eq!(out.token, 4);
}

#[test]
fn beam_search_forks_the_matcher() {
    let s = sampler(json!({}));
    let config = BeamConfig {
        width: 3,
        max_new_tokens: 6,
        length_penalty: 0.0,
        eos_token_ids: [4].into(),
    };
    // The model prefers "a" then EOS, which the grammar `a(b|c)` forbids.
    let model = |prefix: &[u32]| -> Vec<f32> {
        match prefix.len() {
            0 => vec![2.0, 0.0, 0.0, 0.0, 0.0],
            _ => vec![0.0, 0.5, 0.0, 0.2, 3.0],
        }
    };
    let results = beam_search(&s, Vec::new(), Some(constraint("a(b|c)")), &config, model).unwrap();
    for r in &results {
        let text: Vec<u32> = r.tokens.iter().copied().filter(|&t| t != 4).collect();
        assert!(
            text == [0, 1] || text == [0, 3] || text == [2],
            "{:?} is outside a(b|c)",
            r.tokens
        );
    }
    assert_eq!(results[0].tokens, [0, 1, 4], "best allowed: a, b, EOS");
}
