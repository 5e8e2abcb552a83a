//! The backing-store layout: file headers, directory metadata files, backing
//! names (base64url of the ciphertext, long-name scheme), symlink encoding and
//! the offset arithmetic between plaintext offsets and backing offsets.
//!
//! This module owns the *bytes* of the vault format (documented in
//! `docs/vault-format.md`); it does no I/O and no cryptography beyond hashing
//! long names. Everything cryptographic comes from the `fscrypt` crate. Bytes
//! that break the layout are a [`Corruption`].

pub use crate::error::Corruption;

/// Size in bytes of the region at the start of every backing regular file that
/// holds the [`Header`]. Data unit `i` is stored at backing offset
/// `HEADER_SIZE + i * data_unit_size`. 4096 is a multiple of every data unit
/// size a v2 policy allows (512..=4096, spec §3.3), so data units stay aligned
/// with backing filesystem blocks and holes stay holes.
pub const HEADER_SIZE: u64 = 4096;

/// Number of meaningful header bytes (the rest of [`HEADER_SIZE`] is zero).
pub const HEADER_USED: usize = 72;

/// Magic bytes at offset 0 of every header.
pub const MAGIC: [u8; 8] = *b"FSCRYPT\0";

/// Version byte of format 1 headers, and of symlink store objects in every
/// format (their layout did not change in format 2).
pub const FORMAT_VERSION: u8 = 1;

/// The on-disk format of a vault: the version byte of every file header and
/// directory metadata file in it, the root's `fscrypt.dir` deciding for the
/// whole vault (`docs/vault-format.md` §4 and §4a).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Format {
    /// Format 1: a regular file's plaintext size is the header's size field;
    /// its backing length is `4096 + k·DU`.
    V1 = 1,
    /// Format 2: a regular file's plaintext size is encoded in its backing
    /// length ([`size_from_len_v2`]); the header's size field is zero.
    V2 = 2,
    /// Format 3, authenticated (`docs/vault-format.md` §4b): sizes as in
    /// format 2 (the backing length is a hint of the authenticated size),
    /// data units interleaved with tag blocks
    /// ([`crate::integrity::units`]), a record with the authenticated size,
    /// generation and bindings in the header region
    /// ([`crate::integrity::record`]), tagged names and symlink targets.
    V3 = 3,
}

impl Format {
    /// The format new vaults get (`fscrypt-rs init`, [`crate::create_root`]):
    /// format 3, authenticated; `init --no-integrity` makes format 2.
    pub const LATEST: Format = Format::V3;

    /// The format of a header version byte, if known.
    pub fn from_byte(b: u8) -> Option<Format> {
        match b {
            1 => Some(Format::V1),
            2 => Some(Format::V2),
            3 => Some(Format::V3),
            _ => None,
        }
    }

    /// The header version byte of this format.
    pub fn byte(self) -> u8 {
        self as u8
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.byte())
    }
}

/// Name of the metadata file holding a directory's context, inside its backing
/// directory. Contains a `.`, which the base64url alphabet lacks, so it can never
/// collide with an encrypted name.
pub const DIR_META_NAME: &str = "fscrypt.dir";

/// Prefix of a long-name backing entry: `fscrypt.long.` + base64url(SHA-256(ciphertext)).
pub const LONG_PREFIX: &str = "fscrypt.long.";

/// Suffix of the side file holding a long name's full ciphertext.
pub const LONG_NAME_SUFFIX: &str = ".name";

/// Prefix of temporary names: entries under construction (directories, and
/// files, nodes and symlinks where `O_TMPFILE` is not available) and side files
/// being replaced. Never shown; removed by the recovery pass
/// (`docs/vault-format.md`, "Crash safety").
pub const TMP_PREFIX: &str = "fscrypt.tmp.";

/// Name of the empty file written into the backing root at a clean unmount
/// and removed at mount. A mount that does not find it runs the recovery pass
/// (the previous mount crashed, or the vault predates the marker).
pub const CLEAN_MARKER: &str = "fscrypt.clean";

/// Directory in the backing root holding the encrypted targets of symlinks too
/// long for a backing symlink (see [`SYMLINK_MARKER_PREFIX`]).
pub const SYMLINK_STORE_DIR: &str = "fscrypt.symlinks";

/// Prefix of the target of a backing symlink whose encrypted target lives in
/// [`SYMLINK_STORE_DIR`]: `fscrypt.symlink.` + the object's 22-character id.
/// Contains a `.`, so it can never be a base64url (inline) target.
pub const SYMLINK_MARKER_PREFIX: &str = "fscrypt.symlink.";

/// Length of a symlink store object id (base64url of 16 random bytes).
pub const SYMLINK_ID_LEN: usize = 22;

/// Longest plaintext symlink target (PATH_MAX − 1).
pub const SYMLINK_MAX_TARGET: usize = 4095;

