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

use stencil::automaton::CompiledGrammar;
use stencil::decode::{
    self, fetch, render_chat, Event, Generation, Generator, Message, Model, ModelTokenizer, Request,
};
use stencil::matcher::StopPolicy;
use stencil::sampling::config::SamplingConfig;
use stencil::sampling::order::OrderSpec;
use stencil::tables::TokenTables;

use super::grammar::{GrammarArgs, JSON_GBNF};

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("grammar").required(true)))]
pub struct GenerateArgs {
    /// GGUF file or safetensors folder; the built-in default model when absent.
    #[arg(long, value_name = "PATH")]
    model: Option<PathBuf>,
    /// tokenizer.json to use instead of the one beside the model or in the GGUF.
    #[arg(long, value_name = "FILE")]
    tokenizer: Option<PathBuf>,
    #[command(flatten)]
    grammar: GrammarArgs,
    /// Any JSON value (the built-in JSON grammar).
    #[arg(long = "json", group = "grammar")]
    json_grammar: bool,
    /// The user message (a default asking for the grammar's output when absent).
    #[arg(long, value_name = "TEXT", conflicts_with = "prompt_file")]
    prompt: Option<String>,
    #[arg(long, value_name = "FILE")]
    prompt_file: Option<PathBuf>,
    /// Feed the prompt as is, without the model's chat template.
    #[arg(long)]
    raw: bool,
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// 0 means greedy.
    #[arg(long)]
    temperature: Option<f32>,
    #[arg(long)]
    top_p: Option<f64>,
    #[arg(long)]
    top_k: Option<i64>,
    #[arg(long)]
    min_p: Option<f64>,
    /// Processor order (see `stencil sample`).
    #[arg(long, value_parser = ["reference", "hf", "vllm", "llama.cpp"])]
    preset: Option<String>,
    /// What may follow once the grammar accepts.
    #[arg(long, value_enum, default_value = "stop")]
    stop_policy: StopPolicyArg,
    /// Sample every token, even those the grammar forces.
    #[arg(long)]
    no_jump_forward: bool,
    /// Do not force the output closed when max_tokens is about to run out.
    #[arg(long)]
    no_budget_steering: bool,
    /// Print text as it is generated.
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
pub fn load_generator(model: Option<&Path>, tokenizer: Option<&Path>) -> Result<Generator, String> {
    let path = match model {
        Some(p) => p.to_path_buf(),
        None => fetch::default_model(true).map_err(|e| e.to_string())?,
    };
    let device = decode::default_device();
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

fn default_prompt(args: &GenerateArgs) -> Result<String, String> {
    let g = &args.grammar;
    Ok(if let Some(path) = &g.schema {
        let schema =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
        format!("Write one JSON document that validates against this JSON Schema. Reply with the JSON only.\n\n{}", schema.trim())
    } else if let Some(path) = &g.gbnf {
        let grammar =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
        format!("Write text in the language of this GBNF grammar (start rule `{}`). Reply with the text only.\n\n{}", g.root, grammar.trim())
    } else if let Some(regex) = &g.regex {
        format!(
            "Write text that matches the regular expression `{regex}`. Reply with the text only."
        )
    } else {
        "Describe a city as a JSON object. Reply with the JSON only.".to_string()
    })
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

/// The grammar, compiled before the model loads so that a bad one fails at once.
fn compile_grammar(args: &GenerateArgs) -> Result<Arc<CompiledGrammar>, String> {
    let grammar_args = GrammarArgs {
        for_generation: true,
        ..args.grammar.clone()
    };
    grammar_args
        .compile(args.json_grammar.then_some(JSON_GBNF))
        .map_err(|e| format!("invalid grammar: {e}"))
}

fn build_request(
    args: &GenerateArgs,
    generator: &Generator,
    grammar: Arc<CompiledGrammar>,
) -> Result<Request, String> {
    let tables = Arc::new(TokenTables::new(
        grammar,
        Arc::clone(generator.tokenizer().vocab()),
    ));
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

pub fn run(args: &GenerateArgs) -> i32 {
    let grammar = match compile_grammar(args) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let generator = match load_generator(args.model.as_deref(), args.tokenizer.as_deref()) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let request = match build_request(args, &generator, grammar) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let stdout = std::io::stdout();
    let mut on_event = |event: Event<'_>| {
        let Event::Text { text, .. } = event;
        let mut out = stdout.lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    };
    let mut quiet = |_: Event<'_>| {};
    let sink: &mut dyn FnMut(Event<'_>) = if args.stream && !args.output_json {
        &mut on_event
    } else {
        &mut quiet
    };
    let generation = match generator.generate(request, sink) {
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

fn report(args: &GenerateArgs, g: &Generation) -> i32 {
    if args.output_json {
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
        if args.logprobs > 0 {
            value["logprobs"] = json!(g.logprobs);
        }
        println!("{value}");
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
