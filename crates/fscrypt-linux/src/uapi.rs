//! Verbatim mirror of the kernel user API used by fscrypt-rs.
//!
//! Sources: `include/uapi/linux/fscrypt.h` (Linux 6.16+, including the
//! hardware-wrapped key `flags` fields) and `include/uapi/linux/blk-crypto.h`
//! (Linux 6.15+). Field names are the C names; every struct is `#[repr(C)]`
//! and its size is checked at compile time against the uapi (spec §1.3, §1.6,
//! §10). The ioctl numbers are built with rustix's `_IOC` helpers
//! ([`rustix::ioctl::opcode`]) and unit-tested against the literal values of
//! spec §1.6 for the generic `_IOC` layout (x86, arm, arm64, riscv).
//!
//! ABI quirks copied on purpose:
//! * `FS_IOC_SET_ENCRYPTION_POLICY` is declared `_IOR` with the size of the
//!   v1 policy although the kernel *reads* the argument, and accepts a v2
//!   policy (24 bytes) through the same number (the first byte selects the size).
//! * `FS_IOC_GET_ENCRYPTION_POLICY_EX` is declared with `__u8[9]` (policy_size
//!   plus version byte), not with the full argument struct.
//! * `struct fscrypt_add_key_arg` ends in a flexible `__u8 raw[]`; the raw key
//!   follows the 80-byte header directly ([`fscrypt_add_key_arg_with_raw`]).
//!
//! This module only declares data; the calls live in [`crate::ioctl`].

#![allow(non_camel_case_types, non_upper_case_globals)]

use core::mem::size_of;

use rustix::ioctl::{Opcode, opcode};

// ---------------------------------------------------------------------------
// Policy flags and modes (spec §1.1, §1.4)
// ---------------------------------------------------------------------------

/// Filenames padded to a multiple of 4 bytes.
pub const FSCRYPT_POLICY_FLAGS_PAD_4: u8 = 0x00;
/// Filenames padded to a multiple of 8 bytes.
pub const FSCRYPT_POLICY_FLAGS_PAD_8: u8 = 0x01;
/// Filenames padded to a multiple of 16 bytes.
pub const FSCRYPT_POLICY_FLAGS_PAD_16: u8 = 0x02;
/// Filenames padded to a multiple of 32 bytes.
pub const FSCRYPT_POLICY_FLAGS_PAD_32: u8 = 0x03;
/// Mask of the padding bits.
pub const FSCRYPT_POLICY_FLAGS_PAD_MASK: u8 = 0x03;
/// Nonce in the IV, no per-file keys (Adiantum only).
pub const FSCRYPT_POLICY_FLAG_DIRECT_KEY: u8 = 0x04;
/// IV = inode number and logical block (v2 only).
pub const FSCRYPT_POLICY_FLAG_IV_INO_LBLK_64: u8 = 0x08;
/// IV = hashed inode number + logical block, 32 bits (v2 only).
pub const FSCRYPT_POLICY_FLAG_IV_INO_LBLK_32: u8 = 0x10;

/// AES-256-XTS contents mode.
pub const FSCRYPT_MODE_AES_256_XTS: u8 = 1;
/// AES-256-CBC-CTS filenames mode.
pub const FSCRYPT_MODE_AES_256_CTS: u8 = 4;
/// AES-128-CBC-ESSIV contents mode.
pub const FSCRYPT_MODE_AES_128_CBC: u8 = 5;
/// AES-128-CBC-CTS filenames mode.
pub const FSCRYPT_MODE_AES_128_CTS: u8 = 6;
/// SM4-XTS contents mode (v2 only).
pub const FSCRYPT_MODE_SM4_XTS: u8 = 7;
/// SM4-CBC-CTS filenames mode (v2 only).
pub const FSCRYPT_MODE_SM4_CTS: u8 = 8;
/// Adiantum (contents and filenames).
pub const FSCRYPT_MODE_ADIANTUM: u8 = 9;
/// AES-256-HCTR2 filenames mode (v2 only).
pub const FSCRYPT_MODE_AES_256_HCTR2: u8 = 10;

// ---------------------------------------------------------------------------
// Policies (spec §3.1)
// ---------------------------------------------------------------------------

