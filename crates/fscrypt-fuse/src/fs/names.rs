//! Names: directory contexts, filename encryption, no-key name resolution
//! and long-name side files (spec §6, §8; `docs/vault-format.md`).

use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode, OFlags};

use crate::crypt::{NodeCrypt, NodeKind};
use crate::error::{Corruption, Error, Result};
use crate::inodes::Inode;
use crate::layout::{self, BackingName, CONTEXT_SIZE, DIR_META_NAME, EntryName, NAME_MAX};

use super::backing::open_entry;
use super::{EncryptedFs, sys, validate_name};

impl EncryptedFs {
    pub(super) fn dir_context(&self, dir: &Inode) -> Result<[u8; CONTEXT_SIZE]> {
        if let Some(c) = dir.context() {
            return Ok(c);
        }
        let r = self.dir_fd(dir).and_then(|fd| self.read_dir_context(fd));
        self.note(dir, Some(DIR_META_NAME), r)
    }

    pub(super) fn dir_crypt(&self, dir: &Inode) -> Result<NodeCrypt> {
        if let Some(c) = dir.crypt.get() {
            return Ok(c.clone());
        }
        self.need_key()?;
        let ctx = self.dir_context(dir)?;
        let c = self.note(
            dir,
            None,
            self.keys.node_crypt(&ctx, NodeKind::Dir, dir.backing_ino),
        )?;
        let _ = dir.crypt.set(c.clone());
        Ok(c)
    }

    /// The backing name of plaintext `name` in `dir` (needs the key).
    pub(super) fn encrypt_name(&self, dir: &Inode, name: &OsStr) -> Result<BackingName> {
        let b = validate_name(name)?;
        let crypt = self.dir_crypt(dir)?;
        let ct = crypt
            .encrypt_filename(b)
            .map_err(|e| Error::Crypt(e.to_string()))?;
        Ok(BackingName::from_ciphertext(&ct))
    }

    /// Resolves a name given by the kernel to a backing name: encrypts it with
    /// the key, or decodes a no-key name on a locked mount (spec §8.1).
    pub(super) fn resolve_name(&self, dir: &Arc<Inode>, name: &OsStr) -> Result<BackingName> {
        if self.keys.unlocked() {
            return self.encrypt_name(dir, name);
        }
        let b = name.as_bytes();
        if b.len() > NAME_MAX {
            return Err(Error::NameTooLong);
        }
        let nk = crate::crypt::nokey_decode(b).ok_or(Error::NotFound)?;
        let mut raw = [0u8; 256];
        let n = layout::b64_decode(b, &mut raw).ok_or(Error::NotFound)?;
        if n != 189 && n >= 8 + 16 {
            let ct = &raw[8..n];
            if nk.matches(ct) {
                return Ok(BackingName::from_ciphertext(ct));
            }
            return Err(Error::NotFound);
        }
        // Long ciphertext: the no-key name holds a prefix and a hash; scan.
        let fd = self.dir_fd(dir)?;
        let mut d = rustix::fs::Dir::read_from(fd).map_err(sys)?;
        while let Some(ent) = d.read() {
            let ent = ent.map_err(sys)?;
            let ename = ent.file_name().to_bytes();
            if let Some(ct) = self.entry_ciphertext(dir, ename)?
                && nk.matches(&ct)
            {
                return Ok(BackingName::from_ciphertext(&ct));
            }
        }
        Err(Error::NotFound)
    }

    /// The ciphertext of a backing entry, `None` for internal names.
    pub(super) fn entry_ciphertext(&self, dir: &Inode, ename: &[u8]) -> Result<Option<Vec<u8>>> {
        match layout::classify(ename) {
            EntryName::Short(ct) => Ok(Some(ct)),
            EntryName::Internal => Ok(None),
            EntryName::Invalid => {
                let what = String::from_utf8_lossy(ename).into_owned();
                let _ = self.note::<()>(dir, Some(&what), Err(Error::Corrupt(Corruption::BadName)));
                Ok(None)
            }
            EntryName::Long => {
                let entry = String::from_utf8_lossy(ename).into_owned();
                let side = format!("{entry}{}", layout::LONG_NAME_SUFFIX);
                let r = (|| {
                    let fd = self.dir_fd(dir)?;
                    let f = open_entry(fd, side.as_str(), OFlags::RDONLY, Mode::empty())
                        .map_err(|_| Error::Corrupt(Corruption::BadLongName))?;
                    let f = File::from(f);
                    let mut buf = [0u8; 300];
                    let mut n = 0;
                    loop {
                        match f.read_at(&mut buf[n..], n as u64)? {
                            0 => break,
                            k => n += k,
                        }
                        if n == buf.len() {
                            break;
                        }
                    }
                    layout::check_long_ciphertext(&entry, &buf[..n])?;
                    Ok(buf[..n].to_vec())
                })();
                match self.note(dir, Some(&side), r) {
                    Ok(ct) => Ok(Some(ct)),
                    Err(_) => Ok(None),
                }
            }
        }
    }

    /// Writes the long-name side file of `bname` (content `ct`) atomically:
    /// kept when it already holds `ct` (an entry of that name exists), else
    /// written under a temporary name and renamed into place, so a crash
    /// never leaves a truncated side file.
    pub(super) fn write_side_file(
        &self,
        dir: &Inode,
        bname: &BackingName,
        ct: &[u8],
    ) -> Result<()> {
        let fd = self.dir_fd(dir)?;
        let side = bname.side_file();
        // An existing side file (an entry of that name exists) is only read;
        // a new one is written to a fresh temporary file and renamed over
        // the name, so nothing planted there (a symlink, a hard link to
        // another file) is ever written through, and a crash never leaves a
        // truncated side file.
        if let Ok(f) = open_entry(fd, side.as_str(), OFlags::RDONLY, Mode::empty()) {
            let mut buf = [0u8; NAME_MAX + 1];
            if let Ok(n) = File::from(f).read_at(&mut buf, 0)
                && buf[..n] == *ct
            {
                return Ok(());
            }
        }
        let tmp = super::recover::tmp_name()?;
        let r = (|| -> Result<()> {
            let f = open_entry(
                fd,
                tmp.as_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
                Mode::from_raw_mode(0o600),
            )?;
            File::from(f).write_all_at(ct, 0)?;
            super::recover::crash_point("name:after-side-tmp");
            rustix::fs::renameat(fd, tmp.as_str(), fd, side.as_str()).map_err(sys)?;
            super::recover::crash_point("name:after-side");
            Ok(())
        })();
        if r.is_err() {
            let _ = rustix::fs::unlinkat(fd, tmp.as_str(), AtFlags::empty());
        }
        r
    }

    /// Encrypts `name` for creation in `dir`, writing the long-name side file
    /// first when needed.
    pub(super) fn name_for_create(&self, dir: &Inode, name: &OsStr) -> Result<BackingName> {
        let b = validate_name(name)?;
        let crypt = self.dir_crypt(dir)?;
        let ct = crypt
            .encrypt_filename(b)
            .map_err(|e| Error::Crypt(e.to_string()))?;
        let bn = BackingName::from_ciphertext(&ct);
        if bn.long {
            self.write_side_file(dir, &bn, &ct)?;
        }
        Ok(bn)
    }

    pub(super) fn remove_side_file(&self, dir: &Inode, bname: &BackingName) {
        if bname.long
            && let Ok(fd) = self.dir_fd(dir)
        {
            let _ = rustix::fs::unlinkat(fd, bname.side_file().as_str(), AtFlags::empty());
        }
    }
}
