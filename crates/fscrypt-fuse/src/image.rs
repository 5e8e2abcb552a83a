//! `fscrypt-rs image mount`: a read-only FUSE view of a whole
//! kernel-encrypted ext4 image or block device (issue 14), over the offline
//! reader [`fscrypt_linux::image`]. The image is opened read-only and never
//! written; every request that would write fails with EROFS.
//!
//! Objects are shown as the kernel shows them: names decrypted where the
//! directory's key was given, the kernel's no-key names elsewhere; a locked
//! regular file fails to open with ENOKEY, a locked symlink reads as the
//! no-key encoding of its target. Node ids are the ext4 inode numbers (the
//! root, inode 2, is FUSE's node 1, and inode 1, never a directory entry,
//! is node 2). Reads are random access: only the blocks a request covers
//! are read and decrypted; holes and unwritten extents read as zeros.
//!
//! The image is untrusted input: a reader error becomes EIO (EOPNOTSUPP for
//! what the reader does not handle yet) with one `warn` line naming the
//! operation, the inode number and the reader's message, which names
//! objects by inode number only (no plaintext name or content is logged).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fscrypt_linux::ext4::{Ext4, Extent, InodeKind};
use fscrypt_linux::image::{Crypt, Entry, Image, ImageError, Node, ROOT_INO};
use fuser::{
    Errno, FileAttr, FileType, FopenFlags, Generation, INodeNo, KernelConfig, OpenFlags, ReplyAttr,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite,
    ReplyXattr, Request,
};

use crate::{Error, Result};

/// How long the kernel may cache attributes and names: the image does not
/// change under the mount (it is read-only and, for the mount's lifetime,
/// assumed not written by anyone else).
const TTL: Duration = Duration::from_secs(60);

/// Inodes kept decoded (with their keys) between requests.
const NODE_CACHE: usize = 4096;
/// Directory listings kept between requests (each open directory handle
/// holds its own listing as long as it is open).
const DIR_CACHE: usize = 64;
/// Largest read served at once (the kernel sends at most `max_read`).
const MAX_READ: usize = 1 << 20;

/// How to mount an image.
#[derive(Debug)]
pub struct ImageMountConfig {
    /// Let other users access the mount (FUSE `allow_other`). Every mount
    /// carries `default_permissions`: the kernel checks the image's modes
    /// and owners.
    pub allow_other: bool,
    /// Source name shown in /proc/mounts.
    pub fs_name: String,
}

/// An inode as served: the reader's node, its attributes and, for a
/// symlink, its target as `readlink` shows it.
#[derive(Debug)]
struct Obj {
    node: Node,
    attr: FileAttr,
    target: Option<Vec<u8>>,
}

/// A directory's entries as presented, with an index by name (lookups in
/// big directories stay O(1)).
#[derive(Debug)]
struct Dir {
    entries: Vec<Entry>,
    by_name: HashMap<Vec<u8>, usize>,
}

/// An open file or directory.
#[derive(Debug)]
enum Handle {
    File { obj: Arc<Obj>, extents: Vec<Extent> },
    Dir { ino: u32, dir: Arc<Dir> },
}

