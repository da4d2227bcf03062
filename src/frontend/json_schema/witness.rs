//! Objects that must hold a property `not` asks for: a [`Witness`] ("some property
//! whose name is none of these, matches that pattern, has a value valid against
//! that schema") made concrete in the object being emitted.
//!
//! A witness is met by one of the object's declared properties so named (required
//! there, its value restricted), or by an undeclared pair written as one more
//! required member of the object's permutation, or by a member already sought for
//! an earlier witness (one property may serve several, and an object of one
//! property must not be asked for two). Each way is a variant of the object's
//! [`Shape`]; their union is exact. Kept apart from [`super::object`], which it
//! extends: only objects under a negation need it.

use regex_syntax::hir::Hir;

use crate::grammar::{Expr, Intersection};

use super::node::{Node, Witness};
use super::shape::{Entry, Shape};
use super::string::{canonical_encodings, canonical_string, encoded_hir, quoted_hir};
use super::{alt, Result, SchemaCompiler, Subschema};

/// What [`SchemaCompiler::seek`] looks for, in which object.
struct Sought<'s, 'a> {
    node: &'s Node<'a>,
    names: &'s [String],
    witnesses: &'s [Witness<'a>],
}

impl<'a> SchemaCompiler<'a> {
    /// The objects of `shape` (the object of `node`, its declared `names`, each
    /// declared property's key and value schemas in `declared`) that meet every
    /// witness of `node`.
    pub(super) fn with_witnesses(
        &mut self,
        node: &Node<'a>,
        names: &[String],
        shape: Shape,
        declared: Vec<(String, Expr, Vec<Subschema<'a>>)>,
    ) -> Result<Expr> {
        let sought = Sought {
            node,
            names,
            witnesses: &node.obj.witnesses,
        };
        let mut variants = Vec::new();
        self.seek(&sought, shape, declared, Vec::new(), 0, &mut variants)?;
        Ok(alt(variants))
    }

    /// The objects of `shape` that hold, for each witness from `next` on, a
    /// property it names whose value it takes: one of the declared properties so
    /// named (required there, its value restricted), an undeclared pair written as
    /// one more required member of the permutation, or a member already sought for
    /// an earlier witness (one property may serve several). With members, in any
    /// order in either property order: sound, and the extra pairs have no place of
    /// their own.
    fn seek(
        &mut self,
        sought: &Sought<'_, 'a>,
        shape: Shape,
        declared: Vec<(String, Expr, Vec<Subschema<'a>>)>,
        members: Vec<Witness<'a>>,
        next: usize,
        variants: &mut Vec<Expr>,
    ) -> Result<()> {
        let count_ptr = sought.node.obj.min_max_ptr.clone();
        if variants.len() > self.opts.limits.max_alternatives {
            return Err(self.limit(
                &shape.ptr,
                "too many ways to hold the properties a not asks for",
            ));
        }
        let Some(w) = sought.witnesses.get(next) else {
            let mut pairs = Vec::new();
            for m in &members {
                // Its key is neither a declared name nor one of `outside`.
                let mut keys_not = sought.names.to_vec();
                for k in &m.outside {
                    if !keys_not.contains(k) {
                        keys_not.push(k.clone());
                    }
                }
                let pair = if has_pattern_schemas(sought.node) {
                    match self.witness_pattern_pairs(sought.node, &keys_not, m)? {
                        Ok(pair) => pair,
                        Err(reason) => {
                            self.unsupported("not", &m.ptr, reason)?;
                            None
                        }
                    }
                } else {
                    self.plain_extra_pairs(
                        sought.node,
                        &keys_not,
                        &shape.ptr,
                        false,
                        shape.syntax,
                        Some(m),
                    )?
                };
                match pair {
                    Some(pair) => pairs.push(pair),
                    None => return Ok(()),
                }
            }
            variants.push(self.emit_shape(
                Shape {
                    witnesses: pairs,
                    ..shape
                },
                count_ptr,
            )?);
            return Ok(());
        };
        for i in 0..declared.len() {
            if !self.witness_name(w, &declared[i].0)? {
                continue;
            }
            let mut declared = declared.clone();
            declared[i].2.extend(w.values.iter().cloned());
            let mut entries: Vec<Entry> = shape.entries.clone();
            entries[i] = Entry {
                pair: self.pair(shape.syntax, declared[i].1.clone(), &declared[i].2)?,
                required: true,
            };
            let variant = Shape {
                entries,
                ..shape.clone()
            };
            self.seek(
                sought,
                variant,
                declared,
                members.clone(),
                next + 1,
                variants,
            )?;
        }
        if shape.extra.is_none() {
            return Ok(());
        }
        if has_pattern_schemas(sought.node) && shape.syntax != super::shape::Syntax::Json {
            return self.unsupported(
                "additionalProperties",
                &w.ptr,
                "not of an object beside patternProperties, in a parameter style",
            );
        }
        // An earlier member that serves this witness too.
        for j in 0..members.len() {
            let mut members = members.clone();
            let m = &mut members[j];
            m.outside.extend(w.outside.iter().cloned());
            m.matching.extend(w.matching.iter().cloned());
            m.not_matching.extend(w.not_matching.iter().cloned());
            m.values.extend(w.values.iter().cloned());
            self.seek(
                sought,
                shape.clone(),
                declared.clone(),
                members,
                next + 1,
                variants,
            )?;
        }
        let mut members = members;
        members.push(w.clone());
        self.seek(sought, shape, declared, members, next + 1, variants)
    }

    /// The keys of a witness's undeclared property (JSON, canonical): matching its
    /// patterns (and `allowed`, the encoded names `propertyNames` allows), none of
    /// its other patterns, none of `names`. Regular languages intersected and
    /// complemented in the automaton stage.
    pub(super) fn witness_key(
        &mut self,
        w: &Witness<'a>,
        names: &[String],
        allowed: Option<Hir>,
    ) -> Result<Expr> {
        let quoted = |c: &mut Self, (p, ptr): &(String, String)| -> Result<Hir> {
            let h = c.pattern_hir(p, ptr)?;
            let body = encoded_hir(&h).ok_or_else(|| c.limit(ptr, "pattern not regular"))?;
            Ok(quoted_hir(body))
        };
        let mut regexes = Vec::new();
        for p in &w.matching {
            regexes.push(quoted(self, p)?);
        }
        if let Some(body) = allowed {
            regexes.push(quoted_hir(body));
        }
        if regexes.is_empty() {
            regexes.push(canonical_string());
        }
        let mut negated = Vec::new();
        for p in &w.not_matching {
            negated.push(quoted(self, p)?);
        }
        let mut spelled = Vec::new();
        for name in names {
            match canonical_encodings(name, 64) {
                Some(encodings) => spelled.extend(encodings.iter().map(|e| Hir::literal(&e[..]))),
                None => negated.push(quoted_hir(
                    encoded_hir(&Hir::literal(name.as_bytes())).expect("a literal is regular"),
                )),
            }
        }
        if !spelled.is_empty() {
            negated.push(Hir::alternation(spelled));
        }
        Ok(Expr::Intersection(Box::new(Intersection {
            regexes,
            negated,
        })))
    }
}

/// Whether some pattern of `node`'s object gives its properties a schema.
fn has_pattern_schemas(node: &Node<'_>) -> bool {
    (node.obj.parts.iter()).any(|p| p.patterns.iter().any(|(_, s, _)| !s.accepts_all()))
}
