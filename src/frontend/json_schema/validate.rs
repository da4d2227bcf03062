//! A small validator over normalized nodes, for the places where the compiler must
//! decide a *given* value against constraints: filtering `enum`/`const` values by
//! their sibling keywords, checking declared property names against
//! `propertyNames` and `patternProperties`, and proving `oneOf` branches disjoint.
//!
//! It reuses the compiler's own normalization, so it understands exactly the
//! keywords the compiler does; anything the compiler cannot enforce is an error
//! here too (never a guess).

use serde_json::{Map, Value};

use super::decimal::Decimal;
use super::node::{Node, TypeSet, Witness};
use super::{Result, SchemaCompiler, Subschema};

/// JSON equality as JSON Schema defines it (`1 == 1.0`).
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => {
            let x = Decimal::from_value(a);
            x.is_some() && x == Decimal::from_value(b)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// A text equal for two values exactly when [`json_eq`] holds: numbers as exact
/// decimals (`1.0` is `1`), object keys sorted. Lets `enum` deduplicate in a hash
/// set instead of comparing every pair.
pub(crate) fn json_key(v: &Value) -> String {
    let mut out = String::new();
    write_key(v, &mut out);
    out
}

fn write_key(v: &Value, out: &mut String) {
    match v {
        Value::Number(_) => match Decimal::from_value(v) {
            Some(d) => {
                let sign = if d.neg { "-" } else { "" };
                out.push_str(&format!("#{sign}{}.{}", d.int, d.frac));
            }
            // Not comparable as a decimal: equal only to itself.
            None => out.push_str(&format!("#?{v}")),
        },
        Value::Array(items) => {
            out.push('[');
            for item in items {
                write_key(item, out);
                out.push(',');
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for k in keys {
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_key(&map[k], out);
                out.push(',');
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// `x mod m == 0` for exact decimals.
fn is_multiple(x: &Decimal, m: &Decimal) -> Option<bool> {
    let scale = x.frac.len().max(m.frac.len());
    let to_int = |d: &Decimal| -> Option<u128> {
        let digits = format!("{}{}{}", d.int, d.frac, "0".repeat(scale - d.frac.len()));
        digits.parse::<u128>().ok()
    };
    let (xi, mi) = (to_int(x)?, to_int(m)?);
    if mi == 0 {
        return None;
    }
    Some(xi % mi == 0)
}

impl<'a> SchemaCompiler<'a> {
    /// Whether `v` is valid against the conjunction `conj`.
    pub(crate) fn validate_conj(&mut self, v: &Value, conj: &[Subschema<'a>]) -> Result<bool> {
        let nodes = self.normalize(conj)?;
        for n in &nodes {
            if self.node_accepts(n, v)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether `v` is valid against `s`, normalizing `s` as the constant `v`: a
    /// `not` inside then sees a single value and decides it by validation too
    /// (see [`Self::negate`]), so no keyword needs a negation written for it.
    pub(crate) fn value_valid(&mut self, v: &'a Value, s: &Subschema<'a>) -> Result<bool> {
        let mut node = Node::any();
        node.enums.push(vec![v]);
        self.collect(s, &mut node, 0)?;
        let mut nodes = Vec::new();
        self.expand(node, &mut nodes, 0)?;
        for n in &nodes {
            if self.node_accepts(n, v)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether `v` satisfies every constraint of `n`.
    pub(crate) fn node_accepts(&mut self, n: &Node<'a>, v: &Value) -> Result<bool> {
        for list in &n.enums {
            if !list.iter().any(|x| json_eq(x, v)) {
                return Ok(false);
            }
        }
        if n.excluded.iter().any(|x| json_eq(x, v)) {
            return Ok(false);
        }
        self.node_accepts_beside_enums(n, v)
    }

    /// Whether `v` satisfies every constraint of `n` but `enum`/`const` and their
    /// exclusions (for a value taken from those lists: checking it against them
    /// again would make a 1,000-value enum quadratic).
    pub(crate) fn node_accepts_beside_enums(&mut self, n: &Node<'a>, v: &Value) -> Result<bool> {
        let t = TypeSet::of_value(v);
        if !n.types.intersects(t) {
            return Ok(false);
        }
        match v {
            Value::Number(_) => self.number_accepted(n, v, t),
            Value::String(s) => self.string_accepted(n, s),
            Value::Array(items) => self.array_accepted(n, items),
            Value::Object(map) => self.object_accepted(n, map),
            _ => Ok(true),
        }
    }

    /// [`Self::node_accepts_beside_enums`] for a number.
    fn number_accepted(&mut self, n: &Node<'a>, v: &Value, t: TypeSet) -> Result<bool> {
        let Some(d) = Decimal::from_value(v) else {
            return Ok(false);
        };
        if !n.num.bounds_hold(&d) {
            return Ok(false);
        }
        let divisors = (n.num.multiple_of.iter().map(|d| (d, true)))
            .chain(n.num.not_multiple_of.iter().map(|d| (d, false)));
        for ((m, ptr), wanted) in divisors.collect::<Vec<_>>() {
            match is_multiple(&d, m) {
                Some(multiple) if multiple == wanted => {}
                Some(_) => return Ok(false),
                None => {
                    self.unsupported("multipleOf", ptr, "value too large to check")?;
                }
            }
        }
        if t == TypeSet::INTEGER && !n.types.intersects(TypeSet::INTEGER)
            || t == TypeSet::FRACTION && !n.types.intersects(TypeSet::FRACTION)
        {
            return Ok(false);
        }
        Ok(true)
    }

    /// [`Self::node_accepts_beside_enums`] for a string.
    pub(crate) fn string_accepted(&mut self, n: &Node<'a>, s: &str) -> Result<bool> {
        let len = s.chars().count() as u64;
        if len < n.str.min || n.str.max.is_some_and(|m| len > m) {
            return Ok(false);
        }
        for (p, ptr) in n.str.patterns.clone() {
            if !self.pattern_matches(&p, &ptr, s)? {
                return Ok(false);
            }
        }
        for (f, ptr) in n.str.formats.clone() {
            if self.format_matches(&f, &ptr, s)? == Some(false) {
                return Ok(false);
            }
        }
        for (p, ptr) in n.str.not_patterns.clone() {
            if self.pattern_matches(&p, &ptr, s)? {
                return Ok(false);
            }
        }
        for (f, ptr) in n.str.not_formats.clone() {
            if self.format_matches(&f, &ptr, s)? == Some(true) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Whether `s` has format `f` (`None`: the format is not supported, and the
    /// keyword reported as such).
    fn format_matches(&mut self, f: &str, ptr: &str, s: &str) -> Result<Option<bool>> {
        match super::format::format_hir(f, self.cache) {
            Some(h) => {
                let re = super::pattern::build_matcher(&h)
                    .map_err(|e| self.limit(ptr, e.to_string()))?;
                Ok(Some(re.is_match(s.as_bytes())))
            }
            None => {
                self.unsupported("format", ptr, format!("format {f:?} is not supported"))?;
                Ok(None)
            }
        }
    }

    /// [`Self::node_accepts_beside_enums`] for an array.
    fn array_accepted(&mut self, n: &Node<'a>, items: &[Value]) -> Result<bool> {
        let a = &n.arr;
        let len = items.len() as u64;
        if len < a.min || a.max.is_some_and(|m| len > m) {
            return Ok(false);
        }
        let parts = a.parts.clone();
        for (i, item) in items.iter().enumerate() {
            let conj: Vec<Subschema<'a>> = parts.iter().filter_map(|p| p.item(i)).collect();
            if !conj.is_empty() && !self.validate_conj(item, &conj)? {
                return Ok(false);
            }
        }
        for (c, cmin, cmax, _) in a.contains.clone() {
            let mut count = 0u64;
            for item in items {
                if self.validate_conj(item, std::slice::from_ref(&c))? {
                    count += 1;
                }
            }
            if count < cmin || cmax.is_some_and(|m| count > m) {
                return Ok(false);
            }
        }
        if a.unique.is_some() {
            for i in 0..items.len() {
                for j in i + 1..items.len() {
                    if json_eq(&items[i], &items[j]) {
                        return Ok(false);
                    }
                }
            }
        }
        Ok(true)
    }

    /// [`Self::node_accepts_beside_enums`] for an object.
    fn object_accepted(&mut self, n: &Node<'a>, map: &Map<String, Value>) -> Result<bool> {
        let o = n.obj.clone();
        let len = map.len() as u64;
        if len < o.min || o.max.is_some_and(|m| len > m) {
            return Ok(false);
        }
        if o.required.iter().any(|r| !map.contains_key(r))
            || o.forbidden.iter().any(|f| map.contains_key(f))
        {
            return Ok(false);
        }
        for (k, x) in map {
            for ns in &o.names {
                if !self.validate_conj(&Value::String(k.clone()), std::slice::from_ref(ns))? {
                    return Ok(false);
                }
            }
            let mut conj = Vec::new();
            for part in &o.parts {
                let mut matched = false;
                if let Some((_, s)) = part.props.iter().find(|(p, _)| p == k) {
                    conj.push(s.clone());
                    matched = true;
                }
                for (pat, s, pptr) in &part.patterns {
                    if self.pattern_matches(pat, pptr, k)? {
                        conj.push(s.clone());
                        matched = true;
                    }
                }
                if !matched {
                    match &part.additional {
                        Some(a) => conj.push(a.clone()),
                        None if self.opts.strict => return Ok(false),
                        None => {}
                    }
                }
            }
            if !conj.is_empty() && !self.validate_conj(x, &conj)? {
                return Ok(false);
            }
        }
        for w in &o.witnesses {
            let mut found = false;
            for (k, x) in map {
                if self.witness_name(w, k)? && self.validate_conj(x, &w.values)? {
                    found = true;
                    break;
                }
            }
            if !found {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Whether a property named `name` may be `w`'s.
    pub(crate) fn witness_name(&mut self, w: &Witness<'a>, name: &str) -> Result<bool> {
        if w.outside.iter().any(|k| k == name) {
            return Ok(false);
        }
        for (p, ptr) in &w.matching {
            if !self.pattern_matches(p, ptr, name)? {
                return Ok(false);
            }
        }
        for (p, ptr) in &w.not_matching {
            if self.pattern_matches(p, ptr, name)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