/// The read-only filesystem over one image.
#[derive(Debug)]
pub struct ImageFs {
    /// Metadata and keys (not `Sync`: the key set records matches).
    img: Mutex<Image>,
    /// The same image opened a second time, for contents, read without the
    /// metadata lock.
    data: Ext4,
    block_size: u32,
    nodes: Mutex<HashMap<u32, Arc<Obj>>>,
    dirs: Mutex<HashMap<u32, Arc<Dir>>>,
    parents: Mutex<HashMap<u32, u32>>,
    handles: Mutex<HashMap<u64, Handle>>,
    next_fh: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Extended attributes: (full name, value).
type Xattrs = Vec<(Vec<u8>, Vec<u8>)>;

/// A failed request: its errno and what to log.
struct Fail(i32, String);

impl From<ImageError> for Fail {
    fn from(e: ImageError) -> Fail {
        let errno = match &e {
            ImageError::NotFound(_) => libc::ENOENT,
            ImageError::NotADirectory(_) => libc::ENOTDIR,
            ImageError::NoKey { .. } => libc::ENOKEY,
            ImageError::Unsupported { .. } => libc::EOPNOTSUPP,
            ImageError::Ext4(fscrypt_linux::ext4::Ext4Error::Unsupported { .. }) => {
                libc::EOPNOTSUPP
            }
            _ => libc::EIO,
        };
        Fail(errno, e.to_string())
    }
}

impl From<fscrypt_linux::ext4::Ext4Error> for Fail {
    fn from(e: fscrypt_linux::ext4::Ext4Error) -> Fail {
        Fail::from(ImageError::from(e))
    }
}

fn quiet(errno: i32) -> Fail {
    Fail(errno, String::new())
}

/// FUSE node id of ext4 inode `ino`: 2 and 1 swap places.
fn node_id(ino: u32) -> INodeNo {
    INodeNo(match ino {
        ROOT_INO => 1,
        1 => u64::from(ROOT_INO),
        i => u64::from(i),
    })
}

/// The ext4 inode of FUSE node `n`.
fn ext4_ino(n: INodeNo) -> std::result::Result<u32, Fail> {
    match n.0 {
        1 => Ok(ROOT_INO),
        2 => Ok(1),
        i => u32::try_from(i).map_err(|_| quiet(libc::ENOENT)),
    }
}

fn file_type(mode: u16) -> FileType {
    match mode & 0xF000 {
        0x4000 => FileType::Directory,
        0xA000 => FileType::Symlink,
        0x2000 => FileType::CharDevice,
        0x6000 => FileType::BlockDevice,
        0x1000 => FileType::NamedPipe,
        0xC000 => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

fn dirent_type(ft: u8) -> FileType {
    match ft {
        2 => FileType::Directory,
        3 => FileType::CharDevice,
        4 => FileType::BlockDevice,
        5 => FileType::NamedPipe,
        6 => FileType::Socket,
        7 => FileType::Symlink,
        _ => FileType::RegularFile,
    }
}

fn time((sec, nsec): (i64, u32)) -> SystemTime {
    let nsec = nsec.min(999_999_999);
    if sec >= 0 {
        SystemTime::UNIX_EPOCH + Duration::new(sec.unsigned_abs(), nsec)
    } else {
        SystemTime::UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs())
            + Duration::from_nanos(u64::from(nsec))
    }
}

/// The kernel's `new_encode_dev`, the form FUSE carries `rdev` in.
fn encode_dev((major, minor): (u32, u32)) -> u32 {
    (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & !0xff) << 12)
}

impl ImageFs {
    /// Serve `img`, reading contents through a second read-only open of
    /// the same path (checked to carry the same superblock).
    ///
    /// # Errors
    /// [`Error::Mount`] when the image cannot be opened again.
    pub fn new(img: Image) -> Result<ImageFs> {
        let path = img.ext4().path().to_path_buf();
        let data = Ext4::open(&path)
            .map_err(|e| Error::Mount(format!("opening the image again for its contents: {e}")))?;
        if data.superblock() != img.ext4().superblock() {
            return Err(Error::Mount(format!(
                "{}: the image changed while it was being opened; mount it again",
                path.display()
            )));
        }
        Ok(ImageFs {
            block_size: data.superblock().block_size,
            img: Mutex::new(img),
            data,
            nodes: Mutex::new(HashMap::new()),
            dirs: Mutex::new(HashMap::new()),
            parents: Mutex::new(HashMap::new()),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
        })
    }

    fn attr_of(&self, node: &Node, target: Option<&[u8]>) -> FileAttr {
        let i = &node.inode;
        let kind = file_type(i.mode);
        // The kernel shows a symlink's size as the length of what readlink
        // returns (fscrypt_symlink_getattr), with or without the key.
        let size = match target {
            Some(t) if i.is_encrypted() => t.len() as u64,
            _ => i.size,
        };
        let rdev = match kind {
            FileType::CharDevice | FileType::BlockDevice => encode_dev(i.device_number()),
            _ => 0,
        };
        FileAttr {
            ino: node_id(i.ino),
            size,
            blocks: i.blocks,
            atime: time(i.atime()),
            mtime: time(i.mtime()),
            ctime: time(i.ctime()),
            crtime: SystemTime::UNIX_EPOCH,
            kind,
            perm: i.mode & 0o7777,
            nlink: u32::from(i.links_count()),
            uid: i.uid(),
            gid: i.gid(),
            rdev,
            blksize: self.block_size,
            flags: 0,
        }
    }

