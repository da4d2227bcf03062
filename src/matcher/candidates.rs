//! The candidate walk: which of a configuration's candidate tokens (those that
//! leave every live lexeme after passing a match, see [`crate::tables`]) the parser
//! accepts.
//!
//! A token's bytes split into what the lexemes alive now read (the lexer's side)
//! and, after some byte where one of them matched, what the parser reads once that
//! terminal ends (the parser's side). Each parse of the token takes exactly one
//! such first boundary, so the token is allowed iff a lexeme survives all of it, or
//! for some boundary the rest of its bytes continues the parse state after the
//! terminals that matched there end. That state depends on which lexemes ended,
//! not on the bytes they read.
//!
//! So the walk steps only DFAs along the trie, and at a boundary:
//! * below a small subtree (`abc"` then `,` or `}`), it queues the rests; at the
//!   end of the level the byte matcher enters each boundary kind's state and
//!   reads the rests of tokens not accepted yet in byte order, sharing prefixes:
//!   a string body ends at ~900 Llama-3 nodes but is followed by ~260 distinct
//!   rests;
//! * below a large one (the space before an identifier), it enters the state after
//!   the boundary once, takes what its lexemes allow below the node from the
//!   tables' cached [subtree masks](crate::tables::TokenTables::subtree_masks), and
//!   walks the same way, one level down, only where they pass a match and die.
//!
//! At the top level the boundaries come from the tables when they list them: each
//! lexeme's match nodes (where it is at a match with tokens below), merged, so the
//! walk visits those instead of the trie. With one active lexeme there is one
//! boundary kind, and a subtree holding none of the bytes that may follow it is
//! skipped whole.
//!
//! A memo of the bytes that may follow each boundary kind skips most boundaries at
//! once (letters after an identifier). Feeding every byte to the Earley matcher
//! instead completed a terminal wherever one matched: after every letter of an
//! identifier, an Earley set per trie node, milliseconds per mask.

use crate::bits::{has_bit, set_bit};
use rustc_hash::FxHashMap;

use super::{ByteSet, Matcher};
use crate::automaton::{State, Terminal, TerminalId};
use crate::tables::{MatchNode, RankSet, TokenTables};
use crate::vocab::Vocabulary;

/// Subtrees below a boundary with at most this many nodes have their rests queued
/// for the matcher; larger ones are walked one level down.
const SMALL_SUBTREE: usize = 24;

/// Most active lexemes whose follow bytes the top level of a walk asks (one
/// parser step each) to skip the subtrees none of them holds (a pattern key's
/// 6,000 Llama-3 candidates past its quote: 20,000 trie nodes visited without, 5
/// with).
const MAX_FOLLOW_LEXEMES: usize = 8;

/// One boundary kind: in the parse state of walk level `level`, these active
/// lexemes ended.
struct Boundary {
    /// The ended lexemes: indices into the level's active lexemes, ascending.
    ended: Box<[u32]>,
    /// Bytes that may follow right after the boundary, once asked.
    first: Option<ByteSet>,
    /// The walk level entered below this boundary, once created.
    below: Option<u32>,
}

/// A walk level: a parse state reached from the mask's by a chain of boundaries.
struct Level {
    /// Boundary kinds met at this level, by the ended lexemes (indices into the
    /// level's active lexemes, ascending).
    kinds: FxHashMap<Box<[u32]>, u32>,
}

/// What a walk reads: the tables (with the vocabulary) and the candidates (by
/// rank) still to decide.
#[derive(Clone, Copy)]
struct Inputs<'a> {
    tables: &'a TokenTables,
    candidates: &'a RankSet,
}

/// Where a boundary is: its kind, the recursion it was met at, and the trie depth
/// of its node.
#[derive(Clone, Copy)]
struct BoundaryAt {
    kind: u32,
    nesting: usize,
    depth: usize,
}

