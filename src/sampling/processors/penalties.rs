//! History-dependent transforms (§3.5, §9.3.6): the CTRL sign-aware repetition penalty
//! and the OpenAI-style additive presence and frequency penalties. They are different
//! algorithms, so they are different processors, each with its own declared [`CountScope`].

use super::{check_finite, need, Processor, StageNotes};
use crate::sampling::error::Result;
use crate::sampling::logits::Candidates;
use crate::sampling::state::{windowed_counts, CountScope, StateField, StateView};
use serde_json::json;
use std::collections::BTreeSet;

/// CTRL: `z / θ` if `z > 0`, else `z · θ`, for every token with `c > 0`.
#[derive(Debug, Clone)]
pub struct RepetitionPenalty {
    pub theta: f32,
    pub scope: CountScope,
    pub special: BTreeSet<u32>,
}

/// `z - α · 1[c > 0]`.
#[derive(Debug, Clone)]
pub struct PresencePenalty {
    pub alpha: f32,
    pub scope: CountScope,
    pub special: BTreeSet<u32>,
}

/// `z - α · c`.
#[derive(Debug, Clone)]
pub struct FrequencyPenalty {
    pub alpha: f32,
    pub scope: CountScope,
    pub special: BTreeSet<u32>,
}

/// The sign-aware rule on one logit.
pub fn ctrl_penalty(z: f32, theta: f32) -> f32 {
    if z > 0.0 {
        z / theta
    } else {
        z * theta
    }
}

/// The running counts, and the history itself for a `last_n` window.
const PENALTY_READS: &[StateField] = &[StateField::Counts, StateField::Prompt, StateField::Output];

fn for_counted(
    c: &mut Candidates,
    v: &StateView<'_>,
    name: &'static str,
    scope: CountScope,
    special: &BTreeSet<u32>,
    f: impl Fn(f32, u32) -> f32,
) -> Result<()> {
    let counted = match scope.last_n {
        None => need(v.counts, name)?.scoped(scope, special),
        Some(n) => {
            let (prompt, output) = (need(v.prompt, name)?, need(v.output, name)?);
            windowed_counts(prompt, output, n, scope, special)
        }
    };
    for (id, n) in counted {
        if let Some(i) = c.position(id) {
            c.logits[i] = f(c.logits[i], n);
        }
    }
    check_finite(c, name)
}

impl Processor for RepetitionPenalty {
    fn name(&self) -> &'static str {
        "repetition_penalty"
    }
    fn params(&self) -> serde_json::Value {
        json!({"theta": self.theta, "scope": self.scope})
    }
    fn reads(&self) -> &'static [StateField] {
        PENALTY_READS
    }
    fn apply(&self, c: &mut Candidates, v: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        let t = self.theta;
        for_counted(c, v, self.name(), self.scope, &self.special, |z, _| {
            ctrl_penalty(z, t)
        })
    }
}

impl Processor for PresencePenalty {
    fn name(&self) -> &'static str {
        "presence_penalty"
    }
    fn params(&self) -> serde_json::Value {
        json!({"alpha": self.alpha, "scope": self.scope})
    }
    fn reads(&self) -> &'static [StateField] {
        PENALTY_READS
    }
    fn apply(&self, c: &mut Candidates, v: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        let a = self.alpha;
        for_counted(c, v, self.name(), self.scope, &self.special, |z, _| z - a)
    }
}

impl Processor for FrequencyPenalty {
    fn name(&self) -> &'static str {
        "frequency_penalty"
    }
    fn params(&self) -> serde_json::Value {
        json!({"alpha": self.alpha, "scope": self.scope})
    }
    fn reads(&self) -> &'static [StateField] {
        PENALTY_READS
    }
    fn apply(&self, c: &mut Candidates, v: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        let a = self.alpha;
        for_counted(c, v, self.name(), self.scope, &self.special, |z, n| {
            z - a * n as f32
        })
    }
}
