//! The strings several terminals all match and others do not: a JSON string's
//! `pattern` cut to its `minLength`/`maxLength`, two patterns on one string, a
//! string that must not match a pattern ([`Expr::Intersection`]).
//!
//! Built as the product of the operands' automata, each shared like any regex's
//! (no determinisation of the whole), over the joint byte classes, then trimmed and
//! minimised like every terminal. The automata are deterministic, so a negated
//! operand is complemented by flipping which of its states match (its dead state
//! matching too): no operand is rebuilt. A length bound is an operand like any other (a
//! counted repetition of one character's encodings), so its states multiply the
//! pattern's: the product is refused past the DFA byte limit, with the operands in
//! the message.
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
        let start: Vec<State> = parts.iter().map(|t| t.start).collect();
        let mut index: HashMap<Vec<State>, u32> = HashMap::default();
        let mut states: Vec<Vec<State>> = vec![start.clone()];
        index.insert(start, 0);
        let mut sink = None;
        let mut raw_transitions: Vec<u32> = Vec::new();
        let mut i = 0;
        while i < states.len() {
            let current = states[i].clone();
            i += 1;
            for &b in &representatives {
                let next: Option<Vec<State>> = (parts.iter().zip(&current).enumerate())
                    .map(|(k, (t, &q))| match q {
                        DEAD => Some(DEAD),
                        _ => Some(t.next(q, b)).filter(|&r| r != DEAD || k >= positive),
                    })
                    .collect();
                let target = match next {
                    None => *sink.get_or_insert_with(|| {
                        states.push(vec![DEAD; parts.len()]);
                        (states.len() - 1) as u32
                    }),
                    Some(next) => *index.entry(next).or_insert_with_key(|next| {
                        states.push(next.clone());
                        (states.len() - 1) as u32
                    }),
                };
                raw_transitions.push(target);
            }
            if states.len() * stride * std::mem::size_of::<State>() > limits.dfa_bytes {
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
        let matching_raw: Vec<bool> = states
            .iter()
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
