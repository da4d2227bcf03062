//! The lexeme walk: one automaton stepped through the vocabulary trie.
//!
//! Preorder over the trie's nodes with the state after each prefix kept per
//! depth, so a token costs one transition past its parent, and a dead byte
//! skips its whole subtree (and, through the parent's child index, every dead
//! sibling after it). The walk is generic over the step function, so the
//! plain table automaton compiles to a lookup per byte and only looped or
//! counted lexemes pay for their extra tests.

use super::closed_class::{Budgets, NO_BUDGET};
use super::shift;
use crate::automaton::terminal::{Terminal, LOOPED};
use crate::automaton::{State, DEAD};
use crate::bits::{set_bit, set_range};
use crate::vocab::{ChildSlot, ClassSlice, SubtreeBytes, TokenTrie};

/// Runs `walk` through `terminal` from `state`. Specialized loops: the plain
/// automaton is a table lookup per byte; only a LOOPED lexeme pays for the
/// restart test.
pub(super) fn walk_lexeme(
    walk: &mut LexemeWalk<'_>,
    terminal: &Terminal,
    visit: Visit<'_>,
    state: State,
) {
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
pub(super) struct PathStep {
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
pub(super) const PREFETCH_OUTSIDERS: usize = 16;

/// Which trie nodes a lexeme walk visits.
#[derive(Clone, Copy)]
pub(super) enum Visit<'a> {
    All,
    /// The strict descendants of a node, read from its depth on.
    Below(usize),
    /// A child of the root and its descendants: the tokens starting with one
    /// byte, read from the root.
    FirstByte(usize),
    /// Only `order` (preorder node indices); `skip[k]` is the entry past the
    /// subtree of `order[k]`.
    Outsiders {
        order: &'a [u32],
        skip: &'a [u32],
    },
}

/// The outputs of one lexeme's walk over the vocabulary trie.
pub(super) struct LexemeWalk<'a> {
    pub(super) trie: &'a TokenTrie,
    /// By token id, when wanted.
    pub(super) allowed: Option<&'a mut [u32]>,
    /// By rank minus `rank_base` (a multiple of 32: the bits of a window).
    pub(super) allowed_by_rank: &'a mut [u32],
    pub(super) boundary_by_rank: &'a mut [u32],
    pub(super) rank_base: usize,
    /// States from which no text of a byte class kills the lexeme, and the class:
    /// a subtree entered in such a state and made only of the class is allowed.
    pub(super) closed: Option<(&'a [bool], SubtreeBytes)>,
    /// With `closed`, where its states leave the class only by exit bytes: its
    /// members were set before the walk, so a subtree entered in a closed state
    /// without a token leaving by an exit holds nothing more. With `counted`
    /// likewise, for the members short enough for the walk's start.
    pub(super) class_slice: Option<&'a ClassSlice>,
    /// A counter's budget per state and its class ([`Terminal::counted_class`]):
    /// a subtree entered in a state with budget `b` and made only of the class
    /// holds allowed tokens (those at most `b` bytes past the entry) and dead ones.
    pub(super) counted: Option<(&'a Budgets, SubtreeBytes)>,
    /// Where wanted: the visited nodes where the lexeme is alive at a match and
    /// the subtree goes on (see [`LexemeMasks::match_nodes`]).
    pub(super) match_nodes: Option<&'a mut Vec<u32>>,
    /// The ranks (absolute) the walk set bits in may lie in: what the arrays'
    /// reader scans and clears ([`LexemeScratch`]).
    pub(super) touched: std::ops::Range<usize>,
}

impl LexemeWalk<'_> {
    /// Notes that bits of `ranks` may be set (preorder: ranks only grow, but a
    /// subtree taken whole reaches past later nodes' starts).
    #[inline]
    pub(super) fn touch(&mut self, ranks: std::ops::Range<usize>) {
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
    pub(super) fn take_short_tokens(&mut self, node: usize, short: &[u32], matched: bool) {
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
                    set_bit(
                        by_id,
                        token_ids[w * 32 + allowed.trailing_zeros() as usize] as usize,
                    );
                    allowed &= allowed - 1;
                }
            }
        }
    }

    /// Walks the visited nodes in preorder through the automaton (`step`, DEAD when
    /// it dies; `is_match`), skipping the subtree below a dead byte: tokens a state
    /// survives are allowed, tokens below a death after a match are boundaries.
    ///
    /// One long loop on purpose: split into per-step helpers (taking a subtree
    /// whole, skipping dead siblings) it measured slower on Kubernetes's slowest
    /// masks (max time between masks about 17% higher, `stencil bench`).
    #[inline(always)]
    pub(super) fn run(
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
            Visit::FirstByte(node) => (node, nodes[node].subtree_end as usize, 0),
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
            // A dead first byte skips to a live sibling past the subtree:
            // there the visit ends.
            Visit::All | Visit::FirstByte(_) => {
                (ChildSlot::ROOT, nodes.len() as u32, token_ids.len() as u32)
            }
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
                Visit::All | Visit::Below(_) | Visit::FirstByte(_) => {
                    (k, nodes[k].subtree_end as usize)
                }
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
                            set_bit(allowed, id as usize);
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
                    set_bit(allowed, token_ids[rank as usize] as usize);
                }
                set_bit(self.allowed_by_rank, (rank - rank_base as u32) as usize);
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
