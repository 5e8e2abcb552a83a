//! `verify`: prove that what the kernel stored on disk is what fscrypt
//! specifies (spec §11.2, done with our own code end to end).
//!
//! For every regular file, directory and symlink under a directory of a
//! mounted ext4 filesystem whose master key is in the kernel keyring:
//!
//! * the plaintext is read through the filesystem (the kernel decrypts);
//! * the stored bytes are read from the block device with [`fscrypt_ext4`]
//!   after `sync`: the encryption context xattr, the data blocks of files,
//!   the raw directory entries, the symlink blob;
//! * `fscrypt` recomputes the ciphertext from the context (policy + nonce),
//!   the master key, the inode number and the filesystem UUID, and it is
//!   compared byte for byte. The first differing byte offset is reported.
//!
//! A kernel crypto driver that produces wrong ciphertext (while decrypting
//! its own output consistently) is caught this way.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::os::unix::fs::{DirEntryExt, FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fscrypt::hooks::FscryptName;
use fscrypt::{Context, FileType, InodeCrypt, InodeParams, MasterKey};

use crate::mountinfo::{self, MountInfoError};
use fscrypt_ext4::{EXT4_CASEFOLD_FL, Ext4, Ext4Error, Extent, Inode, InodeKind};

/// The kind of object verified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    /// Regular file: contents.
    File,
    /// Directory: every entry name.
    Directory,
    /// Symlink: the target blob.
    Symlink,
}

impl ObjectKind {
    /// `"file"`, `"dir"`, `"symlink"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::File => "file",
            ObjectKind::Directory => "dir",
            ObjectKind::Symlink => "symlink",
        }
    }
}

/// The verdict for one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The stored bytes equal the recomputed ones.
    Ok,
    /// They differ.
    Mismatch {
        /// Byte offset of the first difference: in the file (contents), in
        /// the named entry's stored name (directories) or in the blob
        /// (symlinks).
        offset: u64,
        /// What differs (e.g. the entry name).
        detail: String,
    },
    /// The object could not be verified.
    Error(String),
}

/// Result for one object.
#[derive(Clone, Debug)]
pub struct ObjectReport {
    /// Path (as walked, plaintext names).
    pub path: PathBuf,
    /// Inode number.
    pub ino: u64,
    /// Kind.
    pub kind: ObjectKind,
    /// Policy description (see [`crate::policy::describe`]).
    pub policy: String,
    /// Bytes compared (file data, name bytes or blob bytes).
    pub bytes: u64,
    /// Verdict.
    pub outcome: Outcome,
}

/// Totals of a run.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Objects verified ok.
    pub ok: u64,
    /// Objects that mismatched.
    pub mismatched: u64,
    /// Objects that could not be verified.
    pub errors: u64,
    /// Unencrypted objects skipped.
    pub unencrypted: u64,
    /// Regular-file data bytes compared.
    pub file_bytes: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// Distinct policies seen (descriptions).
    pub policies: Vec<String>,
}

impl Summary {
    /// Whether everything verified.
    pub fn all_ok(&self) -> bool {
        self.mismatched == 0 && self.errors == 0
    }

    /// File data verified per second, in MB/s (10^6 bytes).
    pub fn mb_per_s(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.file_bytes as f64 / 1e6 / s
        } else {
            0.0
        }
    }
}

/// Errors that stop a run before any object is judged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The mount could not be found.
    #[error(transparent)]
    Mount(#[from] MountInfoError),
    /// Not ext4.
    #[error(
        "{path}: is on a {fs_type} filesystem; verify reads the on-disk format directly and \
         supports only ext4"
    )]
    UnsupportedFilesystem {
        /// The directory.
        path: PathBuf,
        /// Its filesystem type.
        fs_type: String,
    },
    /// The device could not be read.
    #[error(transparent)]
    Ext4(#[from] Ext4Error),
    /// The directory's v2 key is not the one given.
    #[error(
        "{path}: encrypted with master key {policy_key}, but the key given has identifier \
         {given_key}; pass the key file that was added for this directory"
    )]
    WrongKey {
        /// The directory.
        path: PathBuf,
        /// The policy's key identifier.
        policy_key: String,
        /// The identifier of the key given.
        given_key: String,
    },
    /// The kernel does not hold the directory's key, so the plaintext
    /// cannot be read through the filesystem.
    #[error(
        "{path}: the master key {key} is not in the filesystem keyring; add it first: \
         `fscrypt-rs add-key {mount} --key-file F`"
    )]
    KeyNotPresent {
        /// The directory.
        path: PathBuf,
        /// The key identifier or descriptor.
        key: String,
        /// The mount point.
        mount: String,
    },
    /// Walking the tree failed.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// A record of plaintext digests made while a tree is known good, so that a
