//! File contents: open, read, write (read-modify-write of data units),
//! truncate, fallocate, fsync, release.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use crate::crypt::{NodeCrypt, NodeKind};
use crate::error::{Error, Result, WrongType};
use crate::handles::{FileHandle, Handle};
use crate::inodes::{FileState, Inode, InodeNo, Kind};
use crate::layout;

use super::offsets::{Units, bytes_before, eof_unit, unit_of, unit_start};
use super::recover::crash_point;
use super::size::SizeStore;
use super::tags::TaggedFile;
use super::{EncryptedFs, IO_BUF, is_zero, pread_full};

/// access(2)'s mode for the open(2) access mode `acc` (`O_RDONLY`,
/// `O_WRONLY`, `O_RDWR`).
fn open_access(acc: i32) -> u32 {
    let (r, w) = (libc::R_OK as u32, libc::W_OK as u32);
    match acc {
        libc::O_WRONLY => w,
        libc::O_RDWR => r | w,
        _ => r,
    }
}

impl EncryptedFs {
    /// Opens a regular file (`flags` as in open(2)).
    ///
    /// # Errors
    /// `ENOKEY` on a locked mount (as the kernel), `EROFS`, `EIO` if corrupt.
    pub fn open(&self, ino: InodeNo, flags: i32) -> Result<FileHandle> {
        let inode = self.inode(ino)?;
        match inode.kind {
            Kind::File => {}
            Kind::Dir => return Err(Error::WrongType(WrongType::IsDir)),
            _ => return Err(Error::InvalidArgument),
        }
        self.need_key()?;
        let acc = flags & libc::O_ACCMODE;
        let write = acc == libc::O_WRONLY || acc == libc::O_RDWR;
        if write {
            self.writable()?;
        }
        // Before the file's descriptor is opened or shared: a cached one
        // (opened for an earlier handle) would let any open through.
        self.check_access(&inode, open_access(acc))?;
        {
            let mut st = inode.file.write()?;
            // First the key where the lookup read the context (EIO for a
            // damaged header, before any repair).
            self.sizes().before_open(self, &inode, &mut st)?;
            if st.fd.is_none() || (write && !st.fd_writable) {
                // Reopened through a link and proven to be this inode's
                // object (never whatever sits under the name now).
                let want_rw = !self.opts.read_only;
                let (f, rw) = match self.find(&inode, Some(want_rw)) {
                    Ok(f) => (f, want_rw),
                    Err(Error::Sys(rustix::io::Errno::ACCESS | rustix::io::Errno::ROFS))
                        if !write && want_rw =>
                    {
                        (self.find(&inode, Some(false))?, false)
                    }
                    Err(e) => return Err(e),
                };
                let f = f.file.ok_or(Error::Stale)?;
                // The key and size from this very object (format 2), or the
                // repair after a crash (format 1).
                self.sizes().opened(self, &inode, &mut st, &f, rw)?;
                st.fd = Some(Arc::new(f));
                st.fd_writable = rw;
            }
            st.opens += 1;
        }
        let flushes = self.flushes(flags, false);
        if flushes {
            inode.file.write()?.flushers += 1;
        }
        Ok(self.handles.insert(Handle::File {
            inode,
            append: flags & libc::O_APPEND != 0,
            write,
            flushes,
        }))
    }

    /// Whether each close of a handle opened with `flags` (`created`: by
    /// CREATE) should send FLUSH; the engine answers the others
    /// `FOPEN_NOFLUSH`. Only format 3 handles opened for writing by OPEN:
    /// their write session, spanning many writes, ends at a close (one
    /// record for the session), and must end before `close(2)` returns
    /// (a later record write would change the `ctime` a `stat` after the
    /// close saw, and another mount of a shared vault must find the file
    /// whole). A created file's handles are mostly written once: each of
    /// their changes ends its own session ([`crate::inodes::FileState::flushers`]), which
    /// saves the FLUSH round trip of every close. Formats 1 and 2 have
    /// nothing to do on close and answer FLUSH with ENOSYS once.
    pub fn flushes(&self, flags: i32, created: bool) -> bool {
        let acc = flags & libc::O_ACCMODE;
        self.sizes() == SizeStore::Tagged
            && !created
            && (acc == libc::O_WRONLY || acc == libc::O_RDWR)
    }

