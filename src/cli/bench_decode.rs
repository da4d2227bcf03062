//! `stencil bench-decode [--model PATH] [--device D] [--schema FILE] [--prompts N]
//! [--rounds N] [--max-tokens N] [--json]`
//!
//! Tokens per second of the decode loop on the same prompts, same model, same run, in
//! three modes: unconstrained, constrained by the schema, and constrained with
//! jump-forward. Greedy decoding, so every mode is deterministic. Token tables are
//! warmed by one untimed constrained pass; unconstrained runs write as many tokens per
//! prompt as the constrained run did, counting the EOS that ended it (a decode step
//! like any other). Decode time excludes the prompt's forward pass; tokens/s is
//! sampled tokens over decode time. The modes take turns prompt by prompt
//! (the order rotating), for several rounds: the machine is shared and its speed
//! drifts, so the ratio reported is the median of each round's ratio, with its range.
//! Forward passes per output token show what jump-forward saves.
//!
//! When the Python package `llama-cpp-python` is importable, llama.cpp decodes the
//! same prompt tokens from the same GGUF file, greedy and unconstrained, with as many
//! threads as candle uses, and its tokens/s is printed beside ours.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use serde_json::json;

use stencil::decode::{FinishReason, Generator, Request};
use stencil::frontend::json_schema;
use stencil::matcher::StopPolicy;
use stencil::sampling::SamplingConfig;
use stencil::tables::TokenTables;
use stencil::Compiler;

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
    /// auto, cpu, cuda or cuda:N (as `stencil generate`).
    #[arg(long, value_name = "DEVICE", default_value = "auto")]
    device: String,
    /// Schema for the constrained modes.
    #[arg(long, value_name = "FILE", default_value = "grammars/city.schema.json")]
    schema: String,
    /// Prompts per mode (cities to describe).
    #[arg(long, default_value_t = 4)]
    prompts: usize,
    #[arg(long, default_value_t = 128)]
    max_tokens: usize,
    /// Rounds over all prompts and modes; ratios are medians over rounds.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
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

/// The three modes, in the order results are printed.
const MODES: [&str; 3] = ["unconstrained", "constrained", "constrained+jump-forward"];

impl Totals {
    fn add(&mut self, other: &Totals) {
        self.tokens += other.tokens;
        self.decode_ms += other.decode_ms;
        self.forward_passes += other.forward_passes;
        self.forced += other.forced;
        self.mask_ms += other.mask_ms;
        self.mask_wait_ms += other.mask_wait_ms;
        self.prompt_ms += other.prompt_ms;
    }
}

/// One greedy generation from `prompt`, at most `max_tokens` long.
fn run_one(
    generator: &Generator,
    prompt: &[u32],
    grammar: Option<&Arc<TokenTables>>,
    (jump_forward, budget_steering): (bool, bool),
    max_tokens: usize,
) -> Result<Totals, String> {
    let request = Request {
        prompt: prompt.to_vec(),
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
        reasoning: None,
    };
    let g = generator
        .generate(request, &mut |_| {})
        .map_err(|e| e.to_string())?;
    if let Some(e) = g.error {
        return Err(e);
    }
    let t = &g.timings;
    // The EOS that ends a stopped output is a sampled token like the others (it
    // takes a decode step), so it counts: a constrained output of N tokens plus EOS
    // and an unconstrained one of N + 1 tokens cut by the cap do the same work.
    let stopped = g.finish_reason == FinishReason::Stop;
    Ok(Totals {
        tokens: g.tokens.len() + usize::from(stopped),
        decode_ms: t.decode_ms,
        forward_passes: t.forward_passes.saturating_sub(1),
        forced: t.forced_tokens,
        mask_ms: t.mask_ms,
        mask_wait_ms: t.mask_wait_ms,
        prompt_ms: t.prompt_ms,
    })
}

/// The middle value (the mean of the two middle ones for an even count).
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
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
        # As stencil counts: every sampled token (the first, whose forward pass is
        # the prompt's, and a final EOS) over the time after the prompt.
        seconds += time.perf_counter() - first
        tokens += n + 1
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
    let generator = load_generator(args.model.as_deref(), None, &args.device)?;
    let grammar_args = GrammarArgs {
        gbnf: None,
        lark: None,
        regex: None,
        schema: Some(args.schema.clone()),
        structural_tag: None,
        property_order: super::grammar::PropertyOrderArg::Schema,
        whitespace: Some(super::grammar::WhitespaceArg::Compact),
        strict: false,
        lenient: false,
        max_nesting: json_schema::DEFAULT_MAX_NESTING,
        format: crate::cli::grammar::FormatArg::Assert,
        ref_dir: None,
        ref_base: json_schema::DEFAULT_DOCUMENTS_BASE.into(),
        root: "root".into(),
        for_generation: true,
        delimiter_tokens: Vec::new(),
    };
    let compiler = Compiler::new(Arc::clone(generator.tokenizer().vocab()));
    let tables = compiler
        .compile_grammar(&grammar_args.grammar(None)?)
        .map_err(|e| e.to_string())?;
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
    // token tables (a server's steady state) and warm pages. Greedy decoding is
    // deterministic, so it also gives each prompt's constrained length: unconstrained
    // runs write as many tokens (a token's cost grows with its position).
    let steer = !args.no_budget_steering;
    let lengths = prompts
        .iter()
        .map(|p| {
            run_one(
                &generator,
                p,
                Some(&tables),
                (false, steer),
                args.max_tokens,
            )
        })
        .map(|t| t.map(|t| t.tokens))
        .collect::<Result<Vec<_>, _>>()?;
    let rounds = measure_rounds(args, &generator, &prompts, &tables, &lengths)?;
    let mut pooled = [Totals::default(); 3];
    for round in &rounds {
        for (sum, t) in pooled.iter_mut().zip(round) {
            sum.add(t);
        }
    }
    // Each round's ratio to its own unconstrained run; the median over rounds.
    let ratios: Vec<Vec<f64>> = (0..3)
        .map(|mode| {
            rounds
                .iter()
                .map(|r| r[mode].tokens_per_second() / r[0].tokens_per_second())
                .collect()
        })
        .collect();
    let results: Vec<(&str, Totals, &Vec<f64>)> = MODES
        .iter()
        .zip(pooled)
        .zip(&ratios)
        .map(|((name, t), r)| (*name, t, r))
        .collect();
    let base = results[0].1.tokens_per_second();
    let peer = llama_cpp(generator.model().path(), &prompts, &lengths);
    match args.json {
        true => print_json(args, &generator, rounds.len(), &results, peer, base),
        false => print_table(args, &generator, rounds.len(), &results, peer, base),
    }
    Ok(())
}

