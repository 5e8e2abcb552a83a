//! The filesystem keyring: adding, removing and querying master keys
//! (spec §10.6 – §10.8; kernel: fs/crypto/keyring.c).
//!
//! All calls are issued on an open directory of the filesystem (usually its
//! mount point). Keys are copied into the ioctl argument only for the call
//! and wiped right after; they are never logged.

use std::fmt;
use std::fs::File;
use std::path::Path;
use std::str::FromStr;

use fscrypt::{KeyDescriptor, KeyIdentifier};
use zeroize::Zeroize;

use crate::error::{ErrnoContext, Error, Operation};
use crate::ioctl;
use crate::uapi::{self, fscrypt_add_key_arg, fscrypt_add_key_arg_with_raw, fscrypt_key_specifier};

/// Which master key: a v1 descriptor or a v2 identifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeySpec {
    /// 8-byte descriptor (v1 policies, `FSCRYPT_KEY_SPEC_TYPE_DESCRIPTOR`).
    Descriptor(KeyDescriptor),
    /// 16-byte identifier (v2 policies, `FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER`).
    Identifier(KeyIdentifier),
}

impl KeySpec {
    /// The uapi key specifier.
    pub fn to_uapi(&self) -> fscrypt_key_specifier {
        match self {
            KeySpec::Descriptor(d) => fscrypt_key_specifier::descriptor(d.0),
            KeySpec::Identifier(i) => fscrypt_key_specifier::identifier(i.0),
        }
    }
}

impl fmt::Display for KeySpec {
    /// Lowercase hex: 16 digits for a descriptor, 32 for an identifier.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySpec::Descriptor(d) => write!(f, "{d}"),
            KeySpec::Identifier(i) => write!(f, "{i}"),
        }
    }
}

/// Error of [`KeySpec::from_str`].
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a key identifier (32 hex digits) or descriptor (16 hex digits)")]
pub struct KeySpecParseError(pub String);

impl FromStr for KeySpec {
    type Err = KeySpecParseError;
    /// 32 hex digits → identifier, 16 hex digits → descriptor.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || KeySpecParseError(s.to_string());
        match s.len() {
            32 => KeyIdentifier::from_str(s)
                .map(KeySpec::Identifier)
                .map_err(|_| bad()),
            16 => KeyDescriptor::from_str(s)
                .map(KeySpec::Descriptor)
                .map_err(|_| bad()),
            _ => Err(bad()),
        }
    }
}

/// Open a directory (or file) for an ioctl.
pub(crate) fn open_for_ioctl(path: &Path) -> Result<File, Error> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|source| Error::Open {
            path: path.to_path_buf(),
            source,
        })
}

/// Check a key length before any ioctl (spec §4.1).
///
/// # Errors
/// [`Error::KeyLength`] outside 16..=64 (raw) or 16..=128 (hardware-wrapped).
pub fn check_key_length(len: usize, hw_wrapped: bool) -> Result<(), Error> {
    let (max, what) = if hw_wrapped {
        (
            uapi::BLK_CRYPTO_MAX_HW_WRAPPED_KEY_SIZE,
            "a hardware-wrapped key",
        )
    } else {
        (uapi::FSCRYPT_MAX_KEY_SIZE, "a raw master key")
    };
    if !(uapi::FSCRYPT_MIN_KEY_SIZE..=max).contains(&len) {
        return Err(Error::KeyLength {
            len,
            min: uapi::FSCRYPT_MIN_KEY_SIZE,
            max,
            what,
        });
    }
    Ok(())
}

fn add_key_inner(
    mountpoint: &Path,
    spec: fscrypt_key_specifier,
    key: &[u8],
    hw_wrapped: bool,
    key_name: Option<String>,
) -> Result<fscrypt_key_specifier, Error> {
    check_key_length(key.len(), hw_wrapped)?;
    let dir = open_for_ioctl(mountpoint)?;
    let mut arg = fscrypt_add_key_arg_with_raw {
        arg: fscrypt_add_key_arg {
            key_spec: spec,
            raw_size: key.len() as u32,
            key_id: 0,
            flags: if hw_wrapped {
                uapi::FSCRYPT_ADD_KEY_FLAG_HW_WRAPPED
            } else {
                0
            },
            __reserved: [0; 7],
        },
        raw: [0; uapi::BLK_CRYPTO_MAX_HW_WRAPPED_KEY_SIZE],
    };
    arg.raw[..key.len()].copy_from_slice(key);
    let r = ioctl::add_encryption_key(&dir, &mut arg);
    arg.raw.zeroize();
    let op = if hw_wrapped {
        Operation::AddHwWrappedKey
    } else {
        Operation::AddKey
    };
    r.map_err(|e| {
        Error::from_errno(
            op,
            mountpoint,
            e,
            &ErrnoContext {
                key: key_name,
                policy: None,
            },
        )
    })?;
    Ok(arg.arg.key_spec)
}

