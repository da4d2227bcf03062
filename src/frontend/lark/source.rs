//! Where things are in a Lark text: byte offsets turned into line:column, and the
//! located error every stage of the front-end reports.
//!
//! Tokens and syntax nodes carry byte offsets only; the line index here turns one
//! into a [`Location`] in logarithmic time, so a large grammar with many rules does
//! not pay a scan of the text per rule.

use crate::frontend::FrontendError;
use crate::grammar::Location;

/// The text and the byte offset of each line's start.
pub(crate) struct SourceMap<'a> {
    text: &'a str,
    line_starts: Vec<usize>,
}

impl<'a> SourceMap<'a> {
    pub fn new(text: &'a str) -> SourceMap<'a> {
        let mut line_starts = vec![0];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|&(_, b)| b == b'\n')
                .map(|(i, _)| i + 1),
        );
        SourceMap { text, line_starts }
    }

    /// Line (1-based), column (1-based, in characters) and offset of byte `offset`.
    pub fn location(&self, offset: usize) -> Location {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset);
        let start = self.line_starts[line - 1];
        let mut end = offset;
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        let column = self.text[start..end].chars().count() + 1;
        Location {
            line: line as u32,
            column: column as u32,
            offset,
        }
    }

    /// A syntax error at byte `offset`.
    pub fn error(&self, offset: usize, message: impl Into<String>) -> FrontendError {
        FrontendError::Syntax {
            location: self.location(offset),
            message: message.into(),
        }
    }

    /// A feature the front-end parses but cannot lower yet, at byte `offset`.
    pub fn unsupported(&self, offset: usize, feature: impl std::fmt::Display) -> FrontendError {
        self.error(offset, format!("{feature}: not supported yet"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_count_lines_and_characters() {
        let map = SourceMap::new("ab\ncé d\n\nx");
        let at = |o| {
            let l = map.location(o);
            (l.line, l.column)
        };
        assert_eq!(at(0), (1, 1));
        assert_eq!(at(2), (1, 3));
        assert_eq!(at(3), (2, 1));
        assert_eq!(at(6), (2, 3)); // after the two-byte `é`
        assert_eq!(at(9), (3, 1));
        assert_eq!(at(10), (4, 1));
        assert_eq!(at(99), (4, 2));
    }
}
