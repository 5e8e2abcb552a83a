//! `fscrypt-rs fsck`: checks every entry of a vault's backing store against
//! the format (`docs/vault-format.md`), and with `repair` removes what an
//! interrupted operation left behind — the same things, by the same rules
//! ([`crate::leftovers`]), as the mount's recovery pass — and nothing else.
//!
//! The backing store is read as untrusted input: every object is opened
//! relative to its directory's file descriptor with `O_NOFOLLOW` (regular
//! files first as `O_PATH`, checked to be regular files, then reopened, so a
//! device node or FIFO planted under a name is never opened), reads are
//! bounded, and nothing in the bytes can make the check panic, loop or leave
//! the vault. Without the master key the check is structural and paths are
//! shown with the kernel's no-key names; with it every name (and symlink
//! target) is also decrypted, names are re-encrypted and must give back
//! their own ciphertext, and paths are shown in plaintext.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let vault = fscrypt_vault::Vault::open("/srv/cipher".as_ref())?;
//! let report = fscrypt_vault::fsck::check(
//!     vault.dir(),
//!     vault.policy(),
//!     &fscrypt_vault::fsck::Options::default(),
//! )?;
//! for p in &report.problems {
//!     println!("{}: {} ({})", p.kind, p.backing, p.detail);
//! }
//! # Ok(()) }
//! ```

mod walk;

use std::fmt;
use std::path::{Path, PathBuf};

use fscrypt::{MasterKey, PolicyV2};

/// What to check and whether to repair.
#[derive(Default)]
pub struct Options<'a> {
    /// The vault's master key: names and symlink targets are decrypted
    /// (and paths shown in plaintext) when present.
    pub master: Option<&'a MasterKey>,
    /// Remove (or restore) what is safe to ([`Fix`]); needs that no mount
    /// serves the vault (checked with the daemon's lock, see [`check`]).
    pub repair: bool,
    /// Report a missing clean-unmount marker (`fscrypt.clean`). Off while a
    /// mount serves the vault: a read-write mount removes the marker.
    pub check_clean_marker: bool,
}

/// One kind of damage or leftover. The names ([`Kind::as_str`]) are
/// stable: they are printed and used in `--json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kind {
    /// A `fscrypt.tmp.*` entry: an object whose creation was interrupted.
    Temporary,
    /// A long-name side file whose entry is gone.
    OrphanSideFile,
    /// A 0-byte backing regular file: it never held a header.
    HeaderlessFile,
    /// An empty directory without `fscrypt.dir` (interrupted rmdir).
    EmptyDirWithoutMetadata,
    /// A store object no symlink names.
    UnreferencedStoreObject,
    /// No `fscrypt.clean` in the root: the next mount runs the recovery pass.
    MissingCleanMarker,
    /// Data units stored past those covering the size (an extending write
    /// whose size update was lost; invisible).
    ExcessDataUnits,
    /// A header shorter than its 72 bytes.
    HeaderTruncated,
    /// A header without the `FSCRYPT\0` magic.
    BadMagic,
    /// A header of an unknown format version.
    BadVersion,
    /// A header of an unknown or unexpected kind.
    BadKind,
    /// A header whose region size or reserved bytes are wrong.
    BadHeaderField,
    /// A header whose checksum does not match.
    BadChecksum,
    /// A context that does not parse or is not of the vault's policy.
    BadContext,
    /// A backing file length that is not header + whole data units.
    BadLength,
    /// A name that is not base64url ciphertext (a foreign or damaged name).
    BadName,
    /// A ciphertext name of a length the policy's padding cannot produce.
    BadNameLength,
    /// A name that does not decrypt with the key.
    UndecryptableName,
    /// A name that decrypts but does not re-encrypt to itself.
    NonCanonicalName,
    /// Format 3: a backing name (or its long-name side file) whose tag does
    /// not verify with the key: changed, or moved from another directory
    /// (`docs/vault-format.md` §4b.6). Never listed by a mount.
    BadNameTag,
    /// A long-name entry without its side file.
    LongNameWithoutSideFile,
    /// A long-name side file that does not match its entry.
    BadSideFile,
    /// A directory without `fscrypt.dir` that has entries (or the root).
    DirWithoutMetadata,
    /// A symlink target that does not decode.
    BadSymlink,
    /// A symlink target that does not decrypt with the key.
    UndecryptableSymlink,
    /// Format 3: a symlink target (inline or its store object) whose tag
    /// does not verify with the key (`docs/vault-format.md`
    /// §4b.7). readlink through a mount is an I/O error.
    BadSymlinkTag,
    /// A `fscrypt.symlink.*` marker that is malformed.
    BadSymlinkMarker,
    /// A marker naming a store object that does not exist.
    MissingStoreObject,
    /// A store object that does not decode.
    BadStoreObject,
    /// `fscrypt.symlinks` that is not a directory or cannot be read.
    BadSymlinkStore,
    /// A `fscrypt.*` name this version does not know.
    UnknownInternalName,
    /// A config file left by an interrupted config write.
    ConfigTemporary,
    /// An internal entry of the wrong file type.
    WrongType,
    /// A backing directory on another filesystem (not descended).
    MountPoint,
    /// A directory nested deeper than the walk descends.
    TooDeep,
    /// An entry that could not be read.
    Unreadable,
    /// Format 3: neither file record (A or B) verifies.
    BadRecord,
    /// Format 3: a data unit inside the size that verifies under neither
    /// of its tag slots (torn by a power loss, or tampered), or non-zero
    /// bytes under an empty slot pair.
    BadUnitTag,
    /// Format 3: a file found under a name its record is not bound to
    /// (moved, renamed or swapped outside the vault).
    UnboundName,
    /// Format 3: a binding in a file's record that no name of the file
    /// matches (a crash between a rename or unlink and its record update).
    StaleBinding,
}

