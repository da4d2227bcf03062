//! A counted repetition intersected with other automata, its count still
//! computed: a JSON string's `pattern` or `format` under a `maxLength`, a
//! structural tag's text of at most `max_chars` characters holding none of its
//! excludes.
//!
//! The plain product ([`Terminal::intersection`]) multiplies the operands'
//! states, and a length bound's states are its count: an email format (445
//! states) under `maxLength: 3584` is millions of states, refused. Here the
//! counter stays arithmetic, as in [`Terminal::counted`], and only its
//! *positions* multiply: a position is a pair (the leaf's state, the other
//! operands' states), those states carried from one iteration into the next.
//!
//! What the counter's layout no longer tells is whether a state can still
//! match: the other operands may need more iterations than the count has left,
//! or a number of them the count cannot hit (`^(ab)*$` under `maxLength: 5`
//! dies at `ababa`, five characters and no match in reach). [`TickSets`] answer
//! it: per position, after how many more iterations a match is possible. Those
//! sets, read as layers (layer `t`: the positions that can match after exactly
//! `t` more iterations), follow each other by a fixed rule, so the sequence
//! repeats after a few layers and is stored up to the repeat.

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use super::classes::{bytes_by_class, classes_by, only_bytes_of};
use super::counted::{Counter, MAX_COUNTED_STATES, NO_TARGET};
use super::fingerprint::fingerprint_of;
use super::intersection::TupleIndex;
use super::{LexerLimits, State, Terminal, TerminalError, DEAD};

/// No match is reachable (in [`TickSets`]' gaps, and for missing edges).
const NONE: u32 = u32::MAX;

/// Most (layer, position) gaps a [`TickSets`] may store: the layers repeat
/// early for the languages met (character classes, formats, excluded strings);
/// one that does not is refused rather than stored per count.
const MAX_GAPS: usize = 1 << 22;

/// Which states of a product's counter can still match. Layer `t` holds the
/// positions from which a match is reachable after exactly `t` more
/// iterations; state `(count, i)` lives when some layer `t` holding `i` has
/// `count + t` between `min` and `max`. Stored as gaps: per layer `t` and
/// position `i`, how many layers on from `t` the next one holding `i` is.
#[derive(Debug)]
pub(crate) struct TickSets {
    positions: u32,
    /// Layers stored: `0..layers`.
    layers: u32,
    /// Layer `layers` is layer `repeat_from` again (when `period` is not 0):
    /// layer `t` past the stored ones is `repeat_from + (t - repeat_from) %
    /// period`.
    repeat_from: u32,
    period: u32,
    gaps: Box<[u32]>,
    /// The most iterations any position needs before a match (see
    /// [`Counter::slack`]).
    pub(super) slack: u32,
}

impl TickSets {
    /// Whether the counter state `state` can still reach a match.
    #[inline]
    pub(super) fn live(&self, k: &Counter, state: State) -> bool {
        let (count, i) = k.position(state);
        self.live_at(count, i, k.min, k.max)
    }

    /// Whether position `i` after `count` iterations, of a counter from `min`
    /// to `max`, can still reach a match.
    #[inline]
    fn live_at(&self, count: u32, i: u32, min: u32, max: u32) -> bool {
        let (lo, hi) = (min.saturating_sub(count), max - count);
        let layer = if lo < self.layers {
            lo
        } else if self.period > 0 {
            self.repeat_from + (lo - self.repeat_from) % self.period
        } else {
            return false;
        };
        let gap = self.gaps[(layer * self.positions + i) as usize];
        gap != NONE && u64::from(lo) + u64::from(gap) <= u64::from(hi)
    }

    pub(super) fn memory_usage(&self) -> usize {
        std::mem::size_of_val(&self.gaps[..])
    }

