//! One request of `stencil generate`: its flags ([`GenerateArgs`]), the model they
//! name, the prompt (the chat template, or a default prompt that asks for the
//! grammar's output) and the sampling settings, turned into a decode
//! [`Request`]. Both the single request and each line of `--requests` are built
//! here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use serde_json::json;

use stencil::decode::{
    self, fetch, render_chat, Generator, Message, Model, ModelTokenizer, Request,
};
use stencil::matcher::StopPolicy;
use stencil::sampling::config::SamplingConfig;
use stencil::sampling::Sampler;
use stencil::tables::TokenTables;
use stencil::Compiler;

use crate::cli::grammar::GrammarArgs;

#[derive(Args, Debug, Clone)]
#[command(group(clap::ArgGroup::new("grammar")))]
pub struct GenerateArgs {
    /// GGUF file or safetensors folder; the built-in default model when absent.
    #[arg(long, value_name = "PATH")]
    pub(super) model: Option<PathBuf>,
    /// tokenizer.json to use instead of the one beside the model or in the GGUF.
    #[arg(long, value_name = "FILE")]
    pub(super) tokenizer: Option<PathBuf>,
    /// Where the model runs: auto (the first CUDA GPU in a `cuda` build, else the
    /// CPU), cpu, cuda or cuda:N.
    #[arg(long, value_name = "DEVICE", default_value = "auto")]
    pub(super) device: String,
    #[command(flatten)]
    pub(super) grammar: GrammarArgs,
    /// Any JSON value (the built-in JSON grammar).
    #[arg(long = "json", group = "grammar")]
    pub(super) json_grammar: bool,
    /// Many requests as one batch: a JSON object per line whose keys override these
    /// flags (prompt, schema, gbnf, lark, structural_tag, regex, json, raw,
    /// max_tokens, preset, and every --sampling key); prints one --output-json
    /// object per line.
    #[arg(long, value_name = "FILE", conflicts_with = "trace")]
    pub(super) requests: Option<PathBuf>,
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
    /// Sampling settings, a JSON file with the library's keys (`SamplingConfig`:
    /// temperature, top_p, top_k, min_p, typical_p, epsilon_cutoff, eta_cutoff,
    /// top_n_sigma, repetition/presence/frequency penalties and their scopes,
    /// logit_bias, min_tokens, stop, stop_token_ids, banned_sequences,
    /// no_repeat_ngram_size, dry, mirostat, xtc, watermark, order, strategy, seed);
    /// the flags below override its keys.
    #[arg(long = "sampling", value_name = "FILE")]
    pub(super) sampling_file: Option<PathBuf>,
    /// The request's RNG seed (default 0).
    #[arg(long)]
    pub(super) seed: Option<u64>,
    /// 0 means greedy.
    #[arg(long)]
    pub(super) temperature: Option<f32>,
    #[arg(long)]
    pub(super) top_p: Option<f64>,
    #[arg(long)]
    pub(super) top_k: Option<i64>,
    #[arg(long)]
    pub(super) min_p: Option<f64>,
    #[arg(long)]
    pub(super) typical_p: Option<f64>,
    /// Divides a seen token's positive logit, multiplies a negative one (>= 1).
    #[arg(long, value_name = "R")]
    pub(super) repetition_penalty: Option<f32>,
    #[arg(long, value_name = "P", allow_hyphen_values = true)]
    pub(super) presence_penalty: Option<f32>,
    #[arg(long, value_name = "F", allow_hyphen_values = true)]
    pub(super) frequency_penalty: Option<f32>,
    /// EOS (and the end of the grammar) stays masked for the first N tokens.
    #[arg(long, value_name = "N")]
    pub(super) min_tokens: Option<usize>,
    /// Adds BIAS to token ID's logit (repeatable).
    #[arg(long, value_name = "ID=BIAS", allow_hyphen_values = true)]
    pub(super) logit_bias: Vec<String>,
    /// Ends the output where TEXT first appears, TEXT not included (repeatable).
    #[arg(long, value_name = "TEXT")]
    pub(super) stop: Vec<String>,
    /// Processor order (see `stencil sample`).
    #[arg(long, value_parser = ["reference", "hf", "vllm", "llama.cpp"])]
    pub(super) preset: Option<String>,
    /// N samples of the prompt (seeds seed, seed+1, ...), sharing its forward pass;
    /// prints one --output-json object per sample, with its `index`.
    #[arg(long = "n", value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=64),
          conflicts_with_all = ["requests", "tools", "reasoning", "reasoning_budget", "trace"])]
    pub(super) samples: u64,
    /// Beam search of N hypotheses instead of sampling (each with its own KV
    /// branch and grammar state); prints the best, and every beam with
    /// --output-json.
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=32),
          conflicts_with_all = ["requests", "tools", "reasoning", "reasoning_budget", "trace", "samples"])]
    pub(super) beams: Option<u64>,
    /// Beam scores are `sum logprob / length^L`.
    #[arg(
        long,
        value_name = "L",
        default_value_t = 1.0,
        requires = "beams",
        allow_hyphen_values = true
    )]
    pub(super) length_penalty: f64,
    /// A `--requests` line's sampling keys, laid over the flags.
    #[arg(skip)]
    pub(super) line_sampling: Option<serde_json::Map<String, serde_json::Value>>,
    /// What may follow once the grammar accepts.
    #[arg(long, value_enum, default_value = "stop")]
    pub(super) stop_policy: StopPolicyArg,
    /// Sample every token, even those the grammar forces.
    #[arg(long)]
    pub(super) no_jump_forward: bool,
    /// Do not force the output closed when max_tokens is about to run out.
    #[arg(long)]
    pub(super) no_budget_steering: bool,
    /// Print text as it is generated (with --output-json or --requests: JSON lines
    /// `{"index": i, "delta": text}` before the final objects).
    #[arg(long)]
    pub(super) stream: bool,
    /// Report the N most likely alternatives per token (raw and selected layers).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(super) logprobs: usize,
    /// Write the sampling pipeline's per-step trace (JSON lines).
    #[arg(long, value_name = "FILE")]
    pub(super) trace: Option<PathBuf>,
    /// Print one JSON object: text, finish_reason, grammar_complete, tokens, timings
    /// (with --tools or --reasoning also content, reasoning, tool_calls).
    #[arg(long)]
    pub(super) output_json: bool,
    /// Tools the model may call (a JSON file: OpenAI's `tools` array): the reply
    /// is constrained to the model's own tool-call format, each call's arguments
    /// to its tool's `parameters`.
    #[arg(
        long,
        value_name = "FILE",
        group = "grammar",
        conflicts_with = "requests"
    )]
    pub(super) tools: Option<PathBuf>,
    /// auto (text, calls or both), required (calls only), none (no call), or a
    /// tool's name (that call only).
    #[arg(
        long,
        value_name = "CHOICE",
        default_value = "auto",
        requires = "tools"
    )]
    pub(super) tool_choice: String,
    /// At most one call.
    #[arg(long, requires = "tools")]
    pub(super) no_parallel_tool_calls: bool,
    /// The tool-call format instead of the chat template's (hermes, qwen-xml, glm,
    /// seed-oss, minimax, deepseek-dsml, deepseek-v4, deepseek-v3, deepseek-r1,
    /// kimi-k2, llama3-json, mistral-nemo, mistral-args, mistral-call-id, pythonic, gemma4,
    /// cohere, harmony, kimi-k3, nemotron-nano-v2, apriel, minicpm, firefunction,
    /// gigachat3, gigachat3.1, functionary-v3.1, apertus, functionary-v3.2,
    /// minimax-m3, command-r-plus, muse-glimmer).
    #[arg(long, value_name = "NAME", requires = "tools")]
    pub(super) tool_format: Option<String>,
    /// A reasoning span first (`<think>...</think>`, or the chat template's own),
    /// its text free; the grammar constrains what follows it.
    #[arg(long, conflicts_with = "requests")]
    pub(super) reasoning: bool,
    /// Most tokens of reasoning: then its close is written for the model
    /// (implies --reasoning).
    #[arg(long, value_name = "N", conflicts_with = "requests")]
    pub(super) reasoning_budget: Option<usize>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(super) enum StopPolicyArg {
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
    let rendered = render_prompt(generator, text, raw)?;
    generator
        .tokenizer()
        .encode_prompt(&rendered)
        .map_err(|e| e.to_string())
}

