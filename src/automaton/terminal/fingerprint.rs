//! Structural fingerprints: 128-bit names for regexes and automata.
//!
//! Caches key on them: the lowering deduplicates terminals by their regex's
//! fingerprint, and automata and token tables are shared across compiles under
//! the automaton's. A regex is fingerprinted by serialising its tree into one
//! byte buffer (`Hir` is not `Hash`, and printing it was a tenth of a compile).

use regex_syntax::hir::Hir;

/// 128 bits of SipHash over `value` (two differently seeded passes).
pub(crate) fn fingerprint_of(value: &impl std::hash::Hash) -> u128 {
    use std::hash::{DefaultHasher, Hasher};
    let half = |seed: u8| {
        let mut hasher = DefaultHasher::new();
        hasher.write_u8(seed);
        value.hash(&mut hasher);
        hasher.finish() as u128
    };
    (half(0) << 64) | half(1)
}

/// Identifies a regex by its structure (a [`fingerprint_of`] its tree): equal
/// fingerprints, equal languages. The key of the terminals a lowering
/// deduplicates and of the automata shared across compiles; printing the regex
/// as the key cost a tenth of a schema's compile.
pub(crate) fn hir_fingerprint(hir: &Hir) -> u128 {
    let mut tree = Vec::new();
    write_tree(hir, &mut tree);
    fingerprint_of(&tree)
}

/// The fingerprint `Hir::concat(items)` would have, without building it (`items`
/// taken from a concatenation, so already flat).
pub(crate) fn concat_fingerprint(items: &[Hir]) -> u128 {
    match items {
        [] => hir_fingerprint(&Hir::empty()),
        [one] => hir_fingerprint(one),
        many => {
            let mut tree = Vec::new();
            write_concat(many, &mut tree);
            fingerprint_of(&tree)
        }
    }
}

/// Appends `hir`'s tree to `out`, node by node, as bytes: one buffer hashes
/// several times faster than a hasher fed field by field (`Hir` is not `Hash`).
fn write_tree(hir: &Hir, out: &mut Vec<u8>) {
    use regex_syntax::hir::{Class, HirKind};
    let number = |out: &mut Vec<u8>, n: u32| out.extend_from_slice(&n.to_le_bytes());
    match hir.kind() {
        HirKind::Empty => out.push(0),
        HirKind::Literal(literal) => {
            out.push(1);
            number(out, literal.0.len() as u32);
            out.extend_from_slice(&literal.0);
        }
        HirKind::Class(Class::Unicode(class)) => {
            out.push(2);
            number(out, class.ranges().len() as u32);
            for range in class.ranges() {
                number(out, range.start() as u32);
                number(out, range.end() as u32);
            }
        }
        HirKind::Class(Class::Bytes(class)) => {
            out.push(3);
            number(out, class.ranges().len() as u32);
            for range in class.ranges() {
                out.extend_from_slice(&[range.start(), range.end()]);
            }
        }
        HirKind::Look(look) => {
            out.push(4);
            number(out, look.as_repr());
        }
        HirKind::Repetition(repetition) => {
            out.push(5);
            number(out, repetition.min);
            // No maximum: u32::MAX + 1 does not fit, so a flag says which.
            out.push(repetition.max.is_some() as u8);
            number(out, repetition.max.unwrap_or(0));
            out.push(repetition.greedy as u8);
            write_tree(&repetition.sub, out);
        }
        HirKind::Capture(capture) => {
            out.push(6);
            number(out, capture.index);
            let name = capture.name.as_deref().map(str::as_bytes);
            out.push(name.is_some() as u8);
            number(out, name.map_or(0, <[u8]>::len) as u32);
            out.extend_from_slice(name.unwrap_or_default());
            write_tree(&capture.sub, out);
        }
        HirKind::Concat(items) => write_concat(items, out),
        HirKind::Alternation(items) => {
            out.push(8);
            number(out, items.len() as u32);
            for item in items {
                write_tree(item, out);
            }
        }
    }
}

/// Appends a `Concat` of `items` as [`write_tree`] writes one.
fn write_concat(items: &[Hir], out: &mut Vec<u8>) {
    out.push(7);
    out.extend_from_slice(&(items.len() as u32).to_le_bytes());
    for item in items {
        write_tree(item, out);
    }
}
