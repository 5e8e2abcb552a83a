//! `fscrypt-rs unmount MOUNTPOINT`: unmount a vault mounted with
//! `fscrypt-rs mount` (the daemon then exits). Logic: `fscrypt_fuse::unmount`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

/// Arguments of `fscrypt-rs unmount`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The mount point to unmount.
    pub mountpoint: PathBuf,
}

/// Runs `fscrypt-rs unmount`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    fscrypt_fuse::unmount(&args.mountpoint)
        .with_context(|| format!("unmounting {}", args.mountpoint.display()))?;
    Ok(ExitCode::SUCCESS)
}
