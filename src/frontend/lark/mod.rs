//! Lark grammars in llguidance's dialect (its `docs/syntax.md`), lowered to the
//! grammar IR.
//!
//! This file owns the public surface: [`LarkOptions`], [`parse`] and
//! [`parse_with_warnings`]. The stages are one file each: `source` (line index,
//! located errors), `lexer` (the text to tokens), `parser` (tokens to the `ast`),
//! `lower` (the tree to IR rules), with `terminal` (regex trees and their leaves),
//! `chains` (long rule chains kept out of the automaton's fusion),
//! `dfa` (`&`, `~` and lazy lexemes as automata), `ignore` (where `%ignore`d text
//! may go), `common` (`%import common`), `options` (`%llguidance`), `json`
//! (`%json`) and `document` (grammars documents, `@name`).
//!
//! What is accepted: lower-case rules and UPPER-case terminals; `|`, `?`, `*`, `+`,
//! `{m}`, `{m,}`, `{,n}`, `{m,n}`, `~m..n`, `( )`, `[ ]`; strings with escapes and
//! the `i` flag; `"a".."z"`; `/regex/flags` (Rust syntax; `i m s x u`);
//! `&` and `~` in terminals; `%ignore`; `%import common.X`; `%llguidance {}`;
//! `%json {schema}` (stencil's JSON Schema front-end); `%regex {"substring_...":
//! ...}`; nested `%lark { ... }`; `-> alias`, `?rule`, `!rule` (tree shaping in
//! Lark, no effect on the language); special tokens and token ids
//! (`<|eot_id|>`, `<[128010]>`, bound to a vocabulary when compiled).
//!
//! Rule attributes: those that shape the language are enforced (`lazy`,
//! `suffix=`, `stop=`, `max_tokens=`: a rule whose body is a terminal becomes
//! one lexeme that ends once it has spent that many tokens, see
//! [`TokenBudget`](crate::grammar::TokenBudget)); those that ask something of the caller
//! (`capture`, `stop_capture`, `temperature=`, and that `stop=`'s text be hidden
//! from the output) cannot be, by a mask, and are reported as
//! [`RuleAnnotation`]s in the [`LarkReport`].
//!
//! A text whose first non-blank character is `{` is a grammars document
//! (`document`): several grammars, `@name` linking them.
//!
//! What is refused, each with its `line:column` and the feature named: `@name`
//! outside a grammars document, `max_tokens=` above 0 on a rule that is not one
//! terminal (a `%json` or nested grammar, `&`/`~`), parametric
//! rules (`name::_`, `%if`), templates, priorities, `%override`, `%declare`,
//! imports other than `common`.
//!
//! Semantics: the language of a grammar is every string some derivation produces,
//! terminals matched in any way that fits. llguidance's lexer is greedy (a
//! terminal extends as far as it can before the next one starts), so a few
//! grammars accept here what llguidance rejects (`start: A A` with `A: /a+/`
//! accepts `aa` here); see `tests/lark.rs` for the cases in its test suite.

mod ast;
mod chains;
mod common;
mod dfa;
mod document;
mod ignore;
mod json;
mod lexer;
mod lower;
mod options;
mod parser;
mod source;
mod terminal;

use super::json_schema::{JsonSchemaOptions, PatternCache, Whitespace};
use super::{FrontendError, Limits};
use crate::grammar::{Grammar, Location};

/// Options of [`parse`].
#[derive(Debug, Clone)]
pub struct LarkOptions {
    /// How `%json` schemas are compiled (each schema's top-level `"x-guidance"`
    /// can change its whitespace and leniency). The default follows llguidance's
    /// flexible whitespace between JSON tokens, bounded as stencil bounds JSON
    /// whitespace: per gap, spaces and tabs, at most one newline, then at most 20
    /// spaces or tabs.
    pub json: JsonSchemaOptions,
    pub limits: Limits,
    /// Most states of one automaton built for `&`, `~`, `lazy` or `suffix=`.
    pub max_dfa_states: usize,
    /// Most chunks of one `%regex {"substring_...": ...}`.
    pub max_substring_chunks: usize,
}