/// `version` of a v1 policy (careful: 0, not 1).
pub const FSCRYPT_POLICY_V1: u8 = 0;
/// Size of a v1 master key descriptor in bytes.
pub const FSCRYPT_KEY_DESCRIPTOR_SIZE: usize = 8;
/// `version` of a v2 policy.
pub const FSCRYPT_POLICY_V2: u8 = 2;
/// Size of a v2 master key identifier in bytes.
pub const FSCRYPT_KEY_IDENTIFIER_SIZE: usize = 16;
/// Largest raw master key accepted by `FS_IOC_ADD_ENCRYPTION_KEY`, bytes.
pub const FSCRYPT_MAX_KEY_SIZE: usize = 64;
/// Smallest raw master key accepted by `FS_IOC_ADD_ENCRYPTION_KEY`, bytes
/// (kernel-internal `FSCRYPT_MIN_KEY_SIZE`).
pub const FSCRYPT_MIN_KEY_SIZE: usize = 16;
/// Largest hardware-wrapped key, bytes (`BLK_CRYPTO_MAX_HW_WRAPPED_KEY_SIZE`).
pub const BLK_CRYPTO_MAX_HW_WRAPPED_KEY_SIZE: usize = 128;
/// Size of the per-file nonce, bytes.
pub const FSCRYPT_FILE_NONCE_SIZE: usize = 16;

/// `struct fscrypt_policy_v1` — 12 bytes, all single-byte fields.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct fscrypt_policy_v1 {
    /// [`FSCRYPT_POLICY_V1`] (0).
    pub version: u8,
    /// Contents mode number.
    pub contents_encryption_mode: u8,
    /// Filenames mode number.
    pub filenames_encryption_mode: u8,
    /// Policy flags (padding, DIRECT_KEY).
    pub flags: u8,
    /// 8-byte descriptor chosen by userspace.
    pub master_key_descriptor: [u8; FSCRYPT_KEY_DESCRIPTOR_SIZE],
}

/// `struct fscrypt_policy_v2` — 24 bytes.
///
/// `__reserved[0]` is `log2_data_unit_size` since Linux 6.7 (spec §3.1); the
/// uapi header still spells the whole 4 bytes `__reserved`, and so do we.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct fscrypt_policy_v2 {
    /// [`FSCRYPT_POLICY_V2`] (2).
    pub version: u8,
    /// Contents mode number.
    pub contents_encryption_mode: u8,
    /// Filenames mode number.
    pub filenames_encryption_mode: u8,
    /// Policy flags.
    pub flags: u8,
    /// `[0]` = log2_data_unit_size (6.7+), `[1..4]` must be zero.
    pub __reserved: [u8; 4],
    /// HKDF-derived key identifier.
    pub master_key_identifier: [u8; FSCRYPT_KEY_IDENTIFIER_SIZE],
}

/// The `policy` union of `struct fscrypt_get_policy_ex_arg`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fscrypt_get_policy_ex_arg_policy {
    /// First byte: 0 (v1) or 2 (v2).
    pub version: u8,
    /// v1 view.
    pub v1: fscrypt_policy_v1,
    /// v2 view.
    pub v2: fscrypt_policy_v2,
}

/// `struct fscrypt_get_policy_ex_arg` — 32 bytes (spec §10.3).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fscrypt_get_policy_ex_arg {
    /// In: size of `policy` (24); out: actual size (12 or 24).
    pub policy_size: u64,
    /// Out: the policy.
    pub policy: fscrypt_get_policy_ex_arg_policy,
}

// ---------------------------------------------------------------------------
// Keys (spec §10.6 – §10.8)
// ---------------------------------------------------------------------------

/// Key specifier type: 8-byte descriptor (v1 policies).
pub const FSCRYPT_KEY_SPEC_TYPE_DESCRIPTOR: u32 = 1;
/// Key specifier type: 16-byte identifier (v2 policies).
pub const FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER: u32 = 2;
/// `fscrypt_add_key_arg.flags`: the key is hardware-wrapped (6.16+).
pub const FSCRYPT_ADD_KEY_FLAG_HW_WRAPPED: u32 = 0x0000_0001;
/// Removal status: the secret is gone but some files are still open.
pub const FSCRYPT_KEY_REMOVAL_STATUS_FLAG_FILES_BUSY: u32 = 0x0000_0001;
/// Removal status: only this user's claim was removed; others remain.
pub const FSCRYPT_KEY_REMOVAL_STATUS_FLAG_OTHER_USERS: u32 = 0x0000_0002;
/// Key status: not in the filesystem keyring.
pub const FSCRYPT_KEY_STATUS_ABSENT: u32 = 1;
/// Key status: present.
pub const FSCRYPT_KEY_STATUS_PRESENT: u32 = 2;
/// Key status: removed but some files still in use.
pub const FSCRYPT_KEY_STATUS_INCOMPLETELY_REMOVED: u32 = 3;
/// Key status flag: the calling user has a claim on the key.
pub const FSCRYPT_KEY_STATUS_FLAG_ADDED_BY_SELF: u32 = 0x0000_0001;

