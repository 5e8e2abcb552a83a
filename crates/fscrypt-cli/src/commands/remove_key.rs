//! `fscrypt-rs remove-key`: remove a master key from a filesystem's keyring
//! (FS_IOC_REMOVE_ENCRYPTION_KEY[_ALL_USERS], spec §10.7).

use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt_linux::keyring::{self, KeySpec, RemovalOutcome};

use crate::support::kernel;

/// Exit code when the key was removed but files are still open.
pub const EXIT_FILES_BUSY: u8 = 3;
/// Exit code when other users still hold the key.
pub const EXIT_OTHER_USERS: u8 = 4;

/// Arguments of `fscrypt-rs remove-key`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Remove a master key from a filesystem's keyring",
    long_about = "Remove a master key (by identifier or v1 descriptor) from the keyring of the \
                  filesystem at MOUNTPOINT.\n\nExit status: 0 removed; 3 removed, but files \
                  using it are still open (incompletely removed: close them and run this \
                  again); 4 only your claim was removed, other users still hold the key; \
                  1 error."
)]
pub struct Args {
    /// Key identifier (32 hex digits) or descriptor (16 hex digits).
    pub key: KeySpec,
    /// Mount point (or any directory) of the filesystem.
    pub mountpoint: PathBuf,
    /// Remove every user's claim (root only).
    #[arg(long)]
    pub all_users: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `fscrypt-rs remove-key`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json;
    kernel::json_errors(json, || exec_inner(args))
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    match keyring::remove_key(&args.mountpoint, args.key, args.all_users) {
        Ok(outcome) => {
            let (word, text, code) = match outcome {
                RemovalOutcome::Removed => ("removed", "removed".to_string(), 0),
                RemovalOutcome::FilesBusy => (
                    "incompletely_removed",
                    "removed, but files still open (incompletely removed)".to_string(),
                    EXIT_FILES_BUSY,
                ),
                RemovalOutcome::OtherUsers => (
                    "other_users",
                    "your claim was removed; other users still hold it".to_string(),
                    EXIT_OTHER_USERS,
                ),
            };
            if args.json {
                kernel::print_json(&serde_json::json!({
                    "ok": true, "key": args.key.to_string(), "outcome": word,
                }))?;
            } else {
                kernel::out(format_args!("{}: {text}\n", args.key))?;
            }
            Ok(ExitCode::from(code))
        }
        Err(e) => kernel::fail(args.json, &e),
    }
}
