//! Numbers: `minimum`/`maximum`/`exclusive*` and `multipleOf` as exact regexes over
//! JSON number texts.
//!
//! Bounds are kept as exact decimals ([`Decimal`], digit strings, never floats), so
//! `exclusiveMinimum: 0.1` and `maximum: -2.5` are exact. A range is split by sign
//! (`-0` is zero), then by integer part: integer parts strictly inside the range take
//! any fraction, the boundary integer parts take a fraction range built digit by
//! digit ([`frac_nonempty`]). Integer ranges are the classic length-split digit
//! construction, linear in the number of digits. Bounded numbers are written without
//! an exponent (an over-constraint: `1e2` is rejected where `100` is accepted),
//! except on a side of zero the bounds take whole (`minimum: 0` takes `1e-06`:
//! the sign decides) and single `enum`/`const` values, which also take exponent spellings;
//! unbounded numbers accept the JSON number grammar up to what an f64 holds (at most
//! 200 integer digits, exponents up to 99, or down to -999; 300 digits for integers). Integers accept a zero
//! fraction (`1.0` is an integer). `multipleOf` by an integer is a remainder
//! automaton written as right-linear rules (no bounds), or an enumeration (both
//! bounds, few values); `multipleOf` by `10^-k` limits the decimals. A negated
//! `multipleOf` (from `not`) is the same remainder automaton with the other
//! remainders accepting, beside the numbers with a fraction where the type allows.

use std::cmp::Ordering;

use crate::grammar::Expr;
use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange, Hir, Repetition};

use super::decimal::{decrement, increment, Decimal};
use super::node::{Node, TypeSet};
use super::{alt, seq, PatternCache, Result, SchemaCompiler};

mod multiple_of;

fn lit(s: &str) -> Hir {
    Hir::literal(s.as_bytes())
}

fn digits(lo: u8, hi: u8) -> Hir {
    Hir::class(Class::Bytes(ClassBytes::new([ClassBytesRange::new(
        lo, hi,
    )])))
}

fn digit_set(ds: &[u8]) -> Hir {
    Hir::class(Class::Bytes(ClassBytes::new(
        ds.iter().map(|&d| ClassBytesRange::new(d, d)),
    )))
}

fn rep(h: Hir, min: u32, max: Option<u32>) -> Hir {
    Hir::repetition(Repetition {
        min,
        max,
        greedy: true,
        sub: Box::new(h),
    })
}

fn any_digits(min: u32, max: Option<u32>) -> Hir {
    rep(digits(b'0', b'9'), min, max)
}

/// Same-length digit strings in `[a, b]` (inclusive; `a <= b`).
fn fixed(a: &[u8], b: &[u8]) -> Hir {
    if a.is_empty() {
        return Hir::empty();
    }
    if a[0] == b[0] {
        return Hir::concat(vec![digit_set(&a[..1]), fixed(&a[1..], &b[1..])]);
    }
    let n = (a.len() - 1) as u32;
    let low_full = a[1..].iter().all(|&c| c == b'0');
    let high_full = b[1..].iter().all(|&c| c == b'9');
    let mut alts = Vec::new();
    let mid_lo = if low_full { a[0] } else { a[0] + 1 };
    let mid_hi = if high_full { b[0] } else { b[0] - 1 };
    if !low_full {
        let nines = vec![b'9'; a.len() - 1];
        alts.push(Hir::concat(vec![
            digit_set(&a[..1]),
            fixed(&a[1..], &nines),
        ]));
    }
    if mid_lo <= mid_hi {
        alts.push(Hir::concat(vec![
            digits(mid_lo, mid_hi),
            any_digits(n, Some(n)),
        ]));
    }
    if !high_full {
        let zeros = vec![b'0'; b.len() - 1];
        alts.push(Hir::concat(vec![
            digit_set(&b[..1]),
            fixed(&zeros, &b[1..]),
        ]));
    }
    Hir::alternation(alts)
}

