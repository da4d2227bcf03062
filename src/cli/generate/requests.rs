//! `stencil generate --requests FILE`: many requests decoded together as one batch.
//!
//! FILE (`-` for standard input) holds one JSON object per line. A line's keys
//! override the command line's flags for that request, so the flags are the batch's
//! defaults: `prompt`, `schema` (a JSON Schema value), `gbnf` and `lark` (grammar text), `regex`,
//! `json` (true: any JSON), `raw`, `max_tokens`, and every sampling setting of
//! `--sampling` (`seed`, `temperature`, `top_p`, `stop`, ...; `preset` for
//! `order`). Unknown keys are errors (a typo must not silently fall back to a
//! default). Every line is checked, and every grammar compiled, before the
//! model runs; lines with the same grammar share one set of token tables.
//!
//! Each request keeps its own matcher, sampler, RNG stream and budget, so a line's
//! output does not depend on the other lines. One `--output-json` object per line is
//! printed, in input order, with the line's `index` (from 0).

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use stencil::decode::{Generator, Request};
use stencil::tables::TokenTables;
use stencil::Compiler;

use super::request::{
    build_request, gbnf_prompt, lark_prompt, regex_prompt, schema_prompt, structural_tag_prompt,
    GenerateArgs,
};
use crate::cli::grammar::{GrammarSource, JSON_GBNF};

/// One line of the requests file: what it asks for, and its sampling keys.
#[derive(Debug, Default)]
pub struct RequestLine {
    pub what: LineRequest,
    /// `SamplingConfig` keys (checked when the line is read; `preset` is read
    /// as `order`).
    pub sampling: serde_json::Map<String, Value>,
}

/// The keys of a line that are not sampling settings.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
pub struct LineRequest {
    pub prompt: Option<String>,
    pub schema: Option<Value>,
    pub gbnf: Option<String>,
    pub lark: Option<String>,
    pub structural_tag: Option<Value>,
    pub regex: Option<String>,
    pub json: Option<bool>,
    pub raw: Option<bool>,
    pub max_tokens: Option<usize>,
}

const REQUEST_KEYS: [&str; 9] = [
    "prompt",
    "schema",
    "gbnf",
    "lark",
    "structural_tag",
    "regex",
    "json",
    "raw",
    "max_tokens",
];

/// Splits a line's object into its request and its sampling keys, checking both.
fn parse_line(line: &str) -> Result<RequestLine, String> {
    let column = |e: serde_json::Error| format!("column {}: {e}", e.column());
    let object: serde_json::Map<String, Value> = serde_json::from_str(line).map_err(column)?;
    let (request, mut sampling): (serde_json::Map<_, _>, serde_json::Map<_, _>) = object
        .into_iter()
        .partition(|(key, _)| REQUEST_KEYS.contains(&key.as_str()));
    if let Some(preset) = sampling.remove("preset") {
        match preset.as_str() {
            Some(name) if PRESETS.contains(&name) => sampling.insert("order".into(), preset),
            _ => {
                return Err(format!(
                    "unknown preset {preset} (expected one of {})",
                    PRESETS.join(", ")
                ))
            }
        };
    }
    let what = serde_json::from_value(Value::Object(request)).map_err(|e| e.to_string())?;
    serde_json::from_value::<stencil::sampling::SamplingConfig>(Value::Object(sampling.clone()))
        .map_err(|e| format!("{e} (a request key or a sampling setting)"))?;
    Ok(RequestLine { what, sampling })
}

const PRESETS: [&str; 4] = ["reference", "hf", "vllm", "llama.cpp"];

/// Reads and checks the lines of `path` (`-`: standard input); errors name the line.
pub fn read_lines(path: &Path) -> Result<Vec<RequestLine>, String> {
    let origin = path.display().to_string();
    let text = if origin == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("standard input: {e}"))?;
        text
    } else {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {origin}: {e}"))?
    };
    let mut lines = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |message: String| format!("{origin}:{}: {message}", number + 1);
        let request = parse_line(line).map_err(at)?;
        let what = &request.what;
        let grammars = [
            what.schema.is_some(),
            what.gbnf.is_some(),
            what.lark.is_some(),
            what.regex.is_some(),
            what.json == Some(true),
        ];
        if grammars.iter().filter(|g| **g).count() > 1 {
            return Err(at(
                "give at most one of schema, gbnf, lark, regex, json".into()
            ));
        }
        lines.push(request);
    }
    if lines.is_empty() {
        return Err(format!("{origin}: no requests"));
    }
    Ok(lines)
}

