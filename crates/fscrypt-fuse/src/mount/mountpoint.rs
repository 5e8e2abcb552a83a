//! A mount point opened once: the directory a mount goes on, held as an
//! `O_PATH` descriptor from the moment it is checked until the mount is
//! made on it.
//!
//! A mount point given by path may be in a directory another user can
//! write (`/tmp/x/mnt` with `/tmp/x` theirs). Between the checks and the
//! mount they can rename it and put a symlink to any directory in its
//! place; a root daemon that looks the path up again mounts there. So the
//! path is looked up exactly once, without following a symlink in any
//! component (the canonical form is opened with `O_NOFOLLOW` and the
//! descriptor's own path in `/proc/self/fd` must be that canonical form),
//! every check is made on that descriptor, and root mounts onto
//! `/proc/self/fd/N`, a magic link the kernel resolves to exactly the
//! directory the descriptor holds. fusermount3 (without root) mounts `.`
//! after `chdir` to the path with the caller's own rights, as libfuse's
//! `util/fusermount.c` does.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

use crate::error::{Error, Result};

/// A directory opened `O_PATH|O_NOFOLLOW|O_DIRECTORY` to mount on, and the
/// absolute path it had when it was opened.
#[derive(Debug)]
pub struct MountPoint {
    dir: OwnedFd,
    path: PathBuf,
}

impl MountPoint {
    /// Opens the directory `path` names (made absolute and canonical first;
    /// a symlink anywhere in it is resolved then, never again).
    ///
    /// # Errors
    /// [`Error::Mount`]: the path does not exist, is not a directory, or
    /// changed between resolving and opening it (a component was replaced,
    /// by a symlink say).
    pub fn open(path: &Path) -> Result<MountPoint> {
        let canonical = std::fs::canonicalize(path)
            .map_err(|e| Error::Mount(format!("mountpoint {}: {e}", path.display())))?;
        let dir = rustix::fs::open(
            &canonical,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => Error::Mount(format!(
                "mountpoint {} is not a directory (or was just replaced by a symlink): \
                 give a directory",
                canonical.display()
            )),
            e => Error::Mount(format!("mountpoint {}: {e}", canonical.display())),
        })?;
        let mp = MountPoint {
            dir,
            path: canonical,
        };
        // A component replaced by a symlink after canonicalize() resolved
        // it would put the descriptor somewhere else.
        if mp.current_path().as_deref() != Some(mp.path.as_path()) {
            return Err(Error::Mount(format!(
                "mountpoint {} changed while it was being opened (a directory on its path was \
                 replaced): check who can write its parent directories, then mount again",
                mp.path.display()
            )));
        }
        Ok(mp)
    }

    /// Takes over the descriptor `fd` a parent process opened with
    /// [`MountPoint::open`] and left inherited (the mount daemon): the
    /// directory is reopened through `/proc/self/fd/fd`, which names that
    /// very directory, so no path is looked up again.
    ///
    /// # Errors
    /// [`Error::Mount`]: `fd` is not open or is not a directory.
    pub fn inherited(fd: RawFd) -> Result<MountPoint> {
        let link = format!("/proc/self/fd/{fd}");
        let dir = rustix::fs::open(
            &link,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| {
            Error::Mount(format!(
                "the mount point descriptor {fd} from the parent: {e}"
            ))
        })?;
        let path = std::fs::read_link(&link).map_err(|e| {
            Error::Mount(format!(
                "the mount point descriptor {fd} from the parent: {e}"
            ))
        })?;
        Ok(MountPoint { dir, path })
    }

    /// The absolute path the directory had when it was opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the directory is now (it may have been renamed since), from
    /// `/proc/self/fd`; `None` if the kernel cannot say (it was removed).
    pub fn current_path(&self) -> Option<PathBuf> {
        let p = std::fs::read_link(self.proc_path()).ok()?;
        // A removed directory reads back as "PATH (deleted)".
        let deleted = p.as_os_str().as_encoded_bytes().ends_with(b" (deleted)");
        (!deleted && p.is_absolute()).then_some(p)
    }

    /// `/proc/self/fd/N` for this descriptor: a path the kernel resolves to
    /// exactly this directory (in this process only).
    pub fn proc_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_raw_fd()))
    }

    /// `fstat` of the directory.
    ///
    /// # Errors
    /// [`Error::Mount`] if `fstat` fails.
    pub fn stat(&self) -> Result<rustix::fs::Stat> {
        rustix::fs::fstat(&self.dir)
            .map_err(|e| Error::Mount(format!("mountpoint {}: {e}", self.path.display())))
    }

    /// Whether the directory holds any entry besides `.` and `..`.
    ///
    /// # Errors
    /// [`Error::Mount`] if it cannot be listed.
    pub fn entries(&self) -> Result<usize> {
        let err = |e: rustix::io::Errno| {
            Error::Mount(format!("listing mountpoint {}: {e}", self.path.display()))
        };
        let fd = rustix::fs::openat(
            &self.dir,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(err)?;
        let mut dir = rustix::fs::Dir::read_from(&fd).map_err(err)?;
        let mut n = 0;
        while let Some(entry) = dir.read() {
            let name = entry.map_err(err)?;
            let name = name.file_name().to_bytes();
            if name != b"." && name != b".." {
                n += 1;
            }
        }
        Ok(n)
    }

    /// `fstat` of the parent directory (`..` of this one, not looked up by
    /// path).
    ///
    /// # Errors
    /// [`Error::Mount`] if it cannot be opened.
    pub fn parent_stat(&self) -> Result<rustix::fs::Stat> {
        let parent = rustix::fs::openat(
            &self.dir,
            "..",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .and_then(|fd| rustix::fs::fstat(&fd))
        .map_err(|e| Error::Mount(format!("parent of {}: {e}", self.path.display())))?;
        Ok(parent)
    }

    /// A duplicate of the descriptor without close-on-exec, for a child
    /// process to inherit ([`MountPoint::inherited`] there).
    ///
    /// # Errors
    /// [`Error::Mount`] if `dup` fails.
    pub fn inheritable(&self) -> Result<OwnedFd> {
        rustix::io::dup(&self.dir).map_err(|e| Error::Mount(format!("dup: {e}")))
    }

    /// A second handle on the same directory.
    ///
    /// # Errors
    /// [`Error::Mount`] if `dup` fails.
    pub fn try_clone(&self) -> Result<MountPoint> {
        let dir = rustix::io::fcntl_dupfd_cloexec(&self.dir, 0)
            .map_err(|e| Error::Mount(format!("dup: {e}")))?;
        Ok(MountPoint {
            dir,
            path: self.path.clone(),
        })
    }

    /// Whether the directory is still a directory (it always is: the
    /// descriptor holds it), for the callers' checks.
    pub fn is_dir(&self) -> bool {
        self.stat()
            .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory)
    }
}

