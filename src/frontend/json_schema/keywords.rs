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
use super::node::{ArrayPart, Conditional, Disjunction, Node, ObjectPart, TypeSet};
use super::{Draft, JsonSchemaError, Result, SchemaCompiler, Subschema};

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
        for (k, v) in map {
            self.keyword(s, map, k, v, node, depth)?;
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
                    format!("cannot resolve {r:?} (remote or unknown references are not fetched)"),
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
        self.collect(&target, node, depth + 1)
    }

    fn keyword(
        &mut self,
        s: &Subschema<'a>,
        map: &'a Map<String, Value>,
        k: &str,
        v: &'a Value,
        node: &mut Node<'a>,
        depth: usize,
    ) -> Result<()> {
        let ptr = s.at(k);
        let bad =
            |c: &SchemaCompiler, msg: &str| Err::<(), JsonSchemaError>(c.invalid(k, &ptr, msg));
        match k {
            _ if ANNOTATIONS.contains(&k) => {}
            "type" => {
                let mut mask = TypeSet::NONE;
                let names: Vec<&Value> = match v {
                    Value::Array(a) => a.iter().collect(),
                    other => vec![other],
                };
                for n in names {
                    match n.as_str().and_then(TypeSet::named) {
                        Some(m) => mask |= m,
                        None => return bad(self, "unknown type name"),
                    }
                }
                node.types &= mask;
            }
            "enum" => match v {
                Value::Array(a) => node.enums.push(a.iter().collect()),
                _ => return bad(self, "must be an array"),
            },
            "const" => node.enums.push(vec![v]),
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                if let Value::Bool(b) = v {
                    // Draft 4: a flag on minimum/maximum.
                    if *b {
                        let base = if k == "exclusiveMinimum" {
                            "minimum"
                        } else {
                            "maximum"
                        };
                        let Some(bound) = map.get(base).and_then(Decimal::from_value) else {
                            return Ok(());
                        };
                        self.tighten(node, base == "minimum", bound, true);
                    }
                    return Ok(());
                }
                let Some(d) = Decimal::from_value(v) else {
                    return bad(self, "must be a number");
                };
                let exclusive = k.starts_with("exclusive");
                let lower = k == "minimum" || k == "exclusiveMinimum";
                let draft4_exclusive = self.draft == Draft::Draft4
                    && !exclusive
                    && map
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
            "multipleOf" => match Decimal::from_value(v) {
                Some(d) if d.is_positive() => node.num.multiple_of.push((d, ptr)),
                _ => return bad(self, "must be a number greater than 0"),
            },
            "minLength" | "maxLength" => {
                let Some(n) = as_count(v) else {
                    return bad(self, "must be a non-negative integer");
                };
                if k == "minLength" {
                    node.str.min = node.str.min.max(n);
                } else {
                    node.str.max = Some(node.str.max.map_or(n, |m| m.min(n)));
                }
                node.str.length_ptr.get_or_insert(ptr);
            }
            "pattern" => match v.as_str() {
                Some(p) => {
                    if !node.str.patterns.iter().any(|(q, _)| q == p) {
                        node.str.patterns.push((p.to_string(), ptr))
                    }
                }
                None => return bad(self, "must be a string"),
            },
            "format" => match v.as_str() {
                Some(f) => {
                    if super::format::is_known(f) && !node.str.formats.iter().any(|(q, _)| q == f) {
                        node.str.formats.push((f.to_string(), ptr));
                    }
                }
                None => return bad(self, "must be a string"),
            },
            "minItems" | "maxItems" => {
                let Some(n) = as_count(v) else {
                    return bad(self, "must be a non-negative integer");
                };
                if k == "minItems" {
                    node.arr.min = node.arr.min.max(n);
                } else {
                    node.arr.max = Some(node.arr.max.map_or(n, |m| m.min(n)));
                }
            }
            "prefixItems" => {
                if self.draft < Draft::Draft202012 {
                    return Ok(());
                }
                let Value::Array(items) = v else {
                    return bad(self, "must be an array");
                };
                let prefix = items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| s.child(x, &[k, &i.to_string()]))
                    .collect();
                let rest = map.get("items").map(|x| s.child(x, &["items"]));
                node.arr.parts.push(ArrayPart { prefix, rest });
            }
            "items" => match v {
                Value::Array(items) => {
                    if self.draft >= Draft::Draft202012 {
                        return bad(self, "an array form of items is prefixItems since 2020-12");
                    }
                    let prefix = items
                        .iter()
                        .enumerate()
                        .map(|(i, x)| s.child(x, &[k, &i.to_string()]))
                        .collect();
                    let rest = map
                        .get("additionalItems")
                        .map(|x| s.child(x, &["additionalItems"]));
                    node.arr.parts.push(ArrayPart { prefix, rest });
                }
                _ => {
                    if self.draft >= Draft::Draft202012 && map.contains_key("prefixItems") {
                        return Ok(()); // handled with prefixItems
                    }
                    node.arr.parts.push(ArrayPart {
                        prefix: Vec::new(),
                        rest: Some(s.child(v, &[k])),
                    });
                }
            },
            "contains" => {
                let min = match map.get("minContains") {
                    Some(m) if self.draft >= Draft::Draft201909 => match as_count(m) {
                        Some(n) => n,
                        None => {
                            return Err(self.invalid(
                                "minContains",
                                &s.at("minContains"),
                                "must be a count",
                            ))
                        }
                    },
                    _ => 1,
                };
                let max = match map.get("maxContains") {
                    Some(m) if self.draft >= Draft::Draft201909 => match as_count(m) {
                        Some(n) => Some(n),
                        None => {
                            return Err(self.invalid(
                                "maxContains",
                                &s.at("maxContains"),
                                "must be a count",
                            ))
                        }
                    },
                    _ => None,
                };
                node.arr.contains.push((s.child(v, &[k]), min, max, ptr));
            }
            "uniqueItems" => match v {
                Value::Bool(true) => node.arr.unique = Some(ptr),
                Value::Bool(false) => {}
                _ => return bad(self, "must be a boolean"),
            },
            "properties" | "patternProperties" | "additionalProperties" => {
                // All three are read together once, from "properties" or the first present.
                let first = ["properties", "patternProperties", "additionalProperties"]
                    .into_iter()
                    .find(|x| map.contains_key(*x));
                if first != Some(k) {
                    return Ok(());
                }
                let mut part = ObjectPart {
                    props: Vec::new(),
                    patterns: Vec::new(),
                    additional: None,
                    ptr: s.ptr.to_string(),
                };
                if let Some(p) = map.get("properties") {
                    let Value::Object(p) = p else {
                        return Err(self.invalid(
                            "properties",
                            &s.at("properties"),
                            "must be an object",
                        ));
                    };
                    for (name, sub) in p {
                        part.props
                            .push((name.clone(), s.child(sub, &["properties", name])));
                    }
                }
                if let Some(p) = map.get("patternProperties") {
                    let Value::Object(p) = p else {
                        return Err(self.invalid(
                            "patternProperties",
                            &s.at("patternProperties"),
                            "must be an object",
                        ));
                    };
                    for (pat, sub) in p {
                        part.patterns.push((
                            pat.clone(),
                            s.child(sub, &["patternProperties", pat]),
                            format!("{}/patternProperties", s.ptr),
                        ));
                    }
                }
                part.additional = map
                    .get("additionalProperties")
                    .map(|a| s.child(a, &["additionalProperties"]));
                node.obj.parts.push(part);
            }
            "required" => {
                let Value::Array(names) = v else {
                    return bad(self, "must be an array of strings");
                };
                for n in names {
                    let Some(n) = n.as_str() else {
                        return bad(self, "must be an array of strings");
                    };
                    if !node.obj.required.iter().any(|r| r == n) {
                        node.obj.required.push(n.to_string());
                    }
                }
            }
            "minProperties" | "maxProperties" => {
                let Some(n) = as_count(v) else {
                    return bad(self, "must be a non-negative integer");
                };
                if k == "minProperties" {
                    node.obj.min = node.obj.min.max(n);
                } else {
                    node.obj.max = Some(node.obj.max.map_or(n, |m| m.min(n)));
                }
                node.obj.min_max_ptr.get_or_insert(ptr);
            }
            "propertyNames" => node.obj.names.push(s.child(v, &[k])),
            "dependentRequired" | "dependentSchemas" | "dependencies" => {
                let Value::Object(deps) = v else {
                    return bad(self, "must be an object");
                };
                for (name, d) in deps {
                    match d {
                        Value::Array(list) if k != "dependentSchemas" => {
                            let names: Option<Vec<String>> =
                                list.iter().map(|x| x.as_str().map(String::from)).collect();
                            match names {
                                Some(names) => {
                                    node.obj
                                        .dep_required
                                        .push((name.clone(), names, ptr.clone()))
                                }
                                None => return bad(self, "dependency lists must hold strings"),
                            }
                        }
                        _ if k != "dependentRequired" => node
                            .obj
                            .dep_schemas
                            .push((name.clone(), s.child(d, &[k, name]))),
                        _ => return bad(self, "must map names to arrays of names"),
                    }
                }
            }
            "allOf" => {
                let Value::Array(items) = v else {
                    return bad(self, "must be an array");
                };
                for (i, item) in items.iter().enumerate() {
                    self.collect(&s.child(item, &[k, &i.to_string()]), node, depth + 1)?;
                }
            }
            "anyOf" | "oneOf" => {
                let Value::Array(items) = v else {
                    return bad(self, "must be an array");
                };
                if items.is_empty() {
                    return bad(self, "must not be empty");
                }
                node.disjunctions.push(Disjunction {
                    exactly_one: k == "oneOf",
                    branches: items
                        .iter()
                        .enumerate()
                        .map(|(i, x)| s.child(x, &[k, &i.to_string()]))
                        .collect(),
                    ptr,
                });
            }
            "not" => node.negations.push(s.child(v, &[k])),
            "if" => node.conditionals.push(Conditional {
                cond: s.child(v, &[k]),
                then: map.get("then").map(|x| s.child(x, &["then"])),
                otherwise: map.get("else").map(|x| s.child(x, &["else"])),
                ptr,
            }),
            "$ref" | "$dynamicRef" | "$recursiveRef" => self.collect_ref(s, k, v, node, depth)?,
            "unevaluatedProperties" | "unevaluatedItems" => {
                // Exact in the one common case: no applicator could evaluate anything
                // besides this object's own properties/items.
                let applicators = [
                    "allOf",
                    "anyOf",
                    "oneOf",
                    "not",
                    "if",
                    "$ref",
                    "$dynamicRef",
                    "$recursiveRef",
                    "dependentSchemas",
                    "dependencies",
                ];
                let plain = !applicators.iter().any(|a| map.contains_key(*a));
                if plain
                    && k == "unevaluatedProperties"
                    && !map.contains_key("additionalProperties")
                {
                    let mut part = ObjectPart {
                        props: Vec::new(),
                        patterns: Vec::new(),
                        additional: Some(s.child(v, &[k])),
                        ptr: s.ptr.to_string(),
                    };
                    if let Some(Value::Object(p)) = map.get("properties") {
                        for (name, sub) in p {
                            part.props
                                .push((name.clone(), s.child(sub, &["properties", name])));
                        }
                    }
                    if let Some(Value::Object(p)) = map.get("patternProperties") {
                        for (pat, sub) in p {
                            part.patterns.push((
                                pat.clone(),
                                s.child(sub, &["patternProperties", pat]),
                                format!("{}/patternProperties", s.ptr),
                            ));
                        }
                    }
                    node.obj.parts.push(part);
                } else if plain
                    && k == "unevaluatedItems"
                    && !map.contains_key("items")
                    && !map.contains_key("contains")
                {
                    let prefix: Vec<Subschema<'a>> = match map.get("prefixItems") {
                        Some(Value::Array(items)) => items
                            .iter()
                            .enumerate()
                            .map(|(i, x)| s.child(x, &["prefixItems", &i.to_string()]))
                            .collect(),
                        _ => Vec::new(),
                    };
                    node.arr.parts.push(ArrayPart {
                        prefix,
                        rest: Some(s.child(v, &[k])),
                    });
                } else if v != &Value::Bool(true) && v != &Value::Object(Map::new()) {
                    self.unsupported(
                        k,
                        &ptr,
                        "only supported when no applicator (allOf, $ref, ...) sits beside it",
                    )?;
                }
            }
            _ => {} // unknown keywords are annotations (JSON Schema 2020-12 §6.5)
        }
        Ok(())
    }

    fn tighten(&self, node: &mut Node<'a>, lower: bool, d: Decimal, exclusive: bool) {
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
