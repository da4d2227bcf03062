//! Automata shared by the grammars compiled through one [`AutomatonCache`].
//!
//! A server compiling many schemas determinizes the automaton of a JSON number or
//! string once, not once per schema: terminals are kept under keys that mean the
//! same in every grammar (a regex's structural fingerprint, a counted repetition's
//! parts, a literal chained onto a rest, a base minus excluded strings), with the
//! [`LexerLimits`] they were built under. Each grammar takes a copy that shares
//! the tables (`Arc`s inside [`Terminal`]) and sets its own label.
//!
//! The cache is an explicit object, held by a [`Compiler`](crate::Compiler) (or by
//! whoever compiles), never a process-wide static: two compilers are independent,
//! and a compiler's memory is bounded by its setting.
//!
//! ```
//! use stencil::automaton::{AutomatonCache, LexerLimits};
//! let cache = AutomatonCache::new(1 << 20);
//! let hir = regex_syntax::parse("[0-9]+").unwrap();
//! let a = cache.regex(&hir, &LexerLimits::default()).unwrap();
//! let b = cache.regex(&hir, &LexerLimits::default()).unwrap();
//! assert!(std::sync::Arc::ptr_eq(&a, &b));
//! assert!(cache.memory_usage() <= 1 << 20);
//! ```

use std::sync::Arc;

use regex_syntax::hir::{Hir, HirKind, Repetition};

use super::terminal::{fingerprint_of, hir_fingerprint, LexerLimits, Terminal, TerminalError};
use crate::cache::BoundedCache;

/// The automata built so far, by what they recognise and the limits they were
/// built under.
#[derive(Debug)]
pub struct AutomatonCache {
    built: BoundedCache<(u128, usize, usize), Terminal>,
}

/// Heap bytes an [`AutomatonCache::default`] keeps.
pub const DEFAULT_AUTOMATON_CACHE_BYTES: usize = 64 << 20;

impl Default for AutomatonCache {
    fn default() -> Self {
        AutomatonCache::new(DEFAULT_AUTOMATON_CACHE_BYTES)
    }
}

impl AutomatonCache {
    /// An empty cache that keeps at most `limit` heap bytes of automata.
    pub fn new(limit: usize) -> AutomatonCache {
        AutomatonCache {
            built: BoundedCache::new(limit),
        }
    }

    /// [`Terminal::build`] of `hir`, shared (the label is left empty).
    pub fn regex(&self, hir: &Hir, limits: &LexerLimits) -> Result<Arc<Terminal>, TerminalError> {
        self.regex_by(hir_fingerprint(hir), limits, || hir.clone())
    }

    /// [`AutomatonCache::regex`] for the regex whose structural fingerprint is
    /// `fingerprint`: `hir` makes it only when the cache misses.
    pub fn regex_by(
        &self,
        fingerprint: u128,
        limits: &LexerLimits,
        hir: impl FnOnce() -> Hir,
    ) -> Result<Arc<Terminal>, TerminalError> {
        self.get_or_build(fingerprint_of(&("regex", fingerprint)), limits, || {
            Terminal::build(String::new(), &hir(), limits)
        })
    }

    /// [`Terminal::counted`], shared (the label is left empty); the leaf and the
    /// suffix are shared too.
    pub fn counted(
        &self,
        leaf: &Hir,
        min: u32,
        max: u32,
        suffix: &Hir,
        limits: &LexerLimits,
    ) -> Result<Arc<Terminal>, TerminalError> {
        let leaf = self.regex(leaf, limits)?;
        let suffix = self.regex(suffix, limits)?;
        let key = fingerprint_of(&(
            "counted",
            leaf.fingerprint(),
            min,
            max,
            suffix.fingerprint(),
        ));
        self.get_or_build(key, limits, || {
            let pattern = format!("(?:{}){{{min},{max}}}{}", leaf.pattern, suffix.pattern);
            Terminal::counted(pattern, &leaf, min, max, &suffix)
        })
    }

    /// [`Terminal::with_literal_prefix`], shared (the label is left empty; the
    /// pattern is the literal's, then the suffix's).
    pub fn with_literal_prefix(
        &self,
        literal: &[u8],
        suffix: &Terminal,
        limits: &LexerLimits,
    ) -> Result<Arc<Terminal>, TerminalError> {
        let key = fingerprint_of(&("chain", suffix.fingerprint(), literal));
        self.get_or_build(key, limits, || {
            let pattern = format!("{}{}", Hir::literal(literal), suffix.pattern);
            Ok(Terminal::with_literal_prefix(
                String::new(),
                pattern,
                literal,
                suffix,
            ))
        })
    }

    /// [`Terminal::excluding`], shared (the label is left empty): an object's
    /// undeclared keys are the same language in every compile of its schema.
    pub fn excluding(
        &self,
        base: &Arc<Terminal>,
        excluded: &[Vec<u8>],
        limits: &LexerLimits,
    ) -> Result<Arc<Terminal>, TerminalError> {
        let key = fingerprint_of(&("excluding", base.fingerprint(), excluded));
        self.get_or_build(key, limits, || {
            Terminal::excluding(String::new(), base, excluded, limits)
        })
    }

