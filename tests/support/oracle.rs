//! The brute-force definition of a token mask, for property tests: token `t` is
//! allowed after a prefix iff prefix + bytes(t) is still a viable prefix (asked of
//! the byte matcher token by token); EOS iff the grammar accepts. For grammars
//! with token terminals, the definition is over tokens: token `t` is allowed iff
//! the token matcher consumes it after the prefix tokens.

use std::sync::Arc;

use stencil::matcher::{Matcher, TokenMatcher};
use stencil::tables::TokenTables;

/// Mask over `width` words by the brute-force definition, after `prefix`.
pub fn oracle_mask(tables: &TokenTables, prefix: &[u8], width: usize) -> Vec<u32> {
    let vocab = tables.vocab();
    let mut matcher = Matcher::new(Arc::clone(tables.grammar()));
    matcher
        .consume_bytes(prefix)
        .expect("prefix must be viable");
    let mut mask = vec![0u32; width];
    for id in 0..vocab.len() as u32 {
        let allowed = if vocab.is_eos(id) {
            matcher.is_accepting()
        } else {
            let bytes = vocab.token_bytes(id);
            !bytes.is_empty() && matcher.accepts_bytes(bytes)
        };
        if allowed {
            mask[id as usize / 32] |= 1 << (id % 32);
        }
    }
    mask
}

/// The fast mask after `prefix` (fed as raw bytes).
pub fn fast_mask(tables: &Arc<TokenTables>, prefix: &[u8], width: usize) -> Vec<u32> {
    let mut matcher = TokenMatcher::new(Arc::clone(tables));
    matcher
        .consume_bytes(prefix)
        .expect("prefix must be viable");
    let mut mask = vec![0u32; width];
    matcher.fill_next_token_bitmask(&mut mask);
    mask
}

/// The brute-force mask after `prefix`: token `t` is allowed iff the matcher
/// consumes it (EOS included, by the stop policy).
pub fn token_oracle_mask(tables: &Arc<TokenTables>, prefix: &[u32]) -> Vec<u32> {
    let mut matcher = TokenMatcher::new(Arc::clone(tables));
    matcher.consume_tokens(prefix).unwrap();
    let mut mask = vec![0u32; tables.mask_words()];
    for id in 0..tables.vocab().len() as u32 {
        if matcher.is_token_allowed(id) {
            mask[id as usize / 32] |= 1 << (id % 32);
        }
    }
    mask
}

/// Masks after every prefix of `tokens` equal the brute-force ones.
pub fn assert_token_masks_agree(tables: &Arc<TokenTables>, tokens: &[u32]) {
    let mut matcher = TokenMatcher::new(Arc::clone(tables));
    for end in 0..=tokens.len() {
        let mut mask = vec![0u32; tables.mask_words()];
        matcher.fill_next_token_bitmask(&mut mask);
        let expected = token_oracle_mask(tables, &tokens[..end]);
        let diff = differences(&mask, &expected);
        assert!(
            diff.is_empty(),
            "after {:?}: tokens {:?} differ",
            &tokens[..end],
            &diff[..diff.len().min(8)]
        );
        if let Some(&next) = tokens.get(end) {
            matcher
                .consume_token(next)
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// Token ids where two masks differ.
pub fn differences(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = Vec::new();
    for (w, (x, y)) in a.iter().zip(b).enumerate() {
        let mut diff = x ^ y;
        while diff != 0 {
            let bit = diff.trailing_zeros();
            out.push(w as u32 * 32 + bit);
            diff &= diff - 1;
        }
    }
    out
}

/// Asserts that the fast mask after `prefix` (raw bytes) is the brute-force
/// one; the message names `what`, the prefix and a few differing tokens.
pub fn assert_mask_is_the_oracles(tables: &Arc<TokenTables>, prefix: &[u8], what: &str) {
    let width = tables.mask_words() + 1;
    let fast = fast_mask(tables, prefix, width);
    let slow = oracle_mask(tables, prefix, width);
    let diff = differences(&fast, &slow);
    assert!(
        diff.is_empty(),
        "{what}: after {:?}: {} tokens differ, e.g. {:?}",
        String::from_utf8_lossy(prefix),
        diff.len(),
        &diff[..diff.len().min(8)]
    );
}

/// Prefix lengths of `text` at which the oracle should be asked: about `max`
/// evenly spread positions, always 0 and the end, plus up to `max / 2` positions
/// that fall inside a multi-byte UTF-8 character.
pub fn prefix_positions(text: &[u8], max: usize) -> Vec<usize> {
    let step = (text.len() / max.max(1)).max(1);
    let mut positions: Vec<usize> = (0..=text.len()).step_by(step).collect();
    positions.push(text.len());
    let inside: Vec<usize> = (0..text.len())
        .filter(|&i| (0x80..0xc0).contains(&text[i]))
        .collect();
    let stride = (inside.len() / (max / 2).max(1)).max(1);
    // A continuation byte at i: the prefix of length i ends mid-character.
    positions.extend(inside.iter().step_by(stride));
    positions.sort_unstable();
    positions.dedup();
    positions
}
