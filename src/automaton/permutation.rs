//! Permutations in the parser: the rules of [`crate::grammar::Permutation`] (members
//! in any order, each at most once, required ones present, an item count between
//! bounds), decided from a small [`Progress`] value that the parse item carries.
//!
//! As a context-free grammar a permutation of `n` members needs a rule per subset
//! of them, `2^n` rules; built lazily by the parser it needs only the subsets a
//! parse actually visits (one per item written). Each item is lowered to two
//! nonterminals, "as the first item" and "separator then item", so the separator
//! is fused into the item's first terminal like any other neighbour.
//!
//! A parse item waits only on the items that keep it finishable (unused members,
//! the extra, within `max`, leaving room for every missing required member), which
//! is what the matcher's viability-from-live-lexemes rule needs: no item is ever
//! created that cannot complete.

use super::NonTerminalId;

/// Index of a permutation ([`super::CompiledGrammar::permutation`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PermutationId(pub u32);

/// What a parse has done inside one permutation: the members used (sorted) and
/// the items written, saturated where larger counts behave alike.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Progress {
    pub used: Vec<u32>,
    pub count: u32,
}

impl Progress {
    pub fn uses(&self, member: u32) -> bool {
        self.used.binary_search(&member).is_ok()
    }
}

/// A lowered permutation. Item `k < members` is member `k`; item `members` is the
/// extra.
#[derive(Debug, Clone)]
pub struct Permutation {
    /// Per item: the nonterminal deriving it as the first item.
    pub first: Vec<NonTerminalId>,
    /// Per item: the nonterminal deriving the separator, then the item.
    pub next: Vec<NonTerminalId>,
    /// Per member (not the extra).
    pub required: Vec<bool>,
    pub has_extra: bool,
    pub min: u32,
    pub max: Option<u32>,
    /// Per item: it derives some string (see [`Permutation::set_productive`]).
    pub productive: Vec<bool>,
    /// Required members, and productive members, of all.
    totals: (u32, u32),
}

impl Permutation {
    /// A permutation of `first.len()` items, productivity not yet known.
    pub fn new(
        first: Vec<NonTerminalId>,
        next: Vec<NonTerminalId>,
        required: Vec<bool>,
        has_extra: bool,
        min: u32,
        max: Option<u32>,
    ) -> Permutation {
        let productive = vec![true; first.len()];
        let mut p = Permutation {
            first,
            next,
            required,
            has_extra,
            min,
            max,
            productive: Vec::new(),
            totals: (0, 0),
        };
        p.set_productive(productive);
        p
    }

    /// Records which items derive some string (the compiler's pruning result).
    pub fn set_productive(&mut self, productive: Vec<bool>) {
        self.productive = productive;
        let members = self.members();
        let required = self.required.iter().filter(|&&r| r).count() as u32;
        let productive = self.productive[..members].iter().filter(|&&p| p).count() as u32;
        self.totals = (required, productive);
    }

    pub fn members(&self) -> usize {
        self.required.len()
    }

    fn extra_productive(&self) -> bool {
        self.has_extra && self.productive[self.members()]
    }

    /// Counts stop here: with no `max`, every count from `min` (and from 1, which
    /// decides "first item or separator") on behaves the same.
    fn cap(&self) -> u32 {
        self.max.unwrap_or(self.min.max(1))
    }

    /// Required members still missing, and productive members still unused.
    fn outlook(&self, progress: &Progress) -> (u32, u32) {
        let (mut missing, mut available) = self.totals;
        for &k in &progress.used {
            missing -= u32::from(self.required[k as usize]);
            available -= u32::from(self.productive[k as usize]);
        }
        (missing, available)
    }

    /// Whether `item`, not used yet, may come next: productive, and the
    /// permutation can still finish after it.
    fn unused_item_allowed(&self, count: u32, item: u32, outlook: (u32, u32)) -> bool {
        let (mut missing, mut available) = outlook;
        let k = item as usize;
        if !self.productive[k] || self.max.is_some_and(|m| count >= m) {
            return false;
        }
        if k < self.members() {
            missing -= u32::from(self.required[k]);
            available -= 1;
        }
        let count = count + 1;
        let fits_max = self.max.is_none_or(|m| count + missing <= m);
        let reaches_min = self.extra_productive() || count + available >= self.min;
        fits_max && reaches_min
    }

