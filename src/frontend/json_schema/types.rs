//! Keywords collected into one conjunctive [`Node`] per value position.
//!
//! A grammar cannot intersect two sub-grammars, so intersection happens here, on
//! keyword values: `allOf` members, `$ref` targets and sibling keywords are all
//! merged into one node (type sets intersected, bounds tightened, enums
//! intersected, per-part object/array keywords kept side by side because
//! `additionalProperties`/`items` only see their own schema object). Disjunctions
//! (`anyOf`/`oneOf`) are recorded and distributed afterwards by
//! [`super::combinators`]. Emission then works per JSON type on a node whose
//! constraints are all known at once.

use crate::grammar::Expr;
use serde_json::{Map, Value};

use super::number::Decimal;
use super::{alt, nothing, JsonSchemaError, Result, SchemaCompiler, Subschema};

/// The drafts whose keyword sets differ in ways that matter here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Draft {
    Draft4,
    Draft6,
    Draft7,
    Draft201909,
    Draft202012,
}

impl Draft {
    /// The draft named by the document's `$schema`, if any.
    pub fn of(schema: &Value) -> Option<Draft> {
        let s = schema.get("$schema")?.as_str()?;
        Some(if s.contains("draft-04") {
            Draft::Draft4
        } else if s.contains("draft-06") {
            Draft::Draft6
        } else if s.contains("draft-07") {
            Draft::Draft7
        } else if s.contains("2019-09") {
            Draft::Draft201909
        } else {
            Draft::Draft202012
        })
    }
}

/// A set of JSON types, one bit each. Numbers are two types here, integers and
/// the rest, because `type: integer` and `not: {type: integer}` cut the number
/// line there; a set is a byte so that intersecting two is one `&`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TypeSet(u8);

impl TypeSet {
    pub const NONE: TypeSet = TypeSet(0);
    pub const NULL: TypeSet = TypeSet(1);
    pub const BOOLEAN: TypeSet = TypeSet(2);
    pub const INTEGER: TypeSet = TypeSet(4);
    /// Numbers that are not integers.
    pub const FRACTION: TypeSet = TypeSet(8);
    pub const STRING: TypeSet = TypeSet(16);
    pub const ARRAY: TypeSet = TypeSet(32);
    pub const OBJECT: TypeSet = TypeSet(64);
    pub const NUMBER: TypeSet = TypeSet(4 | 8);
    pub const ALL: TypeSet = TypeSet(127);
    /// Every single type, in bit order.
    pub const EACH: [TypeSet; 7] = [
        TypeSet::NULL,
        TypeSet::BOOLEAN,
        TypeSet::INTEGER,
        TypeSet::FRACTION,
        TypeSet::STRING,
        TypeSet::ARRAY,
        TypeSet::OBJECT,
    ];

    /// The types a `type` keyword's name stands for.
    pub fn named(name: &str) -> Option<TypeSet> {
        Some(match name {
            "null" => TypeSet::NULL,
            "boolean" => TypeSet::BOOLEAN,
            "integer" => TypeSet::INTEGER,
            "number" => TypeSet::NUMBER,
            "string" => TypeSet::STRING,
            "array" => TypeSet::ARRAY,
            "object" => TypeSet::OBJECT,
            _ => return None,
        })
    }

    /// The one type of a JSON value.
    pub fn of_value(v: &Value) -> TypeSet {
        match v {
            Value::Null => TypeSet::NULL,
            Value::Bool(_) => TypeSet::BOOLEAN,
            Value::Number(n) => {
                if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                    TypeSet::INTEGER
                } else {
                    TypeSet::FRACTION
                }
            }
            Value::String(_) => TypeSet::STRING,
            Value::Array(_) => TypeSet::ARRAY,
            Value::Object(_) => TypeSet::OBJECT,
        }
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether the two sets share a type.
    pub fn intersects(self, other: TypeSet) -> bool {
        self.0 & other.0 != 0
    }
}