/// Add a raw v2 master key (16..=64 bytes) to the filesystem keyring and
/// return the identifier the kernel computed (spec §4.4, §10.6).
///
/// # Errors
/// [`Error::KeyLength`] before any ioctl; otherwise the mapped errno.
pub fn add_key_v2(mountpoint: &Path, key: &[u8]) -> Result<KeyIdentifier, Error> {
    let spec = add_key_inner(
        mountpoint,
        fscrypt_key_specifier::identifier([0; 16]),
        key,
        false,
        None,
    )?;
    Ok(identifier_of(&spec))
}

/// Add a hardware-wrapped key (ephemerally-wrapped blob, 16..=128 bytes,
/// `FSCRYPT_ADD_KEY_FLAG_HW_WRAPPED`, spec §4.6) and return its identifier.
///
/// # Errors
/// [`Error::KeyLength`] before any ioctl; [`Error::HwWrappedNotSupported`]
/// without `-o inlinecrypt` or hardware; [`Error::BadWrappedKey`].
pub fn add_hw_wrapped_key(mountpoint: &Path, blob: &[u8]) -> Result<KeyIdentifier, Error> {
    let spec = add_key_inner(
        mountpoint,
        fscrypt_key_specifier::identifier([0; 16]),
        blob,
        true,
        None,
    )?;
    Ok(identifier_of(&spec))
}

/// Add a raw v1 master key under `descriptor` (needs root).
///
/// # Errors
/// [`Error::KeyLength`] before any ioctl; [`Error::PermissionDenied`]
/// without CAP_SYS_ADMIN; otherwise the mapped errno.
pub fn add_key_v1(mountpoint: &Path, descriptor: KeyDescriptor, key: &[u8]) -> Result<(), Error> {
    add_key_inner(
        mountpoint,
        fscrypt_key_specifier::descriptor(descriptor.0),
        key,
        false,
        Some(descriptor.to_string()),
    )
    .map(|_| ())
}

fn identifier_of(spec: &fscrypt_key_specifier) -> KeyIdentifier {
    let u = spec.u_bytes();
    let mut id = [0u8; 16];
    id.copy_from_slice(&u[..16]);
    KeyIdentifier(id)
}

/// What `FS_IOC_REMOVE_ENCRYPTION_KEY` did (spec §10.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemovalOutcome {
    /// The key is gone and every file using it was evicted.
    Removed,
    /// The secret is wiped, but files using it are still open: the key is
    /// "incompletely removed" until they are closed and removal is retried.
    FilesBusy,
    /// Only this user's claim was removed; other users still hold the key.
    OtherUsers,
}

impl RemovalOutcome {
    /// From `removal_status_flags`.
    pub fn from_flags(flags: u32) -> Self {
        if flags & uapi::FSCRYPT_KEY_REMOVAL_STATUS_FLAG_OTHER_USERS != 0 {
            RemovalOutcome::OtherUsers
        } else if flags & uapi::FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY != 0 {
            RemovalOutcome::FilesBusy
        } else {
            RemovalOutcome::Removed
        }
    }
}

/// Remove a key (this user's claim, or with `all_users` every claim; root).
///
/// # Errors
/// [`Error::KeyNotPresent`] (ENOKEY), [`Error::PermissionDenied`], …
pub fn remove_key(
    mountpoint: &Path,
    spec: KeySpec,
    all_users: bool,
) -> Result<RemovalOutcome, Error> {
    let dir = open_for_ioctl(mountpoint)?;
    let mut arg = uapi::fscrypt_remove_key_arg {
        key_spec: spec.to_uapi(),
        removal_status_flags: 0,
        __reserved: [0; 5],
    };
    ioctl::remove_encryption_key(&dir, &mut arg, all_users).map_err(|e| {
        Error::from_errno(
            Operation::RemoveKey,
            mountpoint,
            e,
            &ErrnoContext {
                key: Some(spec.to_string()),
                policy: None,
            },
        )
    })?;
    Ok(RemovalOutcome::from_flags(arg.removal_status_flags))
}

