//! Format 3 regular files in the engine: the record (authenticated size,
//! generation, bindings), the tag slots beside every data unit, and the
//! checks made when a file is opened (`docs/vault-format.md` §4b; bytes in
//! `fscrypt_vault::integrity`).
//!
//! An open file's format 3 state is a [`TaggedFile`] in its
//! [`FileState`](crate::inodes::FileState), read from the very object
//! opened and kept while handles are open, so the record is written only
//! by the mount that holds the file's lock. Every function here runs with
//! that lock held.

use std::fs::File;
use std::os::fd::BorrowedFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};

use fscrypt::NONCE_SIZE;
use fscrypt_vault::integrity::IntegrityKeys;
use fscrypt_vault::integrity::MacKind;
use fscrypt_vault::integrity::generations::{self, Seen};
use fscrypt_vault::integrity::record::{
    BINDING_SIZE, FLAG_MANY_LINKS, FLAG_WRITING, FileRecord, MAX_BINDINGS, RECORD_A, RECORD_B,
    RECORD_SPACE,
};
use fscrypt_vault::integrity::units::{
    self, GROUP_UNITS, SLOT_PAIR_SIZE, SLOT_SIZE, Slot, SlotPair,
};

use crate::error::{Corruption, Error, Result};
use crate::inodes::{FileState, Inode, Kind, Link};
use crate::layout::{BackingName, HEADER_SIZE, HEADER_USED, Header, HeaderKind};

use super::backing::open_entry;
use super::size::SizeStore;
use super::{EncryptedFs, is_zero, pread_full};

/// What the engine keeps of an open format 3 file.
#[derive(Debug)]
pub(crate) struct TaggedFile {
    /// The file's nonce (its context's), inside every tag of it.
    pub(crate) nonce: [u8; NONCE_SIZE],
    /// The current record, as last written or read.
    pub(crate) record: FileRecord,
    /// Where the next record goes ([`RECORD_A`] or [`RECORD_B`]: the one
    /// not holding the current record).
    next_at: u64,
    /// Whether this mount bumped the generation and set the writing flag
    /// (the first change since the file was opened); the last close then
    /// clears the flag.
    session: bool,
    /// Whether a unit's newer slot may not verify its contents (a crash in
    /// a write session, or a failed unit write): writers then check the
    /// current contents before choosing which slot to overwrite.
    suspect: bool,
    /// Whether the file was opened through sync tools' conflict copies
    /// only: its generations are then not remembered (see
    /// [`EncryptedFs::load_tagged`]).
    copy: bool,
    /// Whether `record.size` grew by writes of this session and is not in
    /// the stored record yet: it goes there with the next record write
    /// (at the latest the session's end, or an `fsync`).
    size_pending: bool,
    /// Created by this mount and in its first write session (or before
    /// it): generation 1, not bumped nor remembered.
    fresh: bool,
}

/// A change of a file's bindings ([`EncryptedFs::rebind_entry`]).
#[derive(Debug, Clone, Copy)]
pub(super) enum Rebind {
    /// Add `to`, for a file bound to `from` (before a rename or link).
    Add {
        /// The binding the file must have (its name being renamed or
        /// linked from).
        from: [u8; BINDING_SIZE],
        /// The binding to add.
        to: [u8; BINDING_SIZE],
    },
    /// Drop a binding (after a rename or unlink), unless it is the last.
    Drop([u8; BINDING_SIZE]),
}

/// The bytes read at open: the header and both records.
const HEAD_READ: usize = RECORD_B as usize + RECORD_SPACE;

impl TaggedFile {
    /// The state of a file just created with nonce `nonce` and bound to
    /// one name: generation 1, empty and complete (nothing is written for
    /// a file only created, so its `ctime` stays the one the create
    /// reported). Its first write session keeps generation 1 (every
    /// file's first: nothing to remember) and only sets the writing flag.
    pub(crate) fn created(nonce: [u8; NONCE_SIZE], binding: [u8; BINDING_SIZE]) -> TaggedFile {
        TaggedFile {
            nonce,
            record: FileRecord::new(binding),
            next_at: RECORD_B,
            session: false,
            suspect: false,
            copy: false,
            size_pending: false,
            fresh: true,
        }
    }