/// The user message `text` through the chat template (as is when `raw`).
pub(super) fn render_prompt(
    generator: &Generator,
    text: &str,
    raw: bool,
) -> Result<String, String> {
    let tokenizer = generator.tokenizer();
    Ok(match (raw, tokenizer.chat_template()) {
        (false, Some(template)) => render_chat(
            template,
            &[Message::new("user", text)],
            tokenizer.bos().map(|b| b.1.as_str()),
            tokenizer.eos().map(|e| e.1.as_str()),
        )
        .map_err(|e| e.to_string())?,
        _ => text.to_string(),
    })
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
    } else if let Some(path) = &g.lark {
        lark_prompt(read(path)?.trim())
    } else if let Some(path) = &g.structural_tag {
        let tag = serde_json::from_str(&read(path)?).map_err(|e| format!("{path}: {e}"))?;
        structural_tag_prompt(&tag)
    } else if let Some(regex) = &g.regex {
        regex_prompt(regex)
    } else if args.tools.is_some() {
        "Help me with one of the tools you have.".to_string()
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

pub(super) fn lark_prompt(grammar: &str) -> String {
    format!("Write text in the language of this Lark grammar (start rule `start`). Reply with the text only.\n\n{grammar}")
}

pub(super) fn structural_tag_prompt(tag: &serde_json::Value) -> String {
    format!(
        "Write text in the format this structural tag describes (XGrammar's format: free text, tags between their begin and end strings). Reply with the text only.\n\n{}",
        serde_json::to_string_pretty(tag).unwrap_or_default()
    )
}

pub(super) fn regex_prompt(regex: &str) -> String {
    format!("Write text that matches the regular expression `{regex}`. Reply with the text only.")
}

/// The sampling settings of `args`, in layers: the `--sampling` file, the flags,
/// a `--requests` line's keys. Errors name the file (with line and column) or the
/// flag.
pub(super) fn sampling_config(args: &GenerateArgs) -> Result<SamplingConfig, String> {
    let mut keys = match &args.sampling_file {
        Some(path) => sampling_file(path)?,
        None => serde_json::Map::new(),
    };
    let flags = [
        ("seed", args.seed.map(|v| json!(v))),
        ("temperature", args.temperature.map(|v| json!(v))),
        ("top_p", args.top_p.map(|v| json!(v))),
        ("top_k", args.top_k.map(|v| json!(v))),
        ("min_p", args.min_p.map(|v| json!(v))),
        ("typical_p", args.typical_p.map(|v| json!(v))),
        (
            "repetition_penalty",
            args.repetition_penalty.map(|v| json!(v)),
        ),
        ("presence_penalty", args.presence_penalty.map(|v| json!(v))),
        (
            "frequency_penalty",
            args.frequency_penalty.map(|v| json!(v)),
        ),
        ("min_tokens", args.min_tokens.map(|v| json!(v))),
        ("order", args.preset.as_ref().map(|v| json!(v))),
        ("stop", (!args.stop.is_empty()).then(|| json!(args.stop))),
    ];
    for (key, value) in flags {
        if let Some(value) = value {
            keys.insert(key.into(), value);
        }
    }
    for pair in &args.logit_bias {
        let (id, bias) = pair
            .split_once('=')
            .and_then(|(id, bias)| {
                Some((
                    id.trim().parse::<u32>().ok()?,
                    bias.trim().parse::<f32>().ok()?,
                ))
            })
            .ok_or_else(|| {
                format!("--logit-bias {pair:?}: expected ID=BIAS (a token id and a number)")
            })?;
        let biases = keys.entry("logit_bias").or_insert_with(|| json!({}));
        if let Some(biases) = biases.as_object_mut() {
            biases.insert(id.to_string(), json!(bias));
        }
    }
    for (key, value) in args.line_sampling.iter().flatten() {
        keys.insert(key.clone(), value.clone());
    }
    keys.entry("seed").or_insert(json!(0));
    serde_json::from_value(serde_json::Value::Object(keys))
        .map_err(|e| format!("sampling settings: {e}"))
}

/// A `--sampling` file: one JSON object of `SamplingConfig` keys (checked here,
/// so an unknown key is named with its line and column).
fn sampling_file(path: &Path) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let origin = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {origin}: {e}"))?;
    let located = |e: serde_json::Error| format!("{origin}:{}:{}: {e}", e.line(), e.column());
    serde_json::from_str::<SamplingConfig>(&text).map_err(located)?;
    match serde_json::from_str(&text).map_err(located)? {
        serde_json::Value::Object(keys) => Ok(keys),
        _ => Err(format!(
            "{origin}: expected a JSON object of sampling settings"
        )),
    }
}

