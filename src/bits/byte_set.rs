//! [`ByteSet`]: a set of bytes as 256 bits.
//!
//! Byte sets travel between the layers: the bytes an automaton state survives
//! (one OR of per-class sets), the bytes that leave a closed class, the bytes
//! the matcher allows next. A `bitvec` array of four `u64` words: a copy type,
//! hashable (token tables key caches on exit sets), unions a word at a time.

use std::fmt;

use bitvec::prelude::{BitArray, Lsb0};

/// A set of bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ByteSet(BitArray<[u64; 4], Lsb0>);

impl ByteSet {
    /// The empty set.
    pub const EMPTY: ByteSet = ByteSet(BitArray::ZERO);

    /// The bytes of an ASCII class given as bit `b` of a `u128`.
    pub fn from_ascii_class(class: u128) -> ByteSet {
        ByteSet(BitArray::new([class as u64, (class >> 64) as u64, 0, 0]))
    }

    /// Every byte from 0x80 on.
    pub fn non_ascii() -> ByteSet {
        ByteSet(BitArray::new([0, 0, u64::MAX, u64::MAX]))
    }

    pub fn insert(&mut self, b: u8) {
        self.0.set(b as usize, true);
    }

    #[inline]
    pub fn contains(&self, b: u8) -> bool {
        self.0.as_raw_slice()[b as usize / 64] >> (b % 64) & 1 != 0
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.words() == [0; 4]
    }

    pub fn len(&self) -> usize {
        self.0.count_ones()
    }

    /// The bytes, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u8> + '_ {
        self.0.iter_ones().map(|b| b as u8)
    }

    /// The byte, where the set holds exactly one.
    pub fn only(&self) -> Option<u8> {
        let first = self.0.first_one()?;
        (self.0.last_one() == Some(first)).then_some(first as u8)
    }

    /// The four words, bit `b % 64` of word `b / 64`.
    #[inline]
    pub fn words(&self) -> [u64; 4] {
        self.0.into_inner()
    }

    /// Adds every byte of `other`. On the raw words: the candidate walk unions
    /// a state's class sets after every boundary it meets.
    #[inline]
    pub fn union_with(&mut self, other: &ByteSet) {
        for (word, more) in self
            .0
            .as_raw_mut_slice()
            .iter_mut()
            .zip(other.0.as_raw_slice())
        {
            *word |= more;
        }
    }

    /// The bytes in both.
    #[inline]
    pub fn intersection(&self, other: &ByteSet) -> ByteSet {
        let (a, b) = (self.words(), other.words());
        ByteSet(BitArray::new([
            a[0] & b[0],
            a[1] & b[1],
            a[2] & b[2],
            a[3] & b[3],
        ]))
    }

    /// The bytes not in the set.
    pub fn complement(&self) -> ByteSet {
        ByteSet(!self.0)
    }

    /// Whether some byte from 0x80 on is in the set.
    pub fn has_non_ascii(&self) -> bool {
        self.0[0x80..].any()
    }

    /// As a trie's [`SubtreeBytes`](crate::vocab::SubtreeBytes) class: exact
    /// below DEL, DEL and every byte from 0x80 on one bit.
    pub fn as_subtree_bytes(&self) -> crate::vocab::SubtreeBytes {
        let words = self.words();
        let high = words[1] >> 63 != 0 || words[2] != 0 || words[3] != 0;
        let low = words[0] as u128 | ((words[1] as u128) << 64);
        crate::vocab::SubtreeBytes(low | (high as u128) << 127)
    }

    /// Maximal runs of consecutive bytes, as inclusive ranges.
    pub fn ranges(&self) -> Vec<(u8, u8)> {
        let mut out: Vec<(u8, u8)> = Vec::new();
        for b in self.iter() {
            match out.last_mut() {
                Some((_, hi)) if *hi as u16 + 1 == b as u16 => *hi = b,
                _ => out.push((b, b)),
            }
        }
        out
    }
}

impl FromIterator<u8> for ByteSet {
    fn from_iter<I: IntoIterator<Item = u8>>(bytes: I) -> ByteSet {
        let mut set = ByteSet::EMPTY;
        for b in bytes {
            set.insert(b);
        }
        set
    }
}

impl fmt::Debug for ByteSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&describe_byte_ranges(&self.ranges()).join(", "))
    }
}

/// Renders byte ranges for people: printable ASCII as characters, the rest as hex.
pub fn describe_byte_ranges(ranges: &[(u8, u8)]) -> Vec<String> {
    fn one(b: u8) -> String {
        match b {
            b' ' => "' '".into(),
            0x21..=0x7e => format!("'{}'", b as char),
            _ => format!("0x{b:02X}"),
        }
    }
    ranges
        .iter()
        .map(|&(lo, hi)| {
            if lo == hi {
                one(lo)
            } else {
                format!("{}-{}", one(lo), one(hi))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sets_hold_their_bytes() {
        let set: ByteSet = [b'a', b'b', b'c', 0x7f, 0x80, 0xff].into_iter().collect();
        assert_eq!(set.len(), 6);
        assert!(set.contains(b'b') && !set.contains(b'd'));
        assert_eq!(set.ranges(), [(b'a', b'c'), (0x7f, 0x80), (0xff, 0xff)]);
        assert!(set.has_non_ascii());
        assert_eq!(set.only(), None);
        assert_eq!(ByteSet::from_iter([b'x']).only(), Some(b'x'));
        assert_eq!(ByteSet::EMPTY.only(), None);
        let ascii = ByteSet::from_ascii_class(1 << b'a' | 1 << 0x7f);
        assert_eq!(
            set.intersection(&ascii).ranges(),
            [(b'a', b'a'), (0x7f, 0x7f)]
        );
        assert_eq!(set.complement().len(), 250);
        assert_eq!(format!("{set:?}"), "'a'-'c', 0x7F-0x80, 0xFF");
    }
}