    /// [`Terminal::intersection`] of the regexes' automata (the strings all of
    /// `regexes` match and none of `negated`), shared (the label is left empty),
    /// as are the operands: a pattern's automaton is the same with any length
    /// bound, and negated or not.
    ///
    /// A regex that is a long counted repetition between literals (a length
    /// bound) keeps its counter: the product is [`Terminal::counted_product`],
    /// whose size does not grow with the count.
    pub fn intersection(
        &self,
        regexes: &[Hir],
        negated: &[Hir],
        limits: &LexerLimits,
    ) -> Result<Arc<Terminal>, TerminalError> {
        let automata = |hirs: &[Hir]| {
            hirs.iter()
                .map(|h| self.regex(h, limits))
                .collect::<Result<Vec<_>, _>>()
        };
        let prints = |ts: &[Arc<Terminal>]| ts.iter().map(|t| t.fingerprint()).collect::<Vec<_>>();
        if let Some((x, counted)) = self.length_bound(regexes, negated, limits)? {
            let rest: Vec<Hir> = (regexes.iter().enumerate())
                .filter(|&(y, _)| y != x)
                .map(|(_, h)| h.clone())
                .collect();
            let (parts, negated) = (automata(&rest)?, automata(negated)?);
            let key = fingerprint_of(&(
                "counted intersection",
                counted.fingerprint(),
                prints(&parts),
                prints(&negated),
            ));
            let product = self.get_or_build(key, limits, || {
                Terminal::counted_product(String::new(), &counted, &parts, &negated, limits)
            });
            // Past its own bounds (layers that never repeat, positions that do not
            // fit), the plain product may still be small: the count and the
            // pattern's states can move together.
            match product {
                Err(TerminalError::TooLarge { .. } | TerminalError::NotCountable { .. }) => {}
                done => return done,
            }
        }
        let (parts, negated) = (automata(regexes)?, automata(negated)?);
        let key = fingerprint_of(&("intersection", prints(&parts), prints(&negated)));
        self.get_or_build(key, limits, || {
            Terminal::intersection(String::new(), &parts, &negated, limits)
        })
    }

    /// The regex of an intersection's `regexes` that is a long counted
    /// repetition between literals (`"` `char{0,3584}` `"`), by its index, built
    /// as a counter: of several, the one counting furthest that
    /// [`Terminal::counted`] can keep (a pattern may count too:
    /// `(?:\S+\s+){0,29}\S+` under `maxLength: 300`). `None` when there is none,
    /// or nothing else to intersect it with.
    fn length_bound(
        &self,
        regexes: &[Hir],
        negated: &[Hir],
        limits: &LexerLimits,
    ) -> Result<Option<(usize, Arc<Terminal>)>, TerminalError> {
        if regexes.len() + negated.len() < 2 {
            return Ok(None);
        }
        let mut bounds: Vec<(usize, CountedParts)> = (regexes.iter().enumerate())
            .filter_map(|(x, h)| counted_between_literals(h).map(|parts| (x, parts)))
            .collect();
        bounds.sort_by_key(|(_, (_, repetition, _))| std::cmp::Reverse(repetition.max));
        for (x, (prefix, repetition, suffix)) in bounds {
            let max = repetition.max.expect("bounded");
            let counted = match self.counted(&repetition.sub, repetition.min, max, &suffix, limits)
            {
                Ok(counted) => counted,
                Err(TerminalError::NotCountable { .. }) => continue,
                Err(e) => return Err(e),
            };
            if prefix.is_empty() {
                return Ok(Some((x, counted)));
            }
            return Ok(Some((
                x,
                self.with_literal_prefix(&prefix, &counted, limits)?,
            )));
        }
        Ok(None)
    }

    /// Forgets every automaton (the next compiles start cold).
    pub fn clear(&self) {
        self.built.clear();
    }

    /// Heap bytes of the automata held (at most the cache's limit).
    pub fn memory_usage(&self) -> usize {
        self.built.memory_usage()
    }

    fn get_or_build(
        &self,
        key: u128,
        limits: &LexerLimits,
        build: impl FnOnce() -> Result<Terminal, TerminalError>,
    ) -> Result<Arc<Terminal>, TerminalError> {
        let key = (key, limits.nfa_bytes, limits.dfa_bytes);
        self.built
            .try_get_or_build(key, |_, terminal| terminal.memory_usage(), build)
    }
}

/// Counted repetitions with at least this many iterations allowed are kept as
/// counters inside an intersection (fewer unroll into a small product).
const COUNTED_IN_INTERSECTION_FROM: u32 = 8;

/// A regex as (a literal, a counted repetition, the rest).
type CountedParts<'h> = (Vec<u8>, &'h Repetition, Hir);

/// `hir` as `literal repetition rest` with a bounded repetition of at least
/// [`COUNTED_IN_INTERSECTION_FROM`] iterations: (the literal, the repetition,
/// the rest).
fn counted_between_literals(hir: &Hir) -> Option<CountedParts<'_>> {
    let items = match hir.kind() {
        HirKind::Concat(items) => &items[..],
        _ => std::slice::from_ref(hir),
    };
    let mut prefix = Vec::new();
    for (at, item) in items.iter().enumerate() {
        match item.kind() {
            HirKind::Literal(literal) => prefix.extend_from_slice(&literal.0),
            HirKind::Empty => {}
            HirKind::Repetition(r)
                if r.max.is_some_and(|max| max >= COUNTED_IN_INTERSECTION_FROM) =>
            {
                return Some((prefix, r, Hir::concat(items[at + 1..].to_vec())));
            }
            _ => return None,
        }
    }
    None
}
