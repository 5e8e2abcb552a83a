//! Protectors: the secrets a vault's master key is wrapped with, and how
//! each becomes a 32-byte *wrapping key*.
//!
//! | protector  | wrapping key                                                        |
//! |------------|---------------------------------------------------------------------|
//! | passphrase | Argon2id v1.3 ([`fscrypt_crypto::argon2id`]), parameters ([`crate::cost`]) and 32-byte salt stored |
//! | key file   | HKDF-SHA512(salt = stored 32-byte salt, ikm = the 32- or 64-byte file, info = [`KEY_FILE_HKDF_INFO`]) |
//! | recovery key | HKDF-SHA512(salt = stored 32-byte salt, ikm = the 32 random bytes of the [`RecoveryKey`], info = [`RECOVERY_KEY_HKDF_INFO`]) |
//! | sealed (tpm2, pkcs11, fido2, age) | HKDF-SHA512(salt = stored 32-byte salt, ikm = the 32-byte secret the device or identity releases, info = [`SEALED_HKDF_INFO`]) |
//!
//! A recovery key is shown to the user as 56 Crockford base32 characters in
//! 14 groups of 4 ([`RecoveryKey::display`]): the 32 key bytes followed by a
//! 3-byte checksum, so a mistyped character is caught before any unwrapping
//! ([`RecoveryKey::parse`], tolerant of case, spaces and dashes).
//!
//! The wrapping itself (XChaCha20-Poly1305, the associated data) is in
//! [`crate::wrap`]; the stored fields in [`crate::config`]; the fscrypt
//! format (identifiers, policies) in the `fscrypt` crate.

use zeroize::Zeroizing;

/// The Argon2id test override (defined in [`crate::keys`], documented in
/// [`crate::cost`]).
pub use crate::cost::ARGON2_ENV;
use crate::cost::Argon2Params;
use crate::keys::WRAPPING_KEY_SIZE;
pub use crate::keys::{
    MASTER_KEY_SIZE, ProtectorError, RECOVERY_KEY_CHARS, RECOVERY_KEY_CHECK_SIZE,
    RECOVERY_KEY_GROUP, RECOVERY_KEY_SIZE, RecoveryKeyError, SALT_SIZE,
};

/// HKDF-SHA512 `info` for the key-file protector's wrapping key.
pub const KEY_FILE_HKDF_INFO: &[u8] = b"fscrypt-rs vault v1 key-file protector";

/// HKDF-SHA512 `info` for the recovery-key protector's wrapping key.
pub const RECOVERY_KEY_HKDF_INFO: &[u8] = b"fscrypt-rs vault v2 recovery-key protector";

/// HKDF-SHA512 `info` for a sealed protector's wrapping key (the kind is
/// in the AEAD associated data).
pub const SEALED_HKDF_INFO: &[u8] = b"fscrypt-rs vault v3 sealed protector";

/// Size in bytes of the secret a sealed protector's device or identity
/// releases.
pub const SEALED_SECRET_SIZE: usize = 32;

/// Derives a 32-byte wrapping key from the secret a sealed protector
/// released (TPM2, PKCS#11, FIDO2, age; made by the `fscrypt-seal` crate)
/// with HKDF-SHA512: `salt` = the stored 32-byte salt, `ikm` = the secret,
/// `info` = [`SEALED_HKDF_INFO`].
///
/// # Errors
/// [`ProtectorError::Kdf`] if HKDF refuses the output length (it cannot).
pub fn sealed_wrapping_key(
    secret: &[u8; SEALED_SECRET_SIZE],
    salt: &[u8; SALT_SIZE],
) -> Result<Zeroizing<[u8; WRAPPING_KEY_SIZE]>, ProtectorError> {
    let prk = fscrypt_crypto::HkdfSha512::extract(salt, secret);
    let mut out = Zeroizing::new([0u8; WRAPPING_KEY_SIZE]);
    prk.expand(&[SEALED_HKDF_INFO], out.as_mut())
        .map_err(ProtectorError::Kdf)?;
    Ok(out)
}

