//! `POST /v1/chat/completions`: messages through the chat template, a reply
//! constrained by `response_format`, `grammar` or `tools`, read back into
//! content and `tool_calls`, whole or streamed.
//!
//! Streamed tool calls follow the shape the `openai` SDK's helpers assemble:
//! each call's first chunk carries its `index`, `id`, `type` and name, then its
//! arguments follow in fragments as the model writes them (as written,
//! whitespace included; Mistral Nemo's calls, whose ids follow the arguments,
//! come whole at the end). Content before a call streams as it is written; text
//! that may begin a call is held back until it is known not to.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::constraint::{self, ToolUse};
use super::error::ApiError;
use super::params::{self, fresh_id, Body};
use super::prompt;
use super::run::{self, chat_logprobs, finish_reason, logprob_entries, usage, Plan};
use super::scheduler::JobEvent;
use super::stream::{self, Chunks};
use super::AppState;
use crate::decode::generate::TokenLogprobs;
use crate::decode::Generation;
use crate::frontend::tool_calls::{
    calls_in_progress, content_prefix_len, parse_reply, ParsedReply,
};

pub async fn handle(State(state): State<Arc<AppState>>, bytes: Bytes) -> Response {
    match chat(Arc::clone(&state), bytes).await {
        Ok(response) => response,
        Err(e) => state.refuse(e),
    }
}

/// A chat-shaped request, checked, compiled and planned (also for
/// `/v1/responses`, which is read into this shape).
pub(super) struct Prepared {
    pub plan: Plan,
    pub tools: Option<ToolUse>,
    pub prompt_tokens: usize,
}

