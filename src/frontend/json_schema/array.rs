//! Arrays: `prefixItems`/`items` (and draft-7 array `items` + `additionalItems`),
//! `minItems`/`maxItems`, `contains` in its common form.
//!
//! Position `i` of the array gets the conjunction of what each merged schema part
//! says about position `i` (its prefix entry, else its rest schema). The prefix is a
//! nested chain of optional items; the rest is one `Repeat` counter with the item
//! bounds shifted by the prefix length, so `maxItems: 1000000` stays a counter.
//! `contains` alone (one occurrence demanded, no prefix, no item-count bound) is
//! `[X*, X&C, X*]`; with counts, a prefix or bounds, items are counted
//! ([`super::contains`]). `uniqueItems` is exact where items
//! take few values (enums, booleans, `null`): the array is a permutation of those
//! values, each at most once, which the parser tracks like an object's members;
//! and where it is vacuous (at most one item). Both are reported otherwise.

use crate::grammar::{Expr, Permutation};
use serde_json::Value;

use super::contains::Counted;
use super::node::{Node, TypeSet, FALSE, NULL, TRUE};
use super::validate::{json_eq, json_key};
use super::xml::{ParameterStyle, MINIMAX_M3_TAG};
use super::{nothing, seq, Result, SchemaCompiler, Subschema};

impl<'a> SchemaCompiler<'a> {
    pub(crate) fn emit_array(&mut self, node: &Node<'a>) -> Result<Expr> {
        let a = &node.arr;
        let (min, mut max) = (a.min, a.max);
        if max.is_some_and(|m| m < min) {
            return Ok(nothing());
        }
        let prefix_len = a.parts.iter().map(|p| p.prefix.len()).max().unwrap_or(0);
        let position =
            |i: usize| -> Vec<Subschema<'a>> { a.parts.iter().filter_map(|p| p.item(i)).collect() };
        let rest: Vec<Subschema<'a>> = a.parts.iter().filter_map(|p| p.rest.clone()).collect();
        if let Some(p) = &a.unique {
            if max.is_none_or(|m| m > 1) {
                let p = p.clone();
                let finite = if prefix_len == 0 && a.contains.is_empty() {
                    self.finite_domain(&rest)?
                } else {
                    None
                };
                if let Some(values) = finite {
                    return self.distinct_values(values, min, max, &p);
                }
                self.unsupported(
                    "uniqueItems",
                    &p,
                    "uniqueItems needs items to be compared with each other (supported where items take a few values: enums, booleans, null)",
                )?;
            }
        }
        if rest.iter().any(Subschema::accepts_none) {
            max = Some(max.map_or(prefix_len as u64, |m| m.min(prefix_len as u64)));
        }
        if max.is_some_and(|m| m < min) {
            return Ok(nothing());
        }
        let limit = self.opts.limits.max_repetition;
        if min > limit || max.is_some_and(|m| m > limit) {
            return Err(self.limit(
                &a.unique.clone().unwrap_or_default(),
                format!("item count bound above {limit}"),
            ));
        }
        let (open, comma, close) = self.array_frame();

        // contains
        let contains: Vec<_> = a
            .contains
            .iter()
            .filter(|c| !(c.1 == 0 && c.2.is_none()))
            .cloned()
            .collect();
        if let Some((c, cmin, cmax, _)) = contains.first().cloned() {
            let simple = contains.len() == 1
                && prefix_len == 0
                && min <= 1
                && max.is_none()
                && cmin == 1
                && cmax.is_none();
            if simple {
                let item = self.item_rule(&rest)?;
                let mut both = rest.clone();
                both.push(c);
                let hit = self.item_rule(&both)?;
                let body = seq(vec![
                    Expr::Repeat {
                        expr: Box::new(seq(vec![item.clone(), comma.clone()])),
                        min: 0,
                        max: None,
                    },
                    hit,
                    Expr::Repeat {
                        expr: Box::new(seq(vec![comma.clone(), item])),
                        min: 0,
                        max: None,
                    },
                ]);
                return Ok(seq(vec![open, body, close]));
            }
            let counted: Vec<Counted<'a>> = contains
                .iter()
                .map(|(schema, min, max, ptr)| Counted {
                    schema: schema.clone(),
                    min: *min,
                    max: *max,
                    ptr: ptr.clone(),
                })
                .collect();
            let body = self.counted_items(node, &counted, min, max)?;
            return Ok(seq(vec![open, body, close]));
        }

        // rest items after the prefix
        let rest_min = min.saturating_sub(prefix_len as u64) as u32;
        let rest_max = max.map(|m| m.saturating_sub(prefix_len as u64) as u32);
        let rest_item = if rest_max == Some(0) {
            None
        } else {
            Some(self.item_rule(&rest)?)
        };
        let mut tail = match &rest_item {
            Some(item) => Expr::Repeat {
                expr: Box::new(seq(vec![comma.clone(), item.clone()])),
                min: rest_min,
                max: rest_max,
            },
            None => Expr::Empty,
        };
        let effective_prefix = max.map_or(prefix_len, |m| prefix_len.min(m as usize));
        if effective_prefix == 0 {
            let body = match rest_item {
                None => Expr::Empty,
                Some(item) => {
                    let first = seq(vec![
                        item.clone(),
                        Expr::Repeat {
                            expr: Box::new(seq(vec![comma.clone(), item])),
                            min: rest_min.saturating_sub(1),
                            max: rest_max.map(|m| m - 1),
                        },
                    ]);
                    if min == 0 {
                        Expr::optional(first)
                    } else {
                        first
                    }
                }
            };
            return Ok(seq(vec![open, body, close]));
        }
        if effective_prefix < prefix_len {
            tail = Expr::Empty;
        }
        // Positions effective_prefix-1 .. 1, each preceded by a comma.
        for i in (1..effective_prefix).rev() {
            let item = self.item_rule(&position(i))?;
            let step = seq(vec![comma.clone(), item, tail]);
            tail = if (i as u64) < min {
                step
            } else {
                Expr::optional(step)
            };
        }
        let first = self.item_rule(&position(0))?;
        let body = seq(vec![first, tail]);
        let body = if min == 0 { Expr::optional(body) } else { body };
        Ok(seq(vec![open, body, close]))
    }
}

