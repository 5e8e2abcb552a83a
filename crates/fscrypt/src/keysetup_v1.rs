//! The legacy v1 key hierarchy: the AES-128-ECB KDF and v1 DIRECT_KEY
//! (spec §4.2).
//!
//! Kernel: fs/crypto/keysetup_v1.c (`derive_key_aes()`,
//! `setup_v1_file_key_direct()`). v1 keys are located by descriptor; the
//! descriptor is not verified against the key.

use zeroize::Zeroizing;

use crate::context::NONCE_SIZE;
use crate::error::Error;
use crate::mode::MAX_MODE_KEY_SIZE;

/// The v1 per-file key: each 16-byte block of `master[..key_size]` encrypted
/// with AES-128-ECB under the file's nonce (spec §4.2). Returns the key in a
/// zeroizing 64-byte buffer of which the first `key_size` bytes are valid.
///
/// Kernel: `derive_key_aes()`.
///
/// # Errors
/// [`Error::Crypto`] if `key_size` is not a multiple of 16 or exceeds the
/// master key (callers check the length rule first, spec §4.1).
pub fn derive_v1_file_key(
    master: &[u8],
    nonce: &[u8; NONCE_SIZE],
    key_size: usize,
) -> Result<Zeroizing<[u8; MAX_MODE_KEY_SIZE]>, Error> {
    let mut out = Zeroizing::new([0u8; MAX_MODE_KEY_SIZE]);
    let Some(src) = master
        .get(..key_size)
        .filter(|_| key_size <= MAX_MODE_KEY_SIZE)
    else {
        return Err(Error::Key(crate::error::KeyError::BadMasterKeySize(
            master.len(),
        )));
    };
    out[..key_size].copy_from_slice(src);
    fscrypt_crypto::aes128_ecb_encrypt(nonce, &mut out[..key_size])?;
    Ok(out)
}

/// The v1 DIRECT_KEY key: the first `key_size` bytes of the master key, used
/// directly and shared by every file (spec §4.2, Adiantum only).
///
/// Kernel: `setup_v1_file_key_direct()`.
pub fn v1_direct_key(master: &[u8], key_size: usize) -> Option<&[u8]> {
    master.get(..key_size)
}
