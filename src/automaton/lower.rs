//! Lowering the IR to a context-free grammar over lexer terminals.
//!
//! The regular parts of a grammar become terminals: a rule that references no
//! recursive rule is regular, and neighbouring regular items of a sequence are fused
//! into one terminal (`"{" ws` becomes `\{[ \t\n]*`). Fewer, longer terminals mean
//! fewer parser steps per byte. Two things stop fusion: recursion (only the parser
//! can count brackets) and size: a regular part whose automaton would be large
//! (`[a-z]{0,100000}`) stays a parser-level counter ([`Symbol::Repeat`]) around a
//! small terminal, so bounded repetition is never unrolled. In between, a long
//! count of a loopable leaf after at most a literal (a `maxLength: 1000` string
//! body, `"` included) is one terminal whose counter is computed, not stored
//! ([`Terminal::counted`]): the token tables then see one lexeme instead of a
//! parser counter restarting a one-character terminal at every byte.
//!
//! Rules are lowered on demand from the start rule, so everything produced is
//! reachable and no automaton is built for a terminal nobody can reach.

use rustc_hash::FxHashMap as HashMap;

use regex_syntax::hir::{Capture, Hir, Repetition};

use super::fused::{
    counted_parts, first_bytes, has_marker, has_variable_count, hir_weight, is_literal, only_empty,
    repeat_weight, unmarked, Fused, Runs, Searches, COUNTED_MARKER,
};
use super::terminal::{fingerprint_of, hir_fingerprint, LexerLimits};
use super::AutomatonCache;
use super::{NonTerminalId, Permutation, PermutationId, Production, Symbol, TerminalId};
use crate::bits::ByteSet;
use crate::grammar::{
    describe_expr, expr_productive, Excluding, Expr, FreeText, Grammar, Intersection, RuleId,
    TokenBudget, TokenSet,
};

/// What a terminal's automaton is built from.
pub(super) enum TerminalSource {
    /// A regex, with its [`hir_fingerprint`] (the key terminals are deduplicated
    /// and their automata shared by).
    Regex(Hir, u128),
    /// Never fused with neighbours: its automaton is a product, not a regex.
    Excluding(Excluding),
    /// Never fused either: the product of the regexes' automata.
    Intersection(Intersection),
    /// A literal, then a counted repetition, then more: built directly
    /// ([`Terminal::counted`]), never by unrolling the count.
    Counted(CountedSource),
    /// One whole token from a set ([`Terminal::tokens`]): read a token at a time,
    /// never fused.
    Tokens(TokenSet),
    /// Free text up to a delimiter ([`Terminal::free_text`]), never fused.
    Text(FreeText),
}

/// `prefix leaf{min,max} suffix`, the leaf loopable and no iteration starting
/// like the suffix.
pub(super) struct CountedSource {
    pub prefix: Vec<u8>,
    pub leaf: Hir,
    pub min: u32,
    pub max: u32,
    pub suffix: Hir,
}

/// Deepest chain of rule references fused into one terminal.
const MAX_FUSION_DEPTH: u32 = 128;

/// Counted repetitions with at least this many iterations allowed are built as
/// counters rather than unrolled into a regex.
const COUNTED_FROM: u32 = 8;

/// The weight a counted repetition adds to its leaf's: its automaton is the
/// leaf's, with the count computed.
const COUNTED_WEIGHT: usize = 16;

/// Heaviest unrolled form of a counted repetition fused as one alternative of
/// many. A terminal counts at its top level only, so a counted member of an
/// alternation is unrolled when fused; past this weight (a JSON string of about
/// ten characters or more) the alternation stays in the parser and the member
/// keeps its counter. Snowplow's `["string", "null"]` with `maxLength: 64` was a
/// 1,300-state regex per property (2 ms to determinize; sp_0's compile 34 ms,
/// 9-10 ms after).
const UNROLLED_ALTERNATIVE_WEIGHT: usize = 2048;

/// Most [ambiguous runs](Runs) fused into one terminal. In `[ \t]{0,20}\n?[ \t]{0,20}`
/// (bounded whitespace in a JSON gap) a DFA state holds every split of the
/// blanks read between the two counts, and determinizing pays that in every
/// state: a JSON object's skeleton with such gaps was one 740-state automaton
/// that took 10 ms to build (the whole first mask of a tool call), where a few
/// gaps per terminal build in well under one.
const MAX_FUSED_AMBIGUOUS_RUNS: usize = 2;

