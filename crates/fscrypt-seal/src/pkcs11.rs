//! PKCS#11 tokens: a key that never leaves the token wraps the secret (RSA-OAEP or AES key wrap), through cryptoki.
//!
//! (Placeholder until the module lands: every call fails with
//! [`Error::Device`].)

use serde::{Deserialize, Serialize};

use crate::{Error, Interaction, Secret};

/// Options of sealing.
#[derive(Clone, Debug, Default)]
pub struct SealOptions {
    /// The PKCS#11 module (`/usr/lib/softhsm/libsofthsm2.so`, `opensc-pkcs11.so`).
    pub module: std::path::PathBuf,
    /// The token's label.
    pub token: String,
}

/// Options of unsealing that override the record.
#[derive(Clone, Debug, Default)]
pub struct UnsealOptions {
    /// Module overriding the record's.
    pub module: Option<std::path::PathBuf>,
    /// Token label overriding the record's.
    pub token: Option<String>,
}

/// The stored record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sealed {}

/// Seals `secret`.
///
/// # Errors
/// See [`crate::seal`].
pub fn seal(
    _options: &SealOptions,
    _secret: &Secret,
    _ui: &mut dyn Interaction,
) -> Result<Sealed, Error> {
    Err(Error::Device("pkcs11 protectors are not built yet".into()))
}

/// Unseals `sealed`.
///
/// # Errors
/// See [`crate::unseal`].
pub fn unseal(
    _sealed: &Sealed,
    _options: &UnsealOptions,
    _ui: &mut dyn Interaction,
) -> Result<Secret, Error> {
    Err(Error::Device("pkcs11 protectors are not built yet".into()))
}

/// See [`crate::Sealed::describe`].
pub fn describe(_sealed: &Sealed) -> Vec<(&'static str, String)> {
    Vec::new()
}
