//! Names: directory contexts, filename encryption, no-key name resolution
//! and long-name side files (spec §6, §8; `docs/vault-format.md`). Every
//! name goes through `fscrypt::hooks` ([`FscryptName`]); this module only
//! maps ciphertexts to backing names and back.
//!
//! Format 3 (`docs/vault-format.md` §4b.6) tags every backing
//! name with a MAC of its ciphertext under its directory's nonce
//! ([`fscrypt_vault::integrity::names`]): a name whose tag does not verify
//! is never listed and cannot be looked up (logged by backing path). On a
//! locked mount the tag cannot be checked (it needs the key): names are
//! shown as no-key names of their ciphertext as in the other formats, and
//! a lookup scans the directory for the entry of that ciphertext (the
//! backing name cannot be computed without the key).

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use fscrypt::fname::{FNAME_MIN_MSG_LEN, is_dot_or_dotdot};
use fscrypt::hooks::{FscryptName, LinkInode};
use fscrypt::{ContextV2, FnameBuf, NAME_MAX};
use rustix::fs::{AtFlags, Mode, OFlags};

use crate::crypt::{NodeCrypt, NodeKind};
use crate::error::{Corruption, Error, Result};
use crate::inodes::{Inode, Kind};
use crate::layout::{self, BackingName, DIR_META_NAME, EntryName, Format};
use fscrypt_vault::integrity::{IntegrityKeys, names as tagged};
use fscrypt_vault::{conflict, leftovers};

use super::backing::open_entry;
use super::{EncryptedFs, sys};

impl EncryptedFs {
    pub(super) fn dir_context(&self, dir: &Inode) -> Result<ContextV2> {
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

    /// The directory's crypto state when the key is present, `None` on a
    /// locked mount: what `fscrypt::hooks` takes for a directory.
    pub(super) fn dir_crypt_opt(&self, dir: &Inode) -> Result<Option<NodeCrypt>> {
        if self.keys.unlocked() {
            self.dir_crypt(dir).map(Some)
        } else {
            Ok(None)
        }
    }

    /// An inode as the link and rename hooks see it: FIFOs, sockets and
    /// devices carry no policy; everything else has the vault's (a stored
    /// context of another policy is corrupt, and a damaged object stays
    /// movable, so it counts as the vault's too).
    pub(super) fn link_inode(&self, kind: Kind) -> LinkInode<'_> {
        let special = kind == Kind::Special;
        LinkInode {
            policy: (!special).then(|| self.keys.policy()),
            special,
        }
    }

    /// Prepares a name given by the kernel for a lookup in `dir`
    /// ([`FscryptName::for_lookup`]): its ciphertext with the key, the
    /// decoded no-key name without it (ENOENT if malformed).
    ///
    /// # Errors
    /// [`Error::NameTooLong`] past 255 bytes and [`Error::InvalidName`] for
    /// `.`/`..` (checked first, as `ext4_lookup` does before the hook), then
    /// the hook's [`Error::Format`].
    pub(super) fn lookup_name(&self, dir: &Inode, name: &OsStr) -> Result<FscryptName> {
        let b = name.as_bytes();
        if b.len() > NAME_MAX {
            return Err(Error::NameTooLong);
        }
        if is_dot_or_dotdot(b) {
            return Err(Error::InvalidName);
        }
        let crypt = self.dir_crypt_opt(dir)?;
        Ok(FscryptName::for_lookup(crypt.as_deref(), b)?)
    }

