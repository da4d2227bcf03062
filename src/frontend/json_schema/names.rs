//! Property-name languages for `patternProperties`: which undeclared names match
//! which patterns, as regular languages over the canonical JSON encoding.
//!
//! A name that matches some patterns takes all their schemas; a name that matches
//! none takes `additionalProperties`. So the grammar needs, per set of matched
//! patterns, the language of names that match exactly that set and are no declared
//! name: intersections and complements, which a regex cannot say directly.
//!
//! They are computed on one deterministic automaton: `regex-automata` builds a
//! multi-pattern DFA (match kind "all", anchored) over the encoded patterns, the
//! declared names and "any canonical string body"; the patterns that match a whole
//! name are the pattern set of the state reached after it. For one group of pattern
//! sets, the states whose set belongs to the group are the accepting ones: that DFA
//! is trimmed, minimized, and turned back into a byte-level regex by state
//! elimination (the IR's leaves are regexes). Both steps are bounded; above the
//! bounds the caller reports the keyword as unsupported, never an approximation.

use rustc_hash::FxHashMap as HashMap;
use std::collections::{BTreeMap, BTreeSet};

use regex_automata::dfa::Automaton;

use crate::grammar::dfa::{AnchoredDfa, DfaError};
use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange, Hir, Repetition};

/// Bounds on the automaton and on the regexes read back from it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NameLimits {
    /// Most DFA states explored.
    pub states: usize,
    /// Most regex nodes in one language read back.
    pub regex_nodes: usize,
    /// Heap bytes for the NFA, the DFA and its determinization.
    pub bytes: usize,
}

impl Default for NameLimits {
    fn default() -> Self {
        NameLimits {
            states: 4_000,
            regex_nodes: 40_000,
            bytes: 4 << 20,
        }
    }
}

/// Why a property-name language was not computed: an automaton or a regex read
/// back from it past its bound. The message is the reason the caller reports
/// `patternProperties` unsupported with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NameError {
    #[error(transparent)]
    Dfa(#[from] DfaError),
    #[error("the property-name automaton has more than {limit} states")]
    TooManyStates { limit: usize },
    #[error("the property-name language needs a regex of more than {limit} nodes")]
    RegexTooLarge { limit: usize },
}

/// The names automaton: one DFA over bytes, each state labelled with the set of
/// patterns a name ending there matches (`None`: not an undeclared name at all,
/// i.e. not a canonical string body, or a declared name).
pub(crate) struct NameAutomaton {
    /// Byte to equivalence class.
    classes: [u8; 256],
    stride: usize,
    /// `transitions[state * stride + class]`; state 0 is the start.
    transitions: Vec<u32>,
    labels: Vec<Option<Vec<bool>>>,
}

impl NameAutomaton {
    /// `body`: every canonical string body; `declared`: the declared names (encoded);
    /// `patterns`: the encoded whole-name patterns.
    pub fn build(
        body: &Hir,
        declared: &Hir,
        patterns: &[Hir],
        limits: &NameLimits,
    ) -> Result<NameAutomaton, NameError> {
        let mut all = vec![body.clone(), declared.clone()];
        all.extend(patterns.iter().cloned());
        let built = AnchoredDfa::build(&all, limits.bytes, limits.bytes)?;
        let (dfa, classes) = (&built.dfa, built.classes);
        let stride = built.representatives.len();
        let (order, transitions) =
            built
                .reachable(limits.states)
                .map_err(|()| NameError::TooManyStates {
                    limit: limits.states,
                })?;
        let labels = order
            .iter()
            .map(|&s| {
                let eoi = dfa.next_eoi_state(s);
                let mut set = vec![false; all.len()];
                if dfa.is_match_state(eoi) {
                    for k in 0..dfa.match_len(eoi) {
                        set[dfa.match_pattern(eoi, k).as_usize()] = true;
                    }
                }
                (set[0] && !set[1]).then(|| set[2..].to_vec())
            })
            .collect();
        Ok(NameAutomaton {
            classes,
            stride,
            transitions,
            labels,
        })
    }

    /// The distinct pattern sets of undeclared names, each with whether some name
    /// has it (always true: only reachable states are kept).
    pub fn pattern_sets(&self) -> BTreeSet<Vec<bool>> {
        self.labels.iter().flatten().cloned().collect()
    }