    fn make_obj(&self, img: &Image, node: Node) -> std::result::Result<Arc<Obj>, Fail> {
        let shown = format!("inode {}", node.ino());
        let target = if node.kind() == InodeKind::Symlink {
            Some(img.read_link(&node, &shown)?)
        } else {
            None
        };
        let attr = self.attr_of(&node, target.as_deref());
        Ok(Arc::new(Obj { node, attr, target }))
    }

    fn cache(&self, obj: &Arc<Obj>) {
        let mut nodes = lock(&self.nodes);
        if nodes.len() >= NODE_CACHE {
            nodes.clear();
        }
        nodes.insert(obj.node.ino(), obj.clone());
    }

    /// Inode `ino`, from the cache or read (without the checks of a
    /// lookup: only inodes the kernel got from a lookup are asked for).
    fn obj(&self, ino: u32) -> std::result::Result<Arc<Obj>, Fail> {
        if let Some(o) = lock(&self.nodes).get(&ino) {
            return Ok(o.clone());
        }
        let obj = {
            let img = lock(&self.img);
            let node = if ino == ROOT_INO {
                img.root()?
            } else {
                img.node(ino, &format!("inode {ino}"))?
            };
            self.make_obj(&img, node)?
        };
        self.cache(&obj);
        Ok(obj)
    }

    fn listing(&self, dir: &Obj) -> std::result::Result<Arc<Dir>, Fail> {
        let ino = dir.node.ino();
        if let Some(l) = lock(&self.dirs).get(&ino) {
            return Ok(l.clone());
        }
        if dir.node.kind() != InodeKind::Directory {
            return Err(quiet(libc::ENOTDIR));
        }
        let mut listing = lock(&self.img).list(&dir.node, &format!("inode {ino}"))?;
        // The kernel fails a whole readdir with EIO for one name with '/'.
        let safe = |e: &Entry| fscrypt_linux::image::safe_name(&e.name);
        if let Some(bad) = listing.entries.iter().find(|e| !safe(e)).map(|e| e.ino) {
            let n = listing.entries.len();
            listing.entries.retain(safe);
            log::warn!(
                "fscrypt-fuse: image: directory inode {ino}: {} names (the first of inode {bad}) \
                 hold '/' or NUL or are empty, '.' or '..'; not shown",
                n - listing.entries.len()
            );
        }
        if !listing.errors.is_empty() {
            log::warn!(
                "fscrypt-fuse: image: directory inode {ino}: {} entries cannot be presented; \
                 not shown",
                listing.errors.len()
            );
        }
        let mut by_name = HashMap::with_capacity(listing.entries.len());
        for (i, e) in listing.entries.iter().enumerate() {
            // The first of two equal names wins (as a linear search would).
            by_name.entry(e.name.clone()).or_insert(i);
        }
        let entries = Arc::new(Dir {
            entries: listing.entries,
            by_name,
        });
        let mut dirs = lock(&self.dirs);
        if dirs.len() >= DIR_CACHE {
            dirs.clear();
        }
        dirs.insert(ino, entries.clone());
        Ok(entries)
    }

