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
//!   body; they are kept as a small trie so the matcher's walk skips every subtree
//!   whose prefix it rejects.
//!
//! Both answers are unions over the configuration's lexemes, so they are computed
//! per lexeme (one DFA walk over the vocabulary trie, skipping dead subtrees) and
//! combined per configuration; both levels are cached, lazily, on the tables shared
//! by every request for the same grammar and vocabulary.

use std::sync::{Arc, RwLock};

use rustc_hash::FxHashMap;

use crate::automaton::{CompiledGrammar, State, TerminalId, DEAD};
use crate::vocab::{TokenTrie, Vocabulary};

/// The alive `(terminal, state)` pairs at a position, sorted and deduplicated.
pub type LexerConfiguration = Box<[(TerminalId, State)]>;

/// What a lexer configuration allows, token by token.
#[derive(Debug)]
pub struct ConfigurationMasks {
    /// Bit `i % 32` of word `i / 32`: token `i` is allowed whatever the parser says.
    pub allowed: Vec<u32>,
    /// Tokens the matcher must check, as a trie.
    pub candidates: TokenTrie,
}

/// One lexeme's answers over the vocabulary.
#[derive(Debug)]
struct LexemeMasks {
    /// The lexeme survives all of the token's bytes.
    allowed: Vec<u32>,
    /// The lexeme was at a match after an inner byte of the token.
    boundary: Vec<u32>,
}

type Cache<K, V> = RwLock<FxHashMap<K, Arc<V>>>;

/// Per (grammar, vocabulary) pair: the lazily built caches of token masks.
pub struct TokenTables {
    grammar: Arc<CompiledGrammar>,
    vocab: Arc<Vocabulary>,
    configurations: Cache<LexerConfiguration, ConfigurationMasks>,
    lexemes: Cache<(TerminalId, State), LexemeMasks>,
    /// Candidate tokens the parser accepted, keyed by the matcher's future signature.
    accepted_candidates: Cache<Box<[u32]>, Vec<u32>>,
}

/// Most entries kept in the accepted-candidates cache; past it, results are simply
/// not stored (bounded memory on adversarial inputs).
const MAX_ACCEPTED_ENTRIES: usize = 1 << 16;

fn cached<K: std::hash::Hash + Eq, V>(
    cache: &Cache<K, V>,
    key: K,
    build: impl FnOnce() -> V,
) -> Arc<V> {
    if let Some(found) = cache.read().ok().and_then(|c| c.get(&key).cloned()) {
        return found;
    }
    let built = Arc::new(build());
    match cache.write() {
        Ok(mut c) => Arc::clone(c.entry(key).or_insert(built)),
        Err(_) => built,
    }
}

#[inline]
fn set(mask: &mut [u32], id: u32) {
    mask[id as usize / 32] |= 1 << (id % 32);
}

impl TokenTables {
    pub fn new(grammar: Arc<CompiledGrammar>, vocab: Arc<Vocabulary>) -> TokenTables {
        TokenTables {
            grammar,
            vocab,
            configurations: RwLock::new(FxHashMap::default()),
            lexemes: RwLock::new(FxHashMap::default()),
            accepted_candidates: RwLock::new(FxHashMap::default()),
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
        self.configurations.read().map_or(0, |c| c.len())
    }

    /// Heap bytes held by the caches.
    pub fn memory_usage(&self) -> usize {
        let configurations = self.configurations.read().map_or(0, |cache| {
            cache
                .iter()
                .map(|(key, m)| key.len() * 8 + m.allowed.len() * 4 + m.candidates.memory_usage())
                .sum()
        });
        let lexemes = self.lexemes.read().map_or(0, |cache| {
            cache
                .values()
                .map(|m| (m.allowed.len() + m.boundary.len()) * 4)
                .sum()
        });
        configurations + lexemes
    }

    /// Candidates accepted in a parse state with this future signature, if known.
    pub fn accepted_candidates(&self, signature: &[u32]) -> Option<Arc<Vec<u32>>> {
        self.accepted_candidates
            .read()
            .ok()?
            .get(signature)
            .cloned()
    }

    /// Records the candidates accepted in a parse state with this future signature.
    pub fn remember_accepted_candidates(&self, signature: &[u32], accepted: Vec<u32>) {
        if let Ok(mut cache) = self.accepted_candidates.write() {
            if cache.len() < MAX_ACCEPTED_ENTRIES {
                cache.insert(signature.into(), Arc::new(accepted));
            }
        }
    }

    /// The masks of `configuration`, computed on first use.
    pub fn masks(&self, configuration: &[(TerminalId, State)]) -> Arc<ConfigurationMasks> {
        if let Some(found) = self
            .configurations
            .read()
            .ok()
            .and_then(|c| c.get(configuration).cloned())
        {
            return found;
        }
        cached(&self.configurations, configuration.into(), || {
            self.build_configuration(configuration)
        })
    }

    fn build_configuration(&self, configuration: &[(TerminalId, State)]) -> ConfigurationMasks {
        let words = self.mask_words();
        let mut allowed = vec![0u32; words];
        let mut boundary = vec![0u32; words];
        for &lexeme in configuration {
            let masks = cached(&self.lexemes, lexeme, || self.build_lexeme(lexeme));
            for (a, b) in allowed.iter_mut().zip(&masks.allowed) {
                *a |= b;
            }
            for (a, b) in boundary.iter_mut().zip(&masks.boundary) {
                *a |= b;
            }
        }
        for (b, &a) in boundary.iter_mut().zip(&allowed) {
            *b &= !a;
        }
        // In byte order for free: filter the vocabulary's own order.
        let candidates: Vec<u32> = self
            .vocab
            .text_tokens()
            .iter()
            .copied()
            .filter(|&id| boundary[id as usize / 32] & (1 << (id % 32)) != 0)
            .collect();
        let vocab = &self.vocab;
        ConfigurationMasks {
            allowed,
            candidates: TokenTrie::from_sorted(candidates, |id| vocab.token_bytes(id)),
        }
    }

    /// Walks the vocabulary trie through one lexeme's DFA, skipping dead subtrees.
    fn build_lexeme(&self, (terminal, state): (TerminalId, State)) -> LexemeMasks {
        let terminal = self.grammar.terminal(terminal);
        let trie = self.vocab.trie();
        let nodes = trie.nodes();
        let words = self.mask_words();
        let mut allowed = vec![0u32; words];
        let mut boundary = vec![0u32; words];
        // By depth: the DFA state, and whether a match happened after 1..=depth bytes.
        let mut states: Vec<State> = vec![state];
        let mut matched: Vec<bool> = vec![false];
        let mut i = 0;
        while i < nodes.len() {
            let node = nodes[i];
            let depth = node.depth as usize;
            states.truncate(depth);
            matched.truncate(depth);
            let next = terminal.next(states[depth - 1], node.byte);
            if next == DEAD {
                // Every token below dies here; those past an earlier match may
                // still be completed by the parser.
                if matched[depth - 1] {
                    trie.tokens_under(i)
                        .iter()
                        .for_each(|&id| set(&mut boundary, id));
                }
                i = node.subtree_end as usize;
                continue;
            }
            for &id in trie.tokens_at(i) {
                set(&mut allowed, id);
            }
            states.push(next);
            matched.push(matched[depth - 1] || terminal.is_match(next));
            i += 1;
        }
        LexemeMasks { allowed, boundary }
    }
}