/// Largest `fscrypt_symlink_data` blob of a stored (long) target:
/// `2 + 4095 + 1`.
pub const SYMLINK_MAX_BLOB_STORED: usize = SYMLINK_MAX_TARGET + 3;

/// Header kind byte of a symlink store object.
pub const STORE_OBJECT_KIND: u8 = 3;

/// Length of a fscrypt v2 context in bytes (spec §3.2).
pub const CONTEXT_SIZE: usize = fscrypt::context::CONTEXT_V2_SIZE;

/// Parses the stored bytes of a context (a header's, a symlink's): a
/// [`ContextV2`] when they are one (spec §3.2, [`Context::parse`]). Whether
/// it is the vault's policy is for the caller to check.
///
/// # Errors
/// [`Corruption::BadContext`] when they are not a v2 context (wrong size,
/// another version, non-zero reserved bytes).
pub fn parse_context(b: &[u8]) -> Result<ContextV2, Corruption> {
    match Context::parse(b) {
        Ok(Context::V2(c)) => Ok(c),
        _ => Err(Corruption::BadContext),
    }
}

/// The [`CONTEXT_SIZE`] stored bytes of `c` (the kernel's
/// `fscrypt_context_v2`, [`Context::to_bytes`]).
pub fn context_bytes(c: &ContextV2) -> [u8; CONTEXT_SIZE] {
    let mut out = [0u8; CONTEXT_SIZE];
    out.copy_from_slice(&Context::V2(*c).to_bytes());
    out
}

/// Longest backing name we produce (NAME_MAX of Linux filesystems).
pub const NAME_MAX: usize = 255;

/// Longest symlink target stored in a backing symlink (PATH_MAX − 1).
pub const BACKING_SYMLINK_MAX: usize = 4095;

/// What a header describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderKind {
    /// A regular file's header (at offset 0 of the backing file).
    File = 1,
    /// A directory's metadata file ([`DIR_META_NAME`]).
    Directory = 2,
}

/// Byte ranges of the header fields (see [`Header`]).
pub mod field {
    use std::ops::Range;

    /// Magic `"FSCRYPT\0"`.
    pub const MAGIC: Range<usize> = 0..8;
    /// Format version (one byte).
    pub const VERSION: usize = 8;
    /// Kind: 1 = regular file, 2 = directory (one byte).
    pub const KIND: usize = 9;
    /// Header region size in bytes (le16).
    pub const REGION: Range<usize> = 10..12;
    /// Reserved, zero.
    pub const RESERVED: Range<usize> = 12..16;
    /// The 40-byte `fscrypt_context_v2`.
    pub const CONTEXT: Range<usize> = 16..56;
    /// Plaintext size in bytes (le64).
    pub const SIZE: Range<usize> = 56..64;
    /// First 8 bytes of SHA-256 over [`CHECKSUMMED`].
    pub const CHECKSUM: Range<usize> = 64..72;
    /// The bytes the checksum covers.
    pub const CHECKSUMMED: Range<usize> = 0..64;
    /// What an in-place size change rewrites: the size and the checksum.
    pub const SIZE_UPDATE: Range<usize> = 56..72;
}

/// The parsed header of a backing regular file or directory metadata file.
///
/// Byte layout (all integers little endian):
///
/// | off | size | field |
/// |----:|-----:|-------|
/// | 0   | 8    | magic `"FSCRYPT\0"` |
/// | 8   | 1    | format version: 1 or 2 ([`Format`]) |
/// | 9   | 1    | kind: 1 = regular file, 2 = directory |
/// | 10  | 2    | header region size in bytes (4096 for files, 72 for directories) |
/// | 12  | 4    | reserved, zero |
/// | 16  | 40   | `fscrypt_context_v2` (spec §3.2), nonce at 40..56 |
/// | 56  | 8    | format 1: plaintext size in bytes (files; 0 for directories); format 2: zero |
/// | 64  | 8    | first 8 bytes of SHA-256 over bytes 0..64 |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The format (version byte) the header is written in.
    pub format: Format,
    /// What the header belongs to.
    pub kind: HeaderKind,
    /// The v2 context (stored as its 40 bytes; its policy is not checked
    /// here).
    pub context: ContextV2,
    /// Plaintext size in bytes (format 1 files only; always 0 in format 2,
    /// where the backing length holds it).
    pub size: u64,
}

