//! A naive reference recognizer over the grammar IR, for differential tests.
//!
//! It shares no code with stencil's automaton or matcher. It reads the IR
//! ([`Grammar`]) directly and decides membership by brute force over one input
//! string `s` of length `n` (at most [`MAX_LEN`] bytes, so that a set of positions
//! `0..=n` fits in a `u64`):
//!
//! * every sub-expression `e` of every rule is a node; for every node and every
//!   start position `i` it computes
//!   - `E(e, i)`: the end positions `j` with `s[i..j]` in `L(e)`, and
//!   - `P(e, i)`: the positions `k` such that `s[i..k]` is a prefix of some string
//!     of `L(e)` ("viable up to `k`");
//! * positions are processed from `n` down to `0`. A node at `i` only needs nodes
//!   at positions `>= i`; those at `> i` are final, and at `i` itself (nullable
//!   items, left recursion) the equations are iterated to their least fixpoint.
//!   Every equation is monotone, so the least fixpoint is the set of facts that
//!   have a finite derivation, which is exactly the language semantics;
//! * a regular leaf (`Hir`) is compiled to a Thompson NFA by `regex-automata` and
//!   simulated here as a set of NFA states (no DFA, no lexer); an NFA state is
//!   "live" when the match state is reachable from it, computed here as well.
//!
//! Then `s[..k]` is a sentence iff `k` is in `E(root, 0)`, and a viable prefix iff
//! `k` is in `P(root, 0)`: one analysis answers every prefix of `s`.
//!
//! The equations, with `prod(e)` meaning `L(e)` is not empty:
//!
//! * `Empty`: `E = P = {i}`;
//! * leaf: simulate the NFA from `i`; `j` is in `E` when the state set holds the
//!   match state, in `P` when it holds a live state;
//! * `Seq(e1..em)`: `E` is the usual composition; `P` is the union, over `t`, of
//!   `P(et, p)` for every `p` reachable by `e1..e(t-1)`, provided `e(t+1)..em` are
//!   all productive (they must still derive *some* string after the input ends);
//! * `Alt`: unions;
//! * `Repeat{x, min, max}`: with `R0 = {i}` and `R(t+1) = E(x, R(t))`,
//!   `E` is the union of `R(t)` for `t` in `[min, max]`, and `P` is `E` plus
//!   `P(x, p)` for every `p` in some `R(t)` with `t + 1 <= max` (the input ends
//!   inside iteration `t + 1`; any further iterations are possible since `x` is then
//!   productive). The sequence `R(t)` of position sets is eventually periodic (it
//!   is a function of its previous value), so `x{0,2000}` costs as much as `x*`.
//!
//! * `Permutation`: a breadth-first walk over `(members used, items written)`
//!   states, each with the set of positions where the parse can stand in it; an
//!   item is allowed only where the rest can still be completed (unused productive
//!   members, room under `max` for the missing required ones), like a `Seq` whose
//!   suffix must stay productive. Test grammars keep the members few (a bit mask).
//!
//! The module also has a random sampler of derivations ([`Reference::sample`]) used
//! to generate positive test strings.

use regex_automata::nfa::thompson::{self, State, WhichCaptures, NFA};
use regex_automata::util::primitives::StateID;
use stencil::grammar::{Expr, Grammar, Hir};

/// Longest input the reference accepts.
pub const MAX_LEN: usize = 62;

const INF: u32 = u32::MAX;

/// A tiny deterministic PRNG (xorshift64*).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next_u64() % den < num
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// A state of a leaf's NFA, normalized.
#[derive(Debug, Clone)]
enum NState {
    /// Byte transitions: inclusive ranges.
    Bytes(Vec<(u8, u8, usize)>),
    /// Unconditional (epsilon) transitions.
    Eps(Vec<usize>),
    Match,
    Fail,
}

/// A regular leaf: its NFA, simulated as a set of states; minus the `excluded`
/// strings for an [`Expr::Excluding`].
#[derive(Debug, Clone)]
struct Leaf {
    hir: Hir,
    excluded: Vec<Vec<u8>>,
    states: Vec<NState>,
    start: usize,
    /// Fewest bytes from each state to the match state (`INF`: unreachable).
    dist: Vec<u32>,
    /// The bytes partitioned into intervals this NFA never tells apart.
    intervals: Vec<(u8, u8)>,
    /// The epsilon closure of the start state.
    start_set: Vec<usize>,
    /// Per first byte: whether it leads to a live state set.
    first_live: Vec<bool>,
}

