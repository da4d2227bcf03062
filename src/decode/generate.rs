//! The decode loop: prompt in, grammar-valid text out, for a batch of requests.
//!
//! Each request owns everything that decides its tokens: a model session (KV cache),
//! a grammar matcher, a validated sampler and a decoder state whose RNG is addressed
//! by (seed, step, draw), its stop set and its budget. Each round, every unfinished
//! request advances one step and their forward passes run as one batch
//! ([`Session::forward_batch`]), whose logits per request do not depend on the batch;
//! so batch composition cannot change any request's tokens (tests/decode.rs checks
//! it), and a scheduler may add and remove requests between rounds.
//!
//! Per step, the grammar masks are computed on a second thread while the model's
//! forward pass runs; the sampling pipeline then gets the raw logits row and the
//! mask, which its grammar stage applies at the place the processor order gives it
//! (so traces and the raw logprob layer see the model's own row). Jump-forward: when the grammar forces bytes,
//! their canonical tokens (all but the last, which might merge with what follows) are
//! committed without sampling and fed to the model in the next forward pass together
//! with the sampled token; the output is then the canonical tokenization of forced
//! text rather than whatever split the model might have sampled, and forced tokens
//! take no draw from the RNG stream.
//!
//! Budget steering: before a sampled token is committed, the loop checks that the
//! output could still be closed within `max_tokens` afterwards (the matcher's
//! shortest completion, cut into vocabulary tokens, plus EOS). If it could not, the
//! sampled token is dropped and the closing tokens and EOS are committed instead, so
//! every output closes within its budget whenever the budget allowed it at the start.
//! Only the last few steps of a long output are affected; forced closings are
//! reported (`Timings::steered`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use candle_core::Tensor;

use super::model::{Model, Session};
use super::prefix_cache::PrefixCache;
use super::reasoning::{ReasoningBudget, ReasoningWatch};
use super::tokenizer::ModelTokenizer;
use super::DecodeError;
use crate::matcher::{StopPolicy, TokenMatcher};
use crate::sampling::constraint::{mask_words, matcher_record};
use crate::sampling::processors::dry::derive_breakers;
use crate::sampling::state::{Commit, FinishStatus};
use crate::sampling::trace::StepTrace;
use crate::sampling::{DecoderState, Layer, Sampler, SamplingConfig, StepOptions, StepOutcome};
use crate::tables::TokenTables;

mod forced;

/// A batched step's logits rows, masks (with the time each took) and the
/// forward pass's time.
type BatchStep = (Vec<Tensor>, Vec<(Option<Vec<u32>>, Duration)>, Duration);

/// A request's sampled step before it is committed: the sampler's outcome, the
/// raw logits row it read (for logprobs), and the time it took.
struct Draw {
    outcome: StepOutcome,
    row: Vec<f32>,
    time: Duration,
}

/// One generation request.
#[derive(Clone)]
pub struct Request {
    pub prompt: Vec<u32>,
    /// The grammar's token tables (shared across requests); `None`: unconstrained.
    pub grammar: Option<Arc<TokenTables>>,
    pub stop_policy: StopPolicy,
    /// Temperature, top-p, preset, seed... (`max_tokens` and EOS are set from here).
    pub sampling: SamplingConfig,
    pub max_tokens: usize,
    pub jump_forward: bool,
    /// Report the top `logprobs` alternatives per sampled token (0: none).
    pub logprobs: usize,
    /// Keep the sampling pipeline's per-step trace.
    pub trace: bool,
    /// Close the output within `max_tokens` whenever the grammar allows it (see the
    /// module docs).
    pub budget_steering: bool,
    /// A reasoning span first, whose close is forced once it holds this many
    /// tokens ([`super::reasoning`]).
    pub reasoning: Option<ReasoningBudget>,
}

/// Why a request ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    Stop,
    Length,
    Error,
}

