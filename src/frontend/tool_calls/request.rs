//! Reading a request's tools: OpenAI's `tools` and `tool_choice`, each error at
//! its JSON pointer in the request.

use serde_json::{json, Value};

use super::{error, FrontendError};

/// One callable tool: its name and its arguments' JSON Schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    pub name: String,
    pub parameters: Value,
}

/// OpenAI's `tool_choice`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    None,
    Auto,
    Required,
    Function(String),
}

/// Reads OpenAI's `tools` (`[{"type": "function", "function": {"name",
/// "parameters", ...}}]`; the bare `{"name", "parameters"}` form too). Errors
/// name the JSON pointer under `/tools`.
pub fn read_tools(tools: &Value) -> Result<Vec<Tool>, FrontendError> {
    let Value::Array(items) = tools else {
        return Err(error("/tools", "must be an array of tools"));
    };
    let mut out: Vec<Tool> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = format!("/tools/{i}");
        let function = match item.get("function") {
            Some(f) => {
                if item.get("type").is_some_and(|t| t != "function") {
                    return Err(error(&format!("{at}/type"), "must be \"function\""));
                }
                f
            }
            None => item,
        };
        let at_function = if item.get("function").is_some() {
            format!("{at}/function")
        } else {
            at.clone()
        };
        let Some(name) = function.get("name").and_then(Value::as_str) else {
            return Err(error(
                &format!("{at_function}/name"),
                "a tool needs a name (a string)",
            ));
        };
        if name.is_empty() || out.iter().any(|t| t.name == name) {
            return Err(error(
                &format!("{at_function}/name"),
                format!("tool names must be non-empty and distinct ({name:?})"),
            ));
        }
        let parameters = match function.get("parameters") {
            None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
            Some(p @ (Value::Object(_) | Value::Bool(_))) => p.clone(),
            Some(_) => {
                return Err(error(
                    &format!("{at_function}/parameters"),
                    "must be a JSON Schema (an object)",
                ))
            }
        };
        out.push(Tool {
            name: name.to_string(),
            parameters,
        });
    }
    Ok(out)
}

/// Compiles each tool's `parameters` on its own (as the calls' arguments are:
/// `options` should be strict), so that a schema that cannot be enforced is an
/// error at its place in `definitions` (the `tools` array as sent):
/// `/tools/1/function/parameters/properties/when: unsupported keyword ...`.
pub fn check_parameters(
    definitions: &Value,
    tools: &[Tool],
    options: &crate::frontend::json_schema::JsonSchemaOptions,
) -> Result<(), FrontendError> {
    for (i, tool) in tools.iter().enumerate() {
        let Err(e) = crate::frontend::json_schema::compile_schema(&tool.parameters, options) else {
            continue;
        };
        let base = match definitions.pointer(&format!("/{i}/function")) {
            Some(_) => format!("/tools/{i}/function/parameters"),
            None => format!("/tools/{i}/parameters"),
        };
        let inner = e.pointer().unwrap_or_default();
        return Err(error(&format!("{base}{inner}"), e.to_string()));
    }
    Ok(())
}

/// Reads OpenAI's `tool_choice` (`"none"`, `"auto"`, `"required"`, or
/// `{"type": "function", "function": {"name": ...}}`); absent is `auto`.
pub fn read_tool_choice(
    choice: Option<&Value>,
    tools: &[Tool],
) -> Result<ToolChoice, FrontendError> {
    let choice = match choice {
        None | Some(Value::Null) => return Ok(ToolChoice::Auto),
        Some(c) => c,
    };
    match choice {
        Value::String(s) => match s.as_str() {
            "none" => Ok(ToolChoice::None),
            "auto" => Ok(ToolChoice::Auto),
            "required" => Ok(ToolChoice::Required),
            other => Err(error(
                "/tool_choice",
                format!("unknown tool_choice {other:?} (none, auto, required, or a function)"),
            )),
        },
        Value::Object(_) => {
            let Some(name) = choice
                .pointer("/function/name")
                .or_else(|| choice.get("name"))
                .and_then(Value::as_str)
            else {
                return Err(error(
                    "/tool_choice/function/name",
                    "a named tool choice needs the function's name",
                ));
            };
            if !tools.iter().any(|t| t.name == name) {
                return Err(error(
                    "/tool_choice/function/name",
                    format!("no tool named {name:?} in `tools`"),
                ));
            }
            Ok(ToolChoice::Function(name.to_string()))
        }
        _ => Err(error("/tool_choice", "must be a string or an object")),
    }
}
