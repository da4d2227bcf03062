//! `Matcher::shortest_completion` (what budget steering forces): the completion is
//! accepted, and no shorter one exists (checked by breadth-first search over the
//! matcher's states, deduplicated by their position-free future signature).

#[path = "support/json_schema_common.rs"]
mod json_schema_common;

use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde_json::json;
use stencil::{compile_gbnf, CompiledGrammar, Matcher};

fn matcher_at(grammar: &Arc<CompiledGrammar>, prefix: &str) -> Matcher {
    let mut m = Matcher::new(Arc::clone(grammar));
    m.consume_bytes(prefix.as_bytes())
        .unwrap_or_else(|e| panic!("{prefix:?}: {e}"));
    m
}

/// Length of the shortest completion by brute force, if at most `limit`.
fn brute_force_len(start: &Matcher, limit: usize) -> Option<usize> {
    let mut frontier = vec![start.clone()];
    let mut seen = std::collections::HashSet::new();
    let mut memo = FxHashMap::default();
    for len in 0..=limit {
        let mut next = Vec::new();
        for m in &frontier {
            if m.is_accepting() {
                return Some(len);
            }
            for b in m.allowed_bytes().iter() {
                let mut child = m.clone();
                child.consume_byte(b).unwrap();
                let mut signature = Vec::new();
                child.future_signature(usize::MAX, &mut memo, &mut signature);
                signature.push(u32::from(child.is_accepting()));
                if seen.insert(signature) {
                    next.push(child);
                }
            }
        }
        frontier = next;
    }
    None
}

fn check(grammar: &Arc<CompiledGrammar>, prefix: &str, expected: Option<&str>) {
    let m = matcher_at(grammar, prefix);
    let completion = m
        .shortest_completion(10_000)
        .unwrap_or_else(|| panic!("{prefix:?}: no completion"));
    let mut done = m.clone();
    done.consume_bytes(&completion).unwrap_or_else(|e| {
        panic!(
            "{prefix:?} + {:?}: {e}",
            String::from_utf8_lossy(&completion)
        )
    });
    assert!(
        done.is_accepting(),
        "{prefix:?} + {completion:?} does not accept"
    );
    if let Some(expected) = expected {
        assert_eq!(
            String::from_utf8_lossy(&completion),
            expected,
            "after {prefix:?}"
        );
    }
    if completion.len() <= 7 {
        assert_eq!(
            brute_force_len(&m, completion.len()),
            Some(completion.len()),
            "after {prefix:?}: {completion:?} is not shortest"
        );
    }
}

#[test]
fn json_grammar_completions_are_shortest() {
    let grammar = compile_gbnf(include_str!("../grammars/json.gbnf")).unwrap();
    for (prefix, expected) in [
        ("", Some("0")),
        ("{", Some("}")),
        ("[", Some("]")),
        ("tr", Some("ue")),
        ("-", Some("0")),
        ("1.", Some("0")),
        ("\"ab", Some("\"")),
        ("\"\\u12", Some("00\"")),
        ("{\"a\"", Some(":0}")),
        ("{\"a\": [1, {\"b\": \"x", Some("\"}]}")),
        ("[[[[", Some("]]]]")),
        ("{\"a\": 1", Some("}")),
        ("\"caf\u{e9}", Some("\"")),
    ] {
        check(&grammar, prefix, expected);
    }
    // A prefix ending inside a UTF-8 character finishes the character first.
    let m = {
        let mut m = Matcher::new(Arc::clone(&grammar));
        m.consume_bytes(&[b'"', 0xe2, 0x82]).unwrap();
        m
    };
    let completion = m.shortest_completion(100).unwrap();
    assert_eq!(completion.len(), 2, "{completion:?}");
    assert_eq!(completion[1], b'"');
}