impl GenerateArgs {
    /// The grammar flags, compiling for generation (plain integers).
    /// The grammar flags for generating: integers without a fraction, and
    /// (once `compiler` is known) its vocabulary's delimiter tokens.
    pub(super) fn grammar_for_generation(&self, compiler: Option<&Compiler>) -> GrammarArgs {
        GrammarArgs {
            for_generation: true,
            delimiter_tokens: compiler.map(Compiler::delimiter_tokens).unwrap_or_default(),
            ..self.grammar.clone()
        }
    }

    pub(super) fn has_grammar(&self) -> bool {
        let g = &self.grammar;
        self.json_grammar
            || g.schema.is_some()
            || g.gbnf.is_some()
            || g.lark.is_some()
            || g.regex.is_some()
            || g.structural_tag.is_some()
            || self.tools.is_some()
    }
}

/// The user message: `--prompt`, `--prompt-file`, or a default that asks for
/// the grammar's output.
pub(super) fn user_text(args: &GenerateArgs) -> Result<String, String> {
    match (&args.prompt, &args.prompt_file) {
        (Some(p), _) => Ok(p.clone()),
        (None, Some(f)) => {
            std::fs::read_to_string(f).map_err(|e| format!("cannot read {}: {e}", f.display()))
        }
        (None, None) => default_prompt(args),
    }
}