impl Header {
    /// Serializes the header into its [`HEADER_USED`] bytes (the size field
    /// is written as zero in format 2, whatever `size` says).
    pub fn to_bytes(&self) -> [u8; HEADER_USED] {
        let mut b = [0u8; HEADER_USED];
        b[field::MAGIC].copy_from_slice(&MAGIC);
        b[field::VERSION] = self.format.byte();
        b[field::KIND] = self.kind as u8;
        let region: u16 = match self.kind {
            HeaderKind::File => HEADER_SIZE as u16,
            HeaderKind::Directory => HEADER_USED as u16,
        };
        b[field::REGION].copy_from_slice(&region.to_le_bytes());
        b[field::CONTEXT].copy_from_slice(&context_bytes(&self.context));
        let size = match self.format {
            Format::V1 => self.size,
            Format::V2 | Format::V3 => 0,
        };
        b[field::SIZE].copy_from_slice(&size.to_le_bytes());
        let sum = checksum(&b[field::CHECKSUMMED]);
        b[field::CHECKSUM].copy_from_slice(&sum);
        b
    }

    /// The 16 bytes of [`field::SIZE_UPDATE`] (size + checksum) for an
    /// in-place size update at offset `field::SIZE_UPDATE.start`.
    pub fn size_update_bytes(&self) -> [u8; 16] {
        let b = self.to_bytes();
        let mut out = [0u8; 16];
        out.copy_from_slice(&b[field::SIZE_UPDATE]);
        out
    }

    /// Parses a header of either format (the caller checks that its
    /// [`Header::format`] is the vault's: [`Header::parse_as`]).
    ///
    /// # Errors
    /// [`Corruption`] describing the first rule broken: short input, bad magic,
    /// unknown version or kind, wrong region size, non-zero reserved bytes (or,
    /// in format 2, a non-zero size field) or a checksum mismatch; last,
    /// [`Corruption::BadContext`] when the context bytes are not a v2 context
    /// ([`parse_context`]).
    pub fn parse(b: &[u8], expect: HeaderKind) -> Result<Header, Corruption> {
        let (format, kind, size) = Header::parse_fields(b, expect)?;
        Ok(Header {
            format,
            kind,
            context: parse_context(&b[field::CONTEXT])?,
            size,
        })
    }

    /// The format of a header, checked as [`Header::parse`] checks it except
    /// for its context (which is not parsed).
    ///
    /// # Errors
    /// As [`Header::parse`], never [`Corruption::BadContext`].
    pub fn parse_format(b: &[u8], expect: HeaderKind) -> Result<Format, Corruption> {
        Header::parse_fields(b, expect).map(|(format, _, _)| format)
    }

    /// Every check of [`Header::parse`] but the context's: (format, kind,
    /// size).
    fn parse_fields(b: &[u8], expect: HeaderKind) -> Result<(Format, HeaderKind, u64), Corruption> {
        if b.len() < HEADER_USED {
            return Err(Corruption::ShortHeader);
        }
        if b[field::MAGIC] != MAGIC {
            return Err(Corruption::BadMagic);
        }
        let Some(format) = Format::from_byte(b[field::VERSION]) else {
            return Err(Corruption::UnknownVersion(b[field::VERSION]));
        };
        let kind = match b[field::KIND] {
            1 => HeaderKind::File,
            2 => HeaderKind::Directory,
            k => return Err(Corruption::UnknownKind(k)),
        };
        if kind != expect {
            return Err(Corruption::UnknownKind(b[field::KIND]));
        }
        let region = u16::from_le_bytes([b[field::REGION.start], b[field::REGION.start + 1]]);
        let want = match kind {
            HeaderKind::File => HEADER_SIZE as u16,
            HeaderKind::Directory => HEADER_USED as u16,
        };
        if region != want || b[field::RESERVED] != [0u8; 4] {
            return Err(Corruption::BadHeaderField);
        }
        if checksum(&b[field::CHECKSUMMED]) != b[field::CHECKSUM] {
            return Err(Corruption::BadChecksum);
        }
        let mut size = [0u8; 8];
        size.copy_from_slice(&b[field::SIZE]);
        let size = u64::from_le_bytes(size);
        if format != Format::V1 && size != 0 {
            return Err(Corruption::BadHeaderField);
        }
        Ok((format, kind, size))
    }

    /// Parses a header that must be of the vault's format `format` (a header
    /// of the other format inside a vault is corrupt).
    ///
    /// # Errors
    /// As [`Header::parse`]; [`Corruption::UnknownVersion`] for a header of
    /// the other format.
    pub fn parse_as(b: &[u8], expect: HeaderKind, format: Format) -> Result<Header, Corruption> {
        // The version first: a header of the other format is that, whatever
        // its other fields say under this format's rules.
        if b.len() >= HEADER_USED && b[field::MAGIC] == MAGIC && b[field::VERSION] != format.byte()
        {
            return Err(Corruption::UnknownVersion(b[field::VERSION]));
        }
        let h = Header::parse(b, expect)?;
        if h.format != format {
            return Err(Corruption::UnknownVersion(h.format.byte()));
        }
        Ok(h)
    }
}

fn checksum(b: &[u8]) -> [u8; 8] {
    let h = sha256(b);
    let mut out = [0u8; 8];
    out.copy_from_slice(&h[..8]);
    out
}

