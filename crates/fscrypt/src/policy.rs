//! Encryption policies: the uapi `struct fscrypt_policy_v1` / `_v2`, their
//! flags, key descriptors/identifiers, and every validation rule of spec §3.4.
//!
//! Kernel: fs/crypto/policy.c (`fscrypt_supported_policy()`,
//! `supported_iv_ino_lblk_policy()`), include/uapi/linux/fscrypt.h.
//! On-disk contexts (which add a nonce) live in `context.rs`; master keys and
//! derivation live in `keysetup.rs`.

use core::fmt;
use core::str::FromStr;

use crate::error::PolicyError;
use crate::mode::{EncryptionMode, valid_mode_pair};

/// Size of a v1 key descriptor in bytes (`FSCRYPT_KEY_DESCRIPTOR_SIZE`).
pub const KEY_DESCRIPTOR_SIZE: usize = 8;
/// Size of a v2 key identifier in bytes (`FSCRYPT_KEY_IDENTIFIER_SIZE`).
pub const KEY_IDENTIFIER_SIZE: usize = 16;
/// Size of `struct fscrypt_policy_v1` in bytes.
pub const POLICY_V1_SIZE: usize = 12;
/// Size of `struct fscrypt_policy_v2` in bytes.
pub const POLICY_V2_SIZE: usize = 24;
/// uapi `version` byte of a v1 policy (`FSCRYPT_POLICY_V1` = 0; sic, the v1
/// *context* uses 1, spec §14.1).
pub const POLICY_V1_VERSION: u8 = 0;
/// uapi `version` byte of a v2 policy (`FSCRYPT_POLICY_V2`).
pub const POLICY_V2_VERSION: u8 = 2;
/// Smallest allowed non-zero `log2_data_unit_size` (512-byte data units).
pub const MIN_LOG2_DATA_UNIT_SIZE: u8 = 9;
/// Largest `log2_data_unit_size` this crate supports (64 KiB data units; the
/// kernel's bound is the filesystem block size, which is at most 64 KiB).
pub const MAX_LOG2_DATA_UNIT_SIZE: u8 = 16;

/// The `flags` byte of a policy or context (spec §1.4). Open newtype: unknown
/// bits are kept and reported by validation.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PolicyFlags(pub u8);

impl PolicyFlags {
    /// `FSCRYPT_POLICY_FLAGS_PAD_4`: filenames padded to a multiple of 4 bytes.
    pub const PAD_4: Self = Self(0x00);
    /// `FSCRYPT_POLICY_FLAGS_PAD_8`.
    pub const PAD_8: Self = Self(0x01);
    /// `FSCRYPT_POLICY_FLAGS_PAD_16`.
    pub const PAD_16: Self = Self(0x02);
    /// `FSCRYPT_POLICY_FLAGS_PAD_32` (recommended).
    pub const PAD_32: Self = Self(0x03);
    /// `FSCRYPT_POLICY_FLAGS_PAD_MASK`.
    pub const PAD_MASK: Self = Self(0x03);
    /// `FSCRYPT_POLICY_FLAG_DIRECT_KEY`: the nonce goes into the IV and one key
    /// per mode is shared by all files (Adiantum only).
    pub const DIRECT_KEY: Self = Self(0x04);
    /// `FSCRYPT_POLICY_FLAG_IV_INO_LBLK_64` (v2 only).
    pub const IV_INO_LBLK_64: Self = Self(0x08);
    /// `FSCRYPT_POLICY_FLAG_IV_INO_LBLK_32` (v2 only).
    pub const IV_INO_LBLK_32: Self = Self(0x10);
    /// All bits valid in a v1 policy (`FS_POLICY_FLAGS_VALID`).
    pub const VALID_V1: Self = Self(0x07);
    /// All bits valid in a v2 policy.
    pub const VALID_V2: Self = Self(0x1f);

