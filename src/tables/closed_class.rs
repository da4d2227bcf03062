//! Closed and counted byte classes: tokens taken by their bytes, not walked.
//!
//! A *closed class* is a set of ASCII bytes no text of which can kill a lexeme
//! from a state (a pattern's `[\w/.:-]+`): every token made only of them is
//! allowed there. A *counted class* is one a chain of states reads as a counter
//! (a `maxLength` string body): such a token is allowed when it fits the
//! remaining [`Budgets`]. With the bytes that leave the class ("exits"), the
//! table walk skips those tokens' subtrees. `Terminal` methods written here
//! because only the token tables ask them.

use super::body::BodyBytes;
use crate::automaton::terminal::{class_bytes, State, Terminal, DEAD, LOOPED};
use crate::bits::ByteSet;

/// Most states of a counted terminal whose suffix may have a closed class
/// (the class's reached states are a flag per state of the terminal).
const MAX_CLOSED_CLASS_MAP: usize = 1 << 16;

/// "Not on the counter" in [`Terminal::counted_class`]'s budgets.
pub const NO_BUDGET: u32 = u32::MAX;

/// A counter's byte budgets by state ([`Terminal::counted_class`]), over the
/// window of states its chain visits.
#[derive(Debug, Clone)]
pub struct Budgets {
    first: State,
    budgets: Vec<u32>,
}

impl Budgets {
    /// The budget of `state`; [`NO_BUDGET`] off the chain.
    #[inline]
    pub(crate) fn of(&self, state: State) -> u32 {
        state
            .checked_sub(self.first)
            .and_then(|offset| self.budgets.get(offset as usize))
            .copied()
            .unwrap_or(NO_BUDGET)
    }

    /// The chain's states that have a budget ([`LOOPED`] left off: inside an
    /// iteration a looped state reads bytes as the plain one).
    pub(super) fn chain(&self) -> impl Iterator<Item = State> + '_ {
        (self.first..)
            .zip(&self.budgets)
            .filter(|&(_, &b)| b != NO_BUDGET)
            .map(|(q, _)| q & !LOOPED)
    }
}

impl Terminal {
    /// A [closed class](Terminal::closed_class) widened by the `non_ascii`
    /// characters: whether every text of the ASCII `class` (bit `b`) and of those
    /// characters keeps a lexeme in `state` alive, with the states such texts
    /// reach (`closed[q]`), as `closed_class` gives them. A key that may be any
    /// string without a digit: its ASCII class leaves out the digits, and every
    /// non-ASCII character goes on.
    pub(crate) fn closed_class_with(
        &self,
        state: State,
        class: u128,
        non_ascii: &[(char, char)],
        limit: usize,
    ) -> Option<Vec<bool>> {
        if !self.may_have_closed_class(state) {
            return None;
        }
        let body = BodyBytes::with_ascii(self.byte_classes(), class, non_ascii);
        let reached = self.reach_alive(state, &body, limit, None)?;
        let mut closed = vec![false; self.state_count()];
        for q in reached {
            closed[q as usize] = true;
        }
        Some(closed)
    }

    /// For a [closed class](Terminal::closed_class) and the states it reaches
    /// (`closed[q]`): the bytes outside the class on which some of those states
    /// survive (bit `b % 64` of word `b / 64`): a token made of the class and then
    /// any other byte dies there. Where one of the states is a match, every byte
    /// outside the class: a token dying past a match may end a lexeme there (free
    /// text that may end anywhere, before a `<`), which the walk must see.
    pub(crate) fn exit_bytes(&self, class: u128, closed: &[bool]) -> ByteSet {
        self.exits_outside(class, false, closed)
    }

    /// [`Terminal::exit_bytes`] for a class [widened](Terminal::closed_class_with)
    /// by non-ASCII characters: only ASCII exits, since a token's non-ASCII bytes
    /// are either those characters or a split or foreign one, which the table
    /// walk reads itself.
    pub(crate) fn ascii_exit_bytes(&self, class: u128, closed: &[bool]) -> ByteSet {
        self.exits_outside(class, true, closed)
    }