impl Kind {
    /// Every kind, in the order of the documentation.
    pub const ALL: &'static [Kind] = &[
        Kind::Temporary,
        Kind::OrphanSideFile,
        Kind::HeaderlessFile,
        Kind::EmptyDirWithoutMetadata,
        Kind::UnreferencedStoreObject,
        Kind::MissingCleanMarker,
        Kind::ExcessDataUnits,
        Kind::HeaderTruncated,
        Kind::BadMagic,
        Kind::BadVersion,
        Kind::BadKind,
        Kind::BadHeaderField,
        Kind::BadChecksum,
        Kind::BadContext,
        Kind::BadLength,
        Kind::BadName,
        Kind::BadNameLength,
        Kind::UndecryptableName,
        Kind::NonCanonicalName,
        Kind::BadNameTag,
        Kind::LongNameWithoutSideFile,
        Kind::BadSideFile,
        Kind::DirWithoutMetadata,
        Kind::BadSymlink,
        Kind::UndecryptableSymlink,
        Kind::BadSymlinkTag,
        Kind::BadSymlinkMarker,
        Kind::MissingStoreObject,
        Kind::BadStoreObject,
        Kind::BadSymlinkStore,
        Kind::UnknownInternalName,
        Kind::ConfigTemporary,
        Kind::WrongType,
        Kind::MountPoint,
        Kind::TooDeep,
        Kind::Unreadable,
        Kind::BadRecord,
        Kind::BadUnitTag,
        Kind::UnboundName,
        Kind::StaleBinding,
    ];

    /// The stable name of the kind (kebab-case).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Temporary => "temporary",
            Kind::OrphanSideFile => "orphan-side-file",
            Kind::HeaderlessFile => "headerless-file",
            Kind::EmptyDirWithoutMetadata => "empty-dir-without-metadata",
            Kind::UnreferencedStoreObject => "unreferenced-store-object",
            Kind::MissingCleanMarker => "missing-clean-marker",
            Kind::ExcessDataUnits => "excess-data-units",
            Kind::HeaderTruncated => "header-truncated",
            Kind::BadMagic => "bad-magic",
            Kind::BadVersion => "bad-version",
            Kind::BadKind => "bad-kind",
            Kind::BadHeaderField => "bad-header-field",
            Kind::BadChecksum => "bad-checksum",
            Kind::BadContext => "bad-context",
            Kind::BadLength => "bad-length",
            Kind::BadName => "bad-name",
            Kind::BadNameLength => "bad-name-length",
            Kind::UndecryptableName => "undecryptable-name",
            Kind::NonCanonicalName => "non-canonical-name",
            Kind::BadNameTag => "bad-name-tag",
            Kind::LongNameWithoutSideFile => "long-name-without-side-file",
            Kind::BadSideFile => "bad-side-file",
            Kind::DirWithoutMetadata => "dir-without-metadata",
            Kind::BadSymlink => "bad-symlink",
            Kind::UndecryptableSymlink => "undecryptable-symlink",
            Kind::BadSymlinkTag => "bad-symlink-tag",
            Kind::BadSymlinkMarker => "bad-symlink-marker",
            Kind::MissingStoreObject => "missing-store-object",
            Kind::BadStoreObject => "bad-store-object",
            Kind::BadSymlinkStore => "bad-symlink-store",
            Kind::UnknownInternalName => "unknown-internal-name",
            Kind::ConfigTemporary => "config-temporary",
            Kind::WrongType => "wrong-type",
            Kind::MountPoint => "mount-point",
            Kind::TooDeep => "too-deep",
            Kind::Unreadable => "unreadable",
            Kind::BadRecord => "bad-record",
            Kind::BadUnitTag => "bad-unit-tag",
            Kind::UnboundName => "unbound-name",
            Kind::StaleBinding => "stale-binding",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A repair `--repair` performs (only for leftovers a crash can produce,
/// never for a user's data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fix {
    /// Remove the entry (a temporary, orphan side file, store object).
    Remove,
    /// Remove the temporary directory and everything in it.
    RemoveTree,
    /// Remove the 0-byte file (and its side file for a long name).
    RemoveHeaderless,
    /// Give the empty directory a fresh `fscrypt.dir`.
    RestoreDirMeta,
    /// Cut the backing file to the data units that cover its size (what a
    /// read-write mount does when it next opens the file).
    Truncate,
    /// Write `fscrypt.clean` (after every other repair succeeded).
    WriteCleanMarker,
    /// Format 3: make a unit that fails its tag a hole (punch it, clear its
    /// slot pair): it then reads as zeros. Its bytes were lost anyway (a
    /// unit torn by a power loss never reads back; a tampered one is not
    /// the file's).
    ClearTornUnit,
    /// Format 3: rewrite the file's record without its stale bindings.
    DropStaleBindings,
}

