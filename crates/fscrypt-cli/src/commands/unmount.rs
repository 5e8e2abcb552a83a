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

use anyhow::Context;

use super::mount::mount_count;

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
///
/// # Errors
/// The unmount failed (the last error), or /proc could not be read.
pub fn unmount_and_wait(mountpoint: &Path) -> anyhow::Result<()> {
    let absolute =
        std::path::absolute(mountpoint).with_context(|| format!("{}", mountpoint.display()))?;
    let mountpoint = std::fs::canonicalize(&absolute).unwrap_or(absolute);
    let daemons = daemons_serving(&mountpoint);
    let start = Instant::now();
    loop {
        match fscrypt_fuse::unmount(&mountpoint) {
            Ok(()) => break,
            Err(e) => {
                if start.elapsed() > BUSY_RETRY || mount_count(&mountpoint)? == 0 {
                    return Err(e).with_context(|| format!("unmounting {}", mountpoint.display()));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
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

/// The pids of `fscrypt-rs mount … --foreground` processes (the daemons
/// `fscrypt-rs mount` starts, or foreground mounts) whose mount point is
/// `mountpoint`, found through /proc. Processes that cannot be read
/// (another user's, already gone) are skipped.
fn daemons_serving(mountpoint: &Path) -> Vec<u32> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids = Vec::new();
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let argv: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let is_ours = argv.first().is_some_and(|a0| {
            let name = a0.rsplit(|&b| b == b'/').next().unwrap_or(a0);
            name.windows(10).any(|w| w == b"fscrypt-rs")
        });
        if !is_ours || argv.get(1) != Some(&&b"mount"[..]) {
            continue;
        }
        if !argv.iter().any(|a| *a == b"--foreground" || *a == b"-f") {
            continue;
        }
        // `mount CIPHERDIR MOUNTPOINT …`: the daemons we start use this
        // order with absolute paths; a relative one is taken from its cwd.
        let Some(mp) = argv.get(3) else { continue };
        let Ok(mp) = std::str::from_utf8(mp) else {
            continue;
        };
        let mp = Path::new(mp);
        let mp = if mp.is_absolute() {
            mp.to_path_buf()
        } else {
            match std::fs::read_link(format!("/proc/{pid}/cwd")) {
                Ok(cwd) => cwd.join(mp),
                Err(_) => continue,
            }
        };
        if mp == mountpoint || std::fs::canonicalize(&mp).is_ok_and(|c| c == mountpoint) {
            pids.push(pid);
        }
    }
    pids
}
