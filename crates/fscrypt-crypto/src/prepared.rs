//! [`PreparedKey`]: the library-style cipher API (key prepared once, buffers
//! en/decrypted in place), and [`CipherKey`], the trait implementations provide.

#![forbid(unsafe_code)]

use core::fmt;

use crate::{Algorithm, Error, SecretBox, registry};

/// A keyed instance of one implementation: what a registry
/// [`registry::KeyConstructor`] returns.
///
/// Implementations en/decrypt `data` in place with the algorithm's IV and must
/// not allocate. [`PreparedKey`] has already checked the IV length, the
/// minimum length and block alignment before calling; implementations still
/// return typed errors (never panic) on bad lengths. Key material must be
/// zeroized when the value is dropped.
pub trait CipherKey: Send + Sync {
    /// Encrypts `data` in place.
    ///
    /// # Errors
    /// An [`Error`] describing bad input, or a backend failure.
    fn encrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error>;
    /// Decrypts `data` in place.
    ///
    /// # Errors
    /// An [`Error`] describing bad input, or a backend failure.
    fn decrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error>;
}

/// A key for one [`Algorithm`], prepared once by the selected implementation.
///
/// `Send + Sync`: one prepared key may serve many threads. The key schedule
/// lives inside the implementation's object, which is kept in locked,
/// dump-excluded memory ([`SecretBox`]) and zeroized on drop; `Debug`
/// shows the algorithm and implementation only. Source: the kernel's
/// `struct fscrypt_prepared_key` (fs/crypto/fscrypt_private.h).
pub struct PreparedKey {
    algorithm: Algorithm,
    implementation: &'static str,
    inner: SecretBox<dyn CipherKey>,
}

impl PreparedKey {
    /// Prepares `key` for `alg` with the implementation selected from the
    /// [default registry](registry::default_registry). `key` must be
    /// `alg.key_size()` bytes.
    ///
    /// # Errors
    /// [`Error::InvalidKeyLength`]; [`Error::WeakKey`] for an XTS key whose
    /// halves are equal (the kernel forbids weak keys, spec §2.1);
    /// [`Error::NoImplementation`] if every implementation is refused or
    /// failed its self-test.
    pub fn new(alg: Algorithm, key: &[u8]) -> Result<PreparedKey, Error> {
        registry::default_registry().prepare(alg, key)
    }

    pub(crate) fn from_parts(
        algorithm: Algorithm,
        implementation: &'static str,
        inner: SecretBox<dyn CipherKey>,
    ) -> PreparedKey {
        PreparedKey {
            algorithm,
            implementation,
            inner,
        }
    }

    /// Address of the implementation object (the key schedule), for the
    /// test that it lies in locked memory.
    #[cfg(test)]
    pub(crate) fn state_addr(&self) -> usize {
        &*self.inner as *const dyn CipherKey as *const u8 as usize
    }

    /// The algorithm this key is for.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// Name of the implementation that prepared this key, e.g.
    /// `"xts-aes-256-awslc"`.
    pub fn implementation_name(&self) -> &'static str {
        self.implementation
    }

    /// Encrypts `data` in place with IV/tweak `iv` (16 bytes, or 32 for
    /// Adiantum and HCTR2; spec §5). No heap allocation. On error `data` is
    /// unchanged.
    ///
    /// # Errors
    /// [`Error::InvalidIvLength`], [`Error::MessageTooShort`] (< 16 bytes),
    /// [`Error::NotBlockAligned`] (CBC-ESSIV, length not a multiple of 16), or
    /// [`Error::Backend`] / [`Error::MessageTooLong`] from an FFI backend.
    pub fn encrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        self.algorithm.check_input(iv, data.len())?;
        self.inner.encrypt(iv, data)
    }

    /// Decrypts `data` in place; the inverse of [`PreparedKey::encrypt`].
    ///
    /// # Errors
    /// As for [`PreparedKey::encrypt`].
    pub fn decrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        self.algorithm.check_input(iv, data.len())?;
        self.inner.decrypt(iv, data)
    }
}

impl fmt::Debug for PreparedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PreparedKey")
            .field("algorithm", &self.algorithm)
            .field("implementation", &self.implementation)
            .field("key", &"<redacted>")
            .finish()
    }
}
