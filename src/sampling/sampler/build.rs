//! Validation of a [`SamplingConfig`] into a [`Sampler`]: every parameter domain, every
//! contradiction (T = 0 vs a random strategy, a stop token under the min-length mask, a
//! configured processor missing from a user order) fails here, before the first step.

use super::Sampler;
use crate::sampling::config::{
    check_finite, check_unit_open, check_unit_open_closed, MinLengthPriority, SamplingConfig,
};
use crate::sampling::constraint::SeqMatcher;
use crate::sampling::error::{invalid, Result, SamplingError};
use crate::sampling::order::{Order, OrderSpec, ProcessorKind};
use crate::sampling::processors::dry::{SequenceBreakers, MAX_BREAKER_BYTES, MAX_TAIL_TOKENS};
use crate::sampling::processors::{self as p, Processor};
use crate::sampling::state::{CountScope, StopMatcher};
use crate::sampling::stop_strings::StopStrings;
use std::collections::BTreeSet;

fn ids_set(v: &Option<Vec<u32>>) -> BTreeSet<u32> {
    v.iter().flatten().copied().collect()
}

/// The processors configured so far, by kind, in the order they were built.
type Built = Vec<(ProcessorKind, Box<dyn Processor>)>;

impl Sampler {
    /// Validates `cfg` into a sampler. Without a vocabulary, DRY's breaker strings
    /// cannot become token ids: only `dry.sequence_breaker_ids` break repeats (see
    /// [`Sampler::from_config_with_breakers`]).
    pub fn from_config(cfg: &SamplingConfig) -> Result<Self> {
        Self::from_config_with_breakers(cfg, SequenceBreakers::default())
    }

    /// [`Sampler::from_config`] plus DRY breakers derived from `dry.sequence_breakers`
    /// and the vocabulary by [`derive_breakers`](p::dry::derive_breakers) (the decode
    /// loop's call, once per request); they join `dry.sequence_breaker_ids`. Ignored
    /// when `dry` is not configured.
    pub fn from_config_with_breakers(
        cfg: &SamplingConfig,
        derived: SequenceBreakers,
    ) -> Result<Self> {
        let order = Order::resolve(cfg.order.as_ref().unwrap_or(&OrderSpec::default()))?;
        let strategy = cfg.resolve_strategy()?;
        let special = ids_set(&cfg.special_token_ids);
        let eos = ids_set(&cfg.eos_token_ids);
        let stops = ids_set(&cfg.stop_token_ids);
        let mut built: Built = Vec::new();
        // Validated in this order: the first invalid field is the one reported.
        let banned = masking_stages(cfg, &eos, &stops, &mut built)?;
        penalty_stages(cfg, &special, &mut built)?;
        dry_stage(cfg, derived, &mut built)?;
        shaping_stages(cfg, &mut built)?;
        let mirostat = adaptive_stages(cfg, &mut built)?;
        let processors = in_order(&order, built)?;
        let grammar_moves_first = processors
            .iter()
            .take_while(|p| p.name() != "grammar")
            .all(|p| !p.truncates());
        let stop = stop_matcher(cfg, eos, stops)?;
        let params = processors.iter().map(|p| p.params()).collect();
        Ok(Sampler {
            order,
            processors,
            params,
            strategy,
            mirostat,
            seed: cfg.seed.unwrap_or(0),
            special,
            stop,
            banned,
            ngram: cfg.no_repeat_ngram_size,
            grammar_moves_first,
        })
    }
}

