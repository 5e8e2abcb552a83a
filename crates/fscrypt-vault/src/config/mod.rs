//! The vault config file: its JSON layout, parsing into fixed-size values,
//! and the atomic, never-overwriting write.
//!
//! Owns bytes on disk only; what the fields mean cryptographically is in
//! [`crate::protector`] and [`crate::wrap`], the policy's meaning in the
//! `fscrypt` crate.
//!
//! Layout (all binary values lowercase hex, see docs/vault-format.md,
//! "Vault configuration and protectors"):
//!
//! ```json
//! {
//!   "format": "fscrypt-rs vault",
//!   "version": 1,
//!   "created": 1767225600,
//!   "policy": { "version": 2, "contents_encryption_mode": 1,
//!               "filenames_encryption_mode": 4, "flags": 3,
//!               "log2_data_unit_size": 0,
//!               "master_key_identifier": "<32 hex>" },
//!   "protectors": [
//!     { "kind": "passphrase", "kdf": "argon2id", "argon2_version": 19,
//!       "m_cost_kib": 262144, "t_cost": 3, "p_cost": 1, "salt": "<64 hex>",
//!       "aead": "xchacha20-poly1305", "nonce": "<48 hex>", "wrapped_key": "<160 hex>" },
//!     { "kind": "key_file", "kdf": "hkdf-sha512", "salt": "<64 hex>",
//!       "aead": "xchacha20-poly1305", "nonce": "<48 hex>", "wrapped_key": "<160 hex>" }
//!   ]
//! }
//! ```
//!
//! Version 2 (written only when something new is used, see
//! [`ConfigRecord::version`]) adds `"name"` (required) and `"created"`
//! (optional, Unix seconds) to each protector, right after `"kind"`, and the
//! kind `"recovery_key"` (fields as `key_file`). Version 3 (written when a
//! sealed protector exists) adds the kinds `"tpm2"`, `"pkcs11"`, `"fido2"`
//! and `"age"`: the fields of `key_file` plus `"sealed"`, the object the
//! `fscrypt-seal` crate made (public data: a TPM's sealed blob, a token's
//! wrapped bytes, an age file). Changes after `init` are committed with
//! [`ConfigLock`] and [`replace_atomic`].

use crate::cost::Argon2Params;
use crate::protector::SALT_SIZE;
use crate::wrap::{NONCE_SIZE, WRAPPED_KEY_SIZE};

/// File name of the vault config inside the cipher directory. It contains
/// '.', which the base64url alphabet of encrypted names (spec §8.1) never
/// does, so no encrypted name can collide with it; and it starts with
/// `fscrypt.`, the prefix the filesystem reserves for its own metadata
/// (`layout::classify` treats such names as internal and never shows them).
pub const CONFIG_NAME: &str = "fscrypt.vault.json";
/// Value of the `format` field.
pub const FORMAT_NAME: &str = "fscrypt-rs vault";
/// The config `version` of a vault that uses nothing beyond one passphrase
/// and/or one key-file protector with their default names: what every
/// version of fscrypt-rs reads and writes.
pub const CONFIG_VERSION: u32 = 1;
/// The config `version` written when a vault uses protector names other
/// than the defaults, a recovery key, several protectors of one kind, or
/// creation times.
pub const CONFIG_VERSION_2: u32 = 2;
/// The config `version` written when a vault has a sealed protector
/// (TPM2, PKCS#11, FIDO2, age): version 2 plus the sealed kinds, so that a
/// fscrypt-rs without them refuses the config in one line instead of
/// dropping protectors it cannot read.
pub const CONFIG_VERSION_3: u32 = 3;
/// Largest config file accepted, in bytes (a real one is under 2 KiB).
pub const MAX_CONFIG_SIZE: u64 = 64 * 1024;
/// Most protectors one config may hold.
pub const MAX_PROTECTORS: usize = 32;
/// Longest protector name, in bytes.
pub const MAX_NAME_LEN: usize = 64;
/// Protector kind byte in the AEAD associated data: passphrase.
pub const KIND_PASSPHRASE: u8 = 1;
/// Protector kind byte in the AEAD associated data: key file.
pub const KIND_KEY_FILE: u8 = 2;
/// Protector kind byte in the AEAD associated data: recovery key.
pub const KIND_RECOVERY_KEY: u8 = 3;
/// Protector kind byte in the AEAD associated data: a secret sealed to a TPM2.
pub const KIND_TPM2: u8 = 4;
/// Protector kind byte in the AEAD associated data: a secret wrapped by a
/// PKCS#11 token.
pub const KIND_PKCS11: u8 = 5;
/// Protector kind byte in the AEAD associated data: a secret released by a
/// FIDO2 authenticator.
pub const KIND_FIDO2: u8 = 6;
/// Protector kind byte in the AEAD associated data: a secret in an age file.
pub const KIND_AGE: u8 = 7;
/// Largest `sealed` object of one protector, in bytes of JSON.
pub const MAX_SEALED_SIZE: usize = 16 * 1024;

