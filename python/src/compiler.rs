//! `stencil.Compiler` and `stencil.Grammar`: one compiler per vocabulary (it owns
//! what grammars share: automata, token tables, parsed patterns, within a memory
//! limit), and the immutable compiled grammars that matchers are made from.
//!
//! Compiling releases the GIL (a large schema takes milliseconds to seconds).
//! Errors are `ValueError`s with the library's message, which names the place:
//! a JSON pointer for schemas, `line:column` for grammar texts and schema texts.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyString;
use stencil::frontend::json_schema::{
    parse_schema_text, JsonSchemaOptions, PropertyOrder, Whitespace, DEFAULT_MAX_NESTING,
};
use stencil::frontend::structural_tag::StructuralTagOptions;
use stencil::tables::TokenTables;
use stencil::CompilerOptions;

use crate::tokenizer::{Tokenizer, TokenizerParts};
use crate::{guard, value_error};

/// Compiles grammars for one tokenizer's vocabulary.
#[pyclass(frozen, module = "stencil._stencil")]
pub struct Compiler {
    compiler: Arc<stencil::Compiler>,
    tokenizer: Arc<TokenizerParts>,
}

/// A compiled grammar bound to a vocabulary: immutable, shared by every matcher
/// made from it.
#[pyclass(frozen, module = "stencil._stencil")]
pub struct Grammar {
    pub(crate) tables: Arc<TokenTables>,
    pub(crate) tokenizer: Arc<TokenizerParts>,
    /// Keywords a lenient schema let through unenforced, as the library words them.
    warnings: Vec<String>,
}

#[pymethods]
impl Grammar {
    /// What a lenient compile let through unenforced (one message per keyword,
    /// with its JSON pointer); empty otherwise.
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    #[getter]
    fn vocab_size(&self) -> usize {
        self.tokenizer.vocab.len()
    }
}

fn whitespace(name: &str) -> PyResult<Whitespace> {
    // The CLI's `--whitespace` values (src/cli/grammar.rs), with the same indents.
    match name {
        "compact" => Ok(Whitespace::Compact),
        "bounded" => Ok(Whitespace::Bounded { indent: 20 }),
        "pretty" => Ok(Whitespace::Pretty { indent: 2 }),
        other => Err(value_error(format!(
            "whitespace must be \"compact\", \"bounded\" or \"pretty\", not {other:?}"
        ))),
    }
}

fn property_order(name: &str) -> PyResult<PropertyOrder> {
    match name {
        "any" => Ok(PropertyOrder::Any),
        "schema" => Ok(PropertyOrder::Schema),
        other => Err(value_error(format!(
            "property_order must be \"any\" or \"schema\", not {other:?}"
        ))),
    }
}

impl Compiler {
    fn grammar(&self, tables: Arc<TokenTables>, warnings: Vec<String>) -> Grammar {
        Grammar {
            tables,
            tokenizer: Arc::clone(&self.tokenizer),
            warnings,
        }
    }
}

#[pymethods]
impl Compiler {
    /// A compiler for `tokenizer`'s vocabulary (as it is now). `memory_limit_mb`
    /// bounds what it keeps for the grammars it compiles.
    #[new]
    #[pyo3(signature = (tokenizer, memory_limit_mb = None))]
    fn new(tokenizer: &Tokenizer, memory_limit_mb: Option<usize>) -> PyResult<Compiler> {
        guard(|| {
            let parts = tokenizer.snapshot();
            let mut options = CompilerOptions::default();
            if let Some(mb) = memory_limit_mb {
                options.memory_limit = mb << 20;
            }
            Ok(Compiler {
                compiler: Arc::new(stencil::Compiler::with_options(
                    Arc::clone(&parts.vocab),
                    options,
                )),
                tokenizer: parts,
            })
        })
    }

