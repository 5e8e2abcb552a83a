//! IV (tweak) generation for every policy flag combination (spec §5).
//!
//! Kernel: `fscrypt_generate_iv()` and `union fscrypt_iv`, fs/crypto/crypto.c.
//! The same IV is used for file contents (index = data unit index) and for
//! filenames / symlink targets (index 0). Key selection is in `keysetup.rs`.

use crate::context::NONCE_SIZE;
use crate::error::ContentsError;
use crate::mode::MAX_IV_SIZE;

/// An IV buffer: `MAX_IV_SIZE` (32) bytes, zero beyond what the scheme fills.
/// Pass `&iv.bytes()[..mode.iv_size]` to the cipher.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
#[doc(alias = "fscrypt_iv")]
pub struct Iv([u8; MAX_IV_SIZE]);

impl Iv {
    /// Wraps 32 raw IV bytes.
    pub fn from_bytes(bytes: [u8; MAX_IV_SIZE]) -> Self {
        Self(bytes)
    }
    /// All 32 bytes (little-endian fields as laid out in spec §5).
    pub fn bytes(&self) -> &[u8; MAX_IV_SIZE] {
        &self.0
    }
    /// The first `len` bytes (16 or 32), clamped to 32.
    pub fn prefix(&self, len: usize) -> &[u8] {
        &self.0[..len.min(MAX_IV_SIZE)]
    }
}

impl core::fmt::Debug for Iv {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Iv(")?;
        for b in &self.0 {
            write!(f, "{b:02x}")?;
        }
        f.write_str(")")
    }
}

/// How an inode's IVs are formed, decided by its policy flags (spec §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IvScheme {
    /// Per-file keys: `le64(index)` ‖ zeros.
    Default,
    /// DIRECT_KEY: `le64(index)` ‖ nonce (16 B) ‖ zeros.
    DirectKey {
        /// The inode's nonce.
        nonce: [u8; NONCE_SIZE],
    },
    /// IV_INO_LBLK_64: `le32(index)` ‖ `le32(ino)` ‖ zeros.
    IvInoLblk64 {
        /// The inode number (must fit 32 bits).
        ino: u32,
    },
    /// IV_INO_LBLK_32: `le32((hashed_ino + index) mod 2^32)` ‖ zeros.
    IvInoLblk32 {
        /// Low 32 bits of SipHash-2-4(inode hash key, le64(ino)).
        hashed_ino: u32,
    },
}

impl IvScheme {
    /// The IV for data unit `index` (0 for filenames and symlink targets).
    ///
    /// # Errors
    /// [`ContentsError::IndexTooLarge`] when an IV_INO_LBLK_* scheme gets an
    /// index ≥ 2^32 (the kernel never produces one: spec §3.4).
    #[inline]
    pub fn iv(&self, index: u64) -> Result<Iv, ContentsError> {
        let mut iv = [0u8; MAX_IV_SIZE];
        match *self {
            IvScheme::Default => iv[..8].copy_from_slice(&index.to_le_bytes()),
            IvScheme::DirectKey { nonce } => {
                iv[..8].copy_from_slice(&index.to_le_bytes());
                iv[8..8 + NONCE_SIZE].copy_from_slice(&nonce);
            }
            IvScheme::IvInoLblk64 { ino } => {
                let idx = u32::try_from(index).map_err(|_| ContentsError::IndexTooLarge(index))?;
                iv[..4].copy_from_slice(&idx.to_le_bytes());
                iv[4..8].copy_from_slice(&ino.to_le_bytes());
            }
            IvScheme::IvInoLblk32 { hashed_ino } => {
                let idx = u32::try_from(index).map_err(|_| ContentsError::IndexTooLarge(index))?;
                iv[..4].copy_from_slice(&hashed_ino.wrapping_add(idx).to_le_bytes());
            }
        }
        Ok(Iv(iv))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(iv: &Iv, n: usize) -> String {
        iv.prefix(n).iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn spec_13_1_examples() {
        let nonce = [
            0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96, 0x87, 0x78, 0x69, 0x5a, 0x4b, 0x3c, 0x2d,
            0x1e, 0x0f,
        ];
        assert_eq!(
            hex(&IvScheme::IvInoLblk64 { ino: 131075 }.iv(1).unwrap(), 16),
            "01000000030002000000000000000000"
        );
        assert_eq!(
            hex(
                &IvScheme::IvInoLblk32 {
                    hashed_ino: 0x0ad66767
                }
                .iv(1)
                .unwrap(),
                16
            ),
            "6867d60a000000000000000000000000"
        );
        assert_eq!(
            hex(&IvScheme::Default.iv(1).unwrap(), 16),
            "01000000000000000000000000000000"
        );
        assert_eq!(
            hex(&IvScheme::DirectKey { nonce }.iv(1).unwrap(), 32),
            "0100000000000000f0e1d2c3b4a5968778695a4b3c2d1e0f0000000000000000"
        );
        assert!(IvScheme::IvInoLblk64 { ino: 1 }.iv(1 << 32).is_err());
        assert!(IvScheme::IvInoLblk32 { hashed_ino: 1 }.iv(1 << 32).is_err());
        assert_eq!(
            hex(&IvScheme::Default.iv(u64::MAX).unwrap(), 16),
            "ffffffffffffffff0000000000000000"
        );
    }
}