fn cmp_digits(a: &str, b: &str) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// Canonical non-negative integer texts in `[lo, hi]` (`hi: None` = unbounded).
fn int_range(lo: &str, hi: Option<&str>) -> Option<Hir> {
    if hi.is_some_and(|h| cmp_digits(lo, h).is_gt()) {
        return None;
    }
    let ll = lo.len();
    let mut alts = Vec::new();
    let first_of = |n: usize| {
        if n == 1 {
            "0".to_string()
        } else {
            format!("1{}", "0".repeat(n - 1))
        }
    };
    match hi {
        Some(h) => {
            let hl = h.len();
            if ll == hl {
                alts.push(fixed(lo.as_bytes(), h.as_bytes()));
            } else {
                alts.push(fixed(lo.as_bytes(), "9".repeat(ll).as_bytes()));
                if hl > ll + 1 {
                    alts.push(Hir::concat(vec![
                        digits(b'1', b'9'),
                        any_digits(ll as u32, Some(hl as u32 - 2)),
                    ]));
                }
                alts.push(fixed(first_of(hl).as_bytes(), h.as_bytes()));
            }
        }
        None => {
            alts.push(fixed(lo.as_bytes(), "9".repeat(ll).as_bytes()));
            alts.push(Hir::concat(vec![
                digits(b'1', b'9'),
                any_digits(ll as u32, None),
            ]));
        }
    }
    Some(Hir::alternation(alts))
}

/// What the lower bound still asks of the fraction digits not read yet.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum FractionLow<'s> {
    Free,
    Bound(&'s [u8], bool),
    /// Some later digit must be non-zero.
    ZeroStrict,
}

/// What the upper bound still asks of the fraction digits not read yet.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum FractionHigh<'s> {
    Free,
    Bound(&'s [u8], bool),
    /// Every later digit must be zero.
    Zero,
}

fn low_start(f: &[u8], strict: bool) -> FractionLow<'_> {
    match (f.is_empty(), strict) {
        (true, false) => FractionLow::Free,
        (true, true) => FractionLow::ZeroStrict,
        (false, _) => FractionLow::Bound(f, strict),
    }
}

fn high_start(f: &[u8], strict: bool) -> Option<FractionHigh<'_>> {
    match (f.is_empty(), strict) {
        (true, false) => Some(FractionHigh::Zero),
        (true, true) => None,
        (false, _) => Some(FractionHigh::Bound(f, strict)),
    }
}

