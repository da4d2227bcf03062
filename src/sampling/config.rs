//! The request's sampling configuration, in the common API key names, and its validation
//! into a [`Sampler`](super::Sampler). Unknown keys are errors (a typo must never silently
//! disable a processor); a processor is enabled by giving its key, disabled by omitting it.

use super::error::{invalid, Result, SamplingError};
use super::order::OrderSpec;
use super::state::CountScope;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    Greedy,
    Categorical,
    ExponentialRace,
}

impl Strategy {
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Greedy => "greedy",
            Strategy::Categorical => "categorical",
            Strategy::ExponentialRace => "exponential_race",
        }
    }
}

/// Who wins when a stop token is also masked by the minimum-length rule (§3.12 row 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MinLengthPriority {
    /// The stop token stays masked until `min_tokens`.
    MinLength,
    /// Stop tokens are exempt from the minimum-length mask.
    Stop,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MirostatConfig {
    pub tau: f64,
    pub eta: f64,
    /// 1 (the paper's adaptive top-k) or 2 (a surprise bound; the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u8>,
    /// Version 1: tokens the Zipf exponent is estimated from (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub m: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct XtcConfig {
    pub threshold: f64,
    pub probability: f64,
}

/// DRY, llama.cpp's `dry_*` settings (see [`processors::dry`](super::processors::dry)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DryConfig {
    /// `>= 0`; 0 turns DRY off.
    pub multiplier: f32,
    /// `>= 1` (default 1.75).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<f32>,
    /// The longest repeat that goes unpenalised, `>= 0` (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_length: Option<i64>,
    /// The newest tokens of prompt + output searched: -1 all of them (the default), 0
    /// turns DRY off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub penalty_last_n: Option<i64>,
    /// Text that ends a repeat (default llama.cpp's `["\n", ":", "\"", "*"]`; `[]` for
    /// none), each 1 to 40 bytes. Text needs the vocabulary: callers with one turn these
    /// into token ids with [`derive_breakers`](super::processors::dry::derive_breakers)
    /// and build with
    /// [`Sampler::from_config_with_breakers`](super::Sampler::from_config_with_breakers);
    /// [`Sampler::from_config`](super::Sampler::from_config) alone (no vocabulary, as in
    /// `stencil sample`) uses only `sequence_breaker_ids`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence_breakers: Option<Vec<String>>,
    /// Breakers as token-id sequences (first token, then the tokens that must follow it),
    /// for callers without a vocabulary; used besides the strings' ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence_breaker_ids: Option<Vec<Vec<u32>>>,
}

