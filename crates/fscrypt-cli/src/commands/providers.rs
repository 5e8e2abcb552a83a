//! `fscrypt-rs providers`: the crypto provider registry as a table.

use std::process::ExitCode;

/// Arguments of `fscrypt-rs providers`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print machine-readable JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs `fscrypt-rs providers`.
pub fn exec(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("the provider registry is not built yet (issue 2)")
}
