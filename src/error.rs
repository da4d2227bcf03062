//! The library's top-level error: anything that stops a grammar from being built.

use crate::automaton::CompileError;
use crate::frontend::json_schema::JsonSchemaError;
use crate::frontend::FrontendError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Frontend(#[from] FrontendError),
    #[error(transparent)]
    JsonSchema(#[from] JsonSchemaError),
    #[error(transparent)]
    Compile(#[from] CompileError),
}
