//! Keywords collected into one conjunctive [`Node`] per value position.
//!
//! A grammar cannot intersect two sub-grammars, so intersection happens here, on
//! keyword values: `allOf` members, `$ref` targets and sibling keywords are all
//! merged into one node (type sets intersected, bounds tightened, enums
//! intersected, per-part object/array keywords kept side by side because
//! `additionalProperties`/`items` only see their own schema object). Disjunctions
//! (`anyOf`/`oneOf`) are recorded and distributed afterwards by
//! [`super::combinators`]. Emission then works per JSON type on a node whose
//! constraints are all known at once ([`super::emit`]).

use serde_json::{Map, Value};

use super::decimal::Decimal;
use super::node::{ArrayPart, Conditional, Disjunction, Node, ObjectPart, TypeSet, Unevaluated};
use super::{Draft, Result, SchemaCompiler, Subschema};

/// Keywords that never constrain an instance.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "id",
    "$anchor",
    "$dynamicAnchor",
    "$recursiveAnchor",
    "$defs",
    "definitions",
    "$comment",
    "$vocabulary",
    "title",
    "description",
    "default",
    "examples",
    "example",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
    // consumed together with their main keyword
    "then",
    "else",
    "minContains",
    "maxContains",
    "additionalItems",
];

pub(crate) fn is_annotation(k: &str) -> bool {
    ANNOTATIONS.contains(&k)
        && !matches!(
            k,
            "then" | "else" | "minContains" | "maxContains" | "additionalItems"
        )
}

pub(crate) fn as_count(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1.8e19)
            .map(|f| f as u64)
    })
}

/// One keyword of a schema object, with what reading it needs: the object around
/// it (`then`, `minContains`, `additionalItems`... are read with their main
/// keyword) and its pointer, for messages.
struct Keyword<'k, 'a> {
    schema: &'k Subschema<'a>,
    siblings: &'a Map<String, Value>,
    name: &'k str,
    value: &'a Value,
    ptr: String,
}

impl Keyword<'_, '_> {
    /// The error for a malformed value of this keyword.
    fn malformed(&self, c: &SchemaCompiler<'_>, message: &str) -> Result<()> {
        Err(c.invalid(self.name, &self.ptr, message))
    }
}

impl<'a> SchemaCompiler<'a> {
    /// Merges the keywords of `s` into `node`.
    pub(crate) fn collect(
        &mut self,
        s: &Subschema<'a>,
        node: &mut Node<'a>,
        depth: usize,
    ) -> Result<()> {
        if depth > self.opts.limits.max_inline_depth {
            return Err(self.limit(
                &s.ptr,
                format!(
                    "more than {} nested $ref/allOf inlined at one value (a $ref cycle that never reaches a property or item?)",
                    self.opts.limits.max_inline_depth
                ),
            ));
        }
        if s.negated {
            node.negations.push(s.negation());
            return Ok(());
        }
        let map = match s.v {
            Value::Bool(true) => return Ok(()),
            Value::Bool(false) => {
                node.types = TypeSet::NONE;
                return Ok(());
            }
            Value::Object(map) => map,
            _ => return Err(self.invalid("", &s.ptr, "a schema must be an object or a boolean")),
        };
        if self.draft <= Draft::Draft7 && map.contains_key("$ref") {
            // Before 2019-09, `$ref` makes its siblings ignored.
            return self.collect_ref(s, "$ref", &map["$ref"], node, depth);
        }
        // A schema object with `unevaluated*` opens an evaluation scope for what
        // its keywords and in-place applicators evaluate.
        let scoped;
        let s = if self.draft >= Draft::Draft201909
            && (map.contains_key("unevaluatedProperties") || map.contains_key("unevaluatedItems"))
        {
            self.next_scope += 1;
            scoped = Subschema {
                scopes: s.scopes.with(self.next_scope),
                ..s.clone()
            };
            &scoped
        } else {
            s
        };
        for (k, v) in map {
            let kw = Keyword {
                schema: s,
                siblings: map,
                name: k,
                value: v,
                ptr: s.at(k),
            };
            self.keyword(kw, node, depth)?;
        }
        Ok(())
    }

