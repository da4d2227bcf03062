//! Language models behind one small interface: feed tokens, get the next logits row.
//!
//! A [`Model`] is loaded once and shared; every request gets its own [`Session`]
//! (its KV cache), so requests never see each other's context. Weights are behind
//! `Arc`s inside candle's tensors, which makes a session a cheap clone of the model
//! with an empty cache.
//!
//! Supported: GGUF files of the Llama family (batched, [`super::llama`]: Llama, Mistral,
//! SmolLM...), and safetensors folders (`config.json` + `*.safetensors`) of Llama and
//! Qwen2 checkpoints.

use std::path::{Path, PathBuf};

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::{llama, qwen2};

use super::llama::{BatchItem, BatchedLlama, KvCache};
use super::DecodeError;

/// Where the weights came from and which architecture runs them.
#[derive(Clone)]
enum Weights {
    /// Batched: sessions of a GGUF model go through one forward pass together
    /// ([`Model::forward_batch`]).
    Gguf(std::sync::Arc<BatchedLlama>),
    Llama {
        model: llama::Llama,
        config: llama::Config,
        dtype: DType,
    },
    Qwen2(qwen2::ModelForCausalLM),
}

/// A loaded model, shared by every request.
#[derive(Clone)]
pub struct Model {
    weights: Weights,
    device: Device,
    /// Width of a logits row (may exceed the tokenizer's vocabulary: padding ids).
    logits_width: usize,
    /// GGUF metadata (tokenizer, chat template) when the model is a GGUF file.
    gguf_metadata: Option<std::collections::HashMap<String, gguf_file::Value>>,
    path: PathBuf,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("path", &self.path)
            .field("logits_width", &self.logits_width)
            .finish()
    }
}

/// One request's view of the model: its own KV cache and position.
pub struct Session {
    weights: SessionWeights,
    device: Device,
    position: usize,
    forward_passes: usize,
}

enum SessionWeights {
    Gguf {
        model: std::sync::Arc<BatchedLlama>,
        cache: KvCache,
    },
    Llama {
        model: llama::Llama,
        cache: llama::Cache,
    },
    Qwen2(qwen2::ModelForCausalLM),
}

/// candle's message without the backtrace it appends under `RUST_BACKTRACE`.
pub(crate) fn candle_message(e: &candle_core::Error) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}

fn candle(path: &Path) -> impl Fn(candle_core::Error) -> DecodeError + '_ {
    move |e| DecodeError::Model {
        path: path.display().to_string(),
        message: candle_message(&e),
    }
}

impl Model {
    /// Loads a `.gguf` file or a safetensors folder onto `device`.
    pub fn load(path: &Path, device: &Device) -> Result<Model, DecodeError> {
        if path.is_dir() {
            Self::load_safetensors(path, device)
        } else {
            Self::load_gguf(path, device)
        }
    }

