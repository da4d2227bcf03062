//! `POST /v1/responses` (non-streaming): OpenAI's newer API, read into the chat
//! shape (`input` and `instructions` as messages, `text.format` as the
//! response format, flat function tools as chat tools) and answered with
//! `output` items: a message with `output_text`, and `function_call`s.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use super::chat::{prepare, read_reply, unix_time, Prepared};
use super::error::ApiError;
use super::params::{fresh_id, Body};
use super::run;
use super::AppState;

pub async fn handle(State(state): State<Arc<AppState>>, bytes: Bytes) -> Response {
    match respond(Arc::clone(&state), bytes).await {
        Ok(response) => response,
        Err(e) => state.refuse(e),
    }
}

/// `input` items as chat messages.
fn messages(body: &Body) -> Result<Vec<Value>, ApiError> {
    let mut out = Vec::new();
    if let Some(instructions) = body.str("instructions")? {
        out.push(json!({"role": "system", "content": instructions}));
    }
    match body.get("input") {
        Some(Value::String(text)) => out.push(json!({"role": "user", "content": text})),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let kind = item
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("message");
                match kind {
                    "message" => out.push(json!({
                        "role": item.get("role").cloned().unwrap_or(json!("user")),
                        "content": item.get("content").cloned().unwrap_or(Value::Null),
                    })),
                    "function_call" => out.push(json!({
                        "role": "assistant",
                        "content": null,
                        "tool_calls": [{
                            "id": item.get("call_id"),
                            "type": "function",
                            "function": {"name": item.get("name"), "arguments": item.get("arguments")},
                        }],
                    })),
                    "function_call_output" => out.push(json!({
                        "role": "tool",
                        "tool_call_id": item.get("call_id"),
                        "content": item.get("output").cloned().unwrap_or(Value::Null),
                    })),
                    other => {
                        return Err(ApiError::invalid(
                            format!("input[{i}].type"),
                            format!("unsupported input item type {other:?}"),
                        ))
                    }
                }
            }
        }
        Some(_) => {
            return Err(ApiError::wrong_type(
                "input",
                "a string or an array of items",
            ))
        }
        None => return Err(ApiError::invalid("input", "`input` is required")),
    }
    Ok(out)
}

/// The request in the chat shape.
fn as_chat(body: &Body) -> Result<Body, ApiError> {
    if body.bool("stream")?.unwrap_or(false) {
        return Err(ApiError::invalid(
            "stream",
            "streaming /v1/responses is not supported yet",
        ));
    }
    let mut chat = Map::new();
    chat.insert("messages".into(), Value::Array(messages(body)?));
    for field in [
        "temperature",
        "top_p",
        "seed",
        "top_k",
        "min_p",
        "preset",
        "grammar",
        "tool_choice",
        "parallel_tool_calls",
    ] {
        if let Some(v) = body.get(field) {
            chat.insert(field.into(), v.clone());
        }
    }
    if let Some(v) = body.get("max_output_tokens") {
        chat.insert("max_completion_tokens".into(), v.clone());
    }
    if let Some(format) = body.get("text").and_then(|t| t.get("format")) {
        chat.insert("response_format".into(), format.clone());
    }
    if let Some(tools) = body.get("tools") {
        let tools = tools
            .as_array()
            .ok_or_else(|| ApiError::wrong_type("tools", "an array"))?
            .iter()
            .map(|t| match t.get("function") {
                Some(_) => t.clone(),
                None => json!({"type": "function", "function": {
                    "name": t.get("name"),
                    "description": t.get("description"),
                    "parameters": t.get("parameters").cloned().unwrap_or(json!({})),
                }}),
            })
            .collect();
        chat.insert("tools".into(), Value::Array(tools));
    }
    if let Some(Value::Object(choice)) = body.get("tool_choice") {
        // Responses names the function flat: `{"type": "function", "name": ...}`.
        if let Some(name) = choice.get("name") {
            chat.insert(
                "tool_choice".into(),
                json!({"type": "function", "function": {"name": name}}),
            );
        }
    }
    Ok(Body::from_map(chat))
}

async fn respond(state: Arc<AppState>, bytes: Bytes) -> Result<Response, ApiError> {
    let body = as_chat(&Body::parse(&bytes)?)?;
    let Prepared {
        plan,
        tools,
        prompt_tokens,
    } = prepare(&state, body).await?;
    let events = state.submit(&plan)?;
    let generations = run::collect(events, plan.settings.n).await?;
    let g = &generations[0];
    let (parsed, finish) = read_reply(tools.as_ref(), g);
    state.metrics.count(finish);
    let mut output = Vec::new();
    if !parsed.content.is_empty() || parsed.calls.is_empty() {
        output.push(json!({
            "type": "message",
            "id": fresh_id("msg_"),
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": parsed.content, "annotations": []}],
        }));
    }
    for call in &parsed.calls {
        output.push(json!({
            "type": "function_call",
            "id": fresh_id("fc_"),
            "call_id": call.id.clone().unwrap_or_else(|| fresh_id("call_")),
            "name": call.name,
            "arguments": call.arguments,
            "status": "completed",
        }));
    }
    let completion = g.tokens.len();
    let status = if finish == "length" {
        "incomplete"
    } else {
        "completed"
    };
    Ok(Json(json!({
        "id": fresh_id("resp_"),
        "object": "response",
        "created_at": unix_time(),
        "model": state.options.model_name,
        "status": status,
        "incomplete_details": if status == "incomplete" { json!({"reason": "max_output_tokens"}) } else { Value::Null },
        "output": output,
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt_tokens + completion,
        },
    }))
    .into_response())
}
