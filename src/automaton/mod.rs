//! The compiled grammar: lexer terminals (byte DFAs) plus a context-free grammar
//! over them, ready for the Earley matcher.
//!
//! A [`CompiledGrammar`] is immutable and meant to be shared (`Arc`) by every request
//! that uses it; all per-request state lives in [`crate::matcher`]. Compilation:
//!
//! 1. `lower` turns the IR into productions, fusing regular parts into terminals
//!    and keeping large counted repetitions as [`Symbol::Repeat`] counters;
//! 2. [`terminal`] builds one anchored DFA per terminal under size limits;
//! 3. here: nullable and productive symbols are computed, and productions that can
//!    never complete are pruned, so every parse item the matcher creates can still
//!    finish. That is what lets the matcher decide viability from its live lexemes.
//! 4. Prediction is precomputed: for each nonterminal, every nonterminal an Earley
//!    prediction of it reaches, and each one's items with the dot already past
//!    nullable prefixes. A chart set then predicts by appending slices, with no
//!    per-item work (the LR(0)-closure idea applied to Earley).

mod cache;
mod fused;
mod lower;
pub mod permutation;
pub mod shortest;
pub mod terminal;

use std::fmt;

pub use cache::{AutomatonCache, DEFAULT_AUTOMATON_CACHE_BYTES};
pub use permutation::{Permutation, PermutationId, Progress};
pub use terminal::{LexerLimits, State, Terminal, TerminalError, DEAD};

use regex_syntax::hir::{Hir, HirKind};
use rustc_hash::FxHashMap;

use crate::grammar::{Grammar, GrammarError};
use lower::TerminalSource;
use terminal::concat_fingerprint;

/// Index of a terminal in [`CompiledGrammar::terminals`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TerminalId(pub u32);

/// Index of a nonterminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NonTerminalId(pub u32);

/// Index of a production.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProductionId(pub u32);

/// A symbol on the right-hand side of a production.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Symbol {
    Terminal(TerminalId),
    Rule(NonTerminalId),
    /// `rule{min,max}`, counted by the parser (the count lives in the parse item).
    Repeat {
        rule: NonTerminalId,
        min: u32,
        max: Option<u32>,
    },
    /// Items in any order, each member at most once: the parse item carries a
    /// [`Progress`] (see [`permutation`]).
    Permutation(PermutationId),
}

/// `lhs -> rhs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Production {
    pub lhs: NonTerminalId,
    pub rhs: Vec<Symbol>,
}

/// Knobs for [`CompiledGrammar::compile`].
#[derive(Debug, Clone)]
pub struct CompileOptions {
    /// Largest regular part fused into one terminal (a rough automaton-size unit);
    /// bigger parts stay parser-level counters. The default fuses a JSON string of
    /// up to about 100 characters (`maxLength`) into one automaton: as a counter
    /// of one-character terminals, every token of two characters or more would
    /// cross a terminal boundary and go to the parser (50 ms masks on Llama-3).
    pub max_terminal_weight: usize,
    pub lexer: LexerLimits,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            max_terminal_weight: 16384,
            lexer: LexerLimits::default(),
        }
    }
}

/// A grammar that passed its front-end but cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    #[error(transparent)]
    Grammar(#[from] GrammarError),
    #[error("terminal `{terminal}` cannot be compiled within the limits: {error}")]
    Terminal {
        terminal: String,
        error: TerminalError,
    },
    #[error("a permutation item matches the empty string: `{item}` (items must not be empty)")]
    EmptyPermutationItem { item: String },
}

