//! Lexer terminals: one anchored byte DFA per terminal, built with `regex-automata`.
//!
//! The lexer is non-deterministic on purpose: the matcher runs every terminal that
//! the parser could accept next side by side, and a terminal that reaches a match
//! may both end there and keep going. No maximal munch, no priorities, so fusing
//! regular parts of a grammar into terminals never changes the language.
//!
//! The DFAs use `MatchKind::All` (a leftmost-first DFA would drop `ab` after
//! matching `a` in `a|ab`) and are compiled from Thompson NFAs, in which every
//! state can reach the match state; hence a DFA state that is not dead always has a
//! completion, which is what makes "some lexeme is alive" mean "still viable".
//!
//! [`Terminal`] is the one automaton type; its builders live beside it, one per
//! file: from a regex ([`Terminal::build`], here), a literal chained onto a
//! shared automaton (`literal_prefix.rs`), a counted repetition with computed
//! states (`counted.rs`), a base minus excluded strings (`excluding.rs`), the
//! strings several automata all match (`intersection.rs`), the same with one
//! operand a counted repetition whose count stays computed (`counted_product.rs`),
//! a set of whole tokens that reads no byte at all (`tokens.rs`). Every build but
//! the computed ones ends in the same trim and minimisation (`minimize.rs`), and every
//! automaton carries a structural fingerprint (`fingerprint.rs`) under which
//! caches share it. The questions only token tables ask of an automaton (which
//! texts keep a lexeme alive, closed and counted byte classes) live in
//! [`crate::tables`].

use std::sync::Arc;

use regex_automata::dfa::Automaton;

use crate::grammar::dfa::{AnchoredDfa, DfaError};
use crate::grammar::TokenSet;
use regex_syntax::hir::Hir;

mod classes;
mod counted;
mod counted_product;
mod excluding;
mod fingerprint;
mod free_text;
mod intersection;
mod literal_prefix;
mod minimize;
#[cfg(test)]
mod tests;
mod tokens;

use crate::bits::ByteSet;
use classes::{bytes_by_class, only_bytes_of};
use counted::Counter;
pub use free_text::any_utf8;
use minimize::minimize;

pub(crate) use classes::class_bytes;
pub use counted::CounterSpan;
pub use excluding::{ExcludedRests, ExcludedView};
pub(crate) use fingerprint::{concat_fingerprint, fingerprint_of, hir_fingerprint};

/// A state of a terminal's automaton. [`DEAD`] is the state with no completion.
pub type State = u32;

/// The state from which no continuation can match.
pub const DEAD: State = 0;

/// Flag on a state of a *looped* lexeme: the terminal read any number of times in
/// a row (see [`Terminal::step`]). Only the token tables use it.
pub const LOOPED: State = 1 << 31;

/// Why a terminal's automaton could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TerminalError {
    #[error(transparent)]
    Dfa(#[from] DfaError),
    /// The DFA has more reachable states than a state number holds.
    #[error("too many DFA states")]
    TooManyStates,
    /// [`Terminal::counted`]'s preconditions do not hold.
    #[error("{pattern}: {reason}")]
    NotCountable {
        pattern: String,
        reason: &'static str,
    },
    /// A counted or excluding automaton past its size bound.
    #[error("{pattern}: the automaton is too large")]
    TooLarge { pattern: String },
}

/// Size bounds for building terminal automata.
#[derive(Debug, Clone)]
pub struct LexerLimits {
    /// Heap bytes one terminal's NFA may use.
    pub nfa_bytes: usize,
    /// Heap bytes one terminal's DFA may use (and its determinization scratch).
    pub dfa_bytes: usize,
}

impl Default for LexerLimits {
    fn default() -> Self {
        LexerLimits {
            nfa_bytes: 16 << 20,
            dfa_bytes: 8 << 20,
        }
    }
}

