//! Command-line front door: argument parsing and one file per subcommand.
//!
//! Exit codes follow one convention everywhere: 0 yes, 1 no (the input does not
//! match), 2 the request itself is wrong (bad grammar, unreadable file, bad flags).

mod check;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "stencil", version, about = "Grammar-constrained structured output")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Does the input match the grammar, and where does it fail?
    Check(check::CheckArgs),
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
    match cli.command {
        Command::Check(args) => check::run(&args),
    }
}
