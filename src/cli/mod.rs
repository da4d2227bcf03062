//! Command-line front door: argument parsing and one file per subcommand.
//!
//! Exit codes follow one convention everywhere: 0 yes, 1 no (the input does not
//! match), 2 the request itself is wrong (bad grammar, unreadable file, bad flags).

mod bench;
#[cfg(feature = "decode")]
mod bench_decode;
mod check;
mod engine;
#[cfg(feature = "decode")]
mod generate;
mod grammar;
mod memory;
#[cfg(feature = "peers")]
mod peers;
#[cfg(feature = "serve")]
mod serve;
mod tally;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "stencil",
    version,
    about = "Grammar-constrained structured output"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Keep the allocator's and the kernel's memory defaults (huge pages,
    /// returning freed memory, no pre-faulted heap for `bench`): see
    /// `memory.rs` for why the CLI changes them.
    #[arg(long, global = true)]
    allocator_defaults: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Does the input match the grammar, and where does it fail?
    Check(check::CheckArgs),
    /// Time-to-first-mask and time-between-masks, side by side with peer engines.
    Bench(bench::BenchArgs),
    /// One sampling step from a JSON logits row and a JSON config.
    Sample(stencil::sampling::cli::SampleArgs),
    /// Grammar-constrained generation with a real model (the default: SmolLM2-135M).
    #[cfg(feature = "decode")]
    Generate(Box<generate::GenerateArgs>),
    /// Decode tokens/s: unconstrained vs constrained vs jump-forward, same run.
    #[cfg(feature = "decode")]
    BenchDecode(bench_decode::BenchDecodeArgs),
    /// An OpenAI-compatible server (chat, completions, responses, tools).
    #[cfg(feature = "serve")]
    Serve(serve::ServeArgs),
}

impl Command {
    fn is_server(&self) -> bool {
        #[cfg(feature = "serve")]
        if let Command::Serve(_) = self {
            return true;
        }
        false
    }
}

pub fn run() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    // A server keeps the allocator's defaults: after a burst its memory must go
    // back to its idle level, which matters more there than a first-touch fault.
    if !cli.allocator_defaults && !cli.command.is_server() {
        let prefault = match cli.command {
            Command::Bench(_) => memory::BENCH_PREFAULT_BYTES,
            _ => 0,
        };
        memory::prefer_latency(prefault);
    }
    match cli.command {
        Command::Check(args) => check::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Sample(args) => stencil::sampling::cli::run_to_exit_code(&args),
        #[cfg(feature = "decode")]
        Command::Generate(args) => generate::run(&args),
        #[cfg(feature = "decode")]
        Command::BenchDecode(args) => bench_decode::run(&args),
        #[cfg(feature = "serve")]
        Command::Serve(args) => serve::run(&args),
    }
}