const KDF_ARGON2ID: &str = "argon2id";
const ARGON2_VERSION_13: u32 = 0x13;
const KDF_HKDF_SHA512: &str = "hkdf-sha512";
const AEAD_XCHACHA: &str = "xchacha20-poly1305";

/// Errors reading or writing a config file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file is not a valid vault config; the text says which field.
    #[error("not a valid vault config: {0}; restore it from a backup")]
    Invalid(String),
    /// The config is not a regular file (a FIFO, a device, a directory, a
    /// socket or a symlink): it is never opened for reading, so a FIFO
    /// cannot make `mount` wait forever.
    #[error(
        "the config is {0}, not a regular file, so it is not a vault config; restore it from a backup"
    )]
    NotRegular(&'static str),
    /// The config is larger than [`MAX_CONFIG_SIZE`].
    #[error(
        "the config is larger than {MAX_CONFIG_SIZE} bytes, so it is not a vault config; restore it from a backup"
    )]
    TooLarge,
    /// A config file already exists; it is never overwritten.
    #[error("a vault config already exists; refusing to overwrite it")]
    AlreadyExists,
    /// An I/O error.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The root policy of the vault, as stored: the fields of a
/// `fscrypt_policy_v2` (spec §3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyRecord {
    /// Contents encryption mode number (spec §1.1).
    pub contents_mode: u8,
    /// Filenames encryption mode number (spec §1.1).
    pub filenames_mode: u8,
    /// Policy flags byte (spec §1.4).
    pub flags: u8,
    /// log2 of the data unit size in bytes, 0 = filesystem block size (spec §3.3).
    pub log2_data_unit_size: u8,
    /// The v2 master key identifier (spec §4.4).
    pub master_key_identifier: [u8; 16],
}

impl PolicyRecord {
    /// The 24-byte uapi `fscrypt_policy_v2` layout (spec §3.1): version 2,
    /// contents mode, filenames mode, flags, log2_data_unit_size, three
    /// reserved zero bytes, then the 16-byte identifier.
    pub fn to_uapi_bytes(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[0] = 2;
        b[1] = self.contents_mode;
        b[2] = self.filenames_mode;
        b[3] = self.flags;
        b[4] = self.log2_data_unit_size;
        b[8..].copy_from_slice(&self.master_key_identifier);
        b
    }
}

/// The secret-specific part of one stored protector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtectorRecord {
    /// Passphrase → Argon2id → wrapping key.
    Passphrase {
        /// Argon2id cost parameters.
        params: Argon2Params,
        /// Argon2id salt.
        salt: [u8; SALT_SIZE],
        /// XChaCha20-Poly1305 nonce.
        nonce: [u8; NONCE_SIZE],
        /// Wrapped master key: ciphertext ‖ tag.
        wrapped_key: [u8; WRAPPED_KEY_SIZE],
    },
    /// Key file → HKDF-SHA512 → wrapping key.
    KeyFile {
        /// HKDF salt.
        salt: [u8; SALT_SIZE],
        /// XChaCha20-Poly1305 nonce.
        nonce: [u8; NONCE_SIZE],
        /// Wrapped master key: ciphertext ‖ tag.
        wrapped_key: [u8; WRAPPED_KEY_SIZE],
    },
    /// Recovery key → HKDF-SHA512 → wrapping key (version 2 only).
    RecoveryKey {
        /// HKDF salt.
        salt: [u8; SALT_SIZE],
        /// XChaCha20-Poly1305 nonce.
        nonce: [u8; NONCE_SIZE],
        /// Wrapped master key: ciphertext ‖ tag.
        wrapped_key: [u8; WRAPPED_KEY_SIZE],
    },
    /// A 32-byte secret released by a device or identity (the `sealed`
    /// record, owned by the `fscrypt-seal` crate) → HKDF-SHA512 → wrapping
    /// key (version 3 only).
    Sealed {
        /// Which sealed kind ([`ProtectorKind::is_sealed`]).
        kind: ProtectorKind,
        /// The sealed record: a JSON object of at most
        /// [`MAX_SEALED_SIZE`] bytes, public data only, opaque to this
        /// crate.
        sealed: serde_json::Value,
        /// HKDF salt.
        salt: [u8; SALT_SIZE],
        /// XChaCha20-Poly1305 nonce.
        nonce: [u8; NONCE_SIZE],
        /// Wrapped master key: ciphertext ‖ tag.
        wrapped_key: [u8; WRAPPED_KEY_SIZE],
    },
}

