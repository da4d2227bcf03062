//! Property-name pattern sets for `patternProperties`: which combinations of
//! patterns an undeclared name can match, over the canonical JSON encoding.
//!
//! A name that matches some patterns takes all their schemas; a name that matches
//! none takes `additionalProperties`. So the grammar needs, per set of matched
//! patterns, the names that match exactly that set and are no declared name: the
//! intersection of the matched patterns with the complements of the others, which
//! the object emitter writes as an [`Expr::Intersection`] per set (built as a
//! product by the automaton stage, never read back into a regex: a counted pattern
//! makes that quadratic). What this module answers is which sets occur at all,
//! so no set's branch is an empty language.
//!
//! `regex-automata` builds a multi-pattern DFA (match kind "all", anchored) over
//! the encoded patterns, the declared names and "any canonical string body"; the
//! patterns that match a whole name are the pattern set of a reachable state's
//! end-of-input transition. The exploration is bounded; above the bounds the
//! caller reports the keyword as unsupported, never an approximation.
//!
//! [`Expr::Intersection`]: crate::grammar::Expr::Intersection

use std::collections::BTreeSet;

use crate::grammar::dfa::{AnchoredDfa, DfaError};
use regex_syntax::hir::Hir;

/// Bounds on the names automaton.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NameLimits {
    /// Most DFA states explored.
    pub states: usize,
    /// Heap bytes for the NFA, the DFA and its determinization.
    pub bytes: usize,
}

impl Default for NameLimits {
    fn default() -> Self {
        NameLimits {
            states: 4_000,
            bytes: 4 << 20,
        }
    }
}

/// Why the pattern sets were not computed: the automaton past its bound. The
/// message is the reason the caller reports `patternProperties` unsupported with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NameError {
    #[error(transparent)]
    Dfa(#[from] DfaError),
    #[error("the property-name automaton has more than {limit} states")]
    TooManyStates { limit: usize },
}

/// The distinct sets of `patterns` (encoded whole-name patterns) that some
/// undeclared name matches: `body` is every canonical string body, `declared`
/// the declared names (encoded, every spelling).
pub(crate) fn pattern_sets(
    body: &Hir,
    declared: &Hir,
    patterns: &[Hir],
    limits: &NameLimits,
) -> Result<BTreeSet<Vec<bool>>, NameError> {
    let mut all = vec![body.clone(), declared.clone()];
    all.extend(patterns.iter().cloned());
    let built = AnchoredDfa::build(&all, limits.bytes, limits.bytes)?;
    let (order, _) = built
        .reachable(limits.states)
        .map_err(|()| NameError::TooManyStates {
            limit: limits.states,
        })?;
    let mut sets = BTreeSet::new();
    for &s in &order {
        let mut set = vec![false; all.len()];
        for k in built.patterns_matched(s) {
            set[k] = true;
        }
        // A canonical body and no declared name.
        if set[0] && !set[1] {
            sets.insert(set[2..].to_vec());
        }
    }
    Ok(sets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(p: &str) -> Hir {
        regex_syntax::ParserBuilder::new()
            .utf8(false)
            .build()
            .parse(p)
            .unwrap()
    }

    #[test]
    fn sets_are_those_some_name_has() {
        // Plain text bodies (no escapes needed for these test strings).
        let body = parse(r#"(?s:[^\x00-\x1f"\\])*"#);
        let declared = parse("foo|bar");
        let patterns = [parse("(?s:.*)f(?s:.*)o(?s:.*)"), parse("[0-9]+")];
        let sets = pattern_sets(&body, &declared, &patterns, &NameLimits::default()).unwrap();
        let expected: BTreeSet<Vec<bool>> =
            [vec![false, false], vec![true, false], vec![false, true]].into();
        assert_eq!(sets, expected);
        // With "fo" declared and a pattern only it matches, that set is gone.
        let only_fo = [parse("fo")];
        let sets = pattern_sets(&body, &parse("fo"), &only_fo, &NameLimits::default()).unwrap();
        assert_eq!(sets, [vec![false]].into());
    }

    #[test]
    fn limits_are_errors() {
        let body = parse(r"(?s:.)*");
        let patterns = [parse("(?s:.*)a(?s:.){12}")];
        let tight = NameLimits {
            states: 100,
            ..NameLimits::default()
        };
        assert!(pattern_sets(&body, &Hir::fail(), &patterns, &tight).is_err());
    }

    /// The texts `patternProperties` is reported unsupported with, as when they
    /// were strings.
    #[test]
    fn error_messages_are_unchanged() {
        assert_eq!(
            NameError::TooManyStates { limit: 100 }.to_string(),
            "the property-name automaton has more than 100 states"
        );
        let dfa = DfaError::Dfa("too big".into());
        assert_eq!(NameError::from(dfa.clone()).to_string(), dfa.to_string());
    }
}
