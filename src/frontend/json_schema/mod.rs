//! JSON Schema front-end: a schema document (`serde_json::Value`) compiled to the
//! grammar IR, so that every accepted text is a JSON document valid against the
//! schema.
//!
//! This file owns the public surface (options, errors, warnings, [`compile_schema`])
//! and the compiler's shared state: the rules being built, the memo from "this
//! conjunction of subschemas" to the rule that generates its instances (which is also
//! how `$ref` recursion becomes IR recursion, with no depth cap), and the strict /
//! lenient policy for keywords that are not enforced.
//!
//! The pipeline for one value position is: collect the subschemas that apply there
//! (`keywords`: keywords merged into one conjunctive `node::Node`, `allOf` and
//! `$ref` inlined, `anyOf`/`oneOf` distributed by `combinators`), then emit one
//! expression per JSON type (`emit` dispatches to `string`, `number`, `object`,
//! `array`). Children (property values, array items) are compiled lazily as their
//! own rules.
//!
//! Imports among the files point one way, no two files importing each other:
//! `decimal` and `draft` need nothing of the module, `node` (the shared
//! vocabulary) only `decimal`, and the stages import the vocabulary and a few
//! helpers below them (`validate` for JSON equality, `string` for encodings),
//! never the other way round. The compiler's methods are spread over the files
//! as `impl SchemaCompiler` blocks, so a stage calls another through `self`.
//!
//! Soundness rule: the grammar may reject some valid documents (documented
//! over-constraints, e.g. non-canonical string escapes inside `pattern`ed strings),
//! but it never accepts an invalid one. Anything that cannot be enforced exactly is a
//! [`JsonSchemaError::Unsupported`] naming the keyword and its JSON pointer, or, with
//! `lenient`, a [`Warning`] and the keyword is not enforced.

mod array;
mod combinators;
mod contains;
mod decimal;
mod documents;
mod draft;
mod emit;
mod format;
mod keywords;
mod names;
mod negation;
mod node;
mod number;
mod object;
mod pattern;
mod pattern_cache;
mod refs;
mod shape;
mod source;
mod string;
mod unevaluated;
mod validate;
mod witness;
mod xml;

use rustc_hash::FxHashMap as HashMap;
use std::rc::Rc;

use crate::grammar::{Expr, Grammar, GrammarError, Hir, Rule, RuleId};
use serde_json::Value;

use combinators::PropertyKey;
pub use documents::{DocumentsError, SchemaDocuments, DEFAULT_DOCUMENTS_BASE};
pub use draft::Draft;
pub(crate) use pattern::any_char_hir;
pub use pattern_cache::{PatternCache, DEFAULT_PATTERN_CACHE_BYTES};
pub use source::{parse_schema_text, SchemaTextError, DEFAULT_MAX_NESTING};
pub(crate) use xml::CDATA;
pub use xml::{ParameterStyle, MINIMAX_M3_TAG};

/// How much whitespace may appear between JSON tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Whitespace {
    /// None at all (`separators=(',', ':')`).
    #[default]
    Compact,
    /// Per gap: optional spaces/tabs, at most one newline, then at most `indent`
    /// spaces/tabs (so at most `2 * indent + 1` bytes).
    Bounded { indent: u32 },
    /// Per gap at most `count` whitespace characters (spaces, tabs, newlines):
    /// XGrammar's `max_whitespace_cnt`.
    AtMost { count: u32 },
    /// Pretty-printing shapes: per gap, an optional newline followed by at most
    /// `indent * 32` spaces, or one space (after `:` and `,`). Depth is not tracked,
    /// so this admits every pretty-printed document up to nesting depth 32.
    Pretty { indent: u32 },
}

/// The order in which object properties may appear.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PropertyOrder {
    /// Declared properties in the schema's order (required and optional), then any
    /// additional properties.
    #[default]
    Schema,
    /// Any order; each property at most once; required ones present (one
    /// permutation per object, linear in its properties).
    Any,
}

