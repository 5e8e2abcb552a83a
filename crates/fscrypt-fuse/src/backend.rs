//! What a filesystem must answer to be served by this crate's one FUSE
//! engine: [`Backend`].
//!
//! The engine is `ops.rs` (counts each request in the [`crate::stats`],
//! calls the back-end, turns its [`Error`] into an errno through the one
//! table, [`Error::errno`], and logs a failure once) and its two
//! transports, `fuse.rs` (`/dev/fuse` through `fuser`) and `ring/` (FUSE
//! over io_uring). Both are generic over the back-end: every call is
//! statically dispatched, with no allocation or indirection per request
//! beyond what the back-end itself does.
//!
//! The shape follows mountpoint-s3's split between its FUSE adapter and its
//! `S3Filesystem` (the adapter converts and replies, the filesystem knows
//! nothing of FUSE's wire): here the back-end speaks in [`InodeNo`],
//! [`FileHandle`], [`FileAttr`] and [`Error`], never in requests.
//!
//! Back-ends today: [`crate::EncryptedFs`] (the vault),
//! [`crate::image::ImageFs`] (read-only view of a kernel-encrypted ext4
//! image) and [`crate::reverse::ReverseFs`] (read-only view of a plaintext
//! directory as its vault, reverse mode). Every operation that changes
//! something has a default answering [`Error::ReadOnly`] (EROFS), so a
//! read-only back-end implements only the
//! reads; [`Backend::READ_ONLY`] tells INIT not to negotiate what only
//! writes need.

use std::ffi::OsStr;
use std::ops::Range;
use std::time::Duration;

use fuser::{FileAttr, FileType, FopenFlags};

use crate::error::{Error, Result};
use crate::fs::{Caller, FsStats, SetAttr};
use crate::handles::FileHandle;
use crate::inodes::InodeNo;

