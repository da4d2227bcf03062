//! The model's tokenizer: prompt encoding, the byte vocabulary the masks are built on,
//! and what the chat template needs (template text, BOS/EOS).
//!
//! Two sources: a `tokenizer.json` (+ `tokenizer_config.json`) beside the model, or
//! the vocabulary stored in a GGUF file's metadata. A GGUF vocabulary is rewritten as
//! the equivalent `tokenizer.json` document and loaded through the same path as a
//! file, so token bytes are derived by exactly one piece of code
//! ([`Vocabulary::from_tokenizer_json`]) whatever the source.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use candle_core::quantized::gguf_file::Value as GgufValue;
use serde_json::{json, Value};
use tokenizers::Tokenizer;

use super::DecodeError;
use crate::vocab::Vocabulary;

/// Llama-3's pre-tokenizer split (also DeepSeek-V3's "llama-bpe" files).
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Qwen2's pre-tokenizer split: like Llama-3's, one digit at a time.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Everything the decode loop needs from the tokenizer.
#[derive(Clone)]
pub struct ModelTokenizer {
    tokenizer: Tokenizer,
    vocab: Arc<Vocabulary>,
    chat_template: Option<String>,
    bos: Option<(u32, String)>,
    eos: Option<(u32, String)>,
    add_bos: bool,
    /// Approximations made while reading the source, for the user to see.
    warnings: Vec<String>,
}

impl std::fmt::Debug for ModelTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelTokenizer")
            .field("vocab", &self.vocab)
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .finish()
    }
}

fn tokenizer_error(origin: &str) -> impl Fn(String) -> DecodeError + '_ {
    move |message| DecodeError::Tokenizer {
        origin: origin.to_string(),
        message,
    }
}