/// later run can tell which file changed on disk *while unmounted* (after a
/// remount the kernel decrypts whatever is on disk, so the re-encryption
/// comparison alone cannot see offline corruption of ciphertext: a
/// length-preserving cipher maps the corrupted block to a different
/// plaintext that re-encrypts to the same corrupted block).
///
/// Per regular file: the first 8 bytes of SHA-256 of every plaintext data
/// unit (zero-padded). Paths are relative to the verified directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    files: BTreeMap<PathBuf, (u32, Vec<[u8; 8]>)>,
}

/// Errors of [`Manifest::parse`].
#[derive(Debug, thiserror::Error)]
#[error("manifest line {line}: {what}")]
pub struct ManifestError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub what: &'static str,
}

impl Manifest {
    /// Number of files recorded.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Text form: one line per file, `F <hex path> <data unit size> <hex digests…>`.
    pub fn to_text(&self) -> String {
        use std::os::unix::ffi::OsStrExt;
        let mut out = String::from("fscrypt-rs verify manifest v1\n");
        for (p, (du, d)) in &self.files {
            out.push_str("F ");
            out.push_str(&hex(p.as_os_str().as_bytes()));
            out.push_str(&format!(" {du}"));
            for x in d {
                out.push(' ');
                out.push_str(&hex(x));
            }
            out.push('\n');
        }
        out
    }

    /// Parse [`Manifest::to_text`] output.
    ///
    /// # Errors
    /// [`ManifestError`] naming the first bad line.
    pub fn parse(text: &str) -> Result<Manifest, ManifestError> {
        use std::os::unix::ffi::OsStrExt;
        let mut m = Manifest::default();
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, "fscrypt-rs verify manifest v1")) => {}
            _ => {
                return Err(ManifestError {
                    line: 1,
                    what: "not a fscrypt-rs verify manifest",
                });
            }
        }
        for (i, l) in lines {
            let err = |what| ManifestError { line: i + 1, what };
            let mut f = l.split(' ');
            if f.next() != Some("F") {
                return Err(err("expected `F`"));
            }
            let path = f.next().and_then(unhex).ok_or(err("bad path"))?;
            let du = f
                .next()
                .and_then(|x| x.parse().ok())
                .ok_or(err("bad data unit size"))?;
            let mut d = Vec::new();
            for x in f {
                let b = unhex(x).filter(|b| b.len() == 8).ok_or(err("bad digest"))?;
                let mut a = [0u8; 8];
                a.copy_from_slice(&b);
                d.push(a);
            }
            m.files
                .insert(PathBuf::from(std::ffi::OsStr::from_bytes(&path)), (du, d));
        }
        Ok(m)
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok())
        .collect()
}

fn unit_digest(unit: &[u8]) -> [u8; 8] {
    let h = fscrypt_crypto::sha256(unit);
    let mut a = [0u8; 8];
    a.copy_from_slice(&h[..8]);
    a
}

/// Optional record/check of plaintext digests (see [`Manifest`]).
#[derive(Debug, Default)]
pub struct Options<'a> {
    /// Record digests of every file verified into this manifest.
    pub record: Option<&'a mut Manifest>,
    /// Also check every file against this earlier record.
    pub check: Option<&'a Manifest>,
}

/// Largest run of blocks compared at once (1 MiB of 4 KiB blocks).
const CHUNK_BYTES: usize = 1 << 20;

