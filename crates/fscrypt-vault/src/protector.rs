//! Protectors: the secrets a vault's master key is wrapped with, and how
//! each becomes a 32-byte *wrapping key*.
//!
//! | protector  | wrapping key                                                        |
//! |------------|---------------------------------------------------------------------|
//! | passphrase | Argon2id v1.3 ([`fscrypt_crypto::argon2id`]), parameters ([`crate::cost`]) and 32-byte salt stored |
//! | key file   | HKDF-SHA512(salt = stored 32-byte salt, ikm = the 32- or 64-byte file, info = [`KEY_FILE_HKDF_INFO`]) |
//!
//! The wrapping itself (XChaCha20-Poly1305, the associated data) is in
//! [`crate::wrap`]; the stored fields in [`crate::config`]; the fscrypt
//! format (identifiers, policies) in the `fscrypt` crate.

use zeroize::Zeroizing;

/// The Argon2id test override (defined in [`crate::cost`]).
pub use crate::cost::ARGON2_ENV;
use crate::cost::Argon2Params;
use crate::wrap::WRAPPING_KEY_SIZE;

/// Size in bytes of the master key every vault uses (the largest raw fscrypt
/// master key, spec §1.3 `FSCRYPT_MAX_KEY_SIZE`).
pub const MASTER_KEY_SIZE: usize = 64;
/// Size in bytes of a salt (Argon2id and HKDF protectors).
pub const SALT_SIZE: usize = 32;

/// HKDF-SHA512 `info` for the key-file protector's wrapping key.
pub const KEY_FILE_HKDF_INFO: &[u8] = b"fscrypt-rs vault v1 key-file protector";

/// Key files must have one of these sizes in bytes.
pub const KEY_FILE_SIZES: [usize; 2] = [32, 64];

/// Errors of the protector layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProtectorError {
    /// AEAD authentication failed: the passphrase or key file is not the one
    /// this protector was made with (or the wrapped key was altered).
    #[error("authentication failed: wrong secret")]
    WrongSecret,
    /// Argon2 parameters outside the accepted range (see [`Argon2Params::validate`]).
    #[error(
        "Argon2id parameters m={m_cost_kib} KiB, t={t_cost}, p={p_cost} are out of range: {reason}"
    )]
    BadArgon2Params {
        /// Memory cost in KiB.
        m_cost_kib: u32,
        /// Iterations.
        t_cost: u32,
        /// Lanes.
        p_cost: u32,
        /// Which bound was violated.
        reason: &'static str,
    },
    /// Calibration found no Argon2id cost close enough to the target time
    /// on this machine ([`Argon2Params::calibrate`]); the text says why and
    /// what to do.
    #[error("{0}")]
    Calibration(String),
    /// The value of [`ARGON2_ENV`] could not be parsed.
    #[error("{ARGON2_ENV}={0:?}: expected m=KIB,t=N,p=N")]
    BadArgon2Env(String),
    /// A key file that is not 32 or 64 bytes long.
    #[error(
        "a key file must be 32 or 64 bytes long, this one has {0} bytes: give the key file made for this vault"
    )]
    KeyFileSize(usize),
    /// An empty passphrase.
    #[error("the passphrase is empty: choose a non-empty passphrase")]
    EmptyPassphrase,
    /// The operating system's random number generator failed.
    #[error("{0}")]
    Random(fscrypt_crypto::Error),
    /// The key derivation or wrapping was refused by the crypto library
    /// (an internal limit; not expected with the vault's sizes).
    #[error("key derivation failed: {0}")]
    Kdf(fscrypt_crypto::Error),
}

/// Derives a 32-byte wrapping key from a passphrase with Argon2id v1.3.
///
/// # Errors
/// [`ProtectorError::BadArgon2Params`] if `params` are out of range,
/// [`ProtectorError::EmptyPassphrase`], [`ProtectorError::Kdf`] on a
/// library failure.
pub fn passphrase_wrapping_key(
    params: &Argon2Params,
    passphrase: &[u8],
    salt: &[u8; SALT_SIZE],
) -> Result<Zeroizing<[u8; WRAPPING_KEY_SIZE]>, ProtectorError> {
    if passphrase.is_empty() {
        return Err(ProtectorError::EmptyPassphrase);
    }
    crate::cost::argon2id(params, passphrase, salt)
}

