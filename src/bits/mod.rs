//! Bit sets the layers hand each other: token masks over a vocabulary, and sets
//! of bytes.
//!
//! A token mask is [`MaskBits`], `bitvec`'s `BitSlice<u32, Lsb0>`: token `i` is
//! bit `i % 32` of word `i / 32`, least significant first, the layout XGrammar,
//! llguidance and the inference engines' samplers take. Masks are stored and
//! passed as `[u32]` words (that is what crosses an engine's boundary) and read
//! through [`bits`]/[`bits_mut`], and ranges are set and cleared through
//! `bitvec`, a word at a time. The single-bit operations and the scans over set
//! bits ([`set_bit`], [`try_set_bit`], [`has_bit`], [`ones`], [`runs`]) work on
//! the raw words: they run once per token in the mask loops, where a shift and
//! an OR on the word is all the work, and a `bitvec` view would add its
//! encoded-pointer arithmetic to every token.
//!
//! [`ByteSet`] is a set of bytes (256 bits): what a state survives, what the
//! matcher allows next, the bytes that leave a class.

pub(crate) mod byte_set;

pub use bitvec;
use bitvec::prelude::{BitSlice, Lsb0};
pub use byte_set::ByteSet;

/// A token mask over a vocabulary, bit `i` for token `i`.
pub type MaskBits = BitSlice<u32, Lsb0>;

/// Words of a mask over `tokens` tokens.
#[inline]
pub fn mask_words(tokens: usize) -> usize {
    tokens.div_ceil(32)
}

/// `words` read as a mask.
#[inline]
pub fn bits(words: &[u32]) -> &MaskBits {
    BitSlice::from_slice(words)
}

/// `words` written as a mask.
#[inline]
pub fn bits_mut(words: &mut [u32]) -> &mut MaskBits {
    BitSlice::from_slice_mut(words)
}

/// Sets bit `i` (which must lie within `words`): one OR on its word, for the
/// loops that set a bit per token they visit.
#[inline(always)]
pub fn set_bit(words: &mut [u32], i: usize) {
    words[i / 32] |= 1 << (i % 32);
}

/// Sets bit `i` where it lies within `words` (a token past a mask's end is left
/// out, never a panic); whether it did.
#[inline]
pub fn try_set_bit(words: &mut [u32], i: usize) -> bool {
    match words.get_mut(i / 32) {
        Some(word) => {
            *word |= 1 << (i % 32);
            true
        }
        None => false,
    }
}

/// Flips bit `i` (which must lie within `words`).
#[inline]
pub fn flip_bit(words: &mut [u32], i: usize) {
    words[i / 32] ^= 1 << (i % 32);
}

/// Clears bit `i` (which must lie within `words`).
#[inline]
pub fn clear_bit(words: &mut [u32], i: usize) {
    words[i / 32] &= !(1 << (i % 32));
}

/// Bit `i`, `false` past the end of `words`.
#[inline]
pub fn has_bit(words: &[u32], i: usize) -> bool {
    words
        .get(i / 32)
        .is_some_and(|word| word >> (i % 32) & 1 != 0)
}

/// Sets bits `range`.
#[inline]
pub fn set_range(words: &mut [u32], range: std::ops::Range<usize>) {
    bits_mut(words)[range].fill(true);
}

/// Clears bits `range`.
#[inline]
pub fn clear_range(words: &mut [u32], range: std::ops::Range<usize>) {
    bits_mut(words)[range].fill(false);
}

/// The positions of the set bits, ascending.
#[inline]
pub fn ones(words: &[u32]) -> impl Iterator<Item = usize> + '_ {
    words.iter().enumerate().flat_map(|(w, &word)| {
        let mut rest = word;
        std::iter::from_fn(move || {
            let bit = (rest != 0).then(|| rest.trailing_zeros() as usize)?;
            rest &= rest - 1;
            Some(w * 32 + bit)
        })
    })
}

/// The runs of set bits as `(start, end)` ranges, if there are at most `limit`.
pub fn runs(words: &[u32], limit: usize) -> Option<Vec<(u32, u32)>> {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    // Most words are empty: skip them 16 at a time.
    const CHUNK: usize = 16;
    for (c, chunk) in words.chunks(CHUNK).enumerate() {
        if chunk.iter().fold(0, |any, &w| any | w) == 0 {
            continue;
        }
        for (i, &word) in chunk.iter().enumerate() {
            let w = c * CHUNK + i;
            let mut rest = word;
            while rest != 0 {
                let skip = rest.trailing_zeros();
                let start = w as u32 * 32 + skip;
                // The run's length inside this word: ones from `start` on.
                let run = (rest >> skip).trailing_ones();
                let end = start + run;
                match ranges.last_mut() {
                    Some(last) if last.1 == start => last.1 = end,
                    _ => {
                        if ranges.len() == limit {
                            return None;
                        }
                        ranges.push((start, end));
                    }
                }
                rest = if run + skip >= 32 {
                    0
                } else {
                    rest & !(((1u32 << run) - 1) << skip)
                };
            }
        }
    }
    Some(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_set_and_clear_exactly_their_bits() {
        for start in 0..100 {
            for end in start..100 {
                let mut words = vec![0u32; 4];
                set_range(&mut words, start..end);
                let mut full = vec![u32::MAX; 4];
                clear_range(&mut full, start..end);
                for i in 0..128 {
                    let inside = (start..end).contains(&i);
                    assert_eq!(
                        words[i / 32] >> (i % 32) & 1 == 1,
                        inside,
                        "{start}..{end} at {i}"
                    );
                    assert_eq!(has_bit(&full, i), !inside, "{start}..{end} at {i}");
                }
                let positions: Vec<usize> = ones(&words).collect();
                assert_eq!(positions, (start..end).collect::<Vec<_>>());
            }
        }
        assert!(!has_bit(&[u32::MAX], 32));
        let mut short = [0u32];
        assert!(!try_set_bit(&mut short, 32) && try_set_bit(&mut short, 31));
        assert_eq!(short, [1 << 31]);
    }

    #[test]
    fn runs_are_the_runs_of_set_bits() {
        let runs_in = [(0, 1), (3, 40), (63, 64), (64, 100), (127, 128)];
        let mut words = vec![0u32; 4];
        for &(a, b) in &runs_in {
            set_range(&mut words, a..b);
        }
        // Adjacent runs read as one.
        assert_eq!(
            runs(&words, 10),
            Some(vec![(0, 1), (3, 40), (63, 100), (127, 128)])
        );
        assert_eq!(runs(&words, 3), None);
        assert_eq!(runs(&[0, 0], 1), Some(vec![]));
        assert_eq!(runs(&[u32::MAX, u32::MAX], 1), Some(vec![(0, 64)]));
        let mut one = vec![0u32; 2];
        set_bit(&mut one, 33);
        assert_eq!(runs(&one, 1), Some(vec![(33, 34)]));
    }
}
