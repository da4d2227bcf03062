//! What constrains a reply: `response_format` (OpenAI's `json_schema` and
//! `json_object`), stencil's `grammar` extra (`gbnf`, `lark`, `regex`,
//! `structural_tag`) or `tools` (the model's tool-call format as a structural
//! tag), compiled with the server's one [`Compiler`].
//!
//! A grammar that does not compile is a 400 naming the field (`param`) and, in
//! the message, where inside it (the JSON pointer, line:column). `tools` with a
//! JSON `response_format` is a reply that is either calls or the JSON document
//! (under `tool_choice: "auto"`); `grammar` with either is refused rather than
//! one silently dropped. With a reasoning span, the constraint starts after it
//! ([`grammar_with_reasoning`]): the reasoning itself is never constrained.

use std::sync::Arc;

use serde_json::{json, Value};

use super::error::ApiError;
use super::params::Body;
use crate::frontend::gbnf::{self, GbnfOptions};
use crate::frontend::json_schema::{self, JsonSchemaOptions};
use crate::frontend::lark::{self, LarkOptions};
use crate::frontend::structural_tag::{self, StructuralTagOptions};
use crate::frontend::tool_calls::{
    self, grammar_with_reasoning, Reasoning, ToolCallFormat, ToolChoice,
};
use crate::frontend::FrontendError;
use crate::grammar::Grammar;
use crate::tables::TokenTables;
use crate::Compiler;

/// A front-end's grammar compiled, with the reasoning span in front when there
/// is one.
fn compile(
    compiler: &Compiler,
    grammar: Result<Grammar, crate::Error>,
    span: Option<&Reasoning>,
) -> Result<Arc<TokenTables>, crate::Error> {
    let grammar = grammar?;
    match span {
        Some(span) => compiler.compile_grammar(&grammar_with_reasoning(
            grammar,
            span,
            &compiler.delimiter_tokens(),
        )),
        None => compiler.compile_grammar(&grammar),
    }
}

/// A JSON Schema's grammar (the compiler's pattern cache shared).
fn schema_grammar(
    compiler: &Compiler,
    schema: &Value,
    options: &JsonSchemaOptions,
) -> Result<Grammar, crate::Error> {
    Ok(json_schema::compile_schema_with(schema, options, compiler.pattern_cache())?.0)
}

/// Tools offered to the model, and how its reply is read back.
#[derive(Debug, Clone)]
pub struct ToolUse {
    pub format: ToolCallFormat,
    /// The `tools` as the client sent them (for the prompt).
    pub definitions: Value,
    /// The same, read (their schemas type what the reply's parser reads back).
    pub tools: Vec<tool_calls::Tool>,
}

/// A request's constraint.
#[derive(Default)]
pub struct Constraint {
    pub tables: Option<Arc<TokenTables>>,
    /// Set when the reply may hold tool calls (not with `tool_choice: "none"`).
    pub tools: Option<ToolUse>,
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
/// `{"type": "json_schema", "name", "schema", "strict"}`): the schema and whether
/// it is strict, or `None` for `text`.
fn response_schema(format: &Value, param: &str) -> Result<Option<(Value, bool)>, ApiError> {
    let kind = format
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::invalid(param, format!("`{param}.type` must be a string")))?;
    match kind {
        "text" => Ok(None),
        "json_object" => Ok(Some((
            json!({"type": "object", "additionalProperties": true}),
            false,
        ))),
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
            Ok(Some((schema.clone(), strict)))
        }
        other => Err(ApiError::invalid(
            param,
            format!("unknown {param} type {other:?} (expected text, json_object or json_schema)"),
        )),
    }
}

/// stencil's `grammar` extra: `{"gbnf": text}`, `{"lark": text}`, `{"regex":
/// pattern}` or `{"structural_tag": {...}}`.
pub fn grammar_extra(
    grammar: &Value,
    compiler: &Compiler,
    span: Option<&Reasoning>,
) -> Result<Arc<TokenTables>, ApiError> {
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
    let limits = &compiler.options().limits;
    let grammar: Result<Grammar, crate::Error> = match kind.as_str() {
        "gbnf" => gbnf::parse(
            text()?,
            &GbnfOptions {
                root: "root".into(),
                limits: limits.clone(),
            },
        )
        .map_err(Into::into),
        "lark" => {
            lark::parse_with_warnings(text()?, &LarkOptions::default(), compiler.pattern_cache())
                .map(|(grammar, _report)| grammar)
                .map_err(Into::into)
        }
        "regex" => crate::frontend::regex::parse(text()?, limits).map_err(Into::into),
        "structural_tag" => structural_tag::parse(
            value,
            &StructuralTagOptions {
                delimiter_tokens: compiler.delimiter_tokens(),
                ..StructuralTagOptions::default()
            },
            compiler.pattern_cache(),
        )
        .map_err(Into::into),
        other => {
            return Err(ApiError::invalid(
                "grammar",
                format!(
                    "unknown grammar kind {other:?} (expected gbnf, lark, regex or structural_tag)"
                ),
            ))
        }
    };
    compile(compiler, grammar, span).map_err(|e| compile_error(&param, e))
}

