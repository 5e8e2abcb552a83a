//! The one place where kernel errno values become explanations.
//!
//! Every ioctl wrapper in [`crate::keyring`], [`crate::policy`] and
//! [`crate::blkcrypto`] funnels its errno through [`Error::from_errno`], which
//! knows which operation failed and on what, and says what happened and what
//! to do about it. Meanings follow the kernel (spec §10, fs/crypto/policy.c,
//! fs/crypto/keyring.c).

use std::fmt;
use std::path::{Path, PathBuf};

use rustix::io::Errno;

/// The kernel operation that failed (used in messages and for errno
/// meanings that depend on the call).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Operation {
    /// `FS_IOC_SET_ENCRYPTION_POLICY`.
    SetPolicy,
    /// `FS_IOC_GET_ENCRYPTION_POLICY(_EX)`.
    GetPolicy,
    /// `FS_IOC_GET_ENCRYPTION_NONCE`.
    GetNonce,
    /// `FS_IOC_ADD_ENCRYPTION_KEY` with a raw key.
    AddKey,
    /// `FS_IOC_ADD_ENCRYPTION_KEY` with `FSCRYPT_ADD_KEY_FLAG_HW_WRAPPED`.
    AddHwWrappedKey,
    /// `FS_IOC_REMOVE_ENCRYPTION_KEY(_ALL_USERS)`.
    RemoveKey,
    /// `FS_IOC_GET_ENCRYPTION_KEY_STATUS`.
    KeyStatus,
    /// `BLKCRYPTOIMPORTKEY`.
    BlkImportKey,
    /// `BLKCRYPTOGENERATEKEY`.
    BlkGenerateKey,
    /// `BLKCRYPTOPREPAREKEY`.
    BlkPrepareKey,
    /// `add_key(2)`/`keyctl(2)` on the user keyring (legacy v1 keys).
    UserKeyring,
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operation::SetPolicy => "setting the encryption policy",
            Operation::GetPolicy => "reading the encryption policy",
            Operation::GetNonce => "reading the encryption nonce",
            Operation::AddKey => "adding the key",
            Operation::UserKeyring => "using the user keyring",
            Operation::AddHwWrappedKey => "adding the hardware-wrapped key",
            Operation::RemoveKey => "removing the key",
            Operation::KeyStatus => "reading the key status",
            Operation::BlkImportKey => "importing the key into the inline-encryption hardware",
            Operation::BlkGenerateKey => "generating a hardware-wrapped key",
            Operation::BlkPrepareKey => "preparing the hardware-wrapped key",
        })
    }
}