    fn load_gguf(path: &Path, device: &Device) -> Result<Model, DecodeError> {
        let err = candle(path);
        let mut file = std::fs::File::open(path).map_err(|e| DecodeError::Model {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        let content = gguf_file::Content::read(&mut file).map_err(&err)?;
        let architecture = content
            .metadata
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default();
        if architecture != "llama" {
            return Err(DecodeError::Model {
                path: path.display().to_string(),
                message: format!(
                    "GGUF architecture `{architecture}` is not supported (supported: llama and \
                     its relatives stored with llama.* keys; for Qwen2 use a safetensors folder)"
                ),
            });
        }
        let logits_width = content
            .tensor_infos
            .get("output.weight")
            .or_else(|| content.tensor_infos.get("token_embd.weight"))
            .and_then(|info| info.shape.dims().first().copied())
            .ok_or_else(|| DecodeError::Model {
                path: path.display().to_string(),
                message: "no output.weight or token_embd.weight tensor".into(),
            })?;
        let metadata = content.metadata.clone();
        let weights = if needs_requantization(&content) {
            let (content, mut rewritten) = requantize(content, &mut file).map_err(&err)?;
            BatchedLlama::from_gguf(&content, &mut rewritten, device)
        } else {
            BatchedLlama::from_gguf(&content, &mut file, device)
        }
        .map_err(&err)?;
        Ok(Model {
            weights: Weights::Gguf(std::sync::Arc::new(weights)),
            device: device.clone(),
            logits_width,
            gguf_metadata: Some(metadata),
            path: path.to_path_buf(),
        })
    }

    fn load_safetensors(dir: &Path, device: &Device) -> Result<Model, DecodeError> {
        let err = candle(dir);
        let io = |message: String| DecodeError::Model {
            path: dir.display().to_string(),
            message,
        };
        let config_text = std::fs::read_to_string(dir.join("config.json"))
            .map_err(|e| io(format!("config.json: {e}")))?;
        let config: serde_json::Value =
            serde_json::from_str(&config_text).map_err(|e| io(format!("config.json: {e}")))?;
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| io(e.to_string()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(io("no *.safetensors files".into()));
        }
        let dtype = if device.is_cpu() {
            DType::F32
        } else {
            DType::BF16
        };
        // SAFETY: the files are memory-mapped read-only; modifying them while the
        // process runs is outside what any loader can defend against.
        let vb =
            unsafe { VarBuilder::from_mmaped_safetensors(&files, dtype, device) }.map_err(&err)?;
        let model_type = config["model_type"].as_str().unwrap_or("llama");
        let (weights, logits_width) = match model_type {
            "qwen2" => {
                let cfg: qwen2::Config =
                    serde_json::from_value(config).map_err(|e| io(format!("config.json: {e}")))?;
                let width = cfg.vocab_size;
                (
                    Weights::Qwen2(qwen2::ModelForCausalLM::new(&cfg, vb).map_err(&err)?),
                    width,
                )
            }
            "llama" | "mistral" => {
                let cfg: llama::LlamaConfig =
                    serde_json::from_value(config).map_err(|e| io(format!("config.json: {e}")))?;
                let cfg = cfg.into_config(false);
                let width = cfg.vocab_size;
                let model = llama::Llama::load(vb, &cfg).map_err(&err)?;
                (
                    Weights::Llama {
                        model,
                        config: cfg,
                        dtype,
                    },
                    width,
                )
            }
            other => {
                return Err(io(format!(
                    "model_type `{other}` is not supported (supported: llama, mistral, qwen2)"
                )))
            }
        };
        Ok(Model {
            weights,
            device: device.clone(),
            logits_width,
            gguf_metadata: None,
            path: dir.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Width of a logits row.
    pub fn logits_width(&self) -> usize {
        self.logits_width
    }

    /// The GGUF file's metadata (for its tokenizer and chat template), if any.
    pub fn gguf_metadata(&self) -> Option<&std::collections::HashMap<String, gguf_file::Value>> {
        self.gguf_metadata.as_ref()
    }

    /// A fresh session with an empty KV cache.
    pub fn session(&self) -> Result<Session, DecodeError> {
        let weights = match &self.weights {
            Weights::Gguf(m) => SessionWeights::Gguf {
                model: std::sync::Arc::clone(m),
                cache: KvCache::default(),
            },
            Weights::Llama {
                model,
                config,
                dtype,
            } => SessionWeights::Llama {
                model: model.clone(),
                cache: llama::Cache::new(true, *dtype, config, &self.device)
                    .map_err(candle(&self.path))?,
            },
            Weights::Qwen2(m) => {
                let mut m = m.clone();
                m.clear_kv_cache();
                SessionWeights::Qwen2(m)
            }
        };
        Ok(Session {
            weights,
            device: self.device.clone(),
            position: 0,
            forward_passes: 0,
        })
    }
}

/// Quantization types for which candle has no SIMD dot product on the CPU: a Q4_1
/// model runs about 5x slower than the same model in Q8_0.
const SLOW_TYPES: [GgmlDType; 4] = [
    GgmlDType::Q4_1,
    GgmlDType::Q5_0,
    GgmlDType::Q5_1,
    GgmlDType::Q8_1,
];

fn needs_requantization(content: &gguf_file::Content) -> bool {
    content
        .tensor_infos
        .values()
        .any(|t| SLOW_TYPES.contains(&t.ggml_dtype))
}

/// Rewrites the file in memory with every slow-type tensor requantized to Q8_0
/// (dequantized exactly, then rounded to 8 bits per 32-weight block: the added error
/// is at most half a Q8_0 step, about 8x below the 4-bit format's own).
fn requantize(
    content: gguf_file::Content,
    file: &mut std::fs::File,
) -> candle_core::Result<(gguf_file::Content, std::io::Cursor<Vec<u8>>)> {
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let mut tensors = Vec::with_capacity(names.len());
    for name in names {
        let tensor = content.tensor(file, name, &Device::Cpu)?;
        let divisible = tensor.shape().dims().last().is_some_and(|d| d % 32 == 0);
        let tensor = if SLOW_TYPES.contains(&tensor.dtype()) && divisible {
            QTensor::quantize(&tensor.dequantize(&Device::Cpu)?, GgmlDType::Q8_0)?
        } else {
            tensor
        };
        tensors.push((name.clone(), tensor));
    }
    let metadata: Vec<(&str, &gguf_file::Value)> = content
        .metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let tensor_refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut buffer = std::io::Cursor::new(Vec::new());
    gguf_file::write(&mut buffer, &metadata, &tensor_refs)?;
    buffer.set_position(0);
    let rewritten = gguf_file::Content::read(&mut buffer)?;
    Ok((rewritten, buffer))
}

impl Session {
    /// Feeds `tokens` (one forward pass, however many) and returns the logits for the
    /// position after the last one, still on the model's device.
    pub fn forward_tensor(&mut self, tokens: &[u32]) -> Result<Tensor, DecodeError> {
        let to_error = |e: candle_core::Error| DecodeError::Forward(candle_message(&e));
        if tokens.is_empty() {
            return Err(DecodeError::Forward("forward pass over no tokens".into()));
        }
        let input = Tensor::new(tokens, &self.device)
            .and_then(|t| t.unsqueeze(0))
            .map_err(to_error)?;
        let logits = match &mut self.weights {
            SessionWeights::Gguf { model, cache } => model
                .forward(&mut [BatchItem { cache, tokens }])
                .and_then(|rows| rows.get(0)),
            SessionWeights::Llama { model, cache } => model.forward(&input, self.position, cache),
            SessionWeights::Qwen2(m) => m.forward(&input, self.position),
        }
        .map_err(to_error)?;
        self.position += tokens.len();
        self.forward_passes += 1;
        logits
            .flatten_all()
            .and_then(|t| t.to_dtype(DType::F32))
            .map_err(to_error)
    }

    /// Feeds each session its tokens (none may be empty) and returns each one's
    /// logits row, on the device. Sessions of a GGUF model share one forward
    /// pass (one matrix product per weight for the whole batch); the others run
    /// one after another. A session's logits do not depend on the batch.
    pub fn forward_batch(
        sessions: &mut [&mut Session],
        tokens: &[&[u32]],
    ) -> Result<Vec<Tensor>, DecodeError> {
        let to_error = |e: candle_core::Error| DecodeError::Forward(candle_message(&e));
        let mut rows: Vec<Option<Tensor>> = vec![None; sessions.len()];
        let mut model = None;
        let mut items = Vec::new();
        let mut batched = Vec::new();
        for (i, session) in sessions.iter_mut().enumerate() {
            // Two matches: one by `&mut` that fails would keep `session` borrowed
            // for the cache it never bound.
            let SessionWeights::Gguf { .. } = session.weights else {
                rows[i] = Some(session.forward_tensor(tokens[i])?);
                continue;
            };
            let SessionWeights::Gguf { model: m, cache } = &mut session.weights else {
                unreachable!("matched above")
            };
            if tokens[i].is_empty() {
                return Err(DecodeError::Forward("forward pass over no tokens".into()));
            }
            model.get_or_insert_with(|| std::sync::Arc::clone(m));
            items.push(BatchItem {
                cache,
                tokens: tokens[i],
            });
            batched.push(i);
        }
        if let Some(model) = model {
            let logits = model.forward(&mut items).map_err(to_error)?;
            drop(items);
            for (row, i) in batched.into_iter().enumerate() {
                sessions[i].position += tokens[i].len();
                sessions[i].forward_passes += 1;
                let r = logits
                    .get(row)
                    .and_then(|t| t.to_dtype(DType::F32))
                    .map_err(to_error)?;
                rows[i] = Some(r);
            }
        }
        Ok(rows
            .into_iter()
            .map(|r| r.expect("every session ran"))
            .collect())
    }

    /// [`forward_tensor`](Self::forward_tensor), copied to the host.
    pub fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>, DecodeError> {
        let logits = self.forward_tensor(tokens)?;
        logits
            .to_vec1::<f32>()
            .map_err(|e| DecodeError::Forward(e.to_string()))
    }

    /// A second session that continues from this one's tokens: the KV cache
    /// copied, so the two then go their own ways (`n` samples of one prompt, beam
    /// search's branches) without feeding the shared prefix twice.
    pub fn fork(&self) -> Session {
        let weights = match &self.weights {
            SessionWeights::Gguf { model, cache } => SessionWeights::Gguf {
                model: std::sync::Arc::clone(model),
                cache: cache.clone(),
            },
            SessionWeights::Llama { model, cache } => SessionWeights::Llama {
                model: model.clone(),
                cache: cache.clone(),
            },
            // candle's Qwen2 keeps its cache inside the model; its tensors are
            // immutable and shared until either side appends.
            SessionWeights::Qwen2(m) => SessionWeights::Qwen2(m.clone()),
        };
        Session {
            weights,
            device: self.device.clone(),
            position: self.position,
            forward_passes: self.forward_passes,
        }
    }

    /// Tokens fed so far.
    pub fn position(&self) -> usize {
        self.position
    }

    /// A copy of the key/value rows of this session's first `positions` tokens
    /// ([`super::PrefixCache`]): `None` unless a GGUF model on the CPU holds them.
    pub(crate) fn kv_prefix(&self, positions: usize) -> Option<KvCache> {
        match &self.weights {
            SessionWeights::Gguf { cache, .. } => cache.prefix(positions),
            _ => None,
        }
    }

    /// Bytes of key/value rows one position takes on the host (0 for a model
    /// that keeps none there, or a session that has fed nothing).
    pub(crate) fn kv_bytes_per_position(&self) -> usize {
        match &self.weights {
            SessionWeights::Gguf { cache, .. } => {
                cache.bytes().checked_div(cache.position()).unwrap_or(0)
            }
            _ => 0,
        }
    }

    /// Starts this session, which has fed nothing yet, from `kv`'s rows: as if
    /// their tokens had been fed. `false` (and nothing changes) for a session
    /// that has fed tokens or a model that keeps no such rows.
    pub(crate) fn resume_from(&mut self, kv: KvCache) -> bool {
        match &mut self.weights {
            SessionWeights::Gguf { cache, .. } if self.position == 0 => {
                self.position = kv.position();
                *cache = kv;
                true
            }
            _ => false,
        }
    }

    /// Forward passes run so far.
    pub fn forward_passes(&self) -> usize {
        self.forward_passes
    }
}