/// The `u` union of `struct fscrypt_key_specifier` (32 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub union fscrypt_key_specifier_u {
    /// Reserved space, must be zero beyond the used bytes.
    pub __reserved: [u8; 32],
    /// v1 descriptor.
    pub descriptor: [u8; FSCRYPT_KEY_DESCRIPTOR_SIZE],
    /// v2 identifier.
    pub identifier: [u8; FSCRYPT_KEY_IDENTIFIER_SIZE],
}

/// `struct fscrypt_key_specifier` — 40 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fscrypt_key_specifier {
    /// One of `FSCRYPT_KEY_SPEC_TYPE_*`.
    pub r#type: u32,
    /// Must be zero.
    pub __reserved: u32,
    /// Descriptor or identifier.
    pub u: fscrypt_key_specifier_u,
}

/// `struct fscrypt_provisioning_key_payload` header (8 bytes, then `raw[]`);
/// `flags` was `__reserved` before 6.16.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct fscrypt_provisioning_key_payload {
    /// Must equal the key specifier type it is used with.
    pub r#type: u32,
    /// Must equal `fscrypt_add_key_arg.flags` (6.16+).
    pub flags: u32,
}

/// `struct fscrypt_add_key_arg` — 80 bytes, followed by `__u8 raw[raw_size]`.
///
/// Before 6.16 `flags` and `__reserved[7]` were `__reserved[8]`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fscrypt_add_key_arg {
    /// In: descriptor/identifier type; out (identifier): the identifier.
    pub key_spec: fscrypt_key_specifier,
    /// Size of `raw`, bytes.
    pub raw_size: u32,
    /// 0, or the ID of a Linux key of type "fscrypt-provisioning".
    pub key_id: u32,
    /// `FSCRYPT_ADD_KEY_FLAG_*`.
    pub flags: u32,
    /// Must be zero.
    pub __reserved: [u32; 7],
}

/// `struct fscrypt_add_key_arg` with its flexible `raw[]` member sized for
/// the largest key the kernel accepts (128 bytes, hardware-wrapped).
///
/// This is what is actually passed to `FS_IOC_ADD_ENCRYPTION_KEY`: the
/// kernel reads the 80-byte header, then `raw_size` bytes right after it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fscrypt_add_key_arg_with_raw {
    /// The fixed header.
    pub arg: fscrypt_add_key_arg,
    /// The key bytes (`arg.raw_size` of them are used).
    pub raw: [u8; BLK_CRYPTO_MAX_HW_WRAPPED_KEY_SIZE],
}

/// `struct fscrypt_remove_key_arg` — 64 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fscrypt_remove_key_arg {
    /// In: which key.
    pub key_spec: fscrypt_key_specifier,
    /// Out: `FSCRYPT_KEY_REMOVAL_STATUS_FLAG_*`.
    pub removal_status_flags: u32,
    /// Must be zero.
    pub __reserved: [u32; 5],
}

/// `struct fscrypt_get_key_status_arg` — 128 bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fscrypt_get_key_status_arg {
    /// In: which key.
    pub key_spec: fscrypt_key_specifier,
    /// Must be zero.
    pub __reserved: [u32; 6],
    /// Out: `FSCRYPT_KEY_STATUS_*`.
    pub status: u32,
    /// Out: `FSCRYPT_KEY_STATUS_FLAG_*`.
    pub status_flags: u32,
    /// Out: number of users holding a claim (identifier keys only).
    pub user_count: u32,
    /// Out: zeroed.
    pub __out_reserved: [u32; 13],
}

// ---------------------------------------------------------------------------
// blk-crypto (include/uapi/linux/blk-crypto.h, 6.15+)
// ---------------------------------------------------------------------------

/// `struct blk_crypto_import_key_arg` — 64 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct blk_crypto_import_key_arg {
    /// In: user pointer to the raw key.
    pub raw_key_ptr: u64,
    /// In: raw key size, bytes.
    pub raw_key_size: u64,
    /// In: user pointer to the output buffer for the long-term wrapped key.
    pub lt_key_ptr: u64,
    /// In: buffer size; out: long-term wrapped key size.
    pub lt_key_size: u64,
    /// Must be zero.
    pub reserved: [u64; 4],
}

