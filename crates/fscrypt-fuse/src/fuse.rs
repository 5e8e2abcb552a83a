//! The thin `fuser::Filesystem` adapter: converts fuser's arguments, calls
//! [`Ops`] (what each request does, shared with the io_uring transport)
//! and replies.
//!
//! INIT is negotiated here; when the kernel offers FUSE over io_uring and
//! the mount allows it, the ring's serving threads start from here too
//! (`crate::ring`), and from then on `/dev/fuse` carries only what the
//! kernel never puts on the ring (FORGET, INTERRUPT) and whatever arrives
//! before the ring is complete.

use std::cell::RefCell;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, FileAttr, FopenFlags, Generation, INodeNo, KernelConfig, LockOwner, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};

use crate::backend::Backend;
use crate::fs::{Caller, SetAttr, SetTime};
use crate::handles::FileHandle;
use crate::inodes::InodeNo;
use crate::ops::{MAX_REQUEST, Ops, Reply, Xattr};
use crate::ring::Ring;
use crate::stats::{Op, RequestStats};

thread_local! {
    static READ_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The FUSE adapter of back-end `B`.
#[derive(Debug)]
pub struct FuseAdapter<B> {
    ops: Arc<Ops<B>>,
    /// FUSE over io_uring, started at INIT if the kernel offers it.
    ring: Arc<Ring>,
}

impl<B: Backend> FuseAdapter<B> {
    /// Wraps a filesystem; `ring` says whether and how FUSE over io_uring
    /// may serve it.
    pub(crate) fn new(fs: B, ring: Arc<Ring>) -> FuseAdapter<B> {
        FuseAdapter {
            ops: Arc::new(Ops::new(fs, Arc::new(RequestStats::new()))),
            ring,
        }
    }

    /// The request counters (shared: they stay readable after the
    /// session took the adapter).
    pub fn stats(&self) -> Arc<RequestStats> {
        self.ops.stats().clone()
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

fn settime(t: Option<TimeOrNow>) -> Option<SetTime> {
    t.map(|t| match t {
        TimeOrNow::Now => SetTime::Now,
        TimeOrNow::SpecificTime(s) => SetTime::At(s),
    })
}

fn entry(reply: ReplyEntry, r: Reply<FileAttr>, ttl: Duration) {
    match r {
        Ok(a) => reply.entry(&ttl, &a, Generation(0)),
        Err(e) => reply.error(e),
    }
}

fn attr(reply: ReplyAttr, r: Reply<FileAttr>, ttl: Duration) {
    match r {
        Ok(a) => reply.attr(&ttl, &a),
        Err(e) => reply.error(e),
    }
}

fn empty(reply: ReplyEmpty, r: Reply<()>) {
    match r {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}

fn opened(reply: ReplyOpen, r: Reply<(FileHandle, FopenFlags)>) {
    match r {
        Ok((h, flags)) => reply.opened(fuser::FileHandle(h.0), flags),
        Err(e) => reply.error(e),
    }
}

fn xattr(reply: ReplyXattr, r: Reply<Xattr>) {
    match r {
        Ok(Xattr::Size(n)) => reply.size(n),
        Ok(Xattr::Data(v)) => reply.data(&v),
        Err(e) => reply.error(e),
    }
}

impl<B: Backend> fuser::Filesystem for FuseAdapter<B> {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        self.ops.stats().count(Op::Init);
        let _ = config.set_max_readahead(MAX_REQUEST);
        // Large writes (the kernel's max_pages, 1 MiB by default, caps a
        // request anyway). Read-only back-ends too: the kernel sizes every
        // io_uring payload buffer for max_write (fs/fuse/dev_uring.c), and
        // fuser's default (16 MiB) would refuse the ring's 1 MiB buffers.
        let _ = config.set_max_write(MAX_REQUEST);
        if !B::READ_ONLY {
            // We clear setuid/setgid ourselves (write flag, truncate,
            // backing chown), so the kernel need not ask for
            // security.capability before every write (one round trip less
            // per write).
            self.ops.set_killpriv(
                config
                    .add_capabilities(fuser::InitFlags::FUSE_HANDLE_KILLPRIV_V2)
                    .is_ok(),
            );
        }
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
        // handles avoid it altogether (`fs::engine::open_flags`).
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
        //
        // Only for a back-end that serves READDIRPLUS (the vault).
        if B::READDIRPLUS {
            let _ = config.add_capabilities(fuser::InitFlags::FUSE_DO_READDIRPLUS);
        }
        // POSIX ACLs (the vault): the kernel checks them with the mode
        // bits (default_permissions), caches them, refuses to set them for
        // anyone but the owner, and asks for them as the xattrs
        // system.posix_acl_access/_default, which the back-end keeps (and
        // updates the mode with, fs/xattr.rs). A directory's default ACL is
        // inherited as the backing filesystem inherits it (the back-end
        // creates the backing object in the backing directory that carries
        // it); with FUSE_DONT_MASK the kernel leaves the caller's umask to
        // us, applied only where no default ACL is (`Ops::creation_mode`),
        // as POSIX.1e wants. One GETXATTR per inode on its first permission
        // check that needs the ACL (cached until its attributes are
        // refreshed).
        if self.ops.posix_acl()
            && config
                .add_capabilities(fuser::InitFlags::FUSE_POSIX_ACL)
                .is_ok()
        {
            self.ops.set_dont_mask(
                config
                    .add_capabilities(fuser::InitFlags::FUSE_DONT_MASK)
                    .is_ok(),
            );
        }
        // FUSE over io_uring when the kernel offers it (Linux 6.14+, and
        // only once root enabled it: /sys/module/fuse/parameters/
        // enable_uring) and the mount allows it (`crate::ring`).
        if self.ring.wanted()
            && config
                .add_capabilities(fuser::InitFlags::FUSE_OVER_IO_URING)
                .is_ok()
        {
            self.ring.start(self.ops.clone());
        }
        // A bounded inode table (`prune.rs`): FUSE_NOTIFY_PRUNE is 7.45.
        if let Some(limit) = self.ops.backend().inode_limit()
            && let Some(dev) = self.ring.device()
        {
            let abi = config.kernel_abi();
            if (abi.0, abi.1) >= (7, 45) {
                crate::prune::start(dev, &self.ops, limit);
            } else {
                log::info!(
                    "fscrypt-fuse: FUSE {}.{} cannot drop cached inodes on request (7.45, Linux \
                     6.18): the daemon keeps an entry per inode the kernel caches",
                    abi.0,
                    abi.1
                );
            }
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        entry(reply, self.ops.lookup(ino(parent), name), self.ops.ttl());
    }

    fn forget(&self, _req: &Request, i: INodeNo, nlookup: u64) {
        self.ops.forget(ino(i), nlookup);
    }

    fn destroy(&mut self) {
        self.ops.destroy();
    }

    fn getattr(
        &self,
        _req: &Request,
        i: INodeNo,
        _fh: Option<fuser::FileHandle>,
        reply: ReplyAttr,
    ) {
        attr(reply, self.ops.getattr(ino(i)), self.ops.ttl());
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
        fh: Option<fuser::FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let a = SetAttr {
            mode,
            uid,
            gid,
            size,
            atime: settime(atime),
            mtime: settime(mtime),
            through_handle: fh.is_some(),
        };
        attr(
            reply,
            self.ops.setattr(req.uid(), ino(i), a),
            self.ops.ttl(),
        );
    }

    fn readlink(&self, _req: &Request, i: INodeNo, reply: ReplyData) {
        match self.ops.readlink(ino(i)) {
            Ok(t) => reply.data(&t),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let r = self
            .ops
            .mknod(ino(parent), name, (mode, umask), rdev, caller(req));
        entry(reply, r, self.ops.ttl());
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let r = self
            .ops
            .mkdir(ino(parent), name, (mode, umask), caller(req));
        entry(reply, r, self.ops.ttl());
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(reply, self.ops.unlink(ino(parent), name));
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(reply, self.ops.rmdir(ino(parent), name));
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let target = target.as_os_str().as_bytes();
        let r = self
            .ops
            .symlink(ino(parent), link_name, target, caller(req));
        entry(reply, r, self.ops.ttl());
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
        let r = self
            .ops
            .rename(ino(parent), name, ino(newparent), newname, flags.bits());
        empty(reply, r);
    }

    fn link(
        &self,
        _req: &Request,
        i: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        entry(
            reply,
            self.ops.link(ino(i), ino(newparent), newname),
            self.ops.ttl(),
        );
    }

    fn open(&self, _req: &Request, i: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        opened(reply, self.ops.open(ino(i), flags.0));
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
        READ_BUF.with(|cell| {
            let mut buf = cell.borrow_mut();
            match self.ops.read(fh(h), offset, size, &mut buf) {
                Ok(r) => reply.data(&buf[r]),
                Err(e) => reply.error(e),
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
        let kill = write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID);
        match self.ops.write(ino(i), fh(h), offset, data, kill) {
            Ok(n) => reply.written(n),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _i: INodeNo,
        h: fuser::FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        empty(reply, self.ops.flush(fh(h)));
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
        empty(reply, self.ops.release(fh(h)));
    }

    fn fsync(
        &self,
        _req: &Request,
        _i: INodeNo,
        h: fuser::FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        empty(reply, self.ops.fsync(fh(h), datasync));
    }

    fn opendir(&self, _req: &Request, i: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        opened(reply, self.ops.opendir(ino(i)));
    }

    fn readdir(
        &self,
        _req: &Request,
        _i: INodeNo,
        h: fuser::FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let r = self.ops.readdir(fh(h), offset, |ino, off, kind, name| {
            reply.add(INodeNo(ino), off, kind, name)
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
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
        // fuser writes `attr.ino` as both the entry's node id and its d_ino.
        let ttl = self.ops.ttl();
        let r = self.ops.readdirplus(fh(h), offset, |off, name, attr| {
            reply.add(attr.ino, off, name, &ttl, attr, Generation(0))
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
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
        empty(reply, self.ops.releasedir(fh(h)));
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        i: INodeNo,
        _fh: fuser::FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        empty(reply, self.ops.fsyncdir(ino(i)));
    }

    fn statfs(&self, _req: &Request, _i: INodeNo, reply: ReplyStatfs) {
        match self.ops.statfs() {
            Ok(s) => reply.statfs(
                s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.bsize, s.namelen, s.frsize,
            ),
            Err(e) => reply.error(e),
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
        empty(reply, self.ops.setxattr(ino(i), name, value, flags));
    }

    fn getxattr(&self, req: &Request, i: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        xattr(reply, self.ops.getxattr(req.uid(), ino(i), name, size));
    }

    fn listxattr(&self, req: &Request, i: INodeNo, size: u32, reply: ReplyXattr) {
        xattr(reply, self.ops.listxattr(req.uid(), ino(i), size));
    }

    fn removexattr(&self, _req: &Request, i: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        empty(reply, self.ops.removexattr(ino(i), name));
    }

    fn access(&self, _req: &Request, i: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        empty(reply, self.ops.access(ino(i), mask.bits() as u32));
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        match self
            .ops
            .create(ino(parent), name, (mode, umask), flags, caller(req))
        {
            Ok((a, h, open)) => reply.created(
                &self.ops.ttl(),
                &a,
                Generation(0),
                fuser::FileHandle(h.0),
                open,
            ),
            Err(e) => reply.error(e),
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
        empty(reply, self.ops.fallocate(fh(h), offset, length, mode));
    }
}
