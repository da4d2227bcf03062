//! The syntax tree to the grammar IR: rules, terminals, `%ignore`, `%import`,
//! `%json`, nested `%lark`, and rule attributes.
//!
//! * A lower-case rule becomes an IR rule. Inside it every terminal occurrence
//!   (a string, a regex, an upper-case name, `%json`, ...) is preceded by the
//!   grammar's `%ignore` rule (`(A|B)*`, or `(A|B)?` with `ignore_once`); the slot
//!   before the first lexeme of the output is then taken out unless
//!   `allow_initial_skip` (see the `ignore` module), so ignored text goes between
//!   lexemes only: llguidance's placement.
//! * An upper-case terminal becomes one IR rule built from its regex tree
//!   ([`Rx`]), with no `%ignore` inside (a terminal is one lexeme). Terminals must
//!   not refer to themselves, directly or not.
//! * A rule with `lazy`, `suffix=` or `stop=` is a terminal too (its body must be
//!   regular); it matches the shortest strings of its language
//!   ([`Dfa::shortest_matches`]), or, when it is any text up to a literal (the
//!   tool-calling shape), one free-text terminal ([`FreeText`]).
//! * A rule with `max_tokens=N` is one lexeme with a token budget
//!   ([`TokenBudget`]): its body must be regular. A body of rules (a nested
//!   `%lark` grammar) is inlined into one regex when they never recur
//!   ([`Grammar::flatten_budget_bodies`]); a recursive one (a `%json` value) is
//!   refused with the rule's location. `max_tokens=0` is the empty string. `capture`, `stop_capture`, `temperature=` and stop text to
//!   hide are reported as annotations.
//! * Names are resolved lazily from `start`, as llguidance does: a rule nobody
//!   reaches is parsed but not lowered.
//!
//! Rules and terminals are lowered from work queues, not by recursion, so a long
//! chain of references cannot exhaust the stack; only expression nesting (bounded
//! by [`Limits::max_nesting`]) recurses. `&`, `~` and laziness need the regexes of
//! the terminals they use, so they are built last, once every terminal is known
//! and terminal cycles are ruled out.

mod terminals;

use std::collections::VecDeque;

use regex_syntax::hir::{Hir, Repetition};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::ast::*;
use super::chains;
use super::common;
use super::dfa::Dfa;
use super::ignore;
use super::json;
use super::options::GrammarOptions;
use super::source::SourceMap;
use super::terminal::{self, Rx, TermId};
use super::{LarkOptions, LarkReport, LarkWarning, RuleAnnotation};
use crate::frontend::json_schema::{self, PatternCache};
use crate::frontend::{regex, FrontendError};
use crate::grammar::{Expr, FreeText, Grammar, Location, Rule, RuleId, TokenBudget};

type Result<T> = std::result::Result<T, FrontendError>;

/// A grammar as lowered: the IR, the report, and its `@name` references (each
/// an empty rule for the document to link).
pub(crate) struct Lowered {
    pub grammar: Grammar,
    pub report: LarkReport,
    pub references: Vec<Reference>,
}

/// `@name` in a rule body: the placeholder rule standing for it.
pub(crate) struct Reference {
    pub name: String,
    pub location: Location,
    pub rule: RuleId,
}

/// Lowers a parsed grammar.
pub(crate) fn lower(
    items: Items,
    map: &SourceMap,
    options: &LarkOptions,
    cache: &PatternCache,
) -> Result<Lowered> {
    let mut l = Lowering {
        map,
        options,
        cache,
        rules: Vec::new(),
        scopes: Vec::new(),
        terms: Vec::new(),
        rule_queue: VecDeque::new(),
        term_queue: VecDeque::new(),
        pending: Vec::new(),
        report: LarkReport::default(),
        references: Vec::new(),
        structure: HashSet::default(),
        ignores: HashSet::default(),
        allow_initial_skip: false,
    };
    let mut start = l.scope(&items, String::new(), 0)?;
    l.run_queues()?;
    l.check_terminal_cycles()?;
    l.finish_pending()?;
    if !l.ignores.is_empty() && !l.allow_initial_skip {
        start = ignore::without_initial_ignore(&mut l.rules, &start, &l.structure, &l.ignores);
    }
    let root = match start {
        Expr::Ref(id) => id,
        expr => l.push_rule("start (no %ignore before its first lexeme)".into(), expr, 0),
    };
    let mut grammar = Grammar {
        rules: l.rules,
        root,
    };
    // A document links its references first and flattens then: here the
    // rest is validated (so errors still name their member).
    if l.references.is_empty() {
        grammar.flatten_budget_bodies();
        grammar.validate()?;
    } else if grammar.has_budget_over_rules() {
        grammar.with_budget_bodies_emptied().validate()?;
    } else {
        grammar.validate()?;
    }
    Ok(Lowered {
        grammar,
        report: l.report,
        references: l.references,
    })
}