/// A mistake in `tools` or `tool_choice`, named by the field it is in.
fn located(e: FrontendError) -> ApiError {
    let text = e.to_string();
    let param = if text.contains("/tool_choice") {
        "tool_choice"
    } else {
        "tools"
    };
    ApiError::invalid(param, text)
}

/// `tools` read, as offered in the prompt.
fn offered_tools(tools_field: &Value, format: ToolCallFormat) -> Result<ToolUse, ApiError> {
    Ok(ToolUse {
        format,
        definitions: tools_field.clone(),
        tools: tool_calls::read_tools(tools_field).map_err(located)?,
    })
}

/// The tools a request offers the model (for its prompt), before anything is
/// compiled: the prompt decides whether it opened a reasoning span.
pub fn offered(body: &Body, format: ToolCallFormat) -> Result<Option<ToolUse>, ApiError> {
    match body
        .get("tools")
        .filter(|t| t.as_array().is_none_or(|a| !a.is_empty()))
    {
        Some(tools) => offered_tools(tools, format).map(Some),
        None => Ok(None),
    }
}

/// `tools`, `tool_choice`, `parallel_tool_calls` as `format`'s structural tag;
/// with a JSON response format (`answer`: its schema and field), a reply that is
/// either calls or that document when the choice is `auto`, the document alone
/// when it is `none`.
fn tool_constraint(
    body: &Body,
    tools_field: &Value,
    format: ToolCallFormat,
    answer: Option<(&Value, &str)>,
    compiler: &Compiler,
    span: Option<&Reasoning>,
) -> Result<Constraint, ApiError> {
    let offered = offered_tools(tools_field, format)?;
    let tools = offered.tools.clone();
    let choice = tool_calls::read_tool_choice(body.get("tool_choice"), &tools).map_err(located)?;
    let parallel = body.bool("parallel_tool_calls")?.unwrap_or(true);
    if let ToolChoice::None = choice {
        // No calls to compile, but a tool's schema must still be one stencil takes.
        tool_calls::check_parameters(tools_field, &tools, &json_options(true)).map_err(located)?;
        let tables = match answer {
            Some((schema, param)) => {
                let grammar = schema_grammar(compiler, schema, &json_options(true));
                Some(compile(compiler, grammar, span).map_err(|e| compile_error(param, e))?)
            }
            None => None,
        };
        return Ok(Constraint {
            tables,
            ..Constraint::default()
        });
    }
    let tag = match (answer, &choice) {
        (Some((schema, param)), ToolChoice::Auto) => {
            // The document alone first, so that its mistakes name its field.
            compiler
                .compile_json_schema(schema, &json_options(true))
                .map_err(|e| compile_error(param, e))?;
            let calls = tool_calls::structural_tag(format, &tools, &ToolChoice::Required, parallel)
                .map_err(located)?;
            json!({"type": "structural_tag", "format": {"type": "or", "elements": [
                calls["format"],
                {"type": "json_schema", "json_schema": schema},
            ]}})
        }
        _ => tool_calls::structural_tag(format, &tools, &choice, parallel).map_err(located)?,
    };
    let tag = match span {
        Some(span) => tool_calls::with_reasoning(&tag, span),
        None => tag,
    };
    let options = StructuralTagOptions {
        json: json_options(true),
        ..StructuralTagOptions::default()
    };
    let tables = compiler
        .compile_structural_tag(&tag, &options)
        .map_err(|e| {
            // A schema that does not compile: named at its place in `tools`.
            match tool_calls::check_parameters(tools_field, &tools, &options.json) {
                Err(located_error) => located(located_error),
                Ok(()) => compile_error("tools", e),
            }
        })?;
    Ok(Constraint {
        tables: Some(tables),
        tools: Some(offered),
    })
}

/// The constraint of a chat-shaped request: `grammar` alone, or `tools` and a
/// JSON `response_format` alone or together; after `span` when there is one.
pub fn read(
    body: &Body,
    response_format_field: Option<(&Value, &str)>,
    format: ToolCallFormat,
    compiler: &Compiler,
    span: Option<&Reasoning>,
) -> Result<Constraint, ApiError> {
    let answer = match response_format_field {
        Some((value, param)) => response_schema(value, param)?.map(|s| (s, param)),
        None => None,
    };
    let grammar = body.get("grammar");
    let tools = body
        .get("tools")
        .filter(|t| t.as_array().is_none_or(|a| !a.is_empty()));
    if grammar.is_some() && (answer.is_some() || tools.is_some()) {
        return Err(ApiError::invalid(
            "grammar",
            "`grammar` takes the place of response_format (json) and tools: give one or the other",
        ));
    }
    if let Some(tools) = tools {
        // With tools, the answer's schema is applied strictly (declared
        // properties only), as the tools' parameters are.
        let answer = answer.as_ref().map(|((schema, _), param)| (schema, *param));
        return tool_constraint(body, tools, format, answer, compiler, span);
    }
    let tables = match (grammar, answer) {
        (Some(g), _) => Some(grammar_extra(g, compiler, span)?),
        (None, Some(((schema, strict), param))) => {
            let grammar = schema_grammar(compiler, &schema, &json_options(strict));
            Some(compile(compiler, grammar, span).map_err(|e| compile_error(param, e))?)
        }
        (None, None) => None,
    };
    Ok(Constraint {
        tables,
        ..Constraint::default()
    })
}
