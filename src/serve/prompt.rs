//! Chat messages to prompt tokens through the model's own chat template.
//!
//! Messages are checked (a bad one is a 400 naming `messages[i]`), flattened to
//! what templates read (text parts joined, `developer` as `system`, a call's
//! `arguments` string parsed into the object templates expect) and rendered.
//! A template that renders tools itself gets `tools`; one that does not (the
//! default model's) gets them described in the system message, with the Hermes
//! format the reply will be constrained to, and earlier calls and results
//! written back into the conversation in that format.

use serde_json::{json, Map, Value};

use super::constraint::ToolUse;
use super::error::ApiError;
use crate::decode::{render_chat_json, ModelTokenizer};
use crate::frontend::tool_calls::{self, ToolPrompting};

fn text_of(content: &Value, at: &str) -> Result<String, ApiError> {
    match content {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut text = String::new();
            for (i, part) in parts.iter().enumerate() {
                match (part.get("type").and_then(Value::as_str), part.get("text")) {
                    (Some("text" | "input_text" | "output_text"), Some(Value::String(t))) => {
                        text.push_str(t)
                    }
                    _ => {
                        return Err(ApiError::invalid(
                            format!("{at}.content[{i}]"),
                            "only text content parts are supported",
                        ))
                    }
                }
            }
            Ok(text)
        }
        _ => Err(ApiError::wrong_type(
            &format!("{at}.content"),
            "a string or an array of parts",
        )),
    }
}

/// The messages as templates read them.
pub fn flatten_messages(
    messages: &Value,
    param: &str,
    prompting: ToolPrompting,
) -> Result<Vec<Value>, ApiError> {
    let items = messages
        .as_array()
        .ok_or_else(|| ApiError::wrong_type(param, "an array of messages"))?;
    if items.is_empty() {
        return Err(ApiError::invalid(param, "`messages` must not be empty"));
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, m) in items.iter().enumerate() {
        let at = format!("{param}[{i}]");
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| ApiError::invalid(&at, format!("`{at}.role` must be a string")))?;
        let content = text_of(m.get("content").unwrap_or(&Value::Null), &at)?;
        let mut flat = Map::new();
        match role {
            "system" | "developer" | "user" => {
                flat.insert(
                    "role".into(),
                    json!(if role == "user" { "user" } else { "system" }),
                );
                flat.insert("content".into(), json!(content));
            }
            "assistant" => {
                let mut content = content;
                let mut calls = Vec::new();
                if let Some(list) = m.get("tool_calls").filter(|v| !v.is_null()) {
                    let list = list.as_array().ok_or_else(|| {
                        ApiError::wrong_type(&format!("{at}.tool_calls"), "an array")
                    })?;
                    for (j, call) in list.iter().enumerate() {
                        let cat = format!("{at}.tool_calls[{j}]");
                        let function = call.get("function").ok_or_else(|| {
                            ApiError::invalid(&cat, format!("`{cat}.function` is missing"))
                        })?;
                        let name =
                            function
                                .get("name")
                                .and_then(Value::as_str)
                                .ok_or_else(|| {
                                    ApiError::invalid(
                                        &cat,
                                        format!("`{cat}.function.name` must be a string"),
                                    )
                                })?;
                        let arguments = match function.get("arguments") {
                            Some(Value::String(s)) => serde_json::from_str(s).unwrap_or(json!(s)),
                            Some(v) => v.clone(),
                            None => json!({}),
                        };
                        if prompting.native {
                            calls.push(json!({
                                "id": call.get("id"),
                                "type": "function",
                                "function": {"name": name, "arguments": arguments},
                            }));
                        } else {
                            if !content.is_empty() {
                                content.push('\n');
                            }
                            content.push_str(&tool_calls::call_text(
                                prompting.format,
                                name,
                                &arguments,
                                &nine_character_id(call.get("id")),
                            ));
                        }
                    }
                }
                flat.insert("role".into(), json!("assistant"));
                flat.insert("content".into(), json!(content));
                if !calls.is_empty() {
                    flat.insert("tool_calls".into(), json!(calls));
                }
            }
            "tool" | "function" => {
                if prompting.native {
                    flat.insert("role".into(), json!("tool"));
                    flat.insert("content".into(), json!(content));
                    if let Some(id) = m.get("tool_call_id") {
                        flat.insert("tool_call_id".into(), id.clone());
                    }
                } else {
                    flat.insert("role".into(), json!("user"));
                    flat.insert(
                        "content".into(),
                        json!(format!("<tool_response>\n{content}\n</tool_response>")),
                    );
                }
            }
            other => {
                return Err(ApiError::invalid(
                    format!("{at}.role"),
                    format!(
                    "unknown role {other:?} (expected system, developer, user, assistant or tool)"
                ),
                ))
            }
        }
        out.push(Value::Object(flat));
    }
    Ok(out)
}

/// A call id as Mistral's formats write it (nine letters and digits), from the
/// client's id.
fn nine_character_id(id: Option<&Value>) -> String {
    let mut out: String = id
        .and_then(Value::as_str)
        .unwrap_or_default()
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(9)
        .collect();
    while out.len() < 9 {
        out.push('0');
    }
    out
}

/// The prompt's text for `messages` (already flattened) with `tools` offered.
pub fn chat_prompt(
    tokenizer: &ModelTokenizer,
    mut messages: Vec<Value>,
    tools: Option<&ToolUse>,
    prompting: ToolPrompting,
) -> Result<String, ApiError> {
    let Some(template) = tokenizer.chat_template() else {
        // No template: the messages' text, one per line.
        let text: Vec<String> = messages
            .iter()
            .map(|m| m["content"].as_str().unwrap_or_default().to_string())
            .collect();
        return Ok(text.join("\n"));
    };
    let mut template_tools = None;
    if let Some(tools) = tools {
        if prompting.native {
            template_tools = Some(&tools.definitions);
        } else {
            let offer = tool_calls::tool_system_prompt(tools.format, &tools.definitions);
            match messages.first_mut() {
                Some(first) if first["role"] == "system" => {
                    let content = first["content"].as_str().unwrap_or_default().to_string();
                    first["content"] = json!(format!("{content}\n\n{offer}"));
                }
                _ => messages.insert(0, json!({"role": "system", "content": offer})),
            }
        }
    }
    let rendered = render_chat_json(
        template,
        &Value::Array(messages),
        template_tools,
        tokenizer.bos().map(|b| b.1.as_str()),
        tokenizer.eos().map(|e| e.1.as_str()),
    )
    .map_err(|e| ApiError::invalid("messages", e.to_string()))?;
    Ok(rendered)
}

/// A plain prompt's tokens (`/v1/completions`).
pub fn encode(tokenizer: &ModelTokenizer, text: &str) -> Result<Vec<u32>, ApiError> {
    let tokens = tokenizer
        .encode_prompt(text)
        .map_err(|e| ApiError::invalid("prompt", e.to_string()))?;
    if tokens.is_empty() {
        return Err(ApiError::invalid("prompt", "the prompt is empty"));
    }
    Ok(tokens)
}