    pub(super) fn file_handle(&self, fh: FileHandle) -> Result<(Arc<Inode>, bool, bool)> {
        match self.handles.get(fh).as_deref() {
            Some(Handle::File {
                inode,
                append,
                write,
                ..
            }) => Ok((inode.clone(), *append, *write)),
            Some(Handle::Dir { .. }) => Err(Error::WrongType(WrongType::IsDir)),
            None => Err(Error::BadHandle),
        }
    }

    /// Reads one data unit `idx` into `dst` (zeros for a hole), masking bytes
    /// at or past `size` (stale tails after a crash never become visible).
    /// Format 3 (`t`): checked against its tag first (EIO when it fails).
    pub(super) fn read_unit(
        &self,
        f: &File,
        crypt: &NodeCrypt,
        t: Option<&TaggedFile>,
        idx: u64,
        dst: &mut [u8],
        size: u64,
    ) -> Result<bool> {
        pread_full(f, dst, self.sizes().unit_at(idx, self.du))?;
        let stored = match t {
            Some(t) => self.verify_units(f, t, idx, dst)? != 0,
            None => !is_zero(dst),
        };
        if !stored {
            return Ok(false);
        }
        crypt.decrypt_data_units(idx, dst)?;
        dst[bytes_before(idx, size, self.du)..].fill(0);
        Ok(true)
    }

    /// Reads `size` bytes at `offset`; the plaintext is left in `buf[range]`.
    ///
    /// # Errors
    /// `EBADF` for a bad handle, backing errors, `EIO` if decryption fails.
    pub fn read(
        &self,
        fh: FileHandle,
        offset: u64,
        size: u32,
        buf: &mut Vec<u8>,
    ) -> Result<std::ops::Range<usize>> {
        let (inode, _, _) = self.file_handle(fh)?;
        let st = inode.file.read()?;
        let f = st.fd.clone().ok_or(Error::BadHandle)?;
        let crypt = st.crypt.clone().ok_or(Error::BadHandle)?;
        if offset >= st.size || size == 0 {
            return Ok(0..0);
        }
        let du = self.du;
        let end = (offset + size as u64).min(st.size);
        let u = Units::of_range(offset, end, du);
        let n = u.len();
        if buf.len() < n {
            buf.resize(n, 0);
        }
        let b = &mut buf[..n];
        let sizes = self.sizes();
        let tagged = st.tagged.as_deref();
        for (a, z) in sizes.runs(u.first, u.last) {
            let span = u.in_buf(a).start..u.in_buf(z - 1).end;
            pread_full(&f, &mut b[span.clone()], sizes.unit_at(a, du))?;
            // Which units hold ciphertext: format 3 says by their tags
            // (EIO when one fails); else all-zero units are holes.
            let stored = match tagged {
                Some(t) => {
                    let r = self.verify_units(&f, t, a, &mut b[span]);
                    Some(self.note(&inode, None, r)?)
                }
                None => None,
            };
            let is_stored = |i: u64, b: &[u8]| match stored {
                Some(m) => m & (1 << (i - a)) != 0,
                None => !is_zero(&b[u.in_buf(i)]),
            };
            // Decrypt runs of stored units.
            let mut i = a;
            while i < z {
                if !is_stored(i, b) {
                    i += 1;
                    continue;
                }
                let mut j = i + 1;
                while j < z && is_stored(j, b) {
                    j += 1;
                }
                let run = u.in_buf(i).start..u.in_buf(j - 1).end;
                let r = crypt.decrypt_data_units(i, &mut b[run]);
                self.note(&inode, None, r.map_err(Error::from))?;
                i = j;
            }
        }
        Ok(u.head..u.head + (end - offset) as usize)
    }

