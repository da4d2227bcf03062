//! Shortest strings: per terminal DFA state, the fewest bytes to a match; per
//! nonterminal, its shortest derivation. The matcher combines them with its chart to
//! find the shortest way to finish the current output, which is what a decode loop
//! needs to close an output before its token budget runs out.
//!
//! Built lazily (a grammar that is never asked pays nothing) and shared by every
//! request. Lengths saturate, so a `{1000000}` counter cannot overflow.

use std::collections::VecDeque;
use std::sync::OnceLock;

use super::terminal::{CounterSpan, State, Terminal, DEAD};
use super::{
    CompiledGrammar, NonTerminalId, PermutationId, ProductionId, Progress, Symbol, TerminalId,
};

/// "No string": unreachable match or unproductive nonterminal.
pub const UNREACHABLE: u64 = u64::MAX;

/// Per DFA state: bytes to the nearest match and the first byte on the way.
/// Stored for the stored states; a counted terminal's counter states (millions,
/// for a long `maxLength`) are computed from its leaf.
#[derive(Debug)]
pub struct TerminalDistances {
    /// By stored row: the states below the counter's, then those past it.
    distance: Vec<u64>,
    next_byte: Vec<u8>,
    counter: Option<CounterDistances>,
}

/// The shortest ways through a counter: finish the iteration under way, make
/// the iterations still short of `min` (each the shortest), then the suffix.
#[derive(Debug)]
struct CounterDistances {
    span: CounterSpan,
    /// Per position inside an iteration: bytes to its end and the first one.
    iteration: Vec<(u64, u8)>,
    /// From between iterations at a count of at least `min`: bytes to a match
    /// through the suffix (0 when the suffix may be empty), and the first one.
    suffix: (u64, u8),
    /// A product's counter ([`Terminal::counted_product`]), whose iterations
    /// carry other automata's states: searched from each state asked instead.
    product: Option<Box<Terminal>>,
}

/// Most states [`nearest_match`] visits before giving up (the way is then
/// reported as missing: a `minLength` of thousands beside a pattern of a hundred
/// states can pass it, leaving such a string without a shortest completion).
const MAX_SEARCHED: usize = 1 << 20;

/// The shortest bytes from `state` to a match of `terminal`, by a search
/// forwards (`None` when none is found within [`MAX_SEARCHED`] states).
fn nearest_match(terminal: &Terminal, state: State) -> Option<Vec<u8>> {
    use rustc_hash::FxHashMap;
    let bytes = terminal.class_representatives();
    let mut parent: FxHashMap<State, (State, u8)> = FxHashMap::default();
    let mut queue = VecDeque::from([state]);
    parent.insert(state, (DEAD, 0));
    while let Some(q) = queue.pop_front() {
        if terminal.is_match(q) {
            let mut path = Vec::new();
            let mut at = q;
            while at != state {
                let (from, byte) = parent[&at];
                path.push(byte);
                at = from;
            }
            path.reverse();
            return Some(path);
        }
        if parent.len() > MAX_SEARCHED {
            return None;
        }
        for &byte in &bytes {
            let r = terminal.next(q, byte);
            if r != DEAD && !parent.contains_key(&r) {
                parent.insert(r, (q, byte));
                queue.push_back(r);
            }
        }
    }
    None
}

