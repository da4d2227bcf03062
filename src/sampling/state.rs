//! Per-request decoder state (§3.2) and its post-selection update (§3.10).
//!
//! The state holds history, counts, sequence automata, the grammar matcher, the stop
//! matcher, the RNG key and counter, processor state and the finish status; never model
//! (KV) data. Processors see it only through [`StateView`], restricted to the fields each
//! one declares (invariant 3.1), so none can read what it did not declare or rewrite history.

use super::constraint::{SeqMatcher, SequenceConstraintState, TokenConstraint, Unconstrained};
use super::error::{Result, SamplingError};
use super::rng::RngStream;
use super::stop_strings::StopStrings;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Which history a penalty counts (§3.5: the scope must be declared).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CountScope {
    /// Count prompt tokens too (HF and vLLM repetition penalty do; OpenAI-style
    /// presence/frequency do not).
    #[serde(default)]
    pub include_prompt: bool,
    /// Ignore the configured special token ids.
    #[serde(default)]
    pub exclude_special: bool,
    /// Count only the last N tokens of that history (llama.cpp's `penalty_last_n`,
    /// default 64 there); absent: all of it. 0 counts nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_n: Option<usize>,
}

/// Why a request stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishStatus {
    Running,
    Eos(u32),
    StopToken(u32),
    StopSequence(usize),
    /// Text stop string `index` completed; the output is cut at byte `at`, where it
    /// begins.
    StopString {
        index: usize,
        at: usize,
    },
    Length,
}

/// §3.2 `stop_matcher_state`: stop token ids, stop token sequences, text stop strings,
/// EOS, max length.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StopMatcher {
    pub eos: BTreeSet<u32>,
    pub stop_tokens: BTreeSet<u32>,
    pub stop_sequences: Vec<SeqMatcher>,
    pub stop_strings: StopStrings,
    pub max_tokens: Option<usize>,
}

impl StopMatcher {
    /// §3.10 `observe(y_t, token_bytes(y_t))`. An id stop (EOS, a stop token) wins
    /// over a sequence or string the same token completes: its text is not output.
    fn observe(&mut self, t: u32, bytes: &[u8]) -> Option<FinishStatus> {
        let mut hit = None;
        for (i, s) in self.stop_sequences.iter_mut().enumerate() {
            if s.consume(t) && hit.is_none() {
                hit = Some(FinishStatus::StopSequence(i));
            }
        }
        let text_hit = self.stop_strings.observe(bytes);
        if self.eos.contains(&t) {
            Some(FinishStatus::Eos(t))
        } else if self.stop_tokens.contains(&t) {
            Some(FinishStatus::StopToken(t))
        } else {
            hit.or(text_hit.map(|h| FinishStatus::StopString {
                index: h.index,
                at: h.at,
            }))
        }
    }
}

/// Processor-owned state carried between steps (Mirostat's μ).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ProcessorState {
    pub mirostat_mu: Option<f64>,
}

/// What a step hands back to the state after selection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Commit {
    pub token: u32,
    pub processor_state: ProcessorState,
}

#[derive(Debug, Clone)]
pub struct DecoderState<C: TokenConstraint = Unconstrained> {
    pub(crate) prompt_token_ids: Vec<u32>,
    pub(crate) selected_token_ids: Vec<u32>,
    pub(crate) token_counts: BTreeMap<u32, u32>,
    pub(crate) prompt_counts: BTreeMap<u32, u32>,
    pub(crate) sequence_constraint_state: SequenceConstraintState,
    pub(crate) grammar_state: Option<C>,
    pub(crate) stop_matcher_state: StopMatcher,
    pub(crate) rng: RngStream,
    /// 1-based step `t` of §3.2; the RNG counter's step word.
    pub(crate) step_index: u64,
    pub(crate) processor_state: ProcessorState,
    pub(crate) finish_status: FinishStatus,
}

fn count(ids: &[u32]) -> BTreeMap<u32, u32> {
    let mut m = BTreeMap::new();
    for &t in ids {
        *m.entry(t).or_insert(0) += 1;
    }
    m
}

