//! Beam search over the model (§3.11): the library's [`beam_search`] with a real
//! model behind its prefix-to-logits closure.
//!
//! Each hypothesis owns its decoder state, and so its grammar matcher fork (a
//! [`GrammarConstraint`] clones the matcher), counts and processor state; here each
//! also owns a KV branch. The search asks for the logits after a prefix exactly once
//! per live hypothesis per step, and every prefix extends one of the previous step's
//! by one token: `KvBranches` keeps the previous step's sessions by prefix, forks
//! the parent's and feeds it the one new token, so no prefix is fed twice and memory
//! holds two steps' branches at most.
//!
//! The best beam's score is the sum of its tokens' logprobs under the processed
//! distribution of each step (the request's processors and grammar apply; its
//! selector does not), divided by `len^length_penalty`.

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;

use super::generate::{FinishReason, Generator, Request};
use super::model::{Model, Session};
use super::DecodeError;
use crate::matcher::TokenMatcher;
use crate::sampling::beam::{beam_search, BeamConfig};
use crate::sampling::{FinishStatus, GrammarConstraint, Sampler, TokenConstraint};

/// One finished hypothesis.
#[derive(Debug, Clone, Serialize)]
pub struct Beam {
    pub text: String,
    /// Output tokens (EOS excluded).
    pub tokens: Vec<u32>,
    /// Sum of the tokens' logprobs (EOS included).
    pub sum_logprob: f64,
    /// `sum_logprob / len^length_penalty` (len counts EOS): beams are ranked by it.
    pub score: f64,
    pub finish_reason: FinishReason,
    /// The grammar accepts `text`.
    pub grammar_complete: bool,
}

/// Sessions by the prefix they have read (prompt and output tokens).
struct KvBranches<'m> {
    model: &'m Model,
    sessions: HashMap<Vec<u32>, Session>,
    /// The first failure: the search is then stopped by an empty row.
    error: Option<DecodeError>,
}

impl KvBranches<'_> {
    fn logits(&mut self, prefix: &[u32]) -> Vec<f32> {
        match self.extend(prefix) {
            Ok(row) => row,
            Err(e) => {
                self.error.get_or_insert(e);
                vec![f32::NEG_INFINITY; self.model.logits_width()]
            }
        }
    }

    fn extend(&mut self, prefix: &[u32]) -> Result<Vec<f32>, DecodeError> {
        let (parent, last) = prefix.split_at(prefix.len().saturating_sub(1));
        let (mut session, fed) = match self.sessions.get(parent) {
            Some(session) => (session.fork(), last),
            None => (self.model.session()?, prefix),
        };
        let row = session.forward(fed)?;
        // Branches two steps back can no longer be asked for.
        self.sessions.retain(|key, _| key.len() + 1 >= prefix.len());
        self.sessions.insert(prefix.to_vec(), session);
        Ok(row)
    }
}

impl Generator {
    /// Beam search of `width` hypotheses for `request` (its prompt, grammar, stop
    /// policy, sampling processors and `max_tokens`); the finished beams, best
    /// first. Jump-forward, budget steering and stop strings do not apply.
    pub fn beam_search(
        &self,
        request: &Request,
        width: usize,
        length_penalty: f64,
    ) -> Result<Vec<Beam>, DecodeError> {
        let vocab = self.tokenizer().vocab();
        let eos: BTreeSet<u32> = vocab.eos_ids().iter().copied().collect();
        let mut sampling = request.sampling.clone();
        sampling.eos_token_ids = Some(eos.iter().copied().collect());
        let sampler = Sampler::from_config(&sampling)?;
        let grammar = request
            .grammar
            .clone()
            .map(|t| GrammarConstraint::new(TokenMatcher::with_policy(t, request.stop_policy)));
        let config = BeamConfig {
            width,
            max_new_tokens: request.max_tokens,
            length_penalty,
            eos_token_ids: eos.clone(),
        };
        let mut branches = KvBranches {
            model: self.model(),
            sessions: HashMap::new(),
            error: None,
        };
        let found = beam_search(
            &sampler,
            request.prompt.clone(),
            grammar.clone(),
            &config,
            |prefix| branches.logits(prefix),
        );
        if let Some(e) = branches.error {
            return Err(e);
        }
        let found = found?;
        Ok(found
            .into_iter()
            .map(|b| {
                let tokens: Vec<u32> = b
                    .tokens
                    .iter()
                    .copied()
                    .filter(|t| !eos.contains(t))
                    .collect();
                let grammar_complete = grammar
                    .clone()
                    .is_none_or(|mut g| tokens.iter().all(|&t| g.accept(t)) && g.is_accepting());
                Beam {
                    text: String::from_utf8_lossy(&vocab.decode_shown(&tokens)).into_owned(),
                    tokens,
                    sum_logprob: b.sum_logprob,
                    score: b.score,
                    finish_reason: match b.finish {
                        FinishStatus::Length => FinishReason::Length,
                        _ => FinishReason::Stop,
                    },
                    grammar_complete,
                }
            })
            .collect())
    }
}
