//! Backing objects: where an inode is, opening it, reading its header or
//! symlink, building its attributes, owner and mode of new entries.

use std::fs::File;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use fuser::FileAttr;
use rustix::fs::{AtFlags, Mode, OFlags, Stat};

use crate::crypt::{NodeCrypt, NodeKind};
use crate::error::{Corruption, Error, Result};
use crate::inodes::{FileState, Inode, Kind, Link};
use crate::layout::{BackingName, CONTEXT_SIZE, HEADER_SIZE, HEADER_USED, Header, HeaderKind};

use super::{Caller, EncryptedFs, Loc, fuse_type, kind_of, pread_full, sys, to_system_time};

impl EncryptedFs {
    pub(super) fn loc(&self, inode: &Arc<Inode>) -> Result<Loc> {
        if inode.kind == Kind::Dir {
            return Ok(Loc::DirFd(inode.clone()));
        }
        if inode.kind == Kind::File
            && let Ok(st) = inode.file.read()
            && let Some(fd) = &st.fd
        {
            return Ok(Loc::Fd(fd.clone()));
        }
        inode.first_link().map(Loc::At).ok_or(Error::NotFound)
    }

    pub(super) fn stat_loc(&self, loc: &Loc) -> Result<Stat> {
        match loc {
            Loc::Fd(f) => rustix::fs::fstat(f).map_err(sys),
            Loc::DirFd(d) => rustix::fs::fstat(self.dir_fd(d)?).map_err(sys),
            Loc::At(l) => rustix::fs::statat(
                self.dir_fd(&l.parent)?,
                l.name.name.as_str(),
                AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(sys),
        }
    }

    pub(super) fn open_link(&self, l: &Link, write: bool) -> Result<File> {
        let mut flags = OFlags::CLOEXEC | OFlags::NOFOLLOW;
        flags |= if write { OFlags::RDWR } else { OFlags::RDONLY };
        let fd = rustix::fs::openat(
            self.dir_fd(&l.parent)?,
            l.name.name.as_str(),
            flags,
            Mode::empty(),
        )
        .map_err(sys)?;
        Ok(File::from(fd))
    }

    /// Loads a regular file's header into `st` if not loaded yet.
    pub(super) fn load_file(&self, inode: &Arc<Inode>, st: &mut FileState) -> Result<()> {
        if st.loaded {
            return Ok(());
        }
        let r = (|| {
            let tmp;
            let f: &File = match &st.fd {
                Some(f) => f,
                None => {
                    let l = inode.first_link().ok_or(Error::NotFound)?;
                    tmp = self.open_link(&l, false)?;
                    &tmp
                }
            };
            let mut b = [0u8; HEADER_USED];
            pread_full(f, &mut b, 0)?;
            let len = f.metadata()?.len();
            if len < HEADER_USED as u64 {
                return Err(Error::Corrupt(Corruption::ShortHeader));
            }
            let h = Header::parse(&b, HeaderKind::File)?;
            self.keys.check_context(&h.context)?;
            if len < HEADER_SIZE || !(len - HEADER_SIZE).is_multiple_of(self.du) {
                return Err(Error::Corrupt(Corruption::BadLength));
            }
            Ok(h)
        })();
        let h = self.note(inode, None, r)?;
        st.context = h.context;
        st.size = h.size;
        st.loaded = true;
        Ok(())
    }

    pub(super) fn file_crypt(&self, inode: &Inode, ctx: &[u8; CONTEXT_SIZE]) -> Result<NodeCrypt> {
        if let Some(c) = inode.crypt.get() {
            return Ok(c.clone());
        }
        self.need_key()?;
        let c = self.note(
            inode,
            None,
            self.keys.node_crypt(ctx, NodeKind::File, inode.backing_ino),
        )?;
        let _ = inode.crypt.set(c.clone());
        Ok(c)
    }

    pub(super) fn symlink_parts(
        &self,
        inode: &Arc<Inode>,
    ) -> Result<([u8; CONTEXT_SIZE], Vec<u8>)> {
        let l = inode.first_link().ok_or(Error::NotFound)?;
        let target =
            rustix::fs::readlinkat(self.dir_fd(&l.parent)?, l.name.name.as_str(), Vec::new())
                .map_err(sys)?;
        let r = self
            .decode_backing_symlink(target.as_bytes())
            .and_then(|(ctx, blob)| {
                self.keys.check_context(&ctx)?;
                Ok((ctx, blob))
            });
        self.note(inode, None, r)
    }

    /// The target as presented: plaintext with the key, no-key name without.
    pub(super) fn symlink_target(&self, inode: &Arc<Inode>) -> Result<Vec<u8>> {
        let (ctx, blob) = self.symlink_parts(inode)?;
        if !self.keys.unlocked() {
            // spec §7.4: without the key the target is the no-key name of the
            // ciphertext (hash = minor_hash = 0).
            if blob.len() < 3 {
                return self.note(inode, None, Err(Error::Corrupt(Corruption::BadSymlink)));
            }
            let len = u16::from_le_bytes([blob[0], blob[1]]) as usize;
            if len == 0 || 2 + len > blob.len() {
                return self.note(inode, None, Err(Error::Corrupt(Corruption::BadSymlink)));
            }
            return Ok(crate::crypt::nokey_name(&blob[2..2 + len]).into_bytes());
        }
        let crypt = match inode.crypt.get() {
            Some(c) => c.clone(),
            None => {
                let c = self.note(
                    inode,
                    None,
                    self.keys
                        .node_crypt(&ctx, NodeKind::Symlink, inode.backing_ino),
                )?;
                let _ = inode.crypt.set(c.clone());
                c
            }
        };
        let r = crypt
            .decrypt_symlink(&blob)
            .map_err(|_| Error::Corrupt(Corruption::BadSymlink));
        self.note(inode, None, r)
    }

    pub(super) fn attr_from(&self, inode: &Arc<Inode>, st: &Stat) -> Result<FileAttr> {
        let mode = st.st_mode;
        let size = match inode.kind {
            // A damaged header or symlink still stats (size 0), so that the
            // object can be listed, renamed and deleted; reading it gives EIO.
            Kind::File => {
                let mut fs = inode.file.write().map_err(|_| Error::NotFound)?;
                match self.load_file(inode, &mut fs) {
                    Ok(()) => fs.size,
                    Err(e) if e.is_corruption() => 0,
                    Err(e) => return Err(e),
                }
            }
            Kind::Symlink => match inode.symlink_size.get() {
                Some(s) => *s,
                None => match self.symlink_target(inode) {
                    Ok(t) => {
                        let s = t.len() as u64;
                        let _ = inode.symlink_size.set(s);
                        s
                    }
                    Err(e) if e.is_corruption() => 0,
                    Err(e) => return Err(e),
                },
            },
            _ => st.st_size as u64,
        };
        Ok(FileAttr {
            ino: fuser::INodeNo(inode.ino.0),
            size,
            // Regular files: without the header's block, so that `du` and
            // sparse-file tools see the data units only.
            blocks: if inode.kind == Kind::File {
                (st.st_blocks as u64).saturating_sub(HEADER_SIZE / 512)
            } else {
                st.st_blocks as u64
            },
            atime: to_system_time(st.st_atime, st.st_atime_nsec as i64),
            mtime: to_system_time(st.st_mtime, st.st_mtime_nsec as i64),
            ctime: to_system_time(st.st_ctime, st.st_ctime_nsec as i64),
            crtime: UNIX_EPOCH,
            kind: fuse_type(mode),
            perm: (mode & 0o7777) as u16,
            nlink: st.st_nlink as u32,
            uid: st.st_uid,
            gid: st.st_gid,
            rdev: st.st_rdev as u32,
            blksize: 4096,
            flags: 0,
        })
    }

    /// Looks up the backing entry `bname` in `parent` and registers one kernel
    /// lookup of it.
    pub(super) fn lookup_backing(
        &self,
        parent: &Arc<Inode>,
        bname: &BackingName,
    ) -> Result<(Arc<Inode>, Stat)> {
        let pfd = self.dir_fd(parent)?;
        let st =
            rustix::fs::statat(pfd, bname.name.as_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(sys)?;
        let kind = kind_of(st.st_mode);
        let ino = self.inodes.fuse_ino(st.st_ino);
        let inode = self
            .inodes
            .lookup_or_insert(ino, kind, || -> Result<Inode> {
                let dir_fd = if kind == Kind::Dir {
                    Some(
                        rustix::fs::openat(
                            pfd,
                            bname.name.as_str(),
                            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                            Mode::empty(),
                        )
                        .map_err(sys)?,
                    )
                } else {
                    None
                };
                Ok(Inode::new(ino, st.st_ino, kind, dir_fd, None))
            })?;
        inode.add_link(parent, bname);
        Ok((inode, st))
    }

    pub(super) fn set_owner_mode(
        &self,
        fd: BorrowedFd<'_>,
        caller: Caller,
        gid: u32,
        mode: u32,
        is_symlink_at: Option<&str>,
    ) -> Result<()> {
        let me_uid = self.euid;
        let me_gid = self.egid;
        if let Some(name) = is_symlink_at {
            if caller.uid != me_uid || gid != me_gid {
                rustix::fs::chownat(
                    fd,
                    name,
                    Some(rustix::fs::Uid::from_raw(caller.uid)),
                    Some(rustix::fs::Gid::from_raw(gid)),
                    AtFlags::SYMLINK_NOFOLLOW,
                )
                .map_err(sys)?;
            }
            return Ok(());
        }
        if caller.uid != me_uid || gid != me_gid {
            rustix::fs::fchown(
                fd,
                Some(rustix::fs::Uid::from_raw(caller.uid)),
                Some(rustix::fs::Gid::from_raw(gid)),
            )
            .map_err(sys)?;
        }
        rustix::fs::fchmod(fd, Mode::from_raw_mode(mode & 0o7777)).map_err(sys)?;
        Ok(())
    }

    /// Group of a new entry: the parent's group when the parent is setgid.
    pub(super) fn new_gid(&self, parent: &Inode, caller: Caller) -> Result<(u32, bool)> {
        let st = rustix::fs::fstat(self.dir_fd(parent)?).map_err(sys)?;
        if st.st_mode & libc::S_ISGID != 0 {
            Ok((st.st_gid, true))
        } else {
            Ok((caller.gid, false))
        }
    }
}