impl CounterDistances {
    fn build(
        terminal: &Terminal,
        span: CounterSpan,
        bytes: &[u8],
        stored_distance: impl Fn(State) -> u64,
    ) -> CounterDistances {
        if span.carried {
            return CounterDistances {
                span,
                iteration: Vec::new(),
                suffix: (UNREACHABLE, 0),
                product: Some(Box::new(terminal.clone())),
            };
        }
        // The leaf is the same at every count: read it at count 0, below `max`.
        let per_count = span.per_count as usize;
        let done = span.state(1, 0);
        let mut reverse: Vec<Vec<(usize, u8)>> = vec![Vec::new(); per_count];
        let mut iteration = vec![(UNREACHABLE, 0u8); per_count];
        let mut queue = VecDeque::new();
        for (i, way) in iteration.iter_mut().enumerate() {
            for &byte in bytes {
                match terminal.next(span.state(0, i as u32), byte) {
                    t if t == done => {
                        if way.0 == UNREACHABLE {
                            *way = (1, byte);
                            queue.push_back(i);
                        }
                    }
                    t => {
                        if let Some((0, j)) = span.position(t) {
                            if !reverse[j as usize].iter().any(|&(s, _)| s == i) {
                                reverse[j as usize].push((i, byte));
                            }
                        }
                    }
                }
            }
        }
        while let Some(j) = queue.pop_front() {
            let d = iteration[j].0 + 1;
            for &(i, byte) in &reverse[j] {
                if iteration[i].0 == UNREACHABLE {
                    iteration[i] = (d, byte);
                    queue.push_back(i);
                }
            }
        }
        // The suffix, from the state after `max` iterations (where only it goes on).
        let spent = span.state(span.max, 0);
        let suffix = if terminal.is_match(spent) {
            (0, 0)
        } else {
            bytes
                .iter()
                .filter_map(|&byte| {
                    let t = terminal.next(spent, byte);
                    let d = stored_distance(t);
                    (t != DEAD && d != UNREACHABLE).then(|| (d + 1, byte))
                })
                .min_by_key(|&(d, _)| d)
                .unwrap_or((UNREACHABLE, 0))
        };
        CounterDistances {
            span,
            iteration,
            suffix,
            product: None,
        }
    }

    /// From between iterations after `count` of them.
    fn between(&self, count: u32) -> (u64, u8) {
        let short = u64::from(self.span.min.saturating_sub(count));
        if short == 0 {
            return self.suffix;
        }
        let (shortest, first) = self.iteration[0];
        (
            shortest.saturating_mul(short).saturating_add(self.suffix.0),
            first,
        )
    }

    /// Distance and first byte from a state in the span.
    fn at(&self, count: u32, i: u32) -> (u64, u8) {
        if let Some(product) = &self.product {
            return match nearest_match(product, self.span.state(count, i)) {
                Some(path) => (path.len() as u64, path.first().copied().unwrap_or(0)),
                None => (UNREACHABLE, 0),
            };
        }
        if i == 0 {
            return self.between(count);
        }
        // Numbers past `per_count` are unused (no state there).
        let Some(&(to_end, first)) = self.iteration.get(i as usize) else {
            return (UNREACHABLE, 0);
        };
        let after = self.between(count + 1).0;
        (to_end.saturating_add(after), first)
    }
}

