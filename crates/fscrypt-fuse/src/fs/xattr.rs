//! Extended attributes: `user.*` only, stored unencrypted on the backing
//! object (as the kernel: fscrypt does not encrypt xattrs).

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;

use crate::error::{Error, Result};
use crate::inodes::InodeNo;

use super::{EncryptedFs, Loc, sys};

impl EncryptedFs {
    /// Runs an xattr call on the backing object: on its fd when we hold one
    /// (f*xattr), else on `/proc/self/fd/<dir fd>/<name>` without following a
    /// final symlink (l*xattr).
    pub(super) fn with_xattr_target<T, B>(
        &self,
        loc: &Loc,
        buf: B,
        on_fd: impl FnOnce(BorrowedFd<'_>, B) -> rustix::io::Result<T>,
        on_path: impl FnOnce(&str, B) -> rustix::io::Result<T>,
    ) -> Result<T> {
        match loc {
            Loc::Fd(f) => on_fd(f.as_fd(), buf).map_err(sys),
            Loc::DirFd(d) => on_fd(self.dir_fd(d)?, buf).map_err(sys),
            Loc::At(l) => {
                let p = format!(
                    "/proc/self/fd/{}/{}",
                    self.dir_fd(&l.parent)?.as_raw_fd(),
                    l.name.name
                );
                on_path(&p, buf).map_err(sys)
            }
        }
    }

    pub(super) fn check_xattr_name(name: &OsStr) -> Result<()> {
        if name.as_bytes().starts_with(b"user.") {
            Ok(())
        } else {
            Err(Error::NotSupported)
        }
    }

    /// Sets a user xattr.
    ///
    /// # Errors
    /// `EOPNOTSUPP` outside `user.`, backing errors.
    pub fn setxattr(&self, ino: InodeNo, name: &OsStr, value: &[u8], flags: i32) -> Result<()> {
        self.writable()?;
        Self::check_xattr_name(name)?;
        let inode = self.inode(ino)?;
        let loc = self.loc(&inode)?;
        let fl = rustix::fs::XattrFlags::from_bits_retain(flags as _);
        self.with_xattr_target(
            &loc,
            (),
            |fd, ()| rustix::fs::fsetxattr(fd, name, value, fl),
            |p, ()| rustix::fs::lsetxattr(p, name, value, fl),
        )
    }

    /// Reads a user xattr; `size` 0 asks for the length. Returns the value.
    ///
    /// # Errors
    /// `ENODATA`, `ERANGE`, `EOPNOTSUPP`, backing errors.
    pub fn getxattr(&self, ino: InodeNo, name: &OsStr, size: u32) -> Result<Vec<u8>> {
        if !name.as_bytes().starts_with(b"user.") {
            return Err(Error::Sys(rustix::io::Errno::NODATA));
        }
        let inode = self.inode(ino)?;
        let loc = self.loc(&inode)?;
        let mut buf = vec![0u8; if size == 0 { 65536 } else { size as usize }];
        let n = self.with_xattr_target(
            &loc,
            &mut buf[..],
            |fd, b| rustix::fs::fgetxattr(fd, name, b),
            |p, b| rustix::fs::lgetxattr(p, name, b),
        )?;
        buf.truncate(n);
        Ok(buf)
    }

    /// Lists xattr names (NUL-separated), `user.` only.
    ///
    /// # Errors
    /// Backing errors.
    pub fn listxattr(&self, ino: InodeNo) -> Result<Vec<u8>> {
        let inode = self.inode(ino)?;
        let loc = self.loc(&inode)?;
        let mut buf = vec![0u8; 65536];
        let n = self.with_xattr_target(
            &loc,
            &mut buf[..],
            |fd, b| rustix::fs::flistxattr(fd, b),
            |p, b| rustix::fs::llistxattr(p, b),
        )?;
        let mut out = Vec::new();
        for name in buf[..n].split(|&b| b == 0) {
            if name.starts_with(b"user.") {
                out.extend_from_slice(name);
                out.push(0);
            }
        }
        Ok(out)
    }

    /// Removes a user xattr.
    ///
    /// # Errors
    /// `ENODATA`, `EOPNOTSUPP`, backing errors.
    pub fn removexattr(&self, ino: InodeNo, name: &OsStr) -> Result<()> {
        self.writable()?;
        Self::check_xattr_name(name)?;
        let inode = self.inode(ino)?;
        let loc = self.loc(&inode)?;
        self.with_xattr_target(
            &loc,
            (),
            |fd, ()| rustix::fs::fremovexattr(fd, name),
            |p, ()| rustix::fs::lremovexattr(p, name),
        )
    }
}
