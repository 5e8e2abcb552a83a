//! fscrypt's use of HKDF-SHA512: only the `"fscrypt\0" ‖ ctx ‖ info` expansion
//! on top of the crypto layer's HKDF (spec §1.5, §4.3).
//!
//! Kernel: fs/crypto/hkdf.c (`fscrypt_init_hkdf()`, `fscrypt_hkdf_expand()`).
//! Extract uses no salt (equivalently 64 zero bytes) with the master key (or a
//! hardware-wrapped key's software secret) as input keying material.

use fscrypt_crypto::HkdfSha512;

use crate::error::Error;

/// The 8-byte prefix of every fscrypt HKDF info string: `"fscrypt"` and NUL.
pub const HKDF_INFO_PREFIX: &[u8; 8] = b"fscrypt\0";

/// The HKDF context byte that separates fscrypt's derived keys (spec §1.5).
/// Each variant documents the `info` bytes that follow the context byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum HkdfContext {
    /// 1: key identifier of a raw master key. info = empty; 16 bytes out.
    /// (Kernel ≤ 6.15: `HKDF_CONTEXT_KEY_IDENTIFIER`.)
    KeyIdentifierForRawKey = 1,
    /// 2: per-file encryption key. info = 16-byte file nonce; mode key size out.
    PerFileEncKey = 2,
    /// 3: DIRECT_KEY per-mode key. info = 1-byte mode number; key size out.
    DirectKey = 3,
    /// 4: IV_INO_LBLK_64 per-mode-per-filesystem key. info = mode byte ‖
    /// 16-byte filesystem UUID; key size out.
    IvInoLblk64Key = 4,
    /// 5: SipHash key of a casefolded directory. info = 16-byte directory
    /// nonce; 16 bytes out.
    DirhashKey = 5,
    /// 6: IV_INO_LBLK_32 per-mode-per-filesystem key. info = mode byte ‖
    /// 16-byte filesystem UUID; key size out.
    IvInoLblk32Key = 6,
    /// 7: SipHash key hashing inode numbers for IV_INO_LBLK_32. info = empty;
    /// 16 bytes out.
    InodeHashKey = 7,
    /// 8: key identifier of a hardware-wrapped key (≥ 6.16), derived from its
    /// software secret. info = empty; 16 bytes out.
    KeyIdentifierForHwWrappedKey = 8,
}

/// The HKDF state of one master key (its PRK), expanding with fscrypt's
/// `"fscrypt\0" ‖ ctx` prefix. The PRK is zeroized by the crypto layer.
pub struct FscryptHkdf(HkdfSha512);

impl core::fmt::Debug for FscryptHkdf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("FscryptHkdf(<redacted>)")
    }
}

impl FscryptHkdf {
    /// HKDF-Extract with no salt over `ikm` (the master key or software
    /// secret) (spec §4.3; kernel `fscrypt_init_hkdf()`).
    pub fn new(ikm: &[u8]) -> Self {
        Self(HkdfSha512::extract(&[], ikm))
    }

    /// HKDF-Expand with info = `"fscrypt\0" ‖ ctx ‖ info` into `out`
    /// (kernel `fscrypt_hkdf_expand()`). Allocation-free.
    ///
    /// # Errors
    /// [`Error::Crypto`] only if `out` is longer than HKDF allows (16320 bytes);
    /// fscrypt never asks for more than 64.
    pub fn expand(&self, ctx: HkdfContext, info: &[u8], out: &mut [u8]) -> Result<(), Error> {
        self.0
            .expand(&[HKDF_INFO_PREFIX, &[ctx as u8], info], out)
            .map_err(Error::from)
    }
}
