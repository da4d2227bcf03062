//! The token-level matcher engines embed: next-token bitmask, consume, rollback,
//! speculative validation, and the accept-versus-stop policy.
//!
//! The bitmask layout is the one XGrammar and llguidance use: `u32` words, token `i`
//! is bit `i % 32` of word `i / 32`, least significant bit first; a mask may be wider
//! than the vocabulary (the model's logits width) and padding ids stay 0.
//!
//! A mask is the cached per-configuration `allowed` set from [`TokenTables`] plus the
//! configuration's few candidate tokens decided by the [candidate
//! walk](super::candidates), plus EOS when the grammar accepts. Tokens are applied to the byte matcher, and each step is remembered so
//! that a rollback by tokens is exact, EOS and policy steps included.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::candidates::CandidateWalk;
use super::Matcher;
use crate::automaton::{State, TerminalId};
use crate::bits::try_set_bit;
use crate::tables::{ConfigurationMasks, LexerConfiguration, TokenTables};

/// What happens once the grammar accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StopPolicy {
    /// EOS is allowed exactly when the grammar accepts; an accepting state with no
    /// continuation allows only EOS.
    #[default]
    Stop,
    /// The grammar constrains a prefix: once it accepts, any token may follow too,
    /// and after one that the grammar does not allow, output is unconstrained.
    AllowContinue,
    /// Once the grammar accepts, one whitespace-only token may follow, then only EOS.
    TrailingWhitespaceThenEos,
}

/// Why a token could not be consumed; the state is unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("token {token} is not allowed after {position} tokens")]
    NotAllowed { token: u32, position: usize },
    #[error("token {token} is outside the vocabulary of {size} tokens")]
    OutOfVocabulary { token: u32, size: usize },
    #[error("the matcher has terminated: EOS was consumed")]
    Terminated,
}

/// One consumed token, as needed to undo it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Bytes fed to the grammar.
    Bytes(u32),
    Eos,
    /// A whitespace token after acceptance (`TrailingWhitespaceThenEos`).
    Trailing,
    /// A token past the grammar (`AllowContinue`).
    Free,
}

/// Token-level matching state for one request.
#[derive(Clone)]
pub struct TokenMatcher {
    bytes: Matcher,
    tables: Arc<TokenTables>,
    policy: StopPolicy,
    steps: Vec<Step>,
    /// Index in `steps` of the first `Free` or `Trailing` step (`usize::MAX` if
    /// none): the policy state without scanning the history at every token.
    first_policy_step: usize,
    configuration: Vec<(TerminalId, State)>,
    /// The last mask's configuration and its masks: a string body's next token
    /// usually meets the same one, which skips the tables' locked lookup.
    last_masks: Option<(LexerConfiguration, Arc<ConfigurationMasks>)>,
    /// Per active lexeme, its table lexeme (`configuration` before sorting).
    table_lexemes: Vec<(TerminalId, State)>,
    signature: Vec<u32>,
    signature_memo: FxHashMap<(u32, u32), u32>,
    /// What `signature` was computed from besides the states ([`Matcher::future_key`]),
    /// where its states sit, and the current position's key (a buffer).
    signature_key: (Vec<(u32, u32)>, u64),
    signature_states_at: Vec<usize>,
    future_key: Vec<(u32, u32)>,
    /// The last signature's accepted candidates: inside a string body the next
    /// token usually meets the same one, which skips the tables' locked lookup.
    last_accepted: Option<Arc<Vec<u32>>>,
    /// The signature `last_accepted` is for (its buffer reused).
    last_signature: Vec<u32>,
    candidate_walk: CandidateWalk,
}

impl TokenMatcher {
    pub fn new(tables: Arc<TokenTables>) -> TokenMatcher {
        TokenMatcher::with_policy(tables, StopPolicy::default())
    }