    /// Format 2: zeroes the trailer of a `size`-byte file (the bytes stored
    /// where unit `ceil(size/du)` starts) unless they are zeros already;
    /// called before the size grows over them without that unit being
    /// written whole. A trailer made by `ftruncate` is a hole; one left by a
    /// truncate down (the old unit's first bytes) is punched out, or
    /// overwritten with zeros where the backing filesystem cannot punch.
    pub(super) fn clear_trailer(&self, f: &File, size: u64) -> Result<()> {
        let Some((off, len)) = self.sizes().trailer(size, self.du) else {
            return Ok(());
        };
        let mut b = vec![0u8; len as usize];
        pread_full(f, &mut b, off)?;
        if is_zero(&b) {
            return Ok(());
        }
        let punch = rustix::fs::fallocate(
            f,
            rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE,
            off,
            len,
        );
        if punch.is_err() {
            b.fill(0);
            f.write_all_at(&b, off)?;
        }
        Ok(())
    }

    /// Zeroes the stored tail (past `size`) of the unit holding EOF, if any;
    /// called before the size grows past that unit.
    pub(super) fn zero_eof_tail(
        &self,
        f: &File,
        crypt: &NodeCrypt,
        t: Option<&mut TaggedFile>,
        size: u64,
    ) -> Result<()> {
        let du = self.du;
        let Some((idx, keep)) = eof_unit(size, du) else {
            return Ok(());
        };
        let mut unit = vec![0u8; du as usize];
        pread_full(f, &mut unit, self.sizes().unit_at(idx, du))?;
        let stored = match &t {
            Some(t) => self.verify_units(f, t, idx, &mut unit)? != 0,
            None => !is_zero(&unit),
        };
        if !stored {
            return Ok(());
        }
        crypt.decrypt_data_units(idx, &mut unit)?;
        if is_zero(&unit[keep..]) {
            return Ok(());
        }
        unit[keep..].fill(0);
        crypt.encrypt_data_units(idx, &mut unit)?;
        self.write_units(f, t, idx, &unit)
    }

    /// Stores the ciphertext of units `first..` (whole units, in `ct`):
    /// format 3 writes each group's tags first, then its units (a crash
    /// between leaves the old contents readable under the other slot);
    /// other formats write the units in one call.
    ///
    /// # Errors
    /// Backing errors.
    pub(super) fn write_units(
        &self,
        f: &File,
        mut t: Option<&mut TaggedFile>,
        first: u64,
        ct: &[u8],
    ) -> Result<()> {
        let du = self.du;
        let sizes = self.sizes();
        let last = first + ct.len() as u64 / du;
        for (a, z) in sizes.runs(first, last) {
            let part = &ct[((a - first) * du) as usize..((z - first) * du) as usize];
            if let Some(t) = t.as_deref_mut() {
                self.write_tagged_units(f, t, a, part)?;
            } else {
                f.write_all_at(part, sizes.unit_at(a, du))?;
            }
        }
        Ok(())
    }

