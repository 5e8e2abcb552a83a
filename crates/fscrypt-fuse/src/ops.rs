//! What each FUSE request does, whichever transport brought it: the
//! `fuser` adapter (`fuse.rs`, requests read from `/dev/fuse`) and FUSE
//! over io_uring (`ring/`) both call these methods, which count the
//! request, call the [`Backend`] (the vault's [`crate::EncryptedFs`], the
//! image's [`crate::image::ImageFs`]) and turn its errors into an errno
//! through [`crate::Error::errno`] only.
//!
//! Every failed operation leaves exactly one `debug` log line here, with the
//! operation's name, the error and plaintext-free identifiers: inode and
//! handle numbers and what the back-end tells of the inode
//! ([`Backend::describe`]: the vault's backing path, base64url names only).
//! Names given by the kernel are plaintext and never logged.

use std::ffi::OsStr;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use fuser::{Errno, FileAttr, FileType, FopenFlags, INodeNo};

use crate::backend::Backend;
use crate::error::Error;
use crate::fs::{Caller, FsStats, SetAttr};
use crate::handles::FileHandle;
use crate::inodes::InodeNo;
use crate::stats::{Op, RequestStats};

/// The most data one READ or WRITE request carries, bytes: what INIT asks
/// for (`max_write`, `max_readahead`, and so `max_pages`), the payload
/// buffer of each io_uring entry, and the read-ahead the mount is given
/// (`crate::widen_readahead`).
pub(crate) const MAX_REQUEST: u32 = 1 << 20;