    fn lookup_inner(&self, parent: u32, name: &[u8]) -> std::result::Result<Arc<Obj>, Fail> {
        let dir = self.obj(parent)?;
        if name.len() > 255 {
            return Err(quiet(libc::ENAMETOOLONG));
        }
        let listing = self.listing(&dir)?;
        // Names as presented (plaintext, no-key name, or as stored) are
        // what the kernel gave us back from readdir or the user typed.
        let Some(entry) = listing
            .by_name
            .get(name)
            .and_then(|&i| listing.entries.get(i))
        else {
            return Err(quiet(libc::ENOENT));
        };
        if let Some(o) = lock(&self.nodes).get(&entry.ino) {
            return Ok(o.clone());
        }
        let obj = {
            let img = lock(&self.img);
            let child = img.child(&dir.node, entry, &format!("inode {}", entry.ino))?;
            self.make_obj(&img, child)?
        };
        if obj.node.kind() == InodeKind::Directory {
            let mut parents = lock(&self.parents);
            if parents.len() >= NODE_CACHE {
                parents.clear();
            }
            parents.insert(entry.ino, parent);
        }
        self.cache(&obj);
        Ok(obj)
    }

    /// Read `[offset, offset + size)` of the file (clamped to its size)
    /// into `buf`; returns the range of `buf` holding it.
    fn read_inner(
        &self,
        obj: &Obj,
        extents: &[Extent],
        offset: u64,
        size: u32,
        buf: &mut Vec<u8>,
    ) -> std::result::Result<std::ops::Range<usize>, Fail> {
        let file_size = obj.node.inode.size;
        if offset >= file_size || size == 0 {
            return Ok(0..0);
        }
        let end = offset
            .saturating_add(u64::from(size).min(MAX_READ as u64))
            .min(file_size);
        let bs = u64::from(self.block_size);
        let first = offset / bs;
        let last = (end - 1) / bs;
        let nblocks = last - first + 1;
        let len = usize::try_from(nblocks * bs).map_err(|_| quiet(libc::EIO))?;
        buf.clear();
        buf.resize(len, 0);
        let crypt = obj.node.crypt.inode_crypt();
        let mut lblk = first;
        while lblk <= last {
            let at = ((lblk - first) * bs) as usize;
            // The first extent ending after lblk.
            let i = extents.partition_point(|e| e.logical + u64::from(e.len) <= lblk);
            let run = match extents.get(i) {
                Some(e) if e.logical <= lblk => {
                    let n = (e.logical + u64::from(e.len)).min(last + 1) - lblk;
                    (n, (!e.unwritten).then(|| e.physical + (lblk - e.logical)))
                }
                Some(e) => (e.logical.min(last + 1) - lblk, None),
                None => (last + 1 - lblk, None),
            };
            let (n, physical) = run;
            let piece = &mut buf[at..at + (n * bs) as usize];
            if let Some(p) = physical {
                self.data.read_blocks(p, piece)?;
                if let Some(c) = crypt {
                    let upb = bs / c.data_unit_size() as u64;
                    c.decrypt_data_units(lblk * upb, piece).map_err(|e| {
                        Fail(libc::EIO, format!("inode {}: decrypt: {e}", obj.node.ino()))
                    })?;
                }
            }
            // Holes were zeroed by the resize.
            lblk += n;
        }
        let start = (offset - first * bs) as usize;
        Ok(start..start + (end - offset) as usize)
    }

    fn open_inner(&self, ino: u32, flags: i32) -> std::result::Result<u64, Fail> {
        if flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0 {
            return Err(quiet(libc::EROFS));
        }
        let obj = self.obj(ino)?;
        if obj.node.kind() != InodeKind::Regular {
            return Err(quiet(libc::EINVAL));
        }
        // The kernel refuses to open a locked regular file (ENOKEY).
        if let Crypt::Locked { .. } = obj.node.crypt {
            return Err(quiet(libc::ENOKEY));
        }
        let extents = self.data.extents(&obj.node.inode)?;
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        lock(&self.handles).insert(fh, Handle::File { obj, extents });
        Ok(fh)
    }

    /// The readable extended attributes of `node` (name, value): `user.`,
    /// `security.` and, for root, `trusted.`, read by the offline reader
    /// ([`fscrypt_linux::image::xattrs::vfs_xattrs`]: in-inode area, xattr
    /// block, EA inodes; the encryption context is never among them).
    /// `system.` ones (POSIX ACLs, which this mount does not enforce) are
    /// not served.
    fn xattrs(&self, node: &Node, root: bool) -> std::result::Result<Xattrs, Fail> {
        let (all, _unshowable) = fscrypt_linux::image::xattrs::vfs_xattrs(&self.data, &node.inode)?;
        Ok(all
            .into_iter()
            .filter(|(n, _)| {
                n.starts_with(b"user.")
                    || n.starts_with(b"security.")
                    || (root && n.starts_with(b"trusted."))
            })
            .collect())
    }

