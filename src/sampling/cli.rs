//! `stencil sample`: one sampling step from a JSON logits row and a JSON config.
//!
//! Contract: `stencil sample --logits FILE|- [--config FILE] [--u U | --seed N] [--trace]`
//! prints `{"token": id}`, or with `--trace` `{"token": id, "trace": {...}}` where the trace
//! holds at least `order`, `stages` (`processor`, `support_size`), `selection`
//! (`[[id, prob], ...]`, ascending id), `u` and `rng`. Bad input is a message on stderr
//! and exit code 2, never a panic. I/O is injected so tests drive it in-process.

use super::config::SamplingConfig;
use super::error::SamplingError;
use super::sampler::{Sampler, StepOptions};
use super::Unconstrained;
use serde::Serialize;
use std::io::{Read, Write};
use std::path::PathBuf;
use thiserror::Error;

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct SampleArgs {
    /// Logits as a JSON array of numbers (token ids are indices); `-` reads stdin.
    /// The strings "-inf"/"-Infinity" mark never-selectable tokens.
    #[arg(long, value_name = "FILE|-")]
    pub logits: String,
    /// Sampling configuration (JSON object with the common API key names).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Force the uniform draw of the reference categorical selector, in [0, 1).
    #[arg(long, value_name = "U", conflicts_with = "seed")]
    pub u: Option<f64>,
    /// Request seed for the counter-based RNG (overrides the config's `seed`).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Print the per-step trace with every stage.
    #[arg(long)]
    pub trace: bool,
}

#[derive(Debug, Error)]
pub enum CliError {
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Sampling(#[from] SamplingError),
    #[error("writing output: {0}")]
    Output(#[from] std::io::Error),
}

impl CliError {
    /// 2 for bad input (the contract), 1 if the output could not be written.
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Output(_) => 1,
            _ => 2,
        }
    }
}

#[derive(Serialize)]
struct Output<'a> {
    token: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace: Option<&'a super::trace::StepTrace>,
}

/// Run with the process's stdin/stdout. Returns the exit code on success (0).
pub fn run(args: &SampleArgs) -> Result<i32, CliError> {
    run_with(
        args,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
    )
}

/// [`run`], printing any error to stderr and mapping it to its exit code.
pub fn run_to_exit_code(args: &SampleArgs) -> i32 {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

pub fn run_with(
    args: &SampleArgs,
    stdin: &mut dyn Read,
    stdout: &mut dyn Write,
) -> Result<i32, CliError> {
    let logits_text = if args.logits == "-" {
        let mut s = String::new();
        stdin
            .read_to_string(&mut s)
            .map_err(|e| CliError::Input(format!("reading logits from stdin: {e}")))?;
        s
    } else {
        read_file(&args.logits, "logits")?
    };
    let logits = parse_logits(&logits_text)?;
    let cfg = match &args.config {
        Some(p) => {
            let text = read_file(&p.to_string_lossy(), "config")?;
            SamplingConfig::from_json(&text)
                .map_err(|e| CliError::Input(format!("config {}: {e}", p.display())))?
        }
        None => SamplingConfig::default(),
    };
    let sampler = Sampler::from_config(&cfg)?;
    let mut state =
        sampler.new_state::<Unconstrained>(cfg.prompt.clone().unwrap_or_default(), args.seed, None);
    state.replay(cfg.history.as_deref().unwrap_or_default())?;
    let opts = StepOptions {
        forced_u: args.u,
        detail: args.trace,
        raw_logprob: args.trace,
        processed_logprob: args.trace,
    };
    let out = sampler.step(&state, &logits, &opts)?;
    let doc = Output {
        token: out.token,
        trace: args.trace.then_some(&out.trace),
    };
    let text = serde_json::to_string(&doc).map_err(|e| CliError::Input(e.to_string()))?;
    writeln!(stdout, "{text}")?;
    Ok(0)
}

fn read_file(path: &str, what: &str) -> Result<String, CliError> {
    std::fs::read_to_string(path)
        .map_err(|e| CliError::Input(format!("reading {what} file {path}: {e}")))
}

/// A JSON array of numbers; `"-inf"` / `"-Infinity"` strings allowed for masked tokens.
pub fn parse_logits(text: &str) -> Result<Vec<f32>, CliError> {
    let v: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| CliError::Input(format!("logits: invalid JSON: {e}")))?;
    let arr = v
        .as_array()
        .ok_or_else(|| CliError::Input("logits: expected a JSON array of numbers".into()))?;
    arr.iter()
        .enumerate()
        .map(|(i, x)| match x {
            serde_json::Value::Number(n) => match n.as_f64() {
                Some(f) if (f as f32).is_finite() => Ok(f as f32),
                _ => Err(CliError::Input(format!(
                    "logits[{i}]: {n} is outside the f32 range"
                ))),
            },
            serde_json::Value::String(s) if s == "-inf" || s == "-Infinity" => {
                Ok(f32::NEG_INFINITY)
            }
            other => Err(CliError::Input(format!(
                "logits[{i}]: expected a number (or \"-inf\"), got {other}"
            ))),
        })
        .collect()
}