impl ModelTokenizer {
    /// `tokenizer.json` (or `.json.gz`), with `tokenizer_config.json` beside it for
    /// the chat template, BOS and EOS.
    pub fn from_file(path: &Path) -> Result<ModelTokenizer, DecodeError> {
        let origin = path.display().to_string();
        let err = tokenizer_error(&origin);
        let tokenizer = crate::vocab::load_tokenizer(path).map_err(|e| err(e.to_string()))?;
        let vocab = Vocabulary::from_tokenizer_file(path).map_err(|e| err(e.to_string()))?;
        let config: Value = std::fs::read_to_string(path.with_file_name("tokenizer_config.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null);
        let token_named = |key: &str| -> Option<(u32, String)> {
            let content = match &config[key] {
                Value::String(s) => s.clone(),
                Value::Object(m) => m.get("content")?.as_str()?.to_string(),
                _ => return None,
            };
            Some((tokenizer.token_to_id(&content)?, content))
        };
        let chat_template = match &config["chat_template"] {
            Value::String(s) => Some(s.clone()),
            // A list of named templates: the one called "default".
            Value::Array(list) => list
                .iter()
                .find(|t| t["name"] == "default")
                .or(list.first())
                .and_then(|t| t["template"].as_str())
                .map(String::from),
            _ => None,
        };
        Ok(ModelTokenizer {
            bos: token_named("bos_token"),
            eos: token_named("eos_token"),
            add_bos: config["add_bos_token"].as_bool().unwrap_or(false),
            tokenizer,
            vocab: Arc::new(vocab),
            chat_template,
            warnings: Vec::new(),
        })
    }

    /// The vocabulary stored in a GGUF file's metadata (`tokenizer.ggml.*`).
    pub fn from_gguf(
        metadata: &HashMap<String, GgufValue>,
        origin: &str,
    ) -> Result<ModelTokenizer, DecodeError> {
        let err = tokenizer_error(origin);
        let document = GgufVocab::read(metadata).map_err(|e| err(e.to_string()))?;
        let (json, warnings) = document.to_tokenizer_json();
        let text = json.to_string();
        let tokenizer = Tokenizer::from_bytes(text.as_bytes()).map_err(|e| err(e.to_string()))?;
        let name = |id: Option<u32>| {
            id.and_then(|id| Some((id, document.tokens.get(id as usize)?.clone())))
        };
        let eos = name(document.eos);
        let config = json!({ "eos_token": eos.as_ref().map(|(_, s)| s.clone()) }).to_string();
        let mut vocab = Vocabulary::from_tokenizer_json(&text, Some(&config), origin)
            .map_err(|e| err(e.to_string()))?;
        // End-of-turn tokens end a reply just as EOS does.
        vocab.add_eos(&document.eot);
        Ok(ModelTokenizer {
            tokenizer,
            vocab: Arc::new(vocab),
            chat_template: document.chat_template.clone(),
            bos: name(document.bos),
            eos,
            add_bos: document.add_bos,
            warnings,
        })
    }

    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    pub fn bos(&self) -> Option<&(u32, String)> {
        self.bos.as_ref()
    }

    pub fn eos(&self) -> Option<&(u32, String)> {
        self.eos.as_ref()
    }

    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Token id of a special token's text, e.g. `<|im_end|>`.
    pub fn token_id(&self, content: &str) -> Option<u32> {
        self.tokenizer.token_to_id(content)
    }

    /// Encodes text; special tokens written in it (`<|im_start|>`) are recognized.
    /// BOS is prepended when the tokenizer asks for it and the text lacks it.
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<u32>, DecodeError> {
        let mut ids = self.encode(text)?;
        if let (true, Some((bos, _))) = (self.add_bos, &self.bos) {
            if ids.first() != Some(bos) {
                ids.insert(0, *bos);
            }
        }
        Ok(ids)
    }

    /// Encodes text without adding anything (the canonical tokens of `text`).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, DecodeError> {
        self.tokenizer
            .encode(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| DecodeError::Tokenizer {
                origin: "prompt".into(),
                message: e.to_string(),
            })
    }
}

/// The `tokenizer.ggml.*` keys of a GGUF file.
struct GgufVocab {
    model: String,
    pre: Option<String>,
    tokens: Vec<String>,
    token_types: Vec<i32>,
    scores: Vec<f32>,
    merges: Vec<String>,
    bos: Option<u32>,
    eos: Option<u32>,
    eot: Vec<u32>,
    unknown: Option<u32>,
    add_bos: bool,
    add_space_prefix: bool,
    chat_template: Option<String>,
}

/// GGUF token types (llama.cpp's `llama_token_type`).
const TOKEN_TYPE_UNKNOWN: i32 = 2;
const TOKEN_TYPE_CONTROL: i32 = 3;
const TOKEN_TYPE_USER_DEFINED: i32 = 4;

/// Why a GGUF file's metadata holds no usable vocabulary.
#[derive(Debug, thiserror::Error)]
enum GgufVocabError {
    #[error("the GGUF file has no tokenizer (tokenizer.ggml.model); pass --tokenizer")]
    NoTokenizer,
    #[error("the GGUF file has no tokenizer.ggml.tokens; pass --tokenizer")]
    NoTokens,
    #[error("{key}: {message}")]
    BadValue { key: &'static str, message: String },
}

impl GgufVocab {
    fn read(md: &HashMap<String, GgufValue>) -> Result<GgufVocab, GgufVocabError> {
        let get = |key: &str| md.get(key);
        let string = |key: &str| get(key).and_then(|v| v.to_string().ok()).cloned();
        let id = |key: &str| get(key).and_then(|v| v.to_u32().ok());
        // A GGUF array, each element read with `read` (empty when the key is absent).
        fn array<T>(
            md: &HashMap<String, GgufValue>,
            key: &'static str,
            read: impl Fn(&GgufValue) -> candle_core::Result<T>,
        ) -> Result<Vec<T>, GgufVocabError> {
            let bad = |e: candle_core::Error| GgufVocabError::BadValue {
                key,
                message: e.to_string(),
            };
            match md.get(key) {
                Some(v) => v
                    .to_vec()
                    .map_err(bad)?
                    .iter()
                    .map(|t| read(t).map_err(bad))
                    .collect(),
                None => Ok(Vec::new()),
            }
        }
        let strings = |key| array(md, key, |v| v.to_string().cloned());
        let model = string("tokenizer.ggml.model").ok_or(GgufVocabError::NoTokenizer)?;
        let tokens = strings("tokenizer.ggml.tokens")?;
        if tokens.is_empty() {
            return Err(GgufVocabError::NoTokens);
        }
        let token_types = array(md, "tokenizer.ggml.token_type", GgufValue::to_i32)?;
        let scores = array(md, "tokenizer.ggml.scores", GgufValue::to_f32)?;
        let eot = ["tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"]
            .iter()
            .filter_map(|k| id(k))
            .collect();
        Ok(GgufVocab {
            pre: string("tokenizer.ggml.pre"),
            merges: strings("tokenizer.ggml.merges")?,
            bos: id("tokenizer.ggml.bos_token_id"),
            eos: id("tokenizer.ggml.eos_token_id"),
            unknown: id("tokenizer.ggml.unknown_token_id"),
            add_bos: get("tokenizer.ggml.add_bos_token")
                .and_then(|v| v.to_bool().ok())
                .unwrap_or(model == "llama"),
            add_space_prefix: get("tokenizer.ggml.add_space_prefix")
                .and_then(|v| v.to_bool().ok())
                .unwrap_or(true),
            chat_template: string("tokenizer.chat_template"),
            eot,
            model,
            tokens,
            token_types,
            scores,
        })
    }

