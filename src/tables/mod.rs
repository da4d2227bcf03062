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
//!   body. They are kept as a set over the vocabulary trie's byte order with
//!   prefix counts, so the matcher's walk over the vocabulary trie skips, in O(1),
//!   every subtree without a candidate and every subtree whose prefix it rejects.
//!
//! A lexeme may be [`LOOPED`](crate::automaton::terminal::LOOPED): the matcher's
//! [`token_configuration`](crate::matcher::Matcher::token_configuration) marks a
//! terminal that is one iteration of a repetition far from its bound, and its
//! table reads the terminal repeated (a `maxLength` string body as one loop).
//!
//! The same walk from a trie node's depth on gives a configuration's
//! [`SubtreeMasks`]: what it allows of the rest of each token below that node, for
//! the matcher's candidate walk past a terminal boundary there.
//!
//! Both answers are unions over the configuration's lexemes, so they are computed
//! per lexeme (one DFA walk over the vocabulary trie, skipping dead subtrees) and
//! combined per configuration; both levels are cached, lazily, on the tables shared
//! by every request for the same grammar and vocabulary, and in [`SharedTables`] under
//! keys that mean the same in every grammar (automaton fingerprints and states): a
//! JSON string body, or an object's remaining keys, recur across schemas. A lexeme's
//! walk also lists its match nodes, for the candidate walk's boundaries.
//!
//! Walks skip what a precomputed [token slice](crate::vocab::TokenSlice) answers:
//! inside a string body every token of ordinary characters is allowed (one OR),
//! and near the end of a counted body those of at most the characters left (a
//! scan by character count). They write into per-thread scratch arrays, so a
//! lexeme that allows few tokens (an object key) costs its walk, not three
//! vocabulary-wide arrays; cached results keep few tokens as lists.

mod body;
mod build_lexeme;
mod closed_class;
mod lexeme;
mod shared;
mod walk;

use std::sync::{Arc, RwLock};

use rustc_hash::FxHashMap;

use crate::automaton::{CompiledGrammar, State, TerminalId};
use crate::bits::{ones, try_set_bit};
pub use crate::vocab::RankSet;
use crate::vocab::{SubtreeBytes, TokenTrie, Vocabulary};
use build_lexeme::walk_closed_class;
use lexeme::LexemeMasks;
pub use shared::{SharedTables, DEFAULT_SHARED_TABLE_BYTES};
use walk::{walk_lexeme, LexemeWalk, Visit};

/// The alive `(terminal, state)` pairs at a position, sorted and deduplicated.
pub type LexerConfiguration = Box<[(TerminalId, State)]>;

/// What a lexer configuration allows, token by token.
#[derive(Debug)]
pub struct ConfigurationMasks {
    /// The tokens allowed whatever the parser says.
    pub allowed: AllowedTokens,
    /// Tokens the matcher must check.
    pub candidates: RankSet,
}

impl ConfigurationMasks {
    fn memory_usage(&self) -> usize {
        self.allowed.memory_usage() + self.candidates.memory_usage()
    }
}

/// A configuration's allowed tokens: a mask, or the ids where they are few (an
/// object key's start). Cached configurations are the memory the tables grow by,
/// and fresh memory costs page faults (the kernel zeroing huge pages was half of
/// building a new configuration).
#[derive(Debug)]
pub enum AllowedTokens {
    /// Bit `i % 32` of word `i / 32`: token `i` is allowed.
    Dense(Vec<u32>),
    Sparse(Box<[u32]>),
}

/// Most allowed tokens a configuration keeps as a list of ids.
const MAX_SPARSE_ALLOWED: usize = 1024;

impl AllowedTokens {
    fn new(bits: Vec<u32>) -> AllowedTokens {
        let count: usize = bits.iter().map(|w| w.count_ones() as usize).sum();
        if count > MAX_SPARSE_ALLOWED {
            return AllowedTokens::Dense(bits);
        }
        AllowedTokens::Sparse(ones(&bits).map(|id| id as u32).collect())
    }

