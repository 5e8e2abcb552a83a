//! What an interrupted operation can leave in a backing directory, and the
//! safe ways to remove it (`docs/vault-format.md`, section 11 "Crash
//! safety"). Shared by the mount's recovery pass (`fscrypt-fuse`,
//! `fs/recover.rs`) and `fscrypt-rs fsck --repair` ([`crate::fsck`]), so the
//! two agree on what a crash produces and what may be removed without
//! touching a user's data:
//!
//! - temporary entries `fscrypt.tmp.*` ([`is_temporary`], removed with
//!   [`remove_tree`] for directories);
//! - long-name side files whose entry is gone ([`side_file_owner`]);
//! - 0-byte backing regular files (they never held a header: [`is_headerless`]);
//! - an empty directory without `fscrypt.dir` (it gets a fresh one:
//!   [`write_dir_meta`]);
//! - store objects no symlink names ([`crate::layout::is_store_id`] and the
//!   markers of every backing symlink).
//!
//! Everything here works on directory file descriptors, never follows a
//! symlink and needs no key.

use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileExt;

use fscrypt::ContextV2;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};

use crate::layout::{
    self, DIR_META_NAME, EntryName, Format, HEADER_USED, Header, HeaderKind, LONG_NAME_SUFFIX,
    LONG_PREFIX, TMP_PREFIX,
};

/// How deep a walk of the backing tree descends (one fd per level).
pub const MAX_DEPTH: usize = 1024;

/// Whether `name` is a temporary entry (`fscrypt.tmp.*`): an object under
/// construction or a side file being replaced. Never shown; always safe to
/// remove when no mount serves the vault.
pub fn is_temporary(name: &[u8]) -> bool {
    name.starts_with(TMP_PREFIX.as_bytes())
}

/// When `name` is a long-name side file (`fscrypt.long.<43 characters>.name`),
/// the name of the entry it belongs to. A side file whose entry is absent is
/// an orphan (left by an interrupted create, rename or unlink) and safe to
/// remove.
pub fn side_file_owner(name: &[u8]) -> Option<&[u8]> {
    let entry = name.strip_suffix(LONG_NAME_SUFFIX.as_bytes())?;
    (entry.starts_with(LONG_PREFIX.as_bytes()) && layout::classify(entry) == EntryName::Long)
        .then_some(entry)
}

/// Whether the long-name entry `owner` (from [`side_file_owner`]) is among
/// the directory's `names`, itself or as a sync tool's conflict copy (which
/// shares the original's side file): if not, its side file is an orphan.
pub fn side_file_in_use(owner: &[u8], names: &HashSet<&[u8]>) -> bool {
    names.contains(owner)
        || names
            .iter()
            .any(|n| matches!(layout::classify(n), EntryName::Conflict(c) if c.original == owner))
}

/// Whether a backing regular file of `len` bytes never held a header (0
/// bytes: a create interrupted before the header, under versions before the
/// recovery pass, or a power loss before the header reached the disk). It
/// can never be read and holds nothing; safe to remove.
pub fn is_headerless(len: u64) -> bool {
    len == 0
}

fn errno(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

/// The entries of a directory (without `.` and `..`) with their types as
/// `readdir` gives them ([`FileType::Unknown`] where the filesystem does not
/// say).
///
/// # Errors
/// Reading the directory failed.
pub fn dir_entries(dfd: BorrowedFd<'_>) -> io::Result<Vec<(Vec<u8>, FileType)>> {
    let mut out = Vec::new();
    let mut d = rustix::fs::Dir::read_from(dfd).map_err(errno)?;
    while let Some(ent) = d.read() {
        let ent = ent.map_err(errno)?;
        let n = ent.file_name().to_bytes();
        if n != b"." && n != b".." {
            out.push((n.to_vec(), ent.file_type()));
        }
    }
    Ok(out)
}

/// Removes the directory `name` in `parent` and everything in it, never
/// following a symlink and never entering another mount (temporary
/// directories only: a directory that is still under construction holds no
/// user data). A mount point inside the tree (the directory itself, or any
/// directory below it: a bind mount or a tmpfs someone mounted there) stops
/// the removal with [`mount_point_error`]: what lies there is another
/// filesystem's, not the vault's leftover.
///
/// # Errors
/// The first removal that failed; [`mount_point_error`] for a mount point
/// met on the way.
pub fn remove_tree(parent: BorrowedFd<'_>, name: &[u8]) -> io::Result<()> {
    remove_tree_at(parent, name, 0)
}

/// The error [`remove_tree`] gives for a mount point inside a leftover
/// (kind [`io::ErrorKind::CrossesDevices`]); its message says what to do.
pub fn mount_point_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::CrossesDevices,
        "a mount point is inside this leftover; unmount it, then repair again",
    )
}

