//! Generation-side property test: random walks through the compiled automaton.
//!
//! For every schema of the vendored fixtures that compiles, several random walks pick
//! an allowed byte at a time (`Matcher::allowed_bytes`) until the matcher accepts,
//! preferring closing bytes once over a length budget. Every produced document must be
//! UTF-8, parse with serde_json, and validate with the independent `jsonschema` crate
//! (format assertion on). Both property orders are exercised.

#[path = "support/json_schema_common.rs"]
mod common;

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;
use stencil::frontend::json_schema::{compile_schema, Draft, JsonSchemaOptions, PropertyOrder};
use stencil::{CompileOptions, CompiledGrammar, Matcher};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One random document, or `None` when the walk ran past its hard cap.
fn walk(grammar: &Arc<CompiledGrammar>, rng: &mut Rng, budget: usize) -> Option<Vec<u8>> {
    let mut m = Matcher::new(Arc::clone(grammar));
    let mut out = Vec::new();
    loop {
        let over = out.len() > budget;
        if m.is_accepting() && (over || rng.below(4) == 0) {
            return Some(out);
        }
        // Work around a core bug (see `core_allowed_bytes_after_complete_terminal` in
        // tests/basic.rs): `allowed_bytes` over-reports by one byte after a complete
        // terminal. A byte is kept only if something can follow it or it completes.
        let allowed: Vec<u8> = m
            .allowed_bytes()
            .iter()
            .filter(|&b| {
                if m.consume_byte(b).is_err() {
                    return false;
                }
                let ok = m.is_accepting() || !m.allowed_bytes().is_empty();
                m.rollback(1);
                ok
            })
            .collect();
        if allowed.is_empty() {
            if !m.is_accepting() {
                panic!(
                    "dead end that is not accepting after {:?} ({:?})",
                    String::from_utf8_lossy(&out),
                    out
                );
            }
            return Some(out);
        }
        if out.len() > budget * 20 {
            return None;
        }
        let preferred: Vec<u8> = if over {
            allowed
                .iter()
                .copied()
                .filter(|b| b"\"]}0123456789".contains(b))
                .collect()
        } else {
            Vec::new()
        };
        let pool = if preferred.is_empty() {
            &allowed
        } else {
            &preferred
        };
        let b = pool[rng.below(pool.len())];
        m.consume_byte(b).expect("an allowed byte is consumed");
        out.push(b);
    }
}

#[test]
fn random_documents_validate() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/json-schema");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut schemas, mut docs, mut capped, mut float_skipped) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for (sub, draft, jdraft) in [
        (
            "draft2020-12",
            Draft::Draft202012,
            jsonschema::Draft::Draft202012,
        ),
        ("draft7", Draft::Draft7, jsonschema::Draft::Draft7),
    ] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(sub))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        files.sort();
        for path in files {
            let groups: Vec<Value> =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            for group in &groups {
                let schema = &group["schema"];
                let Ok(validator) = jsonschema::options()
                    .with_draft(jdraft)
                    .should_validate_formats(true)
                    .build(schema)
                else {
                    continue;
                };
                for order in [PropertyOrder::Any, PropertyOrder::Schema] {
                    let options = JsonSchemaOptions {
                        property_order: order,
                        default_draft: Some(draft),
                        ..Default::default()
                    };
                    let Ok((grammar, _)) = compile_schema(schema, &options) else {
                        continue;
                    };
                    let Ok(compiled) =
                        CompiledGrammar::compile(&grammar, &CompileOptions::default())
                    else {
                        continue;
                    };
                    let compiled = Arc::new(compiled);
                    schemas += 1;
                    for _ in 0..2 {
                        let walked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            walk(&compiled, &mut rng, 40)
                        }));
                        let walked = match walked {
                            Ok(w) => w,
                            Err(e) => {
                                let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
                                failures.push(format!("{}: {schema}: {msg}", path.display()));
                                continue;
                            }
                        };
                        let Some(doc) = walked else {
                            capped += 1;
                            continue;
                        };
                        docs += 1;
                        let text = match String::from_utf8(doc) {
                            Ok(t) => t,
                            Err(e) => {
                                failures.push(format!("{}: not UTF-8: {e}", path.display()));
                                continue;
                            }
                        };
                        match serde_json::from_str::<Value>(&text) {
                            Ok(v) => {
                                if !validator.is_valid(&v) {
                                    // The validator reads numbers as f64 (it decides
                                    // multipleOf exactly in the decimal reading of that f64):
                                    // a number that does not survive an f64 round trip can
                                    // make it wrong.
                                    let imprecise = serde_json::to_string(&v).unwrap() != text;
                                    if imprecise {
                                        float_skipped += 1;
                                        continue;
                                    }
                                    failures.push(format!(
                                        "{}: {schema} produced invalid {text}",
                                        path.display()
                                    ));
                                }
                            }
                            Err(e) => failures.push(format!(
                                "{}: {schema} produced non-JSON {text:?}: {e}",
                                path.display()
                            )),
                        }
                    }
                }
            }
        }
    }
    println!(
        "{schemas} compiled schemas, {docs} documents, {capped} walks over the cap, \
         {float_skipped} rejected by the validator only through f64 imprecision (not counted)"
    );
    assert!(docs > 400, "only {docs} documents generated");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// patternProperties beside additionalProperties: every short name over a small
