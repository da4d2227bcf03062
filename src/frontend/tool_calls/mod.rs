//! Tool calling: OpenAI's `tools`, `tool_choice` and `parallel_tool_calls` as the
//! structural tag of a model family's own tool-call format.
//!
//! A model calls tools in the format it was trained on (Hermes and Qwen write
//! `<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>`); forcing any
//! other shape (a bare JSON array for `tool_choice: "required"`) fights the
//! model. So each family maps the request to a structural tag over its own
//! delimiters ([`super::structural_tag`]), where the arguments follow each tool's
//! `parameters` schema (strict: declared properties only) and a trigger always
//! starts a call that parses:
//!
//! * `auto`: free text with calls (`triggered_tags`); `required`: calls only, at
//!   least one; a named function: that call only; `none`: free text holding no
//!   trigger.
//! * `parallel_tool_calls: false`: at most one call (`stop_after_first`).
//!
//! Families so far: Hermes (`<tool_call>` JSON), Qwen's XML parameters
//! (`<function=f>` `<parameter=a>`: Qwen3-Coder, Qwen3.5, Nemotron 3, Step 3.5),
//! GLM's (`<tool_call>f<arg_key>a</arg_key>`) and Mistral's three
//! `[TOOL_CALLS]` shapes ([`ToolCallFormat`]). The others of
//! the chat templates in the test data (Llama 3.x JSON, DeepSeek, Kimi, gpt-oss
//! harmony, ...) are to come. A reasoning span before the reply
//! ([`Reasoning`], [`with_reasoning`]) is free text up to its close.

mod parse;
mod progress;
mod xml;

use serde_json::{json, Value};

use super::json_schema::ParameterStyle;
use super::FrontendError;

pub use parse::{content_prefix_len, parse_reply, ParsedCall, ParsedReply};
pub use progress::{calls_in_progress, CallProgress};

/// A model family's tool-call format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolCallFormat {
    /// `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>`: Hermes 2
    /// Pro and 3, Qwen2.5, Qwen3 (non-coder), IBM Granite 4, Reka.
    Hermes,
    /// `<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>`:
    /// Qwen3-Coder, Qwen3.5, NVIDIA Nemotron 3, Step 3.5 Flash. A string
    /// parameter is its raw text; any other value JSON (the JSON Schema
    /// front-end's `qwen_coder_xml` style).
    QwenXml,
    /// `<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>`:
    /// GLM-4.5, 4.6, 4.7, inclusionAI Ling 3.0 (the `glm_xml` parameter style).
    Glm,
    /// `[TOOL_CALLS][{"name": "f", "arguments": {...}, "id": "a1b2c3d4e"}]`: Mistral
    /// Nemo (one block; parallel calls are items of its array).
    MistralNemo,
    /// `[TOOL_CALLS]f[ARGS]{...}`, once per call: Devstral, Ministral 3.
    MistralArgs,
    /// `[TOOL_CALLS]f[CALL_ID]a1b2c3d4e[ARGS]{...}`, once per call: Mistral
    /// Small 3.2.
    MistralCallId,
}

impl ToolCallFormat {
    /// The format a chat template renders tool calls in, when it is one of
    /// these (read from the template's text).
    pub fn detect(template: &str) -> Option<ToolCallFormat> {
        let hermes = template.contains("<tool_call>")
            && !template.contains("<tool_calls>")
            && template.contains("\"name\"")
            && template.contains("\"arguments\"")
            && !template.contains("<function=")
            && !template.contains("<arg_key>");
        if hermes {
            return Some(ToolCallFormat::Hermes);
        }
        let qwen_xml = template.contains("<tool_call>")
            && template.contains("<function=")
            && template.contains("<parameter=");
        if qwen_xml {
            return Some(ToolCallFormat::QwenXml);
        }
        if template.contains("<tool_call>") && template.contains("<arg_key>") {
            return Some(ToolCallFormat::Glm);
        }
        if template.contains("[TOOL_CALLS][") {
            return Some(ToolCallFormat::MistralNemo);
        }
        if template.contains("[TOOL_CALLS]") && template.contains("[ARGS]") {
            return Some(if template.contains("[CALL_ID]") {
                ToolCallFormat::MistralCallId
            } else {
                ToolCallFormat::MistralArgs
            });
        }
        None
    }

