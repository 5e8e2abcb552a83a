//! Key wrapping: the 64-byte master key sealed under a protector's 32-byte
//! wrapping key with XChaCha20-Poly1305 ([`fscrypt_crypto::aead`], 24-byte
//! random nonce, 16-byte tag), the vault's root policy bound in as
//! associated data ([`associated_data`]).
//!
//! Where the wrapping key comes from is in [`crate::protector`]; where the
//! nonce and wrapped key are stored, in [`crate::config`]. A wrong wrapping
//! key shows up as an authentication failure
//! ([`ProtectorError::WrongSecret`]), never as garbage key material.

use fscrypt_crypto::SecretBuf;
use fscrypt_crypto::aead;
use zeroize::Zeroizing;

pub use crate::keys::WRAPPING_KEY_SIZE;
use crate::keys::{MASTER_KEY_SIZE, ProtectorError};

/// Size in bytes of an XChaCha20-Poly1305 nonce.
pub const NONCE_SIZE: usize = aead::NONCE_SIZE;
/// Size in bytes of the Poly1305 tag appended to the wrapped key.
pub const TAG_SIZE: usize = aead::TAG_SIZE;
/// Size in bytes of a wrapped master key: ciphertext followed by the tag.
pub const WRAPPED_KEY_SIZE: usize = MASTER_KEY_SIZE + TAG_SIZE;
/// Prefix of the AEAD associated data of every wrapped key (see [`associated_data`]).
pub const AD_PREFIX: &[u8] = b"fscrypt-rs vault v1\0";

/// Length in bytes of the associated data: prefix, kind byte, 24-byte policy.
pub const AD_SIZE: usize = AD_PREFIX.len() + 1 + 24;

/// Builds the AEAD associated data of a wrapped key:
/// `AD_PREFIX ‖ protector kind (1 byte) ‖ policy (24 bytes)`, where the
/// policy is the vault's root `fscrypt_policy_v2` in its uapi byte layout
/// (spec §3.1), which ends with the 16-byte master key identifier. A
/// wrapped key thus cannot be moved to another vault or protector kind,
/// and the stored policy cannot be changed, without the unwrap failing.
pub fn associated_data(kind: u8, policy_bytes: &[u8; 24]) -> [u8; AD_SIZE] {
    let mut ad = [0u8; AD_SIZE];
    ad[..AD_PREFIX.len()].copy_from_slice(AD_PREFIX);
    ad[AD_PREFIX.len()] = kind;
    ad[AD_PREFIX.len() + 1..].copy_from_slice(policy_bytes);
    ad
}

/// Seals the master key under `wrapping_key` with a fresh random nonce.
///
/// Returns the nonce and `ciphertext ‖ tag` ([`WRAPPED_KEY_SIZE`] bytes).
///
/// # Errors
/// [`ProtectorError::Random`] if no nonce could be drawn.
pub fn seal(
    wrapping_key: &[u8; WRAPPING_KEY_SIZE],
    ad: &[u8],
    master_key: &[u8; MASTER_KEY_SIZE],
) -> Result<([u8; NONCE_SIZE], [u8; WRAPPED_KEY_SIZE]), ProtectorError> {
    let mut nonce = [0u8; NONCE_SIZE];
    fscrypt_crypto::random_bytes(&mut nonce).map_err(ProtectorError::Random)?;
    let mut buf = Zeroizing::new(*master_key);
    // Only fails for messages longer than 256 GiB.
    let tag = aead::seal(wrapping_key, &nonce, ad, buf.as_mut()).map_err(ProtectorError::Kdf)?;
    let mut wrapped = [0u8; WRAPPED_KEY_SIZE];
    wrapped[..MASTER_KEY_SIZE].copy_from_slice(buf.as_ref());
    wrapped[MASTER_KEY_SIZE..].copy_from_slice(&tag);
    Ok((nonce, wrapped))
}

/// Opens a wrapped master key, decrypting it straight into a
/// [`SecretBuf`] of [`MASTER_KEY_SIZE`] bytes.
///
/// # Errors
/// [`ProtectorError::WrongSecret`] when authentication fails (wrong
/// wrapping key, or nonce / ciphertext / associated data altered).
pub fn open(
    wrapping_key: &[u8; WRAPPING_KEY_SIZE],
    ad: &[u8],
    nonce: &[u8; NONCE_SIZE],
    wrapped: &[u8; WRAPPED_KEY_SIZE],
) -> Result<SecretBuf, ProtectorError> {
    let mut buf = SecretBuf::from_slice(&wrapped[..MASTER_KEY_SIZE]);
    let mut tag = [0u8; TAG_SIZE];
    tag.copy_from_slice(&wrapped[MASTER_KEY_SIZE..]);
    match aead::open(wrapping_key, nonce, ad, &mut buf, &tag) {
        Ok(()) => Ok(buf),
        Err(_) => Err(ProtectorError::WrongSecret),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_open_round_trip_and_wrong_key() {
        let key = [7u8; 32];
        let master = [0x5au8; MASTER_KEY_SIZE];
        let ad = associated_data(1, &[2u8; 24]);
        let (nonce, wrapped) = seal(&key, &ad, &master).unwrap();
        assert_ne!(&wrapped[..MASTER_KEY_SIZE], &master[..]);
        assert_eq!(*open(&key, &ad, &nonce, &wrapped).unwrap(), master);
        let mut other = key;
        other[0] ^= 1;
        assert!(matches!(
            open(&other, &ad, &nonce, &wrapped),
            Err(ProtectorError::WrongSecret)
        ));
        let other_ad = associated_data(2, &[2u8; 24]);
        assert!(matches!(
            open(&key, &other_ad, &nonce, &wrapped),
            Err(ProtectorError::WrongSecret)
        ));
        let mut tampered = wrapped;
        tampered[3] ^= 0x80;
        assert!(matches!(
            open(&key, &ad, &nonce, &tampered),
            Err(ProtectorError::WrongSecret)
        ));
    }

    #[test]
    fn associated_data_layout() {
        let ad = associated_data(2, &[9u8; 24]);
        assert_eq!(&ad[..20], b"fscrypt-rs vault v1\0");
        assert_eq!(ad[20], 2);
        assert_eq!(ad[21..], [9u8; 24]);
    }
}