    /// The generation-store slot of this file under the name of binding
    /// `binding` ([`generations::slot`]; the nonce alone once the record
    /// keeps no bindings).
    fn slot(&self, binding: &[u8; BINDING_SIZE]) -> [u8; NONCE_SIZE] {
        if self.record.flags & FLAG_MANY_LINKS != 0 {
            return self.nonce;
        }
        generations::slot(&self.nonce, binding)
    }
}

impl EncryptedFs {
    fn ikeys(&self) -> Result<&IntegrityKeys> {
        self.keys.integrity()
    }

    /// The binding of a file to the link `l` (its parent's nonce and the
    /// backing name as the vault wrote it).
    pub(super) fn binding_of(&self, l: &Link) -> Result<[u8; BINDING_SIZE]> {
        let parent = self.dir_context(&l.parent)?;
        self.binding(&parent.nonce, &l.name.original())
    }

    /// Format 3: the binding of a file to the backing entry `name` in the
    /// directory `dir`; `None` in other formats.
    pub(super) fn name_binding(
        &self,
        dir: &Inode,
        name: &BackingName,
    ) -> Result<Option<[u8; BINDING_SIZE]>> {
        if self.sizes() != SizeStore::Tagged {
            return Ok(None);
        }
        let d = self.dir_context(dir)?;
        self.binding(&d.nonce, &name.original()).map(Some)
    }

    /// The binding of a file to the backing name `name` in the directory
    /// with nonce `parent`.
    pub(super) fn binding(&self, parent: &[u8; NONCE_SIZE], name: &str) -> Result<[u8; 16]> {
        Ok(self.ikeys()?.binding(parent, name.as_bytes()))
    }

    /// The header region of a new format 3 file: the header with `h`'s
    /// context and record A of `t`.
    pub(super) fn created_region(
        &self,
        h: &Header,
        t: &TaggedFile,
    ) -> Result<[u8; HEADER_SIZE as usize]> {
        let mut region = [0u8; HEADER_SIZE as usize];
        region[..HEADER_USED].copy_from_slice(&h.to_bytes());
        let rec = self.encode_record(t)?;
        region[RECORD_A as usize..RECORD_A as usize + rec.len()].copy_from_slice(&rec);
        Ok(region)
    }

    fn encode_record(&self, t: &TaggedFile) -> Result<Vec<u8>> {
        t.record
            .encode(self.ikeys()?, &t.nonce)
            .map_err(|_| Error::Sys(rustix::io::Errno::MLINK))
    }

    /// Reads `inode`'s object `f` (just opened): its
    /// header and current record, checked against what the mount knows
    /// (its names, the generation this machine saw, the length hint).
    /// Returns the header (its size the authenticated one) and the state.
    ///
    /// # Errors
    /// `EIO` (logged with the backing path) for a bad header or record, an
    /// unbound name, a rollback or a length that is not the hint; backing
    /// errors.
    pub(super) fn load_tagged(&self, inode: &Inode, f: &File) -> Result<(Header, TaggedFile)> {
        let r = self.load_tagged_inner(inode, f);
        self.note(inode, None, r)
    }

    fn load_tagged_inner(&self, inode: &Inode, f: &File) -> Result<(Header, TaggedFile)> {
        let (h, mut t) = self.load_record(f)?;
        // Bound to every name the mount found it under that still names
        // it (a known link renamed away behind the mount, by another mount
        // of a shared vault or by an attacker, vouches for nothing and is
        // not checked; the name the object now has is).
        let st = rustix::fs::fstat(f)?;
        let mut i = 0;
        t.copy = inode.link_count() > 0;
        while let Some(l) = inode.link_at(i) {
            i += 1;
            if self.link_names(&l, &st).is_none() {
                continue;
            }
            let b = self.binding_of(&l)?;
            if !t.record.is_bound_to(&b) {
                return Err(Error::Corrupt(Corruption::Unbound));
            }
            // A sync tool's conflict copy is another version of its
            // original by nature (same nonce and binding, any generation):
            // shown under its marked name, it is exempt from the rollback
            // check, and its changes are not remembered for the original.
            if l.name.marker.is_some() {
                continue;
            }
            t.copy = false;
            if let Seen::RolledBack { seen } = self.seen(&t, &b) {
                return Err(Error::Corrupt(Corruption::RolledBack {
                    generation: t.record.generation,
                    seen,
                }));
            }
        }
        let len = st.st_size as u64;
        let hint = units::len_for_size(t.record.size, self.du).ok_or(Error::FileTooBig)?;
        if len < hint || (len > hint && !t.suspect) {
            return Err(Error::Corrupt(Corruption::BadHint));
        }
        Ok((h, t))
    }

