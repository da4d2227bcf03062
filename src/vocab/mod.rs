//! The vocabulary as the grammar sees it: each token id's exact byte string.
//!
//! Masks are decided on bytes, never on display strings, so every tokenizer flavour
//! is resolved here once: byte-level BPE (GPT-2's byte-to-character map: Llama-3,
//! Qwen, GPT-2, DeepSeek, o200k), SentencePiece pieces (`▁` for a space, `<0xNN>`
//! byte-fallback tokens: Llama-2, Mistral, Gemma). Added and special tokens get no
//! bytes: a grammar over bytes can never produce them, so they are never allowed
//! unless a grammar names them. The EOS set comes from the tokenizer's config plus
//! ids the caller adds; several EOS ids are normal.
//!
//! For the mask walks the tokens with bytes also form a [`TokenTrie`].

mod class_slice;
mod load;
mod rank_set;
mod slice;
mod trie;

use crate::bits::{mask_words, set_bit};
use std::fmt;

pub use class_slice::ClassSlice;
pub use load::{load_tokenizer, VocabError};
pub use rank_set::RankSet;
pub use slice::{is_string_body_char, SliceChars, TokenSlice};
pub use trie::{ChildSlot, SubtreeBytes, TokenTrie, TrieNode};

/// Token id to bytes, plus the EOS set and the sorted-trie view.
#[derive(Clone)]
pub struct Vocabulary {
    /// Exact bytes per token id; empty for special/added tokens and unused ids.
    tokens: Vec<Box<[u8]>>,
    /// Content of special/added tokens, for messages.
    special: Vec<(u32, String)>,
    eos: Vec<u32>,
    /// The tokens with bytes.
    trie: TokenTrie,
    /// Position of each token in byte order (`u32::MAX` for tokens without bytes).
    rank: Vec<u32>,
    /// Per length below 128 bytes (and up to the longest token's): the tokens at
    /// most that long, as bits by id (a counter's short tokens by id, as
    /// [`TokenTrie::ranks_up_to_len`] by rank).
    short_ids: Vec<Vec<u32>>,
    /// The tokens with bytes, as bits by id.
    with_bytes: Vec<u32>,
    /// Per [`SliceChars`]: the tokens made only of those characters (computed with
    /// the vocabulary, not on a mask's time).
    slices: Vec<TokenSlice>,
    /// See [`Vocabulary::id`].
    id: u64,
}

impl fmt::Debug for Vocabulary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vocabulary")
            .field("size", &self.tokens.len())
            .field("special", &self.special.len())
            .field("eos", &self.eos)
            .finish()
    }
}