/// Most [searches](Searches) in one terminal: a loop that reads anything may
/// hand over to one more part (a comment, then the lexeme after it), never to
/// a part that holds a second.
const MAX_FUSED_SEARCHES: usize = 1;

/// The keys terminals are deduplicated by, for the leaves that are not regexes.
fn excluding_key(excluding: &Excluding) -> u128 {
    fingerprint_of(&(
        "excluding",
        hir_fingerprint(&excluding.regex),
        &excluding.excluded,
    ))
}

fn intersection_key(both: &Intersection) -> u128 {
    let prints = |hirs: &[Hir]| hirs.iter().map(hir_fingerprint).collect::<Vec<u128>>();
    fingerprint_of(&("intersection", prints(&both.regexes), prints(&both.negated)))
}

fn text_key(text: &FreeText) -> u128 {
    fingerprint_of(&("text", &text.excludes, &text.stops))
}

/// The CFG produced by lowering, terminals still as regexes.
pub(super) struct Lowered {
    pub terminals: Vec<(String, TerminalSource)>,
    pub nonterminal_names: Vec<String>,
    pub productions: Vec<Production>,
    /// The augmented start symbol: one production `start -> root`.
    pub start: NonTerminalId,
    pub permutations: Vec<Permutation>,
    /// The terminals with a token budget ([`TokenBudget`]), each once.
    pub budgets: Vec<(TerminalId, u32)>,
}

pub(super) fn lower(
    grammar: &Grammar,
    max_terminal_weight: usize,
    limits: &LexerLimits,
    automata: &AutomatonCache,
) -> Lowered {
    let regular = regular_rules(grammar);
    let mut lowering = Lowering {
        grammar,
        regular,
        max_weight: max_terminal_weight,
        limits,
        automata,
        rule_hir: vec![None; grammar.rules.len()],
        rule_nt: vec![None; grammar.rules.len()],
        queue: Vec::new(),
        out: Lowered {
            terminals: Vec::new(),
            nonterminal_names: Vec::new(),
            productions: Vec::new(),
            start: NonTerminalId(0),
            permutations: Vec::new(),
            budgets: Vec::new(),
        },
        terminal_index: HashMap::default(),
        productive_rules: None,
        fusion_depth: 0,
    };
    let start = lowering.fresh_nonterminal("<start>".into());
    lowering.out.start = start;
    let root = lowering.rule_nonterminal(grammar.root);
    lowering.out.productions.push(Production {
        lhs: start,
        rhs: vec![Symbol::Rule(root)],
    });
    while let Some((rule, nt)) = lowering.queue.pop() {
        let expr = &grammar.rule(rule).expr;
        let name = grammar.rule(rule).name.clone();
        let alternatives = match (lowering.expr_hir(expr), expr) {
            // A regular rule lowered on its own is one terminal named after it.
            (Some(fused), _) => lowering.hir_alternatives(fused.hir, name),
            // So is a rule that excludes strings from a leaf (no regex says that).
            (None, Expr::Excluding(excluding)) => {
                vec![vec![Symbol::Terminal(
                    lowering.excluding_terminal(excluding, name),
                )]]
            }
            (None, Expr::Intersection(both)) => {
                vec![vec![Symbol::Terminal(
                    lowering.intersection_terminal(both, name),
                )]]
            }
            (None, Expr::Text(text)) => {
                vec![vec![Symbol::Terminal(lowering.text_terminal(text, name))]]
            }
            (None, _) => match lowering.right_linear_hir(rule) {
                Some(hir) => lowering.hir_alternatives(hir, name),
                None => lowering.alternatives(expr),
            },
        };
        lowering.add_productions(nt, alternatives);
    }
    lowering.out
}

/// Rules that reference, directly or not, only rules that are not recursive.
fn regular_rules(grammar: &Grammar) -> Vec<bool> {
    let mut regular = vec![false; grammar.rules.len()];
    loop {
        let mut changed = false;
        for (i, rule) in grammar.rules.iter().enumerate() {
            if regular[i] {
                continue;
            }
            let mut all = true;
            rule.expr.for_each_ref(&mut |r| all &= regular[r.index()]);
            if all {
                regular[i] = true;
                changed = true;
            }
        }
        if !changed {
            return regular;
        }
    }
}

type Alternatives = Vec<Vec<Symbol>>;

