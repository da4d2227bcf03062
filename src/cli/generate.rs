//! `stencil generate [--model PATH] (--schema FILE | --gbnf FILE | --regex PATTERN | --json)
//! [--prompt TEXT | --prompt-file FILE] [--max-tokens N] [--seed N] [--temperature T]
//! [--top-p P] [--top-k K] [--min-p P] [--preset reference|hf|vllm|llama.cpp] [--stream]
//! [--trace FILE] [--output-json]`
//!
//! Without `--model`, the built-in default model (SmolLM2-135M-Instruct, Q4_1 GGUF) is
//! used, fetched into the cache on first use. The prompt goes through the model's chat
//! template unless `--raw`. Exit 0 when the output is complete (`finish_reason` stop),
//! 1 when it stopped early (length, error), 2 when the request itself is wrong.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use serde_json::json;

use stencil::decode::{
    self, fetch, render_chat, Event, Generation, Generator, Message, Model, ModelTokenizer, Request,
};
use stencil::grammar::Grammar;
use stencil::matcher::StopPolicy;
use stencil::sampling::config::SamplingConfig;
use stencil::sampling::order::OrderSpec;
use stencil::tables::TokenTables;
use stencil::Compiler;

use super::grammar::{GrammarArgs, JSON_GBNF};

#[derive(Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("grammar")))]
pub struct GenerateArgs {
    /// GGUF file or safetensors folder; the built-in default model when absent.
    #[arg(long, value_name = "PATH")]
    model: Option<PathBuf>,
    /// tokenizer.json to use instead of the one beside the model or in the GGUF.
    #[arg(long, value_name = "FILE")]
    tokenizer: Option<PathBuf>,
    /// Where the model runs: auto (the first CUDA GPU in a `cuda` build, else the
    /// CPU), cpu, cuda or cuda:N.
    #[arg(long, value_name = "DEVICE", default_value = "auto")]
    device: String,
    #[command(flatten)]
    pub(super) grammar: GrammarArgs,
    /// Any JSON value (the built-in JSON grammar).
    #[arg(long = "json", group = "grammar")]
    json_grammar: bool,
    /// Many requests as one batch: a JSON object per line whose keys override these
    /// flags (prompt, schema, gbnf, regex, json, raw, max_tokens, seed, temperature,
    /// top_p, top_k, min_p, preset); prints one --output-json object per line.
    #[arg(long, value_name = "FILE", conflicts_with = "trace")]
    requests: Option<PathBuf>,
    /// The user message (a default asking for the grammar's output when absent).
    #[arg(long, value_name = "TEXT", conflicts_with = "prompt_file")]
    pub(super) prompt: Option<String>,
    #[arg(long, value_name = "FILE")]
    pub(super) prompt_file: Option<PathBuf>,
    /// Feed the prompt as is, without the model's chat template.
    #[arg(long)]
    pub(super) raw: bool,
    #[arg(long, default_value_t = 256)]
    pub(super) max_tokens: usize,
    #[arg(long, default_value_t = 0)]
    pub(super) seed: u64,
    /// 0 means greedy.
    #[arg(long)]
    pub(super) temperature: Option<f32>,
    #[arg(long)]
    pub(super) top_p: Option<f64>,
    #[arg(long)]
    pub(super) top_k: Option<i64>,
    #[arg(long)]
    pub(super) min_p: Option<f64>,
    /// Processor order (see `stencil sample`).
    #[arg(long, value_parser = ["reference", "hf", "vllm", "llama.cpp"])]
    pub(super) preset: Option<String>,
    /// What may follow once the grammar accepts.
    #[arg(long, value_enum, default_value = "stop")]
    stop_policy: StopPolicyArg,
    /// Sample every token, even those the grammar forces.
    #[arg(long)]
    no_jump_forward: bool,
    /// Do not force the output closed when max_tokens is about to run out.
    #[arg(long)]
    no_budget_steering: bool,
    /// Print text as it is generated (with --output-json or --requests: JSON lines
    /// `{"index": i, "delta": text}` before the final objects).
    #[arg(long)]
    stream: bool,
    /// Report the N most likely alternatives per token (raw and selected layers).
    #[arg(long, value_name = "N", default_value_t = 0)]
    logprobs: usize,
    /// Write the sampling pipeline's per-step trace (JSON lines).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Print one JSON object: text, finish_reason, grammar_complete, tokens, timings.
    #[arg(long)]
    output_json: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum StopPolicyArg {
    Stop,
    AllowContinue,
    TrailingWhitespaceThenEos,
}

/// Model and tokenizer, from `--model`/`--tokenizer` or the default model.
pub fn load_generator(
    model: Option<&Path>,
    tokenizer: Option<&Path>,
    device: &str,
) -> Result<Generator, String> {
    let device = decode::device_by_name(device).map_err(|e| e.to_string())?;
    let path = match model {
        Some(p) => p.to_path_buf(),
        None => fetch::default_model(true).map_err(|e| e.to_string())?,
    };
    let model = Model::load(&path, &device).map_err(|e| e.to_string())?;
    let tokenizer = match tokenizer {
        Some(t) => ModelTokenizer::from_file(t),
        None if path.is_dir() => ModelTokenizer::from_file(&path.join("tokenizer.json")),
        None => match model.gguf_metadata() {
            Some(md) => ModelTokenizer::from_gguf(md, &path.display().to_string()),
            None => ModelTokenizer::from_file(&path.with_file_name("tokenizer.json")),
        },
    }
    .map_err(|e| e.to_string())?;
    for warning in tokenizer.warnings() {
        eprintln!("warning: {warning}");
    }
    Ok(Generator::new(model, tokenizer))
}

/// The chat-templated (or raw) prompt's tokens.
pub fn prompt_tokens(generator: &Generator, text: &str, raw: bool) -> Result<Vec<u32>, String> {
    let tokenizer = generator.tokenizer();
    let rendered = match (raw, tokenizer.chat_template()) {
        (false, Some(template)) => render_chat(
            template,
            &[Message::new("user", text)],
            tokenizer.bos().map(|b| b.1.as_str()),
            tokenizer.eos().map(|e| e.1.as_str()),
        )
        .map_err(|e| e.to_string())?,
        _ => text.to_string(),
    };
    tokenizer
        .encode_prompt(&rendered)
        .map_err(|e| e.to_string())
}

/// The user message when none is given: asks for the grammar's output.
fn default_prompt(args: &GenerateArgs) -> Result<String, String> {
    let g = &args.grammar;
    let read =
        |path: &str| std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"));
    Ok(if let Some(path) = &g.schema {
        schema_prompt(read(path)?.trim())
    } else if let Some(path) = &g.gbnf {
        gbnf_prompt(read(path)?.trim(), &g.root)
    } else if let Some(regex) = &g.regex {
        regex_prompt(regex)
    } else {
        "Describe a city as a JSON object. Reply with the JSON only.".to_string()
    })
}

pub(super) fn schema_prompt(schema: &str) -> String {
    format!("Write one JSON document that validates against this JSON Schema. Reply with the JSON only.\n\n{schema}")
}

pub(super) fn gbnf_prompt(grammar: &str, root: &str) -> String {
    format!("Write text in the language of this GBNF grammar (start rule `{root}`). Reply with the text only.\n\n{grammar}")
}

pub(super) fn regex_prompt(regex: &str) -> String {
    format!("Write text that matches the regular expression `{regex}`. Reply with the text only.")
}

fn sampling_config(args: &GenerateArgs) -> SamplingConfig {
    SamplingConfig {
        order: args.preset.clone().map(OrderSpec::Preset),
        seed: Some(args.seed),
        temperature: args.temperature,
        top_p: args.top_p,
        top_k: args.top_k,
        min_p: args.min_p,
        ..SamplingConfig::default()
    }
}

impl GenerateArgs {
    /// The grammar flags, compiling for generation (plain integers).
    pub(super) fn grammar_for_generation(&self) -> GrammarArgs {
        GrammarArgs {
            for_generation: true,
            ..self.grammar.clone()
        }
    }