    fn fail(op: &'static str, ino: u64, f: Fail) -> Errno {
        if !f.1.is_empty() {
            log::warn!(
                "fscrypt-fuse: image: {op} on node {ino}: {} (errno {})",
                f.1,
                f.0
            );
        }
        Errno::from_i32(f.0)
    }
}

fn xattr_reply(reply: ReplyXattr, size: u32, v: &[u8]) {
    if size == 0 {
        reply.size(v.len() as u32);
    } else if v.len() > size as usize {
        reply.error(Errno::from_i32(libc::ERANGE));
    } else {
        reply.data(v);
    }
}

impl fuser::Filesystem for ImageFs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        let _ = config.set_max_readahead(MAX_READ as u32);
        let _ = config.add_capabilities(fuser::InitFlags::FUSE_PARALLEL_DIROPS);
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match ext4_ino(parent).and_then(|p| self.lookup_inner(p, name.as_bytes())) {
            Ok(o) => reply.entry(&TTL, &o.attr, Generation(0)),
            Err(f) => reply.error(Self::fail("lookup", parent.0, f)),
        }
    }

    fn getattr(
        &self,
        _req: &Request,
        i: INodeNo,
        _fh: Option<fuser::FileHandle>,
        reply: ReplyAttr,
    ) {
        match ext4_ino(i).and_then(|i| self.obj(i)) {
            Ok(o) => reply.attr(&TTL, &o.attr),
            Err(f) => reply.error(Self::fail("getattr", i.0, f)),
        }
    }

    fn readlink(&self, _req: &Request, i: INodeNo, reply: ReplyData) {
        match ext4_ino(i).and_then(|i| self.obj(i)) {
            Ok(o) => match &o.target {
                Some(t) => reply.data(t),
                None => reply.error(Errno::from_i32(libc::EINVAL)),
            },
            Err(f) => reply.error(Self::fail("readlink", i.0, f)),
        }
    }

    fn open(&self, _req: &Request, i: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match ext4_ino(i).and_then(|ino| self.open_inner(ino, flags.0)) {
            // The image does not change: the kernel may keep its pages.
            Ok(fh) => reply.opened(fuser::FileHandle(fh), FopenFlags::FOPEN_KEEP_CACHE),
            Err(f) => reply.error(Self::fail("open", i.0, f)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        i: INodeNo,
        h: fuser::FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyData,
    ) {
        thread_local! {
            static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let file = match lock(&self.handles).get(&h.0) {
            Some(Handle::File { obj, extents }) => Some((obj.clone(), extents.clone())),
            _ => None,
        };
        let Some((obj, extents)) = file else {
            reply.error(Errno::from_i32(libc::EBADF));
            return;
        };
        BUF.with(|cell| {
            let mut buf = cell.borrow_mut();
            match self.read_inner(&obj, &extents, offset, size, &mut buf) {
                Ok(r) => reply.data(&buf[r]),
                Err(f) => reply.error(Self::fail("read", i.0, f)),
            }
        });
    }

    fn release(
        &self,
        _req: &Request,
        _i: INodeNo,
        h: fuser::FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        lock(&self.handles).remove(&h.0);
        reply.ok();
    }

    fn opendir(&self, _req: &Request, i: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let r = ext4_ino(i).and_then(|ino| {
            let dir = self.obj(ino)?;
            let dir = self.listing(&dir)?;
            let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
            lock(&self.handles).insert(fh, Handle::Dir { ino, dir });
            Ok(fh)
        });
        match r {
            // The listing never changes: the kernel may cache it.
            Ok(fh) => reply.opened(
                fuser::FileHandle(fh),
                FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_CACHE_DIR,
            ),
            Err(f) => reply.error(Self::fail("opendir", i.0, f)),
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
        let dir = match lock(&self.handles).get(&h.0) {
            Some(Handle::Dir { ino, dir }) => Some((*ino, dir.clone())),
            _ => None,
        };
        let Some((ino, dir)) = dir else {
            reply.error(Errno::from_i32(libc::EBADF));
            return;
        };
        let parent = lock(&self.parents).get(&ino).copied().unwrap_or(ino);
        // Offsets: 1 after ".", 2 after "..", 3 + i after entry i.
        let mut next = offset;
        while next < 2 {
            let (name, of) = if next == 0 {
                (".", ino)
            } else {
                ("..", parent)
            };
            if reply.add(node_id(of), next + 1, FileType::Directory, name) {
                reply.ok();
                return;
            }
            next += 1;
        }
        let skip = usize::try_from(next - 2).unwrap_or(usize::MAX);
        for (k, e) in dir.entries.iter().enumerate().skip(skip) {
            let off = k as u64 + 3;
            if reply.add(
                node_id(e.ino),
                off,
                dirent_type(e.file_type),
                OsStr::from_bytes(&e.name),
            ) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(
        &self,
        _req: &Request,
        _i: INodeNo,
        h: fuser::FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        lock(&self.handles).remove(&h.0);
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _i: INodeNo, reply: ReplyStatfs) {
        let sb = self.data.superblock();
        reply.statfs(
            sb.blocks_count,
            0,
            0,
            u64::from(sb.inodes_count),
            0,
            sb.block_size,
            255,
            sb.block_size,
        );
    }

    fn getxattr(&self, req: &Request, i: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        // Only user., security. and trusted. are served: system. (POSIX
        // ACLs, which this mount does not enforce) and unknown namespaces
        // are not supported here. EOPNOTSUPP also lets GNU ls -l stop
        // asking every entry for system.posix_acl_access.
        let n = name.as_bytes();
        if !(n.starts_with(b"user.") || n.starts_with(b"security.") || n.starts_with(b"trusted.")) {
            reply.error(Errno::from_i32(libc::EOPNOTSUPP));
            return;
        }
        let r = ext4_ino(i)
            .and_then(|ino| self.obj(ino))
            .and_then(|o| self.xattrs(&o.node, req.uid() == 0));
        match r {
            Ok(list) => match list.iter().find(|(n, _)| n == name.as_bytes()) {
                Some((_, v)) => xattr_reply(reply, size, v),
                None => reply.error(Errno::from_i32(libc::ENODATA)),
            },
            Err(f) => reply.error(Self::fail("getxattr", i.0, f)),
        }
    }

    fn listxattr(&self, req: &Request, i: INodeNo, size: u32, reply: ReplyXattr) {
        let r = ext4_ino(i)
            .and_then(|ino| self.obj(ino))
            .and_then(|o| self.xattrs(&o.node, req.uid() == 0));
        match r {
            Ok(list) => {
                let mut names = Vec::new();
                for (n, _) in list {
                    names.extend_from_slice(&n);
                    names.push(0);
                }
                xattr_reply(reply, size, &names);
            }
            Err(f) => reply.error(Self::fail("listxattr", i.0, f)),
        }
    }

    fn access(&self, _req: &Request, _i: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        // Permission checks are the kernel's (default_permissions).
        reply.ok();
    }

    // Everything that writes: EROFS (the kernel refuses most of it on a
    // read-only mount before asking).

    fn setattr(
        &self,
        _req: &Request,
        _i: INodeNo,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        _size: Option<u64>,
        _atime: Option<fuser::TimeOrNow>,
        _mtime: Option<fuser::TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<fuser::FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        reply.error(Errno::from_i32(libc::EROFS));
    }

    fn mknod(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::from_i32(libc::EROFS));
    }

    fn mkdir(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::from_i32(libc::EROFS));
    }

    fn unlink(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::from_i32(libc::EROFS));
    }

    fn rmdir(&self, _req: &Request, _parent: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::from_i32(libc::EROFS));
    }

    fn symlink(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _link_name: &OsStr,
        _target: &Path,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::from_i32(libc::EROFS));
    }

    fn rename(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _newparent: INodeNo,
        _newname: &OsStr,
        _flags: fuser::RenameFlags,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::from_i32(libc::EROFS));
    }

    fn link(
        &self,
        _req: &Request,
        _i: INodeNo,
        _newparent: INodeNo,
        _newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply.error(Errno::from_i32(libc::EROFS));
    }

    fn write(
        &self,
        _req: &Request,
        _i: INodeNo,
        _h: fuser::FileHandle,
        _offset: u64,
        _data: &[u8],
        _write_flags: fuser::WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<fuser::LockOwner>,
        reply: ReplyWrite,
    ) {
        reply.error(Errno::from_i32(libc::EROFS));
    }

    fn create(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: fuser::ReplyCreate,
    ) {
        reply.error(Errno::from_i32(libc::EROFS));
    }

    fn setxattr(
        &self,
        _req: &Request,
        _i: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::from_i32(libc::EROFS));
    }

    fn removexattr(&self, _req: &Request, _i: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::from_i32(libc::EROFS));
    }

    fn fallocate(
        &self,
        _req: &Request,
        _i: INodeNo,
        _h: fuser::FileHandle,
        _offset: u64,
        _length: u64,
        _mode: i32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::from_i32(libc::EROFS));
    }
}

