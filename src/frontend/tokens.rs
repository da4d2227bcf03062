//! The `<...>` token syntax GBNF and Lark share: what a grammar writes between
//! `<` and `>` to name whole tokens (see [`TokenSet`]).
//!
//! * `<[128010]>`, `<[1,5-9]>`: token ids, single or inclusive ranges;
//! * `<[^11,12]>`: every token but those; `<[*]>`: any token;
//! * `<|eot_id|>`, `<think>`: a token by its text, bound to ids when the
//!   grammar meets its vocabulary.
//!
//! The messages are llguidance's, so grammars moving between the two engines
//! get the same complaint.
//!
//! ```
//! use stencil::frontend::tokens::parse_token_ref;
//!
//! let set = parse_token_ref("[^100-200,300]").unwrap();
//! assert!(set.negated && set.contains(250) && !set.contains(300));
//! assert_eq!(parse_token_ref("|eot_id|").unwrap().to_string(), "<|eot_id|>");
//! assert!(parse_token_ref("[200-100]").unwrap_err().contains("invalid token range"));
//! ```

use crate::grammar::TokenSet;

/// The length of the text between `<` and its `>`, given what follows the `<`:
/// `None` when no `>` closes it before a space, a newline or another `<`, or
/// when nothing is inside.
pub fn token_ref_len(after_open: &[u8]) -> Option<usize> {
    let len = after_open
        .iter()
        .position(|&b| b == b'>' || b == b'<' || b.is_ascii_whitespace())?;
    (len > 0 && after_open[len] == b'>').then_some(len)
}

/// Parses `inner`, the text between `<` and `>`; the error is a message
/// without a location (the caller knows where `<` was).
pub fn parse_token_ref(inner: &str) -> Result<TokenSet, String> {
    let Some(list) = inner.strip_prefix('[').and_then(|t| t.strip_suffix(']')) else {
        return Ok(TokenSet::named(format!("<{inner}>")));
    };
    let (negated, list) = match list.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, list),
    };
    if list == "*" {
        if negated {
            return Err("negated wildcard token <[^*]> is not supported".into());
        }
        return Ok(TokenSet::any());
    }
    if list.contains('*') {
        return Err("wildcard token range '*' must not contain additional tokens".into());
    }
    let mut ranges = Vec::new();
    for range in list.split(',') {
        let ends: Vec<&str> = range.split('-').collect();
        if ends.len() == 1 && ends[0].is_empty() {
            continue;
        }
        let invalid = || format!("invalid token range: {range:?}");
        if ends.len() > 2 {
            return Err(invalid());
        }
        let start = ends[0].parse::<u32>().map_err(|_| invalid())?;
        let end = match ends.get(1) {
            Some(e) => e.parse::<u32>().map_err(|_| invalid())?,
            None => start,
        };
        if start > end {
            return Err(invalid());
        }
        ranges.push((start, end));
    }
    if ranges.is_empty() {
        return Err("empty token range".into());
    }
    let set = TokenSet::ids(ranges);
    Ok(if negated { set.negated() } else { set })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_lists_ranges_negation_and_names() {
        assert_eq!(
            parse_token_ref("[10]").unwrap(),
            TokenSet::ids(vec![(10, 10)])
        );
        assert_eq!(
            parse_token_ref("[100-200,300-4002]").unwrap(),
            TokenSet::ids(vec![(100, 200), (300, 4002)])
        );
        assert!(parse_token_ref("[^100-200,100-300]").unwrap().negated);
        assert_eq!(parse_token_ref("[*]").unwrap(), TokenSet::any());
        assert_eq!(
            parse_token_ref("think").unwrap(),
            TokenSet::named("<think>")
        );
    }

    #[test]
    fn malformed_lists_say_what_is_wrong() {
        for (inner, message) in [
            ("[100-200-300]", "invalid token range"),
            ("[,]", "empty token range"),
            ("[200-100]", "invalid token range"),
            ("[^*]", "negated wildcard"),
            ("[*,100]", "must not contain additional tokens"),
            ("[x]", "invalid token range"),
            ("[99999999999]", "invalid token range"),
        ] {
            let error = parse_token_ref(inner).unwrap_err();
            assert!(error.contains(message), "{inner}: {error}");
        }
    }
}
