//! Unit tests of the structural tag front-end: the language of each construct,
//! and errors by pointer. The XGrammar cases run in `tests/structural_tag.rs`.

use super::*;
use crate::automaton::{CompileOptions, CompiledGrammar};
use crate::matcher::Matcher;
use serde_json::json;
use std::sync::Arc;

fn accepts(tag: &Value, input: &str) -> bool {
    let grammar = parse(
        tag,
        &StructuralTagOptions::default(),
        &PatternCache::default(),
    )
    .unwrap_or_else(|e| panic!("{tag}: {e}"));
    let compiled =
        Arc::new(CompiledGrammar::compile(&grammar, &CompileOptions::default()).unwrap());
    let mut m = Matcher::new(compiled);
    m.consume_bytes(input.as_bytes()).is_ok() && m.is_accepting()
}

fn language(format: Value, accept: &[&str], reject: &[&str]) {
    let tag = json!({"type": "structural_tag", "format": format});
    for s in accept {
        assert!(accepts(&tag, s), "{tag} should accept {s:?}");
    }
    for s in reject {
        assert!(!accepts(&tag, s), "{tag} should reject {s:?}");
    }
}

#[test]
fn free_text_stops_at_the_tag_end() {
    language(
        json!({"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"}),
        &[
            "<think></think>",
            "<think>a < b</think>",
            "<think>\n</think>",
        ],
        &["<think>a</think>b", "<think>a</think></think>", "<think>"],
    );
}

#[test]
fn a_trigger_always_starts_a_tag() {
    let call = json!({"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [{
        "begin": "<tool_call>",
        "content": {"type": "json_schema", "json_schema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
        "end": "</tool_call>"}]});
    language(
        call,
        &[
            "",
            "hi",
            "hi <tool_call>{\"n\": 1}</tool_call> bye",
            "<tool_call>{}</tool_call><tool_call>{\"n\":2}</tool_call>",
        ],
        // Free text cannot swallow the trigger: after it, a valid call or nothing.
        &[
            "hi <tool_call>not json</tool_call>",
            "<tool_call>",
            "<tool_call>{\"m\": 1}</tool_call>",
        ],
    );
}

#[test]
fn errors_name_the_pointer() {
    let cases = [
        (
            json!({"type": "structural_tag"}),
            "the structural tag: needs `format`",
        ),
        (
            json!({"format": {"type": "nope"}}),
            "/format/type: unknown format type `nope`",
        ),
        (
            json!({"format": {"type": "sequence", "elements": [{"type": "const_string"}]}}),
            "/format/elements/0/value: `value` is required",
        ),
        (
            json!({"format": {"type": "repeat", "min": 2, "max": 1, "content": {"type": "const_string", "value": "a"}}}),
            "/format/max: must be at least `min`",
        ),
        (
            json!({"format": {"type": "const_string", "value": "a", "extra": 1}}),
            "/format/extra: unknown field `extra`",
        ),
        (
            json!({"format": {"type": "json_schema", "json_schema": {"type": "nope"}}}),
            "/format/json_schema: failed to compile JSON schema",
        ),
        (
            json!({"format": {"type": "triggered_tags", "triggers": ["<a"], "tags": [{"begin": "<b>", "content": {"type": "any_text"}, "end": "</b>"}]}}),
            "/format/tags/0/begin: the begin \"<b>\" must start with exactly one trigger",
        ),
        (
            json!({"format": {"type": "regex", "pattern": "("}}),
            "/format/pattern: invalid regex",
        ),
        (
            json!({"format": {"type": "json_schema", "json_schema": {}, "style": "cohere"}}),
            "/format/style: unknown style (known: json, qwen_xml",
        ),
        (
            json!({"format": {"type": "json_schema", "json_schema": {"type": "string"}, "style": "qwen_xml"}}),
            "/format/json_schema: failed to compile JSON schema: unsupported keyword \"type\"",
        ),
    ];
    for (tag, needle) in cases {
        match parse(
            &tag,
            &StructuralTagOptions::default(),
            &PatternCache::default(),
        ) {
            Err(e) => assert!(e.to_string().starts_with(needle), "{e} (wanted {needle})"),
            Ok(_) => panic!("{tag} should be refused"),
        }
    }
}