impl Fix {
    /// What the repair does, as an imperative ("remove it").
    pub fn would(self) -> &'static str {
        match self {
            Fix::Remove => "remove it",
            Fix::RemoveTree => "remove it and everything in it",
            Fix::RemoveHeaderless => "remove it (it holds nothing)",
            Fix::RestoreDirMeta => "give it a fresh fscrypt.dir",
            Fix::Truncate => "cut off the data units past the size",
            Fix::WriteCleanMarker => "write it",
            Fix::ClearTornUnit => "make the unit a hole (it then reads as zeros)",
            Fix::DropStaleBindings => "drop the stale binding from the file's record",
        }
    }

    /// What the repair did ("removed").
    pub fn done(self) -> &'static str {
        match self {
            Fix::Remove | Fix::RemoveTree | Fix::RemoveHeaderless => "removed",
            Fix::RestoreDirMeta => "fresh fscrypt.dir written",
            Fix::Truncate => "cut off",
            Fix::WriteCleanMarker => "written",
            Fix::ClearTornUnit => "the unit is now a hole (reads as zeros)",
            Fix::DropStaleBindings => "record rewritten without it",
        }
    }
}

/// What happens (or happened) about a problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `--repair` would apply the fix (check only).
    Repairable(Fix),
    /// The fix was applied.
    Repaired(Fix),
    /// The fix was tried and failed (the error).
    RepairFailed(Fix, String),
    /// Not repaired, and why (what the user can do).
    NotRepaired(&'static str),
}

impl Action {
    /// Whether the problem is still there after this run.
    pub fn remains(&self) -> bool {
        !matches!(self, Action::Repaired(_))
    }

