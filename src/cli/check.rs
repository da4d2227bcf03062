//! `stencil check (--gbnf FILE | --regex PATTERN | --schema FILE) [--input FILE | --jsonl FILE] [--prefix] [--json]`
//! with, for `--schema`, `[--property-order schema|any] [--whitespace compact|bounded|pretty] [--strict] [--lenient]`.
//!
//! Exit 0: the input is in the language (with `--prefix`: a viable prefix); 1: it is
//! not, and the output names the byte offset and what was expected there; 2: the
//! grammar is invalid (the message names line and column) or a file is unreadable.
//! `--jsonl` checks one input per line and prints one JSON result per line; it exits
//! 0 when every line passes, else 1.

use std::io::{Read, Write};
use std::sync::Arc;

use clap::Args;
use serde_json::json;

use stencil::automaton::{CompileOptions, CompiledGrammar};
use stencil::check::{check, line_column, CheckReport};
use stencil::frontend::json_schema::{self, JsonSchemaOptions, PropertyOrder, Whitespace};
use stencil::frontend::{self, gbnf::GbnfOptions};
use stencil::matcher::MatcherOptions;

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// GBNF grammar file (llama.cpp dialect).
    #[arg(long, value_name = "FILE", group = "grammar", required = true)]
    gbnf: Option<String>,
    /// Regular expression the whole input must match.
    #[arg(long, value_name = "PATTERN", group = "grammar", required = true)]
    regex: Option<String>,
    /// JSON Schema the input must validate against (drafts 4 to 2020-12).
    #[arg(long, value_name = "FILE", group = "grammar", required = true)]
    schema: Option<String>,
    /// Object property order for --schema: as declared, or any.
    #[arg(long, value_enum, default_value = "schema")]
    property_order: PropertyOrderArg,
    /// Whitespace between JSON tokens for --schema.
    #[arg(long, value_enum, default_value = "compact")]
    whitespace: WhitespaceArg,
    /// OpenAI-style strict profile (no undeclared properties by default).
    #[arg(long)]
    strict: bool,
    /// Keywords that cannot be enforced become warnings (printed) instead of errors.
    #[arg(long)]
    lenient: bool,
    /// Start rule of a GBNF grammar.
    #[arg(long, default_value = "root")]
    root: String,
    /// Input file (raw bytes); standard input when absent.
    #[arg(long, value_name = "FILE", conflicts_with = "jsonl")]
    input: Option<String>,
    /// Many inputs, one per line (without its newline); one JSON result per line.
    #[arg(long, value_name = "FILE")]
    jsonl: Option<String>,
    /// Succeed when the input is a viable prefix of the language.
    #[arg(long)]
    prefix: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum PropertyOrderArg {
    Schema,
    Any,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum WhitespaceArg {
    Compact,
    Bounded,
    Pretty,
}

fn schema_options(args: &CheckArgs) -> JsonSchemaOptions {
    JsonSchemaOptions {
        whitespace: match args.whitespace {
            WhitespaceArg::Compact => Whitespace::Compact,
            WhitespaceArg::Bounded => Whitespace::Bounded { indent: 20 },
            WhitespaceArg::Pretty => Whitespace::Pretty { indent: 2 },
        },
        property_order: match args.property_order {
            PropertyOrderArg::Schema => PropertyOrder::Schema,
            PropertyOrderArg::Any => PropertyOrder::Any,
        },
        strict: args.strict,
        lenient: args.lenient,
        ..JsonSchemaOptions::default()
    }
}

fn compile(args: &CheckArgs) -> Result<Arc<CompiledGrammar>, String> {
    let grammar = if let Some(path) = &args.schema {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
        let schema: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{path}:{}:{}: not JSON: {e}", e.line(), e.column()))?;
        let (grammar, warnings) = json_schema::compile_schema(&schema, &schema_options(args))
            .map_err(|e| format!("{path}: {e}"))?;
        for warning in warnings {
            eprintln!("warning: {path}: {warning}");
        }
        grammar
    } else if let Some(path) = &args.gbnf {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
        let options = GbnfOptions {
            root: args.root.clone(),
            ..GbnfOptions::default()
        };
        frontend::gbnf::parse(&text, &options).map_err(|e| format!("{path}:{e}"))?
    } else {
        let pattern = args.regex.as_deref().unwrap_or_default();
        frontend::regex::parse(pattern, &frontend::Limits::default()).map_err(|e| e.to_string())?
    };
    CompiledGrammar::compile(&grammar, &CompileOptions::default())
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

pub fn run(args: &CheckArgs) -> i32 {
    let grammar = match compile(args) {
        Ok(g) => g,
        Err(message) => {
            eprintln!("error: invalid grammar: {message}");
            return 2;
        }
    };
    let options = MatcherOptions::default();
    if let Some(path) = &args.jsonl {
        return run_jsonl(&grammar, &options, path, args.prefix);
    }
    let input = match &args.input {
        Some(path) => std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}")),
        None => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .map(|_| buf)
                .map_err(|e| format!("cannot read standard input: {e}"))
        }
    };
    let input = match input {
        Ok(i) => i,
        Err(message) => {
            eprintln!("error: {message}");
            return 2;
        }
    };
    let report = check(&grammar, &input, &options);
    if args.json {
        println!("{}", report_json(&report));
    } else {
        print_human(&report, &input, args.prefix);
    }
    exit_code(&report, args.prefix)
}