fn fuser_config(config: &ImageMountConfig) -> fuser::Config {
    let mut c = fuser::Config::default();
    c.mount_options = vec![
        fuser::MountOption::FSName(config.fs_name.clone()),
        fuser::MountOption::Subtype("fscrypt-rs".into()),
        fuser::MountOption::RO,
        fuser::MountOption::DefaultPermissions,
        fuser::MountOption::NoDev,
        fuser::MountOption::NoSuid,
    ];
    c.acl = if config.allow_other {
        fuser::SessionACL::All
    } else {
        fuser::SessionACL::Owner
    };
    c.n_threads = Some(4);
    c.clone_fd = true;
    c
}

/// Mounts `img` read-only at `mountpoint` and serves it until it is
/// unmounted (`fscrypt-rs unmount`, `fusermount3 -u`, `umount`) or the
/// process gets SIGTERM, SIGINT or SIGHUP. Always `ro`,
/// `default_permissions`, `nosuid`, `nodev`.
///
/// # Errors
/// [`Error::Mount`] when FUSE is unavailable or the mountpoint is bad.
pub fn mount(img: Image, config: ImageMountConfig, mountpoint: &Path) -> Result<()> {
    mount_on(img, config, &crate::MountPoint::open(mountpoint)?)
}

/// [`mount`] onto a mount point opened (and checked) before: the mount
/// goes on exactly the directory it holds (see [`crate::MountPoint`]).
///
/// # Errors
/// As [`mount`].
pub fn mount_on(
    img: Image,
    config: ImageMountConfig,
    mountpoint: &crate::MountPoint,
) -> Result<()> {
    if let Err(e) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        log::warn!("fscrypt-fuse: cannot make the daemon non-dumpable: {e}");
    }
    if !Path::new("/dev/fuse").exists() {
        return Err(Error::Mount(
            "/dev/fuse is missing (load the fuse module, install fuse3)".into(),
        ));
    }
    let fs = ImageFs::new(img)?;
    let fc = fuser_config(&config);
    crate::serve(fs, fc, mountpoint, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids_swap_root() {
        assert_eq!(node_id(2), INodeNo(1));
        assert_eq!(node_id(1), INodeNo(2));
        assert_eq!(node_id(12), INodeNo(12));
        for i in [1u32, 2, 3, 99] {
            assert_eq!(ext4_ino(node_id(i)).ok(), Some(i));
        }
        assert!(ext4_ino(INodeNo(1 << 40)).is_err());
    }

    #[test]
    fn times_and_devices() {
        assert_eq!(time((1, 5)), SystemTime::UNIX_EPOCH + Duration::new(1, 5));
        assert_eq!(
            time((-1, 0)),
            SystemTime::UNIX_EPOCH - Duration::from_secs(1)
        );
        assert_eq!(encode_dev((8, 1)), 0x801);
        assert_eq!(encode_dev((1, 0x100)), 0x100100);
    }
}
