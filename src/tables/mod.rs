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
//! A lexeme may be [`LOOPED`]: the matcher's
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

mod shared;

use std::sync::{Arc, RwLock};

use rustc_hash::FxHashMap;

use crate::automaton::lexer::{Budgets, ExcludedRests, Terminal, LOOPED, NO_BUDGET};
use crate::automaton::{CompiledGrammar, State, TerminalId, DEAD};
pub use crate::vocab::RankSet;
use crate::vocab::{
    set_range, ChildSlot, ClassSlice, SliceChars, SubtreeBytes, TokenTrie, Vocabulary,
};
pub use shared::{SharedTables, DEFAULT_SHARED_TABLE_BYTES};

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
        AllowedTokens::Sparse(set_positions(&bits, 0, count).into())
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
                    if let Some(word) = mask.get_mut(id as usize / 32) {
                        *word |= 1 << (id % 32);
                    }
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

/// One lexeme's answers over the vocabulary.
#[derive(Debug)]
struct LexemeMasks {
    tokens: LexemeTokens,
    /// The trie nodes (ascending) where the lexeme is alive at a match and some
    /// token goes on below: where the candidate walk meets a terminal boundary, so
    /// it can visit these instead of walking the trie. `None` past
    /// [`MAX_MATCH_NODES`] (an identifier matches at every letter).
    match_nodes: Option<Arc<[MatchNode]>>,
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

/// Zeroed arrays for a lexeme walk, kept per thread. A lexeme that allows few
/// tokens (an object key's literal) is kept as lists, and the arrays it walked
/// into, cleared where it set bits, serve the next walk: allocating, zeroing and
/// scanning three vocabulary-wide arrays was two thirds of such a lexeme's cost,
/// and a large object's first configuration builds dozens.
struct LexemeScratch {
    allowed: Vec<u32>,
    allowed_by_rank: Vec<u32>,
    boundary_by_rank: Vec<u32>,
}

thread_local! {
    static LEXEME_SCRATCH: std::cell::Cell<Option<LexemeScratch>> =
        const { std::cell::Cell::new(None) };
}

impl LexemeScratch {
    /// The thread's arrays if they have these sizes, else new ones.
    fn take(mask_words: usize, rank_words: usize) -> LexemeScratch {
        LEXEME_SCRATCH
            .with(|cell| cell.take())
            .filter(|s| s.allowed.len() == mask_words && s.allowed_by_rank.len() == rank_words)
            .unwrap_or_else(|| LexemeScratch {
                allowed: vec![0; mask_words],
                allowed_by_rank: vec![0; rank_words],
                boundary_by_rank: vec![0; rank_words],
            })
    }

    /// Keeps the arrays, all zero again, for the thread's next walk.
    fn put_back(self) {
        debug_assert!(
            [&self.allowed, &self.allowed_by_rank, &self.boundary_by_rank]
                .iter()
                .all(|bits| bits.iter().all(|&w| w == 0)),
            "lexeme scratch arrays put back with bits set"
        );
        LEXEME_SCRATCH.with(|cell| cell.set(Some(self)));
    }
}

/// The tokens a lexeme survives and those it passes a match in and dies, dense or,
/// for a lexeme that allows few (an object key's literal: a large object's
/// configuration holds dozens), as lists: a configuration ORs them in at the cost
/// of their length instead of three vocabulary-wide arrays each.
#[derive(Debug)]
enum LexemeTokens {
    Dense {
        /// Bit per token id: the lexeme survives all of the token's bytes.
        allowed: Vec<u32>,
        /// `allowed`, bit per rank (position in the trie's byte order).
        allowed_by_rank: Vec<u32>,
        /// Bit per rank: the lexeme was at a match after an inner byte of the
        /// token. By rank, because such tokens come as whole trie subtrees:
        /// contiguous ranks.
        boundary_by_rank: Vec<u32>,
    },
    Sparse {
        /// The allowed tokens' ranks.
        allowed: Box<[u32]>,
        /// The boundary tokens, as rank ranges.
        boundary: Box<[(u32, u32)]>,
    },
}

/// Most allowed tokens and boundary rank ranges of a lexeme kept as lists.
const MAX_SPARSE_TOKENS: usize = 2048;

impl LexemeTokens {
    /// The lists where they are short enough (the arrays go back to the
    /// thread's scratch, cleared), else the arrays. Only the ranks in `touched`
    /// may be set.
    fn from_walk(
        scratch: LexemeScratch,
        touched: std::ops::Range<usize>,
        token_ids: &[u32],
    ) -> Self {
        let rank_words = scratch.allowed_by_rank.len();
        let words = (touched.start / 32).min(rank_words)..touched.end.div_ceil(32).min(rank_words);
        let count: usize = scratch.allowed_by_rank[words.clone()]
            .iter()
            .map(|w| w.count_ones() as usize)
            .sum();
        let ranges = (count <= MAX_SPARSE_TOKENS)
            .then(|| set_ranges(&scratch.boundary_by_rank[words.clone()], MAX_SPARSE_TOKENS))
            .flatten();
        let Some(mut boundary) = ranges else {
            return LexemeTokens::Dense {
                allowed: scratch.allowed,
                allowed_by_rank: scratch.allowed_by_rank,
                boundary_by_rank: scratch.boundary_by_rank,
            };
        };
        let offset = words.start as u32 * 32;
        for range in &mut boundary {
            *range = (range.0 + offset, range.1 + offset);
        }
        let ranks = set_positions(&scratch.allowed_by_rank[words.clone()], offset, count);
        let mut scratch = scratch;
        for &rank in &ranks {
            let id = token_ids[rank as usize];
            scratch.allowed[id as usize / 32] &= !(1 << (id % 32));
        }
        scratch.allowed_by_rank[words.clone()].fill(0);
        scratch.boundary_by_rank[words].fill(0);
        scratch.put_back();
        LexemeTokens::Sparse {
            allowed: ranks.into(),
            boundary: boundary.into(),
        }
    }

