//! google/fscrypt's key handling: wrapping (AES-256-CTR with a random IV,
//! then HMAC-SHA256 over IV ‖ ciphertext; both keys from HKDF-SHA256 of the
//! 32-byte wrapping key, no salt, no info: the first 32 output bytes encrypt,
//! the next 32 authenticate), Argon2id passphrase hashing, descriptors.

use aes::Aes256;
use ctr::cipher::{KeyIvInit, StreamCipher};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::Error;
use crate::proto::{HashingCosts, INTERNAL_KEY_LEN, IV_LEN, WrappedKeyData};

/// A 32-byte key (wrapping key, protector key), wiped on drop.
pub type Key32 = Zeroizing<[u8; INTERNAL_KEY_LEN]>;

/// The encryption and authentication keys stretched from a wrapping key.
fn stretch(wrapping: &[u8; INTERNAL_KEY_LEN]) -> (Key32, Key32) {
    let hk = hkdf::Hkdf::<Sha256>::new(None, wrapping);
    let mut okm = Zeroizing::new([0u8; 2 * INTERNAL_KEY_LEN]);
    hk.expand(&[], &mut okm[..])
        .expect("64 bytes is within HKDF-SHA256's limit");
    let mut enc = Zeroizing::new([0u8; INTERNAL_KEY_LEN]);
    let mut auth = Zeroizing::new([0u8; INTERNAL_KEY_LEN]);
    enc.copy_from_slice(&okm[..INTERNAL_KEY_LEN]);
    auth.copy_from_slice(&okm[INTERNAL_KEY_LEN..]);
    (enc, auth)
}

fn ctr(key: &[u8; INTERNAL_KEY_LEN], iv: &[u8], buf: &mut [u8]) {
    let mut c =
        ctr::Ctr128BE::<Aes256>::new_from_slices(key, iv).expect("32-byte key and 16-byte IV");
    c.apply_keystream(buf);
}

fn mac(key: &[u8; INTERNAL_KEY_LEN], iv: &[u8], data: &[u8]) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key length");
    m.update(iv);
    m.update(data);
    m
}

/// Wraps `secret` under `wrapping` with a fresh random IV.
///
/// # Errors
/// [`Error::Crypto`] if the system's random source fails.
pub fn wrap(wrapping: &[u8; INTERNAL_KEY_LEN], secret: &[u8]) -> Result<WrappedKeyData, Error> {
    let mut iv = [0u8; IV_LEN];
    fscrypt_crypto::random_bytes(&mut iv)?;
    Ok(wrap_with_iv(wrapping, secret, iv))
}

/// [`wrap`] with a given IV (known-answer tests).
pub fn wrap_with_iv(
    wrapping: &[u8; INTERNAL_KEY_LEN],
    secret: &[u8],
    iv: [u8; IV_LEN],
) -> WrappedKeyData {
    let (enc, auth) = stretch(wrapping);
    let mut encrypted_key = secret.to_vec();
    ctr(&enc, &iv, &mut encrypted_key);
    let hmac = mac(&auth, &iv, &encrypted_key)
        .finalize()
        .into_bytes()
        .to_vec();
    WrappedKeyData {
        iv: iv.to_vec(),
        encrypted_key,
        hmac,
    }
}

/// Unwraps `data` with `wrapping`; `None` when the HMAC does not match
/// (wrong passphrase or key, or a tampered file). The comparison is in
/// constant time.
pub fn unwrap(
    wrapping: &[u8; INTERNAL_KEY_LEN],
    data: &WrappedKeyData,
) -> Option<Zeroizing<Vec<u8>>> {
    if data.iv.len() != IV_LEN {
        return None;
    }
    let (enc, auth) = stretch(wrapping);
    mac(&auth, &data.iv, &data.encrypted_key)
        .verify_slice(&data.hmac)
        .ok()?;
    let mut out = Zeroizing::new(data.encrypted_key.clone());
    ctr(&enc, &data.iv, &mut out);
    Some(out)
}

/// The 32-byte wrapping key of a passphrase protector: Argon2id v1.3 of the
/// passphrase with the stored salt and costs (parallelism truncated to 8
/// bits as google/fscrypt does).
///
/// # Errors
/// [`Error::Invalid`] for costs out of range ([`HashingCosts::check`],
/// which bounds memory, passes and their product): nothing is hashed;
/// [`Error::Crypto`] if Argon2 refuses them.
pub fn passphrase_hash(
    passphrase: &[u8],
    salt: &[u8],
    costs: &HashingCosts,
) -> Result<Key32, Error> {
    costs.check()?;
    let mut out = Zeroizing::new([0u8; INTERNAL_KEY_LEN]);
    fscrypt_crypto::argon2id(
        passphrase,
        salt,
        costs.memory as u32,
        costs.time as u32,
        costs.effective_parallelism(),
        &mut out[..],
    )?;
    Ok(out)
}

/// The descriptor google/fscrypt gives a protector key and a v1 policy key:
/// the first 8 bytes of SHA-512(SHA-512(key)), in lowercase hex.
pub fn descriptor_v1(key: &[u8]) -> String {
    let inner = Zeroizing::new(fscrypt_crypto::sha512(key));
    let outer = fscrypt_crypto::sha512(&inner[..]);
    hex::encode(&outer[..8])
}

/// The descriptor of a 64-byte policy key: [`descriptor_v1`] for version 1,
/// the kernel's key identifier (HKDF-SHA512) for version 2.
///
/// # Errors
/// [`Error::Invalid`] for another version or a key the kernel would refuse.
pub fn policy_descriptor(key: &[u8], version: i64) -> Result<String, Error> {
    match version {
        0 | 1 => Ok(descriptor_v1(key)),
        2 => {
            let mk = fscrypt::MasterKey::new(key)
                .map_err(|e| Error::Invalid(format!("policy key: {e}")))?;
            Ok(hex::encode(mk.identifier().0))
        }
        v => Err(Error::Invalid(format!("policy version {v} is invalid"))),
    }
}

/// A random key of `N` bytes.
///
/// # Errors
/// [`Error::Crypto`] if the system's random source fails.
pub fn random_key<const N: usize>() -> Result<Zeroizing<[u8; N]>, Error> {
    let mut k = Zeroizing::new([0u8; N]);
    fscrypt_crypto::random_bytes(&mut k[..])?;
    Ok(k)
}

/// `key` as a 32-byte array, if it is 32 bytes long.
pub fn key32(key: &[u8]) -> Option<Key32> {
    let mut k = Zeroizing::new([0u8; INTERNAL_KEY_LEN]);
    if key.len() != INTERNAL_KEY_LEN {
        return None;
    }
    k.copy_from_slice(key);
    Some(k)
}
