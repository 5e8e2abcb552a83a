//! Errors of the filesystem and their one errno mapping ([`Error::errno`]).

use std::io;

/// Ways backing-store content can be corrupt: defined with the layout in
/// `fscrypt-vault`. Each one makes the affected object answer `EIO` (and a
/// log line names its backing path).
pub use fscrypt_vault::Corruption;

/// Errors of [`crate::EncryptedFs`] and of mounting.
///
/// Errnos that come back from a backing-store system call are passed
/// through ([`Error::Io`], [`Error::Sys`]); every errno the filesystem
/// decides itself has a named variant; refusals of the format layer keep
/// their typed cause ([`Error::Format`]). [`Error::errno`] is the one table
/// that turns all of them into errno values. No variant carries a plaintext
/// name, so an error may always be logged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A backing-store system call failed; the errno is passed to the caller.
    #[error("backing store: {0}")]
    Io(#[from] io::Error),
    /// A backing-store system call failed (rustix errno), passed through.
    #[error("backing store: {0}")]
    Sys(#[from] rustix::io::Errno),
    /// Backing-store content is corrupt (EIO).
    #[error("corrupt backing store: {0}")]
    Corrupt(Corruption),
    /// The fscrypt format layer refused (`fscrypt::hooks` and the per-inode
    /// crypto); the errno follows the cause, see [`Error::errno`].
    #[error("fscrypt: {0}")]
    Format(#[from] fscrypt::Error),
    /// The operation needs the master key and the mount is locked (ENOKEY).
    #[error("the vault is mounted locked (no key); this needs the key")]
    NoKey,
    /// The name is longer than 255 bytes, or the symlink target too long to
    /// store (ENAMETOOLONG).
    #[error("name or symlink target too long")]
    NameTooLong,
    /// The name is empty, `.`/`..` where not allowed, or contains `/` or NUL
    /// (EINVAL).
    #[error("invalid name")]
    InvalidName,
    /// No such entry, or a stale inode number (ENOENT).
    #[error("no such file or directory")]
    NotFound,
    /// The backing object an inode was looked up as is gone or was replaced
    /// behind the mount (ESTALE: the kernel looks the name up again).
    #[error("the backing object is gone or was replaced; look it up again")]
    Stale,
    /// An unknown file handle, or one not opened for this (EBADF).
    #[error("bad file handle")]
    BadHandle,
    /// The inode is of the wrong type for the operation.
    #[error("wrong file type for this operation")]
    WrongType(WrongType),
    /// A directory to remove or replace is not empty (ENOTEMPTY).
    #[error("directory not empty")]
    NotEmpty,
    /// Refused by the filesystem's rules: a hard link to a directory, a
    /// `user.` xattr on a symlink or special file (EPERM).
    #[error("operation not permitted")]
    NotPermitted,
    /// No such extended attribute (ENODATA).
    #[error("no such extended attribute")]
    NoXattr,
    /// An offset or size past the largest file size (EFBIG).
    #[error("file too large")]
    FileTooBig,
    /// A backing entry is a mount point, which is never entered (EXDEV).
    #[error("the backing entry is a mount point; not entering it")]
    MountPoint,
    /// A lock was poisoned: a thread panicked while holding it, so the state
    /// it guards may be half-updated (EIO).
    #[error("internal lock poisoned by a panicked operation; remount")]
    Poisoned,
    /// The mount is read-only (EROFS).
    #[error("read-only mount")]
    ReadOnly,
    /// An argument is invalid (offset, flags) (EINVAL).
    #[error("invalid argument")]
    InvalidArgument,
    /// The operation is not supported by this filesystem (EOPNOTSUPP).
    #[error("operation not supported")]
    NotSupported,
    /// The offline ext4 reader refused part of an image (the image back-end,
    /// [`crate::image::ImageFs`]): its message names objects by inode
    /// number only. The errno follows the cause ([`Error::errno`]):
    /// ENOENT, ENOTDIR, ENOKEY, EOPNOTSUPP for what the reader does not
    /// handle yet, EIO for a corrupt image.
    #[error("image: {0}")]
    Image(#[from] fscrypt_ext4::image::ImageError),
    /// The back-end does not implement this request (ENOSYS: the kernel
    /// stops sending it, or falls back).
    #[error("request not implemented by this filesystem")]
    NotImplemented,
    /// The backing directory already has a root context (EEXIST).
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

/// The errno of a format-layer error, by cause (the kernel's choices,
/// `fs/crypto/`; corruption, which the kernel reports as EUCLEAN, is EIO
/// here like [`Error::Corrupt`]).
fn format_errno(e: &fscrypt::Error) -> i32 {
    use fscrypt::{HookError, KeyError, NameError};
    match e {
        fscrypt::Error::Hook(HookError::KeyRequired) => libc::ENOKEY,
        fscrypt::Error::Hook(HookError::NotFound) => libc::ENOENT,
        fscrypt::Error::Hook(HookError::CrossPolicy) => libc::EXDEV,
        fscrypt::Error::Hook(_) => libc::EIO,
        fscrypt::Error::NoKey(_) => libc::ENOENT,
        fscrypt::Error::Name(NameError::TooLong { .. }) => libc::ENAMETOOLONG,
        fscrypt::Error::Name(NameError::Empty | NameError::InvalidPlaintext) => libc::EINVAL,
        fscrypt::Error::Name(_) => libc::EIO,
        fscrypt::Error::Key(KeyError::WrongKey { .. } | KeyError::MasterKeyTooShort { .. }) => {
            libc::ENOKEY
        }
        fscrypt::Error::Key(_) | fscrypt::Error::Policy(_) => libc::EINVAL,
        fscrypt::Error::Contents(_) | fscrypt::Error::Crypto(_) => libc::EIO,
        _ => libc::EIO,
    }
}

/// Whether a format-layer error means damaged stored bytes (kernel EUCLEAN).
fn image_errno(e: &fscrypt_ext4::image::ImageError) -> i32 {
    use fscrypt_ext4::Ext4Error;
    use fscrypt_ext4::image::ImageError;
    match e {
        ImageError::NotFound(_) => libc::ENOENT,
        ImageError::NotADirectory(_) => libc::ENOTDIR,
        ImageError::NoKey { .. } => libc::ENOKEY,
        ImageError::Unsupported { .. } | ImageError::Ext4(Ext4Error::Unsupported { .. }) => {
            libc::EOPNOTSUPP
        }
        _ => libc::EIO,
    }
}

impl From<fscrypt_ext4::Ext4Error> for Error {
    fn from(e: fscrypt_ext4::Ext4Error) -> Error {
        Error::Image(e.into())
    }
}

fn format_is_corruption(e: &fscrypt::Error) -> bool {
    use fscrypt::NameError;
    matches!(
        e,
        fscrypt::Error::Name(
            NameError::BadCiphertextLength { .. }
                | NameError::InvalidDecryptedName
                | NameError::CorruptSymlink(_)
        ) | fscrypt::Error::Policy(_)
    )
}

impl Error {
    /// The errno returned to the kernel for this error. This is the single place
    /// where errors become errno values; choices follow the kernel's fscrypt
    /// (`ENOKEY` when the key is absent, `ENAMETOOLONG`, `ENOENT` for a
    /// malformed no-key name, `EXDEV` across policies), and corrupt content
    /// gives `EIO` (the kernel gives `EUCLEAN` for a corrupt name; FUSE users see
    /// EIO, which every tool understands as "this object is damaged").
    pub fn errno(&self) -> i32 {
        match self {
            Error::Io(e) => e.raw_os_error().unwrap_or(libc::EIO),
            Error::Sys(e) => e.raw_os_error(),
            Error::Corrupt(_) => libc::EIO,
            Error::Format(e) => format_errno(e),
            Error::NoKey => libc::ENOKEY,
            Error::NameTooLong => libc::ENAMETOOLONG,
            Error::InvalidName => libc::EINVAL,
            Error::NotFound => libc::ENOENT,
            Error::Stale => libc::ESTALE,
            Error::BadHandle => libc::EBADF,
            Error::WrongType(WrongType::NotDir) => libc::ENOTDIR,
            Error::WrongType(WrongType::IsDir) => libc::EISDIR,
            Error::WrongType(WrongType::Other) => libc::EINVAL,
            Error::NotEmpty => libc::ENOTEMPTY,
            Error::NotPermitted => libc::EPERM,
            Error::NoXattr => libc::ENODATA,
            Error::FileTooBig => libc::EFBIG,
            Error::MountPoint => libc::EXDEV,
            Error::Poisoned => libc::EIO,
            Error::ReadOnly => libc::EROFS,
            Error::InvalidArgument => libc::EINVAL,
            Error::NotSupported => libc::EOPNOTSUPP,
            Error::NotImplemented => libc::ENOSYS,
            Error::Image(e) => image_errno(e),
            Error::AlreadyInitialized(_) => libc::EEXIST,
            Error::Mount(_) => libc::EIO,
        }
    }

    /// Whether this error means damaged backing content (worth a log line).
    pub fn is_corruption(&self) -> bool {
        match self {
            Error::Corrupt(_) => true,
            Error::Format(e) => format_is_corruption(e),
            _ => false,
        }
    }

    /// Whether this error says "no such entry" (ENOENT), from the
    /// filesystem, the format layer or the backing store.
    pub fn is_not_found(&self) -> bool {
        self.errno() == libc::ENOENT
    }

    /// Whether the name given was malformed (empty, `.`/`..`, `/` or NUL):
    /// [`Error::InvalidName`] or the format layer's refusal of the plaintext.
    pub fn is_invalid_name(&self) -> bool {
        use fscrypt::NameError;
        matches!(
            self,
            Error::InvalidName
                | Error::Format(fscrypt::Error::Name(
                    NameError::Empty | NameError::InvalidPlaintext
                ))
        )
    }

    /// Whether this is the backing store's errno `e`, passed through.
    pub fn is_sys(&self, e: rustix::io::Errno) -> bool {
        match self {
            Error::Sys(s) => *s == e,
            Error::Io(i) => i.raw_os_error() == Some(e.raw_os_error()),
            _ => false,
        }
    }
}

impl From<Corruption> for Error {
    fn from(c: Corruption) -> Error {
        Error::Corrupt(c)
    }
}

impl<T> From<std::sync::PoisonError<T>> for Error {
    fn from(_: std::sync::PoisonError<T>) -> Error {
        Error::Poisoned
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

    /// The whole table: every variant the filesystem builds, and the format
    /// layer's causes.
    #[test]
    fn errno_table() {
        use fscrypt::{ContentsError, HookError, KeyError, NameError, NoKeyError, PolicyError};
        let named = [
            (Error::Corrupt(Corruption::BadSymlink), libc::EIO),
            (Error::NoKey, libc::ENOKEY),
            (Error::NameTooLong, libc::ENAMETOOLONG),
            (Error::InvalidName, libc::EINVAL),
            (Error::NotFound, libc::ENOENT),
            (Error::Stale, libc::ESTALE),
            (Error::BadHandle, libc::EBADF),
            (Error::WrongType(WrongType::NotDir), libc::ENOTDIR),
            (Error::WrongType(WrongType::IsDir), libc::EISDIR),
            (Error::WrongType(WrongType::Other), libc::EINVAL),
            (Error::NotEmpty, libc::ENOTEMPTY),
            (Error::NotPermitted, libc::EPERM),
            (Error::NoXattr, libc::ENODATA),
            (Error::FileTooBig, libc::EFBIG),
            (Error::MountPoint, libc::EXDEV),
            (Error::Poisoned, libc::EIO),
            (Error::ReadOnly, libc::EROFS),
            (Error::InvalidArgument, libc::EINVAL),
            (Error::NotSupported, libc::EOPNOTSUPP),
            (Error::AlreadyInitialized("/b".into()), libc::EEXIST),
            (Error::Mount("x".into()), libc::EIO),
            (Error::Sys(rustix::io::Errno::NOTEMPTY), libc::ENOTEMPTY),
            (Error::Io(io::Error::other("no errno")), libc::EIO),
        ];
        for (e, want) in &named {
            assert_eq!(e.errno(), *want, "{e:?}");
            assert_eq!(e.is_corruption(), matches!(e, Error::Corrupt(_)), "{e:?}");
        }
        let format: [(fscrypt::Error, i32, bool); 14] = [
            (HookError::KeyRequired.into(), libc::ENOKEY, false),
            (HookError::NotFound.into(), libc::ENOENT, false),
            (HookError::CrossPolicy.into(), libc::EXDEV, false),
            (NoKeyError::BadEncoding.into(), libc::ENOENT, false),
            (
                NameError::TooLong { len: 256, max: 255 }.into(),
                libc::ENAMETOOLONG,
                false,
            ),
            (NameError::Empty.into(), libc::EINVAL, false),
            (NameError::InvalidPlaintext.into(), libc::EINVAL, false),
            (
                NameError::BadCiphertextLength {
                    len: 3,
                    min: 16,
                    max: 255,
                }
                .into(),
                libc::EIO,
                true,
            ),
            (NameError::InvalidDecryptedName.into(), libc::EIO, true),
            (NameError::CorruptSymlink("short").into(), libc::EIO, true),
            (PolicyError::Empty.into(), libc::EINVAL, true),
            (KeyError::BadMasterKeySize(3).into(), libc::EINVAL, false),
            (
                KeyError::WrongKey {
                    expected: "a".into(),
                    actual: "b".into(),
                }
                .into(),
                libc::ENOKEY,
                false,
            ),
            (ContentsError::NotARegularFile.into(), libc::EIO, false),
        ];
        for (f, want, corrupt) in format {
            let e = Error::from(f);
            assert_eq!(e.errno(), want, "{e:?}");
            assert_eq!(e.is_corruption(), corrupt, "{e:?}");
        }
        let poisoned = std::sync::Mutex::new(());
        let _ = std::panic::catch_unwind(|| {
            let _g = poisoned.lock();
            panic!("poison it");
        });
        let e: Error = poisoned.lock().map(|_| ()).unwrap_err().into();
        assert!(matches!(e, Error::Poisoned));
        assert_eq!(e.errno(), libc::EIO);
        assert!(Error::Sys(rustix::io::Errno::NOENT).is_not_found());
        assert!(Error::from(fscrypt::Error::from(HookError::NotFound)).is_not_found());
        assert!(Error::Sys(rustix::io::Errno::EXIST).is_sys(rustix::io::Errno::EXIST));
    }
}
