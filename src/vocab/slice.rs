//! Token slices: precomputed sets of tokens made only of "ordinary" characters.
//!
//! Inside a JSON string body a lexer state typically loops on every ordinary
//! character, so every token made only of such characters is allowed there. The
//! vocabulary marks those tokens once; a table build that recognizes such a state
//! takes them all in one bitwise OR and walks only the subtrees of the token trie that
//! hold something else (a quote, a backslash, a control byte, a split character).
//! This is the idea behind llguidance's "slices", with the membership test done by
//! the table builder on the actual automaton rather than assumed.

use super::TokenTrie;
use crate::bits::set_bit;

/// Characters of the string-body slice: any Unicode scalar value except the C0
/// controls, DEL, `"` and `\`.
pub fn is_string_body_char(c: char) -> bool {
    c >= ' ' && c != '"' && c != '\\' && c != '\u{7f}'
}

/// The character sets the vocabulary precomputes slices for. Each is the
/// printable ASCII characters except `"` and `\`, plus some non-ASCII ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SliceChars {
    /// [`is_string_body_char`]: a JSON string body.
    StringBody,
    /// String-body characters except the line separators U+2028 and U+2029: what
    /// an ECMA-262 `.` in a schema's `pattern` reads inside a string.
    PatternDot,
    /// String-body characters except every non-ASCII space (ECMA-262's `\s` and
    /// Unicode's White_Space): the non-ASCII characters of a pattern's `\S` or
    /// `[^@\s]`. Only a [class slice](crate::vocab::ClassSlice) uses it (its
    /// ASCII part holds the space).
    NonSpace,
}

impl SliceChars {
    /// The slices a string body's table tries, largest first: a state that
    /// survives every string body takes that slice.
    pub const ALL: [SliceChars; 2] = [SliceChars::StringBody, SliceChars::PatternDot];

    /// Every slice the vocabulary precomputes (by `as usize`).
    pub const EVERY: [SliceChars; 3] = [
        SliceChars::StringBody,
        SliceChars::PatternDot,
        SliceChars::NonSpace,
    ];

    pub fn contains(self, c: char) -> bool {
        let non_ascii = c as u32 >= 0x80;
        is_string_body_char(c)
            && (!non_ascii || self.non_ascii().iter().any(|&(lo, hi)| lo <= c && c <= hi))
    }

    /// Whether `cut`, the first bytes of a UTF-8 character, can only be
    /// completed into members (and can be). Then, where every text of members
    /// keeps a lexeme alive, so does a token ending in `cut`; and where a
    /// counter allows no more members, `cut` dies.
    pub fn completes_only(self, cut: &[u8]) -> bool {
        let Some(completions) = completions(cut) else {
            return false;
        };
        self.non_ascii()
            .iter()
            .any(|&(lo, hi)| lo <= *completions.start() && completions.end() <= &hi)
    }

    /// The non-ASCII members, as inclusive ranges.
    pub fn non_ascii(self) -> &'static [(char, char)] {
        match self {
            SliceChars::StringBody => &[('\u{80}', char::MAX)],
            SliceChars::PatternDot => &[('\u{80}', '\u{2027}'), ('\u{202a}', char::MAX)],
            // Without U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029,
            // U+202F, U+205F, U+3000 and U+FEFF.
            SliceChars::NonSpace => &[
                ('\u{80}', '\u{84}'),
                ('\u{86}', '\u{9f}'),
                ('\u{a1}', '\u{167f}'),
                ('\u{1681}', '\u{1fff}'),
                ('\u{200b}', '\u{2027}'),
                ('\u{202a}', '\u{202e}'),
                ('\u{2030}', '\u{205e}'),
                ('\u{2060}', '\u{2fff}'),
                ('\u{3001}', '\u{fefe}'),
                ('\u{ff00}', char::MAX),
            ],
        }
    }
}