    fn collect_ref(
        &mut self,
        s: &Subschema<'a>,
        kw: &str,
        v: &'a Value,
        node: &mut Node<'a>,
        depth: usize,
    ) -> Result<()> {
        let Some(r) = v.as_str() else {
            return Err(self.invalid(kw, &s.at(kw), "must be a string"));
        };
        let base = self.index.base_of(&s.ptr).unwrap_or_else(|| s.base.clone());
        let target = match self.index.resolve(&base, r) {
            Some(t) => t,
            None => {
                return self.unsupported(
                    kw,
                    &s.at(kw),
                    format!(
                        "cannot resolve {r:?}: not in the schema nor in the documents passed \
                         (--ref-dir, `JsonSchemaOptions::documents`; never fetched)"
                    ),
                )
            }
        };
        if kw != "$ref" {
            let dynamic = match kw {
                "$dynamicRef" => target.v.get("$dynamicAnchor").is_some(),
                _ => target.v.get("$recursiveAnchor").and_then(Value::as_bool) == Some(true),
            };
            if dynamic {
                return self.unsupported(
                    kw,
                    &s.at(kw),
                    "dynamic scope resolution is not supported",
                );
            }
        }
        let target = Subschema {
            scopes: s.scopes.clone(),
            ..target
        };
        self.collect(&target, node, depth + 1)
    }

    /// Merges one keyword into `node`, by family.
    fn keyword(&mut self, kw: Keyword<'_, 'a>, node: &mut Node<'a>, depth: usize) -> Result<()> {
        match kw.name {
            k if ANNOTATIONS.contains(&k) => Ok(()),
            "type" | "enum" | "const" => self.collect_type(kw, node),
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => {
                self.collect_number(kw, node)
            }
            "minLength" | "maxLength" | "pattern" | "format" => self.collect_string(kw, node),
            "minItems" | "maxItems" | "prefixItems" | "items" | "contains" | "uniqueItems" => {
                self.collect_array(kw, node)
            }
            "properties"
            | "patternProperties"
            | "additionalProperties"
            | "required"
            | "minProperties"
            | "maxProperties"
            | "propertyNames"
            | "dependentRequired"
            | "dependentSchemas"
            | "dependencies" => self.collect_object(kw, node),
            "allOf" | "anyOf" | "oneOf" | "not" | "if" | "$ref" | "$dynamicRef"
            | "$recursiveRef" => self.collect_applicator(kw, node, depth),
            "unevaluatedProperties" | "unevaluatedItems" => self.collect_unevaluated(kw, node),
            _ => Ok(()), // unknown keywords are annotations (JSON Schema 2020-12 §6.5)
        }
    }

    /// `type`, `enum`, `const`: the type set and the value lists.
    fn collect_type(&mut self, kw: Keyword<'_, 'a>, node: &mut Node<'a>) -> Result<()> {
        match kw.name {
            "type" => {
                let mut mask = TypeSet::NONE;
                let names: Vec<&Value> = match kw.value {
                    Value::Array(a) => a.iter().collect(),
                    other => vec![other],
                };
                for n in names {
                    match n.as_str().and_then(TypeSet::named) {
                        Some(m) => mask |= m,
                        None => return kw.malformed(self, "unknown type name"),
                    }
                }
                node.types &= mask;
            }
            "enum" => match kw.value {
                Value::Array(a) => node.enums.push(a.iter().collect()),
                _ => return kw.malformed(self, "must be an array"),
            },
            "const" => node.enums.push(vec![kw.value]),
            _ => {} // not of this family: keyword() dispatches by name
        }
        Ok(())
    }