struct Lowering<'g> {
    grammar: &'g Grammar,
    regular: Vec<bool>,
    max_weight: usize,
    /// Counted repetitions' leaves are built while lowering (to know they loop).
    limits: &'g LexerLimits,
    automata: &'g AutomatonCache,
    /// Memo: a regular rule's regex and weight, `Some(None)` when too large.
    rule_hir: Vec<Option<Option<Fused>>>,
    rule_nt: Vec<Option<NonTerminalId>>,
    queue: Vec<(RuleId, NonTerminalId)>,
    out: Lowered,
    terminal_index: HashMap<u128, TerminalId>,
    /// [`Grammar::productive_rules`], computed at the first permutation.
    productive_rules: Option<Vec<bool>>,
    /// Rule references followed by the fusion under way (see [`MAX_FUSION_DEPTH`]).
    fusion_depth: u32,
}

impl Lowering<'_> {
    fn fresh_nonterminal(&mut self, name: String) -> NonTerminalId {
        let id = NonTerminalId(self.out.nonterminal_names.len() as u32);
        self.out.nonterminal_names.push(name);
        id
    }

    fn rule_nonterminal(&mut self, rule: RuleId) -> NonTerminalId {
        if let Some(nt) = self.rule_nt[rule.index()] {
            return nt;
        }
        let nt = self.fresh_nonterminal(self.grammar.rule(rule).name.clone());
        self.rule_nt[rule.index()] = Some(nt);
        self.queue.push((rule, nt));
        nt
    }

    fn helper_nonterminal(&mut self, alternatives: Alternatives) -> NonTerminalId {
        let nt = self.fresh_nonterminal(format!("<group {}>", self.out.nonterminal_names.len()));
        self.add_productions(nt, alternatives);
        nt
    }

    fn add_productions(&mut self, lhs: NonTerminalId, alternatives: Alternatives) {
        for rhs in alternatives {
            self.out.productions.push(Production { lhs, rhs });
        }
    }

    /// The terminals for a fused regex: one, or, for a counted repetition whose
    /// suffix starts like an iteration, the counter and then the suffix.
    fn terminal_symbols(&mut self, hir: Hir, label: String) -> Vec<Symbol> {
        let Some((prefix, repetition, suffix)) = counted_parts(&hir) else {
            // Rebuilding a large regex only to find no marker was a tenth of a
            // schema's compile.
            let hir = if has_marker(&hir) {
                unmarked(&hir)
            } else {
                hir
            };
            return vec![Symbol::Terminal(self.terminal(hir, label))];
        };
        let (leaf, min, max) = (unmarked(&repetition.sub), repetition.min, repetition.max);
        let max = max.expect("counted repetitions are bounded");
        let suffix = unmarked(&suffix);
        // A suffix that starts like an iteration is a terminal of its own.
        let (suffix, split_off) = if self.starts_like_an_iteration(&leaf, &suffix) {
            (Hir::empty(), Some(suffix))
        } else {
            (suffix, None)
        };
        let key = fingerprint_of(&("counted", hir_fingerprint(&hir)));
        let source = || {
            TerminalSource::Counted(CountedSource {
                prefix,
                leaf,
                min,
                max,
                suffix,
            })
        };
        let mut out = vec![Symbol::Terminal(self.terminal_from(
            key,
            label.clone(),
            source,
        ))];
        if let Some(rest) = split_off.filter(|rest| !only_empty(rest)) {
            out.push(Symbol::Terminal(self.terminal(rest, label)));
        }
        out
    }

    /// Whether some byte may start both an iteration of `leaf` and `suffix` (or
    /// either automaton cannot be built: then say so, the safe answer).
    fn starts_like_an_iteration(&self, leaf: &Hir, suffix: &Hir) -> bool {
        // Most suffixes start apart already by the regexes' first bytes (blanks,
        // then a quote): no automaton to build for those.
        let (mut leaf_first, mut suffix_first) = (ByteSet::EMPTY, ByteSet::EMPTY);
        first_bytes(leaf, &mut leaf_first);
        first_bytes(suffix, &mut suffix_first);
        if leaf_first.intersection(&suffix_first).is_empty() {
            return false;
        }
        match (
            self.automata.regex(leaf, self.limits),
            self.automata.regex(suffix, self.limits),
        ) {
            (Ok(leaf), Ok(suffix)) => leaf.starts_like(&suffix),
            _ => true,
        }
    }

    fn terminal(&mut self, hir: Hir, label: String) -> TerminalId {
        let key = hir_fingerprint(&hir);
        self.terminal_from(key, label, || TerminalSource::Regex(hir, key))
    }

    fn excluding_terminal(&mut self, excluding: &Excluding, label: String) -> TerminalId {
        let key = excluding_key(excluding);
        self.terminal_from(key, label, || TerminalSource::Excluding(excluding.clone()))
    }

    fn intersection_terminal(&mut self, both: &Intersection, label: String) -> TerminalId {
        let key = intersection_key(both);
        self.terminal_from(key, label, || TerminalSource::Intersection(both.clone()))
    }

    fn text_terminal(&mut self, text: &FreeText, label: String) -> TerminalId {
        let key = text_key(text);
        self.terminal_from(key, label, || TerminalSource::Text(text.clone()))
    }

    /// A budgeted lexeme: its body's terminal under a key of its own, so that
    /// the budget stays with this occurrence (the automaton is still shared
    /// through the cache, and so are its token tables).
    fn budget_terminal(&mut self, budget: &TokenBudget, label: String) -> TerminalId {
        let (key, source) = match &budget.body {
            Expr::Regex(hir) => {
                let key = hir_fingerprint(hir);
                (key, TerminalSource::Regex(hir.clone(), key))
            }
            Expr::Excluding(e) => (
                excluding_key(e),
                TerminalSource::Excluding(e.as_ref().clone()),
            ),
            Expr::Intersection(both) => (
                intersection_key(both),
                TerminalSource::Intersection(both.as_ref().clone()),
            ),
            Expr::Text(text) => (text_key(text), TerminalSource::Text(text.as_ref().clone())),
            // `Grammar::validate` lets only leaves through; the empty one is
            // left.
            _ => {
                let key = hir_fingerprint(&Hir::empty());
                (key, TerminalSource::Regex(Hir::empty(), key))
            }
        };
        let key = fingerprint_of(&("budget", budget.max_tokens, key));
        let known = self.out.terminals.len();
        let id = self.terminal_from(key, label, || source);
        if id.0 as usize == known {
            self.out.budgets.push((id, budget.max_tokens));
        }
        id
    }

    fn token_terminal(&mut self, set: &TokenSet) -> TerminalId {
        let key = fingerprint_of(&("tokens", set.negated, &set.items));
        self.terminal_from(key, set.to_string(), || TerminalSource::Tokens(set.clone()))
    }

    /// The terminal known by `key`, added from `source` the first time.
    fn terminal_from(
        &mut self,
        key: u128,
        label: String,
        source: impl FnOnce() -> TerminalSource,
    ) -> TerminalId {
        if let Some(&id) = self.terminal_index.get(&key) {
            return id;
        }
        let id = TerminalId(self.out.terminals.len() as u32);
        self.out.terminals.push((label, source()));
        self.terminal_index.insert(key, id);
        id
    }

    /// The regex for `expr` if it is regular and small enough to be one terminal.
    fn expr_hir(&mut self, expr: &Expr) -> Option<Fused> {
        match expr {
            Expr::Empty => Some(Fused::regex(Hir::empty(), 0)),
            Expr::Regex(hir) => Some(Fused::regex(hir.clone(), hir_weight(hir))),
            Expr::Ref(rule) => self.rule_regex(*rule),
            Expr::Seq(items) | Expr::Alt(items) => {
                let is_seq = matches!(expr, Expr::Seq(_));
                let mut parts = Vec::with_capacity(items.len());
                let mut weight = 1usize;
                let mut plain_weight = 1usize;
                let mut counted = false;
                let mut runs = match is_seq {
                    true => Runs::EMPTY,
                    false => Runs::default(),
                };
                let mut searches = match is_seq {
                    true => Searches::EMPTY,
                    false => Searches::NONE,
                };
                // Only a literal may come before a counted repetition.
                let mut literal_so_far = true;
                for item in items {
                    let mut part = self.expr_hir(item)?;
                    if part.counted && !is_seq && part.plain_weight > UNROLLED_ALTERNATIVE_WEIGHT {
                        return None;
                    }
                    if part.counted && (!is_seq || counted || !literal_so_far) {
                        part = part.plain();
                    }
                    counted |= part.counted;
                    literal_so_far &= is_literal(&part.hir);
                    weight = weight.saturating_add(part.weight);
                    plain_weight = plain_weight.saturating_add(part.plain_weight);
                    runs = match is_seq {
                        true => runs.then(part.runs),
                        false => runs.or(part.runs),
                    };
                    searches = match is_seq {
                        true => searches.then(part.searches),
                        false => searches.or(part.searches),
                    };
                    if weight > self.max_weight
                        || runs.count > MAX_FUSED_AMBIGUOUS_RUNS
                        || searches.count > MAX_FUSED_SEARCHES
                    {
                        return None;
                    }
                    parts.push(part.hir);
                }
                let hir = match expr {
                    Expr::Seq(_) => Hir::concat(parts),
                    _ => Hir::alternation(parts),
                };
                Some(Fused {
                    hir,
                    weight,
                    plain_weight,
                    counted,
                    runs,
                    searches,
                })
            }
            Expr::Repeat { expr, min, max } => {
                let sub = self.expr_hir(expr)?.plain();
                if let Some(counted) = self.counted_repetition(&sub, *min, *max) {
                    return Some(counted);
                }
                if max.is_none() && has_variable_count(&sub.hir) {
                    return None;
                }
                let weight = repeat_weight(sub.weight, *min, *max);
                if weight > self.max_weight {
                    return None;
                }
                let hir = Hir::repetition(Repetition {
                    min: *min,
                    max: *max,
                    greedy: true,
                    sub: Box::new(sub.hir),
                });
                let mut fused = Fused::regex(hir, weight);
                fused.searches.count = sub.searches.repeated_count(*max);
                if fused.searches.count > MAX_FUSED_SEARCHES {
                    return None;
                }
                Some(fused)
            }
            Expr::Permutation(_)
            | Expr::Excluding(_)
            | Expr::Intersection(_)
            | Expr::Tokens(_)
            | Expr::Text(_)
            | Expr::Budget(_) => None,
        }
    }

    /// `sub{min,max}` as a counted repetition ([`Terminal::counted`]): when the
    /// count is large and `sub` can be counted that far (it is loopable: its
    /// matches end an iteration).
    fn counted_repetition(&mut self, sub: &Fused, min: u32, max: Option<u32>) -> Option<Fused> {
        let max = max.filter(|&m| m >= COUNTED_FROM && min <= m)?;
        let weight = sub.weight.saturating_add(COUNTED_WEIGHT);
        if weight > self.max_weight {
            return None;
        }
        let countable = self
            .automata
            .regex(&sub.hir, self.limits)
            .is_ok_and(|l| l.can_count(max));
        if !countable {
            return None;
        }
        let repetition = Hir::repetition(Repetition {
            min,
            max: Some(max),
            greedy: true,
            sub: Box::new(sub.hir.clone()),
        });
        let hir = Hir::capture(Capture {
            index: 1,
            name: Some(COUNTED_MARKER.into()),
            sub: Box::new(repetition),
        });
        let mut searches = Searches::of(&hir);
        searches.count = sub.searches.repeated_count(Some(max));
        if searches.count > MAX_FUSED_SEARCHES {
            return None;
        }
        Some(Fused {
            runs: Runs::of(&hir),
            searches,
            hir,
            weight,
            plain_weight: repeat_weight(sub.weight, min, Some(max)),
            counted: true,
        })
    }

    fn rule_regex(&mut self, rule: RuleId) -> Option<Fused> {
        if !self.regular[rule.index()] {
            return None;
        }
        if let Some(memo) = &self.rule_hir[rule.index()] {
            return memo.clone();
        }
        // A chain of references deeper than this stays parser-level from here
        // on: fusing it would recurse once per rule (3,000 one-rule links
        // overflowed the stack).
        if self.fusion_depth >= MAX_FUSION_DEPTH {
            self.rule_hir[rule.index()] = Some(None);
            return None;
        }
        let grammar = self.grammar;
        self.fusion_depth += 1;
        let result = self.expr_hir(&grammar.rule(rule).expr);
        self.fusion_depth -= 1;
        self.rule_hir[rule.index()] = Some(result.clone());
        result
    }

    /// A rule that recurses only on itself, at the very end of some alternatives
    /// (`R ::= X1 R | ... | Y1 | ...`, every `Xi` and `Yj` regular), is the
    /// regular language `(X1 | ...)* (Y1 | ...)`: one terminal for the rule alone.
    /// The rule stays recursive for its neighbours, so it is never fused into a
    /// larger terminal (what keeps a pattern's `.*P.*` from becoming one search
    /// automaton), but the parser no longer builds a completion chain as long as
    /// the text (Earley right recursion is quadratic) and the lexer sees one
    /// looping terminal instead of a one-character terminal restarted at every byte.
    fn right_linear_hir(&mut self, rule: RuleId) -> Option<Hir> {
        let grammar = self.grammar;
        let expr = &grammar.rule(rule).expr;
        let items: &[Expr] = match expr {
            Expr::Alt(items) => items,
            other => std::slice::from_ref(other),
        };
        let mut heads = Vec::new();
        let mut tails = Vec::new();
        let mut weight = 1usize;
        let (mut head_searches, mut tail_searches) = (Searches::NONE, Searches::NONE);
        for item in items {
            let (head, recursive) = match item {
                Expr::Seq(parts) if matches!(parts.last(), Some(Expr::Ref(r)) if *r == rule) => {
                    (&parts[..parts.len() - 1], true)
                }
                Expr::Ref(r) if *r == rule => return None,
                other => (std::slice::from_ref(other), false),
            };
            let mut hirs = Vec::with_capacity(head.len());
            let mut searches = Searches::EMPTY;
            for part in head {
                let fused = self.expr_hir(part)?.plain();
                weight = weight.saturating_add(fused.weight);
                searches = searches.then(fused.searches);
                hirs.push(fused.hir);
            }
            let hir = Hir::concat(hirs);
            if recursive {
                if only_empty(&hir) || has_variable_count(&hir) {
                    return None;
                }
                heads.push(hir);
                head_searches = head_searches.or(searches);
            } else {
                tails.push(hir);
                tail_searches = tail_searches.or(searches);
            }
        }
        if heads.is_empty() || tails.is_empty() || weight > self.max_weight {
            return None;
        }
        let looped = Hir::repetition(Repetition {
            min: 0,
            max: None,
            greedy: true,
            sub: Box::new(Hir::alternation(heads)),
        });
        let mut searches = Searches::of(&looped);
        searches.count = head_searches.repeated_count(None);
        let searches = searches.then(tail_searches);
        if searches.count > MAX_FUSED_SEARCHES {
            return None;
        }
        Some(Hir::concat(vec![looped, Hir::alternation(tails)]))
    }

    fn hir_alternatives(&mut self, hir: Hir, label: String) -> Alternatives {
        if only_empty(&hir) {
            vec![vec![]]
        } else {
            vec![self.terminal_symbols(hir, label)]
        }
    }

    /// Lowers `expr` to alternatives of symbol sequences.
    fn alternatives(&mut self, expr: &Expr) -> Alternatives {
        if let Some(fused) = self.expr_hir(expr) {
            let label = describe_expr(expr, self.grammar);
            return self.hir_alternatives(fused.hir, label);
        }
        match expr {
            Expr::Alt(items) => items.iter().flat_map(|e| self.alternatives(e)).collect(),
            Expr::Seq(_) => {
                let mut seq = SequenceBuilder::default();
                self.push_sequence(expr, &mut seq);
                vec![seq.finish(self)]
            }
            Expr::Ref(rule) => vec![vec![Symbol::Rule(self.rule_nonterminal(*rule))]],
            Expr::Repeat {
                expr,
                min: 0,
                max: Some(1),
            } => {
                let mut alternatives = self.alternatives(expr);
                alternatives.push(vec![]);
                alternatives
            }
            Expr::Repeat { expr, min, max } => {
                let inner = match &**expr {
                    Expr::Ref(rule) => self.rule_nonterminal(*rule),
                    other => {
                        let alternatives = self.alternatives(other);
                        self.helper_nonterminal(alternatives)
                    }
                };
                vec![vec![Symbol::Repeat {
                    rule: inner,
                    min: *min,
                    max: *max,
                }]]
            }
            // A separator that matches nothing leaves only sequences of at most
            // one item, which the parser's permutation does not model (its items
            // after the first all start with the separator).
            Expr::Permutation(p) if !self.expr_productive(&p.separator) => {
                self.alternatives(&p.at_most_one_item())
            }
            Expr::Permutation(p) => vec![vec![Symbol::Permutation(self.permutation(p))]],
            Expr::Excluding(e) => {
                let label = describe_expr(expr, self.grammar);
                vec![vec![Symbol::Terminal(self.excluding_terminal(e, label))]]
            }
            Expr::Intersection(both) => {
                let label = describe_expr(expr, self.grammar);
                vec![vec![Symbol::Terminal(
                    self.intersection_terminal(both, label),
                )]]
            }
            Expr::Tokens(set) => vec![vec![Symbol::Terminal(self.token_terminal(set))]],
            Expr::Text(text) => {
                let label = text.describe();
                vec![vec![Symbol::Terminal(self.text_terminal(text, label))]]
            }
            Expr::Budget(budget) => {
                let label = describe_expr(expr, self.grammar);
                vec![vec![Symbol::Terminal(self.budget_terminal(budget, label))]]
            }
            // Regular leaves were handled by `expr_hir` above.
            Expr::Empty | Expr::Regex(_) => vec![vec![]],
        }
    }

    fn expr_productive(&mut self, expr: &Expr) -> bool {
        let grammar = self.grammar;
        let rules = self
            .productive_rules
            .get_or_insert_with(|| grammar.productive_rules());
        expr_productive(expr, rules)
    }

    /// Lowers a permutation: per item (members, then the extra) one nonterminal for
    /// it as the first item and one for the separator followed by it, each side
    /// numbered consecutively ([`Permutation::item_of`] relies on that).
    fn permutation(&mut self, p: &crate::grammar::Permutation) -> PermutationId {
        let items: Vec<&Expr> = p.members.iter().chain(p.extra.as_ref()).collect();
        let id = PermutationId(self.out.permutations.len() as u32);
        let first: Vec<NonTerminalId> = (0..items.len())
            .map(|k| self.fresh_nonterminal(format!("<permutation {} item {k}>", id.0)))
            .collect();
        let next: Vec<NonTerminalId> = (0..items.len())
            .map(|k| self.fresh_nonterminal(format!("<permutation {} , item {k}>", id.0)))
            .collect();
        for (k, item) in items.iter().enumerate() {
            let alternatives = self.alternatives(item);
            self.add_productions(first[k], alternatives);
            let mut seq = SequenceBuilder::default();
            self.push_sequence(&p.separator, &mut seq);
            self.push_sequence(item, &mut seq);
            let alternatives = vec![seq.finish(self)];
            self.add_productions(next[k], alternatives);
        }
        self.out.permutations.push(Permutation::new(
            first,
            next,
            p.required.clone(),
            p.extra.is_some(),
            p.min,
            p.max,
        ));
        id
    }

    /// Appends `expr` to a sequence being built, fusing regular neighbours. A
    /// counted repetition fuses with a literal before it and ends its terminal
    /// (what follows it starts the next), so a schema's strings of one
    /// `maxLength` share one counter automaton.
    fn push_sequence(&mut self, expr: &Expr, seq: &mut SequenceBuilder) {
        if let Some(fused) = self.expr_hir(expr) {
            let too_heavy = seq.pending_weight.saturating_add(fused.weight) > self.max_weight
                || seq.pending_runs.then(fused.runs).count > MAX_FUSED_AMBIGUOUS_RUNS
                || seq.pending_searches.then(fused.searches).count > MAX_FUSED_SEARCHES
                // A gap after a search starts the next terminal, with the
                // lexeme it hands over to.
                || (seq.pending_searches.count >= MAX_FUSED_SEARCHES
                    && fused.searches.ends_in_wide_loop());
            if too_heavy || (fused.counted && !seq.pending_literal) {
                seq.flush(self);
            }
            seq.pending_weight += fused.weight;
            seq.pending_runs = seq.pending_runs.then(fused.runs);
            seq.pending_searches = seq.pending_searches.then(fused.searches);
            seq.pending_literal &= is_literal(&fused.hir);
            seq.pending.push(fused.hir);
            seq.labels.push(describe_expr(expr, self.grammar));
            return;
        }
        match expr {
            Expr::Seq(items) => {
                for item in items {
                    self.push_sequence(item, seq);
                }
            }
            Expr::Ref(rule) => {
                seq.flush(self);
                let nt = self.rule_nonterminal(*rule);
                seq.symbols.push(Symbol::Rule(nt));
            }
            _ => {
                seq.flush(self);
                let mut alternatives = self.alternatives(expr);
                if alternatives.len() == 1 {
                    seq.symbols.append(&mut alternatives[0]);
                } else {
                    let nt = self.helper_nonterminal(alternatives);
                    seq.symbols.push(Symbol::Rule(nt));
                }
            }
        }
    }
}