    /// Reads the header and current record of the format 3 file `f`,
    /// without checking them against names, generations or the length.
    fn load_record(&self, f: &File) -> Result<(Header, TaggedFile)> {
        let keys = self.ikeys()?;
        let mut b = vec![0u8; HEAD_READ];
        pread_full(f, &mut b, 0)?;
        let mut h = Header::parse_as(&b[..HEADER_USED], HeaderKind::File, self.format)?;
        self.keys.check_context(&h.context)?;
        let nonce = h.context.nonce;
        let (record, next_at) = FileRecord::current(
            &b[RECORD_A as usize..RECORD_A as usize + RECORD_SPACE],
            &b[RECORD_B as usize..],
            keys,
            &nonce,
        )
        .map_err(|e| Error::Corrupt(Corruption::BadRecord(e)))?;
        let leftover = record.session_open();
        let t = TaggedFile {
            nonce,
            record,
            next_at,
            session: false,
            suspect: leftover,
            copy: false,
            size_pending: false,
            fresh: false,
        };
        h.size = t.record.size;
        Ok((h, t))
    }

    /// Writes `t`'s record (sequence + 1) over the older of A and B, with
    /// its size (one grown by this session's writes,
    /// [`TaggedFile::size_pending`], or by a truncate), and makes the
    /// backing length the hint of that size: a shorter file is grown
    /// before the record, a longer one (a stale trailer past a unit the
    /// session's writes filled, units cut by a truncate) is cut after it.
    /// A crash between leaves a longer file under `FLAG_WRITING` (cut by
    /// the recovery pass), never a record whose hint the length does not
    /// match without the flag, which reads as tampering.
    ///
    /// # Errors
    /// `EMLINK` past [`MAX_BINDINGS`], backing errors.
    pub(super) fn write_record(&self, f: &File, t: &mut TaggedFile) -> Result<()> {
        let hint = units::len_for_size(t.record.size, self.du).ok_or(Error::FileTooBig)?;
        let len = f.metadata()?.len();
        if len < hint {
            f.set_len(hint)?;
        }
        t.record.seq += 1;
        let b = match self.encode_record(t) {
            Ok(b) => b,
            Err(e) => {
                t.record.seq -= 1;
                return Err(e);
            }
        };
        f.write_all_at(&b, t.next_at)?;
        t.next_at = if t.next_at == RECORD_A {
            RECORD_B
        } else {
            RECORD_A
        };
        t.size_pending = false;
        if len > hint {
            f.set_len(hint)?;
        }
        Ok(())
    }

    /// Makes a size grown by this session's writes stored (an `fsync`:
    /// synced data must read back after a crash).
    ///
    /// # Errors
    /// Backing errors.
    pub(super) fn store_pending_size(&self, f: &File, t: &mut TaggedFile) -> Result<()> {
        if t.size_pending {
            self.write_record(f, t)?;
        }
        Ok(())
    }

    /// A write of this session grew the file to `size` bytes: kept in
    /// memory until the next record write ([`Self::write_record`]).
    pub(super) fn grow_pending(t: &mut TaggedFile, size: u64) {
        t.record.size = size;
        t.size_pending = true;
    }

    /// This machine's memory of the generation of `t` under its name of
    /// binding `binding`: `Seen::RolledBack` when the record is older.
    fn seen(&self, t: &TaggedFile, binding: &[u8; BINDING_SIZE]) -> Seen {
        match &self.generations {
            Some(g) => g.check(&t.slot(binding), t.record.generation),
            None => Seen::Fine,
        }
    }

