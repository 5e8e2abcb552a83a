//! Encryption modes: the uapi mode numbers and the one static table describing
//! them (spec §1.1, §1.2).
//!
//! Kernel: `fscrypt_modes[]` in fs/crypto/keysetup.c; uapi `FSCRYPT_MODE_*` in
//! include/uapi/linux/fscrypt.h. Everything else in this crate reads key sizes,
//! IV sizes and security strengths from [`MODES`]; no other module hard-codes
//! them. Which *pairs* of modes a policy may use is decided here too
//! ([`valid_mode_pair`]); the rest of policy validation lives in `policy.rs`.

use core::fmt;

use fscrypt_crypto::Algorithm;

/// An fscrypt encryption mode number (uapi `FSCRYPT_MODE_*`, one byte of a
/// policy or context).
///
/// This is an *open* newtype: any byte value parses, and unknown values print
/// as hex. Whether a value is supported is decided by [`EncryptionMode::info`]
/// and by policy validation, never by the parser (spec §1.1).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[doc(alias = "FSCRYPT_MODE")]
pub struct EncryptionMode(pub u8);

impl EncryptionMode {
    /// `FSCRYPT_MODE_AES_256_XTS` (1): AES-256-XTS, contents.
    pub const AES_256_XTS: Self = Self(1);
    /// `FSCRYPT_MODE_AES_256_CTS` (4): AES-256-CBC-CTS (CS3), filenames.
    pub const AES_256_CTS: Self = Self(4);
    /// `FSCRYPT_MODE_AES_128_CBC` (5): AES-128-CBC-ESSIV(SHA-256), contents.
    pub const AES_128_CBC: Self = Self(5);
    /// `FSCRYPT_MODE_AES_128_CTS` (6): AES-128-CBC-CTS (CS3), filenames.
    pub const AES_128_CTS: Self = Self(6);
    /// `FSCRYPT_MODE_SM4_XTS` (7): SM4-XTS, contents (v2 only).
    pub const SM4_XTS: Self = Self(7);
    /// `FSCRYPT_MODE_SM4_CTS` (8): SM4-CBC-CTS, filenames (v2 only).
    pub const SM4_CTS: Self = Self(8);
    /// `FSCRYPT_MODE_ADIANTUM` (9): Adiantum(XChaCha12, AES-256), contents and
    /// filenames.
    pub const ADIANTUM: Self = Self(9);
    /// `FSCRYPT_MODE_AES_256_HCTR2` (10): HCTR2 with AES-256, filenames (v2 only).
    pub const AES_256_HCTR2: Self = Self(10);

    /// The table entry of this mode, or `None` for an unknown/invalid number
    /// (0, 2, 3, > 10).
    pub fn info(self) -> Option<&'static ModeInfo> {
        MODES.iter().find(|m| m.mode == self)
    }

    /// The mode selected by a cipher name as written by xfstests'
    /// `fscrypt-crypt-util` (`"AES-256-XTS"`, `"AES-256-CTS-CBC"`, …), matched
    /// exactly. Returns `None` for an unknown name.
    pub fn from_cipher_name(name: &str) -> Option<Self> {
        MODES.iter().find(|m| m.cipher_name == name).map(|m| m.mode)
    }
}

impl fmt::Debug for EncryptionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.info() {
            Some(m) => write!(f, "{}({})", m.friendly_name, self.0),
            None => write!(f, "EncryptionMode({:#04x})", self.0),
        }
    }
}

impl fmt::Display for EncryptionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.info() {
            Some(m) => f.write_str(m.friendly_name),
            None => write!(f, "unknown mode {:#04x}", self.0),
        }
    }
}

/// What a mode may encrypt (spec §1.1 "used for").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeRole {
    /// File contents only (XTS, ESSIV).
    Contents,
    /// Filenames and symlink targets only (CTS, HCTR2).
    Filenames,
    /// Both (Adiantum).
    Both,
}

