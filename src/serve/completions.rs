//! `POST /v1/completions`: a raw prompt (no chat template), the same sampling
//! settings and constraints (`grammar`, and `response_format` as an extra).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::chat::unix_time;
use super::constraint;
use super::error::ApiError;
use super::params::{self, fresh_id, Body};
use super::prompt;
use super::run::{self, completion_logprobs, finish_reason, usage};
use super::scheduler::JobEvent;
use super::stream::{self, Chunks};
use super::AppState;
use crate::decode::Generation;

pub async fn handle(State(state): State<Arc<AppState>>, bytes: Bytes) -> Response {
    match completion(Arc::clone(&state), bytes).await {
        Ok(response) => response,
        Err(e) => state.refuse(e),
    }
}

async fn completion(state: Arc<AppState>, bytes: Bytes) -> Result<Response, ApiError> {
    let body = Body::parse(&bytes)?;
    let settings = params::generation(&body, &["max_tokens"])?;
    let text = match body.get("prompt") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) if items.len() == 1 && items[0].is_string() => {
            items[0].as_str().unwrap_or_default().to_string()
        }
        Some(Value::Array(_)) => {
            return Err(ApiError::invalid(
                "prompt",
                "one prompt per request (a string)",
            ))
        }
        Some(_) => return Err(ApiError::wrong_type("prompt", "a string")),
        None => return Err(ApiError::invalid("prompt", "`prompt` is required")),
    };
    let compile_state = Arc::clone(&state);
    let (tables, tokens) = tokio::task::spawn_blocking(move || {
        let s = compile_state;
        let format = body.get("response_format").map(|f| (f, "response_format"));
        if body.get("tools").is_some() {
            return Err(ApiError::invalid(
                "tools",
                "tools need /v1/chat/completions",
            ));
        }
        let c = constraint::read(&body, format, s.tool_prompting.format, &s.compiler, None)?;
        let tokens = prompt::encode(s.generator.tokenizer(), &text)?;
        Ok::<_, ApiError>((c.tables, tokens))
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))??;
    let prompt_tokens = tokens.len();
    let plan = state.plan(tokens, tables, settings, "max_tokens")?;
    let events = state.submit(&plan)?;
    let id = fresh_id("cmpl-");
    let created = unix_time();
    let model = state.options.model_name.clone();
    let n = plan.settings.n;
    if plan.settings.stream {
        let chunks = CompletionChunks {
            id,
            created,
            model,
            include_usage: plan.settings.include_usage,
            prompt_tokens,
            logprobs: plan.settings.logprobs,
            offsets: vec![0; n],
            state: Arc::clone(&state),
        };
        return Ok(stream::respond(events, n, chunks));
    }
    let generations = run::collect(events, n).await?;
    let vocab = state.generator.tokenizer().vocab();
    let choices: Vec<Value> = generations
        .iter()
        .enumerate()
        .map(|(index, g)| {
            state.metrics.count(finish_reason(g));
            let logprobs = plan
                .settings
                .logprobs
                .map(|top| completion_logprobs(&g.logprobs, top, vocab, &mut 0));
            json!({"index": index, "text": g.text, "logprobs": logprobs, "finish_reason": finish_reason(g)})
        })
        .collect();
    Ok(Json(json!({
        "id": id,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": choices,
        "usage": usage(prompt_tokens, &generations),
    }))
    .into_response())
}

struct CompletionChunks {
    id: String,
    created: u64,
    model: String,
    include_usage: bool,
    prompt_tokens: usize,
    /// Alternatives per token when logprobs were asked for.
    logprobs: Option<usize>,
    /// Per choice, bytes of text sent (the next token's `text_offset`).
    offsets: Vec<usize>,
    state: Arc<AppState>,
}

impl CompletionChunks {
    fn chunk(&self, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        })
    }
}

impl Chunks for CompletionChunks {
    fn on_event(&mut self, choice: usize, event: JobEvent) -> Vec<Value> {
        let (text, logprobs, finish) = match event {
            JobEvent::Text(text, tokens) => {
                let logprobs = match self.logprobs {
                    Some(top) => {
                        let vocab = self.state.generator.tokenizer().vocab();
                        completion_logprobs(&tokens, top, vocab, &mut self.offsets[choice])
                    }
                    None => Value::Null,
                };
                (text, logprobs, Value::Null)
            }
            JobEvent::Done(g) => {
                self.state.metrics.count(finish_reason(&g));
                (String::new(), Value::Null, json!(finish_reason(&g)))
            }
        };
        vec![self.chunk(json!([{
            "index": choice, "text": text, "logprobs": logprobs, "finish_reason": finish,
        }]))]
    }

    fn at_end(&mut self, generations: &[Generation]) -> Vec<Value> {
        if !self.include_usage {
            return Vec::new();
        }
        let mut last = self.chunk(json!([]));
        last["usage"] = usage(self.prompt_tokens, generations);
        vec![last]
    }
}
