//! Sampling: from a logits row to the next token, reproducibly (spec texts 000 and 001).
//!
//! It owns the four objects of §3.1 ([`logits`]), the per-request [`DecoderState`]
//! (§3.2, §3.10), the processors ([`processors`]) applied in a declared, recorded
//! [`order`], the selectors ([`select`]), the counter-based RNG ([`rng`]), text
//! [`stop_strings`], beam search ([`beam`]), the per-step [`trace`] and the `sample` CLI
//! ([`cli`]).
//!
//! Shape: a [`SamplingConfig`] is validated once into a [`Sampler`] (all parameter
//! domains and contradictions fail there); each step is a pure function of the sampler,
//! a read-only [`DecoderState`] and the raw row, returning the token plus everything a
//! trace needs; the state then advances by [`DecoderState::commit`]. Randomness is
//! addressed by (seed, step, draw index), so batch composition cannot change a request's
//! tokens. Nothing here depends on candle: logits are `&[f32]` of any width.

pub mod beam;
pub mod cli;
pub mod config;
pub mod constraint;
pub mod error;
pub mod logits;
pub mod order;
pub mod processors;
pub mod rng;
pub mod sampler;
pub mod select;
pub mod state;
pub mod stop_strings;
pub mod trace;

pub use config::{SamplingConfig, Strategy};
pub use constraint::{GrammarConstraint, TokenConstraint, Unconstrained};
pub use error::{Result, SamplingError};
pub use logits::{
    CandidateSupport, Layer, Logprob, ProcessedLogits, RawLogits, SelectionDistribution,
};
pub use sampler::{Sampler, StepOptions, StepOutcome};
pub use state::{DecoderState, FinishStatus};
