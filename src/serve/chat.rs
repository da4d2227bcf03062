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

use std::borrow::Cow;
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
use crate::decode::reasoning::ReasoningBudget;
use crate::decode::Generation;
use crate::frontend::tool_calls::{
    calls_in_progress, calls_region, content_so_far, final_content, parse_reply, split_reasoning,
    ParsedReply, Reasoning,
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
    /// The reasoning span before the reply, when the request asked for one.
    pub span: Option<Reasoning>,
}

pub(super) async fn prepare(state: &Arc<AppState>, body: Body) -> Result<Prepared, ApiError> {
    let settings = params::generation(&body, &["max_completion_tokens", "max_tokens"])?;
    let max_tokens_param = if body.get("max_completion_tokens").is_some() {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    let reasoning = params::reasoning(&body)?;
    let compile_state = Arc::clone(state);
    // Compiling a grammar and rendering a template are CPU work: off the async
    // threads.
    let (constraint, prompt, span) = tokio::task::spawn_blocking(move || {
        let s = compile_state;
        let prompting = s.tool_prompting;
        let messages = body
            .get("messages")
            .ok_or_else(|| ApiError::invalid("messages", "`messages` is required"))?;
        let flat = prompt::flatten_messages(messages, "messages", prompting)?;
        let tokenizer = s.generator.tokenizer();
        let offered = constraint::offered(&body, prompting.format)?;
        let text = prompt::chat_prompt(tokenizer, flat, offered.as_ref(), prompting)?;
        // The template's own span, unless the prompt already opened it.
        let span = reasoning.map(|_| Reasoning::for_template(tokenizer.chat_template(), &text));
        let format = body.get("response_format").map(|f| (f, "response_format"));
        let constraint =
            constraint::read(&body, format, prompting.format, &s.compiler, span.as_ref())?;
        let tokens = prompt::encode(tokenizer, &text)?;
        Ok::<_, ApiError>((constraint, tokens, span))
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))??;
    let prompt_tokens = prompt.len();
    let mut plan = state.plan(prompt, constraint.tables, settings, max_tokens_param)?;
    plan.reasoning = match (&span, reasoning.flatten()) {
        (Some(span), Some(max_tokens)) => Some(ReasoningBudget {
            open: span.open.clone(),
            close: span.close.clone(),
            max_tokens,
        }),
        _ => None,
    };
    Ok(Prepared {
        plan,
        tools: constraint.tools,
        prompt_tokens,
        span,
    })
}

async fn chat(state: Arc<AppState>, bytes: Bytes) -> Result<Response, ApiError> {
    let body = Body::parse(&bytes)?;
    let Prepared {
        plan,
        tools,
        prompt_tokens,
        span,
    } = prepare(&state, body).await?;
    let events = state.submit(&plan)?;
    let reply = Reply {
        id: fresh_id("chatcmpl-"),
        created: unix_time(),
        model: state.options.model_name.clone(),
        tools,
        span,
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
            let (reasoning, parsed, finish) = reply.read(g);
            state.metrics.count(finish);
            let mut message =
                json!({"role": "assistant", "content": parsed.content, "refusal": null});
            // A span asked for, and the format's own reasoning (harmony's).
            let reasoning: Vec<&str> = reasoning
                .into_iter()
                .chain(Some(parsed.reasoning.as_str()))
                .filter(|r| !r.is_empty())
                .collect();
            if reply.span.is_some() || !reasoning.is_empty() {
                message["reasoning_content"] = match reasoning.is_empty() {
                    true => Value::Null,
                    false => json!(reasoning.join("\n")),
                };
            }
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

/// Content and calls of a generation's reply (`text`: all of it, or what
/// follows its reasoning span), and its `finish_reason`.
pub(super) fn read_reply(
    tools: Option<&ToolUse>,
    text: &str,
    g: &Generation,
) -> (ParsedReply, &'static str) {
    let parsed = match tools {
        Some(tools) => parse_reply(tools.format, text, &tools.tools),
        None => ParsedReply {
            content: text.to_string(),
            calls: Vec::new(),
            ..Default::default()
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
    /// The reasoning span before the reply, when the request asked for one.
    span: Option<Reasoning>,
    /// Alternatives per token when logprobs were asked for.
    logprobs: Option<usize>,
    state: Arc<AppState>,
}

impl Reply {
    /// The reasoning, the content and calls after it, and the finish reason.
    fn read<'g>(&self, g: &'g Generation) -> (Option<&'g str>, ParsedReply, &'static str) {
        let (reasoning, reply) = match &self.span {
            Some(span) => split_reasoning(&g.text, span),
            None => (None, g.text.as_str()),
        };
        let (parsed, finish) = read_reply(self.tools.as_ref(), reply, g);
        (reasoning, parsed, finish)
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

/// The content of a reply written so far (`text`) that may be streamed, as text
/// that only grows: all of it without tools; with tools, what comes before a call
/// ([`content_so_far`]), and nothing more once a call has begun (`in_calls`, set
/// here: then `None`).
pub(super) fn shown_content<'t>(
    tools: Option<&ToolUse>,
    text: &'t str,
    in_calls: &mut bool,
) -> Option<Cow<'t, str>> {
    match tools {
        _ if *in_calls => None,
        Some(tools) => {
            let shown = content_so_far(tools.format, text);
            *in_calls = calls_region(tools.format, text).is_some();
            Some(shown)
        }
        None => Some(Cow::Borrowed(text)),
    }
}

/// The content a finished reply adds to what a stream sent: the rest of the text
/// (no calls), or of the content read around the calls.
pub(super) fn content_at_end<'a>(
    tools: Option<&ToolUse>,
    text: &'a str,
    parsed: &'a ParsedReply,
) -> &'a str {
    match tools {
        None => text,
        Some(tools) if parsed.calls.is_empty() => final_content(tools.format, text, parsed),
        Some(_) => &parsed.content,
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

/// The reasoning written since the last delta, as far as it is known to be
/// reasoning (a possible beginning of the close is held back), and where the
/// reply starts once the span is closed and something follows it. Without a
/// span the reply starts at once. `done`: the text is whole (what is still
/// undecided is settled as [`split_reasoning`] reads it).
fn reasoning_delta(span: Option<&Reasoning>, c: &mut ChoiceText, done: bool) -> Option<String> {
    let Some(span) = span else {
        c.reply_from = Some(0);
        return None;
    };
    if c.reply_from.is_some() {
        return None;
    }
    let text = c.text.as_str();
    let start = match (c.reasoning_from, &span.open) {
        (Some(start), _) => start,
        (None, None) => 0,
        (None, Some(open)) => {
            let lead = text.len() - text.trim_start().len();
            let close = span.close.as_str();
            if text[lead..].starts_with(open.as_str()) {
                lead + open.len()
            } else if (open.starts_with(&text[lead..])
                || span.close_alone && close.starts_with(&text[lead..]))
                && !done
            {
                return None;
            } else if span.close_alone && text[lead..].starts_with(close) {
                // The close alone: no reasoning, the reply after it.
                c.reply_from = reply_after(text, lead + close.len(), done);
                return None;
            } else {
                // The model wrote no span: all of it is the reply.
                c.reply_from = Some(0);
                return None;
            }
        }
    };
    c.reasoning_from = Some(start);
    c.reasoning_sent = c.reasoning_sent.max(start);
    let close = span.close.as_str();
    let inside = &text[start..];
    let end = match inside.find(close) {
        Some(at) => {
            c.reply_from = reply_after(text, start + at + close.len(), done);
            start + at
        }
        None if done => {
            c.reply_from = Some(text.len());
            text.len()
        }
        None => {
            let held = (1..close.len())
                .rev()
                .find(|&n| close.is_char_boundary(n) && inside.ends_with(&close[..n]))
                .unwrap_or(0);
            text.len() - held
        }
    };
    if end <= c.reasoning_sent {
        return None;
    }
    let delta = text[c.reasoning_sent..end].to_string();
    c.reasoning_sent = end;
    Some(delta)
}

/// Where the reply starts after a span's close at `after`: past the blanks
/// that follow, once something does (or the text is whole).
fn reply_after(text: &str, after: usize, done: bool) -> Option<usize> {
    let blank = text[after..].len() - text[after..].trim_start().len();
    (after + blank < text.len() || done).then_some(after + blank)
}

/// One choice's text so far in a stream.
#[derive(Default, Clone)]
struct ChoiceText {
    text: String,
    /// Where the reasoning span's text starts in `text`, once known.
    reasoning_from: Option<usize>,
    /// Bytes of `text` sent as reasoning (up to this offset).
    reasoning_sent: usize,
    /// Where the reply (after any reasoning span) starts in `text`, once known.
    reply_from: Option<usize>,
    /// Bytes of the reply sent as content.
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
                if let Some(delta) = reasoning_delta(self.reply.span.as_ref(), c, false) {
                    c.pending.clear();
                    out.push(
                        self.reply
                            .chunk(choice, json!({"reasoning_content": delta}), None),
                    );
                }
                let Some(from) = c.reply_from else {
                    return out;
                };
                let reply = &c.text[from..];
                let tools = self.reply.tools.as_ref();
                if let Some(shown) = shown_content(tools, reply, &mut c.in_calls) {
                    if shown.len() > c.sent && shown.is_char_boundary(c.sent) {
                        let text = &shown[c.sent..];
                        out.push(self.reply.content(choice, text, &mut c.pending));
                        c.sent = shown.len();
                    }
                }
                if let (true, Some(tools)) = (c.in_calls, tools) {
                    let region = calls_region(tools.format, reply).unwrap_or_default();
                    for delta in call_fragments(tools, region, &mut c.calls) {
                        out.push(self.reply.chunk(choice, delta, None));
                    }
                }
            }
            JobEvent::Done(g) => {
                let (_, parsed, finish) = self.reply.read(&g);
                self.metrics.count(finish);
                c.text.clone_from(&g.text);
                if let Some(delta) = reasoning_delta(self.reply.span.as_ref(), c, true) {
                    out.push(
                        self.reply
                            .chunk(choice, json!({"reasoning_content": delta}), None),
                    );
                }
                if !parsed.reasoning.is_empty() {
                    // The format's own reasoning messages (harmony's analysis).
                    let delta = json!({"reasoning_content": parsed.reasoning});
                    out.push(self.reply.chunk(choice, delta, None));
                }
                let reply = &g.text[c.reply_from.unwrap_or(0)..];
                let tools = self.reply.tools.as_ref();
                let content = content_at_end(tools, reply, &parsed);
                if c.sent < content.len() && content.is_char_boundary(c.sent) {
                    let text = &content[c.sent..];
                    out.push(self.reply.content(choice, text, &mut c.pending));
                }
                if let (Some(tools), false) = (tools, parsed.calls.is_empty()) {
                    // The rest of the calls begun in the stream, as written; calls
                    // the stream has not begun, whole.
                    if let Some(region) = calls_region(tools.format, reply) {
                        for delta in call_fragments(tools, region, &mut c.calls) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn think() -> Reasoning {
        Reasoning {
            open: Some("<think>".into()),
            close: "</think>".into(),
            optional: false,
            close_alone: false,
        }
    }

    /// Feeds `pieces` one at a time; the reasoning deltas and where the reply starts.
    fn stream(pieces: &[&str], done: bool) -> (Vec<String>, Option<usize>) {
        stream_span(&think(), pieces, done)
    }

    fn stream_span(span: &Reasoning, pieces: &[&str], done: bool) -> (Vec<String>, Option<usize>) {
        let mut c = ChoiceText::default();
        let mut deltas = Vec::new();
        for (i, piece) in pieces.iter().enumerate() {
            c.text.push_str(piece);
            let last = done && i + 1 == pieces.len();
            deltas.extend(reasoning_delta(Some(span), &mut c, last));
        }
        (deltas, c.reply_from)
    }

    #[test]
    fn a_close_alone_skips_the_reasoning_where_the_model_may_write_it() {
        let m3 = Reasoning {
            open: Some("<mm:think>".into()),
            close: "</mm:think>".into(),
            optional: false,
            close_alone: true,
        };
        let (deltas, from) = stream_span(&m3, &["</mm:", "think>", "\n", "Hi"], false);
        assert!(deltas.is_empty());
        assert_eq!(from, Some("</mm:think>\n".len()));
        let (deltas, from) = stream_span(&m3, &["<mm:think>a", "</mm:think>", "Hi"], false);
        assert_eq!(
            (deltas, from),
            (vec!["a".to_string()], Some("<mm:think>a</mm:think>".len()))
        );
        // Elsewhere the close alone is text of the reply.
        assert_eq!(stream(&["</think>Hi"], false), (vec![], Some(0)));
    }

    #[test]
    fn reasoning_streams_up_to_its_close_and_the_reply_after_it() {
        let (deltas, from) = stream(&["<th", "ink>a b", "</th", "ink>", "\n", "{}"], false);
        assert_eq!(deltas, ["a b"]);
        assert_eq!(from, Some("<think>a b</think>\n".len()));
        // A possible start of the close is held back until it is known.
        let (deltas, from) = stream(&["<think>x<", "y"], false);
        assert_eq!(deltas, ["x", "<y"]);
        assert_eq!(from, None);
    }

    #[test]
    fn without_a_span_everything_is_the_reply() {
        assert_eq!(stream(&["{\"a\"", ": 1}"], false), (vec![], Some(0)));
        let (deltas, from) = stream(&["<thi"], true);
        assert_eq!((deltas, from), (vec![], Some(0)));
        // A span the budget never closed: all reasoning, the reply empty.
        let (deltas, from) = stream(&["<think>x"], true);
        assert_eq!((deltas, from), (vec!["x".to_string()], Some(8)));
    }
}
