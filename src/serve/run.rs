//! From a checked request to jobs on the scheduler and back: the context check,
//! the sampler's own validation (before anything is queued), one job per choice,
//! and collecting finished choices for the non-streaming answers.

use std::sync::Arc;

use super::error::ApiError;
use super::params;
use super::scheduler::{job_channel, EventReceiver, Job, JobEvent};
use super::AppState;
use crate::decode::reasoning::ReasoningBudget;
use crate::decode::{FinishReason, Generation, Request};
use crate::matcher::StopPolicy;
use crate::sampling::{Sampler, SamplingError};
use crate::tables::TokenTables;

/// A request ready to queue.
pub struct Plan {
    pub prompt: Vec<u32>,
    pub tables: Option<Arc<TokenTables>>,
    pub settings: params::Generation,
    pub max_tokens: usize,
    /// The reasoning span's budget, when the request gave one.
    pub reasoning: Option<ReasoningBudget>,
}

/// The sampler's complaint, naming the request field.
fn sampling_error(e: SamplingError) -> ApiError {
    match &e {
        SamplingError::InvalidParameter { name, .. } => ApiError::invalid(*name, e.to_string()),
        _ => ApiError::invalid("body", e.to_string()),
    }
}

impl AppState {
    /// Checks the budget against the context and the sampling settings.
    pub fn plan(
        &self,
        prompt: Vec<u32>,
        tables: Option<Arc<TokenTables>>,
        settings: params::Generation,
        max_tokens_param: &str,
    ) -> Result<Plan, ApiError> {
        let ctx = self.options.ctx;
        if prompt.len() >= ctx {
            return Err(ApiError::invalid(
                "messages",
                format!(
                    "the prompt is {} tokens; the context holds {ctx}",
                    prompt.len()
                ),
            )
            .with_code("context_length_exceeded"));
        }
        let room = ctx - prompt.len();
        let max_tokens = match settings.max_tokens {
            Some(m) if m > room => {
                return Err(ApiError::invalid(
                    max_tokens_param,
                    format!(
                        "prompt ({} tokens) + {max_tokens_param} ({m}) exceeds the context ({ctx} tokens)",
                        prompt.len()
                    ),
                )
                .with_code("context_length_exceeded"))
            }
            Some(m) => m,
            None => room,
        };
        // As the decode loop will run it: with the model's EOS (min_tokens masks it).
        let mut check = settings.sampling.clone();
        check.max_tokens = Some(max_tokens);
        let mut eos = check.eos_token_ids.take().unwrap_or_default();
        eos.extend(self.generator.tokenizer().vocab().eos_ids());
        check.eos_token_ids = Some(eos);
        Sampler::from_config(&check).map_err(sampling_error)?;
        Ok(Plan {
            prompt,
            tables,
            settings,
            max_tokens,
            reasoning: None,
        })
    }

    /// Queues one job per choice; their events arrive tagged with the choice.
    pub fn submit(&self, plan: &Plan) -> Result<EventReceiver, ApiError> {
        let (events, receiver) = job_channel();
        let jobs = (0..plan.settings.n)
            .map(|choice| {
                let mut sampling = plan.settings.sampling.clone();
                sampling.seed = Some(plan.settings.seed.wrapping_add(choice as u64));
                Job {
                    request: Request {
                        prompt: plan.prompt.clone(),
                        grammar: plan.tables.clone(),
                        stop_policy: StopPolicy::Stop,
                        sampling,
                        max_tokens: plan.max_tokens,
                        jump_forward: true,
                        logprobs: plan.settings.logprobs.map_or(0, |k| k.max(1)),
                        trace: false,
                        budget_steering: true,
                        reasoning: plan.reasoning.clone(),
                    },
                    choice,
                    events: events.clone(),
                }
            })
            .collect();
        if let Err(e) = self.scheduler.submit(jobs) {
            self.metrics.count(&e.status.as_u16().to_string());
            return Err(e);
        }
        Ok(receiver)
    }
}

/// Waits for every choice to finish; in choice order.
pub async fn collect(mut events: EventReceiver, n: usize) -> Result<Vec<Generation>, ApiError> {
    let mut done: Vec<Option<Generation>> = (0..n).map(|_| None).collect();
    let mut left = n;
    while left > 0 {
        match events.recv().await {
            Some((choice, JobEvent::Done(g))) => {
                done[choice] = Some(*g);
                left -= 1;
            }
            Some((_, JobEvent::Text(..))) => {}
            None => return Err(ApiError::internal("the decode thread dropped a request")),
        }
    }
    let generations: Vec<Generation> = done.into_iter().flatten().collect();
    if let Some(e) = generations.iter().find_map(|g| g.error.clone()) {
        return Err(ApiError::internal(format!("generation failed: {e}")));
    }
    Ok(generations)
}