    /// A JSON Schema (a `str` of JSON, or a `dict`). `whitespace`: "compact" (none),
    /// "bounded" or "pretty"; `property_order`: "any" or "schema"; `strict`: the
    /// OpenAI-style profile (no undeclared properties); `lenient`: keywords that
    /// cannot be enforced become `Grammar.warnings` instead of errors;
    /// `plain_integers`: integers written without a fraction and, where the schema
    /// sets no bound, within +-(2^53 - 1) (off: the spec's integers, `1.0` too).
    #[pyo3(signature = (schema, whitespace = "compact", property_order = "any", strict = false, lenient = false, plain_integers = false))]
    // One Rust argument per Python keyword argument: the signature is the API.
    #[allow(clippy::too_many_arguments)]
    fn compile_json_schema(
        &self,
        py: Python<'_>,
        schema: &Bound<'_, PyAny>,
        whitespace: &str,
        property_order: &str,
        strict: bool,
        lenient: bool,
        plain_integers: bool,
    ) -> PyResult<Grammar> {
        guard(|| {
            let options = JsonSchemaOptions {
                whitespace: self::whitespace(whitespace)?,
                property_order: self::property_order(property_order)?,
                strict,
                lenient,
                plain_integers,
                ..JsonSchemaOptions::default()
            };
            let text: String = if schema.is_instance_of::<PyString>() {
                schema.extract()?
            } else {
                py.import("json")?
                    .call_method1("dumps", (schema,))?
                    .extract()?
            };
            let (tables, warnings) = py.detach(|| {
                let value = parse_schema_text(&text, DEFAULT_MAX_NESTING).map_err(value_error)?;
                self.compiler
                    .compile_json_schema_with_warnings(&value, &options)
                    .map_err(value_error)
            })?;
            let warnings = warnings.iter().map(ToString::to_string).collect();
            Ok(self.grammar(tables, warnings))
        })
    }

    /// A GBNF grammar (llama.cpp's dialect) with start rule `root`.
    #[pyo3(signature = (text, root = "root"))]
    fn compile_gbnf(&self, py: Python<'_>, text: &str, root: &str) -> PyResult<Grammar> {
        guard(|| {
            let tables = py.detach(|| {
                self.compiler
                    .compile_gbnf_from(text, root)
                    .map_err(value_error)
            })?;
            Ok(self.grammar(tables, Vec::new()))
        })
    }

    /// A regular expression the whole output must match.
    fn compile_regex(&self, py: Python<'_>, pattern: &str) -> PyResult<Grammar> {
        guard(|| {
            let tables = py.detach(|| self.compiler.compile_regex(pattern).map_err(value_error))?;
            Ok(self.grammar(tables, Vec::new()))
        })
    }

    /// A Lark grammar in llguidance's dialect (start rule `start`).
    fn compile_lark(&self, py: Python<'_>, text: &str) -> PyResult<Grammar> {
        guard(|| {
            let tables = py.detach(|| self.compiler.compile_lark(text).map_err(value_error))?;
            Ok(self.grammar(tables, Vec::new()))
        })
    }

    /// A structural tag (XGrammar's format, a `str` of JSON or a `dict`:
    /// `{"type": "structural_tag", "format": {...}}`, or the legacy
    /// `structures` + `triggers`): free text, tags, triggers, token delimiters.
    /// Errors name the JSON pointer in the tag.
    fn compile_structural_tag(&self, py: Python<'_>, tag: &Bound<'_, PyAny>) -> PyResult<Grammar> {
        guard(|| {
            let text: String = if tag.is_instance_of::<PyString>() {
                tag.extract()?
            } else {
                py.import("json")?
                    .call_method1("dumps", (tag,))?
                    .extract()?
            };
            let tables = py.detach(|| {
                let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                    value_error(format!(
                        "{}:{}: the structural tag is not JSON: {e}",
                        e.line(),
                        e.column()
                    ))
                })?;
                self.compiler
                    .compile_structural_tag(&value, &StructuralTagOptions::default())
                    .map_err(value_error)
            })?;
            Ok(self.grammar(tables, Vec::new()))
        })
    }

    /// Bytes kept for the grammars compiled so far.
    #[getter]
    fn memory_usage(&self) -> PyResult<usize> {
        guard(|| Ok(self.compiler.memory_usage()))
    }

    /// Forgets what was kept: the next grammars compile cold.
    fn clear(&self) -> PyResult<()> {
        guard(|| {
            self.compiler.clear();
            Ok(())
        })
    }
}
