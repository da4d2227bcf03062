//! Processor order as configuration (§3.3, Table 9-9). Non-commuting processors make the
//! order part of the result, so it is named, validated and recorded in every trace.
//!
//! Presets list every processor kind. The processors the source names come first in its
//! stated order; kinds it does not have sit in documented extension slots, so a request
//! may use them with any preset without silently changing the named ones' relative order.
//! - `reference` (default): §3.3 steps 1-10 exactly, with `logit_bias` among the hard
//!   masks (ring ① of §9.3.6), `top_n_sigma` before top-k, and the remaining truncations,
//!   XTC, Mirostat and watermark after top-p (the watermark last, as in HF).
//! - `hf`: repetition penalty → temperature → top-k → top-p → min-p → typical → ε → η →
//!   watermark, with HF's masks (n-gram, bad words, min length) after the repetition penalty.
//! - `vllm`: allowlist/grammar, banned words, min_tokens, logit_bias → repetition,
//!   presence, frequency → temperature → min-p → top-k → top-p.
//! - `llama.cpp`: logit_bias, grammar → penalties → DRY → top-nσ → top-k → typical →
//!   top-p → min-p → XTC → temperature → Mirostat (its default chain, `dry` second).
//!
//! DRY is llama.cpp's; the other presets hold it in an extension slot right after their
//! penalties, where llama.cpp has it: both are history penalties on logits, DRY the
//! sequence-level one.

use super::error::{Result, SamplingError};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessorKind {
    ControlMask,
    MinLength,
    Grammar,
    BannedSequences,
    NoRepeatNgram,
    LogitBias,
    RepetitionPenalty,
    PresencePenalty,
    FrequencyPenalty,
    Dry,
    Temperature,
    TopK,
    Softmax,
    TopP,
    MinP,
    Typical,
    Epsilon,
    Eta,
    TopNSigma,
    Xtc,
    Mirostat,
    Watermark,
}

use ProcessorKind::*;

impl ProcessorKind {
    pub const ALL: [ProcessorKind; 22] = [
        ControlMask,
        MinLength,
        Grammar,
        BannedSequences,
        NoRepeatNgram,
        LogitBias,
        RepetitionPenalty,
        PresencePenalty,
        FrequencyPenalty,
        Dry,
        Temperature,
        TopK,
        Softmax,
        TopP,
        MinP,
        Typical,
        Epsilon,
        Eta,
        TopNSigma,
        Xtc,
        Mirostat,
        Watermark,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ControlMask => "control_mask",
            MinLength => "min_length",
            Grammar => "grammar",
            BannedSequences => "banned_sequences",
            NoRepeatNgram => "no_repeat_ngram",
            LogitBias => "logit_bias",
            RepetitionPenalty => "repetition_penalty",
            PresencePenalty => "presence_penalty",
            FrequencyPenalty => "frequency_penalty",
            Dry => "dry",
            Temperature => "temperature",
            TopK => "top_k",
            Softmax => "softmax",
            TopP => "top_p",
            MinP => "min_p",
            Typical => "typical",
            Epsilon => "epsilon",
            Eta => "eta",
            TopNSigma => "top_n_sigma",
            Xtc => "xtc",
            Mirostat => "mirostat",
            Watermark => "watermark",
        }
    }

    /// Canonical names plus the config-key spellings (`typical_p`, `epsilon_cutoff`, ...).
    pub fn from_name(s: &str) -> Option<Self> {
        let alias = match s {
            "typical_p" => Some(Typical),
            "epsilon_cutoff" => Some(Epsilon),
            "eta_cutoff" => Some(Eta),
            "min_tokens" => Some(MinLength),
            "bad_words" => Some(BannedSequences),
            "no_repeat_ngram_size" => Some(NoRepeatNgram),
            _ => None,
        };
        alias.or_else(|| Self::ALL.into_iter().find(|k| k.name() == s))
    }
}

pub const PRESETS: [&str; 4] = ["reference", "hf", "vllm", "llama.cpp"];

