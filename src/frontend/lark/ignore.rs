//! Where `%ignore`d text may go: before every lexeme but the first of the output
//! (llguidance's placement; `allow_initial_skip` allows it before the first too).
//! Never after the last lexeme: llguidance 1.9 refuses trailing ignored text, and
//! a grammar that ends in optional whitespace would let a model pad its output
//! forever.
//!
//! The lowering puts the `%ignore` rule before every lexeme occurrence (a woven
//! unit `Seq[Ref(ignore), lexeme]`). What is left is "not before the first lexeme
//! of the output", a property of whole derivations, which a grammar transformation
//! states: `F(e)` derives the strings of `e` that have at least one lexeme, with
//! the ignore slots before the first one empty, and `Z(e)` says whether `e` can
//! derive without any lexeme (its string is then empty once those slots are).
//!
//! ```text
//! F(unit) = lexeme             Z(unit) = false       F(ignore) = none   Z(ignore) = true
//! F(a b)  = F(a) b | F(b) if Z(a)                     Z(a b) = Z(a) and Z(b)
//! F(a|b)  = F(a) | F(b)                               Z(a|b) = Z(a) or Z(b)
//! F(e{m,n}) = F(e) e{0,n-1} if Z(e), else F(e) e{max(m,1)-1,n-1}
//! F(rule) = rule_F, a new rule with body F(body)
//! ```
//!
//! and the root becomes `F(start) | ""` (the empty output when `Z(start)`). Each
//! rule gets at most one `F` copy; long sequences share their tails through helper
//! rules, so the grammar grows linearly.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use crate::grammar::{Expr, Hir, Rule, RuleId};

/// Sequences longer than this share their tails through helper rules.
const SHARED_TAIL_FROM: usize = 4;

/// The root expression for `start` with no ignored text before the first lexeme.
/// `structure` are the rules made of rule syntax (their bodies hold units);
/// `ignores` the `%ignore` rules; every other rule is a lexeme.
pub(crate) fn without_initial_ignore(
    rules: &mut Vec<Rule>,
    start: &Expr,
    structure: &HashSet<RuleId>,
    ignores: &HashSet<RuleId>,
) -> Expr {
    let zero = zero_lexeme_rules(rules, structure, ignores);
    let mut t = Transform {
        structure,
        ignores,
        zero,
        copies: HashMap::default(),
        queue: Vec::new(),
    };
    let first = t.first(rules, start);
    let root = if t.z(start) {
        Expr::Alt(vec![first, Expr::Empty])
    } else {
        first
    };
    while let Some((original, copy)) = t.queue.pop() {
        let body = rules[original.index()].expr.clone();
        let expr = t.first(rules, &body);
        rules[copy.index()].expr = expr;
    }
    root
}

struct Transform<'a> {
    structure: &'a HashSet<RuleId>,
    ignores: &'a HashSet<RuleId>,
    /// Structure rules that can derive without a lexeme.
    zero: HashSet<RuleId>,
    /// Structure rule to its `F` copy.
    copies: HashMap<RuleId, RuleId>,
    /// Copies whose bodies are still to be written.
    queue: Vec<(RuleId, RuleId)>,
}

/// What an expression is to the transformation.
enum Shape<'e> {
    /// An ignore slot (`Ref` to an `%ignore` rule).
    Ignore,
    /// A lexeme with its ignore slot before it: `F` is the lexeme.
    Unit(&'e Expr),
    /// A lexeme with no slot (in a grammar without `%ignore`).
    Lexeme,
    /// Rule syntax to look into.
    Structure,
}