/// The characters whose UTF-8 encoding starts with `cut`, when `cut` is a
/// proper prefix of one (a lead byte, then valid continuation bytes).
fn completions(cut: &[u8]) -> Option<std::ops::RangeInclusive<char>> {
    let (&lead, continued) = cut.split_first()?;
    // The length, and the range of the second byte (RFC 3629's table).
    let (len, second) = match lead {
        0xC2..=0xDF => (2, 0x80..=0xBF),
        0xE0 => (3, 0xA0..=0xBF),
        0xE1..=0xEC | 0xEE..=0xEF => (3, 0x80..=0xBF),
        0xED => (3, 0x80..=0x9F),
        0xF0 => (4, 0x90..=0xBF),
        0xF1..=0xF3 => (4, 0x80..=0xBF),
        0xF4 => (4, 0x80..=0x8F),
        _ => return None,
    };
    let in_range = |(i, b): (usize, &u8)| match i {
        0 => second.contains(b),
        _ => (0x80..=0xBF).contains(b),
    };
    if cut.len() >= len || !continued.iter().enumerate().all(in_range) {
        return None;
    }
    let complete = |second: u8, rest: u8| {
        let mut bytes = cut.to_vec();
        while bytes.len() < len {
            bytes.push(if bytes.len() == 1 { second } else { rest });
        }
        std::str::from_utf8(&bytes).ok()?.chars().next()
    };
    Some(complete(*second.start(), 0x80)?..=complete(*second.end(), 0xBF)?)
}

/// The tokens made entirely of slice characters, the last one possibly cut
/// short where only slice characters complete it (byte-level vocabularies
/// split characters: 1,350 of Llama-3's tokens, which a walk would reach
/// through most of its non-ASCII nodes).
#[derive(Debug, Clone)]
pub struct TokenSlice {
    /// Bit per token id.
    members: Vec<u32>,
    /// Bit per rank (position in the trie's byte order).
    members_by_rank: Vec<u32>,
    /// Per token id, then per rank: a member's number of characters, 255 for
    /// 255 or more and for the other tokens (see [`TokenSlice::members_up_to`]).
    chars_by_id: Vec<u8>,
    chars_by_rank: Vec<u8>,
    /// `outsiders_below[r]`: tokens of rank below `r` that are not members.
    outsiders_below: Vec<u32>,
    /// The trie nodes whose subtree holds a non-member, in preorder: all a walk
    /// that skips covered subtrees visits (ancestors come first).
    outsider_nodes: Vec<u32>,
    /// Per entry of `outsider_nodes`: the index of the first entry past its
    /// subtree.
    outsider_skip: Vec<u32>,
    /// The same for the non-members whose first character outside the slice is
    /// not a C0 control (see [`TokenSlice::outsider_nodes_past_controls`]).
    live_outsider_nodes: Vec<u32>,
    live_outsider_skip: Vec<u32>,
}