/// The full kind list of a preset (see the module doc for the sources).
pub fn preset(name: &str) -> Option<Vec<ProcessorKind>> {
    let v = match name {
        "reference" => vec![
            ControlMask,
            MinLength,
            Grammar,
            BannedSequences,
            NoRepeatNgram,
            LogitBias,
            RepetitionPenalty,
            PresencePenalty,
            FrequencyPenalty,
            Dry,
            Temperature,
            TopNSigma,
            TopK,
            Softmax,
            TopP,
            MinP,
            Typical,
            Epsilon,
            Eta,
            Xtc,
            Mirostat,
            Watermark,
        ],
        "hf" => vec![
            ControlMask,
            Grammar,
            LogitBias,
            RepetitionPenalty,
            PresencePenalty,
            FrequencyPenalty,
            Dry,
            NoRepeatNgram,
            BannedSequences,
            MinLength,
            Temperature,
            TopK,
            TopP,
            MinP,
            Typical,
            Epsilon,
            Eta,
            TopNSigma,
            Xtc,
            Mirostat,
            Watermark,
        ],
        "vllm" => vec![
            ControlMask,
            Grammar,
            BannedSequences,
            NoRepeatNgram,
            MinLength,
            LogitBias,
            RepetitionPenalty,
            PresencePenalty,
            FrequencyPenalty,
            Dry,
            Temperature,
            MinP,
            TopK,
            TopP,
            Typical,
            Epsilon,
            Eta,
            TopNSigma,
            Xtc,
            Mirostat,
            Watermark,
        ],
        "llama.cpp" | "llama_cpp" | "llamacpp" => vec![
            ControlMask,
            LogitBias,
            Grammar,
            BannedSequences,
            NoRepeatNgram,
            MinLength,
            RepetitionPenalty,
            FrequencyPenalty,
            PresencePenalty,
            Dry,
            TopNSigma,
            TopK,
            Typical,
            TopP,
            MinP,
            Xtc,
            Temperature,
            Epsilon,
            Eta,
            Mirostat,
            Watermark,
        ],
        _ => return None,
    };
    Some(v)
}

/// `order` as written in a config: a preset name or an explicit list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OrderSpec {
    Preset(String),
    List(Vec<String>),
}

impl Default for OrderSpec {
    fn default() -> Self {
        OrderSpec::Preset("reference".into())
    }
}

/// A resolved order: where it came from and the kinds in sequence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Order {
    pub source: String,
    pub kinds: Vec<ProcessorKind>,
}

impl Order {
    pub fn resolve(spec: &OrderSpec) -> Result<Self> {
        match spec {
            OrderSpec::Preset(p) => preset(p)
                .map(|kinds| Order {
                    source: p.clone(),
                    kinds,
                })
                .ok_or_else(|| {
                    SamplingError::InvalidOrder(format!(
                        "unknown preset `{p}` (known: {})",
                        PRESETS.join(", ")
                    ))
                }),
            OrderSpec::List(names) => {
                let mut kinds = Vec::with_capacity(names.len());
                for n in names {
                    let k = ProcessorKind::from_name(n).ok_or_else(|| {
                        SamplingError::InvalidOrder(format!("unknown processor `{n}`"))
                    })?;
                    if kinds.contains(&k) {
                        return Err(SamplingError::InvalidOrder(format!(
                            "processor `{}` listed twice",
                            k.name()
                        )));
                    }
                    kinds.push(k);
                }
                Ok(Order {
                    source: "user".into(),
                    kinds,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_have_no_duplicates_and_known_relative_orders() {
        for p in PRESETS {
            let v = preset(p).unwrap();
            for (i, k) in v.iter().enumerate() {
                assert!(!v[i + 1..].contains(k), "{p}: {k:?} twice");
            }
        }
        let pos = |p: &str, k| preset(p).unwrap().iter().position(|&x| x == k).unwrap();
        // Table 9-9 relative orders.
        for (p, seq) in [
            (
                "hf",
                vec![
                    RepetitionPenalty,
                    Temperature,
                    TopK,
                    TopP,
                    MinP,
                    Typical,
                    Epsilon,
                    Eta,
                    Watermark,
                ],
            ),
            (
                "vllm",
                vec![LogitBias, RepetitionPenalty, Temperature, MinP, TopK, TopP],
            ),
            (
                "llama.cpp",
                vec![
                    RepetitionPenalty,
                    FrequencyPenalty,
                    PresencePenalty,
                    Dry,
                    TopNSigma,
                    TopK,
                    Typical,
                    TopP,
                    MinP,
                    Xtc,
                    Temperature,
                ],
            ),
            (
                "reference",
                vec![
                    ControlMask,
                    MinLength,
                    Grammar,
                    BannedSequences,
                    RepetitionPenalty,
                    Temperature,
                    TopK,
                    Softmax,
                    TopP,
                ],
            ),
        ] {
            for w in seq.windows(2) {
                assert!(
                    pos(p, w[0]) < pos(p, w[1]),
                    "{p}: {:?} before {:?}",
                    w[0],
                    w[1]
                );
            }
        }
    }

    #[test]
    fn every_preset_has_every_kind_and_dry_right_after_the_penalties() {
        for p in PRESETS {
            let v = preset(p).unwrap();
            for k in ProcessorKind::ALL {
                // Softmax is implicit outside the reference order.
                assert!(v.contains(&k) || k == Softmax, "{p} lacks {k:?}");
            }
            let pos = |k| v.iter().position(|&x| x == k).unwrap();
            let last_penalty = [RepetitionPenalty, PresencePenalty, FrequencyPenalty]
                .into_iter()
                .map(pos)
                .max()
                .unwrap();
            assert_eq!(pos(Dry), last_penalty + 1, "{p}");
        }
        for k in ProcessorKind::ALL {
            assert_eq!(ProcessorKind::from_name(k.name()), Some(k));
        }
    }
}
