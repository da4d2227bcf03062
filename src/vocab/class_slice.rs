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

use super::{RankSet, SliceChars, SubtreeBytes, Vocabulary};

/// The tokens made only of an ASCII class, and those whose first byte outside it
/// is one of a set of exit bytes.
#[derive(Debug)]
pub struct ClassSlice {
    /// Members as bits by token id.
    members: Vec<u32>,
    /// Members as bits by rank.
    members_by_rank: Vec<u32>,
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
        Some(ClassSlice {
            members,
            members_by_rank,
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
