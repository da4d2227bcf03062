//! The grammar IR: named rules over byte-level regular leaves.
//!
//! Every front-end (GBNF, regex, later JSON Schema and Lark) lowers to this one
//! shape, and everything downstream (the automaton, the matcher, the reference
//! recognizer in the tests) reads only this shape. It is deliberately small:
//!
//! * leaves are regular expressions over bytes ([`Hir`] from `regex-syntax`), so a
//!   literal, a character class and a whole JSON string body are all the same kind
//!   of thing, and the automaton stage is free to merge neighbouring leaves into one
//!   lexer terminal;
//! * [`Expr::Repeat`] keeps bounded repetition as a counter (`x{0,2000}` is one
//!   node with `max = 2000`, never 2000 copies);
//! * rules may be recursive in any way (left recursion and ambiguity included);
//!   the parser downstream is an Earley parser and accepts any context-free grammar;
//! * [`Expr::Permutation`] is the one construct beyond context-free: members in any
//!   order, each at most once (JSON objects whose keys may come in any order). As a
//!   CFG it needs a rule per subset of members; the parser instead keeps the set of
//!   members used in its parse item, so 500 properties cost 500 rules, not 2^500.
//!
//! * [`Expr::Excluding`] takes finitely many strings out of a regular leaf (any
//!   string but the declared property names), which as a regex would be a large
//!   complement.
//! * [`Expr::Intersection`] is the strings several regular leaves all match and
//!   others do not (a JSON string's `pattern` and its length bounds; a string
//!   `not` a pattern), which no regex says.
//! * [`Expr::Text`] is free text up to a delimiter: see [`FreeText`].
//! * [`Expr::Tokens`] is one whole token from a set of token ids (special tokens
//!   such as `</think>`, which no byte string produces): see [`TokenSet`].
//!
//! [`Grammar::validate`] checks what no later stage should have to: references in
//! range, `min <= max`, and a non-empty language.

use std::fmt;

pub(crate) mod dfa;
mod flatten;
mod free_text;
mod tokens;

pub use free_text::FreeText;
pub use regex_syntax::hir::Hir;
pub use tokens::{TokenItem, TokenSet};

/// Index of a rule in [`Grammar::rules`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

impl RuleId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A position in a grammar's source text: 1-based line and column (in characters),
/// plus the 0-based byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Location {
    pub line: u32,
    pub column: u32,
    pub offset: usize,
}

