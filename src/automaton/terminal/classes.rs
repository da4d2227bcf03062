//! Byte classes: the alphabet a terminal's transition table is written over.
//!
//! Every builder refines the classes of the automata it combines (a literal's
//! bytes told apart from its suffix's classes, a counter's leaf and suffix
//! together), and precomputes per class the bytes it holds, so that "which bytes
//! does this state survive" is one OR per class, not one step per byte.

use std::sync::Arc;

use super::{State, DEAD, NO_BYTE};
use crate::bits::ByteSet;

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
pub(super) fn classes_by<K: Eq + std::hash::Hash>(key: impl Fn(u8) -> K) -> ([u8; 256], Vec<u8>) {
    let mut class_of_key: rustc_hash::FxHashMap<K, u8> = Default::default();
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

/// Per byte class (of `stride`), its bytes.
pub(super) fn bytes_by_class(classes: &[u8; 256], stride: usize) -> Arc<[ByteSet]> {
    let mut bytes = vec![ByteSet::EMPTY; stride];
    for (b, &class) in (0..=255u8).zip(classes) {
        bytes[class as usize].insert(b);
    }
    bytes.into()
}

/// Per row of `transitions` (`stride` classes wide, `class_bytes` their bytes):
/// see [`Terminal::only_bytes`].
pub(super) fn only_bytes_of(
    transitions: &[State],
    stride: usize,
    class_bytes: &[ByteSet],
) -> Vec<u16> {
    transitions
        .chunks_exact(stride)
        .map(|row| {
            let mut live = ByteSet::EMPTY;
            for (_, bytes) in row.iter().zip(class_bytes).filter(|(&to, _)| to != DEAD) {
                live.union_with(bytes);
            }
            live.only().map_or(NO_BYTE, u16::from)
        })
        .collect()
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