impl Transform<'_> {
    fn shape<'e>(&self, e: &'e Expr) -> Shape<'e> {
        match e {
            Expr::Ref(r) if self.ignores.contains(r) => Shape::Ignore,
            Expr::Ref(r) if self.structure.contains(r) => Shape::Structure,
            Expr::Ref(_)
            | Expr::Regex(_)
            | Expr::Excluding(_)
            | Expr::Intersection(_)
            | Expr::Permutation(_)
            | Expr::Tokens(_)
            | Expr::Text(_)
            | Expr::Budget(_) => Shape::Lexeme,
            Expr::Seq(items) if items.len() == 2 => match (&items[0], &items[1]) {
                (Expr::Ref(r), lexeme)
                    if self.ignores.contains(r) && !has_structure(lexeme, self) =>
                {
                    Shape::Unit(lexeme)
                }
                _ => Shape::Structure,
            },
            Expr::Empty | Expr::Seq(_) | Expr::Alt(_) | Expr::Repeat { .. } => Shape::Structure,
        }
    }

    /// `Z(e)`.
    fn z(&self, e: &Expr) -> bool {
        match self.shape(e) {
            Shape::Ignore => true,
            Shape::Unit(_) | Shape::Lexeme => false,
            Shape::Structure => match e {
                Expr::Ref(r) => self.zero.contains(r),
                Expr::Empty => true,
                Expr::Seq(items) => items.iter().all(|i| self.z(i)),
                Expr::Alt(items) => items.iter().any(|i| self.z(i)),
                Expr::Repeat { expr, min, .. } => *min == 0 || self.z(expr),
                _ => false,
            },
        }
    }

    /// `F(e)`.
    fn first(&mut self, rules: &mut Vec<Rule>, e: &Expr) -> Expr {
        match self.shape(e) {
            Shape::Ignore => none(),
            Shape::Unit(lexeme) => lexeme.clone(),
            Shape::Lexeme => e.clone(),
            Shape::Structure => match e {
                Expr::Empty => none(),
                Expr::Ref(r) => Expr::Ref(self.copy(rules, *r)),
                Expr::Seq(items) => self.first_of_sequence(rules, items),
                Expr::Alt(items) => {
                    let alternatives: Vec<Expr> = items
                        .iter()
                        .map(|i| self.first(rules, i))
                        .filter(|a| !is_none(a))
                        .collect();
                    if alternatives.is_empty() {
                        none()
                    } else {
                        Expr::Alt(alternatives)
                    }
                }
                Expr::Repeat { expr, min, max } => {
                    if *max == Some(0) {
                        return none();
                    }
                    let head = self.first(rules, expr);
                    if is_none(&head) {
                        return none();
                    }
                    let lower = if self.z(expr) { 0 } else { (*min).max(1) - 1 };
                    let rest = Expr::Repeat {
                        expr: expr.clone(),
                        min: lower,
                        max: max.map(|m| m - 1),
                    };
                    Expr::Seq(vec![head, rest])
                }
                _ => e.clone(),
            },
        }
    }

    /// `F(a1 ... an) = F(a1) a2..an | F(a2 ... an) if Z(a1)`, built from the end;
    /// the tails are shared through rules when the sequence is long.
    fn first_of_sequence(&mut self, rules: &mut Vec<Rule>, items: &[Expr]) -> Expr {
        let shared = items.len() > SHARED_TAIL_FROM;
        let share = |rules: &mut Vec<Rule>, expr: Expr, what: &str| {
            if !shared {
                return expr;
            }
            let id = RuleId(rules.len() as u32);
            rules.push(Rule {
                name: format!("%ignore placement ({what})"),
                expr,
                location: None,
            });
            Expr::Ref(id)
        };
        let from = rules.len();
        // After step k: `tail` = a_k..a_n, `first` = F(a_k..a_n).
        let mut tail = Expr::Empty;
        let mut first = none();
        for item in items.iter().rev() {
            let head = self.first(rules, item);
            let mut alternatives = Vec::new();
            if !is_none(&head) {
                alternatives.push(Expr::Seq(vec![head, tail.clone()]));
            }
            if self.z(item) && !is_none(&first) {
                alternatives.push(first);
            }
            first = match alternatives.len() {
                0 => none(),
                1 => alternatives.pop().unwrap_or_else(none),
                _ => share(rules, Expr::Alt(alternatives), "first lexeme in a tail"),
            };
            tail = share(rules, Expr::Seq(vec![item.clone(), tail]), "tail");
        }
        if rules.len() > from {
            super::chains::keep_apart(rules, from, RuleId(from as u32));
        }
        first
    }

    /// The `F` copy of structure rule `r` (its body written later).
    fn copy(&mut self, rules: &mut Vec<Rule>, r: RuleId) -> RuleId {
        if let Some(&c) = self.copies.get(&r) {
            return c;
        }
        let id = RuleId(rules.len() as u32);
        let original = &rules[r.index()];
        rules.push(Rule {
            name: format!("{} (first lexeme)", original.name),
            expr: none(),
            location: original.location,
        });
        self.copies.insert(r, id);
        self.queue.push((r, id));
        id
    }
}

/// Whether `e` refers to a structure rule or an ignore slot.
fn has_structure(e: &Expr, t: &Transform) -> bool {
    let mut found = false;
    e.for_each_ref(&mut |r| {
        found |= t.structure.contains(&r) || t.ignores.contains(&r);
    });
    found
}

/// Matches nothing.
fn none() -> Expr {
    Expr::Regex(Hir::fail())
}

fn is_none(e: &Expr) -> bool {
    matches!(e, Expr::Regex(h) if *h == Hir::fail())
}

/// The structure rules that can derive without a lexeme: a least fixpoint, each
/// rule looked at again only when a rule it uses joins.
fn zero_lexeme_rules(
    rules: &[Rule],
    structure: &HashSet<RuleId>,
    ignores: &HashSet<RuleId>,
) -> HashSet<RuleId> {
    let mut t = Transform {
        structure,
        ignores,
        zero: HashSet::default(),
        copies: HashMap::default(),
        queue: Vec::new(),
    };
    let mut users: HashMap<RuleId, Vec<RuleId>> = HashMap::default();
    for &r in structure {
        rules[r.index()].expr.for_each_ref(&mut |callee| {
            if structure.contains(&callee) {
                users.entry(callee).or_default().push(r);
            }
        });
    }
    let mut pending: Vec<RuleId> = structure.iter().copied().collect();
    pending.sort();
    while let Some(r) = pending.pop() {
        if t.zero.contains(&r) || !t.z(&rules[r.index()].expr) {
            continue;
        }
        t.zero.insert(r);
        if let Some(u) = users.get(&r) {
            pending.extend(u.iter().copied().filter(|u| !t.zero.contains(u)));
        }
    }
    t.zero
}
