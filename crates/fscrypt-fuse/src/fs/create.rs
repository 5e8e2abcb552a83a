//! Creating entries: mknod, mkdir, symlink, create, link.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use fuser::FileAttr;
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags, Stat};

use crate::crypt::NodeKind;
use crate::error::{Error, Result};
use crate::handles::{FileHandle, Handle};
use crate::inodes::{Inode, InodeNo, Kind};
use crate::layout::{
    self, BackingName, CONTEXT_SIZE, DIR_META_NAME, HEADER_SIZE, HEADER_USED, Header, HeaderKind,
    SYMLINK_MAX_BLOB, TMP_PREFIX,
};

use super::{Caller, EncryptedFs, sys, validate_name};

impl EncryptedFs {
    pub(super) fn finish_create(
        &self,
        parent: &Arc<Inode>,
        bname: &BackingName,
    ) -> Result<(Arc<Inode>, FileAttr)> {
        let (inode, st) = self.lookup_backing(parent, bname)?;
        let attr = self.attr_from(&inode, &st)?;
        Ok((inode, attr))
    }

    /// Creates a device node, FIFO or socket (not encrypted, as in the kernel;
    /// its name is). Regular files made with mknod get a header like `create`.
    ///
    /// # Errors
    /// `ENOKEY`, `EEXIST`, `EROFS`, `ENAMETOOLONG`, backing errors.
    pub fn mknod(
        &self,
        parent: InodeNo,
        name: &OsStr,
        mode: u32,
        rdev: u32,
        caller: Caller,
    ) -> Result<FileAttr> {
        if mode & libc::S_IFMT == libc::S_IFREG || mode & libc::S_IFMT == 0 {
            let (attr, fh) = self.create(parent, name, mode, libc::O_WRONLY, caller)?;
            self.release(fh)?;
            return Ok(attr);
        }
        self.writable()?;
        self.need_key()?;
        let p = self.inode(parent)?;
        let bname = self.name_for_create(&p, name)?;
        let pfd = self.dir_fd(&p)?;
        let ftype = rustix::fs::FileType::from_raw_mode(mode);
        let r = rustix::fs::mknodat(
            pfd,
            bname.name.as_str(),
            ftype,
            Mode::from_raw_mode(0o600),
            rdev as u64,
        )
        .map_err(sys);
        if let Err(e) = r {
            if !matches!(e, Error::Sys(rustix::io::Errno::EXIST)) {
                self.remove_side_file(&p, &bname);
            }
            return Err(e);
        }
        let (gid, _) = self.new_gid(&p, caller)?;
        rustix::fs::chownat(
            pfd,
            bname.name.as_str(),
            Some(rustix::fs::Uid::from_raw(caller.uid)),
            Some(rustix::fs::Gid::from_raw(gid)),
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(sys)?;
        self.chmod_entry(pfd, bname.name.as_str(), mode)?;
        Ok(self.finish_create(&p, &bname)?.1)
    }

    /// Creates a directory (atomically: built under a temporary name with its
    /// metadata file, then renamed into place).
    ///
    /// # Errors
    /// `ENOKEY`, `EEXIST`, `EROFS`, `ENAMETOOLONG`, backing errors.
    pub fn mkdir(
        &self,
        parent: InodeNo,
        name: &OsStr,
        mode: u32,
        caller: Caller,
    ) -> Result<FileAttr> {
        self.writable()?;
        self.need_key()?;
        let p = self.inode(parent)?;
        let bname = self.name_for_create(&p, name)?;
        let pfd = self.dir_fd(&p)?;
        let mut rnd = [0u8; 12];
        crate::crypt::random(&mut rnd)?;
        let mut tmp = [0u8; 16];
        let n = layout::b64_encode(&rnd, &mut tmp);
        let tmp_name = format!("{TMP_PREFIX}{}", String::from_utf8_lossy(&tmp[..n]));
        rustix::fs::mkdirat(pfd, tmp_name.as_str(), Mode::from_raw_mode(0o700)).map_err(sys)?;
        let cleanup = |dfd: Option<&OwnedFd>| {
            if let Some(d) = dfd {
                let _ = rustix::fs::unlinkat(d, DIR_META_NAME, AtFlags::empty());
            }
            let _ = rustix::fs::unlinkat(pfd, tmp_name.as_str(), AtFlags::REMOVEDIR);
        };
        let dfd = match rustix::fs::openat(
            pfd,
            tmp_name.as_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(d) => d,
            Err(e) => {
                cleanup(None);
                return Err(sys(e));
            }
        };
        let r = (|| -> Result<()> {
            let ctx = self.keys.new_context()?;
            let h = Header {
                kind: HeaderKind::Directory,
                context: ctx,
                size: 0,
            };
            let m = rustix::fs::openat(
                &dfd,
                DIR_META_NAME,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )
            .map_err(sys)?;
            File::from(m).write_all_at(&h.to_bytes(), 0)?;
            let (gid, setgid) = self.new_gid(&p, caller)?;
            let mode = if setgid { mode | libc::S_ISGID } else { mode };
            self.set_owner_mode(dfd.as_fd(), caller, gid, mode, None)?;
            rustix::fs::renameat_with(
                pfd,
                tmp_name.as_str(),
                pfd,
                bname.name.as_str(),
                RenameFlags::NOREPLACE,
            )
            .map_err(sys)?;
            Ok(())
        })();
        if let Err(e) = r {
            cleanup(Some(&dfd));
            if !matches!(e, Error::Sys(rustix::io::Errno::EXIST)) {
                self.remove_side_file(&p, &bname);
            }
            return Err(e);
        }
        let st = rustix::fs::fstat(&dfd).map_err(sys)?;
        let inode = self.register_dir(&p, &bname, dfd, &st)?;
        self.attr_from(&inode, &st)
    }

    /// Creates a symlink whose target is encrypted with the link's own key
    /// (spec §7.4).
    ///
    /// # Errors
    /// `ENOKEY`, `EEXIST`, `ENAMETOOLONG` (target too long to store), backing errors.
    pub fn symlink(
        &self,
        parent: InodeNo,
        name: &OsStr,
        target: &[u8],
        caller: Caller,
    ) -> Result<FileAttr> {
        self.writable()?;
        self.need_key()?;
        let p = self.inode(parent)?;
        validate_name(name)?;
        if target.is_empty() || target.contains(&0) {
            return Err(Error::InvalidArgument);
        }
        let ctx = self.keys.new_context()?;
        let crypt = self.keys.node_crypt(&ctx, NodeKind::Symlink, 0)?;
        let blob = crypt
            .encrypt_symlink(target, SYMLINK_MAX_BLOB)
            .map_err(|_| Error::NameTooLong)?;
        let encoded = layout::encode_symlink(&ctx, &blob);
        if encoded.len() > layout::BACKING_SYMLINK_MAX {
            return Err(Error::NameTooLong);
        }
        let bname = self.name_for_create(&p, name)?;
        let pfd = self.dir_fd(&p)?;
        if let Err(e) = rustix::fs::symlinkat(encoded.as_str(), pfd, bname.name.as_str()) {
            if e != rustix::io::Errno::EXIST {
                self.remove_side_file(&p, &bname);
            }
            return Err(sys(e));
        }
        let (gid, _) = self.new_gid(&p, caller)?;
        self.set_owner_mode(pfd, caller, gid, 0o777, Some(bname.name.as_str()))?;
        let (inode, st) = self.lookup_backing(&p, &bname)?;
        let _ = inode.symlink_size.set(target.len() as u64);
        self.attr_from(&inode, &st)
    }

    /// Creates and opens a regular file with a fresh context and header.
    ///
    /// # Errors
    /// `ENOKEY`, `EEXIST`, `EROFS`, `ENAMETOOLONG`, backing errors.
    pub fn create(
        &self,
        parent: InodeNo,
        name: &OsStr,
        mode: u32,
        flags: i32,
        caller: Caller,
    ) -> Result<(FileAttr, FileHandle)> {
        self.writable()?;
        self.need_key()?;
        let p = self.inode(parent)?;
        let bname = self.name_for_create(&p, name)?;
        let pfd = self.dir_fd(&p)?;
        let fd = match rustix::fs::openat(
            pfd,
            bname.name.as_str(),
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(mode & 0o777),
        ) {
            Ok(fd) => fd,
            Err(e) => {
                if e != rustix::io::Errno::EXIST {
                    self.remove_side_file(&p, &bname);
                }
                return Err(sys(e));
            }
        };
        let file = File::from(fd);
        let r = (|| -> Result<(Stat, [u8; CONTEXT_SIZE])> {
            let ctx = self.keys.new_context()?;
            let h = Header {
                kind: HeaderKind::File,
                context: ctx,
                size: 0,
            };
            let mut region = [0u8; HEADER_SIZE as usize];
            region[..HEADER_USED].copy_from_slice(&h.to_bytes());
            file.write_all_at(&region, 0)?;
            let (gid, _) = self.new_gid(&p, caller)?;
            let me_uid = self.euid;
            let me_gid = self.egid;
            if caller.uid != me_uid || gid != me_gid || mode & 0o7000 != 0 {
                self.set_owner_mode(file.as_fd(), caller, gid, mode, None)?;
            }
            Ok((rustix::fs::fstat(&file).map_err(sys)?, ctx))
        })();
        let (st, ctx) = match r {
            Ok(v) => v,
            Err(e) => {
                let _ = rustix::fs::unlinkat(pfd, bname.name.as_str(), AtFlags::empty());
                self.remove_side_file(&p, &bname);
                return Err(e);
            }
        };
        let inode = self.register_created_file(&p, &bname, file, &st, ctx)?;
        let attr = self.attr_from(&inode, &st)?;
        let acc = flags & libc::O_ACCMODE;
        let fh = self.handles.insert(Handle::File {
            inode,
            append: flags & libc::O_APPEND != 0,
            write: acc == libc::O_WRONLY || acc == libc::O_RDWR,
        });
        Ok((attr, fh))
    }

    /// Creates a hard link `newparent/newname` to `ino`.
    ///
    /// # Errors
    /// `ENOKEY`, `EEXIST`, `EPERM` for directories, backing errors.
    pub fn link(&self, ino: InodeNo, newparent: InodeNo, newname: &OsStr) -> Result<FileAttr> {
        self.writable()?;
        self.need_key()?;
        let inode = self.inode(ino)?;
        if inode.kind == Kind::Dir {
            return Err(Error::Sys(rustix::io::Errno::PERM));
        }
        let np = self.inode(newparent)?;
        let bname = self.name_for_create(&np, newname)?;
        if let Err(e) = self.link_backing(&inode, &np, &bname) {
            if !matches!(e, Error::Sys(rustix::io::Errno::EXIST)) {
                self.remove_side_file(&np, &bname);
            }
            return Err(e);
        }
        Ok(self.finish_create(&np, &bname)?.1)
    }
}
