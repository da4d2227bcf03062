//! Helpers shared by the test binaries.
#![allow(dead_code)]

use std::sync::Arc;

use serde_json::Value;
use stencil::automaton::AutomatonCache;
use stencil::frontend::json_schema::{compile_schema_with, JsonSchemaOptions, PatternCache};
use stencil::{CompileOptions, CompiledGrammar, Matcher};

/// What the schemas a test binary compiles share, as a compiler would keep it
/// (thousands of corpus schemas each determinizing a JSON string again would
/// take minutes).
fn caches() -> &'static (PatternCache, AutomatonCache) {
    static CACHES: std::sync::OnceLock<(PatternCache, AutomatonCache)> = std::sync::OnceLock::new();
    CACHES.get_or_init(Default::default)
}

/// Compiles a schema all the way to the automaton.
pub fn compile(
    schema: &Value,
    options: &JsonSchemaOptions,
) -> Result<Arc<CompiledGrammar>, String> {
    let (patterns, automata) = caches();
    let (grammar, _) = compile_schema_with(schema, options, patterns).map_err(|e| e.to_string())?;
    CompiledGrammar::compile_with(&grammar, &CompileOptions::default(), automata)
        .map(Arc::new)
        .map_err(|e| format!("automaton: {e}"))
}

pub fn accepts(grammar: &Arc<CompiledGrammar>, text: &str) -> bool {
    let mut m = Matcher::new(Arc::clone(grammar));
    m.consume_bytes(text.as_bytes()).is_ok() && m.is_accepting()
}

pub fn shared_data() -> std::path::PathBuf {
    std::env::var_os("STENCIL_SHARED_DATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data")
        })
}