    pub fn with_policy(tables: Arc<TokenTables>, policy: StopPolicy) -> TokenMatcher {
        TokenMatcher {
            bytes: Matcher::new(Arc::clone(tables.grammar())),
            tables,
            policy,
            steps: Vec::new(),
            first_policy_step: usize::MAX,
            configuration: Vec::new(),
            last_masks: None,
            table_lexemes: Vec::new(),
            signature: Vec::new(),
            signature_memo: FxHashMap::default(),
            // No key matches before a first signature (a truncation count of
            // `u64::MAX` is never reached).
            signature_key: (Vec::new(), u64::MAX),
            signature_states_at: Vec::new(),
            future_key: Vec::new(),
            last_accepted: None,
            last_signature: Vec::new(),
            candidate_walk: CandidateWalk::default(),
        }
    }

    /// The byte-level state underneath.
    pub fn byte_matcher(&self) -> &Matcher {
        &self.bytes
    }

    pub fn tables(&self) -> &Arc<TokenTables> {
        &self.tables
    }

    /// Tokens consumed so far (EOS included).
    pub fn tokens_consumed(&self) -> usize {
        self.steps.len()
    }

    /// The grammar accepts the bytes consumed so far.
    pub fn is_accepting(&self) -> bool {
        self.bytes.is_accepting()
    }

    /// EOS was consumed; every later call answers without effect.
    pub fn is_terminated(&self) -> bool {
        self.steps.last() == Some(&Step::Eos)
    }

    fn released(&self) -> bool {
        self.steps.get(self.first_policy_step) == Some(&Step::Free)
    }

    fn trailing(&self) -> bool {
        self.steps.get(self.first_policy_step) == Some(&Step::Trailing)
    }

    fn push_step(&mut self, step: Step) {
        if matches!(step, Step::Free | Step::Trailing) && self.first_policy_step == usize::MAX {
            self.first_policy_step = self.steps.len();
        }
        self.steps.push(step);
    }

    fn eos_allowed_now(&self) -> bool {
        self.is_accepting() || self.released() || self.trailing()
    }

    /// Fills `mask` (at least `ceil(vocab / 32)` words; extra words are padding and
    /// come out 0) with the tokens allowed next.
    pub fn fill_next_token_bitmask(&mut self, mask: &mut [u32]) {
        // Borrowed, not cloned: two atomic operations were a tenth of a cached
        // mask's time.
        let vocab = &**self.tables.vocab();
        if self.is_terminated() || self.trailing() {
            mask.fill(0);
            vocab.eos_ids().iter().for_each(|&id| {
                try_set_bit(mask, id as usize);
            });
            return;
        }
        if self.released() {
            mask.fill(0);
            self.fill_all_text_tokens(mask);
            vocab.eos_ids().iter().for_each(|&id| {
                try_set_bit(mask, id as usize);
            });
            return;
        }
        self.bytes
            .table_lexemes(vocab.trie().max_depth(), &mut self.table_lexemes);
        self.configuration.clone_from(&self.table_lexemes);
        super::as_configuration(&mut self.configuration);
        if self
            .last_masks
            .as_ref()
            .is_none_or(|(configuration, _)| configuration[..] != self.configuration[..])
        {
            let masks = self.tables.masks(&self.configuration);
            self.last_masks = Some((self.configuration.as_slice().into(), masks));
        }
        let masks = match &self.last_masks {
            Some((_, masks)) => &**masks,
            None => unreachable!("set just above"),
        };
        // One pass over the mask: the cached words, then zeros (padding).
        masks.allowed.write_to(mask);
        if !masks.candidates.is_empty() {
            // The walk's result depends only on the parse state's future over the
            // next token's bytes, so it is cached under the matcher's position-free
            // signature for the longest token.
            // Inside a string body the chart is the same from token to token:
            // the last signature with the lexemes' states rewritten is this one
            // (computing it anew was a sixth of a cached mask).
            self.bytes.future_key(&mut self.future_key);
            let truncations = self.bytes.chart_truncations();
            if (&self.future_key, truncations) == (&self.signature_key.0, self.signature_key.1) {
                for (lexeme, &at) in self
                    .bytes
                    .active_lexemes()
                    .iter()
                    .zip(&self.signature_states_at)
                {
                    self.signature[at] = lexeme.state;
                }
            } else {
                self.bytes.future_signature_with_states(
                    vocab.trie().max_depth(),
                    &mut self.signature_memo,
                    &mut self.signature,
                    &mut self.signature_states_at,
                );
                std::mem::swap(&mut self.signature_key.0, &mut self.future_key);
                self.signature_key.1 = truncations;
            }
            let known = self.last_accepted.is_some() && self.last_signature == self.signature;
            if !known {
                let accepted = match self.tables.accepted_candidates(&self.signature) {
                    Some(accepted) => accepted,
                    None => {
                        let accepted = Arc::new(self.candidate_walk.accepted(
                            &mut self.bytes,
                            &self.tables,
                            &masks.candidates,
                            &self.table_lexemes,
                        ));
                        // The walk dropped only the sets it built past this
                        // position: the signature's sets are intact.
                        self.signature_key.1 = self.bytes.chart_truncations();
                        self.tables
                            .remember_accepted_candidates(&self.signature, Arc::clone(&accepted));
                        accepted
                    }
                };
                self.last_signature.clone_from(&self.signature);
                self.last_accepted = Some(accepted);
            }
            if let Some(accepted) = &self.last_accepted {
                accepted.iter().for_each(|&id| {
                    try_set_bit(mask, id as usize);
                });
            }
        }
        if self.tables.has_token_sets() {
            for terminal in self.bytes.token_lexemes() {
                if let Some(tokens) = self.tables.token_set_mask(terminal) {
                    for (word, &bits) in mask.iter_mut().zip(tokens) {
                        *word |= bits;
                    }
                }
            }
        }
        if self.is_accepting() {
            vocab.eos_ids().iter().for_each(|&id| {
                try_set_bit(mask, id as usize);
            });
            match self.policy {
                StopPolicy::Stop => {}
                StopPolicy::AllowContinue => self.fill_all_text_tokens(mask),
                StopPolicy::TrailingWhitespaceThenEos => {
                    for id in 0..vocab.len() as u32 {
                        if is_whitespace_token(vocab.token_bytes(id)) {
                            try_set_bit(mask, id as usize);
                        }
                    }
                }
            }
        }
    }