/// What `format` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FormatMode {
    /// A known format is enforced (`"format": "date"` admits only dates): what
    /// a generator wants, and the format-assertion vocabulary's meaning. An
    /// unknown format is an annotation either way.
    #[default]
    Assert,
    /// `format` is an annotation and admits any string: the 2019-09/2020-12
    /// default meaning of the keyword.
    Annotate,
}

/// Bounds that keep hostile schemas cheap to reject.
#[derive(Debug, Clone)]
pub struct JsonSchemaLimits {
    /// Most IR rules one schema may produce.
    pub max_rules: usize,
    /// Most alternatives after distributing `anyOf`/`oneOf` over siblings.
    pub max_alternatives: usize,
    /// Most values enumerated for `multipleOf` with bounds.
    pub max_enumerated_values: u64,
    /// Deepest chain of `$ref`/`allOf` inlined at one value position.
    pub max_inline_depth: usize,
    /// Deepest nesting of negations (`not`, overlapping `oneOf` branches, `if`)
    /// being normalized inside one another at one value position.
    pub max_negation_depth: usize,
    /// Largest counted repetition (`maxLength`, `maxItems`, `{m,n}` in patterns).
    pub max_repetition: u64,
    /// Longest `pattern` text, in bytes.
    pub max_pattern_bytes: usize,
}

impl Default for JsonSchemaLimits {
    fn default() -> Self {
        JsonSchemaLimits {
            max_rules: 200_000,
            max_alternatives: 512,
            max_enumerated_values: 2_000,
            max_inline_depth: 64,
            max_negation_depth: 8,
            max_repetition: 10_000_000,
            max_pattern_bytes: 64 << 10,
        }
    }
}

/// Options of [`compile_schema`].
#[derive(Debug, Clone, Default)]
pub struct JsonSchemaOptions {
    pub whitespace: Whitespace,
    pub property_order: PropertyOrder,
    /// OpenAI-style strict profile: `additionalProperties` defaults to false in
    /// every schema object that declares `properties` or `patternProperties`.
    /// An object the schema says nothing about (`true`, `{"type": "object"}`, an
    /// array's untyped items) stays open, as in XGrammar: a tool's `metadata:
    /// object` takes any keys.
    pub strict: bool,
    /// Keywords that cannot be enforced become [`Warning`]s instead of errors.
    pub lenient: bool,
    /// Draft used when the schema has no `$schema` (default 2020-12).
    pub default_draft: Option<Draft>,
    /// Integers are written as a generator should write them: without a fraction
    /// (`1`, never `1.0`), and, where the schema sets no bound (and no integer
    /// `multipleOf`), within I-JSON's exact range of +-(2^53 - 1) (RFC 7493), which
    /// every consumer reads exactly. Off by
    /// default: checking follows the spec, where `1.0` and any integer length are
    /// valid.
    pub plain_integers: bool,
    /// Whether `format` is enforced (default) or an annotation.
    pub format: FormatMode,
    /// Documents outside the schema that its `$ref`s may name, by URI (never
    /// fetched from the network).
    pub documents: SchemaDocuments,
    pub limits: JsonSchemaLimits,
}

/// A keyword that was not enforced (lenient mode) or a deliberate relaxation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub keyword: String,
    pub pointer: String,
    pub message: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "keyword \"{}\" at {}: {}",
            self.keyword,
            show_pointer(&self.pointer),
            self.message
        )
    }
}

/// Why a schema could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonSchemaError {
    #[error(
        "unsupported keyword \"{keyword}\" at {}: {reason}",
        show_pointer(pointer)
    )]
    Unsupported {
        keyword: String,
        pointer: String,
        reason: String,
    },
    #[error(
        "invalid schema at {}: keyword \"{keyword}\": {message}",
        show_pointer(pointer)
    )]
    Invalid {
        keyword: String,
        pointer: String,
        message: String,
    },
    #[error("limit exceeded at {}: {message}", show_pointer(pointer))]
    Limit { pointer: String, message: String },
    #[error("the schema accepts no JSON value at all")]
    Unsatisfiable,
    #[error(transparent)]
    Grammar(#[from] GrammarError),
}

