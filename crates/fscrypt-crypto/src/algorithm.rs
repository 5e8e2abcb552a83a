//! The length-preserving ciphers fscrypt uses (spec §1.1, §2).

#![forbid(unsafe_code)]

use core::fmt;

use crate::Error;

/// A length-preserving cipher used by fscrypt for contents or filenames.
///
/// Source: spec §1.1 (uapi `FSCRYPT_MODE_*` table) and §2 (constructions).
/// The uapi mode number is the business of the `fscrypt` crate; this enum
/// names the *algorithm*.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algorithm {
    /// AES-256-XTS (IEEE P1619), 64-byte key (two AES-256 keys), 16-byte tweak,
    /// ciphertext stealing for lengths that are not multiples of 16 (spec §2.1).
    Aes256Xts,
    /// SM4-XTS, 32-byte key (two SM4 keys), 16-byte tweak (spec §2.1, §2.6).
    Sm4Xts,
    /// AES-128-CBC-CTS (CS3), 16-byte key, 16-byte IV (spec §2.2).
    Aes128CbcCts,
    /// AES-256-CBC-CTS (CS3), 32-byte key, 16-byte IV (spec §2.2).
    Aes256CbcCts,
    /// SM4-CBC-CTS (CS3), 16-byte key, 16-byte IV (spec §2.2, §2.6).
    Sm4CbcCts,
    /// AES-128-CBC with ESSIV(SHA-256), 16-byte key, 16-byte IV; messages must
    /// be multiples of 16 bytes (spec §2.3).
    Aes128CbcEssiv,
    /// Adiantum(XChaCha12, AES-256) with NH + Poly1305, 32-byte key,
    /// 32-byte tweak (spec §2.4).
    Adiantum,
    /// HCTR2 with AES-256, 32-byte key, 32-byte tweak (spec §2.5).
    Aes256Hctr2,
}

impl Algorithm {
    /// Every algorithm, in uapi mode-number order.
    pub const ALL: [Algorithm; 8] = [
        Algorithm::Aes256Xts,
        Algorithm::Aes256CbcCts,
        Algorithm::Aes128CbcEssiv,
        Algorithm::Aes128CbcCts,
        Algorithm::Sm4Xts,
        Algorithm::Sm4CbcCts,
        Algorithm::Adiantum,
        Algorithm::Aes256Hctr2,
    ];

    /// Human-readable name, e.g. `"AES-256-XTS"` (spec §1.1 "real algorithm").
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Aes256Xts => "AES-256-XTS",
            Algorithm::Sm4Xts => "SM4-XTS",
            Algorithm::Aes128CbcCts => "AES-128-CBC-CTS",
            Algorithm::Aes256CbcCts => "AES-256-CBC-CTS",
            Algorithm::Sm4CbcCts => "SM4-CBC-CTS",
            Algorithm::Aes128CbcEssiv => "AES-128-CBC-ESSIV",
            Algorithm::Adiantum => "Adiantum",
            Algorithm::Aes256Hctr2 => "AES-256-HCTR2",
        }
    }

    /// Linux crypto API name, e.g. `"xts(aes)"` (spec §1.1).
    pub fn kernel_name(self) -> &'static str {
        match self {
            Algorithm::Aes256Xts => "xts(aes)",
            Algorithm::Sm4Xts => "xts(sm4)",
            Algorithm::Aes128CbcCts | Algorithm::Aes256CbcCts => "cts(cbc(aes))",
            Algorithm::Sm4CbcCts => "cts(cbc(sm4))",
            Algorithm::Aes128CbcEssiv => "essiv(cbc(aes),sha256)",
            Algorithm::Adiantum => "adiantum(xchacha12,aes)",
            Algorithm::Aes256Hctr2 => "hctr2(aes)",
        }
    }

    /// Key size in bytes (spec §1.1).
    pub fn key_size(self) -> usize {
        match self {
            Algorithm::Aes256Xts => 64,
            Algorithm::Sm4Xts => 32,
            Algorithm::Aes128CbcCts => 16,
            Algorithm::Aes256CbcCts => 32,
            Algorithm::Sm4CbcCts => 16,
            Algorithm::Aes128CbcEssiv => 16,
            Algorithm::Adiantum => 32,
            Algorithm::Aes256Hctr2 => 32,
        }
    }

    /// IV (tweak) size in bytes: 16, or 32 for Adiantum and HCTR2 (spec §1.1).
    pub fn iv_size(self) -> usize {
        match self {
            Algorithm::Adiantum | Algorithm::Aes256Hctr2 => 32,
            _ => 16,
        }
    }

    /// Minimum message length in bytes: 16 for every fscrypt cipher (spec §2).
    pub fn min_message_size(self) -> usize {
        16
    }

    /// Whether messages must be a multiple of 16 bytes (only CBC-ESSIV, spec §2.3).
    pub fn requires_block_multiple(self) -> bool {
        matches!(self, Algorithm::Aes128CbcEssiv)
    }

    /// Whether this is an XTS mode, whose key is two halves that must differ
    /// (spec §2.1).
    pub fn is_xts(self) -> bool {
        matches!(self, Algorithm::Aes256Xts | Algorithm::Sm4Xts)
    }

    /// Checks a key's length (and, for XTS, that its halves differ).
    ///
    /// # Errors
    /// [`Error::InvalidKeyLength`] if `key.len() != self.key_size()`;
    /// [`Error::WeakKey`] for an XTS key whose halves are equal (spec §2.1).
    pub fn check_key(self, key: &[u8]) -> Result<(), Error> {
        if key.len() != self.key_size() {
            return Err(Error::InvalidKeyLength {
                algorithm: self.name(),
                expected: self.key_size(),
                actual: key.len(),
            });
        }
        if self.is_xts() {
            let (k1, k2) = key.split_at(key.len() / 2);
            if bool::from(subtle::ConstantTimeEq::ct_eq(k1, k2)) {
                return Err(Error::WeakKey { algorithm: self });
            }
        }
        Ok(())
    }

    /// Checks an IV and message length for one en/decryption call.
    ///
    /// # Errors
    /// [`Error::InvalidIvLength`], [`Error::MessageTooShort`] (< 16 bytes) or
    /// [`Error::NotBlockAligned`] (CBC-ESSIV with a length not a multiple of 16).
    pub fn check_input(self, iv: &[u8], data_len: usize) -> Result<(), Error> {
        if iv.len() != self.iv_size() {
            return Err(Error::InvalidIvLength {
                algorithm: self.name(),
                expected: self.iv_size(),
                actual: iv.len(),
            });
        }
        if data_len < self.min_message_size() {
            return Err(Error::MessageTooShort {
                algorithm: self.name(),
                min: self.min_message_size(),
                actual: data_len,
            });
        }
        if self.requires_block_multiple() && !data_len.is_multiple_of(16) {
            return Err(Error::NotBlockAligned {
                algorithm: self.name(),
                block: 16,
                actual: data_len,
            });
        }
        Ok(())
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
