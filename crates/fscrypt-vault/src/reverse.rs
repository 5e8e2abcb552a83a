//! Reverse mode (issue 24): the bytes of a format 3 vault computed from a
//! plaintext directory, so that a read-only view of the plaintext *is* a
//! vault that backup tools copy and `fscrypt-rs mount` opens
//! (`docs/vault-format.md` §13).
//!
//! Everything here is deterministic: the same plaintext and master key give
//! the same view bytes, across remounts and reboots, so a second `rsync` of
//! the view copies nothing. Nonces are derived instead of drawn
//! ([`IntegrityKeys::reverse_nonce`], [`IntegrityKeys::dir_nonce`]) from the
//! object's *path identity*: its parent directory's nonce (itself derived
//! from the parent's path) and its name ciphertext. Tags, records and slots
//! are computed on the fly, one group of 128 data units at a time
//! ([`FileView::group`]).
//!
//! This module holds no FUSE and no directory walking: the read-only
//! back-end `fscrypt_fuse::reverse` reads the plaintext and asks this one
//! for the bytes. It owns the exclusion patterns ([`Excludes`]) as well.

use std::fs::File;
use std::io;

use fscrypt::hooks::FscryptName;
use fscrypt::{Context, ContextV2, FileType, InodeCrypt, InodeParams, MasterKey, PolicyV2};

use crate::integrity::IntegrityKeys;
use crate::integrity::MacKind;
use crate::integrity::names;
use crate::integrity::record::{FileRecord, RECORD_A};
use crate::integrity::symlinks::{self, SYMLINK_MAX_BLOB_V3};
use crate::integrity::units::{
    self, GROUP_UNITS, SLOT_PAIR_SIZE, Slot, TAG_BLOCK_SIZE, len_for_size,
};
use crate::layout::{BackingName, Format, HEADER_SIZE, HEADER_USED, Header, HeaderKind};

/// Name of the reverse-mode config inside the plaintext directory (written
/// by `fscrypt-rs init --reverse`, never listed in the view, where it
/// appears as [`crate::CONFIG_NAME`]).
pub const REVERSE_CONFIG_NAME: &str = ".fscrypt-rs.reverse.json";

/// The block size the format layer is given (as in a vault).
const FS_BLOCK_SIZE: u32 = 4096;

/// What kind of object a derived nonce is for: the `kind` byte of
/// [`IntegrityKeys::reverse_nonce`]. Directories other than the root use
/// the vault's own directory-nonce derivation (§5a).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum NonceKind {
    /// The root directory (no parent, no name).
    Root = 0,
    /// A regular file.
    File = 1,
    /// A symbolic link.
    Symlink = 2,
}

