//! age: the secret in a standard age file to X25519 recipients, which `age -d -i IDENTITY` opens.
//!
//! (Placeholder until the module lands: every call fails with
//! [`Error::Device`].)

use serde::{Deserialize, Serialize};

use crate::{Error, Interaction, Secret};

/// Options of sealing.
#[derive(Clone, Debug, Default)]
pub struct SealOptions {
    /// Recipients (`age1...`), from `--recipient` and `--recipients-file`.
    pub recipients: Vec<String>,
}

/// Options of unsealing that override the record.
#[derive(Clone, Debug, Default)]
pub struct UnsealOptions {
    /// The identity file (`AGE-SECRET-KEY-1...` lines, as `age-keygen` writes).
    pub identity: Option<std::path::PathBuf>,
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
    Err(Error::Device("age protectors are not built yet".into()))
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
    Err(Error::Device("age protectors are not built yet".into()))
}

/// See [`crate::Sealed::describe`].
pub fn describe(_sealed: &Sealed) -> Vec<(&'static str, String)> {
    Vec::new()
}

/// Reads a recipients file.
///
/// # Errors
/// See [`crate::seal`].
pub fn read_recipients_file(_path: &std::path::Path) -> Result<Vec<String>, Error> {
    Err(Error::Device("age protectors are not built yet".into()))
}
