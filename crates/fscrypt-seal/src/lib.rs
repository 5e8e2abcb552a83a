//! Sealing a protector's secret to something outside the vault.
//!
//! A *sealed protector* (issue 25) is a key-file protector whose 32-byte
//! key is not kept in a file but released by a device or an identity:
//!
//! | kind     | how the secret is kept                                         | module     |
//! |----------|----------------------------------------------------------------|------------|
//! | `tpm2`   | sealed to a TPM 2.0 under a PCR policy (and optionally a PIN)  | [`tpm2`]   |
//! | `pkcs11` | wrapped by a key that never leaves a PKCS#11 token             | [`pkcs11`] |
//! | `fido2`  | derived by a FIDO2 authenticator's hmac-secret extension       | [`fido2`]  |
//! | `age`    | a standard age file to X25519 recipients                       | [`age`]    |
//!
//! This crate only turns a [`Secret`] into a [`Sealed`] record and back.
//! What the secret protects is the caller's business: the vault derives a
//! wrapping key from it with HKDF-SHA512 (`fscrypt_vault::protector`), the
//! kernel flow uses it as a google/fscrypt `custom_passphrase`
//! (`fscrypt_actions::sealed`). [`Sealed`] is stored as JSON, tagged by
//! `kind`; everything in it is public (a TPM's sealed object is useless
//! without that TPM, a wrapped key without the token).
//!
//! Prompts (PINs, "touch your key") go through [`Interaction`], so the
//! command line decides where a PIN comes from (terminal, `--pin-file`,
//! `--extpass`) and this crate never reads a terminal itself.

pub mod age;
pub mod fido2;
pub mod pkcs11;
pub mod tpm2;

use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

/// Size in bytes of every sealed secret.
pub const SECRET_SIZE: usize = 32;

/// A 32-byte secret to seal or just unsealed; zeroed on drop, never
/// printed by `Debug`.
pub struct Secret(Zeroizing<[u8; SECRET_SIZE]>);

impl Secret {
    /// A new secret from the operating system's random generator.
    ///
    /// # Errors
    /// [`Error::Device`] if `getrandom(2)` fails.
    pub fn random() -> Result<Secret, Error> {
        let mut s = Zeroizing::new([0u8; SECRET_SIZE]);
        fscrypt_crypto::random_bytes(s.as_mut())
            .map_err(|e| Error::Device(format!("no random bytes: {e}")))?;
        Ok(Secret(s))
    }

    /// Takes these bytes as the secret.
    pub fn from_bytes(bytes: Zeroizing<[u8; SECRET_SIZE]>) -> Secret {
        Secret(bytes)
    }

    /// Copies a slice that must be exactly [`SECRET_SIZE`] bytes.
    ///
    /// # Errors
    /// [`Error::Invalid`] for any other length (a device or file returned
    /// something that is not one of our secrets).
    pub fn from_slice(bytes: &[u8]) -> Result<Secret, Error> {
        let mut s = Zeroizing::new([0u8; SECRET_SIZE]);
        if bytes.len() != SECRET_SIZE {
            return Err(Error::Invalid(format!(
                "the unsealed secret has {} bytes, not {SECRET_SIZE}",
                bytes.len()
            )));
        }
        s.copy_from_slice(bytes);
        Ok(Secret(s))
    }

    /// The secret's bytes.
    pub fn as_bytes(&self) -> &[u8; SECRET_SIZE] {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// The kinds of sealed protector.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A TPM 2.0 ([`tpm2`]).
    Tpm2,
    /// A PKCS#11 token ([`pkcs11`]).
    Pkcs11,
    /// A FIDO2 authenticator ([`fido2`]).
    Fido2,
    /// age X25519 recipients ([`age`]).
    Age,
}

impl Kind {
    /// Every kind, in the order menus and help list them.
    pub const ALL: [Kind; 4] = [Kind::Tpm2, Kind::Pkcs11, Kind::Fido2, Kind::Age];

