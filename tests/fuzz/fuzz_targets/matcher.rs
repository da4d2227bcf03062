#![no_main]
//! `grammar text 0x00 input bytes`: compile the grammar as GBNF (skipping invalid
//! ones), then drive a `Matcher` byte by byte and check it against itself.
//!
//! In the input part, a further 0x00 byte is a command rather than input: the byte
//! after it gives `k` (`k = byte % 8`) and the matcher rolls back `k` bytes. Every
//! other byte is offered to `consume_byte`.
//!
//! Checked at every step:
//! * a byte in `allowed_bytes()` is consumed (`Ok`, or `TooAmbiguous`, which is a
//!   legitimate resource limit), and a byte not in it is `Rejected`;
//! * a failed consume leaves the observable state (position, allowed bytes,
//!   accepting) unchanged; a successful one advances the position by one;
//! * after `rollback(k)` the observable state equals the one recorded when that
//!   position was first reached;
//! * `accepts_bytes` leaves the state unchanged;
//! * viability: after a successful consume the prefix is either accepting or has
//!   some allowed continuation (the compiled grammar prunes dead productions, so a
//!   dead end should be impossible). Set `STENCIL_FUZZ_NO_VIABILITY=1` to skip it.

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use stencil::automaton::CompiledGrammar;
use stencil::frontend::gbnf;
use stencil::matcher::{ByteSet, MatchError};
use stencil::Matcher;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Observed {
    position: usize,
    allowed: ByteSet,
    accepting: bool,
}

fn observe(m: &Matcher) -> Observed {
    Observed {
        position: m.position(),
        allowed: m.allowed_bytes(),
        accepting: m.is_accepting(),
    }
}

fn check_viability() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("STENCIL_FUZZ_NO_VIABILITY").is_none())
}

fuzz_target!(|data: &[u8]| {
    let Some(split) = data.iter().position(|&b| b == 0) else {
        return;
    };
    let (grammar_bytes, rest) = data.split_at(split);
    let input = &rest[1..];
    let Ok(text) = std::str::from_utf8(grammar_bytes) else {
        return;
    };
    let Ok(grammar) = gbnf::parse(text, &Default::default()) else {
        return;
    };
    let Ok(compiled) = CompiledGrammar::compile(&grammar, &Default::default()) else {
        return;
    };
    let mut m = Matcher::new(Arc::new(compiled));

    // history[p]: what was observed when position p was reached.
    let mut history = vec![observe(&m)];
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        i += 1;
        let before = observe(&m);
        assert_eq!(before, history[before.position], "state drifted at position {}", before.position);

        if b == 0 {
            let k = input.get(i).map_or(1, |&x| (x % 8) as usize);
            i += 1;
            m.rollback(k);
            let after = observe(&m);
            let expect_pos = before.position.saturating_sub(k);
            assert_eq!(after.position, expect_pos, "rollback({k}) from {}", before.position);
            assert_eq!(after, history[expect_pos], "rollback({k}) from {}", before.position);
            history.truncate(expect_pos + 1);
            continue;
        }

        // Lookahead through accepts_bytes must not disturb anything.
        let look = &input[i - 1..input.len().min(i + 3)];
        let _ = m.accepts_bytes(look);
        assert_eq!(observe(&m), before, "accepts_bytes({look:?}) changed the state");

        match m.consume_byte(b) {
            Ok(()) => {
                assert!(
                    before.allowed.contains(b),
                    "byte {b:#04x} at offset {} was consumed but not in allowed_bytes() = {:?}",
                    before.position,
                    before.allowed
                );
                let after = observe(&m);
                assert_eq!(after.position, before.position + 1);
                if check_viability() {
                    assert!(
                        after.accepting || !after.allowed.is_empty(),
                        "dead end after consuming byte {b:#04x} at offset {}: not accepting and no byte allowed",
                        before.position
                    );
                }
                history.push(after);
            }
            Err(MatchError::Rejected { offset }) => {
                assert_eq!(offset, before.position);
                assert!(
                    !before.allowed.contains(b),
                    "byte {b:#04x} at offset {offset} is in allowed_bytes() = {:?} but was rejected",
                    before.allowed
                );
                assert_eq!(observe(&m), before, "rejected byte changed the state");
            }
            Err(MatchError::TooAmbiguous { offset, .. }) => {
                assert_eq!(offset, before.position);
                assert!(
                    before.allowed.contains(b),
                    "byte {b:#04x} not in allowed_bytes() reported TooAmbiguous"
                );
                assert_eq!(observe(&m), before, "TooAmbiguous changed the state");
            }
        }
    }
});