    /// The raw byte.
    pub fn bits(self) -> u8 {
        self.0
    }
    /// Whether every bit of `other` is set (for `PAD_4`, which is 0, this is
    /// always true: use [`PolicyFlags::padding`] for padding).
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
    /// Filename padding in bytes: `4 << (flags & 3)`, i.e. 4, 8, 16 or 32.
    pub fn padding(self) -> usize {
        4usize << (self.0 & Self::PAD_MASK.0)
    }
    /// The flags with the padding bits replaced by those selecting `padding`
    /// bytes (4, 8, 16 or 32), or `None` for another value.
    pub fn with_padding(self, padding: usize) -> Option<Self> {
        let bits = match padding {
            4 => 0,
            8 => 1,
            16 => 2,
            32 => 3,
            _ => return None,
        };
        Some(Self((self.0 & !Self::PAD_MASK.0) | bits))
    }
    /// `DIRECT_KEY` is set.
    pub fn direct_key(self) -> bool {
        self.contains(Self::DIRECT_KEY)
    }
    /// `IV_INO_LBLK_64` is set.
    pub fn iv_ino_lblk_64(self) -> bool {
        self.contains(Self::IV_INO_LBLK_64)
    }
    /// `IV_INO_LBLK_32` is set.
    pub fn iv_ino_lblk_32(self) -> bool {
        self.contains(Self::IV_INO_LBLK_32)
    }
}

impl core::ops::BitOr for PolicyFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

impl fmt::Debug for PolicyFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PolicyFlags({:#04x}: PAD_{}", self.0, self.padding())?;
        for (flag, name) in [
            (Self::DIRECT_KEY, "DIRECT_KEY"),
            (Self::IV_INO_LBLK_64, "IV_INO_LBLK_64"),
            (Self::IV_INO_LBLK_32, "IV_INO_LBLK_32"),
        ] {
            if self.contains(flag) {
                write!(f, "|{name}")?;
            }
        }
        let unknown = self.0 & !Self::VALID_V2.0;
        if unknown != 0 {
            write!(f, "|unknown {unknown:#04x}")?;
        }
        f.write_str(")")
    }
}

fn fmt_hex(bytes: &[u8], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    for b in bytes {
        write!(f, "{b:02x}")?;
    }
    Ok(())
}

fn parse_hex<const N: usize>(s: &str) -> Result<[u8; N], PolicyError> {
    let bad = || PolicyError::BadHex {
        expected_bytes: N,
        got_chars: s.len(),
    };
    if s.len() != 2 * N || !s.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

/// A v1 master key descriptor: 8 bytes chosen by userspace (spec §4.2).
/// `Display` prints 16 lowercase hex digits; `FromStr` parses them.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[doc(alias = "master_key_descriptor")]
pub struct KeyDescriptor(pub [u8; KEY_DESCRIPTOR_SIZE]);

/// A v2 master key identifier: HKDF-SHA512(master, ctx 1, "", 16) (spec §4.4).
/// `Display` prints 32 lowercase hex digits; `FromStr` parses them.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[doc(alias = "master_key_identifier")]
pub struct KeyIdentifier(pub [u8; KEY_IDENTIFIER_SIZE]);

macro_rules! hex_newtype {
    ($t:ident, $n:expr) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt_hex(&self.0, f)
            }
        }
        impl fmt::Debug for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($t), "("))?;
                fmt_hex(&self.0, f)?;
                f.write_str(")")
            }
        }
        impl FromStr for $t {
            type Err = PolicyError;
            /// Parses exactly `2 * N` hex digits (either case).
            fn from_str(s: &str) -> Result<Self, PolicyError> {
                parse_hex::<$n>(s).map(Self)
            }
        }
        impl AsRef<[u8]> for $t {
            fn as_ref(&self) -> &[u8] {
                &self.0
            }
        }
    };
}
hex_newtype!(KeyDescriptor, KEY_DESCRIPTOR_SIZE);
hex_newtype!(KeyIdentifier, KEY_IDENTIFIER_SIZE);

