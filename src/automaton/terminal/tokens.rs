//! A token terminal: one whole token from a [`TokenSet`], whatever its bytes.
//!
//! As an automaton it has a start state that no byte leaves alive and that is no
//! match: the byte-level machinery (the lexer's byte steps, the token tables'
//! trie walks, the candidate walk) sees a lexeme that dies on every byte, so a
//! token terminal can never begin or end inside a token. It is read only by
//! [`crate::matcher::Matcher::consume_token`], a whole token at a time, and its
//! tokens enter the mask from the set ([`crate::tables::TokenTables::token_set_mask`]).
//! The start is not [`DEAD`]: a position where the parser expects a token
//! terminal is viable.

use std::sync::Arc;

use super::classes::{bytes_by_class, only_bytes_of};
use super::{fingerprint_of, Terminal, DEAD};
use crate::grammar::TokenSet;

impl Terminal {
    /// The terminal that reads one token of `set`.
    pub fn tokens(label: String, set: &TokenSet) -> Terminal {
        let classes = [0u8; 256];
        let stride = 1;
        let transitions = [DEAD, DEAD];
        let class_bytes = bytes_by_class(&classes, stride);
        Terminal {
            label,
            pattern: set.to_string(),
            classes,
            stride,
            matching: Arc::new([false, false]),
            start: 1,
            loopable: false,
            fingerprint: fingerprint_of(&("tokens", set.negated, &set.items)),
            counter: None,
            excluded: None,
            tokens: Some(Arc::new(set.clone())),
            only_bytes: only_bytes_of(&transitions, stride, &class_bytes).into(),
            transitions: Arc::new(transitions),
            class_bytes,
        }
    }

    /// For a token terminal, the tokens it reads.
    #[inline]
    pub fn token_set(&self) -> Option<&TokenSet> {
        self.tokens.as_deref()
    }
}
