//! The tokens of one ASCII byte class, for lexeme walks from a state that the
//! class cannot kill.
//!
//! A pattern-constrained string (`"pattern": "^[\\w.-]+$"`) sits, between its
//! quotes, in states that every text of its class keeps alive and that nothing else
//! leaves but a few *exit* bytes (the closing quote). From such a state every token
//! made only of the class is allowed, every token whose first byte outside the
//! class is not an exit dies at that byte, and only the tokens whose first byte
//! outside the class is an exit need the automaton: a few hundred of Llama-3's
//! 128k tokens where the plain walk visits 60-170k trie nodes. A [`ClassSlice`]
//! holds the members and the ranks of the tokens holding an exit byte (a superset
//! of those exit tokens: which of them leave the class by it, the walk reads);
//! it is built per (class, exits) on demand (patterns bring their own classes)
//! from the trie's per-byte sets of holders: the members are the tokens holding
//! no byte outside the class, an OR of those bytes' sets, whole words at a time
//! (70-200 us on Llama-3 with a cold cache, against 190-350 for a pass over
//! every token's byte set and 0.8-1 ms for a walk down a cold trie). The class
//! may also hold a slice's non-ASCII characters (a key that is any string
//! without a digit), read from the vocabulary's precomputed
//! [`TokenSlice`](super::TokenSlice) membership.

use super::{RankSet, SliceChars, TokenTrie, Vocabulary};
use crate::bits::{flip_bit, ones, set_bit, ByteSet};

/// The tokens made only of an ASCII class, and (a superset of) those whose first
/// byte outside it is one of a set of exit bytes.
#[derive(Debug)]
pub struct ClassSlice {
    /// Members as bits by token id.
    members: Vec<u32>,
    /// Members as bits by rank.
    members_by_rank: Vec<u32>,
    /// The longest member's length.
    longest_member: usize,
    /// The tokens holding an exit byte outside the class, or a non-ASCII byte the
    /// class may not read: a superset of those whose first byte outside the class
    /// is an exit.
    exits: RankSet,
}