/// `struct fscrypt_policy_v1` (12 bytes, spec §3.1):
///
/// | off | size | field |
/// |----:|-----:|-------|
/// | 0 | 1 | version = 0 |
/// | 1 | 1 | contents_encryption_mode |
/// | 2 | 1 | filenames_encryption_mode |
/// | 3 | 1 | flags |
/// | 4 | 8 | master_key_descriptor |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[doc(alias = "fscrypt_policy_v1")]
pub struct PolicyV1 {
    /// Mode for regular files' contents.
    pub contents_mode: EncryptionMode,
    /// Mode for filenames and symlink targets.
    pub filenames_mode: EncryptionMode,
    /// Padding and DIRECT_KEY flags.
    pub flags: PolicyFlags,
    /// Which master key (legacy keyring descriptor).
    pub master_key_descriptor: KeyDescriptor,
}

/// `struct fscrypt_policy_v2` (24 bytes, spec §3.1):
///
/// | off | size | field |
/// |----:|-----:|-------|
/// | 0 | 1 | version = 2 |
/// | 1 | 1 | contents_encryption_mode |
/// | 2 | 1 | filenames_encryption_mode |
/// | 3 | 1 | flags |
/// | 4 | 1 | log2_data_unit_size (0 = filesystem block size) |
/// | 5 | 3 | reserved, zero |
/// | 8 | 16 | master_key_identifier |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[doc(alias = "fscrypt_policy_v2")]
pub struct PolicyV2 {
    /// Mode for regular files' contents.
    pub contents_mode: EncryptionMode,
    /// Mode for filenames and symlink targets.
    pub filenames_mode: EncryptionMode,
    /// Padding, DIRECT_KEY and IV_INO_LBLK_* flags.
    pub flags: PolicyFlags,
    /// log2 of the data unit size in bytes, or 0 for the filesystem block size
    /// (spec §3.3; since Linux 6.7).
    pub log2_data_unit_size: u8,
    /// Which master key.
    pub master_key_identifier: KeyIdentifier,
}

impl PolicyV2 {
    /// The recommended default policy for a master key: AES-256-XTS contents,
    /// AES-256-CTS filenames, PAD_32, block-size data units.
    pub fn new_default(master_key_identifier: KeyIdentifier) -> Self {
        Self {
            contents_mode: EncryptionMode::AES_256_XTS,
            filenames_mode: EncryptionMode::AES_256_CTS,
            flags: PolicyFlags::PAD_32,
            log2_data_unit_size: 0,
            master_key_identifier,
        }
    }
}

/// An encryption policy of either version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Version 1 (legacy, AES-128-ECB key derivation).
    V1(PolicyV1),
    /// Version 2 (HKDF-SHA512 key derivation).
    V2(PolicyV2),
}

impl From<PolicyV1> for Policy {
    fn from(p: PolicyV1) -> Self {
        Policy::V1(p)
    }
}
impl From<PolicyV2> for Policy {
    fn from(p: PolicyV2) -> Self {
        Policy::V2(p)
    }
}

impl Policy {
    /// Parses a uapi policy (12 bytes for version 0, 24 bytes for version 2)
    /// and validates it (spec §3.1, §3.4), so the result is a policy the
    /// kernel would accept on a filesystem with 64 KiB-capable data units.
    ///
    /// # Errors
    /// [`PolicyError::Empty`], [`PolicyError::UnknownVersion`],
    /// [`PolicyError::BadSize`], [`PolicyError::ReservedNonZero`], or the
    /// first violated rule of [`Policy::validate`].
    pub fn parse(bytes: &[u8]) -> Result<Policy, PolicyError> {
        let p = Self::parse_unvalidated(bytes)?;
        p.validate()?;
        Ok(p)
    }