    /// Number bounds (draft 4's boolean `exclusiveMinimum`/`exclusiveMaximum` too)
    /// and `multipleOf`.
    fn collect_number(&mut self, kw: Keyword<'_, 'a>, node: &mut Node<'a>) -> Result<()> {
        match kw.name {
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                if let Value::Bool(b) = kw.value {
                    // Draft 4: a flag on minimum/maximum.
                    if *b {
                        let base = if kw.name == "exclusiveMinimum" {
                            "minimum"
                        } else {
                            "maximum"
                        };
                        let Some(bound) = kw.siblings.get(base).and_then(Decimal::from_value)
                        else {
                            return Ok(());
                        };
                        self.tighten(node, base == "minimum", bound, true);
                    }
                    return Ok(());
                }
                let Some(d) = Decimal::from_value(kw.value) else {
                    return kw.malformed(self, "must be a number");
                };
                let exclusive = kw.name.starts_with("exclusive");
                let lower = kw.name == "minimum" || kw.name == "exclusiveMinimum";
                let draft4_exclusive = self.draft == Draft::Draft4
                    && !exclusive
                    && kw
                        .siblings
                        .get(if lower {
                            "exclusiveMinimum"
                        } else {
                            "exclusiveMaximum"
                        })
                        .and_then(Value::as_bool)
                        == Some(true);
                if !draft4_exclusive {
                    self.tighten(node, lower, d, exclusive);
                }
            }
            "multipleOf" => match Decimal::from_value(kw.value) {
                Some(d) if d.is_positive() => node.num.multiple_of.push((d, kw.ptr)),
                _ => return kw.malformed(self, "must be a number greater than 0"),
            },
            _ => {} // not of this family: keyword() dispatches by name
        }
        Ok(())
    }

    /// `minLength`/`maxLength`, `pattern`, `format`.
    fn collect_string(&mut self, kw: Keyword<'_, 'a>, node: &mut Node<'a>) -> Result<()> {
        match kw.name {
            "minLength" | "maxLength" => {
                let Some(n) = as_count(kw.value) else {
                    return kw.malformed(self, "must be a non-negative integer");
                };
                tighten_count(
                    &mut node.str.min,
                    &mut node.str.max,
                    kw.name == "minLength",
                    n,
                );
                node.str.length_ptr.get_or_insert(kw.ptr);
            }
            "pattern" => match kw.value.as_str() {
                Some(p) => {
                    let (p, looks) = super::pattern::split_leading_lookaheads(p)
                        .unwrap_or_else(|| (p.to_string(), Vec::new()));
                    for (positive, look) in looks {
                        let list = if positive {
                            &mut node.str.patterns
                        } else {
                            &mut node.str.not_patterns
                        };
                        if !list.iter().any(|(q, _)| *q == look) {
                            list.push((look, kw.ptr.clone()));
                        }
                    }
                    if !node.str.patterns.iter().any(|(q, _)| *q == p) {
                        node.str.patterns.push((p, kw.ptr))
                    }
                }
                None => return kw.malformed(self, "must be a string"),
            },
            "format" => match kw.value.as_str() {
                Some(_) if self.opts.format == super::FormatMode::Annotate => {}
                Some(f) => {
                    if super::format::is_known(f) && !node.str.formats.iter().any(|(q, _)| q == f) {
                        node.str.formats.push((f.to_string(), kw.ptr));
                    }
                }
                None => return kw.malformed(self, "must be a string"),
            },
            _ => {} // not of this family: keyword() dispatches by name
        }
        Ok(())
    }

    /// Item counts, `prefixItems`/`items` (with `additionalItems` before 2020-12),
    /// `contains` (with `minContains`/`maxContains`), `uniqueItems`.
    fn collect_array(&mut self, kw: Keyword<'_, 'a>, node: &mut Node<'a>) -> Result<()> {
        match kw.name {
            "minItems" | "maxItems" => {
                let Some(n) = as_count(kw.value) else {
                    return kw.malformed(self, "must be a non-negative integer");
                };
                tighten_count(
                    &mut node.arr.min,
                    &mut node.arr.max,
                    kw.name == "minItems",
                    n,
                );
            }
            "prefixItems" => {
                if self.draft < Draft::Draft202012 {
                    return Ok(());
                }
                let Value::Array(items) = kw.value else {
                    return kw.malformed(self, "must be an array");
                };
                let prefix = items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| kw.schema.child(x, &[kw.name, &i.to_string()]))
                    .collect();
                let rest = kw
                    .siblings
                    .get("items")
                    .map(|x| kw.schema.child(x, &["items"]));
                node.arr.parts.push(ArrayPart {
                    prefix,
                    rest,
                    scopes: kw.schema.scopes.clone(),
                });
            }
            "items" => match kw.value {
                Value::Array(items) => {
                    if self.draft >= Draft::Draft202012 {
                        return kw.malformed(
                            self,
                            "an array form of items is prefixItems since 2020-12",
                        );
                    }
                    let prefix = items
                        .iter()
                        .enumerate()
                        .map(|(i, x)| kw.schema.child(x, &[kw.name, &i.to_string()]))
                        .collect();
                    let rest = kw
                        .siblings
                        .get("additionalItems")
                        .map(|x| kw.schema.child(x, &["additionalItems"]));
                    node.arr.parts.push(ArrayPart {
                        prefix,
                        rest,
                        scopes: kw.schema.scopes.clone(),
                    });
                }
                _ => {
                    if self.draft >= Draft::Draft202012 && kw.siblings.contains_key("prefixItems") {
                        return Ok(()); // handled with prefixItems
                    }
                    node.arr.parts.push(ArrayPart {
                        prefix: Vec::new(),
                        rest: Some(kw.schema.child(kw.value, &[kw.name])),
                        scopes: kw.schema.scopes.clone(),
                    });
                }
            },
            "contains" => {
                let min = match kw.siblings.get("minContains") {
                    Some(m) if self.draft >= Draft::Draft201909 => match as_count(m) {
                        Some(n) => n,
                        None => {
                            return Err(self.invalid(
                                "minContains",
                                &kw.schema.at("minContains"),
                                "must be a count",
                            ))
                        }
                    },
                    _ => 1,
                };
                let max = match kw.siblings.get("maxContains") {
                    Some(m) if self.draft >= Draft::Draft201909 => match as_count(m) {
                        Some(n) => Some(n),
                        None => {
                            return Err(self.invalid(
                                "maxContains",
                                &kw.schema.at("maxContains"),
                                "must be a count",
                            ))
                        }
                    },
                    _ => None,
                };
                node.arr
                    .contains
                    .push((kw.schema.child(kw.value, &[kw.name]), min, max, kw.ptr));
            }
            "uniqueItems" => match kw.value {
                Value::Bool(true) => node.arr.unique = Some(kw.ptr),
                Value::Bool(false) => {}
                _ => return kw.malformed(self, "must be a boolean"),
            },
            _ => {} // not of this family: keyword() dispatches by name
        }
        Ok(())
    }

    /// `properties`/`patternProperties`/`additionalProperties` (read together),
    /// `required`, property counts, `propertyNames`, dependencies.
    fn collect_object(&mut self, kw: Keyword<'_, 'a>, node: &mut Node<'a>) -> Result<()> {
        match kw.name {
            "properties" | "patternProperties" | "additionalProperties" => {
                // All three are read together once, from "properties" or the first present.
                let first = ["properties", "patternProperties", "additionalProperties"]
                    .into_iter()
                    .find(|x| kw.siblings.contains_key(*x));
                if first != Some(kw.name) {
                    return Ok(());
                }
                let mut part = ObjectPart {
                    props: Vec::new(),
                    patterns: Vec::new(),
                    additional: None,
                    ptr: kw.schema.ptr.to_string(),
                    scopes: kw.schema.scopes.clone(),
                };
                if let Some(p) = kw.siblings.get("properties") {
                    let Value::Object(p) = p else {
                        return Err(self.invalid(
                            "properties",
                            &kw.schema.at("properties"),
                            "must be an object",
                        ));
                    };
                    for (name, sub) in p {
                        part.props
                            .push((name.clone(), kw.schema.child(sub, &["properties", name])));
                    }
                }
                if let Some(p) = kw.siblings.get("patternProperties") {
                    let Value::Object(p) = p else {
                        return Err(self.invalid(
                            "patternProperties",
                            &kw.schema.at("patternProperties"),
                            "must be an object",
                        ));
                    };
                    for (pat, sub) in p {
                        part.patterns.push((
                            pat.clone(),
                            kw.schema.child(sub, &["patternProperties", pat]),
                            format!("{}/patternProperties", kw.schema.ptr),
                        ));
                    }
                }
                part.additional = kw
                    .siblings
                    .get("additionalProperties")
                    .map(|a| kw.schema.child(a, &["additionalProperties"]));
                node.obj.parts.push(part);
            }
            "required" => {
                let Value::Array(names) = kw.value else {
                    return kw.malformed(self, "must be an array of strings");
                };
                for n in names {
                    let Some(n) = n.as_str() else {
                        return kw.malformed(self, "must be an array of strings");
                    };
                    if !node.obj.required.iter().any(|r| r == n) {
                        node.obj.required.push(n.to_string());
                    }
                }
            }
            "minProperties" | "maxProperties" => {
                let Some(n) = as_count(kw.value) else {
                    return kw.malformed(self, "must be a non-negative integer");
                };
                tighten_count(
                    &mut node.obj.min,
                    &mut node.obj.max,
                    kw.name == "minProperties",
                    n,
                );
                node.obj.min_max_ptr.get_or_insert(kw.ptr);
            }
            "propertyNames" => node.obj.names.push(kw.schema.child(kw.value, &[kw.name])),
            "dependentRequired" | "dependentSchemas" | "dependencies" => {
                let Value::Object(deps) = kw.value else {
                    return kw.malformed(self, "must be an object");
                };
                for (name, d) in deps {
                    match d {
                        Value::Array(list) if kw.name != "dependentSchemas" => {
                            let names: Option<Vec<String>> =
                                list.iter().map(|x| x.as_str().map(String::from)).collect();
                            match names {
                                Some(names) => node.obj.dep_required.push((
                                    name.clone(),
                                    names,
                                    kw.ptr.clone(),
                                )),
                                None => {
                                    return kw.malformed(self, "dependency lists must hold strings")
                                }
                            }
                        }
                        _ if kw.name != "dependentRequired" => node
                            .obj
                            .dep_schemas
                            .push((name.clone(), kw.schema.in_place(d, &[kw.name, name]))),
                        _ => return kw.malformed(self, "must map names to arrays of names"),
                    }
                }
            }
            _ => {} // not of this family: keyword() dispatches by name
        }
        Ok(())
    }

    /// `allOf` and `$ref` (inlined here), `anyOf`/`oneOf`/`not`/`if` (recorded, for
    /// [`super::combinators`] to distribute).
    fn collect_applicator(
        &mut self,
        kw: Keyword<'_, 'a>,
        node: &mut Node<'a>,
        depth: usize,
    ) -> Result<()> {
        match kw.name {
            "allOf" => {
                let Value::Array(items) = kw.value else {
                    return kw.malformed(self, "must be an array");
                };
                for (i, item) in items.iter().enumerate() {
                    self.collect(
                        &kw.schema.in_place(item, &[kw.name, &i.to_string()]),
                        node,
                        depth + 1,
                    )?;
                }
            }
            "anyOf" | "oneOf" => {
                let Value::Array(items) = kw.value else {
                    return kw.malformed(self, "must be an array");
                };
                if items.is_empty() {
                    return kw.malformed(self, "must not be empty");
                }
                node.disjunctions.push(Disjunction {
                    exactly_one: kw.name == "oneOf",
                    branches: items
                        .iter()
                        .enumerate()
                        .map(|(i, x)| kw.schema.in_place(x, &[kw.name, &i.to_string()]))
                        .collect(),
                    ptr: kw.ptr,
                });
            }
            "not" => node.negations.push(kw.schema.child(kw.value, &[kw.name])),
            // Before draft 7, `if` is an unknown keyword: an annotation.
            "if" if self.draft < Draft::Draft7 => {}
            "if" => node.conditionals.push(Conditional {
                cond: kw.schema.in_place(kw.value, &[kw.name]),
                then: kw
                    .siblings
                    .get("then")
                    .map(|x| kw.schema.in_place(x, &["then"])),
                otherwise: kw
                    .siblings
                    .get("else")
                    .map(|x| kw.schema.in_place(x, &["else"])),
            }),
            "$ref" | "$dynamicRef" | "$recursiveRef" => {
                self.collect_ref(kw.schema, kw.name, kw.value, node, depth)?
            }
            _ => {} // not of this family: keyword() dispatches by name
        }
        Ok(())
    }

    /// `unevaluatedProperties`/`unevaluatedItems` (2019-09 on; before, unknown
    /// keywords): recorded with the scope their schema object opened, and settled
    /// once the node is final ([`super::unevaluated`]).
    fn collect_unevaluated(&mut self, kw: Keyword<'_, 'a>, node: &mut Node<'a>) -> Result<()> {
        let Some(&scope) = kw.schema.scopes.ids().last() else {
            return Ok(()); // before 2019-09: no scope was opened
        };
        let entry = Unevaluated {
            scope,
            within: kw.schema.scopes.clone(),
            value: kw.schema.child(kw.value, &[kw.name]),
            ptr: kw.ptr,
        };
        match kw.name {
            "unevaluatedProperties" => node.obj.unevaluated.push(entry),
            _ => node.arr.unevaluated.push(entry),
        }
        Ok(())
    }

    /// Keeps the tighter of `node`'s bound on one side and `d`.
    pub(crate) fn tighten(&self, node: &mut Node<'a>, lower: bool, d: Decimal, exclusive: bool) {
        let slot = if lower {
            &mut node.num.lo
        } else {
            &mut node.num.hi
        };
        let replace = match slot {
            None => true,
            Some((old, old_ex)) => {
                let ord = d.cmp(old);
                let tighter = if lower { ord.is_gt() } else { ord.is_lt() };
                tighter || (ord.is_eq() && exclusive && !*old_ex)
            }
        };
        if replace {
            *slot = Some((d, exclusive));
        }
    }
}

/// A `min*` keyword raises the lower bound, a `max*` one lowers the upper bound:
/// several in one schema (through `allOf`) intersect.
fn tighten_count<T: Ord + Copy>(min: &mut T, max: &mut Option<T>, is_min: bool, n: T) {
    if is_min {
        *min = (*min).max(n);
    } else {
        *max = Some(max.map_or(n, |m| m.min(n)));
    }
}
