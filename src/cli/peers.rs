//! Peer engines for `stencil bench`, built with `--features peers`: llguidance
//! (JSON Schema and Lark as given, GBNF as stencil's compiled grammar printed in
//! Lark), and outlines-core where it reads the grammar (JSON Schema), run
//! in-process on the same vocabulary bytes, grammars and token sequences.

use std::cell::RefCell;
use std::sync::Arc;
use stencil::bits::try_set_bit;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};

use super::engine::{Engine, GrammarSpec, Session};
use stencil::automaton::{CompiledGrammar, Symbol};
use stencil::vocab::Vocabulary;

/// Prints a compiled grammar in llguidance's Lark dialect: the same terminals (as
/// `/regex/` lexemes) and the same productions, so both engines run the same
/// grammar with the same lexical units (llguidance's own GBNF reading differs in
/// its escapes, and single-character lexemes would be unfair to its lexer).
pub fn to_lark(grammar: &CompiledGrammar) -> String {
    let symbol = |s: &Symbol| match s {
        Symbol::Terminal(t) => format!("T{}", t.0),
        Symbol::Rule(n) => format!("n{}", n.0),
        Symbol::Repeat { rule, min, max } => match (min, max) {
            (0, None) => format!("n{}*", rule.0),
            (1, None) => format!("n{}+", rule.0),
            (m, None) => format!("n{}{{{m},}}", rule.0),
            (m, Some(n)) => format!("n{}{{{m},{n}}}", rule.0),
        },
        // Lark has no permutation: the items in any order and number. Only JSON
        // Schema objects lower to permutations, and llguidance reads those schemas
        // itself, so this over-approximation is never benchmarked.
        Symbol::Permutation(id) => {
            let p = grammar.permutation(*id);
            let names = |side: &[stencil::automaton::NonTerminalId]| {
                side.iter()
                    .map(|n| format!("n{}", n.0))
                    .collect::<Vec<_>>()
                    .join(" | ")
            };
            format!("((({}) ({})*)?)", names(&p.first), names(&p.next))
        }
    };
    let mut out = format!("start: n{}\n", grammar.start().0);
    let mut by_lhs: Vec<Vec<String>> = Vec::new();
    for p in grammar.productions() {
        let lhs = p.lhs.0 as usize;
        if by_lhs.len() <= lhs {
            by_lhs.resize(lhs + 1, Vec::new());
        }
        let rhs: Vec<String> = p.rhs.iter().map(symbol).collect();
        by_lhs[lhs].push(if rhs.is_empty() {
            "\"\"".into()
        } else {
            rhs.join(" ")
        });
    }
    for (lhs, alternatives) in by_lhs.iter().enumerate() {
        if !alternatives.is_empty() {
            out.push_str(&format!("n{lhs}: {}\n", alternatives.join(" | ")));
        }
    }
    for (i, t) in grammar.terminals().iter().enumerate() {
        out.push_str(&format!("T{i}: /{}/\n", t.pattern.replace('/', "\\/")));
    }
    out
}

pub struct Llguidance {
    factory: ParserFactory,
}

impl Llguidance {
    pub fn new(vocab: &Vocabulary) -> Result<Llguidance, String> {
        // llguidance marks special tokens with a leading 0xFF byte.
        let mut words: Vec<Vec<u8>> = (0..vocab.len() as u32)
            .map(|id| vocab.token_bytes(id).to_vec())
            .collect();
        for (id, content) in vocab.special_tokens() {
            if let Some(word) = words.get_mut(*id as usize) {
                *word = [&[0xFF], content.as_bytes()].concat();
            }
        }
        for (id, word) in words.iter_mut().enumerate() {
            if word.is_empty() {
                *word = format!("\u{FF}<[{id}]>").into_bytes();
            }
        }
        let eos = vocab.eos_ids().first().copied().unwrap_or(0);
        let info = TokRxInfo::new(vocab.len() as u32, eos);
        let env: TokEnv = Arc::new(ApproximateTokEnv::new(TokTrie::from(&info, &words)));
        let factory = ParserFactory::new_simple(&env).map_err(|e| e.to_string())?;
        Ok(Llguidance { factory })
    }
}

struct LlgSession {
    matcher: Matcher,
}

impl Engine for Llguidance {
    fn name(&self) -> &'static str {
        "llguidance"
    }

    fn compile(&self, grammar: &GrammarSpec) -> Result<Box<dyn Session>, String> {
        let grammar = match grammar {
            GrammarSpec::Gbnf(text) => {
                let grammar = stencil::compile_gbnf(text).map_err(|e| e.to_string())?;
                TopLevelGrammar::from_lark(to_lark(&grammar))
            }
            // Lark is llguidance's own input: the very text stencil reads.
            GrammarSpec::Lark(text) => TopLevelGrammar::from_lark(text.clone()),
            GrammarSpec::StructuralTag {
                peer_lark: Some(text),
                ..
            } => TopLevelGrammar::from_lark(text.clone()),
            GrammarSpec::StructuralTag {
                peer_lark: None, ..
            } => return Err("llguidance reads no structural tag".into()),
            GrammarSpec::JsonSchema(schema) => TopLevelGrammar::from_json_schema(schema.clone()),
        };
        let parser = self
            .factory
            .create_parser(grammar)
            .map_err(|e| e.to_string())?;
        let matcher = Matcher::new(Ok(parser));
        if let Some(error) = matcher.get_error() {
            return Err(error);
        }
        Ok(Box::new(LlgSession { matcher }))
    }
}

