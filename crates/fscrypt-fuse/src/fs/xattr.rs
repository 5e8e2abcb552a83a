//! Extended attributes: `user.*` and the POSIX ACLs
//! (`system.posix_acl_access`, `system.posix_acl_default`), stored
//! unencrypted on the backing object (as the kernel: fscrypt does not
//! encrypt xattrs, and an ext4 vault keeps its ACLs the same way).
//!
//! ACLs: the kernel negotiates FUSE_POSIX_ACL (`fuse.rs`), checks who may
//! set them (the owner or CAP_FOWNER) and what they allow, and caches
//! them. The backing filesystem does the rest: setting an access ACL on
//! the backing object updates its mode (the group bits become the ACL's
//! mask, as the kernel asks the daemon to do), chmod updates the ACL's
//! mask, and a backing directory's default ACL is inherited by the
//! objects created in it. A backing filesystem without ACLs refuses them
//! (EOPNOTSUPP) and reads as having none. The creator's umask is the
//! daemon's to apply (FUSE_DONT_MASK), and only where the parent has no
//! default ACL ([`EncryptedFs::has_default_acl`], `ops.rs`), as POSIX.1e
//! wants.

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

    pub(super) fn check_xattr_name(&self, name: &OsStr) -> Result<()> {
        if served(name.as_bytes(), self.acl()) {
            Ok(())
        } else {
            Err(Error::NotSupported)
        }
    }

    /// Sets a user xattr or an ACL (the kernel checked the caller may).
    ///
    /// # Errors
    /// `EOPNOTSUPP` outside `user.` and the ACLs (or where the backing
    /// filesystem has no ACLs), backing errors.
    pub fn setxattr(&self, ino: InodeNo, name: &OsStr, value: &[u8], flags: i32) -> Result<()> {
        self.writable()?;
        self.check_xattr_name(name)?;
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

    /// Reads a user xattr or an ACL; `size` 0 asks for the length. Returns
    /// the value. An ACL the backing filesystem cannot hold is absent
    /// (`ENODATA`: the kernel takes `EOPNOTSUPP` for an error of every
    /// permission check that needs the ACL).
    ///
    /// Other names (`security.*`, `trusted.*`, other `system.*`) get
    /// `EOPNOTSUPP` at once, without backing I/O: this
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
        if !served(name.as_bytes(), self.acl()) {
            return Err(Error::NotSupported);
        }
        let acl = is_acl(name.as_bytes());
        let inode = self.inode(ino)?;
        let loc = self.loc(&inode)?;
        let mut buf = vec![0u8; if size == 0 { 65536 } else { size as usize }];
        let n = self.with_xattr_target(
            &loc,
            &mut buf[..],
            |fd, b| match rustix::fs::fgetxattr(fd, name, b) {
                Err(rustix::io::Errno::OPNOTSUPP) if acl => Err(rustix::io::Errno::NODATA),
                r => r,
            },
            Err(Error::NoXattr),
        )?;
        buf.truncate(n);
        Ok(buf)
    }

    /// Whether directory `dir` has a default ACL (a new entry in it then
    /// gets its mode from the ACL, not from the umask). Unreadable: none.
    pub fn has_default_acl(&self, dir: InodeNo) -> bool {
        let Ok(inode) = self.inode(dir) else {
            return false;
        };
        let Ok(loc) = self.loc(&inode) else {
            return false;
        };
        // A small buffer: a value that does not fit (ERANGE) is there too.
        let mut buf = [0u8; 64];
        match self.with_xattr_target(
            &loc,
            &mut buf[..],
            |fd, b| rustix::fs::fgetxattr(fd, "system.posix_acl_default", b),
            Ok(0),
        ) {
            Ok(n) => n > 0,
            Err(e) => e.is_sys(rustix::io::Errno::RANGE),
        }
    }

    /// Lists xattr names (NUL-separated): `user.` and the ACLs.
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
            if served(name, self.acl()) {
                out.extend_from_slice(name);
                out.push(0);
            }
        }
        Ok(out)
    }

    /// Removes a user xattr or an ACL.
    ///
    /// # Errors
    /// `ENODATA`, `EOPNOTSUPP`, backing errors.
    pub fn removexattr(&self, ino: InodeNo, name: &OsStr) -> Result<()> {
        self.writable()?;
        self.check_xattr_name(name)?;
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

/// The xattr names of the POSIX ACLs.
const ACL_NAMES: [&[u8]; 2] = [b"system.posix_acl_access", b"system.posix_acl_default"];

/// Whether `name` is one of the POSIX ACLs.
fn is_acl(name: &[u8]) -> bool {
    ACL_NAMES.contains(&name)
}

/// Whether the vault serves the xattr `name`: `user.*`, and the ACLs on a
/// mount with `-o acl` (without it they get EOPNOTSUPP at once, which
/// also stops GNU `ls -l` asking for every entry's ACL).
fn served(name: &[u8], acl: bool) -> bool {
    name.starts_with(b"user.") || (acl && is_acl(name))
}

#[cfg(test)]
mod tests {
    use super::{is_acl, served};

    #[test]
    fn user_xattrs_and_the_two_acls_are_served() {
        assert!(served(b"user.x", false) && served(b"user.x", true));
        for acl in [&b"system.posix_acl_access"[..], b"system.posix_acl_default"] {
            assert!(is_acl(acl) && served(acl, true) && !served(acl, false));
        }
        for other in [
            &b"system.posix_acl_accessx"[..],
            b"system.nfs4_acl",
            b"security.capability",
            b"security.selinux",
            b"trusted.overlay.opaque",
        ] {
            assert!(!served(other, true) && !is_acl(other));
        }
    }
}
