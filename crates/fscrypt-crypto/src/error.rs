//! The crate's error type: one variant per cause, never a panic on bad input.

#![forbid(unsafe_code)]

use crate::Algorithm;

/// Everything that can go wrong in fscrypt-crypto.
///
/// Primitives stay opaque: a wrong key gives wrong plaintext, not an error
/// (fscrypt has no authentication, spec §2). Errors report the *shape* of the
/// bad input (lengths in bytes) and never any key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The key has the wrong length for the algorithm (spec §1.1 key sizes).
    #[error("{algorithm}: key is {actual} bytes, expected {expected}")]
    InvalidKeyLength {
        /// Algorithm or primitive name (e.g. `"AES-256-XTS"`).
        algorithm: &'static str,
        /// Required key length in bytes.
        expected: usize,
        /// Length that was passed, in bytes.
        actual: usize,
    },
    /// An XTS key whose two halves are equal (spec §2.1). The kernel sets
    /// `CRYPTO_TFM_REQ_FORBID_WEAK_KEYS`, so such keys are refused at setkey.
    #[error("{algorithm}: weak key (the data and tweak halves are equal)")]
    WeakKey {
        /// The XTS algorithm.
        algorithm: Algorithm,
    },
    /// The IV / tweak has the wrong length (16 bytes, or 32 for Adiantum and
    /// HCTR2; spec §1.1).
    #[error("{algorithm}: IV is {actual} bytes, expected {expected}")]
    InvalidIvLength {
        /// Algorithm or primitive name.
        algorithm: &'static str,
        /// Required IV length in bytes.
        expected: usize,
        /// Length that was passed, in bytes.
        actual: usize,
    },
    /// The message is shorter than the algorithm's minimum (16 bytes for all
    /// fscrypt ciphers; spec §2).
    #[error("{algorithm}: message is {actual} bytes, minimum is {min}")]
    MessageTooShort {
        /// Algorithm or primitive name.
        algorithm: &'static str,
        /// Minimum length in bytes.
        min: usize,
        /// Length that was passed, in bytes.
        actual: usize,
    },
    /// The message must be a whole number of blocks (CBC-ESSIV, ECB) and is not.
    #[error("{algorithm}: message is {actual} bytes, not a multiple of {block}")]
    NotBlockAligned {
        /// Algorithm or primitive name.
        algorithm: &'static str,
        /// Block size in bytes.
        block: usize,
        /// Length that was passed, in bytes.
        actual: usize,
    },
    /// The message is longer than the implementation can process in one call.
    #[error("{algorithm}: message is {actual} bytes, maximum is {max}")]
    MessageTooLong {
        /// Algorithm or primitive name.
        algorithm: &'static str,
        /// Maximum length in bytes.
        max: usize,
        /// Length that was passed, in bytes.
        actual: usize,
    },
    /// HKDF-SHA512 can produce at most 255 × 64 = 16320 bytes (RFC 5869 §2.3).
    #[error("HKDF-SHA512: requested {requested} output bytes, maximum is {max}")]
    HkdfOutputTooLong {
        /// Maximum output length in bytes.
        max: usize,
        /// Requested output length in bytes.
        requested: usize,
    },
    /// No registered implementation of the algorithm is usable: all have a
    /// refused property or failed their known-answer self-test.
    #[error("no usable implementation of {algorithm} (all are refused or failed their self-test)")]
    NoImplementation {
        /// The algorithm that was requested.
        algorithm: Algorithm,
    },
    /// No registered MAC implementation is usable: all have a refused
    /// property or failed their known-answer self-test.
    #[error(
        "no usable implementation of the vault MAC (all are refused or failed their self-test)"
    )]
    NoMacImplementation,
    /// A backend library reported a failure (e.g. an aws-lc call returned 0).
    #[error("{implementation}: backend call {call} failed")]
    Backend {
        /// The implementation name (e.g. `"xts-aes-256-awslc"`).
        implementation: &'static str,
        /// The failing backend function.
        call: &'static str,
    },
    /// Argon2id refused its input (RFC 9106 bounds: salt, memory, passes,
    /// lanes, output length).
    #[error("Argon2id: {reason}")]
    Argon2 {
        /// Which input was refused.
        reason: &'static str,
    },
    /// An AEAD tag did not verify: wrong key, or nonce, associated data,
    /// ciphertext or tag altered.
    #[error("{algorithm}: authentication failed (wrong key, or the data was altered)")]
    AuthenticationFailed {
        /// The AEAD (e.g. `"XChaCha20-Poly1305"`).
        algorithm: &'static str,
    },
    /// The operating system's random number generator failed.
    #[error("the operating system's random number generator failed (errno {code:?})")]
    Random {
        /// The errno, when the failure came from a system call.
        code: Option<i32>,
    },
}
