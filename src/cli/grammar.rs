//! The grammar flags shared by `check`, `generate` and `bench`: one of `--gbnf`,
//! `--lark`, `--regex`, `--schema`, `--structural-tag` (with the JSON Schema options, which also apply
//! to a Lark grammar's `%json` schemas), compiled the same way everywhere so a
//! grammar that checks is the grammar that generates.

use std::path::Path;
use std::sync::Arc;

use clap::Args;

use stencil::automaton::{CompileOptions, CompiledGrammar};
use stencil::frontend::json_schema::{
    self, FormatMode, JsonSchemaOptions, PropertyOrder, SchemaDocuments, Whitespace,
};
use stencil::frontend::lark::LarkOptions;
use stencil::frontend::structural_tag::StructuralTagOptions;
use stencil::frontend::{self, gbnf::GbnfOptions};
use stencil::grammar::{Grammar, GrammarError};
use stencil::tables::TokenTables;
use stencil::Compiler;

/// The built-in JSON grammar (`generate --json`).
#[cfg(feature = "decode")]
pub const JSON_GBNF: &str = include_str!("../../grammars/json.gbnf");

#[derive(Args, Debug, Clone)]
pub struct GrammarArgs {
    /// GBNF grammar file (llama.cpp dialect).
    #[arg(long, value_name = "FILE", group = "grammar")]
    pub gbnf: Option<String>,
    /// Lark grammar file (llguidance's dialect; start rule `start`).
    #[arg(long, value_name = "FILE", group = "grammar")]
    pub lark: Option<String>,
    /// Regular expression the whole text must match.
    #[arg(long, value_name = "PATTERN", group = "grammar")]
    pub regex: Option<String>,
    /// JSON Schema the text must validate against (drafts 4 to 2020-12).
    #[arg(long, value_name = "FILE", group = "grammar")]
    pub schema: Option<String>,
    /// Structural tag (XGrammar's JSON: `{"type": "structural_tag", "format": ...}`):
    /// free text, tags, triggers, tool calls.
    #[arg(long, value_name = "FILE", group = "grammar")]
    pub structural_tag: Option<String>,
    /// Object property order for --schema: as declared, or any.
    #[arg(long, value_enum, default_value = "schema")]
    pub property_order: PropertyOrderArg,
    /// Whitespace between JSON tokens for --schema (default compact) and for a
    /// --lark grammar's %json schemas (default bounded, after llguidance's
    /// flexible whitespace).
    #[arg(long, value_enum)]
    pub whitespace: Option<WhitespaceArg>,
    /// OpenAI-style strict profile (no undeclared properties by default).
    #[arg(long)]
    pub strict: bool,
    /// Keywords that cannot be enforced become warnings (printed) instead of errors.
    #[arg(long)]
    pub lenient: bool,
    /// What a --schema's `format` does: enforce the known formats (default), or
    /// annotate only (any string, the 2020-12 default meaning).
    #[arg(long, value_enum, default_value = "assert")]
    pub format: FormatArg,
    /// Deepest nesting of arrays and objects in a --schema file (at most 10000:
    /// what the command's stack holds).
    #[arg(
        long,
        value_name = "N",
        default_value_t = json_schema::DEFAULT_MAX_NESTING,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000)
    )]
    pub max_nesting: usize,
    /// Folder of JSON documents a --schema's `$ref`s may name (never fetched
    /// from the network): each `.json` file under it by its path relative to
    /// the folder (resolved against --ref-base) and by its own absolute `$id`.
    #[arg(long, value_name = "DIR")]
    pub ref_dir: Option<String>,
    /// The URI the --ref-dir folder stands for: `https://example.com/schemas/`
    /// makes `DIR/a/b.json` the document `https://example.com/schemas/a/b.json`.
    /// By default, the base of a schema without `$id`, so `"$ref": "b.json"`
    /// finds `DIR/b.json`.
    #[arg(long, value_name = "URI", requires = "ref_dir", default_value = json_schema::DEFAULT_DOCUMENTS_BASE)]
    pub ref_base: String,
    /// Start rule of a GBNF grammar.
    #[arg(long, default_value = "root")]
    pub root: String,
    /// Compiling for generation: integers without a fraction (`1`, not `1.0`).
    #[arg(skip)]
    pub for_generation: bool,
    /// The vocabulary's special tokens a structural tag's text delimiters may
    /// be written as (known once the tokenizer is loaded).
    #[arg(skip)]
    pub delimiter_tokens: Vec<(u32, String)>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum PropertyOrderArg {
    Schema,
    Any,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum FormatArg {
    Assert,
    Annotate,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum WhitespaceArg {
    Compact,
    Bounded,
    Pretty,
}

impl GrammarArgs {
    pub fn schema_options(&self) -> Result<JsonSchemaOptions, String> {
        let mut documents = SchemaDocuments::default();
        if let Some(dir) = &self.ref_dir {
            documents
                .load_dir(Path::new(dir), &self.ref_base, self.max_nesting)
                .map_err(|e| format!("--ref-dir: {e}"))?;
        }
        Ok(JsonSchemaOptions {
            whitespace: match self.whitespace.unwrap_or(WhitespaceArg::Compact) {
                WhitespaceArg::Compact => Whitespace::Compact,
                WhitespaceArg::Bounded => Whitespace::Bounded { indent: 20 },
                WhitespaceArg::Pretty => Whitespace::Pretty { indent: 2 },
            },
            property_order: match self.property_order {
                PropertyOrderArg::Schema => PropertyOrder::Schema,
                PropertyOrderArg::Any => PropertyOrder::Any,
            },
            strict: self.strict,
            lenient: self.lenient,
            plain_integers: self.for_generation,
            format: match self.format {
                FormatArg::Assert => FormatMode::Assert,
                FormatArg::Annotate => FormatMode::Annotate,
            },
            documents,
            ..JsonSchemaOptions::default()
        })
    }

    /// Options for a structural tag: XGrammar's JSON defaults (no undeclared
    /// properties, bounded whitespace) unless `--whitespace` says otherwise.
    pub fn structural_tag_options(&self) -> Result<StructuralTagOptions, String> {
        let mut options = StructuralTagOptions::default();
        let json = self.schema_options()?;
        if self.whitespace.is_some() {
            options.json.whitespace = json.whitespace;
        }
        options.json.lenient = self.lenient;
        options.json.plain_integers = self.for_generation;
        options.json.format = json.format;
        options.json.documents = json.documents;
        options.delimiter_tokens = self.delimiter_tokens.clone();
        Ok(options)
    }

    /// Options for a Lark grammar: its `%json` schemas take the JSON Schema
    /// flags, and llguidance's whitespace unless `--whitespace` says otherwise.
    pub fn lark_options(&self) -> Result<LarkOptions, String> {
        let defaults = LarkOptions::default();
        let mut json = self.schema_options()?;
        if self.whitespace.is_none() {
            json.whitespace = defaults.json.whitespace;
        }
        Ok(LarkOptions { json, ..defaults })
    }

    /// Compiles the chosen grammar to its byte-level automaton on its own (for
    /// `check`, which has no vocabulary unless `--tokenizer` gives one).
    pub fn compile(&self, fallback_gbnf: Option<&str>) -> Result<Arc<CompiledGrammar>, String> {
        let grammar = self.grammar(fallback_gbnf)?;
        if let Err(GrammarError::UnboundTokenName { name, location }) = grammar.check_tokens_bound()
        {
            let at = location.map(|l| format!(":{l}")).unwrap_or_default();
            return Err(format!(
                "{}{at}: the token `{name}` is named by its text: give --tokenizer FILE to bind it to a vocabulary",
                self.origin(fallback_gbnf)
            ));
        }
        CompiledGrammar::compile(&grammar, &CompileOptions::default())
            .map(Arc::new)
            .map_err(|e| e.to_string())
    }

    /// The chosen grammar bound to `compiler`'s vocabulary (token names turned
    /// into ids, ids checked) and compiled to token tables; errors name the
    /// grammar's file, line and column.
    pub fn compile_for(
        &self,
        compiler: &Compiler,
        grammar: &Grammar,
        fallback_gbnf: Option<&str>,
    ) -> Result<Arc<TokenTables>, String> {
        let bound = compiler
            .bind_tokens(grammar)
            .map_err(|e| format!("{}:{e}", self.origin(fallback_gbnf)))?;
        compiler.compile_grammar(&bound).map_err(|e| e.to_string())
    }

    /// Where the chosen grammar comes from, for messages.
    pub fn origin(&self, fallback_gbnf: Option<&str>) -> String {
        let given = [&self.schema, &self.structural_tag, &self.lark, &self.gbnf]
            .into_iter()
            .find_map(|path| path.clone());
        match (given, &self.regex, fallback_gbnf) {
            (Some(path), _, _) => path,
            (None, Some(_), _) => "--regex".into(),
            (None, None, Some(_)) => "<built-in JSON grammar>".into(),
            (None, None, None) => "<no grammar>".into(),
        }
    }

    /// The chosen grammar in the IR (`fallback_gbnf` when none of the three flags
    /// is given); warnings from `--lenient` are printed to standard error.
    pub fn grammar(&self, fallback_gbnf: Option<&str>) -> Result<Grammar, String> {
        let read = |path: &str| {
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))
        };
        let source = if let Some(path) = &self.schema {
            let text = read(path)?;
            let schema = json_schema::parse_schema_text(&text, self.max_nesting)
                .map_err(|e| format!("{path}:{e}"))?;
            GrammarSource::Schema(path.clone(), schema)
        } else if let Some(path) = &self.structural_tag {
            let text = read(path)?;
            let tag = serde_json::from_str(&text)
                .map_err(|e| format!("{path}:{}:{}: not JSON: {e}", e.line(), e.column()))?;
            GrammarSource::StructuralTag(path.clone(), tag)
        } else if let Some(regex) = &self.regex {
            GrammarSource::Regex(regex.clone())
        } else if let Some(path) = &self.lark {
            GrammarSource::Lark(path.clone(), read(path)?)
        } else {
            match (&self.gbnf, fallback_gbnf) {
                (Some(path), _) => GrammarSource::Gbnf(path.clone(), read(path)?),
                (None, Some(text)) => {
                    GrammarSource::Gbnf("<built-in JSON grammar>".into(), text.to_string())
                }
                (None, None) => return Err("no grammar given".into()),
            }
        };
        self.grammar_of(&source)
    }

    /// A grammar given as text or value, in the IR (with this command line's
    /// options): every error a user's grammar can have but the automata's limits.
    pub fn grammar_of(&self, source: &GrammarSource) -> Result<Grammar, String> {
        Ok(match source {
            GrammarSource::Schema(origin, schema) => {
                let (grammar, warnings) =
                    json_schema::compile_schema(schema, &self.schema_options()?)
                        .map_err(|e| format!("{origin}: {e}"))?;
                for warning in warnings {
                    eprintln!("warning: {origin}: {warning}");
                }
                grammar
            }
            GrammarSource::Regex(regex) => {
                frontend::regex::parse(regex, &frontend::Limits::default())
                    .map_err(|e| e.to_string())?
            }
            GrammarSource::StructuralTag(origin, tag) => frontend::structural_tag::parse(
                tag,
                &self.structural_tag_options()?,
                &Default::default(),
            )
            .map_err(|e| format!("{origin}: {e}"))?,
            GrammarSource::Gbnf(origin, text) => {
                let options = GbnfOptions {
                    root: self.root.clone(),
                    ..GbnfOptions::default()
                };
                frontend::gbnf::parse(text, &options).map_err(|e| format!("{origin}:{e}"))?
            }
            GrammarSource::Lark(origin, text) => {
                let (grammar, report) = frontend::lark::parse_with_warnings(
                    text,
                    &self.lark_options()?,
                    &Default::default(),
                )
                .map_err(|e| format!("{origin}:{e}"))?;
                for warning in report.warnings {
                    eprintln!("warning: {origin}:{warning}");
                }
                for note in annotation_notes(&report.annotations) {
                    eprintln!("note: {origin}:{note}");
                }
                grammar
            }
        })
    }
}

/// A grammar's text or value and where it came from (for error messages).
#[derive(Debug, Clone)]
pub enum GrammarSource {
    Schema(String, serde_json::Value),
    Regex(String),
    Gbnf(String, String),
    Lark(String, String),
    StructuralTag(String, serde_json::Value),
}

/// What the command line does with rule attributes it cannot enforce, one line
/// each: stop text stays in the output, captures and temperatures are not applied.
fn annotation_notes(annotations: &[frontend::lark::RuleAnnotation]) -> Vec<String> {
    let mut notes = Vec::new();
    for a in annotations {
        let at = format!("{}: rule `{}`", a.location, a.rule);
        if a.hidden_stop {
            notes.push(format!(
                "{at}: its stop= text is kept in the output (llguidance hides it)"
            ));
        }
        if let Some(t) = a.temperature {
            notes.push(format!(
                "{at}: temperature={t} is not applied (sampling settings hold for every token)"
            ));
        }
        for name in [&a.capture, &a.stop_capture].into_iter().flatten() {
            notes.push(format!("{at}: capture `{name}` is not reported here"));
        }
    }
    notes
}
