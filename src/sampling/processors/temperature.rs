//! Temperature `z / T` for `T > 0` (§3.6). `T = 0` never reaches this processor: the
//! configuration layer turns it into the greedy strategy, so there is no division by zero.

use super::{check_finite, Processor, StageNotes};
use crate::sampling::error::Result;
use crate::sampling::logits::Candidates;
use crate::sampling::state::StateView;
use serde_json::json;

#[derive(Debug, Clone)]
pub struct Temperature {
    pub t: f32,
}

impl Processor for Temperature {
    fn name(&self) -> &'static str {
        "temperature"
    }
    fn params(&self) -> serde_json::Value {
        json!({"t": self.t})
    }
    fn apply(&self, c: &mut Candidates, _: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        if self.t != 1.0 {
            let t = self.t;
            for z in &mut c.logits {
                *z /= t;
            }
        }
        // A tiny T can overflow f32; that is an error, not a silent +inf.
        check_finite(c, self.name())
    }
}
