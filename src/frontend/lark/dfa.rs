//! Small byte automata for what a regex cannot say: llguidance's `&` and `~` on
//! terminals, and lazy lexemes (`lazy`, `suffix=`), which match as few bytes as
//! possible.
//!
//! Each operand is a regex ([`Hir`]), determinized with `regex-automata` (the same
//! bounded builder as the lexer's, [`AnchoredDfa`]) and copied into a complete
//! table ([`Dfa`]): every state has a transition on every byte, the dead state
//! included, so the complement is a flip of the accepting states and the
//! intersection a product. A lazy lexeme keeps the strings of its language that
//! have no proper prefix in it: the transitions out of accepting states are cut.
//!
//! The IR has no automaton leaf, so the result goes back into the grammar as
//! right-linear rules, one per live state (`S -> bytes T | ...`, plus the empty
//! string where `S` accepts). It is exact; it is parsed byte by byte rather than
//! fused into one lexer terminal, which is fine for the delimiters and small
//! vocabularies these operators are used for. Sizes are bounded: the caller's
//! limit on states (`LarkOptions::max_dfa_states`) and the builders' heap bytes.

use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange, Hir};

use crate::grammar::dfa::AnchoredDfa;
use crate::grammar::{Expr, Location, Rule, RuleId};

/// A complete DFA over bytes: state 0 is the start.
#[derive(Debug, Clone)]
pub(crate) struct Dfa {
    /// Byte to class.
    classes: [u8; 256],
    /// Number of classes.
    stride: usize,
    /// `next[state * stride + class]`.
    next: Vec<u32>,
    accepting: Vec<bool>,
}

/// Heap bytes the regex-automata builders may use per operand.
const BUILD_BYTES: usize = 16 << 20;

impl Dfa {
    pub fn states(&self) -> usize {
        self.accepting.len()
    }

    /// The DFA of `hir`, or an error past `max_states`.
    pub fn from_hir(hir: &Hir, max_states: usize) -> Result<Dfa, String> {
        let built = AnchoredDfa::build(std::slice::from_ref(hir), BUILD_BYTES, BUILD_BYTES)
            .map_err(|e| format!("the automaton is too large ({e})"))?;
        let (order, next) = built
            .reachable(max_states)
            .map_err(|()| format!("the automaton has more than {max_states} states"))?;
        use regex_automata::dfa::Automaton;
        let accepting = order
            .iter()
            .map(|&s| built.dfa.is_match_state(built.dfa.next_eoi_state(s)))
            .collect();
        Ok(Dfa {
            classes: built.classes,
            stride: built.representatives.len(),
            next,
            accepting,
        })
    }

    fn step(&self, state: u32, byte: u8) -> u32 {
        self.next[state as usize * self.stride + self.classes[byte as usize] as usize]
    }

    /// The byte strings `self` does not match.
    pub fn complement(mut self) -> Dfa {
        self.accepting.iter_mut().for_each(|a| *a = !*a);
        self
    }

    /// The strings both match (`both`), or either (`!both`).
    pub fn product(&self, other: &Dfa, both: bool, max_states: usize) -> Result<Dfa, String> {
        // Joint byte classes: one per pair of classes that occurs.
        let mut classes = [0u8; 256];
        let mut pairs: Vec<(u8, u8)> = Vec::new();
        let mut representatives = Vec::new();
        for b in 0..=255u8 {
            let pair = (self.classes[b as usize], other.classes[b as usize]);
            let class = match pairs.iter().position(|&p| p == pair) {
                Some(c) => c,
                None => {
                    pairs.push(pair);
                    representatives.push(b);
                    pairs.len() - 1
                }
            };
            classes[b as usize] = class as u8;
        }
        let stride = representatives.len();
        let mut index = rustc_hash::FxHashMap::default();
        let mut order = vec![(0u32, 0u32)];
        index.insert((0u32, 0u32), 0u32);
        let mut next = Vec::new();
        let mut i = 0;
        while i < order.len() {
            let (a, b) = order[i];
            i += 1;
            for &byte in &representatives {
                let target = (self.step(a, byte), other.step(b, byte));
                let id = match index.get(&target) {
                    Some(&id) => id,
                    None => {
                        if order.len() >= max_states {
                            return Err(format!("the automaton has more than {max_states} states"));
                        }
                        let id = order.len() as u32;
                        index.insert(target, id);
                        order.push(target);
                        id
                    }
                };
                next.push(id);
            }
        }
        let accepting = order
            .iter()
            .map(|&(a, b)| {
                let (a, b) = (self.accepting[a as usize], other.accepting[b as usize]);
                if both {
                    a && b
                } else {
                    a || b
                }
            })
            .collect();
        Ok(Dfa {
            classes,
            stride,
            next,
            accepting,
        })
    }

    /// Whether `other` matches exactly the strings `self` does: no reachable pair
    /// of states disagrees on acceptance.
    pub fn same_language(&self, other: &Dfa, max_states: usize) -> Result<bool, String> {
        let mut seen = rustc_hash::FxHashSet::default();
        let mut stack = vec![(0u32, 0u32)];
        seen.insert((0u32, 0u32));
        while let Some((a, b)) = stack.pop() {
            if self.accepting[a as usize] != other.accepting[b as usize] {
                return Ok(false);
            }
            for byte in 0..=255u8 {
                let pair = (self.step(a, byte), other.step(b, byte));
                if seen.insert(pair) {
                    if seen.len() > max_states {
                        return Err(format!("the automaton has more than {max_states} states"));
                    }
                    stack.push(pair);
                }
            }
        }
        Ok(true)
    }