impl Default for LarkOptions {
    fn default() -> Self {
        LarkOptions {
            json: JsonSchemaOptions {
                whitespace: Whitespace::Bounded { indent: 20 },
                ..JsonSchemaOptions::default()
            },
            limits: Limits::default(),
            max_dfa_states: 10_000,
            max_substring_chunks: 10_000,
        }
    }
}

/// Something the grammar asked for that was let through unenforced (a `%json`
/// schema keyword under `lenient`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LarkWarning {
    pub location: Location,
    pub message: String,
}

impl std::fmt::Display for LarkWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

/// What a rule's attributes ask of whoever runs the grammar rather than of its
/// language: a mask cannot do them, so they are handed on.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleAnnotation {
    /// The rule's name in the IR (a nested grammar's rules carry its prefix).
    pub rule: String,
    /// Where the rule is defined.
    pub location: Location,
    /// `capture` (the rule's own name) or `capture="name"`: report the text the
    /// rule matched under this name.
    pub capture: Option<String>,
    /// `stop_capture="name"`: report the text that stopped the rule (the `stop=`
    /// or `suffix=` match) under this name.
    pub stop_capture: Option<String>,
    /// `stop=` (not empty): the stop text is part of the language here, since the
    /// model writes it; llguidance hides it from the output by backtracking those
    /// tokens, which is the caller's to do.
    pub hidden_stop: bool,
    /// `temperature=`: a sampling temperature for the tokens of this rule.
    pub temperature: Option<f64>,
}

/// What [`parse_with_warnings`] says beside the grammar.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LarkReport {
    /// Keywords of lenient `%json` schemas let through unenforced.
    pub warnings: Vec<LarkWarning>,
    /// Rule attributes for the caller, in the order the rules were lowered.
    pub annotations: Vec<RuleAnnotation>,
}

/// Parses a Lark grammar into the IR and validates it; the start rule is `start`.
/// Warnings (keywords a lenient `%json` let through) and rule annotations are
/// dropped: see [`parse_with_warnings`].
pub fn parse(source: &str, options: &LarkOptions) -> Result<Grammar, FrontendError> {
    Ok(parse_with_warnings(source, options, &PatternCache::default())?.0)
}

/// [`parse`], taking the JSON Schema patterns it meets from `cache`, and returning
/// the warnings and rule annotations.
pub fn parse_with_warnings(
    source: &str,
    options: &LarkOptions,
    cache: &PatternCache,
) -> Result<(Grammar, LarkReport), FrontendError> {
    if source.len() > options.limits.max_source_bytes {
        return Err(FrontendError::TooLarge {
            what: "grammar text",
            size: source.len(),
            limit: options.limits.max_source_bytes,
        });
    }
    if source.trim_start().starts_with('{') {
        return document::parse(source, options, cache);
    }
    let lowered = lower_text(source, options, cache)?;
    if let Some(reference) = lowered.references.first() {
        return Err(FrontendError::Syntax {
            location: reference.location,
            message: format!(
                "the grammar reference `@{}` needs a grammars document to name ({{\"grammars\": [{{\"name\": ..., \"lark_grammar\": ...}}, ...]}})",
                reference.name
            ),
        });
    }
    Ok((lowered.grammar, lowered.report))
}

/// One Lark text through the stages, its `@name` references left open.
fn lower_text(
    source: &str,
    options: &LarkOptions,
    cache: &PatternCache,
) -> Result<lower::Lowered, FrontendError> {
    let map = source::SourceMap::new(source);
    let tokens = lexer::tokenize(source, &map)?;
    let items = parser::parse_items(&tokens, &map, &options.limits)?;
    lower::lower(items, &map, options, cache)
}

#[cfg(test)]
mod tests;
