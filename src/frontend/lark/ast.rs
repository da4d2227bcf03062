//! The syntax tree of a Lark grammar: what the parser produces and the lowering
//! reads. Every node that an error can be about keeps the byte offset where it
//! starts (turned into line:column only when an error is reported).
//!
//! The shape follows Lark's own grammar of Lark (`expansions` = alternatives of
//! `alias`, an alias = `expansion`s joined by `&`, an `expansion` = a sequence of
//! `expr`, an `expr` = an `atom` with at most one repetition) plus llguidance's
//! additions (`%json`, `%regex`, `%lark`, special tokens, rule attributes).

use serde_json::Value as Json;

pub(crate) use crate::grammar::TokenSet;

/// A whole grammar (or the inside of a `%lark { ... }` block).
#[derive(Debug, Clone)]
pub(crate) struct Items {
    pub items: Vec<Item>,
}

#[derive(Debug, Clone)]
pub(crate) enum Item {
    Rule(Box<RuleDef>),
    Terminal(TerminalDef),
    /// `%ignore expansions`.
    Ignore {
        at: usize,
        body: Expansions,
    },
    /// `%import common.NAME [-> ALIAS]` and `%import common (A, B)`: the module
    /// path, then (name, local name) pairs.
    Import {
        at: usize,
        module: Vec<String>,
        names: Vec<(String, String)>,
    },
    /// `%llguidance {...}` (or `%grammar_options {...}`, `spelling` says which)
    /// with its JSON object.
    Options {
        at: usize,
        spelling: &'static str,
        value: Json,
    },
}

/// `name[attributes]: expansions` (a lower-case rule).
#[derive(Debug, Clone)]
pub(crate) struct RuleDef {
    pub name: String,
    pub at: usize,
    pub attributes: Attributes,
    pub body: Expansions,
}

/// `NAME: expansions` (an upper-case terminal).
#[derive(Debug, Clone)]
pub(crate) struct TerminalDef {
    pub name: String,
    pub at: usize,
    pub body: Expansions,
}

/// What a rule's `[...]` says, each with where it was written.
#[derive(Debug, Clone, Default)]
pub(crate) struct Attributes {
    pub lazy: Option<usize>,
    pub stop: Option<(usize, Value)>,
    pub suffix: Option<(usize, Value)>,
    pub stop_capture: Option<(usize, String)>,
    pub capture: Option<(usize, String)>,
    pub max_tokens: Option<(usize, u64)>,
    pub temperature: Option<(usize, f64)>,
}

/// Alternatives: `a | b | c`.
#[derive(Debug, Clone)]
pub(crate) struct Expansions {
    pub alternatives: Vec<Alias>,
}

/// One alternative: sequences joined by `&` (intersection, terminals only), and
/// an optional `-> name` (which names a tree node in Lark and leaves the language
/// alone).
#[derive(Debug, Clone)]
pub(crate) struct Alias {
    pub at: usize,
    pub conjuncts: Vec<Sequence>,
}

/// Items one after the other.
#[derive(Debug, Clone)]
pub(crate) struct Sequence {
    pub items: Vec<ExprNode>,
}

/// An atom with its repetition.
#[derive(Debug, Clone)]
pub(crate) struct ExprNode {
    pub at: usize,
    pub atom: Atom,
    /// `(min, max)`; `max: None` is unbounded.
    pub repeat: Option<(u32, Option<u32>)>,
}

#[derive(Debug, Clone)]
pub(crate) enum Atom {
    /// `( ... )`.
    Group(Expansions),
    /// `[ ... ]`.
    Maybe(Expansions),
    /// `~atom`: the complement (terminals only).
    Not(Box<Atom>),
    Value(Value),
}

#[derive(Debug, Clone)]
pub(crate) enum Value {
    /// `"..."` or `"..."i`.
    Literal {
        at: usize,
        text: String,
        insensitive: bool,
    },
    /// `"a".."z"`: the characters from one to the other.
    Range { at: usize, from: String, to: String },
    /// `/pattern/flags`.
    Regex {
        at: usize,
        pattern: String,
        flags: String,
    },
    /// A rule or terminal name.
    Name { at: usize, name: String },
    /// `%json { schema }`.
    Json { at: usize, schema: Json },
    /// `%regex { ... }`.
    RegexExt { at: usize, spec: Json },
    /// `%lark { grammar }`.
    NestedLark { at: usize, items: Items },
    /// `<...>`: a special token or token ids.
    SpecialToken { at: usize, token: TokenSet },
    /// `@name`.
    GrammarRef { at: usize, name: String },
}

impl Value {
    pub fn at(&self) -> usize {
        match self {
            Value::Literal { at, .. }
            | Value::Range { at, .. }
            | Value::Regex { at, .. }
            | Value::Name { at, .. }
            | Value::Json { at, .. }
            | Value::RegexExt { at, .. }
            | Value::NestedLark { at, .. }
            | Value::SpecialToken { at, .. }
            | Value::GrammarRef { at, .. } => *at,
        }
    }
}
