//! Keeping the daemon's inode table bounded: asking the kernel to drop the
//! cached inodes it does not use (`FUSE_NOTIFY_PRUNE`, FUSE 7.45, Linux
//! 6.18: `fs/fuse/dev.c`, `fuse_notify_prune`).
//!
//! The daemon must answer for every node id the kernel holds, so its table
//! holds an entry per inode in the kernel's inode cache, and that cache
//! only shrinks under memory pressure: walking or creating a million files
//! on a machine with memory to spare left a million entries (627 MiB,
//! bench/RESULTS.md "Scale"). With a limit, a thread of the mount checks
//! the table's size every [`PERIOD`]; above the limit it names node ids to
//! the kernel, which drops those of them that nothing uses (no open file,
//! working directory or child dentry: `d_prune_aliases`) and sends FORGET
//! for each, freeing their entries. A pruned entry costs one LOOKUP when
//! its name is used again. Kernels without the notification refuse it
//! (EINVAL, or ENOSYS): the thread then says so once and stops, and the
//! table grows as before.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::backend::Backend;
use crate::ops::Ops;

/// How often the table's size is checked.
pub(crate) const PERIOD: Duration = Duration::from_millis(250);

/// `FUSE_NOTIFY_PRUNE` (`enum fuse_notify_code`).
const FUSE_NOTIFY_PRUNE: i32 = 9;

/// Node ids per notification (the kernel works through its list in
/// batches of 512).
const BATCH: usize = 512;

/// Starts the pruning thread of a mount whose back-end wants its table
/// kept to `limit` inodes; `dev`: a descriptor of the mount's `/dev/fuse`
/// connection. The thread ends with the session (its [`Ops`] gone) or at
/// the first refused notification.
pub(crate) fn start<B: Backend>(dev: Arc<OwnedFd>, ops: &Arc<Ops<B>>, limit: usize) {
    let ops = Arc::downgrade(ops);
    let spawned = std::thread::Builder::new()
        .name("fuse-prune".into())
        .spawn(move || run(&dev, &ops, limit));
    if let Err(e) = spawned {
        log::warn!("fscrypt-fuse: inode pruning not started: {e}");
    }
}

fn run<B: Backend>(dev: &OwnedFd, ops: &Weak<Ops<B>>, limit: usize) {
    loop {
        std::thread::sleep(PERIOD);
        let Some(ops) = ops.upgrade() else {
            return;
        };
        let cached = ops.backend().cached_inodes();
        if cached <= limit {
            continue;
        }
        // Down to three quarters of the limit, so that a workload creating
        // or walking files does not bring the table back over it at once.
        let ids = ops.backend().prune_candidates(cached - limit / 4 * 3);
        for chunk in ids.chunks(BATCH) {
            if let Err(e) = notify_prune(dev, chunk) {
                match e {
                    rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS => log::info!(
                        "fscrypt-fuse: this kernel cannot drop cached inodes on request \
                         (FUSE_NOTIFY_PRUNE: {e}); the daemon keeps an entry per inode \
                         the kernel caches"
                    ),
                    // The connection is gone (unmounted).
                    _ => log::debug!("fscrypt-fuse: inode pruning stopped: {e}"),
                }
                return;
            }
        }
        log::debug!(
            "fscrypt-fuse: {cached} cached inodes over the limit of {limit}: asked the kernel to drop {}",
            ids.len()
        );
    }
}

/// Writes one `FUSE_NOTIFY_PRUNE` naming `ids` to the connection `dev`:
/// `struct fuse_out_header` (length, the notify code in place of an errno,
/// unique 0), `struct fuse_notify_prune_out` (count, padding, spare), then
/// the node ids, all little-endian as the host.
fn notify_prune(dev: &OwnedFd, ids: &[u64]) -> rustix::io::Result<()> {
    let len = 16 + 16 + 8 * ids.len();
    let mut msg = Vec::with_capacity(len);
    msg.extend_from_slice(&(len as u32).to_ne_bytes());
    msg.extend_from_slice(&FUSE_NOTIFY_PRUNE.to_ne_bytes());
    msg.extend_from_slice(&0u64.to_ne_bytes());
    msg.extend_from_slice(&(ids.len() as u32).to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(&0u64.to_ne_bytes());
    for id in ids {
        msg.extend_from_slice(&id.to_ne_bytes());
    }
    let n = rustix::io::write(dev.as_fd(), &msg)?;
    if n != len {
        return Err(rustix::io::Errno::IO);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_notification_is_laid_out_as_the_kernel_reads_it() {
        use std::io::Read;
        let (mut r, w) = std::io::pipe().unwrap();
        super::notify_prune(&std::os::fd::OwnedFd::from(w), &[7, 1 << 40]).unwrap();
        let mut buf = [0u8; 64];
        let n = r.read(&mut buf).unwrap();
        assert_eq!(n, 48);
        let u32_at = |o: usize| u32::from_ne_bytes(buf[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_ne_bytes(buf[o..o + 8].try_into().unwrap());
        assert_eq!(u32_at(0), 48, "length");
        assert_eq!(u32_at(4), 9, "FUSE_NOTIFY_PRUNE");
        assert_eq!(u64_at(8), 0, "unique");
        assert_eq!(u32_at(16), 2, "count");
        assert_eq!((u32_at(20), u64_at(24)), (0, 0), "padding, spare");
        assert_eq!((u64_at(32), u64_at(40)), (7, 1 << 40));
    }
}