impl TokenSlice {
    pub(super) fn of(chars: SliceChars, tokens: &[Box<[u8]>], trie: &TokenTrie) -> TokenSlice {
        // A member's character count (saturated; a cut character counts), else
        // `None`.
        let member = |bytes: &[u8]| {
            let (text, rest) = valid_prefix(bytes);
            // Cut short at the end, not invalid.
            let cut = match rest {
                Ok(cut) => cut,
                Err(()) => return None,
            };
            let mut count = 0u8;
            for c in text.chars() {
                if !chars.contains(c) {
                    return None;
                }
                count = count.saturating_add(1);
            }
            if !cut.is_empty() {
                if !chars.completes_only(cut) {
                    return None;
                }
                count = count.saturating_add(1);
            }
            Some(count)
        };
        let mut members = vec![0u32; tokens.len().div_ceil(32)];
        let mut members_by_rank = vec![0u32; trie.token_ids().len().div_ceil(32)];
        let mut chars_by_id = vec![u8::MAX; members.len() * 32];
        let mut chars_by_rank = vec![u8::MAX; members_by_rank.len() * 32];
        // Whether a non-member's first character outside the slice is a C0
        // control (before any invalid or cut bytes).
        let control_first = |bytes: &[u8]| {
            valid_prefix(bytes)
                .0
                .chars()
                .find(|&c| !chars.contains(c))
                .is_some_and(|c| c < ' ')
        };
        let mut outsiders_below = Vec::with_capacity(trie.token_ids().len() + 1);
        let mut live_outsiders_below = Vec::with_capacity(trie.token_ids().len() + 1);
        let (mut outsiders, mut live_outsiders) = (0u32, 0u32);
        for (rank, &id) in trie.token_ids().iter().enumerate() {
            outsiders_below.push(outsiders);
            live_outsiders_below.push(live_outsiders);
            if let Some(count) = member(&tokens[id as usize]) {
                set_bit(&mut members, id as usize);
                set_bit(&mut members_by_rank, rank);
                chars_by_id[id as usize] = count;
                chars_by_rank[rank] = count;
            } else {
                outsiders += 1;
                live_outsiders += u32::from(!control_first(&tokens[id as usize]));
            }
        }
        outsiders_below.push(outsiders);
        live_outsiders_below.push(live_outsiders);
        let (outsider_nodes, outsider_skip) = nodes_holding(trie, &outsiders_below);
        let (live_outsider_nodes, live_outsider_skip) = nodes_holding(trie, &live_outsiders_below);
        TokenSlice {
            members,
            members_by_rank,
            chars_by_id,
            chars_by_rank,
            outsiders_below,
            outsider_nodes,
            outsider_skip,
            live_outsider_nodes,
            live_outsider_skip,
        }
    }

    /// Bit per token id: the members.
    pub fn members(&self) -> &[u32] {
        &self.members
    }

    /// Bit per rank (position in the trie's byte order): the members.
    pub fn members_by_rank(&self) -> &[u32] {
        &self.members_by_rank
    }

    /// The members of at most `max_chars` characters (below 255), as bits by
    /// token id into `by_id` and by rank into `by_rank` (overwritten): a scan
    /// of one byte per token, not a walk.
    pub fn members_up_to(&self, max_chars: u8, by_id: &mut [u32], by_rank: &mut [u32]) {
        debug_assert!(max_chars < u8::MAX);
        let words = |counts: &[u8], out: &mut [u32]| {
            for (word, counts) in out.iter_mut().zip(counts.chunks_exact(32)) {
                *word = counts
                    .iter()
                    .enumerate()
                    .fold(0, |bits, (j, &c)| bits | (((c <= max_chars) as u32) << j));
            }
        };
        words(&self.chars_by_id, by_id);
        words(&self.chars_by_rank, by_rank);
    }

    /// The trie nodes whose subtree holds a non-member, in preorder, and per node
    /// the index (into the same list) of the first one past its subtree.
    pub fn outsider_nodes(&self) -> (&[u32], &[u32]) {
        (&self.outsider_nodes, &self.outsider_skip)
    }

    /// [`TokenSlice::outsider_nodes`] for a lexeme that dies, with no match
    /// before, on a control byte right after the slice's characters (a JSON
    /// string): only the subtrees holding a non-member whose first character
    /// outside the slice is no C0 control (a quote, a backslash, DEL, a byte
    /// that is no character). The others die at that control: of Llama-3's
    /// 5,100 non-members of a JSON string body, 3,150 hold a control first;
    /// their subtrees are 7.4k of the 10.8k nodes the full list holds.
    pub fn outsider_nodes_past_controls(&self) -> (&[u32], &[u32]) {
        (&self.live_outsider_nodes, &self.live_outsider_skip)
    }

    /// Every token in the subtree of trie node `node` is a member.
    #[inline]
    pub fn covers(&self, trie: &TokenTrie, node: usize) -> bool {
        let ranks = trie.ranks_under(node);
        self.outsiders_below[ranks.end] == self.outsiders_below[ranks.start]
    }
}

