//! Regexes the JSON Schema front-end meets again in every schema, parsed once.
//!
//! The same few patterns (a string body's character, a number's digits, a
//! format's grammar) are parsed for every schema, and parsing them was about a
//! third of a small schema's front-end time; whether a `pattern`'s search
//! automaton stays small is asked again for each schema that uses it. A
//! [`PatternCache`] keeps both answers for the schemas compiled with it: a
//! [`Compiler`](crate::Compiler) holds one, a lone [`compile_schema`](super::compile_schema)
//! makes its own.

use regex_syntax::hir::Hir;

use crate::cache::BoundedCache;

/// Parsed internal patterns and the "search automaton is small" verdicts.
#[derive(Debug)]
pub struct PatternCache {
    parsed: BoundedCache<String, Hir>,
    small_search: BoundedCache<String, bool>,
}

/// Bytes a [`PatternCache::default`] keeps.
pub const DEFAULT_PATTERN_CACHE_BYTES: usize = 16 << 20;

impl Default for PatternCache {
    fn default() -> Self {
        PatternCache::new(DEFAULT_PATTERN_CACHE_BYTES)
    }
}

impl PatternCache {
    /// An empty cache that keeps at most `limit` bytes (parses three quarters,
    /// verdicts the rest).
    pub fn new(limit: usize) -> PatternCache {
        let quarter = limit / 4;
        PatternCache {
            parsed: BoundedCache::new(limit - quarter),
            small_search: BoundedCache::new(quarter),
        }
    }

    /// Parses a regex in `regex-syntax`'s dialect (internal, trusted patterns).
    pub(crate) fn re(&self, pattern: &str) -> Hir {
        // A `Hir` does not report its heap size: one node per pattern byte,
        // each the size of a `Hir`, bounds it from above.
        let bytes = |key: &String, _: &Hir| key.len() * (1 + std::mem::size_of::<Hir>());
        let parsed = self.parsed.get_or_build(pattern.to_string(), bytes, || {
            regex_syntax::ParserBuilder::new()
                .build()
                .parse(pattern)
                .unwrap_or_else(|e| panic!("internal regex {pattern:?}: {e}"))
        });
        Hir::clone(&parsed)
    }

    /// Whether `h`'s search automaton is small (see
    /// [`determinizes_within_budget`](super::pattern::determinizes_within_budget)),
    /// remembered by the regex's text.
    pub(crate) fn search_automaton_is_small(&self, h: &Hir) -> bool {
        let small = self.small_search.get_or_build(
            h.to_string(),
            |key, _| key.len(),
            || super::pattern::determinizes_within_budget(h),
        );
        *small
    }

    /// Forgets every entry.
    pub fn clear(&self) {
        self.parsed.clear();
        self.small_search.clear();
    }

    /// Bytes held (at most the limit the cache was made with).
    pub fn memory_usage(&self) -> usize {
        self.parsed.memory_usage() + self.small_search.memory_usage()
    }
}
