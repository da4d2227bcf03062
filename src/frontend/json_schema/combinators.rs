//! `anyOf`, `oneOf`, `not`, `if`/`then`/`else`, `dependentRequired`,
//! `dependentSchemas`: everything that turns one node into a union of nodes.
//!
//! `anyOf` is distributed over the sibling keywords (each branch merged into a copy
//! of the node). `oneOf` is the same union when the branches are provably disjoint
//! ([`SchemaCompiler::nodes_disjoint`]: different types, disjoint constants, number
//! ranges or lengths, a required property whose values are disjoint, the usual
//! discriminator, or a name one branch requires and the other's closed object
//! cannot hold); a branch that may share a value with others is taken minus those
//! others (`A and not B`, [`super::negation`]). `not` is that negation; `if` is
//! `(if and then) or (not if and else)`. Dependencies split the node on the
//! trigger property's presence (absent, or present with the dependency). All of
//! these are exact.

use super::node::{Node, ObjectPart, TypeSet};
use super::{Result, SchemaCompiler, Subschema};
use std::rc::Rc;

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

    pub(crate) fn expand(
        &mut self,
        mut node: Node<'a>,
        out: &mut Vec<Node<'a>>,
        depth: usize,
    ) -> Result<()> {
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
            if !d.exactly_one && d.branches.len() > 1 && Self::branches_evaluate(&node, &d.branches)
            {
                return self.expand_any_of_evaluating(node, d, out, depth);
            }
            let mut per_branch = self.expand_branches(&node, &d.branches, depth)?;
            if d.exactly_one {
                self.exclude_overlaps(&node, &d, &mut per_branch, depth)?;
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
            for n in self.negate(node, &s)? {
                self.expand(n, out, depth + 1)?;
            }
            return Ok(());
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
        self.settle_unevaluated(&mut node)?;
        out.push(node);
        Ok(())
    }

    /// An `anyOf` inside an `unevaluated*` scope: every branch that holds adds
    /// the names it evaluates, so unless the branches are provably disjoint, the
    /// alternatives are the combinations of branches held and failed.
    fn expand_any_of_evaluating(
        &mut self,
        node: Node<'a>,
        d: super::node::Disjunction<'a>,
        out: &mut Vec<Node<'a>>,
        depth: usize,
    ) -> Result<()> {
        let probes = self.bare_expansions(&node, &d.branches, depth)?;
        let overlap = self.pairwise_overlaps(&probes)?;
        if overlap.iter().flatten().all(|t| t.is_empty()) {
            let per_branch = self.expand_branches(&node, &d.branches, depth)?;
            out.extend(per_branch.into_iter().flatten());
            return Ok(());
        }
        if d.branches.len() > super::unevaluated::MAX_ANY_OF_BRANCHES {
            self.unsupported(
                "anyOf",
                &d.ptr,
                format!(
                    "more than {} branches that may hold together, inside unevaluatedProperties/unevaluatedItems",
                    super::unevaluated::MAX_ANY_OF_BRANCHES
                ),
            )?;
            // Lenient: each branch on its own (names two branches evaluate
            // together are not counted: over-constrained, never under).
            let per_branch = self.expand_branches(&node, &d.branches, depth)?;
            out.extend(per_branch.into_iter().flatten());
            return Ok(());
        }
        for held in super::unevaluated::held_combinations(d.branches.len()) {
            let mut n = node.clone();
            for (i, b) in d.branches.iter().enumerate() {
                if held & (1 << i) != 0 {
                    self.collect(b, &mut n, 0)?;
                } else {
                    n.negations.push(b.clone());
                }
            }
            self.expand(n, out, depth + 1)?;
        }
        Ok(())
    }

    /// `oneOf`: each branch minus the other branches it may share a value with,
    /// type by type: where branch i may meet branches J on the types T, the values
    /// of those types are taken from `i and not J`, the others from `i` alone. So a
    /// branch is only negated on the types where that is needed (an untyped
    /// closed-object branch, whose negation on objects no node can say, is
    /// disjoint from its siblings' objects and meets them on the other types).
    fn exclude_overlaps(
        &mut self,
        node: &Node<'a>,
        d: &super::node::Disjunction<'a>,
        per_branch: &mut [Vec<Node<'a>>],
        depth: usize,
    ) -> Result<()> {
        let k = per_branch.len();
        let overlap = self.overlaps(node, &d.branches, per_branch, depth)?;
        for i in 0..k {
            if overlap[i].iter().all(|t| t.is_empty()) {
                continue;
            }
            // Types grouped by the branches met there.
            let mut groups: Vec<(TypeSet, Vec<usize>)> = Vec::new();
            for t in TypeSet::EACH {
                let met: Vec<usize> = (0..k).filter(|&j| overlap[i][j].intersects(t)).collect();
                match groups.iter_mut().find(|(_, m)| *m == met) {
                    Some((types, _)) => *types |= t,
                    None => groups.push((t, met)),
                }
            }
            let mut expanded = Vec::new();
            for (types, met) in groups {
                let mut n = node.clone();
                n.types &= types;
                if n.types.is_empty() {
                    continue;
                }
                self.collect(&d.branches[i], &mut n, 0)?;
                n.negations
                    .extend(met.iter().map(|&j| d.branches[j].clone()));
                self.expand(n, &mut expanded, depth + 1)?;
            }
            per_branch[i] = expanded;
        }
        Ok(())
    }

    /// `node` and each branch, expanded.
    fn expand_branches(
        &mut self,
        node: &Node<'a>,
        branches: &[Subschema<'a>],
        depth: usize,
    ) -> Result<Vec<Vec<Node<'a>>>> {
        let mut per_branch = Vec::with_capacity(branches.len());
        for b in branches {
            let mut n = node.clone();
            self.collect(b, &mut n, 0)?;
            let mut expanded = Vec::new();
            self.expand(n, &mut expanded, depth + 1)?;
            per_branch.push(expanded);
        }
        Ok(per_branch)
    }

    /// The types on which each pair of branches may share a value. Asked of the
    /// branches themselves: where `node` has `unevaluated*` that the branches
    /// evaluate for, each expansion settled them as if its branch alone held,
    /// which would make branches that share a value look disjoint; so the
    /// question then goes to expansions without those keywords (a superset of
    /// each branch's values: the answer stays safe).
    fn overlaps(
        &mut self,
        node: &Node<'a>,
        branches: &[Subschema<'a>],
        per_branch: &[Vec<Node<'a>>],
        depth: usize,
    ) -> Result<Vec<Vec<TypeSet>>> {
        if Self::branches_evaluate(node, branches) {
            let probes = self.bare_expansions(node, branches, depth)?;
            return self.pairwise_overlaps(&probes);
        }
        self.pairwise_overlaps(per_branch)
    }

    /// `node` without its pending `unevaluated*` and each branch, expanded.
    fn bare_expansions(
        &mut self,
        node: &Node<'a>,
        branches: &[Subschema<'a>],
        depth: usize,
    ) -> Result<Vec<Vec<Node<'a>>>> {
        let mut bare = node.clone();
        bare.obj.unevaluated.clear();
        bare.arr.unevaluated.clear();
        self.expand_branches(&bare, branches, depth)
    }

    /// The types on which each pair of the expanded branches may share a value.
    fn pairwise_overlaps(&mut self, per_branch: &[Vec<Node<'a>>]) -> Result<Vec<Vec<TypeSet>>> {
        let k = per_branch.len();
        let mut overlap = vec![vec![TypeSet::NONE; k]; k];
        for i in 0..k {
            for j in i + 1..k {
                let t = self.branches_overlap(&per_branch[i], &per_branch[j])?;
                overlap[i][j] = t;
                overlap[j][i] = t;
            }
        }
        Ok(overlap)
    }

    /// `(if and then) or (not if and else)`.
    fn expand_if(
        &mut self,
        node: Node<'a>,
        c: super::node::Conditional<'a>,
        out: &mut Vec<Node<'a>>,
        depth: usize,
    ) -> Result<()> {
        if c.then.is_none() && c.otherwise.is_none() {
            return self.expand(node, out, depth + 1);
        }
        let mut then_node = node.clone();
        self.collect(&c.cond, &mut then_node, 0)?;
        if let Some(t) = &c.then {
            self.collect(t, &mut then_node, 0)?;
        }
        self.expand(then_node, out, depth + 1)?;
        let mut else_node = node;
        else_node.negations.push(c.cond.clone());
        if let Some(e) = &c.otherwise {
            self.collect(e, &mut else_node, 0)?;
        }
        self.expand(else_node, out, depth + 1)
    }

    /// The types of the values both unions of nodes may hold.
    fn branches_overlap(&mut self, a: &[Node<'a>], b: &[Node<'a>]) -> Result<TypeSet> {
        let mut overlap = TypeSet::NONE;
        for x in a {
            for y in b {
                overlap |= self.overlap_types(x, y, 0)?;
            }
        }
        Ok(overlap)
    }

    /// Whether no value satisfies both nodes (false when unsure).
    pub(crate) fn nodes_disjoint(
        &mut self,
        a: &Node<'a>,
        b: &Node<'a>,
        depth: usize,
    ) -> Result<bool> {
        Ok(self.overlap_types(a, b, depth)?.is_empty())
    }

    /// The types of the values both nodes may satisfy (a superset: a type is left
    /// out only when proven disjoint there).
    pub(crate) fn overlap_types(
        &mut self,
        a: &Node<'a>,
        b: &Node<'a>,
        depth: usize,
    ) -> Result<TypeSet> {
        let common = a.types & b.types;
        if depth > 8 || common.is_empty() {
            return Ok(common);
        }
        // Constants on one side: check each against the other side.
        for (x, y) in [(a, b), (b, a)] {
            if !x.enums.is_empty() {
                let mut shared = TypeSet::NONE;
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
                        shared |= TypeSet::of_value(v);
                    }
                }
                return Ok(shared & common);
            }
        }
        let mut overlap = TypeSet::NONE;
        for t in TypeSet::EACH {
            if !common.intersects(t) {
                continue;
            }
            let disjoint = match t {
                TypeSet::INTEGER | TypeSet::FRACTION => ranges_disjoint(a, b),
                TypeSet::STRING => {
                    a.str.max.is_some_and(|m| m < b.str.min)
                        || b.str.max.is_some_and(|m| m < a.str.min)
                        || self.strings_disjoint(a, b)?
                }
                TypeSet::ARRAY => {
                    a.arr.max.is_some_and(|m| m < b.arr.min)
                        || b.arr.max.is_some_and(|m| m < a.arr.min)
                }
                TypeSet::OBJECT => self.objects_disjoint(a, b, depth)?,
                _ => false,
            };
            if !disjoint {
                overlap |= t;
            }
        }
        Ok(overlap)
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
                for part in &y.obj.parts {
                    if self.part_rejects_name(part, name)? {
                        return Ok(true);
                    }
                }
                let ys = prop_schemas(y, name);
                if ys.iter().any(Subschema::accepts_none) {
                    return Ok(true);
                }
                if !y.obj.required.contains(name) {
                    continue;
                }
                // Property values are normalized afresh: a recursive schema (a
                // tree whose nodes are a oneOf of objects) would recurse forever.
                if self.disjoint_depth >= MAX_DISJOINT_DEPTH {
                    continue;
                }
                let xs = prop_schemas(x, name);
                self.disjoint_depth += 1;
                let normalized = self
                    .normalize_property(&xs)
                    .and_then(|xn| Ok((xn, self.normalize_property(&ys)?)));
                self.disjoint_depth -= 1;
                let (xn, yn) = normalized?;
                let mut all = true;
                'pairs: for p in xn.iter() {
                    for q in yn.iter() {
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

impl<'a> SchemaCompiler<'a> {
    /// [`SchemaCompiler::normalize`] for a property's values as
    /// [`SchemaCompiler::objects_disjoint`] compares them, memoized: every pair of
    /// `oneOf` branches normalizes the same values again (a WashingtonPost schema
    /// spent 60% of a 140 ms compile there). The depths are in the key because
    /// they bound what a normalization looks into.
    fn normalize_property(&mut self, conj: &[Subschema<'a>]) -> Result<Rc<Vec<Node<'a>>>> {
        let key = PropertyKey {
            values: conj
                .iter()
                .map(|s| (s.ptr.clone(), s.negated, s.scopes.clone()))
                .collect(),
            disjoint_depth: self.disjoint_depth,
            negation_depth: self.negation_depth,
        };
        if let Some(found) = self.normalized_properties.get(&key) {
            return Ok(Rc::clone(found));
        }
        let nodes = Rc::new(self.normalize(conj)?);
        self.normalized_properties.insert(key, Rc::clone(&nodes));
        Ok(nodes)
    }
}

/// What a property's normalized values depend on: its subschemas (by pointer) and
/// how deep the comparison already is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PropertyKey {
    values: Vec<(Rc<str>, bool, super::node::Scopes)>,
    disjoint_depth: usize,
    negation_depth: usize,
}

/// How deep [`SchemaCompiler::nodes_disjoint`] looks into property values.
const MAX_DISJOINT_DEPTH: usize = 4;

/// Most strings a pattern may stand for to be compared string by string.
const MOST_PATTERN_WORDS: usize = 64;

impl<'a> SchemaCompiler<'a> {
    /// Whether no string satisfies both nodes, when one of them has a pattern that
    /// stands for a few strings (`^BLANK$`, `^(TOKEN|IMMEDIATE_TOKEN)$`, the usual
    /// discriminator): each is checked against both (false when unsure).
    fn strings_disjoint(&mut self, a: &Node<'a>, b: &Node<'a>) -> Result<bool> {
        for (x, y) in [(a, b), (b, a)] {
            for (p, ptr) in &x.str.patterns {
                let Ok(h) = self.pattern_hir(p, ptr) else {
                    continue;
                };
                let Some(words) = super::pattern::finite_words(&h, MOST_PATTERN_WORDS) else {
                    continue;
                };
                let mut shared = false;
                for w in &words {
                    let both = self
                        .string_accepted(x, w)
                        .and_then(|ok| Ok(ok && self.string_accepted(y, w)?));
                    if !matches!(both, Ok(false)) {
                        shared = true;
                        break;
                    }
                }
                if !shared {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// Whether an object part holds no property `name` (closed, and `name` neither
    /// declared nor matching a pattern; false when unsure).
    fn part_rejects_name(&mut self, part: &ObjectPart<'a>, name: &str) -> Result<bool> {
        let declares = !(part.props.is_empty() && part.patterns.is_empty());
        let closed = match &part.additional {
            Some(a) => a.accepts_none(),
            None => self.opts.strict && declares,
        };
        if !closed {
            return Ok(false);
        }
        if let Some((_, s)) = part.props.iter().find(|(k, _)| k == name) {
            return Ok(s.accepts_none());
        }
        for (pattern, s, ptr) in &part.patterns {
            // A pattern that does not compile may match: unsure.
            if !s.accepts_none() && !matches!(self.pattern_matches(pattern, ptr, name), Ok(false)) {
                return Ok(false);
            }
        }
        Ok(true)
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
