//! The walk of [`super::check`]: one backing directory at a time, through
//! directory file descriptors, never following a symlink.

use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;

use fscrypt::{
    Context, ContextV2, FileType as CryptType, InodeCrypt, InodeParams, MasterKey, PolicyV2,
};
use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use super::{Action, ConflictCopy, Fix, FsckError, Kind, Options, Problem, Report, show_bytes};
use crate::config::CONFIG_NAME;
use crate::conflict;
use crate::error::Corruption;
use crate::integrity::{names as tagged, symlinks};
use crate::layout::{
    self, CLEAN_MARKER, CONTEXT_SIZE, DIR_META_NAME, EntryName, Format, HEADER_SIZE, HEADER_USED,
    Header, HeaderKind, LONG_NAME_SUFFIX, NAME_MAX, SYMLINK_MAX_BLOB_STORED, SYMLINK_STORE_DIR,
};
use crate::leftovers::{self, MAX_DEPTH};
use crate::unlock::FS_BLOCK_SIZE;

mod entry;
mod store;
mod tags;

const USER_DATA: &str = "the object's own bytes are damaged: restore it from a backup (it reads as an I/O error through a mount)";
const NOT_A_CRASH: &str =
    "no crash leaves this: check what else writes into the vault, restore from a backup";

fn errno(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

/// Opens the backing root.
pub(super) fn open_root(cipherdir: &Path) -> Result<OwnedFd, FsckError> {
    rustix::fs::open(
        cipherdir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| FsckError::Open {
        path: cipherdir.to_owned(),
        source: errno(e),
    })
}

/// Tries the vault lock ([`crate::lock::VaultLock`]) on `root`: `None`
/// when another process holds it. The lock lives as long as the returned
/// lock or `root`, whichever is closed last.
pub(super) fn try_lock(
    root: &OwnedFd,
    cipherdir: &Path,
) -> Result<Option<crate::lock::VaultLock>, FsckError> {
    use crate::lock::{LockError, VaultLock};
    VaultLock::try_on(root.as_fd(), cipherdir).map_err(|e| match e {
        LockError::Open { path, source } => FsckError::Open { path, source },
        LockError::Lock { path, source } => FsckError::Lock { path, source },
        LockError::Held(path) | LockError::HeldExclusively(path) => FsckError::Mounted(path),
    })
}

/// Opens the entry `name` (one component) of the backing directory `dir`
/// with `flags` (plus `O_NOFOLLOW | O_CLOEXEC`): [`safe_open::open_entry`],
/// which never follows a symlink, a magic link or `..`; a mount point is
/// opened (the walk compares devices where it matters). A lasting rename
/// race takes the `openat` fallback instead of failing.
fn open_at(dir: BorrowedFd<'_>, name: &[u8], flags: OFlags, mode: Mode) -> Result<OwnedFd, Errno> {
    use safe_open::{Error, Mounts};
    match safe_open::open_entry(dir, name, flags, mode, Mounts::Cross) {
        Err(Error::Raced) => safe_open::open_fallback(dir, name, flags, mode, Mounts::Cross),
        r => r,
    }
    .map_err(Error::errno)
}

/// Opens `name` in `dir` without following a symlink and without opening
/// anything but a regular file: first as `O_PATH` ([`open_at`]), then (when
/// `fstat` says regular file) reopened through `/proc/self/fd`. `Ok(None)`
/// for another file type.
fn open_regular(
    dir: BorrowedFd<'_>,
    name: &[u8],
    write: bool,
) -> Result<Option<(File, Stat)>, Errno> {
    let path = open_at(dir, name, OFlags::PATH, Mode::empty())?;
    let st = rustix::fs::fstat(&path)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Ok(None);
    }
    let flags = if write { OFlags::RDWR } else { OFlags::RDONLY };
    let proc = format!("/proc/self/fd/{}", path.as_raw_fd());
    let fd = match rustix::fs::openat(
        CWD,
        proc.as_str(),
        flags | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        // Without /proc: a regular file a moment ago; O_NONBLOCK and the
        // fstat below keep a FIFO swapped in meanwhile from blocking us.
        Err(Errno::NOENT) => open_at(
            dir,
            name,
            flags | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
        )?,
        Err(e) => return Err(e),
    };
    let st2 = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(st2.st_mode) != FileType::RegularFile
        || st2.st_ino != st.st_ino
        || st2.st_dev != st.st_dev
    {
        return Ok(None);
    }
    Ok(Some((File::from(fd), st2)))
}

