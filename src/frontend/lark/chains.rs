//! Long chains of rules the front-end writes (automaton states, `%regex`
//! substrings, the tails of long sequences) kept out of the automaton's fusion.
//!
//! The automaton fuses every regular rule (one that reaches no recursive rule)
//! into its users' terminals, one rule reference at a time; a chain of thousands
//! of regular rules goes that deep. A set of rules larger than
//! [`MAX_FUSED_RULES`] therefore gets a dead back edge (`fail first`) in each rule:
//! the language is the same, but the rules are recursive, so they stay
//! parser-level nonterminals and the chain is walked by the parser, not fused.

use crate::grammar::{Expr, Hir, Rule, RuleId};

/// Sets of at most this many rules are left to the automaton to fuse.
pub(crate) const MAX_FUSED_RULES: usize = 64;

/// Makes `rules[from..]` recursive through `first` when they are many.
pub(crate) fn keep_apart(rules: &mut [Rule], from: usize, first: RuleId) {
    if rules.len().saturating_sub(from) <= MAX_FUSED_RULES {
        return;
    }
    let back = Expr::Seq(vec![Expr::Regex(Hir::fail()), Expr::Ref(first)]);
    for rule in &mut rules[from..] {
        let expr = std::mem::replace(&mut rule.expr, Expr::Empty);
        rule.expr = match expr {
            Expr::Alt(mut items) => {
                items.push(back.clone());
                Expr::Alt(items)
            }
            other => Expr::Alt(vec![other, back.clone()]),
        };
    }
}