/// A rest to ask the matcher about: (boundary kind, its first 8 bytes big-endian,
/// the token's rank, the boundary's depth).
type Rest = (u32, u64, u32, u32);

/// One recursion's buffers: by depth below its root, the `(active lexeme index,
/// state)` pairs alive, `lexemes[at[d]..at[d + 1]]`; and the queued rests.
#[derive(Default)]
struct Scratch {
    lexemes: Vec<(u32, State)>,
    at: Vec<usize>,
    rests: Vec<Rest>,
}

/// Scratch kept between masks (the per-depth buffers are reused; a boundary over
/// a large subtree and each new boundary kind still allocate a little).
#[derive(Default)]
pub(super) struct CandidateWalk {
    boundaries: Vec<Boundary>,
    levels: Vec<Level>,
    /// By nesting of the recursion.
    stacks: Vec<Scratch>,
    ended: Vec<u32>,
    /// Accepted candidates, bit per rank (cleared after each walk through
    /// `accepted_ranks`, the same ones listed).
    accepted: Vec<u32>,
    accepted_ranks: Vec<u32>,
    /// Where active lexemes are at a match, with the lexeme's index, ascending by
    /// node.
    match_nodes: Vec<(MatchNode, u32)>,
}

impl Clone for CandidateWalk {
    /// Scratch only: a clone starts empty.
    fn clone(&self) -> Self {
        CandidateWalk::default()
    }
}

impl CandidateWalk {
    /// The candidates (by rank in the vocabulary trie) that `matcher` accepts next,
    /// as token ids; `table_lexemes` are its active lexemes' table lexemes
    /// ([`Matcher::table_lexemes`]). The matcher is left as it was.
    pub(super) fn accepted(
        &mut self,
        matcher: &mut Matcher,
        tables: &TokenTables,
        candidates: &RankSet,
        table_lexemes: &[(TerminalId, State)],
    ) -> Vec<u32> {
        let vocab = &**tables.vocab();
        let trie = vocab.trie();
        self.boundaries.clear();
        self.levels.clear();
        self.levels.push(Level {
            kinds: FxHashMap::default(),
        });
        self.accepted.resize(trie.token_ids().len().div_ceil(32), 0);
        self.accepted_ranks.clear();
        let inputs = Inputs { tables, candidates };
        if self.list_match_nodes(matcher, tables, table_lexemes) {
            self.walk_match_nodes(matcher, inputs);
        } else {
            let whole = 0..trie.nodes().len();
            self.walk_level(matcher, inputs, (0, 0), whole, 0);
        }
        for &rank in &self.accepted_ranks {
            self.accepted[rank as usize / 32] = 0;
        }
        self.accepted_ranks
            .iter()
            .map(|&rank| trie.token_ids()[rank as usize])
            .collect()
    }

    /// Lists in `self.match_nodes` where each active lexeme is at a match with
    /// tokens going on below, from the tables (`(node, active lexeme index)`,
    /// ascending), if the tables list them for every lexeme read in its own state.
    /// A LOOPED or canonical counter state's table lists the nodes of another
    /// automaton (the same within a token, but not proven here): those walk the
    /// trie.
    fn list_match_nodes(
        &mut self,
        matcher: &Matcher,
        tables: &TokenTables,
        table_lexemes: &[(TerminalId, State)],
    ) -> bool {
        self.match_nodes.clear();
        for (index, (lexeme, &table_lexeme)) in matcher
            .active_lexemes()
            .iter()
            .zip(table_lexemes)
            .enumerate()
        {
            if table_lexeme.1 != lexeme.state {
                return false;
            }
            let Some(nodes) = tables.match_nodes(table_lexeme) else {
                return false;
            };
            self.match_nodes
                .extend(nodes.iter().map(|&node| (node, index as u32)));
        }
        // Runs already ascending, one per lexeme: the merge sort joins them (and
        // keeps a node's lexemes in index order).
        self.match_nodes.sort_by_key(|(at, _)| at.node);
        true
    }

