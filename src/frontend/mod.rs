//! Front-ends: user-facing grammar languages lowered to the grammar IR.
//!
//! One module per language: `gbnf`, `lark` (llguidance's dialect and grammars
//! documents), `regex`, `json_schema`, `structural_tag` (XGrammar's JSON format),
//! and `tool_calls` (OpenAI tools in a model family's own format, as a structural
//! tag); `tokens` is the `<[id]>` syntax GBNF and Lark share. Each owns its syntax
//! and its error locations (line:column for texts, byte offsets in a pattern, JSON
//! pointers in JSON requests) and produces a validated
//! [`Grammar`](crate::grammar::Grammar). Nothing past this module sees source text.

pub mod gbnf;
pub mod json_schema;
pub mod lark;
pub mod regex;
pub mod structural_tag;
pub mod tokens;
pub mod tool_calls;

use crate::grammar::{GrammarError, Location};

/// Bounds on what a front-end accepts, so hostile input fails fast and clearly.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest count accepted in `{m,n}`.
    pub max_repetition: u32,
    /// Largest grammar or pattern text, in bytes.
    pub max_source_bytes: usize,
    /// Deepest nesting of parentheses.
    pub max_nesting: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_repetition: 10_000_000,
            max_source_bytes: 16 << 20,
            max_nesting: 200,
        }
    }
}

/// A grammar text that could not be turned into a grammar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontendError {
    #[error("{location}: {message}")]
    Syntax { location: Location, message: String },
    #[error("the grammar has no start rule `{root}`")]
    MissingRoot { root: String },
    #[error("{what} is {size} bytes, above the limit of {limit}")]
    TooLarge {
        what: &'static str,
        size: usize,
        limit: usize,
    },
    #[error("regex error at byte offset {offset}: {message}")]
    Regex { offset: usize, message: String },
    #[error(transparent)]
    Grammar(#[from] GrammarError),
    /// A JSON request (a grammars document, a structural tag) is wrong at
    /// `pointer` (a JSON pointer into it).
    #[error("{pointer}: {message}")]
    Document { pointer: String, message: String },
    /// An error inside one grammar of a grammars document (`grammars[1] (args)`);
    /// its location is in that grammar's own text.
    #[error("{member}: {error}")]
    InMember {
        member: String,
        error: Box<FrontendError>,
    },
}

impl FrontendError {
    /// Where in the source the error is, when it has a place.
    pub fn location(&self) -> Option<Location> {
        match self {
            FrontendError::Syntax { location, .. } => Some(*location),
            FrontendError::InMember { error, .. } => error.location(),
            _ => None,
        }
    }
}