impl Location {
    /// The location of byte `offset` in `text`: lines counted by `\n`, columns in
    /// characters (invalid UTF-8 counts one column per replacement character).
    pub fn of_offset(text: &[u8], offset: usize) -> Location {
        let before = &text[..offset.min(text.len())];
        let line = before.iter().filter(|&&b| b == b'\n').count() as u32 + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let column = String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count() as u32
            + 1;
        Location {
            line,
            column,
            offset,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One expression of the IR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// The empty string.
    Empty,
    /// A regular leaf over bytes. Must contain no look-around assertions.
    Regex(Hir),
    /// A reference to another rule.
    Ref(RuleId),
    /// Concatenation.
    Seq(Vec<Expr>),
    /// Alternation (unordered: the language is the union).
    Alt(Vec<Expr>),
    /// `expr{min,max}`; `max: None` is unbounded.
    Repeat {
        expr: Box<Expr>,
        min: u32,
        max: Option<u32>,
    },
    /// Members in any order, separated: see [`Permutation`].
    Permutation(Box<Permutation>),
    /// A regular leaf's strings except finitely many: see [`Excluding`].
    Excluding(Box<Excluding>),
    /// The strings every one of several regular leaves matches: see [`Intersection`].
    Intersection(Box<Intersection>),
    /// One token whose id is in the set, whatever its bytes: see [`TokenSet`].
    Tokens(TokenSet),
    /// Free text up to a delimiter: see [`FreeText`].
    Text(Box<FreeText>),
    /// One lexeme that may spend at most so many tokens: see [`TokenBudget`].
    Budget(Box<TokenBudget>),
}

/// One lexeme that ends, wherever it is, once it has spent `max_tokens` tokens
/// (llguidance's `max_tokens=` on a rule, XGrammar's `any_text.max_tokens`): a
/// token counts when it carries at least one byte of the lexeme, so a token that
/// straddles the lexeme's start or end counts. The cut is made by the matcher at
/// a token boundary, so what the lexeme holds then may be a prefix of its
/// language: a truncated lexeme is complete by definition.
///
/// `body` is one leaf, never a context-free part ([`Grammar::validate`] checks):
/// the budget needs one lexer state to count over. Bytes consumed outside tokens
/// (a byte-level check of a text) spend nothing: budgets are about tokens. Masks
/// are those of the body: a token that keeps the lexeme going is allowed either
/// way, the budget only decides what may come after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenBudget {
    /// A leaf: [`Expr::Empty`], [`Expr::Regex`], [`Expr::Excluding`],
    /// [`Expr::Intersection`] or [`Expr::Text`].
    pub body: Expr,
    /// At least 1 (a budget of 0 is the empty string: front-ends write that).
    pub max_tokens: u32,
}

impl TokenBudget {
    /// Whether the body is one leaf, as a budget needs (a body of rules is
    /// made one by [`Grammar::flatten_budget_bodies`] where it can be).
    pub fn has_leaf_body(&self) -> bool {
        matches!(
            self.body,
            Expr::Empty
                | Expr::Regex(_)
                | Expr::Excluding(_)
                | Expr::Intersection(_)
                | Expr::Text(_)
        )
    }
}

/// The strings of `regex` except the `excluded` ones: a JSON object's undeclared
/// key is any string but the declared names.
///
/// Written as a regex, such a complement is a trie of the names with an exit after
/// every prefix, large and slow to determinize (about 1 ms for ten names, the
/// largest part of compiling a small schema); the automaton stage instead takes the
/// product of `regex`'s automaton (shared by every schema) with a trie of the
/// excluded strings. `regex` must match infinitely many strings (checked by
/// [`Grammar::validate`]), so the leaf is never empty. A prefix can still die by
/// exclusion (`"a"` in `"[ab]*"` minus `"a"`: its one completion is excluded); the
/// product automaton knows, being trimmed like every terminal's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excluding {
    pub regex: Hir,
    pub excluded: Vec<Vec<u8>>,
}

/// The strings all of `regexes` match and none of `negated` does: a JSON string's
/// `pattern` with its `minLength`/`maxLength` (a regular language cut to a length
/// range is regular, but only a few shapes of regex can say so), two patterns on
/// one string, or a string that must not match a pattern (`not`, `oneOf`). Regular
/// languages are closed under complement, regexes only say so at great length.
///
/// The automaton stage builds the product of the leaves' automata (each shared like
/// any regex's) as one terminal, never fused with its neighbours. Whether the
/// product is empty is known only there: [`expr_productive`] answers for each leaf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intersection {
    /// At least one: the complement of `negated` is taken within these.
    pub regexes: Vec<Hir>,
    pub negated: Vec<Hir>,
}

/// `m1 sep m2 sep ... mk`: every item a member used at most once or an extra
/// (any number of times); every required member appears; `min <= k <= max`.
///
/// No member nor the extra may match the empty string (the parser counts an item
/// when it completes, and an empty one would complete where it started); the
/// automaton stage rejects such a grammar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permutation {
    pub members: Vec<Expr>,
    pub required: Vec<bool>,
    pub extra: Option<Expr>,
    pub separator: Expr,
    pub min: u32,
    pub max: Option<u32>,
}

impl Permutation {
    /// Every sub-expression: members, then the extra, then the separator.
    pub fn parts(&self) -> impl Iterator<Item = &Expr> {
        self.members
            .iter()
            .chain(self.extra.as_ref())
            .chain(std::iter::once(&self.separator))
    }

