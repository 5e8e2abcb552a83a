//! The vault lock: an advisory `flock` on the backing root, held by the
//! daemon for as long as it serves the vault.
//!
//! Two daemons serving one backing directory would each cache names,
//! sizes and inodes the other changes underneath it (stale data, lost
//! writes), so a second mount is refused. The kernel drops the lock when
//! the holder exits, however it exits, so a crashed daemon never leaves a
//! stale lock behind.

use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{FlockOperation, Mode, OFlags};

use crate::error::{Error, Result};

/// A held vault lock; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct VaultLock {
    _fd: OwnedFd,
}

impl VaultLock {
    /// Takes the lock on the backing directory `backing_dir`, or returns
    /// `None` when another process holds it.
    ///
    /// # Errors
    /// [`Error::Mount`] when the directory cannot be opened or locked.
    pub fn try_acquire(backing_dir: &Path) -> Result<Option<VaultLock>> {
        let fd = rustix::fs::open(
            backing_dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::Mount(format!("vault {}: {e}", backing_dir.display())))?;
        match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(VaultLock { _fd: fd })),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(e) => Err(Error::Mount(format!(
                "locking the vault {}: {e}",
                backing_dir.display()
            ))),
        }
    }

    /// Takes the lock or fails with a message saying the vault is mounted.
    ///
    /// A holder that lets go within [`Self::GRACE`] is waited for: a daemon
    /// that was just unmounted may still be exiting, [`Self::is_held`]
    /// holds the lock for an instant, and a child forked by another thread
    /// shares the descriptor until its exec closes it.
    ///
    /// # Errors
    /// [`Error::Mount`] when another daemon holds it, or as [`Self::try_acquire`].
    pub fn acquire(backing_dir: &Path) -> Result<VaultLock> {
        Self::wait_for(backing_dir)?.ok_or_else(|| {
            Error::Mount(format!(
                "the vault {} is already mounted (another fscrypt-rs daemon holds its lock): \
                 unmount it there first",
                backing_dir.display()
            ))
        })
    }

    /// True when the lock of `backing_dir` is still held after waiting up to
    /// [`Self::GRACE`] for its holder to let go (a daemon that was just
    /// unmounted is still exiting); false as soon as it is free.
    ///
    /// # Errors
    /// As [`Self::try_acquire`].
    pub fn held_after_grace(backing_dir: &Path) -> Result<bool> {
        Ok(Self::wait_for(backing_dir)?.is_none())
    }

    /// [`Self::try_acquire`], retried every 20 ms for up to [`Self::GRACE`].
    fn wait_for(backing_dir: &Path) -> Result<Option<VaultLock>> {
        let start = std::time::Instant::now();
        loop {
            if let Some(lock) = Self::try_acquire(backing_dir)? {
                return Ok(Some(lock));
            }
            if start.elapsed() >= Self::GRACE {
                return Ok(None);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// How long [`Self::acquire`] waits for a holder to let go.
    pub const GRACE: std::time::Duration = std::time::Duration::from_secs(5);

    /// True when some process holds the lock of `backing_dir` now.
    ///
    /// # Errors
    /// As [`Self::try_acquire`].
    pub fn is_held(backing_dir: &Path) -> Result<bool> {
        Ok(Self::try_acquire(backing_dir)?.is_none())
    }
}
