//! Per-request matching state over a shared [`CompiledGrammar`]: consume bytes, ask
//! whether the prefix is viable or accepting, which bytes may come next, and roll
//! back.
//!
//! The state is an Earley chart (see `chart`) plus, for every byte position, the
//! *lexemes* alive there: a terminal that some parse item expects, the set where it
//! started, and its DFA state. A byte advances every lexeme's DFA; a lexeme that
//! reaches a match completes its terminal, which opens a new chart set at that
//! position and starts the lexemes the new set expects. Because the lexer keeps all
//! lexemes (no maximal munch) and the compiled grammar holds only productions that
//! can complete, the prefix is viable exactly when some lexeme is alive or the
//! grammar accepts here. Positions are bytes, so a UTF-8 character may be split
//! anywhere: the DFA state carries the partial character.
//!
//! History is kept per byte, so [`Matcher::rollback`] is a truncation.

mod candidates;
mod chart;
mod complete;
mod tokens;

use std::fmt;
use std::sync::Arc;

use crate::automaton::{CompiledGrammar, State, TerminalId};
pub use crate::bits::byte_set::describe_byte_ranges;
pub use crate::bits::ByteSet;
use chart::{Chart, Item, TooManyItems};
pub use tokens::{StopPolicy, TokenError, TokenMatcher};

/// Table lexemes ([`Matcher::table_lexemes`]) made a configuration: sorted, each
/// once.
pub(crate) fn as_configuration(lexemes: &mut Vec<(TerminalId, State)>) {
    lexemes.sort_unstable();
    lexemes.dedup();
}

/// Per-matcher bounds.
#[derive(Debug, Clone)]
pub struct MatcherOptions {
    /// Largest number of parse items at one byte position; a grammar that is
    /// ambiguous enough to exceed it gets [`MatchError::TooAmbiguous`].
    pub max_items_per_position: usize,
}

impl Default for MatcherOptions {
    fn default() -> Self {
        MatcherOptions {
            max_items_per_position: 200_000,
        }
    }
}

/// Why bytes could not be consumed. The matcher's state is left at the last
/// position that was consumed successfully.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MatchError {
    #[error("byte at offset {offset} is not allowed by the grammar")]
    Rejected { offset: usize },
    #[error("the grammar is too ambiguous at byte offset {offset}: more than {limit} parse items")]
    TooAmbiguous { offset: usize, limit: usize },
}

impl MatchError {
    pub fn offset(&self) -> usize {
        match *self {
            MatchError::Rejected { offset } | MatchError::TooAmbiguous { offset, .. } => offset,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Lexeme {
    pub(crate) terminal: TerminalId,
    pub(crate) state: State,
    /// The chart set whose items wait for this terminal.
    set: u32,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    /// Start of this position's lexemes in `Matcher::lexemes`.
    lexemes_start: u32,
    /// Chart sets that existed before this position.
    sets_before: u32,
}

/// Matching state for one request.
#[derive(Clone)]
pub struct Matcher {
    grammar: Arc<CompiledGrammar>,
    options: MatcherOptions,
    chart: Chart,
    lexemes: Vec<Lexeme>,
    /// One per position consumed, plus position 0.
    frames: Vec<Frame>,
    completed: Vec<(TerminalId, u32)>,
    /// How many rollbacks dropped chart sets: while it stays put, every set
    /// keeps its items, so a [future signature](Matcher::future_signature)
    /// over the same sets is the same but for the lexemes' states.
    chart_truncations: u64,
    /// The position after each token consumed as a token
    /// ([`Matcher::consume_token_bytes`]), ascending: what a lexeme's token
    /// budget is counted against. Kept only for a grammar with budgets.
    token_ends: Vec<u32>,
}

impl fmt::Debug for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Matcher")
            .field("position", &self.position())
            .field("accepting", &self.is_accepting())
            .finish()
    }
}

impl Matcher {
    pub fn new(grammar: Arc<CompiledGrammar>) -> Matcher {
        Matcher::with_options(grammar, MatcherOptions::default())
    }