/// Backing offset of data unit `index`.
#[inline]
pub fn unit_offset(index: u64, du: u64) -> u64 {
    HEADER_SIZE + index * du
}

/// Format 1: backing file length that holds exactly the units covering
/// `size` plaintext bytes (format 2: [`len_for_size_v2`]).
#[inline]
pub fn backing_len_for(size: u64, du: u64) -> u64 {
    HEADER_SIZE + size.div_ceil(du) * du
}

/// Format 2: the backing length of a regular file of `size` plaintext bytes
/// with `du`-byte data units: the header, `ceil(size/du)` whole data units,
/// then, when `size` is not a multiple of `du`, a trailer of `size % du`
/// bytes (zeros, never read as data). So `4096 + size` for unit-aligned sizes
/// and `4096 + size + du` otherwise. `None` when that would not fit an
/// `i64` (the largest length a file can have).
#[inline]
pub fn len_for_size_v2(size: u64, du: u64) -> Option<u64> {
    let extra = if size.is_multiple_of(du) { 0 } else { du };
    HEADER_SIZE
        .checked_add(size)?
        .checked_add(extra)
        .filter(|l| *l <= i64::MAX as u64)
}

/// Format 2: the plaintext size of a regular file whose backing length is
/// `len` (the inverse of [`len_for_size_v2`]). With `m = len - 4096`:
/// `size = m` when `m % du == 0`, else `size = m - du`.
///
/// # Errors
/// [`Corruption::BadLength`] when `len < 4096`, or `m` is not a multiple of
/// `du` and below `du` (no size has such a length).
#[inline]
pub fn size_from_len_v2(len: u64, du: u64) -> Result<u64, Corruption> {
    let m = len.checked_sub(HEADER_SIZE).ok_or(Corruption::BadLength)?;
    if m.is_multiple_of(du) {
        Ok(m)
    } else if m > du {
        Ok(m - du)
    } else {
        Err(Corruption::BadLength)
    }
}

/// Format 2: the trailer of a file of `size` bytes, as (backing offset,
/// length), when `size` is not a multiple of `du`: it lies where data unit
/// `ceil(size/du)` would start, and must be zeros before the size grows
/// over it.
#[inline]
pub fn trailer_v2(size: u64, du: u64) -> Option<(u64, u64)> {
    let t = size % du;
    (t != 0).then(|| (unit_offset(size.div_ceil(du), du), t))
}

/// A backing name built from a ciphertext name: either the plain base64url
/// encoding, or a long name whose side file holds the ciphertext; either
/// one possibly as a sync tool's conflict copy (issue 23: the tool's marker
/// inserted, the ciphertext still that of the name without it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackingName {
    /// The name of the backing entry.
    pub name: String,
    /// Whether this is a long name (`fscrypt.long.<hash>`), needing a side file
    /// `<name>.name` that holds the raw ciphertext.
    pub long: bool,
    /// For a conflict copy: the marker the sync tool added (see
    /// [`crate::conflict`]); `None` for an entry as the vault wrote it.
    pub marker: Option<String>,
}

impl BackingName {
    /// Builds the backing name of a ciphertext name (1..=255 bytes).
    pub fn from_ciphertext(ct: &[u8]) -> BackingName {
        let mut buf = [0u8; 512];
        if base64url::encoded_len(ct.len()) <= NAME_MAX {
            let n = base64url::encode(ct, &mut buf);
            BackingName {
                name: String::from_utf8_lossy(&buf[..n]).into_owned(),
                long: false,
                marker: None,
            }
        } else {
            let h = sha256(ct);
            let n = base64url::encode(&h, &mut buf);
            let mut name = String::with_capacity(LONG_PREFIX.len() + n);
            name.push_str(LONG_PREFIX);
            name.push_str(&String::from_utf8_lossy(&buf[..n]));
            BackingName {
                name,
                long: true,
                marker: None,
            }
        }
    }

    /// The backing name of a sync tool's conflict copy of the entry of
    /// ciphertext `ct`: [`BackingName::from_ciphertext`] with `marker`
    /// inserted where the tools put it ([`conflict::insert`]).
    pub fn conflict_copy(ct: &[u8], marker: &str) -> BackingName {
        BackingName::from_ciphertext(ct).with_marker(marker)
    }

    /// This name as a sync tool's conflict copy: `marker` inserted where
    /// the tools put it ([`conflict::insert`]) into the name the vault
    /// wrote.
    pub fn with_marker(self, marker: &str) -> BackingName {
        BackingName {
            name: String::from_utf8_lossy(&conflict::insert(
                self.original().as_bytes(),
                marker.as_bytes(),
            ))
            .into_owned(),
            long: self.long,
            marker: Some(marker.to_owned()),
        }
    }