/// Domain-separation prefix of the recovery key checksum.
pub const RECOVERY_KEY_CHECK_PREFIX: &[u8] = b"fscrypt-rs recovery key checksum\0";
/// Crockford's base32 alphabet (no I, L, O, U).
const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Key files must have one of these sizes in bytes.
pub const KEY_FILE_SIZES: [usize; 2] = [32, 64];

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

/// Derives a 32-byte wrapping key from a recovery key with HKDF-SHA512:
/// `salt` = the stored 32-byte salt, `ikm` = the key's 32 bytes, `info` =
/// [`RECOVERY_KEY_HKDF_INFO`] (a high-entropy secret needs no slow KDF).
///
/// # Errors
/// [`ProtectorError::Kdf`] if HKDF refuses the output length (it cannot).
pub fn recovery_key_wrapping_key(
    key: &RecoveryKey,
    salt: &[u8; SALT_SIZE],
) -> Result<Zeroizing<[u8; WRAPPING_KEY_SIZE]>, ProtectorError> {
    let prk = fscrypt_crypto::HkdfSha512::extract(salt, key.as_bytes());
    let mut out = Zeroizing::new([0u8; WRAPPING_KEY_SIZE]);
    prk.expand(&[RECOVERY_KEY_HKDF_INFO], out.as_mut())
        .map_err(ProtectorError::Kdf)?;
    Ok(out)
}

/// A recovery key: 32 random bytes, written down by the user as 56 Crockford
/// base32 characters that carry a 24-bit checksum.
pub struct RecoveryKey(Zeroizing<[u8; RECOVERY_KEY_SIZE]>);

impl std::fmt::Debug for RecoveryKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecoveryKey(..)")
    }
}

fn recovery_checksum(key: &[u8; RECOVERY_KEY_SIZE]) -> [u8; RECOVERY_KEY_CHECK_SIZE] {
    let mut msg = Zeroizing::new([0u8; RECOVERY_KEY_CHECK_PREFIX.len() + RECOVERY_KEY_SIZE]);
    msg[..RECOVERY_KEY_CHECK_PREFIX.len()].copy_from_slice(RECOVERY_KEY_CHECK_PREFIX);
    msg[RECOVERY_KEY_CHECK_PREFIX.len()..].copy_from_slice(key);
    let digest = Zeroizing::new(fscrypt_crypto::sha256(msg.as_ref()));
    let mut out = [0u8; RECOVERY_KEY_CHECK_SIZE];
    out.copy_from_slice(&digest[..RECOVERY_KEY_CHECK_SIZE]);
    out
}

/// Crockford decoding of one character (case-insensitive; O→0, I/L→1).
fn crockford_value(c: u8) -> Option<u8> {
    let c = c.to_ascii_uppercase();
    let c = match c {
        b'O' => b'0',
        b'I' | b'L' => b'1',
        other => other,
    };
    CROCKFORD.iter().position(|&a| a == c).map(|v| v as u8)
}

/// Decodes 56 base32 digits (values 0..32) into key ‖ checksum.
fn unpack(
    digits: &[u8; RECOVERY_KEY_CHARS],
) -> Zeroizing<[u8; RECOVERY_KEY_SIZE + RECOVERY_KEY_CHECK_SIZE]> {
    let mut out = Zeroizing::new([0u8; RECOVERY_KEY_SIZE + RECOVERY_KEY_CHECK_SIZE]);
    for (i, &d) in digits.iter().enumerate() {
        for b in 0..5 {
            if d & (0x10 >> b) != 0 {
                let bit = i * 5 + b;
                out[bit / 8] |= 0x80 >> (bit % 8);
            }
        }
    }
    out
}

/// Splits key ‖ checksum and checks the checksum.
fn check_unpacked(
    bytes: &[u8; RECOVERY_KEY_SIZE + RECOVERY_KEY_CHECK_SIZE],
) -> Option<RecoveryKey> {
    let mut key = Zeroizing::new([0u8; RECOVERY_KEY_SIZE]);
    key.copy_from_slice(&bytes[..RECOVERY_KEY_SIZE]);
    (recovery_checksum(&key) == bytes[RECOVERY_KEY_SIZE..]).then_some(RecoveryKey(key))
}