pub(super) async fn prepare(state: &Arc<AppState>, body: Body) -> Result<Prepared, ApiError> {
    let settings = params::generation(&body, &["max_completion_tokens", "max_tokens"])?;
    let max_tokens_param = if body.get("max_completion_tokens").is_some() {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    let compile_state = Arc::clone(state);
    // Compiling a grammar and rendering a template are CPU work: off the async
    // threads.
    let (constraint, prompt) = tokio::task::spawn_blocking(move || {
        let s = compile_state;
        let prompting = s.tool_prompting;
        let messages = body
            .get("messages")
            .ok_or_else(|| ApiError::invalid("messages", "`messages` is required"))?;
        let flat = prompt::flatten_messages(messages, "messages", prompting)?;
        let format = body.get("response_format").map(|f| (f, "response_format"));
        let constraint = constraint::read(&body, format, prompting.format, &s.compiler)?;
        let tokens = prompt::chat_prompt(
            s.generator.tokenizer(),
            flat,
            constraint.offered.as_ref(),
            prompting,
        )?;
        Ok::<_, ApiError>((constraint, tokens))
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))??;
    let prompt_tokens = prompt.len();
    let plan = state.plan(prompt, constraint.tables, settings, max_tokens_param)?;
    Ok(Prepared {
        plan,
        tools: constraint.tools,
        prompt_tokens,
    })
}

async fn chat(state: Arc<AppState>, bytes: Bytes) -> Result<Response, ApiError> {
    let body = Body::parse(&bytes)?;
    let Prepared {
        plan,
        tools,
        prompt_tokens,
    } = prepare(&state, body).await?;
    let events = state.submit(&plan)?;
    let reply = Reply {
        id: fresh_id("chatcmpl-"),
        created: unix_time(),
        model: state.options.model_name.clone(),
        tools,
        logprobs: plan.settings.logprobs,
        state: Arc::clone(&state),
    };
    let n = plan.settings.n;
    if plan.settings.stream {
        let chunks = StreamChunks {
            reply,
            choices: vec![ChoiceText::default(); n],
            include_usage: plan.settings.include_usage,
            prompt_tokens,
            metrics: Arc::clone(&state.metrics),
        };
        return Ok(stream::respond(events, n, chunks));
    }
    let generations = run::collect(events, n).await?;
    let vocab = state.generator.tokenizer().vocab();
    let choices: Vec<Value> = generations
        .iter()
        .enumerate()
        .map(|(index, g)| {
            let (parsed, finish) = reply.read(g);
            state.metrics.count(finish);
            let mut message =
                json!({"role": "assistant", "content": parsed.content, "refusal": null});
            if !parsed.calls.is_empty() {
                if parsed.content.is_empty() {
                    message["content"] = Value::Null;
                }
                message["tool_calls"] = json!(reply.tool_calls(&parsed));
            }
            json!({
                "index": index,
                "message": message,
                "logprobs": plan.settings.logprobs.map(|k| chat_logprobs(g, k, vocab)),
                "finish_reason": finish,
            })
        })
        .collect();
    Ok(Json(json!({
        "id": reply.id,
        "object": "chat.completion",
        "created": reply.created,
        "model": reply.model,
        "choices": choices,
        "usage": usage(prompt_tokens, &generations),
    }))
    .into_response())
}

pub fn unix_time() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Content and calls of a generation, and its `finish_reason`.
pub(super) fn read_reply(tools: Option<&ToolUse>, g: &Generation) -> (ParsedReply, &'static str) {
    let parsed = match tools {
        Some(tools) => parse_reply(tools.format, &g.text, &tools.tools),
        None => ParsedReply {
            content: g.text.clone(),
            calls: Vec::new(),
        },
    };
    let finish = if parsed.calls.is_empty() {
        finish_reason(g)
    } else {
        "tool_calls"
    };
    (parsed, finish)
}

/// What every chunk and the whole answer share.
struct Reply {
    id: String,
    created: u64,
    model: String,
    tools: Option<ToolUse>,
    /// Alternatives per token when logprobs were asked for.
    logprobs: Option<usize>,
    state: Arc<AppState>,
}

impl Reply {
    fn read(&self, g: &Generation) -> (ParsedReply, &'static str) {
        read_reply(self.tools.as_ref(), g)
    }

    fn tool_calls(&self, parsed: &ParsedReply) -> Vec<Value> {
        parsed
            .calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id.clone().unwrap_or_else(|| fresh_id("call_")),
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                })
            })
            .collect()
    }

    fn chunk(&self, choice: usize, delta: Value, finish: Option<&str>) -> Value {
        self.chunk_with(choice, delta, Value::Null, finish)
    }

    /// A content chunk, carrying the logprobs of the tokens `pending` holds (when
    /// asked for), which it empties.
    fn content(&self, choice: usize, text: &str, pending: &mut Vec<TokenLogprobs>) -> Value {
        let logprobs = match self.logprobs {
            Some(top) => {
                let vocab = self.state.generator.tokenizer().vocab();
                json!({"content": logprob_entries(pending, top, vocab)})
            }
            None => Value::Null,
        };
        pending.clear();
        self.chunk_with(choice, json!({"content": text}), logprobs, None)
    }

    fn chunk_with(
        &self,
        choice: usize,
        delta: Value,
        logprobs: Value,
        finish: Option<&str>,
    ) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": choice, "delta": delta, "logprobs": logprobs, "finish_reason": finish}],
        })
    }
}

/// How far a reply written so far (`text`, of which `sent` bytes went out) may be
/// streamed as content: all of it without tools; with tools, up to where a call may
/// begin, and no further once one has (`in_calls`, set here).
pub(super) fn content_end(
    tools: Option<&ToolUse>,
    text: &str,
    sent: usize,
    in_calls: &mut bool,
) -> usize {
    match tools {
        _ if *in_calls => sent,
        Some(tools) => {
            let end = content_prefix_len(tools.format, text);
            *in_calls = text[end..].starts_with(tools.format.trigger());
            end
        }
        None => text.len(),
    }
}

