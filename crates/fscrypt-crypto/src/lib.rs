//! fscrypt's cryptographic primitives behind library-style APIs, with a
//! provider registry that refuses offload implementations and self-tests
//! every implementation before use.
//!
//! * [`PreparedKey`]: a key for one of the eight length-preserving ciphers
//!   fscrypt uses ([`Algorithm`], spec §1.1, §2), prepared once (key schedule
//!   at construction, zeroized on drop) and then en/decrypting caller buffers
//!   in place without heap allocation.
//! * [`registry`]: every implementation of every algorithm, selected by
//!   priority after a known-answer self-test, refusing asynchronous,
//!   per-request-allocating and offload implementations like fscrypt does.
//! * Hash/KDF building blocks: [`sha256`], [`hmac_sha512`], [`HkdfSha512`],
//!   [`siphash24`], [`aes128_ecb_encrypt`], [`aes256_cmac`].
//! * For the fscrypt-rs vault (not the kernel format): [`argon2id`] (the
//!   passphrase KDF), [`aead`] (XChaCha20-Poly1305 key wrapping),
//!   [`mac`] (POLYVAL-then-AES-256, the authenticated vault format's MAC)
//!   and [`random_bytes`].
//!
//! Block ciphers, hashes and stream ciphers come from RustCrypto and aws-lc;
//! the modes assembled from them (XTS tweak loop and stealing, CS3 stealing,
//! ESSIV, Adiantum with NH, HCTR2) are ours and are covered by the shared
//! vectors. Spec references ("spec §N") are to `docs/spec/FSCRYPT-FORMAT.md`.
//!
//! * [`SecretBuf`]: memory for key material, excluded from core dumps and
//!   locked in memory where the system allows.
//!
//! `unsafe` appears only in the aws-lc FFI module and in `secret.rs` (the
//! mappings behind [`SecretBuf`]); every other module has
//! `#![forbid(unsafe_code)]`.

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod adiantum;
pub mod aead;
mod algorithm;
pub mod awslc;
#[cfg(feature = "bench")]
pub mod bench;
mod block;
mod cbc;
mod cts;
mod error;
mod essiv;
mod hctr2;
mod kat;
mod kdf;
pub mod mac;
mod password;
mod poly1305;
mod prepared;
mod providers;
mod random;
pub mod registry;
mod secret;
mod xts;

pub use algorithm::Algorithm;
pub use error::Error;
pub use kat::Kat;
pub use kdf::{
    HKDF_SHA512_MAX_OUTPUT, HkdfSha512, aes128_ecb_encrypt, aes256_cmac, hmac_sha512, sha256,
    sha512, siphash24,
};
pub use password::{ARGON2_MAX_M_COST_KIB, ARGON2_MAX_T_COST, ARGON2_MAX_WORK_KIB, argon2id};
pub use prepared::{CipherKey, PreparedKey};
pub use random::random_bytes;
pub use secret::{SecretBox, SecretBuf, scrub_stack};

#[cfg(test)]
mod tests;