    /// ORs these tokens into a configuration's arrays (`token_ids` by rank).
    fn add_to(
        &self,
        token_ids: &[u32],
        allowed: &mut [u32],
        allowed_by_rank: &mut [u32],
        boundary_by_rank: &mut [u32],
    ) {
        match self {
            LexemeTokens::Dense {
                allowed: a,
                allowed_by_rank: r,
                boundary_by_rank: b,
            } => {
                for (x, y) in allowed.iter_mut().zip(a) {
                    *x |= y;
                }
                for (x, y) in allowed_by_rank.iter_mut().zip(r) {
                    *x |= y;
                }
                for (x, y) in boundary_by_rank.iter_mut().zip(b) {
                    *x |= y;
                }
            }
            LexemeTokens::Sparse {
                allowed: ranks,
                boundary,
            } => {
                for &rank in ranks.iter() {
                    set(allowed_by_rank, rank);
                    set(allowed, token_ids[rank as usize]);
                }
                for &(start, end) in boundary.iter() {
                    set_range(boundary_by_rank, start as usize..end as usize);
                }
            }
        }
    }

    /// These tokens less the ranks in `removed` (`token_ids` by rank).
    fn without(&self, token_ids: &[u32], removed: &[std::ops::Range<usize>]) -> LexemeTokens {
        match self {
            LexemeTokens::Dense {
                allowed,
                allowed_by_rank,
                boundary_by_rank,
            } => {
                let (mut allowed, mut allowed_by_rank, mut boundary_by_rank) = (
                    allowed.clone(),
                    allowed_by_rank.clone(),
                    boundary_by_rank.clone(),
                );
                for range in removed {
                    for &id in &token_ids[range.clone()] {
                        allowed[id as usize / 32] &= !(1 << (id % 32));
                    }
                    clear_range(&mut allowed_by_rank, range.clone());
                    clear_range(&mut boundary_by_rank, range.clone());
                }
                LexemeTokens::Dense {
                    allowed,
                    allowed_by_rank,
                    boundary_by_rank,
                }
            }
            LexemeTokens::Sparse { allowed, boundary } => {
                let in_removed = |rank: usize| removed.iter().any(|r| r.contains(&rank));
                // Each boundary run less every removed range: at most two pieces
                // per cut.
                let mut kept = Vec::new();
                for &(start, end) in boundary.iter() {
                    let mut pieces = vec![(start as usize, end as usize)];
                    for range in removed {
                        pieces = pieces
                            .into_iter()
                            .flat_map(|(a, b)| [(a, b.min(range.start)), (a.max(range.end), b)])
                            .filter(|(a, b)| a < b)
                            .collect();
                    }
                    kept.extend(pieces.into_iter().map(|(a, b)| (a as u32, b as u32)));
                }
                LexemeTokens::Sparse {
                    allowed: allowed
                        .iter()
                        .copied()
                        .filter(|&rank| !in_removed(rank as usize))
                        .collect(),
                    boundary: kept.into(),
                }
            }
        }
    }

    fn memory_usage(&self) -> usize {
        match self {
            LexemeTokens::Dense {
                allowed,
                allowed_by_rank,
                boundary_by_rank,
            } => (allowed.len() + allowed_by_rank.len() + boundary_by_rank.len()) * 4,
            LexemeTokens::Sparse { allowed, boundary } => allowed.len() * 4 + boundary.len() * 8,
        }
    }
}

/// The positions of the set bits of `bits` (`count` of them), plus `base`.
fn set_positions(bits: &[u32], base: u32, count: usize) -> Vec<u32> {
    let mut positions = Vec::with_capacity(count);
    for (w, &word) in bits.iter().enumerate() {
        let mut rest = word;
        while rest != 0 {
            positions.push(base + w as u32 * 32 + rest.trailing_zeros());
            rest &= rest - 1;
        }
    }
    positions
}

/// The runs of set bits in `bits` as `(start, end)` ranges, if at most `limit`.
fn set_ranges(bits: &[u32], limit: usize) -> Option<Vec<(u32, u32)>> {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    // Most words are empty: skip them 16 at a time.
    const CHUNK: usize = 16;
    for (c, chunk) in bits.chunks(CHUNK).enumerate() {
        if chunk.iter().fold(0, |any, &w| any | w) == 0 {
            continue;
        }
        for (i, &word) in chunk.iter().enumerate() {
            let w = c * CHUNK + i;
            let mut rest = word;
            while rest != 0 {
                let start = w as u32 * 32 + rest.trailing_zeros();
                // The run's length inside this word: ones from `start` on.
                let run = (rest >> rest.trailing_zeros()).trailing_ones();
                let end = start + run;
                match ranges.last_mut() {
                    Some(last) if last.1 == start => last.1 = end,
                    _ => {
                        if ranges.len() == limit {
                            return None;
                        }
                        ranges.push((start, end));
                    }
                }
                rest = if run + rest.trailing_zeros() >= 32 {
                    0
                } else {
                    rest & !(((1u32 << run) - 1) << rest.trailing_zeros())
                };
            }
        }
    }
    Some(ranges)
}

impl LexemeMasks {
    /// The tables of a lexeme allowing the tokens at `ranks` (ascending) and,
    /// where it ends at a match with tokens going on, those below `end`.
    fn sparse(ranks: Vec<u32>, end: Option<MatchNode>) -> LexemeMasks {
        LexemeMasks {
            tokens: LexemeTokens::Sparse {
                allowed: ranks.into(),
                boundary: end.iter().map(|at| at.below).collect(),
            },
            match_nodes: Some(end.into_iter().collect()),
        }
    }

