//! Byte classes: the alphabet a terminal's transition table is written over.
//!
//! Every builder refines the classes of the automata it combines (a literal's
//! bytes told apart from its suffix's classes, a counter's leaf and suffix
//! together), and precomputes per class the bytes it holds, so that "which bytes
//! does this state survive" is one OR per class, not one step per byte.

use std::sync::Arc;

use super::{State, DEAD, NO_BYTE};

/// `classes` refined so that every byte `told_apart` is a class of its own, with
/// one representative byte per class (in class order).
pub(super) fn refine_classes(
    classes: &[u8; 256],
    told_apart: impl Fn(u8) -> bool,
) -> ([u8; 256], Vec<u8>) {
    // A byte told apart is keyed by itself: 256 + b never equals a class.
    classes_by(|b| {
        if told_apart(b) {
            256 + b as u16
        } else {
            classes[b as usize] as u16
        }
    })
}

/// Byte classes that tell bytes apart exactly when their `key`s differ, with one
/// representative byte per class (in class order: a class's number is the rank of
/// its key's first byte). Linear: a chained terminal refines its rest's classes
/// for every literal, thousands of times in a large schema's compile.
pub(super) fn classes_by(key: impl Fn(u8) -> u16) -> ([u8; 256], Vec<u8>) {
    let mut class_of_key: rustc_hash::FxHashMap<u16, u8> = Default::default();
    let mut refined = [0u8; 256];
    let mut representatives: Vec<u8> = Vec::new();
    for b in 0..=255u8 {
        let class = *class_of_key.entry(key(b)).or_insert_with(|| {
            representatives.push(b);
            (representatives.len() - 1) as u8
        });
        refined[b as usize] = class;
    }
    (refined, representatives)
}

/// Per byte class (of `stride`), its bytes as 256 bits.
pub(super) fn bytes_by_class(classes: &[u8; 256], stride: usize) -> Arc<[[u64; 4]]> {
    let mut bytes = vec![[0u64; 4]; stride];
    for (b, &class) in classes.iter().enumerate() {
        bytes[class as usize][b >> 6] |= 1 << (b & 63);
    }
    bytes.into()
}

/// Per row of `transitions` (`stride` classes wide, `class_bytes` their bytes):
/// see [`Terminal::only_bytes`].
pub(super) fn only_bytes_of(
    transitions: &[State],
    stride: usize,
    class_bytes: &[[u64; 4]],
) -> Vec<u16> {
    transitions
        .chunks_exact(stride)
        .map(|row| {
            let mut live = [0u64; 4];
            for (_, bytes) in row.iter().zip(class_bytes).filter(|(&to, _)| to != DEAD) {
                for (word, byte_word) in live.iter_mut().zip(bytes) {
                    *word |= byte_word;
                }
            }
            only_byte(&live).map_or(NO_BYTE, u16::from)
        })
        .collect()
}

/// The byte of a set of bytes (bit `b % 64` of word `b / 64`) holding exactly one.
pub(super) fn only_byte(bytes: &[u64; 4]) -> Option<u8> {
    let one = bytes.iter().map(|w| w.count_ones()).sum::<u32>() == 1;
    let word = bytes.iter().position(|&w| w != 0).filter(|_| one)?;
    Some((word * 64) as u8 + bytes[word].trailing_zeros() as u8)
}

/// The bytes of a class of ASCII bytes below DEL (bit `b` of the `u128`).
pub(crate) fn class_bytes(class: u128) -> impl Iterator<Item = u8> {
    // By set bit, not by byte: a class of one byte is asked once per state
    // and byte of a closed class's growth.
    let mut rest = class & !(1 << 0x7f);
    std::iter::from_fn(move || {
        let byte = (rest != 0).then(|| rest.trailing_zeros() as u8)?;
        rest &= rest - 1;
        Some(byte)
    })
}
