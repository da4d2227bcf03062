//! The strings several terminals all match and others do not: a JSON string's
//! `pattern` cut to its `minLength`/`maxLength`, two patterns on one string, a
//! string that must not match a pattern ([`Expr::Intersection`]).
//!
//! Built as the product of the operands' automata, each shared like any regex's
//! (no determinisation of the whole), over the joint byte classes, then trimmed and
//! minimised like every terminal. The automata are deterministic, so a negated
//! operand is complemented by flipping which of its states match (its dead state
//! matching too): no operand is rebuilt. A short length bound is an operand like any
//! other (a counted repetition of one character's encodings, unrolled), its states
//! multiplying the pattern's; a long one keeps its count computed instead
//! (`counted_product.rs`). The product is refused past the DFA byte limit, with the
//! operands in the message.
//!
//! [`Expr::Intersection`]: crate::grammar::Expr::Intersection

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use super::classes::classes_by;
use super::{LexerLimits, State, Terminal, TerminalError, DEAD};

impl Terminal {
    /// The product automaton of `parts` (at least one) and `negated`: a state is
    /// a tuple of the parts' states, dead when any of `parts` is (a negated
    /// operand's dead state lives on: the string can no longer match it); it
    /// matches when all of `parts` do and none of `negated`.
    pub fn intersection(
        label: String,
        parts: &[Arc<Terminal>],
        negated: &[Arc<Terminal>],
        limits: &LexerLimits,
    ) -> Result<Terminal, TerminalError> {
        let pattern = (parts.iter().map(|t| format!("({})", t.pattern)))
            .chain(negated.iter().map(|t| format!("~({})", t.pattern)))
            .collect::<Vec<_>>()
            .join(" & ");
        let positive = parts.len();
        let parts: Vec<&Arc<Terminal>> = parts.iter().chain(negated).collect();
        // Joint classes: bytes every part reads alike.
        let (classes, representatives) = classes_by(|b| {
            parts
                .iter()
                .map(|t| t.classes[b as usize])
                .collect::<Vec<_>>()
        });
        let stride = representatives.len();
        // Raw state 0 is the start; every tuple with a dead part is one raw sink.
        // Tuples are stored flat, `n` states each; a lookup hashes the scratch
        // tuple, so only a new state allocates (a key of its own, or for two
        // operands, the usual case, none: the pair fits a `u64`).
        let n = parts.len();
        let start: Vec<State> = parts.iter().map(|t| t.start).collect();
        let mut index = TupleIndex::new(n);
        let mut tuples: Vec<State> = start.clone();
        index.insert(&start, 0);
        let mut sink = None;
        let mut raw_transitions: Vec<u32> = Vec::new();
        let mut current = vec![DEAD; n];
        let mut next = vec![DEAD; n];
        let mut i = 0;
        while i < tuples.len() / n {
            current.copy_from_slice(&tuples[i * n..(i + 1) * n]);
            i += 1;
            for &b in &representatives {
                let mut alive = true;
                for (k, (t, &q)) in parts.iter().zip(&current).enumerate() {
                    let r = match q {
                        DEAD => DEAD,
                        _ => t.next(q, b),
                    };
                    // A positive part's death kills the tuple; a negated one's
                    // dead state lives on.
                    if r == DEAD && k < positive {
                        alive = false;
                        break;
                    }
                    next[k] = r;
                }
                let target = if !alive {
                    *sink.get_or_insert_with(|| {
                        tuples.extend(std::iter::repeat_n(DEAD, n));
                        (tuples.len() / n - 1) as u32
                    })
                } else if let Some(id) = index.get(&next) {
                    id
                } else {
                    let id = (tuples.len() / n) as u32;
                    index.insert(&next, id);
                    tuples.extend_from_slice(&next);
                    id
                };
                raw_transitions.push(target);
            }
            if tuples.len() / n * stride * std::mem::size_of::<State>() > limits.dfa_bytes {
                return Err(TerminalError::TooLarge {
                    pattern: format!(
                        "the intersection of {} automata of {} states",
                        parts.len(),
                        parts
                            .iter()
                            .map(|t| t.matching.len().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
        }
        let matching_raw: Vec<bool> = tuples
            .chunks_exact(n)
            .map(|tuple| {
                (parts.iter().zip(tuple).enumerate()).all(|(k, (t, &q))| {
                    let matches = q != DEAD && t.is_match(q);
                    matches == (k < positive)
                })
            })
            .collect();
        Ok(Terminal::trimmed(
            label,
            pattern,
            classes,
            stride,
            &raw_transitions,
            &matching_raw,
        ))
    }
}

/// Product states by their tuple of operand states.
pub(super) enum TupleIndex {
    /// Two operands (a pattern and a length bound): the pair as one number.
    Pair(HashMap<u64, u32>),
    Wide(HashMap<Box<[State]>, u32>),
}

impl TupleIndex {
    pub(super) fn new(operands: usize) -> TupleIndex {
        match operands {
            2 => TupleIndex::Pair(HashMap::default()),
            _ => TupleIndex::Wide(HashMap::default()),
        }
    }

    fn pair(tuple: &[State]) -> u64 {
        (tuple[0] as u64) << 32 | tuple[1] as u64
    }

    pub(super) fn get(&self, tuple: &[State]) -> Option<u32> {
        match self {
            TupleIndex::Pair(map) => map.get(&Self::pair(tuple)).copied(),
            TupleIndex::Wide(map) => map.get(tuple).copied(),
        }
    }

    pub(super) fn insert(&mut self, tuple: &[State], id: u32) {
        match self {
            TupleIndex::Pair(map) => map.insert(Self::pair(tuple), id),
            TupleIndex::Wide(map) => map.insert(tuple.into(), id),
        };
    }
}
