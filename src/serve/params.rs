//! Reading a request body: typed fields with errors that name them, and the
//! settings every generating endpoint shares (sampling, `n`, `stop`,
//! `max_tokens`, logprobs), mapped onto stencil's [`SamplingConfig`].
//!
//! Unknown fields are ignored, as OpenAI's API ignores them; a known field of the
//! wrong type is a 400 naming it. `null` counts as absent (the SDK sends it).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::error::ApiError;
use crate::sampling::config::SamplingConfig;
use crate::sampling::order::OrderSpec;

/// A request's JSON object.
pub struct Body {
    map: Map<String, Value>,
}

impl Body {
    pub fn parse(bytes: &[u8]) -> Result<Body, ApiError> {
        match serde_json::from_slice::<Value>(bytes) {
            Ok(Value::Object(map)) => Ok(Body { map }),
            Ok(_) => Err(ApiError::invalid(
                "body",
                "the request body must be a JSON object",
            )),
            Err(e) => Err(ApiError::invalid(
                "body",
                format!("the request body is not JSON: {e}"),
            )),
        }
    }

    /// A body the server built itself (another endpoint's request read into
    /// this shape).
    pub fn from_map(map: Map<String, Value>) -> Body {
        Body { map }
    }

    /// A field, `null` as absent.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    pub fn f64(&self, name: &str) -> Result<Option<f64>, ApiError> {
        self.get(name)
            .map(|v| {
                v.as_f64()
                    .ok_or_else(|| ApiError::wrong_type(name, "a number"))
            })
            .transpose()
    }

    pub fn u64(&self, name: &str) -> Result<Option<u64>, ApiError> {
        self.get(name)
            .map(|v| {
                v.as_u64()
                    .ok_or_else(|| ApiError::wrong_type(name, "a non-negative integer"))
            })
            .transpose()
    }

    pub fn i64(&self, name: &str) -> Result<Option<i64>, ApiError> {
        self.get(name)
            .map(|v| {
                v.as_i64()
                    .ok_or_else(|| ApiError::wrong_type(name, "an integer"))
            })
            .transpose()
    }

    pub fn bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        self.get(name)
            .map(|v| {
                v.as_bool()
                    .ok_or_else(|| ApiError::wrong_type(name, "a boolean"))
            })
            .transpose()
    }

    pub fn str(&self, name: &str) -> Result<Option<&str>, ApiError> {
        self.get(name)
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| ApiError::wrong_type(name, "a string"))
            })
            .transpose()
    }
}

/// What every generating endpoint reads besides its prompt and constraint.
#[derive(Debug, Clone)]
pub struct Generation {
    pub sampling: SamplingConfig,
    /// The seed of choice 0 (choice `i` uses `seed + i`).
    pub seed: u64,
    pub n: usize,
    /// `None`: as many as the context leaves.
    pub max_tokens: Option<usize>,
    /// Alternatives reported per token; `None`: no logprobs.
    pub logprobs: Option<usize>,
    pub stream: bool,
    pub include_usage: bool,
}

/// Most choices one request may ask for.
pub const MAX_N: u64 = 16;

