//! `fscrypt-rs purge MNT`: remove from the kernel the key of every policy
//! in a filesystem's google/fscrypt metadata, as `fscrypt purge` does
//! (`fscrypt_actions::policy::purge`); this parses, confirms and renders.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt_actions::Context;
use fscrypt_actions::keyring::Removal;
use fscrypt_actions::policy::{self, LockOutcome};

use crate::commands::remove_key::{EXIT_FILES_BUSY, EXIT_OTHER_USERS};
use crate::support::gfs::{self, OutputArgs};
use crate::support::kernel;

/// Arguments of `fscrypt-rs purge`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Lock every google/fscrypt-encrypted directory of a filesystem (remove all its \
             policies' keys from the kernel)",
    long_about = "Sync, then remove from the kernel the key of every policy in MOUNTPOINT's \
                  .fscrypt metadata (as `fscrypt purge`): every directory using them is locked. \
                  Asks for confirmation on a terminal; --force skips it (needed when stdin is \
                  not a terminal).\n\nCaveats: only keys of policies in the metadata are removed \
                  (keys added with `add-key` or for vaults stay); a key whose files are still \
                  open is only partly removed until they are closed (run purge again then); \
                  without --all-users (root) only your own claim to a key is removed, so a key \
                  other users added stays; v1 keys in a user keyring leave open files readable \
                  until the kernel's caches are dropped (done when run as root).\n\nExit status: \
                  0 every key removed (or already absent); 3 files still open; 4 other users \
                  still hold a key; 22 not set up; 1 error."
)]
pub struct Args {
    /// The mount point of a filesystem set up with `fscrypt-rs setup`.
    pub mountpoint: PathBuf,
    /// Do not ask for confirmation.
    #[arg(long, short)]
    pub force: bool,
    /// Remove every user's claim to each key (root only).
    #[arg(long)]
    pub all_users: bool,
    /// `--json`, `--quiet`.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Runs `fscrypt-rs purge`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.out.json;
    gfs::report(json, || exec_inner(args))
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    let mnt = &args.mountpoint;
    if !args.force {
        if !std::io::stdin().is_terminal() {
            anyhow::bail!(
                "purge locks every encrypted directory on {}: add --force to confirm",
                mnt.display()
            );
        }
        eprint!(
            "Lock every encrypted directory on {} (remove all its policy keys)? [y/N] ",
            mnt.display()
        );
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)?;
        if !matches!(line.trim(), "y" | "Y" | "yes") {
            anyhow::bail!("nothing purged: answer y to confirm, or add --force");
        }
    }
    let ctx = Context::for_caller();
    let report = policy::purge(&ctx, mnt, args.all_users).map_err(gfs::actions)?;
    let word = |p: &policy::Purged| match &p.outcome {
        Ok(LockOutcome::AlreadyLocked) => "already_locked",
        Ok(LockOutcome::Removed(Removal::Removed)) => "removed",
        Ok(LockOutcome::Removed(Removal::FilesBusy | Removal::UserKeyringCachesKept)) => {
            "incompletely_removed"
        }
        Ok(LockOutcome::Removed(Removal::OtherUsers)) => "other_users",
        Err(_) => "error",
    };
    let words: Vec<&str> = report.iter().map(word).collect();
    let code = if words.contains(&"error") {
        ExitCode::FAILURE
    } else if words.contains(&"incompletely_removed") {
        ExitCode::from(EXIT_FILES_BUSY)
    } else if words.contains(&"other_users") {
        ExitCode::from(EXIT_OTHER_USERS)
    } else {
        ExitCode::SUCCESS
    };
    if args.out.json {
        let list: Vec<serde_json::Value> = report
            .iter()
            .zip(&words)
            .map(|(p, w)| {
                serde_json::json!({
                    "policy": p.descriptor,
                    "outcome": w,
                    "error": p.outcome.as_ref().err(),
                })
            })
            .collect();
        kernel::print_json(&serde_json::json!({
            "ok": code == ExitCode::SUCCESS,
            "mountpoint": mnt.display().to_string(),
            "policies": list,
        }))?;
        return Ok(code);
    }
    for (p, w) in report.iter().zip(&words) {
        let line = match (w, &p.outcome) {
            (_, Err(e)) => format!("policy {}: not purged: {e}", p.descriptor),
            (&"incompletely_removed", _) => format!(
                "policy {}: files are still open (incompletely removed); close them and run `fscrypt-rs purge {} --force` again",
                p.descriptor,
                mnt.display()
            ),
            (&"other_users", _) => format!(
                "policy {}: your claim was removed, other users still hold the key (as root: add --all-users)",
                p.descriptor
            ),
            _ => continue,
        };
        eprintln!("fscrypt-rs: {line}");
    }
    if !args.out.quiet {
        let removed = words.iter().filter(|w| **w == "removed").count();
        let already = words.iter().filter(|w| **w == "already_locked").count();
        println!(
            "Policies purged for {}: {removed} keys removed, {already} already absent, {} of {} policies not fully locked.",
            mnt.display(),
            report.len() - removed - already,
            report.len()
        );
    }
    Ok(code)
}