/// The `delta`s that bring the calls of `region` (the reply from its first call
/// on) up to date: a head (index, id, name) for each call newly named, then the
/// arguments written since `sent` recorded them.
fn call_fragments(tools: &ToolUse, region: &str, sent: &mut Vec<(String, usize)>) -> Vec<Value> {
    let mut out = Vec::new();
    let calls = calls_in_progress(tools.format, region, &tools.tools);
    for (index, call) in calls.into_iter().enumerate() {
        if index == sent.len() {
            let id = call.id.map_or_else(|| fresh_id("call_"), str::to_string);
            out.push(json!({"tool_calls": [{
                "index": index,
                "id": id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]}));
            sent.push((id, 0));
        }
        let done = &mut sent[index].1;
        if call.arguments.len() > *done {
            out.push(json!({"tool_calls": [{
                "index": index,
                "function": {"arguments": &call.arguments[*done..]},
            }]}));
            *done = call.arguments.len();
        }
    }
    out
}

/// One choice's text so far in a stream.
#[derive(Default, Clone)]
struct ChoiceText {
    text: String,
    /// Bytes of `text` sent as content.
    sent: usize,
    started: bool,
    /// A call has begun: no more content until the end.
    in_calls: bool,
    /// Per call begun in the stream: its id, and bytes of its arguments sent.
    calls: Vec<(String, usize)>,
    /// Logprobs of tokens whose text has not been sent as content yet.
    pending: Vec<TokenLogprobs>,
}

struct StreamChunks {
    reply: Reply,
    choices: Vec<ChoiceText>,
    include_usage: bool,
    prompt_tokens: usize,
    metrics: Arc<super::metrics::Metrics>,
}

impl Chunks for StreamChunks {
    fn on_event(&mut self, choice: usize, event: JobEvent) -> Vec<Value> {
        let mut out = Vec::new();
        let c = &mut self.choices[choice];
        if !c.started {
            c.started = true;
            out.push(
                self.reply
                    .chunk(choice, json!({"role": "assistant", "content": ""}), None),
            );
        }
        match event {
            JobEvent::Text(piece, logprobs) => {
                c.text.push_str(&piece);
                c.pending.extend(logprobs);
                let safe = content_end(self.reply.tools.as_ref(), &c.text, c.sent, &mut c.in_calls);
                if safe > c.sent {
                    let text = &c.text[c.sent..safe];
                    out.push(self.reply.content(choice, text, &mut c.pending));
                    c.sent = safe;
                }
                if let (true, Some(tools)) = (c.in_calls, &self.reply.tools) {
                    for delta in call_fragments(tools, &c.text[c.sent..], &mut c.calls) {
                        out.push(self.reply.chunk(choice, delta, None));
                    }
                }
            }
            JobEvent::Done(g) => {
                let (parsed, finish) = self.reply.read(&g);
                self.metrics.count(finish);
                if parsed.calls.is_empty() {
                    if c.sent < g.text.len() && g.text.is_char_boundary(c.sent) {
                        let text = &g.text[c.sent..];
                        out.push(self.reply.content(choice, text, &mut c.pending));
                    }
                } else {
                    // The rest of the calls begun in the stream, as written; calls
                    // the stream has not begun, whole.
                    if let (Some(tools), true) =
                        (&self.reply.tools, g.text.is_char_boundary(c.sent))
                    {
                        for delta in call_fragments(tools, &g.text[c.sent..], &mut c.calls) {
                            out.push(self.reply.chunk(choice, delta, None));
                        }
                    }
                    let calls = self.reply.tool_calls(&parsed);
                    for (index, call) in calls.into_iter().enumerate().skip(c.calls.len()) {
                        let head = json!({"tool_calls": [{
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }]});
                        out.push(self.reply.chunk(choice, head, None));
                        let arguments = json!({"tool_calls": [{
                            "index": index,
                            "function": {"arguments": call["function"]["arguments"]},
                        }]});
                        out.push(self.reply.chunk(choice, arguments, None));
                    }
                }
                out.push(self.reply.chunk(choice, json!({}), Some(finish)));
            }
        }
        out
    }

    fn at_end(&mut self, generations: &[Generation]) -> Vec<Value> {
        if !self.include_usage {
            return Vec::new();
        }
        vec![json!({
            "id": self.reply.id,
            "object": "chat.completion.chunk",
            "created": self.reply.created,
            "model": self.reply.model,
            "choices": [],
            "usage": usage(self.prompt_tokens, generations),
        })]
    }
}
