//! Lexer terminals: one anchored byte DFA per terminal, built with `regex-automata`.
//!
//! The lexer is non-deterministic on purpose: the matcher runs every terminal that
//! the parser could accept next side by side, and a terminal that reaches a match
//! may both end there and keep going. No maximal munch, no priorities, so fusing
//! regular parts of a grammar into terminals never changes the language.
//!
//! The DFAs use `MatchKind::All` (a leftmost-first DFA would drop `ab` after
//! matching `a` in `a|ab`) and are compiled from Thompson NFAs, in which every
//! state can reach the match state; hence a DFA state that is not dead always has a
//! completion, which is what makes "some lexeme is alive" mean "still viable".

use regex_automata::{
    dfa::{dense, Automaton, StartKind},
    nfa::thompson,
    util::{primitives::StateID, start},
    Anchored, MatchKind,
};
use regex_syntax::hir::Hir;

/// Size bounds for building terminal automata.
#[derive(Debug, Clone)]
pub struct LexerLimits {
    /// Heap bytes one terminal's NFA may use.
    pub nfa_bytes: usize,
    /// Heap bytes one terminal's DFA may use (and its determinization scratch).
    pub dfa_bytes: usize,
}

impl Default for LexerLimits {
    fn default() -> Self {
        LexerLimits {
            nfa_bytes: 16 << 20,
            dfa_bytes: 64 << 20,
        }
    }
}

/// A terminal of the compiled grammar.
#[derive(Clone, Debug)]
pub struct Terminal {
    /// What it stands for in the source grammar (a rule name, or GBNF-like text).
    pub label: String,
    /// The regular expression, as `regex-syntax` prints it.
    pub pattern: String,
    dfa: dense::DFA<Vec<u32>>,
    start: StateID,
    matches_empty: bool,
}

impl Terminal {
    pub fn build(label: String, hir: &Hir, limits: &LexerLimits) -> Result<Terminal, String> {
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .utf8(false)
                    .shrink(true)
                    .nfa_size_limit(Some(limits.nfa_bytes)),
            )
            .build_from_hir(hir)
            .map_err(|e| e.to_string())?;
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .match_kind(MatchKind::All)
                    .start_kind(StartKind::Anchored)
                    .accelerate(false)
                    .dfa_size_limit(Some(limits.dfa_bytes))
                    .determinize_size_limit(Some(limits.dfa_bytes)),
            )
            .build_from_nfa(&nfa)
            .map_err(|e| e.to_string())?;
        let start = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| e.to_string())?;
        let matches_empty = dfa.is_match_state(dfa.next_eoi_state(start));
        Ok(Terminal {
            label,
            pattern: hir.to_string(),
            dfa,
            start,
            matches_empty,
        })
    }

    /// The state before any byte.
    #[inline]
    pub fn start(&self) -> StateID {
        self.start
    }

    #[inline]
    pub fn next(&self, state: StateID, byte: u8) -> StateID {
        self.dfa.next_state(state, byte)
    }

    /// No continuation of the bytes fed so far can match.
    #[inline]
    pub fn is_dead(&self, state: StateID) -> bool {
        self.dfa.is_dead_state(state)
    }

    /// The bytes fed so far are a complete match.
    #[inline]
    pub fn is_match(&self, state: StateID) -> bool {
        self.dfa.is_match_state(self.dfa.next_eoi_state(state))
    }

    /// Whether the empty string matches.
    pub fn matches_empty(&self) -> bool {
        self.matches_empty
    }

    /// Heap bytes held by the automaton.
    pub fn memory_usage(&self) -> usize {
        self.dfa.memory_usage()
    }

    /// A short human-readable description, from the source grammar.
    pub fn describe(&self) -> String {
        const MAX: usize = 80;
        if self.label.chars().count() <= MAX {
            self.label.clone()
        } else {
            let cut: String = self.label.chars().take(MAX).collect();
            format!("{cut}...")
        }
    }
}