/// The masks: control tokens, the minimum length, the grammar (always
/// present), banned sequences and repeated n-grams. Returns the banned sequences.
fn masking_stages(
    cfg: &SamplingConfig,
    eos: &BTreeSet<u32>,
    stops: &BTreeSet<u32>,
    built: &mut Built,
) -> Result<Vec<Vec<u32>>> {
    let mut add = |k, b: Box<dyn Processor>| built.push((k, b));
    use ProcessorKind as K;
    if let Some(ids) = &cfg.control_token_ids {
        add(
            K::ControlMask,
            Box::new(p::masks::ControlMask {
                ids: ids.iter().copied().collect(),
            }),
        );
    }
    if let Some(n) = cfg.min_tokens {
        if eos.is_empty() {
            return Err(invalid(
                "min_tokens",
                n,
                "eos_token_ids to be given (min_tokens masks EOS)",
            ));
        }
        let mut masked = eos.clone();
        match cfg.min_length_priority {
            Some(MinLengthPriority::MinLength) => masked.extend(stops.iter().copied()),
            Some(MinLengthPriority::Stop) => masked.retain(|t| !stops.contains(t)),
            None => {
                if let Some(t) = eos.intersection(stops).next() {
                    return Err(SamplingError::Conflict(format!(
                        "stop token {t} is also masked by min_tokens; set min_length_priority \
                         to \"min_length\" or \"stop\""
                    )));
                }
            }
        }
        add(
            K::MinLength,
            Box::new(p::masks::MinLength {
                min_tokens: n,
                masked,
            }),
        );
    } else if cfg.min_length_priority.is_some() {
        return Err(invalid(
            "min_length_priority",
            "set",
            "min_tokens to be given",
        ));
    }
    // The grammar stage is always present; without a mask it is a no-op.
    add(K::Grammar, Box::new(p::masks::GrammarMask));
    let banned = cfg.banned_sequences.clone().unwrap_or_default();
    if banned.iter().any(|s| s.is_empty()) {
        return Err(invalid(
            "banned_sequences",
            "[]",
            "non-empty token sequences",
        ));
    }
    if !banned.is_empty() {
        add(K::BannedSequences, Box::new(p::masks::BannedSequences));
    }
    if let Some(n) = cfg.no_repeat_ngram_size {
        if n == 0 {
            return Err(invalid("no_repeat_ngram_size", n, "an integer >= 1"));
        }
        add(K::NoRepeatNgram, Box::new(p::masks::NoRepeatNgram));
    }
    Ok(banned)
}

/// Logit bias and the repetition, presence and frequency penalties.
fn penalty_stages(cfg: &SamplingConfig, special: &BTreeSet<u32>, built: &mut Built) -> Result<()> {
    let mut add = |k, b: Box<dyn Processor>| built.push((k, b));
    use ProcessorKind as K;
    let bias = cfg.parsed_logit_bias()?;
    if !bias.is_empty() {
        add(K::LogitBias, Box::new(p::logit_bias::LogitBias { bias }));
    }
    if let Some(theta) = cfg.repetition_penalty {
        // The texts take r >= 1 (§3.5): below 1 the "penalty" would raise the
        // logits of repeated tokens.
        if !(theta.is_finite() && theta >= 1.0) {
            return Err(invalid(
                "repetition_penalty",
                theta,
                "a finite value >= 1 (1 = off)",
            ));
        }
        let scope = cfg.repetition_scope.unwrap_or(CountScope {
            include_prompt: true,
            ..CountScope::default()
        });
        add(
            K::RepetitionPenalty,
            Box::new(p::penalties::RepetitionPenalty {
                theta,
                scope,
                special: special.clone(),
            }),
        );
    }
    if let Some(alpha) = cfg.presence_penalty {
        check_finite("presence_penalty", f64::from(alpha))?;
        let scope = cfg.presence_scope.unwrap_or_default();
        add(
            K::PresencePenalty,
            Box::new(p::penalties::PresencePenalty {
                alpha,
                scope,
                special: special.clone(),
            }),
        );
    }
    if let Some(alpha) = cfg.frequency_penalty {
        check_finite("frequency_penalty", f64::from(alpha))?;
        let scope = cfg.frequency_scope.unwrap_or_default();
        add(
            K::FrequencyPenalty,
            Box::new(p::penalties::FrequencyPenalty {
                alpha,
                scope,
                special: special.clone(),
            }),
        );
    }
    Ok(())
}

