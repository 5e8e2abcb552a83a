//! `fscrypt-rs lock DIR`: remove a directory's key from the filesystem
//! keyring; when files are still open, say which.

use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt_actions::Context;
use fscrypt_actions::keyring::Removal;
use fscrypt_actions::policy::{self, LockOutcome};

use crate::commands::remove_key::{EXIT_FILES_BUSY, EXIT_OTHER_USERS};
use crate::support::gfs::{self, OutputArgs};
use crate::support::kernel;

/// Arguments of `fscrypt-rs lock`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Lock an encrypted directory (remove its key from the filesystem keyring)",
    long_about = "Remove DIR's key from its filesystem's keyring (google/fscrypt style, works on \
                  directories unlocked by `fscrypt unlock` with v2 policies). When files under \
                  it are still open, the key is only partly removed: the open files are listed; \
                  close them and run lock again.\n\nExit status: 0 locked (or already); 3 files \
                  still open; 4 other users still hold the key (use --all-users as root); 1 error."
)]
pub struct Args {
    /// An encrypted directory.
    pub dir: PathBuf,
    /// Remove every user's claim to the key (root only).
    #[arg(long)]
    pub all_users: bool,
    /// `--json`, `--quiet`.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Runs `fscrypt-rs lock`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.out.json;
    gfs::report(json, || exec_inner(args))
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    let dir = &args.dir;
    let ctx = Context::for_caller();
    let report = policy::lock(&ctx, dir, args.all_users).map_err(gfs::actions)?;
    let print = |word: &str, text: String, files: &[String]| -> anyhow::Result<()> {
        if args.out.json {
            kernel::print_json(&serde_json::json!({
                "ok": true, "dir": dir.display().to_string(), "policy": report.descriptor,
                "outcome": word, "open_files": files,
            }))?;
        } else if !args.out.quiet || word == "incompletely_removed" {
            println!("{text}");
            for f in files {
                println!("  still open: {f}");
            }
        }
        Ok(())
    };
    let files = &report.open_files;
    match report.outcome {
        LockOutcome::AlreadyLocked => {
            print(
                "already_locked",
                format!("{} is already locked.", dir.display()),
                &[],
            )?;
            Ok(ExitCode::SUCCESS)
        }
        LockOutcome::Removed(Removal::Removed) => {
            print("removed", format!("{} is now locked.", dir.display()), &[])?;
            Ok(ExitCode::SUCCESS)
        }
        // A user-keyring key (google/fscrypt's v1 default): open files
        // keep their keys until their inodes go; dropping the caches needs
        // root.
        LockOutcome::Removed(Removal::UserKeyringCachesKept) => {
            print(
                "incompletely_removed",
                format!(
                    "{}: the key is removed from your user keyring, but files already opened stay \
                     readable until the kernel's caches are dropped (as root: `fscrypt-rs lock {}`, \
                     or `echo 2 > /proc/sys/vm/drop_caches`)",
                    dir.display(),
                    dir.display()
                ),
                files,
            )?;
            Ok(ExitCode::from(EXIT_FILES_BUSY))
        }
        LockOutcome::Removed(Removal::FilesBusy) => {
            print(
                "incompletely_removed",
                format!(
                    "{}: the key is removed, but files are still open (incompletely removed); \
                     close them and run `fscrypt-rs lock {}` again",
                    dir.display(),
                    dir.display()
                ),
                files,
            )?;
            Ok(ExitCode::from(EXIT_FILES_BUSY))
        }
        LockOutcome::Removed(Removal::OtherUsers) => {
            print(
                "other_users",
                format!(
                    "{}: your claim to the key was removed, but other users still hold it \
                     (as root: `fscrypt-rs lock --all-users {}`)",
                    dir.display(),
                    dir.display()
                ),
                &[],
            )?;
            Ok(ExitCode::from(EXIT_OTHER_USERS))
        }
    }
}
