//! A tiny random-weight Llama written as a real GGUF file, with GPT-2's real
//! vocabulary in its metadata: the decode loop's tests run the same loading path as
//! a downloaded model, in well under a second per generation.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use candle_core::quantized::{gguf_file, GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use serde_json::Value;

pub const HIDDEN: usize = 64;
pub const LAYERS: usize = 2;
pub const HEADS: usize = 4;
pub const KV_HEADS: usize = 2;
pub const FEED_FORWARD: usize = 128;

pub fn gpt2_tokenizer_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizers/gpt2/tokenizer.json.gz")
}

fn gpt2_tokenizer_json() -> Value {
    use std::io::Read;
    let raw = std::fs::read(gpt2_tokenizer_path()).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(&raw[..])
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Deterministic weights in [-scale, scale).
fn random(shape: &[usize], seed: u64, scale: f32) -> Tensor {
    let n: usize = shape.iter().product();
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let data: Vec<f32> = (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect();
    Tensor::from_vec(data, shape, &Device::Cpu).unwrap()
}

fn ones(n: usize) -> Tensor {
    Tensor::ones(n, candle_core::DType::F32, &Device::Cpu).unwrap()
}

/// The directory `name` under the build's test scratch folder, made by `fill` the
/// first time: written under a name of this process's, then renamed into place,
/// so test binaries running at once never read a half-written file, and runs
/// reuse it instead of leaving a copy per process in the system's temp folder.
/// The contents are deterministic, so whichever writer wins is the same.
fn published_dir(name: &str, fill: impl FnOnce(&Path)) -> PathBuf {
    // Named after this file's text too: a changed generator writes anew.
    let version = {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut hasher = DefaultHasher::new();
        include_str!("tiny_model.rs").hash(&mut hasher);
        hasher.finish()
    };
    let name = format!("{name}-{version:016x}");
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = root.join(&name);
    if dir.is_dir() {
        return dir;
    }
    let staging = root.join(format!("{name}.{}.partial", std::process::id()));
    std::fs::create_dir_all(&staging).unwrap();
    fill(&staging);
    if std::fs::rename(&staging, &dir).is_err() {
        // Another process published it first.
        std::fs::remove_dir_all(&staging).ok();
        assert!(dir.is_dir(), "cannot publish {}", dir.display());
    }
    dir
}

/// Writes the model (once per build) and returns its path.
pub fn tiny_model() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        published_dir("stencil-tiny-q8", |dir| {
            write_tiny_model(&dir.join("tiny-llama.gguf"))
        })
        .join("tiny-llama.gguf")
    })
}

fn write_tiny_model(path: &Path) {
    let tokenizer = gpt2_tokenizer_json();
    let vocab = tokenizer["model"]["vocab"].as_object().unwrap();
    let size = vocab
        .values()
        .map(|v| v.as_u64().unwrap() as usize + 1)
        .max()
        .unwrap();
    let mut tokens = vec![String::new(); size];
    for (text, id) in vocab {
        tokens[id.as_u64().unwrap() as usize] = text.clone();
    }
    let mut types = vec![1i32; size];
    for added in tokenizer["added_tokens"].as_array().unwrap() {
        types[added["id"].as_u64().unwrap() as usize] = 3;
    }
    let merges: Vec<gguf_file::Value> = tokenizer["model"]["merges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let text = match m {
                Value::String(s) => s.clone(),
                Value::Array(pair) => format!(
                    "{} {}",
                    pair[0].as_str().unwrap(),
                    pair[1].as_str().unwrap()
                ),
                _ => panic!("merge {m}"),
            };
            gguf_file::Value::String(text)
        })
        .collect();

    let head_dim = HIDDEN / HEADS;
    let mut tensors: Vec<(String, Tensor)> = vec![
        ("token_embd.weight".into(), random(&[size, HIDDEN], 1, 1.0)),
        ("output_norm.weight".into(), ones(HIDDEN)),
        ("output.weight".into(), random(&[size, HIDDEN], 2, 1.0)),
    ];
    for layer in 0..LAYERS {
        let seed = 100 * (layer as u64 + 1);
        let p = |name: &str| format!("blk.{layer}.{name}.weight");
        tensors.extend([
            (p("attn_norm"), ones(HIDDEN)),
            (p("ffn_norm"), ones(HIDDEN)),
            (p("attn_q"), random(&[HIDDEN, HIDDEN], seed + 1, 0.2)),
            (
                p("attn_k"),
                random(&[KV_HEADS * head_dim, HIDDEN], seed + 2, 0.2),
            ),
            (
                p("attn_v"),
                random(&[KV_HEADS * head_dim, HIDDEN], seed + 3, 0.2),
            ),
            (p("attn_output"), random(&[HIDDEN, HIDDEN], seed + 4, 0.2)),
            (
                p("ffn_gate"),
                random(&[FEED_FORWARD, HIDDEN], seed + 5, 0.2),
            ),
            (p("ffn_up"), random(&[FEED_FORWARD, HIDDEN], seed + 6, 0.2)),
            (
                p("ffn_down"),
                random(&[HIDDEN, FEED_FORWARD], seed + 7, 0.2),
            ),
        ]);
    }
    let quantized: Vec<(String, QTensor)> = tensors
        .into_iter()
        // Matrices in Q8_0 as real checkpoints are (the quantized kernels are
        // what the batched forward pass must match row for row); norms in F32.
        .map(|(name, t)| {
            let dtype = if t.rank() == 2 {
                GgmlDType::Q8_0
            } else {
                GgmlDType::F32
            };
            (name, QTensor::quantize(&t, dtype).unwrap())
        })
        .collect();

    use gguf_file::Value as V;
    let metadata: Vec<(&str, V)> = vec![
        ("general.architecture", V::String("llama".into())),
        ("llama.block_count", V::U32(LAYERS as u32)),
        ("llama.context_length", V::U32(4096)),
        ("llama.embedding_length", V::U32(HIDDEN as u32)),
        ("llama.feed_forward_length", V::U32(FEED_FORWARD as u32)),
        ("llama.attention.head_count", V::U32(HEADS as u32)),
        ("llama.attention.head_count_kv", V::U32(KV_HEADS as u32)),
        ("llama.rope.dimension_count", V::U32(head_dim as u32)),
        ("llama.rope.freq_base", V::F32(10000.0)),
        ("llama.attention.layer_norm_rms_epsilon", V::F32(1e-5)),
        ("tokenizer.ggml.model", V::String("gpt2".into())),
        ("tokenizer.ggml.pre", V::String("gpt2".into())),
        (
            "tokenizer.ggml.tokens",
            V::Array(tokens.into_iter().map(V::String).collect()),
        ),
        (
            "tokenizer.ggml.token_type",
            V::Array(types.into_iter().map(V::I32).collect()),
        ),
        ("tokenizer.ggml.merges", V::Array(merges)),
        ("tokenizer.ggml.eos_token_id", V::U32(50256)),
        ("tokenizer.ggml.bos_token_id", V::U32(50256)),
    ];
    let metadata_refs: Vec<(&str, &V)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    let tensor_refs: Vec<(&str, &QTensor)> =
        quantized.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut file = std::fs::File::create(path).unwrap();
    gguf_file::write(&mut file, &metadata_refs, &tensor_refs).unwrap();
}

