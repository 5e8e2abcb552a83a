//! On-disk encryption contexts: the xattr value (ext4/f2fs: index 9, name
//! `"c"`) holding an inode's policy and its 16-byte nonce (spec §3.2).
//!
//! Kernel: `union fscrypt_context`, `fscrypt_policy_from_context()`,
//! fs/crypto/policy.c. Parsing here decides only whether a context is
//! *recognised* (size, version, reserved bytes); whether it is *supported* is
//! [`Context::validate`] (spec §3.4), which [`crate::InodeCrypt::new`] always
//! runs.

use crate::error::PolicyError;
use crate::mode::EncryptionMode;
use crate::policy::{
    KEY_DESCRIPTOR_SIZE, KEY_IDENTIFIER_SIZE, KeyDescriptor, KeyIdentifier, Policy, PolicyFlags,
    PolicyV1, PolicyV2,
};

/// Size of a file nonce in bytes (`FSCRYPT_FILE_NONCE_SIZE`).
pub const NONCE_SIZE: usize = 16;
/// Size of `struct fscrypt_context_v1` in bytes.
pub const CONTEXT_V1_SIZE: usize = 28;
/// Size of `struct fscrypt_context_v2` in bytes (also
/// `FSCRYPT_SET_CONTEXT_MAX_SIZE`).
pub const CONTEXT_V2_SIZE: usize = 40;
/// First byte of a v1 context (`FSCRYPT_CONTEXT_V1` = 1; the v1 *policy* uses 0).
pub const CONTEXT_V1_VERSION: u8 = 1;
/// First byte of a v2 context (`FSCRYPT_CONTEXT_V2`).
pub const CONTEXT_V2_VERSION: u8 = 2;

const _: () = assert!(1 + 1 + 1 + 1 + KEY_DESCRIPTOR_SIZE + NONCE_SIZE == CONTEXT_V1_SIZE);
const _: () = assert!(1 + 1 + 1 + 1 + 1 + 3 + KEY_IDENTIFIER_SIZE + NONCE_SIZE == CONTEXT_V2_SIZE);

/// `struct fscrypt_context_v1` (28 bytes):
///
/// | off | size | field |
/// |----:|-----:|-------|
/// | 0 | 1 | version = 1 |
/// | 1 | 1 | contents mode |
/// | 2 | 1 | filenames mode |
/// | 3 | 1 | flags |
/// | 4 | 8 | master_key_descriptor |
/// | 12 | 16 | nonce |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[doc(alias = "fscrypt_context_v1")]
pub struct ContextV1 {
    /// The policy fields.
    pub policy: PolicyV1,
    /// The inode's nonce.
    pub nonce: [u8; NONCE_SIZE],
}

/// `struct fscrypt_context_v2` (40 bytes):
///
/// | off | size | field |
/// |----:|-----:|-------|
/// | 0 | 1 | version = 2 |
/// | 1 | 1 | contents mode |
/// | 2 | 1 | filenames mode |
/// | 3 | 1 | flags |
/// | 4 | 1 | log2_data_unit_size |
/// | 5 | 3 | reserved, zero |
/// | 8 | 16 | master_key_identifier |
/// | 24 | 16 | nonce |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[doc(alias = "fscrypt_context_v2")]
pub struct ContextV2 {
    /// The policy fields.
    pub policy: PolicyV2,
    /// The inode's nonce.
    pub nonce: [u8; NONCE_SIZE],
}

/// An encryption context of either version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[doc(alias = "fscrypt_context")]
pub enum Context {
    /// Version 1 context (28 bytes).
    V1(ContextV1),
    /// Version 2 context (40 bytes).
    V2(ContextV2),
}

/// The serialized bytes of a context: a stack buffer of 28 or 40 bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ContextBytes {
    buf: [u8; CONTEXT_V2_SIZE],
    len: usize,
}

impl core::ops::Deref for ContextBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl core::fmt::Debug for ContextBytes {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for b in self.iter() {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl Context {
    /// The context a new inode gets under `policy` with the given fresh random
    /// `nonce` (spec §3.2: a field-by-field copy plus the nonce).
    pub fn new(policy: &Policy, nonce: [u8; NONCE_SIZE]) -> Context {
        match *policy {
            Policy::V1(policy) => Context::V1(ContextV1 { policy, nonce }),
            Policy::V2(policy) => Context::V2(ContextV2 { policy, nonce }),
        }
    }

