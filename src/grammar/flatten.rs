//! A context-free part that is regular after all, made one leaf: what a token
//! budget needs of a rule over a nested grammar.
//!
//! A [`TokenBudget`](super::TokenBudget) counts tokens over one lexeme (one
//! lexer state), so its body must be a leaf. A front-end may still write a
//! budget over rules, as Lark's `ab[max_tokens=3]: %lark { ... }` does; when those
//! rules never recur, their language is regular, and inlining them into one
//! regex gives the lexeme the budget counts over. Recursive bodies (a `%json`
//! value) stay as they are, and [`Grammar::validate`](super::Grammar::validate)
//! refuses them with the rule's location. The inlining is bounded in size: a
//! reference graph shaped like a lattice would otherwise unfold exponentially.

use regex_syntax::hir::{Hir, HirKind, Repetition};

use super::{Expr, Grammar, Rule, TokenBudget};

/// Largest inlined regex, in syntax-tree nodes.
const MAX_NODES: usize = 1 << 16;
/// Most nodes inlined over all of a grammar's budgets (each inlining copies).
const MAX_TOTAL_NODES: usize = 1 << 20;
/// Deepest chain of rule references inlined: the inlining recurses along it
/// (and so would the regex's compilation).
const MAX_DEPTH: usize = 128;

impl Grammar {
    /// Replaces the body of every token budget that is not a leaf by one regex
    /// where its rules are regular (see the module docs); leaves the others.
    pub fn flatten_budget_bodies(&mut self) {
        let mut total = 0;
        for i in 0..self.rules.len() {
            if !has_rule_budget(&self.rules[i].expr) {
                continue;
            }
            // The rule's own expression is out while it is rewritten: a body
            // that refers back to it is recursive, which `visiting` says.
            let mut expr = std::mem::replace(&mut self.rules[i].expr, Expr::Empty);
            let mut visiting = vec![false; self.rules.len()];
            visiting[i] = true;
            flatten_in(&mut expr, &self.rules, &mut visiting, &mut total);
            self.rules[i].expr = expr;
        }
    }

    /// A copy whose budgets over rules have empty bodies: what can be
    /// validated of a grammar before its references are linked and its
    /// budgets flattened.
    pub fn with_budget_bodies_emptied(&self) -> Grammar {
        let mut copy = self.clone();
        for rule in &mut copy.rules {
            each_rule_budget(&mut rule.expr, &mut |b| b.body = Expr::Empty);
        }
        copy
    }

    /// Whether some token budget's body is not a leaf (yet).
    pub fn has_budget_over_rules(&self) -> bool {
        self.rules.iter().any(|r| has_rule_budget(&r.expr))
    }
}

/// Whether `expr` holds a budget whose body is not a leaf.
fn has_rule_budget(expr: &Expr) -> bool {
    match expr {
        Expr::Budget(b) => !b.has_leaf_body(),
        Expr::Seq(items) | Expr::Alt(items) => items.iter().any(has_rule_budget),
        Expr::Repeat { expr, .. } => has_rule_budget(expr),
        Expr::Permutation(p) => p.parts().any(has_rule_budget),
        _ => false,
    }
}

/// Calls `f` on every budget in `expr` whose body is not a leaf.
fn each_rule_budget(expr: &mut Expr, f: &mut dyn FnMut(&mut TokenBudget)) {
    match expr {
        Expr::Budget(b) if !b.has_leaf_body() => f(b),
        Expr::Seq(items) | Expr::Alt(items) => {
            items.iter_mut().for_each(|e| each_rule_budget(e, f))
        }
        Expr::Repeat { expr, .. } => each_rule_budget(expr, f),
        Expr::Permutation(p) => {
            let parts = p.members.iter_mut().chain(&mut p.extra);
            for part in parts.chain(std::iter::once(&mut p.separator)) {
                each_rule_budget(part, f);
            }
        }
        _ => {}
    }
}

/// Makes each budget over rules in `expr` one regex where they are regular,
/// within the bounds (`total`: the nodes inlined so far in the grammar).
fn flatten_in(expr: &mut Expr, rules: &[Rule], visiting: &mut [bool], total: &mut usize) {
    each_rule_budget(expr, &mut |b| {
        let mut nodes = 0;
        let mut inline = Inline {
            rules,
            visiting: &mut *visiting,
            depth: 0,
        };
        if let Some(hir) = inline.hir(&b.body, &mut nodes) {
            if *total + nodes <= MAX_TOTAL_NODES {
                *total += nodes;
                b.body = Expr::Regex(hir);
            }
        }
    });
}

/// The inlining's state: the rules, those on the current path, its depth.
struct Inline<'a> {
    rules: &'a [Rule],
    visiting: &'a mut [bool],
    depth: usize,
}

