//! "Does this input match, and where does it fail": the verdict behind
//! `stencil check`, as a library call.
//!
//! The input is consumed byte by byte; the report says whether the whole input is a
//! sentence, whether it is at least a viable prefix, the byte offset of the first
//! byte that could not be consumed (or the end of the input, when it stopped short),
//! and what was expected there, as terminals and as bytes.
//!
//! A grammar with token terminals (special tokens no bytes spell) is checked on
//! token ids instead ([`check_tokens`]), over the vocabulary it is bound to; the
//! same report then counts tokens.

use std::sync::Arc;

use serde::Serialize;

use crate::automaton::CompiledGrammar;
use crate::matcher::{describe_byte_ranges, MatchError, Matcher, MatcherOptions, TokenMatcher};
use crate::tables::TokenTables;

/// The verdict on one input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// The whole input is in the language.
    pub accepted: bool,
    /// The input is a prefix of some sentence (true whenever `accepted`).
    pub viable_prefix: bool,
    /// First byte that could not be consumed; the input's length when the input is
    /// a viable prefix that is not complete; `None` when accepted.
    pub offset: Option<usize>,
    /// Terminals that could continue at `offset`.
    pub expected: Vec<String>,
    /// Bytes that could come at `offset`, as ranges.
    pub expected_bytes: Vec<String>,
    /// The matcher gave up (too ambiguous) rather than deciding.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl CheckReport {
    /// The report on an input in the language.
    fn accepted() -> CheckReport {
        CheckReport {
            accepted: true,
            viable_prefix: true,
            offset: None,
            expected: Vec::new(),
            expected_bytes: Vec::new(),
            error: None,
        }
    }

    /// The report on an input that stops short (`viable_prefix`) or fails at
    /// `offset`, with what `matcher` expects there.
    fn stopped(matcher: &Matcher, viable_prefix: bool, offset: usize) -> CheckReport {
        CheckReport {
            accepted: false,
            viable_prefix,
            offset: Some(offset),
            expected: matcher.expected_terminals(),
            expected_bytes: describe_byte_ranges(&matcher.allowed_bytes().ranges()),
            error: None,
        }
    }
}

/// Checks `input` against `grammar`.
pub fn check(
    grammar: &Arc<CompiledGrammar>,
    input: &[u8],
    options: &MatcherOptions,
) -> CheckReport {
    let mut matcher = Matcher::with_options(Arc::clone(grammar), options.clone());
    match matcher.consume_bytes(input) {
        Ok(()) if matcher.is_accepting() => CheckReport::accepted(),
        Ok(()) => CheckReport::stopped(&matcher, true, input.len()),
        Err(MatchError::Rejected { offset }) => CheckReport::stopped(&matcher, false, offset),
        Err(e @ MatchError::TooAmbiguous { offset, .. }) => CheckReport {
            accepted: false,
            viable_prefix: false,
            offset: Some(offset),
            expected: Vec::new(),
            expected_bytes: Vec::new(),
            error: Some(e.to_string()),
        },
    }
}

/// Checks the token ids `tokens` against the grammar of `tables` (bound to its
/// vocabulary): `offset` is the index of the first token that could not be
/// consumed, or the number of tokens when they stop short. An end-of-sequence
/// token is consumed where the grammar accepts (and ends the input); an id
/// outside the vocabulary is refused like any other token.
pub fn check_tokens(tables: &Arc<TokenTables>, tokens: &[u32]) -> CheckReport {
    let mut matcher = TokenMatcher::new(Arc::clone(tables));
    let refused = tokens
        .iter()
        .position(|&token| matcher.consume_token(token).is_err());
    match refused {
        None if matcher.is_accepting() || matcher.is_terminated() => CheckReport::accepted(),
        None => CheckReport::stopped(matcher.byte_matcher(), true, tokens.len()),
        Some(at) => CheckReport::stopped(matcher.byte_matcher(), false, at),
    }
}

/// 1-based line and column (in characters) of byte `offset` in `input`.
pub fn line_column(input: &[u8], offset: usize) -> (usize, usize) {
    let location = crate::grammar::Location::of_offset(input, offset);
    (location.line as usize, location.column as usize)
}
