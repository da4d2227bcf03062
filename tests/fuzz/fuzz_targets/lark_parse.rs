#![no_main]
//! Arbitrary bytes as a Lark grammar: parsing and compiling must never panic.

use libfuzzer_sys::fuzz_target;
use stencil::automaton::CompiledGrammar;
use stencil::frontend::lark;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(grammar) = lark::parse(text, &Default::default()) {
        let _ = CompiledGrammar::compile(&grammar, &Default::default());
    }
});