/// The reply of a lookup that found nothing (node id 0: the kernel reads
/// nothing else of it).
pub(crate) fn negative_attr() -> FileAttr {
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: SystemTime::UNIX_EPOCH,
        mtime: SystemTime::UNIX_EPOCH,
        ctime: SystemTime::UNIX_EPOCH,
        crtime: SystemTime::UNIX_EPOCH,
        kind: FileType::RegularFile,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

/// The plaintext-free identifiers of an operation, for its log line.
#[derive(Debug, Clone, Copy)]
enum Id {
    /// An inode (also the directory of a name operation: the name itself
    /// is plaintext and never logged).
    Ino(InodeNo),
    /// Two inodes: link (inode, new parent), rename (parent, new parent).
    Two(InodeNo, InodeNo),
    /// An open file or directory handle.
    Fh(FileHandle),
    /// Nothing beyond the operation (statfs).
    Fs,
}

/// The answer to GETXATTR or LISTXATTR.
#[derive(Debug)]
pub(crate) enum Xattr {
    /// The caller asked for the size only (size 0).
    Size(u32),
    /// The value or the name list, within the caller's size.
    Data(Vec<u8>),
}

/// Result of an operation: the reply's value or the errno to send.
pub(crate) type Reply<T> = std::result::Result<T, Errno>;

/// The operations of a mount, shared by every serving thread of every
/// transport.
#[derive(Debug)]
pub(crate) struct Ops<B> {
    fs: B,
    /// Whether FUSE_HANDLE_KILLPRIV_V2 was negotiated.
    killpriv: AtomicBool,
    /// Whether FUSE_DONT_MASK was negotiated: the kernel sends create
    /// modes without the caller's umask, and [`Ops::creation_mode`]
    /// applies it.
    dont_mask: AtomicBool,
    /// Requests served, per opcode.
    stats: Arc<RequestStats>,
}

impl<B: Backend> Ops<B> {
    /// How long the kernel may cache what a reply says ([`Backend::ttl`]).
    pub(crate) fn ttl(&self) -> std::time::Duration {
        self.fs.ttl()
    }

    /// Whether the back-end serves POSIX ACLs ([`Backend::posix_acl`]).
    pub(crate) fn posix_acl(&self) -> bool {
        self.fs.posix_acl()
    }

    /// The operations of `fs`, counted in `stats`.
    pub(crate) fn new(fs: B, stats: Arc<RequestStats>) -> Ops<B> {
        Ops {
            fs,
            killpriv: AtomicBool::new(false),
            dont_mask: AtomicBool::new(false),
            stats,
        }
    }

    /// The back-end served.
    pub(crate) fn backend(&self) -> &B {
        &self.fs
    }

    /// The request counters.
    pub(crate) fn stats(&self) -> &Arc<RequestStats> {
        &self.stats
    }

    /// Records whether INIT negotiated FUSE_HANDLE_KILLPRIV_V2.
    pub(crate) fn set_killpriv(&self, on: bool) {
        self.killpriv.store(on, Ordering::Relaxed);
    }

    /// Records whether INIT negotiated FUSE_DONT_MASK.
    pub(crate) fn set_dont_mask(&self, on: bool) {
        self.dont_mask.store(on, Ordering::Relaxed);
    }

    /// The mode to create an entry of `parent` with, from the mode and the
    /// caller's umask the kernel sent. With FUSE_DONT_MASK (POSIX ACLs) the
    /// kernel leaves the umask to us: applied, unless `parent` has a default
    /// ACL, which the new entry inherits instead (its mode is then the
    /// requested one, masked by the ACL: POSIX.1e). Without it the kernel
    /// applied the umask already.
    fn creation_mode(&self, parent: InodeNo, mode: u32, umask: u32) -> u32 {
        if !self.dont_mask.load(Ordering::Relaxed) || self.fs.has_default_acl(parent) {
            mode
        } else {
            mode & !(umask & 0o777)
        }
    }

    /// The errno of a failed operation, after its one debug line.
    fn fail(&self, op: &'static str, id: Id, e: &Error) -> Errno {
        let n = e.errno();
        if log::log_enabled!(log::Level::Debug) {
            let path = |i: InodeNo| {
                self.fs
                    .describe(i)
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            };
            let what = match id {
                Id::Ino(i) => format!("ino {}{}", i.0, path(i)),
                Id::Two(a, b) => format!("ino {}{}, ino {}{}", a.0, path(a), b.0, path(b)),
                Id::Fh(h) => format!("fh {}", h.0),
                Id::Fs => "filesystem".to_string(),
            };
            log::debug!("fscrypt-fuse: {op} failed on {what}: {e} (errno {n})");
        }
        // A part of an image the reader refused is worth a warning (it
        // names inodes by number only).
        if matches!(e, Error::Image(_)) {
            log::warn!("fscrypt-fuse: {op} failed on {id:?}: {e} (errno {n})");
        }
        Errno::from_i32(n)
    }

    fn map<T>(&self, op: &'static str, id: Id, r: crate::Result<T>) -> Reply<T> {
        r.map_err(|e| self.fail(op, id, &e))
    }

    /// LOOKUP. A name that does not exist is a negative entry (node id 0
    /// with a TTL: the kernel caches the name's absence as long as it
    /// caches names), correct for the same reason as the positive TTL: a
    /// name made through this mount (create, mkdir, mknod, symlink, link,
    /// rename) replaces the kernel's negative dentry itself.
    pub(crate) fn lookup(&self, parent: InodeNo, name: &OsStr) -> Reply<FileAttr> {
        self.stats.count(Op::Lookup);
        match self.fs.lookup(parent, name) {
            Err(e) if e.errno() == libc::ENOENT => {
                // Still a failed lookup: its one debug line.
                let _ = self.fail("lookup", Id::Ino(parent), &e);
                Ok(negative_attr())
            }
            r => self.map("lookup", Id::Ino(parent), r),
        }
    }

    /// FORGET (and each inode of BATCH_FORGET).
    pub(crate) fn forget(&self, i: InodeNo, nlookup: u64) {
        self.stats.count(Op::Forget);
        self.fs.forget(i, nlookup);
    }

    /// GETATTR.
    pub(crate) fn getattr(&self, i: InodeNo) -> Reply<FileAttr> {
        self.stats.count(Op::Getattr);
        self.map("getattr", Id::Ino(i), self.fs.getattr(i))
    }

    /// SETATTR by the caller `uid`.
    pub(crate) fn setattr(&self, uid: u32, i: InodeNo, a: SetAttr) -> Reply<FileAttr> {
        self.stats.count(Op::Setattr);
        // With KILLPRIV_V2, truncation by a caller without CAP_FSETID (here:
        // any non-root caller) clears setuid/setgid, as the kernel would.
        if self.killpriv.load(Ordering::Relaxed) && a.size.is_some() && a.mode.is_none() && uid != 0
        {
            self.map("setattr", Id::Ino(i), self.fs.kill_suid(i))?;
        }
        self.map("setattr", Id::Ino(i), self.fs.setattr(i, a))
    }

    /// READLINK: the target.
    pub(crate) fn readlink(&self, i: InodeNo) -> Reply<Vec<u8>> {
        self.stats.count(Op::Readlink);
        self.map("readlink", Id::Ino(i), self.fs.readlink(i))
    }

    /// MKNOD; `umask`: the caller's ([`Ops::creation_mode`]).
    pub(crate) fn mknod(
        &self,
        parent: InodeNo,
        name: &OsStr,
        (mode, umask): (u32, u32),
        rdev: u32,
        caller: Caller,
    ) -> Reply<FileAttr> {
        self.stats.count(Op::Mknod);
        let mode = self.creation_mode(parent, mode, umask);
        let r = self.fs.mknod(parent, name, mode, rdev, caller);
        self.map("mknod", Id::Ino(parent), r)
    }

    /// MKDIR; `umask`: the caller's ([`Ops::creation_mode`]).
    pub(crate) fn mkdir(
        &self,
        parent: InodeNo,
        name: &OsStr,
        (mode, umask): (u32, u32),
        caller: Caller,
    ) -> Reply<FileAttr> {
        self.stats.count(Op::Mkdir);
        let mode = self.creation_mode(parent, mode, umask);
        let r = self.fs.mkdir(parent, name, mode, caller);
        self.map("mkdir", Id::Ino(parent), r)
    }

    /// UNLINK.
    pub(crate) fn unlink(&self, parent: InodeNo, name: &OsStr) -> Reply<()> {
        self.stats.count(Op::Unlink);
        self.map("unlink", Id::Ino(parent), self.fs.unlink(parent, name))
    }

    /// RMDIR.
    pub(crate) fn rmdir(&self, parent: InodeNo, name: &OsStr) -> Reply<()> {
        self.stats.count(Op::Rmdir);
        self.map("rmdir", Id::Ino(parent), self.fs.rmdir(parent, name))
    }

    /// SYMLINK `name` -> `target` (bytes of the plaintext target).
    pub(crate) fn symlink(
        &self,
        parent: InodeNo,
        name: &OsStr,
        target: &[u8],
        caller: Caller,
    ) -> Reply<FileAttr> {
        self.stats.count(Op::Symlink);
        let r = self.fs.symlink(parent, name, target, caller);
        self.map("symlink", Id::Ino(parent), r)
    }

    /// RENAME / RENAME2 with the renameat2 `flags`.
    pub(crate) fn rename(
        &self,
        parent: InodeNo,
        name: &OsStr,
        newparent: InodeNo,
        newname: &OsStr,
        flags: u32,
    ) -> Reply<()> {
        self.stats.count(Op::Rename);
        let r = self.fs.rename(parent, name, newparent, newname, flags);
        self.map("rename", Id::Two(parent, newparent), r)
    }

    /// LINK.
    pub(crate) fn link(&self, i: InodeNo, newparent: InodeNo, newname: &OsStr) -> Reply<FileAttr> {
        self.stats.count(Op::Link);
        let r = self.fs.link(i, newparent, newname);
        self.map("link", Id::Two(i, newparent), r)
    }

    /// OPEN with the open(2) `flags`: the handle and the FOPEN_* flags.
    pub(crate) fn open(&self, i: InodeNo, flags: i32) -> Reply<(FileHandle, FopenFlags)> {
        self.stats.count(Op::Open);
        let r = self.map("open", Id::Ino(i), self.fs.open(i, flags));
        if r.is_ok() {
            self.stats.handle_opened();
        }
        r
    }

    /// READ: the plaintext is left in `buf[range]`.
    pub(crate) fn read(
        &self,
        h: FileHandle,
        offset: u64,
        size: u32,
        buf: &mut Vec<u8>,
    ) -> Reply<Range<usize>> {
        self.stats.count(Op::Read);
        self.map("read", Id::Fh(h), self.fs.read(h, offset, size, buf))
    }

    /// WRITE; `kill_suidgid`: the kernel's FUSE_WRITE_KILL_SUIDGID.
    pub(crate) fn write(
        &self,
        i: InodeNo,
        h: FileHandle,
        offset: u64,
        data: &[u8],
        kill_suidgid: bool,
    ) -> Reply<u32> {
        self.stats.count(Op::Write);
        if kill_suidgid {
            self.map("write", Id::Ino(i), self.fs.kill_suid(i))?;
        }
        self.map("write", Id::Fh(h), self.fs.write(h, offset, data))
    }

    /// FLUSH. Where the back-end has nothing to do on close (it buffers
    /// nothing), ENOSYS makes the kernel stop sending FLUSH on every close
    /// (counted, so that a test sees it is sent once). Format 3 ends the
    /// file's write session here, before `close(2)` returns, so that no
    /// record write lands after a later `utimensat` or `stat`.
    pub(crate) fn flush(&self, h: FileHandle) -> Reply<()> {
        self.stats.count(Op::Flush);
        match self.map("flush", Id::Fh(h), self.fs.flush(h))? {
            true => Ok(()),
            false => Err(Errno::ENOSYS),
        }
    }

    /// RELEASE.
    pub(crate) fn release(&self, h: FileHandle) -> Reply<()> {
        self.stats.count(Op::Release);
        self.stats.handle_released();
        self.map("release", Id::Fh(h), self.fs.release(h))
    }

    /// FSYNC.
    pub(crate) fn fsync(&self, h: FileHandle, datasync: bool) -> Reply<()> {
        self.stats.count(Op::Fsync);
        self.map("fsync", Id::Fh(h), self.fs.fsync(h, datasync))
    }

    /// OPENDIR: the handle and the FOPEN_* flags.
    pub(crate) fn opendir(&self, i: InodeNo) -> Reply<(FileHandle, FopenFlags)> {
        self.stats.count(Op::Opendir);
        let r = self.map("opendir", Id::Ino(i), self.fs.opendir(i));
        if r.is_ok() {
            self.stats.handle_opened();
        }
        r
    }

    /// READDIR: `add(ino, next offset, type, name)` returns true when the
    /// reply is full ([`Backend::readdir`]).
    pub(crate) fn readdir(
        &self,
        h: FileHandle,
        offset: u64,
        add: impl FnMut(u64, u64, FileType, &OsStr) -> bool,
    ) -> Reply<()> {
        self.stats.count(Op::Readdir);
        self.map("readdir", Id::Fh(h), self.fs.readdir(h, offset, add))
    }

    /// READDIRPLUS: `add(next offset, name, attributes)` returns true when
    /// the reply is full; `attr.ino` is the entry's node id and its d_ino
    /// ([`Backend::readdirplus`]; the vault's: the kernel links no inode
    /// to "." and ".." nor to node id 1).
    pub(crate) fn readdirplus(
        &self,
        h: FileHandle,
        offset: u64,
        add: impl FnMut(u64, &OsStr, &FileAttr) -> bool,
    ) -> Reply<()> {
        self.stats.count(Op::Readdirplus);
        let r = self.fs.readdirplus(h, offset, add);
        self.map("readdirplus", Id::Fh(h), r)
    }

    /// RELEASEDIR.
    pub(crate) fn releasedir(&self, h: FileHandle) -> Reply<()> {
        self.stats.count(Op::Releasedir);
        self.stats.handle_released();
        self.map("releasedir", Id::Fh(h), self.fs.releasedir(h))
    }

    /// FSYNCDIR.
    pub(crate) fn fsyncdir(&self, i: InodeNo) -> Reply<()> {
        self.stats.count(Op::Fsyncdir);
        self.map("fsyncdir", Id::Ino(i), self.fs.fsyncdir(i))
    }

    /// STATFS.
    pub(crate) fn statfs(&self) -> Reply<FsStats> {
        self.stats.count(Op::Statfs);
        self.map("statfs", Id::Fs, self.fs.statfs())
    }

    /// SETXATTR with the setxattr(2) `flags`.
    pub(crate) fn setxattr(&self, i: InodeNo, name: &OsStr, value: &[u8], flags: i32) -> Reply<()> {
        self.stats.count(Op::Setxattr);
        let r = self.fs.setxattr(i, name, value, flags);
        self.map("setxattr", Id::Ino(i), r)
    }

    /// GETXATTR by the caller `uid` for a buffer of `size` bytes (0: the
    /// size only).
    pub(crate) fn getxattr(&self, uid: u32, i: InodeNo, name: &OsStr, size: u32) -> Reply<Xattr> {
        self.stats.count(Op::Getxattr);
        let r = self.fs.getxattr(i, name, size, uid);
        sized("getxattr", self.map("getxattr", Id::Ino(i), r)?, size)
    }

    /// LISTXATTR by the caller `uid` for a buffer of `size` bytes (0: the
    /// size only).
    pub(crate) fn listxattr(&self, uid: u32, i: InodeNo, size: u32) -> Reply<Xattr> {
        self.stats.count(Op::Listxattr);
        let r = self.fs.listxattr(i, uid);
        sized("listxattr", self.map("listxattr", Id::Ino(i), r)?, size)
    }

    /// REMOVEXATTR.
    pub(crate) fn removexattr(&self, i: InodeNo, name: &OsStr) -> Reply<()> {
        self.stats.count(Op::Removexattr);
        let r = self.fs.removexattr(i, name);
        self.map("removexattr", Id::Ino(i), r)
    }

    /// ACCESS (access(2), chdir(2); only sent without
    /// `default_permissions`): `mask` as access(2)'s mode.
    pub(crate) fn access(&self, i: InodeNo, mask: u32) -> Reply<()> {
        self.stats.count(Op::Access);
        self.map("access", Id::Ino(i), self.fs.access(i, mask))
    }

    /// CREATE with the open(2) `flags`: attributes, handle, FOPEN_* flags;
    /// `umask`: the caller's ([`Ops::creation_mode`]).
    pub(crate) fn create(
        &self,
        parent: InodeNo,
        name: &OsStr,
        (mode, umask): (u32, u32),
        flags: i32,
        caller: Caller,
    ) -> Reply<(FileAttr, FileHandle, FopenFlags)> {
        self.stats.count(Op::Create);
        let mode = self.creation_mode(parent, mode, umask);
        let r = self.fs.create(parent, name, mode, flags, caller);
        let r = self.map("create", Id::Ino(parent), r);
        if r.is_ok() {
            self.stats.handle_opened();
        }
        r
    }

    /// FALLOCATE with the fallocate(2) `mode`.
    pub(crate) fn fallocate(
        &self,
        h: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
    ) -> Reply<()> {
        self.stats.count(Op::Fallocate);
        let r = self.fs.fallocate(h, offset, length, mode);
        self.map("fallocate", Id::Fh(h), r)
    }

    /// DESTROY: the counters go to the log (they hold no names).
    pub(crate) fn destroy(&self) {
        self.stats.count(Op::Destroy);
        log::info!(
            "fscrypt-fuse: FUSE requests served: {}",
            self.stats.snapshot()
        );
    }
}

/// An xattr value or list for a caller's buffer of `size` bytes.
fn sized(op: &'static str, v: Vec<u8>, size: u32) -> Reply<Xattr> {
    if size == 0 {
        Ok(Xattr::Size(v.len() as u32))
    } else if v.len() > size as usize {
        log::debug!("fscrypt-fuse: {op}: value larger than the caller's buffer (ERANGE)");
        Err(Errno::from_i32(libc::ERANGE))
    } else {
        Ok(Xattr::Data(v))
    }
}
