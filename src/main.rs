//! The `stencil` command line.

mod cli;

// Compiling a grammar allocates many small short-lived objects (regex syntax trees,
// determinization sets): the system allocator was a fifth of compile time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Stack of the thread the command runs on. Schemas and grammars are compiled
/// recursively, one frame group per nesting level; the main thread's 8 MiB hold a
/// few hundred levels, this (reserved, touched only as deep as a grammar goes)
/// holds `--max-nesting`'s largest setting.
const STACK_BYTES: usize = 1 << 30;

fn main() {
    #[cfg(feature = "decode")]
    pin_thread_count();
    let code = std::thread::Builder::new()
        .name("stencil".into())
        .stack_size(STACK_BYTES)
        .spawn(cli::run)
        .map(|command| command.join().unwrap_or(101))
        // No thread of that size (a tight address-space limit): run here.
        .unwrap_or_else(|_| cli::run());
    std::process::exit(code);
}

/// candle asks the OS for the number of cores on every float matrix product
/// (reading `/proc/cpuinfo`: a tenth of a batched decode step) unless
/// `RAYON_NUM_THREADS` is set. Set it once, to what candle would choose, while
/// this is the only thread.
#[cfg(feature = "decode")]
fn pin_thread_count() {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let threads = candle_core::utils::get_num_threads();
        std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    }
}
