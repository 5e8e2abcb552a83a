//! TPM 2.0: the secret sealed to the TPM under a PCR policy (and optionally a PIN), through tss-esapi.
//!
//! (Placeholder until the module lands: every call fails with
//! [`Error::Device`].)

use serde::{Deserialize, Serialize};

use crate::{Error, Interaction, Secret};

/// Options of sealing.
#[derive(Clone, Debug, Default)]
pub struct SealOptions {
    /// TCTI spec (`device:/dev/tpmrm0`, `swtpm:host=127.0.0.1,port=2321`); default: the environment's TCTI (`TPM2TOOLS_TCTI`, `TCTI`), then `device:/dev/tpmrm0`.
    pub tcti: Option<String>,
    /// PCR indices of the SHA-256 bank the policy binds (default `[7]`).
    pub pcrs: Vec<u8>,
    /// Whether a PIN (asked through [`Interaction::pin`]) is also required; subject to the TPM's dictionary-attack lockout.
    pub pin: bool,
}

/// Options of unsealing that override the record.
#[derive(Clone, Debug, Default)]
pub struct UnsealOptions {
    /// TCTI spec overriding the record's.
    pub tcti: Option<String>,
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
    Err(Error::Device("tpm2 protectors are not built yet".into()))
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
    Err(Error::Device("tpm2 protectors are not built yet".into()))
}

/// See [`crate::Sealed::describe`].
pub fn describe(_sealed: &Sealed) -> Vec<(&'static str, String)> {
    Vec::new()
}

/// See [`crate::Sealed::reseal_options`].
pub fn reseal_options(_sealed: &Sealed, pcrs: &[u8], pin: bool, tcti: Option<&str>) -> SealOptions {
    SealOptions {
        tcti: tcti.map(str::to_owned),
        pcrs: pcrs.to_vec(),
        pin,
    }
}
