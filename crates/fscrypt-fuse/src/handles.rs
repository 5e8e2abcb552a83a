//! The table of open file and directory handles.
//!
//! A handle lives from `open`/`create`/`opendir` until `release`/`releasedir`.
//! It holds an `Arc` of its inode, so an open-unlinked file keeps working.
//! The table is [`SHARDS`] maps chosen by handle number (consecutive
//! numbers land in different shards), so the worker threads' reads and
//! writes on different handles do not wait for each other. A shard's `Mutex`
//! protects only its map and is never held across I/O; a directory handle's
//! listing has its own `Mutex`. A panic can never leave a map half-updated
//! (it is held for one `HashMap` call only), so a poisoned shard lock is
//! recovered; a poisoned listing lock is `Error::Poisoned`.

use std::collections::HashMap;
use std::ffi::OsString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::inodes::{Inode, Kind};
use crate::layout::BackingName;

/// A FUSE file handle number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileHandle(pub u64);

/// One listed directory entry.
#[derive(Debug, Clone)]
pub struct DirEntry {
    /// Inode number shown to readdir (the FUSE inode number).
    pub ino: u64,
    /// Entry kind.
    pub kind: Kind,
    /// Plaintext name (or no-key name on a locked mount).
    pub name: OsString,
    /// The backing entry, for readdirplus's lookup (`None`: "." and "..").
    pub backing: Option<BackingName>,
}

/// What a handle refers to.
#[derive(Debug)]
pub enum Handle {
    /// An open regular file.
    File {
        /// The file's inode.
        inode: Arc<Inode>,
        /// Opened with O_APPEND.
        append: bool,
        /// Opened for writing.
        write: bool,
        /// Each close of it sends FLUSH ([`crate::EncryptedFs::flushes`]).
        flushes: bool,
    },
    /// An open directory.
    Dir {
        /// The directory's inode.
        inode: Arc<Inode>,
        /// Snapshot of the entries, taken when reading from offset 0.
        entries: Mutex<Option<Arc<Vec<DirEntry>>>>,
    },
}

/// Entries of a directory listing whose release trims the heap.
const BIG_LISTING: usize = 4096;

/// Number of shards of the handle table (a power of two).
const SHARDS: usize = 16;

type Shard = Mutex<HashMap<FileHandle, Arc<Handle>>>;

/// The handle table.
#[derive(Debug)]
pub struct HandleTable {
    next: AtomicU64,
    shards: Box<[Shard]>,
}

impl Default for HandleTable {
    fn default() -> HandleTable {
        HandleTable::new()
    }
}

impl HandleTable {
    /// An empty table.
    pub fn new() -> HandleTable {
        HandleTable {
            next: AtomicU64::new(1),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    /// Registers a handle and returns its number.
    pub fn insert(&self, h: Handle) -> FileHandle {
        let fh = FileHandle(self.next.fetch_add(1, Ordering::Relaxed));
        self.map(fh).insert(fh, Arc::new(h));
        fh
    }

    /// The handle with this number.
    pub fn get(&self, fh: FileHandle) -> Option<Arc<Handle>> {
        self.map(fh).get(&fh).cloned()
    }

    /// Removes and returns a handle. A directory handle's large listing
    /// (as `rm -rf` of 100,000 files reads) is freed here and its memory
    /// given back to the kernel.
    pub fn remove(&self, fh: FileHandle) -> Option<Arc<Handle>> {
        let h = {
            let mut m = self.map(fh);
            let h = m.remove(&fh);
            // A burst of opens (thousands of files held open) must not pin
            // its peak capacity forever.
            let len = m.len();
            if m.capacity() > 4 * len.max(16) {
                m.shrink_to(2 * len);
            }
            h
        };
        if let Some(Handle::Dir { entries, .. }) = h.as_deref() {
            let listing = match entries.lock() {
                Ok(mut e) => e.take(),
                Err(p) => p.into_inner().take(),
            };
            if listing.is_some_and(|l| l.len() >= BIG_LISTING) {
                crate::inodes::trim_heap();
            }
        }
        h
    }

    fn map(&self, fh: FileHandle) -> std::sync::MutexGuard<'_, HashMap<FileHandle, Arc<Handle>>> {
        match self.shards[(fh.0 as usize) % SHARDS].lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        }
    }
}
