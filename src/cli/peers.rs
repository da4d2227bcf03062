//! Peer engines for `stencil bench`, built with `--features peers`: llguidance,
//! run in-process on the same vocabulary bytes, grammars and token sequences.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};

use super::bench::{Engine, GrammarSpec, Session};
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