    /// Resolves a name given by the kernel to a backing name (spec §8.1):
    /// through [`EncryptedFs::lookup_name`], and for a long no-key name (a
    /// prefix and a digest of the ciphertext) by scanning `dir` with
    /// [`FscryptName::matches`]. A name with a sync tool's marker that no
    /// entry has as a whole is a conflict copy's ([`EncryptedFs::existing_copy`]).
    pub(super) fn resolve_name(&self, dir: &Arc<Inode>, name: &OsStr) -> Result<BackingName> {
        if self.format == Format::V3 && !self.keys.unlocked() {
            return self.resolve_by_scan(dir, name);
        }
        if let Some(b) = self.existing_copy(dir, name)? {
            self.check_side_file_for_lookup(dir, &b)?;
            return Ok(b);
        }
        let fname = self.lookup_name(dir, name)?;
        match fname.disk_name() {
            // A shorter ciphertext is no entry's: such backing names are
            // foreign (the listing skips them), so they cannot be looked up.
            Some(ct) if ct.len() >= FNAME_MIN_MSG_LEN => {
                let b = self.backing_name_of(dir, ct)?;
                self.check_side_file_for_lookup(dir, &b)?;
                return Ok(b);
            }
            Some(_) => return Err(Error::NotFound),
            None => {}
        }
        let fd = self.dir_fd(dir)?;
        let mut d = rustix::fs::Dir::read_from(fd).map_err(sys)?;
        while let Some(ent) = d.read() {
            let ent = ent.map_err(sys)?;
            let ename = ent.file_name().to_bytes();
            // Conflict copies show their marker in the no-key name too, so
            // a digest name without one is the original's.
            if let Some((ct, b)) = self.entry_name(dir, ename)?
                && b.marker.is_none()
                && fname.matches(&ct)
            {
                return Ok(b);
            }
        }
        Err(Error::NotFound)
    }

    /// [`EncryptedFs::resolve_name`] on a locked mount of a format 3 vault:
    /// the backing name of a ciphertext needs its tag, hence the key, so
    /// the directory is scanned for the entry whose ciphertext the no-key
    /// name matches (an entry without a marker first, then a sync tool's
    /// conflict copy with the name's marker).
    fn resolve_by_scan(&self, dir: &Arc<Inode>, name: &OsStr) -> Result<BackingName> {
        let copy = conflict::split(name.as_bytes()).and_then(|c| {
            let f = self.lookup_name(dir, OsStr::from_bytes(&c.original)).ok()?;
            Some((f, String::from_utf8(c.marker).ok()?))
        });
        let whole = match self.lookup_name(dir, name) {
            Ok(f) => Some(f),
            Err(e) if copy.is_none() => return Err(e),
            Err(_) => None,
        };
        let fd = self.dir_fd(dir)?;
        let mut d = rustix::fs::Dir::read_from(fd).map_err(sys)?;
        let mut found_copy = None;
        while let Some(ent) = d.read() {
            let ent = ent.map_err(sys)?;
            let Some((ct, b)) = self.entry_name(dir, ent.file_name().to_bytes())? else {
                continue;
            };
            match &b.marker {
                None if whole.as_ref().is_some_and(|f| f.matches(&ct)) => return Ok(b),
                Some(m)
                    if found_copy.is_none()
                        && copy
                            .as_ref()
                            .is_some_and(|(f, cm)| cm == m && f.matches(&ct)) =>
                {
                    found_copy = Some(b);
                }
                _ => {}
            }
        }
        found_copy.ok_or(Error::NotFound)
    }

    /// Format 3 with the key: the integrity keys and the nonce of `dir`
    /// (under which its names are tagged); `None` in formats 1 and 2.
    ///
    /// # Errors
    /// [`Error::NoKey`] on a locked mount; errors of reading the
    /// directory's context.
    fn name_keys(&self, dir: &Inode) -> Result<Option<(&IntegrityKeys, [u8; 16])>> {
        if self.format != Format::V3 {
            return Ok(None);
        }
        let keys = self.keys.integrity()?;
        Ok(Some((keys, self.dir_context(dir)?.nonce)))
    }