impl AsFd for MountPoint {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }
}

/// Why a mount point's parent lets another user swap the mount point for
/// something else, if it does: `parent` and `mountpoint` are their `fstat`s,
/// `me` the mounting user. The parent must be owned by root or `me`, and
/// writable by no one else unless sticky (then others cannot rename an
/// entry that is not theirs) with the mount point owned by root or `me`.
pub fn parent_risk(
    parent: &rustix::fs::Stat,
    mountpoint: &rustix::fs::Stat,
    me: u32,
) -> Option<String> {
    let trusted = |uid: u32| uid == 0 || uid == me;
    if !trusted(parent.st_uid) {
        return Some(format!(
            "its parent directory belongs to uid {}",
            parent.st_uid
        ));
    }
    let others_write = parent.st_mode & 0o022 != 0;
    let sticky = parent.st_mode & 0o1000 != 0;
    if others_write && !sticky {
        return Some(format!(
            "its parent directory (mode {:04o}) is writable by others",
            parent.st_mode & 0o7777
        ));
    }
    if others_write && !trusted(mountpoint.st_uid) {
        return Some(format!(
            "it belongs to uid {} in a directory others can write",
            mountpoint.st_uid
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_of(uid: u32, mode: u32) -> rustix::fs::Stat {
        let mut st = rustix::fs::stat("/").unwrap();
        st.st_uid = uid;
        st.st_mode = 0o040000 | mode;
        st
    }

    #[test]
    fn parents_other_users_can_write_are_named() {
        let me = 1000;
        // Root's or mine, writable by no one else: fine.
        assert_eq!(
            parent_risk(&stat_of(0, 0o755), &stat_of(1000, 0o755), me),
            None
        );
        assert_eq!(
            parent_risk(&stat_of(me, 0o700), &stat_of(2000, 0o755), me),
            None
        );
        // /tmp: sticky, my own mount point in it: fine; someone else's: not.
        assert_eq!(
            parent_risk(&stat_of(0, 0o1777), &stat_of(me, 0o755), me),
            None
        );
        assert!(parent_risk(&stat_of(0, 0o1777), &stat_of(2000, 0o755), me).is_some());
        // Another user's directory, or one the group may write, not sticky.
        assert!(parent_risk(&stat_of(2000, 0o755), &stat_of(me, 0o755), me).is_some());
        assert!(parent_risk(&stat_of(0, 0o775), &stat_of(me, 0o755), me).is_some());
        assert!(parent_risk(&stat_of(0, 0o757), &stat_of(0, 0o755), 0).is_some());
    }

    #[test]
    fn open_resolves_once_and_follows_the_directory() {
        let base = std::env::temp_dir().join(format!("fscrypt-mp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("real/mnt")).unwrap();
        std::os::unix::fs::symlink("real", base.join("link")).unwrap();
        // A symlink on the way is resolved at open time.
        let mp = MountPoint::open(&base.join("link/mnt")).unwrap();
        let canon = std::fs::canonicalize(base.join("real/mnt")).unwrap();
        assert_eq!(mp.path(), canon);
        assert!(mp.is_dir());
        assert_eq!(mp.entries().unwrap(), 0);
        std::fs::write(base.join("real/mnt/f"), b"").unwrap();
        assert_eq!(mp.entries().unwrap(), 1);
        // Renamed and replaced by a symlink: the descriptor still holds
        // the directory that was opened.
        std::fs::rename(base.join("real/mnt"), base.join("real/moved")).unwrap();
        std::os::unix::fs::symlink("/", base.join("real/mnt")).unwrap();
        let canon_moved = std::fs::canonicalize(base.join("real/moved")).unwrap();
        assert_eq!(mp.current_path(), Some(canon_moved.clone()));
        let again = MountPoint::inherited(mp.as_fd().as_raw_fd()).unwrap();
        assert_eq!(again.path(), canon_moved);
        assert_eq!(again.stat().unwrap().st_ino, mp.stat().unwrap().st_ino);
        // A file is not a mount point.
        assert!(MountPoint::open(&base.join("real/moved/f")).is_err());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
