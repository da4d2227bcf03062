//! The Earley chart: parse items grouped in sets, one set per byte position at
//! which some lexeme finished.
//!
//! Items carry a repetition `count` for [`Symbol::Repeat`], which is how bounded
//! repetition is counted without unrolling; at a [`Symbol::Permutation`] the same
//! field numbers the permutation's [`Progress`] (interned per chart, 0 = nothing
//! done), so the members used travel with the item instead of a rule per subset. Nullable symbols are stepped over when
//! predicted (Aycock and Horspool), so a completion whose origin is the current set
//! never needs to be processed. Sets are final once closed, and each keeps a sorted
//! index from "symbol after the dot" to its items, used by later completions.
//!
//! Predicted items (origin = the set being built) need no processing at all: the
//! compiled grammar lists, per nonterminal, everything its prediction adds. They are
//! appended as slices, deduplicated per nonterminal with a generation stamp; only
//! scanned and completed items go through the worklist and the hash set.

use rustc_hash::{FxHashMap, FxHashSet};

use crate::automaton::{
    CompiledGrammar, NonTerminalId, ProductionId, Progress, Symbol, TerminalId,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Item {
    pub prod: ProductionId,
    pub dot: u32,
    /// Index of the set where this item's production was predicted.
    pub origin: u32,
    /// Iterations done of the `Repeat` after the dot (saturated at `min` when
    /// unbounded), or the number of the `Permutation`'s progress.
    pub count: u32,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Set {
    /// Byte position this set stands at.
    pub position: usize,
    pub items_end: u32,
    pub waiting_start: u32,
    pub waiting_end: u32,
    /// The start symbol is complete here, from position 0.
    pub accepting: bool,
}

/// What an item after the dot waits for, as a sortable key.
#[inline]
pub(super) fn terminal_key(t: TerminalId) -> u32 {
    t.0 << 1 | 1
}

#[inline]
pub(super) fn nonterminal_key(n: NonTerminalId) -> u32 {
    n.0 << 1
}

/// The chart exceeded its item budget at one position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TooManyItems;

#[derive(Clone, Default)]
pub(super) struct Chart {
    pub items: Vec<Item>,
    pub sets: Vec<Set>,
    /// Items of the set being built that still need processing.
    worklist: Vec<Item>,
    /// `(key, item index)`, sorted by key within each set's range.
    waiting: Vec<(u32, u32)>,
    dedup: FxHashSet<Item>,
    /// Per nonterminal: the `generation` in which it was last predicted.
    predicted: Vec<u32>,
    /// Bumped for every set built, so stale stamps never match after a rollback.
    generation: u32,
    /// Permutation progress values numbered `1..` (0 is the empty progress). Never
    /// shrinks: a number stays valid for the whole parse, rollbacks included.
    progresses: Vec<Progress>,
    progress_numbers: FxHashMap<Progress, u32>,
    /// Scratch: the nonterminals a permutation item waits on.
    awaited: Vec<NonTerminalId>,
}

static NOTHING_DONE: Progress = Progress {
    used: Vec::new(),
    count: 0,
};

/// The progress numbered `number` in `progresses` (see [`Chart::progress`]).
fn progress_in(progresses: &[Progress], number: u32) -> &Progress {
    match number {
        0 => &NOTHING_DONE,
        n => &progresses[n as usize - 1],
    }
}

impl Chart {
    /// The permutation progress an item at a [`Symbol::Permutation`] carries.
    pub fn progress(&self, item: &Item) -> &Progress {
        progress_in(&self.progresses, item.count)
    }

    fn progress_number(&mut self, progress: Progress) -> u32 {
        if progress == NOTHING_DONE {
            return 0;
        }
        if let Some(&n) = self.progress_numbers.get(&progress) {
            return n;
        }
        self.progresses.push(progress.clone());
        let n = self.progresses.len() as u32;
        self.progress_numbers.insert(progress, n);
        n
    }

    /// Adds to the set being built every item of set `origin` waiting on terminal
    /// `t`, with the dot moved past it (the scan step).
    pub fn advance_over_terminal(&mut self, origin: u32, t: TerminalId) {
        let key = terminal_key(t);
        let s = self.sets[origin as usize];
        let (start, end) = (s.waiting_start as usize, s.waiting_end as usize);
        let mut i = start + self.waiting[start..end].partition_point(|&(k, _)| k < key);
        while i < end && self.waiting[i].0 == key {
            let item = self.items[self.waiting[i].1 as usize];
            i += 1;
            self.add(Item {
                dot: item.dot + 1,
                count: 0,
                ..item
            });
        }
    }

    /// Appends to `out` a serialization of everything the parse can still do with
    /// the items of `set` waiting on terminal `t`: those items, and recursively the
    /// items their completion would advance. Two charts that serialize the same way
    /// accept the same continuations of at most `horizon` bytes, whatever their
    /// positions; `memo` numbers the (set, key) nodes already written, so shared and
    /// cyclic parts are references.
    ///
    /// A repetition count is written only where it can matter within `horizon`
    /// bytes: an iteration that counts consumes at least one byte, so a count that
    /// has reached `min` and is more than `horizon` below `max` behaves like any
    /// other such count. Inside a long `x{0,1024}` every position then has the same
    /// signature.
    pub fn write_future(
        &self,
        grammar: &CompiledGrammar,
        set: u32,
        t: TerminalId,
        horizon: u32,
        memo: &mut FxHashMap<(u32, u32), u32>,
        out: &mut Vec<u32>,
    ) {
        self.write_node(grammar, set, terminal_key(t), horizon, memo, out);
    }

    fn write_node(
        &self,
        grammar: &CompiledGrammar,
        set: u32,
        key: u32,
        horizon: u32,
        memo: &mut FxHashMap<(u32, u32), u32>,
        out: &mut Vec<u32>,
    ) {
        const REFERENCE: u32 = 1 << 31;
        const OPEN: u32 = u32::MAX;
        const CLOSE: u32 = u32::MAX - 1;
        if let Some(&n) = memo.get(&(set, key)) {
            out.push(REFERENCE | n);
            return;
        }
        memo.insert((set, key), memo.len() as u32);
        out.push(OPEN);
        let s = self.sets[set as usize];
        let (start, end) = (s.waiting_start as usize, s.waiting_end as usize);
        let mut i = start + self.waiting[start..end].partition_point(|&(k, _)| k < key);
        while i < end && self.waiting[i].0 == key {
            let item = self.items[self.waiting[i].1 as usize];
            i += 1;
            let production = grammar.production(item.prod);
            let count_matters = match production.rhs[item.dot as usize] {
                Symbol::Repeat { min, max, .. } => {
                    item.count < min || max.is_some_and(|m| m - item.count <= horizon)
                }
                _ => true,
            };
            if let Symbol::Permutation(_) = production.rhs[item.dot as usize] {
                // Progress numbers are per chart: write what they stand for.
                let progress = self.progress(&item);
                out.extend([item.prod.0, item.dot, 2, progress.count]);
                out.push(progress.used.len() as u32);
                out.extend(&progress.used);
            } else if count_matters {
                out.extend([item.prod.0, item.dot, 0, item.count]);
            } else {
                out.extend([item.prod.0, item.dot, 1]);
            }
            let lhs = production.lhs;
            if lhs != grammar.start() {
                self.write_node(
                    grammar,
                    item.origin,
                    nonterminal_key(lhs),
                    horizon,
                    memo,
                    out,
                );
            }
        }
        out.push(CLOSE);
    }

    /// The items of `set` waiting on `key` (a terminal or nonterminal key).
    pub fn items_waiting(&self, set: u32, key: u32) -> impl Iterator<Item = Item> + '_ {
        let s = self.sets[set as usize];
        let (start, end) = (s.waiting_start as usize, s.waiting_end as usize);
        let first = start + self.waiting[start..end].partition_point(|&(k, _)| k < key);
        self.waiting[first..end]
            .iter()
            .take_while(move |&&(k, _)| k == key)
            .map(|&(_, i)| self.items[i as usize])
    }

    /// Terminals awaited by items of `set` (each once, ascending).
    pub fn expected_terminals(&self, set: u32) -> impl Iterator<Item = TerminalId> + '_ {
        let s = self.sets[set as usize];
        let slice = &self.waiting[s.waiting_start as usize..s.waiting_end as usize];
        let mut last = None;
        slice.iter().filter_map(move |&(k, _)| {
            if k & 1 == 1 && last != Some(k) {
                last = Some(k);
                Some(TerminalId(k >> 1))
            } else {
                None
            }
        })
    }

    /// Sets built so far.
    pub fn set_count(&self) -> usize {
        self.sets.len()
    }

    /// Drops every set from index `len` on.
    pub fn truncate(&mut self, len: usize) {
        self.sets.truncate(len);
        match self.sets.last() {
            Some(s) => {
                self.items.truncate(s.items_end as usize);
                self.waiting.truncate(s.waiting_end as usize);
            }
            None => {
                self.items.clear();
                self.waiting.clear();
            }
        }
    }

    /// Builds a new set at `position` from `seeds` (advanced items) and closes it.
    /// `seeds` receives the chart and pushes through [`Chart::add`].
    pub fn build_set(
        &mut self,
        grammar: &CompiledGrammar,
        position: usize,
        max_items: usize,
        seeds: impl FnOnce(&mut Chart, u32),
    ) -> Result<u32, TooManyItems> {
        let set_index = self.sets.len() as u32;
        let items_start = self.items.len();
        self.dedup.clear();
        self.generation = self.generation.wrapping_add(1);
        if self.predicted.len() < grammar.nonterminal_count() {
            self.predicted.resize(grammar.nonterminal_count(), u32::MAX);
        }
        self.worklist.clear();
        seeds(self, set_index);
        let mut next = 0;
        while next < self.worklist.len() {
            if self.items.len() - items_start > max_items {
                self.items.truncate(items_start);
                return Err(TooManyItems);
            }
            let item = self.worklist[next];
            next += 1;
            let rhs = &grammar.production(item.prod).rhs;
            let Some(&symbol) = rhs.get(item.dot as usize) else {
                if item.origin != set_index {
                    self.complete(grammar, item, set_index);
                }
                continue;
            };
            match symbol {
                Symbol::Terminal(t) => {
                    if grammar.terminal(t).matches_empty() {
                        self.add(Item {
                            dot: item.dot + 1,
                            count: 0,
                            ..item
                        });
                    }
                }
                Symbol::Rule(n) => {
                    self.predict(grammar, n, set_index);
                    if grammar.is_nullable(n) {
                        self.add(Item {
                            dot: item.dot + 1,
                            count: 0,
                            ..item
                        });
                    }
                }
                Symbol::Repeat { rule, min, max } => {
                    if max.is_none_or(|m| item.count < m) {
                        self.predict(grammar, rule, set_index);
                    }
                    if item.count >= min || grammar.is_nullable(rule) {
                        self.add(Item {
                            dot: item.dot + 1,
                            count: 0,
                            ..item
                        });
                    }
                }
                Symbol::Permutation(id) => {
                    let permutation = grammar.permutation(id);
                    let progress = progress_in(&self.progresses, item.count);
                    // A reused buffer: `predict` borrows the chart mutably.
                    let mut awaited = std::mem::take(&mut self.awaited);
                    awaited.clear();
                    awaited.extend(permutation.awaited(progress).map(|(_, nt)| nt));
                    let can_end = permutation.can_end(progress);
                    for &nt in &awaited {
                        self.predict(grammar, nt, set_index);
                    }
                    self.awaited = awaited;
                    if can_end {
                        self.add(Item {
                            dot: item.dot + 1,
                            count: 0,
                            ..item
                        });
                    }
                }
            }
        }
        self.close(grammar, position, items_start);
        Ok(set_index)
    }

    /// Adds `item` to the set being built unless it is already there, and queues it
    /// for processing.
    pub fn add(&mut self, item: Item) {
        if self.dedup.insert(item) {
            self.items.push(item);
            self.worklist.push(item);
        }
    }

    /// Appends everything predicting `nt` adds (see the module docs).
    fn predict(&mut self, grammar: &CompiledGrammar, nt: NonTerminalId, set_index: u32) {
        if self.predicted[nt.0 as usize] == self.generation {
            return;
        }
        for &x in grammar.prediction_closure(nt) {
            let stamp = &mut self.predicted[x.0 as usize];
            if *stamp == self.generation {
                continue;
            }
            *stamp = self.generation;
            self.items
                .extend(grammar.predicted_items(x).iter().map(|&(prod, dot)| Item {
                    prod,
                    dot,
                    origin: set_index,
                    count: 0,
                }));
        }
    }

    /// `item` is complete: advance everything in its origin set that waited for it.
    fn complete(&mut self, grammar: &CompiledGrammar, item: Item, _set_index: u32) {
        let lhs = grammar.production(item.prod).lhs;
        let s = self.sets[item.origin as usize];
        let key = nonterminal_key(lhs);
        let slice_start = s.waiting_start as usize;
        let slice_end = s.waiting_end as usize;
        let lo =
            slice_start + self.waiting[slice_start..slice_end].partition_point(|&(k, _)| k < key);
        let mut i = lo;
        while i < slice_end && self.waiting[i].0 == key {
            let parent = self.items[self.waiting[i].1 as usize];
            i += 1;
            match grammar.production(parent.prod).rhs[parent.dot as usize] {
                Symbol::Repeat { min, max, .. } => {
                    let count = parent.count + 1;
                    if max.is_none_or(|m| count <= m) {
                        let count = if max.is_none() { count.min(min) } else { count };
                        self.add(Item { count, ..parent });
                    }
                }
                // The parent waited on `lhs` only if that item was allowed for it.
                Symbol::Permutation(id) => {
                    let permutation = grammar.permutation(id);
                    if let Some(k) = permutation.item_of(lhs) {
                        let next = permutation.after(self.progress(&parent), k);
                        let count = self.progress_number(next);
                        self.add(Item { count, ..parent });
                    }
                }
                _ => self.add(Item {
                    dot: parent.dot + 1,
                    count: 0,
                    ..parent
                }),
            }
        }
    }

    /// Records the finished set and its waiting index.
    fn close(&mut self, grammar: &CompiledGrammar, position: usize, items_start: usize) {
        let waiting_start = self.waiting.len();
        let mut accepting = false;
        for i in items_start..self.items.len() {
            let item = self.items[i];
            let production = grammar.production(item.prod);
            match production.rhs.get(item.dot as usize) {
                None => accepting |= production.lhs == grammar.start() && item.origin == 0,
                Some(Symbol::Terminal(t)) => self.waiting.push((terminal_key(*t), i as u32)),
                Some(Symbol::Rule(n)) | Some(Symbol::Repeat { rule: n, .. }) => {
                    self.waiting.push((nonterminal_key(*n), i as u32))
                }
                Some(Symbol::Permutation(id)) => {
                    let progress = progress_in(&self.progresses, item.count);
                    for (_, nt) in grammar.permutation(*id).awaited(progress) {
                        self.waiting.push((nonterminal_key(nt), i as u32));
                    }
                }
            }
        }
        self.waiting[waiting_start..].sort_unstable();
        self.sets.push(Set {
            position,
            items_end: self.items.len() as u32,
            waiting_start: waiting_start as u32,
            waiting_end: self.waiting.len() as u32,
            accepting,
        });
    }
}
