//! `stencil.Tokenizer`: a vocabulary (token id -> exact bytes, EOS set) and the
//! `tokenizers` encoder that turns forced bytes into canonical tokens
//! (jump-forward).
//!
//! Both are read from one `tokenizer.json` text, through the library's loader
//! ([`Vocabulary::from_tokenizer_json`]), so token bytes are derived by the same
//! code as in the CLI. A [`Compiler`](crate::compiler::Compiler) takes a snapshot
//! ([`Tokenizer::snapshot`]): `add_eos` affects compilers made after it.

use std::sync::{Arc, Mutex, PoisonError};

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use stencil::vocab::{VocabError, Vocabulary};

use crate::{guard, value_error};

/// What a compiled grammar keeps of its tokenizer.
pub(crate) struct TokenizerParts {
    pub vocab: Arc<Vocabulary>,
    /// `None` when the tokenizer text could not be loaded for encoding (never for
    /// a text the vocabulary loader accepted: both use `tokenizers`).
    pub encoder: Option<tokenizers::Tokenizer>,
}

impl TokenizerParts {
    /// The canonical tokens of `text`, nothing added.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        self.encoder
            .as_ref()
            .and_then(|t| t.encode(text, false).ok())
            .map(|e| e.get_ids().to_vec())
            .unwrap_or_default()
    }
}

/// A tokenizer's vocabulary: token ids, their exact bytes, the EOS ids.
#[pyclass(frozen, module = "stencil._stencil")]
pub struct Tokenizer {
    parts: Mutex<Arc<TokenizerParts>>,
}

fn vocab_error(error: VocabError) -> PyErr {
    match error {
        VocabError::Io { .. } => PyOSError::new_err(error.to_string()),
        _ => value_error(error),
    }
}

impl Tokenizer {
    fn new(vocab: Vocabulary, json: &str) -> Tokenizer {
        let encoder = tokenizers::Tokenizer::from_bytes(json.as_bytes()).ok();
        Tokenizer {
            parts: Mutex::new(Arc::new(TokenizerParts {
                vocab: Arc::new(vocab),
                encoder,
            })),
        }
    }

