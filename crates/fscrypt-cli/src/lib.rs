//! The part of `fscrypt-cli` both of its binaries share: `fscrypt-rs`
//! (`src/main.rs`) and `fscrypt-rs-bench` (`src/bin/fscrypt-rs-bench.rs`,
//! the same `bench` command with a counting allocator installed).
//!
//! | module | what |
//! | --- | --- |
//! | [`commands::bench`] | `fscrypt-rs bench`: its arguments, the run, the table and JSON output |
//!
//! Everything else of the CLI lives in the `fscrypt-rs` binary
//! (`commands/`, `support/`).

/// Subcommands shared by both binaries (`src/commands/`, where the
/// `fscrypt-rs` binary keeps the others).
pub mod commands {
    pub mod bench;
}
