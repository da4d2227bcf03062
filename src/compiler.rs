//! The compiler: what grammars share for one vocabulary, in one explicit object.
//!
//! Grammars recur in parts: a JSON string body, a number, an object's remaining
//! keys appear in schema after schema. A [`Compiler`] keeps what compiling them
//! builds and what their token tables walk the vocabulary for (automata, lexeme
//! and configuration tables, parsed patterns), so a second schema with a string
//! property costs lookups where the first cost walks. It is the shape of
//! llguidance's `ParserFactory` and XGrammar's `GrammarCompiler`: an engine holds
//! one per vocabulary (a server with two models holds two, independent), bounds
//! its memory with [`CompilerOptions::memory_limit`], and can [`Compiler::clear`]
//! it. Nothing is kept anywhere else: grammars compiled by two compilers share
//! nothing, and a fresh compiler is a cold start.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use stencil::matcher::TokenMatcher;
//! use stencil::vocab::Vocabulary;
//! use stencil::Compiler;
//!
//! let tokens = ["{", "}", "\"", "a", "b", ":", "1", "true", "</s>"];
//! let vocab = Vocabulary::from_token_bytes(
//!     tokens.iter().map(|t| t.as_bytes().to_vec()).collect(),
//!     vec![(8, "</s>".into())],
//!     vec![8],
//! );
//! let compiler = Compiler::new(Arc::new(vocab));
//! let schema = serde_json::json!({"type": "boolean"});
//! let grammar = compiler.compile_json_schema(&schema, &Default::default())?;
//! let mut matcher = TokenMatcher::new(grammar);
//! let mut mask = vec![0u32; 1];
//! matcher.fill_next_token_bitmask(&mut mask);
//! assert_eq!(mask[0], 1 << 7); // only `true` starts a boolean here
//! # Ok(()) }
//! ```

use std::sync::Arc;

use serde_json::Value;

use crate::automaton::{AutomatonCache, CompileError, CompileOptions, CompiledGrammar};
use crate::frontend::gbnf::{self, GbnfOptions};
use crate::frontend::json_schema::{self, JsonSchemaOptions, PatternCache, Warning};
use crate::frontend::lark::{self, LarkOptions, LarkReport};
use crate::frontend::structural_tag::{self, StructuralTagOptions};
use crate::frontend::{self, FrontendError, Limits};
use crate::grammar::{Grammar, GrammarError};
use crate::tables::{SharedTables, TokenTables};
use crate::vocab::Vocabulary;
use crate::Error;

/// Settings of a [`Compiler`].
#[derive(Debug, Clone)]
pub struct CompilerOptions {
    /// Bytes the compiler may keep for the grammars it compiled (what each
    /// grammar holds on its own comes on top): a quarter for automata, a
    /// sixteenth for parsed patterns, the rest for token tables. Past its share,
    /// a part evicts its oldest entries not read lately (see [`crate::cache`]),
    /// built again if a grammar needs them.
    pub memory_limit: usize,
    /// How grammars are compiled to automata.
    pub compile: CompileOptions,
    /// Bounds on GBNF, Lark and regex sources.
    pub limits: Limits,
}

/// The default [`CompilerOptions::memory_limit`].
pub const DEFAULT_COMPILER_MEMORY: usize = 256 << 20;

impl Default for CompilerOptions {
    fn default() -> Self {
        CompilerOptions {
            memory_limit: DEFAULT_COMPILER_MEMORY,
            compile: CompileOptions::default(),
            limits: Limits::default(),
        }
    }
}

/// Compiles grammars for one vocabulary, sharing what they have in common.
#[derive(Debug)]
pub struct Compiler {
    vocab: Arc<Vocabulary>,
    options: CompilerOptions,
    patterns: PatternCache,
    automata: AutomatonCache,
    tables: Arc<SharedTables>,
}

impl Compiler {
    /// A compiler for `vocab` with default settings.
    pub fn new(vocab: Arc<Vocabulary>) -> Compiler {
        Compiler::with_options(vocab, CompilerOptions::default())
    }

