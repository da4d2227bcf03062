//! What constrains a reply: `response_format` (OpenAI's `json_schema` and
//! `json_object`), stencil's `grammar` extra (`gbnf`, `lark`, `regex`,
//! `structural_tag`) or `tools` (the model's tool-call format as a structural
//! tag), compiled with the server's one [`Compiler`].
//!
//! A grammar that does not compile is a 400 naming the field (`param`) and, in
//! the message, where inside it (the JSON pointer, line:column). Two constraints
//! at once are refused rather than one silently dropped.

use std::sync::Arc;

use serde_json::{json, Value};

use super::error::ApiError;
use super::params::Body;
use crate::frontend::json_schema::JsonSchemaOptions;
use crate::frontend::lark::LarkOptions;
use crate::frontend::structural_tag::StructuralTagOptions;
use crate::frontend::tool_calls::{self, ToolCallFormat, ToolChoice};
use crate::tables::TokenTables;
use crate::Compiler;

/// Tools offered to the model, and how its reply is read back.
#[derive(Debug, Clone)]
pub struct ToolUse {
    pub format: ToolCallFormat,
    /// The `tools` as the client sent them (for the prompt).
    pub definitions: Value,
}

/// A request's constraint.
#[derive(Default)]
pub struct Constraint {
    pub tables: Option<Arc<TokenTables>>,
    /// Set when the reply may hold tool calls (not with `tool_choice: "none"`).
    pub tools: Option<ToolUse>,
    /// Tools described in the prompt (also with `tool_choice: "none"`).
    pub offered: Option<ToolUse>,
}

fn json_options(strict: bool) -> JsonSchemaOptions {
    JsonSchemaOptions {
        strict,
        plain_integers: true,
        ..JsonSchemaOptions::default()
    }
}

fn compile_error(param: &str, e: impl std::fmt::Display) -> ApiError {
    ApiError::invalid(param, format!("{param}: {e}")).with_code("invalid_grammar")
}

/// `response_format` in the chat shape (`{"type": "json_schema", "json_schema":
/// {"name", "schema", "strict"}}`) or the responses shape (`text.format`:
/// `{"type": "json_schema", "name", "schema", "strict"}`), as a grammar.
pub fn response_format(
    format: &Value,
    param: &str,
    compiler: &Compiler,
) -> Result<Option<Arc<TokenTables>>, ApiError> {
    let kind = format
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid(param, format!("`{param}.type` must be a string")))?;
    match kind {
        "text" => Ok(None),
        "json_object" => compiler
            .compile_json_schema(&json!({"type": "object"}), &json_options(false))
            .map(Some)
            .map_err(|e| compile_error(param, e)),
        "json_schema" => {
            // Chat nests the schema under `json_schema`; responses has it flat.
            let spec = format.get("json_schema").unwrap_or(format);
            let schema = spec.get("schema").ok_or_else(|| {
                ApiError::invalid(
                    param,
                    format!("`{param}` of type json_schema needs a `schema`"),
                )
            })?;
            let strict = spec.get("strict").and_then(Value::as_bool).unwrap_or(false);
            compiler
                .compile_json_schema(schema, &json_options(strict))
                .map(Some)
                .map_err(|e| compile_error(param, e))
        }
        other => Err(ApiError::invalid(
            param,
            format!("unknown {param} type {other:?} (expected text, json_object or json_schema)"),
        )),
    }
}

/// stencil's `grammar` extra: `{"gbnf": text}`, `{"lark": text}`, `{"regex":
/// pattern}` or `{"structural_tag": {...}}`.
pub fn grammar_extra(grammar: &Value, compiler: &Compiler) -> Result<Arc<TokenTables>, ApiError> {
    let param = "grammar";
    let object = grammar
        .as_object()
        .filter(|o| o.len() == 1)
        .ok_or_else(|| {
            ApiError::invalid(
                param,
                "`grammar` must be an object with one of gbnf, lark, regex, structural_tag",
            )
        })?;
    let (kind, value) = object.iter().next().expect("one entry");
    let text = || {
        value
            .as_str()
            .ok_or_else(|| ApiError::wrong_type(&format!("grammar.{kind}"), "a string"))
    };
    let param = format!("grammar.{kind}");
    match kind.as_str() {
        "gbnf" => compiler.compile_gbnf(text()?),
        "lark" => compiler
            .compile_lark_with(text()?, &LarkOptions::default())
            .map(|(tables, _report)| tables),
        "regex" => compiler.compile_regex(text()?),
        "structural_tag" => {
            compiler.compile_structural_tag(value, &StructuralTagOptions::default())
        }
        other => {
            return Err(ApiError::invalid(
                "grammar",
                format!(
                    "unknown grammar kind {other:?} (expected gbnf, lark, regex or structural_tag)"
                ),
            ))
        }
    }
    .map_err(|e| compile_error(&param, e))
}

/// `tools`, `tool_choice`, `parallel_tool_calls` as `format`'s structural tag.
fn tool_constraint(
    body: &Body,
    tools_field: &Value,
    format: ToolCallFormat,
    compiler: &Compiler,
) -> Result<Constraint, ApiError> {
    let located = |e: crate::frontend::FrontendError| {
        let text = e.to_string();
        let param = if text.contains("/tool_choice") {
            "tool_choice"
        } else {
            "tools"
        };
        ApiError::invalid(param, text)
    };
    let tools = tool_calls::read_tools(tools_field).map_err(located)?;
    let choice = tool_calls::read_tool_choice(body.get("tool_choice"), &tools).map_err(located)?;
    let parallel = body.bool("parallel_tool_calls")?.unwrap_or(true);
    let offered = ToolUse {
        format,
        definitions: tools_field.clone(),
    };
    if let ToolChoice::None = choice {
        return Ok(Constraint {
            offered: Some(offered),
            ..Constraint::default()
        });
    }
    let tag = tool_calls::structural_tag(format, &tools, &choice, parallel).map_err(located)?;
    let options = StructuralTagOptions {
        json: json_options(true),
        ..StructuralTagOptions::default()
    };
    let tables = compiler
        .compile_structural_tag(&tag, &options)
        .map_err(|e| compile_error("tools", e))?;
    Ok(Constraint {
        tables: Some(tables),
        tools: Some(offered.clone()),
        offered: Some(offered),
    })
}

/// The constraint of a chat-shaped request: at most one of `response_format`
/// (other than text), `grammar` and `tools`.
pub fn read(
    body: &Body,
    response_format_field: Option<(&Value, &str)>,
    format: ToolCallFormat,
    compiler: &Compiler,
) -> Result<Constraint, ApiError> {
    let format_tables = match response_format_field {
        Some((value, param)) => response_format(value, param, compiler)?,
        None => None,
    };
    let grammar = body.get("grammar");
    let tools = body
        .get("tools")
        .filter(|t| t.as_array().is_none_or(|a| !a.is_empty()));
    let given = [format_tables.is_some(), grammar.is_some(), tools.is_some()];
    if given.iter().filter(|&&g| g).count() > 1 {
        return Err(ApiError::invalid(
            if tools.is_some() { "tools" } else { "grammar" },
            "give at most one of response_format (json), grammar and tools: stencil does not combine \
             constraints yet",
        ));
    }
    if let Some(tools) = tools {
        return tool_constraint(body, tools, format, compiler);
    }
    let tables = match grammar {
        Some(g) => Some(grammar_extra(g, compiler)?),
        None => format_tables,
    };
    Ok(Constraint {
        tables,
        ..Constraint::default()
    })
}