    /// Writes the tokens into `mask` as bits (the words past the vocabulary's
    /// end, and ids past the mask's, are left out); every other bit is cleared.
    pub fn write_to(&self, mask: &mut [u32]) {
        match self {
            AllowedTokens::Dense(bits) => {
                let n = mask.len().min(bits.len());
                mask[..n].copy_from_slice(&bits[..n]);
                mask[n..].fill(0);
            }
            AllowedTokens::Sparse(ids) => {
                mask.fill(0);
                for &id in ids.iter() {
                    try_set_bit(mask, id as usize);
                }
            }
        }
    }

    fn memory_usage(&self) -> usize {
        match self {
            AllowedTokens::Dense(bits) => bits.len() * 4,
            AllowedTokens::Sparse(ids) => ids.len() * 4,
        }
    }
}

/// A trie node where a lexeme is at a match with tokens going on below, and what
/// the candidate walk asks of it first. Kept beside the node: the walk tests each
/// of a string body's hundred match nodes and most fail (after a key only `:`
/// follows); reading the trie's node for each was a cache miss apiece.
#[derive(Clone, Copy, Debug)]
pub struct MatchNode {
    pub node: u32,
    /// The trie depth of the node: the bytes read up to the boundary.
    pub depth: u32,
    /// The ranks of the tokens below the node (its own not included): see
    /// [`MatchNode::below`].
    below: (u32, u32),
    /// The bytes its children start with.
    pub next_bytes: SubtreeBytes,
}

impl MatchNode {
    fn at(trie: &TokenTrie, node: u32) -> MatchNode {
        let n = &trie.nodes()[node as usize];
        MatchNode {
            node,
            depth: n.depth,
            below: (n.tokens_end, trie.ranks_under(node as usize).end as u32),
            next_bytes: trie.child_bytes(node as usize),
        }
    }

    /// The ranks of the tokens below the node.
    pub fn below(&self) -> std::ops::Range<usize> {
        self.below.0 as usize..self.below.1 as usize
    }
}

/// What a lexer configuration allows among the tokens below one trie node, read
/// from the node's depth on: the rest of each token past a terminal boundary at
/// that node (see the candidate walk, [`crate::matcher`]). Over the window of the
/// node's subtree's ranks.
#[derive(Debug)]
pub struct SubtreeMasks {
    /// Tokens some lexeme survives.
    pub allowed: RankSet,
    /// Tokens not allowed that pass a match and then die: the parser decides.
    pub boundary: RankSet,
}

type Cache<K, V> = RwLock<FxHashMap<K, Arc<V>>>;

/// The least budget from which a counter's members are taken by a
/// [`ClassSlice`] rather than walked.
const MIN_COUNTED_SLICE_BUDGET: u32 = 4;

/// The least class size for the same: a walk through a hex digit's subtrees
/// (a UUID's `[0-9a-f]{8}`) stops after a byte or two, the slice is a scan of
/// every token.
const MIN_COUNTED_SLICE_BYTES: u32 = 48;

/// The least closed class size for a [`ClassSlice`]: a number's ten digits
/// make few and short tokens, walked faster than the slice's first build (a
/// scan of every token); a pattern's `[a-z0-9-.]+` (38 bytes) makes thousands.
const MIN_CLOSED_SLICE_BYTES: u32 = 16;

/// Most tokens holding an exit byte for a [`ClassSlice`] to be built (past it
/// the plain walk with its closed class is as fast): Llama-3 has 5,200 holding
/// a quote, a backslash or a lead byte of a Unicode space (`[\w\s-]`), 10k a
/// quote, `-` or `.` (a hostname label's `[A-Za-z0-9]`: its first mask took
/// 470 us with the counted walk, 185 with the slice).
const MAX_CLASS_SLICE_EXITS: usize = 16384;

