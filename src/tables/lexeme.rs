//! One lexeme's tables: the tokens it allows and those it passes a match in.
//!
//! A lexeme (a terminal in a state) is walked over the vocabulary once and its
//! answer kept, shared by every configuration holding it. Most lexemes allow
//! either very many tokens (a string body) or very few (an object key's
//! literal), so the answer is dense bits or lists, whichever is smaller; the
//! walk itself writes into per-thread scratch arrays that are cleared only
//! where it wrote.

use std::sync::Arc;

use super::MatchNode;
use crate::bits::{clear_bit, clear_range, ones, runs, set_bit, set_range};
use crate::vocab::TokenTrie;

/// One lexeme's answers over the vocabulary.
#[derive(Debug)]
pub(super) struct LexemeMasks {
    pub(super) tokens: LexemeTokens,
    /// The trie nodes (ascending) where the lexeme is alive at a match and some
    /// token goes on below: where the candidate walk meets a terminal boundary, so
    /// it can visit these instead of walking the trie. `None` past
    /// [`MAX_MATCH_NODES`] (an identifier matches at every letter).
    pub(super) match_nodes: Option<Arc<[MatchNode]>>,
}

/// Zeroed arrays for a lexeme walk, kept per thread. A lexeme that allows few
/// tokens (an object key's literal) is kept as lists, and the arrays it walked
/// into, cleared where it set bits, serve the next walk: allocating, zeroing and
/// scanning three vocabulary-wide arrays was two thirds of such a lexeme's cost,
/// and a large object's first configuration builds dozens.
pub(super) struct LexemeScratch {
    pub(super) allowed: Vec<u32>,
    pub(super) allowed_by_rank: Vec<u32>,
    pub(super) boundary_by_rank: Vec<u32>,
}

thread_local! {
    static LEXEME_SCRATCH: std::cell::Cell<Option<LexemeScratch>> =
        const { std::cell::Cell::new(None) };
}

impl LexemeScratch {
    /// The thread's arrays if they have these sizes, else new ones.
    pub(super) fn take(mask_words: usize, rank_words: usize) -> LexemeScratch {
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
    pub(super) fn put_back(self) {
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
pub(super) enum LexemeTokens {
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
pub(super) const MAX_SPARSE_TOKENS: usize = 2048;

impl LexemeTokens {
    /// The lists where they are short enough (the arrays go back to the
    /// thread's scratch, cleared), else the arrays. Only the ranks in `touched`
    /// may be set.
    pub(super) fn from_walk(
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
            .then(|| runs(&scratch.boundary_by_rank[words.clone()], MAX_SPARSE_TOKENS))
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
        let mut ranks = Vec::with_capacity(count);
        ranks.extend(ones(&scratch.allowed_by_rank[words.clone()]).map(|i| offset + i as u32));
        let mut scratch = scratch;
        for &rank in &ranks {
            let id = token_ids[rank as usize];
            clear_bit(&mut scratch.allowed, id as usize);
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
    pub(super) fn add_to(
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
                    set_bit(allowed_by_rank, rank as usize);
                    set_bit(allowed, token_ids[rank as usize] as usize);
                }
                for &(start, end) in boundary.iter() {
                    set_range(boundary_by_rank, start as usize..end as usize);
                }
            }
        }
    }

    /// These tokens less the ranks in `removed` (`token_ids` by rank).
    pub(super) fn without(
        &self,
        token_ids: &[u32],
        removed: &[std::ops::Range<usize>],
    ) -> LexemeTokens {
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
                        clear_bit(&mut allowed, id as usize);
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

    pub(super) fn memory_usage(&self) -> usize {
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

impl LexemeMasks {
    /// The tables of a lexeme allowing the tokens at `ranks` (ascending) and,
    /// where it ends at a match with tokens going on, those below `end`.
    pub(super) fn sparse(ranks: Vec<u32>, end: Option<MatchNode>) -> LexemeMasks {
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
    pub(super) fn from_walk(
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

    pub(super) fn memory_usage(&self) -> usize {
        let match_nodes = self.match_nodes.as_ref().map_or(0, |m| m.len());
        self.tokens.memory_usage() + match_nodes * std::mem::size_of::<MatchNode>()
    }
}

/// Most match nodes kept per lexeme (a JSON string body from its start has about
/// 900 over Llama-3; a key literal one or two).
pub(super) const MAX_MATCH_NODES: usize = 1 << 14;
