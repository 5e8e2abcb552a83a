//! `fscrypt-rs image mount`: a read-only FUSE view of a whole
//! kernel-encrypted ext4 image or block device (issue 14), over the offline
//! reader [`fscrypt_ext4::image`]. The image is opened read-only and never
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

use fscrypt_ext4::image::file::FileData;
use fscrypt_ext4::image::{Crypt, Entry, Image, Node, ROOT_INO};
use fscrypt_ext4::{Ext4, InodeKind};
use fuser::{FileAttr, FileType, FopenFlags, INodeNo};

use crate::backend::Backend;
use crate::error::WrongType;
use crate::fs::FsStats;
use crate::handles::FileHandle;
use crate::inodes::InodeNo;
use crate::mount::session::{self, Options};
use crate::{Error, Result};

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
    /// Serve through FUSE over io_uring when the kernel offers it (as
    /// [`crate::MountConfig::io_uring`]).
    pub io_uring: bool,
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
    File { obj: Arc<Obj>, file: Arc<FileData> },
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

/// FUSE node id of ext4 inode `ino`: 2 and 1 swap places.
fn node_id(ino: u32) -> INodeNo {
    INodeNo(match ino {
        ROOT_INO => 1,
        1 => u64::from(ROOT_INO),
        i => u64::from(i),
    })
}

/// The ext4 inode of FUSE node `n`.
fn ext4_ino(n: INodeNo) -> Result<u32> {
    match n.0 {
        1 => Ok(ROOT_INO),
        2 => Ok(1),
        i => u32::try_from(i).map_err(|_| Error::NotFound),
    }
}

