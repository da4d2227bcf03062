//! What the token tables of many grammars share over one vocabulary.
//!
//! A JSON string body or number is one automaton in every schema, and an object's
//! remaining keys recur across schemas and across compiles of one schema; so the
//! tables of a lexeme (an automaton's state) and of a configuration are kept here,
//! under keys that mean the same in every grammar: automaton fingerprints and
//! states. A server compiling many schemas walks the vocabulary once per such
//! state, not once per schema: the first visit of `"name":"` in a new schema costs
//! a lookup, not a 100 us walk.
//!
//! One [`SharedTables`] is held by a [`Compiler`](crate::Compiler) and handed to
//! every [`TokenTables`](super::TokenTables) it makes; a `TokenTables` made on its
//! own gets a fresh one. Each part is a [`BoundedCache`] with its share of the
//! limit, so the whole never holds more than the limit it was made with.

use crate::automaton::State;
use crate::bits::ByteSet;
use crate::cache::BoundedCache;
use crate::vocab::{ClassSlice, SliceChars};

use super::{ConfigurationMasks, LexemeMasks};

/// A lexeme over a vocabulary: vocabulary, automaton fingerprint, state.
pub(super) type LexemeKey = (u64, u128, State);

/// A configuration over a vocabulary: each lexeme's automaton fingerprint and
/// state, sorted.
pub(super) type ConfigurationKey = (u64, Box<[(u128, State)]>);

/// A class slice over a vocabulary: ASCII class, the non-ASCII characters it also
/// holds, exit bytes.
pub(super) type ClassSliceKey = (u64, u128, Option<SliceChars>, ByteSet);

/// Heap bytes a [`SharedTables::default`] keeps.
pub const DEFAULT_SHARED_TABLE_BYTES: usize = 144 << 20;

/// Lexeme tables, configuration masks and class slices shared by grammars.
#[derive(Debug)]
pub struct SharedTables {
    /// A Llama-3 lexeme's tables are about 48 KB.
    pub(super) lexemes: BoundedCache<LexemeKey, LexemeMasks>,
    /// A Llama-3 configuration's masks are about 30-50 KB.
    pub(super) configurations: BoundedCache<ConfigurationKey, ConfigurationMasks>,
    /// A Llama-3 class slice is about 33 KB.
    pub(super) class_slices: BoundedCache<ClassSliceKey, Option<ClassSlice>>,
}

impl Default for SharedTables {
    fn default() -> Self {
        SharedTables::new(DEFAULT_SHARED_TABLE_BYTES)
    }
}

impl SharedTables {
    /// Empty tables that keep at most `limit` heap bytes: four ninths of it for
    /// lexemes, four for configurations, one for class slices.
    pub fn new(limit: usize) -> SharedTables {
        let ninth = limit / 9;
        SharedTables {
            lexemes: BoundedCache::new(4 * ninth),
            configurations: BoundedCache::new(4 * ninth),
            class_slices: BoundedCache::new(limit - 8 * ninth),
        }
    }

    /// Forgets every table (the next grammars start cold).
    pub fn clear(&self) {
        self.lexemes.clear();
        self.configurations.clear();
        self.class_slices.clear();
    }

    /// Heap bytes held (at most the limit the tables were made with).
    pub fn memory_usage(&self) -> usize {
        self.lexemes.memory_usage()
            + self.configurations.memory_usage()
            + self.class_slices.memory_usage()
    }

    /// Lexeme tables held.
    pub fn cached_lexemes(&self) -> usize {
        self.lexemes.len()
    }
}
