//! The inode table: FUSE inode numbers to in-memory inodes.
//!
//! FUSE inode numbers are the backing inode numbers (so `stat` shows stable
//! numbers across remounts and hard links share one number), except that the
//! backing root's number and 1 are swapped, since FUSE's root is always 1.
//!
//! Lifetimes: an [`Inode`] lives in the table while the kernel holds lookups on
//! it (`nlookup > 0`) and is removed by `forget`; open handles and child links
//! hold their own `Arc`s, so an inode outlives its table entry while in use.
//!
//! Locking: the table's `RwLock` protects only the map; it is never held across
//! a system call. Each inode protects its links with a `Mutex` and its file
//! state with an `RwLock` (readers share it, writers and truncation take it
//! exclusively: this is the per-file lock that makes read-modify-write of a
//! data unit atomic). Lock order: file state before links; never two inodes'
//! file states at once.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::crypt::NodeCrypt;
use crate::layout::{BackingName, CONTEXT_SIZE};

/// A FUSE inode number (1 = root).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InodeNo(pub u64);

/// FUSE's root inode number.
pub const ROOT: InodeNo = InodeNo(1);

/// What an inode is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Regular file: backing file with a header.
    File,
    /// Directory: backing directory with a metadata file.
    Dir,
    /// Symbolic link: backing symlink with encoded context and blob.
    Symlink,
    /// FIFO, socket or device node: not encrypted (as in the kernel), only its name.
    Special,
}

/// One name of an inode: the parent directory and the backing name in it.
#[derive(Debug, Clone)]
pub struct Link {
    /// The parent directory (kept alive by this link).
    pub parent: Arc<Inode>,
    /// The backing name inside the parent.
    pub name: BackingName,
}

/// In-memory state of a regular file, guarded by the inode's `RwLock`.
#[derive(Debug)]
pub struct FileState {
    /// Whether `context`/`size` were read from the header.
    pub loaded: bool,
    /// The file's context (from the header).
    pub context: [u8; CONTEXT_SIZE],
    /// Plaintext size in bytes (mirrors the header).
    pub size: u64,
    /// The backing file while handles are open (shared by all handles).
    pub fd: Option<Arc<File>>,
    /// Whether `fd` was opened read-write.
    pub fd_writable: bool,
    /// Number of open handles.
    pub opens: u32,
}

impl Default for FileState {
    fn default() -> FileState {
        FileState {
            loaded: false,
            context: [0u8; CONTEXT_SIZE],
            size: 0,
            fd: None,
            fd_writable: false,
            opens: 0,
        }
    }
}

/// An in-memory inode.
pub struct Inode {
    /// FUSE inode number.
    pub ino: InodeNo,
    /// Backing inode number.
    pub backing_ino: u64,
    /// What it is.
    pub kind: Kind,
    /// Kernel lookup count.
    nlookup: AtomicU64,
    /// Names of this inode known to us (one for directories; several for hard
    /// links; empty for the root and for unlinked files).
    links: Mutex<Vec<Link>>,
    /// Directories: an `O_RDONLY|O_DIRECTORY` fd of the backing directory,
    /// which follows renames of the directory and its ancestors.
    pub dir_fd: Option<OwnedFd>,
    /// Cached crypto state (directories: names; files: contents; symlinks: target).
    pub crypt: OnceLock<NodeCrypt>,
    /// Cached plaintext symlink target length (for `st_size`).
    pub symlink_size: OnceLock<u64>,
    /// Regular files: contents state.
    pub file: RwLock<FileState>,
}