    /// The top level of the walk where the tables list the match nodes: only the
    /// boundaries there need the parser (a candidate is a token every lexeme
    /// dies in, so none is accepted on the lexer's side at this level).
    fn walk_match_nodes(&mut self, matcher: &mut Matcher, inputs: Inputs<'_>) {
        let mut scratch = self.take_scratch(0);
        scratch.rests.clear();
        let match_nodes = std::mem::take(&mut self.match_nodes);
        // Consecutive nodes mostly end the same lexemes: their kind is looked up
        // once. Compared as bits (of the first 64 lexemes; others look it up).
        let mut last: Option<(u64, u32)> = None;
        let mut k = 0;
        while k < match_nodes.len() {
            let at = match_nodes[k].0;
            self.ended.clear();
            let mut ended_bits = Some(0u64);
            while k < match_nodes.len() && match_nodes[k].0.node == at.node {
                let lexeme = match_nodes[k].1;
                self.ended.push(lexeme);
                ended_bits = ended_bits
                    .zip(1u64.checked_shl(lexeme))
                    .map(|(bits, bit)| bits | bit);
                k += 1;
            }
            let kind = match (last, ended_bits) {
                (Some((bits, kind)), Some(ended)) if bits == ended => kind,
                _ => {
                    let kind = self.boundary_kind(0);
                    last = ended_bits.map(|bits| (bits, kind));
                    kind
                }
            };
            // Most nodes fail on the bytes (after a key's quote only a colon may
            // follow): that test reads no trie node nor candidate set, once the
            // kind's bytes are known. Asking them takes a parser step: not for a
            // node without candidates below.
            let first = match self.boundaries[kind as usize].first {
                Some(first) => first,
                None if !inputs.candidates.any_in(at.below()) => continue,
                None => self.first_bytes(matcher, kind),
            };
            if at.next_bytes.0 & first.as_subtree_bytes().0 == 0
                || !inputs.candidates.any_in(at.below())
            {
                continue;
            }
            let boundary = BoundaryAt {
                kind,
                nesting: 0,
                depth: at.depth as usize,
            };
            let node = at.node as usize;
            self.after_boundary(matcher, inputs, boundary, node, &mut scratch.rests);
        }
        self.match_nodes = match_nodes;
        self.answer_rests(matcher, inputs.tables.vocab(), &mut scratch.rests);
        self.stacks[0] = scratch;
    }

    fn accept(&mut self, rank: usize) {
        if !has_bit(&self.accepted, rank) {
            set_bit(&mut self.accepted, rank);
            self.accepted_ranks.push(rank as u32);
        }
    }