    /// Parses a context: exactly 28 bytes with version 1, or 40 bytes with
    /// version 2 and zero reserved bytes (spec §3.2). Does not check modes and
    /// flags; see [`Context::validate`].
    ///
    /// # Errors
    /// [`PolicyError::Empty`], [`PolicyError::UnknownVersion`],
    /// [`PolicyError::BadSize`] ("unrecognized or corrupt" in kernel terms),
    /// [`PolicyError::ReservedNonZero`].
    pub fn parse(bytes: &[u8]) -> Result<Context, PolicyError> {
        let version = *bytes.first().ok_or(PolicyError::Empty)?;
        let (expected, is_v2) = match version {
            CONTEXT_V1_VERSION => (CONTEXT_V1_SIZE, false),
            CONTEXT_V2_VERSION => (CONTEXT_V2_SIZE, true),
            v => return Err(PolicyError::UnknownVersion(v)),
        };
        if bytes.len() != expected {
            return Err(PolicyError::BadSize {
                version,
                expected,
                got: bytes.len(),
            });
        }
        let mut nonce = [0u8; NONCE_SIZE];
        nonce.copy_from_slice(&bytes[expected - NONCE_SIZE..]);
        if is_v2 {
            if bytes[5..8] != [0, 0, 0] {
                return Err(PolicyError::ReservedNonZero);
            }
            let mut id = [0u8; KEY_IDENTIFIER_SIZE];
            id.copy_from_slice(&bytes[8..24]);
            Ok(Context::V2(ContextV2 {
                policy: PolicyV2 {
                    contents_mode: EncryptionMode(bytes[1]),
                    filenames_mode: EncryptionMode(bytes[2]),
                    flags: PolicyFlags(bytes[3]),
                    log2_data_unit_size: bytes[4],
                    master_key_identifier: KeyIdentifier(id),
                },
                nonce,
            }))
        } else {
            let mut d = [0u8; KEY_DESCRIPTOR_SIZE];
            d.copy_from_slice(&bytes[4..12]);
            Ok(Context::V1(ContextV1 {
                policy: PolicyV1 {
                    contents_mode: EncryptionMode(bytes[1]),
                    filenames_mode: EncryptionMode(bytes[2]),
                    flags: PolicyFlags(bytes[3]),
                    master_key_descriptor: KeyDescriptor(d),
                },
                nonce,
            }))
        }
    }

    /// The kernel's exact bytes: 28 (v1) or 40 (v2).
    pub fn to_bytes(&self) -> ContextBytes {
        let mut buf = [0u8; CONTEXT_V2_SIZE];
        let len = match self {
            Context::V1(c) => {
                buf[..12].copy_from_slice(&c.policy.to_bytes());
                buf[0] = CONTEXT_V1_VERSION;
                buf[12..28].copy_from_slice(&c.nonce);
                CONTEXT_V1_SIZE
            }
            Context::V2(c) => {
                buf[..24].copy_from_slice(&c.policy.to_bytes());
                buf[0] = CONTEXT_V2_VERSION;
                buf[24..40].copy_from_slice(&c.nonce);
                CONTEXT_V2_SIZE
            }
        };
        ContextBytes { buf, len }
    }

    /// The inode's 16-byte nonce.
    pub fn nonce(&self) -> &[u8; NONCE_SIZE] {
        match self {
            Context::V1(c) => &c.nonce,
            Context::V2(c) => &c.nonce,
        }
    }

    /// The policy this context carries (spec §3.2, kernel
    /// `fscrypt_policy_from_context()`).
    pub fn policy(&self) -> Policy {
        match self {
            Context::V1(c) => Policy::V1(c.policy),
            Context::V2(c) => Policy::V2(c.policy),
        }
    }

    /// Whether the context is *supported*: its policy passes
    /// [`Policy::validate`].
    ///
    /// # Errors
    /// As [`Policy::validate`].
    pub fn validate(&self) -> Result<(), PolicyError> {
        self.policy().validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts() {
        let p = Policy::V2(PolicyV2 {
            contents_mode: EncryptionMode::AES_256_XTS,
            filenames_mode: EncryptionMode::AES_256_CTS,
            flags: PolicyFlags::PAD_32,
            log2_data_unit_size: 0,
            master_key_identifier: KeyIdentifier([7; 16]),
        });
        let c = Context::new(&p, [9; 16]);
        let b = c.to_bytes();
        assert_eq!(b.len(), 40);
        assert_eq!(&b[..8], &[2, 1, 4, 3, 0, 0, 0, 0]);
        assert_eq!(&b[8..24], &[7; 16]);
        assert_eq!(&b[24..], &[9; 16]);
        assert_eq!(Context::parse(&b).unwrap(), c);
        assert_eq!(c.policy(), p);

        let p1 = Policy::V1(PolicyV1 {
            contents_mode: EncryptionMode::ADIANTUM,
            filenames_mode: EncryptionMode::ADIANTUM,
            flags: PolicyFlags(7),
            master_key_descriptor: KeyDescriptor([5; 8]),
        });
        let c1 = Context::new(&p1, [1; 16]);
        let b1 = c1.to_bytes();
        assert_eq!(b1.len(), 28);
        assert_eq!(&b1[..4], &[1, 9, 9, 7]);
        assert_eq!(Context::parse(&b1).unwrap().policy(), p1);
        // A v1 *policy* (version 0) is not a context.
        assert!(matches!(
            Context::parse(&p1.to_bytes()),
            Err(PolicyError::UnknownVersion(0))
        ));
        assert!(matches!(
            Context::parse(&b1[..27]),
            Err(PolicyError::BadSize { .. })
        ));
        let mut bad = b.to_vec();
        bad[7] = 1;
        assert!(matches!(
            Context::parse(&bad),
            Err(PolicyError::ReservedNonZero)
        ));
    }
}