    /// For a [counter](Terminal::counted_class): the bytes outside its class on
    /// which some state of its chain survives. A token made of the class and then
    /// any other byte dies there (the chain holds no match, so without a boundary).
    pub(crate) fn counted_exit_bytes(&self, class: u128, budgets: &Budgets) -> ByteSet {
        self.live_outside(class, false, budgets.chain())
    }

    pub(super) fn exits_outside(&self, class: u128, ascii_only: bool, closed: &[bool]) -> ByteSet {
        let states = (0..closed.len()).filter(|&q| closed[q]).map(|q| q as State);
        if states.clone().any(|q| self.is_match(q)) {
            return self.outside(class, ascii_only);
        }
        self.live_outside(class, ascii_only, states)
    }

    /// The bytes outside `class` (and, with `ascii_only`, below 0x80).
    fn outside(&self, class: u128, ascii_only: bool) -> ByteSet {
        let outside = ByteSet::from_ascii_class(class).complement();
        match ascii_only {
            true => outside.intersection(&ByteSet::non_ascii().complement()),
            false => outside,
        }
    }

    /// The bytes outside `class` (and, with `ascii_only`, below 0x80) on which
    /// one of `states` survives.
    pub(super) fn live_outside(
        &self,
        class: u128,
        ascii_only: bool,
        states: impl Iterator<Item = State>,
    ) -> ByteSet {
        let outside = self.outside(class, ascii_only);
        let mut exits = ByteSet::EMPTY;
        for q in states {
            exits.union_with(&self.live_bytes(q).intersection(&outside));
        }
        exits
    }

    /// A counter dies after its count: no closed class there, nor from the
    /// states before it (which reach it). Past it, in its suffix (which never
    /// goes back), a class is worth a map of every state only where the counter
    /// is short: a value's bounded leading blanks before a pattern string.
    pub(super) fn may_have_closed_class(&self, state: State) -> bool {
        state != DEAD
            && state & LOOPED == 0
            && self.counter().is_none_or(|counter| {
                !counter.is_carried()
                    && state >= counter.end
                    && self.state_count() <= MAX_CLOSED_CLASS_MAP
            })
    }

    /// A class of ASCII bytes (DEL excluded; bit `b` of a `u128`) that no text of
    /// them can kill from `state`, with the states such texts reach (`closed[q]`):
    /// from any of those states, every token made only of the class is allowed,
    /// whatever states it passes (a pattern's `[\w/.:-]+`, an email's domain).
    /// Grown greedily: the bytes that loop on `state`, then each other byte whose
    /// addition keeps every reached state alive on every byte of the class (there
    /// is no greatest such class in general: `.` in `example.gov.uk` keeps the
    /// domain going, `@` may be the pattern's any-character before `gov`, but
    /// not both). `None` for an empty class or past `limit` states.
    pub(crate) fn closed_class(&self, state: State, limit: usize) -> Option<(u128, Vec<bool>)> {
        if !self.may_have_closed_class(state) {
            return None;
        }
        // The states texts of the class reach from `state`, all alive on every
        // byte of it. Grown a byte at a time: only the reached states are asked
        // the new byte, and only newly reached ones every byte (asking them all
        // anew per byte was 20-140 us for an identifier's three states).
        let mut class: u128 = (0..0x7fu8)
            .filter(|&b| self.next(state, b) == state)
            .fold(0, |c, b| c | 1 << b);
        let mut seen = vec![false; self.state_count()];
        seen[state as usize] = true;
        let mut reached = vec![state];
        for b in 0..0x7fu8 {
            if class & (1 << b) != 0 || self.next(state, b) == DEAD {
                continue;
            }
            let wider = class | 1 << b;
            let before = reached.len();
            // The reached states on `b`, then the new ones on every byte.
            let mut alive = true;
            let mut k = 0;
            while alive && k < reached.len() {
                let q = reached[k];
                let bytes = match k < before {
                    true => 1 << b,
                    false => wider,
                };
                k += 1;
                for c in class_bytes(bytes) {
                    let r = self.next(q, c);
                    if r == DEAD || reached.len() > limit {
                        alive = false;
                        break;
                    }
                    if !seen[r as usize] {
                        seen[r as usize] = true;
                        reached.push(r);
                    }
                }
            }
            if alive {
                class = wider;
            } else {
                for &q in &reached[before..] {
                    seen[q as usize] = false;
                }
                reached.truncate(before);
            }
        }
        if class == 0 {
            return None;
        }
        Some((class, seen))
    }

