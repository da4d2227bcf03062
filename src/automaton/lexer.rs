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

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use regex_automata::dfa::Automaton;

use crate::grammar::dfa::{AnchoredDfa, DfaError};
use regex_syntax::hir::Hir;

/// A state of a terminal's automaton. [`DEAD`] is the state with no completion.
pub type State = u32;

/// The state from which no continuation can match.
pub const DEAD: State = 0;

/// Flag on a state of a *looped* lexeme: the terminal read any number of times in
/// a row (see [`Terminal::step`]). Only the token tables use it.
pub const LOOPED: State = 1 << 31;

/// "Not on the counter" in [`Terminal::counted_class`]'s budgets.
pub const NO_BUDGET: u32 = u32::MAX;

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
    /// Per byte class, its bytes as 256 bits (see [`Terminal::live_bytes`]).
    /// Made with the automaton, so that a grammar's copies of a shared
    /// automaton share it: made on first use, every compile's copy made it
    /// again (a third of a value's first mask).
    class_bytes: Arc<[[u64; 4]]>,
    /// Per stored row of `transitions`: the one byte it survives where it
    /// survives exactly one (a literal's states), else [`NO_BYTE`]. See
    /// [`Terminal::only_live_byte`].
    only_bytes: Arc<[u16]>,
}

/// In [`Terminal::only_bytes`]: the row survives no byte or several.
const NO_BYTE: u16 = u16::MAX;

/// How a [`Terminal::excluding`] automaton (an object's "any key but the declared
/// ones") reads its base, where that is simple: the base never matches inside an
/// excluded string and ends for good after one (a JSON string's closing quote).
/// Then from each state the automaton is its base state, except that tokens
/// starting with the rest of an excluded string die there: token tables take the
/// base's (shared by every object) and drop those subtrees, instead of walking
/// the vocabulary once per set of declared keys.
#[derive(Debug)]
pub struct ExcludedView {
    base: Arc<Terminal>,
    /// Per state of the excluding automaton: its trie node ([`OFF_TRIE`] past
    /// every excluded string) and base state.
    at: Vec<(u32, State)>,
    /// The excluded strings, sorted, end to end (the `i`-th ends at
    /// `string_ends[i]`): the strings through a trie node are a run of them.
    bytes: Vec<u8>,
    string_ends: Vec<u32>,
    /// Per trie node: its depth, and the run of strings through it.
    runs: Vec<(u32, std::ops::Range<u32>)>,
}

/// [`ExcludedView`]'s trie node for "on no excluded string".
const OFF_TRIE: u32 = u32::MAX;

impl ExcludedView {
    pub fn base(&self) -> &Arc<Terminal> {
        &self.base
    }

    /// For `state`: the base state it reads as, and the rests of the excluded
    /// strings from it (a token starting with one dies at its end). `None` for a
    /// state this view does not cover.
    pub fn at(&self, state: State) -> Option<(State, ExcludedRests<'_>)> {
        let &(node, base_state) = self.at.get(state as usize)?;
        if state == DEAD || base_state == DEAD {
            return None;
        }
        Some((base_state, ExcludedRests { view: self, node }))
    }
}

/// The rests of the excluded strings from one state of an [`ExcludedView`]:
/// past that state's trie node, of the strings through it.
#[derive(Clone, Copy)]
pub struct ExcludedRests<'a> {
    view: &'a ExcludedView,
    node: u32,
}

impl ExcludedRests<'_> {
    /// Calls `visit` with each rest, in sorted order: slices of one buffer (a
    /// large object's key has dozens of rests; a trie walk through a vector
    /// per node, a cache miss apiece, was a sixth of its first mask).
    pub fn for_each(&self, mut visit: impl FnMut(&[u8])) {
        let Some((depth, run)) = self.view.runs.get(self.node as usize) else {
            return;
        };
        let view = self.view;
        for i in run.clone() {
            let start = match i {
                0 => 0,
                i => view.string_ends[i as usize - 1],
            };
            visit(&view.bytes[(start + depth) as usize..view.string_ends[i as usize] as usize]);
        }
    }
}

/// The counter states of a [`Terminal::counted`] automaton, computed rather than
/// stored (a `maxLength: 1000` string would need megabytes of rows): state
/// `first + (c << shift) + i` has completed `c` iterations of the leaf and is
/// between iterations (`i = 0`) or in the leaf's `i`-th state (`i >= 1`, below
/// `per_count`; the numbers from `per_count` to the next count are unused, so a
/// state's count is a shift away). Only `(max, 0)` exists at count `max`; stored
/// states follow.
#[derive(Clone, Debug)]
struct Counter {
    first: State,
    /// One past `(max, 0)`.
    end: State,
    per_count: u32,
    shift: u32,
    min: u32,
    max: u32,
    /// Per `(i, class)`: where the byte leads inside an iteration, relative to the
    /// count's first state (`1 << shift` is the next count, between iterations),
    /// or [`NO_TARGET`].
    template: Arc<[u32]>,
    /// Per class: where the suffix goes from between iterations (count >= min).
    entry: Arc<[State]>,
    /// The suffix matches the empty string: between iterations is then a match
    /// (count >= min).
    ends: bool,
}

/// The geometry of a [`Terminal::counted`] automaton's computed states: state
/// `first + (count << shift) + i`, for `i < per_count` (`i = 0` between
/// iterations), counts up to `max` (only `i = 0` at `max`), below `end`; every
/// other state is stored.
#[derive(Clone, Copy, Debug)]
pub struct CounterSpan {
    pub first: State,
    pub end: State,
    pub shift: u32,
    pub per_count: u32,
    pub min: u32,
    pub max: u32,
}

impl CounterSpan {
    /// The state `i` of an iteration after `count` iterations.
    pub fn state(&self, count: u32, i: u32) -> State {
        self.first + (count << self.shift) + i
    }

    /// `(count, i)` of a state in the span.
    pub fn position(&self, state: State) -> Option<(u32, u32)> {
        (self.first..self.end).contains(&state).then(|| {
            let offset = state - self.first;
            (offset >> self.shift, offset & ((1 << self.shift) - 1))
        })
    }
}

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
    pub fn of(&self, state: State) -> u32 {
        state
            .checked_sub(self.first)
            .and_then(|offset| self.budgets.get(offset as usize))
            .copied()
            .unwrap_or(NO_BUDGET)
    }

    /// The chain's states that have a budget ([`LOOPED`] left off: inside an
    /// iteration a looped state reads bytes as the plain one).
    fn chain(&self) -> impl Iterator<Item = State> + '_ {
        (self.first..)
            .zip(&self.budgets)
            .filter(|&(_, &b)| b != NO_BUDGET)
            .map(|(q, _)| q & !LOOPED)
    }
}

/// "The byte kills the iteration" in [`Counter::template`].
const NO_TARGET: u32 = u32::MAX;

/// Most states a counted automaton may have: state numbers stay clear of
/// [`LOOPED`], and nothing is stored per counter state (shortest completions
/// and byte budgets are computed), so a `maxLength: 65535` string (a million
/// states) is one counted terminal, not a parser counter around a character.
const MAX_COUNTED_STATES: u64 = 1 << 28;

impl Counter {
    #[inline]
    fn contains(&self, state: State) -> bool {
        state >= self.first && state < self.end
    }

    /// `(count, i)` of a counter state.
    #[inline]
    fn position(&self, state: State) -> (u32, u32) {
        let offset = state - self.first;
        (offset >> self.shift, offset & ((1 << self.shift) - 1))
    }

    #[inline]
    fn next(&self, state: State, class: usize, stride: usize) -> State {
        let (count, i) = self.position(state);
        if i >= self.per_count {
            return DEAD;
        }
        let target = self.template[i as usize * stride + class];
        if target != NO_TARGET && count < self.max {
            state - i + target
        } else if i == 0 && count >= self.min {
            self.entry[class]
        } else {
            DEAD
        }
    }

    #[inline]
    fn is_match(&self, state: State) -> bool {
        let (count, i) = self.position(state);
        i == 0 && count >= self.min && self.ends
    }

    /// The stored row of a state outside the counter.
    #[inline]
    fn row(&self, state: State) -> usize {
        if state < self.first {
            state as usize
        } else {
            (state - (self.end - self.first)) as usize
        }
    }

    /// The same counter over refined byte classes (`representatives` of the new
    /// classes, `old_classes` and `old_stride` the counter's).
    fn refined(
        &self,
        old_classes: &[u8; 256],
        old_stride: usize,
        representatives: &[u8],
    ) -> Counter {
        let stride = representatives.len();
        let mut template = vec![NO_TARGET; self.per_count as usize * stride];
        for i in 0..self.per_count as usize {
            for (c, &b) in representatives.iter().enumerate() {
                template[i * stride + c] =
                    self.template[i * old_stride + old_classes[b as usize] as usize];
            }
        }
        let entry: Vec<State> = representatives
            .iter()
            .map(|&b| self.entry[old_classes[b as usize] as usize])
            .collect();
        Counter {
            template: template.into(),
            entry: entry.into(),
            ..self.clone()
        }
    }
}