/// A filesystem served by the FUSE engine (`ops.rs`, `fuse.rs`, `ring/`).
///
/// Node ids are the back-end's own (`1` is the root, as FUSE wants it);
/// handles are what its `open`/`opendir`/`create` returned. Errors are
/// [`Error`]s: the engine maps them with [`Error::errno`] and logs each
/// failure once at `debug` (no plaintext: [`Backend::describe`] names an
/// inode for that line). Every method may be called from several threads
/// at once.
pub trait Backend: Send + Sync + std::fmt::Debug + 'static {
    /// How long the kernel may cache attributes, names and absent names
    /// (the default of [`Backend::ttl`]).
    const TTL: Duration;
    /// Nothing is ever written: INIT asks for nothing only writes need
    /// (large writes, FUSE_HANDLE_KILLPRIV_V2).
    const READ_ONLY: bool = false;
    /// Whether listings are served as READDIRPLUS ([`Backend::readdirplus`]
    /// implemented; INIT then asks for FUSE_DO_READDIRPLUS).
    const READDIRPLUS: bool = false;

    /// How long the kernel may cache attributes, names and absent names
    /// for this mount: [`Backend::TTL`] unless the back-end's options say
    /// otherwise (a vault on shared storage: zero).
    fn ttl(&self) -> Duration {
        Self::TTL
    }

    /// Whether POSIX ACLs are served ([`Backend::getxattr`] and the other
    /// xattr calls take `system.posix_acl_access` and
    /// `system.posix_acl_default`, a missing one is [`Error::NoXattr`], and
    /// setting an access ACL updates the mode): INIT then asks for
    /// FUSE_POSIX_ACL, and the kernel checks, caches and inherits ACLs.
    /// Off by default: the kernel then asks for every entry's ACL when
    /// `ls -l` lists it (one GETXATTR per entry, bench/RESULTS.md).
    fn posix_acl(&self) -> bool {
        false
    }

    /// A plaintext-free description of inode `i` for a failure's log line
    /// (the vault: its backing path, base64url names only); `None`: the
    /// inode number says enough.
    fn describe(&self, _i: InodeNo) -> Option<String> {
        None
    }

    /// LOOKUP `name` in directory `parent`: its attributes (`ino` is its
    /// node id). [`Error::errno`] ENOENT becomes a negative entry.
    ///
    /// # Errors
    /// Whatever the back-end's lookup fails with.
    fn lookup(&self, parent: InodeNo, name: &OsStr) -> Result<FileAttr>;

    /// FORGET: the kernel dropped `nlookup` references to `i`.
    fn forget(&self, _i: InodeNo, _nlookup: u64) {}

    /// How many inodes the back-end's table may hold before the mount asks
    /// the kernel to drop unused ones (`prune.rs`); `None` (the default):
    /// no limit.
    fn inode_limit(&self) -> Option<usize> {
        None
    }

    /// How many inodes the back-end's table holds now (with a limit).
    fn cached_inodes(&self) -> usize {
        0
    }

    /// Up to `n` node ids (never the root) the kernel may be asked to drop
    /// when the table is over [`Backend::inode_limit`]; the kernel drops
    /// only those nothing uses, and sends FORGET for each.
    fn prune_candidates(&self, _n: usize) -> Vec<u64> {
        Vec::new()
    }

    /// ACCESS: whether the caller may access `i` with `mask` (access(2)'s
    /// mode: R_OK 4, W_OK 2, X_OK 1; 0: it exists). The kernel sends it
    /// only to mounts without `default_permissions` (for access(2),
    /// faccessat(2) and chdir(2)); the default answers yes, for back-ends
    /// whose mounts always have the kernel's checks.
    fn access(&self, _i: InodeNo, _mask: u32) -> Result<()> {
        Ok(())
    }

    /// GETATTR.
    ///
    /// # Errors
    /// As the back-end's.
    fn getattr(&self, i: InodeNo) -> Result<FileAttr>;

    /// SETATTR.
    ///
    /// # Errors
    /// [`Error::ReadOnly`] unless the back-end writes.
    fn setattr(&self, _i: InodeNo, _a: SetAttr) -> Result<FileAttr> {
        Err(Error::ReadOnly)
    }

    /// Clears setuid/setgid of `i` (FUSE_HANDLE_KILLPRIV_V2: a write or
    /// truncation by a caller without CAP_FSETID).
    ///
    /// # Errors
    /// [`Error::ReadOnly`] unless the back-end writes.
    fn kill_suid(&self, _i: InodeNo) -> Result<()> {
        Err(Error::ReadOnly)
    }

    /// READLINK: the target as the caller sees it.
    ///
    /// # Errors
    /// As the back-end's ([`crate::WrongType`] for a non-symlink).
    fn readlink(&self, i: InodeNo) -> Result<Vec<u8>>;

    /// MKNOD of `mode` (file type bits included) and device `rdev`.
    ///
    /// # Errors
    /// [`Error::ReadOnly`] unless the back-end writes.
    fn mknod(
        &self,
        _parent: InodeNo,
        _name: &OsStr,
        _mode: u32,
        _rdev: u32,
        _caller: Caller,
    ) -> Result<FileAttr> {
        Err(Error::ReadOnly)
    }

    /// MKDIR.
    ///
    /// # Errors
    /// [`Error::ReadOnly`] unless the back-end writes.
    fn mkdir(
        &self,
        _parent: InodeNo,
        _name: &OsStr,
        _mode: u32,
        _caller: Caller,
    ) -> Result<FileAttr> {
        Err(Error::ReadOnly)
    }

    /// UNLINK.
    ///
    /// # Errors
    /// [`Error::ReadOnly`] unless the back-end writes.
    fn unlink(&self, _parent: InodeNo, _name: &OsStr) -> Result<()> {
        Err(Error::ReadOnly)
    }

    /// RMDIR.
    ///
    /// # Errors
    /// [`Error::ReadOnly`] unless the back-end writes.
    fn rmdir(&self, _parent: InodeNo, _name: &OsStr) -> Result<()> {
        Err(Error::ReadOnly)
    }

    /// SYMLINK `name` -> `target` (plaintext bytes).
    ///
    /// # Errors
    /// [`Error::ReadOnly`] unless the back-end writes.
    fn symlink(
        &self,
        _parent: InodeNo,
        _name: &OsStr,
        _target: &[u8],
        _caller: Caller,
    ) -> Result<FileAttr> {
        Err(Error::ReadOnly)
    }

    /// RENAME / RENAME2 with the renameat2 `flags`.
    ///
    /// # Errors
    /// [`Error::ReadOnly`] unless the back-end writes.
    fn rename(
        &self,
        _parent: InodeNo,
        _name: &OsStr,
        _newparent: InodeNo,
        _newname: &OsStr,
        _flags: u32,
    ) -> Result<()> {
        Err(Error::ReadOnly)
    }

    /// LINK `i` as `newname` in `newparent`.
    ///
    /// # Errors
    /// [`Error::ReadOnly`] unless the back-end writes.
    fn link(&self, _i: InodeNo, _newparent: InodeNo, _newname: &OsStr) -> Result<FileAttr> {
        Err(Error::ReadOnly)
    }

    /// OPEN with the open(2) `flags`: the handle and the FOPEN_* reply
    /// flags (how the kernel should cache the file).
    ///
    /// # Errors
    /// As the back-end's.
    fn open(&self, i: InodeNo, flags: i32) -> Result<(FileHandle, FopenFlags)>;

    /// READ `size` bytes at `offset` of handle `h` into `buf`: the range of
    /// `buf` holding them. `buf` may be grown (never shrunk: the io_uring
    /// transport hands in an entry's payload buffer, at least
    /// `MAX_REQUEST` plus `READ_SLACK` bytes long, which must neither move
    /// nor lose length).
    ///
    /// # Errors
    /// As the back-end's ([`Error::BadHandle`] for an unknown handle).
    fn read(
        &self,
        h: FileHandle,
        offset: u64,
        size: u32,
        buf: &mut Vec<u8>,
    ) -> Result<Range<usize>>;

    /// WRITE `data` at `offset`: the bytes written.
    ///
    /// # Errors
    /// [`Error::ReadOnly`] unless the back-end writes.
    fn write(&self, _h: FileHandle, _offset: u64, _data: &[u8]) -> Result<u32> {
        Err(Error::ReadOnly)
    }

    /// RELEASE of a file handle.
    ///
    /// # Errors
    /// As the back-end's.
    fn release(&self, h: FileHandle) -> Result<()>;

    /// FLUSH of a file handle (each `close(2)` of a descriptor, before it
    /// returns). `Ok(false)`: the back-end has nothing to do on close, and
    /// the kernel is told to stop sending FLUSH (ENOSYS).
    ///
    /// # Errors
    /// As the back-end's.
    fn flush(&self, _h: FileHandle) -> Result<bool> {
        Ok(false)
    }

    /// FSYNC (`datasync`: fdatasync). Nothing to sync by default.
    ///
    /// # Errors
    /// As the back-end's.
    fn fsync(&self, _h: FileHandle, _datasync: bool) -> Result<()> {
        Ok(())
    }

    /// OPENDIR: the handle and the FOPEN_* reply flags.
    ///
    /// # Errors
    /// As the back-end's.
    fn opendir(&self, i: InodeNo) -> Result<(FileHandle, FopenFlags)>;

    /// READDIR from `offset`: `add(ino, next offset, type, name)` returns
    /// true when the reply is full.
    ///
    /// # Errors
    /// As the back-end's.
    fn readdir<F>(&self, h: FileHandle, offset: u64, add: F) -> Result<()>
    where
        F: FnMut(u64, u64, FileType, &OsStr) -> bool;

    /// READDIRPLUS from `offset` (only with [`Backend::READDIRPLUS`]):
    /// `add(next offset, name, attributes)` returns true when the reply is
    /// full; `attr.ino` is the entry's node id, and each entry given counts
    /// as a lookup of it.
    ///
    /// # Errors
    /// [`Error::NotImplemented`] by default.
    fn readdirplus<F>(&self, _h: FileHandle, _offset: u64, _add: F) -> Result<()>
    where
        F: FnMut(u64, &OsStr, &FileAttr) -> bool,
    {
        Err(Error::NotImplemented)
    }

    /// RELEASEDIR.
    ///
    /// # Errors
    /// As the back-end's.
    fn releasedir(&self, h: FileHandle) -> Result<()>;

    /// FSYNCDIR. Nothing to sync by default.
    ///
    /// # Errors
    /// As the back-end's.
    fn fsyncdir(&self, _i: InodeNo) -> Result<()> {
        Ok(())
    }

    /// STATFS.
    ///
    /// # Errors
    /// As the back-end's.
    fn statfs(&self) -> Result<FsStats>;

    /// SETXATTR with the setxattr(2) `flags`.
    ///
    /// # Errors
    /// [`Error::ReadOnly`] unless the back-end writes.
    fn setxattr(&self, _i: InodeNo, _name: &OsStr, _value: &[u8], _flags: i32) -> Result<()> {
        Err(Error::ReadOnly)
    }

    /// GETXATTR `name` of `i` for caller `uid` (a buffer of `size` bytes, 0:
    /// the size only; the engine checks the value fits).
    ///
    /// # Errors
    /// [`Error::NoXattr`] when absent, else as the back-end's.
    fn getxattr(&self, i: InodeNo, name: &OsStr, size: u32, uid: u32) -> Result<Vec<u8>>;

    /// LISTXATTR of `i` for caller `uid`: the names, each NUL-terminated.
    ///
    /// # Errors
    /// As the back-end's.
    fn listxattr(&self, i: InodeNo, uid: u32) -> Result<Vec<u8>>;

    /// Whether directory `dir` has a default ACL (only asked of a back-end
    /// with [`Backend::POSIX_ACL`]): a new entry in it then takes its mode
    /// from the ACL, and the creator's umask is not applied. Anything that
    /// cannot be read counts as none.
    fn has_default_acl(&self, _dir: InodeNo) -> bool {
        false
    }

    /// REMOVEXATTR.
    ///
    /// # Errors
    /// [`Error::ReadOnly`] unless the back-end writes.
    fn removexattr(&self, _i: InodeNo, _name: &OsStr) -> Result<()> {
        Err(Error::ReadOnly)
    }

    /// CREATE with the open(2) `flags`: attributes, handle, FOPEN_* flags.
    ///
    /// # Errors
    /// [`Error::ReadOnly`] unless the back-end writes.
    fn create(
        &self,
        _parent: InodeNo,
        _name: &OsStr,
        _mode: u32,
        _flags: i32,
        _caller: Caller,
    ) -> Result<(FileAttr, FileHandle, FopenFlags)> {
        Err(Error::ReadOnly)
    }

    /// FALLOCATE with the fallocate(2) `mode`.
    ///
    /// # Errors
    /// [`Error::ReadOnly`] unless the back-end writes.
    fn fallocate(&self, _h: FileHandle, _offset: u64, _length: u64, _mode: i32) -> Result<()> {
        Err(Error::ReadOnly)
    }
}

/// READDIR of a listing that does not change while its handle is open,
/// for the read-only back-ends (`image`, `reverse`): offsets 1 after `.`
/// (node `dot`), 2 after `..` (node `dotdot`), `3 + i` after entry `i`;
/// `entry(e)` gives an entry's `(node id, type, name)`. Stops when `add`
/// says the reply is full.
pub(crate) fn readdir_listing<T, F>(
    offset: u64,
    dot: u64,
    dotdot: u64,
    entries: &[T],
    entry: impl Fn(&T) -> (u64, FileType, &OsStr),
    mut add: F,
) where
    F: FnMut(u64, u64, FileType, &OsStr) -> bool,
{
    let mut next = offset;
    while next < 2 {
        let (name, of) = if next == 0 {
            (".", dot)
        } else {
            ("..", dotdot)
        };
        if add(of, next + 1, FileType::Directory, OsStr::new(name)) {
            return;
        }
        next += 1;
    }
    let skip = usize::try_from(next - 2).unwrap_or(usize::MAX);
    for (k, e) in entries.iter().enumerate().skip(skip) {
        let (ino, kind, name) = entry(e);
        if add(ino, k as u64 + 3, kind, name) {
            break;
        }
    }
}