impl LineRequest {
    /// The line's own grammar, if it names one.
    fn grammar_source(&self, index: usize) -> Option<GrammarSource> {
        let origin = format!("request {index}");
        if let Some(schema) = &self.schema {
            Some(GrammarSource::Schema(origin, schema.clone()))
        } else if let Some(text) = &self.gbnf {
            Some(GrammarSource::Gbnf(origin, text.clone()))
        } else if let Some(text) = &self.lark {
            Some(GrammarSource::Lark(origin, text.clone()))
        } else if let Some(tag) = &self.structural_tag {
            Some(GrammarSource::StructuralTag(origin, tag.clone()))
        } else if let Some(regex) = &self.regex {
            Some(GrammarSource::Regex(regex.clone()))
        } else if self.json == Some(true) {
            Some(GrammarSource::Gbnf(
                "<built-in JSON grammar>".into(),
                JSON_GBNF.into(),
            ))
        } else {
            None
        }
    }
}

impl RequestLine {
    /// The command line's flags with this line's keys laid over them.
    fn apply_to(&self, args: &GenerateArgs) -> GenerateArgs {
        let what = &self.what;
        let mut merged = args.clone();
        if let Some(p) = &what.prompt {
            merged.prompt = Some(p.clone());
            merged.prompt_file = None;
        }
        merged.raw = what.raw.unwrap_or(args.raw);
        merged.max_tokens = what.max_tokens.unwrap_or(args.max_tokens);
        merged.line_sampling = Some(self.sampling.clone());
        merged
    }
}

/// The user message for a line that names a grammar but no prompt.
fn default_prompt(source: &GrammarSource, root: &str) -> String {
    match source {
        GrammarSource::Schema(_, schema) => {
            schema_prompt(&serde_json::to_string_pretty(schema).unwrap_or_default())
        }
        GrammarSource::Gbnf(_, text) if text == JSON_GBNF => {
            "Write one JSON document. Reply with the JSON only.".into()
        }
        GrammarSource::Gbnf(_, text) => gbnf_prompt(text.trim(), root),
        GrammarSource::Lark(_, text) => lark_prompt(text.trim()),
        GrammarSource::StructuralTag(_, tag) => structural_tag_prompt(tag),
        GrammarSource::Regex(regex) => regex_prompt(regex),
    }
}

/// Builds every line's request (grammars compiled, one token-table set per distinct
/// grammar). `default_tables` is the command line's grammar, for lines without one.
pub fn build_requests(
    args: &GenerateArgs,
    lines: &[RequestLine],
    generator: &Generator,
    compiler: &Compiler,
    default_tables: Option<Arc<TokenTables>>,
) -> Result<Vec<Request>, String> {
    let mut shared: HashMap<String, Arc<TokenTables>> = HashMap::new();
    let mut requests = Vec::with_capacity(lines.len());
    for (index, line) in lines.iter().enumerate() {
        let tables = match line.what.grammar_source(index) {
            Some(source) => {
                let key = format!("{source:?}");
                match shared.get(&key) {
                    Some(tables) => Arc::clone(tables),
                    None => {
                        let invalid = |e: String| format!("request {index}: invalid grammar: {e}");
                        let grammar = args
                            .grammar_for_generation(Some(compiler))
                            .grammar_of(&source)
                            .map_err(invalid)?;
                        let tables = compiler
                            .compile_grammar(&grammar)
                            .map_err(|e| invalid(e.to_string()))?;
                        shared.insert(key, Arc::clone(&tables));
                        tables
                    }
                }
            }
            None => default_tables.clone().ok_or_else(|| {
                format!(
                    "request {index}: no grammar (give schema, gbnf, lark, regex or json on the line, \
                     or --schema/--gbnf/--lark/--regex/--json on the command line)"
                )
            })?,
        };
        let mut merged = line.apply_to(args);
        if merged.prompt.is_none() && merged.prompt_file.is_none() {
            if let Some(source) = line.what.grammar_source(index) {
                merged.prompt = Some(default_prompt(&source, &args.grammar.root));
            }
        }
        let request = build_request(&merged, generator, tables)
            .map_err(|e| format!("request {index}: {e}"))?;
        requests.push(request);
    }
    Ok(requests)
}
