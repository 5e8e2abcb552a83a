//! The crate's errors: [`Error`] for creating, opening and unlocking a vault,
//! [`Corruption`] for backing-store bytes that break the layout. Each message
//! is one line that says what is wrong and what to do.

use std::io;
use std::path::PathBuf;

use fscrypt::KeyIdentifier;

use crate::config::{CONFIG_NAME, ConfigError};
use crate::protector::ProtectorError;

/// Errors of vault creation ([`crate::Vault::init`], [`crate::create_root`]),
/// opening ([`crate::Vault::open`]) and unlocking.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The passphrase does not open any passphrase protector (AEAD
    /// authentication failed for each).
    #[error(
        "wrong passphrase: it opens none of this vault's passphrase protectors; check it and try again"
    )]
    WrongPassphrase,
    /// The key file does not open any key-file protector.
    #[error(
        "wrong key file: it opens none of this vault's key-file protectors; give the key file made for this vault"
    )]
    WrongKeyFile,
    /// The recovery key does not open any recovery-key protector.
    #[error(
        "wrong recovery key: it opens none of this vault's recovery-key protectors; give the recovery key shown when it was made"
    )]
    WrongRecoveryKey,
    /// A device or identity released a secret that opens none of this
    /// vault's protectors of its kind: the config's sealed record and
    /// wrapped key do not belong together (edited or mixed up).
    #[error(
        "the {0} protector released a secret that does not open this vault's key: the config was changed; unlock with another protector"
    )]
    WrongSealed(crate::config::ProtectorKind),
    /// A sealed protector was to be made from a kind that is not sealed or
    /// a record that is not a JSON object (a caller's bug).
    #[error("cannot store a {0} protector record: it is not a sealed kind with a JSON object")]
    BadSealed(crate::config::ProtectorKind),
    /// No protector has this name.
    #[error("this vault has no protector named {0:?}: `fscrypt-rs protector list` shows the names")]
    UnknownProtector(String),
    /// The named protector is of another kind than the secret given.
    #[error(
        "protector {name:?} is a {found} protector, not a {given} one: give its kind of secret"
    )]
    ProtectorKind {
        /// The protector's name.
        name: String,
        /// Its kind.
        found: crate::config::ProtectorKind,
        /// The kind of the secret given.
        given: crate::config::ProtectorKind,
    },
    /// A new protector's name is taken.
    #[error("a protector named {0:?} already exists: choose another --name")]
    NameTaken(String),
    /// A new protector's name is not allowed.
    #[error("{0}")]
    BadName(String),
    /// Removing the only protector would lock the data away for good.
    #[error(
        "{0:?} is the vault's last protector: removing it would make the data unreadable; add another protector first"
    )]
    LastProtector(String),
    /// Removing the last passphrase, key file or recovery key would leave
    /// only protectors bound to a device or an identity.
    #[error(
        "{0:?} is the vault's last passphrase, key-file or recovery-key protector: without it, losing the device (or a firmware update changing TPM PCRs) locks the data away; add a recovery key first (`protector add CIPHERDIR recovery-key`), or give --force"
    )]
    LastStandalone(String),
    /// The config already has [`crate::config::MAX_PROTECTORS`] protectors.
    #[error(
        "the vault already has {} protectors: remove one first",
        crate::config::MAX_PROTECTORS
    )]
    TooManyProtectors,
    /// The config changed between reading it and committing a change
    /// (another `passwd`/`protector` command ran meanwhile).
    #[error(
        "{0}: the config changed while this command ran (another passwd or protector command?); nothing was written, run it again"
    )]
    ConfigChanged(PathBuf),
    /// The vault has no protector of the requested kind.
    #[error("this vault has no {0} protector: unlock it with the protector it has")]
    NoSuchProtector(&'static str),
    /// `init` was given neither a passphrase nor a key file.
    #[error("a vault needs a passphrase or a key file: give one (or both)")]
    NoProtector,
    /// IV_INO_LBLK_64/32 were requested (or found in a stored policy).
    #[error(
        "IV_INO_LBLK_64/32 are refused: they put inode numbers into the IVs, and the inode numbers of a backing directory are not stable (copying, syncing or restoring it changes them); leave them off"
    )]
    InodeNumberFlags,
    /// The requested policy is invalid (mode pair, flags, data unit size).
    #[error("invalid policy: {0}; choose a supported mode pair, flags and data unit size")]
    Policy(fscrypt::PolicyError),
    /// Padding other than 4, 8, 16 or 32.
    #[error("filename padding must be 4, 8, 16 or 32 bytes, not {0}")]
    Padding(usize),
    /// The cipher directory already holds a vault config.
    #[error("{0} is already a vault: refusing to overwrite its config; choose an empty directory")]
    AlreadyInitialized(PathBuf),
    /// Reverse mode was asked for with another format than 3.
    #[error("reverse mode makes authenticated (format 3) views only: leave out --no-integrity")]
    ReverseFormat,
    /// The cipher directory is not empty.
    #[error("{0} is not empty: a new vault needs an empty directory")]
    NotEmpty(PathBuf),
    /// The cipher directory has no vault config.
    #[error(
        "{0} is not a vault: {CONFIG_NAME} not found; give the cipher directory made by `fscrypt-rs init` (and its config with --config FILE if init put it elsewhere)"
    )]
    NotAVault(PathBuf),
    /// The cipher directory holds a vault's root but no config: the
    /// config was put elsewhere (`init --config FILE`).
    #[error(
        "{0} has no config ({CONFIG_NAME}): its config is kept elsewhere (init --config); give it with --config FILE"
    )]
    ConfigElsewhere(PathBuf),
    /// The config file given explicitly does not exist.
    #[error(
        "config file {0} not found: give the file `fscrypt-rs init --config` wrote for this vault"
    )]
    ConfigNotFound(PathBuf),
    /// The config file given to `init` already exists.
    #[error("config file {0} already exists: refusing to overwrite it; choose a new path")]
    ConfigExists(PathBuf),
    /// The config file given to `init` would be inside the cipher
    /// directory under another name than the default.
    #[error(
        "config file {0} is inside the cipher directory: put it outside (that is what --config is for), or leave --config out"
    )]
    ConfigInside(PathBuf),
    /// The config exists but is invalid.
    #[error("{path}: {source}")]
    BadConfig {
        /// The config file.
        path: PathBuf,
        /// What is wrong with it.
        source: ConfigError,
    },
    /// The stored policy is not a valid v2 policy.
    #[error("{path}: the stored policy is invalid: {source}; restore the config from a backup")]
    BadStoredPolicy {
        /// The config file.
        path: PathBuf,
        /// Why the policy is invalid.
        source: fscrypt::PolicyError,
    },
    /// An unwrapped master key has another identifier than the policy: the
    /// config was tampered with or corrupted.
    #[error(
        "the unwrapped master key has identifier {found}, but the policy names {expected}: the config is corrupt; restore it from a backup"
    )]
    IdentifierMismatch {
        /// Identifier in the policy.
        expected: KeyIdentifier,
        /// Identifier of the unwrapped key.
        found: KeyIdentifier,
    },
    /// The unwrapped key was refused by the format layer.
    #[error("master key: {0}")]
    MasterKey(fscrypt::KeyError),
    /// A protector-layer failure other than a wrong secret.
    #[error(transparent)]
    Protector(#[from] ProtectorError),
    /// The backing directory already has a root metadata file.
    #[error("{0} already holds an fscrypt-rs root: choose an empty directory")]
    RootExists(PathBuf),
    /// Writing the root metadata file failed.
    #[error("creating the filesystem root {path}: {source}")]
    CreateRoot {
        /// The root metadata file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The operating system's random number generator failed.
    #[error("{0}")]
    Random(fscrypt_crypto::Error),
    /// An I/O error on `path`.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

impl Error {
    /// A config file error at `path`: [`Error::Io`] for an I/O error,
    /// else [`Error::BadConfig`].
    pub fn config(path: &std::path::Path, e: ConfigError) -> Error {
        match e {
            ConfigError::Io(source) => Error::Io {
                path: path.to_owned(),
                source,
            },
            source => Error::BadConfig {
                path: path.to_owned(),
                source,
            },
        }
    }

    /// True for the errors that mean "the secret the user gave is wrong"
    /// (the CLI exits with a distinct code for them).
    pub fn is_wrong_secret(&self) -> bool {
        matches!(
            self,
            Error::WrongPassphrase
                | Error::WrongKeyFile
                | Error::WrongRecoveryKey
                | Error::WrongSealed(_)
        )
    }
}

/// `map_err` helper: an [`io::Error`] on `path` as [`Error::Io`].
pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

/// Ways backing-store content can be corrupt (the bytes break
/// [`crate::layout`], or do not fit the vault). A filesystem answers `EIO`
/// for the affected object and logs its backing path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Corruption {
    /// The header is shorter than its 72 bytes (truncated file or metadata file).
    #[error("header truncated")]
    ShortHeader,
    /// The header does not start with `FSCRYPT\0`.
    #[error("bad header magic")]
    BadMagic,
    /// The header's format version is not one we know.
    #[error("unknown header format version {0}")]
    UnknownVersion(u8),
    /// The header's kind byte is unknown or not what the object needs.
    #[error("unexpected header kind {0}")]
    UnknownKind(u8),
    /// Region size or reserved bytes are wrong.
    #[error("bad header field")]
    BadHeaderField,
    /// The header checksum does not match.
    #[error("header checksum mismatch")]
    BadChecksum,
    /// The stored context cannot be parsed or its policy differs from the vault's.
    #[error("encryption context invalid or of another policy")]
    BadContext,
    /// The backing file length is not header + whole data units.
    #[error("backing file length is not header + whole data units")]
    BadLength,
    /// An encrypted name does not decode or decrypt (kernel: EUCLEAN).
    #[error("corrupt encrypted name")]
    BadName,
    /// A long-name side file is missing or does not match its entry.
    #[error("corrupt long-name side file")]
    BadLongName,
    /// A symlink's stored target does not decode or decrypt.
    #[error("corrupt encrypted symlink")]
    BadSymlink,
    /// A directory has no readable metadata file.
    #[error("directory metadata file missing")]
    MissingDirMeta,
    /// Format 3: a data unit matches neither of its tag slots (changed,
    /// moved, copied from another file, or torn by a power loss).
    #[error("data unit {0} fails its tag")]
    BadTag(u64),
    /// Format 3: neither record of a file verifies.
    #[error("file record: {0}")]
    BadRecord(crate::integrity::record::RecordError),
    /// Format 3: the file is not bound to the name and directory it was
    /// found under (its backing object was moved or swapped).
    #[error("file is not bound to this name and directory (moved or swapped)")]
    Unbound,
    /// Format 3: the record's generation is older than one this machine
    /// saw (the file was put back to an earlier version of itself).
    #[error(
        "file rolled back to generation {generation} (this machine saw {seen}); accept a restore with `fscrypt-rs fsck --accept-rollback PATH`"
    )]
    RolledBack {
        /// The record's generation.
        generation: u64,
        /// The highest generation this machine saw.
        seen: u64,
    },
    /// Format 3: the backing length is not the hint of the authenticated
    /// size (truncated, or extended outside a write session).
    #[error("backing length does not match the authenticated size")]
    BadHint,
    /// Format 3: a backing name (or its long-name side file) whose tag does
    /// not verify under its directory's nonce: changed, or moved from
    /// another directory (`docs/vault-format.md` §4b.6).
    #[error("name tag does not verify (changed or moved backing name)")]
    BadNameTag,
    /// Format 3: a symlink target (inline or in the symlink store) whose tag
    /// does not verify (`docs/vault-format.md` §4b.7).
    #[error("symlink target tag does not verify (changed target)")]
    BadSymlinkTag,
}
