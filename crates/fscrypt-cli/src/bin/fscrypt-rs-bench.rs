//! `fscrypt-rs-bench`: `fscrypt-rs bench` with heap allocations counted.
//!
//! The counting allocator (`stats_alloc` over the system allocator) is
//! installed in this binary only, so the `fscrypt-rs` binary, which is also
//! the mount daemon, never pays for it. `fscrypt-rs bench` hands over to this
//! binary when it is installed beside it; both take the same arguments.

use std::process::ExitCode;

use clap::Parser;

// The same command module as `fscrypt-rs bench`, from the crate's library
// target (its `exec`, which hands over to this binary, is unused here).
use fscrypt_cli::commands::bench;

/// Every allocation and reallocation of this process is counted.
#[global_allocator]
static GLOBAL: &stats_alloc::StatsAlloc<std::alloc::System> = &stats_alloc::INSTRUMENTED_SYSTEM;

/// Heap allocations plus reallocations made by this process so far.
fn allocations() -> Option<u64> {
    let s = GLOBAL.stats();
    Some((s.allocations + s.reallocations) as u64)
}

/// `fscrypt-rs bench` with allocation counts.
#[derive(Parser, Debug)]
#[command(name = "fscrypt-rs-bench", version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    args: bench::Args,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match bench::run(cli.args, Some(allocations)) {
        Ok(code) => code,
        Err(err) => {
            if let Some(io) = err.downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::BrokenPipe
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("fscrypt-rs-bench: {err:#}");
            ExitCode::FAILURE
        }
    }
}