/// `struct blk_crypto_generate_key_arg` — 48 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct blk_crypto_generate_key_arg {
    /// In: user pointer to the output buffer for the long-term wrapped key.
    pub lt_key_ptr: u64,
    /// In: buffer size; out: long-term wrapped key size.
    pub lt_key_size: u64,
    /// Must be zero.
    pub reserved: [u64; 4],
}

/// `struct blk_crypto_prepare_key_arg` — 64 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct blk_crypto_prepare_key_arg {
    /// In: user pointer to the long-term wrapped key.
    pub lt_key_ptr: u64,
    /// In: its size, bytes.
    pub lt_key_size: u64,
    /// In: user pointer to the output buffer for the ephemerally-wrapped key.
    pub eph_key_ptr: u64,
    /// In: buffer size; out: ephemerally-wrapped key size.
    pub eph_key_size: u64,
    /// Must be zero.
    pub reserved: [u64; 4],
}

// ---------------------------------------------------------------------------
// Size checks (spec §1.3, §10)
// ---------------------------------------------------------------------------

const _: () = assert!(size_of::<fscrypt_policy_v1>() == 12);
const _: () = assert!(size_of::<fscrypt_policy_v2>() == 24);
const _: () = assert!(size_of::<fscrypt_get_policy_ex_arg>() == 32);
const _: () = assert!(size_of::<fscrypt_key_specifier>() == 40);
const _: () = assert!(size_of::<fscrypt_provisioning_key_payload>() == 8);
const _: () = assert!(size_of::<fscrypt_add_key_arg>() == 80);
const _: () = assert!(size_of::<fscrypt_add_key_arg_with_raw>() == 80 + 128);
const _: () = assert!(size_of::<fscrypt_remove_key_arg>() == 64);
const _: () = assert!(size_of::<fscrypt_get_key_status_arg>() == 128);
const _: () = assert!(size_of::<blk_crypto_import_key_arg>() == 64);
const _: () = assert!(size_of::<blk_crypto_generate_key_arg>() == 48);
const _: () = assert!(size_of::<blk_crypto_prepare_key_arg>() == 64);

// ---------------------------------------------------------------------------
// ioctl numbers (spec §1.6)
// ---------------------------------------------------------------------------

const FS_IOC_MAGIC: u8 = b'f';
const BLK_IOC_MAGIC: u8 = 0x12;

/// `_IOR('f', 19, struct fscrypt_policy_v1)` (sic: R although the kernel reads).
pub const FS_IOC_SET_ENCRYPTION_POLICY: Opcode =
    opcode::read::<fscrypt_policy_v1>(FS_IOC_MAGIC, 19);
/// `_IOW('f', 20, __u8[16])` (deprecated).
pub const FS_IOC_GET_ENCRYPTION_PWSALT: Opcode = opcode::write::<[u8; 16]>(FS_IOC_MAGIC, 20);
/// `_IOW('f', 21, struct fscrypt_policy_v1)`.
pub const FS_IOC_GET_ENCRYPTION_POLICY: Opcode =
    opcode::write::<fscrypt_policy_v1>(FS_IOC_MAGIC, 21);
/// `_IOWR('f', 22, __u8[9])` (size + version only).
pub const FS_IOC_GET_ENCRYPTION_POLICY_EX: Opcode = opcode::read_write::<[u8; 9]>(FS_IOC_MAGIC, 22);
/// `_IOWR('f', 23, struct fscrypt_add_key_arg)`.
pub const FS_IOC_ADD_ENCRYPTION_KEY: Opcode =
    opcode::read_write::<fscrypt_add_key_arg>(FS_IOC_MAGIC, 23);
/// `_IOWR('f', 24, struct fscrypt_remove_key_arg)`.
pub const FS_IOC_REMOVE_ENCRYPTION_KEY: Opcode =
    opcode::read_write::<fscrypt_remove_key_arg>(FS_IOC_MAGIC, 24);
/// `_IOWR('f', 25, struct fscrypt_remove_key_arg)`.
pub const FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS: Opcode =
    opcode::read_write::<fscrypt_remove_key_arg>(FS_IOC_MAGIC, 25);
/// `_IOWR('f', 26, struct fscrypt_get_key_status_arg)`.
pub const FS_IOC_GET_ENCRYPTION_KEY_STATUS: Opcode =
    opcode::read_write::<fscrypt_get_key_status_arg>(FS_IOC_MAGIC, 26);