/// One token's probabilities, each value named by its layer.
#[derive(Debug, Clone, Serialize)]
pub struct TokenLogprobs {
    pub token: u32,
    pub text: String,
    pub forced: bool,
    /// The sampled token under each layer reported by the pipeline.
    pub logprobs: Vec<NamedLogprob>,
    /// The most likely alternatives in the raw (unmasked) distribution.
    pub top_raw: Vec<(u32, f64)>,
    /// The most likely alternatives in the final selection distribution.
    pub top_selected: Vec<(u32, f64)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct NamedLogprob {
    pub layer: Layer,
    pub value: f64,
}

/// Where time went for one request.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timings {
    pub prompt_tokens: usize,
    /// Prompt tokens whose rows came from the prefix cache, not a forward pass.
    pub cached_prompt_tokens: usize,
    pub prompt_ms: f64,
    pub decode_ms: f64,
    /// Output tokens per second of decode time (prompt excluded).
    pub tokens_per_second: f64,
    pub forward_passes: usize,
    pub forced_tokens: usize,
    /// Time spent computing masks (on the second thread).
    pub mask_ms: f64,
    /// Time the loop waited for a mask after the forward pass had finished.
    pub mask_wait_ms: f64,
    /// Budget steering forced the end of the output.
    pub steered: bool,
}

/// A finished request.
#[derive(Debug, Clone, Serialize)]
pub struct Generation {
    pub text: String,
    pub finish_reason: FinishReason,
    /// The grammar accepts `text` (always true without a grammar).
    pub grammar_complete: bool,
    /// Output tokens (EOS excluded).
    pub tokens: Vec<u32>,
    pub timings: Timings,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub logprobs: Vec<TokenLogprobs>,
    /// Per sampled token, the pipeline's trace (when requested).
    #[serde(skip)]
    pub trace: Vec<StepTrace>,
    /// Tokens inside the reasoning span (when the request had a budget for one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<usize>,
    /// The stop string that ended the output (`text` stops where it begins; the
    /// tokens that wrote it are still in `tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_string: Option<String>,
}

/// Streamed as tokens arrive.
#[derive(Debug, Clone)]
pub enum Event<'a> {
    /// New text of request `request`: whole UTF-8 characters only (a character split
    /// across tokens is held back until it is complete).
    Text { request: usize, text: &'a str },
}

/// The model and tokenizer every request shares.
pub struct Generator {
    model: Model,
    tokenizer: ModelTokenizer,
    /// Most prompt tokens one request feeds per step (`None`: all at once).
    prefill_chunk: Option<usize>,
    /// Recent prompts' key/value rows, reused by prompts that begin alike.
    prefix_cache: Option<PrefixCache>,
}

/// A request between [`Generator::begin`] and [`Generator::end`]: everything that
/// decides its tokens. A scheduler advances it one step at a time
/// ([`Generator::advance`]), so requests can join and leave a running batch between
/// steps.
pub struct ActiveRequest {
    session: Session,
    sampler: Sampler,
    state: DecoderState,
    matcher: Option<TokenMatcher>,
    /// Tokens committed but not yet fed to the model.
    pending: Vec<u32>,
    /// The prompt, until its rows go into the prefix cache (after it is fed).
    prompt_to_cache: Option<Vec<u32>>,
    jump_forward: bool,
    budget_steering: bool,
    max_tokens: usize,
    stop_policy: StopPolicy,
    logprobs: usize,
    trace: Option<Vec<StepTrace>>,
    eos: u32,
    /// Output bytes not yet streamed (an incomplete UTF-8 character, or text
    /// that may begin a stop string).
    unstreamed: Vec<u8>,
    /// Output bytes streamed so far.
    streamed: usize,
    /// Where a stop string cut the output (a byte offset), and the string.
    text_end: Option<usize>,
    stop_string: Option<String>,
    output: Vec<u32>,
    forced: Vec<bool>,
    logprob_records: Vec<TokenLogprobs>,
    timings: Timings,
    first_forward_done: bool,
    /// The bytes forced at the very start were committed (they ride along with
    /// the prompt).
    started: bool,
    done: Option<(FinishReason, Option<String>)>,
    /// The reasoning span's budget, and the close's tokens.
    reasoning: Option<(ReasoningWatch, Vec<u32>)>,
}

impl Generator {
    pub fn new(model: Model, tokenizer: ModelTokenizer) -> Generator {
        Generator {
            model,
            tokenizer,
            prefill_chunk: None,
            prefix_cache: None,
        }
    }

    /// Keeps up to `bytes` of recent prompts' key/value rows, so that a request
    /// whose prompt begins like an earlier one's feeds only the rest (see
    /// [`PrefixCache`]); 0 keeps none. Tokens do not change either way.
    pub fn with_prefix_cache(mut self, bytes: usize) -> Generator {
        self.prefix_cache = (bytes > 0).then(|| PrefixCache::new(bytes));
        self
    }