/// Asks the kernel, from a background thread, to start reading the header
/// of every regular file among `entries` of `dir` (`POSIX_FADV_WILLNEED` on
/// its first 4096 bytes), so that on a cold cache the walk's header reads
/// find their blocks on the way instead of waiting for one random read
/// each. Files are opened exactly as the walk opens them
/// ([`open_regular`]: no symlink followed, nothing but a regular file);
/// failures are ignored (it is only a hint). The thread ends by itself.
fn read_ahead(dir: BorrowedFd<'_>, entries: &[(Vec<u8>, FileType)]) {
    let names: Vec<Vec<u8>> = entries
        .iter()
        .filter(|(_, t)| *t == FileType::RegularFile)
        .map(|(n, _)| n.clone())
        .collect();
    if names.len() < 16 {
        return;
    }
    let Ok(dir) = rustix::io::fcntl_dupfd_cloexec(dir, 0) else {
        return;
    };
    let _ = std::thread::Builder::new()
        .name("fsck-read-ahead".into())
        .spawn(move || {
            for name in names {
                if let Ok(Some((f, _))) = open_regular(dir.as_fd(), &name, false) {
                    let _ = rustix::fs::fadvise(
                        &f,
                        0,
                        std::num::NonZeroU64::new(HEADER_SIZE),
                        rustix::fs::Advice::WillNeed,
                    );
                }
            }
        });
}

/// Reads at most `max` bytes from offset 0.
fn read_bounded(f: &File, max: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; max];
    let mut n = 0;
    while n < max {
        match f.read_at(&mut buf[n..], n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(n);
    Ok(buf)
}

fn corruption_kind(c: Corruption) -> Kind {
    match c {
        Corruption::ShortHeader => Kind::HeaderTruncated,
        Corruption::BadMagic => Kind::BadMagic,
        Corruption::UnknownVersion(_) => Kind::BadVersion,
        Corruption::UnknownKind(_) => Kind::BadKind,
        Corruption::BadHeaderField => Kind::BadHeaderField,
        Corruption::BadChecksum => Kind::BadChecksum,
        Corruption::BadContext => Kind::BadContext,
        Corruption::BadLength => Kind::BadLength,
        Corruption::BadName => Kind::BadName,
        Corruption::BadLongName => Kind::BadSideFile,
        Corruption::BadSymlink => Kind::BadSymlink,
        Corruption::MissingDirMeta => Kind::DirWithoutMetadata,
        // Format 3's own findings are reported by its checks, not through
        // this mapping (the engine's reads produce these).
        Corruption::BadTag(_)
        | Corruption::BadRecord(_)
        | Corruption::Unbound
        | Corruption::RolledBack { .. }
        | Corruption::BadHint => Kind::BadLength,
        Corruption::BadNameTag => Kind::BadNameTag,
        Corruption::BadSymlinkTag => Kind::BadSymlinkTag,
    }
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}/{name}")
    }
}

fn join_plain(parent: &Option<String>, name: &str) -> Option<String> {
    parent.as_ref().map(|p| {
        if p == "/" {
            format!("/{name}")
        } else {
            format!("{p}/{name}")
        }
    })
}

/// One directory being checked.
struct Dir<'d> {
    fd: BorrowedFd<'d>,
    /// Backing path relative to the root.
    backing: String,
    /// Path as the mount shows it.
    plain: Option<String>,
    depth: usize,
    /// The directory's nonce (from its `fscrypt.dir`), once read: format
    /// 3 bindings are MACs under it.
    nonce: Option<[u8; 16]>,
}

