//! The thin `fuser::Filesystem` adapter over [`EncryptedFs`]: converts
//! arguments, calls the filesystem and replies; errors become errno through
//! [`crate::Error::errno`] only.
//!
//! Every failed operation leaves exactly one `debug` log line here, with the
//! operation's name, the error and plaintext-free identifiers: inode and
//! handle numbers and the backing path of the inode (base64url names only).
//! Names given by the kernel are plaintext and never logged.

use std::cell::RefCell;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, Errno, FileAttr, FileType, FopenFlags, Generation, INodeNo, KernelConfig,
    LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr,
    Request, TimeOrNow, WriteFlags,
};

use crate::error::Error;
use crate::fs::{Caller, EncryptedFs, SetAttr, SetTime};
use crate::handles::FileHandle;
use crate::inodes::{InodeNo, Kind};
use crate::stats::{Op, RequestStats};

/// How long the kernel may cache attributes, names and absent names
/// (negative entries). Changes made through this mount never wait for it:
/// the kernel updates or invalidates what it changes itself (the inode of
/// both names of a hard link, since they share one node id; the target of
/// a rename over a name; size and mtime after a write without writeback
/// cache; a directory's attributes after any change in it; mode after a
/// killpriv write), and the test `round_trips::cached_attributes_follow_
/// our_own_changes` checks each of these. The TTL only bounds how long a
/// change made *behind* the mount (the backing directory is untrusted and
/// may be a synced folder) stays invisible, so it stays short: 1 s, as
/// gocryptfs (and libfuse's default) have it. A longer TTL would save the
/// LOOKUP/GETATTR of a name revisited after more than a second, which
/// readdirplus already saves for listings.
const TTL: Duration = Duration::from_secs(1);

/// The most data one READ or WRITE request carries, bytes: what INIT asks
/// for (`max_write`, `max_readahead`, and so `max_pages`), and the
/// read-ahead the mount is given (`crate::widen_readahead`).
pub(crate) const MAX_REQUEST: u32 = 1 << 20;

