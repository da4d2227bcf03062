//! The grammar-constraint interface sampling depends on, and the sequence automata it owns.
//!
//! Sampling never knows how a grammar works: it only needs the allowed-token bitmask
//! (u32 words, bit `i % 32` of word `i / 32`, LSB first), a way to advance, and whether
//! the state accepts. Banned sequences and no-repeat n-grams are suffix automata over
//! token ids (§3.5): they forbid only the token that would complete a sequence.

use std::collections::{BTreeSet, HashMap};

/// A per-request grammar matcher as seen by sampling and beam search. `Clone` is the fork
/// beam search needs.
pub trait TokenConstraint: Clone {
    /// Write the allowed-token bitmask (words pre-zeroed by the caller).
    fn fill_mask(&self, mask: &mut [u32]);
    /// Advance by one token; `false` if the token was not allowed (state unchanged).
    fn accept(&mut self, token: u32) -> bool;
    fn is_accepting(&self) -> bool;
    /// Short description of the state for traces.
    fn summary(&self) -> Option<String> {
        None
    }
}

/// A stencil [`TokenMatcher`](crate::matcher::TokenMatcher) as a sampling constraint.
///
/// The matcher computes masks with `&mut self` (its candidate walk steps and rolls
/// back its own state, and it keeps scratch buffers), while sampling reads the
/// constraint through `&self`; the cell bridges the two. A fork for beam search is a
/// clone of the matcher, which shares the compiled grammar and token tables.
#[derive(Clone)]
pub struct GrammarConstraint(std::cell::RefCell<crate::matcher::TokenMatcher>);

impl GrammarConstraint {
    pub fn new(matcher: crate::matcher::TokenMatcher) -> Self {
        GrammarConstraint(std::cell::RefCell::new(matcher))
    }

    pub fn into_inner(self) -> crate::matcher::TokenMatcher {
        self.0.into_inner()
    }
}

impl TokenConstraint for GrammarConstraint {
    fn fill_mask(&self, mask: &mut [u32]) {
        self.0.borrow_mut().fill_next_token_bitmask(mask);
    }
    fn accept(&mut self, token: u32) -> bool {
        self.0.get_mut().consume_token(token).is_ok()
    }
    fn is_accepting(&self) -> bool {
        let m = self.0.borrow();
        m.is_accepting() || m.is_terminated()
    }
    fn summary(&self) -> Option<String> {
        matcher_record(&self.0.borrow()).summary
    }
}

/// A matcher's state as a trace records it (before and after a step).
pub fn matcher_record(m: &crate::matcher::TokenMatcher) -> super::trace::ConstraintRecord {
    super::trace::ConstraintRecord {
        accepting: m.is_accepting() || m.is_terminated(),
        summary: Some(format!(
            "{} tokens, {} bytes, accepting {}",
            m.tokens_consumed(),
            m.byte_matcher().position(),
            m.is_accepting()
        )),
    }
}

/// No grammar: every token allowed, always accepting.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unconstrained;

impl TokenConstraint for Unconstrained {
    fn fill_mask(&self, mask: &mut [u32]) {
        mask.fill(u32::MAX);
    }
    fn accept(&mut self, _token: u32) -> bool {
        true
    }
    fn is_accepting(&self) -> bool {
        true
    }
}

/// Words needed for a mask over `width` tokens.
pub fn mask_words(width: usize) -> usize {
    width.div_ceil(32)
}

/// Bit test in the shared layout.
#[inline]
pub fn mask_allows(mask: &[u32], id: u32) -> bool {
    crate::bits::has_bit(mask, id as usize)
}

/// KMP matcher of one token sequence: the state is the length of the longest prefix of
/// the pattern that is a suffix of everything consumed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeqMatcher {
    pattern: Vec<u32>,
    fail: Vec<usize>,
    state: usize,
}

impl SeqMatcher {
    /// `pattern` must be non-empty (validated by the config layer).
    pub fn new(pattern: Vec<u32>) -> Self {
        let mut fail = vec![0; pattern.len()];
        let mut k = 0;
        for i in 1..pattern.len() {
            while k > 0 && pattern[i] != pattern[k] {
                k = fail[k - 1];
            }
            if pattern[i] == pattern[k] {
                k += 1;
            }
            fail[i] = k;
        }
        Self {
            pattern,
            fail,
            state: 0,
        }
    }

