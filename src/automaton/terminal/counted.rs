//! Counted repetitions (`leaf{min,max}` then a suffix) with computed states.
//!
//! Unrolling a count through determinisation costs its size in states (a
//! `maxLength: 1000` string body is megabytes of rows); here the states of the
//! counter are `(count, leaf state)` pairs numbered arithmetically over one
//! stored copy of the leaf's transitions, so the automaton is the size of the
//! leaf plus the suffix whatever the count. [`CounterSpan`] tells tables built
//! over every state (shortest completions) where those computed states lie.

use std::sync::Arc;

use super::classes::{bytes_by_class, classes_by, only_bytes_of};
use super::counted_product::TickSets;
use super::fingerprint::fingerprint_of;
use super::{State, Terminal, TerminalError, DEAD, LOOPED};

/// The counter states of a [`Terminal::counted`] automaton, computed rather than
/// stored (a `maxLength: 1000` string would need megabytes of rows): state
/// `first + (c << shift) + i` has completed `c` iterations of the leaf and is
/// between iterations (`i < between`) or inside one (`i >= between`, below
/// `per_count`; the numbers from `per_count` to the next count are unused, so a
/// state's count is a shift away). Only the positions between iterations exist
/// at count `max`; stored states follow.
///
/// A plain counted repetition has one position between iterations (the leaf's
/// start). A product with other automata ([`Terminal::counted_product`]) carries
/// their states across iterations: a position is then a (leaf state, operand
/// state) pair, several of them between iterations, and whether a state can
/// still match depends on its count ([`TickSets`]).
#[derive(Clone, Debug)]
pub(crate) struct Counter {
    pub(crate) first: State,
    /// One past `(max, between - 1)`.
    pub(crate) end: State,
    pub(super) per_count: u32,
    pub(crate) shift: u32,
    pub(crate) min: u32,
    pub(crate) max: u32,
    /// Per `(i, class)`: where the byte leads inside an iteration, relative to the
    /// count's first state (from `1 << shift` on, the next count's position
    /// between iterations), or [`NO_TARGET`].
    pub(super) template: Arc<[u32]>,
    /// Positions `0..between` are between iterations.
    pub(super) between: u32,
    /// Per `(i, class)` for `i < between`: where the suffix goes from there
    /// (count >= min), a stored state or [`DEAD`].
    pub(super) entry: Arc<[State]>,
    /// Per `i < between`: a match there (count >= min).
    pub(super) accepting: Arc<[bool]>,
    /// Some position between iterations matches (the suffix may be empty).
    pub(crate) ends: bool,
    /// For a product's counter: which (count, position) states can still match.
    pub(super) ticks: Option<Arc<TickSets>>,
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
    /// A product's counter ([`Terminal::counted_product`]): several positions
    /// between iterations, and states that die by their count.
    pub carried: bool,
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

/// "The byte kills the iteration" in [`Counter::template`].
pub(super) const NO_TARGET: u32 = u32::MAX;

/// Most states a counted automaton may have: state numbers stay clear of
/// [`LOOPED`], and nothing is stored per counter state (shortest completions
/// and byte budgets are computed), so a `maxLength: 65535` string (a million
/// states) is one counted terminal, not a parser counter around a character.
pub(super) const MAX_COUNTED_STATES: u64 = 1 << 28;

impl Counter {
    #[inline]
    pub(crate) fn contains(&self, state: State) -> bool {
        state >= self.first && state < self.end
    }

    /// `(count, i)` of a counter state.
    #[inline]
    pub(crate) fn position(&self, state: State) -> (u32, u32) {
        let offset = state - self.first;
        (offset >> self.shift, offset & ((1 << self.shift) - 1))
    }

    #[inline]
    pub(super) fn next(&self, state: State, class: usize, stride: usize) -> State {
        let (count, i) = self.position(state);
        if i >= self.per_count {
            return DEAD;
        }
        let target = self.template[i as usize * stride + class];
        if target != NO_TARGET && count < self.max {
            let reached = state - i + target;
            match &self.ticks {
                Some(ticks) if !ticks.live(self, reached) => DEAD,
                _ => reached,
            }
        } else if i < self.between && count >= self.min {
            self.entry[i as usize * stride + class]
        } else {
            DEAD
        }
    }

    #[inline]
    pub(super) fn is_match(&self, state: State) -> bool {
        let (count, i) = self.position(state);
        i < self.between && count >= self.min && self.accepting[i as usize]
    }

    /// A product's counter, whose states may die by their count.
    pub(crate) fn is_carried(&self) -> bool {
        self.ticks.is_some()
    }

    /// The most iterations any state of a product's counter needs before it can
    /// match (0 for a plain counter): with at least that many left, a state
    /// lives whatever its count.
    pub(crate) fn slack(&self) -> u32 {
        self.ticks.as_ref().map_or(0, |t| t.slack)
    }

    /// The stored row of a state outside the counter.
    #[inline]
    pub(super) fn row(&self, state: State) -> usize {
        if state < self.first {
            state as usize
        } else {
            (state - (self.end - self.first)) as usize
        }
    }

    /// The same counter over refined byte classes (`representatives` of the new
    /// classes, `old_classes` and `old_stride` the counter's).
    pub(super) fn refined(
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
        let mut entry = vec![DEAD; self.between as usize * stride];
        for i in 0..self.between as usize {
            for (c, &b) in representatives.iter().enumerate() {
                entry[i * stride + c] =
                    self.entry[i * old_stride + old_classes[b as usize] as usize];
            }
        }
        Counter {
            template: template.into(),
            entry: entry.into(),
            ..self.clone()
        }
    }
}

impl Terminal {
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
        let ends = suffix.is_match(suffix.start);
        let counter = Counter {
            first,
            end,
            per_count,
            shift,
            min,
            max,
            template: template.into(),
            between: 1,
            entry: entry.into(),
            accepting: [ends].into(),
            ends,
            ticks: None,
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
            tokens: None,
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
            carried: k.is_carried(),
        })
    }

    /// The counter of a counted terminal.
    pub(crate) fn counter(&self) -> Option<&Counter> {
        self.counter.as_ref()
    }

    /// The counter `state` is on, if any.
    pub(crate) fn counter_at(&self, state: State) -> Option<&Counter> {
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
        // A product's states die by their count: alike only with `slack`
        // iterations to spare past the token (then every state lives as it would
        // with no bound), and past `min` (below it, how far below matters).
        let slack = k.slack();
        let canonical =
            if count >= k.min && count.saturating_add(horizon).saturating_add(slack) <= k.max {
                k.max - horizon - slack
            } else if !k.is_carried() && count.saturating_add(horizon) < k.min {
                k.min - horizon - 1
            } else {
                count
            };
        k.first + (canonical << k.shift) + i
    }
}