    /// The sequences of at most one item, as an alternation: all the permutation
    /// matches when its separator matches nothing.
    pub fn at_most_one_item(&self) -> Expr {
        let mut required = (0..self.members.len()).filter(|&k| self.required[k]);
        let (first_required, more_required) = (required.next(), required.next().is_some());
        let mut alternatives = Vec::new();
        if self.min == 0 && first_required.is_none() {
            alternatives.push(Expr::Empty);
        }
        if self.min <= 1 && self.max != Some(0) && !more_required {
            for (k, member) in self.members.iter().enumerate() {
                if first_required.is_none_or(|r| r == k) {
                    alternatives.push(member.clone());
                }
            }
            if let (Some(extra), None) = (&self.extra, first_required) {
                alternatives.push(extra.clone());
            }
        }
        Expr::Alt(alternatives)
    }

    /// Whether some item sequence meets `required`, `min` and `max`, given which
    /// members (and whether the extra) derive some string.
    pub fn satisfiable(&self, member_productive: &[bool], extra_productive: bool) -> bool {
        permutation_satisfiable(
            &self.required,
            self.min,
            self.max,
            member_productive,
            extra_productive,
        )
    }
}

/// [`Permutation::satisfiable`] on the bounds alone, shared with the compiled
/// permutation (which keeps nonterminals instead of expressions).
pub fn permutation_satisfiable(
    required: &[bool],
    min: u32,
    max: Option<u32>,
    member_productive: &[bool],
    extra_productive: bool,
) -> bool {
    let required_count = required.iter().filter(|&&r| r).count() as u64;
    let all_required = required
        .iter()
        .zip(member_productive)
        .all(|(&r, &p)| !r || p);
    let available = member_productive.iter().filter(|&&p| p).count() as u64;
    let reaches_min = extra_productive || available >= u64::from(min);
    let max = max.map_or(u64::MAX, u64::from);
    all_required && reaches_min && required_count <= max && u64::from(min) <= max
}

impl Expr {
    /// A literal byte string.
    pub fn literal(bytes: &[u8]) -> Expr {
        if bytes.is_empty() {
            Expr::Empty
        } else {
            Expr::Regex(Hir::literal(bytes))
        }
    }

    pub fn optional(expr: Expr) -> Expr {
        Expr::Repeat {
            expr: Box::new(expr),
            min: 0,
            max: Some(1),
        }
    }

    /// Calls `f` on every rule this expression references directly.
    pub fn for_each_ref(&self, f: &mut impl FnMut(RuleId)) {
        match self {
            Expr::Empty
            | Expr::Regex(_)
            | Expr::Excluding(_)
            | Expr::Intersection(_)
            | Expr::Tokens(_)
            | Expr::Text(_)
            | Expr::Budget(_) => {}
            Expr::Ref(r) => f(*r),
            Expr::Seq(items) | Expr::Alt(items) => items.iter().for_each(|e| e.for_each_ref(f)),
            Expr::Repeat { expr, .. } => expr.for_each_ref(f),
            Expr::Permutation(p) => p.parts().for_each(|e| e.for_each_ref(f)),
        }
    }

    /// Adds `by` to every rule this expression references (a budget's body
    /// of rules, not yet one leaf, included).
    fn shift_refs(&mut self, by: u32) {
        match self {
            Expr::Empty
            | Expr::Regex(_)
            | Expr::Excluding(_)
            | Expr::Intersection(_)
            | Expr::Tokens(_)
            | Expr::Text(_) => {}
            Expr::Budget(b) => b.body.shift_refs(by),
            Expr::Ref(r) => r.0 += by,
            Expr::Seq(items) | Expr::Alt(items) => items.iter_mut().for_each(|e| e.shift_refs(by)),
            Expr::Repeat { expr, .. } => expr.shift_refs(by),
            Expr::Permutation(p) => {
                p.members.iter_mut().for_each(|e| e.shift_refs(by));
                if let Some(extra) = &mut p.extra {
                    extra.shift_refs(by);
                }
                p.separator.shift_refs(by);
            }
        }
    }

