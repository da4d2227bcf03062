#![no_main]
//! Arbitrary bytes as a whole-output regex: parsing and compiling must never panic.

use libfuzzer_sys::fuzz_target;
use stencil::automaton::CompiledGrammar;
use stencil::frontend::{regex, Limits};

fuzz_target!(|data: &[u8]| {
    let Ok(pattern) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(grammar) = regex::parse(pattern, &Limits::default()) {
        let _ = CompiledGrammar::compile(&grammar, &Default::default());
    }
});
