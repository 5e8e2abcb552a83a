//! Where a regular file's plaintext size lives: one strategy per vault,
//! chosen from its format (`docs/vault-format.md` §4 and §4a).
//!
//! - [`SizeStore::Header`] (format 1): the header's size field. The backing
//!   length is `4096 + k·DU` (whole data units); a lookup reads the header,
//!   so a file's identity carries its context and its size is known from
//!   then on; growing or shrinking rewrites the size field after the data.
//! - [`SizeStore::Length`] (format 2): the backing length encodes the size
//!   ([`layout::size_from_len_v2`]); the header's field is zero. A lookup
//!   is one `fstatat` (identity: device, inode number, type), the header is
//!   read from the object opened for its contents, and every size change is
//!   one `ftruncate` (or the data write itself), with the trailer bytes
//!   past the last unit zeroed before the size grows over them.
//!
//! - [`SizeStore::Tagged`] (format 3, authenticated): the record's size
//!   (`fs/tags.rs`), the backing length a hint of it that `stat` reads as in
//!   format 2 ([`units::len_for_size`]); data units sit in groups behind
//!   tag blocks, so their offsets come from here too ([`SizeStore::unit_at`],
//!   [`SizeStore::runs`]).
//!
//! Every difference the three make to lookups, opens, writes and truncates is
//! a method here; `backing.rs` and `contents.rs` ask [`EncryptedFs::sizes`]
//! instead of testing the format.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use fscrypt::ContextV2;
use rustix::fs::Stat;

use crate::crypt::{NodeCrypt, NodeKind};
use crate::error::{Corruption, Error, Result};
use crate::inodes::{FileState, Inode};
use crate::layout::{self, Format, HEADER_SIZE, Header, HeaderKind};
use fscrypt_vault::integrity::units;

use super::EncryptedFs;
use super::offsets::{HEADER_SIZE_FIELD, Units};

/// Where regular files keep their plaintext size (see the module
/// documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SizeStore {
    /// Format 1: the header's size field.
    Header,
    /// Format 2: encoded in the backing length.
    Length,
    /// Format 3: the authenticated record, the length a hint of it.
    Tagged,
}

impl EncryptedFs {
    /// This vault's size strategy (fixed by its format).
    pub(super) fn sizes(&self) -> SizeStore {
        SizeStore::of(self.format)
    }
}

impl SizeStore {
    /// The strategy of a vault of `format`.
    pub(super) fn of(format: Format) -> SizeStore {
        match format {
            Format::V1 => SizeStore::Header,
            Format::V2 => SizeStore::Length,
            Format::V3 => SizeStore::Tagged,
        }
    }

    /// Whether a lookup reads a file's header, so that its identity carries
    /// the context and its size is known before it is opened (format 1).
    /// Format 2 looks files up with one `fstatat`; identity is (device,
    /// inode number, type) and the header is read only when contents are
    /// needed.
    pub(super) fn header_at_lookup(self) -> bool {
        self == SizeStore::Header
    }

    /// The context recorded in the identity of a file created with `ctx`
    /// (format 2 files are looked up without theirs: so are they
    /// registered, or a later lookup would not find the inode).
    pub(super) fn identity_context(self, ctx: ContextV2) -> Option<ContextV2> {
        self.header_at_lookup().then_some(ctx)
    }

    /// The plaintext size of a file whose header's size field is `field`
    /// and whose backing length is `len` (data unit `du`).
    ///
    /// # Errors
    /// [`Corruption::BadLength`] for a format 1 length that is not the
    /// header plus whole units; a format 2 length that encodes no size.
    pub(super) fn size_from(self, field: u64, len: u64, du: u64) -> Result<u64> {
        match self {
            SizeStore::Header => {
                if len < HEADER_SIZE || !(len - HEADER_SIZE).is_multiple_of(du) {
                    return Err(Error::Corrupt(Corruption::BadLength));
                }
                Ok(field)
            }
            SizeStore::Length => Ok(layout::size_from_len_v2(len, du)?),
            SizeStore::Tagged => {
                units::size_from_len(len, du).ok_or(Error::Corrupt(Corruption::BadLength))
            }
        }
    }

    /// The backing length (format 2 and 3: the length that encodes or
    /// hints `size`), `None` past `i64::MAX`.
    pub(super) fn len_for(self, size: u64, du: u64) -> Option<u64> {
        match self {
            SizeStore::Header => Some(layout::backing_len_for(size, du)),
            SizeStore::Length => layout::len_for_size_v2(size, du),
            SizeStore::Tagged => units::len_for_size(size, du),
        }
    }

    /// Backing offset of data unit `idx` (after the header; in format 3
    /// after its group's tag block too).
    pub(super) fn unit_at(self, idx: u64, du: u64) -> u64 {
        match self {
            SizeStore::Tagged => units::unit_offset(idx, du).unwrap_or(u64::MAX),
            _ => layout::unit_offset(idx, du),
        }
    }