    fn fill_all_text_tokens(&self, mask: &mut [u32]) {
        let vocab = self.tables.vocab();
        for &id in vocab.text_tokens() {
            try_set_bit(mask, id as usize);
        }
    }

    /// Whether `token` may come next (the same answer as the mask's bit).
    pub fn is_token_allowed(&mut self, token: u32) -> bool {
        let ok = self.consume_token(token).is_ok();
        if ok {
            self.rollback(1);
        }
        ok
    }

    /// Consumes one token; on error nothing changes.
    pub fn consume_token(&mut self, token: u32) -> Result<(), TokenError> {
        let vocab = Arc::clone(self.tables.vocab());
        let position = self.steps.len();
        let not_allowed = Err(TokenError::NotAllowed { token, position });
        if self.is_terminated() {
            return Err(TokenError::Terminated);
        }
        if token as usize >= vocab.len() {
            return Err(TokenError::OutOfVocabulary {
                token,
                size: vocab.len(),
            });
        }
        if vocab.is_eos(token) {
            if !self.eos_allowed_now() {
                return not_allowed;
            }
            self.push_step(Step::Eos);
            return Ok(());
        }
        if self.released() {
            self.push_step(Step::Free);
            return Ok(());
        }
        if self.trailing() {
            return not_allowed;
        }
        let bytes = vocab.token_bytes(token);
        let before = self.bytes.position();
        // The flag first: a grammar without token terminals pays no scan of
        // its lexemes per token.
        if self.tables.has_token_sets() && self.bytes.expects_tokens() {
            if let Ok(positions) = self.bytes.consume_token(token, bytes) {
                self.push_step(Step::Bytes(positions as u32));
                return Ok(());
            }
        } else if !bytes.is_empty() && self.bytes.consume_token_bytes(bytes).is_ok() {
            self.push_step(Step::Bytes(bytes.len() as u32));
            return Ok(());
        }
        self.bytes.rollback(self.bytes.position() - before);
        let accepting = self.is_accepting();
        match self.policy {
            StopPolicy::AllowContinue if accepting => self.push_step(Step::Free),
            StopPolicy::TrailingWhitespaceThenEos if accepting && is_whitespace_token(bytes) => {
                self.push_step(Step::Trailing)
            }
            _ => return not_allowed,
        }
        Ok(())
    }