/// One row of the mode table (spec §1.1).
#[derive(Debug)]
pub struct ModeInfo {
    /// The uapi mode number.
    pub mode: EncryptionMode,
    /// Friendly name used in messages, e.g. `"AES-256-XTS"`.
    pub friendly_name: &'static str,
    /// The cipher name accepted by `fscrypt-crypt-util` / `fscrypt-rs crypt`.
    pub cipher_name: &'static str,
    /// Key size in bytes (64 for AES-256-XTS: two AES-256 keys).
    pub key_size: usize,
    /// Security strength in bytes: the minimum v2 master key length (spec §4.1).
    pub security_strength: usize,
    /// IV (tweak) size in bytes: 16, or 32 for Adiantum/HCTR2 (spec §5).
    pub iv_size: usize,
    /// The kernel crypto API algorithm name, e.g. `"xts(aes)"`.
    pub crypto_api_name: &'static str,
    /// Contents, filenames or both.
    pub role: ModeRole,
    /// Accepted only in v2 policies (SM4, HCTR2).
    pub v2_only: bool,
    /// The length-preserving cipher implementing the mode (fscrypt-crypto).
    pub algorithm: Algorithm,
}

impl ModeInfo {
    /// Whether the mode may encrypt file contents.
    pub fn is_contents(&self) -> bool {
        matches!(self.role, ModeRole::Contents | ModeRole::Both)
    }
    /// Whether the mode may encrypt filenames and symlink targets.
    pub fn is_filenames(&self) -> bool {
        matches!(self.role, ModeRole::Filenames | ModeRole::Both)
    }
}

/// The largest key size of any mode, in bytes (`FSCRYPT_MAX_KEY_SIZE` = 64).
pub const MAX_MODE_KEY_SIZE: usize = 64;
/// The largest IV size of any mode, in bytes (`FSCRYPT_MAX_IV_SIZE` = 32).
pub const MAX_IV_SIZE: usize = 32;

/// The mode table (kernel `fscrypt_modes[]`, spec §1.1), in mode-number order.
pub static MODES: [ModeInfo; 8] = [
    ModeInfo {
        mode: EncryptionMode::AES_256_XTS,
        friendly_name: "AES-256-XTS",
        cipher_name: "AES-256-XTS",
        key_size: 64,
        security_strength: 32,
        iv_size: 16,
        crypto_api_name: "xts(aes)",
        role: ModeRole::Contents,
        v2_only: false,
        algorithm: Algorithm::Aes256Xts,
    },
    ModeInfo {
        mode: EncryptionMode::AES_256_CTS,
        friendly_name: "AES-256-CTS-CBC",
        cipher_name: "AES-256-CTS-CBC",
        key_size: 32,
        security_strength: 32,
        iv_size: 16,
        crypto_api_name: "cts(cbc(aes))",
        role: ModeRole::Filenames,
        v2_only: false,
        algorithm: Algorithm::Aes256CbcCts,
    },
    ModeInfo {
        mode: EncryptionMode::AES_128_CBC,
        friendly_name: "AES-128-CBC-ESSIV",
        cipher_name: "AES-128-CBC-ESSIV",
        key_size: 16,
        security_strength: 16,
        iv_size: 16,
        crypto_api_name: "essiv(cbc(aes),sha256)",
        role: ModeRole::Contents,
        v2_only: false,
        algorithm: Algorithm::Aes128CbcEssiv,
    },
    ModeInfo {
        mode: EncryptionMode::AES_128_CTS,
        friendly_name: "AES-128-CTS-CBC",
        cipher_name: "AES-128-CTS-CBC",
        key_size: 16,
        security_strength: 16,
        iv_size: 16,
        crypto_api_name: "cts(cbc(aes))",
        role: ModeRole::Filenames,
        v2_only: false,
        algorithm: Algorithm::Aes128CbcCts,
    },
    ModeInfo {
        mode: EncryptionMode::SM4_XTS,
        friendly_name: "SM4-XTS",
        cipher_name: "SM4-XTS",
        key_size: 32,
        security_strength: 16,
        iv_size: 16,
        crypto_api_name: "xts(sm4)",
        role: ModeRole::Contents,
        v2_only: true,
        algorithm: Algorithm::Sm4Xts,
    },
    ModeInfo {
        mode: EncryptionMode::SM4_CTS,
        friendly_name: "SM4-CTS-CBC",
        cipher_name: "SM4-CTS-CBC",
        key_size: 16,
        security_strength: 16,
        iv_size: 16,
        crypto_api_name: "cts(cbc(sm4))",
        role: ModeRole::Filenames,
        v2_only: true,
        algorithm: Algorithm::Sm4CbcCts,
    },
    ModeInfo {
        mode: EncryptionMode::ADIANTUM,
        friendly_name: "Adiantum",
        cipher_name: "Adiantum",
        key_size: 32,
        security_strength: 32,
        iv_size: 32,
        crypto_api_name: "adiantum(xchacha12,aes)",
        role: ModeRole::Both,
        v2_only: false,
        algorithm: Algorithm::Adiantum,
    },
    ModeInfo {
        mode: EncryptionMode::AES_256_HCTR2,
        friendly_name: "AES-256-HCTR2",
        cipher_name: "AES-256-HCTR2",
        key_size: 32,
        security_strength: 32,
        iv_size: 32,
        crypto_api_name: "hctr2(aes)",
        role: ModeRole::Filenames,
        v2_only: true,
        algorithm: Algorithm::Aes256Hctr2,
    },
];

