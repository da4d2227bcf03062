//! `not`: the values a schema rejects, as a union of conjunctive nodes.
//!
//! A schema normalizes to a union of nodes, each a conjunction of constraints, so
//! its negation is the conjunction, over the nodes, of each node's negation; and a
//! node's negation is the union, over its constraints, of that one constraint
//! violated: a value of another type, a number below the minimum, a string longer
//! than `maxLength` or not matching the `pattern` (a complement, taken in the
//! automaton stage), an object without a required name, or with a property whose
//! value the property's schema rejects (a negated child, compiled as a rule of its
//! own), a property none of a closed object's names or one matching a pattern whose
//! schema rejects its value (a witness the object emitter makes a required member),
//! an array with an item its schema rejects. Every one of these is exact. A
//! constraint whose violation a node cannot say (`uniqueItems`, `propertyNames`,
//! an item past a prefix) makes the `not` unsupported, named by its pointer: never
//! approximated. A `multipleOf` violated is a divisor the number must not have.
//!
//! Where the node allows finitely many values (an `enum`, a `const`), each value is
//! decided by validation instead, whatever keywords the negated schema uses.
//!
//! A node with `enum`/`const` allows finitely many values, and its negation is
//! those values excluded one by one: a string, or a value beside an enum, through
//! the node's exclusions; a number by splitting the number line around it; a
//! boolean or `null` by the type.
//!
//! [`super::combinators`] uses it for `not`, for `oneOf` branches that may share a
//! value (each branch minus the others) and for `if`/`then`/`else`
//! (`(if and then) or (not if and else)`).

use serde_json::Value;

use super::decimal::Decimal;
use super::node::{
    ArrayConstraints, ArrayPart, Node, NumberConstraints, ObjectConstraints, ObjectPart, Scopes,
    StringConstraints, TypeSet, Witness, FALSE, TRUE,
};
use super::{Result, SchemaCompiler, Subschema};

/// The most values of an `enum` a negation decides one by one (each is a
/// validation of the negated schema).
const FEW_VALUES: usize = 1024;

