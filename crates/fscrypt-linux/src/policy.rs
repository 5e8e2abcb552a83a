//! Encryption policies on directories and files: set, get, nonce
//! (spec §10.1 – §10.4; kernel: fs/crypto/policy.c).

use std::path::Path;

use fscrypt::Policy;
use rustix::io::Errno;

use crate::error::{ErrnoContext, Error, Operation};
use crate::ioctl;
use crate::keyring::open_for_ioctl;
use crate::uapi::{self, fscrypt_policy_v1, fscrypt_policy_v2};

/// A one-line description of a policy for messages, e.g.
/// `v2 AES-256-XTS/AES-256-CTS PAD_32|IV_INO_LBLK_64 data unit 4096 key 912a…`.
pub fn describe(policy: &Policy) -> String {
    let flags = policy.flags();
    let mut f = format!("PAD_{}", flags.padding());
    if flags.direct_key() {
        f.push_str("|DIRECT_KEY");
    }
    if flags.iv_ino_lblk_64() {
        f.push_str("|IV_INO_LBLK_64");
    }
    if flags.iv_ino_lblk_32() {
        f.push_str("|IV_INO_LBLK_32");
    }
    let unknown = flags.bits() & !0x1f;
    if unknown != 0 {
        f.push_str(&format!("|unknown {unknown:#04x}"));
    }
    match policy {
        Policy::V1(p) => format!(
            "v1 {}/{} {} descriptor {}",
            p.contents_mode, p.filenames_mode, f, p.master_key_descriptor
        ),
        Policy::V2(p) => {
            let du = if p.log2_data_unit_size == 0 {
                "block size".to_string()
            } else {
                format!("{}", 1u64 << p.log2_data_unit_size.min(63))
            };
            format!(
                "v2 {}/{} {} data unit {} key {}",
                p.contents_mode, p.filenames_mode, f, du, p.master_key_identifier
            )
        }
    }
}

fn key_of(policy: &Policy) -> String {
    match policy {
        Policy::V1(p) => p.master_key_descriptor.to_string(),
        Policy::V2(p) => p.master_key_identifier.to_string(),
    }
}

/// Set `policy` on the empty directory `dir` (or confirm an identical one).
///
/// The policy is passed to the kernel as is; the kernel's own validation is
/// the authority and its refusals come back as [`Error::PolicyRejected`]
/// with the policy printed.
///
/// # Errors
/// [`Error::PolicyAlreadySet`], [`Error::DirectoryNotEmpty`],
/// [`Error::KeyNotAdded`], [`Error::PolicyRejected`],
/// [`Error::EncryptionNotSupported`], [`Error::PermissionDenied`], …
pub fn set_policy(dir: &Path, policy: &Policy) -> Result<(), Error> {
    let f = open_for_ioctl(dir)?;
    let bytes = policy.to_bytes();
    let r = match policy {
        Policy::V1(_) => {
            let mut p = fscrypt_policy_v1 {
                version: bytes[0],
                contents_encryption_mode: bytes[1],
                filenames_encryption_mode: bytes[2],
                flags: bytes[3],
                ..Default::default()
            };
            p.master_key_descriptor.copy_from_slice(&bytes[4..12]);
            ioctl::set_encryption_policy_v1(&f, &p)
        }
        Policy::V2(_) => {
            let mut p = fscrypt_policy_v2 {
                version: bytes[0],
                contents_encryption_mode: bytes[1],
                filenames_encryption_mode: bytes[2],
                flags: bytes[3],
                ..Default::default()
            };
            p.__reserved.copy_from_slice(&bytes[4..8]);
            p.master_key_identifier.copy_from_slice(&bytes[8..24]);
            ioctl::set_encryption_policy_v2(&f, &p)
        }
    };
    r.map_err(|e| {
        Error::from_errno(
            Operation::SetPolicy,
            dir,
            e,
            &ErrnoContext {
                key: Some(key_of(policy)),
                policy: Some(describe(policy)),
            },
        )
    })
}

/// The policy of an encrypted file or directory, via
/// `FS_IOC_GET_ENCRYPTION_POLICY_EX` (falling back to the v1-only ioctl on
/// kernels before 5.4).
///
/// # Errors
/// [`Error::NotEncrypted`] (ENODATA), [`Error::EncryptionNotSupported`],
/// [`Error::Unrecognised`] if the bytes do not parse, …
pub fn get_policy(path: &Path) -> Result<Policy, Error> {
    let f = open_for_ioctl(path)?;
    let map = |e| Error::from_errno(Operation::GetPolicy, path, e, &ErrnoContext::default());
    let bytes: Vec<u8> = match ioctl::get_encryption_policy_ex(&f) {
        Ok(arg) => {
            let (b, len) = arg.policy_bytes();
            b[..len].to_vec()
        }
        Err(Errno::NOTTY) => {
            let p = ioctl::get_encryption_policy(&f).map_err(map)?;
            let mut b = vec![
                p.version,
                p.contents_encryption_mode,
                p.filenames_encryption_mode,
                p.flags,
            ];
            b.extend_from_slice(&p.master_key_descriptor);
            b
        }
        Err(e) => return Err(map(e)),
    };
    Policy::parse_unvalidated(&bytes).map_err(|e| Error::Unrecognised {
        path: path.to_path_buf(),
        what: "policy",
        detail: format!("{e} (bytes {})", hex(&bytes)),
    })
}

/// The 16-byte nonce of an encrypted inode (`FS_IOC_GET_ENCRYPTION_NONCE`).
///
/// # Errors
/// [`Error::NotEncrypted`], [`Error::EncryptionNotSupported`], …
pub fn get_nonce(path: &Path) -> Result<[u8; uapi::FSCRYPT_FILE_NONCE_SIZE], Error> {
    let f = open_for_ioctl(path)?;
    ioctl::get_encryption_nonce(&f)
        .map_err(|e| Error::from_errno(Operation::GetNonce, path, e, &ErrnoContext::default()))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