/// An immutable, shareable compiled grammar.
pub struct CompiledGrammar {
    terminals: Vec<Terminal>,
    /// Per terminal: see [`CompiledGrammar::table_terminal`].
    table_terminals: Vec<TableShare>,
    productions: Vec<Production>,
    /// Productions of each nonterminal.
    by_lhs: Vec<Vec<ProductionId>>,
    nonterminal_names: Vec<String>,
    nullable: Vec<bool>,
    start: NonTerminalId,
    permutations: Vec<Permutation>,
    /// Per nonterminal: the nonterminals its prediction reaches (itself included).
    prediction_closure: Vec<Vec<NonTerminalId>>,
    /// Per nonterminal: `(production, dot)` of its predicted items, the dot moved
    /// over every nullable prefix, complete items left out.
    predicted_items: PredictedItems,
    /// Shortest strings, built on first use (budget steering).
    shortest: std::sync::OnceLock<shortest::ShortestStrings>,
    /// Per terminal, its token budget ([`TokenBudget`](crate::grammar::TokenBudget));
    /// empty when no terminal has one, so the matcher's check is one test.
    token_budgets: Vec<Option<u32>>,
}

impl fmt::Debug for CompiledGrammar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledGrammar")
            .field("terminals", &self.terminals.len())
            .field("productions", &self.productions.len())
            .finish()
    }
}

impl CompiledGrammar {
    pub fn compile(
        grammar: &Grammar,
        options: &CompileOptions,
    ) -> Result<CompiledGrammar, CompileError> {
        CompiledGrammar::compile_with(grammar, options, &AutomatonCache::default())
    }