struct Walker<'a> {
    policy: PolicyV2,
    master: Option<&'a MasterKey>,
    opts: &'a Options<'a>,
    du: u64,
    /// The vault's format (the version byte of the root's `fscrypt.dir`).
    format: Format,
    root_dev: u64,
    report: Report,
    /// Store ids named by the markers of backing symlinks.
    referenced: HashSet<Vec<u8>>,
    /// The store, when it is a directory.
    store: Option<OwnedFd>,
    /// Part of the tree was not walked: unreferenced store objects may be
    /// referenced from there, so they are not removed.
    incomplete: bool,
    /// A repair a recovery pass would also do failed or was not made: the
    /// clean marker is not written.
    recovery_left: bool,
    /// Format 3 with the key: the MAC keys and the files with several
    /// links ([`tags`]).
    integrity: Option<tags::Integrity>,
    /// [`super::file_nonces`]: the (shown path, generation-store slot) of
    /// every regular file whose path is known (two per file with the key:
    /// its slot under this name and its nonce alone,
    /// [`crate::integrity::generations::slot`]; the nonce alone without
    /// it); files are not checked further.
    nonces: Option<FileNonces>,
}

pub(super) fn run(
    cipherdir: &Path,
    policy: &PolicyV2,
    opts: &Options<'_>,
) -> Result<Report, FsckError> {
    run_with(cipherdir, policy, opts, false).map(|(r, _)| r)
}

/// (shown path, generation-store slot) of regular files, in walk order.
pub(super) type FileNonces = Vec<(String, [u8; 16])>;

/// [`run`], and with `collect` the nonces of [`Walker::nonces`].
pub(super) fn run_with(
    cipherdir: &Path,
    policy: &PolicyV2,
    opts: &Options<'_>,
    collect: bool,
) -> Result<(Report, FileNonces), FsckError> {
    let root = open_root(cipherdir)?;
    // Held for the whole run (dropped with `root` at its end).
    let _lock = if opts.repair {
        match try_lock(&root, cipherdir)? {
            Some(lock) => Some(lock),
            None => return Err(FsckError::Mounted(cipherdir.to_owned())),
        }
    } else {
        None
    };
    let root_st = rustix::fs::fstat(&root).map_err(|e| FsckError::Open {
        path: cipherdir.to_owned(),
        source: errno(e),
    })?;
    let du = match policy.log2_data_unit_size {
        0 => FS_BLOCK_SIZE as u64,
        u => 1u64 << u,
    };
    let format = vault_format(root.as_fd());
    let mut w = Walker {
        policy: *policy,
        master: opts.master,
        opts,
        du,
        format,
        root_dev: root_st.st_dev,
        report: Report {
            with_key: opts.master.is_some(),
            repair: opts.repair,
            ..Report::default()
        },
        referenced: HashSet::new(),
        store: None,
        incomplete: false,
        recovery_left: false,
        integrity: None,
        nonces: collect.then(Vec::new),
    };
    w.start_integrity();
    w.open_store(root.as_fd());
    w.check_dir(
        &Dir {
            fd: root.as_fd(),
            backing: String::new(),
            plain: Some("/".to_owned()),
            depth: 0,
            nonce: None,
        },
        root_st.st_ino,
    );
    w.finish_integrity();
    w.check_store();
    w.check_clean_marker(root.as_fd());
    let nonces = w.nonces.take().unwrap_or_default();
    Ok((w.report, nonces))
}

/// The vault's format: the version byte of the root's `fscrypt.dir` (opened
/// as every file of the walk is). A root without a readable one (reported
/// by the walk) is checked by the rules of the latest format.
fn vault_format(root: BorrowedFd<'_>) -> Format {
    match open_regular(root, DIR_META_NAME.as_bytes(), false) {
        Ok(Some((f, _))) => read_bounded(&f, HEADER_USED)
            .ok()
            .and_then(|b| Header::parse_format(&b, HeaderKind::Directory).ok())
            .unwrap_or(Format::LATEST),
        _ => Format::LATEST,
    }
}

