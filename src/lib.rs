//! stencil: grammar-constrained structured output.
//!
//! The pipeline, one module per stage, dependencies pointing one way:
//!
//! ```text
//! frontend (GBNF, Lark, regex, JSON Schema, structural tags, tool calls) -> grammar (IR)
//!   -> automaton (lexer DFAs + CFG)
//!   -> vocab (token bytes) + tables (per-lexer-configuration token masks) -> matcher
//!   -> sampling (logits processors, selectors, counter-based RNG, trace)
//!   -> decode (candle models, chat templates, the batched generation loop)
//! ```
//!
//! Beside them, [`bits`] holds the sets every stage passes on: token masks (`bitvec`'s
//! `BitSlice<u32, Lsb0>`, the layout engines take) and byte sets.
//!
//! A [`Compiler`] is what an engine holds per vocabulary: it owns what grammars
//! share (automata, token tables, parsed patterns) within a memory limit, and
//! compiles JSON Schema, GBNF, Lark, regexes and structural tags into [`TokenTables`](tables::TokenTables):
//! a front-end parses the source into the [`grammar`] IR, [`automaton`] compiles it
//! into an immutable [`CompiledGrammar`] shared by all
//! requests, bound to the [`Vocabulary`](vocab::Vocabulary). A
//! [`TokenMatcher`](matcher::TokenMatcher) holds one request's state over it and
//! fills next-token bitmasks; a [`Matcher`] is the same at the
//! byte level. [`check`] is the one-call "does this input match, and where does it
//! fail" used by `stencil check`.

pub mod automaton;
pub mod bits;
pub mod cache;
pub mod check;
pub mod compiler;
#[cfg(feature = "decode")]
pub mod decode;
mod error;
pub mod frontend;
pub mod grammar;
pub mod matcher;
pub mod sampling;
#[cfg(feature = "serve")]
pub mod serve;
pub mod tables;
pub mod vocab;

use std::sync::Arc;

pub use automaton::{CompileOptions, CompiledGrammar};
pub use compiler::{Compiler, CompilerOptions};
pub use error::Error;
pub use matcher::Matcher;

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// Parses and compiles a GBNF grammar (start rule `root`) with default limits.
pub fn compile_gbnf(source: &str) -> Result<Arc<CompiledGrammar>, Error> {
    let grammar = frontend::gbnf::parse(source, &frontend::gbnf::GbnfOptions::default())?;
    Ok(Arc::new(CompiledGrammar::compile(
        &grammar,
        &CompileOptions::default(),
    )?))
}

/// Parses and compiles a Lark grammar (llguidance's dialect, start rule `start`)
/// with default options.
pub fn compile_lark(source: &str) -> Result<Arc<CompiledGrammar>, Error> {
    let grammar = frontend::lark::parse(source, &frontend::lark::LarkOptions::default())?;
    Ok(Arc::new(CompiledGrammar::compile(
        &grammar,
        &CompileOptions::default(),
    )?))
}

/// Compiles a regex that the whole output must match, with default limits.
pub fn compile_regex(pattern: &str) -> Result<Arc<CompiledGrammar>, Error> {
    let grammar = frontend::regex::parse(pattern, &frontend::Limits::default())?;
    Ok(Arc::new(CompiledGrammar::compile(
        &grammar,
        &CompileOptions::default(),
    )?))
}