struct SequenceBuilder {
    symbols: Vec<Symbol>,
    pending: Vec<Hir>,
    labels: Vec<String>,
    pending_weight: usize,
    pending_runs: Runs,
    pending_searches: Searches,
    /// Everything pending is a literal (a counted repetition may follow).
    pending_literal: bool,
}

impl Default for SequenceBuilder {
    fn default() -> Self {
        SequenceBuilder {
            symbols: Vec::new(),
            pending: Vec::new(),
            labels: Vec::new(),
            pending_weight: 0,
            pending_runs: Runs::EMPTY,
            pending_searches: Searches::EMPTY,
            pending_literal: true,
        }
    }
}

impl SequenceBuilder {
    fn flush(&mut self, lowering: &mut Lowering<'_>) {
        self.pending_literal = true;
        if self.pending.is_empty() {
            return;
        }
        let hir = Hir::concat(std::mem::take(&mut self.pending));
        let label = std::mem::take(&mut self.labels).join(" ");
        self.pending_weight = 0;
        self.pending_runs = Runs::EMPTY;
        self.pending_searches = Searches::EMPTY;
        if !only_empty(&hir) {
            let mut symbols = lowering.terminal_symbols(hir, label);
            self.symbols.append(&mut symbols);
        }
    }

    fn finish(mut self, lowering: &mut Lowering<'_>) -> Vec<Symbol> {
        self.flush(lowering);
        self.symbols
    }
}