impl Leaf {
    fn new(hir: &Hir) -> Leaf {
        let nfa: NFA = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .utf8(false)
                    .which_captures(WhichCaptures::None),
            )
            .build_from_hir(hir)
            .unwrap_or_else(|e| panic!("reference: cannot compile leaf {hir}: {e}"));
        let id = |s: StateID| s.as_usize();
        let states: Vec<NState> = nfa
            .states()
            .iter()
            .map(|state| match state {
                State::ByteRange { trans } => {
                    NState::Bytes(vec![(trans.start, trans.end, id(trans.next))])
                }
                State::Sparse(sparse) => NState::Bytes(
                    sparse
                        .transitions
                        .iter()
                        .map(|t| (t.start, t.end, id(t.next)))
                        .collect(),
                ),
                State::Dense(dense) => {
                    let mut ranges: Vec<(u8, u8, usize)> = Vec::new();
                    for b in 0..=255u8 {
                        let next = dense.transitions[b as usize];
                        if next == StateID::ZERO {
                            continue;
                        }
                        match ranges.last_mut() {
                            Some((_, hi, n)) if *n == id(next) && *hi as u16 + 1 == b as u16 => {
                                *hi = b
                            }
                            _ => ranges.push((b, b, id(next))),
                        }
                    }
                    NState::Bytes(ranges)
                }
                State::Union { alternates } => {
                    NState::Eps(alternates.iter().map(|&s| id(s)).collect())
                }
                State::BinaryUnion { alt1, alt2 } => NState::Eps(vec![id(*alt1), id(*alt2)]),
                State::Capture { next, .. } => NState::Eps(vec![id(*next)]),
                State::Look { look, .. } => {
                    panic!("reference: leaf {hir} has a look-around assertion {look:?}")
                }
                State::Fail => NState::Fail,
                State::Match { .. } => NState::Match,
            })
            .collect();
        // Distances to the match state, by relaxation to a fixpoint.
        let mut dist = vec![INF; states.len()];
        loop {
            let mut changed = false;
            for (q, state) in states.iter().enumerate() {
                let d = match state {
                    NState::Match => 0,
                    NState::Fail => INF,
                    NState::Eps(next) => next.iter().map(|&t| dist[t]).min().unwrap_or(INF),
                    NState::Bytes(ranges) => ranges
                        .iter()
                        .map(|&(_, _, t)| dist[t].saturating_add(1))
                        .min()
                        .unwrap_or(INF),
                };
                if d < dist[q] {
                    dist[q] = d;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let intervals = split_bytes(states.iter().flat_map(|state| match state {
            NState::Bytes(ranges) => ranges.iter().map(|&(lo, hi, _)| (lo, hi)).collect(),
            _ => Vec::new(),
        }));
        let mut leaf = Leaf {
            hir: hir.clone(),
            excluded: Vec::new(),
            start: id(nfa.start_anchored()),
            states,
            dist,
            intervals,
            start_set: Vec::new(),
            first_live: Vec::new(),
        };
        let mut start_set = Vec::new();
        leaf.close(
            leaf.start,
            &mut start_set,
            &mut vec![false; leaf.states.len()],
        );
        leaf.first_live = (0..=255u8)
            .map(|b| leaf.set_dist(&leaf.step(&start_set, b)) != INF)
            .collect();
        leaf.start_set = start_set;
        leaf
    }

    /// Adds `q` and everything reachable from it by epsilon transitions.
    fn close(&self, q: usize, set: &mut Vec<usize>, seen: &mut [bool]) {
        let mut stack = vec![q];
        while let Some(q) = stack.pop() {
            if std::mem::replace(&mut seen[q], true) {
                continue;
            }
            set.push(q);
            if let NState::Eps(next) = &self.states[q] {
                stack.extend(next.iter().copied());
            }
        }
    }

    fn start_set(&self) -> Vec<usize> {
        self.start_set.clone()
    }

    fn step(&self, set: &[usize], byte: u8) -> Vec<usize> {
        let mut out = Vec::new();
        let mut seen = vec![false; self.states.len()];
        for &q in set {
            if let NState::Bytes(ranges) = &self.states[q] {
                for &(lo, hi, next) in ranges {
                    if lo <= byte && byte <= hi {
                        self.close(next, &mut out, &mut seen);
                    }
                }
            }
        }
        out
    }

    fn is_match(&self, set: &[usize]) -> bool {
        set.iter().any(|&q| matches!(self.states[q], NState::Match))
    }

    fn set_dist(&self, set: &[usize]) -> u32 {
        set.iter().map(|&q| self.dist[q]).min().unwrap_or(INF)
    }

    /// `(E, P)` of this leaf at `i` over `s`.
    fn scan(&self, s: &[u8], i: usize) -> (u64, u64) {
        if self.excluded.is_empty() && (i == s.len() || !self.first_live[s[i] as usize]) {
            // The common case, without simulating: at most the empty string.
            let live = self.set_dist(&self.start_set) != INF;
            let matches = self.is_match(&self.start_set);
            return (u64::from(matches) << i, u64::from(live) << i);
        }
        // A prefix is viable when some completion is no excluded string; once none
        // is, no longer prefix has one either.
        let (mut ends, mut viable) = (0u64, 0u64);
        let mut set = self.start_set();
        let mut j = i;
        while self.completes_outside(&set, &s[i..j]) {
            viable |= 1 << j;
            if self.is_match(&set) && !self.excluded.iter().any(|x| x[..] == s[i..j]) {
                ends |= 1 << j;
            }
            if j == s.len() {
                break;
            }
            set = self.step(&set, s[j]);
            j += 1;
        }
        (ends, viable)
    }

    /// Whether the leaf, having read `read` into `set`, has a completion that is
    /// not an excluded string (without exclusions: whether `set` is live): a match
    /// off every excluded string, or a step that leaves them all while still live,
    /// or the same one step further down.
    fn completes_outside(&self, set: &[usize], read: &[u8]) -> bool {
        if self.set_dist(set) == INF {
            return false;
        }
        let rests: Vec<&[u8]> = self
            .excluded
            .iter()
            .filter_map(|x| x.strip_prefix(read))
            .collect();
        if rests.is_empty() || (self.is_match(set) && !rests.iter().any(|r| r.is_empty())) {
            return true;
        }
        (0..=255u8).any(|b| {
            let next = self.step(set, b);
            if self.set_dist(&next) == INF {
                return false;
            }
            if !rests.iter().any(|r| r.first() == Some(&b)) {
                return true;
            }
            self.completes_outside(&next, &[read, &[b]].concat())
        })
    }
}

#[derive(Debug, Clone)]
enum Node {
    Empty,
    Leaf(usize),
    Ref(usize),
    /// Items, and for each `t` whether items `t..` are all productive.
    Seq(Vec<usize>, Vec<bool>),
    Alt(Vec<usize>),
    Repeat {
        x: usize,
        min: u32,
        max: Option<u32>,
    },
    Perm(Perm),
}

/// A permutation: `items` are the members, then the extra if there is one.
#[derive(Debug, Clone)]
struct Perm {
    items: Vec<usize>,
    required: Vec<bool>,
    has_extra: bool,
    sep: usize,
    min: u32,
    max: Option<u32>,
}

impl Perm {
    fn members(&self) -> usize {
        self.required.len()
    }

    fn extra_productive(&self, prod: &[bool]) -> bool {
        self.has_extra && prod[self.items[self.members()]]
    }

    fn productive(&self, prod: &[bool]) -> bool {
        if !prod[self.sep] {
            // At most one item: nothing, or one first item.
            return self.can_end(0, 0)
                || (0..self.items.len()).any(|k| self.step(0, 0, k, prod).is_some());
        }
        let n = self.members();
        let required = self.required.iter().filter(|&&r| r).count() as u32;
        let available = (0..n).filter(|&k| prod[self.items[k]]).count() as u32;
        (0..n).all(|k| !self.required[k] || prod[self.items[k]])
            && prod[self.sep]
            && (self.extra_productive(prod) || available >= self.min)
            && self.max.is_none_or(|m| required <= m && self.min <= m)
    }

    /// Whether, with members `mask` used and `count` items written, the rest can
    /// still be completed.
    fn can_finish(&self, mask: u64, count: u32, prod: &[bool]) -> bool {
        if !prod[self.sep] && count > 0 {
            return self.can_end(mask, count); // nothing can follow an item
        }
        let n = self.members();
        let unused = |k: usize| mask & (1 << k) == 0;
        let missing = (0..n).filter(|&k| self.required[k] && unused(k)).count() as u32;
        let available = (0..n).filter(|&k| prod[self.items[k]] && unused(k)).count() as u32;
        self.max.is_none_or(|m| count + missing <= m)
            && (self.extra_productive(prod) || count + available >= self.min)
    }

    fn can_end(&self, mask: u64, count: u32) -> bool {
        count >= self.min && (0..self.members()).all(|k| !self.required[k] || mask & (1 << k) != 0)
    }

    /// The state after item `k`, if it is allowed in `(mask, count)`.
    fn step(&self, mask: u64, count: u32, k: usize, prod: &[bool]) -> Option<(u64, u32)> {
        if !prod[self.items[k]] || self.max.is_some_and(|m| count >= m) {
            return None;
        }
        let mask = if k < self.members() {
            if mask & (1 << k) != 0 {
                return None;
            }
            mask | 1 << k
        } else {
            mask
        };
        // Counts from `cap` on behave alike.
        let cap = self.max.unwrap_or(self.min.max(1));
        let count = (count + 1).min(cap);
        self.can_finish(mask, count, prod).then_some((mask, count))
    }
}

/// The reference recognizer for one grammar.
#[derive(Debug, Clone)]
pub struct Reference {
    nodes: Vec<Node>,
    /// The node of each rule's expression.
    rule_node: Vec<usize>,
    /// The nodes of each rule's expression: `first..=rule_node[r]`.
    rule_first: Vec<usize>,
    /// Evaluation order: rules callee-first, each rule's nodes children-first.
    order: Vec<usize>,
    /// Per node: it is the expression of a rule that some node evaluated before it
    /// refers to (recursion), so a change in its value needs another pass.
    recheck: Vec<bool>,
    root: usize,
    leaves: Vec<Leaf>,
    productive: Vec<bool>,
    /// Minimal derivation height per node (for the sampler; `INF`: none).
    rank: Vec<u32>,
    /// Byte intervals no leaf tells apart: one representative analysis each.
    classes: Vec<(u8, u8)>,
}

/// The verdicts for every prefix of one string.
#[derive(Debug, Clone, Copy)]
pub struct Prefixes {
    sentences: u64,
    viable: u64,
}

impl Prefixes {
    /// `s[..k]` is a sentence of the grammar.
    pub fn sentence(&self, k: usize) -> bool {
        self.sentences >> k & 1 == 1
    }

    /// `s[..k]` is a prefix of some sentence.
    pub fn viable(&self, k: usize) -> bool {
        self.viable >> k & 1 == 1
    }
}

/// The coarsest partition of all bytes into intervals such that each of `ranges`
/// is a union of intervals.
fn split_bytes(ranges: impl Iterator<Item = (u8, u8)>) -> Vec<(u8, u8)> {
    let mut cuts = [false; 257];
    cuts[0] = true;
    cuts[256] = true;
    for (lo, hi) in ranges {
        cuts[lo as usize] = true;
        cuts[hi as usize + 1] = true;
    }
    let starts: Vec<usize> = (0..=256).filter(|&b| cuts[b]).collect();
    starts
        .windows(2)
        .map(|w| (w[0] as u8, (w[1] - 1) as u8))
        .collect()
}

fn bits(mut set: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if set == 0 {
            None
        } else {
            let b = set.trailing_zeros() as usize;
            set &= set - 1;
            Some(b)
        }
    })
}