impl ClassSlice {
    /// `class`: ASCII bytes below DEL (bit `b` of the `u128`); `exits`: bytes
    /// outside it (bit `b % 64` of word `b / 64`). `None` when more than
    /// `max_exits` tokens leave the class by an exit, or hold one exit byte: the
    /// walk would enter most subtrees anyway (a URL pattern's path, where spaces,
    /// capitals and `/` all go on).
    ///
    /// With `non_ascii`, the class also holds that slice's non-ASCII characters
    /// (whole ones, or one cut at a token's end that only they complete: see
    /// [`TokenSlice`](super::TokenSlice); any other token with a non-ASCII
    /// byte is walked). Then, past `max_exits`, every
    /// non-member counts as an exit instead: the members alone spare the walk
    /// the subtrees of non-ASCII characters, most of a byte-level vocabulary's
    /// nodes (an email domain's `[^@.\s]`, where spaces go on to `.gov.uk`:
    /// 31k nodes walked on Llama-3 without them, 7.6k with).
    pub fn new(
        vocab: &Vocabulary,
        class: u128,
        non_ascii: Option<SliceChars>,
        exits: &ByteSet,
        max_exits: usize,
    ) -> Option<ClassSlice> {
        debug_assert!(class >> 127 == 0, "DEL and non-ASCII bytes share bit 127");
        let trie = vocab.trie();
        let words = trie.token_ids().len().div_ceil(32);
        let is_exit = |b: u8| exits.contains(b);
        // Every token holding an exit byte may be walked: when one byte alone is
        // held by too many, give up before the walk. (A non-ASCII exit byte may
        // sit in a widened class's member.)
        let bounded = |b: u8| non_ascii.is_none() || b < 0x80;
        let crowded =
            (0..=255u8).any(|b| is_exit(b) && bounded(b) && vocab.tokens_holding(b) > max_exits);
        if crowded && non_ascii.is_none() {
            return None;
        }
        let del_exits = exits.contains(0x7F);
        let slice = non_ascii.map(|chars| vocab.slice(chars));
        let tokens = trie.token_ids().len();
        // Whole words of ranks: the tokens holding an ASCII byte outside the
        // class (DEL included) are an OR of per-byte sets, as are those holding
        // an exit byte; a pass over every token's byte set cost more.
        let mut outside = vec![0u32; words];
        for b in (0..0x80u8).filter(|&b| b == 0x7F || class >> b & 1 == 0) {
            for (w, &held) in outside.iter_mut().zip(trie.holders(b)) {
                *w |= held;
            }
        }
        let mut exit_bits = vec![0u32; words];
        for b in (0..0x7Fu8).filter(|&b| is_exit(b)) {
            for (w, &held) in exit_bits.iter_mut().zip(trie.holders(b)) {
                *w |= held;
            }
        }
        // Without a slice, the tokens holding a non-ASCII exit byte exactly.
        let mut high_exits = vec![0u32; if slice.is_none() { words } else { 0 }];
        for b in (0x80..=0xFFu8).filter(|&b| slice.is_none() && is_exit(b)) {
            for (w, &held) in high_exits.iter_mut().zip(trie.holders(b)) {
                *w |= held;
            }
        }
        let high = trie.non_ascii_holders();
        let del = trie.holders(0x7F);
        let mut members_by_rank = vec![0u32; words];
        for w in 0..words {
            let valid = match (w + 1) * 32 > tokens {
                true => (1u32 << (tokens % 32)) - 1,
                false => u32::MAX,
            };
            // Made only of the class; or, widened, of the class and the slice's
            // characters (slice members hold no DEL; a cut character at their
            // end is alive where whole ones are).
            let mut members = !outside[w] & !high[w] & valid;
            let in_slice = slice.map_or(0, |slice| slice.members_by_rank()[w]);
            members |= !outside[w] & in_slice;
            members_by_rank[w] = members;
            // DEL or a non-ASCII byte: a slice's characters are members or dead,
            // the others walked; without a slice, read exactly.
            let beyond = (del[w] | high[w]) & !members;
            let beyond_exits = match slice {
                Some(_) => beyond & !in_slice,
                None if del_exits => beyond,
                None => beyond & high_exits[w],
            };
            exit_bits[w] = (exit_bits[w] | beyond_exits) & !members;
        }
        let exit_count: usize = exit_bits.iter().map(|w| w.count_ones() as usize).sum();
        if crowded || exit_count > max_exits {
            // Only a widened class goes on: every other token is walked.
            slice?;
            for (exit, members) in exit_bits.iter_mut().zip(&members_by_rank) {
                *exit = !members;
            }
            if let Some(last) = exit_bits.last_mut().filter(|_| !tokens.is_multiple_of(32)) {
                *last &= (1u32 << (tokens % 32)) - 1;
            }
        }
        let member_count = members_by_rank
            .iter()
            .map(|w| w.count_ones() as usize)
            .sum();
        let members = by_id(vocab, &members_by_rank, member_count);
        let longest_member = longest_member(trie, &members_by_rank);
        Some(ClassSlice {
            members,
            members_by_rank,
            longest_member,
            exits: RankSet::from_bits(exit_bits),
        })
    }

    /// Bits by token id.
    pub fn members(&self) -> &[u32] {
        &self.members
    }

    /// Bits by rank.
    pub fn members_by_rank(&self) -> &[u32] {
        &self.members_by_rank
    }

    /// The members at most `max_len` bytes long (a counter's budget), as bits by
    /// token id into `by_id` and by rank into `by_rank` (overwritten): two ANDs
    /// with the vocabulary's short tokens, not a walk.
    pub fn members_up_to(
        &self,
        vocab: &Vocabulary,
        max_len: usize,
        by_id: &mut [u32],
        by_rank: &mut [u32],
    ) {
        if max_len >= self.longest_member {
            by_id.copy_from_slice(&self.members);
            by_rank.copy_from_slice(&self.members_by_rank);
            return;
        }
        let trie = vocab.trie();
        let short = trie
            .ranks_up_to_len(max_len)
            .zip(vocab.ids_up_to_len(max_len));
        let Some((short_ranks, short_ids)) = short else {
            // Past the precomputed lengths: token by token.
            by_id.fill(0);
            by_rank.fill(0);
            for rank in ones(&self.members_by_rank) {
                let id = trie.token_ids()[rank];
                if vocab.token_bytes(id).len() <= max_len {
                    set_bit(by_id, id as usize);
                    set_bit(by_rank, rank);
                }
            }
            return;
        };
        for ((word, members), short) in by_rank
            .iter_mut()
            .zip(&self.members_by_rank)
            .zip(short_ranks)
        {
            *word = members & short;
        }
        for ((word, members), short) in by_id.iter_mut().zip(&self.members).zip(short_ids) {
            *word = members & short;
        }
    }