/// DRY. Domains are refused where llama.cpp would clamp, ignore or misbehave: it
/// resets a base below 1 to the default (server) or keeps the old one (CLI), rejects a
/// window below -1 (CLI), truncates breakers to 40 bytes and tails to 20 tokens, and
/// would turn a negative multiplier into a bonus.
fn dry_stage(cfg: &SamplingConfig, derived: SequenceBreakers, built: &mut Built) -> Result<()> {
    let Some(d) = &cfg.dry else {
        return Ok(());
    };
    if !(d.multiplier.is_finite() && d.multiplier >= 0.0) {
        return Err(invalid(
            "dry.multiplier",
            d.multiplier,
            "a finite value >= 0 (0 = off)",
        ));
    }
    let base = d.base.unwrap_or(p::dry::DEFAULT_BASE);
    if !(base.is_finite() && base >= 1.0) {
        return Err(invalid("dry.base", base, "a finite value >= 1"));
    }
    let allowed_length = match d.allowed_length {
        None => p::dry::DEFAULT_ALLOWED_LENGTH,
        Some(n) => {
            usize::try_from(n).map_err(|_| invalid("dry.allowed_length", n, "an integer >= 0"))?
        }
    };
    let last_n = match d.penalty_last_n.unwrap_or(-1) {
        -1 => None,
        n => Some(usize::try_from(n).map_err(|_| {
            invalid(
                "dry.penalty_last_n",
                n,
                "an integer >= -1 (-1 = the whole history, 0 = off)",
            )
        })?),
    };
    if let Some(s) = d
        .sequence_breakers
        .iter()
        .flatten()
        .find(|s| s.is_empty() || s.len() > MAX_BREAKER_BYTES)
    {
        return Err(invalid(
            "dry.sequence_breakers",
            format!("{s:?}"),
            "strings of 1 to 40 bytes",
        ));
    }
    let ids = d.sequence_breaker_ids.iter().flatten();
    if let Some(s) = ids
        .clone()
        .find(|s| s.is_empty() || s.len() > 1 + MAX_TAIL_TOKENS)
    {
        return Err(invalid(
            "dry.sequence_breaker_ids",
            format!("{s:?}"),
            "token sequences of 1 to 21 ids (a first token and at most 20 after it)",
        ));
    }
    let mut breakers = SequenceBreakers::from_sequences(ids);
    breakers.extend(&derived);
    built.push((
        ProcessorKind::Dry,
        Box::new(p::dry::Dry {
            multiplier: d.multiplier,
            base,
            allowed_length,
            last_n,
            breakers,
        }),
    ));
    Ok(())
}

/// Temperature, the softmax (always present) and the truncations around it:
/// top-n-sigma, top-k, top-p, min-p, typical, epsilon, eta, XTC.
fn shaping_stages(cfg: &SamplingConfig, built: &mut Built) -> Result<()> {
    let mut add = |k, b: Box<dyn Processor>| built.push((k, b));
    use ProcessorKind as K;
    if let Some(t) = cfg.temperature_value()? {
        // T = 0 is the greedy branch (resolved above), never a division.
        if t > 0.0 {
            add(K::Temperature, Box::new(p::temperature::Temperature { t }));
        }
    }
    if let Some(n) = cfg.top_n_sigma {
        if !(n.is_finite() && n > 0.0) {
            return Err(invalid("top_n_sigma", n, "a finite value > 0"));
        }
        add(K::TopNSigma, Box::new(p::truncation::TopNSigma { n }));
    }
    if let Some(k) = cfg.top_k {
        if k <= 0 {
            return Err(invalid(
                "top_k",
                k,
                "an integer >= 1 (omit the key to disable top-k)",
            ));
        }
        let k = usize::try_from(k).unwrap_or(usize::MAX);
        add(K::TopK, Box::new(p::truncation::TopK { k }));
    }
    add(K::Softmax, Box::new(p::truncation::Softmax));
    if let Some(v) = cfg.top_p {
        let p0 = check_unit_open_closed("top_p", v)?;
        add(
            K::TopP,
            Box::new(p::truncation::TopP {
                p: p0,
                full_sort: false,
            }),
        );
    }
    if let Some(v) = cfg.min_p {
        if !(0.0..=1.0).contains(&v) {
            return Err(invalid("min_p", v, "a value in [0, 1]"));
        }
        add(K::MinP, Box::new(p::truncation::MinP { alpha: v }));
    }
    if let Some(v) = cfg.typical_p {
        let mass = check_unit_open_closed("typical_p", v)?;
        add(K::Typical, Box::new(p::truncation::Typical { mass }));
    }
    if let Some(v) = cfg.epsilon_cutoff {
        let epsilon = check_unit_open("epsilon_cutoff", v)?;
        add(K::Epsilon, Box::new(p::truncation::Epsilon { epsilon }));
    }
    if let Some(v) = cfg.eta_cutoff {
        let epsilon = check_unit_open("eta_cutoff", v)?;
        add(K::Eta, Box::new(p::truncation::Eta { epsilon }));
    }
    if let Some(x) = cfg.xtc {
        if !(0.0..=1.0).contains(&x.probability) {
            return Err(invalid(
                "xtc.probability",
                x.probability,
                "a value in [0, 1]",
            ));
        }
        if !(x.threshold > 0.0 && x.threshold <= 0.5) {
            return Err(invalid("xtc.threshold", x.threshold, "a value in (0, 0.5]"));
        }
        add(
            K::Xtc,
            Box::new(p::xtc::Xtc {
                threshold: x.threshold,
                probability: x.probability,
            }),
        );
    }
    Ok(())
}