/// Key presence (`FSCRYPT_KEY_STATUS_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyPresence {
    /// Not in the filesystem keyring.
    Absent,
    /// Present.
    Present,
    /// Removed, but files using it are still open.
    IncompletelyRemoved,
}

/// The result of `FS_IOC_GET_ENCRYPTION_KEY_STATUS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyStatus {
    /// Presence.
    pub presence: KeyPresence,
    /// The calling user holds a claim (identifier keys only).
    pub added_by_self: bool,
    /// Number of users holding a claim (identifier keys only).
    pub user_count: u32,
}

/// Query a key's status (spec §10.8).
///
/// # Errors
/// The mapped errno; [`Error::Unrecognised`] for an unknown status value.
pub fn key_status(mountpoint: &Path, spec: KeySpec) -> Result<KeyStatus, Error> {
    let dir = open_for_ioctl(mountpoint)?;
    let mut arg = uapi::fscrypt_get_key_status_arg {
        key_spec: spec.to_uapi(),
        __reserved: [0; 6],
        status: 0,
        status_flags: 0,
        user_count: 0,
        __out_reserved: [0; 13],
    };
    ioctl::get_encryption_key_status(&dir, &mut arg).map_err(|e| {
        Error::from_errno(
            Operation::KeyStatus,
            mountpoint,
            e,
            &ErrnoContext {
                key: Some(spec.to_string()),
                policy: None,
            },
        )
    })?;
    let presence = match arg.status {
        uapi::FSCRYPT_KEY_STATUS_ABSENT => KeyPresence::Absent,
        uapi::FSCRYPT_KEY_STATUS_PRESENT => KeyPresence::Present,
        uapi::FSCRYPT_KEY_STATUS_INCOMPLETELY_REMOVED => KeyPresence::IncompletelyRemoved,
        other => {
            return Err(Error::Unrecognised {
                path: mountpoint.to_path_buf(),
                what: "key status",
                detail: format!("status value {other}"),
            });
        }
    };
    Ok(KeyStatus {
        presence,
        added_by_self: arg.status_flags & uapi::FSCRYPT_KEY_STATUS_FLAG_ADDED_BY_SELF != 0,
        user_count: arg.user_count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_lengths_checked_before_ioctl() {
        assert!(check_key_length(15, false).is_err());
        assert!(check_key_length(16, false).is_ok());
        assert!(check_key_length(64, false).is_ok());
        assert!(check_key_length(65, false).is_err());
        assert!(check_key_length(128, true).is_ok());
        assert!(check_key_length(129, true).is_err());
        // A refused key never reaches open(): the path does not exist.
        let e = add_key_v2(Path::new("/nonexistent/fscrypt-rs"), &[0u8; 15]).unwrap_err();
        assert!(matches!(e, Error::KeyLength { len: 15, .. }), "{e}");
        let e = add_key_v2(Path::new("/nonexistent/fscrypt-rs"), &[0u8; 65]).unwrap_err();
        assert!(matches!(e, Error::KeyLength { len: 65, .. }), "{e}");
    }

    #[test]
    fn keyspec_parse() {
        let s: KeySpec = "0011223344556677".parse().expect("descriptor");
        assert!(matches!(s, KeySpec::Descriptor(_)));
        assert_eq!(s.to_string(), "0011223344556677");
        let s: KeySpec = "912ae510a458723a839a9fad701538ac"
            .parse()
            .expect("identifier");
        assert!(matches!(s, KeySpec::Identifier(_)));
        assert_eq!(s.to_string(), "912ae510a458723a839a9fad701538ac");
        assert!("xyz".parse::<KeySpec>().is_err());
        assert!("zz11223344556677".parse::<KeySpec>().is_err());
    }

    #[test]
    fn removal_flags() {
        assert_eq!(RemovalOutcome::from_flags(0), RemovalOutcome::Removed);
        assert_eq!(RemovalOutcome::from_flags(1), RemovalOutcome::FilesBusy);
        assert_eq!(RemovalOutcome::from_flags(2), RemovalOutcome::OtherUsers);
    }
}

/// Legacy v1 keys in the caller's **user keyring** (spec §10 "legacy
/// method"): a `logon` key described `PREFIX:` + the descriptor in hex,
/// whose 72-byte payload is `struct fscrypt_key` (mode 0, the raw key, its
/// size). The prefix is the filesystem's legacy one for ext4 and f2fs
/// (`ext4:`, `f2fs:`, as google/fscrypt writes them, for kernels before
/// 4.8/4.6) and `fscrypt:` otherwise; the kernel tries `fscrypt:` and then
/// the legacy prefix, so lookups and removals here try both. The kernel
/// finds the key through the keyrings of the process that opens a file.
/// google/fscrypt keeps v1 keys here unless its config says
/// `use_fs_keyring_for_v1_policies`.
pub mod user {
    use std::ffi::CString;
    use std::path::Path;

    use fscrypt::KeyDescriptor;
    use rustix::io::Errno;
    use zeroize::Zeroizing;

    use crate::error::{Error, Operation};
    use crate::ioctl;

    /// `KEY_SPEC_USER_KEYRING`.
    const USER_KEYRING: i32 = -4;
    /// `KEY_SPEC_THREAD_KEYRING`.
    const THREAD_KEYRING: i32 = -1;

    /// The description prefix google/fscrypt uses on a filesystem type.
    pub fn prefix(fs_type: &str) -> &'static str {
        match fs_type {
            "ext4" => "ext4:",
            "f2fs" => "f2fs:",
            _ => "fscrypt:",
        }
    }

    fn descriptions(fs_type: &str, d: KeyDescriptor) -> Vec<CString> {
        let mut v = vec![prefix(fs_type)];
        if v[0] != "fscrypt:" {
            v.push("fscrypt:");
        }
        v.into_iter()
            .map(|p| CString::new(format!("{p}{d}")).expect("no NUL in hex"))
            .collect()
    }

    fn err(errno: Errno) -> Error {
        Error::Other {
            op: Operation::UserKeyring,
            path: Path::new("@u").to_path_buf(),
            errno,
        }
    }

    /// The user keyring's serial, linked into this thread's keyring so its
    /// keys are *possessed* (searchable, removable) even when the session
    /// keyring does not link it (as google/fscrypt does).
    fn user_keyring() -> Result<i32, Error> {
        let id = ioctl::keyctl_get_keyring_id(USER_KEYRING, true).map_err(err)?;
        ioctl::keyctl_link(id, THREAD_KEYRING).map_err(err)?;
        Ok(id)
    }

    /// The serials of the keys of `descriptor` (either prefix), and the
    /// keyring's.
    fn find(fs_type: &str, d: KeyDescriptor) -> Result<(Vec<i32>, i32), Error> {
        let ring = user_keyring()?;
        let mut keys = Vec::new();
        for desc in descriptions(fs_type, d) {
            match ioctl::keyctl_search(ring, c"logon", &desc) {
                Ok(k) => keys.push(k),
                Err(Errno::NOKEY | Errno::KEYREVOKED | Errno::KEYEXPIRED) => {}
                Err(e) => return Err(err(e)),
            }
        }
        Ok((keys, ring))
    }

    /// Adds (or replaces) the key of `descriptor` for a filesystem of
    /// `fs_type` (the prefix google/fscrypt uses there).
    ///
    /// # Errors
    /// [`Error::KeyLength`] for a key not 1..=64 bytes; the keyring's errno.
    pub fn add(fs_type: &str, descriptor: KeyDescriptor, key: &[u8]) -> Result<(), Error> {
        if key.is_empty() || key.len() > crate::uapi::FSCRYPT_MAX_KEY_SIZE {
            return Err(Error::KeyLength {
                len: key.len(),
                min: 1,
                max: 64,
                what: "a raw master key",
            });
        }
        let mut payload = Zeroizing::new([0u8; 72]);
        payload[4..4 + key.len()].copy_from_slice(key);
        payload[68..72].copy_from_slice(&(key.len() as u32).to_ne_bytes());
        let desc = &descriptions(fs_type, descriptor)[0];
        ioctl::add_key(c"logon", desc, &payload[..], user_keyring()?)
            .map(|_| ())
            .map_err(err)
    }

    /// Whether a key of `descriptor` is in the user keyring.
    ///
    /// # Errors
    /// The keyring's errno other than "no such key".
    pub fn has(fs_type: &str, descriptor: KeyDescriptor) -> Result<bool, Error> {
        Ok(!find(fs_type, descriptor)?.0.is_empty())
    }

    /// Unlinks the keys of `descriptor` from the user keyring: whether
    /// there were any. Files already open keep their per-file keys until
    /// their inodes are evicted (google/fscrypt drops the caches, as root).
    ///
    /// # Errors
    /// The keyring's errno.
    pub fn remove(fs_type: &str, descriptor: KeyDescriptor) -> Result<bool, Error> {
        let (keys, ring) = find(fs_type, descriptor)?;
        for k in &keys {
            ioctl::keyctl_unlink(*k, ring).map_err(err)?;
        }
        Ok(!keys.is_empty())
    }
}