impl JsonSchemaError {
    /// The JSON pointer (into the schema document) the error is about.
    pub fn pointer(&self) -> Option<&str> {
        match self {
            JsonSchemaError::Unsupported { pointer, .. }
            | JsonSchemaError::Invalid { pointer, .. }
            | JsonSchemaError::Limit { pointer, .. } => Some(pointer),
            _ => None,
        }
    }
}

fn show_pointer(p: &str) -> String {
    if p.is_empty() {
        "/ (the root)".into()
    } else {
        p.to_string()
    }
}

pub(crate) type Result<T> = std::result::Result<T, JsonSchemaError>;

/// Compiles `schema` into a grammar whose language is the compact (or per
/// `options.whitespace`) serializations of the instances valid against it.
pub fn compile_schema(
    schema: &Value,
    options: &JsonSchemaOptions,
) -> Result<(Grammar, Vec<Warning>)> {
    compile_schema_with(schema, options, &PatternCache::default())
}

/// [`compile_schema`] taking the patterns it meets from `cache` (and leaving the
/// new ones there, for the next schemas compiled with it).
pub fn compile_schema_with(
    schema: &Value,
    options: &JsonSchemaOptions,
    cache: &PatternCache,
) -> Result<(Grammar, Vec<Warning>)> {
    compile_root(schema, options, cache, |c, root| c.value_rule(&[root]))
}

/// Compiles the arguments schema of a tool call (an object at the root) into the
/// grammar of its parameters written in `style`: `<parameter=city>Paris</parameter>`
/// for [`ParameterStyle::Qwen`]. See [`ParameterStyle`] for what each style writes.
pub fn compile_parameters_with(
    schema: &Value,
    style: ParameterStyle,
    options: &JsonSchemaOptions,
    cache: &PatternCache,
) -> Result<(Grammar, Vec<Warning>)> {
    compile_root(schema, options, cache, |c, root| c.parameters(root, style))
}

fn compile_root<'a>(
    schema: &'a Value,
    options: &'a JsonSchemaOptions,
    cache: &'a PatternCache,
    root: impl FnOnce(&mut SchemaCompiler<'a>, Subschema<'a>) -> Result<Expr>,
) -> Result<(Grammar, Vec<Warning>)> {
    let draft = Draft::of(schema)
        .or(options.default_draft)
        .unwrap_or(Draft::Draft202012);
    let index = refs::Index::build(schema, draft, &options.documents);
    let mut c = SchemaCompiler {
        opts: options,
        draft,
        index,
        rules: Vec::new(),
        memo: HashMap::default(),
        normalized_properties: HashMap::default(),
        warnings: Vec::new(),
        patterns: HashMap::default(),
        cache,
        any_rest: None,
        regex_format: None,
        negation_depth: 0,
        disjoint_depth: 0,
        next_scope: 0,
        exponent_spellings: true,
        integral_fractions: false,
        value_style: None,
    };
    let root_ref = Subschema::root(schema, c.index.root_base.clone());
    let root = match root(&mut c, root_ref)? {
        Expr::Ref(id) => id,
        other => c.new_rule("root".into(), other)?,
    };
    let grammar = Grammar {
        rules: c.rules,
        root,
    };
    match grammar.validate() {
        Ok(()) => {}
        Err(GrammarError::EmptyLanguage { .. }) => return Err(JsonSchemaError::Unsatisfiable),
        Err(e) => return Err(e.into()),
    }
    Ok((grammar, c.warnings))
}