    /// A class of ASCII bytes (DEL excluded; bit `b` of a `u128`) that `state`
    /// reads as a counter: every byte of it leads to one common state, not a match,
    /// and so on from there, until every byte of it kills the lexeme. With the
    /// counter's budget per state ([`Budgets::of`]: how many more bytes of the
    /// class it survives; [`NO_BUDGET`] off the chain): from a state with budget `b`, a
    /// token made only of the class is allowed when at most `b` bytes long and dies
    /// without a match otherwise. That is a `maxLength` string body or a counted
    /// class (`[A-Za-z0-9 ]{1,32}`), where [`Terminal::closed_class`] finds nothing
    /// (every text long enough dies). The class may shrink along the chain to the
    /// bytes that keep agreeing; `None` below `min_bytes` bytes or for a chain
    /// that loops. A [`LOOPED`] state's chain is its plain state's, flagged
    /// (`None` from a looped match, which restarts the terminal).
    ///
    /// Tokens are at most `horizon` bytes long: a chain still alive after
    /// `2 * horizon` bytes is followed no further, and its first `horizon + 1`
    /// states get the budget `horizon` (every such token survives them).
    pub(crate) fn counted_class(
        &self,
        state: State,
        min_bytes: u32,
        horizon: usize,
    ) -> Option<(u128, Budgets)> {
        // A LOOPED state reads the terminal repeated: inside one iteration (no
        // match on the chain) that is the plain reading, the flag carried along.
        let looped = state & LOOPED;
        let state = state & !LOOPED;
        if state == DEAD || (looped != 0 && self.is_match(state)) {
            return None;
        }
        let mut class: u128 = (0..0x7fu8).fold(0, |c, b| c | 1 << b);
        let mut chain = vec![state];
        let mut on_chain = rustc_hash::FxHashSet::default();
        on_chain.insert(state);
        let mut cut = false;
        loop {
            let q = *chain.last().expect("the chain starts with `state`");
            // The bytes of the class by the state they lead to.
            let mut groups: Vec<(State, u128)> = Vec::new();
            for b in class_bytes(class) {
                let r = self.next(q, b);
                match groups.iter_mut().find(|(t, _)| *t == r) {
                    Some((_, bytes)) => *bytes |= 1 << b,
                    None => groups.push((r, 1 << b)),
                }
            }
            // Keep the largest group that continues the chain in a state that is
            // not a match, else the group that ends it (DEAD).
            let big_enough = |&(_, bytes): &(State, u128)| bytes.count_ones() >= min_bytes;
            let continuing = groups
                .iter()
                .copied()
                .filter(|&(t, _)| t != DEAD && !self.is_match(t))
                .filter(big_enough)
                .max_by_key(|&(_, bytes)| bytes.count_ones());
            let ending = groups.iter().copied().find(|&(t, _)| t == DEAD);
            let (target, bytes) = continuing.or(ending.filter(big_enough))?;
            // Dying at the first byte is no counter where the state loops (a
            // loop of match states: `[a-z]*`, a key without a digit): its
            // closed class is the shortcut to take. Without a loop (an int64's
            // digits, each a match until the count's end) there is none to
            // find, and exploring the count for it costs more than its walk.
            if target == DEAD && chain.len() == 1 && groups.iter().any(|&(t, _)| t == q) {
                return None;
            }
            class = bytes;
            if target == DEAD {
                break;
            }
            if !on_chain.insert(target) {
                return None;
            }
            chain.push(target);
            if chain.len() > 2 * horizon {
                cut = true;
                break;
            }
        }
        // Only the chain's states have a budget: a window of states, not one
        // entry per state (a long counter has millions).
        let first = chain.iter().copied().min().unwrap_or(DEAD);
        let last = chain.iter().copied().max().unwrap_or(DEAD);
        let mut budgets = vec![NO_BUDGET; (last - first) as usize + 1];
        for (i, &q) in chain.iter().enumerate() {
            budgets[(q - first) as usize] = match cut {
                false => (chain.len() - 1 - i) as u32,
                true if i <= horizon => horizon as u32,
                true => NO_BUDGET,
            };
        }
        let first = first | looped;
        Some((class, Budgets { first, budgets }))
    }
}