    /// The name of the entry as the vault wrote it: [`BackingName::name`]
    /// without a conflict marker.
    pub fn original(&self) -> String {
        match &self.marker {
            Some(_) => conflict::split(self.name.as_bytes())
                .map(|c| String::from_utf8_lossy(&c.original).into_owned())
                .unwrap_or_else(|| self.name.clone()),
            None => self.name.clone(),
        }
    }

    /// Name of the long-name side file (that of the original entry for a
    /// conflict copy: the copy and the original share it).
    pub fn side_file(&self) -> String {
        format!("{}{}", self.original(), LONG_NAME_SUFFIX)
    }
}

/// What a directory entry in a backing directory is.
#[derive(Debug, PartialEq, Eq)]
pub enum EntryName {
    /// A regular encrypted name; carries the decoded ciphertext.
    Short(Vec<u8>),
    /// A long name; the ciphertext is in the side file.
    Long,
    /// A sync tool's conflict copy of a [`EntryName::Short`] or
    /// [`EntryName::Long`] entry (issue 23): the entry name the tool copied
    /// and the marker it added ([`crate::conflict`]).
    Conflict(conflict::Conflict),
    /// Our own metadata (directory context, long-name side file, temporary):
    /// never shown to the user. Conflict copies of these are internal too.
    Internal,
    /// A name that is none of the above: corrupt or foreign.
    Invalid,
}

/// Classifies a backing directory entry name. A name that is not one the
/// vault writes is tried as a conflict copy of one ([`conflict::split`]).
pub fn classify(name: &[u8]) -> EntryName {
    let plain = classify_written(name);
    let maybe_copy = match plain {
        EntryName::Invalid => true,
        EntryName::Internal => {
            name.starts_with(LONG_PREFIX.trim_end_matches('.').as_bytes())
                && !name.ends_with(LONG_NAME_SUFFIX.as_bytes())
        }
        _ => false,
    };
    if maybe_copy
        && let Some(c) = conflict::split(name)
        && matches!(
            classify_written(&c.original),
            EntryName::Short(_) | EntryName::Long
        )
    {
        return EntryName::Conflict(c);
    }
    plain
}

/// [`classify`] with a conflict copy taken apart: the classification of
/// the entry name it copies ([`EntryName::Short`] or [`EntryName::Long`])
/// and the copy (original name and marker); for any other name its
/// classification and `None`.
pub fn classify_entry(name: &[u8]) -> (EntryName, Option<conflict::Conflict>) {
    match classify(name) {
        EntryName::Conflict(c) => (classify_written(&c.original), Some(c)),
        k => (k, None),
    }
}

/// [`classify`] without conflict copies: the names the vault writes.
fn classify_written(name: &[u8]) -> EntryName {
    if name == b"." || name == b".." {
        return EntryName::Internal;
    }
    if let Some(rest) = name.strip_prefix(LONG_PREFIX.as_bytes()) {
        if rest.len() == 43 && !rest.contains(&b'.') {
            return EntryName::Long;
        }
        return EntryName::Internal;
    }
    if name.starts_with(b"fscrypt.") {
        return EntryName::Internal;
    }
    let mut buf = [0u8; 256];
    match base64url::decode_canonical(name, &mut buf).ok() {
        Some(n) if n >= 16 => EntryName::Short(buf[..n].to_vec()),
        _ => EntryName::Invalid,
    }
}

/// Validates a long-name side file's content against the entry name's hash.
///
/// # Errors
/// [`Corruption::BadLongName`] when the content is shorter than 16 bytes,
/// longer than 255 bytes or does not hash to the name.
pub fn check_long_ciphertext(entry: &str, ct: &[u8]) -> Result<(), Corruption> {
    if ct.len() < 16 || ct.len() > NAME_MAX {
        return Err(Corruption::BadLongName);
    }
    if BackingName::from_ciphertext(ct).name != entry {
        return Err(Corruption::BadLongName);
    }
    Ok(())
}

/// Reads `buf.len()` bytes of the backing object `f` at byte offset `off`,
/// retrying short reads; what lies past its end reads as zeros (a unit
/// or tag block never written, or a file cut short by a crash or an
/// attacker: the checks above this decide what that means).
///
/// # Errors
/// I/O errors other than `EINTR`.
pub fn read_zero_filled(f: &std::fs::File, off: u64, buf: &mut [u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], off + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf[done..].fill(0);
    Ok(())
}

// ---------------------------------------------------------------------------
// Symlinks: a backing symlink whose target is base64url(context ‖ blob), where
// blob is the kernel's `fscrypt_symlink_data` (spec §7.4) including its NUL.