    pub fn with_options(grammar: Arc<CompiledGrammar>, options: MatcherOptions) -> Matcher {
        let mut matcher = Matcher {
            grammar,
            options,
            chart: Chart::default(),
            lexemes: Vec::new(),
            frames: vec![Frame {
                lexemes_start: 0,
                sets_before: 0,
            }],
            completed: Vec::new(),
            chart_truncations: 0,
            token_ends: Vec::new(),
        };
        let grammar = Arc::clone(&matcher.grammar);
        let start = grammar.start();
        let seeded = matcher
            .chart
            .build_set(&grammar, 0, usize::MAX, |chart, set| {
                for &prod in grammar.productions_of(start) {
                    chart.add(Item {
                        prod,
                        dot: 0,
                        origin: set,
                        count: 0,
                    });
                }
            });
        if let Ok(set) = seeded {
            matcher.start_lexemes(set);
        }
        matcher
    }

    pub fn grammar(&self) -> &Arc<CompiledGrammar> {
        &self.grammar
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.frames.len() - 1
    }

    /// The bytes consumed so far form a complete sentence of the grammar.
    pub fn is_accepting(&self) -> bool {
        self.chart
            .sets
            .last()
            .is_some_and(|s| s.position == self.position() && s.accepting)
    }

    /// Some non-empty continuation is still possible.
    pub fn can_continue(&self) -> bool {
        !self.allowed_bytes().is_empty() || self.expects_tokens()
    }

    pub(crate) fn active_lexemes(&self) -> &[Lexeme] {
        let start = self.frames[self.position()].lexemes_start as usize;
        &self.lexemes[start..]
    }

    /// The alive `(terminal, DFA state)` pairs here, sorted and deduplicated: the
    /// key of the token tables (each terminal as its
    /// [table terminal](CompiledGrammar::table_terminal)).
    pub fn lexer_configuration(&self, out: &mut Vec<(TerminalId, State)>) {
        out.clear();
        let grammar = &*self.grammar;
        out.extend(
            self.active_lexemes()
                .iter()
                .map(|l| (grammar.table_terminal(l.terminal, l.state), l.state)),
        );
        out.sort_unstable();
        out.dedup();
    }

    /// [`Matcher::lexer_configuration`] for the token tables, looking `horizon`
    /// bytes ahead (the longest token): a lexeme whose terminal is one iteration of
    /// a counted repetition `x{min,max}` with more than `horizon` iterations still
    /// allowed (`x` a loopable terminal: each iteration reads at least one byte) is
    /// reported [`LOOPED`](crate::automaton::terminal::LOOPED): within the next token
    /// the parser would read `x x x ...` anyway. Inside a `maxLength` string the
    /// tables then see the string body as one looping lexeme (its tokens allowed in
    /// one OR) instead of a one-character terminal that ends inside almost every
    /// token and sends it to the parser. A counted terminal's state far from its
    /// bounds is reported as the [state](crate::automaton::terminal::Terminal::table_state)
    /// that shares its table.
    pub fn token_configuration(&self, horizon: usize, out: &mut Vec<(TerminalId, State)>) {
        self.table_lexemes(horizon, out);
        as_configuration(out);
    }

    /// Each active lexeme's `(table terminal, table state)`, in the active
    /// lexemes' order: the entries of [`Matcher::token_configuration`] before
    /// sorting.
    pub fn table_lexemes(&self, horizon: usize, out: &mut Vec<(TerminalId, State)>) {
        out.clear();
        let horizon = u32::try_from(horizon).unwrap_or(u32::MAX);
        for lexeme in self.active_lexemes() {
            // A counted lexeme's count is canonical whether or not it loops: an
            // array of long `maxLength` strings repeats one counted terminal, and
            // with its raw count every step of an item built new tables (9 ms).
            let terminal = self.grammar.terminal(lexeme.terminal);
            let state = terminal.table_state(lexeme.state, horizon);
            let state = if self.repeats_far_from_max(lexeme, horizon) {
                state | crate::automaton::terminal::LOOPED
            } else {
                state
            };
            out.push((self.grammar.table_terminal(lexeme.terminal, state), state));
        }
    }