/// The longest valid UTF-8 prefix of `bytes`, and the rest: `Ok` when it is a
/// character cut short (or nothing), `Err` when it is invalid.
fn valid_prefix(bytes: &[u8]) -> (&str, Result<&[u8], ()>) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (text, Ok(&[])),
        Err(e) => {
            let (whole, rest) = bytes.split_at(e.valid_up_to());
            // The first `valid_up_to` bytes are valid UTF-8 by definition.
            let text = std::str::from_utf8(whole).unwrap_or_default();
            (
                text,
                if e.error_len().is_none() {
                    Ok(rest)
                } else {
                    Err(())
                },
            )
        }
    }
}

/// The trie nodes whose subtree holds a token counted in `below` (`below[r]`:
/// those of rank below `r`), in preorder, and per node the index (into the
/// same list) of the first one past its subtree.
fn nodes_holding(trie: &TokenTrie, below: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let holds = |i: usize| {
        let ranks = trie.ranks_under(i);
        below[ranks.end] > below[ranks.start]
    };
    let nodes: Vec<u32> = (0..trie.nodes().len())
        .filter(|&i| holds(i))
        .map(|i| i as u32)
        .collect();
    let skip = nodes
        .iter()
        .map(|&i| {
            let end = trie.nodes()[i as usize].subtree_end;
            nodes.partition_point(|&n| n < end) as u32
        })
        .collect();
    (nodes, skip)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cut character is a member's end when every character it may become
    /// is one: not a cut U+2028 for `PatternDot`, nor a cut non-ASCII space for
    /// `NonSpace`; never an invalid prefix.
    #[test]
    fn cut_characters_complete_only_into_members() {
        use SliceChars::*;
        let body = |cut: &[u8]| StringBody.completes_only(cut);
        assert!(body(b"\xC3") && body(b"\xE4") && body(b"\xE4\xB8") && body(b"\xF0\x9F\x98"));
        for invalid in [
            &b"\xC0"[..],
            b"\xC1",
            b"\x80",
            b"\xE0\x80",
            b"\xED\xA0",
            b"\xF5",
        ] {
            assert!(!body(invalid), "{invalid:?}");
        }
        assert!(!body(b"\xC3\xA9"), "a whole character is no cut one");
        assert!(!body(b""));
        // U+2028 is E2 80 A8.
        assert!(!PatternDot.completes_only(b"\xE2"));
        assert!(!PatternDot.completes_only(b"\xE2\x80"));
        assert!(PatternDot.completes_only(b"\xE2\x81"));
        assert!(PatternDot.completes_only(b"\xE4"));
        // U+00A0 is C2 A0, U+3000 is E3 80 80.
        assert!(!NonSpace.completes_only(b"\xC2"));
        assert!(NonSpace.completes_only(b"\xC3"));
        assert!(!NonSpace.completes_only(b"\xE3\x80"));
        assert!(NonSpace.completes_only(b"\xE3\x81"));
        assert_eq!(completions(b"\xE4\xB8"), Some('\u{4E00}'..='\u{4E3F}'));
        assert_eq!(completions(b"\xF4"), Some('\u{100000}'..='\u{10FFFF}'));
    }

    /// `NonSpace` holds every string-body character but the non-ASCII spaces of
    /// ECMA-262's `\s` and of Unicode's White_Space; the ASCII space stays.
    #[test]
    fn non_space_leaves_out_exactly_the_non_ascii_spaces() {
        let spaces = [
            0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007,
            0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff,
        ];
        for c in (0x20..0x11000).filter_map(char::from_u32) {
            let expected = is_string_body_char(c) && !spaces.contains(&(c as u32));
            assert_eq!(
                SliceChars::NonSpace.contains(c),
                expected,
                "U+{:04X}",
                c as u32
            );
        }
        assert!(SliceChars::NonSpace.contains(char::MAX));
        assert!(SliceChars::PatternDot.contains('\u{a0}'));
        assert!(!SliceChars::PatternDot.contains('\u{2028}'));
        assert!(SliceChars::StringBody.contains('\u{2028}'));
    }
}
