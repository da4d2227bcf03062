//! Structural tags: XGrammar's JSON format for outputs that mix free text with
//! structure (tool calls, reasoning spans, special-token delimiters), the
//! format vLLM and SGLang send as `response_format: {"type": "structural_tag"}`.
//!
//! ```json
//! {"type": "structural_tag", "format": {
//!   "type": "triggered_tags", "triggers": ["<tool_call>"],
//!   "tags": [{"begin": "<tool_call>", "content": {"type": "json_schema",
//!             "json_schema": {"type": "object"}}, "end": "</tool_call>"}]}}
//! ```
//!
//! `format` (the reading of the JSON, every field checked, errors by JSON
//! pointer) and `lower` (to IR rules, free text as [`FreeText`] terminals) are
//! one file each. Also read: the legacy shape vLLM still sends,
//! `{"type": "structural_tag", "structures": [{"begin", "schema", "end"}],
//! "triggers": [...]}`, as `triggered_tags` over those tags.
//!
//! Schemas compile through stencil's JSON Schema front-end as XGrammar's do by
//! default: declared properties only unless the schema says otherwise (`strict`),
//! flexible whitespace (bounded here: a newline and 20 spaces or tabs per gap).
//! `grammar` formats are GBNF (XGrammar's EBNF) when they contain `::=`, else
//! Lark. The parameter styles of `json_schema` (`qwen_xml`, `minimax_xml`,
//! `deepseek_xml`, `glm_xml`, `cohere_xml`, ...) are the JSON Schema front-end's
//! [`ParameterStyle`](crate::frontend::json_schema::ParameterStyle).
//! `any_text`'s `max_tokens` is a [`TokenBudget`](crate::grammar::TokenBudget)
//! (after that many content tokens, a token straddling content and end among
//! them, only what follows may come), its `max_chars` a length bound on the
//! text itself; `any_tokens`' `max_tokens` a bounded repetition.
//!
//! [`FreeText`]: crate::grammar::FreeText

mod format;
mod lower;

use serde_json::Value;

use super::json_schema::{JsonSchemaOptions, PatternCache, Whitespace};
use super::{FrontendError, Limits};
use crate::grammar::Grammar;

/// Options of [`parse`].
#[derive(Debug, Clone)]
pub struct StructuralTagOptions {
    /// How `json_schema` formats compile (`any_order` sets the property order).
    pub json: JsonSchemaOptions,
    pub limits: Limits,
    /// Special tokens of the vocabulary the tag is for, `(id, content)`: where
    /// a delimiter (a tag's begin or end, a trigger, a separator, a constant
    /// string) holds one's content, that part is the text or the token. A
    /// model whose `<|tool_call_start|>` is a special token writes it as that
    /// one token, which no text spells. [`Compiler`](crate::Compiler) fills it
    /// from its vocabulary (end-of-sequence tokens left out); empty, the
    /// delimiters are text only.
    pub delimiter_tokens: Vec<(u32, String)>,
}

impl Default for StructuralTagOptions {
    fn default() -> Self {
        StructuralTagOptions {
            json: JsonSchemaOptions {
                whitespace: Whitespace::Bounded { indent: 20 },
                strict: true,
                ..JsonSchemaOptions::default()
            },
            limits: Limits::default(),
            delimiter_tokens: Vec::new(),
        }
    }
}

/// A structural tag that cannot be compiled: where (a JSON pointer into the
/// request) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructuralTagError {
    pub pointer: String,
    pub message: String,
}

impl From<StructuralTagError> for FrontendError {
    fn from(e: StructuralTagError) -> FrontendError {
        FrontendError::Document {
            pointer: if e.pointer.is_empty() {
                "the structural tag".into()
            } else {
                e.pointer
            },
            message: e.message,
        }
    }
}

/// Parses a structural tag (the whole `{"type": "structural_tag", ...}` object)
/// into the IR. Token names (`{"type": "token", "token": "<tool_call>"}`) are
/// bound to a vocabulary when the grammar is compiled.
pub fn parse(
    tag: &Value,
    options: &StructuralTagOptions,
    cache: &PatternCache,
) -> Result<Grammar, FrontendError> {
    let fail = |pointer: &str, message: &str| StructuralTagError {
        pointer: pointer.into(),
        message: message.into(),
    };
    let Value::Object(object) = tag else {
        return Err(fail("", "a structural tag is a JSON object").into());
    };
    match object.get("type") {
        None => {}
        Some(Value::String(t)) if t == "structural_tag" => {}
        Some(_) => return Err(fail("/type", "must be \"structural_tag\"").into()),
    }
    let format = if let Some(format) = object.get("format") {
        if let Some(key) = object
            .keys()
            .find(|k| !["type", "format"].contains(&k.as_str()))
        {
            return Err(fail(&format!("/{key}"), "unknown field (known: type, format)").into());
        }
        format::read(format, "/format")?
    } else if object.contains_key("structures") {
        legacy(tag)?
    } else {
        return Err(fail(
            "",
            "needs `format` (or the legacy `structures` and `triggers`)",
        )
        .into());
    };
    let grammar = lower::Lowering::new(options, cache).finish(&format)?;
    grammar.validate()?;
    Ok(grammar)
}

/// `{"structures": [{"begin", "schema", "end"}], "triggers": [...]}` as the
/// `triggered_tags` it means.
fn legacy(tag: &Value) -> Result<format::Format, StructuralTagError> {
    let fail = |pointer: String, message: &str| StructuralTagError {
        pointer,
        message: message.into(),
    };
    for key in tag.as_object().into_iter().flat_map(|o| o.keys()) {
        if !["type", "structures", "triggers"].contains(&key.as_str()) {
            return Err(fail(
                format!("/{key}"),
                "unknown field (known: type, structures, triggers)",
            ));
        }
    }
    let Some(Value::Array(structures)) = tag.get("structures") else {
        return Err(fail(
            "/structures".into(),
            "must be an array of {begin, schema, end}",
        ));
    };
    let mut tags = Vec::new();
    for (i, s) in structures.iter().enumerate() {
        let at = format!("/structures/{i}");
        let (Some(begin), Some(schema), Some(end)) = (
            s.get("begin").and_then(Value::as_str),
            s.get("schema"),
            s.get("end").and_then(Value::as_str),
        ) else {
            return Err(fail(at, "needs `begin` and `end` (strings) and `schema`"));
        };
        tags.push(serde_json::json!({
            "begin": begin,
            "content": {"type": "json_schema", "json_schema": schema},
            "end": end,
        }));
    }
    let triggers = tag.get("triggers").cloned().unwrap_or(Value::Null);
    let format = serde_json::json!({
        "type": "triggered_tags",
        "triggers": triggers,
        "tags": tags,
    });
    format::read(&format, "")
}

#[cfg(test)]
mod tests;
