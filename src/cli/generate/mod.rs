//! `stencil generate [--model PATH] (--schema FILE | --gbnf FILE | --lark FILE | --regex PATTERN
//! | --structural-tag FILE | --json | --tools FILE [--tool-choice C] [--no-parallel-tool-calls]
//! [--tool-format NAME]) [--reasoning] [--reasoning-budget N]
//! [--prompt TEXT | --prompt-file FILE] [--max-tokens N] [--sampling FILE] [--seed N]
//! [--temperature T] [--top-p P] [--top-k K] [--min-p P] [--typical-p P]
//! [--repetition-penalty R] [--presence-penalty P] [--frequency-penalty F]
//! [--min-tokens N] [--logit-bias ID=BIAS]... [--stop TEXT]...
//! [--preset reference|hf|vllm|llama.cpp] [--n N | --beams N [--length-penalty L]] [--stream]
//! [--trace FILE] [--output-json]`
//!
//! Without `--model`, the built-in default model (SmolLM2-135M-Instruct, Q4_1 GGUF) is
//! used, fetched into the cache on first use. The prompt goes through the model's chat
//! template unless `--raw`. Exit 0 when the output is complete (`finish_reason` stop),
//! 1 when it stopped early (length, error), 2 when the request itself is wrong.

mod request;
mod requests;
mod tools;

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use serde_json::json;

use stencil::decode::reasoning::ReasoningBudget;
use stencil::decode::{Event, Generation, Generator};
use stencil::frontend::structural_tag::StructuralTagOptions;
use stencil::grammar::Grammar;
use stencil::tables::TokenTables;
use stencil::Compiler;

use crate::cli::grammar::JSON_GBNF;

use request::{build_request, request_for, user_text};
pub use request::{load_generator, prompt_tokens, GenerateArgs};

/// The grammar, read before the model loads so that a bad one fails at once
/// (with `--tools`, the calls in the format given or Hermes's: the model's own
/// comes with its template).
fn read_grammar(
    args: &GenerateArgs,
    tools: Option<&tools::ToolRequest>,
    compiler: Option<&Compiler>,
) -> Result<Grammar, String> {
    let grammar_args = args.grammar_for_generation(compiler);
    match tools {
        Some(t) => t.grammar(t.provisional_format(), &tool_options(&grammar_args)?),
        None => grammar_args.grammar(args.json_grammar.then_some(JSON_GBNF)),
    }
    .map_err(|e| format!("invalid grammar: {e}"))
}

/// Tool calls' arguments are strict (declared properties only), as the
/// server's are.
fn tool_options(
    grammar_args: &crate::cli::grammar::GrammarArgs,
) -> Result<StructuralTagOptions, String> {
    let mut options = grammar_args.structural_tag_options()?;
    options.json.strict = true;
    Ok(options)
}

/// What `--stream` prints as text arrives: the text itself, or with `--output-json`
/// (and always for `--requests`) one `{"index": i, "delta": text}` line per piece,
/// before the final objects. Without `--stream`, nothing.
fn stream_sink(stream: bool, as_json: bool) -> impl FnMut(Event<'_>) {
    move |event: Event<'_>| {
        if !stream {
            return;
        }
        let Event::Text { request, text } = event;
        let mut out = std::io::stdout().lock();
        let _ = if as_json {
            writeln!(out, "{}", json!({"index": request, "delta": text}))
        } else {
            out.write_all(text.as_bytes())
        };
        let _ = out.flush();
    }
}

/// Prints the error and gives the exit code of a wrong request.
fn bad_request(e: String) -> i32 {
    eprintln!("error: {e}");
    2
}