    /// The format by name: `hermes` (also `qwen`, `qwen2.5`, `qwen3`),
    /// `qwen-xml` (`qwen3-coder`, `qwen3.5`), `glm`, `mistral-nemo`,
    /// `mistral-args` (`devstral`), `mistral-call-id`.
    pub fn by_name(name: &str) -> Option<ToolCallFormat> {
        match name {
            "hermes" | "qwen" | "qwen2.5" | "qwen3" => Some(ToolCallFormat::Hermes),
            "qwen-xml" | "qwen3-coder" | "qwen3.5" => Some(ToolCallFormat::QwenXml),
            "glm" | "glm-4.5" | "glm-4.6" | "glm-4.7" => Some(ToolCallFormat::Glm),
            "mistral-nemo" => Some(ToolCallFormat::MistralNemo),
            "mistral-args" | "devstral" => Some(ToolCallFormat::MistralArgs),
            "mistral-call-id" => Some(ToolCallFormat::MistralCallId),
            _ => None,
        }
    }

    /// The text that opens the calls (the trigger).
    pub fn trigger(self) -> &'static str {
        match self {
            ToolCallFormat::Hermes | ToolCallFormat::QwenXml | ToolCallFormat::Glm => "<tool_call>",
            _ => "[TOOL_CALLS]",
        }
    }
}

/// What opens a Hermes call, up to its arguments, as the templates render it
/// (`json.dumps` spacing).
fn hermes_head(name: &str) -> String {
    let quoted = serde_json::to_string(name).expect("a string");
    format!("<tool_call>\n{{\"name\": {quoted}, \"arguments\": ")
}

/// What opens a Qwen XML call, up to its parameters.
fn qwen_xml_head(name: &str) -> String {
    format!("<tool_call>\n<function={name}>\n")
}

/// A whole call spelled as [`structural_tag`] constrains a reply of `format` to
/// write it: for earlier calls written back into a prompt, and for examples.
/// Mistral's formats take `id` (nine letters and digits).
pub fn call_text(format: ToolCallFormat, name: &str, arguments: &Value, id: &str) -> String {
    match format {
        ToolCallFormat::Hermes => format!("{}{arguments}}}\n</tool_call>", hermes_head(name)),
        ToolCallFormat::QwenXml => {
            let mut text = qwen_xml_head(name);
            for (key, value) in arguments.as_object().into_iter().flatten() {
                let value = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                text.push_str(&format!("<parameter={key}>\n{value}\n</parameter>\n"));
            }
            text + "</function>\n</tool_call>"
        }
        ToolCallFormat::Glm => {
            let mut text = format!("<tool_call>{name}");
            for (key, value) in arguments.as_object().into_iter().flatten() {
                let value = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                text.push_str(&format!(
                    "<arg_key>{key}</arg_key><arg_value>{value}</arg_value>"
                ));
            }
            text + "</tool_call>"
        }
        ToolCallFormat::MistralNemo => {
            let quoted = serde_json::to_string(name).expect("a string");
            format!("[TOOL_CALLS][{{\"name\": {quoted}, \"arguments\": {arguments}, \"id\": \"{id}\"}}]")
        }
        ToolCallFormat::MistralArgs => format!("[TOOL_CALLS]{name}[ARGS]{arguments}"),
        ToolCallFormat::MistralCallId => {
            format!("[TOOL_CALLS]{name}[CALL_ID]{id}[ARGS]{arguments}")
        }
    }
}

fn seq(elements: Vec<Value>) -> Value {
    json!({"type": "sequence", "elements": elements})
}

fn text(value: &str) -> Value {
    json!({"type": "const_string", "value": value})
}

fn one_of(elements: Vec<Value>) -> Value {
    json!({"type": "or", "elements": elements})
}

/// `item`, then (parallel) more of it, each after `gap`.
fn repeated(item: Value, gap: Value, parallel: bool) -> Value {
    if parallel {
        seq(vec![
            item.clone(),
            json!({"type": "star", "content": seq(vec![gap, item])}),
        ])
    } else {
        item
    }
}

/// A reasoning span before the reply: `<think>...</think>`, `[THINK]...[/THINK]`.
/// Its text is free (a model may think about a call without making it); the
/// reply's format starts after `close` (and any whitespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reasoning {
    /// What opens the span, when the model writes it; `None` when the prompt
    /// already opened it (Qwen3's template ends with `<think>\n`).
    pub open: Option<String>,
    pub close: String,
    /// The model may skip the span (only where it writes `open` itself).
    pub optional: bool,
}

/// `tag` (a structural tag) with `reasoning` before its format.
pub fn with_reasoning(tag: &Value, reasoning: &Reasoning) -> Value {
    let span = json!({
        "type": "tag",
        "begin": reasoning.open.clone().unwrap_or_default(),
        "content": {"type": "any_text"},
        "end": reasoning.close,
    });
    let span = if reasoning.optional && reasoning.open.is_some() {
        json!({"type": "optional", "content": span})
    } else {
        span
    };
    let gap = json!({"type": "regex", "pattern": "[ \\t\\r\\n]*"});
    json!({"type": "structural_tag", "format": seq(vec![span, gap, tag["format"].clone()])})
}

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

