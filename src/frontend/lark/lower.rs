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
//! * A rule with `lazy` or `suffix=` is a terminal too (its body must be regular);
//!   it matches the shortest strings of its language ([`Dfa::shortest_matches`]).
//!   `stop=`, `max_tokens=`, `temperature=`, `capture` and `stop_capture` are
//!   refused with their location: nothing downstream implements them yet.
//! * Names are resolved lazily from `start`, as llguidance does: a rule nobody
//!   reaches is parsed but not lowered.
//!
//! Rules and terminals are lowered from work queues, not by recursion, so a long
//! chain of references cannot exhaust the stack; only expression nesting (bounded
//! by [`Limits::max_nesting`]) recurses. `&`, `~` and laziness need the regexes of
//! the terminals they use, so they are built last, once every terminal is known
//! and terminal cycles are ruled out.

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
use super::{LarkOptions, LarkWarning};
use crate::frontend::json_schema::{self, PatternCache};
use crate::frontend::{regex, FrontendError};
use crate::grammar::{Expr, Grammar, Rule, RuleId};

type Result<T> = std::result::Result<T, FrontendError>;

/// Lowers a parsed grammar.
pub(crate) fn lower(
    items: Items,
    map: &SourceMap,
    options: &LarkOptions,
    cache: &PatternCache,
) -> Result<(Grammar, Vec<LarkWarning>)> {
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
        warnings: Vec::new(),
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
    let grammar = Grammar {
        rules: l.rules,
        root,
    };
    grammar.validate()?;
    Ok((grammar, l.warnings))
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
    warnings: Vec<LarkWarning>,
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
        if let Some((at, _)) = &a.capture {
            return Err(self.map.unsupported(
                *at,
                "the `capture` attribute (captures are not reported yet)",
            ));
        }
        if let Some((at, _)) = &a.stop_capture {
            return Err(self.map.unsupported(*at, "the `stop_capture` attribute"));
        }
        if let Some((at, _)) = &a.temperature {
            return Err(self.map.unsupported(
                *at,
                "the `temperature` attribute (a sampling setting per rule)",
            ));
        }
        if let Some((at, _)) = &a.max_tokens {
            return Err(self
                .map
                .unsupported(*at, "the `max_tokens` attribute (a token budget per rule)"));
        }
        if let Some((at, _)) = &a.stop {
            return Err(self.map.unsupported(
                *at,
                "`stop=` (it hides the stop text by backtracking tokens; `suffix=` and `lazy` keep it)",
            ));
        }
        if a.lazy.is_some() || a.suffix.is_some() {
            let body = self
                .term_expansions(scope, &def.body)
                .map_err(|e| self.lexeme_rule_error(e, &def.name))?;
            let rx = match &a.suffix {
                Some((_, suffix)) => Rx::Seq(vec![body, self.term_value(scope, suffix)?]),
                None => body,
            };
            self.pending.push(Pending {
                rule: id,
                rx,
                mode: Mode::Lazy,
                at: def.at,
            });
            return Ok(());
        }
        let expr = self.rule_expansions(scope, &def.body)?;
        self.rules[id.index()].expr = expr;
        Ok(())
    }

    /// Says why a lazy rule's body failed as a terminal.
    fn lexeme_rule_error(&self, e: FrontendError, rule: &str) -> FrontendError {
        match e {
            FrontendError::Syntax { location, message } => FrontendError::Syntax {
                location,
                message: format!(
                    "{message} (the body of `{rule}` must be a terminal: `lazy` and `suffix=` apply to terminals only)"
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
            Value::Literal { .. } | Value::Range { .. } | Value::Regex { .. } | Value::RegexExt { .. } => {
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
            Value::SpecialToken { at, token } => Err(self.map.unsupported(
                *at,
                match token {
                    TokenRef::Named(name) => format!(
                        "the special token `{name}` (token-level terminals)"
                    ),
                    TokenRef::Ids { .. } => "token ids `<[...]>` (token-level terminals)".into(),
                    TokenRef::Any => "`<[*]>` (any token: token-level terminals)".into(),
                },
            )),
            Value::GrammarRef { at, name } => Err(self.map.unsupported(
                *at,
                format!("the grammar reference `@{name}` (sub-grammars in a {{\"grammars\": [...]}} document)"),
            )),
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
            self.warnings.push(LarkWarning {
                location,
                message: format!("%json: {w}"),
            });
        }
        let prefix = format!(
            "{}json@{}:{}/",
            self.scopes[scope].prefix, location.line, location.column
        );
        Ok(json::splice(grammar, &prefix, location, &mut self.rules))
    }

    // ---- terminal bodies ----

    fn term_expansions(&mut self, scope: usize, e: &Expansions) -> Result<Rx> {
        let mut alternatives = Vec::with_capacity(e.alternatives.len());
        for alias in &e.alternatives {
            let mut conjuncts = Vec::with_capacity(alias.conjuncts.len());
            for sequence in &alias.conjuncts {
                let mut items = Vec::with_capacity(sequence.items.len());
                for node in &sequence.items {
                    items.push(self.term_expr(scope, node)?);
                }
                conjuncts.push(match items.len() {
                    1 => items.pop().unwrap_or(Rx::Seq(Vec::new())),
                    _ => Rx::Seq(items),
                });
            }
            alternatives.push(match conjuncts.len() {
                1 => conjuncts.pop().unwrap_or(Rx::Seq(Vec::new())),
                _ => Rx::And(conjuncts),
            });
        }
        Ok(match alternatives.len() {
            1 => alternatives.pop().unwrap_or(Rx::Seq(Vec::new())),
            _ => Rx::Alt(alternatives),
        })
    }

    fn term_expr(&mut self, scope: usize, node: &ExprNode) -> Result<Rx> {
        let rx = self.term_atom(scope, &node.atom)?;
        Ok(match node.repeat {
            None => rx,
            Some((_, Some(0))) => Rx::Seq(Vec::new()),
            Some((min, max)) => Rx::Repeat {
                rx: Box::new(rx),
                min,
                max,
            },
        })
    }

    fn term_atom(&mut self, scope: usize, atom: &Atom) -> Result<Rx> {
        Ok(match atom {
            Atom::Group(e) => self.term_expansions(scope, e)?,
            Atom::Maybe(e) => Rx::Repeat {
                rx: Box::new(self.term_expansions(scope, e)?),
                min: 0,
                max: Some(1),
            },
            Atom::Not(inner) => Rx::Not(Box::new(self.term_atom(scope, inner)?)),
            Atom::Value(v) => self.term_value(scope, v)?,
        })
    }

    fn term_value(&mut self, scope: usize, v: &Value) -> Result<Rx> {
        Ok(match v {
            Value::Literal {
                text, insensitive, ..
            } => Rx::Leaf(terminal::literal(text, *insensitive)),
            Value::Range { at, from, to } => {
                Rx::Leaf(terminal::range(from, to).map_err(|e| self.error(*at, e))?)
            }
            Value::Regex { at, pattern, flags } => Rx::Leaf(
                terminal::regex(pattern, flags, &self.options.limits)
                    .map_err(|e| self.error(at + 1 + e.offset, e.message))?,
            ),
            Value::Name { at, name } => match self.term_ref(scope, name) {
                Some(t) => Rx::Term(t),
                None if self.scopes[scope].rules.contains_key(name)
                    || self.scopes[scope].rule_ids.contains_key(name) =>
                {
                    return Err(self.error(
                        *at,
                        format!(
                            "rule `{name}` cannot be used in a terminal (terminals are regular: make it an UPPER-case terminal)"
                        ),
                    ))
                }
                None => return Err(self.error(*at, format!("unknown name: {name:?}"))),
            },
            Value::RegexExt { at, spec } => {
                let chunks = terminal::substring_chunks(spec).map_err(|e| self.error(*at, e))?;
                Rx::Substring(chunks)
            }
            Value::Json { at, .. } => {
                return Err(self.error(*at, "%json literals cannot be used in terminals"))
            }
            Value::NestedLark { at, .. } => {
                return Err(self.error(*at, "nested %lark { ... } cannot be used in terminals"))
            }
            Value::SpecialToken { at, token } => {
                let shown = match token {
                    TokenRef::Named(name) => name.clone(),
                    TokenRef::Ids { .. } | TokenRef::Any => "<[...]>".into(),
                };
                return Err(self.error(
                    *at,
                    format!("special tokens (like {shown}) cannot be used in terminals"),
                ));
            }
            Value::GrammarRef { at, name } => {
                return Err(self.error(
                    *at,
                    format!("grammar references (like @{name}) cannot be used in terminals"),
                ))
            }
        })
    }

    // ---- terminals to IR ----

    /// `rx` as IR nodes; `&` and `~` parts become rules built later.
    fn rx_to_expr(&mut self, rx: &Rx, at: usize) -> Result<Expr> {
        Ok(match rx {
            Rx::Leaf(hir) => regex::hir_to_expr(hir, &self.options.limits)
                .map_err(|e| self.error(at, e.to_string()))?,
            Rx::Term(t) => Expr::Ref(self.terms[*t].rule),
            Rx::Seq(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(self.rx_to_expr(item, at)?);
                }
                seq(out)
            }
            Rx::Alt(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(self.rx_to_expr(item, at)?);
                }
                Expr::Alt(out)
            }
            Rx::Repeat { rx, min, max } => Expr::Repeat {
                expr: Box::new(self.rx_to_expr(rx, at)?),
                min: *min,
                max: *max,
            },
            Rx::Substring(chunks) => self.substring(chunks, at)?,
            Rx::And(_) | Rx::Not(_) => {
                let location = self.map.location(at);
                let name = format!("&~@{}:{}", location.line, location.column);
                let rule = self.push_rule(name, Expr::Empty, at);
                self.pending.push(Pending {
                    rule,
                    rx: rx.clone(),
                    mode: Mode::Automaton,
                    at,
                });
                Expr::Ref(rule)
            }
        })
    }

    /// `chunks[n..m].concat()` for `n <= m`: rules `P_i = "" | chunk_i P_{i+1}`,
    /// one alternative per starting chunk.
    fn substring(&mut self, chunks: &[String], at: usize) -> Result<Expr> {
        let limit = self.options.max_substring_chunks;
        if chunks.len() > limit {
            return Err(self.error(
                at,
                format!(
                    "%regex has {} chunks, above the limit of {limit}",
                    chunks.len()
                ),
            ));
        }
        let location = self.map.location(at);
        let base = self.rules.len() as u32;
        let k = chunks.len() as u32;
        for (i, chunk) in chunks.iter().enumerate() {
            let i = i as u32;
            let rest = if i + 1 < k {
                Expr::Seq(vec![
                    Expr::literal(chunk.as_bytes()),
                    Expr::Ref(RuleId(base + i + 1)),
                ])
            } else {
                Expr::literal(chunk.as_bytes())
            };
            self.push_rule(
                format!("%regex@{}:{}#{i}", location.line, location.column),
                Expr::Alt(vec![Expr::Empty, rest]),
                at,
            );
        }
        chains::keep_apart(&mut self.rules, base as usize, RuleId(base));
        let mut alternatives = vec![Expr::Empty];
        alternatives.extend((0..k).map(|i| Expr::Ref(RuleId(base + i))));
        Ok(Expr::Alt(alternatives))
    }

    /// `rx` as one regex; `None` when it has `&` or `~`.
    fn rx_to_hir(&mut self, rx: &Rx, at: usize, depth: usize) -> Result<Option<Hir>> {
        if depth > self.options.limits.max_nesting {
            return Err(self.error(
                at,
                format!(
                    "terminals refer to terminals more than {} deep",
                    self.options.limits.max_nesting
                ),
            ));
        }
        Ok(Some(match rx {
            Rx::Leaf(hir) => hir.clone(),
            Rx::Term(t) => {
                if let Some(hir) = &self.terms[*t].hir {
                    return Ok(Some(hir.clone()));
                }
                let Some(inner) = self.terms[*t].rx.clone() else {
                    return Ok(None);
                };
                let Some(hir) = self.rx_to_hir(&inner, self.terms[*t].at, depth + 1)? else {
                    return Ok(None);
                };
                self.terms[*t].hir = Some(hir.clone());
                hir
            }
            Rx::Seq(items) | Rx::Alt(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    match self.rx_to_hir(item, at, depth + 1)? {
                        Some(h) => out.push(h),
                        None => return Ok(None),
                    }
                }
                match rx {
                    Rx::Seq(_) => Hir::concat(out),
                    _ => Hir::alternation(out),
                }
            }
            Rx::Repeat { rx, min, max } => {
                let Some(sub) = self.rx_to_hir(rx, at, depth + 1)? else {
                    return Ok(None);
                };
                Hir::repetition(Repetition {
                    min: *min,
                    max: *max,
                    greedy: true,
                    sub: Box::new(sub),
                })
            }
            Rx::Substring(chunks) => {
                let n = chunks.len();
                if n * (n + 1) / 2 > self.options.max_substring_chunks {
                    return Err(self.map.unsupported(
                        at,
                        format!("`&`, `~` or laziness over a %regex of {n} chunks"),
                    ));
                }
                let mut all = vec![Hir::empty()];
                for start in 0..n {
                    for end in start + 1..=n {
                        all.push(Hir::literal(chunks[start..end].concat().into_bytes()));
                    }
                }
                Hir::alternation(all)
            }
            Rx::And(_) | Rx::Not(_) => return Ok(None),
        }))
    }

    /// `rx` as an automaton.
    fn rx_to_dfa(&mut self, rx: &Rx, at: usize) -> Result<Dfa> {
        let max = self.options.max_dfa_states;
        let too_big = |l: &Self, e: String| l.error(at, format!("cannot build this terminal: {e}"));
        match rx {
            Rx::And(items) | Rx::Alt(items) if rx.needs_automaton() => {
                let both = matches!(rx, Rx::And(_));
                let mut acc = self.rx_to_dfa(&items[0], at)?;
                for item in &items[1..] {
                    let next = self.rx_to_dfa(item, at)?;
                    acc = acc.product(&next, both, max).map_err(|e| too_big(self, e))?;
                }
                Ok(acc)
            }
            Rx::Not(inner) => Ok(self.rx_to_dfa(inner, at)?.complement()),
            _ => match self.rx_to_hir(rx, at, 0)? {
                Some(hir) => Dfa::from_hir(&hir, max).map_err(|e| too_big(self, e)),
                None => Err(self.map.unsupported(
                    at,
                    "`&` or `~` inside a concatenation or repetition that is itself under `&`, `~` or laziness",
                )),
            },
        }
    }

    fn check_terminal_cycles(&self) -> Result<()> {
        // Iterative depth-first search: 0 unseen, 1 on the stack, 2 done.
        let mut color = vec![0u8; self.terms.len()];
        for root in 0..self.terms.len() {
            if color[root] != 0 {
                continue;
            }
            let mut stack: Vec<(TermId, Vec<TermId>)> = vec![(root, self.children(root))];
            color[root] = 1;
            while let Some((node, children)) = stack.last_mut() {
                match children.pop() {
                    Some(child) if color[child] == 1 => {
                        return Err(self.error(
                            self.terms[child].at,
                            format!(
                                "circular reference in token {:?} definition (terminals are regular: use a lower-case rule to recurse)",
                                self.terms[child].name
                            ),
                        ))
                    }
                    Some(child) if color[child] == 0 => {
                        color[child] = 1;
                        let grandchildren = self.children(child);
                        stack.push((child, grandchildren));
                    }
                    Some(_) => {}
                    None => {
                        color[*node] = 2;
                        stack.pop();
                    }
                }
            }
        }
        Ok(())
    }

    fn children(&self, t: TermId) -> Vec<TermId> {
        let mut out = Vec::new();
        if let Some(rx) = &self.terms[t].rx {
            rx.for_each_term(&mut |c| out.push(c));
        }
        out
    }

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
}

fn seq(mut items: Vec<Expr>) -> Expr {
    match items.len() {
        0 => Expr::Empty,
        1 => items.pop().unwrap_or(Expr::Empty),
        _ => Expr::Seq(items),
    }
}
