//! XTC, "exclude top choices" (llama.cpp `llama_sampler_xtc`): with probability
//! `probability`, when two or more tokens have `p >= threshold`, remove all of them except
//! the least probable one. Its coin is the request's counter-based draw
//! `DRAW_PROCESSOR_BASE` of the step, so it never shifts any other draw.

use super::{need, sorted_desc, Processor, StageNotes};
use crate::sampling::error::Result;
use crate::sampling::logits::Candidates;
use crate::sampling::rng::DRAW_PROCESSOR_BASE;
use crate::sampling::state::{StateField, StateView};
use serde_json::json;

#[derive(Debug, Clone)]
pub struct Xtc {
    pub threshold: f64,
    pub probability: f64,
}

impl Processor for Xtc {
    fn name(&self) -> &'static str {
        "xtc"
    }
    fn params(&self) -> serde_json::Value {
        json!({"threshold": self.threshold, "probability": self.probability})
    }
    fn truncates(&self) -> bool {
        true
    }
    fn reads(&self) -> &'static [StateField] {
        &[StateField::Rng]
    }
    fn apply(&self, c: &mut Candidates, v: &StateView<'_>, notes: &mut StageNotes) -> Result<()> {
        let rng = need(v.rng, self.name())?;
        if self.probability <= 0.0 || self.threshold > 0.5 || c.len() < 2 {
            return Ok(());
        }
        notes.draws.push(DRAW_PROCESSOR_BASE);
        if rng.uniform(v.step, DRAW_PROCESSOR_BASE) >= self.probability {
            return Ok(());
        }
        let probs = c.softmax();
        let order = sorted_desc(&probs);
        let above = order
            .iter()
            .take_while(|&&i| probs[i] >= self.threshold)
            .count();
        if above >= 2 {
            // Drop the `above - 1` most probable; the least probable above-threshold stays.
            let mut drop = vec![false; c.len()];
            for &i in &order[..above - 1] {
                drop[i] = true;
            }
            c.retain_by_index(|i| !drop[i]);
        }
        Ok(())
    }
}