    /// A stable one-word status for `--json`: `repairable`, `repaired`,
    /// `repair-failed` or `not-repaired`.
    pub fn status(&self) -> &'static str {
        match self {
            Action::Repairable(_) => "repairable",
            Action::Repaired(_) => "repaired",
            Action::RepairFailed(..) => "repair-failed",
            Action::NotRepaired(_) => "not-repaired",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Repairable(fix) => write!(f, "--repair would {}", fix.would()),
            Action::Repaired(fix) => write!(f, "repaired: {}", fix.done()),
            Action::RepairFailed(fix, e) => {
                write!(f, "repair failed ({}): {e}", fix.would())
            }
            Action::NotRepaired(why) => write!(f, "not repaired: {why}"),
        }
    }
}

/// One problem found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What is wrong.
    pub kind: Kind,
    /// The backing path, relative to the cipher directory (`""` for the
    /// root itself), bytes that are not printable UTF-8 escaped as `\xNN`.
    pub backing: String,
    /// The path as the mount shows it, from its root (`/a/b`): plaintext
    /// with the key, no-key names without; `None` when it cannot be known
    /// (internal entries, a parent that cannot be decrypted).
    pub path: Option<String>,
    /// One line on what is wrong.
    pub detail: String,
    /// What `--repair` does or did about it.
    pub action: Action,
    /// The data unit the problem is about (format 3 unit checks), `None`
    /// for problems of a whole object.
    pub unit: Option<u64>,
}

/// Counts of what the check walked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Backing directories (the root included).
    pub directories: u64,
    /// Backing regular files (user files).
    pub files: u64,
    /// Backing symlinks.
    pub symlinks: u64,
    /// FIFOs, sockets and device nodes.
    pub special: u64,
    /// Objects in the symlink store.
    pub store_objects: u64,
}

/// A sync tool's conflict copy (issue 23): listed, not a problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConflictCopy {
    /// The backing path, relative to the cipher directory (as
    /// [`Problem::backing`]).
    pub backing: String,
    /// The path as the mount shows it: the plaintext (or no-key) name with
    /// the tool's marker, `None` when it cannot be known.
    pub path: Option<String>,
}

/// The result of [`check`].
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Every problem, in walk order (directories in name order).
    pub problems: Vec<Problem>,
    /// Conflict copies made by sync tools, in walk order: shown through a
    /// mount like any entry, listed here so that the user can merge them.
    pub conflicts: Vec<ConflictCopy>,
    /// What was walked.
    pub stats: Stats,
    /// Whether names were decrypted (the key was given).
    pub with_key: bool,
    /// Whether repairs were applied.
    pub repair: bool,
}

impl Report {
    /// Problems still there after this run (all of them without repair).
    pub fn remaining(&self) -> usize {
        self.problems.iter().filter(|p| p.action.remains()).count()
    }

    /// Problems repaired by this run.
    pub fn repaired(&self) -> usize {
        self.problems.len() - self.remaining()
    }

    /// Problems `--repair` would fix (check only).
    pub fn repairable(&self) -> usize {
        self.problems
            .iter()
            .filter(|p| matches!(p.action, Action::Repairable(_)))
            .count()
    }
}

