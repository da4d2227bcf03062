//! `stencil serve [--model PATH] [--host 127.0.0.1] [--port 8080] [--max-batch N]
//! [--max-queue N] [--api-key KEY] [--ctx N]`: the OpenAI-compatible server
//! ([`stencil::serve`]) over the built-in default model unless `--model` names one.

use std::path::PathBuf;

use clap::Args;

use stencil::frontend::tool_calls::ToolCallFormat;
use stencil::serve::{serve, ServeOptions};

use crate::cli::generate::load_generator;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// GGUF file or safetensors folder; the built-in default model when absent.
    #[arg(long, value_name = "PATH")]
    model: Option<PathBuf>,
    /// tokenizer.json to use instead of the one beside the model or in the GGUF.
    #[arg(long, value_name = "FILE")]
    tokenizer: Option<PathBuf>,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: String,
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Requests decoded at once.
    #[arg(long, default_value_t = 16)]
    max_batch: usize,
    /// Requests that may wait for the batch; past it, 429 with Retry-After.
    #[arg(long, default_value_t = 256)]
    max_queue: usize,
    /// Require `Authorization: Bearer KEY` on /v1 and /metrics (also from
    /// STENCIL_API_KEY).
    #[arg(long, env = "STENCIL_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Tokens of prompt plus output per request.
    #[arg(long, default_value_t = 4096)]
    ctx: usize,
    /// The model name answers carry (default: the model file's name).
    #[arg(long)]
    model_name: Option<String>,
    /// Largest request body in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    body_limit: usize,
    /// Most prompt tokens a request feeds per step (a long prompt joins the
    /// running batch in chunks).
    #[arg(long, default_value_t = 64)]
    prefill_chunk: usize,
    /// MiB of recent prompts' key/value rows kept, so a prompt that begins like
    /// an earlier one (the system turn, the tool list) feeds only the rest; 0
    /// keeps none.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    prompt_cache_mb: usize,
    /// Tool-call format instead of the chat template's: hermes, qwen-xml, glm,
    /// seed-oss, minimax, deepseek-dsml, deepseek-v4, deepseek-v3, deepseek-r1,
    /// kimi-k2, llama3-json, mistral-nemo, mistral-args, mistral-call-id, pythonic, gemma4,
    /// cohere, harmony, kimi-k3, nemotron-nano-v2, apriel, minicpm, firefunction,
    /// gigachat3, gigachat3.1, functionary-v3.1, apertus, functionary-v3.2,
    /// minimax-m3, command-r-plus, muse-glimmer.
    #[arg(long)]
    tool_format: Option<String>,
}

pub fn run(args: &ServeArgs) -> i32 {
    let tool_format = match args.tool_format.as_deref().map(ToolCallFormat::by_name) {
        Some(None) => {
            eprintln!(
                "error: unknown --tool-format {:?} (one of: {})",
                args.tool_format.as_deref().unwrap_or_default(),
                ToolCallFormat::NAMES.join(", ")
            );
            return 2;
        }
        Some(Some(f)) => Some(f),
        None => None,
    };
    let generator = match load_generator(
        args.model.as_deref(),
        args.tokenizer.as_deref(),
        &args.device,
    ) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let model_name = args.model_name.clone().unwrap_or_else(|| {
        generator
            .model()
            .path()
            .file_stem()
            .map_or("stencil".into(), |s| s.to_string_lossy().into_owned())
    });
    let options = ServeOptions {
        host: args.host.clone(),
        port: args.port,
        max_batch: args.max_batch,
        max_queue: args.max_queue,
        api_key: args.api_key.clone(),
        ctx: args.ctx,
        model_name,
        body_limit: args.body_limit,
        tool_format,
        prefill_chunk: args.prefill_chunk,
        prompt_cache_bytes: args.prompt_cache_mb.saturating_mul(1 << 20),
    };
    match serve(generator, options) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}
