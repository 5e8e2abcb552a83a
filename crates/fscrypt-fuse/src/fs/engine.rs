//! The vault as a back-end of the FUSE engine ([`crate::backend::Backend`]):
//! each request goes to the [`EncryptedFs`] method of the same name; what is
//! FUSE's and not the filesystem's (FOPEN_* flags, the file type of a
//! listing entry) is decided here.

use std::ffi::OsStr;
use std::ops::Range;
use std::time::Duration;

use fuser::{FileAttr, FileType, FopenFlags};

use super::size::SizeStore;
use super::{Caller, EncryptedFs, FsStats, SetAttr, Sharing};
use crate::backend::Backend;
use crate::error::Result;
use crate::handles::FileHandle;
use crate::inodes::{InodeNo, Kind};

/// The file type of a directory entry of kind `k` (readdir).
pub(crate) fn ftype(k: Kind) -> FileType {
    match k {
        Kind::Dir => FileType::Directory,
        Kind::File => FileType::RegularFile,
        Kind::Symlink => FileType::Symlink,
        Kind::Special => FileType::NamedPipe,
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
/// `FUSE_WRITE_KILL_SUIDGID` with each write instead, which
/// `Ops::write` honours. Nothing else changes for such a handle: it cannot
/// read, so there is nothing of it to cache, and it cannot be mapped (mmap
/// needs a readable fd). Other handles of the same file keep the page
/// cache; a direct write invalidates the cached pages it covers
/// (`fuse_direct_io`, Linux 6.6 and later), so readers see it as they saw
/// cached writes. The writes themselves reach the daemon as before: one
/// WRITE per write(2) of up to `max_write` bytes, from the caller's pages
/// without a copy into the page cache.
pub(crate) fn open_flags(flags: i32) -> FopenFlags {
    if flags & libc::O_ACCMODE == libc::O_WRONLY {
        FopenFlags::FOPEN_DIRECT_IO
    } else {
        FopenFlags::empty()
    }
}

impl EncryptedFs {
    /// The FOPEN_* reply flags of a file handle opened with `flags`
    /// (`created`: by CREATE): [`open_flags`], and `FOPEN_NOFLUSH` for a
    /// format 3 handle whose closes need no FLUSH ([`EncryptedFs::flushes`];
    /// Linux 5.17 and later honour it, older kernels send FLUSH anyway,
    /// which then ends the session as for any handle).
    fn fopen_flags(&self, flags: i32, created: bool) -> FopenFlags {
        let mut f = open_flags(flags);
        if self.sizes() == SizeStore::Tagged && !self.flushes(flags, created) {
            f |= FopenFlags::FOPEN_NOFLUSH;
        }
        f
    }
}

impl Backend for EncryptedFs {
    /// 1 s, as gocryptfs (and libfuse's default) have it. Changes made
    /// through this mount never wait for it: the kernel updates or
    /// invalidates what it changes itself (the inode of both names of a
    /// hard link, since they share one node id; the target of a rename
    /// over a name; size and mtime after a write without writeback cache;
    /// a directory's attributes after any change in it; mode after a
    /// killpriv write), and the test `round_trips::cached_attributes_
    /// follow_our_own_changes` checks each of these. The TTL only bounds
    /// how long a change made *behind* the mount (the backing directory is
    /// untrusted and may be a synced folder) stays invisible, so it stays
    /// short. A longer TTL would save the LOOKUP/GETATTR of a name
    /// revisited after more than a second, which readdirplus already saves
    /// for listings.
    const TTL: Duration = Duration::from_secs(1);
    const READDIRPLUS: bool = true;

    /// Zero on shared storage (`-o sharedstorage`): another mount changes
    /// the backing directory at any time, so the kernel asks each time, as
    /// gocryptfs's `-sharedstorage` has it.
    /// With `-o acl` (gocryptfs's `-acl`): ACLs are xattrs of the backing
    /// objects (`fs/xattr.rs`).
    fn posix_acl(&self) -> bool {
        self.acl()
    }

    fn ttl(&self) -> Duration {
        match self.sharing() {
            Sharing::Exclusive => Self::TTL,
            Sharing::SharedAlone | Sharing::SharedWithOthers => Duration::ZERO,
        }
    }

    fn describe(&self, i: InodeNo) -> Option<String> {
        self.backing_path_of(i)
            .map(|p| format!("backing {}", p.display()))
    }

    fn lookup(&self, parent: InodeNo, name: &OsStr) -> Result<FileAttr> {
        EncryptedFs::lookup(self, parent, name)
    }

    fn forget(&self, i: InodeNo, nlookup: u64) {
        EncryptedFs::forget(self, i, nlookup);
    }

    fn inode_limit(&self) -> Option<usize> {
        self.opts.inode_limit
    }

    fn cached_inodes(&self) -> usize {
        self.inodes.len()
    }

    fn prune_candidates(&self, n: usize) -> Vec<u64> {
        self.inodes
            .prune_candidates(n)
            .into_iter()
            .map(|i| i.0)
            .collect()
    }

    fn access(&self, i: InodeNo, mask: u32) -> Result<()> {
        EncryptedFs::access(self, i, mask)
    }

    fn getattr(&self, i: InodeNo) -> Result<FileAttr> {
        EncryptedFs::getattr(self, i)
    }

    fn setattr(&self, i: InodeNo, a: SetAttr) -> Result<FileAttr> {
        EncryptedFs::setattr(self, i, a)
    }

    fn kill_suid(&self, i: InodeNo) -> Result<()> {
        EncryptedFs::kill_suid(self, i)
    }

    fn readlink(&self, i: InodeNo) -> Result<Vec<u8>> {
        EncryptedFs::readlink(self, i)
    }

    fn mknod(
        &self,
        parent: InodeNo,
        name: &OsStr,
        mode: u32,
        rdev: u32,
        caller: Caller,
    ) -> Result<FileAttr> {
        EncryptedFs::mknod(self, parent, name, mode, rdev, caller)
    }

    fn mkdir(&self, parent: InodeNo, name: &OsStr, mode: u32, caller: Caller) -> Result<FileAttr> {
        EncryptedFs::mkdir(self, parent, name, mode, caller)
    }

    fn unlink(&self, parent: InodeNo, name: &OsStr) -> Result<()> {
        EncryptedFs::unlink(self, parent, name)
    }

    fn rmdir(&self, parent: InodeNo, name: &OsStr) -> Result<()> {
        EncryptedFs::rmdir(self, parent, name)
    }

    fn symlink(
        &self,
        parent: InodeNo,
        name: &OsStr,
        target: &[u8],
        caller: Caller,
    ) -> Result<FileAttr> {
        EncryptedFs::symlink(self, parent, name, target, caller)
    }

    fn rename(
        &self,
        parent: InodeNo,
        name: &OsStr,
        newparent: InodeNo,
        newname: &OsStr,
        flags: u32,
    ) -> Result<()> {
        EncryptedFs::rename(self, parent, name, newparent, newname, flags)
    }

    fn link(&self, i: InodeNo, newparent: InodeNo, newname: &OsStr) -> Result<FileAttr> {
        EncryptedFs::link(self, i, newparent, newname)
    }

    fn open(&self, i: InodeNo, flags: i32) -> Result<(FileHandle, FopenFlags)> {
        let h = EncryptedFs::open(self, i, flags)?;
        Ok((h, self.fopen_flags(flags, false)))
    }

    fn read(
        &self,
        h: FileHandle,
        offset: u64,
        size: u32,
        buf: &mut Vec<u8>,
    ) -> Result<Range<usize>> {
        EncryptedFs::read(self, h, offset, size, buf)
    }

    fn write(&self, h: FileHandle, offset: u64, data: &[u8]) -> Result<u32> {
        EncryptedFs::write(self, h, offset, data)
    }

    fn release(&self, h: FileHandle) -> Result<()> {
        EncryptedFs::release(self, h)
    }

    fn flush(&self, h: FileHandle) -> Result<bool> {
        EncryptedFs::flush(self, h)
    }

    fn fsync(&self, h: FileHandle, datasync: bool) -> Result<()> {
        EncryptedFs::fsync(self, h, datasync)
    }

    fn opendir(&self, i: InodeNo) -> Result<(FileHandle, FopenFlags)> {
        Ok((EncryptedFs::opendir(self, i)?, FopenFlags::empty()))
    }

    fn readdir<F>(&self, h: FileHandle, offset: u64, mut add: F) -> Result<()>
    where
        F: FnMut(u64, u64, FileType, &OsStr) -> bool,
    {
        EncryptedFs::readdir(self, h, offset, |ino, off, kind, name| {
            add(ino, off, ftype(kind), name)
        })
    }

    fn readdirplus<F>(&self, h: FileHandle, offset: u64, mut add: F) -> Result<()>
    where
        F: FnMut(u64, &OsStr, &FileAttr) -> bool,
    {
        EncryptedFs::readdirplus(self, h, offset, |off, name, attr, _| add(off, name, attr))
    }

    fn releasedir(&self, h: FileHandle) -> Result<()> {
        EncryptedFs::releasedir(self, h)
    }

    fn fsyncdir(&self, i: InodeNo) -> Result<()> {
        EncryptedFs::fsyncdir(self, i)
    }

    fn statfs(&self) -> Result<FsStats> {
        EncryptedFs::statfs(self)
    }

    fn setxattr(&self, i: InodeNo, name: &OsStr, value: &[u8], flags: i32) -> Result<()> {
        EncryptedFs::setxattr(self, i, name, value, flags)
    }

    fn getxattr(&self, i: InodeNo, name: &OsStr, size: u32, _uid: u32) -> Result<Vec<u8>> {
        EncryptedFs::getxattr(self, i, name, size)
    }

    fn listxattr(&self, i: InodeNo, _uid: u32) -> Result<Vec<u8>> {
        EncryptedFs::listxattr(self, i)
    }

    fn removexattr(&self, i: InodeNo, name: &OsStr) -> Result<()> {
        EncryptedFs::removexattr(self, i, name)
    }

    fn has_default_acl(&self, dir: InodeNo) -> bool {
        EncryptedFs::has_default_acl(self, dir)
    }

    fn create(
        &self,
        parent: InodeNo,
        name: &OsStr,
        mode: u32,
        flags: i32,
        caller: Caller,
    ) -> Result<(FileAttr, FileHandle, FopenFlags)> {
        let (a, h) = EncryptedFs::create(self, parent, name, mode, flags, caller)?;
        Ok((a, h, self.fopen_flags(flags, true)))
    }

    fn fallocate(&self, h: FileHandle, offset: u64, length: u64, mode: i32) -> Result<()> {
        EncryptedFs::fallocate(self, h, offset, length, mode)
    }
}