    fn added_tokens(&self) -> Vec<Value> {
        self.token_types
            .iter()
            .enumerate()
            .filter(|(_, &t)| {
                matches!(
                    t,
                    TOKEN_TYPE_UNKNOWN | TOKEN_TYPE_CONTROL | TOKEN_TYPE_USER_DEFINED
                )
            })
            .map(|(id, &t)| {
                json!({
                    "id": id,
                    "content": self.tokens[id],
                    "single_word": false,
                    "lstrip": false,
                    "rstrip": false,
                    "normalized": false,
                    "special": t != TOKEN_TYPE_USER_DEFINED,
                })
            })
            .collect()
    }

    /// The equivalent `tokenizer.json` document, and what had to be approximated.
    fn to_tokenizer_json(&self) -> (Value, Vec<String>) {
        let mut warnings = Vec::new();
        let document = if self.model == "gpt2" {
            let byte_level = |use_regex: bool| {
                json!({"type": "ByteLevel", "add_prefix_space": false,
                       "trim_offsets": true, "use_regex": use_regex})
            };
            let split = |pattern: &str| {
                json!({"type": "Split", "pattern": {"Regex": pattern},
                       "behavior": "Isolated", "invert": false})
            };
            let pre_tokenizer = match self.pre.as_deref().unwrap_or("default") {
                "default" | "gpt2" | "gpt-2" => byte_level(true),
                "smollm" => json!({"type": "Sequence", "pretokenizers": [
                    {"type": "Digits", "individual_digits": true}, byte_level(true)]}),
                "llama-bpe" | "llama3" | "deepseek-v3" => json!({"type": "Sequence",
                    "pretokenizers": [split(LLAMA3_SPLIT), byte_level(false)]}),
                "qwen2" => json!({"type": "Sequence",
                    "pretokenizers": [split(QWEN2_SPLIT), byte_level(false)]}),
                other => {
                    warnings.push(format!(
                        "GGUF pre-tokenizer `{other}` is not known to stencil: prompts are \
                         split with GPT-2's rule (pass --tokenizer for the exact one); masks \
                         are unaffected"
                    ));
                    byte_level(true)
                }
            };
            let vocab: serde_json::Map<String, Value> = self
                .tokens
                .iter()
                .enumerate()
                .map(|(id, t)| (t.clone(), json!(id)))
                .collect();
            json!({
                "version": "1.0",
                "added_tokens": self.added_tokens(),
                "normalizer": null,
                "pre_tokenizer": pre_tokenizer,
                "post_processor": null,
                "decoder": {"type": "ByteLevel", "add_prefix_space": false,
                            "trim_offsets": true, "use_regex": true},
                "model": {"type": "BPE", "dropout": null, "unk_token": null,
                          "continuing_subword_prefix": null, "end_of_word_suffix": null,
                          "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                          "vocab": vocab, "merges": self.merges},
            })
        } else {
            if self.model != "llama" {
                warnings.push(format!(
                    "GGUF tokenizer model `{}` read as SentencePiece (`llama`)",
                    self.model
                ));
            }
            // SentencePiece: pieces with scores. llama.cpp merges by score; a Unigram
            // model over the same scores tokenizes prompts the same way in the common
            // case. Token bytes (and so masks) do not depend on this choice.
            warnings.push(
                "SentencePiece vocabulary from GGUF: prompts are tokenized by a Unigram \
                 model over the file's scores (pass --tokenizer for the exact tokenizer)"
                    .into(),
            );
            let vocab: Vec<Value> = self
                .tokens
                .iter()
                .enumerate()
                .map(|(id, t)| json!([t, self.scores.get(id).copied().unwrap_or(0.0)]))
                .collect();
            let normalizer = if self.add_space_prefix {
                json!({"type": "Sequence", "normalizers": [
                    {"type": "Prepend", "prepend": "\u{2581}"},
                    {"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"}]})
            } else {
                json!({"type": "Replace", "pattern": {"String": " "}, "content": "\u{2581}"})
            };
            json!({
                "version": "1.0",
                "added_tokens": self.added_tokens(),
                "normalizer": normalizer,
                "pre_tokenizer": null,
                "post_processor": null,
                "decoder": {"type": "Sequence", "decoders": [
                    {"type": "Replace", "pattern": {"String": "\u{2581}"}, "content": " "},
                    {"type": "ByteFallback"}, {"type": "Fuse"}]},
                "model": {"type": "Unigram", "unk_id": self.unknown.unwrap_or(0),
                          "vocab": vocab, "byte_fallback": true},
            })
        };
        (document, warnings)
    }
}