/// Derives a 32-byte wrapping key from the contents of a key file with
/// HKDF-SHA512 (RFC 5869): `salt` = the stored 32-byte salt, `ikm` = the
/// key file, `info` = [`KEY_FILE_HKDF_INFO`].
///
/// # Errors
/// [`ProtectorError::KeyFileSize`] unless the key file is 32 or 64 bytes;
/// [`ProtectorError::Kdf`] if HKDF refuses the output length (it cannot).
pub fn key_file_wrapping_key(
    key_file: &[u8],
    salt: &[u8; SALT_SIZE],
) -> Result<Zeroizing<[u8; WRAPPING_KEY_SIZE]>, ProtectorError> {
    check_key_file_size(key_file.len())?;
    let prk = fscrypt_crypto::HkdfSha512::extract(salt, key_file);
    let mut out = Zeroizing::new([0u8; WRAPPING_KEY_SIZE]);
    prk.expand(&[KEY_FILE_HKDF_INFO], out.as_mut())
        .map_err(ProtectorError::Kdf)?;
    Ok(out)
}

/// Checks that a key file of `len` bytes has an accepted size (32 or 64).
///
/// # Errors
/// [`ProtectorError::KeyFileSize`].
pub fn check_key_file_size(len: usize) -> Result<(), ProtectorError> {
    if KEY_FILE_SIZES.contains(&len) {
        Ok(())
    } else {
        Err(ProtectorError::KeyFileSize(len))
    }
}

/// Fills `buf` from the operating system's random number generator
/// ([`fscrypt_crypto::random_bytes`]).
///
/// # Errors
/// [`ProtectorError::Random`].
pub fn random_bytes(buf: &mut [u8]) -> Result<(), ProtectorError> {
    fscrypt_crypto::random_bytes(buf).map_err(ProtectorError::Random)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHEAP: Argon2Params = Argon2Params {
        m_cost_kib: 64,
        t_cost: 1,
        p_cost: 1,
    };

    #[test]
    fn argon2id_deterministic_and_input_sensitive() {
        let salt = [1u8; SALT_SIZE];
        let a = passphrase_wrapping_key(&CHEAP, b"correct horse", &salt).unwrap();
        let b = passphrase_wrapping_key(&CHEAP, b"correct horse", &salt).unwrap();
        let c = passphrase_wrapping_key(&CHEAP, b"correct horsf", &salt).unwrap();
        let d = passphrase_wrapping_key(&CHEAP, b"correct horse", &[2u8; SALT_SIZE]).unwrap();
        assert_eq!(*a, *b);
        assert_ne!(*a, *c);
        assert_ne!(*a, *d);
    }

    #[test]
    fn argon2id_matches_reference_implementation() {
        // Expected value from the Argon2 reference implementation's CLI
        // (Debian package argon2 0~20171227):
        //   echo -n "correct horse battery staple" |
        //     argon2 "fscrypt-rs-salt-0123456789abcdef" -id -t 3 -k 64 -p 1 -l 32 -r
        let params = Argon2Params {
            m_cost_kib: 64,
            t_cost: 3,
            p_cost: 1,
        };
        let salt: &[u8; SALT_SIZE] = b"fscrypt-rs-salt-0123456789abcdef";
        let key = passphrase_wrapping_key(&params, b"correct horse battery staple", salt).unwrap();
        assert_eq!(
            hex::encode(*key),
            "7f7d96c7b15c1cf6bb05cff8eef37634ed72e1672299dabc27fa3d6180d6fa92"
        );
    }

    #[test]
    fn empty_passphrase_is_refused() {
        assert!(matches!(
            passphrase_wrapping_key(&CHEAP, b"", &[0; SALT_SIZE]),
            Err(ProtectorError::EmptyPassphrase)
        ));
    }

    #[test]
    fn key_file_sizes() {
        let salt = [9u8; SALT_SIZE];
        assert!(key_file_wrapping_key(&[1u8; 32], &salt).is_ok());
        assert!(key_file_wrapping_key(&[1u8; 64], &salt).is_ok());
        for len in [0usize, 16, 31, 33, 63, 65, 128] {
            assert!(matches!(
                key_file_wrapping_key(&vec![1u8; len], &salt),
                Err(ProtectorError::KeyFileSize(l)) if l == len
            ));
        }
        let a = key_file_wrapping_key(&[1u8; 32], &salt).unwrap();
        let b = key_file_wrapping_key(&[2u8; 32], &salt).unwrap();
        assert_ne!(*a, *b);
    }
}