/// Errors of the kernel-facing API.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The path could not be opened.
    #[error("{path}: cannot open: {source}")]
    Open {
        /// What we tried to open.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// `ENOTTY` / `EOPNOTSUPP`: no fscrypt support on this filesystem.
    #[error(
        "{path}: {op} failed: this filesystem does not support encryption ({}); \
         for ext4 enable it with `tune2fs -O encrypt DEVICE` (or `mkfs.ext4 -O encrypt`), \
         and use a kernel built with CONFIG_FS_ENCRYPTION",
        errno_name(*.errno)
    )]
    EncryptionNotSupported {
        /// The operation.
        op: Operation,
        /// The path it was issued on.
        path: PathBuf,
        /// `ENOTTY` or `EOPNOTSUPP`.
        errno: Errno,
    },
    /// `EOPNOTSUPP` for hardware-wrapped keys or the `BLKCRYPTO*` ioctls.
    #[error(
        "{path}: {op} failed: hardware-wrapped keys are not supported here ({}); \
         the filesystem must be mounted with `-o inlinecrypt` on a block device whose \
         inline-encryption hardware supports wrapped keys (this machine may have none)",
        errno_name(*.errno)
    )]
    HwWrappedNotSupported {
        /// The operation.
        op: Operation,
        /// The path or block device.
        path: PathBuf,
        /// Usually `EOPNOTSUPP`.
        errno: Errno,
    },
    /// `EEXIST` on set-policy: a different policy is already set.
    #[error(
        "{path}: already encrypted with a different policy (EEXIST); \
         see it with `fscrypt-rs get-policy {path}`, or use a new empty directory"
    )]
    PolicyAlreadySet {
        /// The directory.
        path: PathBuf,
    },
    /// `ENOTEMPTY` on set-policy.
    #[error(
        "{path}: directory is not empty (ENOTEMPTY); a policy can only be set on an \
         empty directory: create a new directory, set the policy, then move files in"
    )]
    DirectoryNotEmpty {
        /// The directory.
        path: PathBuf,
    },
    /// `ENOTDIR` on set-policy.
    #[error("{path}: not a directory (ENOTDIR); policies are set on empty directories")]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// `ENOKEY` on set-policy: the v2 key has not been added by this user.
    #[error(
        "{path}: {op} failed: the master key {key} is not in the filesystem keyring (ENOKEY); \
         add it first with `fscrypt-rs add-key MOUNTPOINT`"
    )]
    KeyNotAdded {
        /// The operation.
        op: Operation,
        /// The directory.
        path: PathBuf,
        /// The key identifier or descriptor (hex).
        key: String,
    },
    /// `ENOKEY` on remove: nothing to remove for this user.
    #[error(
        "{path}: key {key} is not present for this user (ENOKEY): it was never added, \
         was already removed, or only another user added it (root can use --all-users)"
    )]
    KeyNotPresent {
        /// The mount point.
        path: PathBuf,
        /// The key identifier or descriptor (hex).
        key: String,
    },
    /// `EKEYREJECTED`: the keyring key given by `key_id` has the wrong type.
    #[error(
        "{path}: {op} failed: the kernel rejected the key (EKEYREJECTED): a keyring key \
         must be of type \"fscrypt-provisioning\" with a matching specifier type"
    )]
    KeyRejected {
        /// The operation.
        op: Operation,
        /// The mount point.
        path: PathBuf,
    },
    /// `EINVAL` on set-policy: the kernel refused the policy.
    #[error(
        "{path}: the kernel rejected the policy {policy} (EINVAL): this kernel or \
         filesystem does not accept that mode pair, flag combination or data unit size \
         (IV_INO_LBLK_* need `-O stable_inodes` and AES-256-XTS; DIRECT_KEY needs Adiantum)"
    )]
    PolicyRejected {
        /// The directory.
        path: PathBuf,
        /// The policy, printed.
        policy: String,
    },
    /// `EINVAL` elsewhere.
    #[error("{path}: {op} failed: invalid argument (EINVAL): {hint}")]
    InvalidArgument {
        /// The operation.
        op: Operation,
        /// The path.
        path: PathBuf,
        /// What is most likely wrong.
        hint: &'static str,
    },
    /// `EACCES` / `EPERM`.
    #[error("{path}: {op} failed: permission denied ({}): {hint}", errno_name(*.errno))]
    PermissionDenied {
        /// The operation.
        op: Operation,
        /// The path.
        path: PathBuf,
        /// `EACCES` or `EPERM`.
        errno: Errno,
        /// What to do.
        hint: &'static str,
    },
    /// `ENODATA`: the file is not encrypted.
    #[error("{path}: not encrypted (no encryption policy)")]
    NotEncrypted {
        /// The path.
        path: PathBuf,
    },
    /// `EROFS`.
    #[error("{path}: {op} failed: the filesystem is mounted read-only (EROFS)")]
    ReadOnly {
        /// The operation.
        op: Operation,
        /// The path.
        path: PathBuf,
    },
    /// `EBADMSG`: invalid hardware-wrapped key blob.
    #[error(
        "{path}: {op} failed: the hardware rejected the wrapped key as invalid (EBADMSG); \
         use the blob produced by `fscrypt-rs prepare-key` on this device"
    )]
    BadWrappedKey {
        /// The operation.
        op: Operation,
        /// The path or device.
        path: PathBuf,
    },
    /// `EDQUOT`: keyring quota exceeded.
    #[error(
        "{path}: {op} failed: the user's keyring quota is exhausted (EDQUOT); remove unused keys"
    )]
    QuotaExceeded {
        /// The operation.
        op: Operation,
        /// The path.
        path: PathBuf,
    },
    /// `EOVERFLOW`: an output buffer was too small.
    #[error(
        "{path}: {op} failed: the kernel's answer does not fit our buffer (EOVERFLOW); this kernel is newer than fscrypt-rs knows"
    )]
    Overflow {
        /// The operation.
        op: Operation,
        /// The path.
        path: PathBuf,
    },
    /// A key of a length the kernel would refuse; checked before any ioctl.
    #[error("the key is {len} bytes; {what} must be {min}..={max} bytes")]
    KeyLength {
        /// Length given.
        len: usize,
        /// Smallest accepted.
        min: usize,
        /// Largest accepted.
        max: usize,
        /// "a raw master key" or "a hardware-wrapped key".
        what: &'static str,
    },
    /// The kernel returned a policy or status we cannot parse.
    #[error("{path}: the kernel returned an unrecognised {what}: {detail}")]
    Unrecognised {
        /// The path.
        path: PathBuf,
        /// What it was.
        what: &'static str,
        /// Details.
        detail: String,
    },
    /// Any other errno.
    #[error("{path}: {op} failed: {} ({errno})", errno_name(*.errno))]
    Other {
        /// The operation.
        op: Operation,
        /// The path.
        path: PathBuf,
        /// The errno.
        errno: Errno,
    },
}

