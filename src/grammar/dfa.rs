//! Anchored, all-matches DFAs over the IR's regex leaves.
//!
//! The lexer (one automaton per terminal) and the JSON Schema front-end (the
//! property-name automaton behind `patternProperties`) need the same thing from
//! `regex-automata`: a dense DFA over bytes, started anchored, that reports every
//! pattern matching the whole input so far (match kind "all"), plus one
//! representative byte per equivalence class to walk it. It is built here once, next
//! to the regex leaves both stages read, so the two cannot drift apart.

use regex_automata::{
    dfa::{dense, Automaton, StartKind},
    nfa::thompson,
    util::{primitives::StateID, start},
    Anchored, MatchKind,
};
use regex_syntax::hir::Hir;

/// A DFA built by [`AnchoredDfa::build`], with its anchored start state and byte
/// classes.
pub(crate) struct AnchoredDfa {
    pub dfa: dense::DFA<Vec<u32>>,
    pub start: StateID,
    /// Byte to equivalence class.
    pub classes: [u8; 256],
    /// One byte per class, in class order.
    pub representatives: Vec<u8>,
}

/// Why [`AnchoredDfa::build`] gave up: `regex-automata`'s own message, by stage
/// (its errors carry no more structure that a caller could act on).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DfaError {
    /// The Thompson NFA (past its size limit, or a construct it cannot build).
    #[error("NFA: {0}")]
    Nfa(String),
    /// Determinization (past its size limit).
    #[error("DFA: {0}")]
    Dfa(String),
    /// The anchored start state.
    #[error("DFA start state: {0}")]
    Start(String),
}

impl AnchoredDfa {
    /// One DFA over all `patterns` (pattern ids in slice order); the NFA and the DFA
    /// (with its determinization) are bounded in heap bytes.
    pub fn build(patterns: &[Hir], nfa_bytes: usize, dfa_bytes: usize) -> Result<Self, DfaError> {
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .utf8(false)
                    .shrink(true)
                    .nfa_size_limit(Some(nfa_bytes)),
            )
            .build_many_from_hir(patterns)
            .map_err(|e| DfaError::Nfa(e.to_string()))?;
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(StartKind::Anchored)
                    .accelerate(false)
                    .dfa_size_limit(Some(dfa_bytes))
                    .determinize_size_limit(Some(dfa_bytes)),
            )
            .build_from_nfa(&nfa)
            .map_err(|e| DfaError::Dfa(e.to_string()))?;
        let start = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| DfaError::Start(e.to_string()))?;
        let byte_classes = dfa.byte_classes();
        let mut classes = [0u8; 256];
        let mut representatives: Vec<u8> = Vec::new();
        for b in 0..=255u8 {
            let class = byte_classes.get(b);
            classes[b as usize] = class;
            if class as usize == representatives.len() {
                representatives.push(b);
            }
        }
        Ok(AnchoredDfa {
            dfa,
            start,
            classes,
            representatives,
        })
    }

    /// The patterns (ids in build order) that match the whole input leading to
    /// `state`: read at the end of input, as the matches are reported a byte late.
    pub fn patterns_matched(&self, state: StateID) -> impl Iterator<Item = usize> + '_ {
        let end = self.dfa.next_eoi_state(state);
        let count = match self.dfa.is_match_state(end) {
            true => self.dfa.match_len(end),
            false => 0,
        };
        (0..count).map(move |k| self.dfa.match_pattern(end, k).as_usize())
    }

    /// The states reachable from the start, numbered in breadth-first order (the
    /// start is 0), and their transitions: `transitions[state * stride + class]` with
    /// `stride` = the number of classes. `Err(())` when there are more than
    /// `max_states`.
    pub fn reachable(&self, max_states: usize) -> Result<(Vec<StateID>, Vec<u32>), ()> {
        // Dense state ids are multiples of the stride, so a vector indexes them.
        let shift = self.dfa.stride2();
        let mut index: Vec<u32> = Vec::new();
        let slot = |index: &mut Vec<u32>, id: StateID| {
            let k = id.as_usize() >> shift;
            if k >= index.len() {
                index.resize(k + 1, u32::MAX);
            }
            k
        };
        let k = slot(&mut index, self.start);
        index[k] = 0;
        let mut order = vec![self.start];
        let mut transitions = Vec::new();
        let mut i = 0;
        while i < order.len() {
            let state = order[i];
            i += 1;
            for &b in &self.representatives {
                let next = self.dfa.next_state(state, b);
                let k = slot(&mut index, next);
                if index[k] == u32::MAX {
                    if order.len() >= max_states {
                        return Err(());
                    }
                    index[k] = order.len() as u32;
                    order.push(next);
                }
                transitions.push(index[k]);
            }
        }
        Ok((order, transitions))
    }
}