    /// Parses the byte layout only (version, size, reserved bytes), without the
    /// mode/flag rules of [`Policy::validate`].
    ///
    /// # Errors
    /// [`PolicyError::Empty`], [`PolicyError::UnknownVersion`],
    /// [`PolicyError::BadSize`], [`PolicyError::ReservedNonZero`].
    pub fn parse_unvalidated(bytes: &[u8]) -> Result<Policy, PolicyError> {
        let version = *bytes.first().ok_or(PolicyError::Empty)?;
        match version {
            POLICY_V1_VERSION => {
                let b: &[u8; POLICY_V1_SIZE] =
                    bytes.try_into().map_err(|_| PolicyError::BadSize {
                        version,
                        expected: POLICY_V1_SIZE,
                        got: bytes.len(),
                    })?;
                Ok(Policy::V1(PolicyV1::from_fields(b)))
            }
            POLICY_V2_VERSION => {
                let b: &[u8; POLICY_V2_SIZE] =
                    bytes.try_into().map_err(|_| PolicyError::BadSize {
                        version,
                        expected: POLICY_V2_SIZE,
                        got: bytes.len(),
                    })?;
                PolicyV2::from_fields(b).map(Policy::V2)
            }
            v => Err(PolicyError::UnknownVersion(v)),
        }
    }