/// Per (grammar, vocabulary) pair: the lazily built caches of token masks.
pub struct TokenTables {
    grammar: Arc<CompiledGrammar>,
    vocab: Arc<Vocabulary>,
    /// What this grammar shares with the others over the same vocabulary.
    shared: Arc<SharedTables>,
    configurations: Cache<LexerConfiguration, ConfigurationMasks>,
    lexemes: Cache<(TerminalId, State), LexemeMasks>,
    subtrees: Cache<(LexerConfiguration, u32), SubtreeMasks>,
    /// Candidate tokens the parser accepted, keyed by the matcher's future signature.
    accepted_candidates: Cache<Box<[u32]>, Vec<u32>>,
    /// Per terminal, for a token terminal: the ids its set holds in this
    /// vocabulary, as mask words (see [`TokenTables::token_set_mask`]).
    token_sets: Vec<Option<Box<[u32]>>>,
    /// Some terminal is a token terminal (asked per mask and per token).
    has_token_sets: bool,
}

impl std::fmt::Debug for TokenTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenTables")
            .field("grammar", &self.grammar)
            .field("vocab", &self.vocab)
            .field("cached_configurations", &self.cached_configurations())
            .finish()
    }
}

/// Most entries kept in the accepted-candidates cache; past it, results are simply
/// not stored (bounded memory on adversarial inputs).
const MAX_ACCEPTED_ENTRIES: usize = 1 << 16;

/// Fewest bytes in a closed class for the walk to test subtrees against it (a
/// smaller class has few tokens).
const MIN_CLOSED_CLASS_BYTES: u32 = 8;

/// Most subtree masks kept per tables (past it, they are computed and dropped).
/// One below a Llama-3 node as wide as `" "` takes about 30 KB: 512 bound them to
/// about 15 MB.
const MAX_SUBTREE_ENTRIES: usize = 512;

/// Most automaton states explored to decide that a lexeme survives every text of
/// string-body characters (past it, the table is built by a plain walk).
const MAX_SLICE_STATES: usize = 4096;

/// A state read like its loop but for a few first bytes takes the loop's
/// tables where the tokens starting with those bytes are at most this
/// fraction (1/n) of the vocabulary: clearing and walking them costs less
/// than a walk of all.
const MAX_DIFFERING_SHARE: usize = 4;

/// Most states a slice's body may reach for the walk to check that each dies on
/// every control byte (32 steps apiece; a JSON string's body reaches a few).
const MAX_CONTROL_STATES: usize = 64;

fn cached<K: std::hash::Hash + Eq, V>(
    cache: &Cache<K, V>,
    key: K,
    build: impl FnOnce() -> Arc<V>,
) -> Arc<V> {
    if let Some(found) = cache.read().ok().and_then(|c| c.get(&key).cloned()) {
        return found;
    }
    let built = build();
    match cache.write() {
        Ok(mut c) => Arc::clone(c.entry(key).or_insert(built)),
        Err(_) => built,
    }
}

/// `set`'s ids in `vocab` as mask words, end-of-sequence tokens left out.
fn token_set_bits(set: &crate::grammar::TokenSet, vocab: &Vocabulary) -> Box<[u32]> {
    let size = vocab.len();
    let mut bits = vec![0u32; size.div_ceil(32)];
    let mut listed = vec![0u32; size.div_ceil(32)];
    for (first, last) in set.ranges() {
        let (first, last) = (first as usize, (last as usize).min(size.saturating_sub(1)));
        if first <= last && first < size {
            crate::bits::set_range(&mut listed, first..last + 1);
        }
    }
    if set.negated {
        crate::bits::set_range(&mut bits, 0..size);
        for (b, l) in bits.iter_mut().zip(&listed) {
            *b &= !l;
        }
    } else {
        bits = listed;
    }
    for &eos in vocab.eos_ids() {
        if (eos as usize) < size {
            crate::bits::clear_bit(&mut bits, eos as usize);
        }
    }
    bits.into()
}

/// `ranks` in a window's coordinates (ranks from `base` on).
#[inline]
fn shift(ranks: std::ops::Range<usize>, base: usize) -> std::ops::Range<usize> {
    ranks.start - base..ranks.end - base
}

impl TokenTables {
    /// Tables of `grammar` over `vocab` that share nothing with other grammars
    /// (a [`Compiler`](crate::Compiler) makes tables that do).
    pub fn new(grammar: Arc<CompiledGrammar>, vocab: Arc<Vocabulary>) -> TokenTables {
        TokenTables::with_shared(grammar, vocab, Arc::new(SharedTables::default()))
    }