    /// The backing name of name ciphertext `ct` in `dir`: as
    /// [`BackingName::from_ciphertext`] in formats 1 and 2; in format 3
    /// tagged under the directory's nonce ([`tagged::backing_name`]).
    ///
    /// # Errors
    /// Format 3: [`Error::NoKey`] on a locked mount, errors of reading the
    /// directory's context.
    pub(super) fn backing_name_of(&self, dir: &Inode, ct: &[u8]) -> Result<BackingName> {
        Ok(match self.name_keys(dir)? {
            Some((keys, parent)) => tagged::backing_name(keys, &parent, ct),
            None => BackingName::from_ciphertext(ct),
        })
    }

    /// The bytes of the long-name side file of `ct` in `dir`: `ct` in
    /// formats 1 and 2, `ct ‖ tag` in format 3 ([`tagged::tagged`]).
    ///
    /// # Errors
    /// As [`EncryptedFs::backing_name_of`].
    fn side_file_bytes(&self, dir: &Inode, ct: &[u8]) -> Result<Vec<u8>> {
        Ok(match self.name_keys(dir)? {
            Some((keys, parent)) => tagged::tagged(keys, &parent, ct),
            None => ct.to_vec(),
        })
    }

    /// Format 3, a lookup of a long name by its ciphertext (the backing name
    /// is the ciphertext's hash, untagged): the side file, when there is
    /// one, must hold the ciphertext and its tag, or the entry is damaged
    /// (EIO, logged by the side file's backing path) as its listing is. A
    /// missing side file is left to the lookup (no entry, most often).
    /// Nothing to check in formats 1 and 2 and for inline names.
    ///
    /// # Errors
    /// [`Corruption::BadNameTag`], [`Corruption::BadLongName`]; backing
    /// errors.
    fn check_side_file_for_lookup(&self, dir: &Inode, b: &BackingName) -> Result<()> {
        if self.format != Format::V3 || !b.long {
            return Ok(());
        }
        let side = b.side_file();
        let fd = self.dir_fd(dir)?;
        let Ok(f) = open_entry(fd, side.as_str(), OFlags::RDONLY, Mode::empty()) else {
            return Ok(());
        };
        let content = read_side_file(&File::from(f))?;
        let Some((keys, parent)) = self.name_keys(dir)? else {
            return Ok(());
        };
        let r = tagged::open_side_file(Some(keys), &parent, &b.original(), &content)
            .map(|_| ())
            .map_err(Error::Corrupt);
        self.note(dir, Some(&side), r)
    }

    /// When `name` (as the kernel gives it) carries a sync tool's conflict
    /// marker ([`conflict::split`]), no entry of `dir` has the name as a
    /// whole, and a conflict copy of the name without the marker exists:
    /// that copy's backing name (issue 23). `None` otherwise, at the cost
    /// of one scan of the name for ordinary names.
    ///
    /// # Errors
    /// As [`EncryptedFs::lookup_name`], backing errors.
    pub(super) fn existing_copy(&self, dir: &Inode, name: &OsStr) -> Result<Option<BackingName>> {
        let Some(c) = conflict::split(name.as_bytes()) else {
            return Ok(None);
        };
        let exists = |b: &BackingName| -> Result<bool> {
            match rustix::fs::statat(
                self.dir_fd(dir)?,
                b.name.as_str(),
                AtFlags::SYMLINK_NOFOLLOW,
            ) {
                Ok(_) => Ok(true),
                Err(rustix::io::Errno::NOENT) => Ok(false),
                Err(e) => Err(sys(e)),
            }
        };
        let whole = self.lookup_name(dir, name).ok();
        if let Some(ct) = whole.as_ref().and_then(|f| f.disk_name())
            && ct.len() >= FNAME_MIN_MSG_LEN
            && exists(&self.backing_name_of(dir, ct)?)?
        {
            return Ok(None);
        }
        let original = self.lookup_name(dir, OsStr::from_bytes(&c.original))?;
        let (Some(ct), Ok(marker)) = (original.disk_name(), std::str::from_utf8(&c.marker)) else {
            return Ok(None);
        };
        let b = self.backing_name_of(dir, ct)?.with_marker(marker);
        Ok(exists(&b)?.then_some(b))
    }

