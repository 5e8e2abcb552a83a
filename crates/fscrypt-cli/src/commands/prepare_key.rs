//! `fscrypt-rs prepare-key`: convert a long-term wrapped key into the
//! ephemerally-wrapped form `add-key --hw-wrapped` takes
//! (BLKCRYPTOPREPAREKEY, spec §4.6).

use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt_linux::blkcrypto;

use crate::support::kernel;

/// Arguments of `fscrypt-rs prepare-key`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Prepare a long-term wrapped key for use (ephemerally-wrapped key out)",
    long_about = "Read a long-term wrapped key (stdin or --key-file) and convert it with the \
                  inline-encryption hardware of DEVICE (BLKCRYPTOPREPAREKEY) into the \
                  ephemerally-wrapped form, written to --out (0600) or stdout; pass that to \
                  `add-key --hw-wrapped`."
)]
pub struct Args {
    /// The block device.
    pub device: PathBuf,
    /// Read the long-term wrapped key from this file instead of stdin.
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Write the prepared key here (0600) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print JSON (the blob as hex).
    #[arg(long)]
    pub json: bool,
}

/// Runs `fscrypt-rs prepare-key`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json;
    kernel::json_errors(json, || exec_inner(args))
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    let lt = kernel::read_key(args.key_file.as_deref(), "a wrapped key")?;
    match blkcrypto::prepare_key(&args.device, &lt) {
        Ok(blob) => super::generate_key::emit(&blob, args.out.as_deref(), args.json),
        Err(e) => kernel::fail(args.json, &e),
    }
}