    fn has_grammar(&self) -> bool {
        let g = &self.grammar;
        self.json_grammar || g.schema.is_some() || g.gbnf.is_some() || g.regex.is_some()
    }
}

/// The grammar, read before the model loads so that a bad one fails at once.
fn read_grammar(args: &GenerateArgs) -> Result<Grammar, String> {
    args.grammar_for_generation()
        .grammar(args.json_grammar.then_some(JSON_GBNF))
        .map_err(|e| format!("invalid grammar: {e}"))
}

pub(super) fn build_request(
    args: &GenerateArgs,
    generator: &Generator,
    tables: Arc<TokenTables>,
) -> Result<Request, String> {
    let prompt_text = match (&args.prompt, &args.prompt_file) {
        (Some(p), _) => p.clone(),
        (None, Some(f)) => {
            std::fs::read_to_string(f).map_err(|e| format!("cannot read {}: {e}", f.display()))?
        }
        (None, None) => default_prompt(args)?,
    };
    Ok(Request {
        prompt: prompt_tokens(generator, &prompt_text, args.raw)?,
        grammar: Some(tables),
        stop_policy: match args.stop_policy {
            StopPolicyArg::Stop => StopPolicy::Stop,
            StopPolicyArg::AllowContinue => StopPolicy::AllowContinue,
            StopPolicyArg::TrailingWhitespaceThenEos => StopPolicy::TrailingWhitespaceThenEos,
        },
        sampling: sampling_config(args),
        max_tokens: args.max_tokens,
        jump_forward: !args.no_jump_forward,
        logprobs: args.logprobs,
        trace: args.trace.is_some(),
        budget_steering: !args.no_budget_steering,
    })
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
            "give one of --schema, --gbnf, --regex, --json (or --requests FILE)".into(),
        );
    }
    // Grammars and request lines are checked before the model loads: a bad one fails
    // in milliseconds, not after a download.
    let grammar = if args.has_grammar() {
        match read_grammar(args) {
            Ok(g) => Some(g),
            Err(e) => return bad_request(e),
        }
    } else {
        None
    };
    let lines = match &args.requests {
        Some(path) => match super::requests::read_lines(path) {
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
    let tables = match grammar.map(|g| compiler.compile_grammar(&g)).transpose() {
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
    report(args, &generation)
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
    if logprobs {
        value["logprobs"] = json!(g.logprobs);
    }
    value
}

/// `--requests`: every line as one batch, one JSON object per line in input order.
/// Exit 0 when every request stopped, 1 when any ran out of tokens or failed.
fn run_batch(
    args: &GenerateArgs,
    lines: &[super::requests::RequestLine],
    generator: &Generator,
    compiler: &Compiler,
    tables: Option<Arc<TokenTables>>,
) -> i32 {
    let requests = match super::requests::build_requests(args, lines, generator, compiler, tables) {
        Ok(r) => r,
        Err(e) => return bad_request(e),
    };
    let mut sink = stream_sink(args.stream, true);
    let generations = match generator.generate_batch(requests, &mut sink) {
        Ok(g) => g,
        Err(e) => return bad_request(e.to_string()),
    };
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

fn report(args: &GenerateArgs, g: &Generation) -> i32 {
    if args.output_json {
        println!("{}", generation_json(g, args.logprobs > 0));
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
