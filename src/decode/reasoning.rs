//! A reasoning span's token budget: the model thinks freely inside
//! `<think>...</think>`, and once the span holds `max_tokens` tokens without its
//! close, the close is written for it (as llama.cpp's `--reasoning-budget` and
//! vLLM's thinking budget do), so the answer always gets its turn.
//!
//! The grammar knows nothing of the budget: it lets the span's text run free up
//! to the close ([`crate::frontend::tool_calls::with_reasoning`]) and accepts the
//! close at any point of it, so forcing the close is always a move it allows.
//! What counts is the output as written: the watch follows each committed
//! token's bytes, so it works the same with or without a grammar, whether the
//! close is one special token (Qwen3's `</think>`) or text spelled over several.
//!
//! ```
//! use stencil::decode::reasoning::{ReasoningBudget, ReasoningWatch};
//!
//! let budget = ReasoningBudget { open: Some("<think>".into()), close: "</think>".into(), max_tokens: 2 };
//! let mut watch = ReasoningWatch::new(budget);
//! for token in ["<think>", "Hmm", ","] {
//!     assert!(!watch.must_close());
//!     watch.observe(token.as_bytes());
//! }
//! // Two tokens inside the span: the close comes next.
//! assert!(watch.must_close());
//! assert_eq!(watch.content_tokens(), 2);
//! ```

/// A reasoning span at the start of the output and its budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReasoningBudget {
    /// What opens the span when the model writes it; `None` when the prompt
    /// already opened it (the span starts with the output).
    pub open: Option<String>,
    /// What closes it (`</think>`).
    pub close: String,
    /// Most tokens inside the span; the close is forced after that many.
    pub max_tokens: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The output so far is a prefix of the span's opening.
    Opening,
    /// Inside the span: its content began after `start_token` tokens, at byte
    /// `start_byte` of the output.
    Inside {
        start_token: usize,
        start_byte: usize,
    },
    /// The span closed (or the output did not open one).
    Over,
}

/// Follows one request's output and says when the span's close is due.
#[derive(Debug, Clone)]
pub struct ReasoningWatch {
    budget: ReasoningBudget,
    phase: Phase,
    /// The output's bytes while the span may still be open.
    seen: Vec<u8>,
    tokens: usize,
    /// Where each token inside the span starts, in bytes of its content.
    content_starts: Vec<usize>,
    content_tokens: usize,
}

impl ReasoningWatch {
    pub fn new(budget: ReasoningBudget) -> ReasoningWatch {
        let phase = match budget.open {
            None => Phase::Inside {
                start_token: 0,
                start_byte: 0,
            },
            Some(_) => Phase::Opening,
        };
        ReasoningWatch {
            budget,
            phase,
            seen: Vec::new(),
            tokens: 0,
            content_starts: Vec::new(),
            content_tokens: 0,
        }
    }

    pub fn budget(&self) -> &ReasoningBudget {
        &self.budget
    }

    /// Takes the next output token's bytes.
    pub fn observe(&mut self, bytes: &[u8]) {
        if self.phase == Phase::Over {
            return;
        }
        self.seen.extend_from_slice(bytes);
        self.tokens += 1;
        if self.phase == Phase::Opening {
            let open = self.budget.open.as_deref().unwrap_or_default().as_bytes();
            if self.seen.starts_with(open) {
                self.phase = Phase::Inside {
                    start_token: self.tokens,
                    start_byte: open.len(),
                };
            } else if !open.starts_with(&self.seen) {
                // The model answered without thinking.
                self.phase = Phase::Over;
                return;
            }
        }
        if let Phase::Inside {
            start_token,
            start_byte,
        } = self.phase
        {
            let content = &self.seen[start_byte..];
            if self.tokens > start_token {
                // This token's first byte inside the span (the one that opened
                // it may have carried some content too).
                self.content_starts
                    .push(content.len().saturating_sub(bytes.len()));
            }
            self.content_tokens = self.content_starts.len();
            let close = self.budget.close.as_bytes();
            // The close may be written over the token boundary: look only at
            // the tail that could hold a new one.
            let from = content.len().saturating_sub(bytes.len() + close.len());
            if let Some(at) = content[from..]
                .windows(close.len())
                .position(|w| w == close)
            {
                // The tokens that wrote the close are not the span's content.
                let close_at = from + at;
                self.content_tokens = self
                    .content_starts
                    .iter()
                    .filter(|&&s| s < close_at)
                    .count();
                self.closed();
            }
        }
    }

    /// Whether the span is open and its budget spent: the close must be written
    /// now.
    pub fn must_close(&self) -> bool {
        matches!(self.phase, Phase::Inside { start_token, .. }
            if self.tokens - start_token >= self.budget.max_tokens)
    }

    /// The span is closed: the close was written for the model (call this
    /// before committing it, whose tokens are not the span's), or by it.
    pub fn closed(&mut self) {
        self.phase = Phase::Over;
        self.seen = Vec::new();
        self.content_starts = Vec::new();
    }

    /// Tokens written inside the span (its close and opening not counted).
    pub fn content_tokens(&self) -> usize {
        self.content_tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(open: Option<&str>, max_tokens: usize) -> ReasoningWatch {
        ReasoningWatch::new(ReasoningBudget {
            open: open.map(String::from),
            close: "</think>".into(),
            max_tokens,
        })
    }

    #[test]
    fn a_span_the_prompt_opened_counts_from_the_first_token() {
        let mut w = watch(None, 3);
        for t in ["a", "b"] {
            w.observe(t.as_bytes());
            assert!(!w.must_close());
        }
        w.observe(b"c");
        assert!(w.must_close());
        w.closed();
        assert!(!w.must_close());
        assert_eq!(w.content_tokens(), 3);
    }

    #[test]
    fn a_close_written_over_two_tokens_ends_the_span() {
        let mut w = watch(Some("<think>"), 5);
        for t in ["<", "think>", "x", "</th", "ink>"] {
            w.observe(t.as_bytes());
        }
        assert!(!w.must_close(), "the model closed the span itself");
        // `x` is the content; `</th` and `ink>` wrote the close.
        assert_eq!(w.content_tokens(), 1);
        w.observe(b"more text after the span");
        assert!(!w.must_close());
    }

    #[test]
    fn no_span_when_the_output_does_not_open_one() {
        let mut w = watch(Some("<think>"), 1);
        w.observe(b"<th");
        w.observe(b"e answer");
        w.observe(b"!");
        assert!(!w.must_close());
        assert_eq!(w.content_tokens(), 0);
    }

    #[test]
    fn a_zero_budget_closes_at_once() {
        assert!(watch(None, 0).must_close());
        let mut w = watch(Some("<think>"), 0);
        assert!(!w.must_close());
        w.observe(b"<think>");
        assert!(w.must_close());
    }
}