    /// Walks the trie nodes `nodes_range` (a subtree's descendants, or the whole
    /// trie; their paths' first `base` bytes already read) with the lexemes active
    /// in `matcher`, the state of walk level `level` (`nesting` levels below the
    /// mask's).
    fn walk_level(
        &mut self,
        matcher: &mut Matcher,
        inputs: Inputs<'_>,
        (level, nesting): (u32, usize),
        nodes_range: std::ops::Range<usize>,
        base: usize,
    ) {
        let Inputs { tables, candidates } = inputs;
        let vocab = &**tables.vocab();
        let trie = vocab.trie();
        let nodes = trie.nodes();
        let grammar = std::sync::Arc::clone(matcher.grammar());
        let depth_limit = trie.max_depth() + 2 - base;
        let mut scratch = self.take_scratch(nesting);
        let Scratch { lexemes, at, rests } = &mut scratch;
        rests.clear();
        lexemes.clear();
        lexemes.extend(
            matcher
                .active_lexemes()
                .iter()
                .enumerate()
                .map(|(i, lexeme)| (i as u32, lexeme.state)),
        );
        at.clear();
        at.resize(depth_limit, 0);
        at[1] = lexemes.len();
        let follow = self.top_level_follow(matcher, nesting);
        let mut i = nodes_range.start;
        while i < nodes_range.end {
            let node = nodes[i];
            let past_subtree = node.subtree_end as usize;
            let ranks = trie.ranks_under(i);
            if !candidates.any_in(ranks.clone())
                || follow.is_some_and(|f| trie.subtree_bytes(i).0 & f == 0)
            {
                i = past_subtree;
                continue;
            }
            let d = node.depth as usize - base;
            // The lexer's side: the lexemes alive at the parent, one byte on.
            lexemes.truncate(at[d]);
            self.ended.clear();
            for k in at[d - 1]..at[d] {
                let (index, state) = lexemes[k];
                let terminal = grammar.terminal(matcher.active_lexemes()[index as usize].terminal);
                let next = terminal.next(state, node.byte);
                if terminal.is_dead(next) {
                    continue;
                }
                lexemes.push((index, next));
                if terminal.is_match(next) {
                    self.ended.push(index);
                }
            }
            at[d + 1] = lexemes.len();
            let alive = at[d + 1] > at[d];
            if alive {
                for rank in node.tokens_start..node.tokens_end {
                    if candidates.contains(rank as usize) {
                        self.accept(rank as usize);
                    }
                }
            }
            // The parser's side of the tokens below, past this boundary.
            if !self.ended.is_empty() && candidates.any_in(node.tokens_end as usize..ranks.end) {
                let boundary = BoundaryAt {
                    kind: self.boundary_kind(level),
                    nesting,
                    depth: node.depth as usize,
                };
                self.after_boundary(matcher, inputs, boundary, i, rests);
            }
            i = if alive { i + 1 } else { past_subtree };
        }
        self.answer_rests(matcher, vocab, rests);
        self.stacks[nesting] = scratch;
    }

    /// At the top level, the bytes that may follow the end of an active lexeme
    /// (as a [`SubtreeBytes`](crate::vocab::SubtreeBytes) class): a candidate
    /// is accepted only through a boundary whose rest starts with one of them
    /// (no lexeme survives a candidate), so a subtree without any of them holds
    /// none to accept: past a key pattern's letters only a quote may follow.
    fn top_level_follow(&mut self, matcher: &mut Matcher, nesting: usize) -> Option<u128> {
        let lexemes = matcher.active_lexemes().len();
        if nesting != 0 || lexemes > MAX_FOLLOW_LEXEMES {
            return None;
        }
        // With several lexemes, a boundary where some of them end continues each
        // of their parses: what follows it starts with a byte that follows one of
        // them ending alone.
        let mut follow = 0;
        for lexeme in 0..lexemes as u32 {
            self.ended.clear();
            self.ended.push(lexeme);
            let kind = self.boundary_kind(0);
            follow |= self.first_bytes(matcher, kind).as_subtree_bytes().0;
        }
        Some(follow)
    }

