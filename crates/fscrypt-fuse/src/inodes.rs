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
//! component through `safe-open`: `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
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
//! [`INODE_STATE_BYTES`] (256 bytes on x86-64) plus its links' names;
//! measured ~540 bytes of RSS per cached inode in all. Once the kernel
//! forgets inodes, the shards give back their map capacity and the heap
//! trimmer ([`set_heap_trimmer`]) returns the freed memory: the daemon's
//! RSS after creating 100,000 files and removing them again is back near
//! its start (8 to 20 MB, from 66 MB before the trimming).
//!
//! Lifetimes: an [`Inode`] lives in the table while the kernel holds lookups on
//! it (`nlookup > 0`) and is removed by `forget`; open handles and child links
//! hold their own `Arc`s, so an inode outlives its table entry while in use.
//!
//! Locking: the table is [`SHARDS`] maps, each behind its own `RwLock`,
//! chosen by backing inode number; a shard's lock protects only its map and
//! is never held across a system call (nor while an inode is dropped). Each inode protects its links with a `Mutex` and its file
//! state with an `RwLock` (readers share it, writers and truncation take it
//! exclusively: this is the per-file lock that makes read-modify-write of a
//! data unit atomic). Lock order: file state before links; never two inodes'
//! file states at once.

use std::collections::HashMap;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use fscrypt::ContextV2;

use crate::crypt::NodeCrypt;
use crate::layout::BackingName;

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

static SLOTS: AtomicUsize = AtomicUsize::new(0);

/// Map slots of all inode tables of this process (their capacity): a test
/// hook for the tables giving memory back once the kernel forgets inodes.
pub fn inode_table_slots() -> usize {
    SLOTS.load(Ordering::Relaxed)
}

