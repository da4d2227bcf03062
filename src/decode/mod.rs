//! The decode loop on candle: a real model writes, the grammar decides what it may
//! write (`stencil generate`).
//!
//! This is the last stage of the pipeline and the only one that knows about models:
//! [`model`] loads GGUF and safetensors checkpoints and gives each request its own
//! session (KV cache); [`llama`] is the GGUF Llama whose forward pass takes a whole
//! batch, on stencil's own [`q8_matmul`] product and CPU [`attention`], so a
//! sequence's logits never depend on its batch; [`tokenizer`] reads the model's tokenizer (a `tokenizer.json`
//! or the GGUF's own vocabulary) into the [`Vocabulary`](crate::vocab::Vocabulary)
//! the masks are built on; [`template`] renders the chat template; [`fetch`] gets the
//! built-in default model; [`mask`] writes grammar masks into logits tensors on their
//! device (for callers that sample there; the decode loop hands the raw row to the
//! sampling pipeline, whose grammar stage masks it);
//! [`generate`] is the batched loop that joins matcher, sampling and model, and
//! [`prefix_cache`] keeps recent prompts' rows for the prompts that begin alike; [`beams`]
//! runs beam search over the model with a KV branch per hypothesis.
//!
//! Behind the `decode` feature (on by default) so that engines embedding only the
//! matcher do not build candle.

pub mod attention;
pub mod beams;
pub mod fetch;
pub mod generate;
pub mod llama;
pub mod mask;
pub mod model;
pub mod prefix_cache;
pub mod q8_matmul;
pub mod reasoning;
pub mod template;
pub mod tokenizer;

pub use beams::Beam;
pub use generate::{ActiveRequest, Event, FinishReason, Generation, Generator, Request, Timings};
pub use model::{Model, Session};
pub use prefix_cache::PrefixCache;
pub use template::{render_chat, render_chat_json, Message};
pub use tokenizer::ModelTokenizer;

/// What can go wrong between a model file and a finished generation.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("model {path}: {message}")]
    Model { path: String, message: String },
    #[error("tokenizer {origin}: {message}")]
    Tokenizer { origin: String, message: String },
    #[error("chat template: {0}")]
    Template(String),
    #[error("device: {0}")]
    Device(String),
    #[error("default model: {0}")]
    Fetch(String),
    #[error("forward pass: {0}")]
    Forward(String),
    #[error("grammar: {0}")]
    Grammar(String),
    #[error("sampling: {0}")]
    Sampling(#[from] crate::sampling::SamplingError),
}

/// The compute device: the first CUDA GPU when built with `cuda` and one is present,
/// else the CPU.
pub fn default_device() -> candle_core::Device {
    #[cfg(feature = "cuda")]
    if let Ok(device) = candle_core::Device::new_cuda(0) {
        return device;
    }
    candle_core::Device::Cpu
}

/// The device named by `--device`: `auto` (as [`default_device`]), `cpu`, `cuda` or
/// `cuda:N`. A CUDA name in a build without the `cuda` feature is an error, not a
/// silent fallback to the CPU.
pub fn device_by_name(name: &str) -> Result<candle_core::Device, DecodeError> {
    let unknown = || {
        DecodeError::Device(format!(
            "unknown device {name:?} (expected auto, cpu, cuda or cuda:N)"
        ))
    };
    match name {
        "auto" => Ok(default_device()),
        "cpu" => Ok(candle_core::Device::Cpu),
        _ => {
            let ordinal = match name.strip_prefix("cuda") {
                Some("") => 0,
                Some(rest) => rest
                    .strip_prefix(':')
                    .and_then(|n| n.parse::<usize>().ok())
                    .ok_or_else(unknown)?,
                None => return Err(unknown()),
            };
            cuda_device(ordinal)
        }
    }
}

#[cfg(feature = "cuda")]
fn cuda_device(ordinal: usize) -> Result<candle_core::Device, DecodeError> {
    candle_core::Device::new_cuda(ordinal)
        .map_err(|e| DecodeError::Device(format!("cuda:{ordinal}: {}", model::candle_message(&e))))
}

#[cfg(not(feature = "cuda"))]
fn cuda_device(_ordinal: usize) -> Result<candle_core::Device, DecodeError> {
    Err(DecodeError::Device(
        "this stencil was built without the `cuda` feature".into(),
    ))
}
