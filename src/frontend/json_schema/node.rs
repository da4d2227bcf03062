//! The vocabulary every stage shares: a [`Node`] (the conjunction of everything
//! known about one value position), its per-type constraint bundles, and the
//! [`TypeSet`] of JSON types it allows.
//!
//! Keyword collection ([`super::keywords`]) fills nodes, [`super::combinators`]
//! splits them, the per-type emitters and [`super::validate`] read them. Kept in a
//! file of its own, below all of those, so that none of them imports another for
//! the types alone.

use std::rc::Rc;

use serde_json::Value;

use super::decimal::Decimal;
use super::Subschema;

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

/// Constants a node may need to name that no schema wrote: the other boolean
/// (`not: {const: true}`), the domain of booleans and `null`, the schema `true`.
pub(crate) static TRUE: Value = Value::Bool(true);
pub(crate) static FALSE: Value = Value::Bool(false);
pub(crate) static NULL: Value = Value::Null;

/// The evaluation scopes a keyword sits in: one per enclosing schema object with
/// `unevaluatedProperties`/`unevaluatedItems`, reached through in-place
/// applicators only (`allOf`, `anyOf`, `oneOf`, `if`/`then`/`else`,
/// `dependentSchemas`, `$ref`; never `not`, whose annotations are dropped, nor a
/// property or item, which is another value). What a part evaluates counts for
/// each scope it lists ([`super::unevaluated`]). Empty, the common case, is no
/// allocation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct Scopes(Option<Rc<[u32]>>);

impl Scopes {
    /// These scopes and `k` inside them.
    pub fn with(&self, k: u32) -> Scopes {
        let mut ids = self.ids().to_vec();
        ids.push(k);
        Scopes(Some(Rc::from(ids)))
    }

    pub fn ids(&self) -> &[u32] {
        self.0.as_deref().unwrap_or(&[])
    }

    pub fn contains(&self, k: u32) -> bool {
        self.ids().contains(&k)
    }
}

/// `unevaluatedProperties` or `unevaluatedItems` of the schema object that opened
/// scope `scope`: settled once the node is final, against the parts evaluated
/// within that scope.
#[derive(Debug, Clone)]
pub(crate) struct Unevaluated<'a> {
    pub scope: u32,
    /// The scopes of the keyword itself (`scope` last): an unevaluated keyword
    /// evaluates every remaining name or item for the scopes around it.
    pub within: Scopes,
    pub value: Subschema<'a>,
    pub ptr: String,
}

/// `minimum`/`maximum`/`exclusive*` (the tightest of each side kept) and every
/// `multipleOf`, as exact decimals.
#[derive(Debug, Clone, Default)]
pub(crate) struct NumberConstraints {
    /// Lower bound and whether it is exclusive.
    pub lo: Option<(Decimal, bool)>,
    pub hi: Option<(Decimal, bool)>,
    pub multiple_of: Vec<(Decimal, String)>,
    /// Divisors the number must be no multiple of (a negated `multipleOf`).
    pub not_multiple_of: Vec<(Decimal, String)>,
}

impl NumberConstraints {
    /// Whether `d` is within the bounds (`multipleOf` aside).
    pub fn bounds_hold(&self, d: &Decimal) -> bool {
        let above = match &self.lo {
            Some((lo, exclusive)) => d > lo || (!exclusive && d == lo),
            None => true,
        };
        let below = match &self.hi {
            Some((hi, exclusive)) => d < hi || (!exclusive && d == hi),
            None => true,
        };
        above && below
    }
}

/// `minLength`/`maxLength` (the tightest kept), and every `pattern` and known
/// `format`, kept apart: regexes are intersected (and complemented) only in the
/// automaton stage.
#[derive(Debug, Clone, Default)]
pub(crate) struct StringConstraints {
    pub min: u64,
    pub max: Option<u64>,
    /// `(pattern, pointer of the keyword)`.
    pub patterns: Vec<(String, String)>,
    pub formats: Vec<(String, String)>,
    /// Patterns and formats the string must not match (from `not`, `oneOf`).
    pub not_patterns: Vec<(String, String)>,
    pub not_formats: Vec<(String, String)>,
    /// Pointer of the first length keyword, for messages.
    pub length_ptr: Option<String>,
}

/// What one schema object says about item positions. Kept per object, not merged:
/// `items` (or `additionalItems`) only starts after its own object's prefix.
#[derive(Debug, Clone)]
pub(crate) struct ArrayPart<'a> {
    pub prefix: Vec<Subschema<'a>>,
    /// Items after the prefix (`None`: unconstrained).
    pub rest: Option<Subschema<'a>>,
    /// The evaluation scopes of the schema object it comes from (none for parts
    /// a negation made up: they evaluate nothing).
    pub scopes: Scopes,
}

impl<'a> ArrayPart<'a> {
    /// The subschema this part applies to item `i` (`None`: unconstrained).
    pub fn item(&self, i: usize) -> Option<Subschema<'a>> {
        self.prefix.get(i).cloned().or_else(|| self.rest.clone())
    }
}

/// Array keywords of every merged schema object.
#[derive(Debug, Clone, Default)]
pub(crate) struct ArrayConstraints<'a> {
    pub parts: Vec<ArrayPart<'a>>,
    pub min: u64,
    pub max: Option<u64>,
    /// `(contains schema, minContains, maxContains, pointer)`.
    pub contains: Vec<(Subschema<'a>, u64, Option<u64>, String)>,
    pub unique: Option<String>,
    /// `unevaluatedItems` not yet settled.
    pub unevaluated: Vec<Unevaluated<'a>>,
}

/// One schema object's `properties`, `patternProperties` and
/// `additionalProperties`. Kept per object, not merged: `additionalProperties`
/// only sees the names its own object declares.
#[derive(Debug, Clone)]
pub(crate) struct ObjectPart<'a> {
    pub props: Vec<(String, Subschema<'a>)>,
    pub patterns: Vec<(String, Subschema<'a>, String)>,
    pub additional: Option<Subschema<'a>>,
    pub ptr: String,
    /// As [`ArrayPart::scopes`].
    pub scopes: Scopes,
}

/// Object keywords of every merged schema object.
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
    /// Properties that must be present (from `not` of `additionalProperties`).
    pub witnesses: Vec<Witness<'a>>,
    pub dep_required: Vec<(String, Vec<String>, String)>,
    pub dep_schemas: Vec<(String, Subschema<'a>)>,
    /// `unevaluatedProperties` not yet settled.
    pub unevaluated: Vec<Unevaluated<'a>>,
}

/// "Some property whose name is none of `outside`, matches every pattern of
/// `matching` and none of `not_matching`, has a value valid against `values`":
/// what an object must hold to violate `additionalProperties` (a name outside the
/// declared ones and the patterns) or `patternProperties` (a name matching the
/// pattern) of a schema under `not`.
#[derive(Debug, Clone)]
pub(crate) struct Witness<'a> {
    pub outside: Vec<String>,
    /// `(pattern, pointer)`.
    pub matching: Vec<(String, String)>,
    pub not_matching: Vec<(String, String)>,
    /// One schema, or several where one property is sought for several witnesses.
    pub values: Vec<Subschema<'a>>,
    /// The keyword it violates, for messages.
    pub ptr: String,
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
    /// The node of the schema `true`: any value.
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
