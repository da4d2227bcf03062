//! `stencil bench-decode [--model PATH] [--schema FILE] [--prompts N] [--max-tokens N] [--json]`
//!
//! Tokens per second of the decode loop on the same prompts, same model, same run, in
//! three modes: unconstrained, constrained by the schema, and constrained with
//! jump-forward. Greedy decoding, so every mode is deterministic. Token tables are
//! warmed by one untimed constrained pass; unconstrained runs write as many tokens per
//! prompt as the constrained run did. Decode time excludes
//! the prompt's forward pass; tokens/s is output tokens over decode time, summed over
//! the prompts. Forward passes per output token show what jump-forward saves.
//!
//! When the Python package `llama-cpp-python` is importable, llama.cpp decodes the
//! same prompt tokens from the same GGUF file, greedy and unconstrained, with as many
//! threads as candle uses, and its tokens/s is printed beside ours.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use serde_json::json;

use stencil::decode::{Generator, Request};
use stencil::matcher::StopPolicy;
use stencil::sampling::SamplingConfig;
use stencil::tables::TokenTables;

use super::generate::{load_generator, prompt_tokens};
use super::grammar::GrammarArgs;

const CITIES: [&str; 8] = [
    "Paris", "Tokyo", "Nairobi", "Lima", "Oslo", "Hanoi", "Toronto", "Cairo",
];

#[derive(Args, Debug)]
pub struct BenchDecodeArgs {
    /// GGUF file or safetensors folder; the built-in default model when absent.
    #[arg(long, value_name = "PATH")]
    model: Option<PathBuf>,
    /// Schema for the constrained modes.
    #[arg(long, value_name = "FILE", default_value = "grammars/city.schema.json")]
    schema: String,
    /// Prompts per mode (cities to describe).
    #[arg(long, default_value_t = 4)]
    prompts: usize,
    #[arg(long, default_value_t = 128)]
    max_tokens: usize,
    /// Measure the constrained modes without budget steering.
    #[arg(long)]
    no_budget_steering: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Default, Debug, Clone, Copy)]
struct Totals {
    tokens: usize,
    decode_ms: f64,
    forward_passes: usize,
    forced: usize,
    mask_ms: f64,
    mask_wait_ms: f64,
    prompt_ms: f64,
}

impl Totals {
    fn tokens_per_second(&self) -> f64 {
        self.tokens as f64 / (self.decode_ms / 1000.0).max(1e-9)
    }
    fn passes_per_token(&self) -> f64 {
        self.forward_passes as f64 / self.tokens.max(1) as f64
    }
    fn to_json(self) -> serde_json::Value {
        json!({
            "tokens": self.tokens,
            "decode_ms": self.decode_ms,
            "tokens_per_second": self.tokens_per_second(),
            "forward_passes": self.forward_passes,
            "forward_passes_per_token": self.passes_per_token(),
            "forced_tokens": self.forced,
            "mask_ms": self.mask_ms,
            "mask_wait_ms": self.mask_wait_ms,
            "prompt_ms": self.prompt_ms,
        })
    }
}

/// Runs every prompt; `max_tokens[i]` caps prompt `i`. Returns the totals and each
/// prompt's output length.
fn run_mode(
    generator: &Generator,
    prompts: &[Vec<u32>],
    grammar: Option<&Arc<TokenTables>>,
    (jump_forward, budget_steering): (bool, bool),
    max_tokens: &[usize],
) -> Result<(Totals, Vec<usize>), String> {
    let mut totals = Totals::default();
    let mut lengths = Vec::new();
    for (prompt, &max_tokens) in prompts.iter().zip(max_tokens) {
        let request = Request {
            prompt: prompt.clone(),
            grammar: grammar.cloned(),
            stop_policy: StopPolicy::Stop,
            sampling: SamplingConfig {
                temperature: Some(0.0),
                ..SamplingConfig::default()
            },
            max_tokens,
            jump_forward,
            logprobs: 0,
            trace: false,
            budget_steering,
        };
        let g = generator
            .generate(request, &mut |_| {})
            .map_err(|e| e.to_string())?;
        if let Some(e) = g.error {
            return Err(e);
        }
        let t = &g.timings;
        lengths.push(g.tokens.len());
        totals.tokens += g.tokens.len();
        totals.decode_ms += t.decode_ms;
        totals.forward_passes += t.forward_passes.saturating_sub(1);
        totals.forced += t.forced_tokens;
        totals.mask_ms += t.mask_ms;
        totals.mask_wait_ms += t.mask_wait_ms;
        totals.prompt_ms += t.prompt_ms;
    }
    Ok((totals, lengths))
}

/// llama.cpp through `llama-cpp-python`: greedy decoding of the same prompt tokens.
const LLAMA_CPP_SCRIPT: &str = r#"
import json, sys, time
from llama_cpp import Llama
path, threads = sys.argv[1], int(sys.argv[2])
prompts = json.load(sys.stdin)
llm = Llama(model_path=path, n_threads=threads, n_threads_batch=threads, n_ctx=4096, verbose=False)
tokens, seconds = 0, 0.0
for prompt, max_tokens in prompts:
    llm.reset()
    first = None
    n = 0
    for token in llm.generate(prompt, temp=0.0, top_k=1, reset=True):
        if first is None:
            first = time.perf_counter()
        if token == llm.token_eos() or n + 1 >= max_tokens:
            break
        n += 1
    if first is not None:
        seconds += time.perf_counter() - first
        tokens += n
