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

use super::{Expr, Grammar, Rule};

/// Largest inlined regex, in syntax-tree nodes.
const MAX_NODES: usize = 1 << 16;

impl Grammar {
    /// Replaces the body of every token budget that is not a leaf by one regex
    /// where its rules are regular (see the module docs); leaves the others.
    pub fn flatten_budget_bodies(&mut self) {
        for i in 0..self.rules.len() {
            if !has_rule_budget(&self.rules[i].expr) {
                continue;
            }
            // The rule's own expression is out while it is rewritten: a body
            // that refers back to it is recursive, which `visiting` says.
            let mut expr = std::mem::replace(&mut self.rules[i].expr, Expr::Empty);
            let mut visiting = vec![false; self.rules.len()];
            visiting[i] = true;
            flatten_in(&mut expr, &self.rules, &mut visiting);
            self.rules[i].expr = expr;
        }
    }

    /// Whether some token budget's body is not a leaf (yet).
    pub fn has_budget_over_rules(&self) -> bool {
        self.rules.iter().any(|r| has_rule_budget(&r.expr))
    }
}

/// Whether `expr` holds a budget whose body is not a leaf.
fn has_rule_budget(expr: &Expr) -> bool {
    match expr {
        Expr::Budget(b) => !is_leaf(&b.body),
        Expr::Seq(items) | Expr::Alt(items) => items.iter().any(has_rule_budget),
        Expr::Repeat { expr, .. } => has_rule_budget(expr),
        Expr::Permutation(p) => p.parts().any(has_rule_budget),
        _ => false,
    }
}

fn is_leaf(expr: &Expr) -> bool {
    matches!(
        expr,
        Expr::Empty | Expr::Regex(_) | Expr::Excluding(_) | Expr::Intersection(_) | Expr::Text(_)
    )
}

fn flatten_in(expr: &mut Expr, rules: &[Rule], visiting: &mut [bool]) {
    match expr {
        Expr::Budget(b) if !is_leaf(&b.body) => {
            let mut nodes = 0;
            if let Some(hir) = regular_hir(&b.body, rules, visiting, &mut nodes) {
                b.body = Expr::Regex(hir);
            }
        }
        Expr::Seq(items) | Expr::Alt(items) => items
            .iter_mut()
            .for_each(|e| flatten_in(e, rules, visiting)),
        Expr::Repeat { expr, .. } => flatten_in(expr, rules, visiting),
        Expr::Permutation(p) => {
            let parts = p.members.iter_mut().chain(&mut p.extra);
            for part in parts.chain(std::iter::once(&mut p.separator)) {
                flatten_in(part, rules, visiting);
            }
        }
        _ => {}
    }
}

/// `expr` with every rule it reaches inlined, as one regex: `None` where it
/// recurs, holds something other than regexes and their combinations, or
/// passes [`MAX_NODES`].
fn regular_hir(
    expr: &Expr,
    rules: &[Rule],
    visiting: &mut [bool],
    nodes: &mut usize,
) -> Option<Hir> {
    *nodes += 1;
    if *nodes > MAX_NODES {
        return None;
    }
    let mut all = |items: &[Expr], nodes: &mut usize| -> Option<Vec<Hir>> {
        items
            .iter()
            .map(|e| regular_hir(e, rules, visiting, nodes))
            .collect()
    };
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
            if *visiting.get(i)? {
                return None;
            }
            visiting[i] = true;
            let inlined = regular_hir(&rules.get(i)?.expr, rules, visiting, nodes);
            visiting[i] = false;
            inlined?
        }
        Expr::Seq(items) => Hir::concat(all(items, nodes)?),
        Expr::Alt(items) => Hir::alternation(all(items, nodes)?),
        Expr::Repeat { expr, min, max } => Hir::repetition(Repetition {
            min: *min,
            max: *max,
            greedy: true,
            sub: Box::new(regular_hir(expr, rules, visiting, nodes)?),
        }),
        _ => return None,
    })
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
