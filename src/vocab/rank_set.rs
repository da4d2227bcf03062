//! Sets of tokens by rank (position in the vocabulary trie's byte order): the
//! shape token tables keep candidates in, since a trie subtree's tokens are a
//! range of ranks and "does this subtree hold one" must be O(1).

/// A set of tokens indexed by rank (position in the vocabulary trie's byte order),
/// with per-word prefix counts so "any member in this rank range" is O(1). It may
/// cover only a window of ranks (from word `first_word` on): none outside.
#[derive(Debug)]
pub struct RankSet {
    first_word: usize,
    bits: Vec<u32>,
    /// `prefix[w]`: members with rank below `32 * (first_word + w)`.
    prefix: Vec<u32>,
}

impl RankSet {
    /// The set of `bits`, kept over the window of its non-zero words (a
    /// configuration's candidates are often a few subtrees).
    pub fn from_bits(bits: Vec<u32>) -> RankSet {
        let first = bits.iter().position(|&w| w != 0).unwrap_or(0);
        let end = bits
            .iter()
            .rposition(|&w| w != 0)
            .map_or(first, |last| last + 1);
        if end - first == bits.len() {
            return RankSet::from_window(0, bits);
        }
        RankSet::from_window(first, bits[first..end].to_vec())
    }

    /// The set whose word `first_word + w` is `bits[w]`.
    pub fn from_window(first_word: usize, bits: Vec<u32>) -> RankSet {
        let mut prefix = Vec::with_capacity(bits.len() + 1);
        let mut count = 0u32;
        for &w in &bits {
            prefix.push(count);
            count += w.count_ones();
        }
        prefix.push(count);
        RankSet {
            first_word,
            bits,
            prefix,
        }
    }

    /// Members with rank below `rank`.
    #[inline]
    fn below(&self, rank: usize) -> u32 {
        let Some(rank) = rank.checked_sub(self.first_word * 32) else {
            return 0;
        };
        let (w, b) = (rank / 32, rank % 32);
        let partial = match self.bits.get(w) {
            Some(&word) if b > 0 => (word & ((1u32 << b) - 1)).count_ones(),
            _ => 0,
        };
        self.prefix[w.min(self.prefix.len() - 1)] + partial
    }

    /// Whether some member has a rank in `range`.
    #[inline]
    pub fn any_in(&self, range: std::ops::Range<usize>) -> bool {
        self.below(range.end) > self.below(range.start)
    }

    #[inline]
    pub fn contains(&self, rank: usize) -> bool {
        (rank / 32)
            .checked_sub(self.first_word)
            .and_then(|w| self.bits.get(w))
            .is_some_and(|w| w & (1 << (rank % 32)) != 0)
    }

    /// Word `w` of the bits (rank `32 * w + b` is bit `b`), 0 outside the window.
    #[inline]
    pub fn word(&self, w: usize) -> u32 {
        w.checked_sub(self.first_word)
            .and_then(|w| self.bits.get(w))
            .copied()
            .unwrap_or(0)
    }

    pub fn len(&self) -> usize {
        self.prefix.last().copied().unwrap_or(0) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes held.
    pub fn memory_usage(&self) -> usize {
        (self.bits.len() + self.prefix.len()) * 4
    }
}
