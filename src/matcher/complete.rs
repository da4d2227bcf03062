//! A short way to finish: the fewest bytes that take the current state to an
//! accepting one, read off the chart (what a decode loop forces when its token budget
//! is about to run out).
//!
//! Each live lexeme needs the bytes to its terminal's nearest match, then the rest
//! of every item waiting on that terminal, then, recursively, the rest of the items
//! waiting on that item's nonterminal in its origin set, up to the start symbol. The
//! grammar's shortest strings ([`ShortestStrings`]) price each rest; the recursion is
//! memoized per (set, symbol) and cut on cycles (which can only add bytes), so the
//! answer is a real completion, the shortest in every grammar without such cycles.

use rustc_hash::FxHashMap;

use super::chart::{nonterminal_key, terminal_key, Item};
use super::Matcher;
use crate::automaton::shortest::{ShortestStrings, UNREACHABLE};
use crate::automaton::{CompiledGrammar, NonTerminalId, Progress, Symbol};

/// Deeper chains than this are given up on (bounded stack).
const MAX_DEPTH: usize = 20_000;

#[derive(Clone, Copy)]
enum Node {
    InProgress,
    Done { cost: u64, via: Option<Item> },
}

struct Search<'a> {
    matcher: &'a Matcher,
    grammar: &'a CompiledGrammar,
    shortest: &'a ShortestStrings,
    memo: FxHashMap<(u32, u32), Node>,
}

impl Search<'_> {
    /// Cost to finish once an item of `set` waiting on `key` advances over it.
    fn up(&mut self, set: u32, key: u32, depth: usize) -> u64 {
        match self.memo.get(&(set, key)) {
            Some(Node::InProgress) => return UNREACHABLE,
            Some(Node::Done { cost, .. }) => return *cost,
            None => {}
        }
        if depth > MAX_DEPTH {
            return UNREACHABLE;
        }
        self.memo.insert((set, key), Node::InProgress);
        let mut best = (UNREACHABLE, None);
        let waiting: Vec<Item> = self.matcher.chart.items_waiting(set, key).collect();
        for item in waiting {
            let cost = self.advanced(item, key, depth + 1);
            if cost < best.0 {
                best = (cost, Some(item));
            }
        }
        self.memo.insert(
            (set, key),
            Node::Done {
                cost: best.0,
                via: best.1,
            },
        );
        best.0
    }

    /// Cost to finish after `item` advances over the symbol after its dot (over
    /// the symbol of `key`: which one matters inside a permutation).
    fn advanced(&mut self, item: Item, key: u32, depth: usize) -> u64 {
        let production = self.grammar.production(item.prod);
        let rest = self.rest(item, key);
        if rest == UNREACHABLE {
            return UNREACHABLE;
        }
        if production.lhs == self.grammar.start() && item.origin == 0 {
            return rest;
        }
        let up = self.up(item.origin, nonterminal_key(production.lhs), depth);
        rest.saturating_add(up)
    }

    /// Bytes of the production after `item` advances over `key`'s symbol: the
    /// remaining iterations of a repeat (or items of a permutation) at the dot,
    /// then the symbols after it.
    fn rest(&self, item: Item, key: u32) -> u64 {
        let rhs = &self.grammar.production(item.prod).rhs;
        let dot = item.dot as usize;
        let at_dot = match rhs[dot] {
            Symbol::Repeat { .. } => {
                self.shortest
                    .symbol_len(self.grammar, &rhs[dot], item.count.saturating_add(1))
            }
            Symbol::Permutation(id) => match self.permutation_after(item, key) {
                Some(progress) => self.shortest.permutation_len(self.grammar, id, &progress),
                None => UNREACHABLE,
            },
            _ => 0,
        };
        at_dot.saturating_add(self.shortest.symbols_len(self.grammar, &rhs[dot + 1..]))
    }

    /// The progress of `item`, at a permutation, once the item `key` names is done.
    fn permutation_after(&self, item: Item, key: u32) -> Option<Progress> {
        let rhs = &self.grammar.production(item.prod).rhs;
        let Symbol::Permutation(id) = rhs[item.dot as usize] else {
            return None;
        };
        let permutation = self.grammar.permutation(id);
        if key & 1 == 1 {
            return None; // a terminal's key: not one of the permutation's items
        }
        let k = permutation.item_of(NonTerminalId(key >> 1))?;
        Some(permutation.after(self.matcher.chart.progress(&item), k))
    }

    fn write_up(&self, set: u32, key: u32, out: &mut Vec<u8>) {
        if let Some(Node::Done {
            via: Some(item), ..
        }) = self.memo.get(&(set, key))
        {
            self.write_advanced(*item, key, out);
        }
    }

    fn write_advanced(&self, item: Item, key: u32, out: &mut Vec<u8>) {
        let production = self.grammar.production(item.prod);
        let rhs = &production.rhs;
        let dot = item.dot as usize;
        match rhs[dot] {
            Symbol::Repeat { .. } => self.shortest.write_symbol(
                self.grammar,
                &rhs[dot],
                item.count.saturating_add(1),
                out,
            ),
            Symbol::Permutation(id) => {
                if let Some(progress) = self.permutation_after(item, key) {
                    self.shortest
                        .write_permutation(self.grammar, id, &progress, out);
                }
            }
            _ => {}
        }
        for symbol in &rhs[dot + 1..] {
            self.shortest.write_symbol(self.grammar, symbol, 0, out);
        }
        if !(production.lhs == self.grammar.start() && item.origin == 0) {
            self.write_up(item.origin, nonterminal_key(production.lhs), out);
        }
    }
}

impl Matcher {
    /// The bytes of a shortest completion (empty when accepting), or `None` when
    /// none is at most `limit` bytes long.
    pub fn shortest_completion(&self, limit: usize) -> Option<Vec<u8>> {
        if self.is_accepting() {
            return Some(Vec::new());
        }
        let grammar = &*self.grammar;
        let shortest = grammar.shortest();
        let mut search = Search {
            matcher: self,
            grammar,
            shortest,
            memo: FxHashMap::default(),
        };
        let mut best: Option<(u64, usize)> = None;
        for (i, lexeme) in self.active_lexemes().iter().enumerate() {
            let to_match = shortest
                .terminal(grammar, lexeme.terminal)
                .distance(lexeme.state);
            if to_match == UNREACHABLE {
                continue;
            }
            let up = search.up(lexeme.set, terminal_key(lexeme.terminal), 0);
            let cost = to_match.saturating_add(up);
            if best.is_none_or(|(c, _)| cost < c) {
                best = Some((cost, i));
            }
        }
        let (cost, i) = best?;
        if cost == UNREACHABLE || cost > limit as u64 {
            return None;
        }
        let lexeme = self.active_lexemes()[i];
        let mut out = Vec::with_capacity(cost as usize);
        let terminal = grammar.terminal(lexeme.terminal);
        shortest
            .terminal(grammar, lexeme.terminal)
            .write_from(terminal, lexeme.state, &mut out);
        search.write_up(lexeme.set, terminal_key(lexeme.terminal), &mut out);
        Some(out)
    }
}