/// A tiny random-weight safetensors checkpoint (`model_type` "llama" or "qwen2"),
/// with `config.json` and GPT-2's `tokenizer.json` beside it, tied embeddings.
pub fn tiny_safetensors(model_type: &str) -> PathBuf {
    published_dir(&format!("stencil-tiny-{model_type}"), |dir| {
        write_tiny_safetensors(dir, model_type)
    })
}

fn write_tiny_safetensors(dir: &Path, model_type: &str) {
    let tokenizer = gpt2_tokenizer_json();
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
    std::fs::write(
        dir.join("tokenizer_config.json"),
        r#"{"eos_token": "<|endoftext|>", "bos_token": "<|endoftext|>"}"#,
    )
    .unwrap();
    let vocab = 50257;
    let head_dim = HIDDEN / HEADS;
    let config = serde_json::json!({
        "model_type": model_type,
        "vocab_size": vocab,
        "hidden_size": HIDDEN,
        "intermediate_size": FEED_FORWARD,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "tie_word_embeddings": true,
        "sliding_window": 4096,
        "max_window_layers": LAYERS,
        "use_sliding_window": false,
        "hidden_act": "silu",
        "bos_token_id": 50256,
        "eos_token_id": 50256,
    });
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let mut tensors = std::collections::HashMap::new();
    tensors.insert(
        "model.embed_tokens.weight".to_string(),
        random(&[vocab, HIDDEN], 11, 1.0),
    );
    tensors.insert("model.norm.weight".to_string(), ones(HIDDEN));
    for layer in 0..LAYERS {
        let seed = 1000 * (layer as u64 + 1);
        let p = |name: &str| format!("model.layers.{layer}.{name}");
        let kv = KV_HEADS * head_dim;
        let mut put = |name: String, t: Tensor| {
            tensors.insert(name, t);
        };
        put(p("input_layernorm.weight"), ones(HIDDEN));
        put(p("post_attention_layernorm.weight"), ones(HIDDEN));
        put(
            p("self_attn.q_proj.weight"),
            random(&[HIDDEN, HIDDEN], seed + 1, 0.2),
        );
        put(
            p("self_attn.k_proj.weight"),
            random(&[kv, HIDDEN], seed + 2, 0.2),
        );
        put(
            p("self_attn.v_proj.weight"),
            random(&[kv, HIDDEN], seed + 3, 0.2),
        );
        put(
            p("self_attn.o_proj.weight"),
            random(&[HIDDEN, HIDDEN], seed + 4, 0.2),
        );
        put(
            p("mlp.gate_proj.weight"),
            random(&[FEED_FORWARD, HIDDEN], seed + 5, 0.2),
        );
        put(
            p("mlp.up_proj.weight"),
            random(&[FEED_FORWARD, HIDDEN], seed + 6, 0.2),
        );
        put(
            p("mlp.down_proj.weight"),
            random(&[HIDDEN, FEED_FORWARD], seed + 7, 0.2),
        );
        if model_type == "qwen2" {
            put(p("self_attn.q_proj.bias"), random(&[HIDDEN], seed + 8, 0.1));
            put(p("self_attn.k_proj.bias"), random(&[kv], seed + 9, 0.1));
            put(p("self_attn.v_proj.bias"), random(&[kv], seed + 10, 0.1));
        }
    }
    candle_core::safetensors::save(&tensors, dir.join("model.safetensors")).unwrap();
}