impl TerminalDistances {
    fn build(terminal: &Terminal) -> TerminalDistances {
        let n = terminal.state_count();
        let span = terminal.counter_span();
        let (gap_start, gap) = span.map_or((n as State, 0), |k| (k.first, k.end - k.first));
        let stored = n - gap as usize;
        let state_of = |row: usize| -> State {
            let row = row as State;
            if row < gap_start {
                row
            } else {
                row + gap
            }
        };
        // `None` inside the counter's span.
        let row_of = |state: State| -> Option<usize> {
            if state < gap_start {
                Some(state as usize)
            } else if state >= gap_start + gap {
                Some((state - gap) as usize)
            } else {
                None
            }
        };
        // Reverse edges among stored states, one per (source, target): the
        // smallest byte, so that the strings written are the readable ones where
        // there is a choice. Edges into the counter wait for its distances.
        let mut reverse: Vec<Vec<(usize, u8)>> = vec![Vec::new(); stored];
        let mut into_counter: Vec<(usize, u8, State)> = Vec::new();
        let mut targets: Vec<State> = Vec::new();
        // One byte per class (its smallest) says where the class goes.
        let bytes = terminal.class_representatives();
        for row in 1..stored {
            let state = state_of(row);
            targets.clear();
            for &byte in &bytes {
                let target = terminal.next(state, byte);
                if target == DEAD || targets.contains(&target) {
                    continue;
                }
                targets.push(target);
                match row_of(target) {
                    Some(to) => reverse[to].push((row, byte)),
                    None => into_counter.push((row, byte, target)),
                }
            }
        }
        let mut distance = vec![UNREACHABLE; stored];
        let mut next_byte = vec![0u8; stored];
        let mut queue = VecDeque::new();
        for (row, d) in distance.iter_mut().enumerate().skip(1) {
            if terminal.is_match(state_of(row)) {
                *d = 0;
                queue.push_back(row);
            }
        }
        let relax =
            |queue: &mut VecDeque<usize>, distance: &mut Vec<u64>, next_byte: &mut Vec<u8>| {
                while let Some(target) = queue.pop_front() {
                    let d = distance[target] + 1;
                    for &(source, byte) in &reverse[target] {
                        if d < distance[source] {
                            distance[source] = d;
                            next_byte[source] = byte;
                            queue.push_back(source);
                        }
                    }
                }
            };
        relax(&mut queue, &mut distance, &mut next_byte);
        // The stored states past the counter (its suffix) are final now; the
        // counter's distances follow from them, and the states before it (a
        // literal prefix) from the counter's.
        let counter = span.map(|k| {
            CounterDistances::build(terminal, k, &bytes, |q| {
                row_of(q).map_or(UNREACHABLE, |r| distance[r])
            })
        });
        if let Some(counter) = &counter {
            let mut seeds: Vec<(u64, usize, u8)> = into_counter
                .iter()
                .filter_map(|&(row, byte, target)| {
                    let (count, i) = counter.span.position(target)?;
                    let d = counter.at(count, i).0;
                    (d != UNREACHABLE).then(|| (d + 1, row, byte))
                })
                .collect();
            // Nearest first, so that each relaxation below is final (unit edges).
            seeds.sort_unstable();
            for (d, row, byte) in seeds {
                if d < distance[row] {
                    distance[row] = d;
                    next_byte[row] = byte;
                    queue.push_back(row);
                    relax(&mut queue, &mut distance, &mut next_byte);
                }
            }
        }
        TerminalDistances {
            distance,
            next_byte,
            counter,
        }
    }

    /// The stored row of `state`, else its counter position.
    fn locate(&self, state: State) -> Result<Option<usize>, (u32, u32)> {
        match &self.counter {
            Some(k) if state >= k.span.first => match k.span.position(state) {
                Some(position) => Err(position),
                None => Ok(Some((state - (k.span.end - k.span.first)) as usize)),
            },
            _ => Ok(Some(state as usize)),
        }
    }

    /// Bytes from `state` to the nearest match ([`UNREACHABLE`] if none).
    pub fn distance(&self, state: State) -> u64 {
        match self.locate(state) {
            Ok(Some(row)) => self.distance.get(row).copied().unwrap_or(UNREACHABLE),
            Ok(None) => UNREACHABLE,
            Err((count, i)) => self
                .counter
                .as_ref()
                .map_or(UNREACHABLE, |k| k.at(count, i).0),
        }
    }

    fn next_byte(&self, state: State) -> u8 {
        match self.locate(state) {
            Ok(Some(row)) => self.next_byte.get(row).copied().unwrap_or(0),
            Ok(None) => 0,
            Err((count, i)) => self.counter.as_ref().map_or(0, |k| k.at(count, i).1),
        }
    }