    /// Whether a token of `ranks` may have an exit as its first byte outside the
    /// class (holds an exit byte).
    #[inline]
    pub fn has_exit_in(&self, ranks: std::ops::Range<usize>) -> bool {
        self.exits.any_in(ranks)
    }

    /// Heap bytes held.
    pub fn memory_usage(&self) -> usize {
        (self.members.len() + self.members_by_rank.len()) * 4 + self.exits.memory_usage()
    }
}

/// The tokens of `by_rank` (`count` of them) as bits by id: the scattered
/// writes go to the fewer of them and of the other tokens with bytes.
fn by_id(vocab: &Vocabulary, by_rank: &[u32], count: usize) -> Vec<u32> {
    let token_ids = vocab.trie().token_ids();
    let flip = count > token_ids.len() / 2;
    let mut by_id = match flip {
        true => vocab.with_bytes().to_vec(),
        false => vec![0u32; vocab.len().div_ceil(32)],
    };
    for (w, &word) in by_rank.iter().enumerate() {
        let mut bits = if flip { !word } else { word };
        if w == by_rank.len() - 1 && !token_ids.len().is_multiple_of(32) {
            bits &= (1 << (token_ids.len() % 32)) - 1;
        }
        while bits != 0 {
            let id = token_ids[w * 32 + bits.trailing_zeros() as usize];
            flip_bit(&mut by_id, id as usize);
            bits &= bits - 1;
        }
    }
    by_id
}