    /// Whether `lexeme`'s terminal is, in its set, one whole iteration of some
    /// repetition with more than `horizon` iterations left.
    fn repeats_far_from_max(&self, lexeme: &Lexeme, horizon: u32) -> bool {
        let grammar = &*self.grammar;
        if !grammar.terminal(lexeme.terminal).is_loopable() {
            return false;
        }
        let set = lexeme.set;
        self.chart
            .items_waiting(set, chart::terminal_key(lexeme.terminal))
            .any(|item| {
                let production = grammar.production(item.prod);
                if item.dot != 0 || item.origin != set || production.rhs.len() != 1 {
                    return false;
                }
                let rule = production.lhs;
                self.chart
                    .items_waiting(set, chart::nonterminal_key(rule))
                    .any(
                        |parent| match grammar.production(parent.prod).rhs[parent.dot as usize] {
                            crate::automaton::Symbol::Repeat { rule: r, max, .. } => {
                                r == rule && max.is_none_or(|m| m - parent.count > horizon)
                            }
                            _ => false,
                        },
                    )
            })
    }

    /// Appends to `out` a position-free serialization of the parse state: the live
    /// lexemes and everything their completions can reach in the chart. Equal
    /// serializations accept exactly the same continuations of at most `horizon`
    /// bytes (repetition counts far from their bounds are not told apart), which is
    /// what lets results computed for one state be reused for another.
    pub fn future_signature(
        &self,
        horizon: usize,
        memo: &mut rustc_hash::FxHashMap<(u32, u32), u32>,
        out: &mut Vec<u32>,
    ) {
        self.future_signature_with_states(horizon, memo, out, &mut Vec::new());
    }

    /// [`Matcher::future_signature`], with where each lexeme's state was
    /// written into `states_at`: see [`Matcher::future_key`].
    pub(crate) fn future_signature_with_states(
        &self,
        horizon: usize,
        memo: &mut rustc_hash::FxHashMap<(u32, u32), u32>,
        out: &mut Vec<u32>,
        states_at: &mut Vec<usize>,
    ) {
        out.clear();
        memo.clear();
        states_at.clear();
        let horizon = u32::try_from(horizon).unwrap_or(u32::MAX);
        for lexeme in self.active_lexemes() {
            out.extend([lexeme.terminal.0, lexeme.state]);
            states_at.push(out.len() - 1);
            self.chart.write_future(
                &self.grammar,
                lexeme.set,
                lexeme.terminal,
                horizon,
                memo,
                out,
            );
        }
    }

    /// What a [future signature](Matcher::future_signature) is made from
    /// besides the lexemes' states and the chart ([`Matcher::chart_truncations`]):
    /// each active lexeme's terminal and chart set, into `out`. Where both equal
    /// an earlier signature's, that signature with the states written at its
    /// `states_at` is this position's (inside a string body, every token).
    pub fn future_key(&self, out: &mut Vec<(u32, u32)>) {
        out.clear();
        out.extend(
            self.active_lexemes()
                .iter()
                .map(|lexeme| (lexeme.terminal.0, lexeme.set)),
        );
    }

    /// How many rollbacks dropped chart sets so far (see [`Matcher::future_key`]).
    pub fn chart_truncations(&self) -> u64 {
        self.chart_truncations
    }

    /// Consumes one byte; on rejection nothing changes.
    pub fn consume_byte(&mut self, byte: u8) -> Result<(), MatchError> {
        self.completed.clear();
        self.step(Some(byte), false, false)
    }

    /// Consumes the bytes of one token: as [`Matcher::consume_bytes`], and
    /// then the token counts against every [token budget](crate::grammar::TokenBudget)
    /// it touched: a lexeme that has spent its budget ends here, whatever its
    /// state. On error the state holds the prefix consumed before it.
    pub fn consume_token_bytes(&mut self, bytes: &[u8]) -> Result<(), MatchError> {
        let last = bytes.len().saturating_sub(1);
        for (i, &byte) in bytes.iter().enumerate() {
            self.completed.clear();
            self.step(Some(byte), false, i == last)?;
        }
        self.end_token();
        Ok(())
    }

    /// Records that a token ends here (for token budgets).
    fn end_token(&mut self) {
        if self.grammar.has_token_budgets() {
            self.token_ends.push(self.position() as u32);
        }
    }

    /// How many tokens a lexeme that started at `start` has spent once the
    /// token under way (which it reads) ends: that one and every earlier token
    /// that ended after `start`.
    fn tokens_spent(token_ends: &[u32], start: usize) -> u32 {
        let before = token_ends.partition_point(|&end| end as usize <= start);
        1 + (token_ends.len() - before) as u32
    }

