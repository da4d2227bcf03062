//! `stencil check (--gbnf FILE | --lark FILE | --regex PATTERN | --schema FILE) [--input FILE | --jsonl FILE] [--prefix] [--json]`
//! with, for `--schema`, `[--property-order schema|any] [--whitespace compact|bounded|pretty] [--strict] [--lenient] [--max-nesting N]`.
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

use stencil::automaton::CompiledGrammar;
use stencil::check::{check, line_column, CheckReport};
use stencil::matcher::MatcherOptions;

use super::grammar::GrammarArgs;

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("grammar").required(true)))]
pub struct CheckArgs {
    #[command(flatten)]
    grammar: GrammarArgs,
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

pub fn run(args: &CheckArgs) -> i32 {
    let grammar = match args.grammar.compile(None) {
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
        // A 1,000-value enum expects 1,000 terminals: a reader wants the first few
        // (`--json` keeps them all).
        const SHOWN: usize = 12;
        let mut shown = report.expected[..report.expected.len().min(SHOWN)].join(" | ");
        if report.expected.len() > SHOWN {
            shown.push_str(&format!(" | ... ({} more)", report.expected.len() - SHOWN));
        }
        println!("expected: {shown}");
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
    // Zero lines are zero inputs; a last line without its newline is still one.
    let mut lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    if data.is_empty() || data.ends_with(b"\n") {
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
