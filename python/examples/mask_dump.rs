//! The Rust side of the Python tests' bit-for-bit mask check: the library's own
//! `Compiler` and `TokenMatcher`, called directly (no binding in between), write
//! the masks a token sequence meets, for `python/tests/test_masks.py` to compare
//! with what `stencil.Matcher` fills.
//!
//! `mask_dump TOKENIZER REQUESTS OUT`: REQUESTS has one JSON object per line,
//! `{"kind": "json"|"gbnf"|"lark"|"regex", "grammar": text or schema value,
//! "whitespace": "compact"|"bounded"|"pretty", "property_order": "any"|"schema",
//! "tokens": [ids]}`. For each request it compiles the grammar with one compiler
//! for the whole file, then for each token fills the mask (`ceil(V/32)` words,
//! little-endian u32, appended to OUT) and consumes the token, stopping after the
//! first refused one; when all were consumed, it fills one last mask. It prints one JSON line per
//! request to stdout: `{"masks": n, "accepted": k, "accepting": bool}` or
//! `{"error": message}`.

use std::io::{BufRead, Write};
use std::sync::Arc;

use serde_json::{json, Value};
use stencil::frontend::json_schema::{JsonSchemaOptions, PropertyOrder, Whitespace};
use stencil::matcher::TokenMatcher;
use stencil::vocab::Vocabulary;
use stencil::Compiler;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, tokenizer, requests, out] = &args[..] else {
        return Err("usage: mask_dump TOKENIZER REQUESTS OUT".into());
    };
    let vocab = Arc::new(Vocabulary::from_tokenizer_file(tokenizer)?);
    let words = vocab.len().div_ceil(32);
    let compiler = Compiler::new(Arc::clone(&vocab));
    let mut out = std::io::BufWriter::new(std::fs::File::create(out)?);
    let stdout = std::io::stdout();
    let mut report = stdout.lock();
    for line in std::io::BufReader::new(std::fs::File::open(requests)?).lines() {
        let request: Value = serde_json::from_str(&line?)?;
        let text = || request["grammar"].as_str().unwrap_or_default();
        let tables = match request["kind"].as_str() {
            Some("json") => {
                let options = JsonSchemaOptions {
                    whitespace: match request["whitespace"].as_str() {
                        Some("bounded") => Whitespace::Bounded { indent: 20 },
                        Some("pretty") => Whitespace::Pretty { indent: 2 },
                        _ => Whitespace::Compact,
                    },
                    property_order: match request["property_order"].as_str() {
                        Some("schema") => PropertyOrder::Schema,
                        _ => PropertyOrder::Any,
                    },
                    ..JsonSchemaOptions::default()
                };
                compiler.compile_json_schema(&request["grammar"], &options)
            }
            Some("gbnf") => compiler.compile_gbnf(text()),
            Some("lark") => compiler.compile_lark(text()),
            Some("regex") => compiler.compile_regex(text()),
            other => return Err(format!("unknown kind {other:?}").into()),
        };
        let tables = match tables {
            Ok(tables) => tables,
            Err(error) => {
                writeln!(report, "{}", json!({"error": error.to_string()}))?;
                continue;
            }
        };
        let mut matcher = TokenMatcher::new(tables);
        let mut mask = vec![0u32; words];
        let (mut masks, mut accepted) = (0, 0);
        let tokens: Vec<Option<u32>> = serde_json::from_value(request["tokens"].clone())?;
        // One mask per token, and one after the last when every token was consumed.
        for token in tokens.into_iter().chain([None]) {
            matcher.fill_next_token_bitmask(&mut mask);
            mask.iter()
                .try_for_each(|w| out.write_all(&w.to_le_bytes()))?;
            masks += 1;
            match token {
                Some(token) if matcher.consume_token(token).is_ok() => accepted += 1,
                _ => break,
            }
        }
        let accepting = matcher.is_accepting();
        writeln!(
            report,
            "{}",
            json!({"masks": masks, "accepted": accepted, "accepting": accepting})
        )?;
    }
    out.flush()?;
    Ok(())
}
