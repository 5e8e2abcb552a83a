//! Creating entries: mknod, mkdir, symlink, create, link.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use fscrypt::hooks::{prepare_link, prepare_symlink};
use fscrypt::{ContextV2, NameError};
use fuser::FileAttr;
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

use crate::crypt::NodeKind;
use crate::error::{Error, Result};
use crate::handles::{FileHandle, Handle};
use crate::inodes::{Inode, InodeNo, Kind};
use crate::layout::{
    self, BackingName, DIR_META_NAME, HEADER_SIZE, HEADER_USED, Header, HeaderKind,
    SYMLINK_MAX_BLOB_STORED,
};

use super::recover::{Unlinked, crash_point, tmp_name};
use super::size::SizeStore;
use super::tags::{Rebind, TaggedFile};
use super::{Caller, EncryptedFs, sys};

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
        // Built under a temporary name with its owner and mode, then renamed
        // into place: a crash never leaves a node with the daemon's owner.
        let tmp = tmp_name()?;
        let r = (|| -> Result<()> {
            rustix::fs::mknodat(
                pfd,
                tmp.as_str(),
                ftype,
                Mode::from_raw_mode(0o600),
                rdev as u64,
            )
            .map_err(sys)?;
            crash_point("mknod:after-node");
            let (gid, _) = self.new_gid(&p, caller)?;
            rustix::fs::chownat(
                pfd,
                tmp.as_str(),
                Some(rustix::fs::Uid::from_raw(caller.uid)),
                Some(rustix::fs::Gid::from_raw(gid)),
                AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(sys)?;
            self.chmod_entry(pfd, tmp.as_str(), mode)?;
            crash_point("mknod:before-rename");
            publish(pfd, tmp.as_str(), &bname)
        })();
        if let Err(e) = r {
            let _ = rustix::fs::unlinkat(pfd, tmp.as_str(), AtFlags::empty());
            if !e.is_sys(Errno::EXIST) {
                self.remove_side_file(&p, &bname);
            }
            return Err(e);
        }
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
        let ct = self.create_name(&p, name)?;
        // Derived, not random: the same path made on two replicas gets
        // the same context (see `Keys::new_dir_context`).
        let ctx = self.keys.new_dir_context(&self.dir_context(&p)?, &ct)?;
        let bname = self.backing_name_for_create(&p, &ct)?;
        let pfd = self.dir_fd(&p)?;
        let tmp_name = tmp_name()?;
        rustix::fs::mkdirat(pfd, tmp_name.as_str(), Mode::from_raw_mode(0o700)).map_err(sys)?;
        crash_point("mkdir:after-tmpdir");
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
            let h = Header {
                format: self.format,
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
            crash_point("mkdir:after-meta");
            let (gid, setgid) = self.new_gid(&p, caller)?;
            let mode = if setgid { mode | libc::S_ISGID } else { mode };
            self.set_owner_mode(dfd.as_fd(), caller, gid, mode, None)?;
            crash_point("mkdir:before-rename");
            publish(pfd, tmp_name.as_str(), &bname)?;
            Ok(())
        })();
        if let Err(e) = r {
            cleanup(Some(&dfd));
            if !e.is_sys(Errno::EXIST) {
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
        let ct_name = self.create_name(&p, name)?;
        // `fscrypt_prepare_symlink()`: inline in the backing symlink when the
        // blob fits (as format version 1 always did), else in the symlink
        // store, written completely before the symlink naming it appears;
        // ENAMETOOLONG past that (targets over 4095 bytes).
        let dir = self.dir_crypt_opt(&p)?;
        let padding = self.keys.policy().flags().padding();
        let inline_max = self.symlink_max_inline();
        let max_blob = match prepare_symlink(dir.as_deref(), target.len(), padding, inline_max) {
            Ok(_) => inline_max,
            Err(fscrypt::Error::Name(NameError::TooLong { .. })) => {
                prepare_symlink(
                    dir.as_deref(),
                    target.len(),
                    padding,
                    SYMLINK_MAX_BLOB_STORED,
                )?;
                SYMLINK_MAX_BLOB_STORED
            }
            Err(e) => return Err(e.into()),
        };
        let ctx = self.keys.new_context()?;
        let crypt = self.keys.node_crypt(&ctx, NodeKind::Symlink, 0)?;
        let blob = crypt.encrypt_symlink(target, max_blob)?;
        let stored = max_blob > inline_max;
        let encoded = if stored {
            self.store_symlink(&ctx, &blob)?
        } else {
            self.encode_inline_symlink(&ctx, &blob)?
        };
        if encoded.len() > layout::BACKING_SYMLINK_MAX {
            return Err(Error::NameTooLong);
        }
        crash_point("symlink:after-store");
        let r = (|| -> Result<BackingName> {
            let bname = self.backing_name_for_create(&p, &ct_name)?;
            let pfd = self.dir_fd(&p)?;
            let (gid, _) = self.new_gid(&p, caller)?;
            let r = if caller.uid != self.euid || gid != self.egid {
                // Owned by the caller before it appears under its name.
                let tmp = tmp_name()?;
                let r = rustix::fs::symlinkat(encoded.as_str(), pfd, tmp.as_str())
                    .map_err(sys)
                    .and_then(|()| {
                        self.set_owner_mode(pfd, caller, gid, 0o777, Some(tmp.as_str()))?;
                        crash_point("symlink:before-rename");
                        publish(pfd, tmp.as_str(), &bname)
                    });
                if r.is_err() {
                    let _ = rustix::fs::unlinkat(pfd, tmp.as_str(), AtFlags::empty());
                }
                r
            } else {
                rustix::fs::symlinkat(encoded.as_str(), pfd, bname.name.as_str()).map_err(sys)
            };
            if let Err(e) = r {
                if !e.is_sys(Errno::EXIST) {
                    self.remove_side_file(&p, &bname);
                }
                return Err(e);
            }
            Ok(bname)
        })();
        let bname = match r {
            Ok(b) => b,
            Err(e) => {
                if stored {
                    self.unstore_symlink(&encoded);
                }
                return Err(e);
            }
        };
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
        // Built without a name (O_TMPFILE, or a temporary name where the
        // backing filesystem lacks it): header, owner and mode first, then
        // linked into place, so a crash never leaves an entry without header.
        let u = match Unlinked::new(pfd, mode & 0o777) {
            Ok(u) => u,
            Err(e) => {
                self.remove_side_file(&p, &bname);
                return Err(e);
            }
        };
        crash_point("create:after-open");
        let r = (|| -> Result<(ContextV2, Option<TaggedFile>)> {
            let ctx = self.keys.new_context()?;
            let h = Header {
                format: self.format,
                kind: HeaderKind::File,
                context: ctx,
                size: 0,
            };
            // Format 3: record A beside the header, bound to the new name.
            let tagged = match self.sizes() {
                SizeStore::Tagged => {
                    let parent = self.dir_context(&p)?;
                    let binding = self.binding(&parent.nonce, &bname.original())?;
                    Some(TaggedFile::created(ctx.nonce, binding))
                }
                _ => None,
            };
            let region = match &tagged {
                Some(t) => self.created_region(&h, t)?,
                None => {
                    let mut region = [0u8; HEADER_SIZE as usize];
                    region[..HEADER_USED].copy_from_slice(&h.to_bytes());
                    region
                }
            };
            u.file.write_all_at(&region, 0)?;
            crash_point("create:after-header");
            let (gid, _) = self.new_gid(&p, caller)?;
            let me_uid = self.euid;
            let me_gid = self.egid;
            if caller.uid != me_uid || gid != me_gid || mode & 0o7000 != 0 {
                self.set_owner_mode(u.file.as_fd(), caller, gid, mode, None)?;
            }
            crash_point("create:before-link");
            u.link_as(pfd, bname.name.as_str())?;
            crash_point("create:after-link");
            Ok((ctx, tagged))
        })();
        let (ctx, tagged) = match r {
            Ok(v) => v,
            Err(e) => {
                u.discard(pfd);
                if !e.is_sys(Errno::EXIST) {
                    self.remove_side_file(&p, &bname);
                }
                return Err(e);
            }
        };
        let file = u.file;
        let st = match rustix::fs::fstat(&file) {
            Ok(st) => st,
            Err(e) => {
                let _ = rustix::fs::unlinkat(pfd, bname.name.as_str(), AtFlags::empty());
                self.remove_side_file(&p, &bname);
                return Err(sys(e));
            }
        };
        let inode = self.register_created_file(&p, &bname, file, &st, ctx, tagged)?;
        let attr = self.attr_from(&inode, &st)?;
        let acc = flags & libc::O_ACCMODE;
        let fh = self.handles.insert(Handle::File {
            inode,
            append: flags & libc::O_APPEND != 0,
            write: acc == libc::O_WRONLY || acc == libc::O_RDWR,
            flushes: false,
        });
        Ok((attr, fh))
    }

    /// Creates a hard link `newparent/newname` to `ino`.
    ///
    /// # Errors
    /// `ENOKEY`, `EXDEV` (the hooks' checks), `EEXIST`, `EPERM` for
    /// directories, backing errors.
    pub fn link(&self, ino: InodeNo, newparent: InodeNo, newname: &OsStr) -> Result<FileAttr> {
        self.writable()?;
        let inode = self.inode(ino)?;
        if inode.kind == Kind::Dir {
            return Err(Error::NotPermitted);
        }
        let np = self.inode(newparent)?;
        // `__fscrypt_prepare_link()`: ENOKEY without the directory's key,
        // EXDEV across policies.
        let has_key = self.dir_crypt_opt(&np)?.is_some();
        prepare_link(
            Some(self.keys.policy()),
            has_key,
            self.link_inode(inode.kind),
        )?;
        let bname = self.name_for_create(&np, newname)?;
        // Format 3: bound to the new name first (the file must be bound to
        // the name it is linked from).
        let binding = match inode.kind {
            Kind::File => self.name_binding(&np, &bname)?,
            _ => None,
        };
        if let (Some(to), Some(l)) = (binding, inode.first_link()) {
            let from = self.binding_of(&l)?;
            let dfd = self.dir_fd(&l.parent)?;
            let add = Rebind::Add { from, to };
            let r = self.rebind_entry(&l.parent, dfd, l.name.name.as_str(), inode.backing_ino, add);
            if let Err(e) = r {
                self.remove_side_file(&np, &bname);
                return Err(e);
            }
        }
        if let Err(e) = self.link_backing(&inode, &np, &bname) {
            if !e.is_sys(Errno::EXIST) {
                self.remove_side_file(&np, &bname);
            }
            return Err(e);
        }
        Ok(self.finish_create(&np, &bname)?.1)
    }
}

/// Gives an entry built under the temporary name `tmp` in `dir` its final
/// name, never replacing an existing entry (`RENAME_NOREPLACE`: EEXIST).
fn publish(dir: BorrowedFd<'_>, tmp: &str, bname: &BackingName) -> Result<()> {
    rustix::fs::renameat_with(dir, tmp, dir, bname.name.as_str(), RenameFlags::NOREPLACE)
        .map_err(sys)
}
