//! `POST /v1/responses`: OpenAI's newer API, read into the chat shape (`input`
//! and `instructions` as messages, `text.format` as the response format, flat
//! function tools as chat tools) and answered with `output` items: a message
//! with `output_text`, and `function_call`s.
//!
//! Streamed (`stream: true`), it sends the typed events the `openai` SDK's
//! `responses.stream` helper assembles: `response.created`, the message's item,
//! content part and text deltas as they are written (text that may begin a tool
//! call held back, as in chat), then each call's item with its arguments, and
//! `response.completed` (or `response.incomplete`) with the whole response.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};

use super::chat::{content_at_end, prepare, read_reply, shown_content, unix_time, Prepared};
use super::constraint::ToolUse;
use super::error::ApiError;
use super::params::{fresh_id, Body};
use super::run;
use super::scheduler::JobEvent;
use super::stream::{self, Chunks};
use super::AppState;
use crate::decode::Generation;
use crate::frontend::tool_calls::ParsedCall;

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
        "stream",
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
    // (`reasoning` is not read into the chat shape: no span here.)
    let Prepared {
        plan,
        tools,
        prompt_tokens,
        span: _,
    } = prepare(&state, body).await?;
    let events = state.submit(&plan)?;
    let head = Head {
        id: fresh_id("resp_"),
        created_at: unix_time(),
        model: state.options.model_name.clone(),
        prompt_tokens,
    };
    if plan.settings.stream {
        let chunks = StreamEvents {
            head,
            tools,
            metrics: Arc::clone(&state.metrics),
            sequence: 0,
            text: String::new(),
            message: None,
            shown: String::new(),
            sent: 0,
            in_calls: false,
            output: Vec::new(),
            finish: "stop",
        };
        return Ok(stream::respond(events, 1, chunks));
    }
    let generations = run::collect(events, plan.settings.n).await?;
    let g = &generations[0];
    let (parsed, finish) = read_reply(tools.as_ref(), &g.text, g);
    state.metrics.count(finish);
    let mut output = Vec::new();
    if !parsed.content.is_empty() || parsed.calls.is_empty() {
        output.push(message_item(
            &fresh_id("msg_"),
            &parsed.content,
            "completed",
        ));
    }
    for call in &parsed.calls {
        output.push(call_item(
            &fresh_id("fc_"),
            call,
            &call.arguments,
            "completed",
        ));
    }
    Ok(Json(head.response(status(finish), output, Some(g))).into_response())
}

/// What the response object and every event share.
struct Head {
    id: String,
    created_at: u64,
    model: String,
    prompt_tokens: usize,
}

impl Head {
    /// The response object; `usage` once the generation is done.
    fn response(&self, status: &str, output: Vec<Value>, done: Option<&Generation>) -> Value {
        let usage = done.map(|g| {
            let completion = g.tokens.len();
            json!({
                "input_tokens": self.prompt_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": completion,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": self.prompt_tokens + completion,
            })
        });
        json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "model": self.model,
            "status": status,
            "incomplete_details": if status == "incomplete" { json!({"reason": "max_output_tokens"}) } else { Value::Null },
            "output": output,
            "parallel_tool_calls": true,
            "tool_choice": "auto",
            "tools": [],
            "usage": usage,
        })
    }
}

fn status(finish: &str) -> &'static str {
    if finish == "length" {
        "incomplete"
    } else {
        "completed"
    }
}

fn message_item(id: &str, text: &str, status: &str) -> Value {
    let content = if status == "in_progress" {
        json!([])
    } else {
        json!([text_part(text)])
    };
    json!({"type": "message", "id": id, "status": status, "role": "assistant", "content": content})
}

fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": []})
}

fn call_item(id: &str, call: &ParsedCall, arguments: &str, status: &str) -> Value {
    json!({
        "type": "function_call",
        "id": id,
        "call_id": call.id.clone().unwrap_or_else(|| format!("call_{}", &id[3..])),
        "name": call.name,
        "arguments": arguments,
        "status": status,
    })
}

/// The typed events of one streamed response.
struct StreamEvents {
    head: Head,
    tools: Option<ToolUse>,
    metrics: Arc<super::metrics::Metrics>,
    /// The next event's `sequence_number`.
    sequence: u64,
    /// Everything written so far.
    text: String,
    /// The message item's id, once it is open.
    message: Option<String>,
    /// The message's text sent so far.
    shown: String,
    /// Bytes of the content so far that went out (`shown`'s length).
    sent: usize,
    /// A call has begun: no more text until the end.
    in_calls: bool,
    /// Finished output items, for the final response.
    output: Vec<Value>,
    finish: &'static str,
}