impl<'a> SchemaCompiler<'a> {
    /// The values of `node` that `s` rejects, as alternatives (none: `s` accepts
    /// every value of `node`).
    pub(crate) fn negate(&mut self, node: Node<'a>, s: &Subschema<'a>) -> Result<Vec<Node<'a>>> {
        if s.accepts_all() {
            return Ok(Vec::new());
        }
        if s.accepts_none() {
            return Ok(vec![node]);
        }
        // `S = not S` through a `$ref` would negate forever.
        if self.negation_depth >= self.opts.limits.max_negation_depth {
            return Err(self.limit(
                &s.ptr,
                format!(
                    "more than {} negations (not, overlapping oneOf, if) nested at one value",
                    self.opts.limits.max_negation_depth
                ),
            ));
        }
        self.negation_depth += 1;
        // What a failing subschema evaluates does not count (its annotations are
        // dropped): normalized outside the scopes around it.
        let s = &Subschema {
            scopes: Scopes::default(),
            ..s.clone()
        };
        if let Some(rejected) = self.values_rejected(&node, s) {
            self.negation_depth -= 1;
            let mut node = node;
            node.enums.push(rejected);
            return Ok(vec![node]);
        }
        let nodes = self.normalize(std::slice::from_ref(s));
        self.negation_depth -= 1;
        let mut alternatives = vec![node];
        for n in &nodes? {
            let mut next = Vec::new();
            for a in alternatives {
                self.without_node(a, n, &s.ptr, &mut next)?;
                next.retain_mut(|a| {
                    drop_contradictory_types(a);
                    !a.types.is_empty()
                });
                if next.len() > self.opts.limits.max_alternatives {
                    return Err(self.limit(
                        &s.ptr,
                        format!(
                            "more than {} alternatives for the values not valid against this schema",
                            self.opts.limits.max_alternatives
                        ),
                    ));
                }
            }
            alternatives = next;
        }
        Ok(alternatives)
    }

    /// Where `node` allows finitely many values (an `enum` or `const` of at most
    /// [`FEW_VALUES`]), the ones `s` rejects, each decided by validating it: exact
    /// whatever keywords `s` uses, including those whose violation no node can say
    /// (`multipleOf`, `uniqueItems`, `propertyNames`). `None` where a value cannot
    /// be decided (the general negation then answers, or names what it lacks).
    fn values_rejected(&mut self, node: &Node<'a>, s: &Subschema<'a>) -> Option<Vec<&'a Value>> {
        let values = node.enums.iter().min_by_key(|list| list.len())?;
        if values.len() > FEW_VALUES {
            return None;
        }
        let mut rejected = Vec::new();
        for v in values.clone() {
            if !self.value_valid(v, s).ok()? {
                rejected.push(v);
            }
        }
        Some(rejected)
    }

    /// Appends to `out` the values of `ctx` that `n` rejects, as alternatives.
    ///
    /// Every constraint a normalized node holds has its case here (a new field of
    /// [`Node`] needs one, or negations silently lose it).
    fn without_node(
        &mut self,
        ctx: Node<'a>,
        n: &Node<'a>,
        ptr: &str,
        out: &mut Vec<Node<'a>>,
    ) -> Result<()> {
        // Named field by field, so that a new one fails to compile until its
        // negation is written.
        let Node {
            types: _,
            enums: _,
            excluded: _,
            num:
                NumberConstraints {
                    lo: _,
                    hi: _,
                    multiple_of: _,
                    not_multiple_of: _,
                },
            str:
                StringConstraints {
                    min: _,
                    max: _,
                    patterns: _,
                    formats: _,
                    not_patterns: _,
                    not_formats: _,
                    length_ptr: _,
                },
            arr:
                ArrayConstraints {
                    parts: _,
                    min: _,
                    max: _,
                    contains: _,
                    unique: _,
                    unevaluated: arr_unevaluated,
                },
            obj:
                ObjectConstraints {
                    parts: _,
                    required: _,
                    min: _,
                    max: _,
                    min_max_ptr: _,
                    names: _,
                    forbidden: _,
                    witnesses: _,
                    dep_required,
                    dep_schemas,
                    unevaluated: obj_unevaluated,
                },
            disjunctions,
            negations,
            conditionals,
        } = n;
        // Normalized: what is left to distribute is gone.
        debug_assert!(disjunctions.is_empty() && negations.is_empty());
        debug_assert!(conditionals.is_empty() && dep_required.is_empty() && dep_schemas.is_empty());
        // Settled: `unevaluated*` are object and array parts by now.
        debug_assert!(arr_unevaluated.is_empty() && obj_unevaluated.is_empty());
        if !n.enums.is_empty() {
            let mut alternatives = vec![ctx];
            for v in self.enum_values(n)? {
                let mut next = Vec::new();
                for a in alternatives {
                    self.without_value(a, v, ptr, &mut next)?;
                }
                alternatives = next;
            }
            out.extend(alternatives);
            return Ok(());
        }
        let other_types = ctx.types & !n.types;
        if !other_types.is_empty() {
            let mut a = ctx.clone();
            a.types = other_types;
            out.push(a);
        }
        let mut base = ctx;
        base.types &= n.types;
        if base.types.is_empty() {
            return Ok(());
        }
        // `ctx` restricted to the type one constraint applies to.
        let within = |types: TypeSet| {
            let mut a = base.clone();
            a.types &= types;
            (!a.types.is_empty()).then_some(a)
        };
        for v in &n.excluded {
            if let Some(mut a) = within(TypeSet::of_value(v)) {
                a.enums.push(vec![*v]);
                out.push(a);
            }
        }
        self.without_number(n, &within, out)?;
        without_string(n, &within, out);
        self.without_array(n, &within, out)?;
        self.without_object(n, &within, out)
    }

    fn without_number(
        &mut self,
        n: &Node<'a>,
        within: &dyn Fn(TypeSet) -> Option<Node<'a>>,
        out: &mut Vec<Node<'a>>,
    ) -> Result<()> {
        let Some(a) = within(TypeSet::NUMBER) else {
            return Ok(());
        };
        if let Some((d, exclusive)) = &n.num.lo {
            let mut below = a.clone();
            self.tighten(&mut below, false, d.clone(), !exclusive);
            out.push(below);
        }
        if let Some((d, exclusive)) = &n.num.hi {
            let mut above = a.clone();
            self.tighten(&mut above, true, d.clone(), !exclusive);
            out.push(above);
        }
        for divisor in &n.num.multiple_of {
            let mut no_multiple = a.clone();
            no_multiple.num.not_multiple_of.push(divisor.clone());
            out.push(no_multiple);
        }
        for divisor in &n.num.not_multiple_of {
            let mut multiple = a.clone();
            multiple.num.multiple_of.push(divisor.clone());
            out.push(multiple);
        }
        Ok(())
    }

    fn without_array(
        &mut self,
        n: &Node<'a>,
        within: &dyn Fn(TypeSet) -> Option<Node<'a>>,
        out: &mut Vec<Node<'a>>,
    ) -> Result<()> {
        let Some(base) = within(TypeSet::ARRAY) else {
            return Ok(());
        };
        let arr = &n.arr;
        count_violations(
            &base,
            (arr.min, arr.max),
            |a| (&mut a.arr.min, &mut a.arr.max),
            out,
        );
        for part in &arr.parts {
            // The first item its schema rejects is item `i`: the earlier ones pass.
            for (i, item) in part.prefix.iter().enumerate() {
                if item.accepts_all() {
                    continue;
                }
                let mut a = base.clone();
                a.arr.min = a.arr.min.max(i as u64 + 1);
                let mut prefix = part.prefix[..i].to_vec();
                prefix.push(item.negation());
                a.arr.parts.push(ArrayPart {
                    prefix,
                    rest: None,
                    scopes: Scopes::default(),
                });
                out.push(a);
            }
            match &part.rest {
                Some(rest) if !rest.accepts_all() => {
                    if !part.prefix.is_empty() {
                        self.unsupported(
                            "items",
                            &rest.ptr,
                            "not of items after prefixItems (an item past the prefix that items rejects) is not supported",
                        )?;
                        continue;
                    }
                    let mut a = base.clone();
                    a.arr
                        .contains
                        .push((rest.negation(), 1, None, rest.ptr.to_string()));
                    out.push(a);
                }
                _ => {}
            }
        }
        for (c, min, max, ptr) in &arr.contains {
            if *min > 0 {
                let mut a = base.clone();
                if *min == 1 {
                    // No item matches: every item is rejected by `contains`.
                    a.arr.parts.push(ArrayPart {
                        prefix: Vec::new(),
                        rest: Some(c.negation()),
                        scopes: Scopes::default(),
                    });
                } else {
                    a.arr
                        .contains
                        .push((c.clone(), 0, Some(min - 1), ptr.clone()));
                }
                out.push(a);
            }
            if let Some(m) = max {
                let mut a = base.clone();
                a.arr
                    .contains
                    .push((c.clone(), m.saturating_add(1), None, ptr.clone()));
                out.push(a);
            }
        }
        if let Some(ptr) = &arr.unique {
            self.unsupported(
                "uniqueItems",
                ptr,
                "not of uniqueItems (an array with a repeated item) is not supported",
            )?;
        }
        Ok(())
    }

    fn without_object(
        &mut self,
        n: &Node<'a>,
        within: &dyn Fn(TypeSet) -> Option<Node<'a>>,
        out: &mut Vec<Node<'a>>,
    ) -> Result<()> {
        let Some(base) = within(TypeSet::OBJECT) else {
            return Ok(());
        };
        let obj = &n.obj;
        count_violations(
            &base,
            (obj.min, obj.max),
            |a| (&mut a.obj.min, &mut a.obj.max),
            out,
        );
        for name in &obj.required {
            let mut a = base.clone();
            a.obj.forbidden.push(name.clone());
            out.push(a);
        }
        for name in &obj.forbidden {
            let mut a = base.clone();
            if !a.obj.required.contains(name) {
                a.obj.required.push(name.clone());
            }
            out.push(a);
        }
        for part in &obj.parts {
            for (name, s) in &part.props {
                // A name the context forbids, or whose value it already asks to
                // pass `s` (the same schema: a base shared through `allOf`), cannot
                // hold a value `s` rejects.
                let already = |p: &ObjectPart<'a>| {
                    p.props.iter().any(|(k, t)| k == name && t.key() == s.key())
                };
                if s.accepts_all()
                    || base.obj.forbidden.contains(name)
                    || base.obj.parts.iter().any(already)
                {
                    continue;
                }
                let mut a = base.clone();
                if !a.obj.required.contains(name) {
                    a.obj.required.push(name.clone());
                }
                a.obj.parts.push(ObjectPart {
                    props: vec![(name.clone(), s.negation())],
                    patterns: Vec::new(),
                    additional: Some(Subschema::anything()),
                    ptr: part.ptr.clone(),
                    scopes: Scopes::default(),
                });
                out.push(a);
            }
            for (pattern, s, ptr) in &part.patterns {
                if s.accepts_all() {
                    continue;
                }
                // A property matching the pattern, with a value its schema rejects.
                let mut a = base.clone();
                a.obj.witnesses.push(Witness {
                    outside: Vec::new(),
                    matching: vec![(pattern.clone(), ptr.clone())],
                    not_matching: Vec::new(),
                    values: vec![s.negation()],
                    ptr: ptr.clone(),
                });
                out.push(a);
            }
            let closed_by_strict = self.opts.strict
                && part.additional.is_none()
                && !(part.props.is_empty() && part.patterns.is_empty());
            let rejected = match &part.additional {
                Some(s) if !s.accepts_all() => Some(s.negation()),
                None if closed_by_strict => Some(Subschema::anything()),
                _ => None,
            };
            if let Some(value) = rejected {
                // A property none of the part's names nor patterns, with a value
                // it rejects.
                let mut a = base.clone();
                a.obj.witnesses.push(Witness {
                    outside: part.props.iter().map(|(k, _)| k.clone()).collect(),
                    matching: Vec::new(),
                    not_matching: (part.patterns.iter())
                        .map(|(p, _, ptr)| (p.clone(), ptr.clone()))
                        .collect(),
                    values: vec![value],
                    ptr: format!("{}/additionalProperties", part.ptr),
                });
                out.push(a);
            }
        }
        self.without_witnesses(&obj.witnesses, &base, out)?;
        for names in obj.names.iter().filter(|s| !s.accepts_all()) {
            // A property whose name `names` rejects, one witness per way to reject.
            let mut strings = Node::any();
            strings.types = TypeSet::STRING;
            let mut rejected = Vec::new();
            for n in self.negate(strings, names)? {
                self.expand(n, &mut rejected, 1)?;
            }
            for n in rejected {
                if !n.types.intersects(TypeSet::STRING) {
                    continue;
                }
                match name_witness(&n, &names.ptr) {
                    Some(w) => {
                        let mut a = base.clone();
                        a.obj.witnesses.push(w);
                        out.push(a);
                    }
                    None => self.unsupported(
                        "propertyNames",
                        &names.ptr,
                        "not of propertyNames whose rejected names need a format",
                    )?,
                }
            }
        }
        Ok(())
    }

    /// What violates each of the negated object's `witnesses` (a property some
    /// name or pattern picks, whose value a schema takes): no such property has
    /// such a value, an `additionalProperties` or `patternProperties` part
    /// again, added to `base`.
    fn without_witnesses(
        &mut self,
        witnesses: &[Witness<'a>],
        base: &Node<'a>,
        out: &mut Vec<Node<'a>>,
    ) -> Result<()> {
        for w in witnesses {
            // No property `w` names has a value `w.values` takes: an
            // `additionalProperties` or `patternProperties` part again.
            let anything = |names: &[(String, String)]| {
                (names.iter())
                    .map(|(p, ptr)| (p.clone(), Subschema::anything(), ptr.clone()))
                    .collect::<Vec<_>>()
            };
            let [value] = &w.values[..] else {
                self.unsupported("not", &w.ptr, "not of a property sought for two schemas")?;
                continue;
            };
            let part = match &w.matching[..] {
                [] => ObjectPart {
                    props: (w.outside.iter())
                        .map(|k| (k.clone(), Subschema::anything()))
                        .collect(),
                    patterns: anything(&w.not_matching),
                    additional: Some(value.negation()),
                    ptr: w.ptr.clone(),
                    scopes: Scopes::default(),
                },
                [(p, ptr)] if w.outside.is_empty() && w.not_matching.is_empty() => ObjectPart {
                    props: Vec::new(),
                    patterns: vec![(p.clone(), value.negation(), ptr.clone())],
                    additional: Some(Subschema::anything()),
                    ptr: w.ptr.clone(),
                    scopes: Scopes::default(),
                },
                _ => {
                    self.unsupported(
                        "not",
                        &w.ptr,
                        "not of a property named by several patterns is not supported",
                    )?;
                    continue;
                }
            };
            let mut a = base.clone();
            a.obj.parts.push(part);
            out.push(a);
        }
        Ok(())
    }

    /// Appends to `out` the values of `ctx` other than `v`.
    fn without_value(
        &mut self,
        mut ctx: Node<'a>,
        v: &'a Value,
        ptr: &str,
        out: &mut Vec<Node<'a>>,
    ) -> Result<()> {
        let t = TypeSet::of_value(v);
        if !ctx.types.intersects(t) {
            out.push(ctx);
            return Ok(());
        }
        if !ctx.enums.is_empty() {
            // A finite node drops the value from its list when emitted.
            ctx.excluded.push(v);
            out.push(ctx);
            return Ok(());
        }
        match v {
            Value::Null => {
                ctx.types &= !TypeSet::NULL;
                out.push(ctx);
            }
            Value::Bool(b) => {
                let mut other = ctx.clone();
                other.types = TypeSet::BOOLEAN;
                other.enums.push(vec![if *b { &FALSE } else { &TRUE }]);
                out.push(other);
                ctx.types &= !TypeSet::BOOLEAN;
                out.push(ctx);
            }
            Value::String(_) => {
                ctx.excluded.push(v);
                out.push(ctx);
            }
            Value::Number(_) => {
                let Some(d) = Decimal::from_value(v) else {
                    return self.unsupported("not", ptr, format!("not of the number {v}"));
                };
                if !ctx.num.bounds_hold(&d) {
                    out.push(ctx);
                    return Ok(());
                }
                for lower in [false, true] {
                    let mut side = ctx.clone();
                    side.types &= TypeSet::NUMBER;
                    self.tighten(&mut side, lower, d.clone(), true);
                    out.push(side);
                }
                ctx.types &= !TypeSet::NUMBER;
                out.push(ctx);
            }
            Value::Array(_) | Value::Object(_) => {
                return self.unsupported(
                    "not",
                    ptr,
                    "not of an array or object constant (beside no enum) is not supported",
                );
            }
        }
        Ok(())
    }
}

