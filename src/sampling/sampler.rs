//! The validated request pipeline: ordered processors, then selection (construction and
//! validation live in `build`). At each step an empty support is raised as a constraint
//! error before any randomness is consumed; the decoder state is only read.

mod build;

use super::config::Strategy;
use super::constraint::{
    mask_words, NgramState, SeqMatcher, SequenceConstraintState, TokenConstraint,
};
use super::error::{invalid, Result, SamplingError};
use super::logits::{
    CandidateSupport, Candidates, Layer, Logprob, ProcessedLogits, RawLogits, SelectionDistribution,
};
use super::order::Order;
use super::processors::{self as p, Processor, StageNotes};
use super::rng::{RngRecord, RngStream, ALGORITHM, DRAW_CATEGORICAL};
use super::select;
use super::state::{Commit, DecoderState, ProcessorState, StateView, StopMatcher};
use super::trace::{ConstraintRecord, RawSummary, StageRecord, StepTrace, DETAIL_LIMIT};
use std::collections::BTreeSet;

/// Per-step options that do not change the result.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepOptions {
    /// Force the reference categorical selector's uniform (must be in [0, 1)).
    pub forced_u: Option<f64>,
    /// Record candidates and probabilities per stage (small supports only).
    pub detail: bool,
    /// Also report the raw-layer logprob (one extra pass over the row).
    pub raw_logprob: bool,
    /// Also report the processed-layer logprob (the masks and value transforms
    /// run a second time over a copy that no truncation narrows).
    pub processed_logprob: bool,
}

#[derive(Debug, Clone)]
pub struct StepOutcome {
    pub token: u32,
    pub processed: ProcessedLogits,
    pub support: CandidateSupport,
    pub selection: SelectionDistribution,
    pub logprobs: Vec<Logprob>,
    pub trace: StepTrace,
    pub commit: Commit,
}

#[derive(Debug)]
pub struct Sampler {
    order: Order,
    processors: Vec<Box<dyn Processor>>,
    strategy: Strategy,
    mirostat: Option<p::mirostat::Mirostat>,
    seed: u64,
    special: BTreeSet<u32>,
    stop: StopMatcher,
    banned: Vec<Vec<u32>>,
    ngram: Option<usize>,
    /// Every stage before the grammar's is a mask or a value transform, which
    /// commute with it: the support can be built already masked.
    grammar_moves_first: bool,
    /// Each processor's parameters for traces, made once.
    params: Vec<serde_json::Value>,
}