pub(super) fn build_request(
    args: &GenerateArgs,
    generator: &Generator,
    tables: Arc<TokenTables>,
) -> Result<Request, String> {
    let prompt = prompt_tokens(generator, &user_text(args)?, args.raw)?;
    request_for(args, generator, prompt, tables)
}

/// The decode request of `args` for a prompt already tokenized; its sampling
/// settings are checked here (with the model's EOS, which `min_tokens` masks).
pub(super) fn request_for(
    args: &GenerateArgs,
    generator: &Generator,
    prompt: Vec<u32>,
    tables: Arc<TokenTables>,
) -> Result<Request, String> {
    let sampling = sampling_config(args)?;
    let mut checked = sampling.clone();
    checked.eos_token_ids = Some(generator.tokenizer().vocab().eos_ids().to_vec());
    Sampler::from_config(&checked).map_err(|e| format!("sampling settings: {e}"))?;
    Ok(Request {
        prompt,
        grammar: Some(tables),
        stop_policy: match args.stop_policy {
            StopPolicyArg::Stop => StopPolicy::Stop,
            StopPolicyArg::AllowContinue => StopPolicy::AllowContinue,
            StopPolicyArg::TrailingWhitespaceThenEos => StopPolicy::TrailingWhitespaceThenEos,
        },
        sampling,
        max_tokens: args.max_tokens,
        jump_forward: !args.no_jump_forward,
        logprobs: args.logprobs,
        trace: args.trace.is_some(),
        budget_steering: !args.no_budget_steering,
        reasoning: None,
    })
}
