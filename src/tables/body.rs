//! Which texts keep a lexeme alive: the token-table questions about a body.
//!
//! Inside a string body (or a pattern's `.*` tail, or a key that may still be
//! any string) a lexeme often survives every text of body characters; then every
//! token made only of them is allowed there without walking it, which is what
//! the vocabulary slices are for. These explorations answer that, and how many
//! body characters a counter or a chain of states has room for, by stepping one
//! byte per byte class ([`BodyBytes`]). They are `Terminal` methods written here
//! because only the token tables ask them.

use crate::automaton::terminal::{State, Terminal, DEAD, LOOPED};

impl Terminal {
    /// Appends the state each of `bytes` leads to from `state`, or `None` when one
    /// dies. Consecutive bytes of one class go to the same state: one lookup per run.
    pub(super) fn step_each(
        &self,
        state: State,
        bytes: impl Iterator<Item = u8>,
        pinned: Option<u32>,
        out: &mut Vec<State>,
    ) -> Option<()> {
        let mut last_class = None;
        for b in bytes {
            let class = self.byte_classes()[b as usize];
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
    pub(super) fn step_sequence(
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
    pub(super) fn body_successors(
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
    /// and the `non_ascii` ranges: a slice of [`crate::vocab::SliceChars`]) of at
    /// most `horizon` bytes keeps a lexeme in `state` alive, with the states such
    /// texts reach (`state` included) where it holds: then every token made only
    /// of them is allowed from here, whatever states it passes through (a looping
    /// string body, but also a key that may still be any string, or a pattern's
    /// `.*` tail). Explores at most `limit` states; past it the answer is `None`. On a
    /// counter with at least `horizon` iterations to go, no such text reaches
    /// `max`: the leaf alone decides, so the count is pinned where it is (inside
    /// a long `maxLength` string every token of string characters is allowed, the
    /// slice of a looping body; the states are then the pinned count's). A
    /// character that leaves the counter for the suffix counts as dying (the
    /// answer may only be too cautious).
    pub(crate) fn body_reach_within(
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
                // A product's states die by their count unless `slack`
                // iterations are left past the token's, and past `min`.
                let slack = k.slack();
                if count.saturating_add(horizon).saturating_add(slack) > k.max
                    || (k.is_carried() && count < k.min)
                {
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
    pub(crate) fn body_dies_on_controls(
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
    pub(crate) fn counted_room(&self, state: State, non_ascii: &[(char, char)]) -> Option<u32> {
        let Some(k) = self.counter_at(state) else {
            return self.chain_room(state, non_ascii);
        };
        let (count, i) = k.position(state);
        if i != 0 || k.ends || k.max == 0 || k.is_carried() {
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
        let body = BodyBytes::new(self.byte_classes(), non_ascii);
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
    pub(super) fn chain_room(&self, state: State, non_ascii: &[(char, char)]) -> Option<u32> {
        // Most states fail on a few body bytes (a literal's next byte, an
        // object's `{`): answered before the body's bytes are gathered.
        let first = self.step(state, b'a');
        if first == DEAD || b" 0Z~".iter().any(|&b| self.step(state, b) != first) {
            return None;
        }
        let body = BodyBytes::new(self.byte_classes(), non_ascii);
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
    pub(super) fn step_pinned(&self, state: State, byte: u8, pinned: Option<u32>) -> State {
        let r = self.step(state, byte);
        let (Some(count), Some(k)) = (pinned, self.counter()) else {
            return r;
        };
        if !k.contains(r) {
            return DEAD;
        }
        let (reached, i) = k.position(r);
        debug_assert!(reached >= count);
        k.first + (count << k.shift) + i
    }

    pub(super) fn body_reach_pinned(
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
        let body = BodyBytes::new(self.byte_classes(), non_ascii);
        self.reach_alive(state, &body, limit, pinned)
    }

    /// The states texts of `body` reach from `state` (itself included), or
    /// `None` when one of them dies or past `limit` states.
    pub(super) fn reach_alive(
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
}

/// The bytes of string-body characters one automaton's exploration steps: one
/// byte per byte class (the others lead where it does), for the printable ASCII
/// characters and for each position of each UTF-8 sequence of the non-ASCII
/// ranges. Built once per exploration instead of once per state; the non-ASCII
/// part only when an exploration gets past the ASCII bytes (most lexemes die on
/// one of those at once: a key literal on every letter but its next).
pub(super) struct BodyBytes<'a> {
    classes: &'a [u8; 256],
    non_ascii: &'a [(char, char)],
    ascii: Vec<u8>,
    /// Per UTF-8 sequence, per byte position: the bytes to step.
    sequences: std::cell::OnceCell<Vec<Vec<Vec<u8>>>>,
}

impl<'a> BodyBytes<'a> {
    pub(super) fn new(classes: &'a [u8; 256], non_ascii: &'a [(char, char)]) -> BodyBytes<'a> {
        let body = body_ascii().fold(0u128, |set, b| set | 1 << b);
        Self::with_ascii(classes, body, non_ascii)
    }

    /// With the ASCII bytes of `ascii` (bit `b`) instead of the printable ones.
    pub(super) fn with_ascii(
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

    pub(super) fn representatives(
        classes: &[u8; 256],
        bytes: &mut dyn Iterator<Item = u8>,
    ) -> Vec<u8> {
        let mut seen = [false; 256];
        bytes
            .filter(|&b| !std::mem::replace(&mut seen[classes[b as usize] as usize], true))
            .collect()
    }

    pub(super) fn sequences(&self) -> &[Vec<Vec<u8>>] {
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
pub(super) fn body_ascii() -> impl Iterator<Item = u8> {
    (0x20u8..0x7f).filter(|&b| b != b'"' && b != b'\\')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automaton::terminal::test_terminal as terminal;

    const ALL: &[(char, char)] = &[('\u{80}', char::MAX)];

    trait KeepsAlive {
        fn keeps_alive(&self, state: State, non_ascii: &[(char, char)], limit: usize) -> bool;
    }

    impl KeepsAlive for Terminal {
        fn keeps_alive(&self, state: State, non_ascii: &[(char, char)], limit: usize) -> bool {
            self.body_reach_within(state, non_ascii, limit, u32::MAX)
                .is_some()
        }
    }

    #[test]
    fn body_texts_keep_a_looping_body_alive() {
        let body = terminal(r#"(?:[ !#-\[\]-\x{10FFFF}]|\\["\\n])*"#);
        assert!(body.keeps_alive(body.start(), ALL, 16));
        let mut successors = Vec::new();
        let body_bytes = BodyBytes::new(body.byte_classes(), ALL);
        body.body_successors(body.start(), &body_bytes, None, &mut successors);
        assert_eq!(successors, [body.start()]);
        // A key that is `id` or any other string: alive on every text, although
        // the states after `i` and `id` do not loop.
        let key = terminal(r#"(?:id|[ !#-\[\]-\x{10FFFF}]*)""#);
        let after_i = key.next(key.start(), b'i');
        assert!(key.keeps_alive(after_i, ALL, 16));
        // ECMA `.` has no line separators: alive on every text without them.
        let dot = terminal(r#"(?:[ !#-\[\]-\x{2027}\x{202A}-\x{10FFFF}])*"#);
        assert!(!dot.keeps_alive(dot.start(), ALL, 16));
        let no_separators = [('\u{80}', '\u{2027}'), ('\u{202a}', char::MAX)];
        assert!(dot.keeps_alive(dot.start(), &no_separators, 16));
        // Only ASCII letters: a space kills it.
        let letters = terminal("[a-z]*");
        assert!(!letters.keeps_alive(letters.start(), ALL, 16));
    }
}