#[cfg(test)]
mod tests {
    /// A counted repetition in a sequence that cannot be fused whole (a key
    /// pattern's `"[a-z]{1,10}"` before a recursive value) keeps what follows it
    /// as its suffix: the closing quote is read by the counter's terminal, whose
    /// states inside the count are then not matches (the token tables take its
    /// class as one counted slice instead of walking every letter token).
    #[test]
    fn a_counted_repetition_keeps_its_suffix_in_an_unfused_sequence() {
        let grammar = crate::compile_gbnf(
            r#"root ::= "{" "\"" [a-z]{1,10} "\"" ":" value "}"
value ::= "1" | root"#,
        )
        .unwrap();
        let counted: Vec<_> = grammar
            .terminals()
            .iter()
            .filter(|t| t.counter_span().is_some())
            .collect();
        assert_eq!(counted.len(), 1, "one counted terminal");
        let terminal = counted[0];
        let read = |bytes: &[u8]| {
            bytes
                .iter()
                .fold(terminal.start(), |q, &b| terminal.next(q, b))
        };
        assert!(!terminal.is_match(read(b"{\"abc")), "inside the count");
        assert!(
            terminal.is_match(read(b"{\"abc\":")),
            "the quote and colon are read"
        );
    }
    /// A gap that skips `#` comments, woven before every lexeme, fuses with
    /// each lexeme alone: a terminal that holds two such gaps tracks every
    /// place the second part may have begun inside the first comment (these
    /// statements fused whole passed the DFA bound after 0.6 s, and the
    /// grammar was lowered again with a terminal per byte class). The
    /// language stays the grammar's.
    #[test]
    fn a_comment_gap_fuses_with_one_lexeme_per_terminal() {
        let grammar = crate::compile_gbnf(
            r##"root ::= (stmt ";")*
stmt ::= ws "%import" ws "."? ws name (ws "." ws name)* (ws "->" ws name)?
name ::= [a-z] [a-z0-9_]*
ws ::= ([ \t\n] | "#" [^\n]*)*"##,
        )
        .unwrap();
        for terminal in grammar.terminals() {
            let gap_first = terminal.pattern.contains('#') || terminal.label == r#"";""#;
            assert!(
                gap_first && terminal.state_count() < 64,
                "{}: {} states",
                terminal.label,
                terminal.state_count()
            );
        }
        let accepts = |text: &str| {
            let mut matcher = crate::matcher::Matcher::new(grammar.clone());
            matcher.consume_bytes(text.as_bytes()).is_ok() && matcher.is_accepting()
        };
        assert!(accepts("%import a.b -> c;"));
        assert!(accepts(" # note\n%import a #x\n . b;"));
        assert!(
            accepts("%import a.b #c -> d\n -> c;"),
            "a comment holds the rest of its line"
        );
        assert!(!accepts("%import a.b -> ;"));
        assert!(!accepts("%import a. -> c;"));
        assert!(!accepts("%import a #x\n. ;"));
    }
    /// A rule that recurses at its end is one looping terminal, unless its
    /// heads hold more than one comment gap handing over to a lexeme.
    #[test]
    fn a_right_linear_rule_keeps_one_comment_gap_per_terminal() {
        let grammar = crate::compile_gbnf(
            r##"root ::= stmts ";"
stmts ::= ws name ws "=" ws name ";" stmts | ws
name ::= [a-z]+
ws ::= ([ \t\n] | "#" [^\n]*)*"##,
        )
        .unwrap();
        for terminal in grammar.terminals() {
            assert!(
                terminal.pattern.matches('#').count() <= 1,
                "{}: {}",
                terminal.label,
                terminal.pattern
            );
        }
    }
}