/// The nodes of `base` with fewer items (or properties) than `min` or more than
/// `max`, `count` giving a node's own bounds.
fn count_violations<'a>(
    base: &Node<'a>,
    (min, max): (u64, Option<u64>),
    count: impl for<'n> Fn(&'n mut Node<'a>) -> (&'n mut u64, &'n mut Option<u64>),
    out: &mut Vec<Node<'a>>,
) {
    if min > 0 {
        let mut a = base.clone();
        let (_, own_max) = count(&mut a);
        *own_max = Some(own_max.map_or(min - 1, |m| m.min(min - 1)));
        out.push(a);
    }
    if let Some(m) = max {
        let mut a = base.clone();
        let (own_min, _) = count(&mut a);
        *own_min = (*own_min).max(m.saturating_add(1));
        out.push(a);
    }
}

/// The strings of `n`'s types that one of its string constraints rejects.
fn without_string<'a>(
    n: &Node<'a>,
    within: &dyn Fn(TypeSet) -> Option<Node<'a>>,
    out: &mut Vec<Node<'a>>,
) {
    let Some(base) = within(TypeSet::STRING) else {
        return;
    };
    let s = &n.str;
    let mut violation = |edit: &dyn Fn(&mut Node<'a>)| {
        let mut a = base.clone();
        edit(&mut a);
        if a.str.length_ptr.is_none() {
            a.str.length_ptr = s.length_ptr.clone();
        }
        out.push(a);
    };
    if s.min > 0 {
        violation(&|a| a.str.max = Some(a.str.max.map_or(s.min - 1, |m| m.min(s.min - 1))));
    }
    if let Some(m) = s.max {
        violation(&|a| a.str.min = a.str.min.max(m.saturating_add(1)));
    }
    for p in &s.patterns {
        violation(&|a| a.str.not_patterns.push(p.clone()));
    }
    for f in &s.formats {
        violation(&|a| a.str.not_formats.push(f.clone()));
    }
    for p in &s.not_patterns {
        violation(&|a| a.str.patterns.push(p.clone()));
    }
    for f in &s.not_formats {
        violation(&|a| a.str.formats.push(f.clone()));
    }
}

