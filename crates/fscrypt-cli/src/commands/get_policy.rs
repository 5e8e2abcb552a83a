//! `fscrypt-rs get-policy`: show the encryption policy of a file or
//! directory (FS_IOC_GET_ENCRYPTION_POLICY_EX, spec §10.3).

use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt_linux::policy;

use crate::support::kernel;

/// Arguments of `fscrypt-rs get-policy`.
#[derive(clap::Args, Debug)]
#[command(about = "Show the encryption policy of an encrypted file or directory")]
pub struct Args {
    /// The file or directory.
    pub path: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `fscrypt-rs get-policy`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json;
    kernel::json_errors(json, || exec_inner(args))
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    match policy::get_policy(&args.path) {
        Ok(p) => {
            if args.json {
                let mut v = kernel::policy_json(&p);
                v["ok"] = true.into();
                kernel::print_json(&v)?;
            } else {
                kernel::out(format_args!("{}", kernel::policy_text(&p)))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => kernel::fail(args.json, &e),
    }
}