    /// Calls `f` on every token set in this expression.
    pub fn for_each_token_set(&self, f: &mut impl FnMut(&TokenSet)) {
        match self {
            Expr::Tokens(set) => f(set),
            Expr::Empty
            | Expr::Regex(_)
            | Expr::Excluding(_)
            | Expr::Intersection(_)
            | Expr::Ref(_)
            | Expr::Text(_)
            | Expr::Budget(_) => {}
            Expr::Seq(items) | Expr::Alt(items) => {
                items.iter().for_each(|e| e.for_each_token_set(f))
            }
            Expr::Repeat { expr, .. } => expr.for_each_token_set(f),
            Expr::Permutation(p) => p.parts().for_each(|e| e.for_each_token_set(f)),
        }
    }

    fn try_each_token_set_mut<E>(
        &mut self,
        f: &mut impl FnMut(&mut TokenSet) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            Expr::Tokens(set) => f(set),
            Expr::Empty
            | Expr::Regex(_)
            | Expr::Excluding(_)
            | Expr::Intersection(_)
            | Expr::Ref(_)
            | Expr::Text(_)
            | Expr::Budget(_) => Ok(()),
            Expr::Seq(items) | Expr::Alt(items) => items
                .iter_mut()
                .try_for_each(|e| e.try_each_token_set_mut(f)),
            Expr::Repeat { expr, .. } => expr.try_each_token_set_mut(f),
            Expr::Permutation(p) => {
                let p = &mut **p;
                p.members
                    .iter_mut()
                    .chain(p.extra.as_mut())
                    .chain(std::iter::once(&mut p.separator))
                    .try_for_each(|e| e.try_each_token_set_mut(f))
            }
        }
    }
}

/// A named rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub name: String,
    pub expr: Expr,
    /// Where the rule is defined, when it came from a text.
    pub location: Option<Location>,
}

/// A grammar: rules plus the start rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grammar {
    pub rules: Vec<Rule>,
    pub root: RuleId,
}

/// A grammar that is structurally wrong, independent of its source syntax.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrammarError {
    #[error("rule `{rule}` refers to rule #{target}, which does not exist")]
    DanglingReference { rule: String, target: u32 },
    #[error("rule `{rule}`{at}: repetition has min {min} greater than max {max}", at = at(location))]
    RepeatMinAboveMax {
        rule: String,
        location: Option<Location>,
        min: u32,
        max: u32,
    },
    #[error("rule `{rule}`{at}: a permutation needs one `required` flag per member", at = at(location))]
    PermutationShape {
        rule: String,
        location: Option<Location>,
    },
    #[error("rule `{rule}`{at}: strings can be excluded only from a leaf that matches infinitely many", at = at(location))]
    ExcludingFromFinite {
        rule: String,
        location: Option<Location>,
    },
    #[error("rule `{rule}`{at}: a token budget needs a regular body that is one lexeme (a regex, free text, a leaf minus strings, or rules that never recur) and at least one token", at = at(location))]
    BudgetNotALexeme {
        rule: String,
        location: Option<Location>,
    },
    #[error("the grammar names the token `{name}`{at}, but is not bound to a vocabulary (token names need a tokenizer)", at = at(location))]
    UnboundTokenName {
        name: String,
        location: Option<Location>,
    },
    #[error("the vocabulary has no token `{name}`")]
    UnknownTokenName {
        name: String,
        location: Option<Location>,
    },
    #[error("token id {id} is outside the vocabulary of {size} tokens")]
    TokenOutOfVocabulary {
        id: u32,
        size: usize,
        location: Option<Location>,
    },
    #[error("token {id} `{name}` is the end-of-sequence token: the output ends where the grammar accepts, so a grammar does not name it")]
    EndOfSequenceNamed {
        id: u32,
        name: String,
        location: Option<Location>,
    },
    #[error("the grammar's language is empty: start rule `{rule}`{at} can never finish matching (every alternative needs itself or an impossible character class)", at = at(location))]
    EmptyLanguage {
        rule: String,
        location: Option<Location>,
    },
}

impl GrammarError {
    /// Where the grammar's text has the error, when it came from a text.
    pub fn location(&self) -> Option<Location> {
        match self {
            GrammarError::DanglingReference { .. } => None,
            GrammarError::RepeatMinAboveMax { location, .. }
            | GrammarError::PermutationShape { location, .. }
            | GrammarError::ExcludingFromFinite { location, .. }
            | GrammarError::BudgetNotALexeme { location, .. }
            | GrammarError::UnboundTokenName { location, .. }
            | GrammarError::UnknownTokenName { location, .. }
            | GrammarError::TokenOutOfVocabulary { location, .. }
            | GrammarError::EndOfSequenceNamed { location, .. }
            | GrammarError::EmptyLanguage { location, .. } => *location,
        }
    }
}