/// alphabet (escapes and a non-ASCII letter included), with values of each type,
/// accepted exactly when the independent validator says valid.
#[test]
fn pattern_property_names_agree_with_the_validator() {
    let schemas = [
        serde_json::json!({"patternProperties": {"f.*o": {"type": "integer"}}}),
        serde_json::json!({
            "properties": {"fo": {"type": "array"}, "b": {"type": "string"}},
            "patternProperties": {"^f": {"minItems": 2}, "o$": {"type": ["array", "null"]}},
            "additionalProperties": {"type": "integer"}
        }),
        serde_json::json!({
            "patternProperties": {"\"": {"type": "null"}, "^\\p{L}+$": {"type": "string"}},
            "additionalProperties": false
        }),
        serde_json::json!({"allOf": [
            {"patternProperties": {"^a": {"type": "integer"}}, "required": ["b"]},
            {"patternProperties": {"\\\\": false}, "additionalProperties": {"not": {"type": "string"}}}
        ]}),
    ];
    let alphabet = ["a", "b", "f", "o", "é", "\"", "\\", "\n"];
    let mut names = vec![String::new()];
    let mut frontier = vec![String::new()];
    for _ in 0..3 {
        frontier = frontier
            .iter()
            .flat_map(|n| alphabet.iter().map(move |c| format!("{n}{c}")))
            .collect();
        names.extend(frontier.iter().cloned());
    }
    let values = [
        serde_json::json!(1),
        serde_json::json!("x"),
        serde_json::json!(null),
        serde_json::json!([1, 2]),
    ];
    let mut disagreements = Vec::new();
    for schema in &schemas {
        let grammar = common::compile(
            schema,
            &JsonSchemaOptions {
                property_order: PropertyOrder::Any,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{schema}: {e}"));
        let validator = jsonschema::validator_for(schema).unwrap();
        for name in &names {
            for value in &values {
                let mut doc = serde_json::Map::new();
                doc.insert(name.clone(), value.clone());
                if name != "b" {
                    doc.insert("b".into(), serde_json::json!(2));
                }
                let doc = Value::Object(doc);
                let text = serde_json::to_string(&doc).unwrap();
                if common::accepts(&grammar, &text) != validator.is_valid(&doc) {
                    disagreements.push(format!("{schema}: {text}"));
                }
            }
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} disagreements:\n{}",
        disagreements.len(),
        disagreements[..disagreements.len().min(20)].join("\n")
    );
}
