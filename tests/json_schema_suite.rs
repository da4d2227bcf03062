//! The official JSON Schema Test Suite against the compiled grammars.
//!
//! For every test case: compile the schema (property order `any`, compact
//! whitespace), serialize the instance compactly, and check that the matcher accepts
//! it exactly when the suite says it is valid. Per keyword file the table counts
//! passed, over-constrained (valid rejected), under-constrained (invalid accepted) and
//! unsupported (the schema did not compile: a named keyword error). Under-constrained
//! must be zero outside [`KNOWN_UNDER`].
//!
//! `vendored_fixtures` (default) runs the copies in `tests/fixtures/json-schema/`;
//! `full_suite` (ignored) runs `$STENCIL_SHARED_DATA/json-schema-test-suite`
//! (default `/work/shared/data`), drafts 2020-12 and 7, `optional/` included, with
//! the suite's `remotes/` passed as the documents served at `http://localhost:1234/`
//! (what `refRemote` names). `format` is an annotation ([`FormatMode::Annotate`]) but
//! in `optional/format/` and `optional/format-assertion.json`, which assume it asserts.

#[path = "support/json_schema_common.rs"]
mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{accepts, compile};
use serde_json::Value;
use stencil::frontend::json_schema::{
    Draft, FormatMode, JsonSchemaOptions, PropertyOrder, SchemaDocuments, DEFAULT_MAX_NESTING,
};

/// `(file, case description)` pairs allowed to be under-constrained, with why.
const KNOWN_UNDER: &[(&str, &str, &str)] = &[
    (
        "optional/content.json",
        "validation of string-encoded content based on media type",
        "contentMediaType/contentEncoding are annotations (2020-12 §8.3, draft 7 §8); the optional file assumes assertion",
    ),
    ("optional/content.json", "validation of binary string-encoding", "same"),
    ("optional/content.json", "validation of binary-encoded media type documents", "same"),
];

