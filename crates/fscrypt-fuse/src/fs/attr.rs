//! Lookups and attributes: lookup, forget, getattr, setattr, readlink.

use std::ffi::OsStr;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use fuser::FileAttr;
use rustix::fs::{Timespec, Timestamps};

use crate::error::{Error, Result, WrongType};
use crate::inodes::{Inode, InodeNo, Kind};
use crate::layout::BackingName;

use super::{EncryptedFs, SetAttr, SetTime};

impl EncryptedFs {
    /// Looks up `name` in `parent` (one kernel lookup is recorded).
    ///
    /// # Errors
    /// `ENOENT`, `ENAMETOOLONG`, `ENOTDIR`, `EIO` for corrupt content.
    pub fn lookup(&self, parent: InodeNo, name: &OsStr) -> Result<FileAttr> {
        let p = self.inode(parent)?;
        if p.kind != Kind::Dir {
            return Err(Error::WrongType(WrongType::NotDir));
        }
        let bname = match self.resolve_name(&p, name) {
            Err(e) if e.is_invalid_name() => return Err(Error::NotFound),
            r => r?,
        };
        self.lookup_entry(&p, &bname)
    }

    /// Looks up backing entry `bname` of `parent`: on success one kernel
    /// lookup is recorded, on failure none.
    pub(super) fn lookup_entry(
        &self,
        parent: &Arc<Inode>,
        bname: &BackingName,
    ) -> Result<FileAttr> {
        let (inode, st) = self.lookup_backing(parent, bname)?;
        match self.attr_from(&inode, &st) {
            Ok(a) => Ok(a),
            Err(e) => {
                self.inodes.forget(inode.ino, 1);
                Err(e)
            }
        }
    }

    /// Drops `n` kernel lookups of `ino`.
    pub fn forget(&self, ino: InodeNo, n: u64) {
        self.inodes.forget(ino, n);
    }

    /// Attributes of `ino`.
    ///
    /// # Errors
    /// `ENOENT` for a stale inode, `EIO` for a corrupt header.
    pub fn getattr(&self, ino: InodeNo) -> Result<FileAttr> {
        let inode = self.inode(ino)?;
        let loc = self.loc(&inode)?;
        let st = self.stat_loc(&loc)?;
        self.attr_from(&inode, &st)
    }

    /// ACCESS: whether the caller may access `ino` with `mask` (access(2)'s
    /// mode: R_OK 4, W_OK 2, X_OK 1; 0: it exists), as the backing
    /// filesystem answers the daemon (see [`super::FsOptions::check_access`];
    /// the kernel sends ACCESS only then).
    ///
    /// # Errors
    /// `EACCES`, `EROFS`, `ESTALE`, backing errors.
    pub fn access(&self, ino: InodeNo, mask: u32) -> Result<()> {
        let inode = self.inode(ino)?;
        self.access_loc(&self.loc(&inode)?, mask)
    }

    /// Changes attributes: owner, mode, size (truncate), times — in that order.
    ///
    /// # Errors
    /// `EROFS`, `ENOKEY` (truncate without key), `EISDIR`, backing errors.
    pub fn setattr(&self, ino: InodeNo, a: SetAttr) -> Result<FileAttr> {
        self.writable()?;
        let inode = self.inode(ino)?;
        let loc = self.loc(&inode)?;
        self.stat_changeable(&inode, &loc)?;
        if a.uid.is_some() || a.gid.is_some() {
            let uid = a.uid.map(rustix::fs::Uid::from_raw);
            let gid = a.gid.map(rustix::fs::Gid::from_raw);
            self.chown_loc(&loc, uid, gid)?;
        }
        if let Some(mode) = a.mode {
            self.chmod_loc(&loc, mode)?;
        }
        if let Some(size) = a.size {
            if !a.through_handle {
                self.check_access(&inode, libc::W_OK as u32)?;
            }
            match inode.kind {
                Kind::File => self.truncate(&inode, size)?,
                Kind::Dir => return Err(Error::WrongType(WrongType::IsDir)),
                _ => return Err(Error::InvalidArgument),
            }
        }
        if a.atime.is_some() || a.mtime.is_some() {
            let conv = |t: Option<SetTime>| match t {
                None => Timespec {
                    tv_sec: 0,
                    tv_nsec: rustix::fs::UTIME_OMIT,
                },
                Some(SetTime::Now) => Timespec {
                    tv_sec: 0,
                    tv_nsec: rustix::fs::UTIME_NOW,
                },
                Some(SetTime::At(t)) => match t.duration_since(UNIX_EPOCH) {
                    Ok(d) => Timespec {
                        tv_sec: d.as_secs() as i64,
                        tv_nsec: d.subsec_nanos() as _,
                    },
                    Err(e) => {
                        let d = e.duration();
                        let mut sec = -(d.as_secs() as i64);
                        let mut nsec = d.subsec_nanos() as i64;
                        if nsec > 0 {
                            sec -= 1;
                            nsec = 1_000_000_000 - nsec;
                        }
                        Timespec {
                            tv_sec: sec,
                            tv_nsec: nsec as _,
                        }
                    }
                },
            };
            let ts = Timestamps {
                last_access: conv(a.atime),
                last_modification: conv(a.mtime),
            };
            self.utimens_loc(&loc, &ts)?;
        }
        let st = self.stat_loc(&loc)?;
        self.attr_from(&inode, &st)
    }

    /// Clears setuid, and setgid if group-executable, of a regular file (what
    /// the kernel does when an unprivileged caller writes or truncates).
    ///
    /// # Errors
    /// Backing errors.
    pub fn kill_suid(&self, ino: InodeNo) -> Result<()> {
        let inode = self.inode(ino)?;
        if inode.kind != Kind::File {
            return Ok(());
        }
        let loc = self.loc(&inode)?;
        let st = self.stat_changeable(&inode, &loc)?;
        let mut mode = st.st_mode & 0o7777;
        let old = mode;
        mode &= !libc::S_ISUID;
        if mode & libc::S_IXGRP != 0 {
            mode &= !libc::S_ISGID;
        }
        if mode == old {
            return Ok(());
        }
        self.chmod_loc(&loc, mode)
    }

    /// The target of a symlink (plaintext; no-key name on a locked mount).
    ///
    /// # Errors
    /// `EINVAL` if not a symlink, `EIO` if corrupt.
    pub fn readlink(&self, ino: InodeNo) -> Result<Vec<u8>> {
        let inode = self.inode(ino)?;
        if inode.kind != Kind::Symlink {
            return Err(Error::WrongType(WrongType::Other));
        }
        self.symlink_target(&inode)
    }
}