    /// Backing offset where the storage of data unit `idx` begins: the
    /// unit itself, or in format 3 its group's tag block (which a write of
    /// the unit fills too, so preallocation must cover it).
    pub(super) fn storage_start(self, idx: u64, du: u64) -> u64 {
        match self {
            SizeStore::Tagged => {
                units::tag_block_offset(idx / units::GROUP_UNITS, du).unwrap_or(u64::MAX)
            }
            _ => self.unit_at(idx, du),
        }
    }

    /// The units `first..last` cut into runs stored back to back (format
    /// 3: one run per group, each at most [`units::GROUP_UNITS`] long; else
    /// one run).
    pub(super) fn runs(self, first: u64, last: u64) -> impl Iterator<Item = (u64, u64)> {
        let tagged = self == SizeStore::Tagged;
        let mut a = first;
        std::iter::from_fn(move || {
            if a >= last {
                return None;
            }
            let b = if tagged {
                ((a / units::GROUP_UNITS + 1) * units::GROUP_UNITS).min(last)
            } else {
                last
            };
            let r = (a, b);
            a = b;
            Some(r)
        })
    }

    /// The trailer of a `size`-byte file as (backing offset, length):
    /// formats 2 and 3 store `size mod du` bytes past the last unit, which
    /// must be zeros before the size grows over them.
    pub(super) fn trailer(self, size: u64, du: u64) -> Option<(u64, u64)> {
        let t = size % du;
        match self {
            SizeStore::Header => None,
            SizeStore::Length => layout::trailer_v2(size, du),
            SizeStore::Tagged => (t != 0)
                .then(|| units::unit_offset(size / du, du).map(|o| (o + du, t)))
                .flatten(),
        }
    }

    /// Checks that a file may grow to `size` bytes (sizes past `i64::MAX`
    /// are refused by the callers for both).
    ///
    /// # Errors
    /// `EFBIG` when no format 2 length encodes `size`.
    pub(super) fn check(self, size: u64, du: u64) -> Result<()> {
        match self {
            SizeStore::Header => Ok(()),
            SizeStore::Length | SizeStore::Tagged => {
                self.len_for(size, du).map(|_| ()).ok_or(Error::FileTooBig)
            }
        }
    }

    /// Makes `st.size` the stored size of `inode`'s object `f`: format 1
    /// rewrites the header's size field; format 2 sets the backing length
    /// (one `ftruncate`, the commit point of every size change); format 3
    /// writes the record (the commit point), then sets the length hint.
    ///
    /// # Errors
    /// `EFBIG`, backing errors, the context's corruption error (format 1).
    pub(super) fn store(
        self,
        fs: &EncryptedFs,
        inode: &Inode,
        f: &File,
        st: &mut FileState,
    ) -> Result<()> {
        match self {
            SizeStore::Tagged => {
                // The record write also makes the length the size's hint.
                let t = st.tagged.as_deref_mut().ok_or(Error::BadHandle)?;
                let old = t.record.size;
                t.record.size = st.size;
                if let Err(e) = fs.write_record(f, t) {
                    t.record.size = old;
                    return Err(e);
                }
            }
            SizeStore::Length => {
                let len = layout::len_for_size_v2(st.size, fs.du).ok_or(Error::FileTooBig)?;
                f.set_len(len)?;
            }
            SizeStore::Header => {
                let h = Header {
                    format: fs.format,
                    kind: HeaderKind::File,
                    context: fs.file_context(inode)?,
                    size: st.size,
                };
                f.write_all_at(&h.size_update_bytes(), HEADER_SIZE_FIELD)?;
            }
        }
        Ok(())
    }

    /// Before a write of the units `u` grows a file of `old` bytes to `end`:
    /// format 2 zeroes the old trailer when the size grows past the start
    /// of unit `ceil(old/du)` (it becomes part of that unit) and the write
    /// does not rewrite that unit whole.
    ///
    /// # Errors
    /// Backing errors.
    pub(super) fn before_write(
        self,
        fs: &EncryptedFs,
        f: &File,
        old: u64,
        end: u64,
        u: &Units,
    ) -> Result<()> {
        let du = fs.du;
        if self != SizeStore::Header && end > old.next_multiple_of(du) {
            let t = old.div_ceil(du);
            if !(u.first <= t && t < u.last) {
                fs.clear_trailer(f, old)?;
            }
        }
        Ok(())
    }

    /// Whether a data write that grew a file from `old` to `end` bytes,
    /// ending at unit `last`, already stored the new size: in format 2 the
    /// write itself may have given the backing file the length that
    /// encodes it (a write ending on a unit boundary past the old length,
    /// as every whole-unit append does). Never in format 1.
    ///
    /// # Errors
    /// `EFBIG` when no length encodes `old`.
    pub(super) fn stored_by_write(self, old: u64, end: u64, last: u64, du: u64) -> Result<bool> {
        Ok(self == SizeStore::Length && {
            let had = layout::len_for_size_v2(old, du).ok_or(Error::FileTooBig)?;
            let wrote = layout::unit_offset(last, du);
            layout::len_for_size_v2(end, du) == Some(had.max(wrote))
        })
    }