/// `classes` refined so that every byte `told_apart` is a class of its own, with
/// one representative byte per class (in class order).
fn refine_classes(classes: &[u8; 256], told_apart: impl Fn(u8) -> bool) -> ([u8; 256], Vec<u8>) {
    // A byte told apart is keyed by itself: 256 + b never equals a class.
    classes_by(|b| {
        if told_apart(b) {
            256 + b as u16
        } else {
            classes[b as usize] as u16
        }
    })
}

/// Byte classes that tell bytes apart exactly when their `key`s differ, with one
/// representative byte per class (in class order: a class's number is the rank of
/// its key's first byte). Linear: a chained terminal refines its rest's classes
/// for every literal, thousands of times in a large schema's compile.
fn classes_by(key: impl Fn(u8) -> u16) -> ([u8; 256], Vec<u8>) {
    let mut class_of_key: rustc_hash::FxHashMap<u16, u8> = Default::default();
    let mut refined = [0u8; 256];
    let mut representatives: Vec<u8> = Vec::new();
    for b in 0..=255u8 {
        let class = *class_of_key.entry(key(b)).or_insert_with(|| {
            representatives.push(b);
            (representatives.len() - 1) as u8
        });
        refined[b as usize] = class;
    }
    (refined, representatives)
}

/// Per byte class (of `stride`), its bytes as 256 bits.
fn bytes_by_class(classes: &[u8; 256], stride: usize) -> Arc<[[u64; 4]]> {
    let mut bytes = vec![[0u64; 4]; stride];
    for (b, &class) in classes.iter().enumerate() {
        bytes[class as usize][b >> 6] |= 1 << (b & 63);
    }
    bytes.into()
}

/// Per row of `transitions` (`stride` classes wide, `class_bytes` their bytes):
/// see [`Terminal::only_bytes`].
fn only_bytes_of(transitions: &[State], stride: usize, class_bytes: &[[u64; 4]]) -> Vec<u16> {
    transitions
        .chunks_exact(stride)
        .map(|row| {
            let mut live = [0u64; 4];
            for (_, bytes) in row.iter().zip(class_bytes).filter(|(&to, _)| to != DEAD) {
                for (word, byte_word) in live.iter_mut().zip(bytes) {
                    *word |= byte_word;
                }
            }
            only_byte(&live).map_or(NO_BYTE, u16::from)
        })
        .collect()
}

/// The byte of a set of bytes (bit `b % 64` of word `b / 64`) holding exactly one.
fn only_byte(bytes: &[u64; 4]) -> Option<u8> {
    let one = bytes.iter().map(|w| w.count_ones()).sum::<u32>() == 1;
    let word = bytes.iter().position(|&w| w != 0).filter(|_| one)?;
    Some((word * 64) as u8 + bytes[word].trailing_zeros() as u8)
}

/// The bytes of a class of ASCII bytes below DEL (bit `b` of the `u128`).
fn class_bytes(class: u128) -> impl Iterator<Item = u8> {
    // By set bit, not by byte: a class of one byte is asked once per state
    // and byte of a closed class's growth.
    let mut rest = class & !(1 << 0x7f);
    std::iter::from_fn(move || {
        let byte = (rest != 0).then(|| rest.trailing_zeros() as u8)?;
        rest &= rest - 1;
        Some(byte)
    })
}

/// 128 bits of SipHash over `value` (two differently seeded passes).
pub(crate) fn fingerprint_of(value: &impl std::hash::Hash) -> u128 {
    use std::hash::{DefaultHasher, Hasher};
    let half = |seed: u8| {
        let mut hasher = DefaultHasher::new();
        hasher.write_u8(seed);
        value.hash(&mut hasher);
        hasher.finish() as u128
    };
    (half(0) << 64) | half(1)
}

/// Identifies a regex by its structure (a [`fingerprint_of`] its tree): equal
/// fingerprints, equal languages. The key of the terminals a lowering
/// deduplicates and of the automata shared across compiles; printing the regex
/// as the key cost a tenth of a schema's compile.
pub(crate) fn hir_fingerprint(hir: &Hir) -> u128 {
    let mut tree = Vec::new();
    write_tree(hir, &mut tree);
    fingerprint_of(&tree)
}

/// The fingerprint `Hir::concat(items)` would have, without building it (`items`
/// taken from a concatenation, so already flat).
pub(crate) fn concat_fingerprint(items: &[Hir]) -> u128 {
    match items {
        [] => hir_fingerprint(&Hir::empty()),
        [one] => hir_fingerprint(one),
        many => {
            let mut tree = Vec::new();
            write_concat(many, &mut tree);
            fingerprint_of(&tree)
        }
    }
}

/// Appends `hir`'s tree to `out`, node by node, as bytes: one buffer hashes
/// several times faster than a hasher fed field by field (`Hir` is not `Hash`).
fn write_tree(hir: &Hir, out: &mut Vec<u8>) {
    use regex_syntax::hir::{Class, HirKind};
    let number = |out: &mut Vec<u8>, n: u32| out.extend_from_slice(&n.to_le_bytes());
    match hir.kind() {
        HirKind::Empty => out.push(0),
        HirKind::Literal(literal) => {
            out.push(1);
            number(out, literal.0.len() as u32);
            out.extend_from_slice(&literal.0);
        }
        HirKind::Class(Class::Unicode(class)) => {
            out.push(2);
            number(out, class.ranges().len() as u32);
            for range in class.ranges() {
                number(out, range.start() as u32);
                number(out, range.end() as u32);
            }
        }
        HirKind::Class(Class::Bytes(class)) => {
            out.push(3);
            number(out, class.ranges().len() as u32);
            for range in class.ranges() {
                out.extend_from_slice(&[range.start(), range.end()]);
            }
        }
        HirKind::Look(look) => {
            out.push(4);
            number(out, look.as_repr());
        }
        HirKind::Repetition(repetition) => {
            out.push(5);
            number(out, repetition.min);
            // No maximum: u32::MAX + 1 does not fit, so a flag says which.
            out.push(repetition.max.is_some() as u8);
            number(out, repetition.max.unwrap_or(0));
            out.push(repetition.greedy as u8);
            write_tree(&repetition.sub, out);
        }
        HirKind::Capture(capture) => {
            out.push(6);
            number(out, capture.index);
            let name = capture.name.as_deref().map(str::as_bytes);
            out.push(name.is_some() as u8);
            number(out, name.map_or(0, <[u8]>::len) as u32);
            out.extend_from_slice(name.unwrap_or_default());
            write_tree(&capture.sub, out);
        }
        HirKind::Concat(items) => write_concat(items, out),
        HirKind::Alternation(items) => {
            out.push(8);
            number(out, items.len() as u32);
            for item in items {
                write_tree(item, out);
            }
        }
    }
}

/// Appends a `Concat` of `items` as [`write_tree`] writes one.
fn write_concat(items: &[Hir], out: &mut Vec<u8>) {
    out.push(7);
    out.extend_from_slice(&(items.len() as u32).to_le_bytes());
    for item in items {
        write_tree(item, out);
    }
}

/// Borrowed flat tables of a [`Terminal`]'s automaton (see [`Terminal::tables`]).
#[derive(Clone, Copy)]
pub struct DfaTables<'a> {
    pub classes: &'a [u8; 256],
    pub stride: usize,
    pub transitions: &'a [State],
    pub matching: &'a [bool],
}