fn error(pointer: &str, message: impl Into<String>) -> FrontendError {
    FrontendError::Document {
        pointer: pointer.into(),
        message: message.into(),
    }
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

/// The structural tag that constrains a reply of `format` to `tools` as
/// `choice` and `parallel` say.
pub fn structural_tag(
    format: ToolCallFormat,
    tools: &[Tool],
    choice: &ToolChoice,
    parallel: bool,
) -> Result<Value, FrontendError> {
    let trigger = format.trigger();
    let chosen: Vec<&Tool> = match choice {
        ToolChoice::Function(name) => tools.iter().filter(|t| &t.name == name).collect(),
        _ => tools.iter().collect(),
    };
    let free = json!({"type": "any_text", "excludes": [trigger]});
    if let ToolChoice::None = choice {
        return Ok(json!({"type": "structural_tag", "format": free}));
    }
    if chosen.is_empty() {
        return match choice {
            ToolChoice::Auto => Ok(json!({"type": "structural_tag", "format": free})),
            _ => Err(error(
                "/tools",
                "tool_choice asks for a call, but there are no tools",
            )),
        };
    }
    // Names and keys spelled as the templates render them (`json.dumps`).
    let quoted = |tool: &Tool| serde_json::to_string(&tool.name).expect("a string");
    let arguments = |tool: &Tool| json!({"type": "json_schema", "json_schema": tool.parameters});
    let id = json!({"type": "regex", "pattern": "[a-zA-Z0-9]{9}"});
    let calls = match format {
        ToolCallFormat::Hermes | ToolCallFormat::QwenXml | ToolCallFormat::Glm => {
            let tags: Vec<Value> = chosen
                .iter()
                .map(|t| match format {
                    ToolCallFormat::Hermes => json!({
                        "type": "tag",
                        "begin": hermes_head(&t.name),
                        "content": arguments(t),
                        "end": ["}\n</tool_call>", "}</tool_call>"],
                    }),
                    ToolCallFormat::Glm => json!({
                        "type": "tag",
                        "begin": format!("<tool_call>{}", t.name),
                        "content": {"type": "json_schema", "json_schema": t.parameters,
                                    "style": ParameterStyle::Glm.name(), "any_order": true},
                        "end": "</tool_call>",
                    }),
                    _ => json!({
                        "type": "tag",
                        "begin": qwen_xml_head(&t.name),
                        // Parameters in the order the model writes them (Qwen's
                        // models reorder them; each still at most once).
                        "content": {"type": "json_schema", "json_schema": t.parameters,
                                    "style": ParameterStyle::QwenCoder.name(), "any_order": true},
                        // Nemotron 3's template ends a call with a newline.
                        "end": ["</function>\n</tool_call>", "</function>\n</tool_call>\n",
                                "</function></tool_call>"],
                    }),
                })
                .collect();
            if let ToolChoice::Auto = choice {
                // Free text around the calls; every `<tool_call>` starts one.
                return Ok(json!({"type": "structural_tag", "format": {
                    "type": "triggered_tags",
                    "triggers": [trigger],
                    "tags": tags,
                    "stop_after_first": !parallel,
                }}));
            }
            let gap = json!({"type": "optional", "content": text("\n")});
            return Ok(
                json!({"type": "structural_tag", "format": repeated(one_of(tags), gap, parallel)}),
            );
        }
        ToolCallFormat::MistralNemo => {
            let item = one_of(
                chosen
                    .iter()
                    .map(|t| {
                        seq(vec![
                            text(&format!("{{\"name\": {}, \"arguments\": ", quoted(t))),
                            arguments(t),
                            text(", \"id\": \""),
                            id.clone(),
                            text("\"}"),
                        ])
                    })
                    .collect(),
            );
            seq(vec![
                text("["),
                repeated(item, text(", "), parallel),
                text("]"),
            ])
        }
        ToolCallFormat::MistralArgs | ToolCallFormat::MistralCallId => {
            let call = one_of(
                chosen
                    .iter()
                    .map(|t| {
                        let mut parts = vec![text(&t.name)];
                        if format == ToolCallFormat::MistralCallId {
                            parts.extend([text("[CALL_ID]"), id.clone()]);
                        }
                        parts.extend([text("[ARGS]"), arguments(t)]);
                        seq(parts)
                    })
                    .collect(),
            );
            repeated(call, text(trigger), parallel)
        }
    };
    // The calls' block after its trigger; in `auto`, free text before it.
    let format = match choice {
        ToolChoice::Auto => json!({
            "type": "triggered_tags",
            "triggers": [trigger],
            "tags": [{"type": "tag", "begin": trigger, "content": calls, "end": ""}],
            "stop_after_first": true,
        }),
        _ => seq(vec![text(trigger), calls]),
    };
    Ok(json!({"type": "structural_tag", "format": format}))
}