/// Largest `fscrypt_symlink_data` blob (2 + L + 1 bytes) stored *inline*, so
/// that the encoded backing target fits [`BACKING_SYMLINK_MAX`]:
/// `base64url::encoded_len(40 + blob) ≤ 4095` → `40 + blob ≤ 3071` → `blob ≤ 3031`, i.e.
/// ciphertext `L ≤ 3028`. Longer targets (up to [`SYMLINK_MAX_TARGET`]) go to
/// the symlink store ([`SYMLINK_STORE_DIR`]).
pub const SYMLINK_MAX_BLOB: usize = 3031;

/// Encodes a symlink's context and blob into a backing target.
pub fn encode_symlink(context: &ContextV2, blob: &[u8]) -> String {
    let mut raw = Vec::with_capacity(CONTEXT_SIZE + blob.len());
    raw.extend_from_slice(&context_bytes(context));
    raw.extend_from_slice(blob);
    let mut out = vec![0u8; base64url::encoded_len(raw.len())];
    let n = base64url::encode(&raw, &mut out);
    out.truncate(n);
    String::from_utf8_lossy(&out).into_owned()
}

/// Decodes a backing symlink target into (context, blob).
///
/// # Errors
/// [`Corruption::BadSymlink`] when the target is not base64url or too short;
/// then [`Corruption::BadContext`] when its context bytes are not a v2
/// context ([`parse_context`]).
pub fn decode_symlink(target: &[u8]) -> Result<(ContextV2, Vec<u8>), Corruption> {
    let mut raw = vec![0u8; target.len()];
    let n = base64url::decode_canonical(target, &mut raw).map_err(|_| Corruption::BadSymlink)?;
    if n < CONTEXT_SIZE + 3 {
        return Err(Corruption::BadSymlink);
    }
    let ctx = parse_context(&raw[..CONTEXT_SIZE])?;
    Ok((ctx, raw[CONTEXT_SIZE..n].to_vec()))
}

/// The store object id named by a backing symlink target, if the target is
/// a marker (`fscrypt.symlink.<id>`) rather than an inline encoding.
pub fn symlink_marker_id(target: &[u8]) -> Option<&str> {
    let id = target.strip_prefix(SYMLINK_MARKER_PREFIX.as_bytes())?;
    if id.len() != SYMLINK_ID_LEN || !id.iter().all(|&c| base64url::is_alphabet(c)) {
        return None;
    }
    std::str::from_utf8(id).ok()
}

/// Whether `target` is a symlink marker, well-formed or not (starts with the
/// marker prefix). An inline target never does.
pub fn is_symlink_marker(target: &[u8]) -> bool {
    target.starts_with(SYMLINK_MARKER_PREFIX.as_bytes())
}

/// Whether `name` is a valid store object name (a 22-character id).
pub fn is_store_id(name: &[u8]) -> bool {
    name.len() == SYMLINK_ID_LEN && name.iter().all(|&c| base64url::is_alphabet(c))
}

/// A fresh store object id from 16 random bytes.
pub fn store_id(random: &[u8; 16]) -> String {
    let mut out = [0u8; 24];
    let n = base64url::encode(random, &mut out);
    String::from_utf8_lossy(&out[..n]).into_owned()
}

/// Serializes a symlink store object: magic `FSCRYPT\0`, version 1, kind 3,
/// two zero bytes, `context ‖ blob`, then the first 8 bytes of SHA-256 over
/// everything before.
pub fn encode_store_object(context: &ContextV2, blob: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(12 + CONTEXT_SIZE + blob.len() + 8);
    b.extend_from_slice(&MAGIC);
    b.extend_from_slice(&[FORMAT_VERSION, STORE_OBJECT_KIND, 0, 0]);
    b.extend_from_slice(&context_bytes(context));
    b.extend_from_slice(blob);
    let sum = checksum(&b);
    b.extend_from_slice(&sum);
    b
}

/// Parses a symlink store object into (context, blob).
///
/// # Errors
/// [`Corruption::BadSymlink`] on a bad magic, version, kind, length or
/// checksum; then [`Corruption::BadContext`] when its context bytes are not a
/// v2 context ([`parse_context`]).
pub fn decode_store_object(b: &[u8]) -> Result<(ContextV2, Vec<u8>), Corruption> {
    let bad = Corruption::BadSymlink;
    if b.len() < 12 + CONTEXT_SIZE + 3 + 8
        || b.len() > 12 + CONTEXT_SIZE + SYMLINK_MAX_BLOB_STORED + 8
    {
        return Err(bad);
    }
    let (body, sum) = b.split_at(b.len() - 8);
    if body[0..8] != MAGIC
        || body[8..12] != [FORMAT_VERSION, STORE_OBJECT_KIND, 0, 0]
        || checksum(body) != sum
    {
        return Err(bad);
    }
    let ctx = parse_context(&body[12..12 + CONTEXT_SIZE])?;
    Ok((ctx, body[12 + CONTEXT_SIZE..].to_vec()))
}

use crate::conflict;
use fscrypt::{Context, ContextV2, base64url};
use fscrypt_crypto::sha256;

