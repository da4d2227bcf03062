//! `unevaluatedProperties` and `unevaluatedItems`, from the annotations the
//! applicators produce, computed at compile time.
//!
//! A name (an item) is evaluated when a subschema that validates the object
//! (the array) declares it: `properties`, `patternProperties`,
//! `additionalProperties` (`prefixItems`, `items`), or a nested `unevaluated*`,
//! reached from the keyword's own schema object through in-place applicators.
//! Which subschemas validate is what an alternative of the normalized node
//! fixes: each alternative is a conjunction (the `anyOf` branch taken, `if` held
//! or not, a dependency's trigger present or absent), so once the alternative is
//! final its evaluated names are the names its parts declare, restricted to the
//! parts in the keyword's scope ([`super::node::Scopes`]). A subschema that fails (`not`, the
//! other side of a `oneOf`, an `if` that does not hold) evaluates nothing:
//! negations are normalized outside every scope.
//!
//! `anyOf` is the one applicator where several branches may hold at once and
//! each adds its names; inside a scope its branches are taken as every
//! non-empty combination of held and failed ones (at most
//! [`MAX_ANY_OF_BRANCHES`]), unless they are provably disjoint.
//!
//! Settled, an `unevaluatedProperties: S` is one more object part: the evaluated
//! names and patterns with any value, every other name with a value valid
//! against `S` (`unevaluatedItems: S` likewise: the longest evaluated prefix,
//! then `S`). `unevaluatedItems` beside `contains` (which evaluates the items
//! that match it, whichever they are) is an error naming it.

use super::node::{ArrayPart, Node, ObjectPart, Unevaluated};
use super::{Result, SchemaCompiler, Subschema};

/// Most branches of an `anyOf` inside an `unevaluated*` scope (2^n - 1
/// combinations of held and failed branches).
pub(crate) const MAX_ANY_OF_BRANCHES: usize = 5;

impl<'a> SchemaCompiler<'a> {
    /// Turns the node's pending `unevaluated*` into object and array parts: the
    /// node is final (nothing left to distribute).
    pub(crate) fn settle_unevaluated(&mut self, node: &mut Node<'a>) -> Result<()> {
        let entries = std::mem::take(&mut node.obj.unevaluated);
        for e in &entries {
            let nested = entries
                .iter()
                .any(|o| o.scope != e.scope && o.within.contains(e.scope));
            if let Some(part) = self.unevaluated_properties(node, e, nested) {
                node.obj.parts.push(part);
            }
        }
        let entries = std::mem::take(&mut node.arr.unevaluated);
        for e in &entries {
            let nested = entries
                .iter()
                .any(|o| o.scope != e.scope && o.within.contains(e.scope));
            if let Some(part) = self.unevaluated_items(node, e, nested)? {
                node.arr.parts.push(part);
            }
        }
        Ok(())
    }

    /// The part `e` adds (`None`: every name is evaluated, or `e` accepts any
    /// value).
    fn unevaluated_properties(
        &self,
        node: &Node<'a>,
        e: &Unevaluated<'a>,
        nested: bool,
    ) -> Option<ObjectPart<'a>> {
        if nested || e.value.accepts_all() {
            return None;
        }
        let mut props: Vec<(String, Subschema<'a>)> = Vec::new();
        let mut patterns: Vec<(String, Subschema<'a>, String)> = Vec::new();
        for part in node.obj.parts.iter().filter(|p| p.scopes.contains(e.scope)) {
            // Strict mode closes a declaring part: it evaluates every name.
            let closed_by_strict =
                self.opts.strict && !(part.props.is_empty() && part.patterns.is_empty());
            if part.additional.is_some() || closed_by_strict {
                return None;
            }
            for (name, _) in &part.props {
                if !props.iter().any(|(n, _)| n == name) {
                    props.push((name.clone(), Subschema::anything()));
                }
            }
            for (pattern, _, ptr) in &part.patterns {
                if !patterns.iter().any(|(p, _, _)| p == pattern) {
                    patterns.push((pattern.clone(), Subschema::anything(), ptr.clone()));
                }
            }
        }
        Some(ObjectPart {
            props,
            patterns,
            additional: Some(e.value.clone()),
            ptr: e.ptr.clone(),
            scopes: e.within.clone(),
        })
    }

    fn unevaluated_items(
        &mut self,
        node: &Node<'a>,
        e: &Unevaluated<'a>,
        nested: bool,
    ) -> Result<Option<ArrayPart<'a>>> {
        if nested || e.value.accepts_all() {
            return Ok(None);
        }
        let mut evaluated = 0;
        for part in node.arr.parts.iter().filter(|p| p.scopes.contains(e.scope)) {
            if part.rest.is_some() {
                return Ok(None);
            }
            evaluated = evaluated.max(part.prefix.len());
        }
        if let Some((_, _, _, ptr)) = node.arr.contains.first() {
            self.unsupported(
                "unevaluatedItems",
                &e.ptr,
                format!("beside contains (at {ptr}), whose evaluated items depend on their values, is not supported"),
            )?;
            return Ok(None);
        }
        Ok(Some(ArrayPart {
            prefix: vec![Subschema::anything(); evaluated],
            rest: Some(e.value.clone()),
            scopes: e.within.clone(),
        }))
    }

    /// Whether `node` has `unevaluated*` to settle that the branches (in its
    /// scopes) could add names or items to.
    pub(crate) fn branches_evaluate(node: &Node<'a>, branches: &[Subschema<'a>]) -> bool {
        let pending = node.obj.unevaluated.iter().chain(&node.arr.unevaluated);
        let scopes: Vec<u32> = pending.map(|e| e.scope).collect();
        branches
            .iter()
            .any(|b| scopes.iter().any(|&k| b.scopes.contains(k)))
    }
}

/// Every non-empty subset of `n` branches, as bitmasks.
pub(crate) fn held_combinations(n: usize) -> impl Iterator<Item = u32> {
    1..(1u32 << n)
}