impl DryConfig {
    /// The breaker strings in effect: the given ones or llama.cpp's defaults.
    pub fn breaker_strings(&self) -> Vec<&str> {
        match &self.sequence_breakers {
            Some(v) => v.iter().map(String::as_str).collect(),
            None => crate::sampling::processors::dry::DEFAULT_SEQUENCE_BREAKERS.to_vec(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatermarkConfig {
    pub gamma: f64,
    pub delta: f32,
    #[serde(default)]
    pub key: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SamplingConfig {
    pub order: Option<OrderSpec>,
    pub strategy: Option<Strategy>,
    pub seed: Option<u64>,
    pub temperature: Option<f32>,
    pub top_k: Option<i64>,
    pub top_p: Option<f64>,
    pub min_p: Option<f64>,
    pub typical_p: Option<f64>,
    pub epsilon_cutoff: Option<f64>,
    pub eta_cutoff: Option<f64>,
    pub top_n_sigma: Option<f64>,
    pub repetition_penalty: Option<f32>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    /// Default: prompt included (HF, vLLM).
    pub repetition_scope: Option<CountScope>,
    /// Default: output only (OpenAI, vLLM).
    pub presence_scope: Option<CountScope>,
    /// Default: output only (OpenAI, vLLM).
    pub frequency_scope: Option<CountScope>,
    /// Token id (as a decimal string, as in the OpenAI API) -> additive bias.
    pub logit_bias: Option<BTreeMap<String, f32>>,
    /// Prompt token ids (counted by scopes that include the prompt).
    pub prompt: Option<Vec<u32>>,
    /// Earlier selected token ids; counts follow from them.
    pub history: Option<Vec<u32>>,
    pub special_token_ids: Option<Vec<u32>>,
    /// Ids the control mask removes.
    pub control_token_ids: Option<Vec<u32>>,
    pub eos_token_ids: Option<Vec<u32>>,
    pub min_tokens: Option<usize>,
    pub min_length_priority: Option<MinLengthPriority>,
    pub stop_token_ids: Option<Vec<u32>>,
    pub stop_sequences: Option<Vec<Vec<u32>>>,
    /// Text stop strings (OpenAI's `stop`): matched over the output's bytes, the
    /// output cut where the first one begins.
    pub stop: Option<Vec<String>>,
    pub max_tokens: Option<usize>,
    pub banned_sequences: Option<Vec<Vec<u32>>>,
    pub no_repeat_ngram_size: Option<usize>,
    /// DRY, llama.cpp's sequence-repeat penalty.
    pub dry: Option<DryConfig>,
    pub mirostat: Option<MirostatConfig>,
    pub xtc: Option<XtcConfig>,
    pub watermark: Option<WatermarkConfig>,
}

pub(crate) fn check_unit_open_closed(name: &'static str, v: f64) -> Result<f64> {
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(invalid(name, v, "a value in (0, 1]"))
    }
}

pub(crate) fn check_unit_open(name: &'static str, v: f64) -> Result<f64> {
    if v > 0.0 && v < 1.0 {
        Ok(v)
    } else {
        Err(invalid(name, v, "a value in (0, 1)"))
    }
}

pub(crate) fn check_finite(name: &'static str, v: f64) -> Result<f64> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err(invalid(name, v, "a finite number"))
    }
}

impl SamplingConfig {
    pub fn from_json(s: &str) -> std::result::Result<Self, serde_json::Error> {
        serde_json::from_str(s)
    }

    /// `logit_bias` keys parsed as token ids.
    pub(crate) fn parsed_logit_bias(&self) -> Result<BTreeMap<u32, f32>> {
        let mut out = BTreeMap::new();
        for (k, &v) in self.logit_bias.iter().flatten() {
            let id: u32 = k.trim().parse().map_err(|_| {
                invalid(
                    "logit_bias",
                    format!("key {k:?}"),
                    "token ids as decimal strings",
                )
            })?;
            check_finite("logit_bias", f64::from(v))?;
            out.insert(id, v);
        }
        Ok(out)
    }

    /// The temperature branch: `None` means "no scaling", `Some(0)` is rejected here
    /// because the caller must have turned it into greedy already.
    pub(crate) fn temperature_value(&self) -> Result<Option<f32>> {
        match self.temperature {
            None => Ok(None),
            Some(t) if t.is_nan() || t < 0.0 || t.is_infinite() => Err(invalid(
                "temperature",
                t,
                "a finite value >= 0 (0 means greedy)",
            )),
            Some(t) => Ok(Some(t)),
        }
    }

    /// Resolve the strategy: `temperature = 0` means greedy, and contradicting it with an
    /// explicit random strategy is a configuration error rather than a guess.
    pub(crate) fn resolve_strategy(&self) -> Result<Strategy> {
        let t0 = self.temperature_value()? == Some(0.0);
        match (self.strategy, t0) {
            (None, true) | (Some(Strategy::Greedy), _) => Ok(Strategy::Greedy),
            (Some(s), true) => Err(SamplingError::Conflict(format!(
                "temperature 0 means greedy, but strategy `{}` was requested",
                s.name()
            ))),
            (None, false) => Ok(Strategy::Categorical),
            (Some(s), false) => Ok(s),
        }
    }
}