print(json.dumps({"tokens": tokens, "decode_ms": seconds * 1000.0}))
"#;

/// llama.cpp's decode tokens/s on the same model and prompts, each capped at the
/// length stencil wrote for it, if `llama-cpp-python` is installed.
fn llama_cpp(model: &std::path::Path, prompts: &[Vec<u32>], lengths: &[usize]) -> Option<Totals> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    if model.is_dir() {
        return None;
    }
    let threads = std::env::var("CANDLE_NUM_THREADS")
        .ok()
        .and_then(|t| t.parse::<usize>().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let mut child = Command::new("python3")
        .args(["-c", LLAMA_CPP_SCRIPT])
        .arg(model)
        .arg(threads.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    child
        .stdin
        .take()?
        .write_all(
            serde_json::to_string(&prompts.iter().zip(lengths).collect::<Vec<_>>())
                .ok()?
                .as_bytes(),
        )
        .ok()?;
    let output = child.wait_with_output().ok()?;
    if !output.status.success() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    Some(Totals {
        tokens: v["tokens"].as_u64()? as usize,
        decode_ms: v["decode_ms"].as_f64()?,
        ..Totals::default()
    })
}

pub fn run(args: &BenchDecodeArgs) -> i32 {
    match bench(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

fn bench(args: &BenchDecodeArgs) -> Result<(), String> {
    let generator = load_generator(args.model.as_deref(), None)?;
    let grammar_args = GrammarArgs {
        gbnf: None,
        regex: None,
        schema: Some(args.schema.clone()),
        property_order: super::grammar::PropertyOrderArg::Schema,
        whitespace: super::grammar::WhitespaceArg::Compact,
        strict: false,
        lenient: false,
        root: "root".into(),
        for_generation: true,
    };
    let grammar = grammar_args.compile(None)?;
    let tables = Arc::new(TokenTables::new(
        grammar,
        Arc::clone(generator.tokenizer().vocab()),
    ));
    let schema_text =
        std::fs::read_to_string(&args.schema).map_err(|e| format!("{}: {e}", args.schema))?;
    let prompts = (0..args.prompts)
        .map(|i| {
            let city = CITIES[i % CITIES.len()];
            let text = format!(
                "Describe {city} as one JSON object that validates against this JSON Schema. \
                 Reply with the JSON only.\n\n{}",
                schema_text.trim()
            );
            prompt_tokens(&generator, &text, false)
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Warm-up: the constrained run once, untimed, so that every mode sees warm
    // token tables (a server's steady state) and warm pages.
    let caps = vec![args.max_tokens; prompts.len()];
    let steer = !args.no_budget_steering;
    run_mode(&generator, &prompts, Some(&tables), (false, steer), &caps)?;
    let (constrained, lengths) =
        run_mode(&generator, &prompts, Some(&tables), (false, steer), &caps)?;
    let (jump, _) = run_mode(&generator, &prompts, Some(&tables), (true, steer), &caps)?;
    // Unconstrained decoding writes as many tokens per prompt as the constrained run
    // did: a token's cost grows with its position, so equal lengths compare fairly.
    let (free, _) = run_mode(&generator, &prompts, None, (false, false), &lengths)?;
    let results = [
        ("unconstrained", free),
        ("constrained", constrained),
        ("constrained+jump-forward", jump),
    ];
    let base = results[0].1.tokens_per_second();
    let peer = llama_cpp(generator.model().path(), &prompts, &lengths);
    if args.json {
        let mut modes = serde_json::Map::new();
        for (name, t) in &results {
            let mut v = t.to_json();
            v["ratio_to_unconstrained"] = json!(t.tokens_per_second() / base);
            modes.insert(name.to_string(), v);
        }
        println!(
            "{}",
            json!({
                "model": generator.model().path().display().to_string(),
                "schema": args.schema,
                "prompts": args.prompts,
                "max_tokens": args.max_tokens,
                "modes": modes,
                "peers": {"llama.cpp": peer.map(|t| json!({
                    "tokens": t.tokens,
                    "tokens_per_second": t.tokens_per_second(),
                    "ratio_stencil_unconstrained_to_llama_cpp": base / t.tokens_per_second(),
                }))},
            })
        );
    } else {
        println!(
            "model {}, {} prompts, max_tokens {}, greedy",
            generator.model().path().display(),
            args.prompts,
            args.max_tokens
        );
        println!(
            "{:<26} {:>7} {:>9} {:>7} {:>13} {:>7} {:>9} {:>9}",
            "mode", "tokens", "tokens/s", "ratio", "passes/token", "forced", "mask ms", "wait ms"
        );
        for (name, t) in &results {
            println!(
                "{:<26} {:>7} {:>9.1} {:>7.3} {:>13.3} {:>7} {:>9.1} {:>9.1}",
                name,
                t.tokens,
                t.tokens_per_second(),
                t.tokens_per_second() / base,
                t.passes_per_token(),
                t.forced,
                t.mask_ms,
                t.mask_wait_ms
            );
        }
        match peer {
            Some(t) => println!(
                "{:<26} {:>7} {:>9.1}   (stencil unconstrained / llama.cpp = {:.3})",
                "llama.cpp (unconstrained)",
                t.tokens,
                t.tokens_per_second(),
                base / t.tokens_per_second()
            ),
            None => println!("llama.cpp: not measured (python3 cannot import llama_cpp)"),
        }
    }
    Ok(())
}
