//! Shortest strings: per terminal DFA state, the fewest bytes to a match; per
//! nonterminal, its shortest derivation. The matcher combines them with its chart to
//! find the shortest way to finish the current output, which is what a decode loop
//! needs to close an output before its token budget runs out.
//!
//! Built lazily (a grammar that is never asked pays nothing) and shared by every
//! request. Lengths saturate, so a `{1000000}` counter cannot overflow.

use std::collections::VecDeque;
use std::sync::OnceLock;

use super::lexer::{State, Terminal, DEAD};
use super::{
    CompiledGrammar, NonTerminalId, PermutationId, ProductionId, Progress, Symbol, TerminalId,
};

/// "No string": unreachable match or unproductive nonterminal.
pub const UNREACHABLE: u64 = u64::MAX;

/// Per DFA state: bytes to the nearest match and the first byte on the way.
#[derive(Debug)]
pub struct TerminalDistances {
    distance: Vec<u64>,
    next_byte: Vec<u8>,
}

impl TerminalDistances {
    fn build(terminal: &Terminal) -> TerminalDistances {
        let n = terminal.state_count();
        // Reverse edges, one per (source, target): the smallest byte, so that the
        // strings written are the readable ones where there is a choice.
        let mut reverse: Vec<Vec<(State, u8)>> = vec![Vec::new(); n];
        let mut targets: Vec<State> = Vec::new();
        // One byte per class (its smallest) says where the class goes.
        let bytes = terminal.class_representatives();
        for state in 1..n as State {
            targets.clear();
            for &byte in &bytes {
                let target = terminal.next(state, byte);
                if target != DEAD && !targets.contains(&target) {
                    targets.push(target);
                    reverse[target as usize].push((state, byte));
                }
            }
        }
        let mut distance = vec![UNREACHABLE; n];
        let mut next_byte = vec![0u8; n];
        let mut queue = VecDeque::new();
        for state in 1..n as State {
            if terminal.is_match(state) {
                distance[state as usize] = 0;
                queue.push_back(state);
            }
        }
        while let Some(target) = queue.pop_front() {
            let d = distance[target as usize] + 1;
            for &(source, byte) in &reverse[target as usize] {
                if distance[source as usize] == UNREACHABLE {
                    distance[source as usize] = d;
                    next_byte[source as usize] = byte;
                    queue.push_back(source);
                }
            }
        }
        TerminalDistances {
            distance,
            next_byte,
        }
    }

    /// Bytes from `state` to the nearest match ([`UNREACHABLE`] if none).
    pub fn distance(&self, state: State) -> u64 {
        self.distance
            .get(state as usize)
            .copied()
            .unwrap_or(UNREACHABLE)
    }

    /// Appends the shortest bytes leading from `state` to a match.
    pub fn write_from(&self, terminal: &Terminal, mut state: State, out: &mut Vec<u8>) {
        while self.distance(state) != 0 && self.distance(state) != UNREACHABLE {
            let byte = self.next_byte[state as usize];
            out.push(byte);
            state = terminal.next(state, byte);
        }
    }
}

/// The lazily built tables of one grammar.
#[derive(Debug)]
pub struct ShortestStrings {
    terminals: Vec<OnceLock<TerminalDistances>>,
    /// Shortest derivation length per nonterminal.
    nonterminal: Vec<u64>,
    /// The production achieving it.
    best: Vec<Option<ProductionId>>,
}

