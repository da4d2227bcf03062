//! A literal chained onto a shared automaton: `"name": value` terminals.
//!
//! A schema has hundreds of terminals that are a literal key followed by the
//! same value automaton (a JSON number's is 300 states). Determinising each
//! would build the value hundreds of times; a chain of one state per literal
//! byte ending where the suffix starts is already deterministic, so it is laid
//! in front of a copy of the suffix's rows instead.

use super::classes::{bytes_by_class, only_bytes_of, refine_classes};
use super::fingerprint::fingerprint_of;
use super::{State, Terminal, DEAD};

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
            tokens: None,
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
}