struct Lowering<'a> {
    map: &'a SourceMap<'a>,
    options: &'a LarkOptions,
    cache: &'a PatternCache,
    rules: Vec<Rule>,
    scopes: Vec<Scope>,
    terms: Vec<TermSlot>,
    rule_queue: VecDeque<(usize, String, RuleId)>,
    term_queue: VecDeque<TermId>,
    /// Rules whose bodies need automata, built once every terminal is known.
    pending: Vec<Pending>,
    /// Warnings and rule annotations.
    report: LarkReport,
    /// `@name` placeholders, one per name.
    references: Vec<Reference>,
    /// Rules written in rule syntax (the others are lexemes).
    structure: HashSet<RuleId>,
    /// The `%ignore` rules of every scope.
    ignores: HashSet<RuleId>,
    /// Some `%llguidance` set it (it holds for the whole grammar, nested ones
    /// included, as llguidance's options do).
    allow_initial_skip: bool,
}

/// One grammar's names: the top-level text, or a `%lark { ... }` block.
struct Scope {
    /// Prefix of its IR rule names (empty at the top).
    prefix: String,
    rules: HashMap<String, RuleDef>,
    terminals: HashMap<String, TermSource>,
    rule_ids: HashMap<String, (RuleId, RuleKind)>,
    term_ids: HashMap<String, TermId>,
    /// The `%ignore` rule, when the grammar has one.
    ignore: Option<RuleId>,
}

#[derive(Clone)]
enum TermSource {
    Def(TerminalDef),
    /// `%import common.NAME`: the regex, and where the import is.
    Common {
        at: usize,
        regex: &'static str,
    },
}

impl TermSource {
    fn at(&self) -> usize {
        match self {
            TermSource::Def(d) => d.at,
            TermSource::Common { at, .. } => *at,
        }
    }
}

struct TermSlot {
    name: String,
    at: usize,
    scope: usize,
    rule: RuleId,
    rx: Option<Rx>,
    /// The terminal as one regex, once asked for (by `&`, `~`, laziness).
    hir: Option<Hir>,
}

/// How a rule is referenced: a plain rule has `%ignore` woven inside it; a
/// lexeme-like rule (lazy) is one terminal and gets it after each use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RuleKind {
    Plain,
    Lexeme,
}

struct Pending {
    rule: RuleId,
    rx: Rx,
    mode: Mode,
    at: usize,
}

enum Mode {
    /// `&` / `~`.
    Automaton,
    /// A lazy rule: the shortest matches.
    Lazy,
    /// The `%ignore` rule: its terminals repeated (at most once with `once`).
    Ignore { once: bool },
    /// A rule with `max_tokens=`: one lexeme with that token budget.
    Budget(u32),
}

impl<'a> Lowering<'a> {
    fn error(&self, at: usize, message: impl Into<String>) -> FrontendError {
        self.map.error(at, message)
    }

    fn push_rule(&mut self, name: String, expr: Expr, at: usize) -> RuleId {
        let id = RuleId(self.rules.len() as u32);
        self.rules.push(Rule {
            name,
            expr,
            location: Some(self.map.location(at)),
        });
        id
    }