impl Session for LlgSession {
    fn fill_mask(&mut self, mask: &mut [u32]) {
        mask.fill(0);
        if let Ok(vob) = self.matcher.compute_mask() {
            let words = vob.as_slice();
            let n = words.len().min(mask.len());
            mask[..n].copy_from_slice(&words[..n]);
        }
    }

    fn consume(&mut self, token: u32) -> bool {
        self.matcher.consume_token(token).is_ok()
    }

    fn is_accepting(&mut self) -> bool {
        self.matcher.is_accepting().unwrap_or(false)
    }
}

/// outlines-core: a JSON Schema becomes a regular expression, and its index holds,
/// for every state of the expression's DFA, the tokens allowed there and where
/// each leads. Masks are lookups; the index is built up front by walking the
/// whole vocabulary from every DFA state, which is where its time goes.
pub struct OutlinesCore {
    vocabulary: outlines_core::vocabulary::Vocabulary,
    /// The last schema's index: instances of one schema share it, as a server
    /// would cache it (stencil's compiler keeps its tables across schemas too).
    last: RefCell<Option<(String, Arc<outlines_core::index::Index>)>>,
}

/// Most DFA states a schema's expression may have for outlines-core to be run
/// on it. Its index build visits the whole vocabulary from each state (1-3 ms
/// per state on Llama-3: up to 5 s for a schema under this limit), so a schema
/// far past it would take the benchmark's minutes; such schemas count as
/// failed, with the state count in the message.
const OUTLINES_MAX_DFA_STATES: usize = 2_000;

impl OutlinesCore {
    pub fn new(vocab: &Vocabulary) -> Result<OutlinesCore, String> {
        let eos = vocab.eos_ids().first().copied().unwrap_or(0);
        let mut vocabulary = outlines_core::vocabulary::Vocabulary::new(eos);
        for &id in vocab.text_tokens() {
            if id != eos {
                vocabulary
                    .try_insert(vocab.token_bytes(id).to_vec(), id)
                    .map_err(|e| e.to_string())?;
            }
        }
        Ok(OutlinesCore {
            vocabulary,
            last: RefCell::new(None),
        })
    }

    fn regex(grammar: &GrammarSpec) -> Result<String, String> {
        match grammar {
            GrammarSpec::JsonSchema(schema) => {
                outlines_core::json_schema::regex_from_value(schema, None, None)
                    .map_err(|e| e.to_string())
            }
            GrammarSpec::Gbnf(_) | GrammarSpec::Lark(_) | GrammarSpec::StructuralTag { .. } => {
                Err("outlines-core reads no context-free grammar".into())
            }
        }
    }
}

/// States of `regex`'s DFA reachable from its anchored start, built the way
/// outlines-core builds it but with a size limit, so an expression that blows up
/// fails here in bounded time and memory.
fn reachable_dfa_states(regex: &str) -> Result<usize, String> {
    use regex_automata::dfa::{dense, Automaton};
    const LIMIT: usize = 256 << 20;
    let dfa = dense::Builder::new()
        .configure(
            dense::Config::new()
                .dfa_size_limit(Some(LIMIT))
                .determinize_size_limit(Some(LIMIT)),
        )
        .build(regex)
        .map_err(|e| format!("its DFA is over {} MiB: {e}", LIMIT >> 20))?;
    let start = dfa
        .universal_start_state(regex_automata::Anchored::Yes)
        .ok_or("its DFA has no start state")?;
    let mut seen = std::collections::HashSet::from([start]);
    let mut todo = vec![start];
    while let Some(state) = todo.pop() {
        for byte in 0..=255u8 {
            let next = dfa.next_state(state, byte);
            if !dfa.is_dead_state(next) && seen.insert(next) {
                todo.push(next);
            }
        }
    }
    Ok(seen.len())
}

struct OutlinesSession {
    index: Arc<outlines_core::index::Index>,
    state: u32,
}

impl Engine for OutlinesCore {
    fn name(&self) -> &'static str {
        "outlines-core"
    }

    fn admits(&self, grammar: &GrammarSpec) -> Result<(), String> {
        let regex = Self::regex(grammar)?;
        let states = reachable_dfa_states(&regex)?;
        if states > OUTLINES_MAX_DFA_STATES {
            return Err(format!(
                "skipped: its DFA has {states} states, over the bench's {OUTLINES_MAX_DFA_STATES}"
            ));
        }
        Ok(())
    }

    fn compile(&self, grammar: &GrammarSpec) -> Result<Box<dyn Session>, String> {
        let regex = Self::regex(grammar)?;
        let mut last = self.last.borrow_mut();
        let index = match last.as_ref() {
            Some((cached, index)) if *cached == regex => Arc::clone(index),
            _ => {
                let index = Arc::new(
                    outlines_core::index::Index::new(&regex, &self.vocabulary)
                        .map_err(|e| e.to_string())?,
                );
                *last = Some((regex, Arc::clone(&index)));
                index
            }
        };
        let state = index.initial_state();
        Ok(Box::new(OutlinesSession { index, state }))
    }

    fn forget_earlier_runs(&self) {
        self.last.borrow_mut().take();
    }
}

