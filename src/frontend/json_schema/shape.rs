//! An object's shape written as a grammar, in either property order.
//!
//! A [`Shape`] is what the object emitter ([`super::object`]) decided: the
//! declared pairs, the alternatives for one undeclared pair, the witnesses that
//! must be present, and the bounds on how many pairs there are.
//!
//! Schema order is a chain of rules `B(i)` = "properties i.. follow, each after a
//! comma" (linear size; with counting, `B(i, count)`). Any order is one
//! [`Expr::Permutation`]: declared pairs as members (each at most once, required
//! ones present), undeclared pairs as its extra, `minProperties`/`maxProperties` as
//! its item count. The parser tracks which members were written, so the encoding
//! is linear in the number of properties (as a grammar it would need a rule per
//! subset of them).

use rustc_hash::FxHashMap as HashMap;

use crate::grammar::{Expr, Permutation, RuleId};

use super::string::literal_string;
use super::xml::ParameterStyle;
use super::{alt, nothing, seq, PropertyOrder, Result, SchemaCompiler};

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
    /// Undeclared pairs that must be present (see [`super::node::Witness`]).
    pub witnesses: Vec<Expr>,
    pub min: u64,
    pub max: Option<u64>,
    pub ptr: String,
    pub syntax: Syntax,
}

impl<'a> SchemaCompiler<'a> {
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
pub(super) fn tagged_pair(style: ParameterStyle, key: Expr, rest: Expr) -> Expr {
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
