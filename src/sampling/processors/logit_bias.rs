//! `logit_bias`: a fixed additive table by token id (§9.3.6). Large negative values act as
//! bans, large positive ones as forcing; values are validated finite at configuration time.

use super::{check_finite, Processor, StageNotes};
use crate::sampling::error::{Result, SamplingError};
use crate::sampling::logits::Candidates;
use crate::sampling::state::StateView;
use serde_json::json;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
pub struct LogitBias {
    pub bias: BTreeMap<u32, f32>,
}

impl Processor for LogitBias {
    fn name(&self) -> &'static str {
        "logit_bias"
    }
    fn params(&self) -> serde_json::Value {
        json!({"bias": self.bias})
    }
    fn apply(&self, c: &mut Candidates, _: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        for (&id, &b) in &self.bias {
            if id as usize >= c.width() {
                return Err(SamplingError::TokenOutOfRange {
                    name: "logit_bias",
                    id: u64::from(id),
                    width: c.width(),
                });
            }
            if let Some(i) = c.position(id) {
                c.logits[i] += b;
            }
        }
        check_finite(c, self.name())
    }
}