impl Session for OutlinesSession {
    fn fill_mask(&mut self, mask: &mut [u32]) {
        mask.fill(0);
        if let Some(tokens) = self.index.allowed_tokens_iter(&self.state) {
            for &token in tokens {
                try_set_bit(mask, token as usize);
            }
        }
    }

    fn consume(&mut self, token: u32) -> bool {
        match self.index.next_state(&self.state, &token) {
            Some(next) => {
                self.state = next;
                true
            }
            None => false,
        }
    }

    fn is_accepting(&mut self) -> bool {
        self.index.is_final_state(&self.state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_vocab() -> Vocabulary {
        let tokens = [
            "{", "}", "\"", "a", "\":", "1", "12", "</s>", "{\"", " ", ":",
        ];
        Vocabulary::from_token_bytes(
            tokens.iter().map(|t| t.as_bytes().to_vec()).collect(),
            vec![(7, "</s>".into())],
            vec![7],
        )
    }

    fn allowed(session: &mut dyn Session) -> Vec<u32> {
        let mut mask = [0u32; 1];
        session.fill_mask(&mut mask);
        (0..32).filter(|t| mask[0] & (1 << t) != 0).collect()
    }

    /// outlines-core runs a schema token by token: its masks, its refusals, EOS
    /// only once the object is complete, and one index for two instances.
    #[test]
    fn outlines_core_masks_follow_the_schema() {
        let engine = OutlinesCore::new(&small_vocab()).unwrap();
        let schema = GrammarSpec::JsonSchema(serde_json::json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "required": ["a"]
        }));
        engine.admits(&schema).unwrap();
        let mut session = engine.compile(&schema).unwrap();
        assert_eq!(allowed(session.as_mut()), vec![0, 8]);
        assert!(!session.consume(1));
        for token in [8, 3, 4, 6] {
            assert!(session.consume(token), "token {token}");
        }
        assert!(!session.is_accepting());
        assert!(!allowed(session.as_mut()).contains(&7));
        assert!(session.consume(1));
        assert!(session.is_accepting());
        assert_eq!(allowed(session.as_mut()), vec![7]);
        let again = engine.compile(&schema).unwrap();
        let first = engine.last.borrow().as_ref().map(|(_, i)| Arc::as_ptr(i));
        drop(again);
        assert_eq!(
            first,
            engine.last.borrow().as_ref().map(|(_, i)| Arc::as_ptr(i))
        );
    }

    /// llguidance runs a Lark grammar's own text: its masks follow the grammar's
    /// terminals, and it accepts where the grammar ends (its mask there has no
    /// text token: llguidance stops itself once nothing can follow).
    #[test]
    fn llguidance_reads_lark_as_is() {
        let engine = Llguidance::new(&small_vocab()).unwrap();
        let lark = GrammarSpec::Lark("start: \"{\" NUM \"}\"\nNUM: /1[0-9]*/\n".into());
        let mut session = engine.compile(&lark).unwrap();
        assert_eq!(allowed(session.as_mut()), vec![0]);
        assert!(session.consume(0));
        assert_eq!(allowed(session.as_mut()), vec![5, 6]);
        assert!(session.consume(6));
        assert_eq!(allowed(session.as_mut()), vec![1, 5, 6]);
        assert!(!session.is_accepting());
        assert!(session.consume(1));
        assert!(session.is_accepting());
        assert!(allowed(session.as_mut()).iter().all(|&t| t == 7));
        assert!(engine
            .compile(&GrammarSpec::Lark("start: undefined_rule\n".into()))
            .is_err());
    }

    /// A grammar outlines-core cannot read, or whose DFA is over the budget, is
    /// refused before any compile is timed.
    #[test]
    fn outlines_core_refuses_what_it_does_not_read() {
        let engine = OutlinesCore::new(&small_vocab()).unwrap();
        let gbnf = GrammarSpec::Gbnf("root ::= \"a\"".into());
        assert!(engine.admits(&gbnf).is_err());
        let lark = GrammarSpec::Lark("start: \"a\"".into());
        assert!(engine.admits(&lark).is_err());
        // 2^12 states: the last twelve characters each remembered.
        let wide = GrammarSpec::JsonSchema(serde_json::json!({
            "type": "string", "pattern": "^[ab]*a[ab]{12}$"
        }));
        let refused = engine.admits(&wide).unwrap_err();
        assert!(refused.contains("states"), "{refused}");
    }
}
