//! One node to one expression: an alternative per JSON type the node allows
//! (each built by its type's file), or, under `enum`/`const`, the listed values
//! that pass the node's other keywords, each spelled as a literal.
//!
//! Here rather than beside keyword collection because it is the one place that
//! calls every per-type emitter; collection needs none of them.

use std::collections::HashSet;

use crate::grammar::Expr;
use serde_json::Value;

use super::decimal::Decimal;
use super::node::{Node, TypeSet};
use super::string::literal_string;
use super::validate::json_key;
use super::xml::{ParameterStyle, MINIMAX_M3_TAG};
use super::{alt, nothing, seq, Result, SchemaCompiler};

/// Most numbers of one `enum` spelled with exponents too (`7` as `0.7e1`).
pub(crate) const MOST_SPELLED_NUMBERS: usize = 256;

impl<'a> SchemaCompiler<'a> {
    /// One alternative per JSON type the node allows.
    pub(crate) fn emit_node(&mut self, node: &Node<'a>) -> Result<Expr> {
        if node.types.is_empty() {
            return Ok(nothing());
        }
        if self.value_style == Some(ParameterStyle::Cohere) {
            return self.cohere_value(node);
        }
        if !node.enums.is_empty() {
            return self.emit_enum(node);
        }
        let mut alts = Vec::new();
        if node.types.intersects(TypeSet::NULL) {
            alts.push(self.literal(&Value::Null)?);
        }
        if node.types.intersects(TypeSet::BOOLEAN) {
            alts.push(self.keyword_literal(&Value::Bool(true)));
            alts.push(self.keyword_literal(&Value::Bool(false)));
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
        let values = self.enum_values(node)?;
        // Each number's exponent spellings are a few dozen regex branches: past
        // a few hundred numbers they dominate the compile (100,000 numbers:
        // 50 s, 700 MB), so a long list is spelled plain (`7`, `7.0`), an
        // over-constraint generation never meets.
        let numbers = values.iter().filter(|v| v.is_number()).count();
        let spelled = self.exponent_spellings;
        self.exponent_spellings = spelled && numbers <= MOST_SPELLED_NUMBERS;
        let mut alts = Vec::new();
        for v in values {
            match self.literal(v) {
                Ok(e) => alts.push(e),
                Err(e) => {
                    self.exponent_spellings = spelled;
                    return Err(e);
                }
            }
        }
        self.exponent_spellings = spelled;
        Ok(alt(alts))
    }

    /// The values an `enum`/`const` node allows: in every list, not excluded,
    /// passing the node's other keywords; each once.
    pub(crate) fn enum_values(&mut self, node: &Node<'a>) -> Result<Vec<&'a Value>> {
        let keys =
            |values: &[&Value]| -> HashSet<String> { values.iter().map(|v| json_key(v)).collect() };
        let mut values: Vec<(&'a Value, String)> =
            node.enums[0].iter().map(|&v| (v, json_key(v))).collect();
        for other in &node.enums[1..] {
            let other = keys(other);
            values.retain(|(_, k)| other.contains(k));
        }
        let excluded = keys(&node.excluded);
        let mut out = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        for (v, key) in values {
            if excluded.contains(&key) || !seen.insert(key) {
                continue;
            }
            if self.node_accepts_beside_enums(node, v)? {
                out.push(v);
            }
        }
        Ok(out)
    }

    /// `null`, `true` or `false` as written: also `None`, `True`, `False` where
    /// values are Python's ([`SchemaCompiler::value_style`]).
    fn keyword_literal(&self, v: &Value) -> Expr {
        let (json, python): (&[u8], &[u8]) = match v {
            Value::Bool(true) => (b"true", b"True"),
            Value::Bool(false) => (b"false", b"False"),
            _ => (b"null", b"None"),
        };
        match self.value_style {
            Some(ParameterStyle::Python) => {
                Expr::Alt(vec![Expr::literal(json), Expr::literal(python)])
            }
            _ => Expr::literal(json),
        }
    }

    /// A JSON value as an expression (any property order per the options).
    pub(crate) fn literal(&mut self, v: &Value) -> Result<Expr> {
        let m3 = self.value_style == Some(ParameterStyle::MiniMaxM3);
        Ok(match v {
            // MiniMax-M3's template leaves out what is null.
            Value::Null if m3 => nothing(),
            Value::Null | Value::Bool(_) => self.keyword_literal(v),
            Value::Number(_) => {
                let d = Decimal::from_value(v).expect("a JSON number");
                self.number_literal(&d)?
            }
            Value::String(s) => match self.value_style {
                Some(style @ ParameterStyle::Gemma) => {
                    Expr::literal(format!("{0}{s}{0}", style.end()).as_bytes())
                }
                Some(ParameterStyle::MiniMaxM3) if s.contains(MINIMAX_M3_TAG) => nothing(),
                Some(ParameterStyle::MiniMaxM3) => Expr::literal(s.as_bytes()),
                _ => literal_string(s),
            },
            Value::Array(items) if m3 => {
                let mut parts = Vec::new();
                for item in items {
                    let value = self.literal(item)?;
                    parts.push(self.array_item(value));
                }
                seq(parts)
            }
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
                seq(parts)
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