    /// [`CompiledGrammar::compile`] taking automata from `automata` and leaving
    /// the new ones there, for the next grammars compiled with it.
    pub fn compile_with(
        grammar: &Grammar,
        options: &CompileOptions,
        automata: &AutomatonCache,
    ) -> Result<CompiledGrammar, CompileError> {
        grammar.validate()?;
        grammar.check_tokens_bound()?;
        let (lowered, terminals) = lower_and_build(grammar, options, automata)?;
        let (terminals, shared): (Vec<Terminal>, Vec<_>) = terminals.into_iter().unzip();
        let table_terminals = table_terminals(&shared);
        let n_nonterminals = lowered.nonterminal_names.len();
        let terminal_nullable: Vec<bool> = terminals.iter().map(Terminal::matches_empty).collect();
        let terminal_productive: Vec<bool> = lowered
            .terminals
            .iter()
            .zip(&terminals)
            .map(|((_, source), terminal)| match source {
                TerminalSource::Regex(hir, _) => crate::grammar::hir_matches_something(hir),
                TerminalSource::Excluding(_)
                | TerminalSource::Intersection(_)
                | TerminalSource::Counted(_)
                | TerminalSource::Text(_) => !terminal.is_dead(terminal.start()),
                TerminalSource::Tokens(set) => !set.is_empty(),
            })
            .collect();

        let mut permutations = lowered.permutations;
        let item_productive = |p: &Permutation, known: &[bool]| -> Vec<bool> {
            (0..p.first.len())
                .map(|k| known[p.first[k].0 as usize] && known[p.next[k].0 as usize])
                .collect()
        };
        let permutation_productive = |p: &Permutation, known: &[bool]| {
            let items = item_productive(p, known);
            let extra = p.has_extra && items[p.members()];
            crate::grammar::permutation_satisfiable(
                &p.required,
                p.min,
                p.max,
                &items[..p.members()],
                extra,
            )
        };
        let productive = fixpoint(
            n_nonterminals,
            &lowered.productions,
            |sym, known| match sym {
                Symbol::Terminal(t) => terminal_productive[t.0 as usize],
                Symbol::Rule(n) => known[n.0 as usize],
                Symbol::Repeat { rule, min, .. } => *min == 0 || known[rule.0 as usize],
                Symbol::Permutation(id) => {
                    permutation_productive(&permutations[id.0 as usize], known)
                }
            },
        );
        for p in &mut permutations {
            p.set_productive(item_productive(p, &productive));
        }
        let permutation_ok: Vec<bool> = permutations
            .iter()
            .map(|p| permutation_productive(p, &productive))
            .collect();
        // Keep only productions that can complete; predicting a nonterminal with no
        // productions left simply adds nothing.
        let productions: Vec<Production> = lowered
            .productions
            .into_iter()
            .filter(|p| {
                p.rhs.iter().all(|sym| match sym {
                    Symbol::Terminal(t) => terminal_productive[t.0 as usize],
                    Symbol::Rule(n) => productive[n.0 as usize],
                    Symbol::Repeat { rule, min, .. } => *min == 0 || productive[rule.0 as usize],
                    Symbol::Permutation(id) => permutation_ok[id.0 as usize],
                })
            })
            .collect();
        // Items are never empty (checked below), so a permutation matches the empty
        // string exactly when it may end before its first item.
        let permutation_nullable: Vec<bool> = permutations
            .iter()
            .map(|p| p.can_end(&Progress::default()))
            .collect();
        let nullable = fixpoint(n_nonterminals, &productions, |sym, known| match sym {
            Symbol::Terminal(t) => terminal_nullable[t.0 as usize],
            Symbol::Rule(n) => known[n.0 as usize],
            Symbol::Repeat { rule, min, .. } => *min == 0 || known[rule.0 as usize],
            Symbol::Permutation(id) => permutation_nullable[id.0 as usize],
        });
        for p in &permutations {
            if let Some(&nt) = p.first.iter().find(|nt| nullable[nt.0 as usize]) {
                return Err(CompileError::EmptyPermutationItem {
                    item: lowered.nonterminal_names[nt.0 as usize].clone(),
                });
            }
        }
        let mut by_lhs = vec![Vec::new(); n_nonterminals];
        for (i, p) in productions.iter().enumerate() {
            by_lhs[p.lhs.0 as usize].push(ProductionId(i as u32));
        }
        if !productive[lowered.start.0 as usize] {
            let root = grammar.rule(grammar.root);
            return Err(GrammarError::EmptyLanguage {
                rule: root.name.clone(),
                location: root.location,
            }
            .into());
        }
        let symbol_nullable = |sym: &Symbol| match sym {
            Symbol::Terminal(t) => terminal_nullable[t.0 as usize],
            Symbol::Rule(n) => nullable[n.0 as usize],
            Symbol::Repeat { rule, min, .. } => *min == 0 || nullable[rule.0 as usize],
            Symbol::Permutation(id) => permutation_nullable[id.0 as usize],
        };
        let (predicted_items, prediction_closure) =
            predictions(n_nonterminals, &productions, &permutations, symbol_nullable);
        let mut token_budgets = Vec::new();
        if !lowered.budgets.is_empty() {
            token_budgets = vec![None; terminals.len()];
            for &(terminal, budget) in &lowered.budgets {
                token_budgets[terminal.0 as usize] = Some(budget);
            }
        }
        Ok(CompiledGrammar {
            terminals,
            table_terminals,
            productions,
            by_lhs,
            nonterminal_names: lowered.nonterminal_names,
            nullable,
            start: lowered.start,
            permutations,
            prediction_closure,
            predicted_items,
            shortest: std::sync::OnceLock::new(),
            token_budgets,
        })
    }

    /// Whether some terminal has a token budget.
    #[inline]
    pub fn has_token_budgets(&self) -> bool {
        !self.token_budgets.is_empty()
    }

    /// How many tokens a lexeme of `terminal` may spend, if it has a budget.
    #[inline]
    pub fn token_budget(&self, terminal: TerminalId) -> Option<u32> {
        self.token_budgets
            .get(terminal.0 as usize)
            .copied()
            .flatten()
    }

    /// Shortest strings of terminals and nonterminals (built on first call).
    pub fn shortest(&self) -> &shortest::ShortestStrings {
        self.shortest
            .get_or_init(|| shortest::ShortestStrings::build(self))
    }

    pub fn terminals(&self) -> &[Terminal] {
        &self.terminals
    }

    #[inline]
    pub fn terminal(&self, id: TerminalId) -> &Terminal {
        &self.terminals[id.0 as usize]
    }

