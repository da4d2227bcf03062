//! MaskBench conformance: JSONSchemaBench schemas with valid and invalid instances.
//!
//! For each record: compile the schema (property order `any`, compact whitespace),
//! serialize every instance compactly (UTF-8 kept, key order as in the record), and
//! check acceptance against the instance's `valid` flag. Prints one row per file:
//! schemas, compiled, valid instances rejected, invalid instances accepted, plus the
//! compile failures by keyword. Asserts that no invalid instance is accepted.
//!
//! Ignored by default (needs `$STENCIL_SHARED_DATA`, default `/work/shared/data`).
//! Run in release. `STENCIL_MASKBENCH_SAMPLE=n` keeps every n-th record;
//! `STENCIL_MASKBENCH_FILTER=text` keeps files whose path contains `text`;
//! `STENCIL_MASKBENCH_SCHEMA_ORDER=1` also counts valid instances that property
//! order `schema` rejects; `STENCIL_MASKBENCH_LENIENT=1` compiles leniently;
//! `STENCIL_MASKBENCH_FAILS=path` writes each schema that does not compile, one
//! line each: the file, the record's name and the error.

#[path = "support/json_schema_common.rs"]
mod common;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{accepts, compile};
use serde_json::Value;
use stencil::frontend::json_schema::{JsonSchemaOptions, PropertyOrder};

#[derive(Default)]
struct Row {
    schemas: usize,
    compiled: usize,
    valid: usize,
    valid_rejected: usize,
    invalid: usize,
    invalid_accepted: usize,
    schema_order_only_rejected: usize,
}

