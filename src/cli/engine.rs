//! The interface `stencil bench` measures engines through: a grammar to compile,
//! a session that fills masks and consumes tokens. stencil and its peers
//! (`peers.rs`) implement it side by side; the bench loop (`bench.rs`) knows only
//! this interface.

use serde_json::Value;

/// A grammar as each engine takes it (a peer may refuse one: [`Engine::admits`]).
pub(super) enum GrammarSpec {
    Gbnf(String),
    /// Lark text in llguidance's dialect, given to every engine unchanged.
    Lark(String),
    JsonSchema(Value),
    /// XGrammar's structural tag, for stencil; llguidance reads no such format,
    /// so it is measured on `peer_lark`, the same constraint in its own Lark
    /// (lazy rules and `%json`), where given.
    StructuralTag {
        tag: Value,
        #[cfg_attr(not(feature = "peers"), allow(dead_code))]
        peer_lark: Option<String>,
    },
}

/// A constraint engine under measurement.
pub(super) trait Engine {
    fn name(&self) -> &'static str;
    /// Whether the bench runs this grammar on the engine at all, asked before the
    /// compile is timed (a peer's budget check must not count as its compile).
    fn admits(&self, _grammar: &GrammarSpec) -> Result<(), String> {
        Ok(())
    }
    fn compile(&self, grammar: &GrammarSpec) -> Result<Box<dyn Session>, String>;
    /// Forgets what earlier compiles left for later ones, before a repeated run.
    fn forget_earlier_runs(&self) {}
    /// Bytes the engine keeps for all grammars (asked between instances, untimed).
    fn shared_memory_bytes(&self) -> usize {
        0
    }
}

/// One request's state in an engine.
pub(super) trait Session {
    /// Computes the mask into `mask` (words over the vocabulary).
    fn fill_mask(&mut self, mask: &mut [u32]);
    /// Consumes `token`; false when the engine refuses it.
    fn consume(&mut self, token: u32) -> bool;
    fn is_accepting(&mut self) -> bool;
    fn memory_bytes(&self) -> usize {
        0
    }
}
