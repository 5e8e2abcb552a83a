//! Opening one entry of an untrusted directory safely: the one place the
//! workspace opens relative to a directory whose contents someone else may
//! control (a vault's backing directory, google/fscrypt metadata of other
//! users, a leftover tree being removed).
//!
//! [`open_entry`] opens one path component of a directory file descriptor
//! with `openat2(2)` and `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS` (plus `RESOLVE_NO_XDEV` with [`Mounts::Stay`]),
//! always adding `O_NOFOLLOW | O_CLOEXEC`. So no symlink (the final
//! component included), no magic link (`/proc/<pid>/fd/*`), no `..` and,
//! when asked, no mount point is ever followed. With `O_PATH` a final
//! symlink gives a descriptor of the link itself (as `openat2(2)` and
//! `open(2)` document for `O_PATH | O_NOFOLLOW`).
//!
//! Where the kernel lacks `openat2` (`ENOSYS`, before Linux 5.6; remembered
//! for the rest of the process, see [`openat2_missing`]) or a seccomp filter
//! refuses it (`EPERM`, as older container profiles do; tried again on the
//! next call, since `EPERM` is also an ordinary answer of `open`), the same
//! guarantees come from [`open_fallback`]: `openat` with `O_NOFOLLOW` on a
//! name already checked to be one component, and for [`Mounts::Stay`] a
//! comparison of the device of the directory and of the opened object.
//!
//! Shared by `fscrypt-vault` (leftover removal, fsck), `fscrypt-fuse` (every
//! backing entry open) and `fscrypt-metadata` (metadata files). Depends on
//! `rustix` only.

use std::fmt;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{CWD, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// How many times `openat2` is retried on `EAGAIN` (a rename anywhere in
/// the filesystem raced the resolution) before [`Error::Raced`].
pub const RETRIES: usize = 16;

/// Whether the opened entry may be a mount point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mounts {
    /// It may: no `RESOLVE_NO_XDEV`, no device comparison in the fallback.
    Cross,
    /// It may not: `RESOLVE_NO_XDEV` (which also sees a bind mount of the
    /// same filesystem), in the fallback a comparison of `st_dev` of the
    /// directory and of the opened object; either gives
    /// [`Error::MountPoint`].
    Stay,
}

/// Why [`open_entry`] opened nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The name is not one path component (empty, `.`, `..`, or holding a
    /// `/` or a NUL byte).
    InvalidName,
    /// The entry is a mount point (only with [`Mounts::Stay`]).
    MountPoint,
    /// `openat2` answered `EAGAIN` [`RETRIES`] times in a row: renames kept
    /// racing the lookup.
    Raced,
    /// The open itself failed (`ELOOP` for a symlink or magic link without
    /// `O_PATH`, `ENOENT`, `EACCES`, ...), or `fstat` of the fallback did.
    Sys(Errno),
}

impl Error {
    /// The errno that stands for this error: `EINVAL`, `EXDEV`, `EAGAIN` or
    /// the system's own.
    pub fn errno(self) -> Errno {
        match self {
            Error::InvalidName => Errno::INVAL,
            Error::MountPoint => Errno::XDEV,
            Error::Raced => Errno::AGAIN,
            Error::Sys(e) => e,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidName => f.write_str(
                "not a single entry name (empty, `.`, `..` or holding `/`); pass one name",
            ),
            Error::MountPoint => {
                f.write_str("the entry is a mount point of another filesystem; unmount it first")
            }
            Error::Raced => f.write_str("renames kept racing the lookup; try again"),
            Error::Sys(e) => fmt::Display::fmt(&io::Error::from_raw_os_error(e.raw_os_error()), f),
        }
    }
}

impl std::error::Error for Error {}

impl From<Error> for io::Error {
    /// [`Error::InvalidName`] as [`io::ErrorKind::InvalidInput`],
    /// [`Error::MountPoint`] as [`io::ErrorKind::CrossesDevices`] (both with
    /// this crate's message), the others as their raw errno.
    fn from(e: Error) -> io::Error {
        match e {
            Error::InvalidName => io::Error::new(io::ErrorKind::InvalidInput, e),
            Error::MountPoint => io::Error::new(io::ErrorKind::CrossesDevices, e),
            e => io::Error::from_raw_os_error(e.errno().raw_os_error()),
        }
    }
}

/// Set once `openat2` answered `ENOSYS`: from then on this process opens
/// with [`open_fallback`] only.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// Whether this process found that the kernel lacks `openat2` (an earlier
/// [`open_entry`] got `ENOSYS`), so that every open takes the fallback.
pub fn openat2_missing() -> bool {
    NO_OPENAT2.load(Ordering::Relaxed)
}

/// Whether `name` is exactly one path component: not empty, not `.` or
/// `..`, no `/` and no NUL byte.
pub fn is_one_component(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.contains(&b'/') && !name.contains(&0)
}

