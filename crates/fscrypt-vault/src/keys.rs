//! The bottom of the protector layer: the sizes of the vault's secrets
//! (master key, salts, wrapping key, recovery key), the Argon2id test
//! override's name, and the layer's errors ([`ProtectorError`],
//! [`RecoveryKeyError`]). [`crate::wrap`], [`crate::cost`] and
//! [`crate::protector`] build on it, in that order (protector uses cost;
//! nothing here uses any of them), and re-export what they always
//! offered (`protector::MASTER_KEY_SIZE`, `wrap::WRAPPING_KEY_SIZE`,
//! `cost::ARGON2_ENV`, ...).

use fscrypt_crypto::aead;

/// Size in bytes of the master key every vault uses (the largest raw fscrypt
/// master key, spec §1.3 `FSCRYPT_MAX_KEY_SIZE`).
pub const MASTER_KEY_SIZE: usize = 64;
/// Size in bytes of a salt (Argon2id and HKDF protectors).
pub const SALT_SIZE: usize = 32;

/// Size in bytes of the wrapping key (XChaCha20-Poly1305 key).
pub const WRAPPING_KEY_SIZE: usize = aead::KEY_SIZE;

/// Size in bytes of a recovery key's secret (256 bits).
pub const RECOVERY_KEY_SIZE: usize = 32;
/// Size in bytes of a recovery key's checksum (the first bytes of
/// SHA-256(`RECOVERY_KEY_CHECK_PREFIX` ‖ key)).
pub const RECOVERY_KEY_CHECK_SIZE: usize = 3;
/// Characters of a recovery key: (32 + 3) bytes = 280 bits = 56 base32 digits.
pub const RECOVERY_KEY_CHARS: usize = (RECOVERY_KEY_SIZE + RECOVERY_KEY_CHECK_SIZE) * 8 / 5;
/// Characters per displayed group.
pub const RECOVERY_KEY_GROUP: usize = 4;

/// Environment variable that replaces Argon2id tuning by fixed parameters,
/// `m=KIB,t=N,p=N` (e.g. `m=64,t=1,p=1`). Meant for tests, which must stay
/// fast; parameters this weak make a passphrase easy to brute-force.
pub const ARGON2_ENV: &str = "FSCRYPT_RS_INSECURE_ARGON2_PARAMS";

/// Errors of the protector layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProtectorError {
    /// AEAD authentication failed: the passphrase or key file is not the one
    /// this protector was made with (or the wrapped key was altered).
    #[error("authentication failed: wrong secret")]
    WrongSecret,
    /// Argon2 parameters outside the accepted range (see [`crate::cost::Argon2Params::validate`]).
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
    /// on this machine ([`crate::cost::Argon2Params::calibrate`]); the text says why and
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
    /// A recovery key that does not parse (length, character, checksum).
    #[error("{0}")]
    RecoveryKey(RecoveryKeyError),
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

/// Why a typed recovery key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecoveryKeyError {
    /// Not the right number of base32 characters.
    #[error(
        "a recovery key has {RECOVERY_KEY_CHARS} characters (14 groups of {RECOVERY_KEY_GROUP}), this one has {0}: type all the groups"
    )]
    Length(usize),
    /// A character outside Crockford's base32 alphabet.
    #[error(
        "{0:?} (group {1}) is not a recovery key character (0-9 and A-Z without U): check that group"
    )]
    BadChar(char, usize),
    /// The checksum does not match: a character is mistyped.
    #[error(
        "the recovery key has a typo (its checksum does not match){hint}: check each group against the one written down"
    )]
    Checksum {
        /// ", probably in group N" when a single changed character explains it.
        hint: String,
    },
}