/// Adds the change of a map's capacity from `before` to [`SLOTS`].
fn account_slots(before: usize, after: usize) {
    if after > before {
        SLOTS.fetch_add(after - before, Ordering::Relaxed);
    } else if before > after {
        SLOTS.fetch_sub(before - after, Ordering::Relaxed);
    }
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
    pub context: Option<ContextV2>,
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
    /// Of these, the handles whose every close sends FLUSH (format 3:
    /// opened for writing by OPEN; the others are answered
    /// `FOPEN_NOFLUSH`). While there is none, each change ends its own
    /// write session (`fs/tags.rs`, `end_unflushed`).
    pub flushers: u32,
    /// The contents key while handles are open (dropped with the last one).
    pub crypt: Option<NodeCrypt>,
    /// Format 3: the record and tag state while handles are open (see
    /// `fs/tags.rs`).
    pub(crate) tagged: Option<Box<crate::fs::tags::TaggedFile>>,
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
    pub fn context(&self) -> Option<ContextV2> {
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

/// Number of shards of the inode table (a power of two).
const SHARDS: usize = 64;

/// At most this many inodes removed from all tables between two returns of
/// freed heap memory to the kernel ([`set_heap_trimmer`]).
const TRIM_EVERY: usize = 16 * 1024;

/// At least this many removed before an early trim (once more inodes were
/// freed than remain alive: the end of an `rm -rf` or of a cache drop).
const TRIM_MIN: usize = 1024;

static REMOVED_SINCE_TRIM: AtomicUsize = AtomicUsize::new(0);

static HEAP_TRIMMER: OnceLock<fn()> = OnceLock::new();

/// Sets what gives freed heap memory back to the kernel, called after many
/// inodes were forgotten (once per process; later calls are ignored). This
/// crate denies `unsafe` outside `ring/` (io_uring submissions), and a
/// libc call belongs to the binary anyway, so the binary supplies it: with
/// glibc's malloc,
/// `malloc_trim(0)`. glibc keeps what was freed in its arenas (one per
/// worker thread) and returns only the top of each heap by itself, so after
/// the kernel forgets 100,000 inodes their memory, interleaved with live
/// allocations, would otherwise stay in the daemon's RSS.
pub fn set_heap_trimmer(trim: fn()) {
    let _ = HEAP_TRIMMER.set(trim);
}

/// Calls the heap trimmer, if one is set.
pub(crate) fn trim_heap() {
    if let Some(trim) = HEAP_TRIMMER.get() {
        trim();
    }
}

/// One shard: the inodes whose backing inode number hashes to it.
#[derive(Default)]
struct Shard {
    by_no: HashMap<InodeNo, Arc<Inode>>,
    /// Backing inode numbers with entries in the high range.
    alts: HashMap<u64, Vec<InodeNo>>,
    /// Counter of this shard's high-range node ids.
    next_alt: u64,
}

impl Shard {
    fn candidates(&self, primary: InodeNo, backing: u64) -> impl Iterator<Item = &Arc<Inode>> {
        std::iter::once(primary)
            .chain(self.alts.get(&backing).into_iter().flatten().copied())
            .filter_map(|n| self.by_no.get(&n))
            .filter(move |i| i.backing_ino == backing)
    }

    /// Gives back spare capacity once the map is far below it (a
    /// `HashMap` never shrinks by itself); each shrink at least halves the
    /// capacity, so the rehashing costs O(1) per removal amortized.
    fn maybe_shrink(&mut self) {
        let before = self.by_no.capacity();
        if before > 4 * self.by_no.len().max(16) {
            self.by_no.shrink_to(2 * self.by_no.len());
            account_slots(before, self.by_no.capacity());
        }
        if self.alts.capacity() > 4 * self.alts.len().max(16) {
            self.alts.shrink_to(2 * self.alts.len());
        }
    }
}

fn shard_of_backing(backing: u64) -> usize {
    // Fibonacci hashing: consecutive inode numbers spread over all shards.
    (backing.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SHARDS.trailing_zeros())) as usize
}

/// The table of inodes the kernel knows, sharded by backing inode number:
/// lookups, creations and forgets in different directories (different
/// inodes) take different locks. A high-range node id carries its shard in
/// its low bits, so every node id finds its shard without a global map.
pub struct InodeTable {
    shards: Box<[RwLock<Shard>]>,
    /// Backing inode number of the root directory.
    root_backing: u64,
    /// The shard [`InodeTable::prune_candidates`] starts from next.
    prune_cursor: AtomicUsize,
}

impl std::fmt::Debug for InodeTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InodeTable")
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl Drop for InodeTable {
    fn drop(&mut self) {
        for s in 0..SHARDS {
            account_slots(self.read(s).by_no.capacity(), 0);
        }
    }
}

impl InodeTable {
    /// A table holding the root.
    pub fn new(root: Inode) -> InodeTable {
        let root_backing = root.backing_ino;
        root.nlookup.store(1, Ordering::Relaxed);
        let shards: Box<[RwLock<Shard>]> =
            (0..SHARDS).map(|_| RwLock::new(Shard::default())).collect();
        let t = InodeTable {
            shards,
            root_backing,
            prune_cursor: AtomicUsize::new(0),
        };
        let mut m = t.write(t.shard_of(ROOT));
        m.by_no.insert(ROOT, Arc::new(root));
        account_slots(0, m.by_no.capacity());
        drop(m);
        t
    }

    /// The shard holding node id `no`.
    fn shard_of(&self, no: InodeNo) -> usize {
        if no.0 >= ALT_BASE {
            ((no.0 - ALT_BASE) % SHARDS as u64) as usize
        } else {
            shard_of_backing(self.backing_of(no))
        }
    }

    /// The backing inode number of a plain (not high-range) node id.
    fn backing_of(&self, no: InodeNo) -> u64 {
        if no == ROOT {
            self.root_backing
        } else if no.0 == self.root_backing {
            1
        } else {
            no.0
        }
    }

    fn read(&self, shard: usize) -> std::sync::RwLockReadGuard<'_, Shard> {
        match self.shards[shard].read() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        }
    }

    fn write(&self, shard: usize) -> std::sync::RwLockWriteGuard<'_, Shard> {
        match self.shards[shard].write() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        }
    }

    /// Number of inodes in the table (the root included).
    pub(crate) fn len(&self) -> usize {
        (0..SHARDS).map(|s| self.read(s).by_no.len()).sum()
    }

    /// Up to `n` node ids the kernel may be asked to drop (`prune.rs`):
    /// the root never, nor a file with an open handle; other non-directories
    /// first (a directory goes only once its children went), from a shard
    /// further on at each call, so that entries the kernel keeps (in use)
    /// do not stand in the way of the others round after round.
    pub(crate) fn prune_candidates(&self, n: usize) -> Vec<InodeNo> {
        let start = self.prune_cursor.fetch_add(1, Ordering::Relaxed);
        let mut out = Vec::with_capacity(n.min(1 << 16));
        for dirs in [false, true] {
            for k in 0..SHARDS {
                let m = self.read((start + k) % SHARDS);
                for (no, inode) in &m.by_no {
                    if out.len() >= n {
                        return out;
                    }
                    let open = inode.file.try_read().map_or(true, |st| st.opens > 0);
                    if *no != ROOT && (inode.kind == Kind::Dir) == dirs && !open {
                        out.push(*no);
                    }
                }
            }
        }
        out
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
        self.read(self.shard_of(ino)).by_no.get(&ino).cloned()
    }

    /// Every inode in the table with backing inode number `backing`.
    pub fn with_backing(&self, backing: u64) -> Vec<Arc<Inode>> {
        let m = self.read(shard_of_backing(backing));
        m.candidates(self.fuse_ino(backing), backing)
            .cloned()
            .collect()
    }

    /// Records one kernel lookup of the object with identity `id`: returns
    /// the known inode if it is that object, else installs a new one built by
    /// `make` with a node id of its own (the plain one if free, else one of
    /// the high range), so that two incarnations never share an entry.
    /// `make` runs under the shard's lock: it must not block.
    pub fn lookup_or_insert<E>(
        &self,
        id: Ident,
        make: impl FnOnce(InodeNo) -> Result<Inode, E>,
    ) -> Result<Arc<Inode>, E> {
        let primary = self.fuse_ino(id.ino);
        let shard = shard_of_backing(id.ino);
        {
            let m = self.read(shard);
            if let Some(existing) = m.candidates(primary, id.ino).find(|i| i.is(&id)) {
                existing.nlookup.fetch_add(1, Ordering::Relaxed);
                return Ok(existing.clone());
            }
        }
        let mut m = self.write(shard);
        if let Some(existing) = m.candidates(primary, id.ino).find(|i| i.is(&id)) {
            existing.nlookup.fetch_add(1, Ordering::Relaxed);
            return Ok(existing.clone());
        }
        let no = if primary != ROOT && !m.by_no.contains_key(&primary) {
            primary
        } else {
            // ALT_BASE + k * SHARDS + shard: `shard_of` finds it again.
            let n = InodeNo(ALT_BASE + m.next_alt * SHARDS as u64 + shard as u64);
            m.next_alt += 1;
            m.alts.entry(id.ino).or_default().push(n);
            n
        };
        let fresh = Arc::new(make(no)?);
        fresh.nlookup.store(1, Ordering::Relaxed);
        let before = m.by_no.capacity();
        m.by_no.insert(no, fresh.clone());
        account_slots(before, m.by_no.capacity());
        Ok(fresh)
    }

    /// Drops `n` kernel lookups; removes the inode when none remain. Every
    /// [`TRIM_EVERY`] removals, or sooner once more inodes were removed than
    /// remain alive, the freed heap memory goes back to the kernel
    /// ([`set_heap_trimmer`]).
    pub fn forget(&self, ino: InodeNo, n: u64) {
        if ino == ROOT {
            return;
        }
        let removed = {
            let mut m = self.write(self.shard_of(ino));
            let Some(i) = m.by_no.get(&ino) else {
                return;
            };
            let prev = i.nlookup.load(Ordering::Relaxed);
            let now = prev.saturating_sub(n);
            i.nlookup.store(now, Ordering::Relaxed);
            if now != 0 {
                return;
            }
            let backing = i.backing_ino;
            let removed = m.by_no.remove(&ino);
            if ino.0 >= ALT_BASE
                && let Some(v) = m.alts.get_mut(&backing)
            {
                v.retain(|x| *x != ino);
                if v.is_empty() {
                    m.alts.remove(&backing);
                }
            }
            m.maybe_shrink();
            removed
        };
        // The inode (and what only it held: names, parents, fds) is freed
        // here, outside the shard's lock.
        drop(removed);
        let since = REMOVED_SINCE_TRIM.fetch_add(1, Ordering::Relaxed) + 1;
        if since >= TRIM_EVERY || (since >= TRIM_MIN && live_inodes() < since) {
            // One thread wins the reset and trims; the others go on.
            if REMOVED_SINCE_TRIM
                .compare_exchange(since, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                trim_heap();
            }
        }
    }
}