/// Mirostat (returned: its state travels with the sampler) and the watermark.
fn adaptive_stages(
    cfg: &SamplingConfig,
    built: &mut Built,
) -> Result<Option<p::mirostat::Mirostat>> {
    let mut add = |k, b: Box<dyn Processor>| built.push((k, b));
    use ProcessorKind as K;
    let mirostat = match cfg.mirostat {
        Some(m) => {
            if !(m.tau.is_finite() && m.tau > 0.0) {
                return Err(invalid("mirostat.tau", m.tau, "a finite value > 0"));
            }
            if !(m.eta.is_finite() && m.eta > 0.0) {
                return Err(invalid("mirostat.eta", m.eta, "a finite value > 0"));
            }
            let version = match (m.version.unwrap_or(2), m.m) {
                (2, None) => p::mirostat::MirostatVersion::V2,
                (2, Some(m)) => {
                    return Err(invalid("mirostat.m", m, "only with version 1"));
                }
                (1, m) => {
                    let m = m.unwrap_or(100);
                    if m == 0 {
                        return Err(invalid("mirostat.m", m, "at least 1"));
                    }
                    p::mirostat::MirostatVersion::V1 { m }
                }
                (v, _) => return Err(invalid("mirostat.version", v, "1 or 2")),
            };
            let mv = p::mirostat::Mirostat {
                tau: m.tau,
                eta: m.eta,
                version,
            };
            add(K::Mirostat, Box::new(mv.clone()));
            Some(mv)
        }
        None => None,
    };
    if let Some(w) = cfg.watermark {
        check_unit_open("watermark.gamma", w.gamma)?;
        if !(w.delta.is_finite() && w.delta >= 0.0) {
            return Err(invalid("watermark.delta", w.delta, "a finite value >= 0"));
        }
        add(
            K::Watermark,
            Box::new(p::watermark::Watermark {
                gamma: w.gamma,
                delta: w.delta,
                key: w.key,
            }),
        );
    }

    Ok(mirostat)
}

/// The configured processors in the declared order.
fn in_order(order: &Order, mut built: Built) -> Result<Vec<Box<dyn Processor>>> {
    use ProcessorKind as K;
    // Place the configured processors in the declared order.
    let mut processors = Vec::with_capacity(built.len());
    for k in &order.kinds {
        if let Some(i) = built.iter().position(|(b, _)| b == k) {
            processors.push(built.swap_remove(i).1);
        }
    }
    // Always-present stages may be left out of a user order; configured ones may not.
    built.retain(|(k, _)| !matches!(k, K::Grammar | K::Softmax));
    if let Some((k, _)) = built.first() {
        return Err(SamplingError::InvalidOrder(format!(
            "`{}` is configured but not in the order {:?}",
            k.name(),
            order.kinds.iter().map(|k| k.name()).collect::<Vec<_>>()
        )));
    }

    Ok(processors)
}

/// What ends a sequence: EOS, stop tokens, stop sequences, stop strings, `max_tokens`.
fn stop_matcher(
    cfg: &SamplingConfig,
    eos: BTreeSet<u32>,
    stops: BTreeSet<u32>,
) -> Result<StopMatcher> {
    let stop = StopMatcher {
        eos,
        stop_tokens: stops,
        stop_sequences: cfg
            .stop_sequences
            .iter()
            .flatten()
            .filter(|s| !s.is_empty())
            .cloned()
            .map(SeqMatcher::new)
            .collect(),
        stop_strings: StopStrings::new(
            cfg.stop
                .iter()
                .flatten()
                .map(|s| s.as_bytes().to_vec())
                .collect(),
        ),
        max_tokens: cfg.max_tokens,
    };
    if cfg.stop_sequences.iter().flatten().any(|s| s.is_empty()) {
        return Err(invalid("stop_sequences", "[]", "non-empty token sequences"));
    }
    if cfg.stop.iter().flatten().any(String::is_empty) {
        return Err(invalid("stop", "\"\"", "non-empty strings"));
    }
    Ok(stop)
}
