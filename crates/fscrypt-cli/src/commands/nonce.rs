//! `fscrypt-rs nonce`: the 16-byte nonce of an encrypted inode
//! (FS_IOC_GET_ENCRYPTION_NONCE, spec §10.4).

use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt_linux::policy;

use crate::support::kernel;

/// Arguments of `fscrypt-rs nonce`.
#[derive(clap::Args, Debug)]
#[command(about = "Print the 16-byte encryption nonce of an encrypted file or directory (hex)")]
pub struct Args {
    /// The file or directory.
    pub path: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `fscrypt-rs nonce`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json;
    kernel::json_errors(json, || exec_inner(args))
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    match policy::get_nonce(&args.path) {
        Ok(n) => {
            let h = hex::encode(n);
            if args.json {
                kernel::print_json(&serde_json::json!({ "ok": true, "nonce": h }))?;
            } else {
                kernel::out(format_args!("{h}\n"))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => kernel::fail(args.json, &e),
    }
}