    /// The kernel's exact bytes (12 or 24).
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Policy::V1(p) => p.to_bytes().to_vec(),
            Policy::V2(p) => p.to_bytes().to_vec(),
        }
    }

    /// uapi version byte: 0 for v1, 2 for v2.
    pub fn version(&self) -> u8 {
        match self {
            Policy::V1(_) => POLICY_V1_VERSION,
            Policy::V2(_) => POLICY_V2_VERSION,
        }
    }
    /// The contents mode.
    pub fn contents_mode(&self) -> EncryptionMode {
        match self {
            Policy::V1(p) => p.contents_mode,
            Policy::V2(p) => p.contents_mode,
        }
    }
    /// The filenames mode.
    pub fn filenames_mode(&self) -> EncryptionMode {
        match self {
            Policy::V1(p) => p.filenames_mode,
            Policy::V2(p) => p.filenames_mode,
        }
    }
    /// The flags byte.
    pub fn flags(&self) -> PolicyFlags {
        match self {
            Policy::V1(p) => p.flags,
            Policy::V2(p) => p.flags,
        }
    }
    /// `log2_data_unit_size` (always 0 for v1).
    pub fn log2_data_unit_size(&self) -> u8 {
        match self {
            Policy::V1(_) => 0,
            Policy::V2(p) => p.log2_data_unit_size,
        }
    }

    /// Checks every filesystem-independent rule of spec §3.4 and returns the
    /// first one violated.
    ///
    /// Kernel: `fscrypt_supported_v1_policy()` / `fscrypt_supported_v2_policy()`.
    /// Filesystem-dependent rules (data unit size ≤ block size, IV_INO_LBLK_32
    /// with sub-block data units, stable inode numbers) are checked by
    /// [`Policy::validate_for_block_size`] and when an inode's keys are set up.
    ///
    /// # Errors
    /// [`PolicyError::UnsupportedModes`], [`PolicyError::UnsupportedFlags`],
    /// [`PolicyError::IvInoLblkNeedsV2`], [`PolicyError::IncompatibleFlags`],
    /// [`PolicyError::DirectKeyNeedsAdiantum`],
    /// [`PolicyError::IvInoLblkNeedsAesXts`], [`PolicyError::BadDataUnitSize`].
    pub fn validate(&self) -> Result<(), PolicyError> {
        let v2 = matches!(self, Policy::V2(_));
        let (contents, filenames, flags) =
            (self.contents_mode(), self.filenames_mode(), self.flags());
        if !valid_mode_pair(contents, filenames, v2) {
            return Err(PolicyError::UnsupportedModes {
                contents,
                filenames,
                version: self.version(),
            });
        }
        if v2 {
            if flags.0 & !PolicyFlags::VALID_V2.0 != 0 {
                return Err(PolicyError::UnsupportedFlags(flags.0));
            }
        } else if flags.0 & !PolicyFlags::VALID_V1.0 != 0 {
            if flags.0 & !PolicyFlags::VALID_V2.0 == 0 {
                return Err(PolicyError::IvInoLblkNeedsV2(flags.0));
            }
            return Err(PolicyError::UnsupportedFlags(flags.0));
        }
        let exclusive = [
            flags.direct_key(),
            flags.iv_ino_lblk_64(),
            flags.iv_ino_lblk_32(),
        ];
        if exclusive.iter().filter(|&&b| b).count() > 1 {
            return Err(PolicyError::IncompatibleFlags(flags.0));
        }
        if flags.direct_key() {
            // Kernel rule: same mode for both and IV size >= 24 (nonce in IV):
            // only Adiantum qualifies.
            let ok = contents == filenames && contents.info().is_some_and(|m| m.iv_size >= 24);
            if !ok {
                return Err(PolicyError::DirectKeyNeedsAdiantum {
                    contents,
                    filenames,
                });
            }
        }
        if (flags.iv_ino_lblk_64() || flags.iv_ino_lblk_32())
            && contents != EncryptionMode::AES_256_XTS
        {
            return Err(PolicyError::IvInoLblkNeedsAesXts { contents });
        }
        let log2 = self.log2_data_unit_size();
        if log2 != 0 && !(MIN_LOG2_DATA_UNIT_SIZE..=MAX_LOG2_DATA_UNIT_SIZE).contains(&log2) {
            return Err(PolicyError::BadDataUnitSize(log2));
        }
        Ok(())
    }

    /// [`Policy::validate`] plus the rules that depend on the filesystem block
    /// size (spec §3.3): a non-zero `log2_data_unit_size` must not exceed the
    /// block size, and IV_INO_LBLK_32 does not allow sub-block data units.
    ///
    /// # Errors
    /// As [`Policy::validate`], plus [`PolicyError::BadBlockSize`],
    /// [`PolicyError::DataUnitLargerThanBlock`] and
    /// [`PolicyError::IvInoLblk32NeedsBlockSizedUnits`].
    pub fn validate_for_block_size(&self, fs_block_size: u32) -> Result<(), PolicyError> {
        self.validate()?;
        self.data_unit_bits(fs_block_size).map(|_| ())
    }

    /// log2 of the data unit size for a filesystem with the given block size
    /// (spec §3.3): `log2_data_unit_size`, or the block size when it is 0.
    ///
    /// # Errors
    /// [`PolicyError::BadBlockSize`] unless the block size is a power of two
    /// in 512..=65536; [`PolicyError::DataUnitLargerThanBlock`];
    /// [`PolicyError::IvInoLblk32NeedsBlockSizedUnits`].
    pub fn data_unit_bits(&self, fs_block_size: u32) -> Result<u8, PolicyError> {
        if !fs_block_size.is_power_of_two() || !(512..=65536).contains(&fs_block_size) {
            return Err(PolicyError::BadBlockSize(fs_block_size));
        }
        let blk_bits = fs_block_size.trailing_zeros() as u8;
        let log2 = self.log2_data_unit_size();
        if log2 == 0 {
            return Ok(blk_bits);
        }
        if log2 > blk_bits {
            return Err(PolicyError::DataUnitLargerThanBlock {
                log2_data_unit_size: log2,
                fs_block_size,
            });
        }
        if log2 != blk_bits && self.flags().iv_ino_lblk_32() {
            return Err(PolicyError::IvInoLblk32NeedsBlockSizedUnits);
        }
        Ok(log2)
    }
}