impl Reference {
    pub fn new(grammar: &Grammar) -> Reference {
        let mut r = Reference {
            nodes: Vec::new(),
            rule_node: Vec::new(),
            rule_first: Vec::new(),
            order: Vec::new(),
            recheck: Vec::new(),
            root: 0,
            leaves: Vec::new(),
            productive: Vec::new(),
            rank: Vec::new(),
            classes: Vec::new(),
        };
        for rule in &grammar.rules {
            r.rule_first.push(r.nodes.len());
            let id = r.add(&rule.expr);
            r.rule_node.push(id);
        }
        r.root = r.rule_node[grammar.root.0 as usize];
        r.compute_order(grammar.root.0 as usize);
        r.compute_productive();
        r.compute_rank();
        r.compute_classes();
        r
    }

    /// The index of the leaf for `hir` minus `excluded`, added if new.
    fn leaf(&mut self, hir: &Hir, excluded: &[Vec<u8>]) -> usize {
        match self
            .leaves
            .iter()
            .position(|l| l.hir == *hir && l.excluded == excluded)
        {
            Some(l) => l,
            None => {
                let mut leaf = Leaf::new(hir);
                leaf.excluded = excluded.to_vec();
                self.leaves.push(leaf);
                self.leaves.len() - 1
            }
        }
    }