impl Terminal {
    /// `literal` followed by `suffix`: a chain of states, one per literal byte, into
    /// a copy of `suffix`'s automaton. The chain is deterministic and ends exactly
    /// where the suffix starts, so no determinization is needed; this is how the
    /// hundreds of `"name": value` terminals of a schema share one value automaton
    /// (a JSON number's is 300 states) instead of each building its own. Classes
    /// are the suffix's, refined so each literal byte is told apart.
    pub fn with_literal_prefix(
        label: String,
        pattern: String,
        literal: &[u8],
        suffix: &Terminal,
    ) -> Terminal {
        let mut in_literal = [false; 256];
        for &b in literal {
            in_literal[b as usize] = true;
        }
        let (classes, representatives) =
            refine_classes(&suffix.classes, |b| in_literal[b as usize]);
        let stride = representatives.len();
        let suffix_states = suffix.state_count();
        // Stored rows: the suffix's (a counter's states are computed), then the
        // chain's.
        let suffix_rows = suffix.matching.len();
        let rows = suffix_rows + literal.len();
        let counter = suffix
            .counter
            .as_ref()
            .map(|k| k.refined(&suffix.classes, suffix.stride, &representatives));
        // A stored row of the suffix is the same row here, read by the new classes.
        let old_class: Vec<usize> = representatives
            .iter()
            .map(|&b| suffix.classes[b as usize] as usize)
            .collect();
        let mut transitions = vec![DEAD; rows * stride];
        for row in 1..suffix_rows {
            let from = &suffix.transitions[row * suffix.stride..(row + 1) * suffix.stride];
            for (to, &c) in transitions[row * stride..(row + 1) * stride]
                .iter_mut()
                .zip(&old_class)
            {
                *to = from[c];
            }
        }
        // Chain state i has read literal[..i]; the last byte enters the suffix.
        for (i, &b) in literal.iter().enumerate() {
            let row = suffix_rows + i;
            let target = if i + 1 == literal.len() {
                suffix.start
            } else {
                (suffix_states + i + 1) as State
            };
            transitions[row * stride + classes[b as usize] as usize] = target;
        }
        let mut matching = suffix.matching.to_vec();
        matching.resize(rows, false);
        let start = if literal.is_empty() {
            suffix.start
        } else {
            suffix_states as State
        };
        let loopable =
            (!literal.is_empty() || !suffix.is_match(suffix.start)) && suffix.loopable_body();
        let class_bytes = bytes_by_class(&classes, stride);
        Terminal {
            label,
            pattern,
            classes,
            stride,
            matching: matching.into(),
            start,
            loopable,
            fingerprint: fingerprint_of(&(literal, suffix.fingerprint)),
            counter,
            // The suffix's states keep their numbers: its view still reads them.
            excluded: suffix.excluded.clone(),
            only_bytes: suffix.only_bytes[..suffix_rows]
                .iter()
                .copied()
                .chain(only_bytes_of(
                    &transitions[suffix_rows * stride..],
                    stride,
                    &class_bytes,
                ))
                .collect(),
            transitions: transitions.into(),
            class_bytes,
        }
    }

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

    /// `leaf{min,max}` then `suffix`, built directly: the states are (count,
    /// leaf state) pairs computed from one stored copy of the leaf's transitions
    /// (`Counter`), then the suffix's stored states. Determinizing the same
    /// regex unrolls the count (a `maxLength: 100` string body took 13.6 ms and a
    /// megabyte); this is the size of the leaf plus the suffix whatever `max`.
    /// Requires a leaf [countable](Terminal::can_count) that far and a suffix
    /// whose first bytes no iteration starts with (so between iterations the next
    /// byte says which one it is); the suffix may be empty.
    pub fn counted(
        pattern: String,
        leaf: &Terminal,
        min: u32,
        max: u32,
        suffix: &Terminal,
    ) -> Result<Terminal, TerminalError> {
        let not_countable = |reason| TerminalError::NotCountable {
            pattern: pattern.clone(),
            reason,
        };
        if !leaf.can_count(max) {
            return Err(not_countable(
                "the repeated part does not loop, or counts too far",
            ));
        }
        if min > max || max == 0 || suffix.start == DEAD {
            return Err(not_countable("nothing to count"));
        }
        let (classes, representatives) = classes_by(|b| {
            u16::from_be_bytes([leaf.classes[b as usize], suffix.classes[b as usize]])
        });
        let stride = representatives.len();
        if leaf.starts_like(suffix) {
            return Err(not_countable("an iteration and the suffix start alike"));
        }
        // Leaf states inside an iteration (not DEAD, not a match: matches are final).
        let inner: Vec<State> = (1..leaf.state_count() as State)
            .filter(|&q| !leaf.is_match(q))
            .collect();
        let mut inner_index = vec![0u32; leaf.state_count()];
        for (i, &q) in inner.iter().enumerate() {
            inner_index[q as usize] = i as u32 + 1;
        }
        let per_count = inner.len() as u32 + 1;
        let shift = per_count.next_power_of_two().trailing_zeros();
        let counter_states = ((max as u64) << shift) + 1;
        if counter_states + suffix.state_count() as u64 > MAX_COUNTED_STATES {
            return Err(TerminalError::TooLarge { pattern });
        }
        let first: State = 1;
        let end = first + counter_states as State;
        // Stored rows: DEAD, then the suffix's states (state `end + s - 1`).
        let suffix_state = |s: State| match s {
            DEAD => DEAD,
            s => end - 1 + s,
        };
        let mut template = vec![NO_TARGET; per_count as usize * stride];
        for i in 0..per_count as usize {
            let q = if i == 0 { leaf.start } else { inner[i - 1] };
            for (c, &b) in representatives.iter().enumerate() {
                template[i * stride + c] = match leaf.next(q, b) {
                    DEAD => NO_TARGET,
                    r if leaf.is_match(r) => 1 << shift,
                    r => inner_index[r as usize],
                };
            }
        }
        let entry: Vec<State> = representatives
            .iter()
            .map(|&b| suffix_state(suffix.next(suffix.start, b)))
            .collect();
        let rows = suffix.state_count();
        let mut transitions = vec![DEAD; rows * stride];
        let mut matching = vec![false; rows];
        for s in 1..rows {
            for (c, &b) in representatives.iter().enumerate() {
                transitions[s * stride + c] = suffix_state(suffix.next(s as State, b));
            }
            matching[s] = suffix.is_match(s as State);
        }
        let counter = Counter {
            first,
            end,
            per_count,
            shift,
            min,
            max,
            template: template.into(),
            entry: entry.into(),
            ends: suffix.is_match(suffix.start),
        };
        let class_bytes = bytes_by_class(&classes, stride);
        let mut terminal = Terminal {
            label: String::new(),
            pattern,
            classes,
            stride,
            matching: matching.into(),
            start: first,
            loopable: false,
            fingerprint: fingerprint_of(&(
                "counted",
                leaf.fingerprint,
                min,
                max,
                suffix.fingerprint,
            )),
            counter: Some(counter),
            excluded: None,
            only_bytes: only_bytes_of(&transitions, stride, &class_bytes).into(),
            transitions: transitions.into(),
            class_bytes,
        };
        terminal.loopable = !terminal.is_match(first) && terminal.loopable_body();
        Ok(terminal)
    }

    /// Whether some byte starts a match of both this terminal and `other` (then
    /// a repetition of this one cannot tell its next iteration from `other`).
    pub fn starts_like(&self, other: &Terminal) -> bool {
        (0..=255u8).any(|b| self.next(self.start, b) != DEAD && other.next(other.start, b) != DEAD)
    }

    /// Where a counted terminal's computed states lie, for tables built over
    /// every state (shortest strings), which must compute those too.
    pub fn counter_span(&self) -> Option<CounterSpan> {
        self.counter.as_ref().map(|k| CounterSpan {
            first: k.first,
            end: k.end,
            shift: k.shift,
            per_count: k.per_count,
            min: k.min,
            max: k.max,
        })
    }

    /// The counter `state` is on, if any.
    fn counter_at(&self, state: State) -> Option<&Counter> {
        self.counter.as_ref().filter(|k| k.contains(state))
    }

    /// Whether [`Terminal::counted`] can repeat this terminal up to `max` times:
    /// it is loopable and the counter's states stay few enough (a bound on the
    /// per-state tables built from it).
    pub fn can_count(&self, max: u32) -> bool {
        let per_count = (self.state_count() as u64).next_power_of_two();
        self.loopable && (max as u64 + 1) * per_count <= MAX_COUNTED_STATES / 2
    }

    /// Whether `state` is on a [`Terminal::counted`] terminal's counter (not in
    /// its literal prefix or its suffix).
    pub fn counts_at(&self, state: State) -> bool {
        self.counter_at(state & !LOOPED).is_some()
    }

    /// The state whose token table serves `state` for tokens of at most `horizon`
    /// bytes: in a counted repetition, every count at least `min` with `horizon`
    /// iterations still to go reads such a token alike (it completes at most one
    /// iteration per byte), so they share the table of count `max - horizon`; so
    /// do counts more than `horizon` iterations below `min`. Inside a
    /// `maxLength: 1000` string that is one table instead of a thousand.
    pub fn table_state(&self, state: State, horizon: u32) -> State {
        let Some(k) = self.counter_at(state) else {
            return state;
        };
        let (count, i) = k.position(state);
        if count >= k.max {
            return state;
        }
        let canonical = if count >= k.min && count.saturating_add(horizon) <= k.max {
            k.max - horizon
        } else if count.saturating_add(horizon) < k.min {
            k.min - horizon - 1
        } else {
            count
        };
        k.first + (canonical << k.shift) + i
    }