/// A subschema: the value, its JSON pointer in the document, its base URI, and
/// whether it stands for its own negation: what `not` and `oneOf` ask of a
/// property or an item ("a value `x` that is not valid against `S`") is a child
/// position like any other, compiled (and memoised) as its own rule.
#[derive(Debug, Clone)]
pub(crate) struct Subschema<'a> {
    pub v: &'a Value,
    pub ptr: Rc<str>,
    pub base: Rc<str>,
    pub negated: bool,
    /// The `unevaluated*` scopes it is evaluated in ([`node::Scopes`]).
    pub scopes: node::Scopes,
}

impl<'a> Subschema<'a> {
    fn root(v: &'a Value, base: Rc<str>) -> Subschema<'a> {
        Subschema {
            v,
            ptr: Rc::from(""),
            base,
            negated: false,
            scopes: node::Scopes::default(),
        }
    }

    /// The schema `true`, where a node needs one written out (an object part
    /// that leaves other properties open, even in strict mode).
    pub fn anything() -> Subschema<'a> {
        Subschema {
            v: &node::TRUE,
            ptr: Rc::from(""),
            base: Rc::from(""),
            negated: false,
            scopes: node::Scopes::default(),
        }
    }

    /// The values this subschema rejects.
    pub fn negation(&self) -> Subschema<'a> {
        Subschema {
            negated: !self.negated,
            ..self.clone()
        }
    }

    /// Whether every value is valid (`true`, `{}`, or `not: false`).
    pub fn accepts_all(&self) -> bool {
        if self.negated {
            is_false_schema(self.v)
        } else {
            is_true_schema(self.v)
        }
    }

    /// Whether no value is valid (`false`, or `not: true`).
    pub fn accepts_none(&self) -> bool {
        if self.negated {
            is_true_schema(self.v)
        } else {
            is_false_schema(self.v)
        }
    }

    /// The memo key: the pointer, marked when negated (pointers start with `/`
    /// or are empty, so `!` cannot collide with one).
    pub(crate) fn key(&self) -> Rc<str> {
        if self.accepts_all() {
            // One memo entry for every `true`, whatever its pointer.
            Rc::from("!true")
        } else if self.negated {
            Rc::from(format!("!{}", self.ptr).as_str())
        } else {
            self.ptr.clone()
        }
    }

    /// The subschema under an in-place applicator (`allOf`, `anyOf`, `oneOf`,
    /// `if`/`then`/`else`, `dependentSchemas`): a child that evaluates the same
    /// value, so within the same `unevaluated*` scopes.
    pub fn in_place(&self, v: &'a Value, segments: &[&str]) -> Subschema<'a> {
        Subschema {
            scopes: self.scopes.clone(),
            ..self.child(v, segments)
        }
    }

    /// The subschema under `keyword` (and further `path` segments).
    pub fn child(&self, v: &'a Value, segments: &[&str]) -> Subschema<'a> {
        let mut ptr = self.ptr.to_string();
        for s in segments {
            ptr.push('/');
            ptr.push_str(&s.replace('~', "~0").replace('/', "~1"));
        }
        let base = match v.get("$id").and_then(Value::as_str) {
            Some(id) if !id.starts_with('#') => {
                Rc::from(refs::resolve_uri(&self.base, id).as_str())
            }
            _ => self.base.clone(),
        };
        Subschema {
            v,
            ptr: Rc::from(ptr.as_str()),
            base,
            negated: false,
            scopes: node::Scopes::default(),
        }
    }

    pub fn at(&self, keyword: &str) -> String {
        format!("{}/{}", self.ptr, keyword)
    }
}

/// One schema's compilation in progress; each file of this module adds its own
/// `impl` block. Not the public [`crate::Compiler`], which outlives schemas and
/// hands each one to [`compile_schema_with`].
pub(crate) struct SchemaCompiler<'a> {
    pub opts: &'a JsonSchemaOptions,
    pub draft: Draft,
    pub index: refs::Index<'a>,
    pub rules: Vec<Rule>,
    /// Conjunction of subschema pointers -> rule generating its instances.
    pub memo: HashMap<Vec<Rc<str>>, RuleId>,
    /// Property values normalized to compare `oneOf` branches
    /// ([`SchemaCompiler::normalize_property`]).
    pub normalized_properties: HashMap<PropertyKey, Rc<Vec<node::Node<'a>>>>,
    pub warnings: Vec<Warning>,
    /// Pattern text -> whole-string regex, and a matcher built on demand.
    pub patterns: HashMap<String, (Hir, Option<Rc<regex_automata::meta::Regex>>)>,
    /// What schemas compiled with the same cache share.
    pub cache: &'a PatternCache,
    pub any_rest: Option<RuleId>,
    /// `format: "regex"` alone, as its grammar (see [`format::RegexSyntax`]).
    pub regex_format: Option<RuleId>,
    /// `not`s being normalized inside one another (bounded: `S = not S`).
    pub negation_depth: usize,
    /// Property values being compared inside one another to prove `oneOf`
    /// branches disjoint (bounded: a recursive schema).
    pub disjoint_depth: usize,
    /// The next `unevaluated*` scope's number.
    pub next_scope: u32,
    /// Whether number literals take their exponent spellings (off inside a long
    /// `enum`: [`emit::MOST_SPELLED_NUMBERS`]).
    pub exponent_spellings: bool,
    /// Emitting a draft-4 number that fractions may type (`1.0` is no integer
    /// there) but `multipleOf` makes integral: `1.0` is a multiple of 1.
    pub integral_fractions: bool,
    /// The parameter style whose spelling reaches inside the values (`python`'s
    /// keywords, `gemma`'s strings and keys); `None`: values are JSON.
    pub value_style: Option<ParameterStyle>,
}

