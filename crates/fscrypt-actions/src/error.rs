//! The errors of the google/fscrypt flow, one variant per cause. The CLI
//! maps each to an exit status in one table (`fscrypt-cli`'s
//! `support/gfs.rs`); the PAM module logs their one-line text (never a
//! secret).

use std::path::PathBuf;

use crate::convert::ConvertError;

/// An error of an action.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The metadata said no (not set up, corrupt, insecure, untrusted,
    /// not found, wrong secret...): `fscrypt_metadata`'s error as is.
    #[error(transparent)]
    Metadata(#[from] fscrypt_metadata::Error),
    /// A kernel call (policy, keyring) failed.
    #[error(transparent)]
    Kernel(#[from] fscrypt_linux::Error),
    /// The mount holding a path could not be found.
    #[error(transparent)]
    Mount(#[from] fscrypt_linux::mountinfo::MountInfoError),
    /// An in-place conversion (`encrypt --convert`) failed or was refused.
    #[error(transparent)]
    Convert(#[from] ConvertError),
    /// A sealed protector's device refused or could not be reached
    /// ([`crate::sealed`]).
    #[error(transparent)]
    Seal(#[from] fscrypt_seal::Error),
    /// A file or directory could not be examined or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The directory has no encryption policy.
    #[error("{} is not encrypted", path.display())]
    NotEncrypted {
        /// The directory.
        path: PathBuf,
    },
    /// The filesystem does not support encryption. The kernel layer's
    /// message already says how to enable it (`tune2fs -O encrypt`), once.
    #[error("{0}")]
    EncryptionNotSupported(fscrypt_linux::Error),
    /// A protector whose secret was right does not unwrap the policy key:
    /// the policy file is damaged or was edited.
    #[error(
        "policy {policy}'s key does not unwrap with protector {protector}, whose secret is right: \
         the policy file is damaged or was edited; restore {} from a backup, or unlock with \
         another protector",
        path.display()
    )]
    PolicyKeyUnwrap {
        /// The policy descriptor.
        policy: String,
        /// The protector descriptor.
        protector: String,
        /// The policy file.
        path: PathBuf,
    },
    /// The kernel's key identifier is not the policy's.
    #[error("the kernel computed another key identifier than policy {policy}")]
    IdentifierMismatch {
        /// The policy descriptor.
        policy: String,
    },
    /// A policy file's options or descriptor make no kernel policy.
    #[error("policy {policy}: {reason}")]
    BadPolicy {
        /// The policy descriptor.
        policy: String,
        /// What is wrong.
        reason: String,
    },
    /// The protector named is not one of the policy's.
    #[error("protector {protector} does not protect {}; its protectors: {}", dir.display(), slots.join(", "))]
    NotProtectedBy {
        /// The protector descriptor.
        protector: String,
        /// The directory.
        dir: PathBuf,
        /// The policy's protectors.
        slots: Vec<String>,
    },
    /// The login filesystem (where login protectors live) is not set up.
    #[error(
        "login protectors live on the root filesystem {}, which is not set up; run                  `fscrypt-rs setup {}` first",
        mount.display(),
        mount.display()
    )]
    RootNotSetup {
        /// The login filesystem's mount point.
        mount: PathBuf,
    },
    /// No user of that name.
    #[error("there is no user {name:?}; check the name given to --user")]
    NoSuchUser {
        /// The name.
        name: String,
    },
    /// The uid has no user name.
    #[error("uid {uid} has no user name; give one with --user")]
    NoUserName {
        /// The uid.
        uid: u32,
    },
    /// The user database could not be read.
    #[error("looking up a user: {0}")]
    UserLookup(nix::Error),
    /// PAM refused the login passphrase.
    #[error("that is not the login passphrase of {user}; try again")]
    WrongLoginPassphrase {
        /// The user.
        user: String,
    },
    /// PAM could not check the login passphrase.
    #[error("checking the login passphrase of {user}: {reason}")]
    LoginCheck {
        /// The user.
        user: String,
        /// Why.
        reason: String,
    },
    /// The directory is already encrypted.
    #[error("{} is already encrypted; see `fscrypt-rs status {}`", path.display(), path.display())]
    AlreadyEncrypted {
        /// The directory.
        path: PathBuf,
    },
    /// The directory holds files (and no conversion was asked for).
    #[error(
        "{} is not empty; add --convert to encrypt it in place (copy, verify, swap), or encrypt \
         an empty directory and move the files in",
        path.display()
    )]
    NotEmpty {
        /// The directory.
        path: PathBuf,
    },
    /// A filesystem did not answer within the time given.
    #[error("the filesystem {} did not answer within {secs} s", mount.display())]
    Timeout {
        /// Its mount point.
        mount: PathBuf,
        /// The bound, in seconds.
        secs: u64,
    },
    /// The user already has a login protector (one per user).
    #[error("user {user} already has a login protector ({}:{protector})", mount.display())]
    LoginProtectorExists {
        /// The user.
        user: String,
        /// The login filesystem.
        mount: PathBuf,
        /// The login protector's descriptor.
        protector: String,
    },
    /// The protector already protects the policy.
    #[error("protector {protector} already protects policy {policy}")]
    AlreadyProtects {
        /// The protector descriptor.
        protector: String,
        /// The policy descriptor.
        policy: String,
    },
    /// A path given could not be resolved (the OS error alone, as the
    /// CLI has always printed it).
    #[error(transparent)]
    Resolve(std::io::Error),
    /// The front end could not give a secret a
    /// [`crate::metadata::GetSecret`] callback was asked for (its own
    /// error, boxed; the CLI takes it back out).
    #[error("{0}")]
    Secret(Box<dyn std::error::Error + Send + Sync>),
    /// A request that makes no sense (a named login protector, a bad
    /// `--policy-options`, a protector name already used...).
    #[error("{0}")]
    Usage(String),
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

/// The result of an action.
pub type Result<T> = std::result::Result<T, Error>;
