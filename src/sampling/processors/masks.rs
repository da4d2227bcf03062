//! Hard masks (§3.3 steps 1-4): control/special tokens, minimum-length EOS, the grammar's
//! allowed-token bitmask, banned sequences and no-repeat n-grams. A mask only removes
//! tokens from the support; it never rescales the rest.

use super::{need, Processor, StageNotes};
use crate::sampling::constraint::{mask_allows, mask_words};
use crate::sampling::error::{Result, SamplingError};
use crate::sampling::logits::Candidates;
use crate::sampling::state::{StateField, StateView};
use serde_json::json;
use std::collections::BTreeSet;

/// Remove the listed ids (those absent from the support are ignored).
pub(crate) fn remove_ids(c: &mut Candidates, ids: impl IntoIterator<Item = u32>) {
    let mut drop: Vec<usize> = ids.into_iter().filter_map(|t| c.position(t)).collect();
    if drop.is_empty() {
        return;
    }
    drop.sort_unstable();
    let mut it = drop.into_iter().peekable();
    c.retain_by_index(|i| {
        if it.peek() == Some(&i) {
            it.next();
            false
        } else {
            true
        }
    });
}

/// Model control / special tokens that the request never allows.
#[derive(Debug, Clone)]
pub struct ControlMask {
    pub ids: BTreeSet<u32>,
}

impl Processor for ControlMask {
    fn name(&self) -> &'static str {
        "control_mask"
    }
    fn params(&self) -> serde_json::Value {
        json!({"ids": self.ids})
    }
    fn apply(&self, c: &mut Candidates, _: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        remove_ids(c, self.ids.iter().copied());
        Ok(())
    }
}

/// Masks EOS (and, unless stop tokens take priority, nothing else) until `min_tokens`
/// tokens have been generated.
#[derive(Debug, Clone)]
pub struct MinLength {
    pub min_tokens: usize,
    pub masked: BTreeSet<u32>,
}

impl Processor for MinLength {
    fn name(&self) -> &'static str {
        "min_length"
    }
    fn params(&self) -> serde_json::Value {
        json!({"min_tokens": self.min_tokens, "masked": self.masked})
    }
    fn reads(&self) -> &'static [StateField] {
        &[StateField::Output]
    }
    fn apply(&self, c: &mut Candidates, v: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        if need(v.output, self.name())?.len() < self.min_tokens {
            remove_ids(c, self.masked.iter().copied());
        }
        Ok(())
    }
}

/// The grammar's allowed-token bitmask (u32 words, bit `i % 32` of word `i / 32`).
#[derive(Debug, Clone, Default)]
pub struct GrammarMask;

impl Processor for GrammarMask {
    fn name(&self) -> &'static str {
        "grammar"
    }
    fn reads(&self) -> &'static [StateField] {
        &[StateField::GrammarMask]
    }
    fn apply(&self, c: &mut Candidates, v: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        let Some(mask) = v.grammar_mask else {
            // No grammar on this request: the mask is all-ones.
            return Ok(());
        };
        let needed = mask_words(c.width());
        if mask.len() < needed {
            return Err(SamplingError::MaskWidth {
                words: mask.len(),
                needed,
                width: c.width(),
            });
        }
        let ids = c.ids.clone();
        c.retain_by_index(|i| mask_allows(mask, ids[i]));
        Ok(())
    }
}

/// Forbids the token that would complete a banned sequence (KMP state per sequence).
#[derive(Debug, Clone, Default)]
pub struct BannedSequences;

impl Processor for BannedSequences {
    fn name(&self) -> &'static str {
        "banned_sequences"
    }
    fn reads(&self) -> &'static [StateField] {
        &[StateField::Sequence]
    }
    fn apply(&self, c: &mut Candidates, v: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        let s = need(v.sequence, self.name())?;
        remove_ids(c, s.banned.iter().filter_map(|m| m.completing_token()));
        Ok(())
    }
}

/// Forbids tokens that would repeat an n-gram already in prompt + output.
#[derive(Debug, Clone, Default)]
pub struct NoRepeatNgram;

impl Processor for NoRepeatNgram {
    fn name(&self) -> &'static str {
        "no_repeat_ngram"
    }
    fn reads(&self) -> &'static [StateField] {
        &[StateField::Sequence]
    }
    fn apply(&self, c: &mut Candidates, v: &StateView<'_>, _: &mut StageNotes) -> Result<()> {
        let s = need(v.sequence, self.name())?;
        if let Some(n) = &s.ngram {
            let banned: Vec<u32> = n.banned().collect();
            remove_ids(c, banned);
        }
        Ok(())
    }
}
