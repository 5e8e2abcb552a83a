//! `fscrypt-rs key-status`: is a master key in the filesystem keyring?
//! (FS_IOC_GET_ENCRYPTION_KEY_STATUS, spec §10.8).

use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt_linux::keyring::{self, KeyPresence, KeySpec};

use crate::support::kernel;

/// Arguments of `fscrypt-rs key-status`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Show whether a master key is present in a filesystem's keyring",
    long_about = "Show whether the master key KEY is present, absent or incompletely removed \
                  in the keyring of the filesystem at MOUNTPOINT, and (for v2 keys) how many \
                  users hold it. Exit status 0 whenever the status could be read."
)]
pub struct Args {
    /// Key identifier (32 hex digits) or descriptor (16 hex digits).
    pub key: KeySpec,
    /// Mount point (or any directory) of the filesystem.
    pub mountpoint: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `fscrypt-rs key-status`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json;
    kernel::json_errors(json, || exec_inner(args))
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    match keyring::key_status(&args.mountpoint, args.key) {
        Ok(st) => {
            let word = match st.presence {
                KeyPresence::Absent => "absent",
                KeyPresence::Present => "present",
                KeyPresence::IncompletelyRemoved => "incompletely_removed",
            };
            if args.json {
                kernel::print_json(&serde_json::json!({
                    "ok": true, "key": args.key.to_string(), "status": word,
                    "added_by_self": st.added_by_self, "user_count": st.user_count,
                }))?;
            } else {
                let mut line = match st.presence {
                    KeyPresence::Absent => "Absent".to_string(),
                    KeyPresence::Present => "Present".to_string(),
                    KeyPresence::IncompletelyRemoved => {
                        "Incompletely removed (files still open)".to_string()
                    }
                };
                if matches!(args.key, KeySpec::Identifier(_)) && st.presence != KeyPresence::Absent
                {
                    line.push_str(&format!(
                        " (user count: {}, added by you: {})",
                        st.user_count,
                        if st.added_by_self { "yes" } else { "no" }
                    ));
                }
                kernel::out(format_args!("{line}\n"))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => kernel::fail(args.json, &e),
    }
}