/// "A property named by a string of `n`", as a witness: its enums and lengths
/// become patterns the name matches, its exclusions names it is none of. `None`
/// where a name must (not) have a `format`, which is no pattern.
fn name_witness<'a>(n: &Node<'a>, ptr: &str) -> Option<Witness<'a>> {
    let s = &n.str;
    if !(s.formats.is_empty() && s.not_formats.is_empty()) {
        return None;
    }
    let mut matching = s.patterns.clone();
    for list in &n.enums {
        let names: Vec<String> = (list.iter())
            .filter_map(|v| v.as_str())
            .map(escape_pattern)
            .collect();
        // An empty alternation matches nothing: a name no list allows.
        matching.push((format!("^(?:{})$", names.join("|")), ptr.to_string()));
    }
    if s.min > 0 || s.max.is_some() {
        let max = s.max.map_or(String::new(), |m| m.to_string());
        matching.push((format!("^[\\s\\S]{{{},{max}}}$", s.min), ptr.to_string()));
    }
    Some(Witness {
        outside: (n.excluded.iter())
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        matching,
        not_matching: s.not_patterns.clone(),
        values: vec![Subschema::anything()],
        ptr: ptr.to_string(),
    })
}

/// `name` as a JSON Schema pattern matching it literally.
fn escape_pattern(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if "\\^$.|?*+()[]{}".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Takes out of a node the types it plainly allows no value of: the cheap checks
/// that keep a chain of negations (`A and not B and not C`, where the branches
/// share a base through `allOf`) from multiplying alternatives that are empty.
fn drop_contradictory_types(n: &mut Node<'_>) {
    let mut types = n.types;
    if n.str.max.is_some_and(|m| m < n.str.min)
        || (n.str.patterns.iter()).any(|p| n.str.not_patterns.contains(p))
        || (n.str.formats.iter()).any(|f| n.str.not_formats.contains(f))
    {
        types &= !TypeSet::STRING;
    }
    if n.arr.max.is_some_and(|m| m < n.arr.min) {
        types &= !TypeSet::ARRAY;
    }
    if n.obj.max.is_some_and(|m| m < n.obj.min)
        || (n.obj.required.iter()).any(|r| n.obj.forbidden.contains(r))
    {
        types &= !TypeSet::OBJECT;
    }
    if let (Some((lo, lo_exclusive)), Some((hi, hi_exclusive))) = (&n.num.lo, &n.num.hi) {
        if lo > hi || (lo == hi && (*lo_exclusive || *hi_exclusive)) {
            types &= !TypeSet::NUMBER;
        }
    }
    n.types = types;
}