    /// Before `inode`'s object is opened for contents: format 1 builds the
    /// key from the context known since lookup (EIO for a damaged header,
    /// before any repair); format 2 reads it later from the opened object.
    ///
    /// # Errors
    /// `ENOKEY`, the context's corruption error.
    pub(super) fn before_open(
        self,
        fs: &EncryptedFs,
        inode: &Inode,
        st: &mut FileState,
    ) -> Result<()> {
        if st.crypt.is_none() && self == SizeStore::Header {
            st.crypt = Some(fs.file_crypt(inode)?);
        }
        Ok(())
    }

    /// Once `inode`'s object `f` is opened (read-write when `rw`) for
    /// contents: format 2 reads the header here, lazily, from the very
    /// object opened (the key, and the size when no fd was open); the
    /// length is the size, so nothing can be stored past it. Format 1
    /// repairs after a crash when writable: nothing may be stored past the
    /// units that cover the size.
    ///
    /// # Errors
    /// `ENOKEY`, corruption errors, backing errors.
    pub(super) fn opened(
        self,
        fs: &EncryptedFs,
        inode: &Inode,
        st: &mut FileState,
        f: &File,
        rw: bool,
    ) -> Result<()> {
        match self {
            SizeStore::Tagged => {
                if st.tagged.is_none() {
                    let (h, t) = fs.load_tagged(inode, f)?;
                    let c = fs
                        .keys
                        .node_crypt(&h.context, NodeKind::File, inode.backing_ino);
                    let c = fs.note(inode, None, c)?;
                    st.crypt.get_or_insert(c);
                    if st.fd.is_none() {
                        st.size = h.size;
                    }
                    st.tagged = Some(Box::new(t));
                }
            }
            SizeStore::Length => {
                let (crypt, size) = fs.file_crypt_of(inode, f)?;
                if st.crypt.is_none() {
                    st.crypt = Some(crypt);
                }
                if st.fd.is_none() {
                    st.size = size;
                }
            }
            SizeStore::Header if rw => {
                let len = f.metadata()?.len();
                let want = layout::backing_len_for(st.size, fs.du);
                if len > want {
                    f.set_len(want)?;
                }
            }
            SizeStore::Header => {}
        }
        Ok(())
    }

    /// Sets `inode`'s plaintext size to `size` (the file's exclusive lock
    /// held, `st` the guarded state).
    ///
    /// # Errors
    /// `EFBIG`, `ENOKEY`, backing and corruption errors.
    pub(super) fn truncate(
        self,
        fs: &EncryptedFs,
        inode: &Arc<Inode>,
        st: &mut FileState,
        size: u64,
    ) -> Result<()> {
        match self {
            SizeStore::Header => fs.truncate_header(inode, st, size),
            SizeStore::Length => fs.truncate_length(inode, st, size),
            SizeStore::Tagged => fs.truncate_tagged(inode, st, size),
        }
    }

    /// The size `stat` shows for the regular file `inode` whose backing
    /// object has the attributes `st`. Format 2: the backing length (the
    /// in-memory size while the file is open: it changes under the file's
    /// lock); format 1: the size read at lookup. A damaged header stats as
    /// size 0, so that the object can be listed, renamed and deleted.
    ///
    /// # Errors
    /// A poisoned lock.
    pub(super) fn attr_size(self, fs: &EncryptedFs, inode: &Inode, st: &Stat) -> Result<u64> {
        Ok(match self {
            SizeStore::Length | SizeStore::Tagged => {
                let s = inode.file.read()?;
                if s.fd.is_some() {
                    s.size
                } else {
                    fs.size_of_len(st.st_size as u64).unwrap_or(0)
                }
            }
            SizeStore::Header => match inode.context() {
                Some(_) => inode.file.read()?.size,
                None => 0,
            },
        })
    }

    /// The contents key of `inode`, a file just created with the context
    /// `ctx`: format 2 builds it from `ctx` (the identity holds none),
    /// format 1 from the identity's context.
    ///
    /// # Errors
    /// `ENOKEY`, the key derivation's error.
    pub(super) fn created_crypt(
        self,
        fs: &EncryptedFs,
        inode: &Inode,
        ctx: &ContextV2,
    ) -> Result<NodeCrypt> {
        match self {
            SizeStore::Length | SizeStore::Tagged => {
                fs.need_key()?;
                let c = fs.keys.node_crypt(ctx, NodeKind::File, inode.backing_ino);
                fs.note(inode, None, c)
            }
            SizeStore::Header => fs.file_crypt(inode),
        }
    }
}
