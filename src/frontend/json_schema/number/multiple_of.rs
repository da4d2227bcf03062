//! `multipleOf` beyond a power of ten, and its negation: the integers a divisor
//! takes (or, negated, leaves) by their remainder, as an enumeration where
//! both bounds leave few, else a remainder automaton written as right-linear
//! rules; and, for a negated `multipleOf`, the numbers with a fraction beside
//! them.
//!
//! A child of [`super`] (number texts and ranges), whose helpers it uses.

use super::super::nothing;
use super::{
    alt, digit_set, lcm, lit, power_of_ten_decimals, rep, seq, Bound, Expr, Hir, Node, Result,
    SchemaCompiler,
};

/// The largest divisor (or least common multiple of divisors) a negated
/// `multipleOf` takes: its remainder automaton has this many rules.
const MOST_NEGATED_DIVISOR: i128 = 100_000;

impl<'a> SchemaCompiler<'a> {
    /// A number that is no multiple of the divisors in `not_multiple_of` (and a
    /// multiple of `m`, of `10^-decimals`): integers by their remainder, and the
    /// numbers with a fraction, which no integer divides, where the type allows
    /// them. A divisor `10^-k` leaves the numbers with a non-zero digit past the
    /// `k`-th decimal. Other decimal divisors are not supported.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn no_multiples(
        &mut self,
        node: &Node<'a>,
        m: i128,
        decimals: Option<usize>,
        int_only: bool,
        frac_only: bool,
        lo: Bound,
        hi: Bound,
    ) -> Result<Expr> {
        let mut divisors: Vec<i128> = Vec::new();
        // Past this decimal some digit is not zero.
        let mut nonzero_past: Option<usize> = None;
        let mut ptr = String::new();
        for (d, p) in &node.num.not_multiple_of {
            ptr.clone_from(p);
            if d.is_integer() {
                match d.as_i128() {
                    Some(k) if k <= MOST_NEGATED_DIVISOR => divisors.push(k),
                    _ => self.unsupported(
                        "multipleOf",
                        p,
                        format!("not of multipleOf by integers above {MOST_NEGATED_DIVISOR}"),
                    )?,
                }
            } else if let Some(k) = power_of_ten_decimals(d) {
                nonzero_past = Some(nonzero_past.map_or(k, |j| j.max(k)));
            } else {
                self.unsupported(
                    "multipleOf",
                    p,
                    "not of multipleOf by a decimal other than a power of ten (0.1, 0.01, ...)",
                )?;
            }
        }
        let mut alts = Vec::new();
        // Every integer is a multiple of 10^-k.
        if !frac_only && nonzero_past.is_none() {
            alts.push(self.remainders(m, &divisors, lo.clone(), hi.clone(), &ptr)?);
        }
        if !int_only {
            let int = r"-?(?:0|[1-9][0-9]*)";
            let fraction = match (nonzero_past, decimals) {
                (Some(k), Some(j)) if j <= k => None,
                (Some(k), Some(j)) => {
                    Some(format!(r"\.[0-9]{{{k}}}[0-9]{{0,{}}}[1-9]0*", j - k - 1))
                }
                (Some(k), None) => Some(format!(r"\.[0-9]{{{k}}}[0-9]*[1-9][0-9]*")),
                (None, Some(j)) => Some(format!(r"\.[0-9]{{0,{}}}[1-9]0*", j - 1)),
                (None, None) => Some(r"\.[0-9]*[1-9][0-9]*".to_string()),
            };
            if let Some(fraction) = fraction {
                let numbers = self.cache.re(&format!("{int}{fraction}"));
                alts.push(self.within_range(numbers, lo, hi)?);
            }
        }
        Ok(alt(alts))
    }

    /// The integers that are multiples of `m` and of none of `not`, within the
    /// bounds: an enumeration where both bounds leave few, else a remainder
    /// automaton, whose bounds can only be a sign.
    pub(super) fn remainders(
        &mut self,
        m: i128,
        not: &[i128],
        lo: Bound,
        hi: Bound,
        ptr: &str,
    ) -> Result<Expr> {
        let ptr = ptr.to_string();
        let accepted = |x: i128| x % m == 0 && not.iter().all(|n| x % n != 0);
        let modulus = not.iter().fold(m, |l, n| lcm(l, *n));
        if modulus > MOST_NEGATED_DIVISOR && !not.is_empty() {
            self.unsupported(
                "multipleOf",
                &ptr,
                format!("not of multipleOf with divisors whose least common multiple is above {MOST_NEGATED_DIVISOR}"),
            )?;
            // Lenient: the `not` is left unenforced.
            return self.remainders(m, &[], lo, hi, &ptr);
        }
        let int_lo = lo.as_ref().map(|(d, ex)| {
            let c = d.ceil();
            if *ex && d.is_integer() {
                c.add_int(1)
            } else {
                c
            }
        });
        let int_hi = hi.as_ref().map(|(d, ex)| {
            let f = d.floor();
            if *ex && d.is_integer() {
                f.add_int(-1)
            } else {
                f
            }
        });
        let lo_i = int_lo.as_ref().map(|d| d.as_i128());
        let hi_i = int_hi.as_ref().map(|d| d.as_i128());
        let zero_frac = if self.zero_fraction_is_integer() {
            rep(self.cache.re(r"\.0+"), 0, Some(1))
        } else {
            Hir::empty()
        };
        if let (Some(Some(l)), Some(Some(h))) = (lo_i, hi_i) {
            let first = l.div_euclid(m) + i128::from(l.rem_euclid(m) != 0);
            let last = h.div_euclid(m);
            let count = last - first + 1;
            if count <= 0 {
                return Ok(nothing());
            }
            if count as u64 <= self.opts.limits.max_enumerated_values {
                let mut alts = Vec::new();
                for k in first..=last {
                    let v = k * m;
                    if !accepted(v) {
                        continue;
                    }
                    alts.push(Expr::Regex(Hir::concat(vec![
                        lit(&v.to_string()),
                        zero_frac.clone(),
                    ])));
                    if v == 0 && !self.opts.plain_integers {
                        alts.push(Expr::Regex(Hir::concat(vec![lit("-0"), zero_frac.clone()])));
                    }
                }
                return Ok(alt(alts));
            }
        }
        // Only a sign restriction is expressible with the remainder automaton: a
        // bound must let every positive (or negative) value in, or none, and the
        // smallest positive one accepted is what decides.
        let Some(m) = (1..=modulus).find(|x| accepted(*x)) else {
            return Ok(nothing()); // every multiple of m is one of a `not`
        };
        let allow_zero = lo_i.is_none_or(|l| l.is_some_and(|l| l <= 0))
            && hi_i.is_none_or(|h| h.is_some_and(|h| h >= 0))
            && not.is_empty();
        let allow_pos = match hi_i {
            None => true,
            Some(Some(h)) if h >= m => {
                if hi.is_some() {
                    self.unsupported("maximum", &ptr, "multipleOf together with a large maximum")?;
                }
                true
            }
            Some(Some(h)) => h >= m,
            Some(None) => {
                self.unsupported("maximum", &ptr, "multipleOf together with a huge maximum")?;
                true
            }
        };
        let allow_neg = match lo_i {
            None => true,
            Some(Some(l)) if l <= -m => {
                if lo.is_some() {
                    self.unsupported(
                        "minimum",
                        &ptr,
                        "multipleOf together with a large negative minimum",
                    )?;
                }
                true
            }
            Some(Some(l)) => l <= -m,
            Some(None) => {
                self.unsupported("minimum", &ptr, "multipleOf together with a huge minimum")?;
                true
            }
        };
        // Positive multiples check: lo must be <= m (so every positive multiple is in range).
        if let Some(Some(l)) = lo_i {
            if l > m {
                self.unsupported(
                    "minimum",
                    &ptr,
                    "multipleOf together with a minimum above the divisor",
                )?;
            }
        }
        if let Some(Some(h)) = hi_i {
            if h < -m {
                self.unsupported(
                    "maximum",
                    &ptr,
                    "multipleOf together with a maximum below minus the divisor",
                )?;
            }
        }
        let magnitude = self.positive_remainders(modulus, &accepted)?;
        let mut alts = Vec::new();
        if allow_zero {
            alts.push(Expr::Regex(if self.opts.plain_integers {
                self.cache.re("0")
            } else {
                self.cache.re(r"-?0")
            }));
        }
        if allow_pos {
            alts.push(magnitude.clone());
        }
        if allow_neg {
            alts.push(seq(vec![Expr::literal(b"-"), magnitude]));
        }
        Ok(seq(vec![alt(alts), Expr::Regex(zero_frac)]))
    }

    /// The positive integers whose remainder modulo `m` is `accepted`, canonical
    /// (no leading zero): right-linear rules whose state is the remainder of the
    /// digits read so far, so any number of digits costs `m` rules.
    pub(super) fn positive_remainders(
        &mut self,
        m: i128,
        accepted: &dyn Fn(i128) -> bool,
    ) -> Result<Expr> {
        let m_us = m as usize;
        let base = self.rules.len();
        for r in 0..m_us {
            self.new_rule(format!("remainder {r} of {m}"), Expr::Empty)?;
        }
        for r in 0..m_us {
            let mut by_target: Vec<(usize, Vec<u8>)> = Vec::new();
            for d in 0..10u8 {
                let t = (r * 10 + d as usize) % m_us;
                match by_target.iter_mut().find(|x| x.0 == t) {
                    Some(x) => x.1.push(b'0' + d),
                    None => by_target.push((t, vec![b'0' + d])),
                }
            }
            let mut alts: Vec<Expr> = by_target
                .into_iter()
                .map(|(t, ds)| {
                    seq(vec![
                        Expr::Regex(digit_set(&ds)),
                        Expr::Ref(crate::grammar::RuleId((base + t) as u32)),
                    ])
                })
                .collect();
            if accepted(r as i128) {
                alts.push(Expr::Empty);
            }
            self.rules[base + r].expr = alt(alts);
        }
        let mut starts: Vec<(usize, Vec<u8>)> = Vec::new();
        for d in 1..10u8 {
            let t = d as usize % m_us;
            match starts.iter_mut().find(|x| x.0 == t) {
                Some(x) => x.1.push(b'0' + d),
                None => starts.push((t, vec![b'0' + d])),
            }
        }
        Ok(alt(starts
            .into_iter()
            .map(|(t, ds)| {
                seq(vec![
                    Expr::Regex(digit_set(&ds)),
                    Expr::Ref(crate::grammar::RuleId((base + t) as u32)),
                ])
            })
            .collect()))
    }
}
