//! Mirostat v2 (Basu et al.; llama.cpp `mirostat_v2`): keep the tokens whose surprise
//! `-log2 p` is at most μ (at least the top one); after selection μ moves by
//! `-η · (surprise(y) - τ)`, with the surprise read from the selection distribution.
//! μ lives in the decoder state's processor state, starting at `2τ`.

use super::{need, Processor, StageNotes};
use crate::sampling::error::Result;
use crate::sampling::logits::Candidates;
use crate::sampling::state::{StateField, StateView};

#[derive(Debug, Clone)]
pub struct MirostatV2 {
    pub tau: f64,
    pub eta: f64,
}

impl MirostatV2 {
    pub fn initial_mu(&self) -> f64 {
        2.0 * self.tau
    }
    /// μ after selecting a token of selection probability `p`.
    pub fn update(&self, mu: f64, p: f64) -> f64 {
        mu - self.eta * (-p.log2() - self.tau)
    }
}

impl Processor for MirostatV2 {
    fn name(&self) -> &'static str {
        "mirostat"
    }
    fn reads(&self) -> &'static [StateField] {
        &[StateField::ProcessorState]
    }
    fn apply(&self, c: &mut Candidates, v: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        let ps = need(v.processor_state, self.name())?;
        let mu = ps.mirostat_mu.unwrap_or(self.initial_mu());
        let probs = c.softmax();
        let top = c.argmax();
        c.retain_by_index(|i| -probs[i].log2() <= mu || Some(i) == top);
        Ok(())
    }
}