    /// Collects a grammar's definitions and returns the expression of its start.
    fn scope(&mut self, items: &Items, prefix: String, at: usize) -> Result<Expr> {
        let mut scope = Scope {
            prefix,
            rules: HashMap::default(),
            terminals: HashMap::default(),
            rule_ids: HashMap::default(),
            term_ids: HashMap::default(),
            ignore: None,
        };
        let mut options = GrammarOptions::default();
        let mut ignores = Vec::new();
        for item in &items.items {
            match item {
                Item::Rule(def) => {
                    if scope.rules.contains_key(&def.name) {
                        return Err(self.error(def.at, format!("duplicate rule: {:?}", def.name)));
                    }
                    scope.rules.insert(def.name.clone(), (**def).clone());
                }
                Item::Terminal(def) => {
                    if scope.terminals.contains_key(&def.name) {
                        return Err(self.error(def.at, format!("duplicate token: {:?}", def.name)));
                    }
                    scope
                        .terminals
                        .insert(def.name.clone(), TermSource::Def(def.clone()));
                }
                Item::Import { at, module, names } => {
                    if module.as_slice() != ["common"] {
                        return Err(self.map.unsupported(
                            *at,
                            format!(
                                "`%import {}` (only Lark's `common` terminals can be imported)",
                                module.join(".")
                            ),
                        ));
                    }
                    for (name, local) in names {
                        let Some(regex) = common::lookup(name) else {
                            return Err(self.error(
                                *at,
                                format!(
                                    "Unknown common terminal `common.{name}`; available: {}",
                                    common::names().collect::<Vec<_>>().join(", ")
                                ),
                            ));
                        };
                        if scope.terminals.contains_key(local) {
                            return Err(
                                self.error(*at, format!("duplicate token (in import): {local:?}"))
                            );
                        }
                        scope
                            .terminals
                            .insert(local.clone(), TermSource::Common { at: *at, regex });
                    }
                }
                Item::Ignore { at, body } => ignores.push((*at, body)),
                Item::Options {
                    at,
                    spelling,
                    value,
                } => {
                    options
                        .merge(value, spelling)
                        .map_err(|e| self.error(*at, e))?;
                }
            }
        }
        if !scope.rules.contains_key("start") {
            return Err(self.error(
                at,
                "the grammar has no start rule `start` (a Lark grammar begins at `start`)",
            ));
        }
        self.allow_initial_skip |= options.allow_initial_skip;
        let id = self.scopes.len();
        self.scopes.push(scope);
        if let Some(&(first_at, _)) = ignores.first() {
            let mut alternatives = Vec::new();
            for (_, body) in &ignores {
                alternatives.push(self.term_expansions(id, body)?);
            }
            let rx = match alternatives.len() {
                1 => alternatives.pop().unwrap_or(Rx::Seq(Vec::new())),
                _ => Rx::Alt(alternatives),
            };
            let name = format!("{}%ignore", self.scopes[id].prefix);
            let rule = self.push_rule(name, Expr::Empty, first_at);
            self.pending.push(Pending {
                rule,
                rx,
                mode: Mode::Ignore {
                    once: options.ignore_once,
                },
                at: first_at,
            });
            self.scopes[id].ignore = Some(rule);
            self.ignores.insert(rule);
        }
        self.rule_name(id, "start", at)
    }

    fn run_queues(&mut self) -> Result<()> {
        loop {
            if let Some((scope, name, id)) = self.rule_queue.pop_front() {
                self.lower_rule(scope, &name, id)?;
            } else if let Some(term) = self.term_queue.pop_front() {
                self.lower_terminal(term)?;
            } else {
                return Ok(());
            }
        }
    }

    /// The lexeme `expr` with the scope's `%ignore` before it.
    fn weave(&self, scope: usize, expr: Expr) -> Expr {
        match self.scopes[scope].ignore {
            Some(ignore) => Expr::Seq(vec![Expr::Ref(ignore), expr]),
            None => expr,
        }
    }

