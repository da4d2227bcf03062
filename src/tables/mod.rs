//! Token tables: for a lexer configuration, which tokens are allowed without asking
//! the parser, and which few need it.
//!
//! A lexer configuration is the set of `(terminal, DFA state)` pairs alive at a
//! position (the matcher's lexemes, without the parse items they belong to). For a
//! token, walk its bytes through every such DFA:
//!
//! * some lexeme is still alive after the last byte: the token is **allowed**,
//!   whatever the parser state (an alive lexeme can always complete, and the compiled
//!   grammar holds only productions that can complete);
//! * every lexeme died, and none was at a match after an inner byte: **rejected**;
//! * every lexeme died, but one could have ended inside the token: a **candidate**,
//!   decided at mask time by the real matcher (it depends on what the parser allows
//!   after that terminal). Candidates are typically tokens like `",` after a string
//!   body: few, and they share prefixes.
//!
//! The answer depends only on the configuration, so it is computed once, lazily, and
//! cached on the tables shared by every request for the same grammar and vocabulary.
//! The walk uses the vocabulary's sorted-trie view, so shared token prefixes are
//! stepped once.

use std::sync::{Arc, RwLock};

use rustc_hash::FxHashMap;

use crate::automaton::{CompiledGrammar, State, TerminalId};
use crate::vocab::Vocabulary;

/// The alive `(terminal, state)` pairs at a position, sorted and deduplicated.
pub type LexerConfiguration = Box<[(TerminalId, State)]>;

/// What a lexer configuration allows, token by token.
#[derive(Debug)]
pub struct ConfigurationMasks {
    /// Bit `i % 32` of word `i / 32`: token `i` is allowed whatever the parser says.
    pub allowed: Vec<u32>,
    /// Tokens the matcher must check, sorted by bytes.
    pub candidates: Vec<u32>,
    /// Bytes each candidate shares with the previous candidate.
    pub candidate_shared: Vec<u16>,
}

/// Per (grammar, vocabulary) pair: the lazily built cache of configuration masks.
pub struct TokenTables {
    grammar: Arc<CompiledGrammar>,
    vocab: Arc<Vocabulary>,
    cache: RwLock<FxHashMap<LexerConfiguration, Arc<ConfigurationMasks>>>,
}

impl TokenTables {
    pub fn new(grammar: Arc<CompiledGrammar>, vocab: Arc<Vocabulary>) -> TokenTables {
        TokenTables {
            grammar,
            vocab,
            cache: RwLock::new(FxHashMap::default()),
        }
    }

    pub fn grammar(&self) -> &Arc<CompiledGrammar> {
        &self.grammar
    }

    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// Words in a mask over the vocabulary.
    pub fn mask_words(&self) -> usize {
        self.vocab.len().div_ceil(32)
    }

    /// Cached configurations so far.
    pub fn cached_configurations(&self) -> usize {
        self.cache.read().map_or(0, |c| c.len())
    }

    /// Heap bytes held by the cache.
    pub fn memory_usage(&self) -> usize {
        self.cache.read().map_or(0, |cache| {
            cache
                .iter()
                .map(|(key, m)| {
                    key.len() * std::mem::size_of::<(TerminalId, State)>()
                        + m.allowed.len() * 4
                        + m.candidates.len() * 6
                })
                .sum()
        })
    }

    /// The masks of `configuration`, computed on first use.
    pub fn masks(&self, configuration: &[(TerminalId, State)]) -> Arc<ConfigurationMasks> {
        if let Some(found) = self
            .cache
            .read()
            .ok()
            .and_then(|c| c.get(configuration).cloned())
        {
            return found;
        }
        let built = Arc::new(self.build(configuration));
        match self.cache.write() {
            Ok(mut cache) => Arc::clone(cache.entry(configuration.into()).or_insert(built)),
            Err(_) => built,
        }
    }

    fn build(&self, configuration: &[(TerminalId, State)]) -> ConfigurationMasks {
        let grammar = &*self.grammar;
        let (sorted, shared) = self.vocab.sorted_tokens();
        let mut allowed = vec![0u32; self.mask_words()];
        let mut candidates = Vec::new();

        // The walk's stack: lexemes alive after `d` bytes live in
        // `live[starts[d]..starts[d + 1]]`; `boundary[d]`: a lexeme was at a match
        // after some byte count in 1..=d.
        let mut live: Vec<(TerminalId, State)> = configuration.to_vec();
        let mut starts: Vec<usize> = vec![0, live.len()];
        let mut boundary: Vec<bool> = vec![false];

        for (&id, &common) in sorted.iter().zip(shared) {
            let bytes = self.vocab.token_bytes(id);
            let computed = boundary.len() - 1;
            let mut depth = (common as usize).min(computed);
            starts.truncate(depth + 2);
            boundary.truncate(depth + 1);
            live.truncate(starts[depth + 1]);
            while depth < bytes.len() && starts[depth + 1] > starts[depth] {
                let byte = bytes[depth];
                let mut matched = false;
                for i in starts[depth]..starts[depth + 1] {
                    let (t, state) = live[i];
                    let terminal = grammar.terminal(t);
                    let next = terminal.next(state, byte);
                    if !terminal.is_dead(next) {
                        matched |= terminal.is_match(next);
                        live.push((t, next));
                    }
                }
                boundary.push(boundary[depth] || matched);
                starts.push(live.len());
                depth += 1;
            }
            let alive_at_end = depth == bytes.len() && starts[depth + 1] > starts[depth];
            if alive_at_end {
                allowed[id as usize / 32] |= 1 << (id % 32);
            } else if boundary[depth.min(bytes.len() - 1)] {
                candidates.push(id);
            }
        }

        let mut candidate_shared = Vec::with_capacity(candidates.len());
        let mut previous: &[u8] = &[];
        for &id in &candidates {
            let bytes = self.vocab.token_bytes(id);
            let common = previous
                .iter()
                .zip(bytes)
                .take_while(|(a, b)| a == b)
                .count();
            candidate_shared.push(common.min(u16::MAX as usize) as u16);
            previous = bytes;
        }
        ConfigurationMasks {
            allowed,
            candidates,
            candidate_shared,
        }
    }
}