impl StreamEvents {
    fn event(&mut self, kind: &str, fields: Value) -> Value {
        let mut event = json!({"type": kind, "sequence_number": self.sequence});
        self.sequence += 1;
        if let (Value::Object(event), Value::Object(fields)) = (&mut event, fields) {
            event.extend(fields);
        }
        event
    }

    /// Opens the message item (output 0) and its text part.
    fn open_message(&mut self, out: &mut Vec<Value>) -> String {
        if let Some(id) = &self.message {
            return id.clone();
        }
        let id = fresh_id("msg_");
        self.message = Some(id.clone());
        let item = message_item(&id, "", "in_progress");
        out.push(self.event(
            "response.output_item.added",
            json!({"output_index": 0, "item": item}),
        ));
        out.push(self.event(
            "response.content_part.added",
            json!({"item_id": id, "output_index": 0, "content_index": 0, "part": text_part("")}),
        ));
        id
    }

    /// Sends what `content` (the content so far) adds to what went out.
    fn text_delta(&mut self, out: &mut Vec<Value>, content: &str) {
        if let Some(fresh) = content.get(self.sent..).filter(|f| !f.is_empty()) {
            self.send_text(out, fresh.to_string());
        }
    }

    fn send_text(&mut self, out: &mut Vec<Value>, delta: String) {
        let id = self.open_message(out);
        self.sent += delta.len();
        self.shown.push_str(&delta);
        out.push(self.event(
            "response.output_text.delta",
            json!({"item_id": id, "output_index": 0, "content_index": 0, "delta": delta, "logprobs": []}),
        ));
    }
}

impl Chunks for StreamEvents {
    fn typed_events(&self) -> bool {
        true
    }

    fn on_event(&mut self, _choice: usize, event: JobEvent) -> Vec<Value> {
        let mut out = Vec::new();
        if self.sequence == 0 {
            let response = self.head.response("in_progress", Vec::new(), None);
            out.push(self.event("response.created", json!({"response": response})));
            out.push(self.event("response.in_progress", json!({"response": response})));
        }
        match event {
            JobEvent::Text(piece, _) => {
                self.text.push_str(&piece);
                let tools = self.tools.as_ref();
                let shown = shown_content(tools, &self.text, &mut self.in_calls);
                let fresh = shown.and_then(|s| Some(s.get(self.sent..)?.to_string()));
                if let Some(fresh) = fresh.filter(|f| !f.is_empty()) {
                    self.send_text(&mut out, fresh);
                }
            }
            JobEvent::Done(g) => {
                let (parsed, finish) = read_reply(self.tools.as_ref(), &g.text, &g);
                self.metrics.count(finish);
                self.finish = finish;
                self.text = g.text.clone();
                let content = content_at_end(self.tools.as_ref(), &g.text, &parsed);
                self.text_delta(&mut out, content);
                if self.message.is_some() || parsed.calls.is_empty() {
                    let id = self.open_message(&mut out);
                    let text = self.shown.clone();
                    out.push(self.event(
                        "response.output_text.done",
                        json!({"item_id": id, "output_index": 0, "content_index": 0, "text": text, "logprobs": []}),
                    ));
                    out.push(self.event(
                        "response.content_part.done",
                        json!({"item_id": id, "output_index": 0, "content_index": 0, "part": text_part(&text)}),
                    ));
                    let item = message_item(&id, &text, "completed");
                    out.push(self.event(
                        "response.output_item.done",
                        json!({"output_index": 0, "item": item}),
                    ));
                    self.output.push(item);
                }
                for call in &parsed.calls {
                    let index = self.output.len();
                    let id = fresh_id("fc_");
                    let added = call_item(&id, call, "", "in_progress");
                    out.push(self.event(
                        "response.output_item.added",
                        json!({"output_index": index, "item": added}),
                    ));
                    out.push(self.event(
                        "response.function_call_arguments.delta",
                        json!({"item_id": id, "output_index": index, "delta": call.arguments}),
                    ));
                    out.push(self.event(
                        "response.function_call_arguments.done",
                        json!({"item_id": id, "output_index": index, "arguments": call.arguments}),
                    ));
                    let done = call_item(&id, call, &call.arguments, "completed");
                    out.push(self.event(
                        "response.output_item.done",
                        json!({"output_index": index, "item": done}),
                    ));
                    self.output.push(done);
                }
            }
        }
        out
    }

    fn at_end(&mut self, generations: &[Generation]) -> Vec<Value> {
        let status = status(self.finish);
        let output = std::mem::take(&mut self.output);
        let response = self.head.response(status, output, generations.first());
        let kind = if status == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        vec![self.event(kind, json!({"response": response}))]
    }
}
