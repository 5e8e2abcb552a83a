//! `fscrypt-rs unmount MOUNTPOINT`: unmount a vault mounted with
//! `fscrypt-rs mount`, then wait until the daemon that served it has
//! exited. Logic: `fscrypt_fuse::unmount`.
//!
//! Why wait: a FUSE daemon that is unmounted from outside still runs its
//! own clean-up afterwards, and fuser 0.18's session clean-up may unmount
//! the mount point *by path* once more (its poll-based "still mounted?"
//! check in `mnt/fuse_pure.rs` also answers yes for a severed connection).
//! A vault mounted again at the same path in that window could be
//! unmounted by the old daemon. Returning only once the old daemon is gone
//! closes the window; it also means the backing files are closed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::bail;

use super::mount::mount_count;
use crate::support::mounts;

/// How long `unmount` retries while the kernel reports the mount busy
/// (e.g. a file just closed by a process that is still exiting).
const BUSY_RETRY: Duration = Duration::from_secs(3);
/// How long `unmount` waits for the serving daemon to exit.
const DAEMON_EXIT: Duration = Duration::from_secs(30);

/// Arguments of `fscrypt-rs unmount`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The mount point to unmount.
    pub mountpoint: PathBuf,
}

/// Runs `fscrypt-rs unmount`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    unmount_and_wait(&args.mountpoint)?;
    Ok(ExitCode::SUCCESS)
}

/// Unmounts `mountpoint` (retrying for up to 3 s while it is busy), then
/// waits up to 30 s for the `fscrypt-rs mount` daemons serving it to exit.
/// A dead mount (its daemon gone) is cleared, saying so.
///
/// # Errors
/// A missing path, nothing mounted there, a mount that is not ours (one
/// line each, naming the command that lists the mounts), or the
/// unmount failed (the last error, naming the processes that keep it busy).
pub fn unmount_and_wait(mountpoint: &Path) -> anyhow::Result<()> {
    let mountpoint = mounts::absolute(mountpoint);
    let Some(top) = mounts::mount_at(&mountpoint) else {
        if let Err(e) = mountpoint.symlink_metadata()
            && e.kind() == std::io::ErrorKind::NotFound
        {
            bail!(
                "{} does not exist: give the directory a vault is mounted on (`findmnt -t {}` lists them)",
                mountpoint.display(),
                mounts::FS_TYPE
            );
        }
        bail!(
            "{} is not mounted (`findmnt -t {}` lists the fscrypt-rs mounts)",
            mountpoint.display(),
            mounts::FS_TYPE
        );
    };
    if top.fs_type != mounts::FS_TYPE {
        bail!(
            "{} is not a fscrypt-rs mount ({} {}): unmount it with umount",
            mountpoint.display(),
            top.fs_type,
            top.source
        );
    }
    let dead = mounts::is_dead_mount(&mountpoint);
    let daemons: Vec<u32> = mounts::daemons()
        .into_iter()
        .filter(|d| d.mountpoint == mountpoint)
        .map(|d| d.pid)
        .collect();
    let start = Instant::now();
    loop {
        match fscrypt_fuse::unmount(&mountpoint) {
            Ok(()) => break,
            Err(e) => {
                if start.elapsed() > BUSY_RETRY || mount_count(&mountpoint)? == 0 {
                    let reason = match e {
                        fscrypt_fuse::Error::Mount(reason) => reason,
                        other => other.to_string(),
                    };
                    bail!("unmounting {}: {reason}", mountpoint.display());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    if dead {
        eprintln!(
            "fscrypt-rs: cleared the dead mount {} (its daemon had gone)",
            mountpoint.display()
        );
    }
    let start = Instant::now();
    for pid in daemons {
        while running(pid) {
            if start.elapsed() > DAEMON_EXIT {
                eprintln!("fscrypt-rs: warning: the mount daemon (pid {pid}) has not exited");
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    Ok(())
}

/// True while process `pid` exists and is not a zombie.
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}