/// The longest member's length (`members` by rank), or more where the trie
/// keeps no short ranks: a binary search over lengths, not a read per token.
fn longest_member(trie: &TokenTrie, members: &[u32]) -> usize {
    let fits = |len: usize| {
        trie.ranks_up_to_len(len)
            .is_some_and(|short| members.iter().zip(short).all(|(m, s)| m & !s == 0))
    };
    // Every token fits the longest token's length.
    let (mut shortest, mut longest) = (0, trie.max_depth());
    while shortest < longest {
        let middle = (shortest + longest) / 2;
        if fits(middle) {
            longest = middle;
        } else {
            shortest = middle + 1;
        }
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bits::has_bit;

    fn vocab(words: &[&str]) -> Vocabulary {
        Vocabulary::from_token_bytes(
            words.iter().map(|w| w.as_bytes().to_vec()).collect(),
            Vec::new(),
            Vec::new(),
        )
    }

    /// The exits, in byte order.
    fn exit_words<'a>(slice: &ClassSlice, v: &Vocabulary, words: &[&'a str]) -> Vec<&'a str> {
        let ranks = v.trie().token_ids().len();
        (0..ranks)
            .filter(|&r| slice.exits.contains(r))
            .map(|r| words[v.trie().token_ids()[r] as usize])
            .collect()
    }

    #[test]
    fn members_are_made_of_the_class_and_exits_hold_an_exit_byte() {
        let words = [
            "ab", "a\"", "a\",", "\"", "a.b", "é", "aé", "b", "ba\"x", ".\"", "",
        ];
        let v = vocab(&words);
        let class = (b'a'..=b'b').fold(0u128, |c, b| c | 1 << b);
        let exits = ByteSet::from_iter([b'"']);
        let slice = ClassSlice::new(&v, class, None, &exits, usize::MAX).unwrap();
        let members: Vec<&str> = (0..words.len() as u32)
            .filter(|&id| has_bit(slice.members(), id as usize))
            .map(|id| words[id as usize])
            .collect();
        assert_eq!(members, vec!["ab", "b"]);
        let exit_words = exit_words(&slice, &v, &words);
        // By byte order: the tokens holding a quote, `.\"` too (it leaves the
        // class by `.`, which the walk reads); not `aé` (no exit byte).
        assert_eq!(exit_words, vec!["\"", ".\"", "a\"", "a\",", "ba\"x"]);
        for rank in 0..v.trie().token_ids().len() {
            let id = v.trie().token_ids()[rank];
            let by_rank = has_bit(slice.members_by_rank(), rank);
            let by_id = has_bit(slice.members(), id as usize);
            assert_eq!(by_rank, by_id, "rank {rank}");
            assert_eq!(
                slice.has_exit_in(rank..rank + 1),
                exit_words.contains(&words[id as usize])
            );
        }
        assert!(slice.has_exit_in(0..v.trie().token_ids().len()));
        assert!(!slice.has_exit_in(0..0));
        // Five tokens hold a quote; `."` is not an exit but counts toward the bound.
        assert!(ClassSlice::new(&v, class, None, &exits, 4).is_none());
        assert!(ClassSlice::new(&v, class, None, &exits, 5).is_some());
    }

    /// A counter's members: those at most a budget long, by id and by rank alike,
    /// through the precomputed short tokens and past them token by token.
    #[test]
    fn members_up_to_a_length_are_the_short_members() {
        let long = "ab".repeat(100);
        let words = ["a", "ba", "abab", "a.", "bbbbbbb", long.as_str(), "b\"", ""];
        let v = vocab(&words);
        let class = (b'a'..=b'b').fold(0u128, |c, b| c | 1 << b);
        let slice = ClassSlice::new(&v, class, None, &ByteSet::EMPTY, usize::MAX).unwrap();
        assert_eq!(slice.longest_member, 200);
        let mut by_id = vec![0u32; slice.members().len()];
        let mut by_rank = vec![0u32; slice.members_by_rank().len()];
        for max_len in [0, 1, 2, 4, 6, 7, 150, 199, 200, 500] {
            slice.members_up_to(&v, max_len, &mut by_id, &mut by_rank);
            let expected: Vec<&str> = words
                .iter()
                .copied()
                .filter(|w| !w.is_empty() && w.len() <= max_len)
                .filter(|w| w.bytes().all(|b| class >> b & 1 != 0))
                .collect();
            let got: Vec<&str> = (0..words.len())
                .filter(|&id| has_bit(&by_id, id))
                .map(|id| words[id])
                .collect();
            assert_eq!(got, expected, "up to {max_len} bytes");
            for rank in 0..v.trie().token_ids().len() {
                let id = v.trie().token_ids()[rank] as usize;
                let bit = has_bit(&by_rank, rank);
                assert_eq!(
                    bit,
                    got.contains(&words[id]),
                    "rank {rank}, up to {max_len}"
                );
            }
        }
    }

    #[test]
    fn a_non_ascii_exit_is_told_from_other_non_ascii_bytes() {
        let words = ["aé", "éa", "a.é", "a", "aЖ", "Ж"];
        let v = vocab(&words);
        let class = 1u128 << b'a';
        let exits = ByteSet::from_iter([0xC3]); // é is C3 A9
        let slice = ClassSlice::new(&v, class, None, &exits, usize::MAX).unwrap();
        let exit_words = exit_words(&slice, &v, &words);
        // The tokens holding C3, `a.é` too (the walk reads that it leaves the
        // class by `.`); not `aЖ` (D0 is no exit).
        assert_eq!(exit_words, vec!["a.é", "aé", "éa"]);
        // Tokens holding C3 (`a.é` too) count toward the bound, not those with
        // other non-ASCII bytes.
        assert!(ClassSlice::new(&v, class, None, &exits, 3).is_some());
        assert!(ClassSlice::new(&v, class, None, &exits, 2).is_none());
    }

    #[test]
    fn a_class_may_hold_the_non_ascii_characters_of_a_slice() {
        let words = ["aé", "éa", "a.é", "a", "aЖ", "Ж", "a\"", "é\""];
        let v = vocab(&words);
        let class = 1u128 << b'a';
        let exits = ByteSet::from_iter([b'"']);
        let chars = Some(SliceChars::StringBody);
        let slice = ClassSlice::new(&v, class, chars, &exits, usize::MAX).unwrap();
        let members: Vec<&str> = (0..words.len() as u32)
            .filter(|&id| has_bit(slice.members(), id as usize))
            .map(|id| words[id as usize])
            .collect();
        assert_eq!(members, vec!["aé", "éa", "a", "aЖ", "Ж"]);
        // `a.é` dies at `.`: its `é` is a slice character, so it is not walked.
        assert_eq!(exit_words(&slice, &v, &words), vec!["a\"", "é\""]);
        // Past the bound, a widened class keeps its members and walks every
        // other token; the ASCII class alone gives up.
        let crowded = ClassSlice::new(&v, class, chars, &exits, 1).unwrap();
        assert_eq!(crowded.members(), slice.members());
        assert_eq!(crowded.members_by_rank(), slice.members_by_rank());
        assert_eq!(exit_words(&crowded, &v, &words), vec!["a\"", "a.é", "é\""]);
        assert!(ClassSlice::new(&v, class, None, &exits, 1).is_none());
    }
}