fn exit_code(report: &CheckReport, prefix: bool) -> i32 {
    if report.error.is_some() {
        2
    } else if report.accepted || (prefix && report.viable_prefix) {
        0
    } else {
        1
    }
}

fn report_json(report: &CheckReport) -> serde_json::Value {
    let mut value = json!({
        "accepted": report.accepted,
        "viable_prefix": report.viable_prefix,
        "offset": report.offset,
        "expected": report.expected,
        "expected_bytes": report.expected_bytes,
    });
    if let Some(error) = &report.error {
        value["error"] = json!(error);
    }
    value
}

fn print_human(report: &CheckReport, input: &[u8], prefix: bool) {
    if report.accepted {
        println!("accepted ({} bytes)", input.len());
        return;
    }
    if let Some(error) = &report.error {
        println!("undecided: {error}");
        return;
    }
    let offset = report.offset.unwrap_or(input.len());
    let (line, column) = line_column(input, offset);
    if report.viable_prefix {
        if prefix {
            println!("viable prefix ({} bytes), not yet complete", input.len());
        } else {
            println!(
                "incomplete: the input ends at byte offset {offset} (line {line}, column {column}) before the grammar is satisfied"
            );
        }
    } else {
        let found = input[offset];
        let shown = if (0x20..0x7f).contains(&found) {
            format!("{:?}", found as char)
        } else {
            format!("0x{found:02X}")
        };
        println!("rejected at byte offset {offset} (line {line}, column {column}): unexpected byte {shown}");
    }
    if !report.expected.is_empty() {
        println!("expected: {}", report.expected.join(" | "));
    }
    if !report.expected_bytes.is_empty() {
        println!("expected bytes: {}", report.expected_bytes.join(", "));
    }
}

fn run_jsonl(
    grammar: &Arc<CompiledGrammar>,
    options: &MatcherOptions,
    path: &str,
    prefix: bool,
) -> i32 {
    let data = match std::fs::read(path) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: cannot read {path}: {e}");
            return 2;
        }
    };
    let mut lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    if data.ends_with(b"\n") {
        lines.pop();
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut worst = 0;
    for line in lines {
        let report = check(grammar, line, options);
        worst = worst.max(exit_code(&report, prefix));
        if writeln!(out, "{}", report_json(&report)).is_err() {
            return 2;
        }
    }
    worst
}