impl RecoveryKey {
    /// Draws a new recovery key from the operating system's RNG.
    ///
    /// # Errors
    /// [`ProtectorError::Random`].
    pub fn generate() -> Result<RecoveryKey, ProtectorError> {
        let mut key = Zeroizing::new([0u8; RECOVERY_KEY_SIZE]);
        random_bytes(key.as_mut())?;
        Ok(RecoveryKey(key))
    }

    /// A recovery key with these bytes (tests, tools).
    pub fn from_bytes(bytes: &[u8; RECOVERY_KEY_SIZE]) -> RecoveryKey {
        RecoveryKey(Zeroizing::new(*bytes))
    }

    /// The 32 secret bytes.
    pub fn as_bytes(&self) -> &[u8; RECOVERY_KEY_SIZE] {
        &self.0
    }

    /// The form shown to the user: 56 upper-case Crockford base32
    /// characters (key ‖ checksum) in groups of 4 joined by `-`.
    pub fn display(&self) -> Zeroizing<String> {
        let mut bytes = Zeroizing::new([0u8; RECOVERY_KEY_SIZE + RECOVERY_KEY_CHECK_SIZE]);
        bytes[..RECOVERY_KEY_SIZE].copy_from_slice(self.as_bytes());
        bytes[RECOVERY_KEY_SIZE..].copy_from_slice(&recovery_checksum(self.as_bytes()));
        let mut out = Zeroizing::new(String::with_capacity(RECOVERY_KEY_CHARS * 5 / 4));
        for i in 0..RECOVERY_KEY_CHARS {
            let mut d = 0u8;
            for b in 0..5 {
                let bit = i * 5 + b;
                if bytes[bit / 8] & (0x80 >> (bit % 8)) != 0 {
                    d |= 0x10 >> b;
                }
            }
            if i > 0 && i % RECOVERY_KEY_GROUP == 0 {
                out.push('-');
            }
            out.push(CROCKFORD[d as usize] as char);
        }
        out
    }

    /// Parses a typed recovery key: case-insensitive, spaces, tabs and
    /// dashes ignored, `O` read as `0` and `I`/`L` as `1` (Crockford).
    ///
    /// # Errors
    /// [`RecoveryKeyError::Length`], [`RecoveryKeyError::BadChar`],
    /// [`RecoveryKeyError::Checksum`] (with the group of the typo when a
    /// single changed character explains the mismatch).
    pub fn parse(text: &[u8]) -> Result<RecoveryKey, RecoveryKeyError> {
        let mut digits = Zeroizing::new([0u8; RECOVERY_KEY_CHARS]);
        let mut n = 0usize;
        for &c in text {
            if matches!(c, b' ' | b'\t' | b'-' | b'\r' | b'\n') {
                continue;
            }
            let group = n / RECOVERY_KEY_GROUP + 1;
            let Some(v) = crockford_value(c) else {
                let shown = if c.is_ascii_graphic() { c as char } else { '?' };
                return Err(RecoveryKeyError::BadChar(shown, group));
            };
            if n < RECOVERY_KEY_CHARS {
                digits[n] = v;
            }
            n += 1;
        }
        if n != RECOVERY_KEY_CHARS {
            return Err(RecoveryKeyError::Length(n));
        }
        if let Some(key) = check_unpacked(&unpack(&digits)) {
            return Ok(key);
        }
        // Which single character would make the checksum match?
        let mut groups = Vec::new();
        for i in 0..RECOVERY_KEY_CHARS {
            let orig = digits[i];
            for v in 0..32u8 {
                if v == orig {
                    continue;
                }
                digits[i] = v;
                if check_unpacked(&unpack(&digits)).is_some() {
                    let g = i / RECOVERY_KEY_GROUP + 1;
                    if !groups.contains(&g) {
                        groups.push(g);
                    }
                }
            }
            digits[i] = orig;
        }
        let hint = match groups.as_slice() {
            [g] => format!(", probably in group {g}"),
            _ => String::new(),
        };
        Err(RecoveryKeyError::Checksum { hint })
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