    /// The rule `name` of `scope` (queued for lowering on first use).
    fn rule_ref(&mut self, scope: usize, name: &str) -> Option<(RuleId, RuleKind)> {
        if let Some(&found) = self.scopes[scope].rule_ids.get(name) {
            return Some(found);
        }
        let def = self.scopes[scope].rules.get(name)?;
        let a = &def.attributes;
        let kind = if a.lazy.is_some() || a.suffix.is_some() || a.stop.is_some() {
            RuleKind::Lexeme
        } else {
            RuleKind::Plain
        };
        let at = def.at;
        let ir_name = format!("{}{name}", self.scopes[scope].prefix);
        let id = self.push_rule(ir_name, Expr::Empty, at);
        if kind == RuleKind::Plain {
            self.structure.insert(id);
        }
        self.scopes[scope]
            .rule_ids
            .insert(name.to_string(), (id, kind));
        self.rule_queue.push_back((scope, name.to_string(), id));
        Some((id, kind))
    }

    /// The terminal `name` of `scope` (queued for lowering on first use).
    fn term_ref(&mut self, scope: usize, name: &str) -> Option<TermId> {
        if let Some(&found) = self.scopes[scope].term_ids.get(name) {
            return Some(found);
        }
        let at = self.scopes[scope].terminals.get(name)?.at();
        let ir_name = format!("{}{name}", self.scopes[scope].prefix);
        let rule = self.push_rule(ir_name, Expr::Empty, at);
        let id = self.terms.len();
        self.terms.push(TermSlot {
            name: name.to_string(),
            at,
            scope,
            rule,
            rx: None,
            hir: None,
        });
        self.scopes[scope].term_ids.insert(name.to_string(), id);
        self.term_queue.push_back(id);
        Some(id)
    }

    /// A name used in a rule body: a rule, else a terminal.
    fn rule_name(&mut self, scope: usize, name: &str, at: usize) -> Result<Expr> {
        let lower = name.bytes().any(|b| b.is_ascii_lowercase());
        if lower {
            if let Some((id, kind)) = self.rule_ref(scope, name) {
                return Ok(match kind {
                    RuleKind::Plain => Expr::Ref(id),
                    RuleKind::Lexeme => self.weave(scope, Expr::Ref(id)),
                });
            }
        }
        match self.term_ref(scope, name) {
            Some(t) => Ok(self.weave(scope, Expr::Ref(self.terms[t].rule))),
            None => Err(self.error(at, format!("unknown name: {name:?}"))),
        }
    }

    fn lower_rule(&mut self, scope: usize, name: &str, id: RuleId) -> Result<()> {
        let Some(def) = self.scopes[scope].rules.remove(name) else {
            return Ok(());
        };
        let a = &def.attributes;
        if let Some((at, _)) = &a.stop_capture {
            if a.stop.is_none() && a.suffix.is_none() {
                return Err(self.error(*at, "stop_capture requires stop= or suffix="));
            }
        }
        self.annotate(id, &def);
        let a = &def.attributes;
        // `max_tokens=0`: no token may be spent, so the rule matches only the
        // empty string (as llguidance reads it).
        if matches!(a.max_tokens, Some((_, 0))) {
            self.rules[id.index()].expr = Expr::Empty;
            return Ok(());
        }
        // `stop=X` keeps X in the language exactly as `suffix=X` does: the model
        // writes it; hiding it from the output is the caller's (annotated). An
        // empty stop is no stop at all: the body alone, greedy.
        let stop = a.stop.as_ref().or(a.suffix.as_ref()).map(|(_, v)| v);
        let empty_stop = matches!(stop, Some(Value::Literal { text, .. }) if text.is_empty());
        let budget = a
            .max_tokens
            .map(|(at, n)| (at, n.min(u32::MAX as u64) as u32));
        if a.lazy.is_some() || (stop.is_some() && !empty_stop) {
            let body = self
                .term_expansions(scope, &def.body)
                .map_err(|e| self.lexeme_rule_error(e, &def.name))?;
            if let Some(text) = self.free_text(&body, stop, def.at)? {
                let text = Expr::Text(Box::new(text));
                self.rules[id.index()].expr = match budget {
                    Some((_, max_tokens)) => Expr::Budget(Box::new(TokenBudget {
                        body: text,
                        max_tokens,
                    })),
                    None => text,
                };
                return Ok(());
            }
            if let Some((at, _)) = budget {
                return Err(self.map.unsupported(
                    at,
                    "`max_tokens=` beside `lazy`, `stop=` or `suffix=` unless the body is any text up to a literal stop",
                ));
            }
            let rx = match stop {
                Some(stop) if !empty_stop => Rx::Seq(vec![body, self.term_value(scope, stop)?]),
                _ => body,
            };
            self.pending.push(Pending {
                rule: id,
                rx,
                mode: Mode::Lazy,
                at: def.at,
            });
            return Ok(());
        }
        // A token budget: the body is one lexeme (greedy, as with an empty
        // stop), built once every terminal it names is known.
        if let Some((_, max_tokens)) = budget {
            match self.term_expansions(scope, &def.body) {
                Ok(rx) => self.pending.push(Pending {
                    rule: id,
                    rx,
                    mode: Mode::Budget(max_tokens),
                    at: def.at,
                }),
                // Rules (a nested grammar): one lexeme once they are known, if
                // they never recur (`Grammar::flatten_budget_bodies`).
                Err(e) => {
                    let Ok(body) = self.rule_expansions(scope, &def.body) else {
                        return Err(self.lexeme_rule_error(e, &def.name));
                    };
                    self.rules[id.index()].expr =
                        Expr::Budget(Box::new(TokenBudget { body, max_tokens }));
                }
            }
            return Ok(());
        }
        if empty_stop {
            let body = self
                .term_expansions(scope, &def.body)
                .map_err(|e| self.lexeme_rule_error(e, &def.name))?;
            let expr = self.rx_to_expr(&body, def.at)?;
            self.rules[id.index()].expr = expr;
            return Ok(());
        }
        let expr = self.rule_expansions(scope, &def.body)?;
        self.rules[id.index()].expr = expr;
        Ok(())
    }