    /// The vocabulary as it is now (what a compiler made now is bound to).
    pub(crate) fn snapshot(&self) -> Arc<TokenizerParts> {
        Arc::clone(&self.parts.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[pymethods]
impl Tokenizer {
    /// Loads `tokenizer.json` (or `tokenizer.json.gz`); the EOS token comes from
    /// `tokenizer_config.json` beside it when present.
    #[staticmethod]
    fn from_file(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Tokenizer> {
        guard(|| {
            py.detach(|| {
                let vocab = Vocabulary::from_tokenizer_file(&path).map_err(vocab_error)?;
                let encoder = stencil::vocab::load_tokenizer(&path).ok();
                Ok(Tokenizer {
                    parts: Mutex::new(Arc::new(TokenizerParts {
                        vocab: Arc::new(vocab),
                        encoder,
                    })),
                })
            })
        })
    }

    /// Reads the text of a `tokenizer.json`; `config` is the text of its
    /// `tokenizer_config.json` (for the EOS token), if any.
    #[staticmethod]
    #[pyo3(signature = (text, config = None))]
    fn from_json(py: Python<'_>, text: &str, config: Option<&str>) -> PyResult<Tokenizer> {
        guard(|| {
            py.detach(|| {
                let vocab = Vocabulary::from_tokenizer_json(text, config, "tokenizer JSON")
                    .map_err(vocab_error)?;
                Ok(Tokenizer::new(vocab, text))
            })
        })
    }

    /// A Hugging Face tokenizer: a `transformers` fast tokenizer (its
    /// `backend_tokenizer`) or a `tokenizers.Tokenizer`. Its `eos_token_id`, when
    /// it has one, is an EOS id.
    #[staticmethod]
    fn from_huggingface(py: Python<'_>, tokenizer: &Bound<'_, PyAny>) -> PyResult<Tokenizer> {
        guard(|| {
            let backend = match tokenizer.getattr("backend_tokenizer") {
                Ok(backend) => backend,
                Err(_) => tokenizer.clone(),
            };
            let text: String = backend
                .call_method0("to_str")
                .map_err(|_| {
                    pyo3::exceptions::PyTypeError::new_err(
                        "from_huggingface takes a transformers fast tokenizer or a \
                         tokenizers.Tokenizer (an object with .to_str())",
                    )
                })?
                .extract()?;
            let eos: Option<u32> = tokenizer
                .getattr("eos_token_id")
                .ok()
                .and_then(|id| id.extract().ok());
            let mut vocab = py.detach(|| {
                Vocabulary::from_tokenizer_json(&text, None, "Hugging Face tokenizer")
                    .map_err(vocab_error)
            })?;
            if let Some(eos) = eos.filter(|&id| (id as usize) < vocab.len()) {
                vocab.add_eos(&[eos]);
            }
            Ok(Tokenizer::new(vocab, &text))
        })
    }

    /// Number of token ids (the largest id + 1); the bitmask needs
    /// `ceil(vocab_size / 32)` words per row (more is padding).
    #[getter]
    fn vocab_size(&self) -> PyResult<usize> {
        guard(|| Ok(self.snapshot().vocab.len()))
    }

    /// The ids that end a sequence, ascending.
    #[getter]
    fn eos_token_ids(&self) -> PyResult<Vec<u32>> {
        guard(|| Ok(self.snapshot().vocab.eos_ids().to_vec()))
    }

    /// The tokenizer's canonical tokens for `text`, no special tokens added (as
    /// jump-forward and MaskBench tokenize).
    fn encode(&self, py: Python<'_>, text: &str) -> PyResult<Vec<u32>> {
        guard(|| {
            let parts = self.snapshot();
            let encoder = parts.encoder.as_ref().ok_or_else(|| {
                value_error("this tokenizer's text cannot be loaded for encoding")
            })?;
            py.detach(|| {
                encoder
                    .encode(text, false)
                    .map(|e| e.get_ids().to_vec())
                    .map_err(value_error)
            })
        })
    }

    /// The exact bytes of `ids` one after another (special tokens have none).
    fn decode_bytes<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<u32>,
    ) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        guard(|| {
            let parts = self.snapshot();
            if let Some(&bad) = ids.iter().find(|&&id| id as usize >= parts.vocab.len()) {
                return Err(value_error(format!(
                    "token {bad} is outside the vocabulary of {} tokens",
                    parts.vocab.len()
                )));
            }
            Ok(pyo3::types::PyBytes::new(py, &parts.vocab.decode(&ids)))
        })
    }

    /// Special and added tokens (never allowed unless a grammar names them), as
    /// `(id, content)` pairs.
    #[getter]
    fn special_tokens(&self) -> PyResult<Vec<(u32, String)>> {
        guard(|| Ok(self.snapshot().vocab.special_tokens().to_vec()))
    }

    /// Makes `ids` end-of-sequence tokens too (end-of-turn tokens, say). Compilers
    /// made before this call keep the EOS set they were made with.
    fn add_eos(&self, ids: Vec<u32>) -> PyResult<()> {
        guard(|| {
            let mut parts = self.parts.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(&bad) = ids.iter().find(|&&id| id as usize >= parts.vocab.len()) {
                return Err(value_error(format!(
                    "token {bad} is outside the vocabulary of {} tokens",
                    parts.vocab.len()
                )));
            }
            let mut vocab = (*parts.vocab).clone();
            vocab.add_eos(&ids);
            *parts = Arc::new(TokenizerParts {
                vocab: Arc::new(vocab),
                encoder: parts.encoder.clone(),
            });
            Ok(())
        })
    }

    fn __repr__(&self) -> PyResult<String> {
        guard(|| {
            let parts = self.snapshot();
            Ok(format!(
                "Tokenizer(vocab_size={}, eos_token_ids={:?})",
                parts.vocab.len(),
                parts.vocab.eos_ids()
            ))
        })
    }
}