    /// Consume one token; returns true when the whole pattern has just been matched.
    pub fn consume(&mut self, t: u32) -> bool {
        let mut k = self.state;
        while k > 0 && self.pattern[k] != t {
            k = self.fail[k - 1];
        }
        if self.pattern[k] == t {
            k += 1;
        }
        if k == self.pattern.len() {
            self.state = self.fail[k - 1];
            true
        } else {
            self.state = k;
            false
        }
    }

    /// The token that would complete the pattern now, if any.
    pub fn completing_token(&self) -> Option<u32> {
        (self.state + 1 == self.pattern.len()).then(|| self.pattern[self.state])
    }

    pub fn reset(&mut self) {
        self.state = 0;
    }
}

/// No-repeat n-gram state (Hugging Face semantics): a token is banned when the last
/// `n - 1` tokens followed by it already occurred as an n-gram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NgramState {
    n: usize,
    seen: HashMap<Vec<u32>, BTreeSet<u32>>,
    tail: Vec<u32>,
}

impl NgramState {
    pub fn new(n: usize) -> Self {
        Self {
            n,
            seen: HashMap::new(),
            tail: Vec::new(),
        }
    }

    pub fn consume(&mut self, t: u32) {
        if self.tail.len() + 1 >= self.n {
            let prefix = self.tail[self.tail.len() + 1 - self.n..].to_vec();
            self.seen.entry(prefix).or_default().insert(t);
        }
        self.tail.push(t);
        if self.tail.len() >= self.n {
            self.tail.remove(0);
        }
    }

    pub fn banned(&self) -> impl Iterator<Item = u32> + '_ {
        let key = if self.tail.len() + 1 >= self.n {
            Some(&self.tail[self.tail.len() + 1 - self.n..])
        } else {
            None
        };
        key.and_then(|k| self.seen.get(k))
            .into_iter()
            .flat_map(|s| s.iter().copied())
    }
}

/// §3.2 `sequence_constraint_state`: banned sequences and no-repeat n-grams.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SequenceConstraintState {
    pub banned: Vec<SeqMatcher>,
    pub ngram: Option<NgramState>,
}

impl SequenceConstraintState {
    pub fn consume(&mut self, t: u32) {
        for b in &mut self.banned {
            b.consume(t);
        }
        if let Some(n) = &mut self.ngram {
            n.consume(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kmp_forbids_only_the_completing_token() {
        let mut m = SeqMatcher::new(vec![1, 2, 1, 3]);
        for t in [1, 2, 1] {
            m.consume(t);
        }
        assert_eq!(m.completing_token(), Some(3));
        assert!(!m.consume(2)); // 1 2 1 2 -> state "1 2"
        assert_eq!(m.completing_token(), None);
        m.consume(1);
        assert_eq!(m.completing_token(), Some(3));
        assert!(m.consume(3));
        let mut single = SeqMatcher::new(vec![7]);
        assert_eq!(single.completing_token(), Some(7));
        single.consume(7);
        assert_eq!(single.completing_token(), Some(7));
    }

    #[test]
    fn ngram_bans_repeats() {
        let mut s = NgramState::new(2);
        for t in [5, 6, 7, 5] {
            s.consume(t);
        }
        assert_eq!(s.banned().collect::<Vec<_>>(), vec![6]);
        let mut s3 = NgramState::new(3);
        for t in [1, 2, 3, 1, 2] {
            s3.consume(t);
        }
        assert_eq!(s3.banned().collect::<Vec<_>>(), vec![3]);
    }

    #[test]
    fn mask_layout_is_lsb_first() {
        let mask = [0b101u32, 1 << 31];
        assert!(mask_allows(&mask, 0) && !mask_allows(&mask, 1) && mask_allows(&mask, 2));
        assert!(mask_allows(&mask, 63) && !mask_allows(&mask, 64));
    }
}