/// Errors of the reverse view's byte computations.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReverseError {
    /// The fscrypt format refused (a name or target it cannot encrypt,
    /// key setup).
    #[error("fscrypt: {0}")]
    Format(#[from] fscrypt::Error),
    /// A symlink target too long even for the symlink store (over 4095
    /// bytes; Linux makes none): the view leaves such symlinks out.
    #[error("symlink target too long for the reverse view")]
    TargetTooLong,
    /// A size whose view length would pass `i64::MAX`.
    #[error("file too large")]
    TooLarge,
    /// Reading the plaintext failed.
    #[error("reading the plaintext: {0}")]
    Io(#[from] io::Error),
}

/// The keys of a reverse view: the master key, the root policy and the
/// format 3 keys derived from it.
pub struct ReverseKeys {
    master: MasterKey,
    policy: PolicyV2,
    integrity: IntegrityKeys,
}

impl std::fmt::Debug for ReverseKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReverseKeys")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl ReverseKeys {
    /// The keys of the view of a vault with root `policy` and `master`.
    ///
    /// # Errors
    /// [`ReverseError::Format`] when `master` is not the policy's key or no
    /// MAC implementation passed its self-test.
    pub fn new(master: MasterKey, policy: PolicyV2) -> Result<ReverseKeys, ReverseError> {
        if master.identifier() != policy.master_key_identifier {
            return Err(ReverseError::Format(
                fscrypt::KeyError::WrongKey {
                    expected: policy.master_key_identifier.to_string(),
                    actual: master.identifier().to_string(),
                }
                .into(),
            ));
        }
        let integrity = IntegrityKeys::derive(&master)
            .map_err(|e| ReverseError::Io(io::Error::other(format!("format 3 keys: {e}"))))?;
        Ok(ReverseKeys {
            master,
            policy,
            integrity,
        })
    }

    /// The format 3 keys.
    pub fn integrity(&self) -> &IntegrityKeys {
        &self.integrity
    }

    /// The data unit size in bytes.
    pub fn data_unit_size(&self) -> u64 {
        match self.policy.log2_data_unit_size {
            0 => u64::from(FS_BLOCK_SIZE),
            u => 1u64 << u,
        }
    }

    /// The context of the root directory: the policy and the nonce
    /// `reverse_nonce(Root, "", "")`.
    pub fn root_context(&self) -> ContextV2 {
        ContextV2 {
            policy: self.policy,
            nonce: self
                .integrity
                .reverse_nonce(NonceKind::Root as u8, &[], &[]),
        }
    }

    /// The context of a directory named `name_ct` in the directory of
    /// nonce `parent`: the nonce a vault mount gives a directory it makes
    /// (§5a), so the same path has the same key forward and in reverse.
    pub fn dir_context(&self, parent: &[u8; 16], name_ct: &[u8]) -> ContextV2 {
        ContextV2 {
            policy: self.policy,
            nonce: self.integrity.dir_nonce(parent, name_ct),
        }
    }

    /// The context of a regular file or symlink named `name_ct` in the
    /// directory of nonce `parent`.
    pub fn object_context(&self, kind: NonceKind, parent: &[u8; 16], name_ct: &[u8]) -> ContextV2 {
        ContextV2 {
            policy: self.policy,
            nonce: self.integrity.reverse_nonce(kind as u8, parent, name_ct),
        }
    }

    /// The crypto state of an object of context `ctx` and type `ft`.
    ///
    /// # Errors
    /// [`ReverseError::Format`] when key setup fails.
    pub fn crypt(&self, ctx: &ContextV2, ft: FileType) -> Result<InodeCrypt, ReverseError> {
        let params = InodeParams {
            file_type: ft,
            ino: 0,
            fs_uuid: [0u8; 16],
            fs_block_size: FS_BLOCK_SIZE,
        };
        Ok(InodeCrypt::new(&self.master, &Context::V2(*ctx), &params)?)
    }

    /// The name ciphertext of plaintext `name` in the directory `dir`.
    ///
    /// # Errors
    /// [`ReverseError::Format`] for a name fscrypt cannot encrypt.
    pub fn encrypt_name(&self, dir: &InodeCrypt, name: &[u8]) -> Result<Vec<u8>, ReverseError> {
        Ok(FscryptName::for_create(Some(dir), name)?.to_vec())
    }

    /// The view name of name ciphertext `ct` in the directory of nonce
    /// `parent` (a long name's side file holds [`ReverseKeys::side_file`]).
    pub fn view_name(&self, parent: &[u8; 16], ct: &[u8]) -> BackingName {
        names::backing_name(&self.integrity, parent, ct)
    }

    /// The bytes of a long name's side file: `ct ‖ tag`.
    pub fn side_file(&self, parent: &[u8; 16], ct: &[u8]) -> Vec<u8> {
        names::tagged(&self.integrity, parent, ct)
    }

    /// The binding of a file to its view name `name` in the directory of
    /// nonce `parent` (§4b.5).
    pub fn binding(&self, parent: &[u8; 16], name: &BackingName) -> [u8; 16] {
        self.integrity.binding(parent, name.original().as_bytes())
    }

    /// The view target of a symlink of context `ctx` to plaintext `target`
    /// (§4b.7): the inline form, or for a target too long for it the
    /// marker `fscrypt.symlink.<id>` of its store object
    /// ([`ReverseKeys::store_object`]), `<id>` the base64url of the
    /// symlink's nonce.
    ///
    /// # Errors
    /// [`ReverseError::TargetTooLong`] past what the store holds (4095
    /// bytes), [`ReverseError::Format`] for an empty target or one with NUL.
    pub fn symlink_target(&self, ctx: &ContextV2, target: &[u8]) -> Result<String, ReverseError> {
        match self.symlink_blob(ctx, target)? {
            (blob, false) => Ok(symlinks::encode_symlink(&self.integrity, ctx, &blob)),
            (_, true) => Ok(format!(
                "{}{}",
                crate::layout::SYMLINK_MARKER_PREFIX,
                crate::layout::store_id(&ctx.nonce)
            )),
        }
    }

    /// For a symlink whose target needs the symlink store: the store
    /// object's name (its id) and bytes (format 3, §4b.7); `None` for an
    /// inline target.
    ///
    /// # Errors
    /// As [`ReverseKeys::symlink_target`].
    pub fn store_object(
        &self,
        ctx: &ContextV2,
        target: &[u8],
    ) -> Result<Option<(String, Vec<u8>)>, ReverseError> {
        Ok(match self.symlink_blob(ctx, target)? {
            (_, false) => None,
            (blob, true) => Some((
                crate::layout::store_id(&ctx.nonce),
                symlinks::encode_store_object(&self.integrity, ctx, &blob),
            )),
        })
    }

    /// The `fscrypt_symlink_data` blob of `target` and whether it needs
    /// the store (as a mount decides: inline when it fits, §6).
    fn symlink_blob(
        &self,
        ctx: &ContextV2,
        target: &[u8],
    ) -> Result<(Vec<u8>, bool), ReverseError> {
        let crypt = self.crypt(ctx, FileType::Symlink)?;
        let too_long = |e: &fscrypt::Error| {
            matches!(e, fscrypt::Error::Name(fscrypt::NameError::TooLong { .. }))
        };
        match crypt.encrypt_symlink(target, SYMLINK_MAX_BLOB_V3) {
            Ok(b) => Ok((b, false)),
            Err(e) if too_long(&e) => {
                match crypt.encrypt_symlink(target, crate::layout::SYMLINK_MAX_BLOB_STORED) {
                    Ok(b) => Ok((b, true)),
                    Err(e) if too_long(&e) => Err(ReverseError::TargetTooLong),
                    Err(e) => Err(e.into()),
                }
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// The 72 bytes of a directory's `fscrypt.dir` in the view.
pub fn dir_meta(ctx: &ContextV2) -> [u8; HEADER_USED] {
    Header {
        format: Format::V3,
        kind: HeaderKind::Directory,
        context: *ctx,
        size: 0,
    }
    .to_bytes()
}

/// Where a view offset of a regular file lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Region {
    /// In the 4096-byte header region, at this offset.
    Head(u64),
    /// In group `g`'s tag block or units: offset inside the group.
    Group(u64, u64),
}

/// One computed group: its tag block and the ciphertext of its units.
#[derive(Debug, Clone)]
pub struct Group {
    /// The group number.
    pub index: u64,
    /// The 4096-byte tag block.
    pub tags: Vec<u8>,
    /// The units' ciphertext (whole units; zeros for all-zero plaintext).
    pub data: Vec<u8>,
}

/// The view of one regular file: its header region (header and record A)
/// and the arithmetic of its length; groups are computed from the
/// plaintext by [`FileView::group`].
#[derive(Debug, Clone)]
pub struct FileView {
    nonce: [u8; 16],
    size: u64,
    du: u64,
    len: u64,
    head: Vec<u8>,
}

impl FileView {
    /// The view of a file of context `ctx`, plaintext `size` bytes, bound
    /// to the view name whose binding is `binding`: header (version 3),
    /// record A (`seq` 1, `size`, generation 1, no flags, that binding),
    /// record B empty.
    ///
    /// # Errors
    /// [`ReverseError::TooLarge`] when the view length passes `i64::MAX`.
    pub fn new(
        keys: &ReverseKeys,
        ctx: &ContextV2,
        size: u64,
        binding: [u8; 16],
    ) -> Result<FileView, ReverseError> {
        let du = keys.data_unit_size();
        let len = len_for_size(size, du).ok_or(ReverseError::TooLarge)?;
        let mut head = vec![0u8; HEADER_SIZE as usize];
        let h = Header {
            format: Format::V3,
            kind: HeaderKind::File,
            context: *ctx,
            size: 0,
        };
        head[..HEADER_USED].copy_from_slice(&h.to_bytes());
        let record = FileRecord {
            size,
            ..FileRecord::new(binding)
        };
        let rec = record
            .encode(&keys.integrity, &ctx.nonce)
            .map_err(|_| ReverseError::TooLarge)?;
        let at = RECORD_A as usize;
        head[at..at + rec.len()].copy_from_slice(&rec);
        Ok(FileView {
            nonce: ctx.nonce,
            size,
            du,
            len,
            head,
        })
    }

    /// The view length (the length hint of the size, §4b.4).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the view is the empty file's (header only).
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The plaintext size.
    pub fn size(&self) -> u64 {
        self.size
    }

    fn units(&self) -> u64 {
        self.size.div_ceil(self.du)
    }

    fn region(&self, off: u64) -> Region {
        if off < HEADER_SIZE {
            return Region::Head(off);
        }
        let g = units::group_size(self.du);
        let x = off - HEADER_SIZE;
        Region::Group(x / g, x % g)
    }

    /// Computes group `g` from the plaintext `plain` (read at offsets
    /// `[g·128·DU, …)`, never past the size). A unit whose plaintext is all
    /// zeros is stored as zeros under an empty slot pair (it reads as
    /// zeros, §4b.3, and stays a hole in a sparse copy); every other unit
    /// is encrypted with the file's key and tagged in slot 0, sequence 1.
    ///
    /// # Errors
    /// [`ReverseError::Io`] when reading the plaintext fails,
    /// [`ReverseError::Format`] when encryption fails.
    pub fn group(
        &self,
        keys: &ReverseKeys,
        crypt: &InodeCrypt,
        plain: &File,
        g: u64,
    ) -> Result<Group, ReverseError> {
        self.group_into(keys, crypt, plain, g, Vec::new())
    }

    /// [`FileView::group`] into the buffer `data` (of a group no longer
    /// needed: reusing it spares the allocation and its page faults).
    ///
    /// # Errors
    /// As [`FileView::group`].
    pub fn group_into(
        &self,
        keys: &ReverseKeys,
        crypt: &InodeCrypt,
        plain: &File,
        g: u64,
        mut data: Vec<u8>,
    ) -> Result<Group, ReverseError> {
        let du = self.du as usize;
        let first = g * GROUP_UNITS;
        let n = self.units().saturating_sub(first).min(GROUP_UNITS) as usize;
        data.clear();
        data.resize(n * du, 0);
        let start = first * self.du;
        let valid = (self.size - start.min(self.size)).min(data.len() as u64) as usize;
        crate::layout::read_zero_filled(plain, start, &mut data[..valid])?;
        let mut tags = vec![0u8; TAG_BLOCK_SIZE as usize];
        let state = Slot::state_for(1, false);
        for (k, (unit, pair)) in data
            .chunks_exact_mut(du)
            .zip(tags.chunks_exact_mut(SLOT_PAIR_SIZE))
            .enumerate()
        {
            if unit.iter().all(|&b| b == 0) {
                continue;
            }
            let i = first + k as u64;
            crypt.encrypt_data_units(i, unit)?;
            let mac = keys
                .integrity
                .tag(MacKind::DataUnit, state, i, &self.nonce, unit);
            pair[..units::SLOT_SIZE].copy_from_slice(&Slot::new(1, false, &mac).to_bytes());
        }
        Ok(Group {
            index: g,
            tags,
            data,
        })
    }

    /// Copies view bytes `[offset, offset + out.len())` (the caller clamps
    /// to [`FileView::len`]) into `out`, asking `group` for each group the
    /// range touches. Bytes of the trailer (after the last unit) are zeros.
    ///
    /// # Errors
    /// Whatever `group` fails with.
    pub fn read<E>(
        &self,
        offset: u64,
        out: &mut [u8],
        mut group: impl FnMut(u64) -> Result<std::sync::Arc<Group>, E>,
    ) -> Result<(), E> {
        let gsize = units::group_size(self.du);
        let mut done = 0usize;
        while done < out.len() {
            let off = offset + done as u64;
            let rest = out.len() - done;
            match self.region(off) {
                Region::Head(o) => {
                    let n = rest.min((HEADER_SIZE - o) as usize);
                    out[done..done + n].copy_from_slice(&self.head[o as usize..o as usize + n]);
                    done += n;
                }
                Region::Group(g, o) => {
                    let n = rest.min((gsize - o) as usize);
                    let dst = &mut out[done..done + n];
                    if g * GROUP_UNITS >= self.units() {
                        dst.fill(0);
                    } else {
                        let grp = group(g)?;
                        // Tag block, then the units, then zeros (trailer).
                        let tb = TAG_BLOCK_SIZE as usize;
                        let (o, mut k) = (o as usize, 0usize);
                        if o < tb {
                            let m = n.min(tb - o);
                            dst[..m].copy_from_slice(&grp.tags[o..o + m]);
                            k = m;
                        }
                        if k < n {
                            let from = o + k - tb;
                            let have = grp.data.len().saturating_sub(from).min(n - k);
                            dst[k..k + have].copy_from_slice(&grp.data[from..from + have]);
                            dst[k + have..].fill(0);
                        }
                    }
                    done += n;
                }
            }
        }
        Ok(())
    }
}

/// Exclusion patterns (`mount --reverse --exclude`, `--exclude-from`),
/// matched against paths relative to the plaintext root:
///
/// - a pattern without `/` (other than a trailing one) matches an entry
///   of that name at any depth (`*.tmp`, `.cache`);
/// - a pattern with `/` matches the whole relative path (a leading `/` is
///   dropped: `/build`, `home/*/Downloads`);
/// - `*` matches any run of characters but `/`, `**` any run including
///   `/`, `?` one character but `/`; a trailing `/` matches directories
///   only.
///
/// An excluded directory hides everything below it. `--exclude-from`
/// files hold one pattern per line; empty lines and lines starting with
/// `#` are skipped.
#[derive(Debug, Clone, Default)]
pub struct Excludes {
    patterns: Vec<Pattern>,
}

#[derive(Debug, Clone)]
struct Pattern {
    glob: Vec<u8>,
    anchored: bool,
    dir_only: bool,
}

impl Excludes {
    /// Parses `patterns` (empty ones are skipped).
    pub fn new<I, S>(patterns: I) -> Excludes
    where
        I: IntoIterator<Item = S>,
        S: AsRef<[u8]>,
    {
        let mut out = Vec::new();
        for p in patterns {
            let mut p = p.as_ref();
            let dir_only = p.ends_with(b"/");
            while p.ends_with(b"/") {
                p = &p[..p.len() - 1];
            }
            let anchored = p.contains(&b'/');
            while p.starts_with(b"/") {
                p = &p[1..];
            }
            if !p.is_empty() {
                out.push(Pattern {
                    glob: p.to_vec(),
                    anchored,
                    dir_only,
                });
            }
        }
        Excludes { patterns: out }
    }

    /// The patterns of an `--exclude-from` file's text: one per line,
    /// skipping empty lines and `#` comments.
    pub fn lines(text: &[u8]) -> Vec<Vec<u8>> {
        text.split(|&b| b == b'\n')
            .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
            .filter(|l| !l.is_empty() && !l.starts_with(b"#"))
            .map(<[u8]>::to_vec)
            .collect()
    }

    /// Whether nothing is excluded.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether the entry at relative path `rel` (components joined by `/`,
    /// no leading `/`) is excluded; `dir`: it is a directory.
    pub fn excludes(&self, rel: &[u8], dir: bool) -> bool {
        let base = rel.rsplit(|&b| b == b'/').next().unwrap_or(rel);
        self.patterns.iter().any(|p| {
            (dir || !p.dir_only)
                && if p.anchored {
                    glob(&p.glob, rel)
                } else {
                    glob(&p.glob, base)
                }
        })
    }
}

/// One element of a glob pattern.
#[derive(Clone, Copy)]
enum Tok {
    /// `**`: any run of bytes.
    AnyRun,
    /// `*`: any run of bytes but `/`.
    Run,
    /// `?`: one byte but `/`.
    One,
    /// A literal byte.
    Lit(u8),
}

/// Glob matching of `text` against `pat` (`*`, `**`, `?`; everything else
/// literal), by dynamic programming over (pattern element, text offset):
/// time and memory linear in each, whatever the pattern (no backtracking
/// blow-up on many stars).
fn glob(pat: &[u8], text: &[u8]) -> bool {
    let mut toks = Vec::with_capacity(pat.len());
    let mut i = 0;
    while i < pat.len() {
        let t = match pat[i] {
            b'*' if pat.get(i + 1) == Some(&b'*') => {
                i += 1;
                Tok::AnyRun
            }
            b'*' => Tok::Run,
            b'?' => Tok::One,
            c => Tok::Lit(c),
        };
        toks.push(t);
        i += 1;
    }
    let m = text.len();
    // next[j]: the elements after the current one match text[j..].
    let mut next = vec![false; m + 1];
    next[m] = true;
    for tok in toks.iter().rev() {
        let mut cur = vec![false; m + 1];
        for j in (0..=m).rev() {
            let c = text.get(j).copied();
            cur[j] = match *tok {
                Tok::AnyRun => next[j] || (c.is_some() && cur[j + 1]),
                Tok::Run => next[j] || (c.is_some_and(|c| c != b'/') && cur[j + 1]),
                Tok::One => c.is_some_and(|c| c != b'/') && next[j + 1],
                Tok::Lit(l) => c == Some(l) && next[j + 1],
            };
        }
        next = cur;
    }
    next[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> ReverseKeys {
        let master = MasterKey::new(&[0x42; 64]).unwrap();
        let policy = PolicyV2::new_default(master.identifier());
        ReverseKeys::new(master, policy).unwrap()
    }

    #[test]
    fn nonces_are_deterministic_and_separated() {
        let a = keys();
        let b = keys();
        assert_eq!(a.root_context(), b.root_context());
        let root = a.root_context().nonce;
        let f = a.object_context(NonceKind::File, &root, b"ct-of-a-name-xyz");
        let s = a.object_context(NonceKind::Symlink, &root, b"ct-of-a-name-xyz");
        let d = a.dir_context(&root, b"ct-of-a-name-xyz");
        assert_ne!(f.nonce, s.nonce);
        assert_ne!(f.nonce, d.nonce);
        assert_ne!(f.nonce, root);
        assert_eq!(
            f,
            b.object_context(NonceKind::File, &root, b"ct-of-a-name-xyz")
        );
    }

    #[test]
    fn file_view_is_a_valid_format_3_file() {
        // 4096-byte units, and 512-byte ones (a file over two groups).
        file_view_checks(0, 5000, 4096 * 2);
        file_view_checks(9, 70_000, 512 * 3);
    }

    fn file_view_checks(log2_du: u8, head: usize, zeros: usize) {
        use std::io::Write;
        let master = MasterKey::new(&[0x42; 64]).unwrap();
        let mut policy = PolicyV2::new_default(master.identifier());
        policy.log2_data_unit_size = log2_du;
        let k = ReverseKeys::new(master, policy).unwrap();
        let du = k.data_unit_size();
        let root = k.root_context();
        let dir = k.crypt(&root, FileType::Directory).unwrap();
        let ct = k.encrypt_name(&dir, b"hello.txt").unwrap();
        let name = k.view_name(&root.nonce, &ct);
        let ctx = k.object_context(NonceKind::File, &root.nonce, &ct);
        let crypt = k.crypt(&ctx, FileType::Regular).unwrap();
        let t = test_support::TempDir::new("reverse-view");
        let path = t.path().join("p");
        let mut plain: Vec<u8> = (0..head).map(|i| (i % 251 + 1) as u8).collect();
        plain.extend_from_slice(&vec![0u8; zeros]);
        plain.extend_from_slice(b"tail");
        std::fs::File::create(&path)
            .unwrap()
            .write_all(&plain)
            .unwrap();
        let f = File::open(&path).unwrap();
        let v = FileView::new(&k, &ctx, plain.len() as u64, k.binding(&root.nonce, &name)).unwrap();
        assert_eq!(units::size_from_len(v.len(), du), Some(plain.len() as u64));
        let mut out = vec![0u8; v.len() as usize];
        v.read(0, &mut out, |g| {
            v.group(&k, &crypt, &f, g).map(std::sync::Arc::new)
        })
        .unwrap();
        // Header, record and every unit check out as a mount checks them.
        let h = Header::parse_as(&out, HeaderKind::File, Format::V3).unwrap();
        assert_eq!(h.context, ctx);
        let rec = FileRecord::decode(&out[1024..2048], k.integrity(), &ctx.nonce).unwrap();
        assert_eq!(rec.size, plain.len() as u64);
        assert!(rec.is_bound_to(&k.binding(&root.nonce, &name)));
        let n = (plain.len() as u64).div_ceil(du);
        for i in 0..n {
            let off = units::unit_offset(i, du).unwrap() as usize;
            let mut unit = out[off..off + du as usize].to_vec();
            let pair = units::slot_pair_offset(i, du).unwrap() as usize;
            let slot = &out[pair..pair + 16];
            if unit.iter().all(|&b| b == 0) {
                assert_eq!(slot, &[0u8; 16]);
                continue;
            }
            assert!(k.integrity().verify(
                MacKind::DataUnit,
                slot[0],
                i,
                &ctx.nonce,
                &unit,
                &slot[1..]
            ));
            crypt.decrypt_data_units(i, &mut unit).unwrap();
            let s = (i * du) as usize;
            let e = (s + du as usize).min(plain.len());
            assert_eq!(&unit[..e - s], &plain[s..e]);
        }
        // A read in pieces gives the same bytes.
        let mut piece = vec![0u8; 3000];
        v.read(9000, &mut piece, |g| {
            v.group(&k, &crypt, &f, g).map(std::sync::Arc::new)
        })
        .unwrap();
        assert_eq!(&piece[..], &out[9000..12000]);
    }

    #[test]
    fn excludes() {
        let e = Excludes::new(["*.tmp", "/build", "cache/", "a/**/z", "x?y"]);
        assert!(e.excludes(b"f.tmp", false));
        assert!(e.excludes(b"d/e/f.tmp", false));
        assert!(!e.excludes(b"f.tmpx", false));
        assert!(e.excludes(b"build", true));
        assert!(!e.excludes(b"d/build", true));
        assert!(e.excludes(b"d/cache", true));
        assert!(!e.excludes(b"d/cache", false));
        assert!(e.excludes(b"a/b/c/z", false));
        assert!(e.excludes(b"xzy", false));
        assert!(!e.excludes(b"x/y", false));
        assert_eq!(
            Excludes::lines(b"# c\n\n*.o\r\nbuild/\n"),
            vec![b"*.o".to_vec(), b"build/".to_vec()]
        );
        assert!(Excludes::new([""]).is_empty());
        assert!(glob(b"", b""));
        assert!(!glob(b"", b"a"));
        assert!(glob(b"**", b"a/b"));
        assert!(!glob(b"*", b"a/b"));
        assert!(glob(b"a*b*c", b"aXbYc"));
        // Many stars against a long name: no backtracking blow-up.
        let name = vec![b'a'; 255];
        assert!(!glob(&b"*a*a*a*a*a*a*a*a*a*a*a*a*b"[..], &name));
    }
}
