//! Helpers shared by the test binaries.
#![allow(dead_code)]

use std::sync::Arc;

use serde_json::Value;
use stencil::frontend::json_schema::{compile_schema, JsonSchemaOptions};
use stencil::{CompileOptions, CompiledGrammar, Matcher};

/// Compiles a schema all the way to the automaton.
pub fn compile(
    schema: &Value,
    options: &JsonSchemaOptions,
) -> Result<Arc<CompiledGrammar>, String> {
    let (grammar, _) = compile_schema(schema, options).map_err(|e| e.to_string())?;
    CompiledGrammar::compile(&grammar, &CompileOptions::default())
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