#[cfg(test)]
impl<'a> SchemaCompiler<'a> {
    pub(crate) fn for_tests(opts: &'a JsonSchemaOptions) -> SchemaCompiler<'a> {
        static TRUE: Value = Value::Bool(true);
        SchemaCompiler {
            opts,
            draft: Draft::Draft202012,
            index: refs::Index::build(&TRUE, Draft::Draft202012, &opts.documents),
            rules: Vec::new(),
            memo: HashMap::default(),
            normalized_properties: HashMap::default(),
            warnings: Vec::new(),
            patterns: HashMap::default(),
            // One small cache per test compiler, kept for the test's lifetime.
            cache: Box::leak(Box::default()),
            any_rest: None,
            regex_format: None,
            negation_depth: 0,
            disjoint_depth: 0,
            next_scope: 0,
            exponent_spellings: true,
            integral_fractions: false,
            value_style: None,
        }
    }
}

impl<'a> SchemaCompiler<'a> {
    /// Reports a keyword that is not enforced: an error, or a warning when lenient.
    pub fn unsupported(
        &mut self,
        keyword: &str,
        pointer: &str,
        reason: impl Into<String>,
    ) -> Result<()> {
        let reason = reason.into();
        if self.opts.lenient {
            self.warnings.push(Warning {
                keyword: keyword.into(),
                pointer: pointer.into(),
                message: format!("not enforced: {reason}"),
            });
            Ok(())
        } else {
            Err(JsonSchemaError::Unsupported {
                keyword: keyword.into(),
                pointer: pointer.into(),
                reason,
            })
        }
    }

    pub fn invalid(
        &self,
        keyword: &str,
        pointer: &str,
        message: impl Into<String>,
    ) -> JsonSchemaError {
        JsonSchemaError::Invalid {
            keyword: keyword.into(),
            pointer: pointer.into(),
            message: message.into(),
        }
    }

    pub fn limit(&self, pointer: &str, message: impl Into<String>) -> JsonSchemaError {
        JsonSchemaError::Limit {
            pointer: pointer.into(),
            message: message.into(),
        }
    }

    /// A new rule (body filled in later by the caller).
    pub fn new_rule(&mut self, name: String, expr: Expr) -> Result<RuleId> {
        if self.rules.len() >= self.opts.limits.max_rules {
            return Err(self.limit(
                "",
                format!(
                    "the schema needs more than {} grammar rules",
                    self.opts.limits.max_rules
                ),
            ));
        }
        let id = RuleId(self.rules.len() as u32);
        self.rules.push(Rule {
            name,
            expr,
            location: None,
        });
        Ok(id)
    }