/// Rounds of (prompt x mode), the mode order rotated at every prompt, so that
/// drift in the machine's speed (shared, noisy) falls on every mode alike: per
/// round, the totals of unconstrained, constrained and jump-forward runs.
fn measure_rounds(
    args: &BenchDecodeArgs,
    generator: &Generator,
    prompts: &[Vec<u32>],
    tables: &Arc<TokenTables>,
    lengths: &[usize],
) -> Result<Vec<[Totals; 3]>, String> {
    let steer = !args.no_budget_steering;
    // Rounds of (prompt x mode), the mode order rotated at every prompt, so that
    // drift in the machine's speed (shared, noisy) falls on every mode alike.
    let mut rounds: Vec<[Totals; 3]> = Vec::new();
    for round in 0..args.rounds.max(1) {
        let mut totals = [Totals::default(); 3];
        for (i, prompt) in prompts.iter().enumerate() {
            for k in 0..3 {
                let mode = (round + i + k) % 3;
                let t = match mode {
                    0 => run_one(generator, prompt, None, (false, false), lengths[i])?,
                    1 => run_one(
                        generator,
                        prompt,
                        Some(tables),
                        (false, steer),
                        args.max_tokens,
                    )?,
                    _ => run_one(
                        generator,
                        prompt,
                        Some(tables),
                        (true, steer),
                        args.max_tokens,
                    )?,
                };
                totals[mode].add(&t);
            }
        }
        rounds.push(totals);
    }
    Ok(rounds)
}

/// Each mode with its pooled totals and its ratios to unconstrained per round.
type ModeResults<'a> = [(&'a str, Totals, &'a Vec<f64>)];

fn print_json(
    args: &BenchDecodeArgs,
    generator: &Generator,
    rounds: usize,
    results: &ModeResults<'_>,
    peer: Option<Totals>,
    base: f64,
) {
    let mut modes = serde_json::Map::new();
    for (name, t, r) in results {
        let mut v = t.to_json();
        v["ratio_to_unconstrained"] = json!(median(r.to_vec()));
        v["ratio_per_round"] = json!(r);
        modes.insert(name.to_string(), v);
    }
    println!(
        "{}",
        json!({
            "model": generator.model().path().display().to_string(),
            "schema": args.schema,
            "device": format!("{:?}", generator.model().device()),
            "prompts": args.prompts,
            "rounds": rounds,
            "max_tokens": args.max_tokens,
            "modes": modes,
            "peers": {"llama.cpp": peer.map(|t| json!({
                "tokens": t.tokens,
                "tokens_per_second": t.tokens_per_second(),
                "ratio_stencil_unconstrained_to_llama_cpp": base / t.tokens_per_second(),
            }))},
        })
    );
}

fn print_table(
    args: &BenchDecodeArgs,
    generator: &Generator,
    rounds: usize,
    results: &ModeResults<'_>,
    peer: Option<Totals>,
    base: f64,
) {
    println!(
        "model {} on {:?}, {} prompts x {} rounds, max_tokens {}, greedy",
        generator.model().path().display(),
        generator.model().device(),
        args.prompts,
        rounds,
        args.max_tokens
    );
    println!("ratio: the median over rounds of each round's tokens/s over its unconstrained tokens/s [min-max]");
    println!(
        "{:<26} {:>7} {:>9} {:>21} {:>13} {:>7} {:>9} {:>9}",
        "mode",
        "tokens",
        "tokens/s",
        "ratio [min-max]",
        "passes/token",
        "forced",
        "mask ms",
        "wait ms"
    );
    for (name, t, r) in results {
        let lo = r.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        println!(
            "{:<26} {:>7} {:>9.1} {:>7.3} [{:.3}-{:.3}] {:>13.3} {:>7} {:>9.1} {:>9.1}",
            name,
            t.tokens,
            t.tokens_per_second(),
            median(r.to_vec()),
            lo,
            hi,
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