    /// Tables of `grammar` over `vocab` that take what other grammars built
    /// before from `shared`, and leave there what they build.
    pub fn with_shared(
        grammar: Arc<CompiledGrammar>,
        vocab: Arc<Vocabulary>,
        shared: Arc<SharedTables>,
    ) -> TokenTables {
        let token_sets: Vec<_> = grammar
            .terminals()
            .iter()
            .map(|terminal| Some(token_set_bits(terminal.token_set()?, &vocab)))
            .collect();
        TokenTables {
            has_token_sets: token_sets.iter().any(Option::is_some),
            token_sets,
            grammar,
            vocab,
            shared,
            configurations: RwLock::new(FxHashMap::default()),
            lexemes: RwLock::new(FxHashMap::default()),
            subtrees: RwLock::new(FxHashMap::default()),
            accepted_candidates: RwLock::new(FxHashMap::default()),
        }
    }

    pub fn grammar(&self) -> &Arc<CompiledGrammar> {
        &self.grammar
    }

    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// What these tables share with other grammars' over the same vocabulary.
    pub fn shared(&self) -> &Arc<SharedTables> {
        &self.shared
    }

    /// For a token terminal, the tokens it reads as mask words over the
    /// vocabulary: its set's ids below the vocabulary's size, never an
    /// end-of-sequence token (whether the output ends is the grammar's
    /// acceptance). Tokens whose bytes a byte-level lexeme also takes are in both.
    pub fn token_set_mask(&self, terminal: TerminalId) -> Option<&[u32]> {
        self.token_sets.get(terminal.0 as usize)?.as_deref()
    }