/// A terminal of the compiled grammar: a trimmed DFA in a flat table.
///
/// `regex-automata` builds the DFA; it is then re-laid out here with every state
/// that cannot reach a match merged into [`DEAD`]. That matters: a `regex-automata`
/// DFA reports matches one byte late, so after `7 ` the `[0-9]+` DFA sits in a
/// (non-dead) match state for the earlier match, although nothing can follow.
/// After trimming, "not dead" means "some continuation matches", exactly what the
/// matcher needs, and a transition is one table lookup.
#[derive(Clone, Debug)]
pub struct Terminal {
    /// What it stands for in the source grammar (a rule name, or GBNF-like text).
    pub label: String,
    /// The regular expression, as `regex-syntax` prints it.
    pub pattern: String,
    /// Byte to equivalence class.
    classes: [u8; 256],
    /// Number of classes: the row width of `transitions`.
    stride: usize,
    /// `transitions[state * stride + class]`; shared by the clones (a counted
    /// repetition's may take megabytes).
    transitions: Arc<[State]>,
    /// Per state: the bytes so far are a complete match.
    matching: Arc<[bool]>,
    start: State,
    /// Nothing continues a match and the empty string does not match: the terminal
    /// read repeatedly is one automaton (restart after each match).
    loopable: bool,
    /// See [`Terminal::fingerprint`].
    fingerprint: u128,
    /// For a counted repetition built by [`Terminal::counted`]: where its counter
    /// states lie (see [`Terminal::table_state`]).
    counter: Option<Counter>,
    /// For a base minus excluded strings ([`Terminal::excluding`]), how its
    /// states read the base's (see [`ExcludedView`]).
    excluded: Option<Arc<ExcludedView>>,
    /// For a token terminal ([`Terminal::tokens`]): the tokens it reads whole.
    tokens: Option<Arc<TokenSet>>,
    /// Per byte class, its bytes as 256 bits (see [`Terminal::live_bytes`]).
    /// Made with the automaton, so that a grammar's copies of a shared
    /// automaton share it: made on first use, every compile's copy made it
    /// again (a third of a value's first mask).
    class_bytes: Arc<[ByteSet]>,
    /// Per stored row of `transitions`: the one byte it survives where it
    /// survives exactly one (a literal's states), else [`NO_BYTE`]. See
    /// [`Terminal::only_live_byte`].
    only_bytes: Arc<[u16]>,
}

/// In [`Terminal::only_bytes`]: the row survives no byte or several.
const NO_BYTE: u16 = u16::MAX;

/// Borrowed flat tables of a [`Terminal`]'s automaton (see [`Terminal::tables`]).
#[derive(Clone, Copy)]
pub struct DfaTables<'a> {
    pub classes: &'a [u8; 256],
    pub stride: usize,
    pub transitions: &'a [State],
    pub matching: &'a [bool],
}

impl Terminal {
    /// Identifies the automaton (its tables, state numbers included) in the
    /// process, whatever built it: token tables cached across grammars key on it.
    /// A chained terminal's is derived from its literal and its suffix's.
    pub fn fingerprint(&self) -> u128 {
        self.fingerprint
    }

    /// Every match state is final (nothing continues a match).
    fn loopable_body(&self) -> bool {
        // A counter's matches (between iterations, past `min`) continue with
        // another iteration unless at `max`, where only the suffix may follow.
        let counter_final = self
            .counter
            .as_ref()
            .is_none_or(|k| !k.ends || (k.min == k.max && k.entry.iter().all(|&s| s == DEAD)));
        counter_final
            && (0..self.matching.len())
                .filter(|&q| self.matching[q])
                .all(|q| {
                    self.transitions[q * self.stride..(q + 1) * self.stride]
                        .iter()
                        .all(|&r| r == DEAD)
                })
    }

    pub fn build(
        label: String,
        hir: &Hir,
        limits: &LexerLimits,
    ) -> Result<Terminal, TerminalError> {
        let built = AnchoredDfa::build(
            std::slice::from_ref(hir),
            limits.nfa_bytes,
            limits.dfa_bytes,
        )?;
        let (dfa, classes) = (&built.dfa, built.classes);
        let stride = built.representatives.len();
        let (order, raw_transitions) = built
            .reachable(usize::MAX)
            .map_err(|()| TerminalError::TooManyStates)?;
        let matching_raw: Vec<bool> = order
            .iter()
            .map(|&s| dfa.is_match_state(dfa.next_eoi_state(s)))
            .collect();
        Ok(Terminal::trimmed(
            label,
            hir.to_string(),
            classes,
            stride,
            &raw_transitions,
            &matching_raw,
        ))
    }