    /// The layers of positions `0..positions`: `accepting` those that match (or
    /// leave the counter towards a match) with no more iterations, `steps` the
    /// edges inside an iteration, `ticks` the edges that end one (both as
    /// `(from, to)`); layers up to `max`.
    fn build(
        positions: usize,
        accepting: &[bool],
        steps: &[(u32, u32)],
        ticks: &[(u32, u32)],
        max: u32,
    ) -> Option<TickSets> {
        let reverse = |edges: &[(u32, u32)]| {
            let mut into: Vec<Vec<u32>> = vec![Vec::new(); positions];
            for &(from, to) in edges {
                into[to as usize].push(from);
            }
            into
        };
        let (step_into, tick_into) = (reverse(steps), reverse(ticks));
        // A layer and every position that reaches it inside the iteration.
        let close = |mut layer: Vec<bool>| {
            let mut stack: Vec<u32> = (0..positions as u32)
                .filter(|&i| layer[i as usize])
                .collect();
            while let Some(i) = stack.pop() {
                for &from in &step_into[i as usize] {
                    if !std::mem::replace(&mut layer[from as usize], true) {
                        stack.push(from);
                    }
                }
            }
            layer
        };
        let mut layers: Vec<Vec<bool>> = vec![close(accepting.to_vec())];
        let mut seen: HashMap<Vec<bool>, u32> = HashMap::default();
        seen.insert(layers[0].clone(), 0);
        let (mut repeat_from, mut period) = (0, 0);
        while (layers.len() as u64) <= u64::from(max) {
            let last = layers.last().expect("layer 0");
            let mut seeds = vec![false; positions];
            for (to, froms) in tick_into.iter().enumerate() {
                if last[to] {
                    for &from in froms {
                        seeds[from as usize] = true;
                    }
                }
            }
            let layer = close(seeds);
            if let Some(&at) = seen.get(&layer) {
                repeat_from = at;
                period = layers.len() as u32 - at;
                break;
            }
            if (layers.len() + 1) * positions > MAX_GAPS {
                return None;
            }
            seen.insert(layer.clone(), layers.len() as u32);
            layers.push(layer);
        }
        // Gaps, backwards from the last layer (after which comes `repeat_from`
        // again, or nothing); twice over a repeating stretch, so that its first
        // layers see across the wrap.
        let n = layers.len();
        let mut gaps = vec![NONE; n * positions];
        let mut after = vec![NONE; positions];
        let mut fill = |t: usize, after: &mut Vec<u32>| {
            for (i, after) in after.iter_mut().enumerate() {
                *after = match *after {
                    _ if layers[t][i] => 0,
                    NONE => NONE,
                    gap => gap + 1,
                };
                gaps[t * positions + i] = *after;
            }
        };
        if period > 0 {
            for t in (repeat_from as usize..n).rev() {
                fill(t, &mut after);
            }
        }
        for t in (0..n).rev() {
            fill(t, &mut after);
        }
        let slack = gaps[..positions]
            .iter()
            .filter(|&&g| g != NONE)
            .max()
            .copied()
            .unwrap_or(0);
        Some(TickSets {
            positions: positions as u32,
            layers: n as u32,
            repeat_from,
            period,
            gaps: gaps.into(),
            slack,
        })
    }

    /// Layer 0's gap of position `i`: `NONE` when no match is ever reachable.
    fn first_gap(&self, i: usize) -> u32 {
        self.gaps[i]
    }
}

