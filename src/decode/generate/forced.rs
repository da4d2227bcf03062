//! What the decode loop commits without sampling: the tokens the grammar forces
//! (jump-forward: the canonical tokens of forced bytes, or the one special token
//! allowed), and budget steering's closing tokens when a sampled token would
//! leave too few to close the output within `max_tokens`.
//!
//! A child of [`super`] (the loop) so it works on the loop's own request state.

use super::{ActiveRequest, Event, Generator, TokenLogprobs};
use crate::decode::DecodeError;
use crate::matcher::{StopPolicy, TokenMatcher};

/// Bytes the shortest-completion search (budget steering) may explore before giving up.
const CLOSING_SEARCH_LIMIT: usize = 1 << 16;

impl Generator {
    /// Commits `tokens` the loop chose, in order, until the request ends.
    pub(super) fn commit_forced_tokens(
        &self,
        r: &mut ActiveRequest,
        tokens: Vec<u32>,
        index: usize,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), DecodeError> {
        for token in tokens {
            if r.done.is_some() {
                break;
            }
            self.commit_forced(r, token, index, on_event)?;
        }
        Ok(())
    }

    /// Commits a token the loop chose (not sampled), with its logprob record
    /// when the request keeps them.
    pub(super) fn commit_forced(
        &self,
        r: &mut ActiveRequest,
        token: u32,
        index: usize,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), DecodeError> {
        r.timings.forced_tokens += 1;
        if r.logprobs > 0 {
            r.logprob_records.push(TokenLogprobs {
                token,
                text: self.token_text(token),
                forced: true,
                logprobs: Vec::new(),
                top_raw: Vec::new(),
                top_selected: Vec::new(),
            });
        }
        self.commit(r, token, true, index, on_event)
    }

    /// Tokens left before `max_tokens` (EOS counts as a token).
    pub(super) fn budget(r: &ActiveRequest) -> usize {
        r.max_tokens
            .saturating_sub(r.state.selected_token_ids().len())
    }

    /// The tokens of a shortest completion from the matcher's state, EOS not
    /// included: the bytes cut greedily into the longest vocabulary tokens, which
    /// the grammar must accept.
    pub(super) fn closing_tokens(&self, m: &mut TokenMatcher) -> Option<Vec<u32>> {
        let bytes = m.byte_matcher().shortest_completion(CLOSING_SEARCH_LIMIT)?;
        self.cut_into_tokens(m, &bytes)
    }

    pub(super) fn cut_into_tokens(&self, m: &mut TokenMatcher, bytes: &[u8]) -> Option<Vec<u32>> {
        let trie = self.tokenizer.vocab().trie();
        let mut tokens = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            let (id, len) = trie.longest_prefix(rest)?;
            tokens.push(id);
            rest = &rest[len..];
        }
        (m.validate_tokens(&tokens) == tokens.len()).then_some(tokens)
    }

    /// Budget steering: when committing `token` would leave too few tokens to close
    /// the output, the closing tokens (and EOS) from here instead. `None`: go on.
    pub(super) fn steer(
        &self,
        r: &mut ActiveRequest,
        token: u32,
    ) -> Result<Option<Vec<u32>>, DecodeError> {
        if !r.budget_steering || self.tokenizer.vocab().is_eos(token) {
            return Ok(None);
        }
        let budget = Self::budget(r);
        let Some(m) = r.matcher.as_mut() else {
            return Ok(None);
        };
        m.consume_token(token)
            .map_err(|e| DecodeError::Grammar(e.to_string()))?;
        let need_after = m
            .byte_matcher()
            .shortest_completion(CLOSING_SEARCH_LIMIT)
            .and_then(|bytes| {
                // Every token holds at least one byte: while the bytes (and EOS) fit,
                // so do their tokens, and the cut can wait for the last steps.
                if bytes.len() + 1 < budget {
                    Some(bytes.len() + 1)
                } else {
                    self.cut_into_tokens(m, &bytes).map(|t| t.len() + 1)
                }
            });
        m.rollback(1);
        if need_after.is_some_and(|need| need < budget) {
            return Ok(None);
        }
        Ok(match self.closing_tokens(m) {
            Some(mut closing) if closing.len() < budget => {
                closing.push(r.eos);
                Some(closing)
            }
            // No completion fits any more: nothing to steer towards.
            _ => None,
        })
    }

    /// Commits the canonical tokens of the bytes the grammar forces next (or the one
    /// special token it allows, [`TokenMatcher::forced_token`]); ends the
    /// request when the grammar accepts and nothing may follow.
    pub(super) fn jump_forward(
        &self,
        r: &mut ActiveRequest,
        index: usize,
        on_event: &mut dyn FnMut(Event<'_>),
    ) -> Result<(), DecodeError> {
        // A special token no byte spells, alone allowed: what sampling would
        // pick, without the forward pass; the text it forces next follows.
        loop {
            let Some(m) = &mut r.matcher else {
                return Ok(());
            };
            match m.forced_token() {
                Some(token) if r.done.is_none() => self.commit_forced(r, token, index, on_event)?,
                _ => break,
            }
        }
        let budget = Self::budget(r);
        let Some(m) = &mut r.matcher else {
            return Ok(());
        };
        let bytes = m.forced_bytes();
        let tokens = if bytes.is_empty() {
            Vec::new()
        } else {
            let valid = match std::str::from_utf8(&bytes) {
                Ok(s) => s,
                Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
            };
            let mut tokens = self.tokenizer.encode(valid)?;
            // The last token might merge with what the model writes next.
            tokens.pop();
            let accepted = m.validate_tokens(&tokens);
            tokens.truncate(accepted);
            if r.budget_steering && !tokens.is_empty() {
                // Forced text is in every completion, but its canonical split may
                // cost more tokens than the closing split: keep the budget closable.
                m.consume_tokens(&tokens)
                    .map_err(|e| DecodeError::Grammar(e.to_string()))?;
                let need = self.closing_tokens(m).map(|t| t.len() + 1);
                m.rollback(tokens.len());
                if need.is_none_or(|need| need + tokens.len() > budget) {
                    tokens.clear();
                }
            }
            tokens
        };
        self.commit_forced_tokens(r, tokens, index, on_event)?;
        // Accepting with no possible continuation: only EOS is allowed.
        let m = r.matcher.as_ref().expect("checked above");
        if r.done.is_none()
            && r.stop_policy == StopPolicy::Stop
            && m.is_accepting()
            && !m.byte_matcher().can_continue()
        {
            let eos = r.eos;
            self.commit(r, eos, true, index, on_event)?;
        }
        Ok(())
    }
}