    /// The terminal of a raw DFA (state 0 the start; the transition on a class is
    /// `raw_transitions[state * stride + class]`): states that cannot reach a
    /// match merged into [`DEAD`], then minimized.
    fn trimmed(
        label: String,
        pattern: String,
        classes: [u8; 256],
        stride: usize,
        raw_transitions: &[u32],
        matching_raw: &[bool],
    ) -> Terminal {
        // Keep the states from which a match is reachable (backwards from matches),
        // predecessors as one array with offsets.
        let n = matching_raw.len();
        let mut offsets = vec![0u32; n + 1];
        for &to in raw_transitions {
            offsets[to as usize + 1] += 1;
        }
        for s in 1..=n {
            offsets[s] += offsets[s - 1];
        }
        let mut predecessors = vec![0u32; raw_transitions.len()];
        let mut fill = offsets.clone();
        for (t, &to) in raw_transitions.iter().enumerate() {
            predecessors[fill[to as usize] as usize] = (t / stride) as u32;
            fill[to as usize] += 1;
        }
        let mut viable = matching_raw.to_vec();
        let mut stack: Vec<u32> = (0..n as u32).filter(|&s| viable[s as usize]).collect();
        while let Some(s) = stack.pop() {
            let (lo, hi) = (offsets[s as usize], offsets[s as usize + 1]);
            for &from in &predecessors[lo as usize..hi as usize] {
                if !viable[from as usize] {
                    viable[from as usize] = true;
                    stack.push(from);
                }
            }
        }

        // Renumber: DEAD = 0, viable states from 1.
        let mut renumber = vec![DEAD; n];
        let mut next_id = 1;
        for s in 0..n {
            if viable[s] {
                renumber[s] = next_id;
                next_id += 1;
            }
        }
        let states = next_id as usize;
        let mut transitions = vec![DEAD; states * stride];
        let mut matching = vec![false; states];
        for s in (0..n).filter(|&s| viable[s]) {
            let new = renumber[s] as usize;
            matching[new] = matching_raw[s];
            for c in 0..stride {
                transitions[new * stride + c] = renumber[raw_transitions[s * stride + c] as usize];
            }
        }
        let (transitions, matching, start) = minimize(stride, &transitions, &matching, renumber[0]);
        let class_bytes = bytes_by_class(&classes, stride);
        let mut terminal = Terminal {
            label,
            pattern,
            classes,
            stride,
            matching: matching.into(),
            start,
            loopable: false,
            fingerprint: 0,
            counter: None,
            excluded: None,
            tokens: None,
            only_bytes: only_bytes_of(&transitions, stride, &class_bytes).into(),
            transitions: transitions.into(),
            class_bytes,
        };
        terminal.loopable = !terminal.matching[start as usize] && terminal.loopable_body();
        terminal.fingerprint = fingerprint_of(&(
            &terminal.classes[..],
            &terminal.transitions,
            &terminal.matching,
            terminal.start,
        ));
        terminal
    }

    /// The state before any byte ([`DEAD`] when the terminal matches nothing).
    #[inline]
    pub fn start(&self) -> State {
        self.start
    }

