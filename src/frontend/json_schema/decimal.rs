//! Exact decimals for number keywords: `minimum: 0.1` must mean 0.1, not the
//! float nearest to it, and `multipleOf`/`enum` checks must not round. A
//! [`Decimal`] is digit strings (never a float), with the few operations bounds
//! need: parsing JSON number texts, ordering, ceiling/floor, +-1.
//!
//! Its own file because keyword collection, number emission, validation and the
//! node vocabulary all hold decimals; none of them owns the arithmetic.

use std::cmp::Ordering;

use serde_json::Value;

/// An exact decimal: sign, integer digits (no leading zeros, `"0"` for zero),
/// fraction digits (no trailing zeros).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decimal {
    pub neg: bool,
    pub int: String,
    pub frac: String,
}

impl Decimal {
    pub fn zero() -> Decimal {
        Decimal {
            neg: false,
            int: "0".into(),
            frac: String::new(),
        }
    }

    /// Parses a JSON number text (exponents shifted in; |exponent| up to 400).
    pub fn parse(text: &str) -> Option<Decimal> {
        let (neg, rest) = match text.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, text),
        };
        let (mant, exp) = match rest.find(['e', 'E']) {
            Some(i) => (&rest[..i], rest[i + 1..].parse::<i64>().ok()?),
            None => (rest, 0),
        };
        if !(-400..=400).contains(&exp) {
            return None;
        }
        let (ip, fp) = match mant.find('.') {
            Some(i) => (&mant[..i], &mant[i + 1..]),
            None => (mant, ""),
        };
        if ip.is_empty()
            || !ip.bytes().all(|b| b.is_ascii_digit())
            || !fp.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let mut digits: String = format!("{ip}{fp}");
        let mut point = ip.len() as i64 + exp; // digits before the point
        if point < 0 {
            digits = format!("{}{}", "0".repeat((-point) as usize), digits);
            point = 0;
        }
        if point as usize > digits.len() {
            digits.push_str(&"0".repeat(point as usize - digits.len()));
        }
        let (i, f) = digits.split_at(point as usize);
        let int = i.trim_start_matches('0');
        let frac = f.trim_end_matches('0');
        let mut d = Decimal {
            neg,
            int: if int.is_empty() {
                "0".into()
            } else {
                int.into()
            },
            frac: frac.into(),
        };
        if d.is_zero() {
            d.neg = false;
        }
        Some(d)
    }

    pub fn from_value(v: &Value) -> Option<Decimal> {
        match v {
            Value::Number(n) => Decimal::parse(&n.to_string()),
            _ => None,
        }
    }

    pub fn is_zero(&self) -> bool {
        self.int == "0" && self.frac.is_empty()
    }

    pub fn is_positive(&self) -> bool {
        !self.neg && !self.is_zero()
    }

    pub fn is_integer(&self) -> bool {
        self.frac.is_empty()
    }

    /// `-self` (zero stays unsigned).
    pub fn negated(&self) -> Decimal {
        let mut d = self.clone();
        d.neg = !d.neg && !d.is_zero();
        d
    }

    /// Magnitude ordering.
    fn cmp_abs(&self, other: &Decimal) -> Ordering {
        self.int
            .len()
            .cmp(&other.int.len())
            .then_with(|| self.int.cmp(&other.int))
            .then_with(|| self.frac.cmp(&other.frac))
    }

    /// Smallest integer >= self (for the positive side: floor + 1 when fractional).
    pub fn ceil(&self) -> Decimal {
        if self.is_integer() {
            return self.clone();
        }
        if self.neg {
            Decimal {
                frac: String::new(),
                ..self.clone()
            }
            .normalized()
        } else {
            Decimal {
                neg: false,
                int: increment(&self.int),
                frac: String::new(),
            }
        }
    }

    /// Largest integer <= self.
    pub fn floor(&self) -> Decimal {
        self.negated().ceil().negated()
    }

    fn normalized(mut self) -> Decimal {
        if self.is_zero() {
            self.neg = false;
        }
        self
    }

    /// `self + k` for an integer `self` and `k` = +-1.
    pub fn add_int(&self, k: i64) -> Decimal {
        // Only used with integers and k = +-1.
        debug_assert!(self.is_integer());
        let up = (k > 0) != self.neg;
        let mut d = self.clone();
        if up {
            d.int = increment(&d.int);
        } else if d.int == "0" {
            d = Decimal {
                neg: k < 0,
                int: "1".into(),
                frac: String::new(),
            };
        } else {
            d.int = decrement(&d.int);
        }
        d.normalized()
    }

    /// As an i128 when it is an integer of at most 30 digits.
    pub fn as_i128(&self) -> Option<i128> {
        if !self.is_integer() || self.int.len() > 30 {
            return None;
        }
        let m: i128 = self.int.parse().ok()?;
        Some(if self.neg { -m } else { m })
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Decimal) -> Ordering {
        match (self.neg, other.neg) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => self.cmp_abs(other),
            (true, true) => other.cmp_abs(self),
        }
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Decimal) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// `digits + 1` for a canonical non-negative integer.
pub(crate) fn increment(digits: &str) -> String {
    let mut v: Vec<u8> = digits.bytes().collect();
    let mut i = v.len();
    loop {
        if i == 0 {
            v.insert(0, b'1');
            break;
        }
        i -= 1;
        if v[i] == b'9' {
            v[i] = b'0';
        } else {
            v[i] += 1;
            break;
        }
    }
    String::from_utf8(v).unwrap()
}

/// `digits - 1` for a positive canonical integer.
pub(crate) fn decrement(digits: &str) -> String {
    let mut v: Vec<u8> = digits.bytes().collect();
    let mut i = v.len();
    while i > 0 {
        i -= 1;
        if v[i] == b'0' {
            v[i] = b'9';
        } else {
            v[i] -= 1;
            break;
        }
    }
    let s = String::from_utf8(v).unwrap();
    let t = s.trim_start_matches('0');
    if t.is_empty() {
        "0".into()
    } else {
        t.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_parse() {
        assert_eq!(
            Decimal::parse("1.50").unwrap(),
            Decimal {
                neg: false,
                int: "1".into(),
                frac: "5".into()
            }
        );
        assert_eq!(
            Decimal::parse("-2.5e1").unwrap(),
            Decimal {
                neg: true,
                int: "25".into(),
                frac: "".into()
            }
        );
        assert_eq!(
            Decimal::parse("1e-3").unwrap(),
            Decimal {
                neg: false,
                int: "0".into(),
                frac: "001".into()
            }
        );
        assert_eq!(Decimal::parse("-0").unwrap(), Decimal::zero());
    }
}