    pub fn with_options(vocab: Arc<Vocabulary>, options: CompilerOptions) -> Compiler {
        let limit = options.memory_limit;
        let automata = limit / 4;
        let patterns = limit / 16;
        Compiler {
            vocab,
            patterns: PatternCache::new(patterns),
            automata: AutomatonCache::new(automata),
            tables: Arc::new(SharedTables::new(limit - automata - patterns)),
            options,
        }
    }

    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// The parsed patterns every JSON Schema this compiler compiles shares (for
    /// a caller that runs a front-end itself, then [`Compiler::compile_grammar`]).
    pub fn pattern_cache(&self) -> &PatternCache {
        &self.patterns
    }

    pub fn options(&self) -> &CompilerOptions {
        &self.options
    }

    /// A JSON Schema's grammar over this compiler's vocabulary. Keywords that
    /// `options.lenient` lets through unenforced are dropped silently here; see
    /// [`Compiler::compile_json_schema_with_warnings`].
    pub fn compile_json_schema(
        &self,
        schema: &Value,
        options: &JsonSchemaOptions,
    ) -> Result<Arc<TokenTables>, Error> {
        Ok(self.compile_json_schema_with_warnings(schema, options)?.0)
    }

    /// [`Compiler::compile_json_schema`], with the warnings for keywords that
    /// `options.lenient` let through unenforced.
    pub fn compile_json_schema_with_warnings(
        &self,
        schema: &Value,
        options: &JsonSchemaOptions,
    ) -> Result<(Arc<TokenTables>, Vec<Warning>), Error> {
        let (grammar, warnings) =
            json_schema::compile_schema_with(schema, options, &self.patterns)?;
        Ok((self.compile_grammar(&grammar)?, warnings))
    }

    /// A GBNF grammar (llama.cpp's dialect; start rule `root`).
    pub fn compile_gbnf(&self, source: &str) -> Result<Arc<TokenTables>, Error> {
        self.compile_gbnf_from(source, "root")
    }

    /// A GBNF grammar with start rule `root`.
    pub fn compile_gbnf_from(&self, source: &str, root: &str) -> Result<Arc<TokenTables>, Error> {
        let options = GbnfOptions {
            root: root.to_string(),
            limits: self.options.limits.clone(),
        };
        self.compile_grammar(&gbnf::parse(source, &options)?)
    }

    /// A Lark grammar in llguidance's dialect (start rule `start`), with
    /// [`LarkOptions`]' defaults (`%json` whitespace as llguidance's, bounded).
    /// Keywords a lenient `%json` schema lets through and rule annotations are
    /// dropped here;
    /// see [`Compiler::compile_lark_with`].
    pub fn compile_lark(&self, source: &str) -> Result<Arc<TokenTables>, Error> {
        let options = LarkOptions {
            limits: self.options.limits.clone(),
            ..LarkOptions::default()
        };
        Ok(self.compile_lark_with(source, &options)?.0)
    }

    /// [`Compiler::compile_lark`] with `options`, and what the grammar says beside
    /// its language: warnings of lenient `%json` schemas, and rule attributes for
    /// the caller (captures, temperatures, stop text to hide).
    pub fn compile_lark_with(
        &self,
        source: &str,
        options: &LarkOptions,
    ) -> Result<(Arc<TokenTables>, LarkReport), Error> {
        let (grammar, report) = lark::parse_with_warnings(source, options, &self.patterns)?;
        Ok((self.compile_grammar(&grammar)?, report))
    }

    /// A structural tag (XGrammar's JSON, `{"type": "structural_tag", "format":
    /// ...}`): free text, tags, triggers and token delimiters, its token names
    /// bound to this compiler's vocabulary. Its text delimiters also take the
    /// vocabulary's special tokens they spell
    /// ([`Compiler::delimiter_tokens`]) unless `options` names others.
    pub fn compile_structural_tag(
        &self,
        tag: &Value,
        options: &StructuralTagOptions,
    ) -> Result<Arc<TokenTables>, Error> {
        let grammar = if options.delimiter_tokens.is_empty() {
            let options = StructuralTagOptions {
                delimiter_tokens: self.delimiter_tokens(),
                ..options.clone()
            };
            structural_tag::parse(tag, &options, &self.patterns)?
        } else {
            structural_tag::parse(tag, options, &self.patterns)?
        };
        self.compile_grammar(&grammar)
    }