/// Most values an item may take for `uniqueItems` to be a permutation of them.
const MOST_DISTINCT_VALUES: usize = 256;

impl<'a> SchemaCompiler<'a> {
    /// The values an item valid against `conj` may take, when they are few: every
    /// alternative an `enum`/`const`, or booleans and `null` (`None`: more).
    fn finite_domain(&mut self, conj: &[Subschema<'a>]) -> Result<Option<Vec<&'a Value>>> {
        let mut values: Vec<&'a Value> = Vec::new();
        for node in self.normalize(conj)? {
            if !node.enums.is_empty() {
                values.extend(self.enum_values(&node)?);
            } else if (node.types & !(TypeSet::BOOLEAN | TypeSet::NULL)).is_empty() {
                for v in [&TRUE, &FALSE, &NULL] {
                    if node.types.intersects(TypeSet::of_value(v))
                        && !node.excluded.iter().any(|x| json_eq(x, v))
                    {
                        values.push(v);
                    }
                }
            } else {
                return Ok(None);
            }
            if values.len() > MOST_DISTINCT_VALUES {
                return Ok(None);
            }
        }
        // Equal values (`1` and `1.0`) are one item.
        let mut seen = std::collections::HashSet::new();
        values.retain(|v| seen.insert(json_key(v)));
        Ok(Some(values))
    }

    /// An array of distinct items from `values`: a permutation of their literals
    /// (each at most once, every spelling of a value one member), `min..=max` of
    /// them.
    fn distinct_values(
        &mut self,
        values: Vec<&'a Value>,
        min: u64,
        max: Option<u64>,
        ptr: &str,
    ) -> Result<Expr> {
        if min > values.len() as u64 {
            return Ok(nothing());
        }
        let mut members = Vec::with_capacity(values.len());
        for v in &values {
            let value = self.literal(v)?;
            members.push(self.array_item(value));
        }
        let count =
            |n: u64| u32::try_from(n).map_err(|_| self.limit(ptr, "item count bound above u32"));
        let (open, separator, close) = self.array_frame();
        let body = Expr::Permutation(Box::new(Permutation {
            required: vec![false; members.len()],
            members,
            extra: None,
            separator,
            min: count(min)?,
            max: max.map(count).transpose()?,
        }));
        Ok(seq(vec![open, body, close]))
    }

    /// What opens an array, separates its items and closes it: JSON's brackets
    /// and comma, or nothing in MiniMax-M3's style (each item is a tag).
    pub(super) fn array_frame(&self) -> (Expr, Expr, Expr) {
        match self.value_style {
            Some(ParameterStyle::MiniMaxM3) => (Expr::Empty, Expr::Empty, Expr::Empty),
            Some(ParameterStyle::Cohere) => (Expr::Empty, self.ws(), Expr::Empty),
            _ => (
                seq(vec![Expr::literal(b"["), self.ws()]),
                self.punct(b","),
                seq(vec![self.ws(), Expr::literal(b"]")]),
            ),
        }
    }

    /// `value` as an element of an array: itself, or inside MiniMax-M3's
    /// `item` tags.
    pub(super) fn array_item(&self, value: Expr) -> Expr {
        match self.value_style {
            Some(ParameterStyle::MiniMaxM3) => seq(vec![
                Expr::literal(format!("{MINIMAX_M3_TAG}<item>").as_bytes()),
                value,
                Expr::literal(format!("{MINIMAX_M3_TAG}</item>").as_bytes()),
            ]),
            // The value writes the rest of its tag (`cohere_value`).
            Some(ParameterStyle::Cohere) => seq(vec![Expr::literal(b"<cofl:value"), value]),
            _ => value,
        }
    }

    /// An item valid against `conj`, as an element of an array.
    pub(super) fn item_rule(&mut self, conj: &[Subschema<'a>]) -> Result<Expr> {
        let value = self.value_rule(conj)?;
        Ok(self.array_item(value))
    }
}