    /// The ciphertext under which plaintext `name` is created in `dir`
    /// ([`FscryptName::for_create`]).
    ///
    /// # Errors
    /// ENOKEY without the key, ENAMETOOLONG, EINVAL for an invalid name (all
    /// [`Error::Format`]).
    pub(super) fn create_name(&self, dir: &Inode, name: &OsStr) -> Result<FnameBuf> {
        let crypt = self.dir_crypt_opt(dir)?;
        Ok(FscryptName::for_create(crypt.as_deref(), name.as_bytes())?)
    }

    /// The ciphertext and backing name of a backing entry; `None` for
    /// internal names and for damaged ones (logged by backing name). A
    /// sync tool's conflict copy has its original's ciphertext (a long
    /// name's from the original's side file, which the two share).
    ///
    /// Format 3: the tag is split off and, with the key, checked under the
    /// directory's nonce (on the name without a conflict marker): an entry
    /// whose tag does not verify is damaged ([`Corruption::BadNameTag`]).
    /// Without the key it cannot be checked.
    pub(super) fn entry_name(
        &self,
        dir: &Inode,
        ename: &[u8],
    ) -> Result<Option<(Vec<u8>, BackingName)>> {
        let damaged = |c: Corruption| {
            let what = String::from_utf8_lossy(ename).into_owned();
            let _ = self.note::<()>(dir, Some(&what), Err(Error::Corrupt(c)));
            Ok(None)
        };
        let (written, marker) = match layout::classify_entry(ename) {
            (k, Some(c)) => match String::from_utf8(c.marker) {
                Ok(m) => (k, Some((c.original, m))),
                Err(_) => return damaged(Corruption::BadName),
            },
            (k, None) => (k, None),
        };
        let v3 = match self.format {
            Format::V3 => {
                let keys = match self.keys.unlocked() {
                    true => Some(self.keys.integrity()?),
                    false => None,
                };
                Some((keys, self.dir_context(dir)?.nonce))
            }
            _ => None,
        };
        let long = written == EntryName::Long;
        let ct = match written {
            EntryName::Short(stored) => match &v3 {
                Some((keys, parent)) => match tagged::open_inline(*keys, parent, &stored) {
                    Ok(ct) => ct,
                    Err(c) => return damaged(c),
                },
                None => stored,
            },
            EntryName::Internal => return Ok(None),
            EntryName::Invalid | EntryName::Conflict(_) => return damaged(Corruption::BadName),
            EntryName::Long => {
                let entry = marker.as_ref().map_or(ename, |(o, _)| o.as_slice());
                let entry = String::from_utf8_lossy(entry).into_owned();
                let side = format!("{entry}{}", layout::LONG_NAME_SUFFIX);
                let r = (|| {
                    let fd = self.dir_fd(dir)?;
                    let f = open_entry(fd, side.as_str(), OFlags::RDONLY, Mode::empty())
                        .map_err(|_| Error::Corrupt(Corruption::BadLongName))?;
                    let content = read_side_file(&File::from(f))?;
                    match &v3 {
                        Some((keys, parent)) => {
                            Ok(tagged::open_side_file(*keys, parent, &entry, &content)?)
                        }
                        None => {
                            layout::check_long_ciphertext(&entry, &content)?;
                            Ok(content)
                        }
                    }
                })();
                match self.note(dir, Some(&side), r) {
                    Ok(ct) => ct,
                    Err(_) => return Ok(None),
                }
            }
        };
        let b = match (&v3, &marker) {
            // Format 3: the name the vault wrote is the entry name without
            // the marker (canonical base64url of `ct ‖ tag`, or the long
            // name its side file hashes to): checked above.
            (Some(_), _) => {
                let original = marker.as_ref().map_or(ename, |(o, _)| o.as_slice());
                let b = BackingName {
                    name: String::from_utf8_lossy(original).into_owned(),
                    long,
                    marker: None,
                };
                match &marker {
                    Some((_, m)) => b.with_marker(m),
                    None => b,
                }
            }
            (None, Some((_, m))) => BackingName::conflict_copy(&ct, m),
            (None, None) => BackingName::from_ciphertext(&ct),
        };
        // The copy's name rebuilt from its parts is the entry's, or the
        // entry is not what it seemed.
        if b.name.as_bytes() != ename {
            return damaged(Corruption::BadName);
        }
        Ok(Some((ct, b)))
    }