impl Vocabulary {
    /// Builds from explicit token bytes. `special` ids get no bytes.
    pub fn from_token_bytes(
        tokens: Vec<Vec<u8>>,
        special: Vec<(u32, String)>,
        eos: Vec<u32>,
    ) -> Vocabulary {
        let mut tokens: Vec<Box<[u8]>> = tokens.into_iter().map(Vec::into_boxed_slice).collect();
        let mut special = special;
        special.sort();
        for (id, _) in &special {
            if let Some(t) = tokens.get_mut(*id as usize) {
                *t = Box::default();
            }
        }
        let mut sorted: Vec<u32> = (0..tokens.len() as u32)
            .filter(|&id| !tokens[id as usize].is_empty())
            .collect();
        sorted.sort_by(|&a, &b| tokens[a as usize].cmp(&tokens[b as usize]).then(a.cmp(&b)));
        let mut rank = vec![u32::MAX; tokens.len()];
        for (r, &id) in sorted.iter().enumerate() {
            rank[id as usize] = r as u32;
        }
        let trie = TokenTrie::from_sorted(sorted, |id| &tokens[id as usize]);
        let slices = SliceChars::EVERY
            .iter()
            .map(|&chars| TokenSlice::of(chars, &tokens, &trie))
            .collect();
        let mut eos = eos;
        eos.sort_unstable();
        eos.dedup();
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let short_ids = short_ids(&tokens, trie.max_depth());
        let mut with_bytes = vec![0u32; mask_words(tokens.len())];
        for &id in trie.token_ids() {
            set_bit(&mut with_bytes, id as usize);
        }
        Vocabulary {
            tokens,
            special,
            eos,
            trie,
            rank,
            short_ids,
            with_bytes,
            slices,
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// Names these token bytes in the process (copies keep it): token tables
    /// cached across grammars are keyed by it.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Number of token ids (the highest id plus one).
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The exact bytes of `id`; empty for special tokens and ids out of range.
    pub fn token_bytes(&self, id: u32) -> &[u8] {
        self.tokens.get(id as usize).map_or(&[], |t| t)
    }

    /// The bytes a reader of the output sees for `id`: its bytes, or a special
    /// token's content (`<|tool_call_start|>`, which a tool-call parser reads
    /// as the delimiter it is). End-of-sequence tokens show nothing.
    pub fn shown_bytes(&self, id: u32) -> &[u8] {
        let bytes = self.token_bytes(id);
        if !bytes.is_empty() || self.is_eos(id) {
            return bytes;
        }
        match self.special.binary_search_by_key(&id, |&(s, _)| s) {
            Ok(at) => self.special[at].1.as_bytes(),
            Err(_) => bytes,
        }
    }

    /// [`Vocabulary::shown_bytes`] of `ids`, concatenated.
    pub fn decode_shown(&self, ids: &[u32]) -> Vec<u8> {
        ids.iter()
            .flat_map(|&id| self.shown_bytes(id).iter().copied())
            .collect()
    }

    /// The tokens at most `len` bytes long, as bits by id; `None` from 128 bytes
    /// or past the longest token.
    pub fn ids_up_to_len(&self, len: usize) -> Option<&[u32]> {
        self.short_ids.get(len).map(Vec::as_slice)
    }

    /// The tokens with bytes (neither special nor unused), as bits by id.
    pub fn with_bytes(&self) -> &[u32] {
        &self.with_bytes
    }

    /// How many tokens hold the byte `b`.
    pub fn tokens_holding(&self, b: u8) -> usize {
        let holders = self.trie.holders(b);
        holders.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Special and added tokens: (id, content).
    pub fn special_tokens(&self) -> &[(u32, String)] {
        &self.special
    }

    /// The ids of the token spelled `text`, for grammars that name tokens
    /// (`<|eot_id|>`, `<think>`): special and added tokens by their content,
    /// else the tokens whose bytes are exactly `text`.
    pub fn ids_named(&self, text: &str) -> Vec<u32> {
        let special: Vec<u32> = self
            .special
            .iter()
            .filter(|(_, content)| content == text)
            .map(|&(id, _)| id)
            .collect();
        if !special.is_empty() {
            return special;
        }
        (0..self.tokens.len() as u32)
            .filter(|&id| self.token_bytes(id) == text.as_bytes())
            .collect()
    }

    /// How a message names token `id`: its content for a special token, else
    /// its bytes (lossy UTF-8).
    pub fn token_text(&self, id: u32) -> String {
        match self.special.iter().find(|&&(s, _)| s == id) {
            Some((_, content)) => content.clone(),
            None => String::from_utf8_lossy(self.token_bytes(id)).into_owned(),
        }
    }

    pub fn eos_ids(&self) -> &[u32] {
        &self.eos
    }

    pub fn is_eos(&self, id: u32) -> bool {
        self.eos.binary_search(&id).is_ok()
    }

    /// Adds EOS ids (e.g. from the model's generation config).
    pub fn add_eos(&mut self, ids: &[u32]) {
        self.eos.extend_from_slice(ids);
        self.eos.sort_unstable();
        self.eos.dedup();
    }

    /// The trie of all tokens with bytes.
    pub fn trie(&self) -> &TokenTrie {
        &self.trie
    }

    /// Token ids with bytes, in byte order.
    pub fn text_tokens(&self) -> &[u32] {
        self.trie.token_ids()
    }

    /// The tokens made only of `chars`.
    pub fn slice(&self, chars: SliceChars) -> &TokenSlice {
        &self.slices[chars as usize]
    }

    /// Position of `id` in byte order; `u32::MAX` for tokens without bytes.
    pub fn rank(&self, id: u32) -> u32 {
        self.rank.get(id as usize).copied().unwrap_or(u32::MAX)
    }

    /// Concatenated bytes of `ids` (special tokens contribute nothing).
    pub fn decode(&self, ids: &[u32]) -> Vec<u8> {
        ids.iter()
            .flat_map(|&id| self.token_bytes(id).iter().copied())
            .collect()
    }
}

/// GPT-2's byte-level map: the character that stands for each byte.
pub fn byte_level_char(byte: u8) -> char {
    let b = byte as u32;
    let printable =
        (0x21..=0x7e).contains(&b) || (0xa1..=0xac).contains(&b) || (0xae..=0xff).contains(&b);
    if printable {
        return char::from_u32(b).unwrap_or('\0');
    }
    // The other 68 bytes map, in order, to U+0100 onwards.
    let rank = (0..b)
        .filter(|&x| {
            !((0x21..=0x7e).contains(&x)
                || (0xa1..=0xac).contains(&x)
                || (0xae..=0xff).contains(&x))
        })
        .count() as u32;
    char::from_u32(0x100 + rank).unwrap_or('\0')
}

/// Inverse of [`byte_level_char`] as a lookup table.
pub(crate) fn byte_level_table() -> std::collections::HashMap<char, u8> {
    (0..=255u8).map(|b| (byte_level_char(b), b)).collect()
}

/// Per length up to the longest token's, below `SHORT_TOKEN_LENGTHS`: the tokens
/// at most that long, as bits by id.
fn short_ids(tokens: &[Box<[u8]>], max_depth: usize) -> Vec<Vec<u32>> {
    let lengths = max_depth.min(trie::SHORT_TOKEN_LENGTHS - 1) + 1;
    let ids = tokens
        .iter()
        .enumerate()
        .map(|(id, token)| (token.len(), id));
    trie::up_to_len(ids, tokens.len(), lengths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_map_is_gpt2s() {
        assert_eq!(byte_level_char(b'A'), 'A');
        assert_eq!(byte_level_char(b' '), '\u{120}'); // "Ġ"
        assert_eq!(byte_level_char(b'\n'), '\u{10a}'); // "Ċ"
        assert_eq!(byte_level_char(0), '\u{100}');
        assert_eq!(byte_level_char(0xad), '\u{143}');
        assert_eq!(byte_level_table().len(), 256);
    }

    #[test]
    fn text_tokens_in_byte_order() {
        let v = Vocabulary::from_token_bytes(
            vec![
                b"ab".to_vec(),
                b"a".to_vec(),
                b"<s>".to_vec(),
                b"abc".to_vec(),
                b"b".to_vec(),
            ],
            vec![(2, "<s>".into())],
            vec![2],
        );
        assert_eq!(v.text_tokens(), &[1, 0, 3, 4]);
        assert_eq!((v.rank(3), v.rank(2)), (2, u32::MAX));
        assert!(v.token_bytes(2).is_empty());
        assert!(v.is_eos(2));
        assert_eq!(v.decode(&[1, 2, 4]), b"ab");
    }
}
