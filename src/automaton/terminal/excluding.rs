//! A terminal minus a set of strings: an object's "any key but the declared ones".
//!
//! Built as the product of the base automaton with a trie of the excluded
//! strings (no determinisation), then trimmed and minimised. Where the base
//! ends for good after each excluded string (a JSON string's closing quote), the
//! result also keeps an [`ExcludedView`] of how it reads the base, so token
//! tables reuse the base's tables (shared by every object) and drop the subtrees
//! of tokens that spell an excluded string, instead of walking the vocabulary
//! once per set of declared keys.

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use super::classes::refine_classes;
use super::{LexerLimits, State, Terminal, TerminalError, DEAD};

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

impl Terminal {
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
}