    /// Records what `def`'s attributes ask of the caller (nothing when they ask
    /// only of the language).
    fn annotate(&mut self, id: RuleId, def: &RuleDef) {
        let a = &def.attributes;
        let hidden_stop = match &a.stop {
            Some((_, Value::Literal { text, .. })) => !text.is_empty(),
            Some(_) => true,
            None => false,
        };
        let annotation = RuleAnnotation {
            rule: self.rules[id.index()].name.clone(),
            location: self.map.location(def.at),
            capture: a.capture.as_ref().map(|(_, name)| name.clone()),
            stop_capture: a.stop_capture.as_ref().map(|(_, name)| name.clone()),
            hidden_stop,
            temperature: a.temperature.map(|(_, t)| t),
        };
        if annotation.capture.is_some()
            || annotation.stop_capture.is_some()
            || annotation.hidden_stop
            || annotation.temperature.is_some()
        {
            self.report.annotations.push(annotation);
        }
    }

    /// A lazy rule that is "any text up to a literal stop" (`TEXT "</end>"`, the
    /// shape of tool-calling grammars) as one free-text terminal, whose masks
    /// are table lookups, instead of the lazy automaton's rules (parsed a byte
    /// at a time). Bodies: any text, or any text but newlines (the stop holding
    /// no newline before its last byte). `None` for anything else.
    fn free_text(
        &mut self,
        body: &Rx,
        stop: Option<&Value>,
        at: usize,
    ) -> Result<Option<FreeText>> {
        let Some(Value::Literal {
            text,
            insensitive: false,
            ..
        }) = stop
        else {
            return Ok(None);
        };
        let stop = text.as_bytes().to_vec();
        if stop.is_empty() || body.needs_automaton() {
            return Ok(None);
        }
        let Some(hir) = self.rx_to_hir(body, at, 0)? else {
            return Ok(None);
        };
        let max = self.options.max_dfa_states;
        let Ok(body) = Dfa::from_hir(&hir, max) else {
            return Ok(None);
        };
        let same = |pattern: &str| -> bool {
            let hir = regex_syntax::ParserBuilder::new()
                .dot_matches_new_line(true)
                .build()
                .parse(pattern)
                .expect("a valid regex");
            Dfa::from_hir(&hir, max)
                .and_then(|d| body.same_language(&d, 4 * max))
                .unwrap_or(false)
        };
        if same(".*") {
            return Ok(Some(FreeText::until(vec![stop])));
        }
        let newline_inside = stop[..stop.len() - 1].contains(&b'\n');
        if !newline_inside && same("[^\n]*") {
            return Ok(Some(FreeText {
                excludes: vec![b"\n".to_vec()],
                stops: vec![stop],
            }));
        }
        Ok(None)
    }

