//! How a lexeme's tables are built: the shortcuts tried before a plain walk.
//!
//! In order: a base-minus-excluded-strings lexeme reuses its base's tables; a
//! literal's states walk only the path it spells; a body every text of which
//! keeps the lexeme alive takes a precomputed vocabulary slice in one OR (or,
//! near a counter's end, the slice's tokens short enough); a closed or counted
//! byte class takes its members from a class slice. Whatever is left is walked
//! ([`super::walk`]), skipping the subtrees those answers already cover.

use std::sync::Arc;

use super::closed_class::{Budgets, NO_BUDGET};
use super::lexeme::{LexemeMasks, LexemeScratch};
use super::walk::{walk_lexeme, LexemeWalk, Visit};
use super::{
    MatchNode, TokenTables, MAX_CLASS_SLICE_EXITS, MAX_CONTROL_STATES, MAX_DIFFERING_SHARE,
    MAX_SLICE_STATES, MIN_CLOSED_CLASS_BYTES, MIN_CLOSED_SLICE_BYTES, MIN_COUNTED_SLICE_BUDGET,
    MIN_COUNTED_SLICE_BYTES,
};
use crate::automaton::terminal::{ExcludedRests, Terminal, LOOPED};
use crate::automaton::DEAD;
use crate::automaton::{State, TerminalId};
use crate::bits::ByteSet;
use crate::bits::{clear_bit, clear_range, set_bit};
use crate::vocab::{ClassSlice, SliceChars, SubtreeBytes, TokenSlice};

impl TokenTables {
    /// Walks the vocabulary trie through one lexeme's DFA, skipping dead subtrees,
    /// and, when no text of a slice's characters can kill the lexeme (a looping
    /// string body, a key that may still be any string, a pattern's `.*`), the
    /// subtrees of tokens made only of them (all allowed, taken in one OR).
    pub(super) fn build_lexeme(&self, (terminal, state): (TerminalId, State)) -> LexemeMasks {
        self.build_lexeme_of(self.grammar.terminal(terminal), state)
    }

    pub(super) fn build_lexeme_of(&self, terminal: &Terminal, state: State) -> LexemeMasks {
        // A token terminal reads no byte: its tokens come from its set
        // (`TokenTables::token_set_mask`), not from the trie.
        if terminal.token_set().is_some() {
            return LexemeMasks::sparse(Vec::new(), None);
        }
        if let Some(view) = terminal.excluded_view().filter(|_| state & LOOPED == 0) {
            if let Some((base_state, rests)) = view.at(state) {
                return self.excluded_lexeme(view.base(), base_state, rests);
            }
        }
        let trie = self.vocab.trie();
        if let Some(masks) = self.literal_lexeme(terminal, state) {
            return masks;
        }
        if let Some(masks) = self.lexeme_like_its_loop(terminal, state) {
            return masks;
        }
        let rank_words = trie.token_ids().len().div_ceil(32);
        let mut scratch = LexemeScratch::take(self.mask_words(), rank_words);
        let LexemeScratch {
            allowed,
            allowed_by_rank,
            boundary_by_rank,
        } = &mut scratch;
        let (slice, visit) = self.take_body_slice(terminal, state, allowed, allowed_by_rank);
        let classes = match slice {
            None => self.take_class_slice(terminal, state, allowed, allowed_by_rank),
            Some(_) => ClassShortcuts::default(),
        };
        let class_slice = classes.slice.as_deref().and_then(Option::as_ref);
        let mut match_nodes = Vec::new();
        let mut walk = LexemeWalk {
            trie,
            allowed: Some(allowed),
            allowed_by_rank,
            boundary_by_rank,
            rank_base: 0,
            closed: classes
                .closed
                .as_ref()
                .map(|(class, states)| (&states[..], SubtreeBytes(*class))),
            class_slice,
            counted: classes
                .counted
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

    /// Where every text of a slice's characters keeps the lexeme alive (a
    /// looping string body), the slice's members are allowed: set in
    /// `allowed`/`allowed_by_rank`, and only the nodes outside it are left to
    /// visit. Near a counter's end, the members short enough to fit the count.
    /// Else no slice and every node to visit.
    fn take_body_slice(
        &self,
        terminal: &Terminal,
        state: State,
        allowed: &mut [u32],
        allowed_by_rank: &mut [u32],
    ) -> (Option<&TokenSlice>, Visit<'_>) {
        // A counter dies after its count: a slice only while no token can reach
        // the count's end.
        let horizon = self.vocab.trie().max_depth() as u32;
        // A LOOPED state reads bytes as its plain one until a match (where the
        // terminal may start again): body texts that reach no match read alike
        // from both, so the plain state's slice serves (the second and later
        // items of an array of strings).
        let plain = state & !LOOPED;
        let looped = plain != state;
        let body = SliceChars::ALL.into_iter().find_map(|chars| {
            let non_ascii = chars.non_ascii();
            let reached =
                terminal.body_reach_within(plain, non_ascii, MAX_SLICE_STATES, horizon)?;
            let reaches_a_match =
                || terminal.is_match(plain) || reached.iter().any(|&q| terminal.is_match(q));
            if looped && reaches_a_match() {
                return None;
            }
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
                    terminal.body_dies_on_controls(plain, reached, MAX_CONTROL_STATES)
                });
                let (order, skip) = match past_controls {
                    true => slice.outsider_nodes_past_controls(),
                    false => slice.outsider_nodes(),
                };
                Visit::Outsiders { order, skip }
            }
            None => Visit::All,
        };
        (slice, visit)
    }