impl ShortestStrings {
    pub(super) fn build(grammar: &CompiledGrammar) -> ShortestStrings {
        let mut s = ShortestStrings {
            terminals: (0..grammar.terminals().len())
                .map(|_| OnceLock::new())
                .collect(),
            nonterminal: vec![UNREACHABLE; grammar.nonterminal_count()],
            best: vec![None; grammar.nonterminal_count()],
        };
        // Bellman-Ford style: only strict improvements, so the chosen productions
        // never form a cycle and every derivation below terminates.
        loop {
            let mut changed = false;
            for (i, p) in grammar.productions().iter().enumerate() {
                let len = s.symbols_len(grammar, &p.rhs);
                let slot = &mut s.nonterminal[p.lhs.0 as usize];
                if len < *slot {
                    *slot = len;
                    s.best[p.lhs.0 as usize] = Some(ProductionId(i as u32));
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        s
    }

    pub fn terminal(&self, grammar: &CompiledGrammar, t: TerminalId) -> &TerminalDistances {
        self.terminals[t.0 as usize].get_or_init(|| TerminalDistances::build(grammar.terminal(t)))
    }

    pub fn nonterminal_len(&self, nt: NonTerminalId) -> u64 {
        self.nonterminal[nt.0 as usize]
    }

    /// Shortest length of one symbol, with `done` iterations of a repeat already made.
    pub fn symbol_len(&self, grammar: &CompiledGrammar, symbol: &Symbol, done: u32) -> u64 {
        match *symbol {
            Symbol::Terminal(t) => {
                let terminal = grammar.terminal(t);
                self.terminal(grammar, t).distance(terminal.start())
            }
            Symbol::Rule(n) => self.nonterminal_len(n),
            Symbol::Repeat { rule, min, .. } => {
                let remaining = min.saturating_sub(done);
                if remaining == 0 {
                    0
                } else {
                    self.nonterminal_len(rule)
                        .saturating_mul(u64::from(remaining))
                }
            }
            Symbol::Permutation(id) => self.permutation_len(grammar, id, &Progress::default()),
        }
    }

    /// A shortest way to finish permutation `id` from `progress`: runs of
    /// `(nonterminal deriving the item in place, times)`.
    fn permutation_ending(
        &self,
        grammar: &CompiledGrammar,
        id: PermutationId,
        progress: &Progress,
    ) -> Option<Vec<(NonTerminalId, u32)>> {
        let p = grammar.permutation(id);
        let ending = p.cheapest_ending(progress, |k| self.nonterminal_len(p.next[k as usize]))?;
        let extra = p.members();
        let mut runs: Vec<(NonTerminalId, u32)> = ending
            .members
            .iter()
            .map(|&k| (p.next[k as usize], 1))
            .collect();
        match ending.extras {
            0 => {}
            // The first extra written is the permutation's first item.
            n if runs.is_empty() && progress.count == 0 => {
                runs.push((p.first[extra], 1));
                runs.push((p.next[extra], n - 1));
            }
            n => runs.push((p.next[extra], n)),
        }
        if progress.count == 0 {
            if let Some(&k) = ending.members.first() {
                runs[0].0 = p.first[k as usize];
            }
        }
        Some(runs)
    }

    /// Shortest length of what finishes permutation `id` from `progress`.
    pub fn permutation_len(
        &self,
        grammar: &CompiledGrammar,
        id: PermutationId,
        progress: &Progress,
    ) -> u64 {
        match self.permutation_ending(grammar, id, progress) {
            Some(runs) => runs.iter().fold(0u64, |acc, &(nt, times)| {
                acc.saturating_add(self.nonterminal_len(nt).saturating_mul(u64::from(times)))
            }),
            None => UNREACHABLE,
        }
    }

    /// Appends a shortest string finishing permutation `id` from `progress`.
    pub fn write_permutation(
        &self,
        grammar: &CompiledGrammar,
        id: PermutationId,
        progress: &Progress,
        out: &mut Vec<u8>,
    ) {
        for (nt, times) in self
            .permutation_ending(grammar, id, progress)
            .unwrap_or_default()
        {
            for _ in 0..times {
                self.write_nonterminal(grammar, nt, out);
            }
        }
    }

    /// Shortest length of a symbol sequence (the first symbol with `done` iterations).
    pub fn symbols_len(&self, grammar: &CompiledGrammar, symbols: &[Symbol]) -> u64 {
        symbols.iter().fold(0u64, |acc, s| {
            acc.saturating_add(self.symbol_len(grammar, s, 0))
        })
    }

    /// Appends a shortest string of `symbol` (after `done` repeat iterations).
    pub fn write_symbol(
        &self,
        grammar: &CompiledGrammar,
        symbol: &Symbol,
        done: u32,
        out: &mut Vec<u8>,
    ) {
        match *symbol {
            Symbol::Terminal(t) => {
                let terminal = grammar.terminal(t);
                self.terminal(grammar, t)
                    .write_from(terminal, terminal.start(), out)
            }
            Symbol::Rule(n) => self.write_nonterminal(grammar, n, out),
            Symbol::Repeat { rule, min, .. } => {
                for _ in done..min {
                    self.write_nonterminal(grammar, rule, out);
                }
            }
            Symbol::Permutation(id) => {
                self.write_permutation(grammar, id, &Progress::default(), out)
            }
        }
    }

    fn write_nonterminal(&self, grammar: &CompiledGrammar, nt: NonTerminalId, out: &mut Vec<u8>) {
        if let Some(p) = self.best[nt.0 as usize] {
            for symbol in &grammar.production(p).rhs {
                self.write_symbol(grammar, symbol, 0, out);
            }
        }
    }
}