    /// Converts `expr`; children get smaller ids than their parent.
    fn add(&mut self, expr: &Expr) -> usize {
        let node = match expr {
            Expr::Empty => Node::Empty,
            Expr::Regex(hir) => Node::Leaf(self.leaf(hir, &[])),
            Expr::Excluding(e) => Node::Leaf(self.leaf(&e.regex, &e.excluded)),
            // A whole token reads no bytes: over byte strings it matches none.
            Expr::Tokens(_) => Node::Leaf(self.leaf(&Hir::fail(), &[])),
            Expr::Text(_) => panic!("reference: free text (Expr::Text) is not modelled"),
            Expr::Intersection(_) => panic!("reference: intersections are not modelled"),
            // Over bytes, with no tokens, a budget spends nothing: the body.
            Expr::Budget(budget) => return self.add(&budget.body),
            Expr::Ref(rule) => Node::Ref(rule.0 as usize),
            Expr::Seq(items) => Node::Seq(items.iter().map(|e| self.add(e)).collect(), Vec::new()),
            Expr::Alt(items) => Node::Alt(items.iter().map(|e| self.add(e)).collect()),
            Expr::Repeat { expr, min, max } => Node::Repeat {
                x: self.add(expr),
                min: *min,
                max: *max,
            },
            Expr::Permutation(p) => {
                assert!(
                    p.members.len() < 16,
                    "reference: too many permutation members"
                );
                let items = p
                    .members
                    .iter()
                    .chain(p.extra.as_ref())
                    .map(|e| self.add(e))
                    .collect();
                Node::Perm(Perm {
                    items,
                    required: p.required.clone(),
                    has_extra: p.extra.is_some(),
                    sep: self.add(&p.separator),
                    min: p.min,
                    max: p.max,
                })
            }
        };
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// Orders rules callee-first (depth-first from the root), so that a pass at
    /// one position mostly reads values already computed in the same pass.
    fn compute_order(&mut self, root: usize) {
        let rules = self.rule_node.len();
        let mut placed = vec![false; rules];
        let mut rule_order = Vec::new();
        let mut starts: Vec<usize> = vec![root];
        starts.extend(0..rules);
        for start in starts {
            // Iterative DFS: (rule, whether its callees were pushed).
            let mut stack = vec![(start, false)];
            let mut visiting = vec![false; rules];
            while let Some((rule, expanded)) = stack.pop() {
                if placed[rule] {
                    continue;
                }
                if expanded {
                    placed[rule] = true;
                    rule_order.push(rule);
                    continue;
                }
                if std::mem::replace(&mut visiting[rule], true) {
                    continue;
                }
                stack.push((rule, true));
                for id in (self.rule_first[rule]..=self.rule_node[rule]).rev() {
                    if let Node::Ref(callee) = self.nodes[id] {
                        if !placed[callee] && !visiting[callee] {
                            stack.push((callee, false));
                        }
                    }
                }
            }
        }
        let mut position = vec![0; self.nodes.len()];
        for &rule in &rule_order {
            self.order
                .extend(self.rule_first[rule]..=self.rule_node[rule]);
        }
        for (at, &id) in self.order.iter().enumerate() {
            position[id] = at;
        }
        let mut recheck = vec![false; self.nodes.len()];
        for (id, node) in self.nodes.iter().enumerate() {
            if let Node::Ref(callee) = node {
                let target = self.rule_node[*callee];
                if position[target] > position[id] {
                    recheck[target] = true;
                }
            }
        }
        self.recheck = recheck;
    }

    fn compute_productive(&mut self) {
        let mut prod = vec![false; self.nodes.len()];
        loop {
            let mut changed = false;
            for id in 0..self.nodes.len() {
                let p = match &self.nodes[id] {
                    Node::Empty => true,
                    Node::Leaf(l) => {
                        let leaf = &self.leaves[*l];
                        leaf.dist[leaf.start] != INF
                    }
                    Node::Ref(rule) => prod[self.rule_node[*rule]],
                    Node::Seq(items, _) => items.iter().all(|&c| prod[c]),
                    Node::Alt(items) => items.iter().any(|&c| prod[c]),
                    Node::Repeat { x, min, .. } => *min == 0 || prod[*x],
                    Node::Perm(perm) => perm.productive(&prod),
                };
                if p && !prod[id] {
                    prod[id] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        for node in &mut self.nodes {
            if let Node::Seq(items, suffix) = node {
                *suffix = vec![true; items.len() + 1];
                for t in (0..items.len()).rev() {
                    suffix[t] = suffix[t + 1] && prod[items[t]];
                }
            }
        }
        self.productive = prod;
    }

    fn compute_rank(&mut self) {
        let mut rank = vec![INF; self.nodes.len()];
        loop {
            let mut changed = false;
            for id in 0..self.nodes.len() {
                let r = match &self.nodes[id] {
                    Node::Empty => 0,
                    Node::Leaf(_) => {
                        if self.productive[id] {
                            0
                        } else {
                            INF
                        }
                    }
                    Node::Ref(rule) => rank[self.rule_node[*rule]].saturating_add(1),
                    Node::Seq(items, _) => items.iter().map(|&c| rank[c]).max().unwrap_or(0),
                    Node::Alt(items) => items.iter().map(|&c| rank[c]).min().unwrap_or(INF),
                    Node::Repeat { x, min, .. } => {
                        if *min == 0 {
                            0
                        } else {
                            rank[*x]
                        }
                    }
                    // An upper bound: what the shortest derivation below may use.
                    Node::Perm(perm) => {
                        if self.productive[id] {
                            perm.items
                                .iter()
                                .chain([&perm.sep])
                                .filter(|&&c| self.productive[c])
                                .map(|&c| rank[c])
                                .max()
                                .unwrap_or(0)
                        } else {
                            INF
                        }
                    }
                };
                if r < rank[id] {
                    rank[id] = r;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        self.rank = rank;
    }

    fn compute_classes(&mut self) {
        self.classes = split_bytes(
            self.leaves
                .iter()
                .flat_map(|leaf| leaf.intervals.iter().copied()),
        );
    }

    /// Whether the language is non-empty (it always is for a validated grammar).
    pub fn is_productive(&self) -> bool {
        self.productive[self.root]
    }

    /// Verdicts for every prefix `s[..k]`, `k <= s.len()`.
    pub fn prefixes(&self, s: &[u8]) -> Prefixes {
        assert!(
            s.len() <= MAX_LEN,
            "reference: input longer than {MAX_LEN} bytes"
        );
        let n = s.len();
        let width = n + 1;
        let mut e = vec![0u64; self.nodes.len() * width];
        let mut p = vec![0u64; self.nodes.len() * width];
        let mut leaf_cache: Vec<Option<(u64, u64)>> = vec![None; self.leaves.len()];
        for i in (0..=n).rev() {
            leaf_cache.iter_mut().for_each(|c| *c = None);
            // Gauss-Seidel passes until no value that was read before it changed
            // (a recursive rule's) changes any more.
            loop {
                let mut again = false;
                for &id in &self.order {
                    let (ends, viable) = match &self.nodes[id] {
                        Node::Leaf(l) => {
                            *leaf_cache[*l].get_or_insert_with(|| self.leaves[*l].scan(s, i))
                        }
                        node => self.eval(node, i, width, &e, &p),
                    };
                    let at = id * width + i;
                    if ends != e[at] || viable != p[at] {
                        // Monotone: the new facts include the old ones.
                        assert_eq!(ends & e[at], e[at], "reference: not monotone");
                        assert_eq!(viable & p[at], p[at], "reference: not monotone");
                        e[at] = ends;
                        p[at] = viable;
                        again |= self.recheck[id];
                    }
                }
                if !again {
                    break;
                }
            }
        }
        Prefixes {
            sentences: e[self.root * width],
            viable: p[self.root * width],
        }
    }

    /// One node's `(E, P)` at `i` from the current tables.
    fn eval(&self, node: &Node, i: usize, width: usize, e: &[u64], p: &[u64]) -> (u64, u64) {
        let get_e = |id: usize, at: usize| e[id * width + at];
        let get_p = |id: usize, at: usize| p[id * width + at];
        match node {
            Node::Empty => (1 << i, 1 << i),
            Node::Leaf(_) => unreachable!(),
            Node::Ref(rule) => {
                let id = self.rule_node[*rule];
                (get_e(id, i), get_p(id, i))
            }
            Node::Seq(items, suffix_productive) => {
                let mut reach = 1u64 << i;
                let mut viable = 0u64;
                for (t, &item) in items.iter().enumerate() {
                    let mut next = 0;
                    for at in bits(reach) {
                        if suffix_productive[t + 1] {
                            viable |= get_p(item, at);
                        }
                        next |= get_e(item, at);
                    }
                    reach = next;
                    if reach == 0 {
                        break;
                    }
                }
                (reach, viable | reach)
            }
            Node::Alt(items) => items
                .iter()
                .fold((0, 0), |(a, b), &c| (a | get_e(c, i), b | get_p(c, i))),
            Node::Repeat { x, min, max } => {
                let x = *x;
                let step = |set: u64| bits(set).fold(0u64, |acc, at| acc | get_e(x, at));
                let counts = Counts::new(1 << i, *max, step);
                let ends = counts.union(*min as u64, max.map(u64::from));
                let mut viable = ends;
                // The input ends inside iteration t + 1, t + 1 <= max.
                let started = match max {
                    Some(0) => 0,
                    Some(m) => counts.union(0, Some(u64::from(*m) - 1)),
                    None => counts.union(0, None),
                };
                for at in bits(started) {
                    viable |= get_p(x, at);
                }
                (ends, viable)
            }
            Node::Perm(perm) => {
                let prod = &self.productive;
                let mut reach: std::collections::BTreeMap<(u64, u32), u64> =
                    [((0, 0), 1u64 << i)].into();
                let (mut ends, mut viable) = (0u64, 0u64);
                // Monotone: iterate until no state's position set grows.
                loop {
                    let mut changed = false;
                    let states: Vec<((u64, u32), u64)> =
                        reach.iter().map(|(&k, &v)| (k, v)).collect();
                    for ((mask, count), at) in states {
                        if perm.can_end(mask, count) {
                            ends |= at;
                        }
                        for k in 0..perm.items.len() {
                            let Some(target) = perm.step(mask, count, k, prod) else {
                                continue;
                            };
                            let item = perm.items[k];
                            let mut starts = at;
                            if count > 0 {
                                starts = 0;
                                for a in bits(at) {
                                    viable |= get_p(perm.sep, a);
                                    starts |= get_e(perm.sep, a);
                                }
                            }
                            let mut after = 0;
                            for a in bits(starts) {
                                viable |= get_p(item, a);
                                after |= get_e(item, a);
                            }
                            let slot = reach.entry(target).or_insert(0);
                            if *slot | after != *slot {
                                *slot |= after;
                                changed = true;
                            }
                        }
                    }
                    if !changed {
                        break;
                    }
                }
                (ends, viable | ends)
            }
        }
    }

    /// For each byte `b`, whether `prefix + b` is a viable prefix. One analysis per
    /// byte class (bytes that every leaf NFA treats alike get the same verdict).
    pub fn allowed_next(&self, prefix: &[u8]) -> [bool; 256] {
        let mut out = [false; 256];
        let mut s = prefix.to_vec();
        s.push(0);
        for &(lo, hi) in &self.classes {
            *s.last_mut().unwrap() = lo;
            if self.prefixes(&s).viable(s.len()) {
                out[lo as usize..=hi as usize]
                    .iter_mut()
                    .for_each(|v| *v = true);
            }
        }
        out
    }

    pub fn is_sentence(&self, s: &[u8]) -> bool {
        self.prefixes(s).sentence(s.len())
    }

    pub fn is_viable_prefix(&self, s: &[u8]) -> bool {
        self.prefixes(s).viable(s.len())
    }

    /// The bytes some leaf can read somewhere.
    pub fn alphabet(&self) -> Vec<u8> {
        let mut seen = [false; 256];
        for leaf in &self.leaves {
            for state in &leaf.states {
                if let NState::Bytes(ranges) = state {
                    for &(lo, hi, _) in ranges {
                        (lo..=hi).for_each(|b| seen[b as usize] = true);
                    }
                }
            }
        }
        (0..=255u8).filter(|&b| seen[b as usize]).collect()
    }

    /// A random derivation of the grammar. Rules are expanded at random up to
    /// `max_depth` nested references or until the output reaches `soft_len`
    /// bytes; after that every choice takes a shortest-height alternative, so the
    /// derivation ends. The result may be long; callers truncate.
    pub fn sample(&self, rng: &mut Rng, max_depth: u32, soft_len: usize) -> Vec<u8> {
        let mut out = Vec::new();
        self.gen(self.root, 0, max_depth, soft_len, rng, &mut out, false);
        out
    }

    #[allow(clippy::too_many_arguments)]
    fn gen(
        &self,
        id: usize,
        depth: u32,
        max_depth: u32,
        soft_len: usize,
        rng: &mut Rng,
        out: &mut Vec<u8>,
        shortest: bool,
    ) {
        // Give up on strings far beyond anything the tests use.
        if out.len() > 4 * MAX_LEN {
            return;
        }
        let shortest = shortest || depth > max_depth || out.len() >= soft_len;
        match &self.nodes[id] {
            Node::Empty => {}
            Node::Leaf(l) => self.gen_leaf(&self.leaves[*l], rng, out, shortest),
            Node::Ref(rule) => self.gen(
                self.rule_node[*rule],
                depth + 1,
                max_depth,
                soft_len,
                rng,
                out,
                shortest,
            ),
            Node::Seq(items, _) => {
                for &item in items {
                    self.gen(item, depth, max_depth, soft_len, rng, out, shortest);
                }
            }
            Node::Alt(items) => {
                let best = self.rank[id];
                let choices: Vec<usize> = items
                    .iter()
                    .copied()
                    .filter(|&c| {
                        if shortest {
                            self.rank[c] == best
                        } else {
                            self.productive[c]
                        }
                    })
                    .collect();
                let item = *rng.pick(&choices);
                self.gen(item, depth, max_depth, soft_len, rng, out, shortest);
            }
            Node::Repeat { x, min, max } => {
                let count = if !self.productive[*x] {
                    0
                } else if shortest {
                    *min
                } else {
                    let room = match max {
                        Some(m) => (m - min).min(5),
                        None => 5,
                    };
                    min + rng.below(room as usize + 1) as u32
                };
                for _ in 0..count {
                    if out.len() > 4 * MAX_LEN {
                        break;
                    }
                    self.gen(*x, depth, max_depth, soft_len, rng, out, shortest);
                }
            }
            Node::Perm(perm) if !self.productive[perm.sep] => {
                // At most one item (or none, where allowed).
                let prod = &self.productive;
                let mut choices: Vec<Option<usize>> = (0..perm.items.len())
                    .filter(|&k| perm.step(0, 0, k, prod).is_some())
                    .map(Some)
                    .collect();
                if perm.can_end(0, 0) {
                    choices.insert(0, None);
                }
                let rank = |c: &Option<usize>| c.map_or(0, |k| self.rank[perm.items[k]]);
                let choice = if shortest {
                    *choices.iter().min_by_key(|c| rank(c)).unwrap()
                } else {
                    *rng.pick(&choices)
                };
                if let Some(k) = choice {
                    let item = perm.items[k];
                    self.gen(item, depth, max_depth, soft_len, rng, out, shortest);
                }
            }
            Node::Perm(perm) => {
                let n = perm.members();
                let prod = &self.productive;
                let extra = n;
                let mut chosen: Vec<usize> = (0..n).filter(|&k| perm.required[k]).collect();
                let mut optional: Vec<usize> = (0..n)
                    .filter(|&k| !perm.required[k] && prod[perm.items[k]])
                    .collect();
                if !shortest {
                    optional.retain(|&k| {
                        let take = rng.chance(1, 2);
                        if take {
                            chosen.push(k);
                        }
                        !take
                    });
                    if perm.extra_productive(prod) {
                        for _ in 0..rng.below(3) {
                            chosen.push(extra);
                        }
                    }
                }
                while (chosen.len() as u32) < perm.min {
                    match optional.pop() {
                        Some(k) => chosen.push(k),
                        None => chosen.push(extra),
                    }
                }
                if let Some(max) = perm.max {
                    while chosen.len() as u32 > max {
                        let drop = chosen
                            .iter()
                            .rposition(|&k| k == extra || !perm.required[k]);
                        chosen.remove(drop.expect("reference: permutation over max"));
                    }
                }
                if !shortest {
                    for j in (1..chosen.len()).rev() {
                        chosen.swap(j, rng.below(j + 1));
                    }
                }
                for (j, &k) in chosen.iter().enumerate() {
                    if j > 0 {
                        self.gen(perm.sep, depth, max_depth, soft_len, rng, out, shortest);
                    }
                    self.gen(
                        perm.items[k],
                        depth,
                        max_depth,
                        soft_len,
                        rng,
                        out,
                        shortest,
                    );
                }
            }
        }
    }

    fn gen_leaf(&self, leaf: &Leaf, rng: &mut Rng, out: &mut Vec<u8>, shortest: bool) {
        let start = out.len();
        self.gen_regex(leaf, rng, out, shortest);
        // Infinitely many strings: random draws soon leave the finite excluded set.
        while leaf.excluded.iter().any(|x| out[start..] == x[..]) {
            out.truncate(start);
            self.gen_regex(leaf, rng, out, false);
        }
    }

    fn gen_regex(&self, leaf: &Leaf, rng: &mut Rng, out: &mut Vec<u8>, shortest: bool) {
        let mut set = leaf.start_set();
        let mut len = 0;
        loop {
            let d = leaf.set_dist(&set);
            assert!(d != INF, "reference: sampler reached a dead leaf state");
            let hurry = shortest || len >= 8;
            if d == 0 && (hurry || rng.chance(1, 3)) {
                return;
            }
            // Intervals whose step stays live (or gets closer, when hurrying).
            let options: Vec<((u8, u8), Vec<usize>)> = leaf
                .intervals
                .iter()
                .filter_map(|&(lo, hi)| {
                    let next = leaf.step(&set, lo);
                    let nd = leaf.set_dist(&next);
                    let ok = if hurry { nd < d } else { nd != INF };
                    ok.then_some(((lo, hi), next))
                })
                .collect();
            if options.is_empty() {
                // Only possible at a match (d == 0) that cannot continue.
                return;
            }
            let ((lo, hi), next) = rng.pick(&options).clone();
            out.push(lo + rng.below(hi as usize - lo as usize + 1) as u8);
            set = next;
            len += 1;
        }
    }
}

/// The sequence `R(0), R(1), ...` of position sets reached after `t` iterations
/// of a repetition, computed up to where it becomes periodic (or up to `max`).
struct Counts {
    seq: Vec<u64>,
    /// `Some(j)`: `R(t) = seq[j + (t - j) % (seq.len() - j)]` for `t >= j`.
    cycle_from: Option<usize>,
}

impl Counts {
    fn new(first: u64, max: Option<u32>, step: impl Fn(u64) -> u64) -> Counts {
        let mut seq = vec![first];
        loop {
            let last = seq.len() - 1;
            if max.is_some_and(|m| last as u64 >= u64::from(m)) {
                return Counts {
                    seq,
                    cycle_from: None,
                };
            }
            let next = step(seq[last]);
            if let Some(j) = seq.iter().position(|&r| r == next) {
                return Counts {
                    seq,
                    cycle_from: Some(j),
                };
            }
            seq.push(next);
        }
    }

    fn at(&self, t: u64) -> u64 {
        if (t as usize) < self.seq.len() {
            return self.seq[t as usize];
        }
        let j = self.cycle_from.expect("count beyond max") as u64;
        let period = self.seq.len() as u64 - j;
        self.seq[(j + (t - j) % period) as usize]
    }

    /// Union of `R(t)` for `lo <= t <= hi` (`None`: unbounded).
    fn union(&self, lo: u64, hi: Option<u64>) -> u64 {
        // Without a cycle the sequence was computed up to `max`, which bounds `hi`.
        // With one, `p` consecutive values from `max(lo, j)` on cover every value
        // the periodic part takes.
        let last = match self.cycle_from {
            None => self.seq.len() as u64 - 1,
            Some(j) => lo.max(j as u64) + (self.seq.len() - j) as u64 - 1,
        };
        let hi = hi.map_or(last, |h| h.min(last));
        (lo..=hi).fold(0, |acc, t| acc | self.at(t))
    }
}
