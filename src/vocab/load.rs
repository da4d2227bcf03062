//! Loading a [`Vocabulary`] from a Hugging Face `tokenizer.json` (optionally
//! gzipped) with the `tokenizers` crate, and the EOS set from the
//! `tokenizer_config.json` beside it.
//!
//! How token strings map to bytes is read off the tokenizer's own pipeline: a
//! `ByteLevel` decoder or pre-tokenizer means GPT-2's byte map; otherwise pieces are
//! text, with `▁` meaning a space when the decoder or normalizer says so, and
//! `<0xNN>` meaning one raw byte when the model has byte fallback.

use std::io::Read;
use std::path::Path;

use serde_json::Value;
use tokenizers::Tokenizer;

use super::{byte_level_table, Vocabulary};

/// A tokenizer file that cannot be turned into a vocabulary.
#[derive(Debug, thiserror::Error)]
pub enum VocabError {
    #[error("cannot read {path}: {message}")]
    Io { path: String, message: String },
    #[error("{path}: not a tokenizer the `tokenizers` library can load: {message}")]
    Parse { path: String, message: String },
    #[error(
        "{path}: token {id} ({token:?}) contains {ch:?}, which is not in the byte-level alphabet"
    )]
    ByteLevel {
        path: String,
        id: u32,
        token: String,
        ch: char,
    },
}

/// How token strings become bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavour {
    ByteLevel,
    Pieces {
        metaspace: bool,
        byte_fallback: bool,
    },
}

fn mentions_type(value: &Value, wanted: &str) -> bool {
    match value {
        Value::Object(map) => {
            map.get("type").and_then(Value::as_str) == Some(wanted)
                || map.values().any(|v| mentions_type(v, wanted))
        }
        Value::Array(items) => items.iter().any(|v| mentions_type(v, wanted)),
        _ => false,
    }
}

fn flavour(json: &Value) -> Flavour {
    let decoder = &json["decoder"];
    if mentions_type(decoder, "ByteLevel") || mentions_type(&json["pre_tokenizer"], "ByteLevel") {
        return Flavour::ByteLevel;
    }
    let metaspace = mentions_type(decoder, "Metaspace")
        || mentions_type(&json["pre_tokenizer"], "Metaspace")
        || decoder.to_string().contains('\u{2581}')
        || json["normalizer"].to_string().contains('\u{2581}');
    let byte_fallback = json["model"]["byte_fallback"].as_bool() == Some(true)
        || mentions_type(decoder, "ByteFallback");
    Flavour::Pieces {
        metaspace,
        byte_fallback,
    }
}

/// `<0xNN>` -> NN.
fn byte_fallback_token(token: &str) -> Option<u8> {
    let hex = token.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

fn read_text(path: &Path) -> Result<String, VocabError> {
    let io = |e: std::io::Error| VocabError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let raw = std::fs::read(path).map_err(io)?;
    if path.extension().is_some_and(|e| e == "gz") {
        let mut text = String::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_string(&mut text)
            .map_err(io)?;
        Ok(text)
    } else {
        String::from_utf8(raw).map_err(|e| VocabError::Parse {
            path: path.display().to_string(),
            message: e.to_string(),
        })
    }
}

/// Loads the `tokenizers` tokenizer itself (for encoding text), `.gz` accepted.
pub fn load_tokenizer(path: impl AsRef<Path>) -> Result<Tokenizer, VocabError> {
    let path = path.as_ref();
    let text = read_text(path)?;
    Tokenizer::from_bytes(text.as_bytes()).map_err(|e| VocabError::Parse {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

/// The configured EOS token's content, from a `tokenizer_config.json` text.
fn configured_eos(config: &Value) -> Option<String> {
    match &config["eos_token"] {
        Value::String(s) => Some(s.clone()),
        Value::Object(map) => map.get("content").and_then(Value::as_str).map(String::from),
        _ => None,
    }
}

impl Vocabulary {
    /// Loads `tokenizer.json` (or `tokenizer.json.gz`) and, when present, the
    /// `tokenizer_config.json` in the same folder for the EOS token.
    pub fn from_tokenizer_file(path: impl AsRef<Path>) -> Result<Vocabulary, VocabError> {
        let path = path.as_ref();
        let text = read_text(path)?;
        let config_path = path.with_file_name("tokenizer_config.json");
        let config = std::fs::read_to_string(&config_path).ok();
        Self::from_tokenizer_json(&text, config.as_deref(), &path.display().to_string())
    }

    /// Builds from the text of a `tokenizer.json` and optionally of its config.
    /// `origin` names the source in error messages.
    pub fn from_tokenizer_json(
        json: &str,
        config: Option<&str>,
        origin: &str,
    ) -> Result<Vocabulary, VocabError> {
        let parse_error = |message: String| VocabError::Parse {
            path: origin.to_string(),
            message,
        };
        let tokenizer =
            Tokenizer::from_bytes(json.as_bytes()).map_err(|e| parse_error(e.to_string()))?;
        let value: Value = serde_json::from_str(json).map_err(|e| parse_error(e.to_string()))?;
        let flavour = flavour(&value);
        let vocab = tokenizer.get_vocab(true);
        let size = vocab.values().copied().max().map_or(0, |m| m as usize + 1);
        let added = tokenizer.get_added_tokens_decoder();
        let table = byte_level_table();

        let mut tokens = vec![Vec::new(); size];
        // Added tokens the tokenizer marks special (`<|im_end|>`, `<|eot_id|>`) are
        // read whole and no text spells them. The others (Qwen's `<tool_call>` and
        // `<think>`) are text the tokenizer writes as one token and decodes to its
        // content: they keep that content as their bytes, so a grammar's
        // `<tool_call>` accepts the model's own token.
        let mut special: Vec<(u32, String)> = added
            .iter()
            .filter(|(_, t)| t.special || t.content.is_empty())
            .map(|(&id, t)| (id, t.content.clone()))
            .collect();
        for (&id, t) in &added {
            if !t.special && !t.content.is_empty() {
                tokens[id as usize] = t.content.clone().into_bytes();
            }
        }
        for (text, &id) in &vocab {
            if added.contains_key(&id) {
                continue;
            }
            let bytes = match flavour {
                Flavour::ByteLevel => {
                    let mut bytes = Vec::with_capacity(text.len());
                    for ch in text.chars() {
                        match table.get(&ch) {
                            Some(&b) => bytes.push(b),
                            None => {
                                return Err(VocabError::ByteLevel {
                                    path: origin.to_string(),
                                    id,
                                    token: text.clone(),
                                    ch,
                                })
                            }
                        }
                    }
                    bytes
                }
                Flavour::Pieces {
                    metaspace,
                    byte_fallback,
                } => match byte_fallback_token(text).filter(|_| byte_fallback) {
                    Some(b) => vec![b],
                    None if metaspace => text.replace('\u{2581}', " ").into_bytes(),
                    None => text.clone().into_bytes(),
                },
            };
            tokens[id as usize] = bytes;
        }

        let mut eos = Vec::new();
        if let Some(config) = config.and_then(|c| serde_json::from_str::<Value>(c).ok()) {
            if let Some(id) =
                configured_eos(&config).and_then(|content| vocab.get(&content).copied())
            {
                eos.push(id);
            }
        }
        // An end-of-sequence token is read whole, whatever the tokenizer says.
        for &id in &eos {
            if let Some(t) = added.get(&id) {
                if !special.iter().any(|&(s, _)| s == id) {
                    special.push((id, t.content.clone()));
                }
            }
        }
        special.sort();
        Ok(Vocabulary::from_token_bytes(tokens, special, eos))
    }
}
