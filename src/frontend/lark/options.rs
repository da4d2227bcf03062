//! `%llguidance { ... }` (and XGrammar's `%grammar_options { ... }`): grammar-wide
//! options in a JSON object, merged when given more than once.
//!
//! The keys are llguidance's (`LLGuidanceOptions` plus Lark's `ignore_once`).
//! `allow_initial_skip` and `ignore_once` change the language and are enforced;
//! `no_forcing` and `allow_invalid_utf8` are accepted when `false` (their default)
//! and refused when `true`, since nothing here implements them. Unknown keys and
//! values of the wrong type are errors.

use serde_json::Value;

/// What the options say about the language.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct GrammarOptions {
    /// The `%ignore` terminal may come before the first lexeme too.
    pub allow_initial_skip: bool,
    /// The `%ignore` terminal matches the whole skipped span at most once,
    /// rather than any number of times.
    pub ignore_once: bool,
}

impl GrammarOptions {
    /// Merges one declaration into `self`; the message names what is wrong.
    pub fn merge(&mut self, value: &Value, spelling: &str) -> Result<(), String> {
        let fail = |why: String| format!("failed to parse {spelling} declaration: {why}");
        let Value::Object(map) = value else {
            return Err(fail("expected a JSON object".into()));
        };
        for (key, v) in map {
            let flag = v
                .as_bool()
                .ok_or_else(|| fail(format!("`{key}` must be true or false, got {v}")))?;
            match key.as_str() {
                "allow_initial_skip" => self.allow_initial_skip |= flag,
                "ignore_once" => self.ignore_once |= flag,
                "no_forcing" | "allow_invalid_utf8" if !flag => {}
                "no_forcing" | "allow_invalid_utf8" => {
                    return Err(format!("`{key}: true` in {spelling} is not supported yet"))
                }
                _ => {
                    return Err(fail(format!(
                        "unknown option `{key}` (known: allow_initial_skip, ignore_once, no_forcing, allow_invalid_utf8)"
                    )))
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn options_merge_and_reject_the_unknown() {
        let mut o = GrammarOptions::default();
        o.merge(&json!({"allow_initial_skip": true}), "%llguidance")
            .unwrap();
        o.merge(
            &json!({"ignore_once": true, "no_forcing": false}),
            "%llguidance",
        )
        .unwrap();
        assert!(o.allow_initial_skip && o.ignore_once);
        for bad in [
            json!({"no_forcing": "yadda"}),
            json!({"ignore_once": "yes"}),
            json!({"whatever": true}),
            json!([1]),
        ] {
            let e = o.merge(&bad, "%llguidance").unwrap_err();
            assert!(e.contains("failed to parse %llguidance declaration"), "{e}");
        }
        let e = o
            .merge(&json!({"no_forcing": true}), "%llguidance")
            .unwrap_err();
        assert!(e.contains("not supported yet"), "{e}");
    }
}