struct Verifier<'a> {
    root: PathBuf,
    opts: Options<'a>,
    digests: Vec<[u8; 8]>,
    fs: Ext4,
    master: &'a MasterKey,
    dev: u64,
    block_size: u32,
    uuid: [u8; 16],
    seen_files: HashSet<u64>,
    policies: Vec<String>,
    ct: Vec<u8>,
    pt: Vec<u8>,
}

/// Verify every encrypted object under `dir` (inclusive) against the raw
/// device, calling `report` once per object as it is judged.
///
/// The kernel must hold the master key (the plaintext is read through the
/// filesystem); `master` must be that key (raw bytes wrapped by
/// [`MasterKey::new`]). Objects under other mounts are not entered.
///
/// # Errors
/// [`VerifyError`] when the filesystem cannot be examined at all; problems
/// with single objects are reported as [`Outcome::Error`] instead.
pub fn verify_tree(
    dir: &Path,
    master: &MasterKey,
    report: impl FnMut(&ObjectReport),
) -> Result<Summary, VerifyError> {
    verify_tree_with(dir, master, Options::default(), report)
}

/// [`verify_tree`] that also records and/or checks a [`Manifest`].
///
/// # Errors
/// As [`verify_tree`].
pub fn verify_tree_with(
    dir: &Path,
    master: &MasterKey,
    opts: Options<'_>,
    mut report: impl FnMut(&ObjectReport),
) -> Result<Summary, VerifyError> {
    let start = Instant::now();
    rustix::fs::sync();
    let m = mountinfo::find_mount(dir)?;
    if m.fs_type != "ext4" {
        return Err(VerifyError::UnsupportedFilesystem {
            path: dir.to_path_buf(),
            fs_type: m.fs_type,
        });
    }
    // Up-front checks with clear messages: the key given is the directory's
    // key (v2), and the kernel holds it.
    if let Ok(policy) = crate::policy::get_policy(dir) {
        let spec = match &policy {
            fscrypt::Policy::V1(p) => crate::keyring::KeySpec::Descriptor(p.master_key_descriptor),
            fscrypt::Policy::V2(p) => {
                if p.master_key_identifier != master.identifier() {
                    return Err(VerifyError::WrongKey {
                        path: dir.to_path_buf(),
                        policy_key: p.master_key_identifier.to_string(),
                        given_key: master.identifier().to_string(),
                    });
                }
                crate::keyring::KeySpec::Identifier(p.master_key_identifier)
            }
        };
        if let Ok(st) = crate::keyring::key_status(&m.mount_point, spec)
            && st.presence != crate::keyring::KeyPresence::Present
        {
            return Err(VerifyError::KeyNotPresent {
                path: dir.to_path_buf(),
                key: spec.to_string(),
                mount: m.mount_point.display().to_string(),
            });
        }
    }
    let fs = Ext4::open(&m.device_path())?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| VerifyError::Io { path, source }
    };
    let meta = std::fs::symlink_metadata(dir).map_err(io(dir))?;
    let sb = fs.superblock().clone();
    let mut v = Verifier {
        root: dir.to_path_buf(),
        opts,
        digests: Vec::new(),
        fs,
        master,
        dev: meta.dev(),
        block_size: sb.block_size,
        uuid: sb.uuid,
        seen_files: HashSet::new(),
        policies: Vec::new(),
        ct: Vec::new(),
        pt: Vec::new(),
    };
    let mut summary = Summary::default();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).map_err(io(&path))?;
        if meta.dev() != v.dev {
            continue;
        }
        let ft = meta.file_type();
        if ft.is_dir() {
            let mut children: Vec<PathBuf> = std::fs::read_dir(&path)
                .map_err(io(&path))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            children.sort();
            stack.extend(children.into_iter().rev());
        }
        let kind = if ft.is_file() {
            ObjectKind::File
        } else if ft.is_dir() {
            ObjectKind::Directory
        } else if ft.is_symlink() {
            ObjectKind::Symlink
        } else {
            continue;
        };
        if kind == ObjectKind::File && !v.seen_files.insert(meta.ino()) {
            continue; // another hard link to a file already verified
        }
        let Some(r) = v.verify_object(&path, meta.ino(), kind) else {
            summary.unencrypted += 1;
            continue;
        };
        match &r.outcome {
            Outcome::Ok => summary.ok += 1,
            Outcome::Mismatch { .. } => summary.mismatched += 1,
            Outcome::Error(_) => summary.errors += 1,
        }
        if kind == ObjectKind::File {
            summary.file_bytes += r.bytes;
        }
        report(&r);
    }
    summary.elapsed = start.elapsed();
    summary.policies = v.policies;
    Ok(summary)
}