#[cfg(test)]
mod tests {
    use super::*;

    /// A v2 context of a default policy with key identifier and nonce `b`.
    fn test_context(b: u8) -> ContextV2 {
        ContextV2 {
            policy: fscrypt::PolicyV2::new_default(fscrypt::KeyIdentifier([b; 16])),
            nonce: [b; 16],
        }
    }

    #[test]
    fn name_lengths_and_long_names() {
        assert_eq!(base64url::encoded_len(191), 255);
        assert_eq!(base64url::encoded_len(192), 256);
        let short = BackingName::from_ciphertext(&[7u8; 191]);
        assert!(!short.long && short.name.len() == 255);
        let long = BackingName::from_ciphertext(&[7u8; 192]);
        assert!(long.long);
        assert_eq!(classify(long.name.as_bytes()), EntryName::Long);
        assert_eq!(classify(long.side_file().as_bytes()), EntryName::Internal);
        assert_eq!(classify(DIR_META_NAME.as_bytes()), EntryName::Internal);
        check_long_ciphertext(&long.name, &[7u8; 192]).unwrap();
        assert!(check_long_ciphertext(&long.name, &[8u8; 192]).is_err());
        assert!(matches!(classify(short.name.as_bytes()), EntryName::Short(c) if c == [7u8; 191]));
        assert_eq!(classify(b"plain-name"), EntryName::Invalid);
    }

    #[test]
    fn conflict_copies_classify_as_their_original() {
        const M: &str = ".sync-conflict-20261205-101010-ABCDEFG";
        for ct in [[7u8; 32].as_slice(), &[9u8; 200]] {
            let original = BackingName::from_ciphertext(ct);
            let copy = BackingName::conflict_copy(ct, M);
            assert_ne!(copy.name, original.name);
            assert_eq!(copy.original(), original.name);
            assert_eq!(copy.side_file(), original.side_file());
            assert_eq!(copy.long, original.long);
            match classify(copy.name.as_bytes()) {
                EntryName::Conflict(c) => {
                    assert_eq!(c.original, original.name.as_bytes());
                    assert_eq!(c.marker, M.as_bytes());
                }
                other => panic!("{other:?}"),
            }
        }
        // Copies of metadata stay internal; a marker on a foreign name
        // does not make it an entry.
        let dir_copy = conflict::insert(DIR_META_NAME.as_bytes(), M.as_bytes());
        assert_eq!(classify(&dir_copy), EntryName::Internal);
        let side = BackingName::from_ciphertext(&[9u8; 200]).side_file();
        let side_copy = conflict::insert(side.as_bytes(), M.as_bytes());
        assert_eq!(classify(&side_copy), EntryName::Internal);
        let foreign = conflict::insert(b"plain-name", M.as_bytes());
        assert_eq!(classify(&foreign), EntryName::Invalid);
    }

    #[test]
    fn v2_length_known_answers_and_corrupt_lengths() {
        let du = 4096;
        for (size, len) in [
            (0, 4096),
            (1, 4096 + 4096 + 1),
            (4095, 4096 + 4096 + 4095),
            (4096, 8192),
            (4097, 4096 + 8192 + 1),
            (3 * 4096, 4 * 4096),
        ] {
            assert_eq!(len_for_size_v2(size, du), Some(len), "size {size}");
            assert_eq!(size_from_len_v2(len, du), Ok(size), "len {len}");
        }
        for bad in [0, 1, 4095, 4097, 4096 + 4095] {
            assert_eq!(
                size_from_len_v2(bad, du),
                Err(Corruption::BadLength),
                "{bad}"
            );
        }
        assert_eq!(size_from_len_v2(4096 + 512 + 1, 512), Ok(1));
        assert_eq!(
            size_from_len_v2(4096 + 511, 512),
            Err(Corruption::BadLength)
        );
        assert_eq!(len_for_size_v2(i64::MAX as u64, du), None);
        assert_eq!(trailer_v2(4096, du), None);
        assert_eq!(trailer_v2(4097, du), Some((4096 + 8192, 1)));
    }