    /// Appends the shortest bytes leading from `state` to a match.
    pub fn write_from(&self, terminal: &Terminal, mut state: State, out: &mut Vec<u8>) {
        loop {
            // In a product's counter, the whole way at once, from one search
            // (each step, and each distance asked, would search again).
            if let (Err(_), Some(k)) = (self.locate(state), &self.counter) {
                if let Some(product) = &k.product {
                    out.extend(nearest_match(product, state).unwrap_or_default());
                    return;
                }
            }
            let distance = self.distance(state);
            if distance == 0 || distance == UNREACHABLE {
                return;
            }
            let byte = self.next_byte(state);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::automaton::terminal::test_terminal as terminal;

    /// Breadth-first from `state` over every state: the oracle.
    fn brute_distance(terminal: &Terminal, state: State) -> u64 {
        let mut seen = vec![false; terminal.state_count()];
        let mut frontier = vec![state];
        seen[state as usize] = true;
        for d in 0.. {
            if frontier.is_empty() {
                return UNREACHABLE;
            }
            if frontier.iter().any(|&q| terminal.is_match(q)) {
                return d;
            }
            let mut next = Vec::new();
            for &q in &frontier {
                for b in 0..=255u8 {
                    let r = terminal.next(q, b);
                    if r != DEAD && !std::mem::replace(&mut seen[r as usize], true) {
                        next.push(r);
                    }
                }
            }
            frontier = next;
        }
        unreachable!()
    }

    /// A counted product's distances are searched: they agree with the search
    /// over every state, and the strings written match.
    #[test]
    fn counted_products_have_the_shortest_distances_of_a_search() {
        let limits = crate::automaton::terminal::LexerLimits::default();
        let counted =
            Terminal::counted(String::new(), &terminal("[a-c]"), 2, 12, &terminal("\"")).unwrap();
        let counted = Terminal::with_literal_prefix(String::new(), String::new(), b"\"", &counted);
        let parts = [std::sync::Arc::new(terminal("\"(?:ab)*c(?:ab)*\""))];
        let t = Terminal::counted_product(String::new(), &counted, &parts, &[], &limits).unwrap();
        assert!(t.counter_span().is_some_and(|k| k.carried));
        let distances = TerminalDistances::build(&t);
        for state in 1..t.state_count() as State {
            let expected = brute_distance(&t, state);
            assert_eq!(distances.distance(state), expected, "from {state}");
            if expected != UNREACHABLE {
                let mut out = Vec::new();
                distances.write_from(&t, state, &mut out);
                assert_eq!(out.len() as u64, expected, "from {state}");
                let end = out.iter().fold(state, |q, &b| t.next(q, b));
                assert!(t.is_match(end), "from {state}: {out:?}");
            }
        }
    }

    /// A counted terminal's distances are computed for its counter states and
    /// stored for the others: both agree with a search over every state, and
    /// the strings written are that long and match.
    #[test]
    fn counted_terminals_have_the_shortest_distances_of_a_search() {
        let cases = [
            ("[a-z]", 3, 10, "\"", ""),
            ("(?:[a-z]|\\\\[nt]|é)", 0, 9, "\",", ""),
            ("ab", 2, 8, "", ""),
            ("[0-9]", 10, 12, "x", ":\""),
            ("(?:[a-z]|\\\\u[0-9]{4})", 1, 5, "\"", ",\"k\":\""),
        ];
        for (leaf, min, max, suffix, prefix) in cases {
            let counted =
                Terminal::counted(leaf.into(), &terminal(leaf), min, max, &terminal(suffix))
                    .unwrap();
            let t = if prefix.is_empty() {
                counted
            } else {
                Terminal::with_literal_prefix(
                    String::new(),
                    String::new(),
                    prefix.as_bytes(),
                    &counted,
                )
            };
            assert!(t.counter_span().is_some(), "{leaf}");
            let distances = TerminalDistances::build(&t);
            for state in 1..t.state_count() as State {
                let expected = brute_distance(&t, state);
                assert_eq!(
                    distances.distance(state),
                    expected,
                    "{prefix}({leaf}){{{min},{max}}}{suffix} from {state}"
                );
                if expected != UNREACHABLE {
                    let mut out = Vec::new();
                    distances.write_from(&t, state, &mut out);
                    assert_eq!(out.len() as u64, expected, "{leaf} from {state}");
                    let end = out.iter().fold(state, |q, &b| t.next(q, b));
                    assert!(t.is_match(end), "{leaf} from {state}: {out:?}");
                }
            }
        }
    }
}