impl Inline<'_> {
    /// `expr` with every rule it reaches inlined, as one regex: `None` where
    /// it recurs, holds something other than regexes and their combinations,
    /// or passes [`MAX_NODES`] or [`MAX_DEPTH`].
    fn hir(&mut self, expr: &Expr, nodes: &mut usize) -> Option<Hir> {
        *nodes += 1;
        if *nodes > MAX_NODES {
            return None;
        }
        Some(match expr {
            Expr::Empty => Hir::empty(),
            Expr::Regex(hir) => {
                *nodes += size(hir);
                if *nodes > MAX_NODES {
                    return None;
                }
                hir.clone()
            }
            Expr::Ref(id) => {
                let i = id.index();
                let rules = self.rules;
                let rule = rules.get(i)?;
                if *self.visiting.get(i)? || self.depth >= MAX_DEPTH {
                    return None;
                }
                self.visiting[i] = true;
                self.depth += 1;
                let inlined = self.hir(&rule.expr, nodes);
                self.depth -= 1;
                self.visiting[i] = false;
                inlined?
            }
            Expr::Seq(items) => Hir::concat(self.all(items, nodes)?),
            Expr::Alt(items) => Hir::alternation(self.all(items, nodes)?),
            Expr::Repeat { expr, min, max } => Hir::repetition(Repetition {
                min: *min,
                max: *max,
                greedy: true,
                sub: Box::new(self.hir(expr, nodes)?),
            }),
            _ => return None,
        })
    }

    fn all(&mut self, items: &[Expr], nodes: &mut usize) -> Option<Vec<Hir>> {
        items.iter().map(|e| self.hir(e, nodes)).collect()
    }
}

/// Nodes of `hir`'s syntax tree.
fn size(hir: &Hir) -> usize {
    1 + match hir.kind() {
        HirKind::Concat(items) | HirKind::Alternation(items) => items.iter().map(size).sum(),
        HirKind::Repetition(r) => size(&r.sub),
        HirKind::Capture(c) => size(&c.sub),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{RuleId, TokenBudget};

    fn rule(name: &str, expr: Expr) -> Rule {
        Rule {
            name: name.into(),
            expr,
            location: None,
        }
    }

    fn budget(body: Expr) -> Expr {
        Expr::Budget(Box::new(TokenBudget {
            body,
            max_tokens: 3,
        }))
    }

    /// The body of the budget in rule 0, after flattening.
    fn flattened(rules: Vec<Rule>) -> Expr {
        let mut g = Grammar {
            rules,
            root: RuleId(0),
        };
        g.flatten_budget_bodies();
        match &g.rules[0].expr {
            Expr::Budget(b) => b.body.clone(),
            other => panic!("not a budget: {other:?}"),
        }
    }

    #[test]
    fn regular_rules_under_a_budget_become_one_regex() {
        // start: budget(sub); sub: (" a")* " b"
        let rules = vec![
            rule("start", budget(Expr::Ref(RuleId(1)))),
            rule(
                "sub",
                Expr::Seq(vec![
                    Expr::Repeat {
                        expr: Box::new(Expr::literal(b" a")),
                        min: 0,
                        max: None,
                    },
                    Expr::literal(b" b"),
                ]),
            ),
        ];
        let Expr::Regex(hir) = flattened(rules) else {
            panic!("not flattened")
        };
        let re = regex_automata::meta::Regex::builder()
            .syntax(regex_automata::util::syntax::Config::new().utf8(false))
            .build_from_hir(&hir)
            .unwrap();
        let whole = |s: &str| re.find(s).is_some_and(|m| m.range() == (0..s.len()));
        assert!(whole(" b") && whole(" a a b"));
        assert!(!whole(" a") && !whole(" b b"));
    }

    #[test]
    fn recursive_bodies_stay_rules_and_fail_validation() {
        // sub: "(" sub ")" | ""
        let nested = Expr::Alt(vec![
            Expr::Seq(vec![
                Expr::literal(b"("),
                Expr::Ref(RuleId(1)),
                Expr::literal(b")"),
            ]),
            Expr::Empty,
        ]);
        let rules = vec![
            rule("start", budget(Expr::Ref(RuleId(1)))),
            rule("sub", nested),
        ];
        assert!(matches!(flattened(rules.clone()), Expr::Ref(_)));
        let mut g = Grammar {
            rules,
            root: RuleId(0),
        };
        g.flatten_budget_bodies();
        assert!(g.validate().is_err());
        // A budget inside the rule it names recurs too.
        let own = vec![rule(
            "start",
            Expr::Seq(vec![Expr::literal(b"x"), budget(Expr::Ref(RuleId(0)))]),
        )];
        let mut g = Grammar {
            rules: own,
            root: RuleId(0),
        };
        g.flatten_budget_bodies();
        assert!(g.validate().is_err());
    }

    #[test]
    fn chains_past_the_depth_bound_are_left_alone() {
        // r_k: "a" r_{k+1}, 300 links: inlining would recurse 300 deep.
        let mut rules = vec![rule("start", budget(Expr::Ref(RuleId(1))))];
        for k in 1..=300u32 {
            rules.push(rule(
                "r",
                Expr::Seq(vec![Expr::literal(b"a"), Expr::Ref(RuleId(k + 1))]),
            ));
        }
        rules.push(rule("leaf", Expr::literal(b"b")));
        assert!(matches!(flattened(rules.clone()), Expr::Ref(_)));
        // 100 links fit.
        rules.truncate(101);
        rules.push(rule("leaf", Expr::literal(b"b")));
        assert!(matches!(flattened(rules), Expr::Regex(_)));
    }

    #[test]
    fn lattices_past_the_size_bound_are_left_alone() {
        // r_k: r_{k+1} r_{k+1}, 40 levels: 2^40 leaves unfolded.
        let mut rules = vec![rule("start", budget(Expr::Ref(RuleId(1))))];
        for k in 1..=40u32 {
            rules.push(rule(
                "r",
                Expr::Seq(vec![Expr::Ref(RuleId(k + 1)), Expr::Ref(RuleId(k + 1))]),
            ));
        }
        rules.push(rule("leaf", Expr::literal(b"a")));
        assert!(matches!(flattened(rules), Expr::Ref(_)));
    }
}