    /// Accepts the tokens whose rests (see [`Scratch::rests`]) continue the parse
    /// state past their boundary: per boundary kind, that state is entered once a pass
    /// and the rests are read in byte order, sharing prefixes.
    fn answer_rests(&mut self, matcher: &mut Matcher, vocab: &Vocabulary, rests: &mut [Rest]) {
        let trie = vocab.trie();
        let rest_of = |&(_, _, rank, depth): &Rest| {
            &vocab.token_bytes(trie.token_ids()[rank as usize])[depth as usize..]
        };
        // Any order is correct; byte order (here of the first 8 bytes) shares the
        // most prefixes, and equal rests cost nothing after the first.
        rests.sort_unstable_by_key(|&(kind, key, _, _)| (kind, key));
        let grammar = std::sync::Arc::clone(matcher.grammar());
        // A token has a rest at every boundary in it (after each letter of an
        // identifier that may end there): once accepted, by the walk's lexer
        // side or at another boundary, its other rests are skipped. First
        // without the parser: a lexeme the boundary starts that reads the
        // whole rest accepts it (an identifier's letters, fed to the parser,
        // build an Earley set at every byte).
        let mut entry: Vec<(&Terminal, State)> = Vec::new();
        let mut undecided = 0;
        self.for_each_kind(matcher, rests, |walk, matcher, group| {
            entry.clear();
            entry.extend(
                matcher
                    .active_lexemes()
                    .iter()
                    .map(|lexeme| (grammar.terminal(lexeme.terminal), lexeme.state)),
            );
            for r in group {
                if has_bit(&walk.accepted, r.2 as usize) {
                    continue;
                }
                let rest = rest_of(r);
                let read_whole = |&(terminal, state): &(&Terminal, State)| {
                    rest.iter()
                        .try_fold(state, |q, &b| {
                            let next = terminal.next(q, b);
                            (!terminal.is_dead(next)).then_some(next)
                        })
                        .is_some()
                };
                if entry.iter().any(read_whole) {
                    walk.accept(r.2 as usize);
                } else {
                    undecided += 1;
                }
            }
        });
        if undecided == 0 {
            return;
        }
        // Then the parser, for the tokens not accepted yet.
        let mut consumed: Vec<u8> = Vec::new();
        self.for_each_kind(matcher, rests, |walk, matcher, group| {
            consumed.clear();
            let before = matcher.position();
            for r in group {
                if has_bit(&walk.accepted, r.2 as usize) {
                    continue;
                }
                let rest = rest_of(r);
                let common = consumed
                    .iter()
                    .zip(rest)
                    .take_while(|(a, b)| a == b)
                    .count();
                matcher.rollback(consumed.len() - common);
                consumed.truncate(common);
                let mut viable = true;
                for &b in &rest[common..] {
                    if matcher.consume_byte(b).is_err() {
                        viable = false;
                        break;
                    }
                    consumed.push(b);
                }
                if viable {
                    walk.accept(r.2 as usize);
                }
            }
            matcher.rollback(matcher.position() - before);
        });
    }

    /// Calls `f` with the matcher in each boundary kind's state and that
    /// kind's rests (`rests` sorted by kind), for the kinds with a rest of a
    /// token not accepted yet, leaving the matcher as it was.
    fn for_each_kind(
        &mut self,
        matcher: &mut Matcher,
        rests: &[Rest],
        mut f: impl FnMut(&mut Self, &mut Matcher, &[Rest]),
    ) {
        let mut k = 0;
        while k < rests.len() {
            let kind = rests[k].0;
            let end = k + rests[k..].iter().take_while(|r| r.0 == kind).count();
            if rests[k..end]
                .iter()
                .all(|r| has_bit(&self.accepted, r.2 as usize))
            {
                k = end;
                continue;
            }
            let before = matcher.position();
            if matcher
                .complete_active_lexemes(&self.boundaries[kind as usize].ended)
                .is_ok()
            {
                f(self, matcher, &rests[k..end]);
            }
            matcher.rollback(matcher.position() - before);
            k = end;
        }
    }