    /// The encoded names whose pattern set satisfies `accept`, as a byte-level regex
    /// (`Ok(None)`: no such name).
    pub fn language(
        &self,
        accept: impl Fn(&[bool]) -> bool,
        limits: &NameLimits,
    ) -> Result<Option<Hir>, NameError> {
        let n = self.labels.len();
        let stride = self.stride;
        let accepting: Vec<bool> = self
            .labels
            .iter()
            .map(|l| l.as_deref().is_some_and(&accept))
            .collect();
        // Trim: states from which an accepting one is reachable.
        let mut predecessors: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (t, &to) in self.transitions.iter().enumerate() {
            predecessors[to as usize].push((t / stride) as u32);
        }
        let mut live = accepting.clone();
        let mut stack: Vec<usize> = (0..n).filter(|&s| live[s]).collect();
        while let Some(s) = stack.pop() {
            for &p in &predecessors[s] {
                if !live[p as usize] {
                    live[p as usize] = true;
                    stack.push(p as usize);
                }
            }
        }
        if !live[0] {
            return Ok(None);
        }
        // Minimize (Moore): blocks refined by their successors' blocks; dead states
        // (not live) form one block whose transitions are dropped below.
        let mut block: Vec<u32> = (0..n)
            .map(|s| match (live[s], accepting[s]) {
                (false, _) => 0,
                (true, false) => 1,
                (true, true) => 2,
            })
            .collect();
        let mut count = 0;
        loop {
            let mut ids: HashMap<Vec<u32>, u32> = HashMap::default();
            let mut next = Vec::with_capacity(n);
            for s in 0..n {
                let mut key = Vec::with_capacity(stride + 1);
                key.push(block[s]);
                if live[s] {
                    key.extend(
                        (0..stride).map(|c| block[self.transitions[s * stride + c] as usize]),
                    );
                }
                let fresh = ids.len() as u32;
                next.push(*ids.entry(key).or_insert(fresh));
            }
            let new_count = ids.len();
            block = next;
            if new_count == count {
                break;
            }
            count = new_count;
        }
        // One node per live block, then a start and a final node.
        let mut node_of: HashMap<u32, usize> = HashMap::default();
        let mut representative: Vec<usize> = Vec::new();
        for s in (0..n).filter(|&s| live[s]) {
            node_of.entry(block[s]).or_insert_with(|| {
                representative.push(s);
                representative.len() - 1
            });
        }
        let k = representative.len();
        let (begin, end) = (k, k + 1);
        let mut graph = Graph::new(k + 2, limits.regex_nodes);
        for (node, &s) in representative.iter().enumerate() {
            let mut bytes: BTreeMap<usize, Vec<u8>> = BTreeMap::new();
            for b in 0..=255u8 {
                let to = self.transitions[s * stride + self.classes[b as usize] as usize] as usize;
                if live[to] {
                    bytes.entry(node_of[&block[to]]).or_default().push(b);
                }
            }
            for (to, bytes) in bytes {
                graph.add(node, to, byte_class(&bytes))?;
            }
            if accepting[s] {
                graph.add(node, end, Hir::empty())?;
            }
        }
        graph.add(begin, node_of[&block[0]], Hir::empty())?;
        graph.eliminate_all(k)?;
        Ok(graph.out[begin].remove(&end).map(|(h, _)| h))
    }
}

fn byte_class(bytes: &[u8]) -> Hir {
    let mut ranges: Vec<ClassBytesRange> = Vec::new();
    for &b in bytes {
        match ranges.last_mut() {
            Some(r) if r.end() as u16 + 1 == b as u16 => *r = ClassBytesRange::new(r.start(), b),
            _ => ranges.push(ClassBytesRange::new(b, b)),
        }
    }
    if let [r] = ranges[..] {
        if r.start() == r.end() {
            return Hir::literal([r.start()]);
        }
    }
    Hir::class(Class::Bytes(ClassBytes::new(ranges)))
}

/// A generalized automaton for state elimination: regex-labelled edges, each with
/// its size in regex nodes.
struct Graph {
    out: Vec<BTreeMap<usize, (Hir, usize)>>,
    into: Vec<BTreeSet<usize>>,
    max_nodes: usize,
}

fn size_of(h: &Hir) -> usize {
    use regex_syntax::hir::HirKind;
    match h.kind() {
        HirKind::Repetition(r) => 1 + size_of(&r.sub),
        HirKind::Capture(c) => 1 + size_of(&c.sub),
        HirKind::Concat(items) | HirKind::Alternation(items) => {
            1 + items.iter().map(size_of).sum::<usize>()
        }
        _ => 1,
    }
}

impl Graph {
    fn new(nodes: usize, max_nodes: usize) -> Graph {
        Graph {
            out: vec![BTreeMap::new(); nodes],
            into: vec![BTreeSet::new(); nodes],
            max_nodes,
        }
    }

    /// Adds `label` as one more alternative on the edge `from -> to`.
    fn add(&mut self, from: usize, to: usize, label: Hir) -> Result<(), NameError> {
        let (label, size) = match self.out[from].remove(&to) {
            Some((old, old_size)) => {
                let size = old_size + size_of(&label) + 1;
                (Hir::alternation(vec![old, label]), size)
            }
            None => {
                let size = size_of(&label);
                (label, size)
            }
        };
        if size > self.max_nodes {
            return Err(NameError::RegexTooLarge {
                limit: self.max_nodes,
            });
        }
        self.out[from].insert(to, (label, size));
        self.into[to].insert(from);
        Ok(())
    }