/// The symbolic name of an errno (`"EOPNOTSUPP"`), or `"errno N"`.
pub fn errno_name(e: Errno) -> String {
    let name = match e {
        Errno::PERM => "EPERM",
        Errno::NOENT => "ENOENT",
        Errno::IO => "EIO",
        Errno::ACCESS => "EACCES",
        Errno::FAULT => "EFAULT",
        Errno::BUSY => "EBUSY",
        Errno::EXIST => "EEXIST",
        Errno::XDEV => "EXDEV",
        Errno::NOTDIR => "ENOTDIR",
        Errno::INVAL => "EINVAL",
        Errno::NOTTY => "ENOTTY",
        Errno::ROFS => "EROFS",
        Errno::NAMETOOLONG => "ENAMETOOLONG",
        Errno::NOTEMPTY => "ENOTEMPTY",
        Errno::NODATA => "ENODATA",
        Errno::NOPKG => "ENOPKG",
        Errno::BADMSG => "EBADMSG",
        Errno::OVERFLOW => "EOVERFLOW",
        Errno::OPNOTSUPP => "EOPNOTSUPP",
        Errno::UCLEAN => "EUCLEAN",
        Errno::DQUOT => "EDQUOT",
        Errno::NOKEY => "ENOKEY",
        Errno::KEYREJECTED => "EKEYREJECTED",
        other => return format!("errno {}", other.raw_os_error()),
    };
    name.to_string()
}

/// Extra context for [`Error::from_errno`]: the key or policy involved.
#[derive(Clone, Debug, Default)]
pub struct ErrnoContext {
    /// The key identifier / descriptor as hex, if the call names a key.
    pub key: Option<String>,
    /// The policy as printed text, if the call sets a policy.
    pub policy: Option<String>,
}

impl Error {
    /// Translate an errno from `op` on `path` into an explanation.
    ///
    /// Kernel: the errno tables of spec §10.1 – §10.8.
    pub fn from_errno(op: Operation, path: &Path, errno: Errno, ctx: &ErrnoContext) -> Error {
        let path = path.to_path_buf();
        let hw = matches!(
            op,
            Operation::AddHwWrappedKey
                | Operation::BlkImportKey
                | Operation::BlkGenerateKey
                | Operation::BlkPrepareKey
        );
        let key = || ctx.key.clone().unwrap_or_else(|| "(unknown)".into());
        match errno {
            Errno::NOTTY if hw => Error::HwWrappedNotSupported { op, path, errno },
            Errno::OPNOTSUPP if hw => Error::HwWrappedNotSupported { op, path, errno },
            Errno::NOTTY | Errno::OPNOTSUPP => Error::EncryptionNotSupported { op, path, errno },
            Errno::EXIST if op == Operation::SetPolicy => Error::PolicyAlreadySet { path },
            Errno::NOTEMPTY => Error::DirectoryNotEmpty { path },
            Errno::NOTDIR => Error::NotADirectory { path },
            Errno::NOKEY if op == Operation::RemoveKey => Error::KeyNotPresent { path, key: key() },
            Errno::NOKEY => Error::KeyNotAdded {
                op,
                path,
                key: key(),
            },
            Errno::KEYREJECTED => Error::KeyRejected { op, path },
            Errno::INVAL if op == Operation::SetPolicy => Error::PolicyRejected {
                path,
                policy: ctx.policy.clone().unwrap_or_else(|| "(unknown)".into()),
            },
            Errno::INVAL => Error::InvalidArgument {
                op,
                path,
                hint: match op {
                    Operation::GetPolicy | Operation::GetNonce => {
                        "the encryption context is unrecognised or corrupt (or a v2 policy was \
                         read with the v1-only ioctl)"
                    }
                    Operation::AddKey => {
                        "raw keys must be 16..=64 bytes and descriptor keys cannot be \
                         hardware-wrapped"
                    }
                    Operation::AddHwWrappedKey => {
                        "hardware-wrapped keys must be 16..=128 bytes and use a key identifier"
                    }
                    _ => "the kernel refused the request's fields",
                },
            },
            Errno::ACCESS | Errno::PERM => Error::PermissionDenied {
                op,
                path,
                errno,
                hint: match op {
                    Operation::SetPolicy => {
                        "you must own the directory (or have CAP_FOWNER); the root directory \
                         of a filesystem cannot be encrypted"
                    }
                    Operation::AddKey | Operation::RemoveKey => {
                        "descriptor (v1) keys and --all-users need root (CAP_SYS_ADMIN)"
                    }
                    _ => "run as root or as the owner",
                },
            },
            Errno::NODATA => Error::NotEncrypted { path },
            Errno::ROFS => Error::ReadOnly { op, path },
            Errno::BADMSG => Error::BadWrappedKey { op, path },
            Errno::DQUOT => Error::QuotaExceeded { op, path },
            Errno::OVERFLOW => Error::Overflow { op, path },
            _ => Error::Other { op, path, errno },
        }
    }