    /// The kind as users type it and as the JSON `kind` tag: `tpm2`,
    /// `pkcs11`, `fido2`, `age`.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Tpm2 => "tpm2",
            Kind::Pkcs11 => "pkcs11",
            Kind::Fido2 => "fido2",
            Kind::Age => "age",
        }
    }

    /// Parses [`Kind::label`].
    pub fn from_label(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.label() == s)
    }

    /// Whether the secret is bound to a device (TPM, token, authenticator):
    /// such a protector can be lost with the device or locked by firmware
    /// changes, so it is never a vault's only way in (issue 25, item 5).
    /// `age` is bound to an identity file instead.
    pub fn is_hardware(self) -> bool {
        !matches!(self, Kind::Age)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

/// What to seal to: the options of `protector add CIPHERDIR KIND ...` and
/// `encrypt --source KIND`.
#[derive(Clone, Debug)]
pub enum SealOptions {
    /// `tpm2 [--tcti SPEC] [--pcrs 7[,..]] [--pin]`.
    Tpm2(tpm2::SealOptions),
    /// `pkcs11 --module SO --token LABEL`.
    Pkcs11(pkcs11::SealOptions),
    /// `fido2 [--device PATH]`.
    Fido2(fido2::SealOptions),
    /// `age --recipient age1... | --recipients-file F`.
    Age(age::SealOptions),
}

impl SealOptions {
    /// The kind these options seal to.
    pub fn kind(&self) -> Kind {
        match self {
            SealOptions::Tpm2(_) => Kind::Tpm2,
            SealOptions::Pkcs11(_) => Kind::Pkcs11,
            SealOptions::Fido2(_) => Kind::Fido2,
            SealOptions::Age(_) => Kind::Age,
        }
    }
}

/// Where to unseal: the options of `mount --tpm2 | --pkcs11 | --fido2 |
/// --age-identity` and of `unlock`. Each field overrides what the sealed
/// record remembers (a token's module moved, another TCTI); defaults use
/// the record's own.
#[derive(Clone, Debug, Default)]
pub struct UnsealOptions {
    /// For `tpm2`.
    pub tpm2: tpm2::UnsealOptions,
    /// For `pkcs11`.
    pub pkcs11: pkcs11::UnsealOptions,
    /// For `fido2`.
    pub fido2: fido2::UnsealOptions,
    /// For `age`.
    pub age: age::UnsealOptions,
}

/// A sealed secret as stored (JSON, tagged by `kind`). All of it is
/// public; see each module for its fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Sealed {
    /// [`tpm2::Sealed`].
    Tpm2(tpm2::Sealed),
    /// [`pkcs11::Sealed`].
    Pkcs11(pkcs11::Sealed),
    /// [`fido2::Sealed`].
    Fido2(fido2::Sealed),
    /// [`age::Sealed`].
    Age(age::Sealed),
}

impl Sealed {
    /// The kind of this record.
    pub fn kind(&self) -> Kind {
        match self {
            Sealed::Tpm2(_) => Kind::Tpm2,
            Sealed::Pkcs11(_) => Kind::Pkcs11,
            Sealed::Fido2(_) => Kind::Fido2,
            Sealed::Age(_) => Kind::Age,
        }
    }

    /// Parses a stored record.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming what is wrong.
    pub fn from_json(value: &serde_json::Value) -> Result<Sealed, Error> {
        serde_json::from_value(value.clone())
            .map_err(|e| Error::Invalid(format!("the sealed protector record is malformed: {e}")))
    }

    /// The record as stored.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a Sealed record always serializes")
    }

    /// The options that seal a new secret as this record was sealed, for
    /// `protector reseal` (TPM2 only: the one kind whose refusal a
    /// firmware or boot change causes): its PCRs, PIN and TCTI unless
    /// `pcrs` (non-empty), `pin` or `tcti` say otherwise. `None` for the
    /// other kinds.
    pub fn reseal_options(
        &self,
        pcrs: &[u8],
        pin: bool,
        tcti: Option<&str>,
    ) -> Option<SealOptions> {
        match self {
            Sealed::Tpm2(s) => Some(SealOptions::Tpm2(tpm2::reseal_options(s, pcrs, pin, tcti))),
            _ => None,
        }
    }

    /// What `protector list`, `info` and `status` show about the record:
    /// (field, value) pairs such as ("device", "/dev/tpmrm0"), ("pcrs",
    /// "sha256:7"). Never anything secret.
    pub fn describe(&self) -> Vec<(&'static str, String)> {
        match self {
            Sealed::Tpm2(s) => tpm2::describe(s),
            Sealed::Pkcs11(s) => pkcs11::describe(s),
            Sealed::Fido2(s) => fido2::describe(s),
            Sealed::Age(s) => age::describe(s),
        }
    }
}

