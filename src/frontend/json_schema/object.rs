//! Objects: `properties`, `required`, `additionalProperties`, `patternProperties`,
//! `propertyNames`, `minProperties`/`maxProperties`, in schema order or any order.
//!
//! Each declared property gets one value rule: the conjunction of what every merged
//! schema part says about that name (its `properties` entry and every matching
//! `patternProperties` schema, else its `additionalProperties`). Undeclared keys are
//! "extra" pairs whose key is any string except the declared names (an exact
//! finite complement, [`Expr::Excluding`]); with
//! `patternProperties`, one extra pair per group of matched-pattern sets, its key
//! language computed on an automaton ([`super::names`]).
//!
//! Schema order is a chain of rules `B(i)` = "properties i.. follow, each after a
//! comma" (linear size; with counting, `B(i, count)`). Any order is one
//! [`Expr::Permutation`]: declared pairs as members (each at most once, required
//! ones present), undeclared pairs as its extra, `minProperties`/`maxProperties` as
//! its item count. The parser tracks which members were written, so the encoding
//! is linear in the number of properties (as a grammar it would need a rule per
//! subset of them).

use rustc_hash::FxHashMap as HashMap;

use crate::grammar::{Excluding, Expr, Intersection, Permutation, RuleId};
use serde_json::Value;

use regex_syntax::hir::Hir;

use super::names::{pattern_sets, NameLimits};
use super::node::{Node, ObjectPart, TypeSet, Witness};
use super::string::{
    canonical_body, canonical_encodings, canonical_string, complement_of_set, encode_hir,
    encoded_hir, literal_string,
};
use super::xml::ParameterStyle;
use super::{alt, nothing, seq, PropertyOrder, Result, SchemaCompiler, Subschema};

/// How an object is written: a JSON object, or the arguments of a tool call as
/// tagged parameters (the root object of an XML parameter style, see
/// [`super::xml`]; everything inside its values is JSON again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syntax {
    Json,
    Parameters(ParameterStyle),
}

/// One declared property, ready to emit.
#[derive(Clone)]
pub(crate) struct Entry {
    /// `"name" : value`.
    pub pair: Expr,
    pub required: bool,
}

/// An object ready to emit, in either property order: its declared pairs, the
/// alternatives for one undeclared pair (`None`: none allowed), and the bounds on
/// how many pairs it has.
#[derive(Clone)]
pub(super) struct Shape {
    pub entries: Vec<Entry>,
    pub extra: Option<Expr>,
    /// Undeclared pairs that must be present (see [`Witness`]).
    pub witnesses: Vec<Expr>,
    pub min: u64,
    pub max: Option<u64>,
    pub ptr: String,
    pub syntax: Syntax,
}

/// What [`SchemaCompiler::pattern_classes`] asks of every undeclared key beside
/// the object's own patterns: encoded regexes it must match (`must`) and must not
/// (`must_not`), and schemas its value must meet too.
#[derive(Default)]
struct KeyFilter<'a> {
    must: Vec<Hir>,
    must_not: Vec<Hir>,
    values: Vec<Subschema<'a>>,
}

impl<'a> SchemaCompiler<'a> {
    pub(crate) fn emit_object(&mut self, node: &Node<'a>) -> Result<Expr> {
        match self.value_style {
            Some(style @ (ParameterStyle::Gemma | ParameterStyle::MiniMaxM3)) => {
                self.emit_object_as(node, Syntax::Parameters(style))
            }
            _ => self.emit_object_as(node, Syntax::Json),
        }
    }