    /// The terminal whose token tables serve `terminal` in `state`. Terminals that
    /// chain a literal onto one shared automaton (`,"a":"` and `,"b":"` before a
    /// string body) are that automaton past their literal, with the same state
    /// numbers, so their lexemes there share one table. A [`LOOPED`](terminal::LOOPED)
    /// state restarts at its own literal: never shared.
    #[inline]
    pub fn table_terminal(&self, terminal: TerminalId, state: State) -> TerminalId {
        let share = &self.table_terminals[terminal.0 as usize];
        if state < share.states {
            share.canonical
        } else {
            terminal
        }
    }

    /// Identifies the automaton a [table terminal](CompiledGrammar::table_terminal)
    /// runs in `state`, in the whole process: the shared rest's where the terminal
    /// is past its literal, else its own ([`Terminal::fingerprint`]). Tables built
    /// for one grammar's lexeme serve every grammar's lexeme with the same key.
    pub fn table_fingerprint(&self, terminal: TerminalId, state: State) -> u128 {
        let share = &self.table_terminals[terminal.0 as usize];
        if state < share.states {
            share.rest_fingerprint
        } else {
            self.terminal(terminal).fingerprint()
        }
    }

    pub fn productions(&self) -> &[Production] {
        &self.productions
    }

    #[inline]
    pub fn production(&self, id: ProductionId) -> &Production {
        &self.productions[id.0 as usize]
    }

    #[inline]
    pub fn productions_of(&self, nt: NonTerminalId) -> &[ProductionId] {
        &self.by_lhs[nt.0 as usize]
    }

    #[inline]
    pub fn is_nullable(&self, nt: NonTerminalId) -> bool {
        self.nullable[nt.0 as usize]
    }

    pub fn nonterminal_count(&self) -> usize {
        self.nonterminal_names.len()
    }

    /// The nonterminals a prediction of `nt` reaches, `nt` included.
    #[inline]
    pub fn prediction_closure(&self, nt: NonTerminalId) -> &[NonTerminalId] {
        &self.prediction_closure[nt.0 as usize]
    }

    /// `(production, dot)` of the items predicting `nt` adds, dots already moved
    /// over nullable prefixes; complete items are left out.
    #[inline]
    pub fn predicted_items(&self, nt: NonTerminalId) -> &[(ProductionId, u32)] {
        &self.predicted_items[nt.0 as usize]
    }

    pub fn nonterminal_name(&self, nt: NonTerminalId) -> &str {
        &self.nonterminal_names[nt.0 as usize]
    }

    #[inline]
    pub fn permutation(&self, id: PermutationId) -> &Permutation {
        &self.permutations[id.0 as usize]
    }

    /// The augmented start symbol; its productions derive the root rule.
    pub fn start(&self) -> NonTerminalId {
        self.start
    }

    /// Heap bytes held by the compiled grammar (automata dominate).
    pub fn memory_usage(&self) -> usize {
        let automata: usize = self.terminals.iter().map(Terminal::memory_usage).sum();
        let rules: usize = self
            .productions
            .iter()
            .map(|p| {
                std::mem::size_of::<Production>() + p.rhs.len() * std::mem::size_of::<Symbol>()
            })
            .sum();
        automata + rules
    }
}

/// A terminal's automaton and, for a literal chained onto a shared rest, the
/// rest's fingerprint and state count (see [`build_terminal`]).
type BuiltTerminal = (Terminal, Option<(u128, State)>);

/// Per nonterminal, the `(production, dot)` items its prediction adds.
type PredictedItems = Vec<Vec<(ProductionId, u32)>>;