thread_local! {
    static READ_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The FUSE adapter.
#[derive(Debug)]
pub struct FuseAdapter {
    fs: EncryptedFs,
    /// Whether FUSE_HANDLE_KILLPRIV_V2 was negotiated.
    killpriv: bool,
    /// Requests served, per opcode.
    stats: Arc<RequestStats>,
}

impl FuseAdapter {
    /// Wraps a filesystem.
    pub fn new(fs: EncryptedFs) -> FuseAdapter {
        FuseAdapter {
            fs,
            killpriv: false,
            stats: Arc::new(RequestStats::new()),
        }
    }

    /// The request counters (shared: they stay readable after the
    /// session took the adapter).
    pub fn stats(&self) -> Arc<RequestStats> {
        self.stats.clone()
    }
}

fn caller(req: &Request) -> Caller {
    Caller {
        uid: req.uid(),
        gid: req.gid(),
    }
}

fn ino(i: INodeNo) -> InodeNo {
    InodeNo(i.0)
}

fn fh(h: fuser::FileHandle) -> FileHandle {
    FileHandle(h.0)
}

fn ftype(k: Kind) -> FileType {
    match k {
        Kind::Dir => FileType::Directory,
        Kind::File => FileType::RegularFile,
        Kind::Symlink => FileType::Symlink,
        Kind::Special => FileType::NamedPipe,
    }
}

/// The reply of a lookup that found nothing (node id 0: the kernel reads
/// nothing else of it).
fn negative_attr() -> FileAttr {
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

/// How the kernel should do I/O on a file opened with `flags` (the open's
/// FOPEN_* reply flags).
///
/// A write-only handle gets `FOPEN_DIRECT_IO`. The kernel's cached write
/// path (`fuse_cache_write_iter` -> `kiocb_modified` ->
/// `file_remove_privs`) asks for `security.capability` with a GETXATTR
/// round trip before the first write after any attribute refresh, so every
/// newly created file paid one synchronous round trip for it; the direct
/// path (`fuse_direct_write_iter`) asks nothing and sends
/// `FUSE_WRITE_KILL_SUIDGID` with each write instead, which `write` below
/// honours. Nothing else changes for such a handle: it cannot read, so
/// there is nothing of it to cache, and it cannot be mapped (mmap needs a
/// readable fd). Other handles of the same file keep the page cache; a
/// direct write invalidates the cached pages it covers (`fuse_direct_io`,
/// Linux 6.6 and later), so readers see it as they saw cached writes. The
/// writes themselves reach the daemon as before: one WRITE per write(2) of
/// up to `max_write` bytes, from the caller's pages without a copy into
/// the page cache.
fn open_flags(flags: i32) -> FopenFlags {
    if flags & libc::O_ACCMODE == libc::O_WRONLY {
        FopenFlags::FOPEN_DIRECT_IO
    } else {
        FopenFlags::empty()
    }
}

fn settime(t: Option<TimeOrNow>) -> Option<SetTime> {
    t.map(|t| match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(s) => SetTime::At(s),
    })
}

/// The plaintext-free identifiers of an operation, for its log line.
#[derive(Debug, Clone, Copy)]
enum Id {
    /// An inode (also the directory of a name operation: the name itself
    /// is plaintext and never logged).
    Ino(INodeNo),
    /// Two inodes: link (inode, new parent), rename (parent, new parent).
    Two(INodeNo, INodeNo),
    /// An open file or directory handle.
    Fh(fuser::FileHandle),
    /// Nothing beyond the operation (statfs).
    Fs,
}

impl FuseAdapter {
    /// The errno of a failed operation, after its one debug line.
    fn fail(&self, op: &'static str, id: Id, e: &Error) -> Errno {
        let n = e.errno();
        if log::log_enabled!(log::Level::Debug) {
            let path = |i: INodeNo| {
                self.fs
                    .backing_path_of(ino(i))
                    .map(|p| format!(" (backing {})", p.display()))
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
        Errno::from_i32(n)
    }

    fn entry(&self, op: &'static str, id: Id, reply: ReplyEntry, r: Result<FileAttr, Error>) {
        match r {
            Ok(a) => reply.entry(&TTL, &a, Generation(0)),
            Err(e) => reply.error(self.fail(op, id, &e)),
        }
    }

    fn empty(&self, op: &'static str, id: Id, reply: ReplyEmpty, r: Result<(), Error>) {
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.fail(op, id, &e)),
        }
    }

    fn xattr_reply(
        &self,
        op: &'static str,
        id: Id,
        reply: ReplyXattr,
        size: u32,
        r: Result<Vec<u8>, Error>,
    ) {
        match r {
            Ok(v) if size == 0 => reply.size(v.len() as u32),
            Ok(v) if v.len() > size as usize => reply.error(Errno::from_i32(libc::ERANGE)),
            Ok(v) => reply.data(&v),
            Err(e) => reply.error(self.fail(op, id, &e)),
        }
    }
}

impl fuser::Filesystem for FuseAdapter {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        self.stats.count(Op::Init);
        // Large writes: the kernel caps this at its max_pages (1 MiB by default).
        let _ = config.set_max_write(MAX_REQUEST);
        let _ = config.set_max_readahead(MAX_REQUEST);
        // We clear setuid/setgid ourselves (write flag, truncate, backing
        // chown), so the kernel need not ask for security.capability before
        // every write (one round trip less per write).
        self.killpriv = config
            .add_capabilities(fuser::InitFlags::FUSE_HANDLE_KILLPRIV_V2)
            .is_ok();
        // Directory operations on different names may run in parallel.
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_PARALLEL_DIROPS);
        // No FUSE_WRITEBACK_CACHE. With it, a write() returns once the page
        // cache holds the data and the daemon gets it at writeback, in any
        // order: (1) data that write() acknowledged is lost if the daemon
        // dies before writeback: the dirty pages are the kernel's and have
        // nowhere to go (today a returned write is in the backing file, so
        // it survives a kill -9 of the daemon: docs/vault-format.md §11,
        // "write"); (2) a page at a higher offset written back first makes
        // the header's size claim the bytes of the lower pages, not yet
        // written (§4: "a file's size never claims bytes that were not
        // written"); (3) the kernel owns size and mtime and turns O_WRONLY
        // opens into O_RDWR for read-modify-write of partial pages, which
        // the daemon would have to allow. fsync'd data would stay safe,
        // but (1) and (2) do not hold, so it stays off.
        //
        // The GETXATTR security.capability the kernel sends before the
        // first cached write to an inode (after that it marks the inode
        // S_NOSEC, set up by FUSE_HANDLE_KILLPRIV_V2 above, until the next
        // attribute refresh) is answered without backing I/O (fs/xattr.rs);
        // ENOSYS would stop it but also every user.* xattr. Write-only
        // handles avoid it altogether (`open_flags`).
        //
        // readdirplus for every batch of a listing: it answers the lookups
        // of its entries, so that `ls -l`, `du` and `rm -rf` need no LOOKUP
        // per entry. Not READDIRPLUS_AUTO: with it the kernel asks for
        // attributes on the first batch only, and later only once entries
        // of the directory were stat'ed in between, which tools that read
        // the whole directory first (fts: du, rm -rf, find) never do: each
        // entry after the first batch then cost a LOOKUP. The price is a
        // stat per entry for plain `ls`/`find` too, as in gocryptfs
        // (bench/RESULTS.md: 10,000 entries cold, `du -s` 0.26 -> 0.10 s,
        // `ls -f` 0.02 -> 0.07 s).
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_DO_READDIRPLUS);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.stats.count(Op::Lookup);
        match self.fs.lookup(ino(parent), name) {
            // Negative entry: node id 0 with a TTL lets the kernel cache the
            // name's absence as long as it caches names. Correct for the same
            // reason as the positive TTL: a name made through this mount
            // (create, mkdir, mknod, symlink, link, rename) replaces the
            // kernel's negative dentry itself.
            Err(e) if e.errno() == libc::ENOENT => {
                // Still a failed lookup: its one debug line.
                let _ = self.fail("lookup", Id::Ino(parent), &e);
                reply.entry(&TTL, &negative_attr(), Generation(0))
            }
            r => self.entry("lookup", Id::Ino(parent), reply, r),
        }
    }

    fn forget(&self, _req: &Request, i: INodeNo, nlookup: u64) {
        self.stats.count(Op::Forget);
        self.fs.forget(ino(i), nlookup);
    }

    fn destroy(&mut self) {
        self.stats.count(Op::Destroy);
        log::info!(
            "fscrypt-fuse: FUSE requests served: {}",
            self.stats.snapshot()
        );
    }

    fn getattr(
        &self,
        _req: &Request,
        i: INodeNo,
        _fh: Option<fuser::FileHandle>,
        reply: ReplyAttr,
    ) {
        self.stats.count(Op::Getattr);
        match self.fs.getattr(ino(i)) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(self.fail("getattr", Id::Ino(i), &e)),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        i: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<fuser::FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        self.stats.count(Op::Setattr);
        let a = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: settime(atime),
            mtime: settime(mtime),
        };
        // With KILLPRIV_V2, truncation by a caller without CAP_FSETID (here:
        // any non-root caller) clears setuid/setgid, as the kernel would.
        if self.killpriv
            && size.is_some()
            && mode.is_none()
            && req.uid() != 0
            && let Err(e) = self.fs.kill_suid(ino(i))
        {
            reply.error(self.fail("setattr", Id::Ino(i), &e));
            return;
        }
        match self.fs.setattr(ino(i), a) {
            Ok(a) => reply.attr(&TTL, &a),
            Err(e) => reply.error(self.fail("setattr", Id::Ino(i), &e)),
        }
    }

    fn readlink(&self, _req: &Request, i: INodeNo, reply: ReplyData) {
        self.stats.count(Op::Readlink);
        match self.fs.readlink(ino(i)) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(self.fail("readlink", Id::Ino(i), &e)),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        self.stats.count(Op::Mknod);
        let r = self.fs.mknod(ino(parent), name, mode, rdev, caller(req));
        self.entry("mknod", Id::Ino(parent), reply, r);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        self.stats.count(Op::Mkdir);
        let r = self.fs.mkdir(ino(parent), name, mode, caller(req));
        self.entry("mkdir", Id::Ino(parent), reply, r);
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.stats.count(Op::Unlink);
        let r = self.fs.unlink(ino(parent), name);
        self.empty("unlink", Id::Ino(parent), reply, r);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.stats.count(Op::Rmdir);
        let r = self.fs.rmdir(ino(parent), name);
        self.empty("rmdir", Id::Ino(parent), reply, r);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        self.stats.count(Op::Symlink);
        let r = self.fs.symlink(
            ino(parent),
            link_name,
            target.as_os_str().as_bytes(),
            caller(req),
        );
        self.entry("symlink", Id::Ino(parent), reply, r);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        self.stats.count(Op::Rename);
        let r = self
            .fs
            .rename(ino(parent), name, ino(newparent), newname, flags.bits());
        self.empty("rename", Id::Two(parent, newparent), reply, r);
    }

    fn link(
        &self,
        _req: &Request,
        i: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.stats.count(Op::Link);
        let r = self.fs.link(ino(i), ino(newparent), newname);
        self.entry("link", Id::Two(i, newparent), reply, r);
    }

    fn open(&self, _req: &Request, i: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.stats.count(Op::Open);
        match self.fs.open(ino(i), flags.0) {
            Ok(h) => reply.opened(fuser::FileHandle(h.0), open_flags(flags.0)),
            Err(e) => reply.error(self.fail("open", Id::Ino(i), &e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _i: INodeNo,
        h: fuser::FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.stats.count(Op::Read);
        READ_BUF.with(|cell| {
            let mut buf = cell.borrow_mut();
            match self.fs.read(fh(h), offset, size, &mut buf) {
                Ok(r) => reply.data(&buf[r]),
                Err(e) => reply.error(self.fail("read", Id::Fh(h), &e)),
            }
        });
    }

    fn write(
        &self,
        _req: &Request,
        i: INodeNo,
        h: fuser::FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        self.stats.count(Op::Write);
        if write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID)
            && let Err(e) = self.fs.kill_suid(ino(i))
        {
            reply.error(self.fail("write", Id::Ino(i), &e));
            return;
        }
        match self.fs.write(fh(h), offset, data) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(self.fail("write", Id::Fh(h), &e)),
        }
    }

    /// We buffer nothing: ENOSYS makes the kernel stop sending FLUSH on
    /// every close (counted, so that a test sees it is sent once).
    fn flush(
        &self,
        _req: &Request,
        _i: INodeNo,
        _h: fuser::FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        self.stats.count(Op::Flush);
        reply.error(Errno::ENOSYS);
    }

    fn release(
        &self,
        _req: &Request,
        _i: INodeNo,
        h: fuser::FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.stats.count(Op::Release);
        let r = self.fs.release(fh(h));
        self.empty("release", Id::Fh(h), reply, r);
    }

    fn fsync(
        &self,
        _req: &Request,
        _i: INodeNo,
        h: fuser::FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.stats.count(Op::Fsync);
        let r = self.fs.fsync(fh(h), datasync);
        self.empty("fsync", Id::Fh(h), reply, r);
    }

    fn opendir(&self, _req: &Request, i: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.stats.count(Op::Opendir);
        match self.fs.opendir(ino(i)) {
            Ok(h) => reply.opened(fuser::FileHandle(h.0), FopenFlags::empty()),
            Err(e) => reply.error(self.fail("opendir", Id::Ino(i), &e)),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        _i: INodeNo,
        h: fuser::FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        self.stats.count(Op::Readdir);
        let r = self.fs.readdir(fh(h), offset, |ino, off, kind, name| {
            reply.add(INodeNo(ino), off, ftype(kind), name)
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.fail("readdir", Id::Fh(h), &e)),
        }
    }

    fn readdirplus(
        &self,
        _req: &Request,
        _i: INodeNo,
        h: fuser::FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        self.stats.count(Op::Readdirplus);
        // fuser writes `attr.ino` as both the entry's node id and its d_ino;
        // the kernel links no inode to "." and ".." nor to node id 1 (see
        // `EncryptedFs::readdirplus`).
        let r = self.fs.readdirplus(fh(h), offset, |off, name, attr, _| {
            reply.add(attr.ino, off, name, &TTL, attr, Generation(0))
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(self.fail("readdirplus", Id::Fh(h), &e)),
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        _i: INodeNo,
        h: fuser::FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.stats.count(Op::Releasedir);
        let r = self.fs.releasedir(fh(h));
        self.empty("releasedir", Id::Fh(h), reply, r);
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        i: INodeNo,
        _fh: fuser::FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.stats.count(Op::Fsyncdir);
        let r = self.fs.fsyncdir(ino(i));
        self.empty("fsyncdir", Id::Ino(i), reply, r);
    }

    fn statfs(&self, _req: &Request, _i: INodeNo, reply: ReplyStatfs) {
        self.stats.count(Op::Statfs);
        match self.fs.statfs() {
            Ok(s) => reply.statfs(
                s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize,
            ),
            Err(e) => reply.error(self.fail("statfs", Id::Fs, &e)),
        }
    }

    fn setxattr(
        &self,
        _req: &Request,
        i: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        self.stats.count(Op::Setxattr);
        let r = self.fs.setxattr(ino(i), name, value, flags);
        self.empty("setxattr", Id::Ino(i), reply, r);
    }

    fn getxattr(&self, _req: &Request, i: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        self.stats.count(Op::Getxattr);
        let r = self.fs.getxattr(ino(i), name, size);
        self.xattr_reply("getxattr", Id::Ino(i), reply, size, r);
    }

    fn listxattr(&self, _req: &Request, i: INodeNo, size: u32, reply: ReplyXattr) {
        self.stats.count(Op::Listxattr);
        let r = self.fs.listxattr(ino(i));
        self.xattr_reply("listxattr", Id::Ino(i), reply, size, r);
    }

    fn removexattr(&self, _req: &Request, i: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.stats.count(Op::Removexattr);
        let r = self.fs.removexattr(ino(i), name);
        self.empty("removexattr", Id::Ino(i), reply, r);
    }

    fn access(&self, _req: &Request, _i: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        self.stats.count(Op::Access);
        // Permission checks are the kernel's (default_permissions).
        reply.ok();
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        self.stats.count(Op::Create);
        match self.fs.create(ino(parent), name, mode, flags, caller(req)) {
            Ok((a, h)) => reply.created(
                &TTL,
                &a,
                Generation(0),
                fuser::FileHandle(h.0),
                open_flags(flags),
            ),
            Err(e) => reply.error(self.fail("create", Id::Ino(parent), &e)),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        _i: INodeNo,
        h: fuser::FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.stats.count(Op::Fallocate);
        let r = self.fs.fallocate(fh(h), offset, length, mode);
        self.empty("fallocate", Id::Fh(h), reply, r);
    }
}
