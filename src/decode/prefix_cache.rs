//! The prompt prefix cache: key/value rows of recent prompts, kept so that a
//! request whose prompt begins like an earlier one's (the chat template's system
//! turn, an agent's tool list, the earlier turns of a conversation) feeds only the
//! rest. This is what keeps a server's prefill from growing with every request
//! that repeats the same preamble.
//!
//! A reused row is the same bits the request's own forward pass would compute:
//! attention is causal, and no row's arithmetic depends on another sequence or on
//! how the tokens were chunked ([`super::llama`]). So reuse never changes a
//! request's tokens; `tests/decode.rs` checks that it does not.
//!
//! Shaped as a short list of whole prompts rather than a token trie: a server's
//! prompts share long prefixes and differ in a short tail, so a lookup is a scan
//! of a few dozen entries for the longest common prefix, cheaper than the copy of
//! the rows it finds. Bounded in bytes; the least recently used entry goes first.
//! Only GGUF models on the CPU keep their rows on the host; for the others the
//! cache stays empty.

use std::sync::{Arc, Mutex};

use super::llama::KvCache;
use super::Session;

/// Fewer common tokens than this are not worth a lookup's copy (a BOS alone
/// would keep its entry recent).
const MIN_REUSE: usize = 2;

/// Recent prompts' key/value rows, shared by every request of a
/// [`super::Generator`].
pub struct PrefixCache {
    capacity_bytes: usize,
    inner: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    entries: Vec<Entry>,
    bytes: usize,
    /// Bumped at every use; an entry's `used` is the clock when last used.
    clock: u64,
}

struct Entry {
    tokens: Vec<u32>,
    /// Shared, so that a lookup copies the rows after letting the lock go.
    kv: Arc<KvCache>,
    bytes: usize,
    used: u64,
}

impl PrefixCache {
    /// A cache holding at most `capacity_bytes` of rows.
    pub fn new(capacity_bytes: usize) -> PrefixCache {
        PrefixCache {
            capacity_bytes,
            inner: Mutex::new(Entries::default()),
        }
    }

    /// Starts `session` (which has fed nothing) from the longest cached prefix
    /// of `prompt` that leaves at least one token to feed: the logits of the
    /// prompt's last position come from a forward pass. Returns the positions
    /// reused (0: none).
    pub fn resume(&self, session: &mut Session, prompt: &[u32]) -> usize {
        let mut inner = self.lock();
        let usable = prompt.len().saturating_sub(1);
        let best = inner
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| (common_prefix(&e.tokens, &prompt[..usable]), i))
            .max();
        let Some((positions, i)) = best.filter(|&(n, _)| n >= MIN_REUSE) else {
            return 0;
        };
        inner.clock += 1;
        inner.entries[i].used = inner.clock;
        let rows = Arc::clone(&inner.entries[i].kv);
        drop(inner);
        let Some(kv) = rows.prefix(positions) else {
            return 0;
        };
        if session.resume_from(kv) {
            positions
        } else {
            0
        }
    }

    /// Keeps the rows of `prompt`, which `session` has fed first (what it fed
    /// after, forced tokens riding along with the prompt, is left out); of a
    /// prompt larger than the whole bound, the beginning that fits (the system
    /// turn, the tools). A prompt that extends a cached one replaces it; the
    /// least recently used entries leave until the cache fits its bound.
    pub fn insert(&self, prompt: &[u32], session: &Session) {
        let per_position = session.kv_bytes_per_position();
        if per_position == 0 {
            return;
        }
        let prompt = &prompt[..prompt.len().min(self.capacity_bytes / per_position)];
        if prompt.len() < MIN_REUSE || self.touch_covering(prompt) {
            return;
        }
        // The copy runs without the lock: lookups go on meanwhile.
        let Some(kv) = session.kv_prefix(prompt.len()) else {
            return;
        };
        let bytes = kv.bytes();
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        let Entries {
            entries,
            bytes: total,
            ..
        } = &mut *inner;
        if entries.iter().any(|e| e.tokens.starts_with(prompt)) {
            return;
        }
        entries.retain(|e| {
            let extended = prompt.starts_with(&e.tokens);
            if extended {
                *total -= e.bytes;
            }
            !extended
        });
        entries.push(Entry {
            tokens: prompt.to_vec(),
            kv: Arc::new(kv),
            bytes,
            used: now,
        });
        *total += bytes;
        while *total > self.capacity_bytes {
            let oldest = (0..entries.len())
                .min_by_key(|&i| entries[i].used)
                .expect("over the bound, so not empty");
            *total -= entries.swap_remove(oldest).bytes;
        }
    }

    /// Marks as used an entry that holds all of `prompt`; whether there was one.
    fn touch_covering(&self, prompt: &[u32]) -> bool {
        let mut inner = self.lock();
        inner.clock += 1;
        let now = inner.clock;
        match inner
            .entries
            .iter_mut()
            .find(|e| e.tokens.starts_with(prompt))
        {
            Some(e) => {
                e.used = now;
                true
            }
            None => false,
        }
    }

    /// Entries held and their bytes.
    pub fn usage(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.entries.len(), inner.bytes)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // The entries are consistent between statements: a panic elsewhere
        // leaves nothing half-done here.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
