//! The inode table: FUSE inode numbers to in-memory inodes.
//!
//! FUSE inode numbers are the backing inode numbers (so `stat` shows stable
//! numbers across remounts and hard links share one number), except that the
//! backing root's number and 1 are swapped, since FUSE's root is always 1.
//!
//! Identity (issue 9 §3): a backing object is the one the kernel looked up,
//! never "whatever sits under that name now". Each inode records the
//! identity it was looked up with — backing (device, inode number), kind and,
//! for encrypted objects, the 40-byte context (whose 16-byte random nonce
//! tells two incarnations of a reused inode number apart). We chose
//! **by-name reopening with identity checks** over an `O_PATH` fd per cached
//! inode: the kernel caches hundreds of thousands of inodes (100,000 files
//! created = 100,000 lookups held), which would need that many fds (the hard
//! `RLIMIT_NOFILE` here is 20,000 and an unprivileged daemon cannot raise it)
//! and would pin every backing inode and dentry in kernel memory as well.
//! Instead every later access reopens a link of the inode by name (one
//! component, `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV`, `O_PATH | O_NOFOLLOW`), checks
//! `fstat` (device, inode number, type) and, for files and symlinks, the
//! context against the recorded one, tries the inode's other links on a
//! mismatch and fails with `ESTALE` if none fits (the kernel then retries
//! the open with a fresh lookup). Open files keep their fd (exact identity),
//! directories keep an `O_RDONLY` fd (needed as the base of `*at` calls).
//!
//! Node ids: the FUSE node id is normally the backing inode number, except
//! that the backing root's number and 1 are swapped, since FUSE's root is
//! always 1. When the table still holds an entry for that number whose
//! object is another incarnation (the backing file system reused a freed
//! inode number while the kernel still holds the old inode), the new object
//! gets a node id from a separate high range ([`ALT_BASE`] and up), so the
//! two never share a table entry, a kernel inode or a forget count; once the
//! kernel forgets the old one, later incarnations get the plain number again.
//! The generation stays 0: node ids are never reused while the kernel knows
//! them.
//!
//! Memory: an inode holds no key material except a directory's name key;
//! a file's contents key lives in its [`FileState`] only while the file is
//! open, a symlink's key only during readlink. A cached inode costs
//! [`INODE_STATE_BYTES`] plus its links' names.
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
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::crypt::NodeCrypt;
use crate::layout::{BackingName, CONTEXT_SIZE};

/// A FUSE inode number (1 = root).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InodeNo(pub u64);

/// FUSE's root inode number.
pub const ROOT: InodeNo = InodeNo(1);

/// First node id of the range given to a second incarnation of a backing
/// inode number still held by the kernel (see the module docs).
pub const ALT_BASE: u64 = 1 << 62;

/// Bytes of per-inode state in the table (the inode, its `Arc` header and
/// its map slot), without the names of its links.
pub const INODE_STATE_BYTES: usize = std::mem::size_of::<Inode>()
    + 2 * std::mem::size_of::<usize>()
    + std::mem::size_of::<(InodeNo, Arc<Inode>)>();

// The per-inode state stays a few hundred bytes (no key schedules in it).
const _: () = assert!(INODE_STATE_BYTES <= 512);

static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Number of in-memory inodes alive in this process (all mounts): a test
/// hook for the memory bound.
pub fn live_inodes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

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

/// What identifies a backing object: where it lives, what it is and, for
/// encrypted objects with a readable header, its context (random nonce).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ident {
    /// Backing device (`st_dev`).
    pub dev: u64,
    /// Backing inode number (`st_ino`).
    pub ino: u64,
    /// What it is.
    pub kind: Kind,
    /// Files, directories, symlinks: the stored context, `None` if it could
    /// not be read (a damaged object) or for special files.
    pub context: Option<[u8; CONTEXT_SIZE]>,
}