/// `_IOR('f', 27, __u8[16])`.
pub const FS_IOC_GET_ENCRYPTION_NONCE: Opcode = opcode::read::<[u8; 16]>(FS_IOC_MAGIC, 27);
/// `_IOWR(0x12, 137, struct blk_crypto_import_key_arg)`.
pub const BLKCRYPTOIMPORTKEY: Opcode =
    opcode::read_write::<blk_crypto_import_key_arg>(BLK_IOC_MAGIC, 137);
/// `_IOWR(0x12, 138, struct blk_crypto_generate_key_arg)`.
pub const BLKCRYPTOGENERATEKEY: Opcode =
    opcode::read_write::<blk_crypto_generate_key_arg>(BLK_IOC_MAGIC, 138);
/// `_IOWR(0x12, 139, struct blk_crypto_prepare_key_arg)`.
pub const BLKCRYPTOPREPAREKEY: Opcode =
    opcode::read_write::<blk_crypto_prepare_key_arg>(BLK_IOC_MAGIC, 139);

// ---------------------------------------------------------------------------
// Constructors shared by ioctl.rs and the tests
// ---------------------------------------------------------------------------

impl fscrypt_key_specifier {
    /// A descriptor specifier (type 1), reserved bytes zero.
    pub fn descriptor(descriptor: [u8; FSCRYPT_KEY_DESCRIPTOR_SIZE]) -> Self {
        let mut u = [0u8; 32];
        u[..FSCRYPT_KEY_DESCRIPTOR_SIZE].copy_from_slice(&descriptor);
        Self {
            r#type: FSCRYPT_KEY_SPEC_TYPE_DESCRIPTOR,
            __reserved: 0,
            u: fscrypt_key_specifier_u { __reserved: u },
        }
    }

    /// An identifier specifier (type 2), reserved bytes zero.
    pub fn identifier(identifier: [u8; FSCRYPT_KEY_IDENTIFIER_SIZE]) -> Self {
        let mut u = [0u8; 32];
        u[..FSCRYPT_KEY_IDENTIFIER_SIZE].copy_from_slice(&identifier);
        Self {
            r#type: FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER,
            __reserved: 0,
            u: fscrypt_key_specifier_u { __reserved: u },
        }
    }

    /// The 32 bytes of the union `u` (descriptor or identifier first,
    /// then zeros when built by the constructors above).
    pub fn u_bytes(&self) -> [u8; 32] {
        crate::ioctl::key_spec_u_bytes(self)
    }
}

impl fscrypt_get_policy_ex_arg {
    /// An argument asking for up to 24 policy bytes, everything else zero.
    pub fn new() -> Self {
        Self {
            policy_size: size_of::<fscrypt_policy_v2>() as u64,
            policy: fscrypt_get_policy_ex_arg_policy {
                v2: fscrypt_policy_v2::default(),
            },
        }
    }

    /// The policy bytes the kernel wrote (`policy_size` of them, at most 24).
    pub fn policy_bytes(&self) -> ([u8; 24], usize) {
        let bytes = crate::ioctl::policy_ex_bytes(self);
        let len = usize::try_from(self.policy_size)
            .unwrap_or(usize::MAX)
            .min(24);
        (bytes, len)
    }
}

impl Default for fscrypt_get_policy_ex_arg {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    #[test]
    fn ioctl_numbers_match_spec_1_6() {
        assert_eq!(FS_IOC_SET_ENCRYPTION_POLICY, 0x800C_6613);
        assert_eq!(FS_IOC_GET_ENCRYPTION_PWSALT, 0x4010_6614);
        assert_eq!(FS_IOC_GET_ENCRYPTION_POLICY, 0x400C_6615);
        assert_eq!(FS_IOC_GET_ENCRYPTION_POLICY_EX, 0xC009_6616);
        assert_eq!(FS_IOC_ADD_ENCRYPTION_KEY, 0xC050_6617);
        assert_eq!(FS_IOC_REMOVE_ENCRYPTION_KEY, 0xC040_6618);
        assert_eq!(FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS, 0xC040_6619);
        assert_eq!(FS_IOC_GET_ENCRYPTION_KEY_STATUS, 0xC080_661A);
        assert_eq!(FS_IOC_GET_ENCRYPTION_NONCE, 0x8010_661B);
    }

