//! Token terminals: a set of token ids at one point of a grammar.
//!
//! Special tokens (`<|eot_id|>`, `</think>`, Qwen's `<tool_call>`) are single
//! tokens that no byte string produces, and tool-call and reasoning formats are
//! written over them; llama.cpp's GBNF (`<[id]>`, `!<[id]>`, `<name>`) and
//! llguidance's Lark (`<[1-5]>`, `<[^11,12]>`, `<[*]>`) name them. A
//! [`TokenSet`] matches exactly one token whose id is in the set, whatever its
//! bytes: it never fuses with byte-level leaves, and the matcher reads it a
//! token at a time (see [`crate::matcher::Matcher::consume_token`]).
//!
//! A set may name tokens by their text (`<|eot_id|>`); the IR stays free of any
//! vocabulary until [`Grammar::bind_token_names`](super::Grammar::bind_token_names)
//! turns the names into ids, so a front-end parses without a tokenizer and the
//! error for a name the vocabulary lacks still points at the grammar.
//!
//! ```
//! use stencil::grammar::TokenSet;
//!
//! let set = TokenSet::ids(vec![(10, 12)]).negated();
//! assert!(set.contains(9) && !set.contains(11));
//! assert_eq!(set.to_string(), "<[^10-12]>");
//! ```

use std::fmt;

use super::Location;

/// One item of a [`TokenSet`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TokenItem {
    /// Ids `first..=last`.
    Ids(u32, u32),
    /// A token by its text as the vocabulary spells it (`<|eot_id|>`), not yet
    /// bound to ids.
    Named(String),
}

/// Tokens a token terminal matches: its items, or (`negated`) every token but
/// them. `negated` with no items is any token. End-of-sequence tokens are never
/// matched by a negated set: whether the output may end is the grammar's
/// acceptance, not a token it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSet {
    pub items: Vec<TokenItem>,
    pub negated: bool,
    /// Where the grammar wrote it, for errors about its names.
    pub location: Option<Location>,
    /// How the grammar wrote it, kept when names are bound to ids (messages
    /// then still say `<|eot_id|>`, not `<[128009]>`).
    pub written: Option<String>,
}

impl TokenSet {
    /// The tokens with ids in `ranges` (inclusive).
    pub fn ids(ranges: Vec<(u32, u32)>) -> TokenSet {
        TokenSet {
            items: ranges
                .into_iter()
                .map(|(first, last)| TokenItem::Ids(first, last))
                .collect(),
            negated: false,
            location: None,
            written: None,
        }
    }

    /// The token spelled `name`.
    pub fn named(name: impl Into<String>) -> TokenSet {
        TokenSet {
            items: vec![TokenItem::Named(name.into())],
            negated: false,
            location: None,
            written: None,
        }
    }

    /// Any one token.
    pub fn any() -> TokenSet {
        TokenSet {
            items: Vec::new(),
            negated: true,
            location: None,
            written: None,
        }
    }

    /// Every token but these.
    pub fn negated(mut self) -> TokenSet {
        self.negated = !self.negated;
        self
    }

    pub fn at(mut self, location: Location) -> TokenSet {
        self.location = Some(location);
        self
    }

    /// Whether some item names a token by its text.
    pub fn has_names(&self) -> bool {
        self.items
            .iter()
            .any(|item| matches!(item, TokenItem::Named(_)))
    }

    /// Whether `id` is in the set (names not bound yet match nothing).
    pub fn contains(&self, id: u32) -> bool {
        let listed = self
            .items
            .iter()
            .any(|item| matches!(*item, TokenItem::Ids(a, b) if a <= id && id <= b));
        listed != self.negated
    }

    /// The listed id ranges (inclusive).
    pub fn ranges(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.items.iter().filter_map(|item| match *item {
            TokenItem::Ids(a, b) => Some((a, b)),
            TokenItem::Named(_) => None,
        })
    }

    /// Whether the set matches no id at all (an empty positive set).
    pub fn is_empty(&self) -> bool {
        !self.negated && self.items.is_empty()
    }
}

impl fmt::Display for TokenSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(written) = &self.written {
            return f.write_str(written);
        }
        if let [TokenItem::Named(name)] = &self.items[..] {
            let bang = if self.negated { "!" } else { "" };
            return write!(f, "{bang}{name}");
        }
        if self.negated && self.items.is_empty() {
            return f.write_str("<[*]>");
        }
        f.write_str(if self.negated { "<[^" } else { "<[" })?;
        for (i, item) in self.items.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match item {
                TokenItem::Ids(a, b) if a == b => write!(f, "{a}")?,
                TokenItem::Ids(a, b) => write!(f, "{a}-{b}")?,
                TokenItem::Named(name) => f.write_str(name)?,
            }
        }
        f.write_str("]>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_follows_items_and_negation() {
        let set = TokenSet::ids(vec![(1, 5), (9, 9)]);
        assert!(set.contains(1) && set.contains(5) && set.contains(9));
        assert!(!set.contains(0) && !set.contains(6));
        let not = set.clone().negated();
        assert!(!not.contains(3) && not.contains(7));
        assert!(TokenSet::any().contains(123_456));
        assert!(TokenSet::ids(vec![]).is_empty());
        assert!(!TokenSet::named("<x>").contains(0));
    }

    #[test]
    fn sets_print_as_grammars_write_them() {
        assert_eq!(TokenSet::ids(vec![(10, 10)]).to_string(), "<[10]>");
        assert_eq!(
            TokenSet::ids(vec![(1, 5), (9, 9)]).negated().to_string(),
            "<[^1-5,9]>"
        );
        assert_eq!(TokenSet::any().to_string(), "<[*]>");
        assert_eq!(TokenSet::named("<think>").to_string(), "<think>");
        assert_eq!(TokenSet::named("<think>").negated().to_string(), "!<think>");
    }
}