/// In-memory state of a regular file, guarded by the inode's `RwLock`.
#[derive(Debug, Default)]
pub struct FileState {
    /// Plaintext size in bytes (mirrors the header).
    pub size: u64,
    /// The backing file while handles are open (shared by all handles).
    pub fd: Option<Arc<File>>,
    /// Whether `fd` was opened read-write.
    pub fd_writable: bool,
    /// Number of open handles.
    pub opens: u32,
    /// The contents key while handles are open (dropped with the last one).
    pub crypt: Option<NodeCrypt>,
}

/// An in-memory inode.
pub struct Inode {
    /// FUSE inode number.
    pub ino: InodeNo,
    /// Backing inode number.
    pub backing_ino: u64,
    /// What it is.
    pub kind: Kind,
    /// The identity it was looked up with.
    pub ident: Ident,
    /// Kernel lookup count.
    nlookup: AtomicU64,
    /// Names of this inode known to us (one for directories; several for hard
    /// links; empty for the root and for unlinked files).
    links: Mutex<Vec<Link>>,
    /// Directories: an `O_RDONLY|O_DIRECTORY` fd of the backing directory,
    /// which follows renames of the directory and its ancestors.
    pub dir_fd: Option<OwnedFd>,
    /// Directories: the cached name key.
    pub crypt: OnceLock<NodeCrypt>,
    /// Files whose last name was unlinked or renamed over through the mount
    /// while the kernel still holds them: an `O_PATH` fd that keeps the
    /// backing object reachable (as the kernel's inode stays usable on a
    /// local file system) until the kernel forgets the inode.
    pub orphan: Mutex<Option<OwnedFd>>,
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

impl Drop for Inode {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Inode {
    /// A new inode with no lookups yet; `size` is a file's plaintext size.
    pub fn new(
        ino: InodeNo,
        ident: Ident,
        dir_fd: Option<OwnedFd>,
        link: Option<Link>,
        size: u64,
    ) -> Inode {
        LIVE.fetch_add(1, Ordering::Relaxed);
        Inode {
            ino,
            backing_ino: ident.ino,
            kind: ident.kind,
            ident,
            nlookup: AtomicU64::new(0),
            links: Mutex::new(link.into_iter().collect()),
            dir_fd,
            crypt: OnceLock::new(),
            orphan: Mutex::new(None),
            symlink_size: OnceLock::new(),
            file: RwLock::new(FileState {
                size,
                ..FileState::default()
            }),
        }
    }

    /// The stored context this inode was looked up with.
    pub fn context(&self) -> Option<[u8; CONTEXT_SIZE]> {
        self.ident.context
    }

    /// The first known link (where to find this inode in the backing store).
    pub fn first_link(&self) -> Option<Link> {
        self.links.lock().ok()?.first().cloned()
    }

    /// The `i`-th known link (links are tried in turn without copying them
    /// all: a file may have tens of thousands).
    pub fn link_at(&self, i: usize) -> Option<Link> {
        self.links.lock().ok()?.get(i).cloned()
    }

    /// Number of known links.
    pub fn link_count(&self) -> usize {
        self.links.lock().map(|l| l.len()).unwrap_or(0)
    }