    /// The strings of `base` except the `excluded` ones: the product of `base`'s
    /// automaton with a trie of the excluded strings (a state is a trie node, or
    /// "off the trie", beside a `base` state), then trimmed and minimized. No
    /// determinization: linear in the trie's size times the classes. `pattern` is
    /// a description, not a regex (no regex this short says it).
    pub fn excluding(
        label: String,
        base: &Arc<Terminal>,
        excluded: &[Vec<u8>],
        limits: &LexerLimits,
    ) -> Result<Terminal, TerminalError> {
        // The trie: children sorted by byte, whether a string ends at the node,
        // and (for the view) its depth and run of the sorted strings.
        let mut sorted: Vec<&[u8]> = excluded.iter().map(Vec::as_slice).collect();
        sorted.sort_unstable();
        sorted.dedup();
        let mut children: Vec<Vec<(u8, u32)>> = vec![Vec::new()];
        let mut ends = vec![false];
        let mut runs = vec![(0, 0..sorted.len() as u32)];
        for (i, string) in sorted.iter().enumerate() {
            let i = i as u32;
            let mut node = 0usize;
            for (depth, &b) in (1..).zip(*string) {
                node = match children[node].binary_search_by_key(&b, |&(c, _)| c) {
                    Ok(k) => children[node][k].1 as usize,
                    Err(k) => {
                        children.push(Vec::new());
                        ends.push(false);
                        runs.push((depth, i..i));
                        let child = children.len() - 1;
                        children[node].insert(k, (b, child as u32));
                        child
                    }
                };
                runs[node].1.end = i + 1;
            }
            ends[node] = true;
        }
        // Classes: `base`'s, refined so every byte the trie reads is told apart.
        let mut on_trie = [false; 256];
        for node in &children {
            for &(b, _) in node {
                on_trie[b as usize] = true;
            }
        }
        let (classes, representatives) = refine_classes(&base.classes, |b| on_trie[b as usize]);
        let stride = representatives.len();
        // Raw state 0 is the start; a dead base state is one raw sink.
        let mut index: HashMap<(u32, State), u32> = HashMap::default();
        let mut states: Vec<(u32, State)> = vec![(0, base.start)];
        index.insert((0, base.start), 0);
        let mut sink = None;
        let mut raw_transitions: Vec<u32> = Vec::new();
        let mut i = 0;
        while i < states.len() {
            let (node, q) = states[i];
            i += 1;
            for &b in &representatives {
                let next = base.next(q, b);
                let target = if next == DEAD {
                    *sink.get_or_insert_with(|| {
                        states.push((OFF_TRIE, DEAD));
                        (states.len() - 1) as u32
                    })
                } else {
                    let child = match node {
                        OFF_TRIE => OFF_TRIE,
                        n => children[n as usize]
                            .binary_search_by_key(&b, |&(c, _)| c)
                            .map_or(OFF_TRIE, |k| children[n as usize][k].1),
                    };
                    *index.entry((child, next)).or_insert_with(|| {
                        states.push((child, next));
                        (states.len() - 1) as u32
                    })
                };
                raw_transitions.push(target);
            }
            if states.len() * stride * std::mem::size_of::<State>() > limits.dfa_bytes {
                return Err(TerminalError::TooLarge {
                    pattern: format!("({}) except {} strings", base.pattern, excluded.len()),
                });
            }
        }
        let matching_raw: Vec<bool> = states
            .iter()
            .map(|&(node, q)| {
                q != DEAD && base.matching[q as usize] && (node == OFF_TRIE || !ends[node as usize])
            })
            .collect();
        let pattern = format!("({}) except {} strings", base.pattern, excluded.len());
        let mut terminal = Terminal::trimmed(
            label,
            pattern,
            classes,
            stride,
            &raw_transitions,
            &matching_raw,
        );
        if base.counter.is_none() && excluded.iter().all(|s| base.ends_only_after(s)) {
            // Each state's trie node and base state: walk this automaton beside
            // the raw product (whose minimized quotient it is).
            let class_of = |b: u8| terminal.classes[b as usize] as usize;
            let mut at = vec![(OFF_TRIE, DEAD); terminal.matching.len()];
            at[terminal.start as usize] = states[0];
            let mut queue = vec![(terminal.start, 0u32)];
            while let Some((q, raw)) = queue.pop() {
                for &b in &representatives {
                    let next = terminal.next(q, b);
                    if next != DEAD && at[next as usize].1 == DEAD {
                        let raw_next = raw_transitions[raw as usize * stride + class_of(b)];
                        at[next as usize] = states[raw_next as usize];
                        queue.push((next, raw_next));
                    }
                }
            }
            terminal.excluded = Some(Arc::new(ExcludedView {
                base: Arc::clone(base),
                at,
                bytes: sorted.concat(),
                string_ends: sorted
                    .iter()
                    .scan(0, |end, string| {
                        *end += string.len() as u32;
                        Some(*end)
                    })
                    .collect(),
                runs,
            }));
        }
        Ok(terminal)
    }

    /// Whether this automaton never matches inside `text` (from the start) and,
    /// if it matches `text`, nothing follows: an excluded string then only kills
    /// where the base would end (see [`ExcludedView`]).
    fn ends_only_after(&self, text: &[u8]) -> bool {
        let mut q = self.start;
        for (i, &b) in text.iter().enumerate() {
            if i > 0 && self.is_match(q) {
                return false;
            }
            q = self.next(q, b);
            if q == DEAD {
                return true;
            }
        }
        !self.is_match(q) || (0..=255u8).all(|b| self.next(q, b) == DEAD)
    }