    /// Says why a lazy rule's body failed as a terminal.
    fn lexeme_rule_error(&self, e: FrontendError, rule: &str) -> FrontendError {
        match e {
            FrontendError::Syntax { location, message } => FrontendError::Syntax {
                location,
                message: format!(
                    "{message} (the body of `{rule}` must be a terminal: `lazy`, `stop=`, `suffix=` and `max_tokens=` apply to terminals only)"
                ),
            },
            other => other,
        }
    }

    fn lower_terminal(&mut self, term: TermId) -> Result<()> {
        let scope = self.terms[term].scope;
        let name = self.terms[term].name.clone();
        let Some(source) = self.scopes[scope].terminals.get(&name).cloned() else {
            return Ok(());
        };
        let rx = match source {
            TermSource::Def(def) => self.term_expansions(scope, &def.body)?,
            TermSource::Common { at, regex } => {
                let hir = terminal::regex(regex, "", &self.options.limits)
                    .map_err(|e| self.error(at, e.message))?;
                Rx::Leaf(hir)
            }
        };
        let at = self.terms[term].at;
        let expr = self.rx_to_expr(&rx, at)?;
        self.rules[self.terms[term].rule.index()].expr = expr;
        self.terms[term].rx = Some(rx);
        Ok(())
    }

    // ---- rule bodies ----

    fn rule_expansions(&mut self, scope: usize, e: &Expansions) -> Result<Expr> {
        let mut alternatives = Vec::with_capacity(e.alternatives.len());
        for alias in &e.alternatives {
            if alias.conjuncts.len() > 1 {
                return Err(self.error(
                    alias.at,
                    "& is only supported for tokens, not rules; try renaming the rule to UPPERCASE",
                ));
            }
            let mut items = Vec::new();
            for node in &alias.conjuncts[0].items {
                items.push(self.rule_expr(scope, node)?);
            }
            alternatives.push(seq(items));
        }
        Ok(match alternatives.len() {
            1 => alternatives.pop().unwrap_or(Expr::Empty),
            _ => Expr::Alt(alternatives),
        })
    }

    fn rule_expr(&mut self, scope: usize, node: &ExprNode) -> Result<Expr> {
        let expr = match &node.atom {
            Atom::Group(e) => self.rule_expansions(scope, e)?,
            Atom::Maybe(e) => Expr::optional(self.rule_expansions(scope, e)?),
            Atom::Not(_) => {
                let rx = self.term_atom(scope, &node.atom)?;
                let expr = self.rx_to_expr(&rx, node.at)?;
                self.weave(scope, expr)
            }
            Atom::Value(v) => self.rule_value(scope, v)?,
        };
        Ok(match node.repeat {
            None => expr,
            Some((_, Some(0))) => Expr::Empty,
            Some((min, max)) => Expr::Repeat {
                expr: Box::new(expr),
                min,
                max,
            },
        })
    }

