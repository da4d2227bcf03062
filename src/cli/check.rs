//! `stencil check (--gbnf FILE | --lark FILE | --regex PATTERN | --schema FILE | --structural-tag FILE) [--input FILE | --jsonl FILE] [--prefix] [--json] [--tokenizer FILE [--token-ids]]`
//! with, for `--schema`, `[--property-order schema|any] [--whitespace compact|bounded|pretty] [--strict] [--lenient] [--max-nesting N]`.
//!
//! Exit 0: the input is in the language (with `--prefix`: a viable prefix); 1: it is
//! not, and the output names the byte offset and what was expected there; 2: the
//! grammar is invalid (the message names line and column) or a file is unreadable.
//! `--jsonl` checks one input per line and prints one JSON result per line; it exits
//! 0 when every line passes, else 1.
//!
//! Grammars with token terminals name tokens no bytes spell (`<|eot_id|>`):
//! `--tokenizer FILE` binds the grammar to that vocabulary, and with
//! `--token-ids` the input is a JSON array of token ids (one array per line with
//! `--jsonl`), checked token by token; offsets then count tokens. A structural
//! tag's text delimiters that are the vocabulary's special tokens then match
//! those tokens too (the token-level forms, `token`, `exclude_token`, need it).

use std::io::{Read, Write};
use std::sync::Arc;

use clap::Args;
use serde_json::json;

use stencil::automaton::CompiledGrammar;
use stencil::check::{check, check_tokens, line_column, CheckReport};
use stencil::matcher::MatcherOptions;
use stencil::tables::TokenTables;
use stencil::vocab::Vocabulary;
use stencil::Compiler;

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
    /// tokenizer.json whose vocabulary the grammar's token names (`<think>`)
    /// are bound to.
    #[arg(long, value_name = "FILE")]
    tokenizer: Option<String>,
    /// The input is token ids, a JSON array (one per line with --jsonl), checked
    /// token by token over --tokenizer's vocabulary.
    #[arg(long, requires = "tokenizer")]
    token_ids: bool,
}

/// What inputs are checked against.
enum Checker {
    Bytes(Arc<CompiledGrammar>),
    /// Token ids, over the vocabulary the tables are bound to.
    Tokens(Arc<TokenTables>),
}

impl Checker {
    fn new(args: &CheckArgs) -> Result<Checker, String> {
        let Some(path) = &args.tokenizer else {
            return args.grammar.compile(None).map(Checker::Bytes);
        };
        let vocab = Vocabulary::from_tokenizer_file(path)
            .map_err(|e| format!("cannot read the tokenizer {path}: {e}"))?;
        let compiler = Compiler::new(Arc::new(vocab));
        // A structural tag's delimiters that are the vocabulary's special tokens
        // (`<tool_call>`) may be written as those tokens, as in generation.
        let mut grammar_args = args.grammar.clone();
        grammar_args.delimiter_tokens = compiler.delimiter_tokens();
        let grammar = grammar_args.grammar(None)?;
        let tables = grammar_args.compile_for(&compiler, &grammar, None)?;
        Ok(match args.token_ids {
            true => Checker::Tokens(tables),
            false => Checker::Bytes(Arc::clone(tables.grammar())),
        })
    }

    /// The verdict on one input (token ids as JSON text with `Tokens`).
    fn check(&self, input: &[u8], options: &MatcherOptions) -> Result<CheckReport, String> {
        match self {
            Checker::Bytes(grammar) => Ok(check(grammar, input, options)),
            Checker::Tokens(tables) => Ok(check_tokens(tables, &token_ids(input)?)),
        }
    }
}

/// A JSON array of token ids; the error names line and column.
fn token_ids(input: &[u8]) -> Result<Vec<u32>, String> {
    serde_json::from_slice(input)
        .map_err(|e| format!("the input is not a JSON array of token ids: {e}"))
}

pub fn run(args: &CheckArgs) -> i32 {
    let checker = match Checker::new(args) {
        Ok(checker) => checker,
        Err(message) => {
            eprintln!("error: invalid grammar: {message}");
            return 2;
        }
    };
    let options = MatcherOptions::default();
    if let Some(path) = &args.jsonl {
        return run_jsonl(&checker, &options, path, args.prefix);
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
    let report = input.and_then(|input| Ok((checker.check(&input, &options)?, input)));
    let (report, input) = match report {
        Ok(r) => r,
        Err(message) => {
            eprintln!("error: {message}");
            return 2;
        }
    };
    match (&checker, args.json) {
        (Checker::Tokens(_), true) => println!("{}", tokens_json(report_json(&report))),
        (Checker::Bytes(_), true) => println!("{}", report_json(&report)),
        (Checker::Tokens(tables), false) => print_tokens_human(
            &report,
            tables,
            &token_ids(&input).unwrap_or_default(),
            args.prefix,
        ),
        (Checker::Bytes(_), false) => print_human(&report, &input, args.prefix),
    }
    exit_code(&report, args.prefix)
}

/// A token check's JSON: offsets count tokens.
fn tokens_json(mut value: serde_json::Value) -> serde_json::Value {
    value["unit"] = json!("tokens");
    value
}

fn print_tokens_human(report: &CheckReport, tables: &TokenTables, tokens: &[u32], prefix: bool) {
    let n = tokens.len();
    if report.accepted {
        println!("accepted ({n} tokens)");
        return;
    }
    let offset = report.offset.unwrap_or(n);
    match tokens.get(offset) {
        Some(&id) if !report.viable_prefix => {
            let text = match (id as usize) < tables.vocab().len() {
                true => format!("{:?}", tables.vocab().token_text(id)),
                false => "outside the vocabulary".into(),
            };
            println!("rejected at token {offset}: id {id} ({text})");
        }
        _ if prefix => println!("viable prefix ({n} tokens), not yet complete"),
        _ => {
            println!("incomplete: the input ends after {n} tokens before the grammar is satisfied")
        }
    }
    print_expected(report);
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
    print_expected(report);
}

/// What the grammar expected where the input stopped.
fn print_expected(report: &CheckReport) {
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

fn run_jsonl(checker: &Checker, options: &MatcherOptions, path: &str, prefix: bool) -> i32 {
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
    for (number, line) in lines.into_iter().enumerate() {
        let report = match checker.check(line, options) {
            Ok(report) => report,
            Err(message) => {
                let _ = out.flush();
                eprintln!("error: {path}:{}: {message}", number + 1);
                return 2;
            }
        };
        worst = worst.max(exit_code(&report, prefix));
        let value = match checker {
            Checker::Tokens(_) => tokens_json(report_json(&report)),
            Checker::Bytes(_) => report_json(&report),
        };
        if writeln!(out, "{value}").is_err() {
            return 2;
        }
    }
    worst
}