    proptest::proptest! {
        #[test]
        fn v2_length_roundtrip(log2_du in 9u32..=12, size in proptest::prop_oneof![
            0u64..100_000,
            (1u64 << 40)..(1u64 << 40) + 100_000,
            (i64::MAX as u64 - 20_000)..=(i64::MAX as u64),
        ]) {
            let du = 1u64 << log2_du;
            match len_for_size_v2(size, du) {
                Some(len) => {
                    proptest::prop_assert_eq!(size_from_len_v2(len, du), Ok(size));
                    proptest::prop_assert!(len >= HEADER_SIZE + size.div_ceil(du) * du);
                    if let Some((off, t)) = trailer_v2(size, du) {
                        proptest::prop_assert_eq!(off + t, len);
                        proptest::prop_assert_eq!(off, backing_len_for(size, du));
                    } else {
                        proptest::prop_assert_eq!(len, backing_len_for(size, du));
                    }
                }
                None => proptest::prop_assert!(size > i64::MAX as u64 - HEADER_SIZE - du),
            }
        }

        #[test]
        fn v2_every_length_decodes_to_at_most_one_size(log2_du in 9u32..=12, len in 0u64..40_000) {
            let du = 1u64 << log2_du;
            match size_from_len_v2(len, du) {
                Ok(size) => proptest::prop_assert_eq!(len_for_size_v2(size, du), Some(len)),
                Err(_) => {
                    let m = len.checked_sub(HEADER_SIZE);
                    proptest::prop_assert!(m.is_none_or(|m| !m.is_multiple_of(du) && m < du));
                }
            }
        }
    }

    #[test]
    fn v2_header_size_field_zero() {
        let h = Header {
            format: Format::V2,
            kind: HeaderKind::File,
            context: test_context(3),
            size: 77,
        };
        let b = h.to_bytes();
        assert_eq!(b[field::VERSION], 2);
        assert_eq!(b[field::SIZE], [0u8; 8]);
        let p = Header::parse(&b, HeaderKind::File).unwrap();
        assert_eq!((p.format, p.size), (Format::V2, 0));
        assert!(Header::parse_as(&b, HeaderKind::File, Format::V1).is_err());
        let v1 = Header {
            format: Format::V1,
            ..h.clone()
        }
        .to_bytes();
        let mut c = v1;
        c[field::VERSION] = 2;
        let sum = checksum(&c[field::CHECKSUMMED]);
        c[field::CHECKSUM].copy_from_slice(&sum);
        assert_eq!(
            Header::parse(&c, HeaderKind::File),
            Err(Corruption::BadHeaderField),
            "format 2 requires a zero size field"
        );
    }

    #[test]
    fn header_roundtrip_and_corruption() {
        let h = Header {
            format: Format::V1,
            kind: HeaderKind::File,
            context: test_context(3),
            size: 123_456_789,
        };
        let b = h.to_bytes();
        assert_eq!(Header::parse(&b, HeaderKind::File).unwrap(), h);
        assert!(Header::parse(&b, HeaderKind::Directory).is_err());
        assert!(Header::parse(&b[..71], HeaderKind::File).is_err());
        for i in 0..HEADER_USED {
            let mut c = b;
            c[i] ^= 0x40;
            assert!(Header::parse(&c, HeaderKind::File).is_err(), "byte {i}");
        }
        let mut c = b;
        c[56..72].copy_from_slice(
            &Header {
                size: 5,
                ..h.clone()
            }
            .size_update_bytes(),
        );
        assert_eq!(Header::parse(&c, HeaderKind::File).unwrap().size, 5);
    }

    #[test]
    fn symlink_roundtrip() {
        let ctx = test_context(9);
        let blob = vec![1u8; SYMLINK_MAX_BLOB];
        let t = encode_symlink(&ctx, &blob);
        assert!(t.len() <= BACKING_SYMLINK_MAX);
        let (c, b) = decode_symlink(t.as_bytes()).unwrap();
        assert_eq!(c, ctx);
        assert_eq!(b, blob);
        assert!(decode_symlink(b"a.b").is_err());
    }

    #[test]
    fn symlink_store_objects_and_markers() {
        let ctx = test_context(5);
        let blob = vec![2u8; SYMLINK_MAX_BLOB_STORED];
        let obj = encode_store_object(&ctx, &blob);
        assert_eq!(decode_store_object(&obj).unwrap(), (ctx, blob.clone()));
        for i in [0, 9, 12, obj.len() - 1] {
            let mut c = obj.clone();
            c[i] ^= 1;
            assert!(decode_store_object(&c).is_err(), "byte {i}");
        }
        assert!(decode_store_object(&obj[..obj.len() - 1]).is_err());
        let id = store_id(&[0xab; 16]);
        assert_eq!(id.len(), SYMLINK_ID_LEN);
        assert!(is_store_id(id.as_bytes()));
        let marker = format!("{SYMLINK_MARKER_PREFIX}{id}");
        assert_eq!(symlink_marker_id(marker.as_bytes()), Some(id.as_str()));
        assert!(is_symlink_marker(marker.as_bytes()));
        assert!(symlink_marker_id(b"fscrypt.symlink.short").is_none());
        assert!(decode_symlink(marker.as_bytes()).is_err(), "never inline");
        let inline = encode_symlink(&ctx, &[1u8; 20]);
        assert!(symlink_marker_id(inline.as_bytes()).is_none());
        assert_eq!(classify(SYMLINK_STORE_DIR.as_bytes()), EntryName::Internal);
        assert_eq!(classify(CLEAN_MARKER.as_bytes()), EntryName::Internal);
    }
}