    /// Whether the grammar has token terminals at all.
    #[inline]
    pub fn has_token_sets(&self) -> bool {
        self.has_token_sets
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
                .map(|(key, m)| key.len() * 8 + m.memory_usage())
                .sum()
        });
        let lexemes = self
            .lexemes
            .read()
            .map_or(0, |cache| cache.values().map(|m| m.memory_usage()).sum());
        let subtrees = self.subtrees.read().map_or(0, |cache| {
            cache
                .iter()
                .map(|(key, m)| {
                    key.0.len() * 8 + m.allowed.memory_usage() + m.boundary.memory_usage()
                })
                .sum()
        });
        configurations + lexemes + subtrees
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
    pub fn remember_accepted_candidates(&self, signature: &[u32], accepted: Arc<Vec<u32>>) {
        if let Ok(mut cache) = self.accepted_candidates.write() {
            if cache.len() < MAX_ACCEPTED_ENTRIES {
                cache.insert(signature.into(), accepted);
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
            self.shared_configuration(configuration)
        })
    }

    fn shared_configuration(
        &self,
        configuration: &[(TerminalId, State)],
    ) -> Arc<ConfigurationMasks> {
        let mut lexemes: Vec<(u128, State)> = configuration
            .iter()
            .map(|&(terminal, state)| (self.grammar.table_fingerprint(terminal, state), state))
            .collect();
        lexemes.sort_unstable();
        lexemes.dedup();
        self.shared.configurations.get_or_build(
            (self.vocab.id(), lexemes.into()),
            |key, masks| key.1.len() * std::mem::size_of::<(u128, State)>() + masks.memory_usage(),
            || self.build_configuration(configuration),
        )
    }

    fn build_configuration(&self, configuration: &[(TerminalId, State)]) -> ConfigurationMasks {
        let rank_words = self.vocab.text_tokens().len().div_ceil(32);
        let mut allowed = vec![0u32; self.mask_words()];
        let mut allowed_by_rank = vec![0u32; rank_words];
        let mut boundary_by_rank = vec![0u32; rank_words];
        let token_ids = self.vocab.trie().token_ids();
        for &lexeme in configuration {
            self.lexeme_masks(lexeme).tokens.add_to(
                token_ids,
                &mut allowed,
                &mut allowed_by_rank,
                &mut boundary_by_rank,
            );
        }
        for (b, a) in boundary_by_rank.iter_mut().zip(&allowed_by_rank) {
            *b &= !a;
        }
        ConfigurationMasks {
            allowed: AllowedTokens::new(allowed),
            candidates: RankSet::from_bits(boundary_by_rank),
        }
    }

    /// The masks of `configuration` over the descendants of trie node `node`,
    /// computed on first use (at most `MAX_SUBTREE_ENTRIES` kept).
    pub fn subtree_masks(
        &self,
        configuration: &[(TerminalId, State)],
        node: usize,
    ) -> Arc<SubtreeMasks> {
        let key = (configuration.into(), node as u32);
        if let Some(found) = self.subtrees.read().ok().and_then(|c| c.get(&key).cloned()) {
            return found;
        }
        let built = Arc::new(self.build_subtree(configuration, node));
        if let Ok(mut cache) = self.subtrees.write() {
            if cache.len() < MAX_SUBTREE_ENTRIES {
                cache.insert(key, Arc::clone(&built));
            }
        }
        built
    }

    fn build_subtree(&self, configuration: &[(TerminalId, State)], node: usize) -> SubtreeMasks {
        let trie = self.vocab.trie();
        let ranks = trie.ranks_under(node);
        let first_word = ranks.start / 32;
        let words = ranks.end.div_ceil(32) - first_word;
        let mut allowed = vec![0u32; words];
        let mut boundary = vec![0u32; words];
        // A subtree made only of a closed class is taken whole, as in the
        // lexeme's own walk (an identifier below a space: 46k Llama-3 tokens);
        // for small subtrees the analysis costs more than the walk.
        let large = trie.nodes()[node].subtree_end as usize - node >= 4096;
        // Lexeme walks only set bits: one pair of arrays holds their union.
        for &(terminal, state) in configuration {
            let terminal = self.grammar.terminal(terminal);
            let closed = match large
                && !terminal.counts_at(state)
                && terminal.live_ascii_count(state) >= MIN_CLOSED_CLASS_BYTES
            {
                true => walk_closed_class(terminal, state),
                false => None,
            };
            let mut walk = LexemeWalk {
                trie,
                allowed: None,
                allowed_by_rank: &mut allowed,
                boundary_by_rank: &mut boundary,
                rank_base: first_word * 32,
                closed: closed
                    .as_ref()
                    .map(|(class, states)| (&states[..], SubtreeBytes(*class))),
                class_slice: None,
                counted: None,
                match_nodes: None,
                touched: 0..0,
            };
            walk_lexeme(&mut walk, terminal, Visit::Below(node), state);
        }
        for (b, a) in boundary.iter_mut().zip(&allowed) {
            *b &= !a;
        }
        SubtreeMasks {
            allowed: RankSet::from_window(first_word, allowed),
            boundary: RankSet::from_window(first_word, boundary),
        }
    }

    /// The trie nodes where `lexeme` (a table lexeme: terminal and state as in a
    /// configuration) is alive at a match with tokens going on below, ascending;
    /// `None` where its tables do not list them.
    pub fn match_nodes(&self, lexeme: (TerminalId, State)) -> Option<Arc<[MatchNode]>> {
        self.lexeme_masks(lexeme).match_nodes.clone()
    }

    /// A lexeme's tables: from this grammar's cache, else the shared ones
    /// ([`SharedTables`]), else built (and kept in both).
    fn lexeme_masks(&self, lexeme: (TerminalId, State)) -> Arc<LexemeMasks> {
        cached(&self.lexemes, lexeme, || self.shared_lexeme_masks(lexeme))
    }

    fn shared_lexeme_masks(&self, lexeme: (TerminalId, State)) -> Arc<LexemeMasks> {
        let fingerprint = self.grammar.table_fingerprint(lexeme.0, lexeme.1);
        self.shared_lexeme(fingerprint, lexeme.1, || self.build_lexeme(lexeme))
    }

    /// The shared tables of the automaton `fingerprint` in `state`, built by
    /// `build` on first use.
    fn shared_lexeme(
        &self,
        fingerprint: u128,
        state: State,
        build: impl FnOnce() -> LexemeMasks,
    ) -> Arc<LexemeMasks> {
        let key = (self.vocab.id(), fingerprint, state);
        self.shared
            .lexemes
            .get_or_build(key, |_, masks| masks.memory_usage(), build)
    }
}
