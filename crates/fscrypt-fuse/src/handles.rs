//! The table of open file and directory handles.
//!
//! A handle lives from `open`/`create`/`opendir` until `release`/`releasedir`.
//! It holds an `Arc` of its inode, so an open-unlinked file keeps working.
//! The table's `Mutex` protects only the map and is never held across I/O; a
//! directory handle's listing has its own `Mutex`. A panic can never leave
//! the map half-updated (it is held for one `HashMap` call only), so a
//! poisoned table lock is recovered; a poisoned listing lock is
//! `Error::Poisoned`.

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
    },
    /// An open directory.
    Dir {
        /// The directory's inode.
        inode: Arc<Inode>,
        /// Snapshot of the entries, taken when reading from offset 0.
        entries: Mutex<Option<Arc<Vec<DirEntry>>>>,
    },
}

/// The handle table.
#[derive(Debug, Default)]
pub struct HandleTable {
    next: AtomicU64,
    map: Mutex<HashMap<FileHandle, Arc<Handle>>>,
}

impl HandleTable {
    /// An empty table.
    pub fn new() -> HandleTable {
        HandleTable {
            next: AtomicU64::new(1),
            map: Mutex::new(HashMap::new()),
        }
    }

    /// Registers a handle and returns its number.
    pub fn insert(&self, h: Handle) -> FileHandle {
        let fh = FileHandle(self.next.fetch_add(1, Ordering::Relaxed));
        self.map().insert(fh, Arc::new(h));
        fh
    }

    /// The handle with this number.
    pub fn get(&self, fh: FileHandle) -> Option<Arc<Handle>> {
        self.map().get(&fh).cloned()
    }

    /// Removes and returns a handle.
    pub fn remove(&self, fh: FileHandle) -> Option<Arc<Handle>> {
        self.map().remove(&fh)
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<FileHandle, Arc<Handle>>> {
        match self.map.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        }
    }
}