    /// The nonterminals a parse item with `progress` waits on, with their items.
    /// Items are walked beside the sorted `used` list, so this is linear.
    pub fn awaited<'a>(
        &'a self,
        progress: &'a Progress,
    ) -> impl Iterator<Item = (u32, NonTerminalId)> + 'a {
        let outlook = self.outlook(progress);
        let side = if progress.count == 0 {
            &self.first
        } else {
            &self.next
        };
        let mut used = progress.used.iter().peekable();
        (0..self.first.len() as u32)
            .filter(move |&k| {
                if used.next_if_eq(&&k).is_some() {
                    return false;
                }
                self.unused_item_allowed(progress.count, k, outlook)
            })
            .map(move |k| (k, side[k as usize]))
    }

    /// Whether the permutation may end with `progress`.
    pub fn can_end(&self, progress: &Progress) -> bool {
        progress.count >= self.min && self.outlook(progress).0 == 0
    }

    /// The item that nonterminal `nt` derives, if it is one of this permutation's.
    /// Lowering numbers each side's nonterminals consecutively, so this is a range
    /// check, not a search (it runs at every completion).
    pub fn item_of(&self, nt: NonTerminalId) -> Option<u32> {
        let items = self.first.len() as u32;
        [&self.first, &self.next].into_iter().find_map(|side| {
            let k = nt.0.checked_sub(side.first()?.0)?;
            (k < items).then_some(k)
        })
    }

    /// `progress` after `item`.
    pub fn after(&self, progress: &Progress, item: u32) -> Progress {
        let mut used = progress.used.clone();
        if (item as usize) < self.members() {
            if let Err(at) = used.binary_search(&item) {
                used.insert(at, item);
            }
        }
        Progress {
            used,
            count: (progress.count + 1).min(self.cap()),
        }
    }

    /// Items that finish the permutation soonest from `progress`, given each
    /// item's cost as a following item (`next`): every missing required member,
    /// then the cheapest others until `min` is reached. `None` when it cannot end.
    /// The extra may be needed `min` times over, so it is counted, not listed
    /// (a `minProperties` of 10^9 beside undeclared properties is one number here).
    pub fn cheapest_ending(
        &self,
        progress: &Progress,
        cost: impl Fn(u32) -> u64,
    ) -> Option<Ending> {
        let mut members: Vec<u32> = (0..self.members() as u32)
            .filter(|&k| self.required[k as usize] && !progress.uses(k))
            .collect();
        if members.iter().any(|&k| !self.productive[k as usize]) {
            return None;
        }
        let min = u64::from(self.min);
        let mut count = u64::from(progress.count) + members.len() as u64;
        let mut extras = 0u64;
        if count < min {
            let mut optional: Vec<u32> = (0..self.members() as u32)
                .filter(|&k| {
                    !self.required[k as usize] && !progress.uses(k) && self.productive[k as usize]
                })
                .collect();
            optional.sort_by_key(|&k| cost(k));
            let extra = self.members() as u32;
            let extra_cost = self.extra_productive().then(|| cost(extra));
            // Cheapest first: once the extra is cheaper than the next member, it
            // is cheaper than every member left.
            for k in optional {
                if count >= min || extra_cost.is_some_and(|c| c < cost(k)) {
                    break;
                }
                members.push(k);
                count += 1;
            }
            if count < min {
                extra_cost?; // no extra to fill the rest with
                extras = min - count;
                count = min;
            }
        }
        if self.max.is_some_and(|m| count > u64::from(m)) {
            return None;
        }
        Some(Ending {
            members,
            extras: u32::try_from(extras).ok()?,
        })
    }
}

/// A shortest way to finish a permutation ([`Permutation::cheapest_ending`]): these
/// members in this order, then the extra `extras` times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    pub members: Vec<u32>,
    pub extras: u32,
}