/// Opens the entry `name` (one component) of `dir` with `flags` (plus
/// `O_NOFOLLOW | O_CLOEXEC`) and `mode` (used with `O_CREAT` or `O_TMPFILE`,
/// ignored otherwise), never
/// following a symlink, a magic link or `..`, and with [`Mounts::Stay`]
/// never opening a mount point (see the crate documentation).
///
/// # Errors
/// [`Error::InvalidName`] for a name that is not one component,
/// [`Error::MountPoint`] for a mount point under [`Mounts::Stay`],
/// [`Error::Raced`] for a lasting rename race, [`Error::Sys`] for the
/// usual open errors (`ELOOP` for a symlink when `flags` lack `O_PATH`).
pub fn open_entry(
    dir: BorrowedFd<'_>,
    name: &[u8],
    flags: OFlags,
    mode: Mode,
    mounts: Mounts,
) -> Result<OwnedFd, Error> {
    open_entry_with(
        &NO_OPENAT2,
        |d, n, f, m, h| rustix::fs::openat2(d, n, f, m, h),
        dir,
        name,
        flags,
        mode,
        mounts,
    )
}

/// [`open_entry`] with the "openat2 is missing" flag and the `openat2`
/// call given (the tests pass their own, to reach the fallback).
fn open_entry_with(
    no_openat2: &AtomicBool,
    openat2: impl Fn(BorrowedFd<'_>, &[u8], OFlags, Mode, ResolveFlags) -> Result<OwnedFd, Errno>,
    dir: BorrowedFd<'_>,
    name: &[u8],
    flags: OFlags,
    mode: Mode,
    mounts: Mounts,
) -> Result<OwnedFd, Error> {
    if !is_one_component(name) {
        return Err(Error::InvalidName);
    }
    if no_openat2.load(Ordering::Relaxed) {
        return open_fallback(dir, name, flags, mode, mounts);
    }
    let flags = flags | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    // openat2 refuses a mode without O_CREAT or O_TMPFILE (EINVAL), where
    // openat ignores it.
    let mode = if flags.contains(OFlags::CREATE) || flags.contains(OFlags::TMPFILE) {
        mode
    } else {
        Mode::empty()
    };
    let mut how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    if mounts == Mounts::Stay {
        how |= ResolveFlags::NO_XDEV;
    }
    for _ in 0..RETRIES {
        match openat2(dir, name, flags, mode, how) {
            Err(Errno::AGAIN) => continue,
            Err(Errno::NOSYS) => {
                no_openat2.store(true, Ordering::Relaxed);
                return open_fallback(dir, name, flags, mode, mounts);
            }
            // A seccomp filter refusing openat2, or an ordinary EPERM of
            // open (O_NOATIME, an immutable file): openat tells which.
            Err(Errno::PERM) => return open_fallback(dir, name, flags, mode, mounts),
            Err(Errno::XDEV) if mounts == Mounts::Stay => return Err(Error::MountPoint),
            r => return r.map_err(Error::Sys),
        }
    }
    Err(Error::Raced)
}

/// The fallback of [`open_entry`] (also for callers that meet
/// [`Error::Raced`] and want an answer anyway): `openat` of the one
/// component `name` with `flags | O_NOFOLLOW | O_CLOEXEC`, and for
/// [`Mounts::Stay`] the device of `dir` compared with the opened object's.
/// Without `RESOLVE_NO_MAGICLINKS` a magic link is still never followed: it
/// is the final and only component, and `O_NOFOLLOW` covers it.
///
/// # Errors
/// As [`open_entry`], without [`Error::Raced`].
pub fn open_fallback(
    dir: BorrowedFd<'_>,
    name: &[u8],
    flags: OFlags,
    mode: Mode,
    mounts: Mounts,
) -> Result<OwnedFd, Error> {
    if !is_one_component(name) {
        return Err(Error::InvalidName);
    }
    let flags = flags | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let fd = rustix::fs::openat(dir, name, flags, mode).map_err(Error::Sys)?;
    if mounts == Mounts::Stay {
        let (a, b) = (
            rustix::fs::fstat(dir).map_err(Error::Sys)?,
            rustix::fs::fstat(&fd).map_err(Error::Sys)?,
        );
        if a.st_dev != b.st_dev {
            return Err(Error::MountPoint);
        }
    }
    Ok(fd)
}

/// Opens the file `path` without following a symlink in its final
/// component, as `open(path, flags | O_NOFOLLOW)` does: the directory part
/// is resolved as the kernel resolves any path (its symlinks followed: it is
/// the caller's choice of place), then the last component goes through
/// [`open_entry`] ([`Mounts::Cross`]). A relative path without a directory
/// part is looked up in the current directory.
///
/// # Errors
/// [`Error::InvalidName`] for a path without a last component (`/`, or one
/// ending in `..`); [`Error::Sys`] when the directory part cannot be opened
/// (`ENOENT`, `ENOTDIR`, `EACCES`, ...); as [`open_entry`].
pub fn open_path_nofollow(path: &Path, flags: OFlags, mode: Mode) -> Result<OwnedFd, Error> {
    use std::os::fd::AsFd;
    use std::os::unix::ffi::OsStrExt;
    let name = path.file_name().ok_or(Error::InvalidName)?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => Some(
            rustix::fs::open(
                p,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(Error::Sys)?,
        ),
        _ => None,
    };
    let dir = match &parent {
        Some(fd) => fd.as_fd(),
        None => CWD,
    };
    open_entry(dir, name.as_bytes(), flags, mode, Mounts::Cross)
}

#[cfg(test)]
mod tests;