    /// A stable short name for `--json` output and scripts.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Open { .. } => "open",
            Error::EncryptionNotSupported { .. } => "encryption_not_supported",
            Error::HwWrappedNotSupported { .. } => "hw_wrapped_not_supported",
            Error::PolicyAlreadySet { .. } => "policy_already_set",
            Error::DirectoryNotEmpty { .. } => "directory_not_empty",
            Error::NotADirectory { .. } => "not_a_directory",
            Error::KeyNotAdded { .. } => "key_not_added",
            Error::KeyNotPresent { .. } => "key_not_present",
            Error::KeyRejected { .. } => "key_rejected",
            Error::PolicyRejected { .. } => "policy_rejected",
            Error::InvalidArgument { .. } => "invalid_argument",
            Error::PermissionDenied { .. } => "permission_denied",
            Error::NotEncrypted { .. } => "not_encrypted",
            Error::ReadOnly { .. } => "read_only",
            Error::BadWrappedKey { .. } => "bad_wrapped_key",
            Error::QuotaExceeded { .. } => "quota_exceeded",
            Error::Overflow { .. } => "overflow",
            Error::KeyLength { .. } => "key_length",
            Error::Unrecognised { .. } => "unrecognised",
            Error::Other { .. } => "other",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(op: Operation, e: Errno) -> Error {
        let ctx = ErrnoContext {
            key: Some("00112233445566778899aabbccddeeff".into()),
            policy: Some("v2 AES-256-XTS/AES-256-CTS pad 32".into()),
        };
        Error::from_errno(op, Path::new("/mnt/x"), e, &ctx)
    }

    #[test]
    fn messages_say_what_to_do() {
        let s = map(Operation::SetPolicy, Errno::NOTTY).to_string();
        assert!(s.contains("tune2fs -O encrypt"), "{s}");
        let s = map(Operation::AddHwWrappedKey, Errno::OPNOTSUPP).to_string();
        assert!(s.contains("-o inlinecrypt"), "{s}");
        let s = map(Operation::SetPolicy, Errno::EXIST).to_string();
        assert!(s.contains("different policy"), "{s}");
        let s = map(Operation::SetPolicy, Errno::INVAL).to_string();
        assert!(s.contains("v2 AES-256-XTS/AES-256-CTS pad 32"), "{s}");
        let s = map(Operation::SetPolicy, Errno::NOKEY).to_string();
        assert!(s.contains("add-key") && s.contains("00112233"), "{s}");
        let s = map(Operation::RemoveKey, Errno::NOKEY).to_string();
        assert!(s.contains("not present"), "{s}");
        assert_eq!(
            map(Operation::SetPolicy, Errno::NOTEMPTY).kind(),
            "directory_not_empty"
        );
        assert_eq!(
            map(Operation::AddKey, Errno::KEYREJECTED).kind(),
            "key_rejected"
        );
        assert_eq!(
            map(Operation::AddKey, Errno::ACCESS).kind(),
            "permission_denied"
        );
        assert_eq!(
            map(Operation::AddKey, Errno::PERM).kind(),
            "permission_denied"
        );
        assert_eq!(
            map(Operation::AddHwWrappedKey, Errno::BADMSG).kind(),
            "bad_wrapped_key"
        );
        assert_eq!(
            map(Operation::GetPolicy, Errno::NODATA).kind(),
            "not_encrypted"
        );
        assert_eq!(map(Operation::GetPolicy, Errno::IO).kind(), "other");
    }
}