    /// See [`ExcludedView`].
    pub fn excluded_view(&self) -> Option<&ExcludedView> {
        self.excluded.as_deref()
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

    /// The bytes `state` does not die on, bit `b % 64` of word `b / 64`: one
    /// transition per byte class, each class's bytes ORed in (the candidate walk
    /// asks this after every boundary it meets, for every lexeme alive there).
    pub fn live_bytes(&self, state: State) -> [u64; 4] {
        let mut bits = [0u64; 4];
        for (class, bytes) in self.class_bytes.iter().enumerate() {
            if self.next_by_class(state, class) != DEAD {
                for (word, byte_word) in bits.iter_mut().zip(bytes) {
                    *word |= byte_word;
                }
            }
        }
        bits
    }

    /// How many ASCII bytes below DEL `state` survives: a bound on the size of
    /// any byte class it reads (a key literal's states survive one).
    pub fn live_ascii_count(&self, state: State) -> u32 {
        if state & LOOPED != 0 {
            return (0..0x7Fu8).filter(|&b| self.step(state, b) != DEAD).count() as u32;
        }
        // A step per class, not per byte: asked for each lexeme a table is built
        // for (dozens of key literals in an object's first mask).
        let live = self.live_bytes(state);
        live[0].count_ones() + (live[1] & !(1 << 63)).count_ones()
    }

    /// The one byte `state` survives, if it survives exactly one (a literal's
    /// states): looked up, where [`Terminal::live_bytes`] steps every class.
    #[inline]
    pub fn only_live_byte(&self, state: State) -> Option<u8> {
        let row = match &self.counter {
            _ if state & LOOPED != 0 => return None,
            None => state as usize,
            Some(k) if k.contains(state) => return only_byte(&self.live_bytes(state)),
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

    /// Appends the state each of `bytes` leads to from `state`, or `None` when one
    /// dies. Consecutive bytes of one class go to the same state: one lookup per run.
    fn step_each(
        &self,
        state: State,
        bytes: impl Iterator<Item = u8>,
        pinned: Option<u32>,
        out: &mut Vec<State>,
    ) -> Option<()> {
        let mut last_class = None;
        for b in bytes {
            let class = self.classes[b as usize];
            if last_class == Some(class) {
                continue;
            }
            last_class = Some(class);
            let r = self.step_pinned(state, b, pinned);
            if r == DEAD {
                return None;
            }
            out.push(r);
        }
        Some(())
    }

    /// The states the bytes of one UTF-8 sequence (per position, one byte per
    /// class) lead to from `state`, sorted and deduplicated, into `current`
    /// (`next` is scratch); `None` when some of them die on the way.
    fn step_sequence(
        &self,
        state: State,
        sequence: &[Vec<u8>],
        pinned: Option<u32>,
        (current, next): (&mut Vec<State>, &mut Vec<State>),
    ) -> Option<()> {
        current.clear();
        current.push(state);
        for bytes in sequence {
            next.clear();
            for &q in current.iter() {
                self.step_each(q, bytes.iter().copied(), pinned, next)?;
            }
            next.sort_unstable();
            next.dedup();
            std::mem::swap(current, next);
        }
        Some(())
    }

    /// The states one body character leads to from `state` (appended to `out`,
    /// sorted and deduplicated), or `None` when some such character dies there
    /// (also midway through its UTF-8 bytes). Body characters: printable ASCII
    /// except `"` and `\`, and the non-ASCII ranges `body` was made for.
    fn body_successors(
        &self,
        state: State,
        body: &BodyBytes,
        pinned: Option<u32>,
        out: &mut Vec<State>,
    ) -> Option<()> {
        out.clear();
        self.step_each(state, body.ascii.iter().copied(), pinned, out)?;
        let mut current: Vec<State> = Vec::new();
        let mut next: Vec<State> = Vec::new();
        for sequence in body.sequences() {
            self.step_sequence(state, sequence, pinned, (&mut current, &mut next))?;
            out.extend_from_slice(&current);
        }
        out.sort_unstable();
        out.dedup();
        Some(())
    }

    /// Whether every text of body characters (printable ASCII except `"` and `\`,
    /// and the `non_ascii` ranges: a slice of [`crate::vocab::SliceChars`]) keeps
    /// a lexeme in `state` alive: then every token made only of them is allowed
    /// from here, whatever states it passes through (a looping string body, but
    /// also a key that may still be any string, or a pattern's `.*` tail).
    /// Explores at most `limit` states; past it the answer is `false`.
    pub fn keeps_body_alive(&self, state: State, non_ascii: &[(char, char)], limit: usize) -> bool {
        self.body_reach_pinned(state, non_ascii, limit, None)
            .is_some()
    }

    /// [`Terminal::keeps_body_alive`] for texts of at most `horizon` bytes, with
    /// the states such texts reach (`state` included) where it holds. On a
    /// counter with at least `horizon` iterations to go, no such text reaches
    /// `max`: the leaf alone decides, so the count is pinned where it is (inside
    /// a long `maxLength` string every token of string characters is allowed, the
    /// slice of a looping body; the states are then the pinned count's). A
    /// character that leaves the counter for the suffix counts as dying (the
    /// answer may only be too cautious).
    pub fn body_reach_within(
        &self,
        state: State,
        non_ascii: &[(char, char)],
        limit: usize,
        horizon: u32,
    ) -> Option<rustc_hash::FxHashSet<State>> {
        match self.counter_at(state) {
            None => self.body_reach_pinned(state, non_ascii, limit, None),
            Some(k) => {
                let (count, _) = k.position(state);
                if count.saturating_add(horizon) > k.max {
                    return None;
                }
                self.body_reach_pinned(state, non_ascii, limit, Some(count))
            }
        }
    }

    /// For the states body texts reach from `state` ([`Terminal::body_reach_within`]):
    /// whether each (none of them a match) dies on every C0 control byte. Then a
    /// token whose first character outside the body is a control dies there,
    /// with no match before it: a JSON string's raw newline, which 3,000 of
    /// Llama-3's tokens hold. `false` past `limit` states, and on a counter (its
    /// states stand for many counts).
    pub fn body_dies_on_controls(
        &self,
        state: State,
        reached: &rustc_hash::FxHashSet<State>,
        limit: usize,
    ) -> bool {
        self.counter_at(state).is_none()
            && reached.len() <= limit
            && reached
                .iter()
                .all(|&q| !self.is_match(q) && (0..0x20u8).all(|b| self.step(q, b) == DEAD))
    }

    /// Near the end of a counted body, where no slice applies (a token may spend
    /// the count): for a counter state between iterations, with a suffix that is
    /// not empty and starts with no body character, where the leaf reads every
    /// body character (printable ASCII but `"` and `\`, and the `non_ascii`
    /// ranges) as exactly one iteration, the iterations left. From there a token
    /// made only of body characters is allowed when it has at most that many
    /// characters and dies without a match otherwise, so token tables take those
    /// tokens by their length instead of walking them (the last characters of a
    /// `maxLength` string each needed a walk of the whole vocabulary).
    ///
    /// In an automaton without a counter (a `maxLength` below the counted
    /// ones), the same for a chain of states: each reads every body character
    /// as one step to the next, none is a match, and the last kills them all.
    pub fn counted_room(&self, state: State, non_ascii: &[(char, char)]) -> Option<u32> {
        let Some(k) = self.counter_at(state) else {
            return self.chain_room(state, non_ascii);
        };
        let (count, i) = k.position(state);
        if i != 0 || k.ends || k.max == 0 {
            return None;
        }
        let next_count = 1 << k.shift;
        let spent = k.first + (k.max << k.shift);
        // The leaf is the same at every count: probe it below `max`.
        let probe = if count < k.max {
            state
        } else {
            spent - next_count
        };
        let body = BodyBytes::new(&self.classes, non_ascii);
        let one_iteration = |q: State| q == probe + next_count;
        if !body
            .ascii
            .iter()
            .all(|&b| one_iteration(self.step(probe, b)))
        {
            return None;
        }
        if body.ascii.iter().any(|&b| self.step(spent, b) != DEAD) {
            return None;
        }
        let mut current: Vec<State> = Vec::new();
        let mut next: Vec<State> = Vec::new();
        for sequence in body.sequences() {
            if sequence[0].iter().any(|&b| self.step(spent, b) != DEAD) {
                return None;
            }
            self.step_sequence(probe, sequence, None, (&mut current, &mut next))?;
            if !current.iter().all(|&q| one_iteration(q)) {
                return None;
            }
        }
        Some(k.max - count)
    }

    /// [`Terminal::counted_room`] off a counter: the body characters left along
    /// a chain of states from `state`.
    fn chain_room(&self, state: State, non_ascii: &[(char, char)]) -> Option<u32> {
        // Most states fail on a few body bytes (a literal's next byte, an
        // object's `{`): answered before the body's bytes are gathered.
        let first = self.step(state, b'a');
        if first == DEAD || b" 0Z~".iter().any(|&b| self.step(state, b) != first) {
            return None;
        }
        let body = BodyBytes::new(&self.classes, non_ascii);
        let mut successors = Vec::new();
        let mut q = state;
        for room in 0..u8::MAX as u32 {
            if q == DEAD || q & LOOPED != 0 || self.is_match(q) {
                return None;
            }
            // The ASCII body bytes first, then the UTF-8 sequences.
            let next = self.step(q, body.ascii[0]);
            if body.ascii.iter().any(|&b| self.step(q, b) != next) {
                return None;
            }
            if next == DEAD {
                // The chain's end, not its start (where the plain walk is
                // cheaper): every body character dies at its first byte.
                let dies = |b: &u8| self.step(q, *b) == DEAD;
                let all_die = body
                    .sequences()
                    .iter()
                    .all(|sequence| sequence[0].iter().all(dies));
                return (all_die && room > 0).then_some(room);
            }
            self.body_successors(q, &body, None, &mut successors)?;
            if successors[..] != [next] || next == q {
                return None;
            }
            q = next;
        }
        None
    }

    /// [`Terminal::step`], with a counter's count held at `pinned` (DEAD when the
    /// byte leaves the counter).
    #[inline]
    fn step_pinned(&self, state: State, byte: u8, pinned: Option<u32>) -> State {
        let r = self.step(state, byte);
        let (Some(count), Some(k)) = (pinned, self.counter.as_ref()) else {
            return r;
        };
        if !k.contains(r) {
            return DEAD;
        }
        let (reached, i) = k.position(r);
        debug_assert!(reached >= count);
        k.first + (count << k.shift) + i
    }

    fn body_reach_pinned(
        &self,
        state: State,
        non_ascii: &[(char, char)],
        limit: usize,
        pinned: Option<u32>,
    ) -> Option<rustc_hash::FxHashSet<State>> {
        if state == DEAD {
            return None;
        }
        // Most lexemes asked (an object's key literals) die on some printable
        // byte at once: a few steps answer them before the body's bytes are
        // gathered (an allocation and a pass over the byte classes).
        if body_ascii().any(|b| self.step(state, b) == DEAD) {
            return None;
        }
        let body = BodyBytes::new(&self.classes, non_ascii);
        self.reach_alive(state, &body, limit, pinned)
    }

    /// A [closed class](Terminal::closed_class) widened by the `non_ascii`
    /// characters: whether every text of the ASCII `class` (bit `b`) and of those
    /// characters keeps a lexeme in `state` alive, with the states such texts
    /// reach (`closed[q]`), as `closed_class` gives them. A key that may be any
    /// string without a digit: its ASCII class leaves out the digits, and every
    /// non-ASCII character goes on.
    pub fn closed_class_with(
        &self,
        state: State,
        class: u128,
        non_ascii: &[(char, char)],
        limit: usize,
    ) -> Option<Vec<bool>> {
        if !self.may_have_closed_class(state) {
            return None;
        }
        let body = BodyBytes::with_ascii(&self.classes, class, non_ascii);
        let reached = self.reach_alive(state, &body, limit, None)?;
        let mut closed = vec![false; self.state_count()];
        for q in reached {
            closed[q as usize] = true;
        }
        Some(closed)
    }

    /// The states texts of `body` reach from `state` (itself included), or
    /// `None` when one of them dies or past `limit` states.
    fn reach_alive(
        &self,
        state: State,
        body: &BodyBytes,
        limit: usize,
        pinned: Option<u32>,
    ) -> Option<rustc_hash::FxHashSet<State>> {
        let mut seen = rustc_hash::FxHashSet::default();
        let mut stack = vec![state];
        let mut successors = Vec::new();
        seen.insert(state);
        while let Some(q) = stack.pop() {
            self.body_successors(q, body, pinned, &mut successors)?;
            for &r in &successors {
                if seen.insert(r) {
                    if seen.len() > limit {
                        return None;
                    }
                    stack.push(r);
                }
            }
        }
        Some(seen)
    }

    /// For a [closed class](Terminal::closed_class) and the states it reaches
    /// (`closed[q]`): the bytes outside the class on which some of those states
    /// survive (bit `b % 64` of word `b / 64`): a token made of the class and then
    /// any other byte dies there. `None` when one of the states is a match: a
    /// token dying past it may end a lexeme there, which the walk must see.
    pub fn exit_bytes(&self, class: u128, closed: &[bool]) -> Option<[u64; 4]> {
        self.exits_outside(class, false, closed)
    }

    /// [`Terminal::exit_bytes`] for a class [widened](Terminal::closed_class_with)
    /// by non-ASCII characters: only ASCII exits, since a token's non-ASCII bytes
    /// are either those characters or a split or foreign one, which the table
    /// walk reads itself.
    pub fn ascii_exit_bytes(&self, class: u128, closed: &[bool]) -> Option<[u64; 4]> {
        self.exits_outside(class, true, closed)
    }

    /// For a [counter](Terminal::counted_class): the bytes outside its class on
    /// which some state of its chain survives. A token made of the class and then
    /// any other byte dies there (the chain holds no match, so without a boundary).
    pub fn counted_exit_bytes(&self, class: u128, budgets: &Budgets) -> [u64; 4] {
        self.live_outside(class, false, budgets.chain())
    }

    fn exits_outside(&self, class: u128, ascii_only: bool, closed: &[bool]) -> Option<[u64; 4]> {
        let states = (0..closed.len()).filter(|&q| closed[q]).map(|q| q as State);
        if states.clone().any(|q| self.is_match(q)) {
            return None;
        }
        Some(self.live_outside(class, ascii_only, states))
    }

    /// The bytes outside `class` (and, with `ascii_only`, below 0x80) on which
    /// one of `states` survives.
    fn live_outside(
        &self,
        class: u128,
        ascii_only: bool,
        states: impl Iterator<Item = State>,
    ) -> [u64; 4] {
        let beyond_ascii = if ascii_only { 0 } else { !0 };
        let outside = [
            !(class as u64),
            !((class >> 64) as u64),
            beyond_ascii,
            beyond_ascii,
        ];
        let mut exits = [0u64; 4];
        for q in states {
            for ((exit, live), outside) in exits.iter_mut().zip(self.live_bytes(q)).zip(outside) {
                *exit |= live & outside;
            }
        }
        exits
    }

    /// A counter dies after its count: no closed class there, nor from the
    /// states before it (which reach it); past it, in its suffix, a class is
    /// rarely worth a map as large as the counter.
    fn may_have_closed_class(&self, state: State) -> bool {
        state != DEAD && state & LOOPED == 0 && self.counter.is_none()
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
    pub fn closed_class(&self, state: State, limit: usize) -> Option<(u128, Vec<bool>)> {
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
    pub fn counted_class(
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

/// Merges equivalent states (Hopcroft's partition refinement over blocks), keeping
/// [`DEAD`] = 0 and numbering the others by their first state.
///
/// `regex-automata` DFAs are not minimal for this matcher's semantics: a state
/// reached by a completed match and the same position reached otherwise differ
/// there (its matches are reported one byte late), and alternatives that end in
/// different NFA states but continue alike stay apart. Merged, the string body of
/// `(char | escape)*` is one state that loops on every character (which the token
/// tables take in one OR), and equivalent positions share one token table.
fn minimize(
    stride: usize,
    transitions: &[State],
    matching: &[bool],
    start: State,
) -> (Vec<State>, Vec<bool>, State) {
    let n = matching.len();
    // Predecessors by (target, class), as one array with offsets.
    let mut offsets = vec![0u32; n * stride + 1];
    for (i, &to) in transitions.iter().enumerate() {
        offsets[to as usize * stride + i % stride + 1] += 1;
    }
    for i in 1..offsets.len() {
        offsets[i] += offsets[i - 1];
    }
    let mut sources = vec![0u32; transitions.len()];
    let mut fill = offsets.clone();
    for (i, &to) in transitions.iter().enumerate() {
        let key = to as usize * stride + i % stride;
        sources[fill[key] as usize] = (i / stride) as u32;
        fill[key] += 1;
    }

    // Blocks are ranges of `elems`; `marked` counts the marked states moved to the
    // front of their block.
    struct Block {
        start: u32,
        end: u32,
        marked: u32,
        in_work: bool,
    }
    let mut elems: Vec<u32> = (0..n as u32).collect();
    elems.sort_by_key(|&q| matching[q as usize]);
    let split_at = elems.partition_point(|&q| !matching[q as usize]) as u32;
    let mut blocks: Vec<Block> = Vec::new();
    let mut block_of = vec![0u32; n];
    for (lo, hi) in [(0, split_at), (split_at, n as u32)] {
        if lo < hi {
            for &q in &elems[lo as usize..hi as usize] {
                block_of[q as usize] = blocks.len() as u32;
            }
            blocks.push(Block {
                start: lo,
                end: hi,
                marked: 0,
                in_work: true,
            });
        }
    }
    let mut location = vec![0u32; n];
    for (i, &q) in elems.iter().enumerate() {
        location[q as usize] = i as u32;
    }
    let mut work: Vec<u32> = (0..blocks.len() as u32).collect();
    let mut splitter: Vec<u32> = Vec::new();
    let mut touched: Vec<u32> = Vec::new();
    while let Some(b) = work.pop() {
        blocks[b as usize].in_work = false;
        splitter.clear();
        let block = &blocks[b as usize];
        splitter.extend_from_slice(&elems[block.start as usize..block.end as usize]);
        for class in 0..stride {
            touched.clear();
            for &q in &splitter {
                let key = q as usize * stride + class;
                for &p in &sources[offsets[key] as usize..offsets[key + 1] as usize] {
                    let y = block_of[p as usize] as usize;
                    let block = &mut blocks[y];
                    let at = location[p as usize];
                    if at < block.start + block.marked {
                        continue; // already marked
                    }
                    if block.marked == 0 {
                        touched.push(y as u32);
                    }
                    let swap_at = block.start + block.marked;
                    let other = elems[swap_at as usize];
                    elems.swap(at as usize, swap_at as usize);
                    location[other as usize] = at;
                    location[p as usize] = swap_at;
                    block.marked += 1;
                }
            }
            for &y in &touched {
                let (start, end, marked, in_work) = {
                    let block = &mut blocks[y as usize];
                    let info = (block.start, block.end, block.marked, block.in_work);
                    block.marked = 0;
                    info
                };
                if marked == end - start {
                    continue;
                }
                // Split: the marked front becomes a new block.
                let new = blocks.len() as u32;
                blocks[y as usize].start = start + marked;
                blocks.push(Block {
                    start,
                    end: start + marked,
                    marked: 0,
                    in_work: false,
                });
                for &q in &elems[start as usize..(start + marked) as usize] {
                    block_of[q as usize] = new;
                }
                let rest = end - start - marked;
                let pick = if in_work || marked <= rest { new } else { y };
                if in_work {
                    blocks[new as usize].in_work = true;
                    work.push(new);
                } else {
                    blocks[pick as usize].in_work = true;
                    work.push(pick);
                }
            }
        }
    }

    // Renumber: DEAD's block is 0, the others by their first state.
    let mut number = vec![u32::MAX; blocks.len()];
    let mut count = 0u32;
    for &b in &block_of {
        let b = b as usize;
        if number[b] == u32::MAX {
            number[b] = count;
            count += 1;
        }
    }
    debug_assert_eq!(number[block_of[DEAD as usize] as usize], DEAD);
    let states = count as usize;
    let mut out = vec![DEAD; states * stride];
    let mut out_matching = vec![false; states];
    for q in 0..n {
        let new = number[block_of[q] as usize] as usize;
        out_matching[new] = matching[q];
        for c in 0..stride {
            out[new * stride + c] = number[block_of[transitions[q * stride + c] as usize] as usize];
        }
    }
    (out, out_matching, number[block_of[start as usize] as usize])
}

/// The bytes of string-body characters one automaton's exploration steps: one
/// byte per byte class (the others lead where it does), for the printable ASCII
/// characters and for each position of each UTF-8 sequence of the non-ASCII
/// ranges. Built once per exploration instead of once per state; the non-ASCII
/// part only when an exploration gets past the ASCII bytes (most lexemes die on
/// one of those at once: a key literal on every letter but its next).
struct BodyBytes<'a> {
    classes: &'a [u8; 256],
    non_ascii: &'a [(char, char)],
    ascii: Vec<u8>,
    /// Per UTF-8 sequence, per byte position: the bytes to step.
    sequences: std::cell::OnceCell<Vec<Vec<Vec<u8>>>>,
}

impl<'a> BodyBytes<'a> {
    fn new(classes: &'a [u8; 256], non_ascii: &'a [(char, char)]) -> BodyBytes<'a> {
        let body = body_ascii().fold(0u128, |set, b| set | 1 << b);
        Self::with_ascii(classes, body, non_ascii)
    }

    /// With the ASCII bytes of `ascii` (bit `b`) instead of the printable ones.
    fn with_ascii(
        classes: &'a [u8; 256],
        ascii: u128,
        non_ascii: &'a [(char, char)],
    ) -> BodyBytes<'a> {
        let ascii =
            Self::representatives(classes, &mut (0..0x80u8).filter(|&b| ascii >> b & 1 != 0));
        BodyBytes {
            classes,
            non_ascii,
            ascii,
            sequences: std::cell::OnceCell::new(),
        }
    }

    fn representatives(classes: &[u8; 256], bytes: &mut dyn Iterator<Item = u8>) -> Vec<u8> {
        let mut seen = [false; 256];
        bytes
            .filter(|&b| !std::mem::replace(&mut seen[classes[b as usize] as usize], true))
            .collect()
    }

    fn sequences(&self) -> &[Vec<Vec<u8>>] {
        self.sequences.get_or_init(|| {
            self.non_ascii
                .iter()
                .flat_map(|&(lo, hi)| regex_syntax::utf8::Utf8Sequences::new(lo, hi))
                .map(|sequence| {
                    sequence
                        .as_slice()
                        .iter()
                        .map(|range| {
                            Self::representatives(self.classes, &mut (range.start..=range.end))
                        })
                        .collect()
                })
                .collect()
        })
    }
}

/// The ASCII characters of a JSON string body: printable, but `"` and `\`.
fn body_ascii() -> impl Iterator<Item = u8> {
    (0x20u8..0x7f).filter(|&b| b != b'"' && b != b'\\')
}

/// The terminal of `pattern` (bytes mode), for tests.
#[cfg(test)]
pub(crate) fn test_terminal(pattern: &str) -> Terminal {
    let hir = regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(pattern)
        .unwrap();
    Terminal::build(pattern.into(), &hir, &LexerLimits::default()).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::test_terminal as terminal;

    fn accepts(t: &Terminal, bytes: &[u8]) -> bool {
        t.is_match(bytes.iter().fold(t.start(), |q, &b| t.next(q, b)))
    }

    const ALL: &[(char, char)] = &[('\u{80}', char::MAX)];

    /// Every string over `alphabet` up to `len` bytes.
    fn strings_up_to(alphabet: &[u8], len: usize) -> Vec<Vec<u8>> {
        let mut all: Vec<Vec<u8>> = vec![Vec::new()];
        let mut last = all.clone();
        for _ in 0..len {
            last = last
                .iter()
                .flat_map(|s| {
                    alphabet.iter().map(move |&b| {
                        let mut longer = s.clone();
                        longer.push(b);
                        longer
                    })
                })
                .collect();
            all.extend(last.iter().cloned());
        }
        all
    }

    fn counted(leaf: &str, min: u32, max: u32, suffix: &str) -> Result<Terminal, TerminalError> {
        Terminal::counted(String::new(), &terminal(leaf), min, max, &terminal(suffix))
    }

    #[test]
    fn counted_repetitions_are_the_unrolled_regex() {
        // Same verdicts and liveness as the regex on every string of up to 7
        // bytes; escapes and multi-byte leaves, an empty suffix, min = max.
        for (leaf, min, max, suffix, alphabet) in [
            ("[a-c]|\\\\[nu]", 0, 8, "\"", &b"ab\\nu\"x"[..]),
            ("[a-c]|\\\\[nu]", 2, 9, "\",?", &b"a\\u\","[..]),
            ("ab|c", 1, 8, "", &b"abcx"[..]),
            ("x", 8, 8, "y+", &b"xy"[..]),
        ] {
            let whole = terminal(&format!("(?:{leaf}){{{min},{max}}}{suffix}"));
            let built = counted(leaf, min, max, suffix).unwrap();
            assert_eq!(whole.is_loopable(), built.is_loopable(), "{leaf}");
            for s in strings_up_to(alphabet, 7) {
                let end = |t: &Terminal| s.iter().fold(t.start(), |q, &b| t.next(q, b));
                let (a, b) = (end(&whole), end(&built));
                assert_eq!(
                    a == DEAD,
                    b == DEAD,
                    "{leaf}{{{min},{max}}}{suffix} alive after {s:?}"
                );
                assert_eq!(whole.is_match(a), built.is_match(b), "{leaf} matches {s:?}");
            }
        }
        // An iteration and the suffix may not start alike; the leaf must loop.
        assert!(counted("a", 0, 8, "a").is_err());
        assert!(counted("a+", 0, 8, "b").is_err());
    }

    #[test]
    fn counts_far_from_the_bounds_share_a_table_state() {
        // From a state and from its table state, every text of at most `horizon`
        // bytes is alive and matches alike; the count goes from 0 to max.
        let t = counted("[a-c]|\\\\n", 5, 20, "\"").unwrap();
        let horizon = 4;
        let texts = strings_up_to(b"ab\\n\"", horizon as usize);
        let mut states = vec![t.start()];
        let mut shared = 0;
        for _ in 0..22 {
            let q = *states.last().unwrap();
            let canonical = t.table_state(q, horizon);
            shared += usize::from(canonical != q);
            for text in &texts {
                let run = |mut q: State| {
                    text.iter()
                        .map(|&b| {
                            q = t.next(q, b);
                            (q == DEAD, t.is_match(q))
                        })
                        .collect::<Vec<_>>()
                };
                assert_eq!(
                    run(q),
                    run(canonical),
                    "from {q} vs {canonical} on {text:?}"
                );
            }
            states.push(t.next(q, b'a'));
        }
        assert!(shared >= 10, "{shared} states shared a table");
        // Inside an escape too.
        let escape = b"aaaaaa\\".iter().fold(t.start(), |q, &b| t.next(q, b));
        assert_ne!(t.table_state(escape, horizon), escape);
    }

    #[test]
    fn fingerprints_name_the_tables_whatever_built_them() {
        // Two builds, one fingerprint; another automaton, another. (The same
        // language with other byte classes, `ab|ac` and `a[bc]`, may get another:
        // less sharing, never a wrong one.)
        assert_eq!(
            terminal("ab|ac").fingerprint(),
            terminal("ab|ac").fingerprint()
        );
        assert_ne!(
            terminal("ab|ac").fingerprint(),
            terminal("ab|ad").fingerprint()
        );
        let rest = terminal("[0-9]+");
        let chained = |literal: &[u8]| {
            Terminal::with_literal_prefix(String::new(), String::new(), literal, &rest)
                .fingerprint()
        };
        assert_eq!(chained(b"a:"), chained(b"a:"));
        assert_ne!(chained(b"a:"), chained(b"b:"));
        assert_ne!(chained(b"a:"), rest.fingerprint());
        let base = Arc::new(terminal("\"[a-z]*\""));
        let excluding = |names: &[&str]| {
            let names: Vec<Vec<u8>> = names.iter().map(|n| n.as_bytes().to_vec()).collect();
            Terminal::excluding(String::new(), &base, &names, &LexerLimits::default())
                .unwrap()
                .fingerprint()
        };
        assert_ne!(excluding(&["\"a\""]), excluding(&["\"b\""]));
        assert_eq!(excluding(&["\"a\""]), excluding(&["\"a\"", "\"a\""]));
    }

    #[test]
    fn excluded_views_hand_out_the_rests_of_the_names() {
        let base = Arc::new(terminal("\"[a-z]*\""));
        let names: Vec<Vec<u8>> = ["\"ab\"", "\"ac\"", "\"b\""]
            .iter()
            .map(|n| n.as_bytes().to_vec())
            .collect();
        let t = Terminal::excluding(String::new(), &base, &names, &LexerLimits::default()).unwrap();
        let view = t
            .excluded_view()
            .expect("a JSON-like string ends after each name");
        let rests_after = |text: &[u8]| {
            let state = text.iter().fold(t.start(), |q, &b| t.next(q, b));
            let (base_state, rests) = view.at(state).expect("a live state");
            let base_expected = text.iter().fold(base.start(), |q, &b| base.next(q, b));
            assert_eq!(base_state, base_expected, "after {text:?}");
            let mut all = Vec::new();
            rests.for_each(|rest| all.push(String::from_utf8(rest.to_vec()).unwrap()));
            all.sort();
            all
        };
        assert_eq!(rests_after(b"\""), ["ab\"", "ac\"", "b\""]);
        assert_eq!(rests_after(b"\"a"), ["b\"", "c\""]);
        assert_eq!(rests_after(b"\"ab"), ["\""]);
        assert_eq!(rests_after(b"\"c"), Vec::<String>::new());
    }

    /// And [`Terminal::only_live_byte`], looked up per row, agrees (the
    /// chain's literal states, the counter's computed ones, the plain ones).
    #[test]
    fn live_bytes_are_the_bytes_a_state_survives() {
        let counted = Terminal::counted(
            String::new(),
            &terminal("(?:[a-z]|\\\\u[0-9]{4}|é)"),
            2,
            6,
            &terminal("\",?"),
        )
        .unwrap();
        let chained =
            Terminal::with_literal_prefix(String::new(), String::new(), b",\"k\":", &counted);
        for t in [terminal("[0-9]+(?:\\.[0-9]*)?|null"), counted, chained] {
            for state in 0..t.state_count() as State {
                let live = t.live_bytes(state);
                for b in 0..=255u8 {
                    assert_eq!(
                        live[b as usize / 64] >> (b % 64) & 1 == 1,
                        t.next(state, b) != DEAD,
                        "{} state {state} byte {b}",
                        t.pattern
                    );
                }
                let ascii = (0..0x7Fu8).filter(|&b| t.next(state, b) != DEAD).count();
                assert_eq!(t.live_ascii_count(state) as usize, ascii, "{}", t.pattern);
                let mut survived = (0..=255u8).filter(|&b| t.next(state, b) != DEAD);
                let only = match (survived.next(), survived.next()) {
                    (Some(b), None) => Some(b),
                    _ => None,
                };
                assert_eq!(t.only_live_byte(state), only, "{} state {state}", t.pattern);
            }
        }
    }

    #[test]
    fn regex_fingerprints_tell_every_part_of_the_tree_apart() {
        let parse = |pattern: &str| {
            regex_syntax::ParserBuilder::new()
                .utf8(false)
                .build()
                .parse(pattern)
                .unwrap()
        };
        // Each differs from the others in one node: literal bytes, class ranges,
        // Unicode vs byte classes, counts, greediness, look-arounds, nesting.
        let patterns = [
            "ab",
            "ac",
            "[a-c]",
            "[a-d]",
            "(?-u:[a-c])",
            "a{2,3}",
            "a{2,4}",
            "a{2,}",
            "a{2,3}?",
            "^a",
            "a$",
            "(?:ab)|c",
            "a(?:b|c)",
            "(a)",
            "(?P<n>a)",
            "",
            "a*",
            "\\xFF",
            "(?-u:\\xFF)",
        ];
        let fingerprints: Vec<u128> = patterns
            .iter()
            .map(|p| hir_fingerprint(&parse(p)))
            .collect();
        for (i, a) in fingerprints.iter().enumerate() {
            assert_eq!(*a, hir_fingerprint(&parse(patterns[i])), "{}", patterns[i]);
            for (j, b) in fingerprints.iter().enumerate().skip(i + 1) {
                assert_ne!(a, b, "{} and {}", patterns[i], patterns[j]);
            }
        }
        // A concatenation's rest, fingerprinted without building it, is the rest's
        // fingerprint built (what lets `,"a":` and `,"b":` share one rest).
        for pattern in [",\"a\":[0-9]+", ",\"a\":[0-9]+x*", "ab[0-9]"] {
            let regex_syntax::hir::HirKind::Concat(items) = parse(pattern).into_kind() else {
                panic!("{pattern} is a concatenation");
            };
            for from in 1..=items.len() {
                let rest = &items[from..];
                assert_eq!(
                    concat_fingerprint(rest),
                    hir_fingerprint(&Hir::concat(rest.to_vec())),
                    "{pattern} from item {from}"
                );
            }
        }
    }

    #[test]
    fn literal_prefix_chained_onto_a_suffix_is_the_whole_terminal() {
        // Every string over the bytes that matter, up to 5 bytes: same verdicts, same
        // liveness, and the loopable flag carried over.
        for (literal, rest) in [
            (":", r"-?(?:0|[1-9][0-9]{0,5})(?:\.0+)?"),
            (",\"", r#"a":[0-9]"#),
            ("ab", "(?:ab)*c"),
            ("x", "x*"),
            ("\"", r#"[^"]*""#),
            // A literal alone: chained onto the empty string.
            (",\"a-1\":", ""),
        ] {
            let whole = terminal(&format!("{}{rest}", regex_syntax::escape(literal)));
            let chained = Terminal::with_literal_prefix(
                String::new(),
                String::new(),
                literal.as_bytes(),
                &terminal(rest),
            );
            assert_eq!(
                whole.is_loopable(),
                chained.is_loopable(),
                "{literal}{rest}"
            );
            let alphabet = b",\":a-0159.cxb";
            let mut strings: Vec<Vec<u8>> = vec![Vec::new()];
            for _ in 0..5 {
                let longer: Vec<Vec<u8>> = strings
                    .iter()
                    .filter(|s| s.len() == strings.last().unwrap().len())
                    .flat_map(|s| alphabet.iter().map(move |&b| [s.as_slice(), &[b]].concat()))
                    .collect();
                strings.extend(longer);
            }
            for s in &strings {
                let q1 = s.iter().fold(whole.start(), |q, &b| whole.next(q, b));
                let q2 = s.iter().fold(chained.start(), |q, &b| chained.next(q, b));
                assert_eq!(
                    whole.is_dead(q1),
                    chained.is_dead(q2),
                    "{literal}{rest} on {s:?}"
                );
                assert_eq!(
                    whole.is_match(q1),
                    chained.is_match(q2),
                    "{literal}{rest} on {s:?}"
                );
            }
        }
    }

    #[test]
    fn minimal_automata_merge_equivalent_states() {
        // One state for "inside the body" whether or not a character or an escape
        // was just read, so it loops on every character.
        let ascii = terminal(r#"(?:[ !#-\[\]-~]|\\["\\n])*"#);
        assert_eq!(ascii.state_count(), 3); // DEAD, body, after a backslash
        let body = terminal(r#"(?:[ !#-\[\]-\x{10FFFF}]|\\["\\n])*"#);
        assert!(body.keeps_body_alive(body.start(), ALL, 16));
        let mut successors = Vec::new();
        let body_bytes = BodyBytes::new(&body.classes, ALL);
        body.body_successors(body.start(), &body_bytes, None, &mut successors);
        assert_eq!(successors, [body.start()]);
        // A key that is `id` or any other string: alive on every text, although
        // the states after `i` and `id` do not loop.
        let key = terminal(r#"(?:id|[ !#-\[\]-\x{10FFFF}]*)""#);
        let after_i = key.next(key.start(), b'i');
        assert!(key.keeps_body_alive(after_i, ALL, 16));
        // ECMA `.` has no line separators: alive on every text without them.
        let dot = terminal(r#"(?:[ !#-\[\]-\x{2027}\x{202A}-\x{10FFFF}])*"#);
        assert!(!dot.keeps_body_alive(dot.start(), ALL, 16));
        let no_separators = [('\u{80}', '\u{2027}'), ('\u{202a}', char::MAX)];
        assert!(dot.keeps_body_alive(dot.start(), &no_separators, 16));
        // Only ASCII letters: a space kills it.
        let letters = terminal("[a-z]*");
        assert!(!letters.keeps_body_alive(letters.start(), ALL, 16));
        // `a*` after `x` or after `y`: the two branches share their future.
        let t = terminal("(?:xa*b|ya*b)");
        assert_eq!(t.state_count(), 4);
        for (text, ok) in [
            (&b"xaab"[..], true),
            (b"yb", true),
            (b"xa", false),
            (b"ab", false),
        ] {
            assert_eq!(accepts(&t, text), ok, "{:?}", String::from_utf8_lossy(text));
        }
        assert!(t.is_dead(t.next(t.start(), b'z')));
    }
}