pub fn run(args: &GenerateArgs) -> i32 {
    if args.requests.is_none() && !args.has_grammar() {
        return bad_request(
            "give one of --schema, --gbnf, --lark, --regex, --structural-tag, --json (or --requests FILE)"
                .into(),
        );
    }
    // Grammars and request lines are checked before the model loads: a bad one fails
    // in milliseconds, not after a download.
    let tool_request = match tools::read(args) {
        Ok(t) => t,
        Err(e) => return bad_request(e),
    };
    let grammar = if args.has_grammar() {
        match read_grammar(args, tool_request.as_ref(), None) {
            Ok(g) => Some(g),
            Err(e) => return bad_request(e),
        }
    } else {
        None
    };
    let lines = match &args.requests {
        Some(path) => match requests::read_lines(path) {
            Ok(lines) => Some(lines),
            Err(e) => return bad_request(e),
        },
        None => None,
    };
    let generator = match load_generator(
        args.model.as_deref(),
        args.tokenizer.as_deref(),
        &args.device,
    ) {
        Ok(g) => g,
        Err(e) => return bad_request(e),
    };
    // One compiler for the run: the grammars of a requests file share with it.
    let compiler = Compiler::new(Arc::clone(generator.tokenizer().vocab()));
    // Read again where delimiters may be the vocabulary's special tokens.
    let grammar =
        if grammar.is_some() && (tool_request.is_some() || args.grammar.structural_tag.is_some()) {
            match read_grammar(args, tool_request.as_ref(), Some(&compiler)) {
                Ok(g) => Some(g),
                Err(e) => return bad_request(e),
            }
        } else {
            grammar
        };
    if lines.is_none()
        && (tool_request.is_some() || args.reasoning || args.reasoning_budget.is_some())
    {
        let Some(grammar) = grammar else {
            unreachable!("checked above: a grammar or --requests")
        };
        return run_with_reply_parts(args, &generator, &compiler, grammar, tool_request.as_ref());
    }
    let fallback = args.json_grammar.then_some(JSON_GBNF);
    let compiled = grammar.map(|g| {
        args.grammar_for_generation(Some(&compiler))
            .compile_for(&compiler, &g, fallback)
    });
    let tables = match compiled.transpose() {
        Ok(tables) => tables,
        Err(e) => return bad_request(format!("invalid grammar: {e}")),
    };
    if let Some(lines) = lines {
        return run_batch(args, &lines, &generator, &compiler, tables);
    }
    let Some(tables) = tables else {
        unreachable!("checked above: a grammar or --requests")
    };
    let request = match build_request(args, &generator, tables) {
        Ok(r) => r,
        Err(e) => return bad_request(e),
    };
    if let Some(width) = args.beams {
        return run_beams(args, &generator, &request, width as usize);
    }
    if args.samples > 1 {
        let mut sink = stream_sink(args.stream, true);
        return match generator.generate_n(request, args.samples as usize, &mut sink) {
            Ok(generations) => print_indexed(args, &generations),
            Err(e) => bad_request(e.to_string()),
        };
    }
    generate_and_report(args, &generator, request, |g| {
        generation_json(g, args.logprobs > 0)
    })
}

/// Runs `request`, writes the trace, reports (`as_json` makes the
/// `--output-json` object).
fn generate_and_report(
    args: &GenerateArgs,
    generator: &Generator,
    request: stencil::decode::Request,
    as_json: impl Fn(&Generation) -> serde_json::Value,
) -> i32 {
    let mut sink = stream_sink(args.stream, args.output_json);
    let generation = match generator.generate(request, &mut sink) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    if let Some(path) = &args.trace {
        if let Err(e) = write_trace(path, &generation) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return 2;
        }
    }
    report(args, &generation, &as_json(&generation))
}

/// `--tools` and `--reasoning`: the prompt offers the tools, the calls are in
/// the model's format, a reasoning span goes first (its close forced after
/// `--reasoning-budget` tokens), and the reply is read back into content,
/// reasoning and calls.
fn run_with_reply_parts(
    args: &GenerateArgs,
    generator: &Generator,
    compiler: &Compiler,
    grammar: Grammar,
    tool_request: Option<&tools::ToolRequest>,
) -> i32 {
    let template = generator.tokenizer().chat_template();
    let grammar_args = args.grammar_for_generation(Some(compiler));
    let prompting = tool_request.map(|t| t.prompting(template));
    let (grammar, prompt) = match (tool_request, prompting) {
        (Some(t), Some(prompting)) => {
            let grammar = if prompting.format == t.provisional_format() {
                Ok(grammar)
            } else {
                tool_options(&grammar_args).and_then(|o| t.grammar(prompting.format, &o))
            };
            let prompt = user_text(args).and_then(|text| t.prompt(generator, &text, prompting));
            match (grammar, prompt) {
                (Ok(g), Ok(p)) => (g, p),
                (Err(e), _) | (_, Err(e)) => return bad_request(e),
            }
        }
        _ => {
            let prompt =
                user_text(args).and_then(|text| request::render_prompt(generator, &text, args.raw));
            match prompt {
                Ok(p) => (grammar, p),
                Err(e) => return bad_request(e),
            }
        }
    };
    let span = (args.reasoning || args.reasoning_budget.is_some())
        .then(|| tools::reasoning_span(generator, &prompt));
    let grammar = tools::with_span(grammar, span.as_ref(), &grammar_args.delimiter_tokens);
    let tables = match grammar_args.compile_for(compiler, &grammar, None) {
        Ok(t) => t,
        Err(e) => return bad_request(format!("invalid grammar: {e}")),
    };
    let tokens = match generator.tokenizer().encode_prompt(&prompt) {
        Ok(t) => t,
        Err(e) => return bad_request(e.to_string()),
    };
    let mut request = match request_for(args, generator, tokens, tables) {
        Ok(r) => r,
        Err(e) => return bad_request(e),
    };
    request.reasoning = match (&span, args.reasoning_budget) {
        (Some(span), Some(max_tokens)) => Some(ReasoningBudget {
            open: span.open.clone(),
            close: span.close.clone(),
            max_tokens,
        }),
        _ => None,
    };
    let calls = tool_request.zip(prompting.map(|p| p.format));
    generate_and_report(args, generator, request, |g| {
        let mut value = generation_json(g, args.logprobs > 0);
        let stopped = g.finish_reason == stencil::decode::FinishReason::Stop;
        let parts = tools::reply_fields(&g.text, span.as_ref(), calls, stopped);
        if let (Some(object), serde_json::Value::Object(fields)) = (value.as_object_mut(), parts) {
            object.extend(fields);
        }
        value
    })
}