    /// A reference to the rule generating instances of the conjunction `conj`.
    pub fn value_rule(&mut self, conj: &[Subschema<'a>]) -> Result<Expr> {
        // A style that writes values its own way may still ask for plain JSON
        // (Cohere's `json` values): each under its own rule.
        let variant = match self.value_style {
            Some(style) => format!("values in {}", style.name()),
            None => String::new(),
        };
        self.memo_rule(conj, &variant, |c, conj| c.value_expr(conj))
    }

    /// One rule per distinct conjunction and `variant` (how the value is
    /// written: `""` for JSON), its body built by `build`.
    pub(crate) fn memo_rule(
        &mut self,
        conj: &[Subschema<'a>],
        variant: &str,
        build: impl FnOnce(&mut Self, &[Subschema<'a>]) -> Result<Expr>,
    ) -> Result<Expr> {
        // A schema that is only a `$ref` is its target: one rule per definition, not
        // one per place that references it.
        let conj: Vec<Subschema<'a>> = conj.iter().map(|s| self.through_refs(s)).collect();
        let conj = &conj[..];
        let mut key: Vec<Rc<str>> = conj.iter().map(Subschema::key).collect();
        key.sort();
        key.dedup();
        let schemas = key.len();
        // Pointers are empty or start with `/`: a variant cannot collide with one.
        if !variant.is_empty() {
            key.push(Rc::from(format!("({variant})").as_str()));
        }
        if let Some(&id) = self.memo.get(&key) {
            return Ok(Expr::Ref(id));
        }
        let mut name = if schemas == 1 {
            match key[0].strip_prefix('!') {
                Some("true") => "any value".to_string(),
                Some(ptr) => format!("schema not {}", show_pointer(ptr)),
                None => format!("schema {}", show_pointer(&key[0])),
            }
        } else {
            format!(
                "allOf {}",
                key[..schemas]
                    .iter()
                    .map(|k| show_pointer(k))
                    .collect::<Vec<_>>()
                    .join(" & ")
            )
        };
        if !variant.is_empty() {
            name = format!("{name} ({variant})");
        }
        let id = self.new_rule(name, Expr::Empty)?;
        self.memo.insert(key, id);
        let expr = build(self, conj)?;
        self.rules[id.index()].expr = expr;
        Ok(Expr::Ref(id))
    }

    /// Follows `$ref`s of schemas that have nothing else that constrains (a
    /// negated one stays negated).
    fn through_refs(&self, s: &Subschema<'a>) -> Subschema<'a> {
        let mut cur = s.clone();
        for _ in 0..32 {
            let Value::Object(map) = cur.v else {
                return cur;
            };
            let Some(Value::String(r)) = map.get("$ref") else {
                return cur;
            };
            let only_ref = self.draft <= Draft::Draft7
                || map
                    .keys()
                    .all(|k| k == "$ref" || keywords::is_annotation(k));
            if !only_ref {
                return cur;
            }
            let base = self
                .index
                .base_of(&cur.ptr)
                .unwrap_or_else(|| cur.base.clone());
            match self.index.resolve(&base, r) {
                Some(t) => {
                    cur = Subschema {
                        negated: cur.negated,
                        ..t
                    }
                }
                None => return cur,
            }
        }
        cur
    }

    /// Whether integers may be written with a zero fraction (`1.0`): not in draft 4
    /// (unless the number is integral by `multipleOf` alone), nor when generating
    /// with `plain_integers`.
    pub(crate) fn zero_fraction_is_integer(&self) -> bool {
        (self.draft != Draft::Draft4 || self.integral_fractions) && !self.opts.plain_integers
    }

    /// A recursive rule for "any decoded string" (`.*` of a pattern) in canonical
    /// encoding: kept at the parser level so that `.*P.*` never becomes one large
    /// search automaton.
    pub(crate) fn any_rest_rule(&mut self) -> Result<RuleId> {
        if let Some(id) = self.any_rest {
            return Ok(id);
        }
        let id = self.new_rule("any string rest".into(), Expr::Empty)?;
        let any = string::encode_class(&regex_syntax::hir::ClassUnicode::new([
            regex_syntax::hir::ClassUnicodeRange::new('\0', char::MAX),
        ]));
        self.rules[id.index()].expr = Expr::Alt(vec![
            Expr::Empty,
            Expr::Seq(vec![Expr::Regex(any), Expr::Ref(id)]),
        ]);
        self.any_rest = Some(id);
        Ok(id)
    }

    /// The expression for a value valid against every schema of `conj`.
    pub fn value_expr(&mut self, conj: &[Subschema<'a>]) -> Result<Expr> {
        let nodes = self.normalize(conj)?;
        let mut alts = Vec::new();
        for node in &nodes {
            alts.push(self.emit_node(node)?);
        }
        Ok(alt(alts))
    }

    /// Whitespace allowed in a gap between tokens.
    pub fn ws(&self) -> Expr {
        match self.opts.whitespace {
            Whitespace::Compact => Expr::Empty,
            Whitespace::Bounded { indent } => Expr::Seq(vec![
                Expr::Repeat {
                    expr: Box::new(lit_class(&[(b' ', b' '), (b'\t', b'\t')])),
                    min: 0,
                    max: Some(indent),
                },
                Expr::optional(Expr::literal(b"\n")),
                Expr::Repeat {
                    expr: Box::new(lit_class(&[(b' ', b' '), (b'\t', b'\t')])),
                    min: 0,
                    max: Some(indent),
                },
            ]),
            Whitespace::AtMost { count } => Expr::Repeat {
                expr: Box::new(lit_class(&[(b' ', b' '), (b'\t', b'\t'), (b'\n', b'\n')])),
                min: 0,
                max: Some(count),
            },
            Whitespace::Pretty { indent } => Expr::Alt(vec![
                Expr::Empty,
                Expr::literal(b" "),
                Expr::Seq(vec![
                    Expr::literal(b"\n"),
                    Expr::Repeat {
                        expr: Box::new(Expr::literal(b" ")),
                        min: 0,
                        max: Some(indent.saturating_mul(32)),
                    },
                ]),
            ]),
        }
    }

    /// `ws TOKEN ws` around a punctuation byte.
    pub fn punct(&self, token: &[u8]) -> Expr {
        seq(vec![self.ws(), Expr::literal(token), self.ws()])
    }
}

fn is_true_schema(v: &Value) -> bool {
    v == &Value::Bool(true) || v.as_object().is_some_and(|m| m.is_empty())
}

fn is_false_schema(v: &Value) -> bool {
    v == &Value::Bool(false)
}

/// A byte class leaf.
pub(crate) fn lit_class(ranges: &[(u8, u8)]) -> Expr {
    use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange};
    Expr::Regex(Hir::class(Class::Bytes(ClassBytes::new(
        ranges.iter().map(|&(a, b)| ClassBytesRange::new(a, b)),
    ))))
}

/// The empty language.
pub(crate) fn nothing() -> Expr {
    Expr::Regex(Hir::fail())
}

/// Concatenation, flattening trivial cases.
pub(crate) fn seq(items: Vec<Expr>) -> Expr {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Expr::Empty => {}
            Expr::Seq(inner) => out.extend(inner),
            other => out.push(other),
        }
    }
    match out.len() {
        0 => Expr::Empty,
        1 => out.pop().unwrap(),
        _ => Expr::Seq(out),
    }
}

/// Alternation; the empty alternation is the empty language.
pub(crate) fn alt(mut items: Vec<Expr>) -> Expr {
    match items.len() {
        0 => nothing(),
        1 => items.pop().unwrap(),
        _ => Expr::Alt(items),
    }
}