    /// Writes the long-name side file of `bname` (content `ct`) atomically:
    /// kept when it already holds `ct` (an entry of that name exists), else
    /// written under a temporary name and renamed into place, so a crash
    /// never leaves a truncated side file.
    pub(super) fn write_side_file(
        &self,
        dir: &Inode,
        bname: &BackingName,
        content: &[u8],
    ) -> Result<()> {
        let fd = self.dir_fd(dir)?;
        let side = bname.side_file();
        // An existing side file (an entry of that name exists) is only read;
        // a new one is written to a fresh temporary file and renamed over
        // the name, so nothing planted there (a symlink, a hard link to
        // another file) is ever written through, and a crash never leaves a
        // truncated side file.
        if let Ok(f) = open_entry(fd, side.as_str(), OFlags::RDONLY, Mode::empty())
            && let Ok(b) = read_side_file(&File::from(f))
            && b == content
        {
            return Ok(());
        }
        let tmp = super::recover::tmp_name()?;
        let r = (|| -> Result<()> {
            let f = open_entry(
                fd,
                tmp.as_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
                Mode::from_raw_mode(0o600),
            )?;
            File::from(f).write_all_at(content, 0)?;
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
        let ct = self.create_name(dir, name)?;
        self.backing_name_for_create(dir, &ct)
    }

    /// The backing name of ciphertext `ct` (from [`EncryptedFs::create_name`])
    /// in `dir` ([`EncryptedFs::backing_name_of`]), writing the long-name
    /// side file first when needed (format 3: holding `ct ‖ tag`).
    pub(super) fn backing_name_for_create(&self, dir: &Inode, ct: &[u8]) -> Result<BackingName> {
        let bn = self.backing_name_of(dir, ct)?;
        if bn.long {
            let content = self.side_file_bytes(dir, ct)?;
            self.write_side_file(dir, &bn, &content)?;
        }
        Ok(bn)
    }

    /// Removes the long-name side file of an entry that is gone (unlinked,
    /// renamed away, or never made), unless the original entry or a sync
    /// tool's conflict copy of it is still there: they share it.
    pub(super) fn remove_side_file(&self, dir: &Inode, bname: &BackingName) {
        if !bname.long {
            return;
        }
        let Ok(fd) = self.dir_fd(dir) else {
            return;
        };
        let original = bname.original();
        let shared = match leftovers::dir_entries(fd) {
            Ok(entries) => {
                let names: HashSet<&[u8]> = entries.iter().map(|(n, _)| n.as_slice()).collect();
                leftovers::side_file_in_use(original.as_bytes(), &names)
            }
            // Unsure: an orphan side file is harmless (fsck removes it).
            Err(_) => true,
        };
        if !shared {
            let _ = rustix::fs::unlinkat(fd, bname.side_file().as_str(), AtFlags::empty());
        }
    }
}

/// Reads a long-name side file: at most 300 bytes (more than any valid
/// one holds: 255 bytes of ciphertext, and 16 of tag in format 3), so an
/// oversized one is seen as such by the checks.
fn read_side_file(f: &File) -> Result<Vec<u8>> {
    let mut buf = [0u8; 300];
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], n as u64)? {
            0 => break,
            k => n += k,
        }
    }
    Ok(buf[..n].to_vec())
}