    /// Whether `parent`/`name` is a known link.
    pub fn has_link(&self, parent: InodeNo, name: &BackingName) -> bool {
        self.links
            .lock()
            .map(|l| l.iter().any(|k| k.parent.ino == parent && k.name == *name))
            .unwrap_or(false)
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

    /// Whether a freshly looked-up object with identity `id` is this inode.
    fn is(&self, id: &Ident) -> bool {
        if self.ident.dev != id.dev || self.ident.ino != id.ino || self.kind != id.kind {
            return false;
        }
        match (self.ident.context, id.context) {
            // A random 16-byte nonce: equal contexts are the same object.
            (Some(a), Some(b)) => a == b,
            (None, None) => !self.unlinked() || self.is_open(),
            _ => false,
        }
    }
}

struct Map {
    by_no: HashMap<InodeNo, Arc<Inode>>,
    /// Backing inode numbers with entries in the high range.
    alts: HashMap<u64, Vec<InodeNo>>,
    next_alt: u64,
}

impl Map {
    fn candidates(&self, primary: InodeNo, backing: u64) -> impl Iterator<Item = &Arc<Inode>> {
        std::iter::once(primary)
            .chain(self.alts.get(&backing).into_iter().flatten().copied())
            .filter_map(|n| self.by_no.get(&n))
            .filter(move |i| i.backing_ino == backing)
    }
}

/// The table of inodes the kernel knows.
pub struct InodeTable {
    map: RwLock<Map>,
    /// Backing inode number of the root directory.
    root_backing: u64,
}

impl std::fmt::Debug for InodeTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InodeTable")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl InodeTable {
    /// A table holding the root.
    pub fn new(root: Inode) -> InodeTable {
        let root_backing = root.backing_ino;
        root.nlookup.store(1, Ordering::Relaxed);
        let mut by_no = HashMap::new();
        by_no.insert(ROOT, Arc::new(root));
        InodeTable {
            map: RwLock::new(Map {
                by_no,
                alts: HashMap::new(),
                next_alt: ALT_BASE,
            }),
            root_backing,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Map> {
        match self.map.read() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Map> {
        match self.map.write() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        }
    }

    /// Number of inodes in the table (the root included).
    pub(crate) fn len(&self) -> usize {
        self.read().by_no.len()
    }

    /// The plain FUSE node id of a backing inode number (root ↔ 1 swapped).
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
        self.read().by_no.get(&ino).cloned()
    }

    /// Every inode in the table with backing inode number `backing`.
    pub fn with_backing(&self, backing: u64) -> Vec<Arc<Inode>> {
        let m = self.read();
        m.candidates(self.fuse_ino(backing), backing)
            .cloned()
            .collect()
    }

    /// Records one kernel lookup of the object with identity `id`: returns
    /// the known inode if it is that object, else installs a new one built by
    /// `make` with a node id of its own (the plain one if free, else one of
    /// the high range), so that two incarnations never share an entry.
    pub fn lookup_or_insert<E>(
        &self,
        id: Ident,
        make: impl FnOnce(InodeNo) -> Result<Inode, E>,
    ) -> Result<Arc<Inode>, E> {
        let primary = self.fuse_ino(id.ino);
        {
            let m = self.read();
            if let Some(existing) = m.candidates(primary, id.ino).find(|i| i.is(&id)) {
                existing.nlookup.fetch_add(1, Ordering::Relaxed);
                return Ok(existing.clone());
            }
        }
        let mut m = self.write();
        if let Some(existing) = m.candidates(primary, id.ino).find(|i| i.is(&id)) {
            existing.nlookup.fetch_add(1, Ordering::Relaxed);
            return Ok(existing.clone());
        }
        let no = if primary != ROOT && !m.by_no.contains_key(&primary) {
            primary
        } else {
            let n = InodeNo(m.next_alt);
            m.next_alt += 1;
            m.alts.entry(id.ino).or_default().push(n);
            n
        };
        let fresh = Arc::new(make(no)?);
        fresh.nlookup.store(1, Ordering::Relaxed);
        m.by_no.insert(no, fresh.clone());
        Ok(fresh)
    }

    /// Drops `n` kernel lookups; removes the inode when none remain.
    pub fn forget(&self, ino: InodeNo, n: u64) {
        if ino == ROOT {
            return;
        }
        let mut m = self.write();
        let Some(i) = m.by_no.get(&ino) else {
            return;
        };
        let prev = i.nlookup.load(Ordering::Relaxed);
        let now = prev.saturating_sub(n);
        i.nlookup.store(now, Ordering::Relaxed);
        if now == 0 {
            let backing = i.backing_ino;
            m.by_no.remove(&ino);
            if ino.0 >= ALT_BASE
                && let Some(v) = m.alts.get_mut(&backing)
            {
                v.retain(|x| *x != ino);
                if v.is_empty() {
                    m.alts.remove(&backing);
                }
            }
        }
    }
}