impl std::fmt::Debug for Inode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inode")
            .field("ino", &self.ino)
            .field("backing_ino", &self.backing_ino)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl Inode {
    /// A new inode with no lookups yet.
    pub fn new(
        ino: InodeNo,
        backing_ino: u64,
        kind: Kind,
        dir_fd: Option<OwnedFd>,
        link: Option<Link>,
    ) -> Inode {
        Inode {
            ino,
            backing_ino,
            kind,
            nlookup: AtomicU64::new(0),
            links: Mutex::new(link.into_iter().collect()),
            dir_fd,
            crypt: OnceLock::new(),
            symlink_size: OnceLock::new(),
            file: RwLock::new(FileState::default()),
        }
    }

    /// The first known link (where to find this inode in the backing store).
    pub fn first_link(&self) -> Option<Link> {
        self.links.lock().ok()?.first().cloned()
    }

    /// Adds a link unless already known.
    pub fn add_link(&self, parent: &Arc<Inode>, name: &BackingName) {
        if let Ok(mut l) = self.links.lock()
            && !l
                .iter()
                .any(|k| k.parent.ino == parent.ino && k.name == *name)
        {
            l.push(Link {
                parent: parent.clone(),
                name: name.clone(),
            });
        }
    }

    /// Removes a link (after unlink or rename away).
    pub fn remove_link(&self, parent: InodeNo, name: &BackingName) {
        if let Ok(mut l) = self.links.lock() {
            l.retain(|k| !(k.parent.ino == parent && k.name == *name));
        }
    }

    /// Whether no link is known.
    pub fn unlinked(&self) -> bool {
        self.links.lock().map(|l| l.is_empty()).unwrap_or(true)
    }

    /// Whether a handle is open on this file.
    pub fn is_open(&self) -> bool {
        self.file.read().map(|f| f.opens > 0).unwrap_or(false)
    }
}

/// The table of inodes the kernel knows.
#[derive(Debug)]
pub struct InodeTable {
    map: RwLock<HashMap<InodeNo, Arc<Inode>>>,
    /// Backing inode number of the root directory.
    root_backing: u64,
}

impl InodeTable {
    /// A table holding the root.
    pub fn new(root: Inode) -> InodeTable {
        let root_backing = root.backing_ino;
        root.nlookup.store(1, Ordering::Relaxed);
        let mut map = HashMap::new();
        map.insert(ROOT, Arc::new(root));
        InodeTable {
            map: RwLock::new(map),
            root_backing,
        }
    }

    /// The FUSE inode number of a backing inode number (root ↔ 1 swapped).
    pub fn fuse_ino(&self, backing: u64) -> InodeNo {
        if backing == self.root_backing {
            ROOT
        } else if backing == 1 {
            InodeNo(self.root_backing)
        } else {
            InodeNo(backing)
        }
    }

    /// The inode with this number, if the kernel knows it.
    pub fn get(&self, ino: InodeNo) -> Option<Arc<Inode>> {
        self.map.read().ok()?.get(&ino).cloned()
    }

    /// Records one kernel lookup of `ino`: returns the known inode if it is
    /// still the same object (same kind, still linked or open), else installs
    /// the one built by `make` (keeping the kernel's lookup count).
    pub fn lookup_or_insert<E>(
        &self,
        ino: InodeNo,
        kind: Kind,
        make: impl FnOnce() -> Result<Inode, E>,
    ) -> Result<Arc<Inode>, E> {
        if let Some(existing) = self.get(ino)
            && existing.kind == kind
            && (ino == ROOT || !existing.unlinked() || existing.is_open())
        {
            existing.nlookup.fetch_add(1, Ordering::Relaxed);
            return Ok(existing);
        }
        let fresh = Arc::new(make()?);
        let mut map = match self.map.write() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        let carried = map
            .get(&ino)
            .map(|old| old.nlookup.load(Ordering::Relaxed))
            .unwrap_or(0);
        fresh.nlookup.store(carried + 1, Ordering::Relaxed);
        map.insert(ino, fresh.clone());
        Ok(fresh)
    }

    /// Drops `n` kernel lookups; removes the inode when none remain.
    pub fn forget(&self, ino: InodeNo, n: u64) {
        if ino == ROOT {
            return;
        }
        let mut map = match self.map.write() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        if let Some(i) = map.get(&ino) {
            let prev = i.nlookup.load(Ordering::Relaxed);
            let now = prev.saturating_sub(n);
            i.nlookup.store(now, Ordering::Relaxed);
            if now == 0 {
                map.remove(&ino);
            }
        }
    }
}
