//! Free text up to a delimiter ([`FreeText`]) as one terminal.
//!
//! The product of a UTF-8 automaton (any text) with an Aho-Corasick automaton
//! of the delimiters: a state is a pair (UTF-8 state, longest suffix of the text
//! that is a prefix of some delimiter). Where a stop completes, the state is a
//! match with every transition dead (the text ends at its first stop); where an
//! exclude completes, the text is dead. No determinization: linear in the
//! delimiters' total length times the UTF-8 automaton's states.

use std::collections::VecDeque;

use regex_syntax::hir::Hir;
use rustc_hash::FxHashMap as HashMap;

use super::classes::refine_classes;
use super::{LexerLimits, State, Terminal, TerminalError, DEAD};
use crate::grammar::FreeText;

/// Any UTF-8 text, the base of free text.
pub fn any_utf8() -> Hir {
    regex_syntax::ParserBuilder::new()
        .dot_matches_new_line(true)
        .build()
        .parse(".*")
        .expect("a valid regex")
}

/// Aho-Corasick over the delimiters, as a complete transition table.
struct Delimiters {
    /// `next[node * 256 + byte]`.
    next: Vec<u32>,
    /// Per node: a stop ends here (its own string or, through the failure
    /// links, a suffix of it).
    stop: Vec<bool>,
    exclude: Vec<bool>,
    /// The bytes any delimiter reads (classes keep them apart).
    read: [bool; 256],
}

impl Delimiters {
    fn new(text: &FreeText) -> Delimiters {
        let mut goto: Vec<[u32; 256]> = vec![[u32::MAX; 256]];
        let mut stop = vec![false];
        let mut exclude = vec![false];
        let mut read = [false; 256];
        let patterns = text
            .stops
            .iter()
            .map(|s| (s, true))
            .chain(text.excludes.iter().map(|s| (s, false)));
        for (pattern, is_stop) in patterns {
            let mut node = 0usize;
            for &b in pattern.iter() {
                read[b as usize] = true;
                node = match goto[node][b as usize] {
                    u32::MAX => {
                        goto.push([u32::MAX; 256]);
                        stop.push(false);
                        exclude.push(false);
                        let child = goto.len() - 1;
                        goto[node][b as usize] = child as u32;
                        child
                    }
                    child => child as usize,
                };
            }
            if is_stop {
                stop[node] = true;
            } else {
                exclude[node] = true;
            }
        }
        // Breadth first: failure links, outputs through them, and the complete
        // transition function (a missing edge follows the failure link).
        let n = goto.len();
        let mut next = vec![0u32; n * 256];
        let mut fail = vec![0u32; n];
        let mut queue = VecDeque::new();
        for b in 0..256 {
            match goto[0][b] {
                u32::MAX => next[b] = 0,
                child => {
                    next[b] = child;
                    queue.push_back(child);
                }
            }
        }
        while let Some(node) = queue.pop_front() {
            let node = node as usize;
            let f = fail[node] as usize;
            stop[node] |= stop[f];
            exclude[node] |= exclude[f];
            for b in 0..256 {
                match goto[node][b] {
                    u32::MAX => next[node * 256 + b] = next[f * 256 + b],
                    child => {
                        fail[child as usize] = next[f * 256 + b];
                        next[node * 256 + b] = child;
                        queue.push_back(child);
                    }
                }
            }
        }
        Delimiters {
            next,
            stop,
            exclude,
            read,
        }
    }
}

/// A product state's delimiter part once a stop has completed: nothing follows.
const STOPPED: u32 = u32::MAX;

impl Terminal {
    /// `text` over `base` (see [`any_utf8`]): the product described in the module
    /// documentation, trimmed and minimized.
    pub fn free_text(
        label: String,
        base: &Terminal,
        text: &FreeText,
        limits: &LexerLimits,
    ) -> Result<Terminal, TerminalError> {
        let delimiters = Delimiters::new(text);
        let (classes, representatives) =
            refine_classes(&base.classes, |b| delimiters.read[b as usize]);
        let stride = representatives.len();
        let too_large = || TerminalError::TooLarge {
            pattern: text.describe(),
        };
        // Raw state 0 is the start; one raw sink for every dead pair.
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
                let next = if node == STOPPED || q == DEAD {
                    DEAD
                } else {
                    base.next(q, b)
                };
                let target = if next == DEAD {
                    None
                } else {
                    let to = delimiters.next[node as usize * 256 + b as usize];
                    if delimiters.stop[to as usize] {
                        Some((STOPPED, next))
                    } else if delimiters.exclude[to as usize] {
                        None
                    } else {
                        Some((to, next))
                    }
                };
                let raw = match target {
                    None => *sink.get_or_insert_with(|| {
                        states.push((STOPPED, DEAD));
                        (states.len() - 1) as u32
                    }),
                    Some(pair) => *index.entry(pair).or_insert_with(|| {
                        states.push(pair);
                        (states.len() - 1) as u32
                    }),
                };
                raw_transitions.push(raw);
            }
            if states.len() * stride * std::mem::size_of::<State>() > limits.dfa_bytes {
                return Err(too_large());
            }
        }
        let ends_anywhere = text.stops.is_empty();
        let matching_raw: Vec<bool> = states
            .iter()
            .map(|&(node, q)| {
                q != DEAD && base.matching[q as usize] && (ends_anywhere || node == STOPPED)
            })
            .collect();
        Ok(Terminal::trimmed(
            label,
            text.describe(),
            classes,
            stride,
            &raw_transitions,
            &matching_raw,
        ))
    }
}