    /// Enters the next position: the active lexemes step over `byte` (none
    /// does for `None`, a token without bytes), joined by the terminals already
    /// in `self.completed` (token terminals ending here). `riding`: a token
    /// terminal is under way, so the position is viable even if no lexeme
    /// survives. `token_end`: a token ends with this byte, so a lexeme whose
    /// token budget is spent ends too. On rejection nothing changes.
    fn step(&mut self, byte: Option<u8>, riding: bool, token_end: bool) -> Result<(), MatchError> {
        let offset = self.position();
        let active = self.frames[offset].lexemes_start as usize..self.lexemes.len();
        let new_start = self.lexemes.len();
        // Disjoint field borrows: no Arc clone on this per-byte path.
        let grammar = &*self.grammar;
        let lexemes = &mut self.lexemes;
        let budgets = token_end && grammar.has_token_budgets();
        if let Some(byte) = byte {
            for i in active {
                let lexeme = lexemes[i];
                let terminal = grammar.terminal(lexeme.terminal);
                let state = terminal.next(lexeme.state, byte);
                if terminal.is_dead(state) {
                    continue;
                }
                let matched = terminal.is_match(state);
                if matched {
                    self.completed.push((lexeme.terminal, lexeme.set));
                }
                if budgets {
                    if let Some(max) = grammar.token_budget(lexeme.terminal) {
                        let start = self.chart.sets[lexeme.set as usize].position;
                        if Matcher::tokens_spent(&self.token_ends, start) >= max {
                            // Spent: the lexeme ends here, cut where it is.
                            if !matched {
                                self.completed.push((lexeme.terminal, lexeme.set));
                            }
                            continue;
                        }
                    }
                }
                lexemes.push(Lexeme { state, ..lexeme });
            }
        }
        if self.lexemes.len() == new_start && self.completed.is_empty() && !riding {
            return Err(MatchError::Rejected { offset });
        }
        self.frames.push(Frame {
            lexemes_start: new_start as u32,
            sets_before: self.chart.sets.len() as u32,
        });
        if self.completed.is_empty() {
            return Ok(());
        }
        self.build_completed_set(offset)
    }

    /// Whether a token terminal is expected here: the next token may be read
    /// whole by [`Matcher::consume_token`], not only by its bytes.
    pub fn expects_tokens(&self) -> bool {
        self.token_lexemes().next().is_some()
    }

    /// The token terminals expected here (a terminal once per chart set that
    /// expects it).
    pub fn token_lexemes(&self) -> impl Iterator<Item = TerminalId> + '_ {
        let grammar = &*self.grammar;
        self.active_lexemes()
            .iter()
            .filter(|lexeme| grammar.terminal(lexeme.terminal).token_set().is_some())
            .map(|lexeme| lexeme.terminal)
    }

    /// Consumes one whole token: token `id`, whose bytes are `bytes` (empty for
    /// a special token, which no byte-level terminal reads). Both readings are
    /// kept: the byte-level terminals read `bytes` as [`Matcher::consume_bytes`]
    /// would, and every expected token terminal whose set holds `id` spans the
    /// same positions and ends after the last one, so the two parses meet at one
    /// position (a token without bytes takes one position). Returns the
    /// positions entered; on error the state holds what was consumed before it,
    /// as with `consume_bytes`.
    pub fn consume_token(&mut self, id: u32, bytes: &[u8]) -> Result<usize, MatchError> {
        let grammar = &*self.grammar;
        let riders: Vec<(TerminalId, u32)> = self
            .active_lexemes()
            .iter()
            .filter(|lexeme| {
                let terminal = grammar.terminal(lexeme.terminal);
                terminal.token_set().is_some_and(|set| set.contains(id))
            })
            .map(|lexeme| (lexeme.terminal, lexeme.set))
            .collect();
        if riders.is_empty() {
            if bytes.is_empty() {
                return Err(MatchError::Rejected {
                    offset: self.position(),
                });
            }
            return self.consume_token_bytes(bytes).map(|()| bytes.len());
        }
        let positions = bytes.len().max(1);
        for i in 0..positions {
            self.completed.clear();
            let last = i + 1 == positions;
            if last {
                self.completed.extend_from_slice(&riders);
            }
            self.step(bytes.get(i).copied(), !last, last)?;
        }
        self.end_token();
        Ok(positions)
    }