    /// The special tokens that may stand for a structural tag's text
    /// delimiters ([`StructuralTagOptions::delimiter_tokens`]): those with
    /// content and no bytes, end-of-sequence tokens left out (the end of the
    /// output is the grammar's acceptance, not a token it reads).
    pub fn delimiter_tokens(&self) -> Vec<(u32, String)> {
        self.vocab
            .special_tokens()
            .iter()
            .filter(|(id, content)| {
                !content.is_empty()
                    && self.vocab.token_bytes(*id).is_empty()
                    && !self.vocab.is_eos(*id)
            })
            .cloned()
            .collect()
    }

    /// A regex that the whole output must match.
    pub fn compile_regex(&self, pattern: &str) -> Result<Arc<TokenTables>, Error> {
        self.compile_grammar(&frontend::regex::parse(pattern, &self.options.limits)?)
    }

    /// A grammar in the IR (from any front-end). Token terminals are bound to
    /// this compiler's vocabulary first ([`Compiler::bind_tokens`]).
    pub fn compile_grammar(&self, grammar: &Grammar) -> Result<Arc<TokenTables>, Error> {
        if grammar.has_token_sets() {
            let bound = self.bind_tokens(grammar)?;
            return Ok(self.tables_for(Arc::new(self.compile_automaton(&bound)?)));
        }
        Ok(self.tables_for(Arc::new(self.compile_automaton(grammar)?)))
    }

    /// `grammar` with its token names (`<|eot_id|>`) turned into this
    /// vocabulary's ids, every id checked to be in the vocabulary and none an
    /// end-of-sequence token. An error is a syntax error at the place the
    /// grammar wrote the token (where the grammar came from a text).
    pub fn bind_tokens(&self, grammar: &Grammar) -> Result<Grammar, Error> {
        let vocab = &self.vocab;
        let located = |error: GrammarError| -> Error {
            match error.location() {
                Some(location) => FrontendError::Syntax {
                    location,
                    message: error.to_string(),
                }
                .into(),
                None => CompileError::from(error).into(),
            }
        };
        let mut bound = grammar.clone();
        bound
            .bind_token_names(|name| vocab.ids_named(name))
            .map_err(located)?;
        bound
            .check_token_ids(vocab.len(), |id| {
                vocab.is_eos(id).then(|| vocab.token_text(id))
            })
            .map_err(located)?;
        Ok(bound)
    }

    /// The byte-level automaton of `grammar` alone (for [`crate::check`] and
    /// other byte-level uses), built from this compiler's automata.
    pub fn compile_automaton(&self, grammar: &Grammar) -> Result<CompiledGrammar, Error> {
        Ok(CompiledGrammar::compile_with(
            grammar,
            &self.options.compile,
            &self.automata,
        )?)
    }

    /// Token tables of an already compiled grammar over this compiler's
    /// vocabulary, sharing this compiler's tables.
    pub fn tables_for(&self, grammar: Arc<CompiledGrammar>) -> Arc<TokenTables> {
        Arc::new(TokenTables::with_shared(
            grammar,
            Arc::clone(&self.vocab),
            Arc::clone(&self.tables),
        ))
    }

    /// Forgets everything kept so far: the next grammars start cold. Grammars
    /// already compiled keep working (they hold what they use).
    pub fn clear(&self) {
        self.patterns.clear();
        self.automata.clear();
        self.tables.clear();
    }

    /// Bytes kept for the grammars compiled so far (at most
    /// [`CompilerOptions::memory_limit`]).
    pub fn memory_usage(&self) -> usize {
        self.patterns.memory_usage() + self.automata.memory_usage() + self.tables.memory_usage()
    }
}