    /// The automaton as flat tables, for loops that step it millions of times
    /// (a vocabulary walk): `next(q, b) = transitions[q * stride + classes[b]]`,
    /// `matching[q]` for states without [`LOOPED`]. `None` for a counted
    /// repetition (its counter states are computed).
    pub fn tables(&self) -> Option<DfaTables<'_>> {
        self.counter.is_none().then_some(DfaTables {
            classes: &self.classes,
            stride: self.stride,
            transitions: &self.transitions,
            matching: &self.matching,
        })
    }

    #[inline]
    pub fn next(&self, state: State, byte: u8) -> State {
        self.next_by_class(state, self.classes[byte as usize] as usize)
    }

    #[inline]
    fn next_by_class(&self, state: State, class: usize) -> State {
        match &self.counter {
            None => self.transitions[state as usize * self.stride + class],
            Some(k) if k.contains(state) => k.next(state, class, self.stride),
            Some(k) => self.transitions[k.row(state) * self.stride + class],
        }
    }

    /// The bytes `state` does not die on: one transition per byte class, each
    /// class's bytes ORed in (the candidate walk asks this after every boundary
    /// it meets, for every lexeme alive there).
    pub fn live_bytes(&self, state: State) -> ByteSet {
        let mut live = ByteSet::EMPTY;
        for (class, bytes) in self.class_bytes.iter().enumerate() {
            if self.next_by_class(state, class) != DEAD {
                live.union_with(bytes);
            }
        }
        live
    }

    /// How many ASCII bytes below DEL `state` survives: a bound on the size of
    /// any byte class it reads (a key literal's states survive one).
    pub fn live_ascii_count(&self, state: State) -> u32 {
        if state & LOOPED != 0 {
            return (0..0x7Fu8).filter(|&b| self.step(state, b) != DEAD).count() as u32;
        }
        // A step per class, not per byte: asked for each lexeme a table is built
        // for (dozens of key literals in an object's first mask).
        let live = self.live_bytes(state).words();
        live[0].count_ones() + (live[1] & !(1 << 63)).count_ones()
    }

    /// The one byte `state` survives, if it survives exactly one (a literal's
    /// states): looked up, where [`Terminal::live_bytes`] steps every class.
    #[inline]
    pub fn only_live_byte(&self, state: State) -> Option<u8> {
        let row = match &self.counter {
            _ if state & LOOPED != 0 => return None,
            None => state as usize,
            Some(k) if k.contains(state) => return self.live_bytes(state).only(),
            Some(k) => k.row(state),
        };
        let byte = self.only_bytes[row];
        (byte != NO_BYTE).then_some(byte as u8)
    }

    /// No continuation of the bytes fed so far can match.
    #[inline]
    pub fn is_dead(&self, state: State) -> bool {
        state == DEAD
    }

    /// The bytes fed so far are a complete match ([`LOOPED`] states included: a
    /// match there is the end of one more repetition).
    #[inline]
    pub fn is_match(&self, state: State) -> bool {
        let state = state & !LOOPED;
        match &self.counter {
            None => self.matching[state as usize],
            Some(k) if k.contains(state) => k.is_match(state),
            Some(k) => self.matching[k.row(state)],
        }
    }

    /// Whether the terminal can be *looped*: no match is continued by more bytes
    /// and the empty string does not match, so `T T T ...` is read by restarting
    /// at each match (what [`Terminal::step`] does for [`LOOPED`] states).
    pub fn is_loopable(&self) -> bool {
        self.loopable
    }

    /// [`Terminal::next`], also for [`LOOPED`] states (of a loopable terminal): the
    /// bytes read so far are one or more repetitions of the terminal, the last one
    /// possibly partial; after a complete one the next byte starts another.
    #[inline]
    pub fn step(&self, state: State, byte: u8) -> State {
        if state & LOOPED == 0 {
            return self.next(state, byte);
        }
        let q = state & !LOOPED;
        let from = if self.is_match(q) { self.start } else { q };
        match self.next(from, byte) {
            DEAD => DEAD,
            r => r | LOOPED,
        }
    }

    /// Byte to byte class: every transition from a state depends on the byte
    /// only through its class.
    pub fn byte_classes(&self) -> &[u8; 256] {
        &self.classes
    }

    /// The smallest byte of each byte class, ascending: every transition is one
    /// of theirs.
    pub fn class_representatives(&self) -> Vec<u8> {
        let mut seen = [false; 256];
        (0..=255u8)
            .filter(|&b| !std::mem::replace(&mut seen[self.classes[b as usize] as usize], true))
            .collect()
    }

    /// Whether the empty string matches.
    pub fn matches_empty(&self) -> bool {
        self.is_match(self.start)
    }

    /// Number of states, [`DEAD`] included.
    pub fn state_count(&self) -> usize {
        let counted = self
            .counter
            .as_ref()
            .map_or(0, |k| (k.end - k.first) as usize);
        self.matching.len() + counted
    }

    /// Heap bytes held by the automaton.
    pub fn memory_usage(&self) -> usize {
        let counter = self.counter.as_ref().map_or(0, |k| {
            (k.template.len() + k.entry.len()) * std::mem::size_of::<State>()
                + k.accepting.len()
                + k.ticks.as_ref().map_or(0, |t| t.memory_usage())
        });
        self.transitions.len() * std::mem::size_of::<State>()
            + self.matching.len()
            + counter
            + std::mem::size_of_val(&self.class_bytes[..])
            + std::mem::size_of_val(&self.only_bytes[..])
    }

    /// A short human-readable description, from the source grammar.
    pub fn describe(&self) -> String {
        const MAX: usize = 80;
        if self.label.chars().count() <= MAX {
            self.label.clone()
        } else {
            let cut: String = self.label.chars().take(MAX).collect();
            format!("{cut}...")
        }
    }
}

/// The regex tree of `pattern` (bytes mode), for tests.
#[cfg(test)]
pub(crate) fn test_hir(pattern: &str) -> Hir {
    regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(pattern)
        .unwrap()
}

/// The terminal of `pattern` (bytes mode), for tests.
#[cfg(test)]
pub(crate) fn test_terminal(pattern: &str) -> Terminal {
    Terminal::build(pattern.into(), &test_hir(pattern), &LexerLimits::default()).unwrap()
}
