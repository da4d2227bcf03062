//! `anyOf`, `oneOf`, `not`, `if`/`then`/`else`, `dependentRequired`,
//! `dependentSchemas`: everything that turns one node into a union of nodes.
//!
//! `anyOf` is distributed over the sibling keywords (each branch merged into a copy
//! of the node). `oneOf` is the same union, exact only when the branches are
//! provably disjoint ([`SchemaCompiler::nodes_disjoint`]: different types, disjoint
//! constants, number ranges or lengths, or a required property whose values are
//! disjoint, the usual discriminator); otherwise it is an error. `not` is handled
//! for type sets, constants (finite complements, intersected with the node's other
//! string constraints) and a single required name.
//! Dependencies split the node on the trigger property's presence (absent, or
//! present with the dependency), which is exact. `if` is handled when its schema is
//! a plain type set, a boolean, or a `required` list of one name.

use serde_json::Value;

use super::node::{Node, TypeSet};
use super::{Result, SchemaCompiler, Subschema};

impl<'a> SchemaCompiler<'a> {
    /// The union of conjunctive nodes equivalent to the conjunction `conj`.
    pub(crate) fn normalize(&mut self, conj: &[Subschema<'a>]) -> Result<Vec<Node<'a>>> {
        let mut node = Node::any();
        for s in conj {
            self.collect(s, &mut node, 0)?;
        }
        let mut out = Vec::new();
        self.expand(node, &mut out, 0)?;
        Ok(out)
    }

    fn expand(&mut self, mut node: Node<'a>, out: &mut Vec<Node<'a>>, depth: usize) -> Result<()> {
        if node.types.is_empty() {
            return Ok(());
        }
        if out.len() > self.opts.limits.max_alternatives
            || depth > self.opts.limits.max_inline_depth
        {
            let ptr = node
                .disjunctions
                .last()
                .map(|d| d.ptr.clone())
                .unwrap_or_default();
            return Err(self.limit(
                &ptr,
                format!(
                    "more than {} alternatives after distributing anyOf/oneOf over their siblings",
                    self.opts.limits.max_alternatives
                ),
            ));
        }
        if let Some(d) = node.disjunctions.pop() {
            let mut per_branch: Vec<Vec<Node<'a>>> = Vec::new();
            for b in &d.branches {
                let mut n = node.clone();
                self.collect(b, &mut n, 0)?;
                let mut expanded = Vec::new();
                self.expand(n, &mut expanded, depth + 1)?;
                per_branch.push(expanded);
            }
            if d.exactly_one {
                'outer: for i in 0..per_branch.len() {
                    for j in i + 1..per_branch.len() {
                        for x in &per_branch[i] {
                            for y in &per_branch[j] {
                                if !self.nodes_disjoint(x, y, 0)? {
                                    self.unsupported(
                                        "oneOf",
                                        &d.ptr,
                                        format!(
                                            "branches {i} and {j} may both match one value (not provably disjoint); oneOf is exact only for disjoint branches"
                                        ),
                                    )?;
                                    break 'outer;
                                }
                            }
                        }
                    }
                }
            }
            for branch in per_branch {
                out.extend(branch);
                if out.len() > self.opts.limits.max_alternatives {
                    return Err(self.limit(
                        &d.ptr,
                        "too many alternatives after distributing anyOf/oneOf",
                    ));
                }
            }
            return Ok(());
        }
        if let Some(c) = node.conditionals.pop() {
            return self.expand_if(node, c, out, depth);
        }
        if let Some(s) = node.negations.pop() {
            self.apply_not(&mut node, &s)?;
            return self.expand(node, out, depth + 1);
        }
        if let Some((name, deps, _)) = node.obj.dep_required.pop() {
            let mut absent = node.clone();
            absent.obj.forbidden.push(name.clone());
            self.expand(absent, out, depth + 1)?;
            let mut present = node;
            present.types &= TypeSet::OBJECT;
            for n in std::iter::once(name).chain(deps) {
                if !present.obj.required.contains(&n) {
                    present.obj.required.push(n);
                }
            }
            return self.expand(present, out, depth + 1);
        }
        if let Some((name, s)) = node.obj.dep_schemas.pop() {
            let mut absent = node.clone();
            absent.obj.forbidden.push(name.clone());
            self.expand(absent, out, depth + 1)?;
            let mut present = node;
            present.types &= TypeSet::OBJECT;
            if !present.obj.required.contains(&name) {
                present.obj.required.push(name);
            }
            self.collect(&s, &mut present, 0)?;
            return self.expand(present, out, depth + 1);
        }
        out.push(node);
        Ok(())
    }

    fn expand_if(
        &mut self,
        node: Node<'a>,
        c: super::node::Conditional<'a>,
        out: &mut Vec<Node<'a>>,
        depth: usize,
    ) -> Result<()> {
        let mut then_node = node.clone();
        let mut else_node = node;
        let cond = c.cond.v;
        match cond {
            Value::Bool(true) => {
                if let Some(t) = &c.then {
                    self.collect(t, &mut then_node, 0)?;
                }
                return self.expand(then_node, out, depth + 1);
            }
            Value::Bool(false) => {
                if let Some(e) = &c.otherwise {
                    self.collect(e, &mut else_node, 0)?;
                }
                return self.expand(else_node, out, depth + 1);
            }
            _ => {}
        }
        if c.then.is_none() && c.otherwise.is_none() {
            return self.expand(then_node, out, depth + 1);
        }
        let cond_nodes = self.normalize(std::slice::from_ref(&c.cond))?;
        if let [cn] = &cond_nodes[..] {
            if is_type_only(cn) {
                then_node.types &= cn.types;
                else_node.types &= !cn.types;
            } else if let Some(name) = single_required(cn) {
                // Non-objects satisfy `required`, so they take the `then` branch.
                let mut then_non_object = then_node.clone();
                then_non_object.types &= !TypeSet::OBJECT;
                if let Some(t) = &c.then {
                    self.collect(t, &mut then_non_object, 0)?;
                }
                self.expand(then_non_object, out, depth + 1)?;
                then_node.types &= TypeSet::OBJECT;
                if !then_node.obj.required.contains(&name) {
                    then_node.obj.required.push(name.clone());
                }
                else_node.types &= TypeSet::OBJECT;
                else_node.obj.forbidden.push(name);
            } else {
                self.unsupported(
                    "if",
                    &c.ptr,
                    "if is supported when its schema is a type, a boolean or one required property",
                )?;
                return self.expand(then_node, out, depth + 1);
            }
        } else {
            self.unsupported("if", &c.ptr, "if with alternatives inside")?;
            return self.expand(then_node, out, depth + 1);
        }
        if let Some(t) = &c.then {
            self.collect(t, &mut then_node, 0)?;
        }
        if let Some(e) = &c.otherwise {
            self.collect(e, &mut else_node, 0)?;
        }
        self.expand(then_node, out, depth + 1)?;
        self.expand(else_node, out, depth + 1)
    }

    fn apply_not(&mut self, node: &mut Node<'a>, s: &Subschema<'a>) -> Result<()> {
        match s.v {
            Value::Bool(b) => {
                if *b {
                    node.types = TypeSet::NONE;
                }
                return Ok(());
            }
            Value::Object(m) if m.is_empty() => {
                node.types = TypeSet::NONE;
                return Ok(());
            }
            _ => {}
        }
        let nodes = self.normalize(std::slice::from_ref(s))?;
        if nodes.is_empty() {
            return Ok(()); // not(false)
        }
        if let [n] = &nodes[..] {
            if is_type_only(n) {
                node.types &= !n.types;
                return Ok(());
            }
            if n.types == TypeSet::ALL && is_enum_only(n) {
                // Exclude finitely many values.
                for v in &n.enums[0] {
                    if n.enums[1..]
                        .iter()
                        .all(|l| l.iter().any(|x| super::validate::json_eq(x, v)))
                    {
                        match v {
                            Value::Null => node.types &= !TypeSet::NULL,
                            Value::String(_)
                                if node.enums.is_empty()
                                    && node.types.intersects(TypeSet::STRING) =>
                            {
                                // Intersected with the other string keywords.
                                node.excluded.push(v)
                            }
                            _ if !node.enums.is_empty() => node.excluded.push(v),
                            Value::Bool(_) if !node.types.intersects(TypeSet::BOOLEAN) => {}
                            _ if !node.types.intersects(TypeSet::of_value(v)) => {}
                            _ => {
                                self.unsupported(
                                    "not",
                                    &s.ptr,
                                    "not of a constant that is not a string or null",
                                )?;
                            }
                        }
                    }
                }
                return Ok(());
            }
            if let Some(name) = single_required(n) {
                // Non-objects satisfy `required`, so `not` excludes them.
                node.types &= TypeSet::OBJECT;
                node.obj.forbidden.push(name);
                return Ok(());
            }
        }
        self.unsupported(
            "not",
            &s.ptr,
            "not is supported for types, constants and a single required property",
        )
    }

    /// Whether no value satisfies both nodes (false when unsure).
    pub(crate) fn nodes_disjoint(
        &mut self,
        a: &Node<'a>,
        b: &Node<'a>,
        depth: usize,
    ) -> Result<bool> {
        if depth > 8 {
            return Ok(false);
        }
        let common = a.types & b.types;
        if common.is_empty() {
            return Ok(true);
        }
        // Constants on one side: check each against the other side.
        for (x, y) in [(a, b), (b, a)] {
            if !x.enums.is_empty() {
                let mut all_rejected = true;
                for v in x.enums[0].clone() {
                    if !x.enums[1..]
                        .iter()
                        .all(|l| l.iter().any(|o| super::validate::json_eq(o, v)))
                    {
                        continue;
                    }
                    if !self.node_accepts(x, v).unwrap_or(true) {
                        continue;
                    }
                    if self.node_accepts(y, v).unwrap_or(true) {
                        all_rejected = false;
                        break;
                    }
                }
                return Ok(all_rejected);
            }
        }
        for t in TypeSet::EACH {
            if !common.intersects(t) {
                continue;
            }
            let disjoint = match t {
                TypeSet::INTEGER | TypeSet::FRACTION => ranges_disjoint(a, b),
                TypeSet::STRING => {
                    a.str.max.is_some_and(|m| m < b.str.min)
                        || b.str.max.is_some_and(|m| m < a.str.min)
                }
                TypeSet::ARRAY => {
                    a.arr.max.is_some_and(|m| m < b.arr.min)
                        || b.arr.max.is_some_and(|m| m < a.arr.min)
                }
                TypeSet::OBJECT => self.objects_disjoint(a, b, depth)?,
                _ => false,
            };
            if !disjoint {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn objects_disjoint(&mut self, a: &Node<'a>, b: &Node<'a>, depth: usize) -> Result<bool> {
        if a.obj.max.is_some_and(|m| m < b.obj.min) || b.obj.max.is_some_and(|m| m < a.obj.min) {
            return Ok(true);
        }
        for (x, y) in [(a, b), (b, a)] {
            for name in &x.obj.required {
                if y.obj.forbidden.contains(name) {
                    return Ok(true);
                }
                let ys = prop_schemas(y, name);
                if ys.iter().any(|s| s.v == &Value::Bool(false)) {
                    return Ok(true);
                }
                if !y.obj.required.contains(name) {
                    continue;
                }
                let xs = prop_schemas(x, name);
                let xn = self.normalize(&xs)?;
                let yn = self.normalize(&ys)?;
                let mut all = true;
                'pairs: for p in &xn {
                    for q in &yn {
                        if !self.nodes_disjoint(p, q, depth + 1)? {
                            all = false;
                            break 'pairs;
                        }
                    }
                }
                if all {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}

/// The declared schemas for property `name` (without pattern/additional fallbacks,
/// which only matter for closed objects and are treated as "unknown").
fn prop_schemas<'a>(n: &Node<'a>, name: &str) -> Vec<Subschema<'a>> {
    n.obj
        .parts
        .iter()
        .filter_map(|p| {
            p.props
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, s)| s.clone())
        })
        .collect()
}

fn ranges_disjoint(a: &Node<'_>, b: &Node<'_>) -> bool {
    let below = |x: &Node<'_>, y: &Node<'_>| match (&x.num.hi, &y.num.lo) {
        (Some((h, hs)), Some((l, ls))) => h < l || (h == l && (*hs || *ls)),
        _ => false,
    };
    below(a, b) || below(b, a)
}

fn is_plain(n: &Node<'_>) -> bool {
    n.num.lo.is_none()
        && n.num.hi.is_none()
        && n.num.multiple_of.is_empty()
        && n.str.min == 0
        && n.str.max.is_none()
        && n.str.patterns.is_empty()
        && n.str.formats.is_empty()
        && n.arr.parts.is_empty()
        && n.arr.min == 0
        && n.arr.max.is_none()
        && n.arr.contains.is_empty()
        && n.arr.unique.is_none()
        && n.obj.parts.is_empty()
        && n.obj.min == 0
        && n.obj.max.is_none()
        && n.obj.names.is_empty()
        && n.obj.forbidden.is_empty()
        && n.excluded.is_empty()
}

fn is_type_only(n: &Node<'_>) -> bool {
    is_plain(n) && n.enums.is_empty() && n.obj.required.is_empty()
}

fn is_enum_only(n: &Node<'_>) -> bool {
    is_plain(n) && !n.enums.is_empty() && n.obj.required.is_empty()
}

fn single_required(n: &Node<'_>) -> Option<String> {
    (is_plain(n) && n.enums.is_empty() && n.types == TypeSet::ALL && n.obj.required.len() == 1)
        .then(|| n.obj.required[0].clone())
}
