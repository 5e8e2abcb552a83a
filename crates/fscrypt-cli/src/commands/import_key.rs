//! `fscrypt-rs import-key`: turn a raw key into a long-term wrapped key with
//! the block device's inline-encryption hardware (BLKCRYPTOIMPORTKEY,
//! spec §4.6).

use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt_linux::blkcrypto;

use crate::support::kernel;

/// Arguments of `fscrypt-rs import-key`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Import a raw key into inline-encryption hardware (long-term wrapped key out)",
    long_about = "Import a raw key (stdin or --key-file, never argv) into the inline-encryption \
                  hardware of block device DEVICE (BLKCRYPTOIMPORTKEY) and write the long-term \
                  wrapped key to --out (mode 0600) or stdout. Needs hardware that supports \
                  wrapped keys; elsewhere the kernel refuses and this says so."
)]
pub struct Args {
    /// The block device.
    pub device: PathBuf,
    /// Read the raw key from this file instead of stdin.
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Write the wrapped key here (0600) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print JSON (the blob as hex).
    #[arg(long)]
    pub json: bool,
}

/// Runs `fscrypt-rs import-key`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json;
    kernel::json_errors(json, || exec_inner(args))
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    let key = kernel::read_key(args.key_file.as_deref(), "a raw key")?;
    match blkcrypto::import_key(&args.device, &key) {
        Ok(blob) => super::generate_key::emit(&blob, args.out.as_deref(), args.json),
        Err(e) => kernel::fail(args.json, &e),
    }
}
