//! Extended attributes: `user.*` only, stored unencrypted on the backing
//! object (as the kernel: fscrypt does not encrypt xattrs).

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;

use crate::error::{Error, Result};
use crate::inodes::{InodeNo, Kind};

use super::backing::reopen;
use super::{EncryptedFs, Loc, kind_of, sys};

impl EncryptedFs {
    /// Runs an xattr call on the backing object's real fd (regular files
    /// and directories, found and verified); other objects (symlinks,
    /// special files: no `user.` xattrs on Linux) get `other` and are never
    /// touched by path. A regular file found without opening it (format 2
    /// learns its attributes from the entry alone) is opened for it from
    /// its verified `O_PATH` fd: xattr calls refuse `O_PATH` fds.
    pub(super) fn with_xattr_target<T, B>(
        &self,
        loc: &Loc,
        buf: B,
        on_fd: impl FnOnce(BorrowedFd<'_>, B) -> rustix::io::Result<T>,
        other: Result<T>,
    ) -> Result<T> {
        match (self.loc_fd(loc)?, loc) {
            (Some(fd), _) => on_fd(fd, buf).map_err(sys),
            (None, Loc::Path(f)) if kind_of(f.st.st_mode) == Kind::File => {
                let file = reopen(&f.path, rustix::fs::OFlags::RDONLY)?;
                on_fd(file.as_fd(), buf).map_err(sys)
            }
            (None, _) => other,
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
        self.stat_changeable(&inode, &loc)?;
        let fl = rustix::fs::XattrFlags::from_bits_retain(flags as _);
        self.with_xattr_target(
            &loc,
            (),
            |fd, ()| rustix::fs::fsetxattr(fd, name, value, fl),
            Err(Error::NotPermitted),
        )
    }

    /// Reads a user xattr; `size` 0 asks for the length. Returns the value.
    ///
    /// Names outside `user.` (`security.*`, `system.posix_acl_*`,
    /// `trusted.*`) get `EOPNOTSUPP` at once, without backing I/O: this
    /// filesystem has no such namespaces (setting them fails the same way).
    /// That answer, unlike `ENODATA`, tells tools the whole mount has none:
    /// GNU `ls -l` then stops asking for every entry's SELinux context and
    /// ACL (it remembers "unsupported" per device), and the kernel's
    /// `security.capability` check before a first write treats it as "no
    /// capabilities" as it does `ENODATA`.
    ///
    /// # Errors
    /// `ENODATA`, `ERANGE`, `EOPNOTSUPP`, backing errors.
    pub fn getxattr(&self, ino: InodeNo, name: &OsStr, size: u32) -> Result<Vec<u8>> {
        if !name.as_bytes().starts_with(b"user.") {
            return Err(Error::NotSupported);
        }
        let inode = self.inode(ino)?;
        let loc = self.loc(&inode)?;
        let mut buf = vec![0u8; if size == 0 { 65536 } else { size as usize }];
        let n = self.with_xattr_target(
            &loc,
            &mut buf[..],
            |fd, b| rustix::fs::fgetxattr(fd, name, b),
            Err(Error::NoXattr),
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
            Ok(0),
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
        self.stat_changeable(&inode, &loc)?;
        self.with_xattr_target(
            &loc,
            (),
            |fd, ()| rustix::fs::fremovexattr(fd, name),
            Err(Error::NotPermitted),
        )
    }
}