impl Walker<'_> {
    fn push(
        &mut self,
        kind: Kind,
        backing: String,
        path: Option<String>,
        detail: String,
        action: Action,
    ) {
        self.report.problems.push(Problem {
            kind,
            backing,
            path,
            detail,
            action,
            unit: None,
        });
    }

    /// A problem that `--repair` fixes with `fix` (run by `apply`).
    fn fixable(
        &mut self,
        kind: Kind,
        backing: String,
        path: Option<String>,
        detail: String,
        fix: Fix,
        apply: impl FnOnce() -> io::Result<()>,
    ) -> bool {
        let (action, ok) = if self.opts.repair {
            match apply() {
                Ok(()) => (Action::Repaired(fix), true),
                Err(e) => (Action::RepairFailed(fix, e.to_string()), false),
            }
        } else {
            (Action::Repairable(fix), false)
        };
        if self.opts.repair && !ok && fix != Fix::WriteCleanMarker && fix != Fix::Truncate {
            self.recovery_left = true;
        }
        self.push(kind, backing, path, detail, action);
        ok
    }

    fn unreadable(
        &mut self,
        backing: String,
        path: Option<String>,
        what: &str,
        e: impl std::fmt::Display,
    ) {
        self.push(
            Kind::Unreadable,
            backing,
            path,
            format!("cannot {what}: {e}"),
            Action::NotRepaired("check its permissions and the backing filesystem"),
        );
    }

    /// A stored context as the vault's (`None`: of another policy, or, as
    /// `ctx` says with `None`, not a v2 context at all).
    fn context_ok(&self, ctx: Option<ContextV2>) -> Option<Context> {
        ctx.filter(|c| c.policy == self.policy).map(Context::V2)
    }

    fn crypt(&self, ctx: &Context, t: CryptType, ino: u64) -> Option<Result<InodeCrypt, String>> {
        let master = self.master?;
        let params = InodeParams {
            file_type: t,
            ino,
            fs_uuid: [0u8; 16],
            fs_block_size: FS_BLOCK_SIZE,
        };
        Some(InodeCrypt::new(master, ctx, &params).map_err(|e| e.to_string()))
    }

    /// Reads and checks a directory's `fscrypt.dir`: its context, or `None`
    /// (with the problem recorded, except when it is missing).
    fn dir_meta(&mut self, d: &Dir<'_>, present: bool) -> Option<Context> {
        if !present {
            return None;
        }
        let backing = join(&d.backing, DIR_META_NAME);
        let f = match open_regular(d.fd, DIR_META_NAME.as_bytes(), false) {
            Ok(Some((f, _))) => f,
            Ok(None) => {
                self.push(
                    Kind::WrongType,
                    backing,
                    d.plain.clone(),
                    "fscrypt.dir is not a regular file".into(),
                    Action::NotRepaired(NOT_A_CRASH),
                );
                return None;
            }
            Err(e) => {
                self.unreadable(
                    backing,
                    d.plain.clone(),
                    "open the directory metadata",
                    errno(e),
                );
                return None;
            }
        };
        let b = match read_bounded(&f, HEADER_USED) {
            Ok(b) => b,
            Err(e) => {
                self.unreadable(backing, d.plain.clone(), "read the directory metadata", e);
                return None;
            }
        };
        let why = "the directory's context is damaged: its entries cannot be listed; restore the directory from a backup";
        let ctx = match Header::parse_as(&b, HeaderKind::Directory, self.format) {
            Ok(h) => Some(h.context),
            // A sound header whose context bytes are no v2 context.
            Err(Corruption::BadContext) => None,
            Err(c) => {
                self.push(
                    corruption_kind(c),
                    backing,
                    d.plain.clone(),
                    format!("directory metadata: {c}"),
                    Action::NotRepaired(why),
                );
                return None;
            }
        };
        match self.context_ok(ctx) {
            Some(c) => Some(c),
            None => {
                self.push(
                    Kind::BadContext,
                    backing,
                    d.plain.clone(),
                    "directory context invalid or of another policy".into(),
                    Action::NotRepaired(why),
                );
                None
            }
        }
    }

    fn check_dir(&mut self, d: &Dir<'_>, ino: u64) {
        self.report.stats.directories += 1;
        let mut entries = match leftovers::dir_entries(d.fd) {
            Ok(e) => e,
            Err(e) => {
                self.incomplete = true;
                self.unreadable(d.backing.clone(), d.plain.clone(), "list the directory", e);
                return;
            }
        };
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        read_ahead(d.fd, &entries);
        let names: HashSet<&[u8]> = entries.iter().map(|(n, _)| n.as_slice()).collect();
        let has_meta = names.contains(DIR_META_NAME.as_bytes());
        let ctx = self.dir_meta(d, has_meta);
        let d = &Dir {
            fd: d.fd,
            backing: d.backing.clone(),
            plain: d.plain.clone(),
            depth: d.depth,
            nonce: match &ctx {
                Some(Context::V2(c)) => Some(c.nonce),
                _ => None,
            },
        };
        let dir_crypt = match &ctx {
            Some(c) => match self.crypt(c, CryptType::Directory, ino) {
                Some(Ok(k)) => Some(k),
                Some(Err(e)) => {
                    self.push(
                        Kind::BadContext,
                        join(&d.backing, DIR_META_NAME),
                        d.plain.clone(),
                        format!("the directory key cannot be derived: {e}"),
                        Action::NotRepaired(USER_DATA),
                    );
                    None
                }
                None => None,
            },
            None => None,
        };
        // Names can be shown only when the directory's context is readable
        // (with the key: when its key could be derived).
        let names_shown = ctx.is_some() && (self.master.is_none() || dir_crypt.is_some());
        // Format 3: names are tagged under the directory's nonce.
        let nonce = match &ctx {
            Some(fscrypt::Context::V2(c)) => Some(c.nonce),
            _ => None,
        };
        let mut user = 0u64;
        for (name, t) in &entries {
            let shown = show_bytes(name);
            let backing = join(&d.backing, &shown);
            match layout::classify_entry(name) {
                (EntryName::Internal, _) => self.check_internal(d, name, *t, &names, backing),
                (EntryName::Invalid | EntryName::Conflict(_), _) => {
                    user += 1;
                    self.push(
                        Kind::BadName,
                        backing,
                        None,
                        "not a base64url ciphertext name of at least 16 bytes (a foreign or damaged name); invisible through a mount".into(),
                        Action::NotRepaired("it may be someone's file: move it out of the vault by hand if it is not damage"),
                    );
                }
                (written @ (EntryName::Short(_) | EntryName::Long), copy) => {
                    // A conflict copy is the entry it copies under another
                    // backing name: its ciphertext (and a long name's side
                    // file) is the original's, its shown name carries the
                    // tool's marker. Its side file is the original's, so a
                    // repair never removes it with the copy.
                    let marker = copy.map(|c| (c.original, c.marker));
                    let long = written == EntryName::Long;
                    let ct = match written {
                        EntryName::Short(stored) => match self.format {
                            Format::V3 => self.open_tagged(&stored, nonce, &backing),
                            _ => Some(stored),
                        },
                        _ => {
                            let entry = marker
                                .as_ref()
                                .map_or(name.as_slice(), |(o, _)| o.as_slice());
                            self.long_ciphertext(d, entry, &names, backing.clone(), nonce)
                        }
                    };
                    let plain_name = match (&ct, names_shown) {
                        (Some(ct), true) => self.check_name(ct, dir_crypt.as_ref(), &backing, d),
                        _ => None,
                    };
                    let plain_name = match &marker {
                        Some((_, m)) => {
                            plain_name.map(|n| show_bytes(&conflict::insert(n.as_bytes(), m)))
                        }
                        None => plain_name,
                    };
                    let path = plain_name.and_then(|n| join_plain(&d.plain, &n));
                    if marker.is_some() {
                        self.report.conflicts.push(ConflictCopy {
                            backing: backing.clone(),
                            path: path.clone(),
                        });
                    }
                    if self.check_entry(d, name, *t, backing, path, long && marker.is_none()) {
                        user += 1;
                    }
                }
            }
        }
        if !has_meta {
            if user == 0 && d.depth > 0 {
                let fd = d.fd;
                let policy = self.policy;
                let format = self.format;
                self.fixable(
                    Kind::EmptyDirWithoutMetadata,
                    d.backing.clone(),
                    d.plain.clone(),
                    "an empty directory without fscrypt.dir (an interrupted rmdir or rename over it); it reads as an I/O error".into(),
                    Fix::RestoreDirMeta,
                    || {
                        let mut nonce = [0u8; 16];
                        fscrypt_crypto::random_bytes(&mut nonce).map_err(io::Error::other)?;
                        leftovers::write_dir_meta(fd, &ContextV2 { policy, nonce }, format)
                    },
                );
            } else {
                self.push(
                    Kind::DirWithoutMetadata,
                    d.backing.clone(),
                    d.plain.clone(),
                    if d.depth == 0 {
                        "the root has no fscrypt.dir".into()
                    } else {
                        format!("a directory with {user} entries has no fscrypt.dir: its names cannot be decrypted")
                    },
                    Action::NotRepaired("the directory's context (and with it its names) is lost; restore fscrypt.dir from a backup"),
                );
            }
        }
    }

    /// An internal (`fscrypt.*`) name.
    fn check_internal(
        &mut self,
        d: &Dir<'_>,
        name: &[u8],
        t: FileType,
        names: &HashSet<&[u8]>,
        backing: String,
    ) {
        let root = d.depth == 0;
        if name == DIR_META_NAME.as_bytes() {
            return;
        }
        if leftovers::is_temporary(name) {
            let t = if t == FileType::Unknown {
                rustix::fs::statat(d.fd, name, AtFlags::SYMLINK_NOFOLLOW)
                    .map(|s| FileType::from_raw_mode(s.st_mode))
                    .unwrap_or(FileType::Unknown)
            } else {
                t
            };
            let fix = if t == FileType::Directory {
                Fix::RemoveTree
            } else {
                Fix::Remove
            };
            let fd = d.fd;
            self.fixable(
                Kind::Temporary,
                backing,
                None,
                "an object whose creation was interrupted (never shown)".into(),
                fix,
                || leftovers::remove_entry(fd, name, t),
            );
            return;
        }
        if let Some(owner) = leftovers::side_file_owner(name) {
            if !leftovers::side_file_in_use(owner, names) {
                let fd = d.fd;
                self.fixable(
                    Kind::OrphanSideFile,
                    backing,
                    None,
                    "a long-name side file whose entry is gone".into(),
                    Fix::Remove,
                    || leftovers::remove_entry(fd, name, FileType::RegularFile),
                );
            }
            return;
        }
        if root && (name == CLEAN_MARKER.as_bytes() || name == SYMLINK_STORE_DIR.as_bytes()) {
            return;
        }
        if root && name == CONFIG_NAME.as_bytes() {
            return;
        }
        if root && name.starts_with(CONFIG_NAME.as_bytes()) {
            self.push(
                Kind::ConfigTemporary,
                backing,
                None,
                "left by an interrupted write of the vault config".into(),
                Action::NotRepaired(
                    "the config in use is fscrypt.vault.json; remove this file by hand once no fscrypt-rs command runs",
                ),
            );
            return;
        }
        // A sync tool's copy of vault metadata (`fscrypt.dir`, a side file,
        // the config): never listed through a mount, not damage.
        if conflict::split(name).is_some() {
            self.report.conflicts.push(ConflictCopy {
                backing,
                path: None,
            });
            return;
        }
        self.push(
            Kind::UnknownInternalName,
            backing,
            None,
            "a fscrypt.* name this version does not write".into(),
            Action::NotRepaired(
                "written by a newer version or by hand: leave it or remove it by hand",
            ),
        );
    }

    /// Format 3: the name ciphertext of an inline backing name whose
    /// base64url decoding is `stored` (`ct ‖ tag`), its tag checked under
    /// the directory's `nonce` with the key; `None` with the problem
    /// recorded (the name is then never decrypted, so no garbage plaintext
    /// is shown). Without the key or the directory's nonce the tag is only
    /// split off.
    fn open_tagged(
        &mut self,
        stored: &[u8],
        nonce: Option<[u8; 16]>,
        backing: &str,
    ) -> Option<Vec<u8>> {
        let parent = nonce.unwrap_or_default();
        let keys = nonce.and(self.mac_keys());
        match tagged::open_inline(keys, &parent, stored) {
            Ok(ct) => Some(ct),
            Err(c) => {
                self.name_problem(c, backing.to_owned());
                None
            }
        }
    }

    /// Records a format 3 name that does not open ([`tagged`]).
    fn name_problem(&mut self, c: Corruption, backing: String) {
        let (kind, detail) = match c {
            Corruption::BadNameTag => (
                Kind::BadNameTag,
                "the name's tag does not verify under its directory: the backing name was changed, or moved here from another directory; never listed through a mount".to_owned(),
            ),
            Corruption::BadLongName => (
                Kind::BadSideFile,
                "the side file does not hold a long ciphertext and tag hashing to its entry's name".to_owned(),
            ),
            c => (
                corruption_kind(c),
                format!("{c}: not a name this format writes; never listed through a mount"),
            ),
        };
        self.push(
            kind,
            backing,
            None,
            detail,
            Action::NotRepaired(
                "the entry is not listed through a mount: restore it (or its directory) from a backup, or move it out of the vault by hand",
            ),
        );
    }

    /// The ciphertext of a long-name entry from its side file (format 3:
    /// its tag checked under the directory's `nonce` with the key).
    fn long_ciphertext(
        &mut self,
        d: &Dir<'_>,
        name: &[u8],
        names: &HashSet<&[u8]>,
        backing: String,
        nonce: Option<[u8; 16]>,
    ) -> Option<Vec<u8>> {
        let mut side = name.to_vec();
        side.extend_from_slice(LONG_NAME_SUFFIX.as_bytes());
        let side_backing = format!("{backing}{LONG_NAME_SUFFIX}");
        let why = "the entry's name is lost (it is not listed through a mount); restore the side file from a backup";
        if !names.contains(side.as_slice()) {
            self.push(
                Kind::LongNameWithoutSideFile,
                backing,
                None,
                "a long-name entry without its side file".into(),
                Action::NotRepaired(why),
            );
            return None;
        }
        let f = match open_regular(d.fd, &side, false) {
            Ok(Some((f, _))) => f,
            Ok(None) => {
                self.push(
                    Kind::WrongType,
                    side_backing,
                    None,
                    "a long-name side file that is not a regular file".into(),
                    Action::NotRepaired(why),
                );
                return None;
            }
            Err(e) => {
                self.unreadable(side_backing, None, "open the side file", errno(e));
                return None;
            }
        };
        let ct = match read_bounded(&f, NAME_MAX + tagged::NAME_TAG_SIZE + 1) {
            Ok(b) => b,
            Err(e) => {
                self.unreadable(side_backing, None, "read the side file", e);
                return None;
            }
        };
        let entry = String::from_utf8_lossy(name);
        if self.format == Format::V3 {
            let parent = nonce.unwrap_or_default();
            let keys = nonce.and(self.mac_keys());
            return match tagged::open_side_file(keys, &parent, &entry, &ct) {
                Ok(ct) => Some(ct),
                Err(c) => {
                    self.name_problem(c, side_backing);
                    None
                }
            };
        }
        if layout::check_long_ciphertext(&entry, &ct).is_err() {
            self.push(
                Kind::BadSideFile,
                side_backing,
                None,
                format!(
                    "the side file ({} bytes) does not hash to its entry's name",
                    ct.len()
                ),
                Action::NotRepaired(why),
            );
            return None;
        }
        Some(ct)
    }
}
