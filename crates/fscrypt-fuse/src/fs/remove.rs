//! Removing and renaming: unlink, rmdir, rename.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::FileExt;

use fscrypt::hooks::{RenameSide, prepare_rename};
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};

use crate::error::{Error, Result, WrongType};
use crate::inodes::{InodeNo, Kind};
use crate::layout::{self, DIR_META_NAME, EntryName};

use super::backing::open_entry;
use super::recover::crash_point;
use super::tags::Rebind;
use super::{EncryptedFs, kind_of, sys};

impl EncryptedFs {
    /// Removes a non-directory entry (works without the key, via no-key names).
    ///
    /// # Errors
    /// `ENOENT`, `EISDIR`, `EROFS`, backing errors.
    pub fn unlink(&self, parent: InodeNo, name: &OsStr) -> Result<()> {
        self.writable()?;
        let p = self.inode(parent)?;
        let bname = self.resolve_name(&p, name)?;
        let pfd = self.dir_fd(&p)?;
        let st =
            rustix::fs::statat(pfd, bname.name.as_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(sys)?;
        if kind_of(st.st_mode) == Kind::Dir {
            return Err(Error::WrongType(WrongType::IsDir));
        }
        let victims = self.inodes.with_backing(st.st_ino);
        let binding = match kind_of(st.st_mode) {
            Kind::File if st.st_nlink > 1 => self.name_binding(&p, &bname)?,
            _ => None,
        };
        for i in &victims {
            self.keep_reachable(i, &p, &bname);
        }
        let held = self.hold_stored_symlink(pfd, bname.name.as_str(), st.st_mode);
        rustix::fs::unlinkat(pfd, bname.name.as_str(), AtFlags::empty()).map_err(sys)?;
        crash_point("unlink:after-unlink");
        self.release_stored_symlink(held);
        self.remove_side_file(&p, &bname);
        for i in &victims {
            i.remove_link(p.ino, &bname);
            if !i.unlinked()
                && let Ok(mut o) = i.orphan.lock()
            {
                *o = None;
            }
        }
        // Format 3: a file with other names loses this name's binding,
        // through a name the mount knows (best effort, as in rename).
        if let Some(b) = binding
            && let Some(l) = victims.iter().find_map(|i| i.first_link())
            && let Ok(dfd) = self.dir_fd(&l.parent)
        {
            let _ = self.rebind_entry(
                &l.parent,
                dfd,
                l.name.name.as_str(),
                st.st_ino,
                Rebind::Drop(b),
            );
        }
        Ok(())
    }

    /// Lists a backing directory's user-visible entries (names only).
    pub(super) fn has_user_entries(&self, dfd: BorrowedFd<'_>) -> Result<bool> {
        let mut d = rustix::fs::Dir::read_from(dfd).map_err(sys)?;
        while let Some(ent) = d.read() {
            let ent = ent.map_err(sys)?;
            match layout::classify(ent.file_name().to_bytes()) {
                EntryName::Internal => {}
                _ => return Ok(true),
            }
        }
        Ok(false)
    }

    /// Removes our internal files (metadata, orphan side files) from a
    /// directory known to have no user entries.
    pub(super) fn clear_internal(&self, dfd: BorrowedFd<'_>) -> Result<()> {
        let mut names = Vec::new();
        let mut d = rustix::fs::Dir::read_from(dfd).map_err(sys)?;
        while let Some(ent) = d.read() {
            let ent = ent.map_err(sys)?;
            let n = ent.file_name().to_bytes();
            if n != b"." && n != b".." {
                names.push(OsString::from_vec(n.to_vec()));
            }
        }
        for n in names {
            let flags = if rustix::fs::statat(dfd, n.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
                .map(|s| kind_of(s.st_mode) == Kind::Dir)
                .unwrap_or(false)
            {
                AtFlags::REMOVEDIR
            } else {
                AtFlags::empty()
            };
            rustix::fs::unlinkat(dfd, n.as_os_str(), flags).map_err(sys)?;
        }
        Ok(())
    }

    /// Removes an empty directory (works without the key).
    ///
    /// # Errors
    /// `ENOTEMPTY`, `ENOTDIR`, `ENOENT`, `EROFS`, backing errors.
    pub fn rmdir(&self, parent: InodeNo, name: &OsStr) -> Result<()> {
        self.writable()?;
        let p = self.inode(parent)?;
        let bname = self.resolve_name(&p, name)?;
        let pfd = self.dir_fd(&p)?;
        // Never a symlink or a mount point: its contents would be cleared.
        let dfd = open_entry(
            pfd,
            bname.name.as_str(),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )?;
        if self.has_user_entries(dfd.as_fd())? {
            return Err(Error::NotEmpty);
        }
        let st = rustix::fs::fstat(&dfd).map_err(sys)?;
        // The kernel holds the victim's lock, so nothing is created inside
        // between the check and the removal.
        self.clear_internal(dfd.as_fd())?;
        crash_point("rmdir:after-clear");
        rustix::fs::unlinkat(pfd, bname.name.as_str(), AtFlags::REMOVEDIR).map_err(sys)?;
        crash_point("rmdir:after-rmdir");
        self.remove_side_file(&p, &bname);
        for i in self.inodes.with_backing(st.st_ino) {
            i.remove_link(p.ino, &bname);
        }
        Ok(())
    }

    /// Renames an entry (`flags`: RENAME_NOREPLACE, RENAME_EXCHANGE).
    ///
    /// # Errors
    /// `ENOKEY` without the key (as the kernel: no-key names cannot be
    /// renamed) and `EXDEV` across policies (the hooks' checks), `EEXIST`,
    /// `ENOTEMPTY`, backing errors.
    pub fn rename(
        &self,
        parent: InodeNo,
        name: &OsStr,
        newparent: InodeNo,
        newname: &OsStr,
        flags: u32,
    ) -> Result<()> {
        self.writable()?;
        let p = self.inode(parent)?;
        let np = self.inode(newparent)?;
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        let noreplace = flags & libc::RENAME_NOREPLACE != 0;
        if flags & !(libc::RENAME_EXCHANGE | libc::RENAME_NOREPLACE) != 0 {
            return Err(Error::InvalidArgument);
        }
        let pc = self.dir_crypt_opt(&p)?;
        let npc = self.dir_crypt_opt(&np)?;
        let ob = self.resolve_name(&p, name)?;
        let pfd = self.dir_fd(&p)?;
        let npfd = self.dir_fd(&np)?;
        let src =
            rustix::fs::statat(pfd, ob.name.as_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(sys)?;
        // The new name's ciphertext needs the key; without it the hook
        // below refuses (ENOKEY), whatever is at the destination.
        let new_ct = match npc {
            Some(_) => Some(self.create_name(&np, newname)?),
            None => None,
        };
        // A new name that shows a sync tool's conflict copy is that copy's.
        let dst_copy = match npc {
            Some(_) => self.existing_copy(&np, newname)?,
            None => None,
        };
        let dst_name = match (&dst_copy, &new_ct) {
            (Some(b), _) => Some(b.clone()),
            (None, Some(ct)) => Some(self.backing_name_of(&np, ct)?),
            (None, None) => None,
        };
        let dst = match dst_name {
            Some(nb) => match rustix::fs::statat(npfd, nb.name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
            {
                Ok(s) => Some(s),
                Err(rustix::io::Errno::NOENT) => None,
                Err(e) => return Err(sys(e)),
            },
            None => None,
        };
        // `__fscrypt_prepare_rename()`: ENOKEY without either directory's
        // key, EXDEV when an entry would land under another policy.
        let policy = Some(self.keys.policy());
        prepare_rename(
            RenameSide {
                dir: policy,
                dir_has_key: pc.is_some(),
                inode: Some(self.link_inode(kind_of(src.st_mode))),
            },
            RenameSide {
                dir: policy,
                dir_has_key: npc.is_some(),
                inode: dst.as_ref().map(|d| self.link_inode(kind_of(d.st_mode))),
            },
            p.ino == np.ino,
            exchange,
        )?;
        let Some(new_ct) = new_ct else {
            return Err(Error::NoKey);
        };
        let nb = match dst_copy {
            Some(b) => b,
            None => self.backing_name_for_create(&np, &new_ct)?,
        };
        if let Some(d) = &dst
            && d.st_ino == src.st_ino
        {
            // Same inode (hard links or same name): POSIX says do nothing.
            return Ok(());
        }
        let mut rflags = RenameFlags::empty();
        if exchange {
            rflags |= RenameFlags::EXCHANGE;
        }
        if noreplace {
            rflags |= RenameFlags::NOREPLACE;
        }
        // Replacing an empty directory: the backing one still holds our
        // metadata file; remove it first and restore it if the rename fails.
        let mut restore: Option<(OwnedFd, Vec<u8>)> = None;
        if let Some(d) = &dst
            && !exchange
            && !noreplace
            && kind_of(d.st_mode) == Kind::Dir
            && kind_of(src.st_mode) == Kind::Dir
        {
            let dfd = open_entry(
                npfd,
                nb.name.as_str(),
                OFlags::RDONLY | OFlags::DIRECTORY,
                Mode::empty(),
            )?;
            if self.has_user_entries(dfd.as_fd())? {
                return Err(Error::NotEmpty);
            }
            let mut meta = Vec::new();
            if let Ok(m) = open_entry(dfd.as_fd(), DIR_META_NAME, OFlags::RDONLY, Mode::empty()) {
                let _ = std::io::Read::read_to_end(&mut File::from(m), &mut meta);
            }
            self.clear_internal(dfd.as_fd())?;
            crash_point("rename:after-clear");
            restore = Some((dfd, meta));
        }
        if let Some(d) = &dst
            && !exchange
        {
            for i in self.inodes.with_backing(d.st_ino) {
                self.keep_reachable(&i, &np, &nb);
            }
        }
        let held = match &dst {
            Some(d) if !exchange => self.hold_stored_symlink(npfd, nb.name.as_str(), d.st_mode),
            _ => None,
        };
        // Format 3: the objects are bound to their new names first (a
        // crash after leaves one binding too many, never one too few).
        let src_file = kind_of(src.st_mode) == Kind::File;
        let bindings = match (self.name_binding(&p, &ob)?, self.name_binding(&np, &nb)?) {
            (Some(a), Some(b)) if a != b => Some((a, b)),
            (Some(a), Some(_)) if src_file => {
                // A conflict copy renamed to its original's name (the
                // same binding): it becomes the newest version there.
                let add = Rebind::Add { from: a, to: a };
                self.rebind_entry(&p, pfd, ob.name.as_str(), src.st_ino, add)?;
                None
            }
            _ => None,
        };
        let dst_file = match &dst {
            Some(d) if exchange && kind_of(d.st_mode) == Kind::File => Some(d.st_ino),
            _ => None,
        };
        if let Some((bo, bn)) = bindings {
            if src_file {
                let add = Rebind::Add { from: bo, to: bn };
                self.rebind_entry(&p, pfd, ob.name.as_str(), src.st_ino, add)?;
            }
            if let Some(ino) = dst_file {
                let add = Rebind::Add { from: bn, to: bo };
                self.rebind_entry(&np, npfd, nb.name.as_str(), ino, add)?;
            }
        }
        // Until the links below follow the backing rename, `find` waits.
        let moving = self.renames.write()?;
        if let Err(e) =
            rustix::fs::renameat_with(pfd, ob.name.as_str(), npfd, nb.name.as_str(), rflags)
        {
            if let Some((dfd, meta)) = restore
                && let Ok(m) = open_entry(
                    dfd.as_fd(),
                    DIR_META_NAME,
                    OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
                    Mode::from_raw_mode(0o600),
                )
            {
                let _ = File::from(m).write_all_at(&meta, 0);
            }
            if dst.is_none() {
                self.remove_side_file(&np, &nb);
            }
            return Err(sys(e));
        }
        crash_point("rename:after-rename");
        self.release_stored_symlink(held);
        if !exchange {
            self.remove_side_file(&p, &ob);
        }
        // Links move with the objects: only inodes that had the old name
        // (and are the object renamed) get the new one.
        let moved: Vec<_> = self
            .inodes
            .with_backing(src.st_ino)
            .into_iter()
            .filter(|i| i.has_link(p.ino, &ob))
            .collect();
        let replaced: Vec<_> = match &dst {
            Some(d) => self
                .inodes
                .with_backing(d.st_ino)
                .into_iter()
                .filter(|i| i.has_link(np.ino, &nb))
                .collect(),
            None => Vec::new(),
        };
        for i in &moved {
            i.remove_link(p.ino, &ob);
        }
        for i in &replaced {
            i.remove_link(np.ino, &nb);
        }
        for i in &moved {
            i.add_link(&np, &nb);
        }
        if exchange {
            for i in &replaced {
                i.add_link(&p, &ob);
            }
        }
        drop(moving);
        // The old names' bindings go (best effort: one too many is what a
        // crash leaves too, and fsck reports it).
        if let Some((bo, bn)) = bindings {
            if src_file {
                let _ =
                    self.rebind_entry(&np, npfd, nb.name.as_str(), src.st_ino, Rebind::Drop(bo));
            }
            if let Some(ino) = dst_file {
                let _ = self.rebind_entry(&p, pfd, ob.name.as_str(), ino, Rebind::Drop(bn));
            }
        }
        Ok(())
    }
}
