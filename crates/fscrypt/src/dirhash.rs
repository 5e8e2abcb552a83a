//! Casefolded + encrypted directories: the SipHash dirhash over the
//! already-casefolded plaintext name, and the ext4/f2fs fix-ups (spec §9).
//!
//! Kernel: `fscrypt_fname_siphash()`, fs/crypto/fname.c; `ext4fs_dirhash()`
//! (`DX_HASH_SIPHASH`), fs/ext4/hash.c; `f2fs_dentry_hash()`, fs/f2fs/hash.c.
//! Casefolding itself (Unicode NFD + case fold) is the filesystem's job and is
//! not done here: callers pass the folded bytes. The key comes from
//! `keysetup.rs` (HKDF context 5).

use zeroize::{Zeroize, ZeroizeOnDrop};

/// A directory's 16-byte SipHash key: HKDF(master, ctx 5, dir nonce, 16)
/// (spec §4.5), used as the standard SipHash key `k0 = le64(key[0..8])`,
/// `k1 = le64(key[8..16])`. Zeroized on drop; `Debug` is redacted.
#[derive(Clone, Zeroize, ZeroizeOnDrop, PartialEq, Eq)]
pub struct DirHashKey(pub(crate) [u8; 16]);

impl DirHashKey {
    /// Wraps raw key bytes (e.g. from a test vector).
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }
    /// The raw key bytes (secret).
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl core::fmt::Debug for DirHashKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("DirHashKey(<redacted>)")
    }
}

/// SipHash-2-4 of the casefolded plaintext name under the directory's key
/// (spec §9; kernel `fscrypt_fname_siphash()`).
pub fn fname_siphash(key: &DirHashKey, casefolded_name: &[u8]) -> u64 {
    fscrypt_crypto::siphash24(&key.0, casefolded_name)
}

/// ext4's `(hash, minor_hash)` for a SipHash dirhash (`DX_HASH_SIPHASH`):
/// `hash = (sip >> 32) & !1`, with `0xFFFF_FFFE` (the htree EOF marker)
/// replaced by `0xFFFF_FFFC`; `minor_hash = sip as u32` (spec §9).
pub fn ext4_hash(siphash: u64) -> (u32, u32) {
    let mut hash = ((siphash >> 32) as u32) & !1;
    if hash == 0xffff_fffe {
        hash = 0xffff_fffc;
    }
    (hash, siphash as u32)
}

/// f2fs's dentry `hash_code` for a SipHash dirhash: the low 32 bits (stored
/// little-endian on disk) (spec §9).
pub fn f2fs_hash(siphash: u64) -> u32 {
    siphash as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ext4_eof_fixup() {
        assert_eq!(ext4_hash(0xffff_ffff_1234_5678), (0xffff_fffc, 0x1234_5678));
        assert_eq!(ext4_hash(0xffff_fffe_0000_0001), (0xffff_fffc, 1));
        assert_eq!(ext4_hash(0x3b2a_08b7_de6c_b6cd), (0x3b2a_08b6, 0xde6c_b6cd));
        assert_eq!(f2fs_hash(0x3b2a_08b7_de6c_b6cd), 0xde6c_b6cd);
        assert_eq!(
            format!("{:?}", DirHashKey([1; 16])),
            "DirHashKey(<redacted>)"
        );
    }
}
