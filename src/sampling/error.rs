//! Every way a sampling request can fail, as data (§3.12 failure table).
//!
//! Failures are detected before any random draw: a request that cannot be sampled never
//! consumes randomness and never selects from NaN or all-zero weights.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum SamplingError {
    #[error("logits row is empty")]
    EmptyLogits,
    #[error(
        "raw logit at position {position} is {value}; only finite values and -inf are allowed"
    )]
    NonFiniteLogit { position: usize, value: String },
    #[error("processor `{processor}` produced {value} at token {position}")]
    NonFiniteProcessed {
        processor: &'static str,
        position: usize,
        value: String,
    },
    #[error("constraint error: empty candidate support after `{after}`; no token can be selected")]
    EmptySupport { after: &'static str },
    #[error("invalid parameter `{name}` = {value}: expected {expected}")]
    InvalidParameter {
        name: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("token id {id} in `{name}` is outside the logits width {width}")]
    TokenOutOfRange {
        name: &'static str,
        id: u64,
        width: usize,
    },
    #[error("grammar mask has {words} u32 words; logits width {width} needs {needed}")]
    MaskWidth {
        words: usize,
        needed: usize,
        width: usize,
    },
    #[error("invalid processor order: {0}")]
    InvalidOrder(String),
    #[error("conflicting configuration: {0}")]
    Conflict(String),
    #[error("request already finished ({0}); no further steps")]
    Finished(String),
    #[error("internal: processor `{0}` read state it did not declare")]
    UndeclaredRead(&'static str),
    #[error("grammar constraint rejected selected token {0}")]
    ConstraintRejected(u32),
}

pub type Result<T> = std::result::Result<T, SamplingError>;

/// Shorthand for parameter-domain errors.
pub(crate) fn invalid(
    name: &'static str,
    value: impl ToString,
    expected: &'static str,
) -> SamplingError {
    SamplingError::InvalidParameter {
        name,
        value: value.to_string(),
        expected,
    }
}