    /// The object of `node`, written in `syntax`.
    pub(crate) fn emit_object_as(&mut self, node: &Node<'a>, syntax: Syntax) -> Result<Expr> {
        let o = &node.obj;
        let strict = self.opts.strict;
        let ptr = o.parts.first().map(|p| p.ptr.clone()).unwrap_or_default();
        let mut names: Vec<String> = Vec::new();
        for part in &o.parts {
            for (k, _) in &part.props {
                if !names.contains(k) {
                    names.push(k.clone());
                }
            }
        }
        for r in o.required.iter().chain(&o.forbidden) {
            if !names.contains(r) {
                names.push(r.clone());
            }
        }
        let mut entries = Vec::new();
        // Each declared property's key and value schemas, for a witness.
        let mut declared = Vec::new();
        for name in &names {
            let mut conj: Vec<Subschema<'a>> = Vec::new();
            let mut allowed = !o.forbidden.contains(name);
            for part in &o.parts {
                // `properties` and every matching pattern apply; `additionalProperties`
                // only when neither does.
                let mut matched = false;
                if let Some((_, s)) = part.props.iter().find(|(k, _)| k == name) {
                    conj.push(s.clone());
                    matched = true;
                }
                for (pat, s, pptr) in &part.patterns {
                    if self.pattern_matches(pat, pptr, name)? {
                        conj.push(s.clone());
                        matched = true;
                    }
                }
                if !matched {
                    match &part.additional {
                        Some(a) => conj.push(a.clone()),
                        None if strict => allowed = false,
                        None => {}
                    }
                }
            }
            for ns in &o.names {
                if !self.validate_conj(&Value::String(name.clone()), std::slice::from_ref(ns))? {
                    allowed = false;
                }
            }
            if conj.iter().any(|s| s.accepts_none()) {
                allowed = false;
            }
            let required = o.required.contains(name);
            if !allowed {
                if required {
                    return Ok(nothing());
                }
                continue;
            }
            let key = match syntax {
                Syntax::Json => literal_string(name),
                Syntax::Parameters(style) => Expr::literal(style.key_text(name).as_bytes()),
            };
            let pair = self.pair(syntax, key.clone(), &conj)?;
            entries.push(Entry { pair, required });
            declared.push((name.clone(), key, conj));
        }
        let extra = match syntax {
            // A closing tag repeats the name: only the declared names can be
            // written (an over-constraint, see `xml.rs`).
            Syntax::Parameters(ParameterStyle::MiniMaxM3) => None,
            _ => self.extra_pairs(node, &names, &ptr, syntax)?,
        };
        let shape = Shape {
            entries,
            extra,
            witnesses: Vec::new(),
            min: o.min,
            max: o.max,
            ptr,
            syntax,
        };
        if o.witnesses.is_empty() {
            return self.emit_shape(shape, o.min_max_ptr.clone());
        }
        self.with_witnesses(node, &names, shape, declared)
    }

    /// A key (as written) and the value valid against `conj`, as one pair.
    pub(super) fn pair(
        &mut self,
        syntax: Syntax,
        key: Expr,
        conj: &[Subschema<'a>],
    ) -> Result<Expr> {
        Ok(match syntax {
            Syntax::Json => seq(vec![key, self.punct(b":"), self.value_rule(conj)?]),
            Syntax::Parameters(style) => {
                let value = self.parameter_value_rule(conj, style)?;
                tagged_pair(style, key, value)
            }
        })
    }

    /// A key matching the decoded-string regex `h`, as written.
    fn key_of_hir(syntax: Syntax, h: &Hir) -> Expr {
        match syntax {
            Syntax::Json => seq(vec![
                Expr::literal(b"\""),
                encode_hir(h),
                Expr::literal(b"\""),
            ]),
            Syntax::Parameters(_) => Expr::Regex(h.clone()),
        }
    }

    /// The alternatives for one undeclared `"key": value` pair, if any is allowed.
    fn extra_pairs(
        &mut self,
        node: &Node<'a>,
        names: &[String],
        ptr: &str,
        syntax: Syntax,
    ) -> Result<Option<Expr>> {
        let o = &node.obj;
        let strict = self.opts.strict;
        // Parts whose patterns cannot change anything: every pattern schema and the
        // additional schema are `true`.
        let trivial = |part: &ObjectPart<'a>| {
            part.patterns.iter().all(|(_, s, _)| s.accepts_all())
                && part.additional.as_ref().is_none_or(|a| a.accepts_all())
                && !strict
        };
        let pattern_parts: Vec<&ObjectPart<'a>> = o
            .parts
            .iter()
            .filter(|p| !p.patterns.is_empty() && !trivial(p))
            .collect();
        if pattern_parts.is_empty() {
            return self.plain_extra_pairs(node, names, ptr, false, syntax, None);
        }
        let pptr = pattern_parts[0].patterns[0].2.clone();
        let mut allowed_names = None;
        if !o.names.is_empty() {
            allowed_names = match syntax {
                Syntax::Json => self.names_body(node)?,
                Syntax::Parameters(_) => None,
            };
            if allowed_names.is_none() {
                self.unsupported(
                    "propertyNames",
                    ptr,
                    "propertyNames together with patternProperties, unless it is one regex",
                )?;
                return self.plain_extra_pairs(node, names, ptr, true, syntax, None);
            }
        } else if let Some(pairs) =
            self.closed_pattern_pairs(node, &pattern_parts, names, syntax)?
        {
            return Ok(pairs);
        }
        let classes = match syntax {
            Syntax::Json => {
                let filter = KeyFilter {
                    must: allowed_names.into_iter().collect(),
                    ..KeyFilter::default()
                };
                self.pattern_classes(node, names, &filter)?
            }
            Syntax::Parameters(style) => Err(format!(
                "patternProperties beside other undeclared keys, in the `{}` style",
                style.name()
            )),
        };
        match classes {
            Ok(pairs) => Ok(pairs),
            Err(reason) => {
                self.unsupported("patternProperties", &pptr, reason)?;
                self.plain_extra_pairs(node, names, ptr, true, syntax, None)
            }
        }
    }