/// The kinds of protector, for names and messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProtectorKind {
    /// A passphrase (Argon2id).
    Passphrase,
    /// A key file of 32 or 64 raw bytes (HKDF-SHA512).
    KeyFile,
    /// A recovery key (HKDF-SHA512).
    RecoveryKey,
    /// A secret sealed to a TPM 2.0 under a PCR policy (HKDF-SHA512).
    Tpm2,
    /// A secret wrapped by a key on a PKCS#11 token (HKDF-SHA512).
    Pkcs11,
    /// A secret released by a FIDO2 authenticator's hmac-secret
    /// (HKDF-SHA512).
    Fido2,
    /// A secret in an age file to X25519 recipients (HKDF-SHA512).
    Age,
}

impl ProtectorKind {
    /// The kind as users see and type it: `passphrase`, `key-file`,
    /// `recovery-key` (also the default name of the first of its kind).
    pub fn label(self) -> &'static str {
        match self {
            ProtectorKind::Passphrase => "passphrase",
            ProtectorKind::KeyFile => "key-file",
            ProtectorKind::RecoveryKey => "recovery-key",
            ProtectorKind::Tpm2 => "tpm2",
            ProtectorKind::Pkcs11 => "pkcs11",
            ProtectorKind::Fido2 => "fido2",
            ProtectorKind::Age => "age",
        }
    }

    /// Whether the secret is held by a device or identity file, through
    /// the `fscrypt-seal` crate (tpm2, pkcs11, fido2, age).
    pub fn is_sealed(self) -> bool {
        matches!(
            self,
            ProtectorKind::Tpm2 | ProtectorKind::Pkcs11 | ProtectorKind::Fido2 | ProtectorKind::Age
        )
    }

    /// Whether the protector needs nothing but what the user keeps (a
    /// passphrase, a key file, a recovery key): not bound to a device
    /// that can be lost or whose PCRs can change, nor to a recipient's
    /// identity. A vault always keeps one (issue 25, "never locked out").
    pub fn is_standalone(self) -> bool {
        !self.is_sealed()
    }

    /// The kind byte of the AEAD associated data.
    pub fn ad_byte(self) -> u8 {
        match self {
            ProtectorKind::Passphrase => KIND_PASSPHRASE,
            ProtectorKind::KeyFile => KIND_KEY_FILE,
            ProtectorKind::RecoveryKey => KIND_RECOVERY_KEY,
            ProtectorKind::Tpm2 => KIND_TPM2,
            ProtectorKind::Pkcs11 => KIND_PKCS11,
            ProtectorKind::Fido2 => KIND_FIDO2,
            ProtectorKind::Age => KIND_AGE,
        }
    }
}

impl std::fmt::Display for ProtectorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

impl ProtectorRecord {
    /// The kind byte used in the associated data.
    pub fn kind(&self) -> u8 {
        self.protector_kind().ad_byte()
    }

    /// The kind of this protector.
    pub fn protector_kind(&self) -> ProtectorKind {
        match self {
            ProtectorRecord::Passphrase { .. } => ProtectorKind::Passphrase,
            ProtectorRecord::KeyFile { .. } => ProtectorKind::KeyFile,
            ProtectorRecord::RecoveryKey { .. } => ProtectorKind::RecoveryKey,
            ProtectorRecord::Sealed { kind, .. } => *kind,
        }
    }
}

/// One protector as stored: its name, creation time and secret-specific
/// record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protector {
    /// The protector's name, unique in the vault. In a version-1 config the
    /// names are not stored: the first protector of a kind is named after
    /// the kind (`passphrase`, `key-file`), the next ones `KIND-2`, ...
    pub name: String,
    /// Creation time, seconds since the Unix epoch (UTC), when recorded
    /// (version 2 only).
    pub created: Option<u64>,
    /// Kind, KDF parameters and wrapped key.
    pub record: ProtectorRecord,
}

