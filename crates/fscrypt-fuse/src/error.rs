//! Errors of the filesystem and their one errno mapping ([`Error::errno`]).

use std::io;

/// Ways backing-store content can be corrupt: defined with the layout in
/// `fscrypt-vault`. Each one makes the affected object answer `EIO` (and a
/// log line names its backing path).
pub use fscrypt_vault::Corruption;

/// Errors of [`crate::EncryptedFs`] and of mounting.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A backing-store system call failed; the errno is passed to the caller.
    #[error("backing store: {0}")]
    Io(#[from] io::Error),
    /// A backing-store system call failed (rustix errno).
    #[error("backing store: {0}")]
    Sys(#[from] rustix::io::Errno),
    /// Backing-store content is corrupt.
    #[error("corrupt backing store: {0}")]
    Corrupt(Corruption),
    /// The operation needs the master key and the mount is locked.
    #[error("the vault is mounted locked (no key); this needs the key")]
    NoKey,
    /// The name is longer than 255 bytes, or the symlink target too long to store.
    #[error("name or symlink target too long")]
    NameTooLong,
    /// The name is empty, `.`/`..` where not allowed, or contains `/` or NUL.
    #[error("invalid name")]
    InvalidName,
    /// No such entry, or a stale inode / handle.
    #[error("no such file or directory")]
    NotFound,
    /// The inode is of the wrong type for the operation.
    #[error("wrong file type for this operation")]
    WrongType(WrongType),
    /// The mount is read-only.
    #[error("read-only mount")]
    ReadOnly,
    /// An argument is invalid (offset, flags).
    #[error("invalid argument")]
    InvalidArgument,
    /// The operation is not supported by this filesystem.
    #[error("operation not supported")]
    NotSupported,
    /// The fscrypt format layer refused (bad key, context or name).
    #[error("fscrypt: {0}")]
    Crypt(String),
    /// The backing directory already has a root context.
    #[error("the backing directory already holds an fscrypt-rs root ({0})")]
    AlreadyInitialized(std::path::PathBuf),
    /// Mount configuration problem (missing FUSE, bad mountpoint).
    #[error("mount: {0}")]
    Mount(String),
}

/// Which type mismatch happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WrongType {
    /// Expected a directory (ENOTDIR).
    NotDir,
    /// Expected a non-directory (EISDIR).
    IsDir,
    /// Expected a symlink or regular file (EINVAL).
    Other,
}

impl Error {
    /// The errno returned to the kernel for this error. This is the single place
    /// where errors become errno values; choices follow the kernel's fscrypt
    /// (`ENOKEY` when the key is absent, `ENAMETOOLONG`), and corrupt content
    /// gives `EIO` (the kernel gives `EUCLEAN` for a corrupt name; FUSE users see
    /// EIO, which every tool understands as "this object is damaged").
    pub fn errno(&self) -> i32 {
        match self {
            Error::Io(e) => e.raw_os_error().unwrap_or(libc::EIO),
            Error::Sys(e) => e.raw_os_error(),
            Error::Corrupt(_) => libc::EIO,
            Error::NoKey => libc::ENOKEY,
            Error::NameTooLong => libc::ENAMETOOLONG,
            Error::InvalidName => libc::EINVAL,
            Error::NotFound => libc::ENOENT,
            Error::WrongType(WrongType::NotDir) => libc::ENOTDIR,
            Error::WrongType(WrongType::IsDir) => libc::EISDIR,
            Error::WrongType(WrongType::Other) => libc::EINVAL,
            Error::ReadOnly => libc::EROFS,
            Error::InvalidArgument => libc::EINVAL,
            Error::NotSupported => libc::EOPNOTSUPP,
            Error::Crypt(_) => libc::EIO,
            Error::AlreadyInitialized(_) => libc::EEXIST,
            Error::Mount(_) => libc::EIO,
        }
    }

    /// Whether this error means damaged backing content (worth a log line).
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corrupt(_) | Error::Crypt(_))
    }
}

impl From<Corruption> for Error {
    fn from(c: Corruption) -> Error {
        Error::Corrupt(c)
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_mapping() {
        assert_eq!(Error::NoKey.errno(), libc::ENOKEY);
        assert_eq!(Error::NameTooLong.errno(), libc::ENAMETOOLONG);
        assert_eq!(Error::Corrupt(Corruption::BadName).errno(), libc::EIO);
        assert_eq!(Error::Sys(rustix::io::Errno::EXIST).errno(), libc::EEXIST);
        assert_eq!(
            Error::Io(io::Error::from_raw_os_error(libc::ENOSPC)).errno(),
            libc::ENOSPC
        );
        assert_eq!(Error::WrongType(WrongType::NotDir).errno(), libc::ENOTDIR);
    }
}