fn step_low(l: FractionLow<'_>, c: u8) -> Option<FractionLow<'_>> {
    match l {
        FractionLow::Free => Some(FractionLow::Free),
        FractionLow::ZeroStrict => Some(if c == b'0' {
            FractionLow::ZeroStrict
        } else {
            FractionLow::Free
        }),
        FractionLow::Bound(s, strict) => match c.cmp(&s[0]) {
            Ordering::Greater => Some(FractionLow::Free),
            Ordering::Less => None,
            Ordering::Equal => Some(low_start(&s[1..], strict)),
        },
    }
}

fn step_high(h: FractionHigh<'_>, c: u8) -> Option<FractionHigh<'_>> {
    match h {
        FractionHigh::Free => Some(FractionHigh::Free),
        FractionHigh::Zero => (c == b'0').then_some(FractionHigh::Zero),
        FractionHigh::Bound(s, strict) => match c.cmp(&s[0]) {
            Ordering::Less => Some(FractionHigh::Free),
            Ordering::Greater => None,
            Ordering::Equal => high_start(&s[1..], strict),
        },
    }
}

/// Non-empty fraction digit strings `F` with `0.F` within the bounds.
fn frac_nonempty(lo: FractionLow<'_>, hi: FractionHigh<'_>) -> Option<Hir> {
    match (lo, hi) {
        (FractionLow::Free, FractionHigh::Free) => return Some(any_digits(1, None)),
        (FractionLow::Free, FractionHigh::Zero) => return Some(rep(lit("0"), 1, None)),
        (FractionLow::ZeroStrict, FractionHigh::Free) => {
            return Some(Hir::concat(vec![
                rep(lit("0"), 0, None),
                digits(b'1', b'9'),
                any_digits(0, None),
            ]))
        }
        (FractionLow::ZeroStrict, FractionHigh::Zero) => return None,
        _ => {}
    }
    let mut groups: Vec<(FractionLow<'_>, FractionHigh<'_>, Vec<u8>)> = Vec::new();
    for c in b'0'..=b'9' {
        let (Some(l), Some(h)) = (step_low(lo, c), step_high(hi, c)) else {
            continue;
        };
        match groups.iter_mut().find(|g| g.0 == l && g.1 == h) {
            Some(g) => g.2.push(c),
            None => groups.push((l, h, vec![c])),
        }
    }
    let mut alts = Vec::new();
    for (l, h, ds) in groups {
        let empty_ok = l == FractionLow::Free;
        let rest = frac_nonempty(l, h);
        let tail = match (empty_ok, rest) {
            (true, Some(r)) => rep(r, 0, Some(1)),
            (true, None) => Hir::empty(),
            (false, Some(r)) => r,
            (false, None) => continue,
        };
        alts.push(Hir::concat(vec![digit_set(&ds), tail]));
    }
    (!alts.is_empty()).then(|| Hir::alternation(alts))
}

/// `I` then an optional fraction, for fraction bounds `lo`, `hi`.
fn with_fraction(int: Hir, lo: FractionLow<'_>, hi: Option<FractionHigh<'_>>) -> Option<Hir> {
    let hi = hi?;
    let empty_ok = lo == FractionLow::Free;
    let frac = frac_nonempty(lo, hi).map(|f| Hir::concat(vec![lit("."), f]));
    Some(match (empty_ok, frac) {
        (true, Some(f)) => Hir::concat(vec![int, rep(f, 0, Some(1))]),
        (true, None) => int,
        (false, Some(f)) => Hir::concat(vec![int, f]),
        (false, None) => return None,
    })
}

/// Non-negative decimals `x` with `lo <(=) x <(=) hi`, without exponent.
fn positive_range(lo: &Decimal, lo_strict: bool, hi: Option<(&Decimal, bool)>) -> Option<Hir> {
    if let Some((h, hs)) = hi {
        match lo.cmp(h) {
            Ordering::Greater => return None,
            Ordering::Equal if lo_strict || hs => return None,
            _ => {}
        }
    }
    let mut alts = Vec::new();
    let lo_frac = low_start(lo.frac.as_bytes(), lo_strict);
    match hi {
        None => {
            alts.extend(with_fraction(
                lit(&lo.int),
                lo_frac,
                Some(FractionHigh::Free),
            ));
            if let Some(r) = int_range(&increment(&lo.int), None) {
                alts.extend(with_fraction(
                    r,
                    FractionLow::Free,
                    Some(FractionHigh::Free),
                ));
            }
        }
        Some((h, hs)) => {
            let hi_frac = high_start(h.frac.as_bytes(), hs);
            if lo.int == h.int {
                alts.extend(with_fraction(lit(&lo.int), lo_frac, hi_frac));
            } else {
                alts.extend(with_fraction(
                    lit(&lo.int),
                    lo_frac,
                    Some(FractionHigh::Free),
                ));
                let next = increment(&lo.int);
                if cmp_digits(&next, &h.int).is_lt() {
                    if let Some(r) = int_range(&next, Some(&decrement(&h.int))) {
                        alts.extend(with_fraction(
                            r,
                            FractionLow::Free,
                            Some(FractionHigh::Free),
                        ));
                    }
                }
                alts.extend(with_fraction(lit(&h.int), FractionLow::Free, hi_frac));
            }
        }
    }
    (!alts.is_empty()).then(|| Hir::alternation(alts))
}

/// A bound of a number range, and whether it is exclusive (`None`: unbounded).
type Bound = Option<(Decimal, bool)>;

/// Exponent spellings of a literal (`enum`/`const`) number are accepted for every
/// mantissa with at most this many padding zeros: `7` as `7e0`, `0.7e1`, `70e-1`,
/// `0.007e3`, `700E-2`, not `7000e-3` (an over-constraint; normalized scientific
/// forms are always inside). Each zero of padding costs two alternatives per value,
/// which large numeric enums pay in compile time.
const LITERAL_EXPONENT_PADDING: i64 = 2;

/// `[eE]` followed by every spelling of the exponent `e`.
/// The exponent of an unbounded number: up to 99, down to -999 (with at most 200
/// integer digits, what an f64 holds).
const EXPONENT: &str = r"[eE](?:\+?[0-9]{1,2}|-[0-9]{1,3})";

/// Numbers with an exponent on a side of zero that the bounds take whole: with
/// `minimum: 0` every non-negative number is in range, so `1e-06` is too, and the
/// sign alone decides (exactly). Mantissa and exponent as in the unbounded number
/// grammar, so the value stays within an f64. Zero with an exponent (`0e5`, `-0e1`)
/// wherever zero is in range.
fn sign_only_exponent_spellings(
    lo: Option<&(Decimal, bool)>,
    hi: Option<&(Decimal, bool)>,
    cache: &PatternCache,
) -> Vec<Hir> {
    let nonzero = cache.re(&format!(
        r"(?:[1-9][0-9]{{0,199}}(?:\.[0-9]+)?|0\.[0-9]*[1-9][0-9]*){EXPONENT}"
    ));
    let mut out = Vec::new();
    // Every positive number: no upper bound, lower bound at or below zero.
    if hi.is_none() && lo.is_none_or(|(d, _)| d.neg || d.is_zero()) {
        out.push(nonzero.clone());
    }
    // Every negative number: no lower bound, upper bound at or above zero.
    if lo.is_none() && hi.is_none_or(|(d, _)| !d.neg) {
        out.push(Hir::concat(vec![lit("-"), nonzero]));
    }
    let zero_in = lo.is_none_or(|(d, s)| d.neg || d.is_zero() && !s)
        && hi.is_none_or(|(d, s)| !(d.neg || d.is_zero() && *s));
    if zero_in {
        out.push(cache.re(&format!(r"-?0(?:\.0+)?{EXPONENT}")));
    }
    out
}

fn exponent_spelling(e: i64, cache: &PatternCache) -> Hir {
    let marker = digit_set(b"eE");
    let zeros = rep(lit("0"), 0, None);
    match e.cmp(&0) {
        Ordering::Equal => Hir::concat(vec![marker, cache.re(r"[+\-]?0+")]),
        Ordering::Greater => Hir::concat(vec![
            marker,
            rep(lit("+"), 0, Some(1)),
            zeros,
            lit(&e.to_string()),
        ]),
        Ordering::Less => Hir::concat(vec![marker, lit("-"), zeros, lit(&(-e).to_string())]),
    }
}

impl<'a> SchemaCompiler<'a> {
    pub(crate) fn emit_number(&mut self, node: &Node<'a>) -> Result<Expr> {
        // Draft 4: `1.0` is no integer by type, but it is a multiple of 1.
        let fractions =
            self.draft == super::Draft::Draft4 && node.types.intersects(TypeSet::FRACTION);
        let saved = std::mem::replace(&mut self.integral_fractions, fractions);
        let out = self.emit_number_within(node);
        self.integral_fractions = saved;
        out
    }

    fn emit_number_within(&mut self, node: &Node<'a>) -> Result<Expr> {
        let mut int_only = !node.types.intersects(TypeSet::FRACTION);
        let frac_only = !node.types.intersects(TypeSet::INTEGER);
        let mut int_multiple: Option<i128> = None;
        let mut decimals: Option<usize> = None;
        for (m, ptr) in &node.num.multiple_of {
            if m.is_integer() {
                let Some(k) = m.as_i128().filter(|k| *k <= 1_000_000) else {
                    self.unsupported(
                        "multipleOf",
                        ptr,
                        "integer divisors above 1000000 are not supported",
                    )?;
                    continue;
                };
                int_only = true;
                int_multiple = Some(match int_multiple {
                    None => k,
                    Some(j) => {
                        let l = lcm(j, k);
                        if l > 1_000_000 {
                            self.unsupported("multipleOf", ptr, "combined divisors above 1000000")?;
                            j
                        } else {
                            l
                        }
                    }
                });
            } else if let Some(k) = power_of_ten_decimals(m) {
                decimals = Some(decimals.map_or(k, |d| d.min(k)));
            } else {
                self.unsupported(
                    "multipleOf",
                    ptr,
                    "only integers and powers of ten (0.1, 0.01, ...) are supported",
                )?;
            }
        }
        if int_only && frac_only {
            return Ok(super::nothing());
        }
        let (mut lo, mut hi) = (node.num.lo.clone(), node.num.hi.clone());
        if !node.num.not_multiple_of.is_empty() {
            let m = int_multiple.unwrap_or(1);
            return self.no_multiples(node, m, decimals, int_only, frac_only, lo, hi);
        }
        if let Some(m) = int_multiple.filter(|m| *m > 1) {
            // Remainder automata take no upper bound this large: left unbounded.
            let ptr = node.num.multiple_of[0].1.clone();
            return self.remainders(m, &[], lo, hi, &ptr);
        }
        if int_only && self.opts.plain_integers {
            // Generation: an unbounded side stops at I-JSON's exact range, where every
            // consumer (and every f64-based validator) reads the integer exactly.
            lo = lo.or_else(|| Decimal::parse("-9007199254740991").map(|d| (d, false)));
            hi = hi.or_else(|| Decimal::parse("9007199254740991").map(|d| (d, false)));
        }
        if frac_only {
            if decimals.is_some() {
                self.unsupported(
                    "not",
                    "",
                    "non-integer numbers (not: {type: integer}) with multipleOf",
                )?;
            }
            let fractions = self.cache.re(r"-?(?:0|[1-9][0-9]*)\.[0-9]*[1-9][0-9]*");
            return self.within_range(fractions, lo, hi);
        }
        if let Some(k) = decimals.filter(|_| !int_only) {
            let multiples = self
                .cache
                .re(&format!(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]{{1,{k}}}0*)?"));
            return self.within_range(multiples, lo, hi);
        }
        if lo.is_none() && hi.is_none() {
            return Ok(Expr::Regex(
                if int_only && !self.zero_fraction_is_integer() {
                    self.cache.re(r"-?(?:0|[1-9][0-9]{0,299})")
                } else if int_only {
                    self.cache.re(r"-?(?:0|[1-9][0-9]{0,299})(?:\.0+)?")
                } else {
                    self.cache.re(&format!(
                        r"-?(?:0|[1-9][0-9]{{0,199}})(?:\.[0-9]+)?(?:{EXPONENT})?"
                    ))
                },
            ));
        }
        self.number_range(lo, hi, int_only)
    }

    /// The numbers `numbers` matches that lie within the bounds: the product of
    /// its automaton and the range's (an exponent spelling the range refuses is
    /// refused: an over-constraint, as for any bounded number).
    fn within_range(&mut self, numbers: Hir, lo: Bound, hi: Bound) -> Result<Expr> {
        if lo.is_none() && hi.is_none() {
            return Ok(Expr::Regex(numbers));
        }
        let range = self.number_range(lo, hi, false)?;
        Ok(match super::string::expr_hir(&range) {
            Some(range) => Expr::Intersection(Box::new(crate::grammar::Intersection {
                regexes: vec![range, numbers],
                negated: Vec::new(),
            })),
            None => super::nothing(), // a range is always a regex
        })
    }

    /// One number value (`enum`/`const`) in every spelling: plain (`7`, `7.0`) and
    /// with an exponent (`70e-1`, `0.7E+1`; mantissas with up to
    /// [`LITERAL_EXPONENT_PADDING`] padding zeros), except integers under
    /// `plain_integers`, which are written plain.
    pub(crate) fn number_literal(&mut self, d: &Decimal) -> Result<Expr> {
        let int_only = self.opts.plain_integers && d.is_integer();
        let plain =
            self.number_range(Some((d.clone(), false)), Some((d.clone(), false)), int_only)?;
        if int_only || !self.exponent_spellings {
            return Ok(plain);
        }
        if d.is_zero() {
            // Zero times any power of ten.
            let exponent = rep(self.cache.re(r"[eE][+\-]?[0-9]+"), 0, Some(1));
            return Ok(seq(vec![plain, Expr::Regex(exponent)]));
        }
        // d = 0.S x 10^q, S the digits from the first non-zero one.
        let digits = format!("{}{}", d.int, d.frac);
        let significant = digits.trim_start_matches('0').len() as i64;
        let q = d.int.len() as i64 - (digits.len() as i64 - significant);
        let frac = if d.frac.is_empty() { "0" } else { &d.frac };
        let mut alts = Vec::new();
        let pad = LITERAL_EXPONENT_PADDING;
        for e in q - significant - pad..=q + pad {
            // The mantissa d x 10^-e: k integer digits for e = q - k, else 0.0..0S.
            let Some(m) = Decimal::parse(&format!("{}.{frac}e{}", d.int, -e)) else {
                continue;
            };
            if let Some(h) = positive_range(&m, false, Some((&m, false))) {
                alts.push(Hir::concat(vec![h, exponent_spelling(e, self.cache)]));
            }
        }
        let mut exponent_forms = Hir::alternation(alts);
        if d.neg {
            exponent_forms = Hir::concat(vec![lit("-"), exponent_forms]);
        }
        Ok(alt(vec![plain, Expr::Regex(exponent_forms)]))
    }

    /// Numbers in the range; `int_only` restricts to integers (zero fraction allowed).
    pub(crate) fn number_range(&mut self, lo: Bound, hi: Bound, int_only: bool) -> Result<Expr> {
        let (lo, hi) = if int_only {
            let lo = lo.map(|(d, ex)| {
                let c = d.ceil();
                let c = if ex && d.is_integer() {
                    c.add_int(1)
                } else {
                    c
                };
                (c, false)
            });
            let hi = hi.map(|(d, ex)| {
                let f = d.floor();
                let f = if ex && d.is_integer() {
                    f.add_int(-1)
                } else {
                    f
                };
                (f, false)
            });
            (lo, hi)
        } else {
            (lo, hi)
        };
        let side = |lo: &Decimal, ls: bool, hi: Option<(&Decimal, bool)>| -> Option<Hir> {
            if int_only {
                int_range(&lo.int, hi.map(|(h, _)| h.int.as_str()))
            } else {
                positive_range(lo, ls, hi)
            }
        };
        let mut alts = Vec::new();
        // x >= 0
        let pos_hi = hi.as_ref().map(|(d, s)| (d, *s));
        let pos_ok = pos_hi.is_none_or(|(d, s)| !(d.neg || d.is_zero() && s));
        if pos_ok {
            let (plo, ps) = match &lo {
                Some((d, s)) if !d.neg => (d.clone(), *s),
                _ => (Decimal::zero(), false),
            };
            if let Some(h) = side(&plo, ps, pos_hi) {
                alts.push(h);
            }
        }
        // x <= 0, as -y with y >= 0
        let neg_ok = lo
            .as_ref()
            .is_none_or(|(d, s)| d.neg || (d.is_zero() && !s));
        if neg_ok {
            let (mut ylo, ys) = match &hi {
                Some((d, s)) if d.neg || d.is_zero() => (d.negated(), *s),
                _ => (Decimal::zero(), false),
            };
            // Generation writes zero once, unsigned: `-0` is valid JSON (and equal
            // to 0), but no writer's choice. Zero, when in range, is on the x >= 0 side.
            if int_only && self.opts.plain_integers && ylo.is_zero() {
                ylo = ylo.add_int(1);
            }
            let yhi = lo.as_ref().map(|(d, s)| (d.negated(), *s));
            if let Some(h) = side(&ylo, ys, yhi.as_ref().map(|(d, s)| (d, *s))) {
                alts.push(Hir::concat(vec![lit("-"), h]));
            }
        }
        // Closed ranges (and single values, which `number_literal` spells with
        // exponents itself) keep the plain spellings only.
        if !int_only && (lo.is_none() || hi.is_none()) {
            alts.extend(sign_only_exponent_spellings(
                lo.as_ref(),
                hi.as_ref(),
                self.cache,
            ));
        }
        if alts.is_empty() {
            return Ok(super::nothing());
        }
        let mut h = Hir::alternation(alts);
        if int_only && self.zero_fraction_is_integer() {
            h = Hir::concat(vec![h, rep(self.cache.re(r"\.0+"), 0, Some(1))]);
        }
        Ok(Expr::Regex(h))
    }
}

/// `k` where `d` is `10^-k` (`0.01` -> 2).
fn power_of_ten_decimals(d: &Decimal) -> Option<usize> {
    let is_power =
        d.int == "0" && d.frac.bytes().rev().skip(1).all(|c| c == b'0') && d.frac.ends_with('1');
    is_power.then_some(d.frac.len())
}

fn gcd(a: i128, b: i128) -> i128 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn lcm(a: i128, b: i128) -> i128 {
    a / gcd(a, b) * b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anchored(h: &Hir) -> regex_automata::meta::Regex {
        regex_automata::meta::Regex::builder()
            .syntax(regex_automata::util::syntax::Config::new().utf8(false))
            .build_from_hir(&Hir::concat(vec![
                Hir::look(regex_syntax::hir::Look::Start),
                h.clone(),
                Hir::look(regex_syntax::hir::Look::End),
            ]))
            .unwrap()
    }

    #[test]
    fn ranges_agree_with_arithmetic() {
        let bounds = [
            "-12.5", "-1", "-0.05", "0", "0.1", "0.75", "1", "3", "9.99", "10", "100.5", "1234",
        ];
        let samples: Vec<String> = {
            let mut v = Vec::new();
            for i in (-1300i64..=1300).step_by(23) {
                v.push(format!("{}", i as f64 / 1.0));
                v.push(format!("{:.2}", i as f64 / 100.0));
                v.push(format!("{:.1}", i as f64 / 10.0));
                v.push(format!("{:.3}", i as f64 / 997.0));
            }
            v.push("-0".into());
            v.push("-0.0".into());
            v.push("0.10".into());
            v
        };
        for lo in bounds.iter().map(Some).chain([None]) {
            for hi in bounds.iter().map(Some).chain([None]) {
                for (ls, hs) in [(false, false), (true, false), (false, true), (true, true)] {
                    for int_only in [false, true] {
                        let lb = lo.map(|l| (Decimal::parse(l).unwrap(), ls));
                        let hb = hi.map(|h| (Decimal::parse(h).unwrap(), hs));
                        let opts = super::super::JsonSchemaOptions::default();
                        let mut c = SchemaCompiler::for_tests(&opts);
                        let e = c.number_range(lb.clone(), hb.clone(), int_only).unwrap();
                        let Expr::Regex(h) = e else { panic!() };
                        let re = anchored(&h);
                        for s in &samples {
                            let d = Decimal::parse(s).unwrap();
                            let mut want =
                                lb.as_ref()
                                    .is_none_or(|(l, x)| if *x { d > *l } else { d >= *l })
                                    && hb
                                        .as_ref()
                                        .is_none_or(|(h, x)| if *x { d < *h } else { d <= *h });
                            if int_only {
                                want &= d.is_integer();
                            }
                            assert_eq!(
                                re.is_match(s.as_bytes()),
                                want,
                                "{s} in {lo:?}({ls}) .. {hi:?}({hs}) int_only={int_only}"
                            );
                        }
                    }
                }
            }
        }
    }
}
