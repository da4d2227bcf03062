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
//! What this decides is a [`Shape`]; [`super::shape`] writes it as a grammar in
//! the chosen property order.

use crate::grammar::{Excluding, Expr, Intersection};
use serde_json::Value;

use regex_syntax::hir::Hir;

use super::names::{pattern_sets, NameLimits};
use super::node::{Node, ObjectPart, TypeSet, Witness};
use super::shape::{tagged_pair, Entry, Shape, Syntax};
use super::string::{
    canonical_body, canonical_encodings, canonical_string, complement_of_set, encode_hir,
    encoded_hir, literal_string, quoted_hir, quoted_intersection,
};
use super::xml::ParameterStyle;
use super::{alt, nothing, seq, Result, SchemaCompiler, Subschema};

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
        let filter = KeyFilter {
            must: allowed_names.into_iter().collect(),
            ..KeyFilter::default()
        };
        let classes = self.pattern_classes(node, names, &filter, syntax)?;
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
        self.pattern_classes(node, names, &filter, Syntax::Json)
    }

    /// The undeclared pairs in general: names are split by the set of patterns
    /// they match (see [`super::names`]); a name matching some patterns takes all
    /// their schemas (of each merged part), one matching none takes that part's
    /// `additionalProperties`. `Err(reason)` when the automaton is over its bounds.
    ///
    /// Under JSON the names are canonical string bodies between quotes; in a
    /// parameter style they are written raw, identifiers (as every undeclared
    /// name there), so a pattern's names that are no identifier are left out.
    #[allow(clippy::type_complexity)]
    fn pattern_classes(
        &mut self,
        node: &Node<'a>,
        names: &[String],
        filter: &KeyFilter<'a>,
        syntax: Syntax,
    ) -> Result<std::result::Result<Option<Expr>, String>> {
        let o = &node.obj;
        let strict = self.opts.strict;
        let json = matches!(syntax, Syntax::Json);
        // A name as the syntax spells it: encoded (canonical JSON string
        // bodies), or raw.
        let spelled = |h: &Hir| {
            if json {
                encoded_hir(h)
            } else {
                Some(h.clone())
            }
        };
        // Distinct patterns over all parts, spelled.
        let mut patterns: Vec<String> = Vec::new();
        let mut encoded: Vec<Hir> = Vec::new();
        for part in &o.parts {
            for (pat, _, pptr) in &part.patterns {
                if patterns.contains(pat) {
                    continue;
                }
                let h = self.pattern_hir(pat, pptr)?;
                let Some(e) = spelled(&h) else {
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
        let body = if json {
            canonical_body()
        } else {
            super::xml::identifier()
        };
        // Every spelling the body admits (`\u001f` and `\u001F`), so that no declared
        // name comes back as an undeclared one.
        let declared = Hir::alternation(
            names
                .iter()
                .map(|n| {
                    spelled(&Hir::literal(n.as_bytes())).expect("a literal has no rule references")
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
                    match (regexes.len(), negated.is_empty(), json) {
                        (1, true, true) => Expr::Regex(quoted_hir(body.clone())),
                        (1, true, false) => Expr::Regex(body.clone()),
                        (_, _, true) => quoted_intersection(Intersection { regexes, negated }),
                        (_, _, false) => {
                            Expr::Intersection(Box::new(Intersection { regexes, negated }))
                        }
                    }
                })
                .collect());
            let key = self.new_rule(
                format!(
                    "undeclared key at {} ({} pattern sets)",
                    o.parts[0].ptr,
                    sets.len()
                ),
                key,
            )?;
            alts.push(self.pair(syntax, Expr::Ref(key), &conj)?);
        }
        Ok(Ok((!alts.is_empty()).then(|| alt(alts))))
    }
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