    /// Remembers `t`'s generation under the names of `bindings`.
    fn record_seen<'a>(
        &self,
        t: &TaggedFile,
        bindings: impl IntoIterator<Item = &'a [u8; BINDING_SIZE]>,
    ) {
        let Some(g) = &self.generations else { return };
        for b in bindings {
            if let Err(e) = g.saw(&t.slot(b), t.record.generation) {
                log::warn!(
                    "fscrypt-fuse: cannot record a file generation ({e}); rollback of it will go unnoticed"
                );
                return;
            }
        }
    }

    /// Before the first change of an open session: the generation + 1 and
    /// the writing flag, in the record, then in this machine's memory. A
    /// file in its first session since this mount created it keeps
    /// generation 1, and while its stored record is still the creation
    /// record (which counts as an open session,
    /// [`FileRecord::session_open`]) nothing is written: the flag is set
    /// in memory only, for any record written before the session ends.
    ///
    /// # Errors
    /// Backing errors.
    pub(super) fn begin_change(&self, f: &File, t: &mut TaggedFile) -> Result<()> {
        if t.session {
            return Ok(());
        }
        if !t.fresh {
            t.record.generation += 1;
        }
        let stored_open = t.fresh && t.record.session_open();
        t.record.flags |= FLAG_WRITING;
        if !stored_open {
            self.write_record(f, t)?;
        }
        t.session = true;
        if t.fresh {
            return Ok(());
        }
        self.trim_leftovers(f, t)?;
        if !t.copy {
            let bindings = t.record.bindings.clone();
            let none = bindings.is_empty().then_some(&[0u8; BINDING_SIZE]);
            self.record_seen(t, bindings.iter().chain(none));
        }
        Ok(())
    }

    /// At a close (FLUSH, the last release): the writing flag cleared, if
    /// this mount set it. A later change starts a new session, with a new
    /// generation.
    ///
    /// # Errors
    /// Backing errors.
    pub(super) fn end_session(&self, f: &File, t: &mut TaggedFile) -> Result<()> {
        self.commit_session(f, t)?;
        t.fresh = false;
        Ok(())
    }

    /// After a change made while no open handle of the file gets FLUSH
    /// (`FileState::flushers` is 0: handles of a file this mount created,
    /// read-only ones, none at all): no close will end the session before
    /// it returns, so the change ends it (the size and the cleared flag in
    /// one record). A created file keeps its first session's generation
    /// across such changes.
    ///
    /// # Errors
    /// Backing errors.
    pub(super) fn end_unflushed(&self, f: &File, st: &mut FileState) -> Result<()> {
        match st.tagged.as_deref_mut() {
            Some(t) if st.flushers == 0 => self.commit_session(f, t),
            _ => Ok(()),
        }
    }

    /// The session's record: its size, the writing flag cleared.
    fn commit_session(&self, f: &File, t: &mut TaggedFile) -> Result<()> {
        if !t.session {
            return Ok(());
        }
        t.record.flags &= !FLAG_WRITING;
        self.write_record(f, t)?;
        t.session = false;
        Ok(())
    }

    /// Adds (`add`) or removes a binding of the file `t` and writes the
    /// record. Past [`MAX_BINDINGS`] names the record gets
    /// [`FLAG_MANY_LINKS`] instead.
    ///
    /// # Errors
    /// Backing errors.
    fn rebind(
        &self,
        f: &File,
        t: &mut TaggedFile,
        binding: [u8; BINDING_SIZE],
        add: bool,
    ) -> Result<()> {
        let had = t.record.is_bound_to(&binding);
        if add == had {
            if let (true, Seen::RolledBack { seen }) = (add, self.seen(t, &binding)) {
                // A conflict copy renamed over its original (same binding):
                // it becomes the newest version there.
                t.record.generation = seen + 1;
                self.write_record(f, t)?;
                self.record_seen(t, [&binding]);
            }
            return Ok(());
        }
        if add {
            if t.record.bindings.len() >= MAX_BINDINGS {
                // No room: the file stops being bound to its names.
                t.record.flags |= FLAG_MANY_LINKS;
            } else {
                t.record.bindings.push(binding);
            }
        } else {
            if t.record.bindings.len() <= 1 {
                return Ok(());
            }
            t.record.bindings.retain(|b| b != &binding);
        }
        self.write_record(f, t)?;
        if add {
            // Its new name remembers the version it arrived with.
            self.record_seen(t, [&binding]);
        }
        Ok(())
    }

    /// Format 3: changes the bindings of the regular file stored as `name`
    /// in the backing directory `dir` (backing inode `ino`; `parent` is
    /// that directory's inode, for the log). Through the open file's state
    /// when the mount has one, so the record has one writer.
    ///
    /// # Errors
    /// `EIO` ([`Corruption::Unbound`]) when adding a name to a file not
    /// bound to the name it is renamed or linked from (a moved or swapped
    /// backing file is not laundered by a rename); `EMLINK`, `ESTALE` when
    /// the entry is no longer that object, backing errors.
    pub(super) fn rebind_entry(
        &self,
        parent: &Inode,
        dir: BorrowedFd<'_>,
        name: &str,
        ino: u64,
        change: Rebind,
    ) -> Result<()> {
        let open_rw = || -> Result<File> {
            let fd = open_entry(dir, name, OFlags::RDWR, Mode::empty())?;
            let f = File::from(fd);
            if f.metadata()?.ino() != ino {
                return Err(Error::Stale);
            }
            Ok(f)
        };
        let known = self
            .inodes
            .with_backing(ino)
            .into_iter()
            .find(|i| i.kind == Kind::File);
        let r = match &known {
            Some(inode) => {
                let mut st = inode.file.write()?;
                let f = match (&st.fd, st.fd_writable) {
                    (Some(f), true) => f.clone(),
                    _ => Arc::new(open_rw()?),
                };
                match st.tagged.as_deref_mut() {
                    Some(t) => self.apply_rebind(&f, t, change),
                    None => {
                        let (_, mut t) = self.load_record(&f)?;
                        self.apply_rebind(&f, &mut t, change)
                    }
                }
            }
            None => {
                let f = open_rw()?;
                let (_, mut t) = self.load_record(&f)?;
                self.apply_rebind(&f, &mut t, change)
            }
        };
        if let Err(e) = &r
            && e.is_corruption()
        {
            log::error!(
                "fscrypt-fuse: corrupt backing object {}: {e}",
                self.backing_path(parent).join(name).display()
            );
        }
        r
    }

    fn apply_rebind(&self, f: &File, t: &mut TaggedFile, change: Rebind) -> Result<()> {
        match change {
            Rebind::Add { from, to } => {
                if !t.record.is_bound_to(&from) {
                    return Err(Error::Corrupt(Corruption::Unbound));
                }
                self.rebind(f, t, to, true)
            }
            Rebind::Drop(b) => self.rebind(f, t, b, false),
        }
    }

    /// Checks the units `first..` of one group whose stored bytes are in
    /// `buf` (whole units), against their slots: a unit verifying under a
    /// slot keeps its ciphertext; a never-written unit (no slot, all-zero
    /// bytes) and a hole slot become zeros. Returns the bit mask (bit `k`
    /// for unit `first + k`) of units holding ciphertext to decrypt.
    ///
    /// # Errors
    /// `EIO` ([`Corruption::BadTag`]) for the first unit that fails.
    pub(super) fn verify_units(
        &self,
        f: &File,
        t: &TaggedFile,
        first: u64,
        buf: &mut [u8],
    ) -> Result<u128> {
        let du = self.du as usize;
        let n = buf.len() / du;
        debug_assert!(first % GROUP_UNITS + n as u64 <= GROUP_UNITS);
        let keys = self.ikeys()?;
        let pairs = self.read_pairs(f, first, n)?;
        let mut stored = 0u128;
        for (k, unit) in buf.chunks_exact_mut(du).enumerate() {
            let idx = first + k as u64;
            let pair = pair_at(&pairs, k);
            if pair.is_empty() {
                if !is_zero(unit) {
                    return Err(Error::Corrupt(Corruption::BadTag(idx)));
                }
                continue;
            }
            match verifying_slot(keys, &t.nonce, idx, &pair, unit) {
                Some(s) if s.is_hole() => unit.fill(0),
                Some(_) => stored |= 1 << k,
                None => return Err(Error::Corrupt(Corruption::BadTag(idx))),
            }
        }
        Ok(stored)
    }

    /// Stores the units `first..` of one group, whose new ciphertext is
    /// `ct` (whole units), with their tags written first: each tag goes
    /// into the slot not holding the current contents' tag, with the next
    /// sequence number. A group none of whose units is stored yet (a new
    /// file, an append reaching a new group) gets its whole tag block and
    /// the units in one `pwritev` (tag block first: a kill leaves a prefix
    /// of it); otherwise the slot pairs, then the units. A failed unit
    /// write makes the file suspect.
    ///
    /// # Errors
    /// Backing errors.
    pub(super) fn write_tagged_units(
        &self,
        f: &File,
        t: &mut TaggedFile,
        first: u64,
        ct: &[u8],
    ) -> Result<()> {
        let du = self.du;
        let stored = t.record.size.div_ceil(du);
        let unit_at = units::unit_offset(first, du).ok_or(Error::FileTooBig)?;
        if first.is_multiple_of(GROUP_UNITS) && stored <= first && !t.suspect {
            let mut block = vec![0u8; units::TAG_BLOCK_SIZE as usize];
            let pairs = self.tag_pairs(f, t, first, ct)?;
            block[..pairs.len()].copy_from_slice(&pairs);
            let at = units::tag_block_offset(first / GROUP_UNITS, du).ok_or(Error::FileTooBig)?;
            let done = rustix::io::pwritev(
                f,
                &[std::io::IoSlice::new(&block), std::io::IoSlice::new(ct)],
                at,
            )
            .map_err(Error::from);
            let rest = match done {
                Ok(n) if n >= block.len() => {
                    f.write_all_at(&ct[n - block.len()..], unit_at + (n - block.len()) as u64)
                }
                Ok(n) => f
                    .write_all_at(&block[n..], at + n as u64)
                    .and_then(|()| f.write_all_at(ct, unit_at)),
                Err(e) => {
                    Self::suspect(t);
                    return Err(e);
                }
            };
            if let Err(e) = rest {
                Self::suspect(t);
                return Err(e.into());
            }
            super::recover::crash_point("write:after-tags");
            return Ok(());
        }
        let pairs = self.tag_pairs(f, t, first, ct)?;
        let off = units::slot_pair_offset(first, du).ok_or(Error::FileTooBig)?;
        f.write_all_at(&pairs, off)?;
        super::recover::crash_point("write:after-tags");
        if let Err(e) = f.write_all_at(ct, unit_at) {
            Self::suspect(t);
            return Err(e.into());
        }
        Ok(())
    }

    /// The new slot pairs of units `first..` of one group for their new
    /// ciphertext `ct` (see [`Self::write_tagged_units`]).
    ///
    /// # Errors
    /// Backing errors reading the current pairs (and, for a suspect file,
    /// the current units).
    fn tag_pairs(&self, f: &File, t: &TaggedFile, first: u64, ct: &[u8]) -> Result<Vec<u8>> {
        let du = self.du as usize;
        let n = ct.len() / du;
        debug_assert!(first % GROUP_UNITS + n as u64 <= GROUP_UNITS);
        let keys = self.ikeys()?;
        // Units past the size were never written (a truncate clears their
        // slots, a crash's leftovers make the file suspect): their slot
        // pairs are empty, nothing to read.
        let fresh = !t.suspect && first >= t.record.size.div_ceil(self.du);
        let mut pairs = if fresh {
            vec![0u8; n * SLOT_PAIR_SIZE]
        } else {
            self.read_pairs(f, first, n)?
        };
        let current = if t.suspect {
            let mut cur = vec![0u8; ct.len()];
            pread_full(f, &mut cur, self.sizes().unit_at(first, self.du))?;
            Some(cur)
        } else {
            None
        };
        for (k, unit) in ct.chunks_exact(du).enumerate() {
            let idx = first + k as u64;
            let pair = pair_at(&pairs, k);
            let now = match &current {
                Some(cur) => {
                    let c = &cur[k * du..(k + 1) * du];
                    pair.by_age()
                        .find(|(_, s)| slot_verifies(keys, &t.nonce, idx, s, c))
                        .map(|(i, _)| i)
                }
                None => pair.newer(),
            };
            let (slot, seq) = pair.next_write(now);
            let state = Slot::state_for(seq, false);
            let mac = keys.tag(MacKind::DataUnit, state, idx, &t.nonce, unit);
            let s = Slot::new(seq, false, &mac).to_bytes();
            let at = k * SLOT_PAIR_SIZE + slot * SLOT_SIZE;
            pairs[at..at + SLOT_SIZE].copy_from_slice(&s);
        }
        Ok(pairs)
    }

    /// Marks `t` as having slots that may not follow the sequence rule
    /// (after a unit write failed between its tag and its bytes).
    pub(super) fn suspect(t: &mut TaggedFile) {
        t.suspect = true;
    }

    /// Cuts off what a crash in a write session left past the record's
    /// size (units written before the size that would cover them, so the
    /// length passes the size's hint) and, for such a file or one whose
    /// session did not end, clears the slots past the size: nothing of
    /// them may come back when the file grows. Returns whether anything
    /// was cut or cleared.
    ///
    /// # Errors
    /// Backing errors.
    fn trim_leftovers(&self, f: &File, t: &TaggedFile) -> Result<bool> {
        let hint = units::len_for_size(t.record.size, self.du).ok_or(Error::FileTooBig)?;
        let cut = f.metadata()?.len() > hint;
        if cut {
            f.set_len(hint)?;
        } else if !t.suspect {
            return Ok(false);
        }
        // Also when nothing was cut: a truncate down interrupted after its
        // `ftruncate` left the cut units' slots behind.
        let cleared = self.clear_slots_from(f, t.record.size.div_ceil(self.du))?;
        Ok(cut || cleared)
    }

    /// The crash recovery pass on the regular file `name` of the backing
    /// directory `dir`, format 3 with the key: when its record says a
    /// write session did not end, [`Self::trim_leftovers`], so that its
    /// length is the hint of its size again (a `stat` of the closed file
    /// agrees with a read). The writing flag stays until the next session
    /// ends (writers keep checking the units' slots until then). Returns
    /// whether anything was cut or cleared.
    ///
    /// # Errors
    /// Open and backing errors; `EIO` for a bad header or record.
    pub(super) fn recover_tagged_file(&self, dir: BorrowedFd<'_>, name: &[u8]) -> Result<bool> {
        if self.sizes() != SizeStore::Tagged || self.ikeys().is_err() {
            return Ok(false);
        }
        let name = std::str::from_utf8(name).map_err(|_| Error::InvalidName)?;
        let f = File::from(open_entry(dir, name, OFlags::RDWR, Mode::empty())?);
        let (_, t) = self.load_record(&f)?;
        if !t.record.session_open() {
            return Ok(false);
        }
        self.trim_leftovers(&f, &t)
    }

    /// Clears the slot pairs of units `from..` up to the end of their
    /// group (the units past a new, smaller size; later groups' tag blocks
    /// lie past the backing length). Returns whether any was set.
    ///
    /// # Errors
    /// Backing errors.
    pub(super) fn clear_slots_from(&self, f: &File, from: u64) -> Result<bool> {
        let n = (GROUP_UNITS - from % GROUP_UNITS) as usize;
        let off = units::slot_pair_offset(from, self.du).ok_or(Error::FileTooBig)?;
        let len = f.metadata()?.len();
        if off >= len {
            return Ok(false);
        }
        let mut b = vec![0u8; n * SLOT_PAIR_SIZE];
        let end = (off + b.len() as u64).min(len);
        let b = &mut b[..(end - off) as usize];
        let mut cur = vec![0u8; b.len()];
        pread_full(f, &mut cur, off)?;
        if is_zero_or_empty(&cur) {
            return Ok(false);
        }
        b.fill(0);
        f.write_all_at(b, off)?;
        Ok(true)
    }

    fn read_pairs(&self, f: &File, first: u64, n: usize) -> Result<Vec<u8>> {
        let mut pairs = vec![0u8; n * SLOT_PAIR_SIZE];
        let off = units::slot_pair_offset(first, self.du).ok_or(Error::FileTooBig)?;
        pread_full(f, &mut pairs, off)?;
        Ok(pairs)
    }
}

fn is_zero_or_empty(b: &[u8]) -> bool {
    b.iter().all(|&x| x == 0)
}

fn pair_at(pairs: &[u8], k: usize) -> SlotPair {
    let mut p = [0u8; SLOT_PAIR_SIZE];
    p.copy_from_slice(&pairs[k * SLOT_PAIR_SIZE..(k + 1) * SLOT_PAIR_SIZE]);
    SlotPair::parse(&p)
}

fn slot_verifies(
    keys: &IntegrityKeys,
    nonce: &[u8; NONCE_SIZE],
    idx: u64,
    s: &Slot,
    unit: &[u8],
) -> bool {
    let payload: &[u8] = if s.is_hole() { &[] } else { unit };
    keys.verify(MacKind::DataUnit, s.state, idx, nonce, payload, &s.tag)
}

fn verifying_slot(
    keys: &IntegrityKeys,
    nonce: &[u8; NONCE_SIZE],
    idx: u64,
    pair: &SlotPair,
    unit: &[u8],
) -> Option<Slot> {
    pair.by_age()
        .map(|(_, s)| s)
        .find(|s| slot_verifies(keys, nonce, idx, s, unit))
}