impl PolicyV1 {
    fn from_fields(b: &[u8; POLICY_V1_SIZE]) -> Self {
        let mut d = [0u8; KEY_DESCRIPTOR_SIZE];
        d.copy_from_slice(&b[4..12]);
        Self {
            contents_mode: EncryptionMode(b[1]),
            filenames_mode: EncryptionMode(b[2]),
            flags: PolicyFlags(b[3]),
            master_key_descriptor: KeyDescriptor(d),
        }
    }
    /// The 12 uapi bytes.
    pub fn to_bytes(&self) -> [u8; POLICY_V1_SIZE] {
        let mut b = [0u8; POLICY_V1_SIZE];
        b[0] = POLICY_V1_VERSION;
        b[1] = self.contents_mode.0;
        b[2] = self.filenames_mode.0;
        b[3] = self.flags.0;
        b[4..12].copy_from_slice(&self.master_key_descriptor.0);
        b
    }
}

impl PolicyV2 {
    fn from_fields(b: &[u8; POLICY_V2_SIZE]) -> Result<Self, PolicyError> {
        if b[5..8] != [0, 0, 0] {
            return Err(PolicyError::ReservedNonZero);
        }
        let mut id = [0u8; KEY_IDENTIFIER_SIZE];
        id.copy_from_slice(&b[8..24]);
        Ok(Self {
            contents_mode: EncryptionMode(b[1]),
            filenames_mode: EncryptionMode(b[2]),
            flags: PolicyFlags(b[3]),
            log2_data_unit_size: b[4],
            master_key_identifier: KeyIdentifier(id),
        })
    }
    /// The 24 uapi bytes.
    pub fn to_bytes(&self) -> [u8; POLICY_V2_SIZE] {
        let mut b = [0u8; POLICY_V2_SIZE];
        b[0] = POLICY_V2_VERSION;
        b[1] = self.contents_mode.0;
        b[2] = self.filenames_mode.0;
        b[3] = self.flags.0;
        b[4] = self.log2_data_unit_size;
        b[8..24].copy_from_slice(&self.master_key_identifier.0);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v2(contents: u8, filenames: u8, flags: u8, log2: u8) -> Policy {
        Policy::V2(PolicyV2 {
            contents_mode: EncryptionMode(contents),
            filenames_mode: EncryptionMode(filenames),
            flags: PolicyFlags(flags),
            log2_data_unit_size: log2,
            master_key_identifier: KeyIdentifier([0xab; 16]),
        })
    }
    fn v1(contents: u8, filenames: u8, flags: u8) -> Policy {
        Policy::V1(PolicyV1 {
            contents_mode: EncryptionMode(contents),
            filenames_mode: EncryptionMode(filenames),
            flags: PolicyFlags(flags),
            master_key_descriptor: KeyDescriptor([0x11; 8]),
        })
    }

    #[test]
    fn round_trip_bytes() {
        for p in [
            v2(1, 4, 3, 0),
            v2(1, 10, 0x0b, 12),
            v1(9, 9, 7),
            v1(5, 6, 0),
        ] {
            let b = p.to_bytes();
            assert_eq!(b.len(), if p.version() == 0 { 12 } else { 24 });
            assert_eq!(Policy::parse(&b).unwrap(), p);
        }
    }

    #[test]
    fn each_rule_has_its_error() {
        use PolicyError as E;
        assert!(matches!(
            v2(1, 6, 0, 0).validate(),
            Err(E::UnsupportedModes { .. })
        ));
        assert!(matches!(
            v1(7, 8, 0).validate(),
            Err(E::UnsupportedModes { .. })
        ));
        assert!(matches!(
            v1(1, 10, 0).validate(),
            Err(E::UnsupportedModes { .. })
        ));
        assert!(matches!(
            v2(1, 4, 0x20, 0).validate(),
            Err(E::UnsupportedFlags(0x20))
        ));
        assert!(matches!(
            v1(1, 4, 0x08).validate(),
            Err(E::IvInoLblkNeedsV2(8))
        ));
        assert!(matches!(
            v1(1, 4, 0x40).validate(),
            Err(E::UnsupportedFlags(0x40))
        ));
        assert!(matches!(
            v2(9, 9, 0x0c, 0).validate(),
            Err(E::IncompatibleFlags(0x0c))
        ));
        assert!(matches!(
            v2(1, 4, 0x18, 0).validate(),
            Err(E::IncompatibleFlags(_))
        ));
        assert!(matches!(
            v2(1, 4, 0x04, 0).validate(),
            Err(E::DirectKeyNeedsAdiantum { .. })
        ));
        assert!(matches!(
            v1(1, 4, 0x04).validate(),
            Err(E::DirectKeyNeedsAdiantum { .. })
        ));
        assert!(matches!(
            v2(9, 9, 0x08, 0).validate(),
            Err(E::IvInoLblkNeedsAesXts { .. })
        ));
        assert!(matches!(
            v2(1, 4, 0, 8).validate(),
            Err(E::BadDataUnitSize(8))
        ));
        assert!(matches!(
            v2(1, 4, 0, 17).validate(),
            Err(E::BadDataUnitSize(17))
        ));
        assert!(v2(9, 9, 0x07, 0).validate().is_ok());
        assert!(v2(1, 4, 0x13, 0).validate().is_ok());
        assert!(v2(1, 4, 0, 9).validate().is_ok());
        let mut b = v2(1, 4, 0, 0).to_bytes();
        b[6] = 1;
        assert!(matches!(Policy::parse(&b), Err(E::ReservedNonZero)));
        assert!(matches!(Policy::parse(&[]), Err(E::Empty)));
        assert!(matches!(Policy::parse(&[1; 12]), Err(E::UnknownVersion(1))));
        assert!(matches!(Policy::parse(&[0; 24]), Err(E::BadSize { .. })));
        assert!(matches!(Policy::parse(&[2; 12]), Err(E::BadSize { .. })));
    }

    #[test]
    fn block_size_rules() {
        use PolicyError as E;
        assert_eq!(v2(1, 4, 0, 0).data_unit_bits(4096).unwrap(), 12);
        assert_eq!(v2(1, 4, 0, 9).data_unit_bits(4096).unwrap(), 9);
        assert!(matches!(
            v2(1, 4, 0, 13).data_unit_bits(4096),
            Err(E::DataUnitLargerThanBlock { .. })
        ));
        assert!(matches!(
            v2(1, 4, 0x10, 9).data_unit_bits(4096),
            Err(E::IvInoLblk32NeedsBlockSizedUnits)
        ));
        assert!(matches!(
            v2(1, 4, 0, 0).data_unit_bits(1000),
            Err(E::BadBlockSize(1000))
        ));
        assert!(v2(1, 4, 0x10, 12).validate_for_block_size(4096).is_ok());
    }

    #[test]
    fn flags_and_hex() {
        assert_eq!(PolicyFlags(0).padding(), 4);
        assert_eq!(PolicyFlags(0x13).padding(), 32);
        assert_eq!(PolicyFlags(0x10).with_padding(16), Some(PolicyFlags(0x12)));
        assert_eq!(PolicyFlags(0).with_padding(5), None);
        let id: KeyIdentifier = "8699c2c53707405da5aba5ae4d8583c0".parse().unwrap();
        assert_eq!(id.to_string(), "8699c2c53707405da5aba5ae4d8583c0");
        assert!("8699c2".parse::<KeyIdentifier>().is_err());
        assert!("zz334e23057a6e2d".parse::<KeyDescriptor>().is_err());
        assert!("é4334e23057a6e2".parse::<KeyDescriptor>().is_err());
        let d: KeyDescriptor = "04334E23057A6E2D".parse().unwrap();
        assert_eq!(d.to_string(), "04334e23057a6e2d");
    }
}