    fn rule_value(&mut self, scope: usize, v: &Value) -> Result<Expr> {
        match v {
            Value::Name { at, name } => self.rule_name(scope, name, *at),
            Value::Literal { text, .. } if text.is_empty() => Ok(Expr::Empty),
            Value::Literal { .. }
            | Value::Range { .. }
            | Value::Regex { .. }
            | Value::RegexExt { .. } => {
                let rx = self.term_value(scope, v)?;
                let expr = self.rx_to_expr(&rx, v.at())?;
                Ok(self.weave(scope, expr))
            }
            Value::Json { at, schema } => {
                let root = self.json(scope, *at, schema)?;
                Ok(self.weave(scope, Expr::Ref(root)))
            }
            Value::NestedLark { at, items } => {
                let location = self.map.location(*at);
                let prefix = format!(
                    "{}lark@{}:{}/",
                    self.scopes[scope].prefix, location.line, location.column
                );
                let inner = self.scope(items, prefix, *at)?;
                Ok(self.weave(scope, inner))
            }
            Value::SpecialToken { token, .. } => Ok(Expr::Tokens(token.clone())),
            Value::GrammarRef { at, name } => {
                // A placeholder rule, linked to the named grammar's start by the
                // document (`document.rs`); a lexeme as far as `%ignore` goes.
                let stub = match self.references.iter().find(|r| r.name == *name) {
                    Some(r) => r.rule,
                    None => {
                        let rule = self.push_rule(format!("@{name}"), Expr::Empty, *at);
                        let location = self.map.location(*at);
                        self.references.push(Reference {
                            name: name.clone(),
                            location,
                            rule,
                        });
                        rule
                    }
                };
                Ok(self.weave(scope, Expr::Ref(stub)))
            }
        }
    }

    /// `%json { schema }`: compiled and spliced; returns its root rule.
    fn json(&mut self, scope: usize, at: usize, schema: &serde_json::Value) -> Result<RuleId> {
        let fail = |l: &Self, e: String| l.error(at, format!("failed to compile JSON schema: {e}"));
        let (options, schema) =
            json::options_for(&self.options.json, schema).map_err(|e| fail(self, e))?;
        let (grammar, warnings) = json_schema::compile_schema_with(&schema, &options, self.cache)
            .map_err(|e| fail(self, e.to_string()))?;
        let location = self.map.location(at);
        for w in warnings {
            self.report.warnings.push(LarkWarning {
                location,
                message: format!("%json: {w}"),
            });
        }
        let prefix = format!(
            "{}json@{}:{}/",
            self.scopes[scope].prefix, location.line, location.column
        );
        Ok(grammar.splice_into(&prefix, Some(location), &mut self.rules))
    }

    // ---- terminal bodies ----

    fn finish_pending(&mut self) -> Result<()> {
        while let Some(p) = self.pending.pop() {
            let location = self.rules[p.rule.index()].location;
            let name = self.rules[p.rule.index()].name.clone();
            let expr = match p.mode {
                Mode::Automaton => {
                    let dfa = self.rx_to_dfa(&p.rx, p.at)?;
                    dfa.to_rules(&name, location, &mut self.rules)
                }
                Mode::Lazy => {
                    let dfa = self.rx_to_dfa(&p.rx, p.at)?.shortest_matches();
                    dfa.to_rules(&name, location, &mut self.rules)
                }
                Mode::Budget(max_tokens) => self.budget_body(&p.rx, p.at, max_tokens)?,
                Mode::Ignore { once } => {
                    let max = if once { Some(1) } else { None };
                    match self.rx_to_hir(&p.rx, p.at, 0)? {
                        Some(hir) => Expr::Regex(Hir::repetition(Repetition {
                            min: 0,
                            max,
                            greedy: true,
                            sub: Box::new(hir),
                        })),
                        None => Expr::Repeat {
                            expr: Box::new(self.rx_to_expr(&p.rx, p.at)?),
                            min: 0,
                            max,
                        },
                    }
                }
            };
            self.rules[p.rule.index()].expr = expr;
        }
        Ok(())
    }

    /// A budgeted rule's body as one leaf: its regex (`&` and `~` make an
    /// automaton of rules, which no budget can count over).
    fn budget_body(&mut self, rx: &Rx, at: usize, max_tokens: u32) -> Result<Expr> {
        match self.rx_to_hir(rx, at, 0)? {
            Some(hir) => Ok(Expr::Budget(Box::new(TokenBudget {
                body: Expr::Regex(hir),
                max_tokens,
            }))),
            None => Err(self
                .map
                .unsupported(at, "`max_tokens=` on a terminal built with `&` or `~`")),
        }
    }
}

fn seq(mut items: Vec<Expr>) -> Expr {
    match items.len() {
        0 => Expr::Empty,
        1 => items.pop().unwrap_or(Expr::Empty),
        _ => Expr::Seq(items),
    }
}