    /// Eliminates nodes `0..k`, cheapest first (fewest new edges).
    fn eliminate_all(&mut self, k: usize) -> Result<(), NameError> {
        let mut remaining: BTreeSet<usize> = (0..k).collect();
        while !remaining.is_empty() {
            let &q = remaining
                .iter()
                .min_by_key(|&&q| {
                    let ins = self.into[q].iter().filter(|&&p| p != q).count();
                    let outs = self.out[q].keys().filter(|&&r| r != q).count();
                    ins * outs
                })
                .unwrap();
            remaining.remove(&q);
            self.eliminate(q)?;
        }
        Ok(())
    }

    fn eliminate(&mut self, q: usize) -> Result<(), NameError> {
        let self_loop = self.out[q].remove(&q).map(|(h, _)| {
            Hir::repetition(Repetition {
                min: 0,
                max: None,
                greedy: true,
                sub: Box::new(h),
            })
        });
        self.into[q].remove(&q);
        let outs: Vec<(usize, Hir)> = std::mem::take(&mut self.out[q])
            .into_iter()
            .map(|(r, (h, _))| (r, h))
            .collect();
        for (r, _) in &outs {
            self.into[*r].remove(&q);
        }
        let ins: Vec<usize> = std::mem::take(&mut self.into[q]).into_iter().collect();
        for p in ins {
            let Some((a, _)) = self.out[p].remove(&q) else {
                continue;
            };
            for (r, b) in &outs {
                let mut parts = vec![a.clone()];
                parts.extend(self_loop.clone());
                parts.push(b.clone());
                self.add(p, *r, Hir::concat(parts))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(p: &str) -> Hir {
        regex_syntax::ParserBuilder::new()
            .utf8(false)
            .build()
            .parse(p)
            .unwrap()
    }

    fn matches(h: &Hir, s: &str) -> bool {
        super::super::pattern::build_matcher(h)
            .unwrap()
            .is_match(s.as_bytes())
    }

    #[test]
    fn complements_and_intersections_are_exact() {
        // Plain text bodies (no escapes needed for these test strings).
        let body = parse(r#"(?s:[^\x00-\x1f"\\])*"#);
        let declared = parse("foo|bar");
        let patterns = [parse("(?s:.*)f(?s:.*)o(?s:.*)"), parse("[0-9]+")];
        let auto =
            NameAutomaton::build(&body, &declared, &patterns, &NameLimits::default()).unwrap();
        let sets = auto.pattern_sets();
        assert!(sets.contains(&vec![false, false]) && sets.contains(&vec![true, false]));
        assert!(sets.contains(&vec![false, true]) && !sets.contains(&vec![true, true]));
        let limits = NameLimits::default();
        let neither = auto
            .language(|s| s == [false, false], &limits)
            .unwrap()
            .unwrap();
        let f_o = auto.language(|s| s[0], &limits).unwrap().unwrap();
        let both = auto.language(|s| s[0] && s[1], &limits).unwrap();
        assert!(both.is_none());
        let words = [
            "",
            "f",
            "o",
            "fo",
            "foo",
            "bar",
            "ba",
            "bars",
            "xfyoz",
            "of",
            "12",
            "1f2o",
            "é",
            "fé",
            "fooo",
            "a\u{10000}o",
            "f\u{10000}o",
        ];
        for w in words {
            let is_declared = w == "foo" || w == "bar";
            let m0 = matches(&patterns[0], w);
            let m1 = matches(&patterns[1], w);
            assert_eq!(matches(&neither, w), !is_declared && !m0 && !m1, "{w:?}");
            assert_eq!(matches(&f_o, w), !is_declared && m0, "{w:?}");
        }
    }

    #[test]
    fn limits_are_errors() {
        let body = parse(r"(?s:.)*");
        let patterns = [parse("(?s:.*)a(?s:.){12}")];
        let tight = NameLimits {
            states: 100,
            ..NameLimits::default()
        };
        assert!(NameAutomaton::build(&body, &Hir::fail(), &patterns, &tight).is_err());
    }

    /// The texts `patternProperties` is reported unsupported with, as when they
    /// were strings.
    #[test]
    fn error_messages_are_unchanged() {
        assert_eq!(
            NameError::TooManyStates { limit: 100 }.to_string(),
            "the property-name automaton has more than 100 states"
        );
        assert_eq!(
            NameError::RegexTooLarge { limit: 7 }.to_string(),
            "the property-name language needs a regex of more than 7 nodes"
        );
        let dfa = DfaError::Dfa("too big".into());
        assert_eq!(NameError::from(dfa.clone()).to_string(), dfa.to_string());
    }
}