    /// The prompt prefix cache, when there is one.
    pub fn prefix_cache(&self) -> Option<&PrefixCache> {
        self.prefix_cache.as_ref()
    }

    /// Feeds a long prompt `tokens` at a time, one step each, so that a request
    /// joining a running batch does not stall the others for its whole prefill.
    /// A request's text does not depend on the batch, but may on the chunk size.
    pub fn with_prefill_chunk(mut self, tokens: usize) -> Generator {
        self.prefill_chunk = Some(tokens.max(1));
        self
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    pub fn tokenizer(&self) -> &ModelTokenizer {
        &self.tokenizer
    }

    /// Runs one request to the end.
    pub fn generate(
        &self,
        request: Request,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<Generation, DecodeError> {
        let mut out = self.generate_batch(vec![request], on_event)?;
        Ok(out.remove(0))
    }

    /// `n` samples of one request: the prompt is fed once (all but its last
    /// token) and each sample continues from a fork of that KV cache with its own
    /// sampler, grammar state and seed (the request's seed + its index). Sample
    /// `i` is the same whatever `n` is (0 is read as 1). Text is reported with the
    /// sample's index.
    pub fn generate_n(
        &self,
        request: Request,
        n: usize,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<Vec<Generation>, DecodeError> {
        let seed = request.sampling.seed.unwrap_or(0);
        let mut first = self.begin(request.clone())?;
        let shared = first.pending.len().saturating_sub(1);
        if shared > 0 && first.done.is_none() {
            let started = Instant::now();
            first.session.forward_tensor(&first.pending[..shared])?;
            first.pending.drain(..shared);
            first.timings.prompt_ms += ms(started.elapsed());
        }
        let mut running = Vec::with_capacity(n);
        for i in 1..n {
            let mut sample = request.clone();
            sample.sampling.seed = Some(seed.wrapping_add(i as u64));
            let mut r = self.begin_from(sample, false)?;
            r.timings.cached_prompt_tokens = first.timings.cached_prompt_tokens;
            r.session = first.session.fork();
            r.pending = first.pending.clone();
            running.push(r);
        }
        running.insert(0, first);
        while running.iter().any(|r| !r.is_finished()) {
            self.advance(&mut running, on_event);
        }
        Ok(running.into_iter().map(|r| self.end(r)).collect())
    }

    /// Runs several requests together; results come back in request order.
    pub fn generate_batch(
        &self,
        requests: Vec<Request>,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<Vec<Generation>, DecodeError> {
        let mut running = requests
            .into_iter()
            .map(|r| self.begin(r))
            .collect::<Result<Vec<_>, _>>()?;
        while running.iter().any(|r| !r.is_finished()) {
            self.advance(&mut running, on_event);
        }
        Ok(running.into_iter().map(|r| self.end(r)).collect())
    }

    /// Advances every unfinished request of `batch` by one step: their forward
    /// passes as one batch (their masks computed beside it), then for each a
    /// sampled token and any forced continuation. Text is reported with the
    /// request's index in `batch`. A failure finishes the request it belongs to
    /// (`FinishReason::Error`, reported by [`end`](Self::end)).
    pub fn advance(&self, batch: &mut [ActiveRequest], on_event: &mut dyn FnMut(Event<'_>)) {
        for (index, r) in batch.iter_mut().enumerate() {
            if r.done.is_none() && !r.started {
                r.started = true;
                // Bytes forced at the very start ride along with the prompt.
                if r.jump_forward {
                    if let Err(e) = self.jump_forward(r, index, on_event) {
                        r.fail(e);
                    }
                }
            }
        }
        let live: Vec<usize> = (0..batch.len())
            .filter(|&i| batch[i].done.is_none())
            .collect();
        if live.is_empty() {
            return;
        }
        let forward_started = Instant::now();
        let chunk = self.prefill_chunk.unwrap_or(usize::MAX);
        let pending: Vec<Vec<u32>> = live
            .iter()
            .map(|&i| {
                let p = &mut batch[i].pending;
                if p.len() > chunk {
                    p.drain(..chunk).collect()
                } else {
                    std::mem::take(p)
                }
            })
            .collect();
        // A request still in its prefill feeds tokens but samples nothing.
        let samples: Vec<bool> = live.iter().map(|&i| batch[i].pending.is_empty()).collect();
        let (logits, masks, forward_time) = match self.forward_with_masks(batch, &pending, &samples)
        {
            Ok(step) => step,
            Err(e) => {
                for &i in &live {
                    batch[i].fail(DecodeError::Forward(e.to_string()));
                }
                return;
            }
        };
        let elapsed = forward_started.elapsed();
        let waited = elapsed.saturating_sub(forward_time);
        let mut draws = Vec::with_capacity(live.len());
        for (((&index, logits), (mask, mask_time)), &sample) in
            live.iter().zip(logits).zip(masks).zip(&samples)
        {
            let r = &mut batch[index];
            if !sample {
                r.timings.prompt_ms += ms(elapsed);
                continue;
            }
            r.timings.mask_ms += ms(mask_time);
            r.timings.mask_wait_ms += ms(waited);
            if r.first_forward_done {
                r.timings.decode_ms += ms(elapsed);
            } else {
                r.first_forward_done = true;
                r.timings.prompt_ms += ms(elapsed);
                if let (Some(cache), Some(prompt)) = (&self.prefix_cache, r.prompt_to_cache.take())
                {
                    cache.insert(&prompt, &r.session);
                }
            }
            // On the host before the pool's threads read it (a GPU's rows are
            // copied here, by the thread that runs the model; a CPU's are shared).
            match logits.to_device(&candle_core::Device::Cpu) {
                Ok(logits) => draws.push((index, logits, mask)),
                Err(e) => r.fail(DecodeError::Forward(super::model::candle_message(&e))),
            }
        }
        let drawn = self.draw_all(batch, &draws);
        for ((index, _, _), drawn) in draws.into_iter().zip(drawn) {
            let r = &mut batch[index];
            if let Err(e) = drawn.and_then(|d| self.commit_draw(r, index, d, on_event)) {
                r.fail(e);
            }
        }
    }

    /// Each request's draw from its logits row under its mask ([`Self::draw`]),
    /// the requests spread over candle's threads: a sampler reads only its own
    /// request, so the draws are those of one request at a time.
    fn draw_all(
        &self,
        batch: &[ActiveRequest],
        draws: &[(usize, Tensor, Option<Vec<u32>>)],
    ) -> Vec<Result<Draw, DecodeError>> {
        let slots: Vec<std::sync::Mutex<Option<Result<Draw, DecodeError>>>> =
            draws.iter().map(|_| Default::default()).collect();
        let run = |range: std::ops::Range<usize>| {
            for j in range {
                let (index, logits, mask) = &draws[j];
                // A panic must not unwind through candle's pool (it would leave
                // the pool's lock poisoned for every later product).
                let drawn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.draw(&batch[*index], logits, mask.as_deref())
                }))
                .unwrap_or_else(|_| Err(DecodeError::Forward("sampling panicked".into())));
                *slots[j].lock().unwrap_or_else(|e| e.into_inner()) = Some(drawn);
            }
        };
        if draws.len() < 2 {
            run(0..draws.len());
        } else {
            candle_core::utils::barrier_pool().execute_chunked(draws.len(), run);
        }
        slots
            .into_iter()
            .map(|slot| {
                slot.into_inner()
                    .unwrap_or_else(|e| e.into_inner())
                    .expect("every draw ran")
            })
            .collect()
    }

    /// One batched forward pass over the live requests' pending tokens, the
    /// masks of those that sample this step computed on a second thread
    /// meanwhile. Returns the logits rows,
    /// the masks with their times, and the forward pass's time.
    fn forward_with_masks(
        &self,
        batch: &mut [ActiveRequest],
        pending: &[Vec<u32>],
        samples: &[bool],
    ) -> Result<BatchStep, DecodeError> {
        let width = self.model.logits_width();
        let started = Instant::now();
        let mut matchers = Vec::with_capacity(pending.len());
        let mut sessions = Vec::with_capacity(pending.len());
        let live = batch.iter_mut().filter(|r| r.done.is_none());
        for (r, &sample) in live.zip(samples) {
            // No mask for a step that samples nothing.
            matchers.push(r.matcher.as_mut().filter(|_| sample));
            sessions.push(&mut r.session);
        }
        std::thread::scope(|scope| {
            let mask_job = scope.spawn(move || {
                matchers
                    .into_iter()
                    .map(|matcher| {
                        let mask_started = Instant::now();
                        let mask = matcher.map(|m| {
                            let mut words = vec![0u32; mask_words(width)];
                            m.fill_next_token_bitmask(&mut words);
                            words
                        });
                        (mask, mask_started.elapsed())
                    })
                    .collect::<Vec<_>>()
            });
            let tokens: Vec<&[u32]> = pending.iter().map(Vec::as_slice).collect();
            let logits = Session::forward_batch(&mut sessions, &tokens);
            let forward_time = started.elapsed();
            let masks = mask_job
                .join()
                .map_err(|_| DecodeError::Forward("the mask thread panicked".into()))?;
            Ok((logits?, masks, forward_time))
        })
    }

    /// The sampler a request's settings make with this model: DRY's breakers are text,
    /// so their tokens come from this vocabulary (llama.cpp derives them the same way).
    pub fn sampler_for(&self, sampling: &SamplingConfig) -> Result<Sampler, DecodeError> {
        Ok(match sampling.dry.as_ref() {
            Some(dry) => {
                let vocab = self.tokenizer.vocab();
                let breakers = derive_breakers(
                    &dry.breaker_strings(),
                    self.model.logits_width().min(vocab.len()),
                    |id| vocab.token_bytes(id),
                    |rest| {
                        // A rest that is not text has no tokenization: skipped.
                        std::str::from_utf8(rest)
                            .ok()
                            .and_then(|text| self.tokenizer.encode(text).ok())
                            .unwrap_or_default()
                    },
                );
                Sampler::from_config_with_breakers(sampling, breakers)?
            }
            None => Sampler::from_config(sampling)?,
        })
    }

    /// Starts a request: its session, sampler, decoder state and matcher.
    pub fn begin(&self, request: Request) -> Result<ActiveRequest, DecodeError> {
        self.begin_from(request, true)
    }

    /// [`Self::begin`], from the prefix cache only when `cached` (a sample of
    /// [`Self::generate_n`] takes its first sample's rows instead).
    fn begin_from(&self, request: Request, cached: bool) -> Result<ActiveRequest, DecodeError> {
        let eos: Vec<u32> = self.tokenizer.vocab().eos_ids().to_vec();
        let Some(&first_eos) = eos.first() else {
            return Err(DecodeError::Tokenizer {
                origin: "model".into(),
                message: "the tokenizer names no EOS token".into(),
            });
        };
        let mut sampling = request.sampling.clone();
        sampling.max_tokens = Some(request.max_tokens);
        let mut eos_ids = sampling.eos_token_ids.take().unwrap_or_default();
        eos_ids.extend(&eos);
        sampling.eos_token_ids = Some(eos_ids);
        let sampler = self.sampler_for(&sampling)?;
        let state = sampler.new_state(request.prompt.clone(), None, None);
        let matcher = request
            .grammar
            .map(|tables| TokenMatcher::with_policy(tables, request.stop_policy));
        let reasoning = match request.reasoning {
            Some(budget) => {
                let close = self.tokenizer.encode(&budget.close)?;
                Some((ReasoningWatch::new(budget), close))
            }
            None => None,
        };
        let mut session = self.model.session()?;
        let prefix_cache = self.prefix_cache.as_ref().filter(|_| cached);
        let cached = match prefix_cache {
            Some(cache) => cache.resume(&mut session, &request.prompt),
            None => 0,
        };
        let mut r = ActiveRequest {
            session,
            sampler,
            state,
            matcher,
            pending: request.prompt[cached..].to_vec(),
            prompt_to_cache: prefix_cache.map(|_| request.prompt.clone()),
            jump_forward: request.jump_forward,
            budget_steering: request.budget_steering && request.stop_policy == StopPolicy::Stop,
            max_tokens: request.max_tokens,
            stop_policy: request.stop_policy,
            logprobs: request.logprobs,
            trace: request.trace.then(Vec::new),
            eos: first_eos,
            unstreamed: Vec::new(),
            streamed: 0,
            text_end: None,
            stop_string: None,
            output: Vec::new(),
            forced: Vec::new(),
            logprob_records: Vec::new(),
            timings: Timings {
                prompt_tokens: request.prompt.len(),
                cached_prompt_tokens: cached,
                ..Timings::default()
            },
            first_forward_done: false,
            started: false,
            done: None,
            reasoning,
        };
        if r.pending.is_empty() {
            return Err(DecodeError::Forward("empty prompt".into()));
        }
        if r.max_tokens == 0 {
            // No token fits the budget, not even a forced one or EOS.
            r.done = Some((FinishReason::Length, None));
        }
        Ok(r)
    }

    /// Samples a token from `logits` under `mask`, leaving the request as it
    /// is: the part of a step that may run beside the other requests' draws.
    fn draw(
        &self,
        r: &ActiveRequest,
        logits: &Tensor,
        mask: Option<&[u32]>,
    ) -> Result<Draw, DecodeError> {
        let started = Instant::now();
        // The raw row: the grammar's mask is a stage of the pipeline (applied while
        // the support is built unless the order puts a truncation before it).
        let row = logits
            .to_vec1::<f32>()
            .map_err(|e| DecodeError::Forward(super::model::candle_message(&e)))?;
        let layers = r.logprobs > 0 || r.trace.is_some();
        let opts = StepOptions {
            detail: r.trace.is_some(),
            raw_logprob: layers,
            processed_logprob: layers,
            ..StepOptions::default()
        };
        let outcome = r.sampler.run(&r.state.view(mask), &row, &opts)?;
        Ok(Draw {
            outcome,
            row,
            time: started.elapsed(),
        })
    }

    /// Commits a drawn token (or the closing tokens budget steering chooses),
    /// then any forced continuation.
    fn commit_draw(
        &self,
        r: &mut ActiveRequest,
        index: usize,
        drawn: Draw,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), DecodeError> {
        let sample_started = Instant::now();
        let Draw { outcome, row, time } = drawn;
        r.timings.decode_ms += ms(time);
        let before = r.trace.as_ref().and(r.matcher.as_ref()).map(matcher_record);
        let token = outcome.token;
        if r.logprobs > 0 {
            let logprobs = outcome
                .logprobs
                .iter()
                .map(|l| NamedLogprob {
                    layer: l.layer,
                    value: l.value,
                })
                .collect();
            // Tokens of probability 0 (all but one under greedy) are no alternatives.
            let mut selected: Vec<(u32, f64)> = outcome
                .selection
                .pairs()
                .into_iter()
                .filter(|&(_, p)| p > 0.0)
                .collect();
            selected.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            selected.truncate(r.logprobs);
            r.logprob_records.push(TokenLogprobs {
                token,
                text: self.token_text(token),
                forced: false,
                logprobs,
                top_raw: top_raw(&row, r.logprobs),
                top_selected: selected.into_iter().map(|(id, p)| (id, p.ln())).collect(),
            });
        }
        match self.steer(r, token)? {
            None => self.commit(r, token, false, index, on_event)?,
            Some(closing) => {
                r.timings.steered = true;
                for t in closing {
                    if r.done.is_some() {
                        break;
                    }
                    r.timings.forced_tokens += 1;
                    self.commit(r, t, true, index, on_event)?;
                }
            }
        }
        if let Some(traces) = &mut r.trace {
            let mut trace = outcome.trace;
            trace.constraint_before = before;
            trace.constraint_after = r.matcher.as_ref().map(matcher_record);
            traces.push(trace);
        }
        r.timings.decode_ms += ms(sample_started.elapsed());
        if r.done.is_none() {
            self.close_reasoning_when_due(r, index, on_event)?;
        }
        if r.done.is_none() && r.jump_forward {
            self.jump_forward(r, index, on_event)?;
        }
        Ok(())
    }

    /// Writes the reasoning span's close once its budget is spent (when the
    /// grammar takes it here: a token that ended inside a character waits one
    /// step).
    fn close_reasoning_when_due(
        &self,
        r: &mut ActiveRequest,
        index: usize,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), DecodeError> {
        let Some((watch, close)) = &r.reasoning else {
            return Ok(());
        };
        if !watch.must_close() {
            return Ok(());
        }
        let close = close.clone();
        if let Some(m) = &mut r.matcher {
            if m.validate_tokens(&close) < close.len() {
                return Ok(());
            }
        }
        if let Some((watch, _)) = &mut r.reasoning {
            watch.closed();
        }
        self.commit_forced_tokens(r, close, index, on_event)
    }

    /// A token's bytes as text, for logprob records.
    fn token_text(&self, token: u32) -> String {
        String::from_utf8_lossy(self.tokenizer.vocab().shown_bytes(token)).into_owned()
    }

    /// Commits a token to the grammar, the decoder state and the output, and
    /// streams what text is now safe to hand out.
    fn commit(
        &self,
        r: &mut ActiveRequest,
        token: u32,
        forced: bool,
        index: usize,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), DecodeError> {
        // The grammar first: it is the one part that can refuse, and a refused
        // token must leave the decoder state untouched.
        if let Some(m) = &mut r.matcher {
            m.consume_token(token)
                .map_err(|e| DecodeError::Grammar(e.to_string()))?;
        }
        let vocab = self.tokenizer.vocab();
        // A special token the grammar allowed is text a reader sees: Gemma 4's
        // `<|tool_call>` delimits the call that a parser reads back.
        let bytes = vocab.shown_bytes(token);
        let processor_state = r.state.processor_state();
        let status = r.state.commit(
            Commit {
                token,
                processor_state,
            },
            bytes,
        )?;
        if !matches!(status, FinishStatus::Eos(_)) {
            if let Some((watch, _)) = &mut r.reasoning {
                watch.observe(bytes);
            }
            r.output.push(token);
            r.forced.push(forced);
            r.pending.push(token);
            r.unstreamed.extend_from_slice(bytes);
        }
        match status {
            FinishStatus::Running => {
                // Text that may begin a stop string waits for the next token.
                let held = r.state.stop_strings().held_back(&r.unstreamed);
                r.streamed += stream(&mut r.unstreamed, held, index, on_event);
            }
            FinishStatus::StopString { index: which, at } => {
                // Held back since it began, so none of it was streamed.
                r.unstreamed.truncate(at.saturating_sub(r.streamed));
                r.streamed += stream(&mut r.unstreamed, 0, index, on_event);
                r.text_end = Some(at);
                let matched = &r.state.stop_strings().strings()[which];
                r.stop_string = Some(String::from_utf8_lossy(matched).into_owned());
                r.done = Some((FinishReason::Stop, None));
            }
            FinishStatus::Length => {
                r.streamed += stream(&mut r.unstreamed, 0, index, on_event);
                r.done = Some((FinishReason::Length, None));
            }
            _ => {
                r.streamed += stream(&mut r.unstreamed, 0, index, on_event);
                r.done = Some((FinishReason::Stop, None));
            }
        }
        Ok(())
    }

    /// The finished (or abandoned) request's result.
    pub fn end(&self, mut r: ActiveRequest) -> Generation {
        let (finish_reason, error) = r.done.take().unwrap_or((FinishReason::Error, None));
        if let (Some(m), Some(end)) = (&mut r.matcher, r.text_end) {
            self.rewind_to(m, &r.output, end);
        }
        let grammar_complete = r
            .matcher
            .as_ref()
            .is_none_or(|m| m.is_accepting() || m.is_terminated());
        let mut bytes = self.tokenizer.vocab().decode_shown(&r.output);
        if let Some(end) = r.text_end {
            bytes.truncate(end);
        }
        r.timings.forward_passes = r.session.forward_passes();
        if r.timings.decode_ms > 0.0 {
            r.timings.tokens_per_second = r.output.len() as f64 / (r.timings.decode_ms / 1000.0);
        }
        Generation {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            finish_reason,
            grammar_complete,
            tokens: r.output,
            timings: r.timings,
            error,
            logprobs: r.logprob_records,
            trace: r.trace.unwrap_or_default(),
            reasoning_tokens: r.reasoning.map(|(watch, _)| watch.content_tokens()),
            stop_string: r.stop_string,
        }
    }
}

impl Generator {
    /// Puts the matcher, which read every token of `output`, where the text cut at
    /// byte `end` leaves it, so `grammar_complete` speaks of the text returned.
    fn rewind_to(&self, m: &mut TokenMatcher, output: &[u32], end: usize) {
        let vocab = self.tokenizer.vocab();
        let (mut whole, mut kept) = (0, 0);
        for &t in output {
            let len = vocab.shown_bytes(t).len();
            if kept + len > end {
                break;
            }
            kept += len;
            whole += 1;
        }
        m.rollback(output.len() - whole);
        if let Some(&cut) = output.get(whole) {
            // (A special token cut short leaves nothing of itself read.)
            let part = &vocab.token_bytes(cut)[..(end - kept).min(vocab.token_bytes(cut).len())];
            // The cut text is a prefix of text the grammar read: it takes it.
            if !part.is_empty() && m.consume_bytes(part).is_err() {
                debug_assert!(false, "the grammar refused a prefix of its own output");
            }
        }
    }
}

impl ActiveRequest {
    fn fail(&mut self, e: DecodeError) {
        self.done = Some((FinishReason::Error, Some(e.to_string())));
    }

    /// The request stopped, ran out of tokens or failed.
    pub fn is_finished(&self) -> bool {
        self.done.is_some()
    }

    /// Output tokens so far (EOS excluded).
    pub fn output_tokens(&self) -> usize {
        self.output.len()
    }

    /// The logprobs of the tokens so far (when the request asked for them).
    pub fn logprobs_so_far(&self) -> &[TokenLogprobs] {
        &self.logprob_records
    }

    /// Ends the request here (a client went away, a stop string was written):
    /// [`Generator::end`] then reports `reason`.
    pub fn stop_early(&mut self, reason: FinishReason) {
        if self.done.is_none() {
            self.done = Some((reason, None));
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The `n` most likely tokens of a raw row, as natural-log probabilities.
fn top_raw(raw: &[f32], n: usize) -> Vec<(u32, f64)> {
    let max = raw.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = raw.iter().map(|&z| f64::from(z - max).exp()).sum();
    let mut ids: Vec<u32> = (0..raw.len() as u32).collect();
    let n = n.min(ids.len());
    if n == 0 {
        return Vec::new();
    }
    ids.select_nth_unstable_by(n - 1, |&a, &b| {
        raw[b as usize].total_cmp(&raw[a as usize]).then(a.cmp(&b))
    });
    ids.truncate(n);
    ids.sort_by(|&a, &b| raw[b as usize].total_cmp(&raw[a as usize]).then(a.cmp(&b)));
    ids.into_iter()
        .map(|id| (id, f64::from(raw[id as usize] - max) - sum.ln()))
        .collect()
}

/// Emits the longest complete-UTF-8 prefix of `pending` short of its last `hold`
/// bytes; returns how many bytes went out. Invalid bytes (which a grammar over
/// valid UTF-8 never produces) are emitted as U+FFFD.
fn stream(
    pending: &mut Vec<u8>,
    hold: usize,
    request: usize,
    on_event: &mut dyn FnMut(Event<'_>),
) -> usize {
    let ready = &pending[..pending.len() - hold.min(pending.len())];
    let cut = match std::str::from_utf8(ready) {
        Ok(_) => ready.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => ready.len(),
    };
    if cut == 0 {
        return 0;
    }
    let text = String::from_utf8_lossy(&pending[..cut]).into_owned();
    pending.drain(..cut);
    on_event(Event::Text {
        request,
        text: &text,
    });
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_holds_back_split_characters() {
        let mut seen = String::new();
        let mut pending = Vec::new();
        let mut push = |bytes: &[u8], pending: &mut Vec<u8>| {
            pending.extend_from_slice(bytes);
            stream(pending, 0, 0, &mut |e| {
                let Event::Text { text, .. } = e;
                seen.push_str(text);
            });
        };
        let euro = "€".as_bytes();
        push(&euro[..1], &mut pending);
        push(&euro[1..2], &mut pending);
        assert_eq!(pending.len(), 2);
        push(&euro[2..], &mut pending);
        push(b"!", &mut pending);
        assert!(pending.is_empty());
        assert_eq!(seen, "€!");
    }

    #[test]
    fn top_raw_orders_by_probability() {
        let top = top_raw(&[0.0, 2.0, 1.0, 2.0], 3);
        assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![1, 3, 2]);
        let total: f64 = [0.0f64, 2.0, 1.0, 2.0].iter().map(|z| z.exp()).sum();
        assert!((top[0].1 - (2.0 - total.ln())).abs() < 1e-9);
    }
}