impl<C: TokenConstraint> DecoderState<C> {
    /// A fresh state at step 1. Sequence automata see the prompt first, so a banned
    /// sequence straddling prompt and output is still caught.
    pub fn new(
        prompt: Vec<u32>,
        seed: u64,
        grammar: Option<C>,
        mut sequence: SequenceConstraintState,
        stop: StopMatcher,
        processor_state: ProcessorState,
    ) -> Self {
        for &t in &prompt {
            sequence.consume(t);
        }
        Self {
            prompt_counts: count(&prompt),
            prompt_token_ids: prompt,
            selected_token_ids: Vec::new(),
            token_counts: BTreeMap::new(),
            sequence_constraint_state: sequence,
            grammar_state: grammar,
            stop_matcher_state: stop,
            rng: RngStream::new(seed),
            step_index: 1,
            processor_state,
            finish_status: FinishStatus::Running,
        }
    }

    /// Replay earlier selected tokens (e.g. the CLI's `history`) through the §3.10
    /// update, without their text (ids only: no stop string can match them).
    pub fn replay(&mut self, tokens: &[u32]) -> Result<()> {
        for &t in tokens {
            let ps = self.processor_state;
            self.commit(
                Commit {
                    token: t,
                    processor_state: ps,
                },
                b"",
            )?;
        }
        Ok(())
    }

    /// §3.10, in this order: history, counts, sequence automata, grammar, stop matcher
    /// (the token's id and `bytes`, its text: empty for a token without text, such
    /// as EOS), processor state, RNG counter, step index; then the finish checks.
    ///
    /// Atomic: the grammar, the one part that can refuse, is asked first, so a
    /// refused token (or a finished request) leaves the state exactly as it was.
    pub fn commit(&mut self, c: Commit, bytes: &[u8]) -> Result<FinishStatus> {
        if self.finish_status != FinishStatus::Running {
            return Err(SamplingError::Finished(format!("{:?}", self.finish_status)));
        }
        let y = c.token;
        if let Some(g) = &mut self.grammar_state {
            if !g.accept(y) {
                return Err(SamplingError::ConstraintRejected(y));
            }
        }
        self.selected_token_ids.push(y);
        *self.token_counts.entry(y).or_insert(0) += 1;
        self.sequence_constraint_state.consume(y);
        let stop = self.stop_matcher_state.observe(y, bytes);
        self.processor_state = c.processor_state;
        // Counter-based RNG: advancing the step word is the whole state update.
        self.step_index += 1;
        if let Some(s) = stop {
            self.finish_status = s;
        } else if let Some(m) = self.stop_matcher_state.max_tokens {
            if self.selected_token_ids.len() >= m {
                self.finish_status = FinishStatus::Length;
            }
        }
        Ok(self.finish_status.clone())
    }

    pub fn prompt_token_ids(&self) -> &[u32] {
        &self.prompt_token_ids
    }
    pub fn selected_token_ids(&self) -> &[u32] {
        &self.selected_token_ids
    }
    pub fn step_index(&self) -> u64 {
        self.step_index
    }
    pub fn rng(&self) -> RngStream {
        self.rng
    }
    pub fn finish_status(&self) -> &FinishStatus {
        &self.finish_status
    }
    pub fn grammar_state(&self) -> Option<&C> {
        self.grammar_state.as_ref()
    }
    pub fn processor_state(&self) -> ProcessorState {
        self.processor_state
    }
    /// The text stop strings (for streaming's hold-back).
    pub fn stop_strings(&self) -> &StopStrings {
        &self.stop_matcher_state.stop_strings
    }
    /// The grammar matcher's state for traces, if the request has one.
    pub fn constraint_record(&self) -> Option<super::trace::ConstraintRecord> {
        self.grammar_state
            .as_ref()
            .map(|g| super::trace::ConstraintRecord {
                accepting: g.is_accepting(),
                summary: g.summary(),
            })
    }

    pub fn output_counts(&self) -> &BTreeMap<u32, u32> {
        &self.token_counts
    }