/// Opens the directory `name` of `parent` (one component) for listing,
/// without following a symlink or crossing into another mount:
/// [`safe_open::open_entry`] with [`safe_open::Mounts::Stay`] (`openat2`
/// with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
/// RESOLVE_NO_XDEV`, which sees bind mounts of the same filesystem too;
/// where the kernel lacks `openat2`, a seccomp filter refuses it or renames
/// keep racing it, `openat` with `O_NOFOLLOW` and a device comparison with
/// `parent`).
///
/// # Errors
/// [`mount_point_error`] for a mount point, the usual open errors.
pub fn open_dir_beneath(parent: BorrowedFd<'_>, name: &[u8]) -> io::Result<rustix::fd::OwnedFd> {
    use safe_open::{Error, Mounts};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY;
    match safe_open::open_entry(parent, name, flags, Mode::empty(), Mounts::Stay) {
        Err(Error::Raced) => {
            safe_open::open_fallback(parent, name, flags, Mode::empty(), Mounts::Stay)
        }
        r => r,
    }
    .map_err(|e| match e {
        Error::MountPoint => mount_point_error(),
        e => e.into(),
    })
}

fn remove_tree_at(parent: BorrowedFd<'_>, name: &[u8], depth: usize) -> io::Result<()> {
    if depth < MAX_DEPTH {
        let d = open_dir_beneath(parent, name)?;
        for (n, t) in dir_entries(d.as_fd())? {
            let is_dir = match t {
                FileType::Unknown => {
                    rustix::fs::statat(&d, n.as_slice(), AtFlags::SYMLINK_NOFOLLOW)
                        .map(|s| FileType::from_raw_mode(s.st_mode) == FileType::Directory)
                        .unwrap_or(false)
                }
                t => t == FileType::Directory,
            };
            if is_dir {
                remove_tree_at(d.as_fd(), &n, depth + 1)?;
            } else {
                rustix::fs::unlinkat(&d, n.as_slice(), AtFlags::empty()).map_err(errno)?;
            }
        }
    }
    rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR).map_err(errno)
}

/// Removes the entry `name` of type `t` in `dir`: a directory with
/// [`remove_tree`], anything else with `unlinkat`.
///
/// # Errors
/// The removal failed.
pub fn remove_entry(dir: BorrowedFd<'_>, name: &[u8], t: FileType) -> io::Result<()> {
    if t == FileType::Directory {
        remove_tree(dir, name)
    } else {
        rustix::fs::unlinkat(dir, name, AtFlags::empty()).map_err(errno)
    }
}

/// A fresh temporary name `fscrypt.tmp.<16 random base64url characters>`.
///
/// # Errors
/// The system random generator failed.
pub fn tmp_name() -> io::Result<String> {
    let mut rnd = [0u8; 12];
    fscrypt_crypto::random_bytes(&mut rnd).map_err(io::Error::other)?;
    let mut out = [0u8; 16];
    let n = fscrypt::base64url::encode(&rnd, &mut out);
    Ok(format!(
        "{TMP_PREFIX}{}",
        String::from_utf8_lossy(&out[..n])
    ))
}

/// Writes a directory metadata file holding `context` into the directory
/// `dfd` (mode 0600, complete under a temporary name before it is renamed
/// to `fscrypt.dir`, never replacing one). Gives an empty directory that
/// lost its metadata (an interrupted rmdir or rename over it) a fresh
/// context, so it is an ordinary empty directory again. `format` is the
/// vault's (the version byte written).
///
/// # Errors
/// Creating, writing or renaming failed (`EEXIST`: it has one).
pub fn write_dir_meta(dfd: BorrowedFd<'_>, context: &ContextV2, format: Format) -> io::Result<()> {
    let h = Header {
        format,
        kind: HeaderKind::Directory,
        context: *context,
        size: 0,
    };
    let tmp = tmp_name()?;
    let f = rustix::fs::openat(
        dfd,
        tmp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::from_raw_mode(0o600),
    )
    .map_err(errno)?;
    let r = File::from(f)
        .write_all_at(&h.to_bytes()[..HEADER_USED], 0)
        .and_then(|()| {
            rustix::fs::renameat_with(
                dfd,
                tmp.as_str(),
                dfd,
                DIR_META_NAME,
                RenameFlags::NOREPLACE,
            )
            .map_err(errno)
        });
    if r.is_err() {
        let _ = rustix::fs::unlinkat(dfd, tmp.as_str(), AtFlags::empty());
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::BackingName;

    #[test]
    fn names() {
        let long = BackingName::from_ciphertext(&[7u8; 200]);
        assert_eq!(
            side_file_owner(long.side_file().as_bytes()),
            Some(long.name.as_bytes())
        );
        assert_eq!(side_file_owner(long.name.as_bytes()), None);
        assert_eq!(side_file_owner(b"fscrypt.long.short.name"), None);
        assert_eq!(side_file_owner(b"abc.name"), None);
        assert!(is_temporary(b"fscrypt.tmp.abc"));
        assert!(!is_temporary(DIR_META_NAME.as_bytes()));
        assert!(is_headerless(0) && !is_headerless(4096));
    }
}