fn files() -> Vec<PathBuf> {
    let root = common::shared_data().join("jsonschemabench");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&root)
        .expect("jsonschemabench folder")
        .flatten()
    {
        let p = entry.path();
        if p.is_dir() {
            for f in std::fs::read_dir(&p).unwrap().flatten() {
                let f = f.path();
                let name = f.file_name().unwrap().to_string_lossy().to_string();
                if name == "maskbench.jsonl.gz"
                    || (p.ends_with("maskbench") && name.ends_with(".jsonl.gz"))
                {
                    out.push(f);
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
#[ignore = "needs the shared data folder; run in release"]
fn maskbench() {
    let sample: usize = std::env::var("STENCIL_MASKBENCH_SAMPLE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let filter = std::env::var("STENCIL_MASKBENCH_FILTER").unwrap_or_default();
    let schema_order = std::env::var("STENCIL_MASKBENCH_SCHEMA_ORDER").is_ok_and(|v| v == "1");
    let lenient = std::env::var("STENCIL_MASKBENCH_LENIENT").is_ok_and(|v| v == "1");
    let trace = std::env::var("STENCIL_MASKBENCH_TRACE").is_ok_and(|v| v == "1");
    let mut fails_out = std::env::var("STENCIL_MASKBENCH_FAILS")
        .ok()
        .map(|p| std::fs::File::create(p).expect("STENCIL_MASKBENCH_FAILS: a writable path"));
    let any = JsonSchemaOptions {
        property_order: PropertyOrder::Any,
        lenient,
        ..Default::default()
    };
    let declared = JsonSchemaOptions {
        property_order: PropertyOrder::Schema,
        lenient,
        ..Default::default()
    };
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut invalid_accepted = Vec::new();
    let mut valid_rejected = Vec::new();
    let mut slowest: Vec<(Duration, String)> = Vec::new();
    let start = Instant::now();
    for path in files() {
        let rel = path
            .strip_prefix(common::shared_data().join("jsonschemabench"))
            .unwrap()
            .display()
            .to_string();
        if !rel.contains(&filter) {
            continue;
        }
        let reader = std::io::BufReader::new(flate2::read::GzDecoder::new(
            std::fs::File::open(&path).unwrap(),
        ));
        let row = rows.entry(rel.clone()).or_default();
        for (i, line) in reader.lines().enumerate() {
            if i % sample != 0 {
                continue;
            }
            let line: Value = serde_json::from_str(&line.unwrap()).unwrap();
            let id = line["file"].as_str().unwrap_or("?").to_string();
            let record: Value = match line["record"].as_str().map(serde_json::from_str) {
                Some(Ok(r)) => r,
                _ => continue,
            };
            let schema = &record["schema"];
            let tests = record["tests"].as_array().cloned().unwrap_or_default();
            row.schemas += 1;
            if trace {
                eprintln!("compile {id}");
            }
            let t0 = Instant::now();
            let compiled = std::panic::catch_unwind(|| compile(schema, &any))
                .unwrap_or_else(|_| Err("PANIC".into()));
            let took = t0.elapsed();
            slowest.push((took, id.clone()));
            let grammar = match compiled {
                Ok(g) => g,
                Err(e) => {
                    assert_ne!(e, "PANIC", "panic compiling {id}");
                    if let Some(f) = fails_out.as_mut() {
                        use std::io::Write;
                        let one_line = e.replace('\n', " ");
                        writeln!(f, "{rel}\t{id}\t{one_line}").unwrap();
                    }
                    let key = match e.find(": ") {
                        Some(i) if e.starts_with("unsupported") => {
                            let kw = e.split('"').nth(1).unwrap_or("?");
                            let why = &e[i + 2..];
                            format!(
                                "unsupported {kw}: {}",
                                why.chars().take(70).collect::<String>()
                            )
                        }
                        _ => e.chars().take(90).collect(),
                    };
                    *reasons.entry(key).or_default() += 1;
                    // "Accepts nothing" is a verdict on every instance: a valid
                    // one proves it wrong.
                    if e.contains("accepts no JSON value") {
                        for t in tests.iter().filter(|t| t["valid"] == Value::Bool(true)) {
                            row.valid += 1;
                            row.valid_rejected += 1;
                            valid_rejected.push(format!("{id} (unsatisfiable): {}", t["data"]));
                        }
                    }
                    continue;
                }
            };
            row.compiled += 1;
            let order_grammar = if schema_order {
                compile(schema, &declared).ok()
            } else {
                None
            };
            for t in &tests {
                if trace {
                    eprintln!("  check {id}");
                }
                let text = serde_json::to_string(&t["data"]).unwrap();
                let valid = t["valid"].as_bool().unwrap_or(false);
                let got = accepts(&grammar, &text);
                if valid {
                    row.valid += 1;
                    if !got {
                        row.valid_rejected += 1;
                        valid_rejected.push(format!(
                            "{id}: {}",
                            text.chars().take(200).collect::<String>()
                        ));
                    } else if let Some(g) = &order_grammar {
                        if !accepts(g, &text) {
                            row.schema_order_only_rejected += 1;
                        }
                    }
                } else {
                    row.invalid += 1;
                    if got {
                        row.invalid_accepted += 1;
                        invalid_accepted.push(format!(
                            "{id}: {}",
                            text.chars().take(300).collect::<String>()
                        ));
                    }
                }
            }
        }
    }
    println!("\nMaskBench conformance (property order any, compact; sample 1/{sample}; lenient {lenient})");
    println!(
        "| file | schemas | compiled | valid | valid rejected | invalid | invalid accepted |{}",
        if schema_order {
            " rejected only by schema order |"
        } else {
            ""
        }
    );
    println!(
        "|---|---:|---:|---:|---:|---:|---:|{}",
        if schema_order { "---:|" } else { "" }
    );
    let mut total = Row::default();
    for (name, r) in &rows {
        let extra = if schema_order {
            format!(" {} |", r.schema_order_only_rejected)
        } else {
            String::new()
        };
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} |{extra}",
            r.schemas, r.compiled, r.valid, r.valid_rejected, r.invalid, r.invalid_accepted
        );
        total.schemas += r.schemas;
        total.compiled += r.compiled;
        total.valid += r.valid;
        total.valid_rejected += r.valid_rejected;
        total.invalid += r.invalid;
        total.invalid_accepted += r.invalid_accepted;
        total.schema_order_only_rejected += r.schema_order_only_rejected;
    }
    let extra = if schema_order {
        format!(" {} |", total.schema_order_only_rejected)
    } else {
        String::new()
    };
    println!(
        "| **total** | {} | {} | {} | {} ({:.2}%) | {} | {} |{extra}",
        total.schemas,
        total.compiled,
        total.valid,
        total.valid_rejected,
        100.0 * total.valid_rejected as f64 / total.valid.max(1) as f64,
        total.invalid,
        total.invalid_accepted
    );
    println!("\ncompile failures by reason (schemas):");
    let mut r: Vec<_> = reasons.into_iter().collect();
    r.sort_by_key(|x| std::cmp::Reverse(x.1));
    for (k, n) in r.iter().take(40) {
        println!("  {n:5}  {k}");
    }
    slowest.sort_by_key(|x| std::cmp::Reverse(x.0));
    println!("\nslowest compiles: {:?}", &slowest[..slowest.len().min(8)]);
    println!("\nvalid rejected (first 40):");
    for v in valid_rejected.iter().take(40) {
        println!("  {v}");
    }
    println!("\ninvalid accepted (first 40):");
    for v in invalid_accepted.iter().take(40) {
        println!("  {v}");
    }
    println!("\nelapsed {:?}", start.elapsed());
    assert_eq!(total.invalid_accepted, 0, "invalid instances accepted");
}