#[derive(Default, Clone, Copy)]
struct Row {
    passed: usize,
    over: usize,
    under: usize,
    unsupported: usize,
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

struct Outcome {
    rows: BTreeMap<String, Row>,
    under: Vec<String>,
    unsupported_reasons: BTreeMap<String, usize>,
}

fn run(dir: &Path, draft: Draft, order: PropertyOrder, documents: &SchemaDocuments) -> Outcome {
    let asserting = JsonSchemaOptions {
        property_order: order,
        default_draft: Some(draft),
        documents: documents.clone(),
        ..Default::default()
    };
    let mut rows = BTreeMap::new();
    let mut under = Vec::new();
    let mut unsupported_reasons = BTreeMap::new();
    // `format` as the suite means it: an annotation, but in `optional/format/`
    // (the format-assertion vocabulary).
    let annotating = JsonSchemaOptions {
        format: FormatMode::Annotate,
        ..asserting.clone()
    };
    for path in files(dir) {
        let name = path.strip_prefix(dir).unwrap().display().to_string();
        let options =
            if name.starts_with("optional/format/") || name == "optional/format-assertion.json" {
                &asserting
            } else {
                &annotating
            };
        let text = std::fs::read_to_string(&path).unwrap();
        let groups: Vec<Value> = serde_json::from_str(&text).unwrap();
        let mut row = Row::default();
        for group in &groups {
            let schema = &group["schema"];
            let tests = group["tests"].as_array().unwrap();
            let described = group["description"].as_str().unwrap_or("");
            let compiled = std::panic::catch_unwind(|| compile(schema, options))
                .unwrap_or_else(|_| Err(format!("PANIC compiling {schema}")));
            let grammar = match compiled {
                Ok(g) => g,
                Err(e) if e.starts_with("the schema accepts no JSON value") => {
                    // A clear compile error that also means "every instance is invalid".
                    for t in tests {
                        if t["valid"].as_bool().unwrap() {
                            row.over += 1;
                        } else {
                            row.passed += 1;
                        }
                    }
                    continue;
                }
                Err(e) => {
                    assert!(!e.starts_with("PANIC"), "{name}: {e}");
                    row.unsupported += tests.len();
                    let key = e.split(" at ").next().unwrap_or(&e).to_string();
                    *unsupported_reasons
                        .entry(key.chars().take(90).collect())
                        .or_default() += tests.len();
                    continue;
                }
            };
            for t in tests {
                let instance = serde_json::to_string(&t["data"]).unwrap();
                let valid = t["valid"].as_bool().unwrap();
                let got = accepts(&grammar, &instance);
                match (valid, got) {
                    (true, true) | (false, false) => row.passed += 1,
                    (true, false) => row.over += 1,
                    (false, true) => {
                        row.under += 1;
                        let known = KNOWN_UNDER
                            .iter()
                            .any(|(f, d, _)| *f == name && *d == described);
                        if !known {
                            under.push(format!(
                                "{name}: {described} / {}: accepted {instance} (schema {schema})",
                                t["description"]
                            ));
                        }
                    }
                }
            }
        }
        rows.insert(name, row);
    }
    Outcome {
        rows,
        under,
        unsupported_reasons,
    }
}

fn print_table(title: &str, out: &Outcome) {
    println!("\n{title}");
    println!("| file | passed | over-constrained | under-constrained | unsupported |");
    println!("|---|---:|---:|---:|---:|");
    let mut total = Row::default();
    for (name, r) in &out.rows {
        println!(
            "| {name} | {} | {} | {} | {} |",
            r.passed, r.over, r.under, r.unsupported
        );
        total.passed += r.passed;
        total.over += r.over;
        total.under += r.under;
        total.unsupported += r.unsupported;
    }
    println!(
        "| **total** | {} | {} | {} | {} |",
        total.passed, total.over, total.under, total.unsupported
    );
    println!("\nunsupported, by reason (tests):");
    let mut reasons: Vec<_> = out.unsupported_reasons.iter().collect();
    reasons.sort_by(|a, b| b.1.cmp(a.1));
    for (r, n) in reasons.iter().take(40) {
        println!("  {n:5}  {r}");
    }
}

fn check_dir(root: &Path, sub: &str, draft: Draft, documents: &SchemaDocuments) -> Outcome {
    let out = run(&root.join(sub), draft, PropertyOrder::Any, documents);
    print_table(&format!("{sub} (property order any, compact)"), &out);
    out
}

#[test]
fn vendored_fixtures() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/json-schema");
    let mut under = Vec::new();
    let mut passed = 0;
    for (sub, draft) in [
        ("draft2020-12", Draft::Draft202012),
        ("draft7", Draft::Draft7),
    ] {
        let out = check_dir(&root, sub, draft, &SchemaDocuments::default());
        passed += out.rows.values().map(|r| r.passed).sum::<usize>();
        under.extend(out.under);
    }
    assert!(under.is_empty(), "under-constrained:\n{}", under.join("\n"));
    assert!(passed > 300, "only {passed} tests passed");
}

#[test]
#[ignore = "needs the shared data folder; prints the full table"]
fn full_suite() {
    let suite = common::shared_data().join("json-schema-test-suite");
    let root = suite.join("tests");
    let mut remotes = SchemaDocuments::default();
    let loaded = remotes
        .load_dir(
            &suite.join("remotes"),
            "http://localhost:1234/",
            DEFAULT_MAX_NESTING,
        )
        .expect("the suite's remotes/");
    assert!(loaded > 50, "only {loaded} remote documents");
    let mut under = Vec::new();
    for (sub, draft) in [
        ("draft2020-12", Draft::Draft202012),
        ("draft7", Draft::Draft7),
    ] {
        let out = check_dir(&root, sub, draft, &remotes);
        under.extend(out.under);
        if sub == "draft2020-12" {
            // How many valid instances only the schema order rejects.
            let schema_order = run(&root.join(sub), draft, PropertyOrder::Schema, &remotes);
            let any_over: usize = out.rows.values().map(|r| r.over).sum();
            let schema_over: usize = schema_order.rows.values().map(|r| r.over).sum();
            println!(
                "\nproperty order schema: {schema_over} valid rejected (any order: {any_over})"
            );
        }
    }
    assert!(
        under.is_empty(),
        "{} under-constrained:\n{}",
        under.len(),
        under.join("\n")
    );
}
