//! A memo with a byte bound: the one cache shape behind everything grammars share.
//!
//! Automata, lexeme tables, configuration masks and parsed patterns recur across
//! grammars (a JSON string body, a number, an object's remaining keys), so a
//! [`Compiler`](crate::Compiler) keeps them in caches of this type, each with its
//! share of the compiler's memory limit. When a new value would take the cache
//! past its bound, entries are evicted in insertion order, each entry read since
//! the hand last passed it getting a second chance (the CLOCK policy): a few
//! evictions per insertion, so no single mask pays for freeing the whole cache
//! (emptying a full 100 MB cache at once took ~600 us on one mask) and the entries
//! in use stay warm. Values are handed out as `Arc`s, so evicting never pulls a
//! table out from under a grammar that uses it; the bound is on what the cache
//! itself keeps alive.
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
//! cache.get_or_build(2, bytes, || vec![0; 600]); // over the bound: 1 is evicted
//! assert!(cache.memory_usage() <= 1_000);
//! assert_eq!(cache.len(), 1);
//! ```

use std::collections::VecDeque;
use std::hash::{BuildHasher, Hash};
use std::sync::{Arc, Mutex, MutexGuard};

use hashbrown::hash_table::{Entry as TableEntry, HashTable};
use rustc_hash::FxBuildHasher;

/// A map from keys to shared values whose accounted bytes stay within a bound.
pub struct BoundedCache<K, V> {
    entries: Mutex<Entries<K, V>>,
    limit: usize,
}

struct Entries<K, V> {
    /// Each entry keeps its key's hash, so growing the table moves entries without
    /// hashing their keys again (a configuration key is a boxed slice).
    table: HashTable<Entry<K, V>>,
    /// Every held entry's hash once, oldest first: the clock hand is at the front.
    /// Two entries with one hash are told apart by neither, which is harmless: the
    /// hand then treats them in either order, and each still has one place here.
    clock: VecDeque<u64>,
    /// Accounted bytes of the entries held.
    bytes: usize,
}

struct Entry<K, V> {
    key: K,
    hash: u64,
    value: Arc<V>,
    /// Accounted bytes, given back on eviction (a kept entry is under the limit,
    /// and one entry's tables under 4 GiB).
    bytes: u32,
    /// Read since the clock hand last passed: spared once more.
    read: bool,
}

impl<K: Hash + Eq, V> Entries<K, V> {
    fn empty() -> Self {
        Entries {
            table: HashTable::new(),
            clock: VecDeque::new(),
            bytes: 0,
        }
    }

    fn get(&mut self, hash: u64, key: &K) -> Option<Arc<V>> {
        let entry = self.table.find_mut(hash, |entry| entry.key == *key)?;
        entry.read = true;
        Some(Arc::clone(&entry.value))
    }

    fn insert(&mut self, key: K, hash: u64, value: Arc<V>, bytes: u32) {
        self.bytes += bytes as usize;
        self.clock.push_back(hash);
        let entry = Entry {
            key,
            hash,
            value,
            bytes,
            read: false,
        };
        self.table.insert_unique(hash, entry, |entry| entry.hash);
    }

    /// Evicts until `room` more bytes fit under `limit`, handing the evicted values
    /// back so they are freed after the lock is released. Ends: a full turn of the
    /// hand clears every `read`, and an empty cache holds 0 bytes.
    fn make_room(&mut self, room: usize, limit: usize) -> Vec<Arc<V>> {
        let mut evicted = Vec::new();
        while self.bytes + room > limit {
            let Some(hash) = self.clock.pop_front() else {
                break;
            };
            let found = self
                .table
                .entry(hash, |entry| entry.hash == hash, |entry| entry.hash);
            let TableEntry::Occupied(mut held) = found else {
                continue;
            };
            if std::mem::take(&mut held.get_mut().read) {
                self.clock.push_back(hash);
            } else {
                let (entry, _) = held.remove();
                self.bytes -= entry.bytes as usize;
                evicted.push(entry.value);
            }
        }
        evicted
    }
}

impl<K: Hash + Eq, V> BoundedCache<K, V> {
    /// An empty cache that keeps at most `limit` accounted bytes.
    pub fn new(limit: usize) -> Self {
        BoundedCache {
            entries: Mutex::new(Entries::empty()),
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
        let hash = FxBuildHasher.hash_one(&key);
        if let Some(found) = self.lock().get(hash, &key) {
            return Ok(found);
        }
        let built = Arc::new(build()?);
        // The table's slot and control byte, and the clock's slot.
        let size = bytes(&key, &built)
            + std::mem::size_of::<Entry<K, V>>()
            + 1
            + std::mem::size_of::<u64>();
        if size > self.limit.min(u32::MAX as usize) {
            // Larger than the whole bound: used once, not kept.
            return Ok(built);
        }
        let evicted;
        {
            let mut entries = self.lock();
            if let Some(found) = entries.get(hash, &key) {
                return Ok(found);
            }
            evicted = entries.make_room(size, self.limit);
            entries.insert(key, hash, Arc::clone(&built), size as u32);
        }
        drop(evicted);
        Ok(built)
    }

    /// Forgets every entry.
    pub fn clear(&self) {
        let emptied = std::mem::replace(&mut *self.lock(), Entries::empty());
        drop(emptied);
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
        self.lock().table.len()
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
            .field("entries", &entries.table.len())
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
    fn evicts_oldest_first_and_spares_what_was_read() {
        let cache: BoundedCache<u32, Vec<u8>> = BoundedCache::new(10_000);
        let bytes = |_: &u32, v: &Vec<u8>| v.len();
        let mut key = 0;
        while cache.memory_usage() + 3_000 <= cache.limit() {
            cache.get_or_build(key, bytes, || vec![0; 2_000]);
            key += 1;
        }
        let held = cache.len() as u32;
        assert!(held >= 3);
        // Read the oldest entry: the next insertion evicts the second oldest.
        cache.get_or_build(0, bytes, || unreachable!("0 is held"));
        cache.get_or_build(held, bytes, || vec![0; 2_000]);
        assert_eq!(cache.len() as u32, held);
        cache.get_or_build(0, bytes, || unreachable!("0 was read, so spared"));
        let rebuilt = std::cell::Cell::new(false);
        cache.get_or_build(1, bytes, || {
            rebuilt.set(true);
            vec![0; 2_000]
        });
        assert!(rebuilt.get(), "1 was the oldest unread entry");
        assert!(cache.memory_usage() <= cache.limit());
    }

    #[test]
    fn failed_builds_keep_nothing() {
        let cache: BoundedCache<u32, u32> = BoundedCache::new(1 << 20);
        let err: Result<_, &str> = cache.try_get_or_build(1, |_, _| 4, || Err("no"));
        assert_eq!(err.unwrap_err(), "no");
        assert!(cache.is_empty());
    }
}
