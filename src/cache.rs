//! A memo with a byte bound: the one cache shape behind everything grammars share.
//!
//! Automata, lexeme tables, configuration masks and parsed patterns recur across
//! grammars (a JSON string body, a number, an object's remaining keys), so a
//! [`Compiler`](crate::Compiler) keeps them in caches of this type, each with its
//! share of the compiler's memory limit. The policy is deliberately plain: when a
//! new value would take the cache past its bound, the cache is emptied first.
//! Values are handed out as `Arc`s, so emptying never pulls a table out from under
//! a grammar that uses it; the bound is on what the cache itself keeps alive.
//!
//! Values are built outside the lock: a slow build (a determinization, a walk over
//! the vocabulary) does not stall other threads' lookups. Two threads that miss
//! the same key both build it, and the first stored value wins.
//!
//! ```
//! use stencil::cache::BoundedCache;
//! let cache: BoundedCache<u32, Vec<u8>> = BoundedCache::new(1_000);
//! let bytes = |_: &u32, v: &Vec<u8>| v.len();
//! let a = cache.get_or_build(1, bytes, || vec![0; 600]);
//! assert_eq!(a.len(), 600);
//! cache.get_or_build(2, bytes, || vec![0; 600]); // over the bound: emptied first
//! assert!(cache.memory_usage() <= 1_000);
//! assert_eq!(cache.len(), 1);
//! ```

use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

use rustc_hash::FxHashMap;

/// A map from keys to shared values whose accounted bytes stay within a bound.
pub struct BoundedCache<K, V> {
    entries: Mutex<Entries<K, V>>,
    limit: usize,
}

struct Entries<K, V> {
    built: FxHashMap<K, Arc<V>>,
    /// Accounted bytes of the entries held.
    bytes: usize,
}

impl<K: Hash + Eq, V> BoundedCache<K, V> {
    /// An empty cache that keeps at most `limit` accounted bytes.
    pub fn new(limit: usize) -> Self {
        BoundedCache {
            entries: Mutex::new(Entries {
                built: FxHashMap::default(),
                bytes: 0,
            }),
            limit,
        }
    }

    /// The value for `key`, or `build()`'s, kept when it fits; `bytes` is what an
    /// entry holds on the heap (the map's own slot is added).
    pub fn get_or_build(
        &self,
        key: K,
        bytes: impl Fn(&K, &V) -> usize,
        build: impl FnOnce() -> V,
    ) -> Arc<V> {
        match self.try_get_or_build(key, bytes, || Ok::<V, std::convert::Infallible>(build())) {
            Ok(value) => value,
            Err(never) => match never {},
        }
    }

    /// [`BoundedCache::get_or_build`] for a build that may fail (nothing is kept).
    pub fn try_get_or_build<E>(
        &self,
        key: K,
        bytes: impl Fn(&K, &V) -> usize,
        build: impl FnOnce() -> Result<V, E>,
    ) -> Result<Arc<V>, E> {
        if let Some(found) = self.lock().built.get(&key) {
            return Ok(Arc::clone(found));
        }
        let built = Arc::new(build()?);
        let size = bytes(&key, &built) + std::mem::size_of::<(K, Arc<V>)>();
        if size > self.limit {
            // Larger than the whole bound: used once, not kept.
            return Ok(built);
        }
        let mut entries = self.lock();
        if let Some(found) = entries.built.get(&key) {
            return Ok(Arc::clone(found));
        }
        if entries.bytes + size > self.limit {
            entries.built.clear();
            entries.bytes = 0;
        }
        entries.bytes += size;
        entries.built.insert(key, Arc::clone(&built));
        Ok(built)
    }

    /// Forgets every entry.
    pub fn clear(&self) {
        let mut entries = self.lock();
        entries.built = FxHashMap::default();
        entries.bytes = 0;
    }

    /// Accounted bytes of the entries held (at most [`BoundedCache::limit`]).
    pub fn memory_usage(&self) -> usize {
        self.lock().bytes
    }

    /// The bound on [`BoundedCache::memory_usage`].
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.lock().built.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, Entries<K, V>> {
        // A panic while holding the lock cannot leave an entry half-inserted.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<K, V> std::fmt::Debug for BoundedCache<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        f.debug_struct("BoundedCache")
            .field("entries", &entries.built.len())
            .field("bytes", &entries.bytes)
            .field("limit", &self.limit)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_within_its_bound_and_keeps_what_fits() {
        let cache: BoundedCache<u32, Vec<u8>> = BoundedCache::new(10_000);
        let bytes = |_: &u32, v: &Vec<u8>| v.len();
        for key in 0..1_000 {
            let value = cache.get_or_build(key, bytes, || vec![key as u8; 100]);
            assert_eq!(value[0], key as u8);
            assert!(cache.memory_usage() <= cache.limit());
        }
        // The last entries are held and not rebuilt.
        let held = cache.get_or_build(999, bytes, || unreachable!("999 is held"));
        assert_eq!(held.len(), 100);
        // A value above the whole bound is handed out, not kept.
        let huge = cache.get_or_build(5_000, bytes, || vec![0; 20_000]);
        assert_eq!(huge.len(), 20_000);
        assert!(cache.memory_usage() <= cache.limit());
        cache.clear();
        assert!(cache.is_empty() && cache.memory_usage() == 0);
    }

    #[test]
    fn failed_builds_keep_nothing() {
        let cache: BoundedCache<u32, u32> = BoundedCache::new(1 << 20);
        let err: Result<_, &str> = cache.try_get_or_build(1, |_, _| 4, || Err("no"));
        assert_eq!(err.unwrap_err(), "no");
        assert!(cache.is_empty());
    }
}