/// Reads the shared settings. `max_tokens_fields` lists the names the endpoint
/// takes for the output budget, first match wins.
pub fn generation(body: &Body, max_tokens_fields: &[&str]) -> Result<Generation, ApiError> {
    let temperature = body.f64("temperature")?;
    if let Some(t) = temperature {
        if !(0.0..=2.0).contains(&t) {
            return Err(ApiError::invalid(
                "temperature",
                format!("temperature {t} is outside [0, 2]"),
            ));
        }
    }
    let n = body.u64("n")?.unwrap_or(1);
    if !(1..=MAX_N).contains(&n) {
        return Err(ApiError::invalid(
            "n",
            format!("n must be between 1 and {MAX_N}"),
        ));
    }
    let mut max_tokens = None;
    for name in max_tokens_fields {
        if let Some(m) = body.u64(name)? {
            if m == 0 {
                return Err(ApiError::invalid(
                    *name,
                    format!("`{name}` must be at least 1"),
                ));
            }
            max_tokens = Some(m as usize);
            break;
        }
    }
    let mut stop = match body.get("stop") {
        None => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|s| s.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| ApiError::wrong_type("stop", "a string or an array of strings"))?,
        Some(_) => {
            return Err(ApiError::wrong_type(
                "stop",
                "a string or an array of strings",
            ))
        }
    };
    // An empty stop string would end every output at once: read as none.
    stop.retain(|s| !s.is_empty());
    // Chat: `logprobs: true` + `top_logprobs: k`; completions: `logprobs: k`.
    let logprobs = match body.get("logprobs") {
        None | Some(Value::Bool(false)) => None,
        Some(Value::Bool(true)) => Some(body.u64("top_logprobs")?.unwrap_or(0) as usize),
        Some(Value::Number(k)) => Some(
            k.as_u64()
                .ok_or_else(|| ApiError::wrong_type("logprobs", "a boolean or an integer"))?
                as usize,
        ),
        Some(_) => return Err(ApiError::wrong_type("logprobs", "a boolean or an integer")),
    };
    if logprobs.is_some_and(|k| k > 20) {
        return Err(ApiError::invalid(
            "top_logprobs",
            "at most 20 alternatives per token",
        ));
    }
    let logit_bias = match body.get("logit_bias") {
        None => None,
        Some(Value::Object(map)) => Some(
            map.iter()
                .map(|(id, bias)| {
                    let bias = bias.as_f64().ok_or_else(|| {
                        ApiError::wrong_type("logit_bias", "a map of token ids to numbers")
                    })?;
                    Ok((id.clone(), bias as f32))
                })
                .collect::<Result<BTreeMap<String, f32>, ApiError>>()?,
        ),
        Some(_) => {
            return Err(ApiError::wrong_type(
                "logit_bias",
                "a map of token ids to numbers",
            ))
        }
    };
    let include_usage = match body.get("stream_options") {
        None => false,
        Some(Value::Object(o)) => o
            .get("include_usage")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        Some(_) => return Err(ApiError::wrong_type("stream_options", "an object")),
    };
    let seed = match body.i64("seed")? {
        Some(s) => s as u64,
        None => fresh_seed(),
    };
    // stencil's `sampling` extra: any `SamplingConfig` key (DRY, Mirostat, XTC,
    // typical, scopes, ...); the request's own fields are laid over it.
    let base = match body.get("sampling") {
        None => SamplingConfig::default(),
        Some(v @ Value::Object(_)) => serde_json::from_value(v.clone())
            .map_err(|e| ApiError::invalid("sampling", format!("`sampling`: {e}")))?,
        Some(_) => {
            return Err(ApiError::wrong_type(
                "sampling",
                "an object of sampling settings",
            ))
        }
    };
    let f32_of =
        |name: &str| -> Result<Option<f32>, ApiError> { Ok(body.f64(name)?.map(|v| v as f32)) };
    let sampling = SamplingConfig {
        order: body
            .str("preset")?
            .map(|p| OrderSpec::Preset(p.to_string()))
            .or(base.order.clone()),
        seed: Some(seed),
        temperature: temperature.map(|t| t as f32).or(base.temperature),
        top_p: body.f64("top_p")?.or(base.top_p),
        top_k: body.i64("top_k")?.or(base.top_k),
        min_p: body.f64("min_p")?.or(base.min_p),
        typical_p: body.f64("typical_p")?.or(base.typical_p),
        presence_penalty: f32_of("presence_penalty")?.or(base.presence_penalty),
        frequency_penalty: f32_of("frequency_penalty")?.or(base.frequency_penalty),
        repetition_penalty: f32_of("repetition_penalty")?.or(base.repetition_penalty),
        min_tokens: body
            .u64("min_tokens")?
            .map(|n| n as usize)
            .or(base.min_tokens),
        logit_bias: logit_bias.or(base.logit_bias.clone()),
        stop: (!stop.is_empty()).then_some(stop).or(base.stop.clone()),
        ..base
    };
    Ok(Generation {
        sampling,
        seed,
        n: n as usize,
        max_tokens,
        logprobs,
        stream: body.bool("stream")?.unwrap_or(false),
        include_usage,
    })
}

/// A seed for a request that names none: different per request.
/// stencil's `reasoning` extra: `true` (a reasoning span before the reply, its
/// text returned as `reasoning_content`), `false`, or `{"max_tokens": N}` (the
/// span closed for the model after N tokens).
pub fn reasoning(body: &Body) -> Result<Option<Option<usize>>, ApiError> {
    let field = "reasoning";
    match body.get(field) {
        None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(None),
        Some(Value::Bool(true)) => Ok(Some(None)),
        Some(Value::Object(o)) => {
            if let Some(key) = o.keys().find(|k| k.as_str() != "max_tokens") {
                return Err(ApiError::invalid(
                    field,
                    format!("unknown field `reasoning.{key}` (known: max_tokens)"),
                ));
            }
            match o.get("max_tokens") {
                None | Some(Value::Null) => Ok(Some(None)),
                Some(n) => match n.as_u64().filter(|&n| n > 0) {
                    Some(n) => Ok(Some(Some(usize::try_from(n).unwrap_or(usize::MAX)))),
                    None => Err(ApiError::wrong_type(
                        "reasoning.max_tokens",
                        "a positive integer",
                    )),
                },
            }
        }
        Some(_) => Err(ApiError::wrong_type(
            field,
            "a boolean or an object with max_tokens",
        )),
    }
}

pub fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.finish()
}

/// An id such as `chatcmpl-3f9a...`: the prefix and 24 hex digits.
pub fn fresh_id(prefix: &str) -> String {
    format!("{prefix}{:016x}{:08x}", fresh_seed(), fresh_seed() as u32)
}