fn write_trace(path: &Path, generation: &Generation) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for step in &generation.trace {
        serde_json::to_writer(&mut out, step)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// The `--output-json` object of one generation.
fn generation_json(g: &Generation, logprobs: bool) -> serde_json::Value {
    let mut value = json!({
        "text": g.text,
        "finish_reason": g.finish_reason,
        "grammar_complete": g.grammar_complete,
        "tokens": g.tokens.len(),
        "timings": g.timings,
    });
    if let Some(e) = &g.error {
        value["error"] = json!(e);
    }
    if let Some(stop) = &g.stop_string {
        value["stop_string"] = json!(stop);
    }
    if let Some(n) = g.reasoning_tokens {
        value["reasoning_tokens"] = json!(n);
    }
    if logprobs {
        value["logprobs"] = json!(g.logprobs);
    }
    value
}

/// `--requests`: every line as one batch, one JSON object per line in input order.
/// Exit 0 when every request stopped, 1 when any ran out of tokens or failed.
fn run_batch(
    args: &GenerateArgs,
    lines: &[requests::RequestLine],
    generator: &Generator,
    compiler: &Compiler,
    tables: Option<Arc<TokenTables>>,
) -> i32 {
    let requests = match requests::build_requests(args, lines, generator, compiler, tables) {
        Ok(r) => r,
        Err(e) => return bad_request(e),
    };
    let mut sink = stream_sink(args.stream, true);
    match generator.generate_batch(requests, &mut sink) {
        Ok(generations) => print_indexed(args, &generations),
        Err(e) => bad_request(e.to_string()),
    }
}

/// `--beams N`: the best beam as the text; with `--output-json` every beam too.
fn run_beams(
    args: &GenerateArgs,
    generator: &Generator,
    request: &stencil::decode::Request,
    width: usize,
) -> i32 {
    let beams = match generator.beam_search(request, width, args.length_penalty) {
        Ok(b) => b,
        Err(e) => return bad_request(e.to_string()),
    };
    let Some(best) = beams.first() else {
        return bad_request("beam search found no sequence".into());
    };
    if args.output_json {
        println!(
            "{}",
            json!({
                "text": best.text,
                "finish_reason": best.finish_reason,
                "grammar_complete": best.grammar_complete,
                "tokens": best.tokens.len(),
                "beams": beams,
            })
        );
    } else {
        println!("{}", best.text);
        for b in &beams {
            eprintln!(
                "score {:.4} (sum logprob {:.4}, {} tokens, {:?}): {:?}",
                b.score,
                b.sum_logprob,
                b.tokens.len(),
                b.finish_reason,
                b.text
            );
        }
    }
    match best.finish_reason {
        stencil::decode::FinishReason::Stop => 0,
        _ => 1,
    }
}

/// One `--output-json` object per generation, with its `index`. Exit 0 when
/// every one stopped, 1 when any ran out of tokens or failed.
fn print_indexed(args: &GenerateArgs, generations: &[Generation]) -> i32 {
    let mut all_stopped = true;
    for (index, g) in generations.iter().enumerate() {
        all_stopped &= g.finish_reason == stencil::decode::FinishReason::Stop;
        let mut value = json!({"index": index});
        if let (Some(object), serde_json::Value::Object(fields)) =
            (value.as_object_mut(), generation_json(g, args.logprobs > 0))
        {
            object.extend(fields);
        }
        println!("{value}");
    }
    if all_stopped {
        0
    } else {
        1
    }
}

fn report(args: &GenerateArgs, g: &Generation, as_json: &serde_json::Value) -> i32 {
    if args.output_json {
        println!("{as_json}");
    } else {
        if args.stream {
            println!();
        } else {
            println!("{}", g.text);
        }
        if args.logprobs > 0 {
            for l in &g.logprobs {
                eprintln!("{}", json!(l));
            }
        }
        let t = &g.timings;
        eprintln!(
            "finish_reason: {:?}, grammar_complete: {}, {} tokens ({} forced) in {} forward passes, \
             {:.1} tokens/s{}",
            g.finish_reason,
            g.grammar_complete,
            g.tokens.len(),
            t.forced_tokens,
            t.forward_passes,
            t.tokens_per_second,
            g.error.as_ref().map(|e| format!(", error: {e}")).unwrap_or_default()
        );
    }
    match g.finish_reason {
        stencil::decode::FinishReason::Stop => 0,
        _ => 1,
    }
}