/// The ext4 inode of node `i`.
fn ext(i: InodeNo) -> Result<u32> {
    ext4_ino(INodeNo(i.0))
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

    fn make_obj(&self, img: &Image, node: Node) -> Result<Arc<Obj>> {
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
    fn obj(&self, ino: u32) -> Result<Arc<Obj>> {
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

    fn listing(&self, dir: &Obj) -> Result<Arc<Dir>> {
        let ino = dir.node.ino();
        if let Some(l) = lock(&self.dirs).get(&ino) {
            return Ok(l.clone());
        }
        if dir.node.kind() != InodeKind::Directory {
            return Err(Error::WrongType(WrongType::NotDir));
        }
        let mut listing = lock(&self.img).list(&dir.node, &format!("inode {ino}"))?;
        // The kernel fails a whole readdir with EIO for one name with '/'.
        let safe = |e: &Entry| fscrypt_ext4::image::safe_name(&e.name);
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

    fn lookup_inner(&self, parent: u32, name: &[u8]) -> Result<Arc<Obj>> {
        let dir = self.obj(parent)?;
        if name.len() > 255 {
            return Err(Error::NameTooLong);
        }
        let listing = self.listing(&dir)?;
        // Names as presented (plaintext, no-key name, or as stored) are
        // what the kernel gave us back from readdir or the user typed.
        let Some(entry) = listing
            .by_name
            .get(name)
            .and_then(|&i| listing.entries.get(i))
        else {
            return Err(Error::NotFound);
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
    /// into `buf` through the reader's one read path; returns the range of
    /// `buf` holding it.
    fn read_inner(
        &self,
        obj: &Obj,
        file: &FileData,
        offset: u64,
        size: u32,
        buf: &mut Vec<u8>,
    ) -> Result<std::ops::Range<usize>> {
        let len = u64::from(size)
            .min(MAX_READ as u64)
            .min(file.size().saturating_sub(offset)) as usize;
        // Grown if needed, never shrunk or moved: the io_uring transport
        // hands in an entry's payload buffer ([`Backend::read`]).
        if buf.len() < len {
            buf.resize(len, 0);
        }
        let n = file.read_at(&self.data, &obj.node, offset, &mut buf[..len])?;
        Ok(0..n)
    }

    fn open_inner(&self, ino: u32, flags: i32) -> Result<u64> {
        if flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0 {
            return Err(Error::ReadOnly);
        }
        let obj = self.obj(ino)?;
        if obj.node.kind() != InodeKind::Regular {
            return Err(Error::WrongType(WrongType::Other));
        }
        // The kernel refuses to open a locked regular file (ENOKEY).
        if let Crypt::Locked { .. } = obj.node.crypt {
            return Err(Error::NoKey);
        }
        let file = Arc::new(FileData::open(
            &self.data,
            &obj.node,
            &format!("inode {ino}"),
        )?);
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        lock(&self.handles).insert(fh, Handle::File { obj, file });
        Ok(fh)
    }

    /// The readable extended attributes of `node` (name, value): `user.`,
    /// `security.` and, for root, `trusted.`, read by the offline reader
    /// ([`fscrypt_ext4::image::xattrs::vfs_xattrs`]: in-inode area, xattr
    /// block, EA inodes; the encryption context is never among them).
    /// `system.` ones (POSIX ACLs, which this mount does not enforce) are
    /// not served.
    fn xattrs(&self, node: &Node, root: bool) -> Result<Xattrs> {
        let (all, _unshowable) = fscrypt_ext4::image::xattrs::vfs_xattrs(&self.data, &node.inode)?;
        Ok(all
            .into_iter()
            .filter(|(n, _)| {
                n.starts_with(b"user.")
                    || n.starts_with(b"security.")
                    || (root && n.starts_with(b"trusted."))
            })
            .collect())
    }
}

impl Backend for ImageFs {
    /// The image does not change under the mount (it is read-only and,
    /// for the mount's lifetime, assumed not written by anyone else).
    const TTL: Duration = Duration::from_secs(60);
    const READ_ONLY: bool = true;

    fn lookup(&self, parent: InodeNo, name: &OsStr) -> Result<FileAttr> {
        let o = self.lookup_inner(ext(parent)?, name.as_bytes())?;
        Ok(o.attr)
    }

    fn getattr(&self, i: InodeNo) -> Result<FileAttr> {
        Ok(self.obj(ext(i)?)?.attr)
    }

    fn readlink(&self, i: InodeNo) -> Result<Vec<u8>> {
        let o = self.obj(ext(i)?)?;
        o.target.clone().ok_or(Error::WrongType(WrongType::Other))
    }

    fn open(&self, i: InodeNo, flags: i32) -> Result<(FileHandle, FopenFlags)> {
        let fh = self.open_inner(ext(i)?, flags)?;
        // The image does not change: the kernel may keep its pages.
        Ok((FileHandle(fh), FopenFlags::FOPEN_KEEP_CACHE))
    }

    fn read(
        &self,
        h: FileHandle,
        offset: u64,
        size: u32,
        buf: &mut Vec<u8>,
    ) -> Result<std::ops::Range<usize>> {
        let file = match lock(&self.handles).get(&h.0) {
            Some(Handle::File { obj, file }) => Some((obj.clone(), file.clone())),
            _ => None,
        };
        let (obj, file) = file.ok_or(Error::BadHandle)?;
        self.read_inner(&obj, &file, offset, size, buf)
    }

    fn release(&self, h: FileHandle) -> Result<()> {
        lock(&self.handles).remove(&h.0);
        Ok(())
    }

    fn opendir(&self, i: InodeNo) -> Result<(FileHandle, FopenFlags)> {
        let ino = ext(i)?;
        let dir = self.obj(ino)?;
        let dir = self.listing(&dir)?;
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        lock(&self.handles).insert(fh, Handle::Dir { ino, dir });
        // The listing never changes: the kernel may cache it.
        Ok((
            FileHandle(fh),
            FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_CACHE_DIR,
        ))
    }

    fn readdir<F>(&self, h: FileHandle, offset: u64, add: F) -> Result<()>
    where
        F: FnMut(u64, u64, FileType, &OsStr) -> bool,
    {
        let dir = match lock(&self.handles).get(&h.0) {
            Some(Handle::Dir { ino, dir }) => Some((*ino, dir.clone())),
            _ => None,
        };
        let (ino, dir) = dir.ok_or(Error::BadHandle)?;
        let parent = lock(&self.parents).get(&ino).copied().unwrap_or(ino);
        crate::backend::readdir_listing(
            offset,
            node_id(ino).0,
            node_id(parent).0,
            &dir.entries,
            |e| {
                (
                    node_id(e.ino).0,
                    dirent_type(e.file_type),
                    OsStr::from_bytes(&e.name),
                )
            },
            add,
        );
        Ok(())
    }

    fn releasedir(&self, h: FileHandle) -> Result<()> {
        lock(&self.handles).remove(&h.0);
        Ok(())
    }

    fn statfs(&self) -> Result<FsStats> {
        let sb = self.data.superblock();
        Ok(FsStats {
            blocks: sb.blocks_count,
            bfree: 0,
            bavail: 0,
            files: u64::from(sb.inodes_count),
            ffree: 0,
            bsize: sb.block_size,
            namelen: 255,
            frsize: sb.block_size,
        })
    }

    fn getxattr(&self, i: InodeNo, name: &OsStr, _size: u32, uid: u32) -> Result<Vec<u8>> {
        // Only user., security. and trusted. are served: system. (POSIX
        // ACLs, which this mount does not enforce) and unknown namespaces
        // are not supported here. EOPNOTSUPP also lets GNU ls -l stop
        // asking every entry for system.posix_acl_access.
        let n = name.as_bytes();
        if !(n.starts_with(b"user.") || n.starts_with(b"security.") || n.starts_with(b"trusted.")) {
            return Err(Error::NotSupported);
        }
        let o = self.obj(ext(i)?)?;
        let list = self.xattrs(&o.node, uid == 0)?;
        list.into_iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v)
            .ok_or(Error::NoXattr)
    }

    fn listxattr(&self, i: InodeNo, uid: u32) -> Result<Vec<u8>> {
        let o = self.obj(ext(i)?)?;
        let mut names = Vec::new();
        for (n, _) in self.xattrs(&o.node, uid == 0)? {
            names.extend_from_slice(&n);
            names.push(0);
        }
        Ok(names)
    }
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

impl ImageMountConfig {
    /// The session options of an image mount: always read-only, nosuid,
    /// nodev.
    fn options(&self) -> Options {
        Options {
            fs_name: self.fs_name.clone(),
            read_only: true,
            allow_other: self.allow_other,
            // The daemon reads the image with its own rights, whatever the
            // modes of the files in it: the kernel checks.
            default_permissions: true,
            suid: false,
            dev: false,
            noexec: false,
            io_uring: self.io_uring,
        }
    }
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
    let options = config.options();
    session::check(&options, mountpoint)?;
    let fs = ImageFs::new(img)?;
    session::serve(session::engine(fs, &options), mountpoint, None)
}

/// [`mount`] served by a background thread of this process (tests,
/// embedding); dropping the returned mount unmounts it.
///
/// # Errors
/// As [`mount`].
pub fn mount_background(
    img: Image,
    config: ImageMountConfig,
    mountpoint: &Path,
) -> Result<crate::BackgroundMount> {
    let mp = crate::MountPoint::open(mountpoint)?;
    let options = config.options();
    session::check(&options, &mp)?;
    let fs = ImageFs::new(img)?;
    crate::mount::background(session::engine(fs, &options), &mp, None)
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