/// OpenAI's `finish_reason` for a generation (`tool_calls` decided by the caller).
/// An output budget steering closed is `length`: valid and complete, but ended
/// by the budget, not where the model would have ended it.
pub fn finish_reason(g: &Generation) -> &'static str {
    match g.finish_reason {
        FinishReason::Stop if g.timings.steered => "length",
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::Error => "error",
    }
}

/// `usage` over the choices (the prompt counted once).
pub fn usage(prompt_tokens: usize, generations: &[Generation]) -> serde_json::Value {
    let completion: usize = generations.iter().map(|g| g.tokens.len()).sum();
    let mut usage = serde_json::json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion,
        // The prompt's tokens whose rows the prefix cache held.
        "prompt_tokens_details": {"cached_tokens": generations
            .iter()
            .map(|g| g.timings.cached_prompt_tokens)
            .max()
            .unwrap_or(0)},
    });
    // Counted where the request gave the reasoning span a budget.
    if generations.iter().any(|g| g.reasoning_tokens.is_some()) {
        let reasoning: usize = generations.iter().filter_map(|g| g.reasoning_tokens).sum();
        usage["completion_tokens_details"] = serde_json::json!({"reasoning_tokens": reasoning});
    }
    usage
}

/// OpenAI's chat `logprobs` object from the raw (model) layer.
pub fn chat_logprobs(
    g: &Generation,
    top: usize,
    vocab: &crate::vocab::Vocabulary,
) -> serde_json::Value {
    serde_json::json!({"content": logprob_entries(&g.logprobs, top, vocab)})
}

/// The completions API's (legacy) `logprobs` object for `tokens`, from the raw
/// (model) layer: `tokens`, `token_logprobs`, `top_logprobs` (token -> logprob,
/// `top` of them) and `text_offset` (bytes into the completion, from `offset`).
pub fn completion_logprobs(
    tokens: &[crate::decode::generate::TokenLogprobs],
    top: usize,
    vocab: &crate::vocab::Vocabulary,
    offset: &mut usize,
) -> serde_json::Value {
    let entries = logprob_entries(tokens, top, vocab);
    let mut offsets = Vec::with_capacity(tokens.len());
    for t in tokens {
        offsets.push(*offset);
        *offset += t.text.len();
    }
    let tops: Vec<serde_json::Value> = entries
        .iter()
        .map(|e| {
            let map: serde_json::Map<String, serde_json::Value> = e["top_logprobs"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|alt| {
                    (
                        alt["token"].as_str().unwrap_or("").to_string(),
                        alt["logprob"].clone(),
                    )
                })
                .collect();
            serde_json::Value::Object(map)
        })
        .collect();
    serde_json::json!({
        "tokens": entries.iter().map(|e| e["token"].clone()).collect::<Vec<_>>(),
        "token_logprobs": entries.iter().map(|e| e["logprob"].clone()).collect::<Vec<_>>(),
        "top_logprobs": tops,
        "text_offset": offsets,
    })
}

/// One `logprobs.content` entry per token, from the raw (model) layer.
pub fn logprob_entries(
    tokens: &[crate::decode::generate::TokenLogprobs],
    top: usize,
    vocab: &crate::vocab::Vocabulary,
) -> Vec<serde_json::Value> {
    use crate::sampling::Layer;
    tokens
        .iter()
        .map(|t| {
            let value = t
                .logprobs
                .iter()
                .find(|l| l.layer == Layer::Raw)
                .map_or(0.0, |l| l.value);
            let tops: Vec<serde_json::Value> = t
                .top_raw
                .iter()
                .take(top)
                .map(|&(id, lp)| {
                    let bytes = vocab.shown_bytes(id);
                    serde_json::json!({
                        "token": String::from_utf8_lossy(bytes),
                        "logprob": lp,
                        "bytes": bytes,
                    })
                })
                .collect();
            serde_json::json!({
                "token": t.text,
                "logprob": value,
                "bytes": t.text.as_bytes(),
                "top_logprobs": tops,
            })
        })
        .collect()
}