    /// Enters one more position at which exactly the active lexemes at `indices`
    /// (into [`Matcher::active_lexemes`]) end their terminals and none goes on: the
    /// parser's side of a token whose bytes so far stayed inside those lexemes (the
    /// lexer's side, lexemes going on, is walked without the matcher). The bytes
    /// read inside the lexemes are not recorded: completion does not depend on
    /// them, only on which terminals ended where they started.
    pub(crate) fn complete_active_lexemes(&mut self, indices: &[u32]) -> Result<(), MatchError> {
        let offset = self.position();
        let start = self.frames[offset].lexemes_start as usize;
        self.completed.clear();
        for &i in indices {
            let lexeme = self.lexemes[start + i as usize];
            self.completed.push((lexeme.terminal, lexeme.set));
        }
        self.frames.push(Frame {
            lexemes_start: self.lexemes.len() as u32,
            sets_before: self.chart.sets.len() as u32,
        });
        self.build_completed_set(offset)
    }

    /// Builds the chart set of position `offset + 1` (already entered) from the
    /// terminals in `self.completed`, and starts the lexemes it expects.
    fn build_completed_set(&mut self, offset: usize) -> Result<(), MatchError> {
        let completed = &self.completed;
        let built = self.chart.build_set(
            &self.grammar,
            offset + 1,
            self.options.max_items_per_position,
            |chart, _| {
                for &(terminal, origin) in completed {
                    chart.advance_over_terminal(origin, terminal);
                }
            },
        );
        match built {
            Ok(set) => {
                self.start_lexemes(set);
                Ok(())
            }
            Err(TooManyItems) => {
                self.rollback(1);
                Err(MatchError::TooAmbiguous {
                    offset,
                    limit: self.options.max_items_per_position,
                })
            }
        }
    }

    fn start_lexemes(&mut self, set: u32) {
        for terminal in self.chart.expected_terminals(set) {
            let t = self.grammar.terminal(terminal);
            let state = t.start();
            if !t.is_dead(state) {
                self.lexemes.push(Lexeme {
                    terminal,
                    state,
                    set,
                });
            }
        }
    }

    /// Consumes `bytes` in order, stopping at the first one that is not allowed.
    /// On error the state holds the prefix consumed before it.
    pub fn consume_bytes(&mut self, bytes: &[u8]) -> Result<(), MatchError> {
        bytes.iter().try_for_each(|&b| self.consume_byte(b))
    }

    /// Whether `bytes` could be consumed from here, leaving the state unchanged.
    pub fn accepts_bytes(&mut self, bytes: &[u8]) -> bool {
        let before = self.position();
        let ok = self.consume_bytes(bytes).is_ok();
        self.rollback(self.position() - before);
        ok
    }

    /// Undoes the last `n` consumed bytes (fewer if fewer were consumed).
    pub fn rollback(&mut self, n: usize) {
        for _ in 0..n.min(self.position()) {
            let Some(frame) = self.frames.pop() else {
                break;
            };
            self.lexemes.truncate(frame.lexemes_start as usize);
            if (frame.sets_before as usize) < self.chart.set_count() {
                self.chart.truncate(frame.sets_before as usize);
                self.chart_truncations += 1;
            }
        }
        let position = self.position() as u32;
        while self.token_ends.last().is_some_and(|&end| end > position) {
            self.token_ends.pop();
        }
    }

    /// Goes back to the empty prefix.
    pub fn reset(&mut self) {
        self.rollback(self.position());
    }

    /// The bytes that may come next (token terminals read none: see
    /// [`Matcher::expects_tokens`]).
    pub fn allowed_bytes(&self) -> ByteSet {
        let mut set = ByteSet::default();
        for lexeme in self.active_lexemes() {
            let live = self
                .grammar
                .terminal(lexeme.terminal)
                .live_bytes(lexeme.state);
            set.union_with(&live);
        }
        set
    }

    /// Descriptions of the terminals that could continue here (rule names where a
    /// terminal is a whole rule, else its pattern), sorted and deduplicated.
    pub fn expected_terminals(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .active_lexemes()
            .iter()
            .filter(|lexeme| {
                let terminal = self.grammar.terminal(lexeme.terminal);
                terminal.token_set().is_some() || !terminal.live_bytes(lexeme.state).is_empty()
            })
            .map(|lexeme| self.grammar.terminal(lexeme.terminal).describe())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}