    /// The tables a walk wrote into `scratch` (bits only in `touched` ranks),
    /// with its match nodes unless past [`MAX_MATCH_NODES`].
    fn from_walk(
        trie: &TokenTrie,
        scratch: LexemeScratch,
        touched: std::ops::Range<usize>,
        match_nodes: &[u32],
    ) -> LexemeMasks {
        let listed = match_nodes.len() <= MAX_MATCH_NODES;
        LexemeMasks {
            tokens: LexemeTokens::from_walk(scratch, touched, trie.token_ids()),
            match_nodes: listed.then(|| {
                match_nodes
                    .iter()
                    .map(|&node| MatchNode::at(trie, node))
                    .collect()
            }),
        }
    }

    fn memory_usage(&self) -> usize {
        let match_nodes = self.match_nodes.as_ref().map_or(0, |m| m.len());
        self.tokens.memory_usage() + match_nodes * std::mem::size_of::<MatchNode>()
    }
}

/// Most match nodes kept per lexeme (a JSON string body from its start has about
/// 900 over Llama-3; a key literal one or two).
const MAX_MATCH_NODES: usize = 1 << 14;

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

#[inline(always)]
fn set(mask: &mut [u32], id: u32) {
    mask[id as usize / 32] |= 1 << (id % 32);
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
        TokenTables {
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

    /// Walks the vocabulary trie through one lexeme's DFA, skipping dead subtrees,
    /// and, when no text of a slice's characters can kill the lexeme (a looping
    /// string body, a key that may still be any string, a pattern's `.*`), the
    /// subtrees of tokens made only of them (all allowed, taken in one OR).
    fn build_lexeme(&self, (terminal, state): (TerminalId, State)) -> LexemeMasks {
        self.build_lexeme_of(self.grammar.terminal(terminal), state)
    }

    fn build_lexeme_of(&self, terminal: &Terminal, state: State) -> LexemeMasks {
        if let Some(view) = terminal.excluded_view().filter(|_| state & LOOPED == 0) {
            if let Some((base_state, rests)) = view.at(state) {
                return self.excluded_lexeme(view.base(), base_state, rests);
            }
        }
        let trie = self.vocab.trie();
        if let Some(masks) = self.literal_lexeme(terminal, state) {
            return masks;
        }
        let rank_words = trie.token_ids().len().div_ceil(32);
        let mut scratch = LexemeScratch::take(self.mask_words(), rank_words);
        let LexemeScratch {
            allowed,
            allowed_by_rank,
            boundary_by_rank,
        } = &mut scratch;
        // A counter dies after its count: no closed class from its states, and a
        // slice only while no token can reach the count's end.
        let counts = terminal.counts_at(state);
        let horizon = trie.max_depth() as u32;
        let body = SliceChars::ALL.into_iter().find_map(|chars| {
            let non_ascii = chars.non_ascii();
            let reached =
                terminal.body_reach_within(state, non_ascii, MAX_SLICE_STATES, horizon)?;
            Some((chars, reached))
        });
        let slice = body.as_ref().map(|(chars, _)| self.vocab.slice(*chars));
        if let Some(slice) = slice {
            allowed.copy_from_slice(slice.members());
            allowed_by_rank.copy_from_slice(slice.members_by_rank());
        }
        // Near a counter's end: the slice's tokens short enough to fit the count.
        let slice = slice.or_else(|| {
            let (chars, room) = SliceChars::ALL.into_iter().find_map(|chars| {
                let room = terminal.counted_room(state, chars.non_ascii())?;
                Some((chars, u8::try_from(room).ok().filter(|&r| r < u8::MAX)?))
            })?;
            let slice = self.vocab.slice(chars);
            slice.members_up_to(room, allowed, allowed_by_rank);
            Some(slice)
        });
        // The nodes to visit: all of them, or with a slice only those whose subtree
        // holds a token outside it (the rest are taken in the OR above).
        let visit = match slice {
            Some(slice) => {
                // Nor, in a JSON string, those whose first byte past the body
                // is a raw control (it kills the string).
                let past_controls = body.as_ref().is_some_and(|(_, reached)| {
                    terminal.body_dies_on_controls(state, reached, MAX_CONTROL_STATES)
                });
                let (order, skip) = match past_controls {
                    true => slice.outsider_nodes_past_controls(),
                    false => slice.outsider_nodes(),
                };
                Visit::Outsiders { order, skip }
            }
            None => Visit::All,
        };
        // Without a slice, a counter (`maxLength`, `{1,32}`): a subtree made only
        // of its class is its tokens short enough, taken by length a word of ranks
        // at a time. Tried first: cheap, and where it exists the closed class
        // below would explore every counter state to find nothing.
        // Neither where fewer bytes than a class survive (a key literal's states:
        // asking costs a map as large as the automaton).
        let classy = slice.is_none() && terminal.live_ascii_count(state) >= MIN_CLOSED_CLASS_BYTES;
        let counted = match classy {
            true => terminal.counted_class(state, MIN_CLOSED_CLASS_BYTES, trie.max_depth()),
            false => None,
        };
        // Else a class of bytes no text of which kills the lexeme (`[A-Za-z0-9.-]+`)
        // lets the walk take a subtree made only of it at once.
        let mut closed = match (slice, &counted) {
            (None, None) if classy && !counts => walk_closed_class(terminal, state),
            _ => None,
        };
        // From a closed class's states only a few bytes outside it may survive (a
        // pattern string's closing quote): its members are allowed at once, and the
        // walk enters only subtrees holding a token that leaves it by such a byte.
        let class_slice_entry = closed.as_mut().and_then(|(class, states)| {
            let mut exits = terminal.exit_bytes(*class, states)?;
            // Where non-ASCII bytes survive, the class may hold every non-ASCII
            // character (a key that is any string without a digit): then only
            // ASCII bytes exit, from the states the wider class reaches.
            let mut non_ascii = None;
            if exits[2] | exits[3] != 0 {
                let widened = SliceChars::EVERY.into_iter().find_map(|chars| {
                    let states = terminal.closed_class_with(
                        state,
                        *class,
                        chars.non_ascii(),
                        MAX_SLICE_STATES,
                    )?;
                    Some((chars, terminal.ascii_exit_bytes(*class, &states)?, states))
                });
                if let Some((chars, ascii_exits, widened_states)) = widened {
                    (non_ascii, exits, *states) = (Some(chars), ascii_exits, widened_states);
                }
            }
            Some(self.class_slice(*class, non_ascii, exits))
        });
        // A counter's class likewise, its members allowed up to the budget: a
        // pattern's `[A-Za-z0-9 &'()*,-./@£]{1,32}` walks the tokens holding a
        // quote or a `£`, not the 80k made of its ASCII bytes.
        let counted_slice_entry = counted.as_ref().and_then(|(class, budgets)| {
            // A short budget or a small class (hex digits) walks few nodes of
            // the trie: cheaper than a first build of the slice.
            let budget = budgets.of(state);
            let small =
                budget < MIN_COUNTED_SLICE_BUDGET || class.count_ones() < MIN_COUNTED_SLICE_BYTES;
            if budget == NO_BUDGET || small {
                return None;
            }
            let exits = terminal.counted_exit_bytes(*class, budgets);
            let entry = self.class_slice(*class, None, exits);
            if let Some(class_slice) = entry.as_ref() {
                let budget = budget as usize;
                class_slice.members_up_to(&self.vocab, budget, allowed, allowed_by_rank);
            }
            Some(entry)
        });
        // `None` inside: too many tokens hold an exit (cached as such).
        let closed_slice = class_slice_entry.as_deref().and_then(Option::as_ref);
        if let Some(closed_slice) = closed_slice {
            allowed.copy_from_slice(closed_slice.members());
            allowed_by_rank.copy_from_slice(closed_slice.members_by_rank());
        }
        let class_slice = closed_slice.or(counted_slice_entry.as_deref().and_then(Option::as_ref));
        let mut match_nodes = Vec::new();
        let mut walk = LexemeWalk {
            trie,
            allowed: Some(allowed),
            allowed_by_rank,
            boundary_by_rank,
            rank_base: 0,
            closed: closed
                .as_ref()
                .map(|(class, states)| (&states[..], SubtreeBytes(*class))),
            class_slice,
            counted: counted
                .as_ref()
                .map(|(class, budgets)| (budgets, SubtreeBytes(*class))),
            // The subtrees taken whole hold no match node: slices and closed
            // classes keep the lexeme alive (no candidate below), and a counted
            // class's chain has no match state.
            match_nodes: Some(&mut match_nodes),
            touched: 0..0,
        };
        walk_lexeme(&mut walk, terminal, visit, state);
        // A slice set bits everywhere.
        let touched = match (slice, class_slice) {
            (None, None) => walk.touched,
            _ => 0..trie.token_ids().len(),
        };
        LexemeMasks::from_walk(trie, scratch, touched, &match_nodes)
    }

    /// The tables of a lexeme whose state reads one byte only, and the next
    /// ones likewise (a key literal's rest): the tokens along that path are
    /// allowed, and only below its end is there anything to walk. A large
    /// object's first mask builds one per key, and walking from the root
    /// tested each sibling of each node on the path. `None` where `state`
    /// reads more bytes than one, or tokens go on past a match that continues
    /// (the plain walk tells those).
    fn literal_lexeme(&self, terminal: &Terminal, state: State) -> Option<LexemeMasks> {
        let trie = self.vocab.trie();
        let nodes = trie.nodes();
        let mut on_path = Vec::new();
        // Read while the lexeme reads one byte and some token goes on with it.
        let (mut node, mut end) = (None, state);
        while !terminal.is_match(end) {
            let Some(byte) = terminal.only_live_byte(end) else {
                break;
            };
            let Some(child) = trie.child_of(node, byte) else {
                // No token reads past here: the others died on the way.
                return Some(LexemeMasks::sparse(on_path, None));
            };
            on_path.extend(nodes[child].tokens_start..nodes[child].tokens_end);
            (node, end) = (Some(child), terminal.next(end, byte));
        }
        let node = node?;
        if nodes[node].subtree_end as usize == node + 1 {
            return Some(LexemeMasks::sparse(on_path, None));
        }
        if terminal.is_match(end) {
            if terminal.live_bytes(end) != [0; 4] {
                return None;
            }
            // The lexeme ends here: every token going on is a boundary.
            return Some(LexemeMasks::sparse(
                on_path,
                Some(MatchNode::at(trie, node as u32)),
            ));
        }
        let token_ids = trie.token_ids();
        let rank_words = token_ids.len().div_ceil(32);
        let mut scratch = LexemeScratch::take(self.mask_words(), rank_words);
        for &rank in &on_path {
            set(&mut scratch.allowed, token_ids[rank as usize]);
            set(&mut scratch.allowed_by_rank, rank);
        }
        let mut match_nodes = Vec::new();
        let mut walk = LexemeWalk {
            trie,
            allowed: Some(&mut scratch.allowed),
            allowed_by_rank: &mut scratch.allowed_by_rank,
            boundary_by_rank: &mut scratch.boundary_by_rank,
            rank_base: 0,
            closed: None,
            class_slice: None,
            counted: None,
            match_nodes: Some(&mut match_nodes),
            touched: 0..0,
        };
        if let (Some(&first), Some(&last)) = (on_path.first(), on_path.last()) {
            walk.touch(first as usize..last as usize + 1);
        }
        walk_lexeme(&mut walk, terminal, Visit::Below(node), end);
        let touched = walk.touched;
        Some(LexemeMasks::from_walk(trie, scratch, touched, &match_nodes))
    }

    /// The [`ClassSlice`] of `class` (widened by `non_ascii`) with `exits`, from
    /// the shared tables; `None` inside where too many tokens hold an exit.
    fn class_slice(
        &self,
        class: u128,
        non_ascii: Option<SliceChars>,
        exits: [u64; 4],
    ) -> Arc<Option<ClassSlice>> {
        self.shared.class_slices.get_or_build(
            (self.vocab.id(), class, non_ascii, exits),
            |_, slice| slice.as_ref().map_or(0, ClassSlice::memory_usage),
            || ClassSlice::new(&self.vocab, class, non_ascii, &exits, MAX_CLASS_SLICE_EXITS),
        )
    }

    /// The tables of a base-minus-excluded-strings lexeme (see
    /// [`ExcludedView`](crate::automaton::lexer::ExcludedView)): its base's
    /// (from the shared tables) without the tokens that start with one of `rests`
    /// (they die at its end), nor those tokens' match nodes.
    fn excluded_lexeme(
        &self,
        base: &Terminal,
        base_state: State,
        rests: ExcludedRests<'_>,
    ) -> LexemeMasks {
        let of_base = self.shared_lexeme(base.fingerprint(), base_state, || {
            self.build_lexeme_of(base, base_state)
        });
        let trie = self.vocab.trie();
        // The subtrees of the tokens starting with a rest, as node ranges in
        // preorder (the rests come sorted, the trie's children in byte order);
        // no rest is a prefix of another (each ends the base), so they are
        // disjoint.
        let mut removed: Vec<std::ops::Range<usize>> = Vec::new();
        rests.for_each(|rest| {
            if let Some(node) = trie.node_of(rest) {
                removed.push(node..trie.nodes()[node].subtree_end as usize);
            }
        });
        debug_assert!(removed.is_sorted_by_key(|nodes| nodes.start));
        let ranks: Vec<std::ops::Range<usize>> = removed
            .iter()
            .map(|nodes| trie.ranks_under(nodes.start))
            .collect();
        let match_nodes = of_base.match_nodes.as_ref().map(|nodes| {
            // Both ascending: one merge.
            let mut next = removed.iter().peekable();
            nodes
                .iter()
                .copied()
                .filter(|at| {
                    let n = at.node as usize;
                    while next.next_if(|nodes| nodes.end <= n).is_some() {}
                    !next.peek().is_some_and(|nodes| nodes.contains(&n))
                })
                .collect()
        });
        LexemeMasks {
            tokens: of_base.tokens.without(trie.token_ids(), &ranks),
            match_nodes,
        }
    }
}

/// The [closed class](Terminal::closed_class) of a lexeme state, where it has
/// enough bytes for a walk to test subtrees against it. Asked only where that
/// many bytes survive the state and no counter runs (a key literal's states:
/// asking costs a map as large as the automaton; a counter dies after its
/// count).
fn walk_closed_class(terminal: &Terminal, state: State) -> Option<(u128, Vec<bool>)> {
    terminal
        .closed_class(state, MAX_SLICE_STATES)
        .filter(|(class, _)| class.count_ones() >= MIN_CLOSED_CLASS_BYTES)
}

/// Clears bits `range` of `bits`.
fn clear_range(bits: &mut [u32], range: std::ops::Range<usize>) {
    for rank in range {
        bits[rank / 32] &= !(1 << (rank % 32));
    }
}

/// Runs `walk` through `terminal` from `state`. Specialized loops: the plain
/// automaton is a table lookup per byte; only a LOOPED lexeme pays for the
/// restart test.
fn walk_lexeme(walk: &mut LexemeWalk<'_>, terminal: &Terminal, visit: Visit<'_>, state: State) {
    if let Some(dfa) = terminal.tables().filter(|_| state & LOOPED == 0) {
        walk.run(
            visit,
            state,
            #[inline(always)]
            |q, b| dfa.transitions[q as usize * dfa.stride + dfa.classes[b as usize] as usize],
            #[inline(always)]
            |q| dfa.matching[q as usize],
        );
    } else {
        walk.run(
            visit,
            state,
            #[inline(always)]
            |q, b| terminal.step(q, b),
            #[inline(always)]
            |q| terminal.is_match(q),
        );
    }
}

/// What a lexeme walk knows at one depth of its path: the state after that
/// many bytes, whether a match happened after 1..=depth of them, and the node
/// there as the next depth's parent (its children's index, `NONE` to visit
/// them one by one; its subtree's end and last rank).
#[derive(Clone, Copy)]
struct PathStep {
    state: State,
    matched: bool,
    children: ChildSlot,
    subtree_end: u32,
    ranks_end: u32,
}

impl Default for PathStep {
    fn default() -> Self {
        PathStep {
            state: DEAD,
            matched: false,
            children: ChildSlot::NONE,
            subtree_end: 0,
            ranks_end: 0,
        }
    }
}

thread_local! {
    /// A walk's path, kept per thread: allocating it per walk was a quarter of
    /// a mask whose candidates need subtree masks of dozens of lexemes.
    static WALK_PATH: std::cell::Cell<Vec<PathStep>> = const { std::cell::Cell::new(Vec::new()) };
}

/// How far ahead an outsiders walk fetches the nodes it will visit (measured:
/// 4 to 32 alike, each about a third off the first string body's walk).
const PREFETCH_OUTSIDERS: usize = 16;

/// Which trie nodes a lexeme walk visits.
#[derive(Clone, Copy)]
enum Visit<'a> {
    All,
    /// The strict descendants of a node, read from its depth on.
    Below(usize),
    /// Only `order` (preorder node indices); `skip[k]` is the entry past the
    /// subtree of `order[k]`.
    Outsiders {
        order: &'a [u32],
        skip: &'a [u32],
    },
}

/// The outputs of one lexeme's walk over the vocabulary trie.
struct LexemeWalk<'a> {
    trie: &'a TokenTrie,
    /// By token id, when wanted.
    allowed: Option<&'a mut [u32]>,
    /// By rank minus `rank_base` (a multiple of 32: the bits of a window).
    allowed_by_rank: &'a mut [u32],
    boundary_by_rank: &'a mut [u32],
    rank_base: usize,
    /// States from which no text of a byte class kills the lexeme, and the class:
    /// a subtree entered in such a state and made only of the class is allowed.
    closed: Option<(&'a [bool], SubtreeBytes)>,
    /// With `closed`, where its states leave the class only by exit bytes: its
    /// members were set before the walk, so a subtree entered in a closed state
    /// without a token leaving by an exit holds nothing more. With `counted`
    /// likewise, for the members short enough for the walk's start.
    class_slice: Option<&'a ClassSlice>,
    /// A counter's budget per state and its class ([`Terminal::counted_class`]):
    /// a subtree entered in a state with budget `b` and made only of the class
    /// holds allowed tokens (those at most `b` bytes past the entry) and dead ones.
    counted: Option<(&'a Budgets, SubtreeBytes)>,
    /// Where wanted: the visited nodes where the lexeme is alive at a match and
    /// the subtree goes on (see [`LexemeMasks::match_nodes`]).
    match_nodes: Option<&'a mut Vec<u32>>,
    /// The ranks (absolute) the walk set bits in may lie in: what the arrays'
    /// reader scans and clears ([`LexemeScratch`]).
    touched: std::ops::Range<usize>,
}

impl LexemeWalk<'_> {
    /// Notes that bits of `ranks` may be set (preorder: ranks only grow, but a
    /// subtree taken whole reaches past later nodes' starts).
    #[inline]
    fn touch(&mut self, ranks: std::ops::Range<usize>) {
        if self.touched.is_empty() {
            self.touched = ranks;
        } else {
            self.touched.start = self.touched.start.min(ranks.start);
            self.touched.end = self.touched.end.max(ranks.end);
        }
    }

    /// Of the tokens below `node` (made of a counter's class, entered with the
    /// budget for a whole token of some length): those `short` enough (bits by
    /// rank) are allowed, the others die without a match in the class, so are
    /// boundaries when the token passed a match before (`matched`). A word of
    /// ranks at a time.
    fn take_short_tokens(&mut self, node: usize, short: &[u32], matched: bool) {
        let trie = self.trie;
        let ranks = trie.ranks_under(node);
        if ranks.is_empty() {
            return;
        }
        let token_ids = trie.token_ids();
        let base_word = self.rank_base / 32;
        for w in ranks.start / 32..ranks.end.div_ceil(32) {
            let low = if w == ranks.start / 32 {
                u32::MAX << (ranks.start % 32)
            } else {
                u32::MAX
            };
            let high = if w == (ranks.end - 1) / 32 {
                u32::MAX >> (31 - (ranks.end - 1) % 32)
            } else {
                u32::MAX
            };
            let in_subtree = low & high;
            let mut allowed = short[w] & in_subtree;
            self.allowed_by_rank[w - base_word] |= allowed;
            if matched {
                self.boundary_by_rank[w - base_word] |= !short[w] & in_subtree;
            }
            if let Some(by_id) = self.allowed.as_deref_mut() {
                while allowed != 0 {
                    set(by_id, token_ids[w * 32 + allowed.trailing_zeros() as usize]);
                    allowed &= allowed - 1;
                }
            }
        }
    }

    /// Walks the visited nodes in preorder through the automaton (`step`, DEAD when
    /// it dies; `is_match`), skipping the subtree below a dead byte: tokens a state
    /// survives are allowed, tokens below a death after a match are boundaries.
    #[inline(always)]
    fn run(
        &mut self,
        visit: Visit<'_>,
        start: State,
        step: impl Fn(State, u8) -> State,
        is_match: impl Fn(State) -> bool,
    ) {
        let trie = self.trie;
        let nodes = trie.nodes();
        let token_ids = trie.token_ids();
        let rank_base = self.rank_base;
        // Depths count from the walk's root: `base` bytes are read before it.
        let (first, visits, base) = match visit {
            Visit::All => (0, nodes.len(), 0),
            Visit::Below(node) => (
                node + 1,
                nodes[node].subtree_end as usize,
                nodes[node].depth as usize,
            ),
            Visit::Outsiders { order, .. } => (0, order.len(), 0),
        };
        // Not for `Outsiders`: its order is not the node array's.
        let outsiders = matches!(visit, Visit::Outsiders { .. });
        let parent_at = |i: usize| {
            let n = &nodes[i];
            (n.child_slot, n.subtree_end, n.subtree_tokens_end)
        };
        let (children, subtree_end, ranks_end) = match visit {
            Visit::All => (ChildSlot::ROOT, nodes.len() as u32, token_ids.len() as u32),
            Visit::Below(node) => parent_at(node),
            Visit::Outsiders { .. } => (ChildSlot::NONE, 0, 0),
        };
        // Every step is written before it is read: the path is only grown.
        let mut path = WALK_PATH.with(std::cell::Cell::take);
        let depths = trie.max_depth() + 1 - base;
        if path.len() < depths {
            path.resize(depths, PathStep::default());
        }
        path[0] = PathStep {
            state: start,
            matched: false,
            children,
            subtree_end,
            ranks_end,
        };
        let mut k = first;
        while k < visits {
            let (i, past_subtree) = match visit {
                Visit::All | Visit::Below(_) => (k, nodes[k].subtree_end as usize),
                Visit::Outsiders { order, skip } => {
                    // The nodes to visit are known ahead and lie apart in the
                    // node array (a cache miss apiece, once per process): fetch
                    // them early.
                    #[cfg(target_arch = "x86_64")]
                    if let Some(&ahead) = order.get(k + PREFETCH_OUTSIDERS) {
                        let at = nodes.as_ptr().wrapping_add(ahead as usize);
                        // SAFETY: a prefetch is a hint: it reads nothing and cannot fault.
                        unsafe {
                            std::arch::x86_64::_mm_prefetch(
                                at as *const i8,
                                std::arch::x86_64::_MM_HINT_T0,
                            );
                        }
                    }
                    (order[k] as usize, skip[k] as usize)
                }
            };
            let node = nodes[i];
            let depth = node.depth as usize - base;
            // The path up to the parent: its state, and its children's index.
            let before = path[depth - 1];
            // Entered where the slice's members were set (a closed state, a
            // counter's chain) by bytes of its class (a path with an exit byte
            // has only exit tokens below): without an exit token the subtree
            // holds nothing more (the counter's longer members die on it).
            let exits_only = self
                .class_slice
                .filter(|_| match (self.closed, self.counted) {
                    (Some((closed, _)), _) => closed.get(before.state as usize) == Some(&true),
                    (None, Some((budgets, _))) => budgets.of(before.state) != NO_BUDGET,
                    (None, None) => false,
                });
            // The next sibling that lives and holds an exit token, asked of the
            // parent's index (its children's nodes lie a cache miss apart).
            let next_exit_sibling = |slice: &ClassSlice| {
                trie.next_child_where(
                    before.children,
                    node.byte as usize + 1,
                    before.ranks_end as usize,
                    |b| step(before.state, b) != DEAD,
                    |ranks| slice.has_exit_in(ranks),
                )
                .unwrap_or(before.subtree_end as usize)
            };
            if let Some(slice) = exits_only {
                if !slice.has_exit_in(trie.ranks_under(i)) {
                    // Its siblings likewise: before a match a dead one holds no
                    // boundary. (Past one, the path left the class by an exit
                    // byte, so every token below holds it.)
                    k = match before.children != ChildSlot::NONE && !before.matched {
                        true => next_exit_sibling(slice),
                        false => past_subtree,
                    };
                    continue;
                }
            }
            if let Some((closed, class)) = self.closed {
                let entered_closed = closed.get(before.state as usize) == Some(&true);
                if entered_closed && trie.subtree_bytes(i).within(class) {
                    let ranks = trie.ranks_under(i);
                    self.touch(ranks.clone());
                    if let Some(allowed) = self.allowed.as_deref_mut() {
                        for &id in &token_ids[ranks.clone()] {
                            set(allowed, id);
                        }
                    }
                    set_range(self.allowed_by_rank, shift(ranks, rank_base));
                    k = past_subtree;
                    continue;
                }
            }
            if let Some((budgets, class)) = self.counted {
                // A budget of 0 or 1 allows next to nothing below: the plain walk
                // stops there at once.
                let budget = Some(budgets.of(before.state)).filter(|&b| b >= 2 && b != NO_BUDGET);
                // Lengths count from the token's start: `base + depth - 1` bytes
                // are read before the entry.
                let short =
                    budget.and_then(|b| trie.ranks_up_to_len(base + depth - 1 + b as usize));
                if let Some(short) = short {
                    if trie.subtree_bytes(i).within(class) {
                        self.touch(trie.ranks_under(i));
                        self.take_short_tokens(i, short, before.matched);
                        k = past_subtree;
                        continue;
                    }
                }
            }
            let next = step(before.state, node.byte);
            if next == DEAD {
                // On to the next live sibling, through the parent's index where
                // it has one: the dead ones between hold contiguous ranks.
                let (next_live, dead_ranks) = if before.children == ChildSlot::NONE {
                    (past_subtree, trie.ranks_under(i))
                } else if let Some(slice) = exits_only.filter(|_| !before.matched) {
                    // Nor the live siblings without an exit token (see above).
                    (next_exit_sibling(slice), 0..0)
                } else {
                    let live = |b: u8| step(before.state, b) != DEAD;
                    let from = node.byte as usize + 1;
                    match trie.next_live_child(before.children, from, live) {
                        Some(sibling) => {
                            let between =
                                node.tokens_start as usize..trie.ranks_under(sibling).start;
                            (sibling, between)
                        }
                        None => (
                            before.subtree_end as usize,
                            node.tokens_start as usize..before.ranks_end as usize,
                        ),
                    }
                };
                // Every token below dies here; those past an earlier match may
                // still be completed by the parser.
                if before.matched && !dead_ranks.is_empty() {
                    self.touch(dead_ranks.clone());
                    set_range(self.boundary_by_rank, shift(dead_ranks, rank_base));
                }
                k = next_live;
                continue;
            }
            if node.tokens_end > node.tokens_start {
                self.touch(node.tokens_start as usize..node.tokens_end as usize);
            }
            for rank in node.tokens_start..node.tokens_end {
                if let Some(allowed) = self.allowed.as_deref_mut() {
                    set(allowed, token_ids[rank as usize]);
                }
                set(self.allowed_by_rank, rank - rank_base as u32);
            }
            let at_match = is_match(next);
            let (children, subtree_end, ranks_end) = match outsiders {
                false => parent_at(i),
                true => (ChildSlot::NONE, 0, 0),
            };
            path[depth] = PathStep {
                state: next,
                matched: before.matched || at_match,
                children,
                subtree_end,
                ranks_end,
            };
            if at_match && node.subtree_end as usize > i + 1 {
                if let Some(match_nodes) = self.match_nodes.as_deref_mut() {
                    match_nodes.push(i as u32);
                }
            }
            k += 1;
        }
        WALK_PATH.with(|cell| cell.set(path));
    }
}

#[cfg(test)]
mod tests {
    use super::{set_range, set_ranges};

    #[test]
    fn set_ranges_are_the_runs_of_set_bits() {
        let runs = [(0, 1), (3, 40), (63, 64), (64, 100), (127, 128)];
        let mut bits = vec![0u32; 4];
        for &(a, b) in &runs {
            set_range(&mut bits, a..b);
        }
        // Adjacent runs read as one.
        assert_eq!(
            set_ranges(&bits, 10),
            Some(vec![(0, 1), (3, 40), (63, 100), (127, 128)])
        );
        assert_eq!(set_ranges(&bits, 3), None);
        assert_eq!(set_ranges(&[0, 0], 1), Some(vec![]));
        assert_eq!(set_ranges(&[u32::MAX, u32::MAX], 1), Some(vec![(0, 64)]));
    }
}
