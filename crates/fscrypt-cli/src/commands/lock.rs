//! `fscrypt-rs lock DIR`: remove a directory's key from the filesystem
//! keyring; when files are still open, say which.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use fscrypt::Policy;
use fscrypt_linux::keyring::{self, KeyPresence, RemovalOutcome};

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

/// Open files under `dir`: `/proc/PID/fd/*` links pointing below it (at
/// most 20; those of processes we may not inspect are missed).
fn open_files(dir: &Path) -> Vec<String> {
    let Ok(dir) = std::fs::canonicalize(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let pid = p.file_name();
        if !pid.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path())
                && target.starts_with(&dir)
            {
                out.push(format!(
                    "{} (pid {})",
                    target.display(),
                    pid.to_string_lossy()
                ));
                if out.len() >= 20 {
                    return out;
                }
            }
        }
    }
    out
}

/// Evicts unused dentries and inodes (`/proc/sys/vm/drop_caches` = 2)
/// after a sync: whether it could (root).
fn drop_caches() -> bool {
    rustix::fs::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "2\n").is_ok()
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    let dir = &args.dir;
    let Some(kpolicy) = gfs::dir_policy(dir)? else {
        anyhow::bail!("{} is not encrypted", dir.display());
    };
    let mount = gfs::mount_of(dir)?;
    let (descriptor, spec) = gfs::policy_key_spec(&kpolicy);
    let print = |word: &str, text: String, files: &[String]| -> anyhow::Result<()> {
        if args.out.json {
            kernel::print_json(&serde_json::json!({
                "ok": true, "dir": dir.display().to_string(), "policy": descriptor,
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
    if gfs::key_presence(&mount, &kpolicy) == Some(KeyPresence::Absent) {
        print(
            "already_locked",
            format!("{} is already locked.", dir.display()),
            &[],
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    // Write back dirty data while the key is still there.
    rustix::fs::sync();
    if let Policy::V1(p1) = &kpolicy
        && keyring::user::remove(&gfs::fs_type(&mount), p1.master_key_descriptor)?
    {
        // A user-keyring key (google/fscrypt's v1 default): open files keep
        // their keys until their inodes go, so drop the caches, as
        // google/fscrypt does (root only).
        return if drop_caches() {
            print("removed", format!("{} is now locked.", dir.display()), &[])?;
            Ok(ExitCode::SUCCESS)
        } else {
            print(
                "incompletely_removed",
                format!(
                    "{}: the key is removed from your user keyring, but files already opened stay \
                     readable until the kernel's caches are dropped (as root: `fscrypt-rs lock {}`, \
                     or `echo 2 > /proc/sys/vm/drop_caches`)",
                    dir.display(),
                    dir.display()
                ),
                &open_files(dir),
            )?;
            Ok(ExitCode::from(EXIT_FILES_BUSY))
        };
    }
    match keyring::remove_key(&mount, spec, args.all_users)? {
        RemovalOutcome::Removed => {
            print("removed", format!("{} is now locked.", dir.display()), &[])?;
            Ok(ExitCode::SUCCESS)
        }
        RemovalOutcome::FilesBusy => {
            let files = open_files(dir);
            print(
                "incompletely_removed",
                format!(
                    "{}: the key is removed, but files are still open (incompletely removed); \
                     close them and run `fscrypt-rs lock {}` again",
                    dir.display(),
                    dir.display()
                ),
                &files,
            )?;
            Ok(ExitCode::from(EXIT_FILES_BUSY))
        }
        RemovalOutcome::OtherUsers => {
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