impl std::ops::BitOr for TypeSet {
    type Output = TypeSet;
    fn bitor(self, other: TypeSet) -> TypeSet {
        TypeSet(self.0 | other.0)
    }
}

impl std::ops::BitOrAssign for TypeSet {
    fn bitor_assign(&mut self, other: TypeSet) {
        self.0 |= other.0;
    }
}

impl std::ops::BitAnd for TypeSet {
    type Output = TypeSet;
    fn bitand(self, other: TypeSet) -> TypeSet {
        TypeSet(self.0 & other.0)
    }
}

impl std::ops::BitAndAssign for TypeSet {
    fn bitand_assign(&mut self, other: TypeSet) {
        self.0 &= other.0;
    }
}

/// The complement among the JSON types.
impl std::ops::Not for TypeSet {
    type Output = TypeSet;
    fn not(self) -> TypeSet {
        TypeSet(!self.0 & TypeSet::ALL.0)
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct NumberConstraints {
    /// Lower bound and whether it is exclusive.
    pub lo: Option<(Decimal, bool)>,
    pub hi: Option<(Decimal, bool)>,
    pub multiple_of: Vec<(Decimal, String)>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct StringConstraints {
    pub min: u64,
    pub max: Option<u64>,
    /// `(pattern, pointer of the keyword)`.
    pub patterns: Vec<(String, String)>,
    pub formats: Vec<(String, String)>,
    /// Pointer of the first length keyword, for messages.
    pub length_ptr: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct ArrayPart<'a> {
    pub prefix: Vec<Subschema<'a>>,
    /// Items after the prefix (`None`: unconstrained).
    pub rest: Option<Subschema<'a>>,
}

impl<'a> ArrayPart<'a> {
    /// The subschema this part applies to item `i` (`None`: unconstrained).
    pub fn item(&self, i: usize) -> Option<Subschema<'a>> {
        self.prefix.get(i).cloned().or_else(|| self.rest.clone())
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ArrayConstraints<'a> {
    pub parts: Vec<ArrayPart<'a>>,
    pub min: u64,
    pub max: Option<u64>,
    /// `(contains schema, minContains, maxContains, pointer)`.
    pub contains: Vec<(Subschema<'a>, u64, Option<u64>, String)>,
    pub unique: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) struct ObjectPart<'a> {
    pub props: Vec<(String, Subschema<'a>)>,
    pub patterns: Vec<(String, Subschema<'a>, String)>,
    pub additional: Option<Subschema<'a>>,
    pub ptr: String,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ObjectConstraints<'a> {
    pub parts: Vec<ObjectPart<'a>>,
    pub required: Vec<String>,
    pub min: u64,
    pub max: Option<u64>,
    pub min_max_ptr: Option<String>,
    pub names: Vec<Subschema<'a>>,
    /// Names that must not appear (from `not`/dependencies/`if` splitting).
    pub forbidden: Vec<String>,
    pub dep_required: Vec<(String, Vec<String>, String)>,
    pub dep_schemas: Vec<(String, Subschema<'a>)>,
}

/// An `anyOf` or `oneOf` still to distribute.
#[derive(Debug, Clone)]
pub(crate) struct Disjunction<'a> {
    pub exactly_one: bool,
    pub branches: Vec<Subschema<'a>>,
    pub ptr: String,
}

/// `if`/`then`/`else`.
#[derive(Debug, Clone)]
pub(crate) struct Conditional<'a> {
    pub cond: Subschema<'a>,
    pub then: Option<Subschema<'a>>,
    pub otherwise: Option<Subschema<'a>>,
    pub ptr: String,
}

/// A conjunction of constraints on one value.
#[derive(Debug, Clone)]
pub(crate) struct Node<'a> {
    pub types: TypeSet,
    /// Each entry restricts the value to a list (`enum`, `const`); all apply.
    pub enums: Vec<Vec<&'a Value>>,
    /// Values excluded by `not: {const/enum}`.
    pub excluded: Vec<&'a Value>,
    pub num: NumberConstraints,
    pub str: StringConstraints,
    pub arr: ArrayConstraints<'a>,
    pub obj: ObjectConstraints<'a>,
    pub disjunctions: Vec<Disjunction<'a>>,
    pub negations: Vec<Subschema<'a>>,
    pub conditionals: Vec<Conditional<'a>>,
}

impl<'a> Node<'a> {
    pub fn any() -> Node<'a> {
        Node {
            types: TypeSet::ALL,
            enums: Vec::new(),
            excluded: Vec::new(),
            num: NumberConstraints::default(),
            str: StringConstraints::default(),
            arr: ArrayConstraints::default(),
            obj: ObjectConstraints::default(),
            disjunctions: Vec::new(),
            negations: Vec::new(),
            conditionals: Vec::new(),
        }
    }
}

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

    /// One alternative per JSON type the node allows.
    pub(crate) fn emit_node(&mut self, node: &Node<'a>) -> Result<Expr> {
        if node.types.is_empty() {
            return Ok(nothing());
        }
        if !node.enums.is_empty() {
            return self.emit_enum(node);
        }
        let mut alts = Vec::new();
        if node.types.intersects(TypeSet::NULL) {
            alts.push(Expr::literal(b"null"));
        }
        if node.types.intersects(TypeSet::BOOLEAN) {
            alts.push(Expr::literal(b"true"));
            alts.push(Expr::literal(b"false"));
        }
        if node.types.intersects(TypeSet::NUMBER) {
            alts.push(self.emit_number(node)?);
        }
        if node.types.intersects(TypeSet::STRING) {
            alts.push(self.emit_string(node)?);
        }
        if node.types.intersects(TypeSet::ARRAY) {
            alts.push(self.emit_array(node)?);
        }
        if node.types.intersects(TypeSet::OBJECT) {
            alts.push(self.emit_object(node)?);
        }
        Ok(alt(alts))
    }

    fn emit_enum(&mut self, node: &Node<'a>) -> Result<Expr> {
        use super::validate::json_key;
        use std::collections::HashSet;
        let keys =
            |values: &[&Value]| -> HashSet<String> { values.iter().map(|v| json_key(v)).collect() };
        let mut values: Vec<(&'a Value, String)> =
            node.enums[0].iter().map(|&v| (v, json_key(v))).collect();
        for other in &node.enums[1..] {
            let other = keys(other);
            values.retain(|(_, k)| other.contains(k));
        }
        let excluded = keys(&node.excluded);
        let mut alts = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        for (v, key) in values {
            if excluded.contains(&key) || !seen.insert(key) {
                continue;
            }
            if self.node_accepts_beside_enums(node, v)? {
                alts.push(self.literal(v)?);
            }
        }
        Ok(alt(alts))
    }

    /// A JSON value as an expression (any property order per the options).
    pub(crate) fn literal(&mut self, v: &Value) -> Result<Expr> {
        Ok(match v {
            Value::Null => Expr::literal(b"null"),
            Value::Bool(b) => Expr::literal(if *b { b"true" } else { b"false" }),
            Value::Number(_) => {
                let d = Decimal::from_value(v).expect("a JSON number");
                self.number_literal(&d)?
            }
            Value::String(s) => super::string::literal_string(s),
            Value::Array(items) => {
                let mut parts = vec![Expr::literal(b"["), self.ws()];
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        parts.push(self.punct(b","));
                    }
                    parts.push(self.literal(item)?);
                }
                parts.push(self.ws());
                parts.push(Expr::literal(b"]"));
                super::seq(parts)
            }
            Value::Object(map) => {
                let mut entries = Vec::new();
                for (k, x) in map {
                    let e = self.literal(x)?;
                    entries.push((k.clone(), e));
                }
                self.object_literal(entries)?
            }
        })
    }
}
