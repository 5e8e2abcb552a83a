//! The read-ahead of a fresh FUSE mount, raised to one request's size.

use std::path::Path;

use crate::ops::MAX_REQUEST;

/// Raises the read-ahead of the FUSE mount just made at `mountpoint`
/// (canonical) from the 128 KiB every new FUSE superblock starts with to
/// what one READ may carry (`MAX_REQUEST`, 1 MiB), through the
/// mount's own bdi, `/sys/class/bdi/MAJ:MIN/read_ahead_kb` (as `blockdev
/// --setra` does for a disk): nothing but this mount changes.
/// The 128 KiB default also caps the `max_readahead` INIT may ask for, so
/// it is raised after INIT (which would lower it again). Sequential reads
/// then reach the daemon as 1 MiB READs, a round trip per MiB instead of
/// per 128 KiB: a cold 1 GiB read 1,550-1,650 -> 1,850-2,020 MB/s on the
/// test VM, random 4 KiB reads unchanged (bench/RESULTS.md).
///
/// Needs root (sysfs); without it, or when the mount is not found in
/// /proc/self/mountinfo, the default stays (one debug line). Reads no
/// file of the mount: nothing serves its requests yet.
pub(super) fn widen(mountpoint: &Path) {
    let found = fscrypt_linux::mountinfo::read_mountinfo().map(|all| {
        all.into_iter()
            .rev()
            .find(|m| m.mount_point == mountpoint && m.fs_type.starts_with("fuse"))
    });
    let r = match found {
        Ok(Some(m)) => std::fs::write(
            format!("/sys/class/bdi/{}:{}/read_ahead_kb", m.major, m.minor),
            (MAX_REQUEST / 1024).to_string(),
        )
        .map_err(|e| e.to_string()),
        Ok(None) => Err("not in /proc/self/mountinfo".into()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = r {
        log::debug!("fscrypt-fuse: read-ahead of the mount left at its default: {e}");
    }
}