    /// The full view; [`StateView::restrict`] narrows it per processor.
    pub fn view<'a>(&'a self, grammar_mask: Option<&'a [u32]>) -> StateView<'a> {
        StateView {
            step: self.step_index,
            prompt: Some(&self.prompt_token_ids),
            output: Some(&self.selected_token_ids),
            counts: Some(Counts {
                output: &self.token_counts,
                prompt: &self.prompt_counts,
            }),
            sequence: Some(&self.sequence_constraint_state),
            grammar_mask,
            rng: Some(self.rng),
            processor_state: Some(self.processor_state),
        }
    }
}

/// Token counts of output and prompt; a [`CountScope`] picks what a penalty sees.
#[derive(Debug, Clone, Copy)]
pub struct Counts<'a> {
    pub output: &'a BTreeMap<u32, u32>,
    pub prompt: &'a BTreeMap<u32, u32>,
}

impl Counts<'_> {
    /// `(id, c_id)` for every id with `c_id > 0` under `scope`, ascending id.
    pub fn scoped(&self, scope: CountScope, special: &BTreeSet<u32>) -> Vec<(u32, u32)> {
        let mut m: BTreeMap<u32, u32> = self.output.clone();
        if scope.include_prompt {
            for (&t, &c) in self.prompt {
                *m.entry(t).or_insert(0) += c;
            }
        }
        m.into_iter()
            .filter(|(t, _)| !(scope.exclude_special && special.contains(t)))
            .collect()
    }
}

/// `(id, c_id)` over the last `n` tokens of the history `scope` names (prompt then
/// output), ascending id: the window a [`CountScope::last_n`] asks for, counted from
/// the tokens themselves since the running counts cover the whole history.
pub fn windowed_counts(
    prompt: &[u32],
    output: &[u32],
    n: usize,
    scope: CountScope,
    special: &BTreeSet<u32>,
) -> Vec<(u32, u32)> {
    let from_output = n.min(output.len());
    let from_prompt = if scope.include_prompt {
        (n - from_output).min(prompt.len())
    } else {
        0
    };
    let mut m: BTreeMap<u32, u32> = BTreeMap::new();
    let tail = prompt[prompt.len() - from_prompt..]
        .iter()
        .chain(&output[output.len() - from_output..]);
    for &t in tail {
        if !(scope.exclude_special && special.contains(&t)) {
            *m.entry(t).or_insert(0) += 1;
        }
    }
    m.into_iter().collect()
}

/// State fields a processor may declare it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StateField {
    Prompt,
    Output,
    Counts,
    Sequence,
    GrammarMask,
    Rng,
    ProcessorState,
}

/// Read-only view of a [`DecoderState`]; undeclared fields are `None`.
#[derive(Debug, Clone, Copy)]
pub struct StateView<'a> {
    pub step: u64,
    pub prompt: Option<&'a [u32]>,
    pub output: Option<&'a [u32]>,
    pub counts: Option<Counts<'a>>,
    pub sequence: Option<&'a SequenceConstraintState>,
    pub grammar_mask: Option<&'a [u32]>,
    pub rng: Option<RngStream>,
    pub processor_state: Option<ProcessorState>,
}

