#![no_main]
//! Arbitrary bytes as a Lark grammar (or a grammars document): parsing, binding
//! token names to a small vocabulary, compiling and building token tables must
//! never panic.

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use stencil::frontend::lark;
use stencil::vocab::Vocabulary;
use stencil::Compiler;

/// A few text tokens and three special ones (`<|eot|>` the end of sequence), so
/// `<name>`, `<[id]>` and their errors are all reachable.
fn compiler() -> &'static Compiler {
    static COMPILER: OnceLock<Compiler> = OnceLock::new();
    COMPILER.get_or_init(|| {
        let texts = ["a", "b", "ab", " ", "\n", "{", "}", "\"", "1", "<", ">"];
        let mut tokens: Vec<Vec<u8>> = texts.iter().map(|t| t.as_bytes().to_vec()).collect();
        let specials = ["<think>", "</think>", "<|eot|>"];
        let mut named = Vec::new();
        for s in specials {
            named.push((tokens.len() as u32, s.to_string()));
            tokens.push(Vec::new());
        }
        let eos = named[2].0;
        Compiler::new(Arc::new(Vocabulary::from_token_bytes(tokens, named, vec![eos])))
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(grammar) = lark::parse(text, &Default::default()) {
        let _ = compiler().compile_grammar(&grammar);
    }
});