impl Protector {
    /// A protector without a stored name or time; [`ConfigRecord::new`]
    /// and [`ConfigRecord::push`] give it its default name.
    pub fn unnamed(record: ProtectorRecord) -> Protector {
        Protector {
            name: String::new(),
            created: None,
            record,
        }
    }
}

/// Checks a protector name: 1 to [`MAX_NAME_LEN`] bytes of ASCII letters,
/// digits, `.`, `_` and `-`, not starting with `-`.
///
/// # Errors
/// A one-line reason.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!(
            "a protector name has 1 to {MAX_NAME_LEN} characters"
        ));
    }
    if name.starts_with('-')
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(format!(
            "protector name {name:?}: use letters, digits, '.', '_' and '-' (not first)"
        ));
    }
    Ok(())
}

/// The default name for a new protector of `kind` next to `existing`
/// names: the kind's label if free, else `LABEL-2`, `LABEL-3`, ...
pub fn default_name<'a>(
    kind: ProtectorKind,
    existing: impl Iterator<Item = &'a str> + Clone,
) -> String {
    let label = kind.label();
    if !existing.clone().any(|n| n == label) {
        return label.to_owned();
    }
    (2..)
        .map(|i| format!("{label}-{i}"))
        .find(|cand| !existing.clone().any(|n| n == cand))
        .unwrap_or_default()
}

/// A parsed vault config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigRecord {
    /// The root policy.
    pub policy: PolicyRecord,
    /// The protectors, in file order (at least one).
    pub protectors: Vec<Protector>,
}

impl ConfigRecord {
    /// A config of `policy` and `protectors`; protectors with an empty
    /// name get their default name ([`default_name`]), in order.
    pub fn new(policy: PolicyRecord, protectors: Vec<Protector>) -> ConfigRecord {
        let mut record = ConfigRecord {
            policy,
            protectors: Vec::with_capacity(protectors.len()),
        };
        for p in protectors {
            record.push(p);
        }
        record
    }

    /// Appends a protector, giving it its default name if its name is empty.
    pub fn push(&mut self, mut p: Protector) {
        if p.name.is_empty() {
            p.name = default_name(
                p.record.protector_kind(),
                self.protectors.iter().map(|q| q.name.as_str()),
            );
        }
        self.protectors.push(p);
    }

    /// The config version [`ConfigRecord::to_json`] writes: 1 when every
    /// protector is a passphrase or key file, at most one of each kind,
    /// named by default and without a creation time; 3 when one is
    /// sealed; 2 otherwise.
    pub fn version(&self) -> u32 {
        if self
            .protectors
            .iter()
            .any(|p| p.record.protector_kind().is_sealed())
        {
            return CONFIG_VERSION_3;
        }
        let mut seen = Vec::new();
        for p in &self.protectors {
            let kind = p.record.protector_kind();
            if kind == ProtectorKind::RecoveryKey
                || seen.contains(&kind)
                || p.created.is_some()
                || p.name != kind.label()
            {
                return CONFIG_VERSION_2;
            }
            seen.push(kind);
        }
        CONFIG_VERSION
    }

    /// Index of the protector named `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.protectors.iter().position(|p| p.name == name)
    }
}

/// The UTC calendar date and time of `secs` seconds since 1970-01-01:
/// (year, month, day, hour, minute, second), with Howard Hinnant's
/// `civil_from_days` algorithm (proleptic Gregorian calendar).
fn civil_utc(secs: u64) -> (i64, i64, i64, u64, u64, u64) {
    let rem = secs % 86_400;
    // Days since 1970 of any u64 seconds fit i64.
    #[allow(clippy::cast_possible_wrap)]
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Formats seconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn format_utc(secs: u64) -> String {
    let (y, mo, d, h, mi, s) = civil_utc(secs);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC")
}

/// Formats seconds since the Unix epoch as RFC 3339 (`2026-01-01T00:00:00Z`).
pub fn format_rfc3339(secs: u64) -> String {
    let (y, mo, d, h, mi, s) = civil_utc(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// Seconds since the Unix epoch now (0 if the clock is before 1970).
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

mod file;
mod json;

pub use file::{ConfigLock, dir_and_name, read_limited, replace_atomic, write_new_atomic};
pub(crate) use file::{HookAction, Step, replace_atomic_hooked};

#[cfg(test)]
mod tests;
