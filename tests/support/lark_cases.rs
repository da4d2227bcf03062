//! What the Lark case suites share (`tests/lark.rs`, `tests/lazy_tools.rs`):
//! compiling a case's grammar, a text's verdict, a case's string lists.

use std::sync::Arc;

use serde_json::Value;
use stencil::frontend::lark::{parse, LarkOptions};
use stencil::{CompileOptions, CompiledGrammar, Error, Matcher};

/// Compiles with token names bound to the vendored GPT-2 vocabulary (where
/// llguidance's cases name tokens it lacks, the error is the same).
pub fn compile(grammar: &str) -> Result<Arc<CompiledGrammar>, Error> {
    static COMPILER: std::sync::OnceLock<stencil::Compiler> = std::sync::OnceLock::new();
    let compiler = COMPILER.get_or_init(|| {
        let path = format!(
            "{}/tests/fixtures/tokenizers/gpt2/tokenizer.json.gz",
            env!("CARGO_MANIFEST_DIR")
        );
        let vocab = stencil::vocab::Vocabulary::from_tokenizer_file(&path).unwrap();
        stencil::Compiler::new(Arc::new(vocab))
    });
    let g = parse(grammar, &LarkOptions::default())?;
    let g = compiler.bind_tokens(&g)?;
    Ok(Arc::new(CompiledGrammar::compile(
        &g,
        &CompileOptions::default(),
    )?))
}

/// (accepted, viable prefix).
pub fn verdict(grammar: &Arc<CompiledGrammar>, input: &str) -> (bool, bool) {
    let mut m = Matcher::new(Arc::clone(grammar));
    match m.consume_bytes(input.as_bytes()) {
        Ok(()) => (m.is_accepting(), true),
        Err(_) => (false, false),
    }
}

pub fn strings(case: &Value, key: &str) -> Vec<String> {
    case[key]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}
