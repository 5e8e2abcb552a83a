//! The xfstests software model of the hardware KDF for hardware-wrapped keys
//! (spec §4.6, informative).
//!
//! Real inline-encryption hardware derives two keys from a wrapped key
//! internally; xfstests (`fscrypt-crypt-util --enable-hw-kdf`) models one such
//! hardware KDF for *imported raw* keys so the format can be tested: NIST SP
//! 800-108 counter mode with AES-256-CMAC keyed by the 32-byte raw key. This
//! is a property of particular hardware, not of fscrypt; use it only to
//! reproduce that model. The resulting software secret is what
//! [`crate::MasterKey::from_hw_wrapped_software_secret`] takes.

use zeroize::Zeroizing;

use crate::error::KeyError;

/// Size of the software secret in bytes (`BLK_CRYPTO_SW_SECRET_SIZE`).
pub const SW_SECRET_SIZE: usize = 32;
/// Size of the modelled inline encryption key in bytes (an AES-256-XTS key).
pub const INLINE_ENCRYPTION_KEY_SIZE: usize = 64;

/// Fixed label bytes of the model (between the counter and the separator).
const LABEL: [u8; 11] = [0, 0, 0x40, 0, 0, 0, 0, 0, 0, 0, 0x20];

/// Context of the software secret: `"raw secret"` ‖ zeros(9) ‖ 02 17 00 80 50 00 00 00 00.
const SW_SECRET_CONTEXT: [u8; 28] = *b"raw secret\0\0\0\0\0\0\0\0\0\x02\x17\x00\x80\x50\0\0\0\0";
/// Context of the inline encryption key: `"inline encryption key"` ‖ zeros(6)
/// ‖ 02 43 00 82 50 00 00 00 00.
const INLINE_KEY_CONTEXT: [u8; 36] =
    *b"inline encryption key\0\0\0\0\0\0\x02\x43\x00\x82\x50\0\0\0\0";

/// SP 800-108 counter mode: block `i` (from 1) =
/// `CMAC(key, be32(i) ‖ LABEL ‖ 00 ‖ context ‖ be32(8 · out.len()))`.
fn hw_kdf(raw: &[u8; 32], context: &[u8], out: &mut [u8]) {
    let mut msg = [0u8; 4 + 11 + 1 + 36 + 4];
    let msg_len = 4 + LABEL.len() + 1 + context.len() + 4;
    msg[4..15].copy_from_slice(&LABEL);
    msg[15] = 0;
    msg[16..16 + context.len()].copy_from_slice(context);
    msg[16 + context.len()..msg_len].copy_from_slice(&((out.len() as u32) * 8).to_be_bytes());
    for (i, block) in out.chunks_mut(16).enumerate() {
        msg[..4].copy_from_slice(&(i as u32 + 1).to_be_bytes());
        let mac = fscrypt_crypto::aes256_cmac(raw, &msg[..msg_len]);
        block.copy_from_slice(&mac[..block.len()]);
    }
}

fn raw32(raw: &[u8]) -> Result<&[u8; 32], KeyError> {
    raw.try_into()
        .map_err(|_| KeyError::HwKdfKeySize(raw.len()))
}

/// The modelled software secret of an imported 32-byte raw key: the HKDF
/// input for everything except file contents (spec §4.6).
///
/// # Errors
/// [`KeyError::HwKdfKeySize`] unless `raw` is 32 bytes.
pub fn derive_sw_secret(raw: &[u8]) -> Result<Zeroizing<[u8; SW_SECRET_SIZE]>, KeyError> {
    let mut out = Zeroizing::new([0u8; SW_SECRET_SIZE]);
    hw_kdf(raw32(raw)?, &SW_SECRET_CONTEXT, &mut out[..]);
    Ok(out)
}

/// The modelled inline encryption key (64 bytes, AES-256-XTS) of an imported
/// 32-byte raw key: what the hardware encrypts file contents with.
///
/// # Errors
/// [`KeyError::HwKdfKeySize`] unless `raw` is 32 bytes.
pub fn derive_inline_encryption_key(
    raw: &[u8],
) -> Result<Zeroizing<[u8; INLINE_ENCRYPTION_KEY_SIZE]>, KeyError> {
    let mut out = Zeroizing::new([0u8; INLINE_ENCRYPTION_KEY_SIZE]);
    hw_kdf(raw32(raw)?, &INLINE_KEY_CONTEXT, &mut out[..]);
    Ok(out)
}
