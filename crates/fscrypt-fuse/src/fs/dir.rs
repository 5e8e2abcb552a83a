//! Directories: opendir, readdir, readdirplus, releasedir, fsyncdir, statfs.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStringExt;
use std::sync::Arc;

use std::time::UNIX_EPOCH;

use fscrypt::NAME_MAX;
use fscrypt::fname::is_dot_or_dotdot;
use fscrypt::hooks::{PresentedName, present_entry};
use fuser::{FileAttr, FileType};

use crate::error::{Corruption, Error, Result, WrongType};
use crate::handles::{DirEntry, FileHandle, Handle};
use crate::inodes::{Inode, InodeNo, Kind, ROOT};
use fscrypt_vault::conflict;

use super::{EncryptedFs, FsStats, sys};

/// The attributes of an entry that is listed but not looked up: node id
/// and type only (the kernel ignores the rest: it links no inode to it).
fn bare_attr(ino: u64, kind: Kind) -> FileAttr {
    FileAttr {
        ino: fuser::INodeNo(ino),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: match kind {
            Kind::Dir => FileType::Directory,
            Kind::File => FileType::RegularFile,
            Kind::Symlink => FileType::Symlink,
            Kind::Special => FileType::NamedPipe,
        },
        perm: 0,
        nlink: 1,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl EncryptedFs {
    /// Opens a directory for listing.
    ///
    /// # Errors
    /// `ENOTDIR`, `ENOENT`.
    pub fn opendir(&self, ino: InodeNo) -> Result<FileHandle> {
        let inode = self.inode(ino)?;
        if inode.kind != Kind::Dir {
            return Err(Error::WrongType(WrongType::NotDir));
        }
        self.check_access(&inode, libc::R_OK as u32)?;
        Ok(self.handles.insert(Handle::Dir {
            inode,
            entries: std::sync::Mutex::new(None),
        }))
    }

    pub(super) fn list(&self, dir: &Arc<Inode>) -> Result<Vec<DirEntry>> {
        let fd = self.dir_fd(dir)?;
        let crypt = self.dir_crypt_opt(dir)?;
        let parent_ino = dir
            .first_link()
            .map(|l| l.parent.ino.0)
            .unwrap_or(dir.ino.0);
        let mut out = vec![
            DirEntry {
                ino: dir.ino.0,
                kind: Kind::Dir,
                name: OsString::from("."),
                backing: None,
            },
            DirEntry {
                ino: parent_ino,
                kind: Kind::Dir,
                name: OsString::from(".."),
                backing: None,
            },
        ];
        let mut d = rustix::fs::Dir::read_from(fd).map_err(sys)?;
        while let Some(ent) = d.read() {
            let ent = ent.map_err(sys)?;
            let ename = ent.file_name().to_bytes();
            let Some((ct, backing)) = self.entry_name(dir, ename)? else {
                continue;
            };
            // Plaintext with the key, the no-key name (no dirhash) without;
            // a conflict copy's with the sync tool's marker where the tool
            // would have put it in that name.
            let shown = |n: &[u8]| match &backing.marker {
                Some(m) => conflict::insert(n, m.as_bytes()),
                None => n.to_vec(),
            };
            let name = match present_entry(crypt.as_deref(), &ct, 0, 0) {
                Ok(PresentedName::Plain(p)) if !is_dot_or_dotdot(&p) => shown(&p),
                Ok(PresentedName::NoKey(n)) => shown(n.as_bytes()),
                // A corrupt entry (EUCLEAN: bad length, undecryptable, or a
                // plaintext "." / "..") is logged by its backing name and skipped.
                r => {
                    let e = match r {
                        Err(e) => Error::Format(e),
                        Ok(_) => Error::Corrupt(Corruption::BadName),
                    };
                    if !e.is_corruption() {
                        return Err(e);
                    }
                    let what = String::from_utf8_lossy(ename).into_owned();
                    let _ = self.note::<()>(dir, Some(&what), Err(e));
                    continue;
                }
            };
            if name.len() > NAME_MAX {
                log::warn!(
                    "fscrypt-fuse: {}: a conflict copy whose shown name would pass {NAME_MAX} bytes is not listed; rename the original to a shorter name",
                    self.backing_path(dir)
                        .join(String::from_utf8_lossy(ename).as_ref())
                        .display()
                );
                continue;
            }
            let name = OsString::from_vec(name);
            let kind = match ent.file_type() {
                rustix::fs::FileType::Directory => Kind::Dir,
                rustix::fs::FileType::RegularFile => Kind::File,
                rustix::fs::FileType::Symlink => Kind::Symlink,
                _ => Kind::Special,
            };
            out.push(DirEntry {
                ino: self.inodes.fuse_ino(ent.ino()).0,
                kind,
                name,
                backing: Some(backing),
            });
        }
        Ok(out)
    }

    /// Entries of an open directory from `offset` (0 = start; each entry's
    /// offset is its index + 1). `add` returns true when the reply is full.
    ///
    /// # Errors
    /// `EBADF`, backing errors.
    pub fn readdir(
        &self,
        fh: FileHandle,
        offset: u64,
        mut add: impl FnMut(u64, u64, Kind, &OsStr) -> bool,
    ) -> Result<()> {
        let h = self.handles.get(fh).ok_or(Error::BadHandle)?;
        let Handle::Dir { inode, entries } = &*h else {
            return Err(Error::WrongType(WrongType::NotDir));
        };
        let list = {
            let mut e = entries.lock()?;
            if offset == 0 || e.is_none() {
                *e = Some(Arc::new(self.list(inode)?));
            }
            e.clone().unwrap_or_default()
        };
        for (i, ent) in list.iter().enumerate().skip(offset as usize) {
            if add(ent.ino, i as u64 + 1, ent.kind, &ent.name) {
                break;
            }
        }
        Ok(())
    }

    /// Entries of an open directory from `offset` with their attributes
    /// (readdirplus): each entry but "." and ".." is looked up as
    /// [`EncryptedFs::lookup`] does, and `add` gets its attributes with
    /// `looked_up` true: one kernel lookup recorded, which the kernel
    /// FORGETs. "." and ".." are no lookups for the kernel (`looked_up`
    /// false). An entry gone since the listing is left out; one that cannot
    /// be looked up otherwise (a mount point, an I/O error) comes with node
    /// id 1 and `looked_up` false: the kernel lists the name without
    /// caching it, and a later LOOKUP reports the error. `add` returns true
    /// when the reply is full and the entry was not taken: its lookup is
    /// undone.
    ///
    /// # Errors
    /// `EBADF`, backing errors of the listing.
    pub fn readdirplus(
        &self,
        fh: FileHandle,
        offset: u64,
        mut add: impl FnMut(u64, &OsStr, &FileAttr, bool) -> bool,
    ) -> Result<()> {
        let h = self.handles.get(fh).ok_or(Error::BadHandle)?;
        let Handle::Dir { inode, entries } = &*h else {
            return Err(Error::WrongType(WrongType::NotDir));
        };
        let list = {
            let mut e = entries.lock()?;
            if offset == 0 || e.is_none() {
                *e = Some(Arc::new(self.list(inode)?));
            }
            e.clone().unwrap_or_default()
        };
        for (i, ent) in list.iter().enumerate().skip(offset as usize) {
            let (attr, counted) = match &ent.backing {
                None => (bare_attr(ent.ino, ent.kind), false),
                Some(b) => match self.lookup_entry(inode, b) {
                    Ok(a) => (a, true),
                    // Gone since the listing: as if listed a moment later.
                    Err(e) if e.errno() == libc::ENOENT => continue,
                    // fuser sends one number as node id and d_ino; 0 would
                    // hide the name (glibc's readdir skips d_ino 0), so it
                    // goes with node id 1, which the kernel refuses to link
                    // (FUSE_ROOT_ID is never an entry: it answers with a
                    // FORGET of the root, which counts nothing). The name is
                    // listed; its LOOKUP reports the error.
                    Err(_) => (bare_attr(ROOT.0, ent.kind), false),
                },
            };
            if add(i as u64 + 1, &ent.name, &attr, counted) {
                if counted {
                    self.inodes.forget(InodeNo(attr.ino.0), 1);
                }
                break;
            }
        }
        Ok(())
    }

    /// Closes a directory handle.
    ///
    /// # Errors
    /// `EBADF`.
    pub fn releasedir(&self, fh: FileHandle) -> Result<()> {
        self.release(fh)
    }

    /// Flushes a directory to stable storage.
    ///
    /// # Errors
    /// Backing errors.
    pub fn fsyncdir(&self, ino: InodeNo) -> Result<()> {
        let inode = self.inode(ino)?;
        rustix::fs::fsync(self.dir_fd(&inode)?).map_err(sys)
    }

    /// Statistics of the backing filesystem.
    ///
    /// # Errors
    /// Backing errors.
    pub fn statfs(&self) -> Result<FsStats> {
        let root = self.inode(ROOT)?;
        let s = rustix::fs::fstatvfs(self.dir_fd(&root)?).map_err(sys)?;
        Ok(FsStats {
            blocks: s.f_blocks,
            bfree: s.f_bfree,
            bavail: s.f_bavail,
            files: s.f_files,
            ffree: s.f_ffree,
            bsize: s.f_bsize as u32,
            namelen: NAME_MAX as u32,
            frsize: s.f_frsize as u32,
        })
    }
}