/// The grammar lowered to productions over terminals, and each terminal's
/// automaton (with what [`build_terminal`] says about its sharing).
fn lower_and_build(
    grammar: &Grammar,
    options: &CompileOptions,
    automata: &AutomatonCache,
) -> Result<(lower::Lowered, Vec<BuiltTerminal>), CompileError> {
    // A fused terminal whose DFA blows up (`([0-9] | [1-9][0-9]{0,15})*`) is
    // retried with a smaller fusion budget: more of the grammar then lives in the
    // parser, which never blows up; only a single leaf can still fail.
    let mut weight = options.max_terminal_weight;
    loop {
        let lowered = lower::lower(grammar, weight, &options.lexer, automata);
        let built = lowered
            .terminals
            .iter()
            .map(|(label, source)| {
                build_terminal(label, source, &options.lexer, automata).map_err(|error| {
                    CompileError::Terminal {
                        terminal: label.chars().take(80).collect(),
                        error,
                    }
                })
            })
            .collect::<Result<Vec<_>, _>>();
        match built {
            Ok(built) => return Ok((lowered, built)),
            Err(_) if weight > 1 => weight = 1,
            Err(e) => return Err(e),
        }
    }
}

/// Per nonterminal, the items its prediction adds (each production's dots
/// reachable over nullable symbols), and the nonterminals it predicts,
/// itself included, transitively.
fn predictions(
    n_nonterminals: usize,
    productions: &[Production],
    permutations: &[Permutation],
    symbol_nullable: impl Fn(&Symbol) -> bool,
) -> (PredictedItems, Vec<Vec<NonTerminalId>>) {
    let mut predicted_items = vec![Vec::new(); n_nonterminals];
    // Nonterminals each one predicts directly (at a dot reachable over nullables).
    let mut direct: Vec<Vec<NonTerminalId>> = vec![Vec::new(); n_nonterminals];
    for (i, p) in productions.iter().enumerate() {
        for (dot, sym) in p.rhs.iter().enumerate() {
            predicted_items[p.lhs.0 as usize].push((ProductionId(i as u32), dot as u32));
            match sym {
                Symbol::Rule(n) => direct[p.lhs.0 as usize].push(*n),
                Symbol::Repeat { rule, max, .. } if *max != Some(0) => {
                    direct[p.lhs.0 as usize].push(*rule)
                }
                // A predicted item starts the permutation with nothing done.
                Symbol::Permutation(id) => direct[p.lhs.0 as usize].extend(
                    permutations[id.0 as usize]
                        .awaited(&Progress::default())
                        .map(|(_, nt)| nt),
                ),
                _ => {}
            }
            if !symbol_nullable(sym) {
                break;
            }
        }
    }
    let prediction_closure: Vec<Vec<NonTerminalId>> = (0..n_nonterminals)
        .map(|n| {
            let mut seen = vec![false; n_nonterminals];
            let mut stack = vec![NonTerminalId(n as u32)];
            let mut out = Vec::new();
            seen[n] = true;
            while let Some(x) = stack.pop() {
                out.push(x);
                for &y in &direct[x.0 as usize] {
                    if !std::mem::replace(&mut seen[y.0 as usize], true) {
                        stack.push(y);
                    }
                }
            }
            out
        })
        .collect();
    (predicted_items, prediction_closure)
}