fn first_diff(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .or_else(|| (a.len() != b.len()).then(|| a.len().min(b.len())))
}

impl Verifier<'_> {
    /// `None` for an unencrypted object.
    fn verify_object(&mut self, path: &Path, ino: u64, kind: ObjectKind) -> Option<ObjectReport> {
        let mut r = ObjectReport {
            path: path.to_path_buf(),
            ino,
            kind,
            policy: String::new(),
            bytes: 0,
            outcome: Outcome::Ok,
        };
        let ino32 = match u32::try_from(ino) {
            Ok(i) => i,
            Err(_) => {
                r.outcome = Outcome::Error("inode number above 2^32 on ext4".into());
                return Some(r);
            }
        };
        let inode = match self.fs.read_inode(ino32) {
            Ok(i) => i,
            Err(e) => {
                r.outcome = Outcome::Error(e.to_string());
                return Some(r);
            }
        };
        if !inode.is_encrypted() {
            return None;
        }
        let expected_kind = match kind {
            ObjectKind::File => InodeKind::Regular,
            ObjectKind::Directory => InodeKind::Directory,
            ObjectKind::Symlink => InodeKind::Symlink,
        };
        if inode.kind() != expected_kind {
            r.outcome = Outcome::Error(format!(
                "on-disk inode {ino} is a {:?}, the filesystem shows a {}",
                inode.kind(),
                kind.as_str()
            ));
            return Some(r);
        }
        let result = self.judge(path, &inode, kind, &mut r);
        if let Err(msg) = result {
            r.outcome = Outcome::Error(msg);
        }
        Some(r)
    }

    fn judge(
        &mut self,
        path: &Path,
        inode: &Inode,
        kind: ObjectKind,
        r: &mut ObjectReport,
    ) -> Result<(), String> {
        let ctx_bytes = self
            .fs
            .encryption_context(inode)
            .map_err(|e| e.to_string())?
            .ok_or("EXT4_ENCRYPT_FL set but no encryption context xattr (index 9, \"c\")")?;
        let ctx = Context::parse(&ctx_bytes).map_err(|e| format!("on-disk context: {e}"))?;
        let policy = ctx.policy();
        r.policy = crate::policy::describe(&policy);
        // The kernel's view of the same inode must agree with what we read
        // from disk (guards against reading the wrong inode or stale data).
        if kind != ObjectKind::Symlink {
            let nonce = crate::policy::get_nonce(path).map_err(|e| e.to_string())?;
            if &nonce != ctx.nonce() {
                return Err("the kernel's nonce (FS_IOC_GET_ENCRYPTION_NONCE) differs from the on-disk context".into());
            }
        }
        if !self.policies.contains(&r.policy) {
            self.policies.push(r.policy.clone());
        }
        let params = InodeParams {
            file_type: match kind {
                ObjectKind::File => FileType::Regular,
                ObjectKind::Directory => FileType::Directory,
                ObjectKind::Symlink => FileType::Symlink,
            },
            ino: u64::from(inode.ino),
            fs_uuid: self.uuid,
            fs_block_size: self.block_size,
        };
        let crypt =
            InodeCrypt::new(self.master, &ctx, &params).map_err(|e| format!("key setup: {e}"))?;
        match kind {
            ObjectKind::File => self.judge_file(path, inode, &crypt, r),
            ObjectKind::Directory => self.judge_dir(path, inode, &crypt, r),
            ObjectKind::Symlink => self.judge_symlink(path, inode, &crypt, r),
        }
    }

    fn judge_file(
        &mut self,
        path: &Path,
        inode: &Inode,
        crypt: &InodeCrypt,
        r: &mut ObjectReport,
    ) -> Result<(), String> {
        let bs = u64::from(self.block_size);
        let du = crypt.data_unit_size() as u64;
        let units_per_block = bs / du.max(1);
        let file = File::open(path).map_err(|e| format!("cannot open for reading: {e}"))?;
        let size = file.metadata().map_err(|e| e.to_string())?.len();
        if size != inode.size {
            return Err(format!(
                "size {size} differs from on-disk i_size {}",
                inode.size
            ));
        }
        let nblocks = size.div_ceil(bs);
        let extents = self.fs.extents(inode).map_err(|e| e.to_string())?;
        let chunk_blocks = (CHUNK_BYTES as u64 / bs).max(1);
        let rel = path.strip_prefix(&self.root).unwrap_or(path).to_path_buf();
        let tracking = self.opts.record.is_some() || self.opts.check.is_some();
        let checked = match self.opts.check {
            Some(m) => match m.files.get(&rel) {
                Some((d, v)) if u64::from(*d) == du => Some(v.clone()),
                Some(_) => return Err("recorded with a different data unit size".into()),
                None => return Err("not in the manifest".into()),
            },
            None => None,
        };
        self.digests.clear();
        // Walk logical blocks 0..nblocks as runs: mapped (written) extents
        // are compared, holes/unwritten ranges must read as zeros.
        let mut runs: Vec<(u64, u64, Option<u64>)> = Vec::new(); // (lblk, count, physical)
        let mut next = 0u64;
        let mut sorted: Vec<&Extent> = extents.iter().collect();
        sorted.sort_by_key(|e| e.logical);
        for e in sorted {
            let start = e.logical.max(next);
            let end = (e.logical + u64::from(e.len)).min(nblocks);
            if start >= end {
                continue;
            }
            if start > next {
                runs.push((next, start - next, None));
            }
            let phys = (!e.unwritten).then_some(e.physical + (start - e.logical));
            runs.push((start, end - start, phys));
            next = end;
        }
        if next < nblocks {
            runs.push((next, nblocks - next, None));
        }
        for (lblk, count, phys) in runs {
            let mut done = 0u64;
            while done < count {
                let n = (count - done).min(chunk_blocks);
                let off = (lblk + done) * bs;
                let len = (n * bs) as usize;
                self.pt.resize(len, 0);
                let valid = (size - off).min(len as u64) as usize;
                read_full_at(&file, &mut self.pt[..valid], off)
                    .map_err(|e| format!("read at {off}: {e}"))?;
                self.pt[valid..].fill(0);
                if tracking {
                    let first = (off / du.max(1)) as usize;
                    for (k, unit) in self.pt[..len].chunks(du.max(1) as usize).enumerate() {
                        let d = unit_digest(unit);
                        if let Some(rec) = &checked
                            && rec.get(first + k) != Some(&d)
                            && (first + k) as u64 * du < size
                        {
                            r.outcome = Outcome::Mismatch {
                                offset: (first + k) as u64 * du,
                                detail: format!(
                                    "plaintext of data unit {} differs from the manifest (changed on disk)",
                                    first + k
                                ),
                            };
                            return Ok(());
                        }
                        self.digests.push(d);
                    }
                }
                match phys {
                    None => {
                        if let Some(i) = self.pt[..valid].iter().position(|&b| b != 0) {
                            r.outcome = Outcome::Mismatch {
                                offset: off + i as u64,
                                detail: "unmapped block (hole) reads as non-zero data".into(),
                            };
                            return Ok(());
                        }
                    }
                    Some(p) => {
                        self.ct.resize(len, 0);
                        self.fs
                            .read_blocks(p + done, &mut self.ct[..len])
                            .map_err(|e| e.to_string())?;
                        crypt
                            .encrypt_data_units(
                                (lblk + done) * units_per_block,
                                &mut self.pt[..len],
                            )
                            .map_err(|e| format!("encrypt: {e}"))?;
                        if let Some(i) = first_diff(&self.pt[..len], &self.ct[..len]) {
                            r.outcome = Outcome::Mismatch {
                                offset: off + i as u64,
                                detail: format!(
                                    "ciphertext differs in data unit {}",
                                    (off + i as u64) / du.max(1)
                                ),
                            };
                            return Ok(());
                        }
                    }
                }
                r.bytes += valid as u64;
                done += n;
            }
        }
        if let Some(rec) = self.opts.record.as_deref_mut() {
            let units = size.div_ceil(du.max(1)) as usize;
            self.digests.truncate(units);
            rec.files
                .insert(rel, (du as u32, std::mem::take(&mut self.digests)));
        }
        Ok(())
    }

    fn judge_dir(
        &mut self,
        path: &Path,
        inode: &Inode,
        crypt: &InodeCrypt,
        r: &mut ObjectReport,
    ) -> Result<(), String> {
        if inode.flags & EXT4_CASEFOLD_FL != 0 {
            return Err("casefolded encrypted directories are not supported by verify".into());
        }
        let disk = self.fs.dir_entries(inode).map_err(|e| e.to_string())?;
        let mut by_ino: HashMap<u32, Vec<&[u8]>> = HashMap::new();
        for d in &disk {
            by_ino.entry(d.ino).or_default().push(&d.name);
        }
        let mut names = 0usize;
        let mut entries: Vec<(Vec<u8>, u64)> = Vec::new();
        for e in std::fs::read_dir(path).map_err(|e| format!("cannot list: {e}"))? {
            let e = e.map_err(|e| format!("cannot list: {e}"))?;
            use std::os::unix::ffi::OsStrExt;
            entries.push((e.file_name().as_bytes().to_vec(), e.ino()));
        }
        entries.sort();
        for (name, ino) in &entries {
            names += 1;
            // The name as a lookup would prepare it (the hooks are the one
            // entry point for names): with the key, its exact ciphertext.
            let wanted = FscryptName::for_lookup(Some(crypt), name)
                .map_err(|e| format!("encrypt name {:?}: {e}", String::from_utf8_lossy(name)))?;
            let expected = wanted.disk_name().unwrap_or_default();
            r.bytes += expected.len() as u64;
            let cands = u32::try_from(*ino).ok().and_then(|i| by_ino.get(&i));
            let Some(cands) = cands else {
                r.outcome = Outcome::Mismatch {
                    offset: 0,
                    detail: format!(
                        "entry {:?} (inode {ino}) has no on-disk directory entry",
                        String::from_utf8_lossy(name)
                    ),
                };
                return Ok(());
            };
            if cands.iter().any(|c| wanted.matches(c)) {
                continue;
            }
            let off = first_diff(expected, cands[0]).unwrap_or(0);
            r.outcome = Outcome::Mismatch {
                offset: off as u64,
                detail: format!(
                    "stored name of entry {:?} (inode {ino}) differs",
                    String::from_utf8_lossy(name)
                ),
            };
            return Ok(());
        }
        if names != disk.len() {
            r.outcome = Outcome::Mismatch {
                offset: 0,
                detail: format!("{} on-disk entries but {names} listed", disk.len()),
            };
        }
        Ok(())
    }

    fn judge_symlink(
        &mut self,
        path: &Path,
        inode: &Inode,
        crypt: &InodeCrypt,
        r: &mut ObjectReport,
    ) -> Result<(), String> {
        use std::os::unix::ffi::OsStrExt;
        let target = std::fs::read_link(path).map_err(|e| format!("cannot read link: {e}"))?;
        let expected = crypt
            .encrypt_symlink(target.as_os_str().as_bytes(), self.block_size as usize)
            .map_err(|e| format!("encrypt target: {e}"))?;
        let area = self.fs.symlink_area(inode).map_err(|e| e.to_string())?;
        r.bytes = expected.len() as u64;
        let stored = &area[..expected.len().min(area.len())];
        if let Some(i) = first_diff(&expected, stored) {
            r.outcome = Outcome::Mismatch {
                offset: i as u64,
                detail: "stored symlink blob differs".into(),
            };
        } else if inode.size + 1 != expected.len() as u64 {
            r.outcome = Outcome::Mismatch {
                offset: 0,
                detail: format!(
                    "i_size {} but the blob is {} bytes (+NUL)",
                    inode.size,
                    expected.len() - 1
                ),
            };
        }
        Ok(())
    }
}

fn read_full_at(f: &File, buf: &mut [u8], off: u64) -> std::io::Result<()> {
    f.read_exact_at(buf, off)
}