#[test]
fn counters_and_required_properties() {
    let grammar = compile_gbnf("root ::= \"a\"{3,5} \"b\"").unwrap();
    check(&grammar, "a", Some("aab"));
    check(&grammar, "aaaa", Some("b"));
    let grammar = compile_gbnf("root ::= (\"xy\" [0-9]){2,} \";\"").unwrap();
    check(&grammar, "xy", Some("0xy0;"));

    let schema = json!({"type": "object",
        "properties": {"id": {"type": "integer"}, "tags": {"type": "array", "minItems": 2,
                       "items": {"type": "string", "minLength": 1}}},
        "required": ["id", "tags"], "additionalProperties": false});
    let grammar = json_schema_common::compile(&schema, &Default::default()).unwrap();
    check(&grammar, "{", None);
    check(&grammar, "{\"id\":12,\"tags\":[\"a", None);
    let m = matcher_at(&grammar, "{");
    let completion = String::from_utf8(m.shortest_completion(1000).unwrap()).unwrap();
    assert_eq!(completion, "\"id\":0,\"tags\":[\" \",\" \"]}");
    // A limit below the shortest completion gives nothing.
    assert!(m.shortest_completion(5).is_none());

    // Any order: the parser's permutation finishes with the missing required
    // properties only, whichever came first.
    let opts = stencil::frontend::json_schema::JsonSchemaOptions {
        property_order: stencil::frontend::json_schema::PropertyOrder::Any,
        ..Default::default()
    };
    let schema = json!({"type": "object",
        "properties": {"a": {"type": "integer"}, "bb": {"type": "string"},
                       "ccc": {"type": "boolean"}, "d": {"type": "null"}},
        "required": ["bb", "d"], "minProperties": 3, "additionalProperties": false});
    let grammar = json_schema_common::compile(&schema, &opts).unwrap();
    for prefix in [
        "{",
        "{\"d\":null",
        "{\"ccc\":true,\"bb\":\"",
        "{\"a\":1,\"d\":null,",
    ] {
        check(&grammar, prefix, None);
    }
    check(&grammar, "{\"d\":null,\"bb\":\"\"", Some(",\"a\":0}"));
}

#[test]
fn permutation_minimum_met_by_undeclared_properties() {
    // Undeclared properties fill `minProperties`: the shortest completion counts
    // them rather than listing them one by one (4e9 of them used to be a 16 GB
    // list, built while pricing the grammar's shortest strings).
    let opts = stencil::frontend::json_schema::JsonSchemaOptions {
        property_order: stencil::frontend::json_schema::PropertyOrder::Any,
        ..Default::default()
    };
    let properties = json!({"a": {"type": "integer"}, "bb": {"type": "integer"}});
    let schema = json!({"type": "object", "properties": properties, "minProperties": 4});
    let grammar = json_schema_common::compile(&schema, &opts).unwrap();
    check(&grammar, "{", Some("\"\":0,\"\":0,\"\":0,\"\":0}"));
    check(&grammar, "{\"bb\":1", Some(",\"\":0,\"\":0,\"\":0}"));
    check(&grammar, "{\"x\":1,\"a\":1,\"y\":2", Some(",\"\":0}"));

    let schema = json!({"type": "object", "properties": properties,
                        "minProperties": 4_000_000_000u64});
    let grammar = json_schema_common::compile(&schema, &opts).unwrap();
    let m = matcher_at(&grammar, "{\"a\":1");
    assert!(m.shortest_completion(1 << 20).is_none());
}

#[test]
fn every_shipped_grammar_completes_from_its_prefixes() {
    for (path, text) in [
        ("grammars/json.gbnf", "{\"a\": [true, null, -1.5e3, \"x\\n\"], \"b\": {}}"),
        ("grammars/json-bounded.gbnf", "{\n  \"a\": [1,\n    2]}"),
        (
            "grammars/tool-call.gbnf",
            "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}",
        ),
    ] {
        let source = std::fs::read_to_string(path).unwrap();
        let grammar = compile_gbnf(&source).unwrap();
        for cut in 0..=text.len() {
            if text.is_char_boundary(cut) {
                check(&grammar, &text[..cut], None);
            }
        }
    }
}

/// A string with a long `minLength` is one counted terminal whose states are
/// computed: its completion writes exactly the characters still missing (one
/// byte each), finishing an escape under way first.
#[test]
fn long_counted_strings_complete_to_their_minimum() {
    let schema = json!({"type": "object",
        "properties": {"s": {"type": "string", "minLength": 3000, "maxLength": 65535}},
        "required": ["s"], "additionalProperties": false});
    let grammar = json_schema_common::compile(&schema, &Default::default()).unwrap();
    for (prefix, expected_len) in [
        ("{", "\"s\":\"".len() + 3000 + "\"}".len()),
        ("{\"s\":\"", 3000 + 2),
        // Four characters written.
        ("{\"s\":\"ab\\n\u{e9}", 2996 + 2),
        // Two, and an escape missing two hex digits.
        ("{\"s\":\"ab\\u00", 2 + 2997 + 2),
    ] {
        let m = matcher_at(&grammar, prefix);
        let completion = m.shortest_completion(10_000).unwrap();
        let mut done = m.clone();
        done.consume_bytes(&completion).unwrap();
        assert!(done.is_accepting(), "{prefix:?}");
        assert_eq!(completion.len(), expected_len, "{prefix:?}");
    }
}
