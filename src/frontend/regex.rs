//! A single regular expression as a whole-output constraint.
//!
//! The pattern uses `regex-syntax`'s dialect (the one `regex-automata` compiles) and
//! is anchored at both ends: the output must match all of it. A leading `^`/`\A`
//! and a trailing `$`/`\z` are therefore redundant and accepted; every other
//! assertion (`\b`, multi-line `^`, ...) is an error, since it cannot be decided
//! one byte at a time without look-ahead.
//!
//! The pattern is translated node by node into the IR rather than kept as one
//! opaque leaf, so that a large counted repetition (`[a-z]{0,100000}`) stays a
//! counter and the automaton stage decides what to fuse into lexer terminals.

use regex_syntax::hir::{Hir, HirKind, Look};

use super::{FrontendError, Limits};
use crate::grammar::{Expr, Grammar, Rule, RuleId};

/// Parses `pattern` into a one-rule grammar named `root`.
pub fn parse(pattern: &str, limits: &Limits) -> Result<Grammar, FrontendError> {
    if pattern.len() > limits.max_source_bytes {
        return Err(FrontendError::TooLarge {
            what: "regex pattern",
            size: pattern.len(),
            limit: limits.max_source_bytes,
        });
    }
    let hir = regex_syntax::ParserBuilder::new()
        .nest_limit(limits.max_nesting.min(u32::MAX as usize) as u32)
        .build()
        .parse(pattern)
        .map_err(|e| {
            let (offset, message) = match &e {
                regex_syntax::Error::Parse(p) => (p.span().start.offset, p.kind().to_string()),
                regex_syntax::Error::Translate(t) => (t.span().start.offset, t.kind().to_string()),
                other => (0, other.to_string()),
            };
            FrontendError::Regex { offset, message }
        })?;
    let expr = convert_top(&hir, limits)?;
    let grammar = Grammar {
        rules: vec![Rule {
            name: "root".into(),
            expr,
            location: None,
        }],
        root: RuleId(0),
    };
    grammar.validate()?;
    Ok(grammar)
}

/// Where an assertion is harmless: `^` with nothing able to come before it, `$`
/// with nothing after. Tracked through concatenations, alternations and groups, so
/// `^abc$`, `^$|^https://` and `(^a$)` all work (regex-syntax factors common
/// prefixes, so `^` may sit outside the alternation it was written in).
#[derive(Clone, Copy)]
struct Edges {
    at_start: bool,
    at_end: bool,
}

fn is_anchor_only(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Empty => true,
        HirKind::Look(look) => matches!(look, Look::Start | Look::End),
        _ => false,
    }
}

/// `hir` as IR nodes, node by node (counted repetitions stay counters), for a
/// regex that is one part of a grammar (a Lark terminal): every assertion is an
/// error there, `^` and `$` included, since the regex does not start or end the
/// output.
pub(crate) fn hir_to_expr(hir: &Hir, limits: &Limits) -> Result<Expr, FrontendError> {
    convert(
        hir,
        limits,
        Edges {
            at_start: false,
            at_end: false,
        },
    )
}

fn convert_top(hir: &Hir, limits: &Limits) -> Result<Expr, FrontendError> {
    convert(
        hir,
        limits,
        Edges {
            at_start: true,
            at_end: true,
        },
    )
}

fn convert(hir: &Hir, limits: &Limits, edges: Edges) -> Result<Expr, FrontendError> {
    Ok(match hir.kind() {
        HirKind::Empty => Expr::Empty,
        HirKind::Literal(_) | HirKind::Class(_) => Expr::Regex(hir.clone()),
        HirKind::Look(Look::Start) if edges.at_start => Expr::Empty,
        HirKind::Look(Look::End) if edges.at_end => Expr::Empty,
        HirKind::Look(look) => {
            return Err(FrontendError::Regex {
                offset: 0,
                message: format!(
                    "assertion {look:?} is not supported: the whole output is matched, so only a leading `^` and a trailing `$` are allowed"
                ),
            })
        }
        HirKind::Repetition(rep) => {
            let too_big = |n: u32| n > limits.max_repetition;
            if too_big(rep.min) || rep.max.is_some_and(too_big) {
                return Err(FrontendError::Regex {
                    offset: 0,
                    message: format!(
                        "repetition {{{},{}}} is above the limit of {}",
                        rep.min,
                        rep.max.map(|m| m.to_string()).unwrap_or_default(),
                        limits.max_repetition
                    ),
                });
            }
            Expr::Repeat {
                expr: Box::new(convert(
                    &rep.sub,
                    limits,
                    Edges {
                        at_start: false,
                        at_end: false,
                    },
                )?),
                min: rep.min,
                max: rep.max,
            }
        }
        HirKind::Capture(cap) => convert(&cap.sub, limits, edges)?,
        HirKind::Concat(items) => Expr::Seq(
            items
                .iter()
                .enumerate()
                .map(|(i, h)| {
                    let edges = Edges {
                        at_start: edges.at_start && items[..i].iter().all(is_anchor_only),
                        at_end: edges.at_end && items[i + 1..].iter().all(is_anchor_only),
                    };
                    convert(h, limits, edges)
                })
                .collect::<Result<_, _>>()?,
        ),
        HirKind::Alternation(items) => Expr::Alt(
            items
                .iter()
                .map(|h| convert(h, limits, edges))
                .collect::<Result<_, _>>()?,
        ),
    })
}