/// Builds one terminal. A literal followed by more (`,"name":` then a value) is
/// the literal chained onto the automaton of the rest, so every literal a rest
/// follows shares one determinization of it; automata come from `automata`.
/// Also returns, for a chained terminal, the fingerprint of the rest and its number of
/// states (the chained terminal's states below it are the rest's, same numbers).
fn build_terminal(
    label: &str,
    source: &TerminalSource,
    limits: &LexerLimits,
    automata: &AutomatonCache,
) -> Result<BuiltTerminal, TerminalError> {
    let (hir, fingerprint) = match source {
        TerminalSource::Regex(hir, fingerprint) => (hir, *fingerprint),
        TerminalSource::Excluding(e) => {
            let base = automata.regex(&e.regex, limits)?;
            let terminal = named(&automata.excluding(&base, &e.excluded, limits)?, label);
            return Ok((terminal, None));
        }
        TerminalSource::Intersection(both) => {
            let terminal = named(
                &automata.intersection(&both.regexes, &both.negated, limits)?,
                label,
            );
            return Ok((terminal, None));
        }
        TerminalSource::Tokens(set) => return Ok((Terminal::tokens(label.into(), set), None)),
        TerminalSource::Text(text) => {
            let base = automata.regex(&terminal::any_utf8(), limits)?;
            let terminal = Terminal::free_text(label.into(), &base, text, limits)?;
            return Ok((terminal, None));
        }
        TerminalSource::Counted(c) => {
            let rest = automata.counted(&c.leaf, c.min, c.max, &c.suffix, limits)?;
            if c.prefix.is_empty() {
                return Ok((named(&rest, label), None));
            }
            return chained(label, &c.prefix, &rest, limits, automata);
        }
    };
    if let HirKind::Concat(items) = hir.kind() {
        if let (HirKind::Literal(literal), true) = (items[0].kind(), items.len() > 1) {
            let rest_items = &items[1..];
            let rest = automata.regex_by(concat_fingerprint(rest_items), limits, || {
                Hir::concat(rest_items.to_vec())
            })?;
            return chained(label, &literal.0, &rest, limits, automata);
        }
    }
    // A literal alone (`"name":` before an object) is a chain of states: no
    // determinization (which took 40-120 us for a key).
    if let HirKind::Literal(literal) = hir.kind() {
        let empty = automata.regex(&Hir::empty(), limits)?;
        let terminal = automata.with_literal_prefix(&literal.0, &empty, limits)?;
        return Ok((named(&terminal, label), None));
    }
    let shared = automata.regex_by(fingerprint, limits, || hir.clone())?;
    Ok((named(&shared, label), None))
}

/// `literal` chained onto `rest` (from `automata`: `,"name":"` then a string body
/// recurs across schemas), with the rest's fingerprint and state count.
fn chained(
    label: &str,
    literal: &[u8],
    rest: &Terminal,
    limits: &LexerLimits,
    automata: &AutomatonCache,
) -> Result<BuiltTerminal, TerminalError> {
    let shared = (rest.fingerprint(), rest.state_count() as State);
    let terminal = named(&automata.with_literal_prefix(literal, rest, limits)?, label);
    Ok((terminal, Some(shared)))
}

/// A grammar's copy of a shared automaton (the tables stay shared), under
/// this grammar's label.
fn named(shared: &std::sync::Arc<Terminal>, label: &str) -> Terminal {
    let mut terminal = Terminal::clone(shared);
    terminal.label = label.to_string();
    terminal
}

/// How a terminal shares token tables: below `states` (its chained rest's state
/// count; 0 when it chains none) it is `canonical`, the first terminal chained onto
/// the same rest, whose automaton there is the rest's (`rest_fingerprint`).
#[derive(Debug, Clone, Copy)]
struct TableShare {
    canonical: TerminalId,
    states: State,
    rest_fingerprint: u128,
}

/// Per terminal, its [`TableShare`], from the chained rests' fingerprints and
/// state counts.
fn table_terminals(shared: &[Option<(u128, State)>]) -> Vec<TableShare> {
    let mut first_with: FxHashMap<u128, TerminalId> = FxHashMap::default();
    shared
        .iter()
        .enumerate()
        .map(|(i, rest)| match rest {
            Some((fingerprint, states)) => TableShare {
                canonical: *first_with
                    .entry(*fingerprint)
                    .or_insert(TerminalId(i as u32)),
                states: *states,
                rest_fingerprint: *fingerprint,
            },
            None => TableShare {
                canonical: TerminalId(i as u32),
                states: 0,
                rest_fingerprint: 0,
            },
        })
        .collect()
}

/// Least fixpoint of a per-nonterminal property over productions: a nonterminal
/// has it when some production's symbols all have it.
fn fixpoint(
    n: usize,
    productions: &[Production],
    symbol_has: impl Fn(&Symbol, &[bool]) -> bool,
) -> Vec<bool> {
    let mut known = vec![false; n];
    loop {
        let mut changed = false;
        for p in productions {
            if !known[p.lhs.0 as usize] && p.rhs.iter().all(|s| symbol_has(s, &known)) {
                known[p.lhs.0 as usize] = true;
                changed = true;
            }
        }
        if !changed {
            return known;
        }
    }
}
