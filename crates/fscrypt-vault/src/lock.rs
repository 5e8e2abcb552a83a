//! The vault lock: an advisory exclusive `flock` on the backing root, held
//! by the FUSE daemon for as long as it serves the vault and by
//! `fsck --repair` for as long as it repairs.
//!
//! Two daemons serving one backing directory would each cache names,
//! sizes and inodes the other changes underneath it (stale data, lost
//! writes), and a repair under a live mount would change what the daemon
//! caches, so each refuses while another holds the lock. The kernel drops
//! the lock when the holder exits, however it exits, so a crashed daemon
//! never leaves a stale lock behind.
//!
//! Mounts made with `-o sharedstorage` (issue 23: two machines on one NAS
//! or synced folder) take the lock *shared* instead: they coexist with each
//! other, never with an exclusive holder (a plain mount, `fsck --repair`).
//! A shared mount that finds itself alone takes it exclusively first, runs
//! the crash recovery pass, then shares it ([`VaultLock::share`]).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fs::{FlockOperation, Mode, OFlags};

/// Why the vault lock could not be taken or examined. Each message is one
/// line naming the backing directory.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The backing root cannot be opened (missing, not a directory, a
    /// symlink, no permission).
    #[error("vault {path}: {source}")]
    Open {
        /// The backing directory.
        path: PathBuf,
        /// The error of open(2).
        source: std::io::Error,
    },
    /// flock(2) failed for another reason than the lock being held.
    #[error("locking the vault {path}: {source}")]
    Lock {
        /// The backing directory.
        path: PathBuf,
        /// The error of flock(2).
        source: std::io::Error,
    },
    /// Another process (a daemon serving the vault) holds the lock.
    #[error(
        "the vault {0} is already mounted (another fscrypt-rs daemon holds its lock): \
         unmount it there first, or mount both with -o sharedstorage"
    )]
    Held(PathBuf),
    /// A shared mount was asked for while a plain mount (or `fsck
    /// --repair`) holds the lock exclusively.
    #[error(
        "the vault {0} is mounted without -o sharedstorage (or fsck --repair runs): \
         unmount it there and mount both with -o sharedstorage"
    )]
    HeldExclusively(PathBuf),
}

fn io(e: rustix::io::Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e.raw_os_error())
}

/// A held vault lock; dropping it (and every other descriptor of the same
/// open directory, see [`VaultLock::try_on`]) or the process ending
/// releases it.
#[derive(Debug)]
pub struct VaultLock {
    fd: OwnedFd,
}

impl VaultLock {
    /// How long [`Self::acquire`] waits for a holder to let go.
    pub const GRACE: Duration = Duration::from_secs(5);

    /// Takes the lock on the backing directory `backing_dir` (opened
    /// without following a symlink), or returns `None` when another
    /// process holds it.
    ///
    /// # Errors
    /// [`LockError::Open`], [`LockError::Lock`].
    pub fn try_acquire(backing_dir: &Path) -> Result<Option<VaultLock>, LockError> {
        Self::lock(Self::open_root(backing_dir)?, backing_dir)
    }

    /// Opens the backing root to lock, without following a symlink.
    fn open_root(backing_dir: &Path) -> Result<OwnedFd, LockError> {
        rustix::fs::open(
            backing_dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| LockError::Open {
            path: backing_dir.to_owned(),
            source: io(e),
        })
    }

    /// Takes the lock on the backing root the caller opened already
    /// (`root`, named `backing_dir` in errors), so that the lock and what
    /// the caller then reads through `root` are one directory. The lock is
    /// on the open directory `root` refers to: it lasts while either `root`
    /// or the returned lock is open. `None` when another process holds it.
    ///
    /// # Errors
    /// [`LockError::Open`] when `root` cannot be duplicated,
    /// [`LockError::Lock`].
    pub fn try_on(
        root: BorrowedFd<'_>,
        backing_dir: &Path,
    ) -> Result<Option<VaultLock>, LockError> {
        let fd = root
            .try_clone_to_owned()
            .map_err(|source| LockError::Open {
                path: backing_dir.to_owned(),
                source,
            })?;
        Self::lock(fd, backing_dir)
    }

    fn lock(fd: OwnedFd, backing_dir: &Path) -> Result<Option<VaultLock>, LockError> {
        Self::lock_as(fd, backing_dir, FlockOperation::NonBlockingLockExclusive)
    }

