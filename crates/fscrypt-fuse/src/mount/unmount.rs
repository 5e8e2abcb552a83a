//! Unmounting a mount of this crate (or a dead one): umount(2) as root,
//! `fusermount3 -u` otherwise, with one-line reasons.

use std::path::Path;

use crate::error::{Error, Result};

/// Unmounts a vault mounted at `mountpoint` (as root with umount(2), else
/// with `fusermount3 -u`). Works on a dead mount too (its daemon gone).
///
/// # Errors
/// [`Error::Mount`] with the reason in one line: busy (naming the processes
/// that keep it busy), not mounted, or fusermount3's own message.
pub fn unmount(mountpoint: &Path) -> Result<()> {
    try_unmount(mountpoint).map_err(|refusal| match refusal {
        Refusal::Busy => Error::Mount(crate::busy::describe(mountpoint)),
        Refusal::Other(e) => e,
    })
}

/// Why [`try_unmount`] did not unmount.
pub(super) enum Refusal {
    /// The mount is in use (EBUSY, or fusermount3 said so).
    Busy,
    /// Anything else, with its one-line reason.
    Other(Error),
}

/// [`unmount`], telling a busy mount apart (for a caller that may wait).
pub(super) fn try_unmount(mountpoint: &Path) -> std::result::Result<(), Refusal> {
    if rustix::process::geteuid().is_root() {
        // Never through a symlink put where the mount point was.
        match rustix::mount::unmount(mountpoint, rustix::mount::UnmountFlags::NOFOLLOW) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::BUSY) => return Err(Refusal::Busy),
            Err(rustix::io::Errno::INVAL) => {
                return Err(Refusal::Other(Error::Mount(format!(
                    "{} is not a mount point",
                    mountpoint.display()
                ))));
            }
            // Fall back to fusermount3 (e.g. a mount of another namespace).
            Err(_) => {}
        }
    }
    let bin = super::fusermount::find()
        .map(|p| p.into_os_string())
        .unwrap_or_else(|_| "fusermount3".into());
    let out = std::process::Command::new(&bin)
        .arg("-u")
        .arg("--")
        .arg(mountpoint)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            Refusal::Other(Error::Mount(format!(
                "running {}: {e}",
                bin.to_string_lossy()
            )))
        })?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let reason = stderr.trim();
    if reason.contains("busy") {
        return Err(Refusal::Busy);
    }
    Err(Refusal::Other(Error::Mount(
        if reason.contains("not found in /etc/mtab") {
            format!(
                "{} is not mounted by this user (fusermount3 unmounts only its caller's mounts)",
                mountpoint.display()
            )
        } else {
            reason.lines().next().unwrap_or(reason).to_owned()
        },
    )))
}