impl Sampler {
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    pub fn special_token_ids(&self) -> &BTreeSet<u32> {
        &self.special
    }
    /// Active processor names, in order.
    pub fn order(&self) -> Vec<&'static str> {
        self.processors.iter().map(|p| p.name()).collect()
    }
    pub fn order_source(&self) -> &str {
        &self.order.source
    }

    /// A fresh decoder state for this request (seed from the config unless given).
    pub fn new_state<C: TokenConstraint>(
        &self,
        prompt: Vec<u32>,
        seed: Option<u64>,
        grammar: Option<C>,
    ) -> DecoderState<C> {
        let seq = SequenceConstraintState {
            banned: self.banned.iter().cloned().map(SeqMatcher::new).collect(),
            ngram: self.ngram.map(NgramState::new),
        };
        let ps = ProcessorState {
            mirostat_mu: self.mirostat.as_ref().map(|m| m.initial_mu()),
        };
        DecoderState::new(
            prompt,
            seed.unwrap_or(self.seed),
            grammar,
            seq,
            self.stop.clone(),
            ps,
        )
    }

    /// One step: fill the grammar mask from the state's matcher (if any), run the
    /// processors, select. The state is not modified: pass `outcome.commit` to
    /// [`DecoderState::commit`].
    pub fn step<C: TokenConstraint>(
        &self,
        state: &DecoderState<C>,
        raw: &[f32],
        opts: &StepOptions,
    ) -> Result<StepOutcome> {
        if state.finish_status != super::state::FinishStatus::Running {
            return Err(SamplingError::Finished(format!(
                "{:?}",
                state.finish_status
            )));
        }
        let mask = state.grammar_state.as_ref().map(|g| {
            let mut m = vec![0u32; mask_words(raw.len())];
            g.fill_mask(&mut m);
            m
        });
        let before = state.grammar_state.as_ref().map(|g| ConstraintRecord {
            accepting: g.is_accepting(),
            summary: g.summary(),
        });
        let mut out = self.run(&state.view(mask.as_deref()), raw, opts)?;
        out.trace.constraint_before = before;
        Ok(out)
    }

    /// The pipeline on an explicit view (callers supply the grammar mask themselves).
    pub fn run(
        &self,
        view: &StateView<'_>,
        raw_row: &[f32],
        opts: &StepOptions,
    ) -> Result<StepOutcome> {
        let raw = RawLogits::new(raw_row)?;
        self.check_forced_u(opts)?;
        // The grammar's removals are the stage's own in a detailed trace; otherwise
        // a grammar that may move first is applied while the support is built.
        let mut c = match view.grammar_mask {
            Some(mask) if self.grammar_moves_first && !opts.detail => {
                if mask.len() < mask_words(raw.width()) {
                    return Err(SamplingError::MaskWidth {
                        words: mask.len(),
                        needed: mask_words(raw.width()),
                        width: raw.width(),
                    });
                }
                Candidates::from_raw_masked(&raw, mask)
            }
            _ => Candidates::from_raw(&raw),
        };
        if c.is_empty() {
            // Only now is the row scanned again: the rare case names its cause.
            let all_masked = raw.values().iter().any(|&z| z != f32::NEG_INFINITY);
            return Err(SamplingError::EmptySupport {
                after: if all_masked {
                    "grammar"
                } else {
                    "raw logits (all -inf)"
                },
            });
        }
        let mut unnarrowed = opts.processed_logprob.then(|| c.clone());
        let stages = self.apply_processors(&mut c, unnarrowed.as_mut(), view, opts)?;

        let rng = view.rng.ok_or(SamplingError::UndeclaredRead("selector"))?;
        let step = view.step;
        let mut record = RngRecord {
            algorithm: ALGORITHM,
            seed: Some(rng.seed),
            step,
            draws: Vec::new(),
            forced_u: opts.forced_u.is_some(),
        };
        for s in &stages {
            record.draws.extend(&s.draws);
        }
        let (pos, selection, u) = self.select(&c, rng, step, opts, &mut record)?;
        if opts.forced_u.is_some() {
            record.seed = None;
        }
        let token = c.ids[pos];
        let mut logprobs = vec![selection.logprob(token)];
        if let Some(unnarrowed) = &unnarrowed {
            logprobs.push(Logprob {
                layer: Layer::Processed,
                value: unnarrowed.logprob(token),
            });
        }
        if opts.raw_logprob {
            logprobs.push(raw.logprob(token));
        }
        let mut ps = view.processor_state.unwrap_or_default();
        if let Some(m) = &self.mirostat {
            let mu = ps.mirostat_mu.unwrap_or(m.initial_mu());
            ps.mirostat_mu = Some(m.update(mu, selection.prob(token)));
        }
        let (argmax, max) =
            raw.values()
                .iter()
                .enumerate()
                .fold((0u32, f32::NEG_INFINITY), |(bi, bv), (i, &v)| {
                    if v > bv {
                        (i as u32, v)
                    } else {
                        (bi, bv)
                    }
                });
        let trace = StepTrace {
            step,
            raw: RawSummary {
                width: raw.width(),
                finite: raw.values().iter().filter(|v| v.is_finite()).count(),
                argmax,
                max,
                selected_logit: raw.values()[token as usize],
            },
            order_source: self.order.source.clone(),
            order: self.order(),
            versions: self.processors.iter().map(|p| p.version()).collect(),
            params: self.params.clone(),
            stages,
            strategy: self.strategy.name(),
            selection: selection.pairs(),
            u,
            rng: record,
            token,
            logprobs: logprobs.clone(),
            constraint_before: None,
            constraint_after: None,
        };
        Ok(StepOutcome {
            token,
            processed: c.processed(),
            support: c.support(),
            selection,
            logprobs,
            trace,
            commit: Commit {
                token,
                processor_state: ps,
            },
        })
    }

    /// A forced `u` (replaying a recorded draw) only for the categorical
    /// strategy, and in `[0, 1)`.
    fn check_forced_u(&self, opts: &StepOptions) -> Result<()> {
        if let Some(u) = opts.forced_u {
            if self.strategy != Strategy::Categorical {
                return Err(invalid(
                    "u",
                    u,
                    "a forced u only with the categorical strategy",
                ));
            }
            if !(0.0..1.0).contains(&u) {
                return Err(invalid("u", u, "a value in [0, 1)"));
            }
        }
        Ok(())
    }

    /// Runs the processors in order over `c`, each reading only what it
    /// declares; fails where one leaves no candidate. `unnarrowed`, when given,
    /// goes through the masks and value transforms but no truncation (the
    /// processed layer).
    fn apply_processors(
        &self,
        c: &mut Candidates,
        mut unnarrowed: Option<&mut Candidates>,
        view: &StateView<'_>,
        opts: &StepOptions,
    ) -> Result<Vec<StageRecord>> {
        let mut stages = Vec::with_capacity(self.processors.len());
        for proc_ in &self.processors {
            let mut notes = StageNotes::default();
            let restricted = view.restrict(proc_.reads());
            if let Some(copy) = unnarrowed.as_deref_mut().filter(|_| !proc_.truncates()) {
                proc_.apply(copy, &restricted, &mut StageNotes::default())?;
            }
            proc_.apply(c, &restricted, &mut notes)?;
            if c.is_empty() {
                return Err(SamplingError::EmptySupport {
                    after: proc_.name(),
                });
            }
            let candidates = (opts.detail && c.len() <= DETAIL_LIMIT).then(|| {
                let probs = c.softmax();
                c.ids
                    .iter()
                    .zip(&c.logits)
                    .zip(probs)
                    .map(|((&i, &z), p)| (i, z, p))
                    .collect()
            });
            stages.push(StageRecord {
                processor: proc_.name(),
                version: proc_.version(),
                support_size: c.len(),
                candidates,
                draws: notes.draws,
            });
        }

        Ok(stages)
    }

    /// Draws the token's position in `c` by the strategy, recording the draws
    /// in `record`: its position, the distribution it was drawn from, and the
    /// uniform draw where one was used.
    fn select(
        &self,
        c: &Candidates,
        rng: RngStream,
        step: u64,
        opts: &StepOptions,
        record: &mut RngRecord,
    ) -> Result<(usize, SelectionDistribution, Option<f64>)> {
        match self.strategy {
            Strategy::Greedy => {
                let pos =
                    select::greedy(c).ok_or(SamplingError::EmptySupport { after: "selection" })?;
                let probs = (0..c.len())
                    .map(|i| if i == pos { 1.0 } else { 0.0 })
                    .collect();
                Ok((
                    pos,
                    SelectionDistribution {
                        ids: c.ids.clone(),
                        probs,
                    },
                    None,
                ))
            }
            Strategy::Categorical => {
                let sel = c.selection();
                let u = match opts.forced_u {
                    Some(u) => u,
                    None => {
                        record.draws.push(DRAW_CATEGORICAL);
                        rng.uniform(step, DRAW_CATEGORICAL)
                    }
                };
                let pos = select::categorical(&sel, u)
                    .ok_or(SamplingError::EmptySupport { after: "selection" })?;
                Ok((pos, sel, Some(u)))
            }
            Strategy::ExponentialRace => {
                let sel = c.selection();
                let pos = select::exponential_race(&sel, rng, step)
                    .ok_or(SamplingError::EmptySupport { after: "selection" })?;
                record.draws.extend([
                    u64::from(sel.ids[0]),
                    u64::from(*sel.ids.last().unwrap_or(&0)),
                ]);
                Ok((pos, sel, None))
            }
        }
    }
}