    /// Without a body slice: a counted or closed byte class for the walk to
    /// take subtrees by, and where few tokens leave it, its class slice, whose
    /// members are set in `allowed`/`allowed_by_rank` here.
    fn take_class_slice(
        &self,
        terminal: &Terminal,
        state: State,
        allowed: &mut [u32],
        allowed_by_rank: &mut [u32],
    ) -> ClassShortcuts {
        // A counter (`maxLength`, `{1,32}`): a subtree made only of its class is
        // its tokens short enough, taken by length a word of ranks at a time.
        // Tried first: cheap, and where it exists the closed class below would
        // explore every counter state to find nothing. Neither where fewer bytes
        // than a class survive (a key literal's states: asking costs a map as
        // large as the automaton).
        if terminal.live_ascii_count(state) < MIN_CLOSED_CLASS_BYTES {
            return ClassShortcuts::default();
        }
        let max_depth = self.vocab.trie().max_depth();
        let counted = terminal.counted_class(state, MIN_CLOSED_CLASS_BYTES, max_depth);
        // Else a class of bytes no text of which kills the lexeme (`[A-Za-z0-9.-]+`)
        // lets the walk take a subtree made only of it at once. A counter dies
        // after its count: no closed class from its states.
        let mut closed = match counted {
            None if !terminal.counts_at(state) => walk_closed_class(terminal, state),
            _ => None,
        };
        // From a closed class's states only a few bytes outside it may survive (a
        // pattern string's closing quote): its members are allowed at once, and the
        // walk enters only subtrees holding a token that leaves it by such a byte.
        let closed_slice = closed
            .as_mut()
            .filter(|(class, _)| class.count_ones() >= MIN_CLOSED_SLICE_BYTES)
            .and_then(|(class, states)| self.closed_class_slice(terminal, state, *class, states));
        // A counter's class likewise, its members allowed up to the budget: a
        // pattern's `[A-Za-z0-9 &'()*,-./@£]{1,32}` walks the tokens holding a
        // quote or a `£`, not the 80k made of its ASCII bytes.
        let counted_slice = counted.as_ref().and_then(|(class, budgets)| {
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
        let slice = match closed_slice.as_deref().and_then(Option::as_ref) {
            Some(members) => {
                allowed.copy_from_slice(members.members());
                allowed_by_rank.copy_from_slice(members.members_by_rank());
                closed_slice
            }
            None => counted_slice,
        };
        ClassShortcuts {
            closed,
            counted,
            slice,
        }
    }

    /// The class slice of a closed `class` from `state`, whose reached states
    /// are `states`, where some byte outside it survives. Where non-ASCII bytes
    /// survive, the class may hold every non-ASCII character (a key that is any
    /// string without a digit): then only ASCII bytes exit, from the states the
    /// wider class reaches (which replace `states`).
    fn closed_class_slice(
        &self,
        terminal: &Terminal,
        state: State,
        class: u128,
        states: &mut Vec<bool>,
    ) -> Option<Arc<Option<ClassSlice>>> {
        let mut exits = terminal.exit_bytes(class, states);
        let mut non_ascii = None;
        if exits.has_non_ascii() {
            let widened = SliceChars::EVERY.into_iter().find_map(|chars| {
                let states = terminal.closed_class_with(
                    state,
                    class,
                    chars.non_ascii(),
                    MAX_SLICE_STATES,
                )?;
                Some((chars, terminal.ascii_exit_bytes(class, &states), states))
            });
            if let Some((chars, ascii_exits, widened_states)) = widened {
                (non_ascii, exits, *states) = (Some(chars), ascii_exits, widened_states);
            }
        }
        Some(self.class_slice(class, non_ascii, exits))
    }

    /// The tables of a lexeme whose state reads one byte only, and the next
    /// ones likewise (a key literal's rest): the tokens along that path are
    /// allowed, and only below its end is there anything to walk. A large
    /// object's first mask builds one per key, and walking from the root
    /// tested each sibling of each node on the path. `None` where `state`
    /// reads more bytes than one, or tokens go on past a match that continues
    /// (the plain walk tells those).
    pub(super) fn literal_lexeme(&self, terminal: &Terminal, state: State) -> Option<LexemeMasks> {
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
            if !terminal.live_bytes(end).is_empty() {
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
            set_bit(&mut scratch.allowed, token_ids[rank as usize] as usize);
            set_bit(&mut scratch.allowed_by_rank, rank as usize);
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

    /// The tables of a state that reads most first bytes as a looping state
    /// does (free text after a partial match of the text that ends it: after
    /// `<` of `</think>` every byte but `/` goes where it goes from the text's
    /// loop). A token starting with such a byte takes the same path from both
    /// states after that byte, so it fares alike: the loop's tables (built
    /// once, by the body slice) serve for those tokens, and only the subtrees
    /// of the other first bytes are walked. Such a state's first mask was a
    /// walk of the whole vocabulary, and free text meets one at every partial
    /// match. `None` where the state has no such loop or too many tokens start
    /// with a byte read differently.
    fn lexeme_like_its_loop(&self, terminal: &Terminal, state: State) -> Option<LexemeMasks> {
        if state & LOOPED != 0 || terminal.tables().is_none() {
            return None;
        }
        let target = |q: State| most_common_next(terminal, q);
        let lo = target(state).filter(|&r| r != state && target(r) == Some(r))?;
        let trie = self.vocab.trie();
        let token_count = trie.token_ids().len();
        // The first bytes read differently, with their subtrees.
        let mut differing = Vec::new();
        let mut differing_ranks = 0;
        for byte in 0..=u8::MAX {
            if terminal.next(state, byte) == terminal.next(lo, byte) {
                continue;
            }
            if let Some(child) = trie.child_of(None, byte) {
                differing_ranks += trie.ranks_under(child).len();
                differing.push((byte, child));
            }
        }
        if differing_ranks > token_count / MAX_DIFFERING_SHARE {
            return None;
        }
        let of_loop = self.shared_lexeme(terminal.fingerprint(), lo, || {
            self.build_lexeme_of(terminal, lo)
        });
        let token_ids = trie.token_ids();
        let mut scratch = LexemeScratch::take(self.mask_words(), token_count.div_ceil(32));
        of_loop.tokens.add_to(
            token_ids,
            &mut scratch.allowed,
            &mut scratch.allowed_by_rank,
            &mut scratch.boundary_by_rank,
        );
        for &(_, child) in &differing {
            let ranks = trie.ranks_under(child);
            for &id in &token_ids[ranks.clone()] {
                clear_bit(&mut scratch.allowed, id as usize);
            }
            clear_range(&mut scratch.allowed_by_rank, ranks.clone());
            clear_range(&mut scratch.boundary_by_rank, ranks);
        }
        let mut walked_match_nodes = Vec::new();
        let LexemeScratch {
            allowed,
            allowed_by_rank,
            boundary_by_rank,
        } = &mut scratch;
        let mut walk = LexemeWalk {
            trie,
            allowed: Some(allowed),
            allowed_by_rank,
            boundary_by_rank,
            rank_base: 0,
            closed: None,
            class_slice: None,
            counted: None,
            match_nodes: Some(&mut walked_match_nodes),
            touched: 0..0,
        };
        for &(byte, child) in &differing {
            if terminal.next(state, byte) != DEAD {
                walk_lexeme(&mut walk, terminal, Visit::FirstByte(child), state);
            }
        }
        // The loop's match nodes outside the differing subtrees, and the walk's.
        let match_nodes = of_loop.match_nodes.as_ref().map(|nodes| {
            let mut kept: Vec<u32> = nodes
                .iter()
                .map(|at| at.node)
                .filter(|&n| {
                    !differing.iter().any(|&(_, child)| {
                        (child..trie.nodes()[child].subtree_end as usize).contains(&(n as usize))
                    })
                })
                .collect();
            kept.extend(&walked_match_nodes);
            kept.sort_unstable();
            kept
        });
        let masks = LexemeMasks::from_walk(
            trie,
            scratch,
            0..token_count,
            match_nodes.as_deref().unwrap_or(&[]),
        );
        Some(match match_nodes {
            Some(_) => masks,
            None => LexemeMasks {
                match_nodes: None,
                ..masks
            },
        })
    }

    /// The [`ClassSlice`] of `class` (widened by `non_ascii`) with `exits`, from
    /// the shared tables; `None` inside where too many tokens hold an exit.
    pub(super) fn class_slice(
        &self,
        class: u128,
        non_ascii: Option<SliceChars>,
        exits: ByteSet,
    ) -> Arc<Option<ClassSlice>> {
        self.shared.class_slices.get_or_build(
            (self.vocab.id(), class, non_ascii, exits),
            |_, slice| slice.as_ref().map_or(0, ClassSlice::memory_usage),
            || ClassSlice::new(&self.vocab, class, non_ascii, &exits, MAX_CLASS_SLICE_EXITS),
        )
    }

    /// The tables of a base-minus-excluded-strings lexeme (see
    /// [`ExcludedView`](crate::automaton::terminal::ExcludedView)): its base's
    /// (from the shared tables) without the tokens that start with one of `rests`
    /// (they die at its end), nor those tokens' match nodes.
    pub(super) fn excluded_lexeme(
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

/// The state most bytes lead to from `state` (`None` where most die): a
/// loop's own state for itself, the loop for a partial match of the text
/// that ends it.
fn most_common_next(terminal: &Terminal, state: State) -> Option<State> {
    let mut counts: Vec<(State, u32)> = Vec::new();
    for byte in 0..=u8::MAX {
        let next = terminal.next(state, byte);
        match counts.iter_mut().find(|(q, _)| *q == next) {
            Some((_, n)) => *n += 1,
            None => counts.push((next, 1)),
        }
    }
    let (most, _) = counts.into_iter().max_by_key(|&(_, n)| n)?;
    (most != DEAD).then_some(most)
}

/// The [closed class](Terminal::closed_class) of a lexeme state, where it has
/// enough bytes for a walk to test subtrees against it. Asked only where that
/// many bytes survive the state and no counter runs (a key literal's states:
/// asking costs a map as large as the automaton; a counter dies after its
/// count).
pub(super) fn walk_closed_class(terminal: &Terminal, state: State) -> Option<(u128, Vec<bool>)> {
    terminal
        .closed_class(state, MAX_SLICE_STATES)
        .filter(|(class, _)| class.count_ones() >= MIN_CLOSED_CLASS_BYTES)
}

/// What a lexeme's walk may take by byte class ([`TokenTables::build_lexeme_of`]).
#[derive(Default)]
struct ClassShortcuts {
    /// A closed class and the states it reaches.
    closed: Option<(u128, Vec<bool>)>,
    /// A counted class and its budgets.
    counted: Option<(u128, Budgets)>,
    /// The class slice whose members were set; `None` inside where too many
    /// tokens leave the class.
    slice: Option<Arc<Option<ClassSlice>>>,
}