    #[test]
    fn blkcrypto_ioctl_numbers() {
        // _IOWR(0x12, nr, 64-byte / 48-byte struct) in the generic layout:
        // dir 3 << 30 | size << 16 | 0x12 << 8 | nr.
        assert_eq!(BLKCRYPTOIMPORTKEY, 0xC040_1289);
        assert_eq!(BLKCRYPTOGENERATEKEY, 0xC030_128A);
        assert_eq!(BLKCRYPTOPREPAREKEY, 0xC040_128B);
    }

    #[test]
    fn field_offsets_match_uapi() {
        // spec §10.6
        assert_eq!(offset_of!(fscrypt_key_specifier, r#type), 0);
        assert_eq!(offset_of!(fscrypt_key_specifier, __reserved), 4);
        assert_eq!(offset_of!(fscrypt_key_specifier, u), 8);
        assert_eq!(offset_of!(fscrypt_add_key_arg, raw_size), 40);
        assert_eq!(offset_of!(fscrypt_add_key_arg, key_id), 44);
        assert_eq!(offset_of!(fscrypt_add_key_arg, flags), 48);
        assert_eq!(offset_of!(fscrypt_add_key_arg, __reserved), 52);
        assert_eq!(offset_of!(fscrypt_add_key_arg_with_raw, raw), 80);
        assert_eq!(offset_of!(fscrypt_provisioning_key_payload, flags), 4);
        // spec §10.7
        assert_eq!(offset_of!(fscrypt_remove_key_arg, removal_status_flags), 40);
        assert_eq!(offset_of!(fscrypt_remove_key_arg, __reserved), 44);
        // spec §10.8
        assert_eq!(offset_of!(fscrypt_get_key_status_arg, __reserved), 40);
        assert_eq!(offset_of!(fscrypt_get_key_status_arg, status), 64);
        assert_eq!(offset_of!(fscrypt_get_key_status_arg, status_flags), 68);
        assert_eq!(offset_of!(fscrypt_get_key_status_arg, user_count), 72);
        assert_eq!(offset_of!(fscrypt_get_key_status_arg, __out_reserved), 76);
        // spec §10.3
        assert_eq!(offset_of!(fscrypt_get_policy_ex_arg, policy), 8);
        // spec §3.1
        assert_eq!(offset_of!(fscrypt_policy_v1, master_key_descriptor), 4);
        assert_eq!(offset_of!(fscrypt_policy_v2, __reserved), 4);
        assert_eq!(offset_of!(fscrypt_policy_v2, master_key_identifier), 8);
    }

    #[test]
    fn blkcrypto_layouts_match_uapi() {
        assert_eq!(offset_of!(blk_crypto_import_key_arg, raw_key_ptr), 0);
        assert_eq!(offset_of!(blk_crypto_import_key_arg, raw_key_size), 8);
        assert_eq!(offset_of!(blk_crypto_import_key_arg, lt_key_ptr), 16);
        assert_eq!(offset_of!(blk_crypto_import_key_arg, lt_key_size), 24);
        assert_eq!(offset_of!(blk_crypto_import_key_arg, reserved), 32);
        assert_eq!(offset_of!(blk_crypto_generate_key_arg, lt_key_ptr), 0);
        assert_eq!(offset_of!(blk_crypto_generate_key_arg, lt_key_size), 8);
        assert_eq!(offset_of!(blk_crypto_generate_key_arg, reserved), 16);
        assert_eq!(offset_of!(blk_crypto_prepare_key_arg, lt_key_ptr), 0);
        assert_eq!(offset_of!(blk_crypto_prepare_key_arg, lt_key_size), 8);
        assert_eq!(offset_of!(blk_crypto_prepare_key_arg, eph_key_ptr), 16);
        assert_eq!(offset_of!(blk_crypto_prepare_key_arg, eph_key_size), 24);
        assert_eq!(offset_of!(blk_crypto_prepare_key_arg, reserved), 32);
    }

    #[test]
    fn key_specifier_constructors() {
        let d = fscrypt_key_specifier::descriptor([1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(d.r#type, FSCRYPT_KEY_SPEC_TYPE_DESCRIPTOR);
        let u = d.u_bytes();
        assert_eq!(&u[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(u[8..].iter().all(|&b| b == 0));
        let i = fscrypt_key_specifier::identifier([0xab; 16]);
        assert_eq!(i.r#type, FSCRYPT_KEY_SPEC_TYPE_IDENTIFIER);
        let u = i.u_bytes();
        assert_eq!(&u[..16], &[0xab; 16]);
        assert!(u[16..].iter().all(|&b| b == 0));
    }
}
