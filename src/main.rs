//! The `stencil` command line.

mod cli;

// Compiling a grammar allocates many small short-lived objects (regex syntax trees,
// determinization sets): the system allocator was a fifth of compile time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(cli::run());
}