impl<'a> StateView<'a> {
    pub fn restrict(&self, reads: &[StateField]) -> StateView<'a> {
        let has = |f| reads.contains(&f);
        StateView {
            step: self.step,
            prompt: self.prompt.filter(|_| has(StateField::Prompt)),
            output: self.output.filter(|_| has(StateField::Output)),
            counts: self.counts.filter(|_| has(StateField::Counts)),
            sequence: self.sequence.filter(|_| has(StateField::Sequence)),
            grammar_mask: self.grammar_mask.filter(|_| has(StateField::GrammarMask)),
            rng: self.rng.filter(|_| has(StateField::Rng)),
            processor_state: self
                .processor_state
                .filter(|_| has(StateField::ProcessorState)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state at step 1 with no prompt, seed 0 and default processor state.
    fn fresh<C: TokenConstraint>(
        grammar: Option<C>,
        sequence: SequenceConstraintState,
        stop: StopMatcher,
    ) -> DecoderState<C> {
        DecoderState::new(
            vec![],
            0,
            grammar,
            sequence,
            stop,
            ProcessorState::default(),
        )
    }

    #[test]
    fn restricted_views_hide_undeclared_state() {
        let st: DecoderState = DecoderState::new(
            vec![1, 2],
            5,
            None,
            SequenceConstraintState::default(),
            StopMatcher::default(),
            ProcessorState::default(),
        );
        let mask = [u32::MAX];
        let full = st.view(Some(&mask));
        let v = full.restrict(&[StateField::Counts]);
        assert!(v.counts.is_some());
        assert!(v.output.is_none() && v.prompt.is_none() && v.grammar_mask.is_none());
        assert!(v.rng.is_none() && v.sequence.is_none() && v.processor_state.is_none());
        let g = full.restrict(&[StateField::GrammarMask, StateField::Rng]);
        assert!(g.grammar_mask.is_some() && g.rng.is_some() && g.counts.is_none());
    }

    #[test]
    fn commit_follows_the_update_order_and_stops() {
        let stop = StopMatcher {
            eos: [9].into(),
            stop_sequences: vec![SeqMatcher::new(vec![4, 5])],
            max_tokens: Some(10),
            ..Default::default()
        };
        let mut st: DecoderState = fresh(None, SequenceConstraintState::default(), stop);
        let c = |t| Commit {
            token: t,
            processor_state: ProcessorState::default(),
        };
        assert_eq!(st.commit(c(4), b"").unwrap(), FinishStatus::Running);
        assert_eq!(st.output_counts().get(&4), Some(&1));
        assert_eq!(st.step_index(), 2);
        assert_eq!(st.commit(c(5), b"").unwrap(), FinishStatus::StopSequence(0));
        assert_eq!(st.selected_token_ids(), [4, 5]);
    }

    /// Accepts even ids only.
    #[derive(Clone)]
    struct EvenIds;

    impl TokenConstraint for EvenIds {
        fn fill_mask(&self, mask: &mut [u32]) {
            mask.fill(0x5555_5555);
        }
        fn accept(&mut self, token: u32) -> bool {
            token.is_multiple_of(2)
        }
        fn is_accepting(&self) -> bool {
            true
        }
    }

    #[test]
    fn a_refused_token_leaves_the_state_as_it_was() {
        let stop = StopMatcher {
            stop_sequences: vec![SeqMatcher::new(vec![2, 3, 4])],
            stop_strings: StopStrings::new(vec![b"ab".to_vec()]),
            ..Default::default()
        };
        let sequence = SequenceConstraintState {
            banned: vec![SeqMatcher::new(vec![2, 3])],
            ngram: Some(super::super::constraint::NgramState::new(2)),
        };
        let mut st = fresh(Some(EvenIds), sequence, stop);
        let c = |t| Commit {
            token: t,
            processor_state: ProcessorState {
                mirostat_mu: Some(f64::from(t)),
            },
        };
        let snapshot = |st: &DecoderState<EvenIds>| {
            (
                st.selected_token_ids.clone(),
                st.token_counts.clone(),
                st.sequence_constraint_state.clone(),
                st.stop_matcher_state.clone(),
                st.step_index,
                st.processor_state,
            )
        };
        st.commit(c(2), b"a").unwrap();
        let before = snapshot(&st);
        assert_eq!(
            st.commit(c(3), b"b"),
            Err(SamplingError::ConstraintRejected(3))
        );
        assert_eq!(before, snapshot(&st));
        // The refused "b" was not seen: "a" then "b" stops only now.
        assert_eq!(
            st.commit(c(4), b"b").unwrap(),
            FinishStatus::StopString { index: 0, at: 0 }
        );
        assert_eq!(st.selected_token_ids(), [2, 4]);
    }

    #[test]
    fn an_id_stop_wins_over_the_text_its_token_completes() {
        let stop = StopMatcher {
            eos: [9].into(),
            stop_strings: StopStrings::new(vec![b"</s>".to_vec()]),
            ..Default::default()
        };
        let mut st: DecoderState = fresh(None, SequenceConstraintState::default(), stop);
        let c = Commit {
            token: 9,
            processor_state: ProcessorState::default(),
        };
        assert_eq!(st.commit(c, b"</s>").unwrap(), FinishStatus::Eos(9));
    }
}