/// Whether `(contents, filenames)` is an allowed mode pair for a policy of
/// version 1 (`v2 == false`) or 2 (spec §1.2).
///
/// Kernel: `fscrypt_valid_enc_modes_v1()` / `_v2()`, fs/crypto/policy.c.
pub fn valid_mode_pair(contents: EncryptionMode, filenames: EncryptionMode, v2: bool) -> bool {
    use EncryptionMode as M;
    let common = matches!(
        (contents, filenames),
        (M::AES_256_XTS, M::AES_256_CTS)
            | (M::AES_128_CBC, M::AES_128_CTS)
            | (M::ADIANTUM, M::ADIANTUM)
    );
    let v2_extra = matches!(
        (contents, filenames),
        (M::AES_256_XTS, M::AES_256_HCTR2) | (M::SM4_XTS, M::SM4_CTS)
    );
    common || (v2 && v2_extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        for (i, m) in MODES.iter().enumerate() {
            assert_eq!(m.mode.info().map(|x| x.mode), Some(m.mode));
            assert!(m.key_size >= m.security_strength);
            assert!(m.key_size <= MAX_MODE_KEY_SIZE && m.iv_size <= MAX_IV_SIZE);
            assert_eq!(m.key_size, m.algorithm.key_size(), "row {i}");
            assert_eq!(m.iv_size, m.algorithm.iv_size(), "row {i}");
            assert_eq!(
                EncryptionMode::from_cipher_name(m.cipher_name),
                Some(m.mode)
            );
        }
        for bad in [0u8, 2, 3, 11, 255] {
            assert!(EncryptionMode(bad).info().is_none());
        }
        assert_eq!(format!("{:?}", EncryptionMode(3)), "EncryptionMode(0x03)");
    }

    #[test]
    fn mode_pairs() {
        use EncryptionMode as M;
        assert!(valid_mode_pair(M::AES_256_XTS, M::AES_256_CTS, false));
        assert!(!valid_mode_pair(M::AES_256_XTS, M::AES_256_HCTR2, false));
        assert!(valid_mode_pair(M::AES_256_XTS, M::AES_256_HCTR2, true));
        assert!(valid_mode_pair(M::SM4_XTS, M::SM4_CTS, true));
        assert!(!valid_mode_pair(M::SM4_XTS, M::SM4_CTS, false));
        assert!(!valid_mode_pair(M::AES_256_HCTR2, M::AES_256_HCTR2, true));
        assert!(!valid_mode_pair(M::AES_256_XTS, M::AES_128_CTS, true));
    }
}