impl Terminal {
    /// The strings `counted` (a [`Terminal::counted`] automaton, possibly behind
    /// a literal) matches that all of `parts` match and none of `negated`, with
    /// the count still computed: the states are (count, position) where a
    /// position pairs the leaf's state with the other operands' (see the module
    /// doc), then stored states for `counted`'s literal prefix and suffix paired
    /// with theirs. Its size is the positions times the count's bits, never the
    /// product of the count with the operands.
    pub fn counted_product(
        label: String,
        counted: &Terminal,
        parts: &[Arc<Terminal>],
        negated: &[Arc<Terminal>],
        limits: &LexerLimits,
    ) -> Result<Terminal, TerminalError> {
        let pattern = std::iter::once(format!("({})", counted.pattern))
            .chain(parts.iter().map(|t| format!("({})", t.pattern)))
            .chain(negated.iter().map(|t| format!("~({})", t.pattern)))
            .collect::<Vec<_>>()
            .join(" & ");
        // What a size error names (the operands' full patterns run to pages).
        let too_large = || TerminalError::TooLarge {
            pattern: format!(
                "a count to {} intersected with {} automata of {} states",
                counted.counter.as_ref().map_or(0, |k| k.max),
                parts.len() + negated.len(),
                (parts.iter().chain(negated))
                    .map(|t| t.matching.len().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let not_countable = |reason| TerminalError::NotCountable {
            pattern: pattern.clone(),
            reason,
        };
        let Some(k) = counted.counter.as_ref().filter(|k| !k.is_carried()) else {
            return Err(not_countable(
                "no plain counter to carry the operands through",
            ));
        };
        let positive = parts.len();
        let operands: Vec<&Terminal> = parts.iter().chain(negated).map(|t| &**t).collect();
        let width = operands.len() + 1;
        let (classes, representatives) = classes_by(|b| {
            std::iter::once(counted.classes[b as usize])
                .chain(operands.iter().map(|t| t.classes[b as usize]))
                .collect::<Vec<u8>>()
        });
        let stride = representatives.len();
        let counted_class: Vec<usize> = representatives
            .iter()
            .map(|&b| counted.classes[b as usize] as usize)
            .collect();
        let next_count = 1u32 << k.shift;

        // Nodes: `[c, operand states...]`, `c` a stored state of `counted` or,
        // for a position inside the counter, `k.first + i` (its count left out:
        // the counter's rows are the same at every count).
        let mut index = TupleIndex::new(width);
        let mut tuples: Vec<State> = std::iter::once(counted.start)
            .chain(operands.iter().map(|t| t.start))
            .collect();
        if k.contains(counted.start) && k.position(counted.start).0 != 0 {
            return Err(not_countable("the counter starts past its first count"));
        }
        index.insert(&tuples, 0);
        let mut edges: Vec<u32> = Vec::new();
        let mut ticked: Vec<bool> = Vec::new();
        let mut current = vec![DEAD; width];
        let mut reached = vec![DEAD; width];
        let mut node = 0;
        while node < tuples.len() / width {
            current.copy_from_slice(&tuples[node * width..(node + 1) * width]);
            node += 1;
            for (c, &b) in representatives.iter().enumerate() {
                let mut alive = true;
                for (x, (t, &q)) in operands.iter().zip(&current[1..]).enumerate() {
                    let r = if q == DEAD { DEAD } else { t.next(q, b) };
                    if r == DEAD && x < positive {
                        alive = false;
                        break;
                    }
                    reached[x + 1] = r;
                }
                let (target, tick) = match current[0] {
                    _ if !alive => (DEAD, false),
                    q if k.contains(q) => {
                        let i = q - k.first;
                        let template = k.template[i as usize * counted.stride + counted_class[c]];
                        if template != NO_TARGET {
                            (
                                k.first + (template & (next_count - 1)),
                                template >= next_count,
                            )
                        } else if i < k.between {
                            (
                                k.entry[i as usize * counted.stride + counted_class[c]],
                                false,
                            )
                        } else {
                            (DEAD, false)
                        }
                    }
                    q => {
                        let r = counted.next(q, b);
                        if k.contains(r) && k.position(r).0 != 0 {
                            return Err(not_countable(
                                "a stored state enters the counter past its first count",
                            ));
                        }
                        (r, false)
                    }
                };
                if target == DEAD {
                    edges.push(NONE);
                    ticked.push(false);
                    continue;
                }
                reached[0] = target;
                let id = match index.get(&reached) {
                    Some(id) => id,
                    None => {
                        let id = (tuples.len() / width) as u32;
                        index.insert(&reached, id);
                        tuples.extend_from_slice(&reached);
                        id
                    }
                };
                edges.push(id);
                ticked.push(tick);
            }
            if tuples.len() / width * stride * std::mem::size_of::<State>() > limits.dfa_bytes {
                return Err(too_large());
            }
        }
        let nodes = tuples.len() / width;
        let tuple = |node: usize| &tuples[node * width..(node + 1) * width];
        let is_pair = |node: usize| k.contains(tuple(node)[0]);
        let operands_match = |node: usize| {
            (operands.iter().zip(&tuple(node)[1..]).enumerate())
                .all(|(x, (t, &q))| (q != DEAD && t.is_match(q)) == (x < positive))
        };
        let (edges, ticked) = (&edges, &ticked);
        let targets = |node: usize| {
            (0..stride).filter_map(move |c| {
                let to = edges[node * stride + c];
                (to != NONE).then_some((c, to as usize, ticked[node * stride + c]))
            })
        };

        // Stored states after the counter (its suffix) that reach a match
        // without it; then the counter's positions, by their layers.
        let mut into: Vec<Vec<u32>> = vec![Vec::new(); nodes];
        for from in 0..nodes {
            for (_, to, _) in targets(from) {
                into[to].push(from as u32);
            }
        }
        let mut viable = vec![false; nodes];
        let mut stack: Vec<u32> = (0..nodes)
            .filter(|&q| !is_pair(q) && counted.is_match(tuple(q)[0]) && operands_match(q))
            .map(|q| q as u32)
            .collect();
        for &q in &stack {
            viable[q as usize] = true;
        }
        let spread = |stack: &mut Vec<u32>, viable: &mut Vec<bool>| {
            while let Some(q) = stack.pop() {
                for &from in &into[q as usize] {
                    if !is_pair(from as usize)
                        && !std::mem::replace(&mut viable[from as usize], true)
                    {
                        stack.push(from);
                    }
                }
            }
        };
        spread(&mut stack, &mut viable);

        let pairs: Vec<usize> = (0..nodes).filter(|&q| is_pair(q)).collect();
        let mut pair_index = vec![NONE; nodes];
        for (p, &q) in pairs.iter().enumerate() {
            pair_index[q] = p as u32;
        }
        let between_of = |q: usize| tuple(q)[0] - k.first < k.between;
        let accepting_at = |q: usize| {
            let i = (tuple(q)[0] - k.first) as usize;
            between_of(q) && k.accepting[i] && operands_match(q)
        };
        let mut accepting = vec![false; pairs.len()];
        let (mut steps, mut ticks) = (Vec::new(), Vec::new());
        for (p, &q) in pairs.iter().enumerate() {
            accepting[p] = accepting_at(q);
            for (_, to, tick) in targets(q) {
                match pair_index[to] {
                    NONE => accepting[p] |= viable[to],
                    t if tick => ticks.push((p as u32, t)),
                    t => steps.push((p as u32, t)),
                }
            }
        }
        let layers = TickSets::build(pairs.len(), &accepting, &steps, &ticks, k.max)
            .ok_or_else(too_large)?;

        // Positions: the pairs that can ever match, those between iterations first.
        let mut kept: Vec<usize> = (0..pairs.len())
            .filter(|&p| layers.first_gap(p) != NONE)
            .collect();
        kept.sort_by_key(|&p| !between_of(pairs[p]));
        let between = kept.iter().filter(|&&p| between_of(pairs[p])).count() as u32;
        let per_count = kept.len() as u32;
        let mut position = vec![NONE; pairs.len()];
        for (i, &p) in kept.iter().enumerate() {
            position[p] = i as u32;
        }
        let ticks_by_position = {
            let mut gaps = vec![NONE; layers.layers as usize * kept.len()];
            for t in 0..layers.layers as usize {
                for (i, &p) in kept.iter().enumerate() {
                    gaps[t * kept.len() + i] = layers.gaps[t * pairs.len() + p];
                }
            }
            Arc::new(TickSets {
                positions: per_count,
                gaps: gaps.into(),
                ..layers
            })
        };
        let shift = per_count.next_power_of_two().trailing_zeros();
        let counter_states = (u64::from(k.max) << shift) + u64::from(between);
        // The stored states are checked below; the counter's alone may not pass
        // the bound before `end` is computed.
        if counter_states >= MAX_COUNTED_STATES {
            return Err(too_large());
        }
        let first: State = 1;
        let end = first + counter_states as State;
        // A pair entered from a stored state (at count 0) that can still match.
        let lives_at_zero = |node: usize| match pair_index[node] {
            NONE => false,
            p => {
                let i = position[p as usize];
                i != NONE && ticks_by_position.live_at(0, i, k.min, k.max)
            }
        };

        // Stored states before the counter (its literal prefix) that reach a
        // live position at count 0, or a viable state past it.
        let mut stack: Vec<u32> = Vec::new();
        for (q, viable) in viable.iter_mut().enumerate() {
            if is_pair(q) || *viable {
                continue;
            }
            if targets(q).any(|(_, to, _)| lives_at_zero(to)) {
                *viable = true;
                stack.push(q as u32);
            }
        }
        spread(&mut stack, &mut viable);

        let stored: Vec<usize> = (0..nodes).filter(|&q| !is_pair(q) && viable[q]).collect();
        if counter_states + stored.len() as u64 + 1 > MAX_COUNTED_STATES {
            return Err(too_large());
        }
        let mut state_of = vec![DEAD; nodes];
        for (row, &q) in stored.iter().enumerate() {
            state_of[q] = end + row as State;
        }
        for (p, &q) in pairs.iter().enumerate() {
            if position[p] != NONE {
                state_of[q] = first + position[p];
            }
        }
        // From a stored state, a position is entered at count 0.
        let stored_target = |to: usize| {
            if pair_index[to] == NONE || lives_at_zero(to) {
                state_of[to]
            } else {
                DEAD
            }
        };
        let rows = stored.len() + 1;
        let mut transitions = vec![DEAD; rows * stride];
        let mut matching = vec![false; rows];
        for (row, &q) in stored.iter().enumerate() {
            for (c, to, _) in targets(q) {
                transitions[(row + 1) * stride + c] = stored_target(to);
            }
            matching[row + 1] = counted.is_match(tuple(q)[0]) && operands_match(q);
        }
        let mut template = vec![NO_TARGET; per_count as usize * stride];
        let mut entry = vec![DEAD; between as usize * stride];
        let mut counter_accepting = vec![false; between as usize];
        for (i, &p) in kept.iter().enumerate() {
            let q = pairs[p];
            if i < between as usize {
                counter_accepting[i] = accepting_at(q);
            }
            for (c, to, tick) in targets(q) {
                match pair_index[to] {
                    NONE if i < between as usize => entry[i * stride + c] = state_of[to],
                    NONE => {}
                    t if position[t as usize] == NONE => {}
                    t => {
                        template[i * stride + c] =
                            position[t as usize] + if tick { 1 << shift } else { 0 };
                    }
                }
            }
        }
        let start = stored_target(0);
        let counter = Counter {
            first,
            end,
            per_count,
            shift,
            min: k.min,
            max: k.max,
            template: template.into(),
            between,
            entry: entry.into(),
            ends: counter_accepting.contains(&true),
            accepting: counter_accepting.into(),
            ticks: Some(ticks_by_position),
        };
        let class_bytes = bytes_by_class(&classes, stride);
        let mut terminal = Terminal {
            label,
            pattern,
            classes,
            stride,
            matching: matching.into(),
            start,
            loopable: false,
            fingerprint: fingerprint_of(&(
                "counted product",
                counted.fingerprint,
                parts.iter().map(|t| t.fingerprint).collect::<Vec<_>>(),
                negated.iter().map(|t| t.fingerprint).collect::<Vec<_>>(),
            )),
            counter: Some(counter),
            excluded: None,
            tokens: None,
            only_bytes: only_bytes_of(&transitions, stride, &class_bytes).into(),
            transitions: transitions.into(),
            class_bytes,
        };
        terminal.loopable = !terminal.is_match(start) && terminal.loopable_body();
        Ok(terminal)
    }
}