    fn lock_as(
        fd: OwnedFd,
        backing_dir: &Path,
        how: FlockOperation,
    ) -> Result<Option<VaultLock>, LockError> {
        match rustix::fs::flock(&fd, how) {
            Ok(()) => Ok(Some(VaultLock { fd })),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(e) => Err(LockError::Lock {
                path: backing_dir.to_owned(),
                source: io(e),
            }),
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
    /// [`LockError::Held`] when another daemon holds it, or as
    /// [`Self::try_acquire`].
    pub fn acquire(backing_dir: &Path) -> Result<VaultLock, LockError> {
        Self::wait_for(backing_dir)?.ok_or_else(|| LockError::Held(backing_dir.to_owned()))
    }

    /// Takes the lock *shared* (`-o sharedstorage`): beside other shared
    /// holders, never beside an exclusive one, whose holder is waited for
    /// up to [`Self::GRACE`] as in [`Self::acquire`].
    ///
    /// # Errors
    /// [`LockError::HeldExclusively`] when a plain mount or a repair holds
    /// it, or as [`Self::try_acquire`].
    pub fn acquire_shared(backing_dir: &Path) -> Result<VaultLock, LockError> {
        let start = std::time::Instant::now();
        loop {
            let fd = Self::open_root(backing_dir)?;
            if let Some(l) = Self::lock_as(fd, backing_dir, FlockOperation::NonBlockingLockShared)?
            {
                return Ok(l);
            }
            if start.elapsed() >= Self::GRACE {
                return Err(LockError::HeldExclusively(backing_dir.to_owned()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Turns a held exclusive lock into a shared one (flock(2) converts in
    /// place), so that other `-o sharedstorage` mounts can join.
    ///
    /// # Errors
    /// [`LockError::Lock`] (named `backing_dir`).
    pub fn share(&self, backing_dir: &Path) -> Result<(), LockError> {
        rustix::fs::flock(&self.fd, FlockOperation::NonBlockingLockShared).map_err(|e| {
            LockError::Lock {
                path: backing_dir.to_owned(),
                source: io(e),
            }
        })
    }

    /// True when the lock of `backing_dir` is still held after waiting up to
    /// [`Self::GRACE`] for its holder to let go (a daemon that was just
    /// unmounted is still exiting); false as soon as it is free.
    ///
    /// # Errors
    /// As [`Self::try_acquire`].
    pub fn held_after_grace(backing_dir: &Path) -> Result<bool, LockError> {
        Ok(Self::wait_for(backing_dir)?.is_none())
    }

    /// [`Self::try_acquire`], retried every 20 ms for up to [`Self::GRACE`].
    fn wait_for(backing_dir: &Path) -> Result<Option<VaultLock>, LockError> {
        let start = std::time::Instant::now();
        loop {
            if let Some(lock) = Self::try_acquire(backing_dir)? {
                return Ok(Some(lock));
            }
            if start.elapsed() >= Self::GRACE {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// True when some process holds the lock of `backing_dir` now.
    ///
    /// # Errors
    /// As [`Self::try_acquire`].
    pub fn is_held(backing_dir: &Path) -> Result<bool, LockError> {
        Ok(Self::try_acquire(backing_dir)?.is_none())
    }

    /// True when some process holds the lock of the backing root `root`
    /// (opened by the caller, named `backing_dir` in errors) now.
    ///
    /// # Errors
    /// As [`Self::try_on`].
    pub fn is_held_on(root: BorrowedFd<'_>, backing_dir: &Path) -> Result<bool, LockError> {
        Ok(Self::try_on(root, backing_dir)?.is_none())
    }
}

impl AsFd for VaultLock {
    /// The locked backing root.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_by_path_or_by_an_open_root() {
        let dir = test_support::TempDir::new("vault-lock");
        let lock = VaultLock::try_acquire(dir.path()).unwrap().expect("free");
        assert!(VaultLock::is_held(dir.path()).unwrap());
        let root = rustix::fs::open(
            dir.path(),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        assert!(VaultLock::is_held_on(root.as_fd(), dir.path()).unwrap());
        drop(lock);
        assert!(!VaultLock::is_held(dir.path()).unwrap());
        // Taken through an open root: held while the lock lives.
        let on = VaultLock::try_on(root.as_fd(), dir.path())
            .unwrap()
            .expect("free");
        assert!(VaultLock::is_held(dir.path()).unwrap());
        drop(on);
        drop(root);
        assert!(!VaultLock::is_held(dir.path()).unwrap());
    }

    #[test]
    fn shared_holders_coexist_and_exclude_an_exclusive_one() {
        let dir = test_support::TempDir::new("vault-lock-shared");
        let first = VaultLock::try_acquire(dir.path()).unwrap().expect("free");
        // Alone: exclusive, then shared so that others can join.
        first.share(dir.path()).unwrap();
        let second = VaultLock::acquire_shared(dir.path()).unwrap();
        assert!(VaultLock::is_held(dir.path()).unwrap());
        assert!(VaultLock::try_acquire(dir.path()).unwrap().is_none());
        drop(first);
        drop(second);
        let plain = VaultLock::try_acquire(dir.path()).unwrap().expect("free");
        let start = std::time::Instant::now();
        let e = VaultLock::acquire_shared(dir.path()).unwrap_err();
        assert!(matches!(e, LockError::HeldExclusively(_)), "{e}");
        assert!(start.elapsed() >= VaultLock::GRACE);
        assert!(e.to_string().contains("-o sharedstorage"));
        drop(plain);
    }

    #[test]
    fn errors_name_the_vault() {
        let dir = test_support::TempDir::new("vault-lock-err");
        let missing = dir.path().join("missing");
        let e = VaultLock::try_acquire(&missing).unwrap_err();
        assert!(matches!(e, LockError::Open { .. }));
        assert!(
            e.to_string()
                .starts_with(&format!("vault {}: ", missing.display()))
        );
        let _held = VaultLock::try_acquire(dir.path()).unwrap().unwrap();
        let msg = LockError::Held(dir.path().to_owned()).to_string();
        assert!(msg.contains("is already mounted"), "{msg}");
    }
}