    /// Consumes raw bytes as one step (a prompt suffix, forced bytes, or a prefix in
    /// tests); `rollback(1)` undoes them together. On error nothing changes.
    pub fn consume_bytes(&mut self, bytes: &[u8]) -> Result<(), TokenError> {
        let position = self.steps.len();
        if self.is_terminated() {
            return Err(TokenError::Terminated);
        }
        if self.released() || self.trailing() {
            return Err(TokenError::NotAllowed {
                token: u32::MAX,
                position,
            });
        }
        let before = self.bytes.position();
        // One step, one token: a token budget counts it once.
        match self.bytes.consume_token_bytes(bytes) {
            Ok(()) => {
                self.push_step(Step::Bytes(bytes.len() as u32));
                Ok(())
            }
            Err(_) => {
                self.bytes.rollback(self.bytes.position() - before);
                Err(TokenError::NotAllowed {
                    token: u32::MAX,
                    position,
                })
            }
        }
    }

    /// Consumes tokens in order, stopping at the first that is not allowed; on error
    /// the tokens before it stay consumed.
    pub fn consume_tokens(&mut self, tokens: &[u32]) -> Result<(), TokenError> {
        tokens.iter().try_for_each(|&t| self.consume_token(t))
    }

    /// How many leading tokens of `tokens` would be accepted; the state is unchanged
    /// (for speculative decoding).
    pub fn validate_tokens(&mut self, tokens: &[u32]) -> usize {
        let mut n = 0;
        for &t in tokens {
            if self.consume_token(t).is_err() {
                break;
            }
            n += 1;
        }
        self.rollback(n);
        n
    }

    /// Undoes the last `n` tokens (fewer if fewer were consumed).
    pub fn rollback(&mut self, n: usize) {
        for _ in 0..n.min(self.steps.len()) {
            if let Some(Step::Bytes(len)) = self.steps.pop() {
                self.bytes.rollback(len as usize);
            }
        }
        if self.steps.len() <= self.first_policy_step {
            self.first_policy_step = usize::MAX;
        }
    }

    /// The one token the grammar allows next where no byte may come and one
    /// token terminal holds a single id (a tool call's `<tool_call>` after a
    /// required choice, `<|eot_id|>` closing a turn): certain, as forced bytes
    /// are, though no byte spells it. `None` where the grammar accepts (EOS may
    /// come instead) or anything else may come.
    pub fn forced_token(&self) -> Option<u32> {
        if !self.tables.has_token_sets()
            || self.is_terminated()
            || self.released()
            || self.trailing()
            || self.is_accepting()
            || !self.bytes.allowed_bytes().is_empty()
        {
            return None;
        }
        let mut only = None;
        for terminal in self.bytes.token_lexemes() {
            let bits = self.tables.token_set_mask(terminal)?;
            for id in crate::bits::ones(bits) {
                match only {
                    None => only = Some(id as u32),
                    Some(known) if known == id as u32 => {}
                    Some(_) => return None,
                }
            }
        }
        only
    }

    /// Bytes the grammar forces next: while exactly one byte is allowed and the
    /// grammar does not accept, that byte is certain.
    pub fn forced_bytes(&mut self) -> Vec<u8> {
        let mut forced = Vec::new();
        if self.is_terminated() || self.released() || self.trailing() {
            return forced;
        }
        // A token terminal may come instead of any byte: nothing is forced.
        let tokens = self.tables.has_token_sets();
        while !(self.bytes.is_accepting() || tokens && self.bytes.expects_tokens()) {
            let allowed = self.bytes.allowed_bytes();
            let mut it = allowed.iter();
            let (Some(b), None) = (it.next(), it.next()) else {
                break;
            };
            if self.bytes.consume_byte(b).is_err() {
                break;
            }
            forced.push(b);
        }
        self.bytes.rollback(forced.len());
        forced
    }
}

fn is_whitespace_token(bytes: &[u8]) -> bool {
    !bytes.is_empty()
        && bytes
            .iter()
            .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}