    /// Writes `data` at `offset` (at EOF for O_APPEND handles). Partial data
    /// units are read, decrypted, merged and re-encrypted under the file's
    /// exclusive lock, so concurrent writers never lose updates.
    ///
    /// # Errors
    /// `EBADF`, `EROFS`, `EFBIG`, backing errors, `EIO` if decryption fails.
    pub fn write(&self, fh: FileHandle, offset: u64, data: &[u8]) -> Result<u32> {
        let (inode, append, write) = self.file_handle(fh)?;
        if !write {
            return Err(Error::BadHandle);
        }
        self.writable()?;
        if data.is_empty() {
            return Ok(0);
        }
        let mut guard = inode.file.write()?;
        let st = &mut *guard;
        let f = st.fd.clone().ok_or(Error::BadHandle)?;
        let crypt = st.crypt.clone().ok_or(Error::BadHandle)?;
        if let Some(t) = st.tagged.as_deref_mut() {
            self.begin_change(&f, t)?;
        }
        let offset = if append { st.size } else { offset };
        let du = self.du;
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|e| *e <= i64::MAX as u64)
            .ok_or(Error::FileTooBig)?;
        let old = st.size;
        let u = Units::of_range(offset, end, du);
        if end > old {
            self.sizes().check(end, du)?;
        }
        if u.first > unit_of(old, du) {
            self.zero_eof_tail(&f, &crypt, st.tagged.as_deref_mut(), old)?;
        }
        self.sizes().before_write(self, &f, old, end, &u)?;
        IO_BUF.with(|cell| -> Result<()> {
            let mut guard = cell.borrow_mut();
            if guard.len() < u.len() {
                guard.resize(u.len(), 0);
            }
            let buf = &mut guard[..u.len()];
            // The partly written units at either end: their other bytes
            // first (zeros past the old EOF).
            for idx in [u.partial_head(), u.partial_tail()].into_iter().flatten() {
                let unit = &mut buf[u.in_buf(idx)];
                if unit_start(idx, du) < old {
                    let r = self.read_unit(&f, &crypt, st.tagged.as_deref(), idx, unit, old);
                    self.note(&inode, None, r)?;
                } else {
                    unit.fill(0);
                }
            }
            buf[u.head..u.head + data.len()].copy_from_slice(data);
            crypt.encrypt_data_units(u.first, buf)?;
            self.write_units(&f, st.tagged.as_deref_mut(), u.first, buf)
        })?;
        crash_point("write:after-data");
        if end > old {
            st.size = end;
            if let Some(t) = st.tagged.as_deref_mut() {
                // Format 3: the record gets the size with its next write
                // (the session's end at the latest, or an fsync).
                Self::grow_pending(t, end);
            } else if !self.sizes().stored_by_write(old, end, u.last, du)? {
                // The data write itself may already have stored the new
                // size (format 2); then there is nothing left to set.
                self.sizes().store(self, &inode, &f, st)?;
            }
        }
        let ended = self.end_unflushed(&f, st);
        self.note(&inode, None, ended)?;
        Ok(data.len() as u32)
    }

    /// Sets the plaintext size under the file's exclusive lock.
    pub(super) fn truncate(&self, inode: &Arc<Inode>, size: u64) -> Result<()> {
        let mut st = inode.file.write()?;
        self.truncate_locked(inode, &mut st, size)
    }

    /// [`Self::truncate`] with the file's exclusive lock already held
    /// (`st` is the guarded state).
    fn truncate_locked(&self, inode: &Arc<Inode>, st: &mut FileState, size: u64) -> Result<()> {
        self.need_key()?;
        if size > i64::MAX as u64 {
            return Err(Error::FileTooBig);
        }
        self.sizes().truncate(self, inode, st, size)
    }

    /// Format 1 truncate (the file's lock held): the units past the new
    /// size go (down) or the stale ones past the old size do (up), then the
    /// header's size field is rewritten.
    pub(super) fn truncate_header(
        &self,
        inode: &Arc<Inode>,
        st: &mut FileState,
        size: u64,
    ) -> Result<()> {
        let crypt = match &st.crypt {
            Some(c) => c.clone(),
            None => self.file_crypt(inode)?,
        };
        let f: Arc<File> = match (&st.fd, st.fd_writable) {
            (Some(f), true) => f.clone(),
            _ => Arc::new(self.find(inode, Some(true))?.file.ok_or(Error::Stale)?),
        };
        let du = self.du;
        let old = st.size;
        if size < old {
            if let Some((idx, _)) = eof_unit(size, du) {
                let mut unit = vec![0u8; du as usize];
                if self.read_unit(&f, &crypt, None, idx, &mut unit, size)? {
                    crypt.encrypt_data_units(idx, &mut unit)?;
                    f.write_all_at(&unit, layout::unit_offset(idx, du))?;
                }
            }
            let want = layout::backing_len_for(size, du);
            if f.metadata()?.len() > want {
                f.set_len(want)?;
            }
        } else if size > old {
            // Units stored past the old size (an extending write whose size
            // update a crash lost) must not reappear inside the file.
            let want = layout::backing_len_for(old, du);
            if f.metadata()?.len() > want {
                f.set_len(want)?;
            }
            self.zero_eof_tail(&f, &crypt, None, old)?;
        } else {
            return Ok(());
        }
        st.size = size;
        self.sizes().store(self, inode, &f, st)
    }

    /// Format 2 truncate (the file's lock held): the size change is one
    /// `ftruncate` to the new length. Down: `ftruncate`, then the new trailer
    /// (the old unit's first bytes) and the new last unit's bytes past the
    /// size are zeroed (a crash before leaves them masked and re-zeroed
    /// before the size grows over them). Up: the old last unit's stored
    /// tail and the old trailer are zeroed, then `ftruncate`.
    pub(super) fn truncate_length(
        &self,
        inode: &Arc<Inode>,
        st: &mut FileState,
        size: u64,
    ) -> Result<()> {
        let du = self.du;
        self.sizes().check(size, du)?;
        let (f, crypt, old): (Arc<File>, NodeCrypt, u64) = match (&st.fd, st.fd_writable, &st.crypt)
        {
            (Some(f), true, Some(c)) => (f.clone(), c.clone(), st.size),
            _ => {
                let f = self.find(inode, Some(true))?.file.ok_or(Error::Stale)?;
                let (c, old) = self.file_crypt_of(inode, &f)?;
                (Arc::new(f), c, old)
            }
        };
        if size == old {
            return Ok(());
        }
        if size > old {
            self.zero_eof_tail(&f, &crypt, None, old)?;
            self.clear_trailer(&f, old)?;
        }
        st.size = size;
        if let Err(e) = self.sizes().store(self, inode, &f, st) {
            st.size = old;
            return Err(e);
        }
        crash_point("truncate:after-length");
        if size < old {
            self.clear_trailer(&f, size)?;
            if let Some((idx, _)) = eof_unit(size, du) {
                let mut unit = vec![0u8; du as usize];
                if self.read_unit(&f, &crypt, None, idx, &mut unit, size)? {
                    crypt.encrypt_data_units(idx, &mut unit)?;
                    f.write_all_at(&unit, layout::unit_offset(idx, du))?;
                }
            }
        }
        Ok(())
    }

    /// Format 3 truncate (the file's lock held): the record is the commit
    /// point. Down: record, `ftruncate` to the hint, then the cut units'
    /// slots in the last group cleared, the trailer zeroed and the new last
    /// unit's bytes past the size re-encrypted as zeros. Up: the old last
    /// unit's stored tail and the trailer zeroed, then record and
    /// `ftruncate`. Without an open handle the file is opened, checked and
    /// closed again around the change (a write session of its own).
    pub(super) fn truncate_tagged(
        &self,
        inode: &Arc<Inode>,
        st: &mut FileState,
        size: u64,
    ) -> Result<()> {
        self.sizes().check(size, self.du)?;
        let f = match (&st.fd, st.fd_writable) {
            (Some(f), true) => f.clone(),
            _ => Arc::new(self.find(inode, Some(true))?.file.ok_or(Error::Stale)?),
        };
        if st.tagged.is_none() || st.crypt.is_none() {
            let (h, t) = self.load_tagged(inode, &f)?;
            let c = self
                .keys
                .node_crypt(&h.context, NodeKind::File, inode.backing_ino);
            st.crypt = Some(self.note(inode, None, c)?);
            if st.tagged.is_none() {
                st.tagged = Some(Box::new(t));
                if st.fd.is_none() {
                    st.size = h.size;
                }
            }
        }
        let r = self.truncate_tagged_with(inode, st, &f, size);
        if st.opens == 0 {
            // Opened for this call only: the session ends here.
            if let Some(mut t) = st.tagged.take() {
                let end = self.end_session(&f, &mut t);
                self.note(inode, None, end)?;
            }
            st.crypt = None;
        } else {
            let end = self.end_unflushed(&f, st);
            self.note(inode, None, end)?;
        }
        r
    }

    fn truncate_tagged_with(
        &self,
        inode: &Arc<Inode>,
        st: &mut FileState,
        f: &File,
        size: u64,
    ) -> Result<()> {
        let du = self.du;
        let old = st.size;
        if size == old {
            return Ok(());
        }
        let crypt = st.crypt.clone().ok_or(Error::BadHandle)?;
        let t = st.tagged.as_deref_mut().ok_or(Error::BadHandle)?;
        self.begin_change(f, t)?;
        if size > old {
            self.zero_eof_tail(f, &crypt, Some(t), old)?;
            self.clear_trailer(f, old)?;
        }
        st.size = size;
        if let Err(e) = self.sizes().store(self, inode, f, st) {
            st.size = old;
            return Err(e);
        }
        crash_point("truncate:after-length");
        if size < old {
            self.clear_slots_from(f, size.div_ceil(du))?;
            self.clear_trailer(f, size)?;
            if let Some((idx, _)) = eof_unit(size, du) {
                let t = st.tagged.as_deref_mut().ok_or(Error::BadHandle)?;
                let mut unit = vec![0u8; du as usize];
                let r = self.read_unit(f, &crypt, Some(t), idx, &mut unit, size);
                if self.note(inode, None, r)? {
                    crypt.encrypt_data_units(idx, &mut unit)?;
                    self.write_units(f, Some(t), idx, &unit)?;
                }
            }
        }
        Ok(())
    }

    /// Allocates, as fallocate(2) modes 0 and `FALLOC_FL_KEEP_SIZE`: the
    /// backing blocks of the data units covering `offset..offset+length`
    /// are reserved first (backing `fallocate` with `KEEP_SIZE`, so the
    /// backing length, which format 2 reads as the size, is untouched);
    /// then mode 0 grows the size like truncate, never shrinks it. Both
    /// steps run under the file's exclusive lock, so a write past the range
    /// made meanwhile by another thread is neither raced by the reservation
    /// nor cut off by the size change. Writes inside the range
    /// then take no new blocks (xfstests generic/568), and a request beyond
    /// the free space fails with `ENOSPC` before the size changes (generic/213;
    /// blocks the backing filesystem reserved before it ran out stay
    /// allocated past the size, as on ext4). Where the backing filesystem
    /// cannot preallocate (`EOPNOTSUPP`), the range stays sparse.
    ///
    /// # Errors
    /// `ENOSPC`/`EDQUOT` when the backing filesystem cannot hold the range,
    /// `EFBIG`, `EOPNOTSUPP` for other modes (punching holes, collapsing
    /// ranges: as the kernel refuses range shifts on encrypted files),
    /// backing errors.
    pub fn fallocate(&self, fh: FileHandle, offset: u64, length: u64, mode: i32) -> Result<()> {
        let (inode, _, write) = self.file_handle(fh)?;
        if !write {
            return Err(Error::BadHandle);
        }
        self.writable()?;
        if mode != 0 && mode != libc::FALLOC_FL_KEEP_SIZE {
            return Err(Error::NotSupported);
        }
        let end = offset
            .checked_add(length)
            .filter(|e| *e <= i64::MAX as u64)
            .ok_or(Error::FileTooBig)?;
        if length == 0 {
            return Err(Error::InvalidArgument);
        }
        let du = self.du;
        if mode == 0 {
            self.sizes().check(end, du)?;
        }
        let u = Units::of_range(offset, end, du);
        let (start, stop) = (
            self.sizes().storage_start(u.first, du),
            self.sizes().unit_at(u.last - 1, du) + du,
        );
        // The file's exclusive lock over both steps: no truncate shrinks the
        // backing file between the reservation and the size change, and no
        // write grows the size between the comparison and the grow (which
        // would then cut that write off).
        let mut st = inode.file.write()?;
        let f = st.fd.clone().ok_or(Error::BadHandle)?;
        match rustix::fs::fallocate(
            &*f,
            rustix::fs::FallocateFlags::KEEP_SIZE,
            start,
            stop - start,
        ) {
            Ok(()) | Err(rustix::io::Errno::OPNOTSUPP) => {}
            Err(e) => return Err(e.into()),
        }
        if mode == 0 && end > st.size {
            self.truncate_locked(&inode, &mut st, end)?;
        }
        Ok(())
    }

    /// Flushes the backing file to stable storage (format 3: with the
    /// record of a size grown by writes since the last record write).
    ///
    /// # Errors
    /// `EBADF`, backing errors; `EIO` (logged) when the record cannot be
    /// written.
    pub fn fsync(&self, fh: FileHandle, datasync: bool) -> Result<()> {
        let (inode, _, _) = self.file_handle(fh)?;
        let f = if self.sizes() == SizeStore::Tagged {
            // Format 3: a size grown by writes goes into the record first.
            let mut st = inode.file.write()?;
            let f = st.fd.clone();
            if let (Some(t), Some(f)) = (st.tagged.as_deref_mut(), &f) {
                let r = self.store_pending_size(f, t);
                self.note(&inode, None, r)?;
            }
            f
        } else {
            inode.file.read()?.fd.clone()
        };
        if let Some(f) = f {
            if datasync {
                f.sync_data()?;
            } else {
                f.sync_all()?;
            }
        }
        Ok(())
    }

    /// A `close(2)` of a descriptor of handle `fh`: format 3 ends the file's
    /// write session (the record's writing flag cleared) before the close
    /// returns; a later write starts a new one. `Ok(false)` in the other
    /// formats, which have nothing to do on close.
    ///
    /// # Errors
    /// `EBADF` for an unknown handle, `EIO` (logged) when the record cannot
    /// be written.
    pub fn flush(&self, fh: FileHandle) -> Result<bool> {
        if self.sizes() != SizeStore::Tagged {
            return Ok(false);
        }
        let h = self.handles.get(fh);
        let Some(Handle::File { inode, .. }) = h.as_deref() else {
            return Err(Error::BadHandle);
        };
        let mut st = inode.file.write()?;
        let f = st.fd.clone();
        if let (Some(t), Some(f)) = (st.tagged.as_deref_mut(), f) {
            let ended = self.end_session(&f, t);
            self.note(inode, None, ended)?;
        }
        Ok(true)
    }

    /// Closes a file handle; the backing fd closes with the last handle.
    ///
    /// # Errors
    /// `EBADF` for an unknown handle.
    pub fn release(&self, fh: FileHandle) -> Result<()> {
        match self.handles.remove(fh).as_deref() {
            Some(Handle::File { inode, flushes, .. }) => {
                let mut st = inode.file.write()?;
                st.opens = st.opens.saturating_sub(1);
                if *flushes {
                    st.flushers = st.flushers.saturating_sub(1);
                }
                if st.opens == 0 {
                    // Format 3: the write session ends with the last close.
                    let mut ended = Ok(());
                    let f = st.fd.clone();
                    if let (Some(t), Some(f)) = (st.tagged.as_deref_mut(), f) {
                        ended = self.end_session(&f, t);
                    }
                    st.fd = None;
                    st.crypt = None;
                    st.tagged = None;
                    self.note(inode, None, ended)?;
                }
                Ok(())
            }
            Some(Handle::Dir { .. }) => Ok(()),
            None => Err(Error::BadHandle),
        }
    }
}
