//! `contains` with `minContains`/`maxContains`, beside `prefixItems` and item
//! counts: an array whose items are counted as they are read.
//!
//! Each item either matches a `contains` schema `C` or not (`not C`, a negated
//! child like any other), so an item position offers one item rule per *hit
//! pattern* (which of the `contains` schemas it matches), and the array is a
//! finite automaton over positions and counts: state `(i, c)` is "`i` items
//! read (or at least `L`, past which every position is alike), `c_j` of them
//! matching `C_j`" (a count without `maxContains` saturates at its minimum, one
//! with it stops the array there). Each reachable state is a rule; the states
//! past the last distinct position loop on the items that leave the counts as
//! they are, written as a repetition, so a long array is no deep recursion.
//!
//! The states are bounded ([`MOST_COUNT_STATES`]): `maxItems: 100000` beside
//! `maxContains` is a located limit, not a grammar of millions of rules.

use crate::grammar::{Expr, RuleId};
use rustc_hash::FxHashMap as HashMap;

use super::node::Node;
use super::{alt, nothing, seq, Result, SchemaCompiler, Subschema};

/// Most `(position, counts)` states one array may need.
pub(crate) const MOST_COUNT_STATES: usize = 4096;

/// Most `contains` schemas counted at once (each doubles the item rules).
const MOST_COUNTED: usize = 4;

/// One `contains` and the counts it allows.
pub(crate) struct Counted<'a> {
    pub schema: Subschema<'a>,
    pub min: u64,
    pub max: Option<u64>,
    pub ptr: String,
}

impl Counted<'_> {
    /// Where the count stops mattering (without a maximum) or stops the array.
    fn top(&self) -> u64 {
        self.max.unwrap_or(self.min)
    }
}

impl<'a> SchemaCompiler<'a> {
    /// The items of an array (between its brackets) with the counts of
    /// `counted` and `min..=max` items, position `i` valid against the parts'
    /// schemas for it.
    pub(crate) fn counted_items(
        &mut self,
        node: &Node<'a>,
        counted: &[Counted<'a>],
        min: u64,
        max: Option<u64>,
    ) -> Result<Expr> {
        let ptr = counted[0].ptr.clone();
        if counted.len() > MOST_COUNTED {
            self.unsupported(
                "contains",
                &ptr,
                format!("more than {MOST_COUNTED} contains counted in one array"),
            )?;
            return Ok(Expr::Empty);
        }
        let prefix_len = node.arr.parts.iter().map(|p| p.prefix.len()).max();
        let prefix_len = prefix_len.unwrap_or(0) as u64;
        // Positions 0..last are told apart; `last` itself is "last or more"
        // unless the array stops there.
        let last = match max {
            Some(m) => m,
            None => prefix_len.max(min).max(1),
        };
        let tops: Vec<u64> = counted.iter().map(Counted::top).collect();
        let states = tops.iter().try_fold(last.saturating_add(1), |n, t| {
            n.checked_mul(t.saturating_add(1))
        });
        if states.is_none_or(|n| n > MOST_COUNT_STATES as u64) {
            return Err(self.limit(
                &ptr,
                format!(
                    "counting contains over {} items needs more than {MOST_COUNT_STATES} states",
                    if max.is_some() {
                        "maxItems"
                    } else {
                        "the prefix and minItems"
                    }
                ),
            ));
        }
        let patterns = 1u32 << counted.len();
        let next = |c: &[u64], h: u32| -> Option<Vec<u64>> {
            let mut out = c.to_vec();
            for (j, k) in counted.iter().enumerate() {
                if h & (1 << j) != 0 {
                    out[j] += 1;
                    match k.max {
                        Some(m) if out[j] > m => return None,
                        None => out[j] = out[j].min(k.min),
                        _ => {}
                    }
                }
            }
            Some(out)
        };
        let accepts =
            |i: u64, c: &[u64]| i >= min && c.iter().zip(counted).all(|(n, k)| *n >= k.min);
        let step = |i: u64| {
            if max.is_none() && i == last {
                last
            } else {
                i + 1
            }
        };

        // The states reachable from `(0, 0...)`.
        let start = (0u64, vec![0u64; counted.len()]);
        let mut reachable = vec![start.clone()];
        let mut seen: HashMap<(u64, Vec<u64>), ()> = HashMap::default();
        seen.insert(start.clone(), ());
        let mut k = 0;
        while k < reachable.len() {
            let (i, c) = reachable[k].clone();
            k += 1;
            if max.is_some() && i == last {
                continue;
            }
            for h in 0..patterns {
                if let Some(c2) = next(&c, h) {
                    let s = (step(i), c2);
                    if seen.insert(s.clone(), ()).is_none() {
                        reachable.push(s);
                    }
                }
            }
        }
        // Later positions and higher counts first: every state refers only to
        // states already made.
        reachable.sort_by(|a, b| b.cmp(a));

        let (_, comma, _) = self.array_frame();
        let mut rules: HashMap<(u64, Vec<u64>), RuleId> = HashMap::default();
        for (i, c) in reachable {
            let position: Vec<Subschema<'a>> = (node.arr.parts.iter())
                .filter_map(|p| p.item(i as usize))
                .collect();
            let sep = if i == 0 { Expr::Empty } else { comma.clone() };
            let end = if accepts(i, &c) {
                Expr::Empty
            } else {
                nothing()
            };
            let expr = if max.is_some() && i == last {
                end
            } else {
                let mut loops = Vec::new();
                let mut moves = vec![end];
                for h in 0..patterns {
                    let Some(c2) = next(&c, h) else { continue };
                    let item = self.hit_item(&position, counted, h)?;
                    let to = (step(i), c2);
                    if to == (i, c.clone()) {
                        loops.push(item);
                    } else {
                        moves.push(seq(vec![sep.clone(), item, Expr::Ref(rules[&to])]));
                    }
                }
                let rest = alt(moves);
                if loops.is_empty() {
                    rest
                } else {
                    seq(vec![
                        Expr::Repeat {
                            expr: Box::new(seq(vec![comma.clone(), alt(loops)])),
                            min: 0,
                            max: None,
                        },
                        rest,
                    ])
                }
            };
            let id = self.new_rule(format!("{ptr} items from {i}, counts {c:?}"), expr)?;
            rules.insert((i, c), id);
        }
        Ok(Expr::Ref(rules[&start]))
    }

    /// An item valid against `position` that matches the `contains` schemas
    /// set in `hits` and none of the others.
    fn hit_item(
        &mut self,
        position: &[Subschema<'a>],
        counted: &[Counted<'a>],
        hits: u32,
    ) -> Result<Expr> {
        let mut conj = position.to_vec();
        for (j, k) in counted.iter().enumerate() {
            conj.push(if hits & (1 << j) != 0 {
                k.schema.clone()
            } else {
                k.schema.negation()
            });
        }
        self.item_rule(&conj)
    }
}