    /// The names `propertyNames` allows as one encoded (canonical JSON string
    /// body) regex, where its schemas are one node whose strings are a regex.
    pub(super) fn names_body(&mut self, node: &Node<'a>) -> Result<Option<Hir>> {
        let nodes = self.normalize(&node.obj.names)?;
        let [n] = &nodes[..] else {
            return Ok(None);
        };
        if !n.enums.is_empty() || !n.types.intersects(TypeSet::STRING) {
            return Ok(None);
        }
        match self.string_body(n)? {
            Some(super::string::StringBody::Regex(h)) => Ok(encoded_hir(&h)),
            _ => Ok(None),
        }
    }

    /// The keys `propertyNames` allows (its nodes), as written.
    fn property_names(&mut self, nodes: Vec<Node<'a>>, syntax: Syntax) -> Result<Expr> {
        let mut alts = Vec::new();
        for mut n in nodes {
            n.types &= TypeSet::STRING;
            alts.push(match syntax {
                Syntax::Json => self.emit_node(&n)?,
                Syntax::Parameters(_) => self.parameter_name(&n)?,
            });
        }
        Ok(alt(alts))
    }

    /// The keys of one `propertyNames` regex except the declared `names` it also
    /// admits: a finite exclusion from a regular leaf ([`Expr::Excluding`]).
    /// `None` when the names are not one regex (under JSON, keys must then be
    /// canonically encoded, or a declared name could come back escaped).
    fn names_except(
        &mut self,
        nodes: &[Node<'a>],
        names: &[String],
        syntax: Syntax,
    ) -> Result<Option<Expr>> {
        let [node] = nodes else {
            return Ok(None);
        };
        if !node.enums.is_empty() || !node.types.intersects(TypeSet::STRING) {
            return Ok(None);
        }
        let Some(super::string::StringBody::Regex(h)) = self.string_body(node)? else {
            return Ok(None);
        };
        let (regex, excluded) = match syntax {
            Syntax::Json => {
                let Some(body) = encoded_hir(&h) else {
                    return Ok(None);
                };
                let quote = || Hir::literal(&b"\""[..]);
                let mut excluded = Vec::new();
                for name in names {
                    match canonical_encodings(name, 64) {
                        Some(encodings) => excluded.extend(encodings),
                        None => return Ok(None),
                    }
                }
                (Hir::concat(vec![quote(), body, quote()]), excluded)
            }
            Syntax::Parameters(_) => (h, names.iter().map(|n| n.as_bytes().to_vec()).collect()),
        };
        Ok(Some(Expr::Excluding(Box::new(Excluding {
            regex,
            excluded,
        }))))
    }

    /// Undeclared pairs when no part has (non-trivial) patterns; `skip_patterns`:
    /// parts with patterns are left out (lenient mode, not enforced).
    pub(super) fn plain_extra_pairs(
        &mut self,
        node: &Node<'a>,
        names: &[String],
        ptr: &str,
        skip_patterns: bool,
        syntax: Syntax,
        witness: Option<&Witness<'a>>,
    ) -> Result<Option<Expr>> {
        let o = &node.obj;
        let strict = self.opts.strict;
        let mut value_conj: Vec<Subschema<'a>> = witness.map_or(Vec::new(), |w| w.values.clone());
        for part in &o.parts {
            if !part.patterns.is_empty() && skip_patterns {
                continue;
            }
            match &part.additional {
                None if strict => return Ok(None),
                None => {}
                Some(a) if a.accepts_none() => return Ok(None),
                Some(a) if a.accepts_all() => {}
                Some(a) => value_conj.push(a.clone()),
            }
        }
        let by_patterns = witness.filter(|w| !(w.matching.is_empty() && w.not_matching.is_empty()));
        let key = if let Some(w) = by_patterns {
            let allowed_names = match (syntax, o.names.is_empty()) {
                (Syntax::Json, true) => Some(None),
                (Syntax::Json, false) => self.names_body(node)?.map(Some),
                _ => None,
            };
            match allowed_names {
                Some(allowed) => self.witness_key(w, names, allowed)?,
                None => {
                    self.unsupported(
                        "patternProperties",
                        &w.ptr,
                        "not of patternProperties beside propertyNames that is no one regex, or in a parameter style, is not supported",
                    )?;
                    return Ok(None);
                }
            }
        } else if !o.names.is_empty() {
            let mut clashing = Vec::new();
            for n in names {
                if self.validate_conj(&Value::String(n.clone()), &o.names)? {
                    clashing.push(n.clone());
                }
            }
            let nodes = self.normalize(&o.names)?;
            if !clashing.is_empty() {
                match self.names_except(&nodes, &clashing, syntax)? {
                    Some(key) => key,
                    None => {
                        self.unsupported(
                            "propertyNames",
                            ptr,
                            "propertyNames admits a declared property name; extra keys would need a complement",
                        )?;
                        self.property_names(nodes, syntax)?
                    }
                }
            } else {
                self.property_names(nodes, syntax)?
            }
        } else if let Syntax::Parameters(_) = syntax {
            super::xml::undeclared_name(names)
        } else if names.is_empty() {
            seq(vec![
                Expr::literal(b"\""),
                Expr::Repeat {
                    expr: Box::new(Expr::Regex(super::string::any_char(self.cache))),
                    min: 0,
                    max: None,
                },
                Expr::literal(b"\""),
            ])
        } else {
            undeclared_key(names)
        };
        // One shared rule: the automaton stage fuses it (or not) once.
        let key = self.new_rule(format!("undeclared key at {ptr}"), key)?;
        Ok(Some(self.pair(syntax, Expr::Ref(key), &value_conj)?))
    }

    /// The undeclared pairs of a closed object with one set of patterns sharing one
    /// schema, none matching a declared name: `"P": value` per pattern, no automaton
    /// needed (patterns stay counters). `None` when the shape is anything else.
    #[allow(clippy::type_complexity)]
    fn closed_pattern_pairs(
        &mut self,
        node: &Node<'a>,
        pattern_parts: &[&ObjectPart<'a>],
        names: &[String],
        syntax: Syntax,
    ) -> Result<Option<Option<Expr>>> {
        let o = &node.obj;
        let strict = self.opts.strict;
        let [pp] = pattern_parts else {
            return Ok(None);
        };
        let closed = pp.additional.as_ref().map_or(strict, |a| a.accepts_none());
        let first_schema = &pp.patterns[0].1;
        let same = |s: &Subschema<'a>| s.v == first_schema.v && s.negated == first_schema.negated;
        if !closed || pp.patterns.iter().any(|(_, s, _)| !same(s)) {
            return Ok(None);
        }
        for (pat, _, pptr) in &pp.patterns {
            for n in names {
                if self.pattern_matches(pat, pptr, n)? {
                    return Ok(None);
                }
            }
        }
        // The other parts (no patterns, or trivial ones) add their additional schema.
        let mut value_conj: Vec<Subschema<'a>> = Vec::new();
        for part in o.parts.iter().filter(|p| !std::ptr::eq(*p, *pp)) {
            if !part.patterns.is_empty() {
                continue; // trivial: true everywhere
            }
            match &part.additional {
                None if strict => return Ok(Some(None)),
                None => {}
                Some(a) if a.accepts_none() => return Ok(Some(None)),
                Some(a) if a.accepts_all() => {}
                Some(a) => value_conj.push(a.clone()),
            }
        }
        if first_schema.accepts_none() {
            return Ok(Some(None));
        }
        let mut alts = Vec::new();
        for (pat, s, pptr) in &pp.patterns {
            let key = self.pattern_hir(pat, pptr)?;
            let mut conj = value_conj.clone();
            conj.push(s.clone());
            alts.push(self.pair(syntax, Self::key_of_hir(syntax, &key), &conj)?);
        }
        Ok(Some((!alts.is_empty()).then(|| alt(alts))))
    }

    /// The undeclared pairs of an object whose patterns have schemas, for a
    /// [`Witness`] (`None` where the object allows none): keys outside `names`,
    /// matching the witness's patterns (and `propertyNames`) and none of its
    /// others, each class of keys with the schemas its patterns give beside the
    /// witness's. `Err(reason)` when the name automaton is over its bounds.
    pub(super) fn witness_pattern_pairs(
        &mut self,
        node: &Node<'a>,
        names: &[String],
        w: &Witness<'a>,
    ) -> Result<std::result::Result<Option<Expr>, String>> {
        let mut filter = KeyFilter {
            values: w.values.clone(),
            ..KeyFilter::default()
        };
        if !node.obj.names.is_empty() {
            match self.names_body(node)? {
                Some(h) => filter.must.push(h),
                None => return Ok(Err("propertyNames that is no one regex".into())),
            }
        }
        for (list, (p, ptr)) in
            (w.matching.iter().map(|m| (true, m))).chain(w.not_matching.iter().map(|m| (false, m)))
        {
            let h = self.pattern_hir(p, ptr)?;
            let Some(e) = encoded_hir(&h) else {
                return Ok(Err(format!("pattern {p:?} has no regular encoding")));
            };
            if list {
                filter.must.push(e);
            } else {
                filter.must_not.push(e);
            }
        }
        self.pattern_classes(node, names, &filter)
    }

    /// The undeclared pairs in general: names are split by the set of patterns
    /// they match (see [`super::names`]); a name matching some patterns takes all
    /// their schemas (of each merged part), one matching none takes that part's
    /// `additionalProperties`. `Err(reason)` when the automaton is over its bounds.
    #[allow(clippy::type_complexity)]
    fn pattern_classes(
        &mut self,
        node: &Node<'a>,
        names: &[String],
        filter: &KeyFilter<'a>,
    ) -> Result<std::result::Result<Option<Expr>, String>> {
        let o = &node.obj;
        let strict = self.opts.strict;
        // Distinct patterns over all parts, encoded (canonical JSON string bodies).
        let mut patterns: Vec<String> = Vec::new();
        let mut encoded: Vec<Hir> = Vec::new();
        for part in &o.parts {
            for (pat, _, pptr) in &part.patterns {
                if patterns.contains(pat) {
                    continue;
                }
                let h = self.pattern_hir(pat, pptr)?;
                let Some(e) = encoded_hir(&h) else {
                    return Ok(Err(format!("pattern {pat:?} has no regular encoding")));
                };
                patterns.push(pat.clone());
                encoded.push(e);
            }
        }
        // The filter's regexes, more patterns of the automaton: bits every key
        // must have set (or clear).
        let must = encoded.len()..encoded.len() + filter.must.len();
        encoded.extend(filter.must.iter().cloned());
        let must_not = encoded.len()..encoded.len() + filter.must_not.len();
        encoded.extend(filter.must_not.iter().cloned());
        let body = canonical_body();
        // Every spelling the body admits (`\u001f` and `\u001F`), so that no declared
        // name comes back as an undeclared one.
        let declared = Hir::alternation(
            names
                .iter()
                .map(|n| {
                    encoded_hir(&Hir::literal(n.as_bytes()))
                        .expect("a literal has no rule references")
                })
                .collect(),
        );
        let sets = match pattern_sets(&body, &declared, &encoded, &NameLimits::default()) {
            Ok(sets) => sets,
            Err(e) => return Ok(Err(e.to_string())),
        };
        // A pattern every name matches (`.*`), or none does, tells no set
        // apart: left out of the names' products, which are then often the
        // plain string body (its tables shared with every other string's).
        let constant: Vec<bool> = (0..encoded.len())
            .map(|i| sets.iter().all(|set| set[i]) || sets.iter().all(|set| !set[i]))
            .collect();
        // Group the pattern sets by the schemas a value then has to satisfy.
        let mut groups: Vec<(Vec<Subschema<'a>>, Vec<Vec<bool>>)> = Vec::new();
        'sets: for set in sets {
            if must.clone().any(|i| !set[i]) || must_not.clone().any(|i| set[i]) {
                continue;
            }
            let mut conj: Vec<Subschema<'a>> = filter.values.clone();
            for part in &o.parts {
                let mut matched = false;
                for (pat, s, _) in &part.patterns {
                    let i = patterns.iter().position(|p| p == pat).unwrap();
                    if set[i] {
                        matched = true;
                        conj.push(s.clone());
                    }
                }
                if !matched {
                    match &part.additional {
                        None if strict => continue 'sets,
                        None => {}
                        Some(a) => conj.push(a.clone()),
                    }
                }
            }
            if conj.iter().any(|s| s.accepts_none()) {
                continue;
            }
            conj.retain(|s| !s.accepts_all());
            conj.sort_by_key(Subschema::key);
            conj.dedup_by_key(|s| s.key());
            match groups.iter_mut().find(|(c, _)| {
                c.iter()
                    .map(Subschema::key)
                    .eq(conj.iter().map(Subschema::key))
            }) {
                Some((_, sets)) => sets.push(set),
                None => groups.push((conj, vec![set])),
            }
        }
        let mut alts = Vec::new();
        for (conj, sets) in groups {
            // Each pattern set's names: the product of the patterns it matches
            // and the complements of the rest (and of the declared names), built
            // by the automaton stage. Reading the names automaton back as a regex
            // instead costs a state elimination, quadratic in a counted pattern's
            // length (`^[a-z]{1,255}$`: 160 ms).
            let key = alt(sets
                .iter()
                .map(|set| {
                    let mut regexes = vec![body.clone()];
                    let mut negated: Vec<Hir> = (!names.is_empty())
                        .then(|| declared.clone())
                        .into_iter()
                        .collect();
                    for ((pattern, &matched), _) in encoded
                        .iter()
                        .zip(set)
                        .zip(&constant)
                        .filter(|(_, &constant)| !constant)
                    {
                        match matched {
                            true => regexes.push(pattern.clone()),
                            false => negated.push(pattern.clone()),
                        }
                    }
                    match (regexes.len(), negated.is_empty()) {
                        (1, true) => Expr::Regex(body.clone()),
                        _ => Expr::Intersection(Box::new(Intersection { regexes, negated })),
                    }
                })
                .collect());
            let key = self.new_rule(
                format!(
                    "undeclared key at {} ({} pattern sets)",
                    o.parts[0].ptr,
                    sets.len()
                ),
                seq(vec![Expr::literal(b"\""), key, Expr::literal(b"\"")]),
            )?;
            alts.push(self.pair(Syntax::Json, Expr::Ref(key), &conj)?);
        }
        Ok(Ok((!alts.is_empty()).then(|| alt(alts))))
    }

    /// An object literal (enum/const): every entry required, nothing else.
    pub(crate) fn object_literal(&mut self, entries: Vec<(String, Expr)>) -> Result<Expr> {
        let syntax = match self.value_style {
            Some(style @ (ParameterStyle::Gemma | ParameterStyle::MiniMaxM3)) => {
                Syntax::Parameters(style)
            }
            _ => Syntax::Json,
        };
        let entries = entries
            .into_iter()
            .map(|(name, value)| Entry {
                pair: match syntax {
                    Syntax::Json => seq(vec![literal_string(&name), self.punct(b":"), value]),
                    Syntax::Parameters(style @ ParameterStyle::MiniMaxM3) => tagged_pair(
                        style,
                        Expr::literal(name.as_bytes()),
                        seq(vec![Expr::literal(b">"), value]),
                    ),
                    Syntax::Parameters(_) => seq(vec![
                        Expr::literal(name.as_bytes()),
                        self.punct(b":"),
                        value,
                    ]),
                },
                required: true,
            })
            .collect();
        self.emit_shape(
            Shape {
                entries,
                extra: None,
                witnesses: Vec::new(),
                min: 0,
                max: None,
                ptr: String::new(),
                syntax,
            },
            None,
        )
    }

    pub(super) fn emit_shape(
        &mut self,
        mut shape: Shape,
        count_ptr: Option<String>,
    ) -> Result<Expr> {
        let n = shape.entries.len();
        let n_req = shape.entries.iter().filter(|e| e.required).count() as u64;
        let counting = shape.min > n_req
            || shape
                .max
                .is_some_and(|m| m < n as u64 || shape.extra.is_some());
        // Too few properties allowed for the required ones, or for `minProperties`
        // (a permutation, like a repetition, must not have `min > max`).
        if shape.max.is_some_and(|m| m < n_req || m < shape.min) {
            return Ok(nothing());
        }
        // Tagged parameters are separated by whitespace alone, keyword arguments
        // by commas, neither with braces around them; Gemma's are JSON's.
        let (comma, open, close) = match shape.syntax {
            Syntax::Json => (
                self.punct(b","),
                seq(vec![Expr::literal(b"{"), self.ws()]),
                seq(vec![self.ws(), Expr::literal(b"}")]),
            ),
            Syntax::Parameters(ParameterStyle::Python) => {
                (self.punct(b","), Expr::Empty, Expr::Empty)
            }
            Syntax::Parameters(ParameterStyle::Gemma) => (
                self.punct(b","),
                seq(vec![Expr::literal(b"{"), self.ws()]),
                seq(vec![self.ws(), Expr::literal(b"}")]),
            ),
            // MiniMax-M3's tags follow each other as its template writes them.
            Syntax::Parameters(ParameterStyle::MiniMaxM3) => {
                (Expr::Empty, Expr::Empty, Expr::Empty)
            }
            Syntax::Parameters(_) => (self.ws(), self.ws(), self.ws()),
        };
        // One declared property beside undeclared ones has an order too.
        if (self.opts.property_order == PropertyOrder::Any
            && (n > 1 || n == 1 && shape.extra.is_some()))
            || !shape.witnesses.is_empty()
        {
            let body = self.any_order(shape, comma)?;
            return Ok(seq(vec![open, body, close]));
        }
        if counting && shape.extra.is_some() {
            if n == 0 {
                let pair = shape.extra.take().unwrap();
                let (min, max) = (shape.min, shape.max);
                let limit = self.opts.limits.max_repetition;
                if min > limit || max.is_some_and(|m| m > limit) {
                    return Err(self.limit(
                        &shape.ptr,
                        "minProperties/maxProperties above the repetition limit",
                    ));
                }
                let body = seq(vec![
                    pair.clone(),
                    Expr::Repeat {
                        expr: Box::new(seq(vec![comma, pair])),
                        min: min.saturating_sub(1) as u32,
                        max: max.map(|m| m.saturating_sub(1) as u32),
                    },
                ]);
                let body = if min == 0 {
                    if max == Some(0) {
                        Expr::Empty
                    } else {
                        Expr::optional(body)
                    }
                } else {
                    body
                };
                return Ok(seq(vec![open, body, close]));
            }
            let p = count_ptr.unwrap_or_else(|| shape.ptr.clone());
            self.unsupported(
                "minProperties/maxProperties",
                &p,
                "counting properties when undeclared properties are allowed beside declared ones",
            )?;
            shape.min = 0;
            shape.max = None;
        }
        let body = self.schema_order(&shape, &comma)?;
        Ok(seq(vec![open, body, close]))
    }

    /// Any order: one permutation of the declared pairs, undeclared pairs as the
    /// extra, counted by `minProperties`/`maxProperties`.
    fn any_order(&mut self, shape: Shape, comma: Expr) -> Result<Expr> {
        // Counts saturate in the parser: bounds beyond u32 behave as unbounded.
        let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        let (required, members) = (shape.entries.into_iter())
            .map(|e| (e.required, e.pair))
            .chain(shape.witnesses.into_iter().map(|pair| (true, pair)))
            .unzip();
        Ok(Expr::Permutation(Box::new(Permutation {
            members,
            required,
            extra: shape.extra,
            separator: comma,
            min: clamp(shape.min),
            max: shape.max.and_then(|m| u32::try_from(m).ok()),
        })))
    }

    fn end_ok(shape: &Shape, count: u64, required_seen: bool) -> bool {
        required_seen && count >= shape.min && shape.max.is_none_or(|m| count <= m)
    }

    fn schema_order(&mut self, shape: &Shape, comma: &Expr) -> Result<Expr> {
        let n = shape.entries.len();
        let counting = shape.min > 0 || shape.max.is_some();
        let mut b_memo: HashMap<(usize, u64), RuleId> = HashMap::default();
        // A(i): nothing emitted yet, properties i.. remain. Built from the end.
        let mut a_next: Expr = {
            let mut alts = Vec::new();
            if Self::end_ok(shape, 0, true) {
                alts.push(Expr::Empty);
            }
            if let Some(pair) = &shape.extra {
                let tail = self.chain_b(shape, comma, n, 1, counting, &mut b_memo)?;
                alts.push(seq(vec![pair.clone(), tail]));
            }
            alt(alts)
        };
        for i in (0..n).rev() {
            let take = if shape.max.is_some_and(|m| m == 0) {
                nothing()
            } else {
                let tail = self.chain_b(shape, comma, i + 1, 1, counting, &mut b_memo)?;
                seq(vec![shape.entries[i].pair.clone(), tail])
            };
            let expr = if shape.entries[i].required {
                take
            } else {
                alt(vec![take, a_next])
            };
            let id = self.new_rule(format!("object {} from property {i}", shape.ptr), expr)?;
            a_next = Expr::Ref(id);
        }
        Ok(a_next)
    }

    /// `B(i, count)`: at least one pair emitted; properties i.. remain, each after a comma.
    fn chain_b(
        &mut self,
        shape: &Shape,
        comma: &Expr,
        i: usize,
        count: u64,
        counting: bool,
        memo: &mut HashMap<(usize, u64), RuleId>,
    ) -> Result<Expr> {
        let count_key = if counting { count } else { 0 };
        if let Some(&id) = memo.get(&(i, count_key)) {
            return Ok(Expr::Ref(id));
        }
        let n = shape.entries.len();
        let expr = if i == n {
            let mut alts = Vec::new();
            if !counting || Self::end_ok(shape, count, true) {
                alts.push(Expr::Empty);
            }
            let e = alt(alts);
            match &shape.extra {
                Some(pair) => seq(vec![
                    Expr::Repeat {
                        expr: Box::new(seq(vec![comma.clone(), pair.clone()])),
                        min: 0,
                        max: None,
                    },
                    e,
                ]),
                None => e,
            }
        } else {
            if counting && memo.len() > 200_000 {
                return Err(self.limit(
                    &shape.ptr,
                    "too many properties to count for minProperties/maxProperties",
                ));
            }
            let take = if counting && shape.max.is_some_and(|m| count >= m) {
                nothing()
            } else {
                let tail = self.chain_b(shape, comma, i + 1, count + 1, counting, memo)?;
                seq(vec![comma.clone(), shape.entries[i].pair.clone(), tail])
            };
            if shape.entries[i].required {
                take
            } else {
                let skip = self.chain_b(shape, comma, i + 1, count, counting, memo)?;
                alt(vec![take, skip])
            }
        };
        let id = self.new_rule(format!("object {} after property {i}", shape.ptr), expr)?;
        memo.insert((i, count_key), id);
        Ok(Expr::Ref(id))
    }
}

/// A parameter as `style` writes it: its key's prefix, the key, what follows
/// it up to the value's end, and (MiniMax-M3's) the closing tag naming the key.
fn tagged_pair(style: ParameterStyle, key: Expr, rest: Expr) -> Expr {
    let mut parts = vec![
        Expr::literal(style.key_prefix().as_bytes()),
        key.clone(),
        rest,
    ];
    if style == ParameterStyle::MiniMaxM3 {
        parts.extend([
            Expr::literal(style.end().as_bytes()),
            key,
            Expr::literal(b">"),
        ]);
    }
    seq(parts)
}

/// Any key but `names`: every canonical string minus the names' encodings,
/// built as a product automaton ([`Expr::Excluding`]); as a regex complement only
/// when the names have too many encodings (escaped control characters).
fn undeclared_key(names: &[String]) -> Expr {
    const MOST_ENCODINGS: usize = 4096;
    let mut excluded = Vec::new();
    for name in names {
        match canonical_encodings(name, MOST_ENCODINGS) {
            Some(encodings) if excluded.len() + encodings.len() <= MOST_ENCODINGS => {
                excluded.extend(encodings)
            }
            _ => {
                return seq(vec![
                    Expr::literal(b"\""),
                    encode_hir(&complement_of_set(names)),
                    Expr::literal(b"\""),
                ])
            }
        }
    }
    Expr::Excluding(Box::new(Excluding {
        regex: canonical_string(),
        excluded,
    }))
}