fn at(location: &Option<Location>) -> String {
    location.map(|l| format!(" (line {l})")).unwrap_or_default()
}

impl Grammar {
    /// Appends this grammar's rules to `rules` (references shifted, names
    /// prefixed, located at `location` when given, else where they were) and
    /// returns its root there: how a front-end embeds one grammar in another
    /// (`%json` in Lark, a document's members, a structural tag's parts).
    pub fn splice_into(
        self,
        prefix: &str,
        location: Option<Location>,
        rules: &mut Vec<Rule>,
    ) -> RuleId {
        let base = rules.len() as u32;
        for rule in self.rules {
            let mut expr = rule.expr;
            expr.shift_refs(base);
            rules.push(Rule {
                name: format!("{prefix}{}", rule.name),
                expr,
                location: location.or(rule.location),
            });
        }
        RuleId(self.root.0 + base)
    }

    pub fn rule(&self, id: RuleId) -> &Rule {
        &self.rules[id.index()]
    }

    /// Whether some rule has a token terminal ([`Expr::Tokens`]).
    pub fn has_token_sets(&self) -> bool {
        let mut found = false;
        for rule in &self.rules {
            rule.expr.for_each_token_set(&mut |_| found = true);
        }
        found
    }

    /// Replaces every token name by the ids `resolve` gives it (those of the
    /// vocabulary the grammar is for); a name it gives none is an error naming
    /// where the grammar wrote it.
    pub fn bind_token_names(
        &mut self,
        mut resolve: impl FnMut(&str) -> Vec<u32>,
    ) -> Result<(), GrammarError> {
        for rule in &mut self.rules {
            rule.expr.try_each_token_set_mut(&mut |set| {
                if set.has_names() && set.written.is_none() {
                    set.written = Some(set.to_string());
                }
                let mut items = Vec::with_capacity(set.items.len());
                for item in set.items.drain(..) {
                    let TokenItem::Named(name) = item else {
                        items.push(item);
                        continue;
                    };
                    let ids = resolve(&name);
                    if ids.is_empty() {
                        return Err(GrammarError::UnknownTokenName {
                            name,
                            location: set.location,
                        });
                    }
                    items.extend(ids.into_iter().map(|id| TokenItem::Ids(id, id)));
                }
                set.items = items;
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Checks that no token name is left unbound: the automaton stage reads
    /// ids only ([`Grammar::bind_token_names`] first).
    pub fn check_tokens_bound(&self) -> Result<(), GrammarError> {
        let mut unbound = None;
        for rule in &self.rules {
            rule.expr.for_each_token_set(&mut |set| {
                if let (None, Some(TokenItem::Named(name))) = (
                    &unbound,
                    set.items.iter().find(|i| matches!(i, TokenItem::Named(_))),
                ) {
                    unbound = Some((name.clone(), set.location));
                }
            });
        }
        match unbound {
            Some((name, location)) => Err(GrammarError::UnboundTokenName { name, location }),
            None => Ok(()),
        }
    }

    /// Checks that every listed token id is below `size` and none is an
    /// end-of-sequence token (`eos_name` gives its text).
    pub fn check_token_ids(
        &self,
        size: usize,
        eos_name: impl Fn(u32) -> Option<String>,
    ) -> Result<(), GrammarError> {
        let mut error = None;
        for rule in &self.rules {
            rule.expr.for_each_token_set(&mut |set| {
                for (first, last) in set.ranges() {
                    if error.is_some() {
                        return;
                    }
                    if last as usize >= size {
                        error = Some(GrammarError::TokenOutOfVocabulary {
                            id: last,
                            size,
                            location: set.location,
                        });
                    } else if !set.negated {
                        error = (first..=last).find_map(|id| {
                            Some(GrammarError::EndOfSequenceNamed {
                                id,
                                name: eos_name(id)?,
                                location: set.location,
                            })
                        });
                    }
                }
            });
        }
        error.map_or(Ok(()), Err)
    }

    /// Checks the invariants every later stage relies on.
    pub fn validate(&self) -> Result<(), GrammarError> {
        let n = self.rules.len() as u32;
        if self.root.0 >= n {
            return Err(GrammarError::DanglingReference {
                rule: "<root>".into(),
                target: self.root.0,
            });
        }
        for rule in &self.rules {
            let mut dangling = None;
            rule.expr.for_each_ref(&mut |r| {
                if r.0 >= n {
                    dangling = Some(r.0);
                }
            });
            if let Some(target) = dangling {
                return Err(GrammarError::DanglingReference {
                    rule: rule.name.clone(),
                    target,
                });
            }
            check_bounds(&rule.expr, rule)?;
        }
        let productive = self.productive_rules();
        if !productive[self.root.index()] {
            let root = self.rule(self.root);
            return Err(GrammarError::EmptyLanguage {
                rule: root.name.clone(),
                location: root.location,
            });
        }
        Ok(())
    }

    /// For each rule, whether it derives at least one finite string.
    pub fn productive_rules(&self) -> Vec<bool> {
        let mut productive = vec![false; self.rules.len()];
        loop {
            let mut changed = false;
            for (i, rule) in self.rules.iter().enumerate() {
                if !productive[i] && expr_productive(&rule.expr, &productive) {
                    productive[i] = true;
                    changed = true;
                }
            }
            if !changed {
                return productive;
            }
        }
    }
}

fn check_bounds(expr: &Expr, rule: &Rule) -> Result<(), GrammarError> {
    match expr {
        Expr::Empty | Expr::Regex(_) | Expr::Ref(_) | Expr::Tokens(_) | Expr::Text(_) => Ok(()),
        Expr::Excluding(e) if !hir_is_infinite(&e.regex) => {
            Err(GrammarError::ExcludingFromFinite {
                rule: rule.name.clone(),
                location: rule.location,
            })
        }
        Expr::Excluding(_) | Expr::Intersection(_) => Ok(()),
        Expr::Budget(budget) => {
            if !budget.has_leaf_body() || budget.max_tokens == 0 {
                return Err(GrammarError::BudgetNotALexeme {
                    rule: rule.name.clone(),
                    location: rule.location,
                });
            }
            check_bounds(&budget.body, rule)
        }
        Expr::Seq(items) | Expr::Alt(items) => items.iter().try_for_each(|e| check_bounds(e, rule)),
        Expr::Repeat { expr, min, max } => {
            if let Some(max) = *max {
                if *min > max {
                    return Err(GrammarError::RepeatMinAboveMax {
                        rule: rule.name.clone(),
                        location: rule.location,
                        min: *min,
                        max,
                    });
                }
            }
            check_bounds(expr, rule)
        }
        Expr::Permutation(p) => {
            if p.required.len() != p.members.len() {
                return Err(GrammarError::PermutationShape {
                    rule: rule.name.clone(),
                    location: rule.location,
                });
            }
            if let Some(max) = p.max {
                if p.min > max {
                    return Err(GrammarError::RepeatMinAboveMax {
                        rule: rule.name.clone(),
                        location: rule.location,
                        min: p.min,
                        max,
                    });
                }
            }
            p.parts().try_for_each(|e| check_bounds(e, rule))
        }
    }
}

/// Whether `hir` matches some string. Not `properties().minimum_len().is_some()`:
/// regex-syntax gives an alternation no minimum length as soon as one branch has
/// none, so `a|[a&&b]` (a JSON Schema type union with an impossible object) would
/// count as matching nothing.
pub fn hir_matches_something(hir: &Hir) -> bool {
    use regex_syntax::hir::{Class, HirKind};
    match hir.kind() {
        HirKind::Empty | HirKind::Literal(_) | HirKind::Look(_) => true,
        HirKind::Class(Class::Unicode(c)) => !c.ranges().is_empty(),
        HirKind::Class(Class::Bytes(c)) => !c.ranges().is_empty(),
        HirKind::Repetition(r) => r.min == 0 || hir_matches_something(&r.sub),
        HirKind::Capture(c) => hir_matches_something(&c.sub),
        HirKind::Concat(items) => items.iter().all(hir_matches_something),
        HirKind::Alternation(items) => items.iter().any(hir_matches_something),
    }
}

/// Whether `hir` matches infinitely many strings: some repetition without an upper
/// bound, of something that matches a non-empty string, on a path that can match.
pub fn hir_is_infinite(hir: &Hir) -> bool {
    use regex_syntax::hir::HirKind;
    match hir.kind() {
        HirKind::Repetition(r) => {
            r.max != Some(0)
                && ((r.max.is_none() && hir_matches_nonempty(&r.sub)) || hir_is_infinite(&r.sub))
        }
        HirKind::Capture(c) => hir_is_infinite(&c.sub),
        HirKind::Concat(items) => {
            items.iter().all(hir_matches_something) && items.iter().any(hir_is_infinite)
        }
        HirKind::Alternation(items) => items.iter().any(hir_is_infinite),
        _ => false,
    }
}

/// Whether `hir` matches some non-empty string.
fn hir_matches_nonempty(hir: &Hir) -> bool {
    use regex_syntax::hir::HirKind;
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => false,
        HirKind::Literal(lit) => !lit.0.is_empty(),
        HirKind::Class(_) => hir_matches_something(hir),
        HirKind::Repetition(r) => r.max != Some(0) && hir_matches_nonempty(&r.sub),
        HirKind::Capture(c) => hir_matches_nonempty(&c.sub),
        HirKind::Concat(items) => {
            items.iter().all(hir_matches_something) && items.iter().any(hir_matches_nonempty)
        }
        HirKind::Alternation(items) => items.iter().any(hir_matches_nonempty),
    }
}

/// Whether `expr` derives some finite string, given which rules are known to.
pub fn expr_productive(expr: &Expr, productive_rules: &[bool]) -> bool {
    match expr {
        Expr::Empty => true,
        Expr::Regex(hir) => hir_matches_something(hir),
        // Infinitely many strings minus finitely many.
        Expr::Excluding(e) => hir_is_infinite(&e.regex),
        // Each leaf's: the product's emptiness is the automaton stage's to find.
        Expr::Intersection(i) => i.regexes.iter().all(hir_matches_something),
        Expr::Tokens(set) => !set.is_empty(),
        Expr::Text(text) => text.is_productive(),
        Expr::Budget(budget) => expr_productive(&budget.body, productive_rules),
        Expr::Ref(r) => productive_rules[r.index()],
        Expr::Seq(items) => items.iter().all(|e| expr_productive(e, productive_rules)),
        Expr::Alt(items) => items.iter().any(|e| expr_productive(e, productive_rules)),
        Expr::Repeat { expr, min, .. } => *min == 0 || expr_productive(expr, productive_rules),
        Expr::Permutation(p) => {
            let members: Vec<bool> = p
                .members
                .iter()
                .map(|e| expr_productive(e, productive_rules))
                .collect();
            let extra = p
                .extra
                .as_ref()
                .is_some_and(|e| expr_productive(e, productive_rules));
            // Without a separator, only sequences of at most one item remain.
            if !expr_productive(&p.separator, productive_rules) {
                return expr_productive(&p.at_most_one_item(), productive_rules);
            }
            p.satisfiable(&members, extra)
        }
    }
}

/// Renders `expr` in GBNF-like notation for messages, naming referenced rules.
pub fn describe_expr(expr: &Expr, grammar: &Grammar) -> String {
    let mut out = String::new();
    write_expr(expr, grammar, &mut out, false);
    out
}

fn write_expr(expr: &Expr, grammar: &Grammar, out: &mut String, nested: bool) {
    use regex_syntax::hir::HirKind;
    match expr {
        Expr::Empty => out.push_str("\"\""),
        Expr::Regex(hir) => match hir.kind() {
            HirKind::Literal(lit) => {
                out.push('"');
                for c in String::from_utf8_lossy(&lit.0).chars() {
                    out.extend(c.escape_debug());
                }
                out.push('"');
            }
            _ => out.push_str(&hir.to_string()),
        },
        Expr::Ref(r) => out.push_str(&grammar.rule(*r).name),
        Expr::Tokens(set) => out.push_str(&set.to_string()),
        Expr::Text(text) => out.push_str(&text.describe()),
        Expr::Budget(budget) => {
            write_expr(&budget.body, grammar, out, true);
            out.push_str(&format!("[max_tokens={}]", budget.max_tokens));
        }
        Expr::Excluding(e) => {
            // The excluded strings first: the leaf is often long and opaque.
            out.push_str("except(");
            for (i, excluded) in e.excluded.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&format!("{:?}", String::from_utf8_lossy(excluded)));
            }
            out.push_str(&format!("; {})", e.regex));
        }
        Expr::Intersection(i) => {
            out.push_str("both(");
            for (k, regex) in i.regexes.iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                out.push_str(&regex.to_string());
            }
            for regex in &i.negated {
                out.push_str(&format!(", not {regex}"));
            }
            out.push(')');
        }
        Expr::Seq(items) | Expr::Alt(items) => {
            let alt = matches!(expr, Expr::Alt(_));
            let paren = nested && items.len() > 1;
            if paren {
                out.push('(');
            }
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(if alt { " | " } else { " " });
                }
                write_expr(item, grammar, out, true);
            }
            if paren {
                out.push(')');
            }
        }
        Expr::Repeat { expr, min, max } => {
            write_expr(expr, grammar, out, true);
            match (min, max) {
                (0, None) => out.push('*'),
                (1, None) => out.push('+'),
                (0, Some(1)) => out.push('?'),
                (m, None) => out.push_str(&format!("{{{m},}}")),
                (m, Some(n)) if m == n => out.push_str(&format!("{{{m}}}")),
                (m, Some(n)) => out.push_str(&format!("{{{m},{n}}}")),
            }
        }
        Expr::Permutation(p) => {
            out.push_str("permutation(");
            for (i, member) in p.members.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_expr(member, grammar, out, true);
                if !p.required[i] {
                    out.push('?');
                }
            }
            if let Some(extra) = &p.extra {
                out.push_str("; extra ");
                write_expr(extra, grammar, out, true);
                out.push('*');
            }
            out.push_str("; separator ");
            write_expr(&p.separator, grammar, out, true);
            out.push(')');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grammar(rules: Vec<(&str, Expr)>) -> Grammar {
        Grammar {
            rules: rules
                .into_iter()
                .map(|(name, expr)| Rule {
                    name: name.into(),
                    expr,
                    location: None,
                })
                .collect(),
            root: RuleId(0),
        }
    }

    #[test]
    fn self_recursion_without_base_case_is_an_empty_language() {
        let g = grammar(vec![(
            "root",
            Expr::Seq(vec![Expr::literal(b"a"), Expr::Ref(RuleId(0))]),
        )]);
        assert!(matches!(
            g.validate(),
            Err(GrammarError::EmptyLanguage { .. })
        ));
    }

    #[test]
    fn recursion_with_base_case_is_fine() {
        let g = grammar(vec![(
            "root",
            Expr::Alt(vec![
                Expr::literal(b"a"),
                Expr::Seq(vec![Expr::literal(b"a"), Expr::Ref(RuleId(0))]),
            ]),
        )]);
        assert_eq!(g.validate(), Ok(()));
    }

    #[test]
    fn inverted_bounds_are_rejected() {
        let g = grammar(vec![(
            "root",
            Expr::Repeat {
                expr: Box::new(Expr::literal(b"a")),
                min: 3,
                max: Some(2),
            },
        )]);
        assert!(matches!(
            g.validate(),
            Err(GrammarError::RepeatMinAboveMax { .. })
        ));
    }

    #[test]
    fn dangling_reference_is_rejected() {
        let g = grammar(vec![("root", Expr::Ref(RuleId(7)))]);
        assert!(matches!(
            g.validate(),
            Err(GrammarError::DanglingReference { target: 7, .. })
        ));
    }
}