    /// The strings of the language with no proper prefix in it (what a lazy
    /// lexeme can match: it ends as soon as it can).
    pub fn shortest_matches(mut self) -> Dfa {
        let dead = self.accepting.len() as u32;
        self.accepting.push(false);
        self.next.extend(std::iter::repeat_n(dead, self.stride));
        for state in 0..dead as usize {
            if self.accepting[state] {
                self.next[state * self.stride..(state + 1) * self.stride].fill(dead);
            }
        }
        self
    }

    /// Whether `input` is in the language (for tests).
    #[cfg(test)]
    pub fn accepts(&self, input: &[u8]) -> bool {
        let state = input.iter().fold(0, |s, &b| self.step(s, b));
        self.accepting[state as usize]
    }

    /// Appends right-linear rules for the DFA's live states to `rules` (named
    /// `{name}~{state}`) and returns the expression of the language.
    pub fn to_rules(&self, name: &str, location: Option<Location>, rules: &mut Vec<Rule>) -> Expr {
        let n = self.states();
        // Live: can reach an accepting state.
        let mut predecessors: Vec<Vec<u32>> = vec![Vec::new(); n];
        for s in 0..n {
            for c in 0..self.stride {
                predecessors[self.next[s * self.stride + c] as usize].push(s as u32);
            }
        }
        let mut live = self.accepting.clone();
        let mut stack: Vec<u32> = (0..n as u32).filter(|&s| live[s as usize]).collect();
        while let Some(s) = stack.pop() {
            for &p in &predecessors[s as usize] {
                if !live[p as usize] {
                    live[p as usize] = true;
                    stack.push(p);
                }
            }
        }
        if !live[0] {
            return Expr::Regex(Hir::fail());
        }
        // Rules for the live states reachable from the start, in order of discovery.
        let mut rule_of: Vec<Option<RuleId>> = vec![None; n];
        let mut order = vec![0u32];
        let base = rules.len() as u32;
        rule_of[0] = Some(RuleId(base));
        let mut i = 0;
        while i < order.len() {
            let s = order[i] as usize;
            i += 1;
            for c in 0..self.stride {
                let t = self.next[s * self.stride + c] as usize;
                if live[t] && rule_of[t].is_none() {
                    rule_of[t] = Some(RuleId(base + order.len() as u32));
                    order.push(t as u32);
                }
            }
        }
        for &s in &order {
            let s = s as usize;
            let mut alternatives = Vec::new();
            if self.accepting[s] {
                alternatives.push(Expr::Empty);
            }
            // Bytes grouped by target, targets in order of their first byte.
            let mut targets: Vec<(usize, Vec<ClassBytesRange>)> = Vec::new();
            for b in 0..=255u8 {
                let t = self.step(s as u32, b) as usize;
                if !live[t] {
                    continue;
                }
                let slot = match targets.iter().position(|(target, _)| *target == t) {
                    Some(k) => k,
                    None => {
                        targets.push((t, Vec::new()));
                        targets.len() - 1
                    }
                };
                let ranges = &mut targets[slot].1;
                match ranges.last_mut() {
                    Some(r) if r.end() as u16 + 1 == b as u16 => {
                        *r = ClassBytesRange::new(r.start(), b);
                    }
                    _ => ranges.push(ClassBytesRange::new(b, b)),
                }
            }
            for (t, ranges) in targets {
                let class = Hir::class(Class::Bytes(ClassBytes::new(ranges)));
                let target = rule_of[t].expect("live reachable targets have rules");
                alternatives.push(Expr::Seq(vec![Expr::Regex(class), Expr::Ref(target)]));
            }
            rules.push(Rule {
                name: format!("{name}~{s}"),
                expr: match alternatives.len() {
                    1 => alternatives.pop().unwrap_or(Expr::Empty),
                    _ => Expr::Alt(alternatives),
                },
                location,
            });
        }
        super::chains::keep_apart(rules, base as usize, RuleId(base));
        Expr::Ref(RuleId(base))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dfa(pattern: &str) -> Dfa {
        let hir = regex_syntax::Parser::new().parse(pattern).unwrap();
        Dfa::from_hir(&hir, 1000).unwrap()
    }

    #[test]
    fn intersection_complement_and_shortest() {
        let and = dfa("[a-z]+")
            .product(&dfa("[abcABC]+"), true, 1000)
            .unwrap();
        assert!(and.accepts(b"abc") && !and.accepts(b"A") && !and.accepts(b"d"));
        let not = dfa("(.*)[ab](.*)").complement();
        assert!(not.accepts(b"cd") && not.accepts(b"") && !not.accepts(b"xay"));
        assert!(not.accepts(b"\xff")); // bytes, not characters
        let lazy = dfa("[a-z]+").shortest_matches();
        assert!(lazy.accepts(b"a") && !lazy.accepts(b"ab"));
        let lazy = dfa(r"(?s:.*)<end>").shortest_matches();
        assert!(lazy.accepts(b"x<end>") && !lazy.accepts(b"x<end>y<end>"));
    }

    #[test]
    fn size_limits_are_errors() {
        let hir = regex_syntax::Parser::new().parse("[01]*1[01]{12}").unwrap();
        assert!(Dfa::from_hir(&hir, 100).is_err());
    }
}
