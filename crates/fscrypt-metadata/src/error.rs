//! Errors of the metadata layer: one-line reasons that say what to do.

use std::path::PathBuf;

/// What went wrong reading, checking, unwrapping or writing metadata.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The passphrase or raw key does not unwrap the protector.
    #[error("wrong passphrase or key for protector {descriptor}; try again")]
    WrongSecret {
        /// The protector's descriptor.
        descriptor: String,
    },
    /// A metadata file does not decode or fails its validity checks.
    #[error("metadata file {path} is corrupt ({reason}); restore it from a backup or remove it")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A metadata message fails its validity checks (no file involved).
    #[error("invalid metadata: {0}")]
    Invalid(String),
    /// A metadata directory (or file) is a symlink, not a directory, or
    /// world-writable without the sticky bit.
    #[error(
        "{path} is not safe to use: {reason}; fix or remove it and run `fscrypt-rs setup` again"
    )]
    Insecure {
        /// The path.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A metadata directory (the mount's root, `.fscrypt`, `policies/`,
    /// `protectors/`) is owned by a non-root user other than the trusted
    /// one ([`crate::trust::Trust`]): that user could delete or replace
    /// every protector in it.
    #[error(
        "unsafe metadata directory {path}: it is owned by uid {owner}, neither root nor uid \
         {trusted}, who could delete your protectors; have root remove it and run \
         `fscrypt-rs setup` (or `chown root: {path}` if that user is trusted)"
    )]
    UnsafeDirectory {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The trusted uid.
        trusted: u32,
    },
    /// A metadata file is owned by a non-root user other than the trusted
    /// one ([`crate::trust::Trust`]); listings skip such files, this is
    /// the answer when one is named.
    #[error(
        "metadata file {path} was written by another user (uid {owner}, neither root nor uid \
         {trusted}) and is ignored; remove it, or set \"allow_cross_user_metadata\": true in \
         the config if every local user is trusted"
    )]
    Untrusted {
        /// The file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// The trusted uid.
        trusted: u32,
    },
    /// The filesystem has no `.fscrypt` metadata directory.
    #[error("filesystem {mount} is not set up for fscrypt; run `fscrypt-rs setup {mount}` first")]
    NotSetup {
        /// The mount point.
        mount: PathBuf,
    },
    /// `setup` on a filesystem that already has the metadata directory.
    #[error("filesystem {mount} is already set up for fscrypt")]
    AlreadySetup {
        /// The mount point.
        mount: PathBuf,
    },
    /// No metadata file with this descriptor.
    #[error(
        "no {kind} {descriptor} on filesystem {mount}; list them with `fscrypt-rs status {mount}`"
    )]
    NotFound {
        /// "protector" or "policy".
        kind: &'static str,
        /// The descriptor.
        descriptor: String,
        /// The mount point.
        mount: PathBuf,
    },
    /// The global config file is unreadable or invalid.
    #[error("config file {path}: {reason}; fix it, or remove it and run `fscrypt-rs setup`")]
    Config {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// An I/O error on a metadata path.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A cryptographic primitive failed (bad parameters).
    #[error("{0}")]
    Crypto(#[from] fscrypt_crypto::Error),
}

impl Error {
    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