/// Prompts and notices while sealing or unsealing, answered by the
/// command line (terminal, `--pin-file`, `--extpass`).
pub trait Interaction {
    /// Asks for a PIN; `what` names it ("TPM PIN", "PIN of token
    /// 'mytoken'"), `confirm` asks twice (when setting one).
    ///
    /// # Errors
    /// Whatever stops the answer (no terminal, unreadable file); returned
    /// to the caller unchanged.
    fn pin(&mut self, what: &str, confirm: bool) -> Result<Zeroizing<String>, Error>;

    /// Tells the user something they must do or know now ("touch your
    /// security key"), on stderr.
    fn notice(&mut self, message: &str);
}

/// Seals `secret` as `options` say.
///
/// # Errors
/// As the kind's module: [`Error::Device`] when the device cannot be
/// reached or refuses, [`Error::WrongSecret`] for a wrong PIN,
/// [`Error::Invalid`] for bad options (an unparsable recipient).
pub fn seal(
    options: &SealOptions,
    secret: &Secret,
    ui: &mut dyn Interaction,
) -> Result<Sealed, Error> {
    Ok(match options {
        SealOptions::Tpm2(o) => Sealed::Tpm2(tpm2::seal(o, secret, ui)?),
        SealOptions::Pkcs11(o) => Sealed::Pkcs11(pkcs11::seal(o, secret, ui)?),
        SealOptions::Fido2(o) => Sealed::Fido2(fido2::seal(o, secret, ui)?),
        SealOptions::Age(o) => Sealed::Age(age::seal(o, secret, ui)?),
    })
}

/// Unseals `sealed` with the device or identity `options` point to.
///
/// # Errors
/// [`Error::WrongSecret`] when the device or identity is there but does
/// not release this secret (PCRs changed, wrong PIN, another token or
/// identity): the command exits as for a wrong passphrase.
/// [`Error::Device`] when it cannot be reached; [`Error::Invalid`] for a
/// malformed record.
pub fn unseal(
    sealed: &Sealed,
    options: &UnsealOptions,
    ui: &mut dyn Interaction,
) -> Result<Secret, Error> {
    match sealed {
        Sealed::Tpm2(s) => tpm2::unseal(s, &options.tpm2, ui),
        Sealed::Pkcs11(s) => pkcs11::unseal(s, &options.pkcs11, ui),
        Sealed::Fido2(s) => fido2::unseal(s, &options.fido2, ui),
        Sealed::Age(s) => age::unseal(s, &options.age, ui),
    }
}

/// Errors sealing or unsealing. Every message is one line that says what
/// to do, and never contains a secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The device or identity answered but will not release this secret:
    /// a wrong PIN (with the tries left when the device says), PCRs that
    /// changed (named), an identity that is not a recipient, a token
    /// without the key. Exit status as for a wrong passphrase.
    #[error("{0}")]
    WrongSecret(String),
    /// The device cannot be reached, is locked out, or failed.
    #[error("{0}")]
    Device(String),
    /// Bad options or a malformed stored record.
    #[error("{0}")]
    Invalid(String),
    /// Reading a file (identity, recipients, PIN file) failed.
    #[error("{0}")]
    Io(String),
}

impl Error {
    /// Whether this is a refusal that the command reports like a wrong
    /// passphrase ([`Error::WrongSecret`]).
    pub fn is_wrong_secret(&self) -> bool {
        matches!(self, Error::WrongSecret(_))
    }
}
