//! Text stop strings: the part of §3.10's `stop_matcher_state.observe(y_t,
//! token_bytes(y_t))` that reads bytes rather than ids.
//!
//! A stop string may begin in one token and end in a later one, and a token may hold
//! text both before and after it, so matching is over the output's bytes, never over
//! token ids or decoded strings. The matcher keeps only the last `longest - 1` bytes
//! it has seen (the most any unfinished match can reach back), so its memory does not
//! grow with the output. The first stop string to *begin* wins (the output is cut
//! there); between two that begin at the same byte, the one listed first.
//!
//! Streaming must not hand out text that a later token may turn into a stop string:
//! [`StopStrings::held_back`] says how much of the output's end to keep back.
//!
//! ```
//! use stencil::sampling::stop_strings::StopStrings;
//!
//! let mut stop = StopStrings::new(vec![b"\n\n".to_vec(), b"###".to_vec()]);
//! assert_eq!(stop.observe(b"Paris\n"), None);
//! assert_eq!(stop.held_back(b"Paris\n"), 1); // "\n" may begin "\n\n"
//! let hit = stop.observe(b"\nLyon").unwrap();
//! assert_eq!((hit.index, hit.at), (0, 5)); // the output is cut to "Paris"
//! ```

/// A completed stop string: which one, and the output byte where it begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopStringHit {
    pub index: usize,
    pub at: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StopStrings {
    strings: Vec<Vec<u8>>,
    /// The last bytes seen (at most the longest string's length minus one).
    tail: Vec<u8>,
    /// Output bytes observed so far.
    seen: usize,
}

impl StopStrings {
    /// `strings` must be non-empty byte strings (the config layer checks).
    pub fn new(strings: Vec<Vec<u8>>) -> StopStrings {
        StopStrings {
            strings,
            tail: Vec::new(),
            seen: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }

    pub fn strings(&self) -> &[Vec<u8>] {
        &self.strings
    }

    /// Reads the next output bytes; the first stop string they complete, if any.
    pub fn observe(&mut self, bytes: &[u8]) -> Option<StopStringHit> {
        if self.strings.is_empty() || bytes.is_empty() {
            self.seen += bytes.len();
            return None;
        }
        let window_start = self.seen - self.tail.len();
        self.tail.extend_from_slice(bytes);
        self.seen += bytes.len();
        // A match wholly inside the old tail would have been found before: only those
        // ending in the new bytes are searched (first start, then list order).
        let new_from = self.tail.len() - bytes.len();
        let hit = self
            .strings
            .iter()
            .enumerate()
            .filter_map(|(index, s)| {
                let earliest = new_from.saturating_sub(s.len() - 1);
                find(&self.tail[earliest..], s).map(|at| (earliest + at, index))
            })
            .min()
            .map(|(at, index)| StopStringHit {
                index,
                at: window_start + at,
            });
        let keep = self.longest().saturating_sub(1);
        if self.tail.len() > keep {
            self.tail.drain(..self.tail.len() - keep);
        }
        hit
    }

    /// How many bytes at the end of `text` begin some stop string (and so must wait
    /// for the next token before they are streamed).
    pub fn held_back(&self, text: &[u8]) -> usize {
        self.strings
            .iter()
            .flat_map(|s| (1..s.len()).rev().map(move |n| &s[..n]))
            .filter(|prefix| text.ends_with(prefix))
            .map(<[u8]>::len)
            .max()
            .unwrap_or(0)
    }

    fn longest(&self) -> usize {
        self.strings.iter().map(Vec::len).max().unwrap_or(0)
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> StopStrings {
        StopStrings::new(list.iter().map(|s| s.as_bytes().to_vec()).collect())
    }

    #[test]
    fn a_stop_string_split_across_tokens_is_found_where_it_begins() {
        let mut stop = strings(&["END"]);
        assert_eq!(stop.observe(b"abc E"), None);
        assert_eq!(stop.observe(b"N"), None);
        assert_eq!(stop.observe(b"x"), None); // "ENx": not a stop
        assert_eq!(stop.observe(b"yE"), None);
        let hit = stop.observe(b"ND and more").unwrap();
        assert_eq!(hit, StopStringHit { index: 0, at: 8 });
        assert_eq!(&b"abc ENxyEND and more"[..hit.at], b"abc ENxy");
    }

    #[test]
    fn the_first_to_begin_wins_then_the_first_listed() {
        let mut stop = strings(&["cd", "bcd", "b"]);
        // "bcd" and "b" both begin at 1: the cut is the same, "bcd" is listed first.
        assert_eq!(
            stop.observe(b"abcd").unwrap(),
            StopStringHit { index: 1, at: 1 }
        );
        // Seen token by token, "b" completes before "bcd" can.
        let mut stop = strings(&["cd", "bcd", "b"]);
        assert_eq!(
            stop.observe(b"ab").unwrap(),
            StopStringHit { index: 2, at: 1 }
        );
        let mut stop = strings(&["cd", "bc"]);
        assert_eq!(
            stop.observe(b"abcd").unwrap(),
            StopStringHit { index: 1, at: 1 }
        );
        let mut stop = strings(&["xy", "xy"]);
        assert_eq!(stop.observe(b"_xy").unwrap().index, 0);
    }

    #[test]
    fn memory_stays_bounded_and_offsets_stay_absolute() {
        let mut stop = strings(&["<|end|>"]);
        for _ in 0..10_000 {
            assert_eq!(stop.observe(b"text <|e"), None);
        }
        assert!(stop.tail.len() < 7);
        let hit = stop.observe(b"nd|>").unwrap();
        assert_eq!(hit.at, 10_000 * 8 - 3);
    }

    #[test]
    fn held_back_is_the_longest_end_that_begins_a_string() {
        let stop = strings(&["<|end|>", "\n\n"]);
        assert_eq!(stop.held_back(b"hello <|e"), 3);
        assert_eq!(stop.held_back(b"hello\n"), 1);
        assert_eq!(stop.held_back(b"hello"), 0);
        // A whole stop string at the end is a hit, not something to hold.
        assert_eq!(strings(&["ab"]).held_back(b"xab"), 0);
        assert_eq!(strings(&[]).held_back(b"x"), 0);
    }

    #[test]
    fn bytes_inside_a_character_match_as_bytes() {
        // "é" is C3 A9; a stop string of its second byte still stops (bytes, not text).
        let mut stop = StopStrings::new(vec![vec![0xA9]]);
        assert_eq!(stop.observe("café".as_bytes()).unwrap().at, 4);
    }
}
