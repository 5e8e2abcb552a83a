//! `fscrypt-rs generate-key`: let the inline-encryption hardware create a
//! key, output in long-term wrapped form (BLKCRYPTOGENERATEKEY, spec §4.6).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use fscrypt_linux::blkcrypto;

use crate::support::kernel;

/// Arguments of `fscrypt-rs generate-key`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Generate a hardware-wrapped key on a block device (long-term wrapped key out)",
    long_about = "Ask the inline-encryption hardware of DEVICE to generate a key \
                  (BLKCRYPTOGENERATEKEY) and write it in long-term wrapped form to --out \
                  (0600) or stdout."
)]
pub struct Args {
    /// The block device.
    pub device: PathBuf,
    /// Write the wrapped key here (0600) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Print JSON (the blob as hex).
    #[arg(long)]
    pub json: bool,
}

/// Write a key blob: JSON (hex), a 0600 file, or raw bytes on stdout.
pub fn emit(blob: &[u8], out: Option<&Path>, json: bool) -> anyhow::Result<ExitCode> {
    if let Some(p) = out {
        kernel::write_private_file(p, blob)?;
    }
    if json {
        let mut v = serde_json::json!({ "ok": true, "size": blob.len() });
        if out.is_none() {
            v["key"] = hex::encode(blob).into();
        }
        kernel::print_json(&v)?;
    } else if out.is_none() {
        std::io::stdout().lock().write_all(blob)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `fscrypt-rs generate-key`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json;
    kernel::json_errors(json, || exec_inner(args))
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    match blkcrypto::generate_key(&args.device) {
        Ok(blob) => emit(&blob, args.out.as_deref(), args.json),
        Err(e) => kernel::fail(args.json, &e),
    }
}