/// Why the check could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FsckError {
    /// The backing root cannot be opened.
    #[error("{path}: {source}")]
    Open {
        /// The cipher directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A repair was asked for while a daemon holds the vault's lock.
    #[error(
        "{0} is mounted (an fscrypt-rs daemon holds its lock): unmount it before fsck --repair"
    )]
    Mounted(PathBuf),
    /// Locking the vault failed.
    #[error("locking {path}: {source}")]
    Lock {
        /// The cipher directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// Whether an fscrypt-rs daemon holds the lock of the vault at
/// `cipherdir` now ([`crate::lock::VaultLock`]: an advisory `flock` on the backing root, taken by the
/// mount for as long as it serves the vault; `fsck --repair` takes the same
/// lock, so no mount can start while it repairs).
///
/// # Errors
/// [`FsckError::Open`], [`FsckError::Lock`].
pub fn is_locked(cipherdir: &Path) -> Result<bool, FsckError> {
    let root = walk::open_root(cipherdir)?;
    Ok(walk::try_lock(&root, cipherdir)?.is_none())
}

/// Checks the vault whose backing root is `cipherdir` and whose root policy
/// is `policy` (from its config), repairing when `opts.repair`.
///
/// With `opts.repair` the vault's lock (see [`is_locked`]) is taken for the
/// whole run and [`FsckError::Mounted`] returned when a daemon holds it.
///
/// # Errors
/// [`FsckError`]: the root cannot be opened, or a repair on a mounted vault.
/// Problems inside the vault are never errors: they are in the [`Report`].
pub fn check(cipherdir: &Path, policy: &PolicyV2, opts: &Options<'_>) -> Result<Report, FsckError> {
    walk::run(cipherdir, policy, opts)
}

/// The regular files of the vault at `cipherdir` whose path is `under`
/// or below it (a path as the mount shows it, `/a/b`; `/` for all), with
/// the generation-store slots of each ([`crate::integrity::generations::slot`]
/// of its nonce under this name, with the key, and its nonce alone; one
/// pair per slot, a file's pairs adjacent): what `fscrypt-rs fsck
/// --accept-rollback` forgets in the [`crate::integrity::generations`]
/// store. Walks as [`check`] does (same names, conflict copies included)
/// without repairing; with `master` paths are plaintext, without it no-key
/// names. Files whose path cannot be shown are left out.
///
/// # Errors
/// As [`check`] without repair.
pub fn file_nonces(
    cipherdir: &Path,
    policy: &PolicyV2,
    master: Option<&MasterKey>,
    under: &str,
) -> Result<Vec<(String, [u8; 16])>, FsckError> {
    let opts = Options {
        master,
        repair: false,
        check_clean_marker: false,
    };
    let (_, all) = walk::run_with(cipherdir, policy, &opts, true)?;
    let base = under.trim_matches('/');
    Ok(all
        .into_iter()
        .filter(|(p, _)| {
            let rel = p.trim_start_matches('/');
            base.is_empty()
                || rel == base
                || rel.strip_prefix(base).is_some_and(|r| r.starts_with('/'))
        })
        .collect())
}

/// `fscrypt-rs fsck --accept-rollback`: forgets in `store` the generation
/// remembered for each regular file at or under `under`
/// ([`file_nonces`]), so that a restore made on purpose opens again
/// (`docs/vault-format.md` §4b.9), then compacts the log.
/// Returns the files forgotten (shown path, generation that was
/// remembered), in walk order; files nothing was remembered for are not
/// listed. Run it while no mount serves the vault (a mount keeps its own
/// copy of the store and rewrites the log at unmount).
///
/// # Errors
/// [`FsckError`] from the walk; [`FsckError::Open`] (with the store's
/// directory) when the store cannot be written.
pub fn accept_rollback(
    cipherdir: &Path,
    policy: &PolicyV2,
    master: Option<&MasterKey>,
    under: &str,
    store: &crate::integrity::generations::GenerationStore,
    store_dir: &Path,
) -> Result<Vec<(String, u64)>, FsckError> {
    use crate::integrity::generations::Seen;
    let files = file_nonces(cipherdir, policy, master, under)?;
    let mut accepted = Vec::new();
    let mut nonces = Vec::new();
    for (path, slot) in files {
        if let Seen::RolledBack { seen } = store.check(&slot, 0) {
            match accepted.last_mut() {
                Some((p, s)) if *p == path => *s = seen.max(*s),
                _ => accepted.push((path, seen)),
            }
            nonces.push(slot);
        }
    }
    let failed = |source| FsckError::Open {
        path: store_dir.to_owned(),
        source,
    };
    if !nonces.is_empty() {
        store.forget(&nonces).map_err(failed)?;
        store.compact().map_err(failed)?;
    }
    Ok(accepted)
}

/// Shows bytes as text: printable UTF-8 as it is, everything else (control
/// characters, invalid UTF-8, backslashes) escaped as `\xNN`, so a name can
/// neither garble a terminal nor be mistaken for another.
pub fn show_bytes(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() || c == '\\' {
                let mut buf = [0u8; 4];
                for byte in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\x{byte:02x}"));
                }
            } else {
                out.push(c);
            }
        }
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_distinct_and_shown_bytes_escape() {
        let names: std::collections::HashSet<_> = Kind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names.len(), Kind::ALL.len());
        assert_eq!(
            show_bytes(b"a\nb\\\xffc\xc3\xa9"),
            "a\\x0ab\\x5c\\xffc\u{e9}"
        );
    }
}
