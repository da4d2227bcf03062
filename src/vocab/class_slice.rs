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
//! holds the members and those exit tokens' ranks; it is built per (class, exits)
//! on demand (patterns bring their own classes), from the trie's per-token byte
//! sets rather than from every token's bytes. The class may also hold a slice's
//! non-ASCII characters (a key that is any string without a digit), read from the
//! vocabulary's precomputed [`TokenSlice`](super::TokenSlice) membership.

use super::{RankSet, SliceChars, SubtreeBytes, TokenTrie, Vocabulary};

/// The tokens made only of an ASCII class, and those whose first byte outside it
/// is one of a set of exit bytes.
#[derive(Debug)]
pub struct ClassSlice {
    /// Members as bits by token id.
    members: Vec<u32>,
    /// Members as bits by rank.
    members_by_rank: Vec<u32>,
    /// The longest member's length.
    longest_member: usize,
    /// The tokens whose first byte outside the class is an exit (a superset where
    /// they hold a non-ASCII byte the class may not read).
    exits: RankSet,
}

impl ClassSlice {
    /// `class`: ASCII bytes below DEL (bit `b` of the `u128`); `exits`: bytes
    /// outside it (bit `b % 64` of word `b / 64`). `None` when more than
    /// `max_exits` tokens hold an exit byte outside the class: the walk would enter
    /// most subtrees anyway (a URL pattern's path, where spaces, capitals and `/`
    /// all go on).
    ///
    /// With `non_ascii`, the class also holds that slice's non-ASCII characters
    /// (complete ones: a token splitting one is walked, as is any token with a
    /// non-ASCII byte that is not a member).
    pub fn new(
        vocab: &Vocabulary,
        class: u128,
        non_ascii: Option<SliceChars>,
        exits: &[u64; 4],
        max_exits: usize,
    ) -> Option<ClassSlice> {
        debug_assert!(class >> 127 == 0, "DEL and non-ASCII bytes share bit 127");
        let trie = vocab.trie();
        let ranks = trie.token_ids().len();
        let mut members = vec![0u32; vocab.len().div_ceil(32)];
        let mut members_by_rank = vec![0u32; ranks.div_ceil(32)];
        // A token holding none of the exit bytes cannot have one as its first
        // byte outside the class: ASCII exits below DEL, non-ASCII ones exactly;
        // bit 127 of a token's ASCII set is DEL or any non-ASCII byte, so DEL as
        // an exit is told apart below.
        let is_exit = |b: u8| exits[b as usize / 64] >> (b % 64) & 1 != 0;
        // Every token holding an exit byte is walked or told apart below: when
        // one byte alone is held by too many, give up before the scan.
        // (A non-ASCII exit byte may sit in a widened class's member.)
        let bounded = |b: u8| non_ascii.is_none() || b < 0x80;
        if (0..=255u8).any(|b| is_exit(b) && bounded(b) && vocab.tokens_holding(b) > max_exits) {
            return None;
        }
        let exit_low = (0..0x7Fu8)
            .filter(|&b| is_exit(b))
            .fold(0u128, |set, b| set | 1 << b);
        let del_exits = exits[1] >> 63 & 1 != 0;
        let exit_high = (exits[2] as u128) | (exits[3] as u128) << 64;
        // Tokens holding an exit byte outside the class: a superset of the exits.
        let mut holding_exits = Vec::new();
        let slice = non_ascii.map(|chars| vocab.slice(chars));
        let non_ascii_bit = SubtreeBytes::of_byte(0x80).0;
        for rank in 0..ranks {
            let (bytes, high) = trie.token_byte_set(rank);
            // Slice members hold neither DEL nor a split character.
            let in_slice = slice
                .is_some_and(|slice| slice.members_by_rank()[rank / 32] >> (rank % 32) & 1 != 0);
            let member =
                bytes.0 & !class == 0 || (in_slice && bytes.0 & !(class | non_ascii_bit) == 0);
            let may_hold_del = bytes.0 & non_ascii_bit != 0 && (high == 0 || !in_slice);
            if member {
                let id = trie.token_ids()[rank];
                members[id as usize / 32] |= 1 << (id % 32);
                members_by_rank[rank / 32] |= 1 << (rank % 32);
            } else if bytes.0 & exit_low != 0
                || high & exit_high != 0
                || (del_exits && may_hold_del)
                || (slice.is_some() && high != 0 && !in_slice)
            {
                if holding_exits.len() == max_exits {
                    return None;
                }
                holding_exits.push(rank as u32);
            }
        }
        let in_class = |b: u8| b < 127 && class >> b & 1 != 0;
        holding_exits.retain(|&rank| {
            if slice.is_some() && trie.token_byte_set(rank as usize).1 != 0 {
                return true;
            }
            let token = vocab.token_bytes(trie.token_ids()[rank as usize]);
            let first_outside = token.iter().copied().find(|&b| !in_class(b));
            first_outside.is_some_and(is_exit)
        });
        let mut exit_bits = vec![0u32; ranks.div_ceil(32)];
        for &rank in &holding_exits {
            exit_bits[rank as usize / 32] |= 1 << (rank % 32);
        }
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
            for (w, &word) in self.members_by_rank.iter().enumerate() {
                let mut bits = word;
                while bits != 0 {
                    let rank = w * 32 + bits.trailing_zeros() as usize;
                    let id = trie.token_ids()[rank];
                    if vocab.token_bytes(id).len() <= max_len {
                        by_id[id as usize / 32] |= 1 << (id % 32);
                        by_rank[w] |= 1 << (rank % 32);
                    }
                    bits &= bits - 1;
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

    /// Whether a token of `ranks` has an exit as its first byte outside the class.
    #[inline]
    pub fn has_exit_in(&self, ranks: std::ops::Range<usize>) -> bool {
        self.exits.any_in(ranks)
    }

    /// Heap bytes held.
    pub fn memory_usage(&self) -> usize {
        (self.members.len() + self.members_by_rank.len()) * 4 + self.exits.memory_usage()
    }
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
    fn members_are_made_of_the_class_and_exits_leave_it_by_an_exit() {
        let words = [
            "ab", "a\"", "a\",", "\"", "a.b", "é", "aé", "b", "ba\"x", ".\"", "",
        ];
        let v = vocab(&words);
        let class = (b'a'..=b'b').fold(0u128, |c, b| c | 1 << b);
        let mut exits = [0u64; 4];
        exits[0] |= 1 << b'"';
        let slice = ClassSlice::new(&v, class, None, &exits, usize::MAX).unwrap();
        let members: Vec<&str> = (0..words.len() as u32)
            .filter(|&id| slice.members()[id as usize / 32] >> (id % 32) & 1 != 0)
            .map(|id| words[id as usize])
            .collect();
        assert_eq!(members, vec!["ab", "b"]);
        let exit_words = exit_words(&slice, &v, &words);
        // By byte order; `.\"` leaves the class by `.`, `aé` by a non-ASCII byte.
        assert_eq!(exit_words, vec!["\"", "a\"", "a\",", "ba\"x"]);
        for rank in 0..v.trie().token_ids().len() {
            let id = v.trie().token_ids()[rank];
            let by_rank = slice.members_by_rank()[rank / 32] >> (rank % 32) & 1;
            let by_id = slice.members()[id as usize / 32] >> (id % 32) & 1;
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
        let slice = ClassSlice::new(&v, class, None, &[0; 4], usize::MAX).unwrap();
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
                .filter(|&id| by_id[id / 32] >> (id % 32) & 1 != 0)
                .map(|id| words[id])
                .collect();
            assert_eq!(got, expected, "up to {max_len} bytes");
            for rank in 0..v.trie().token_ids().len() {
                let id = v.trie().token_ids()[rank] as usize;
                let bit = by_rank[rank / 32] >> (rank % 32) & 1 != 0;
                assert_eq!(
                    bit,
                    got.contains(&words[id]),
                    "rank {rank}, up to {max_len}"
                );
            }
        }
    }

    #[test]
    fn a_non_ascii_exit_is_read_from_the_token_bytes() {
        let words = ["aé", "éa", "a.é", "a", "aЖ", "Ж"];
        let v = vocab(&words);
        let class = 1u128 << b'a';
        let mut exits = [0u64; 4];
        exits[3] |= 1 << (0xC3 % 64); // é is C3 A9
        let slice = ClassSlice::new(&v, class, None, &exits, usize::MAX).unwrap();
        let exit_words = exit_words(&slice, &v, &words);
        // `a.é` leaves the class by `.`, `aЖ` by D0.
        assert_eq!(exit_words, vec!["aé", "éa"]);
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
        let mut exits = [0u64; 4];
        exits[0] |= 1 << b'"';
        let chars = Some(SliceChars::StringBody);
        let slice = ClassSlice::new(&v, class, chars, &exits, usize::MAX).unwrap();
        let members: Vec<&str> = (0..words.len() as u32)
            .filter(|&id| slice.members()[id as usize / 32] >> (id % 32) & 1 != 0)
            .map(|id| words[id as usize])
            .collect();
        assert_eq!(members, vec!["aé", "éa", "a", "aЖ", "Ж"]);
        // `a.é` dies at `.`: its `é` is a slice character, so it is not walked.
        assert_eq!(exit_words(&slice, &v, &words), vec!["a\"", "é\""]);
    }
}