    /// Accepts the candidates in `nodes` (the descendants of the node where
    /// `boundary` is) that the parse state past the boundary accepts, or queues
    /// their rests.
    fn after_boundary(
        &mut self,
        matcher: &mut Matcher,
        inputs: Inputs<'_>,
        BoundaryAt {
            kind,
            nesting,
            depth,
        }: BoundaryAt,
        node: usize,
        rests: &mut Vec<Rest>,
    ) {
        let Inputs { tables, candidates } = inputs;
        let vocab = &**tables.vocab();
        let trie = vocab.trie();
        let all = trie.nodes();
        let nodes = node + 1..all[node].subtree_end as usize;
        // Nothing below if no child's byte may follow the boundary: none at all if
        // the subtree holds none of those bytes (letters past an identifier's
        // boundary, where only a quote may follow), else scan the children.
        let first = self.first_bytes(matcher, kind);
        if trie.subtree_bytes(node).0 & first.as_subtree_bytes().0 == 0 {
            return;
        }
        let mut child = nodes.start;
        while child < nodes.end && !first.contains(all[child].byte) {
            child = all[child].subtree_end as usize;
        }
        if child >= nodes.end {
            return;
        }
        if nodes.len() <= SMALL_SUBTREE {
            for node in nodes {
                let n = all[node];
                for rank in n.tokens_start..n.tokens_end {
                    if !candidates.contains(rank as usize) {
                        continue;
                    }
                    let rest = &vocab.token_bytes(trie.token_ids()[rank as usize])[depth..];
                    if first.contains(rest[0]) {
                        // Sorted by the first 8 bytes (see `answer_rests`).
                        let mut prefix = [0u8; 8];
                        let n = rest.len().min(8);
                        prefix[..n].copy_from_slice(&rest[..n]);
                        let key = u64::from_be_bytes(prefix);
                        rests.push((kind, key, rank, depth as u32));
                    }
                }
            }
            return;
        }
        let ended = &self.boundaries[kind as usize].ended;
        if matcher.complete_active_lexemes(ended).is_err() {
            return;
        }
        let below = match self.boundaries[kind as usize].below {
            Some(l) => l,
            None => {
                self.levels.push(Level {
                    kinds: FxHashMap::default(),
                });
                let l = (self.levels.len() - 1) as u32;
                self.boundaries[kind as usize].below = Some(l);
                l
            }
        };
        // The tables say what the lexemes past the boundary allow below the node
        // (cached: the same state recurs, e.g. after every space before a value);
        // the walk goes on only where they pass a match and die.
        let mut configuration = Vec::new();
        matcher.lexer_configuration(&mut configuration);
        let masks = tables.subtree_masks(&configuration, node);
        let ranks = trie.ranks_under(node);
        let (first_word, end_word) = (ranks.start / 32, ranks.end.div_ceil(32));
        let mut rest = Vec::with_capacity(end_word - first_word);
        for w in first_word..end_word {
            let candidates_here = candidates.word(w);
            let mut allowed = candidates_here & masks.allowed.word(w);
            while allowed != 0 {
                self.accept(w * 32 + allowed.trailing_zeros() as usize);
                allowed &= allowed - 1;
            }
            rest.push(candidates_here & masks.boundary.word(w));
        }
        let rest = RankSet::from_window(first_word, rest);
        if !rest.is_empty() {
            let inputs = Inputs {
                candidates: &rest,
                ..inputs
            };
            self.walk_level(matcher, inputs, (below, nesting + 1), nodes, depth);
        }
        matcher.rollback(1);
    }

    /// The bytes that may follow right after boundary `kind`.
    fn first_bytes(&mut self, matcher: &mut Matcher, kind: u32) -> ByteSet {
        let boundary = &mut self.boundaries[kind as usize];
        if let Some(first) = boundary.first {
            return first;
        }
        let first = match matcher.complete_active_lexemes(&boundary.ended) {
            Ok(()) => {
                let first = matcher.allowed_bytes();
                matcher.rollback(1);
                first
            }
            Err(_) => ByteSet::default(),
        };
        boundary.first = Some(first);
        first
    }

    /// The boundary kind of the lexemes in `self.ended` at `level`, added on first
    /// sight.
    fn boundary_kind(&mut self, level: u32) -> u32 {
        if let Some(&kind) = self.levels[level as usize].kinds.get(self.ended.as_slice()) {
            return kind;
        }
        let kind = self.boundaries.len() as u32;
        self.boundaries.push(Boundary {
            ended: self.ended.as_slice().into(),
            first: None,
            below: None,
        });
        self.levels[level as usize]
            .kinds
            .insert(self.ended.as_slice().into(), kind);
        kind
    }

    fn take_scratch(&mut self, nesting: usize) -> Scratch {
        if self.stacks.len() <= nesting {
            self.stacks.resize_with(nesting + 1, Default::default);
        }
        std::mem::take(&mut self.stacks[nesting])
    }
}
