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
//! kind `"recovery_key"` (fields as `key_file`). Changes after `init` are
//! committed with [`ConfigLock`] and [`replace_atomic`].

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use serde::{Deserialize, Serialize};

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
}

impl ProtectorKind {
    /// The kind as users see and type it: `passphrase`, `key-file`,
    /// `recovery-key` (also the default name of the first of its kind).
    pub fn label(self) -> &'static str {
        match self {
            ProtectorKind::Passphrase => "passphrase",
            ProtectorKind::KeyFile => "key-file",
            ProtectorKind::RecoveryKey => "recovery-key",
        }
    }

    /// The kind byte of the AEAD associated data.
    pub fn ad_byte(self) -> u8 {
        match self {
            ProtectorKind::Passphrase => KIND_PASSPHRASE,
            ProtectorKind::KeyFile => KIND_KEY_FILE,
            ProtectorKind::RecoveryKey => KIND_RECOVERY_KEY,
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

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigJson {
    format: String,
    version: u32,
    policy: PolicyJson,
    protectors: Vec<ProtectorJson>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyJson {
    version: u8,
    contents_encryption_mode: u8,
    filenames_encryption_mode: u8,
    flags: u8,
    log2_data_unit_size: u8,
    master_key_identifier: String,
}

/// Fields every protector has: in version 2, `name` (required) and
/// `created` (optional); neither exists in version 1.
struct CommonJson {
    name: Option<String>,
    created: Option<u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum ProtectorJson {
    Passphrase {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        created: Option<u64>,
        kdf: String,
        argon2_version: u32,
        m_cost_kib: u32,
        t_cost: u32,
        p_cost: u32,
        salt: String,
        aead: String,
        nonce: String,
        wrapped_key: String,
    },
    KeyFile {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        created: Option<u64>,
        kdf: String,
        salt: String,
        aead: String,
        nonce: String,
        wrapped_key: String,
    },
    RecoveryKey {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        created: Option<u64>,
        kdf: String,
        salt: String,
        aead: String,
        nonce: String,
        wrapped_key: String,
    },
}

fn invalid(msg: impl Into<String>) -> ConfigError {
    ConfigError::Invalid(msg.into())
}

fn hex_array<const N: usize>(field: &str, text: &str) -> Result<[u8; N], ConfigError> {
    let mut out = [0u8; N];
    hex::decode_to_slice(text, &mut out)
        .map_err(|_| invalid(format!("{field} must be {} hex digits", 2 * N)))?;
    Ok(out)
}

fn expect(field: &str, found: &str, wanted: &str) -> Result<(), ConfigError> {
    if found == wanted {
        Ok(())
    } else {
        Err(invalid(format!(
            "{field} is {found:?}, only {wanted:?} is supported"
        )))
    }
}

/// Salt, nonce and wrapped key of an HKDF-based record.
type HkdfFields = ([u8; SALT_SIZE], [u8; NONCE_SIZE], [u8; WRAPPED_KEY_SIZE]);

/// The HKDF-based records (key file, recovery key) share their fields.
fn hkdf_fields(
    kdf: &str,
    salt: &str,
    aead: &str,
    nonce: &str,
    wrapped_key: &str,
) -> Result<HkdfFields, ConfigError> {
    expect("kdf", kdf, KDF_HKDF_SHA512)?;
    expect("aead", aead, AEAD_XCHACHA)?;
    Ok((
        hex_array("salt", salt)?,
        hex_array("nonce", nonce)?,
        hex_array("wrapped_key", wrapped_key)?,
    ))
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
    /// named by default and without a creation time; 2 otherwise.
    pub fn version(&self) -> u32 {
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

    /// Parses a config file's bytes (version 1 or 2).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the offending field (bad JSON,
    /// unknown field, wrong format name or version, bad hex or length,
    /// unsupported KDF/AEAD, no protector or more than [`MAX_PROTECTORS`],
    /// Argon2 parameters out of range, a version-2 field in a version-1
    /// config, a missing, invalid or duplicate name in version 2).
    pub fn parse(bytes: &[u8]) -> Result<ConfigRecord, ConfigError> {
        let json: ConfigJson =
            serde_json::from_slice(bytes).map_err(|e| invalid(format!("JSON: {e}")))?;
        expect("format", &json.format, FORMAT_NAME)?;
        let v2 = match json.version {
            CONFIG_VERSION => false,
            CONFIG_VERSION_2 => true,
            other => {
                return Err(invalid(format!(
                    "version {other} is not supported (this program reads versions {CONFIG_VERSION} and {CONFIG_VERSION_2}); use a newer fscrypt-rs"
                )));
            }
        };
        if json.policy.version != 2 {
            return Err(invalid("policy.version must be 2"));
        }
        let policy = PolicyRecord {
            contents_mode: json.policy.contents_encryption_mode,
            filenames_mode: json.policy.filenames_encryption_mode,
            flags: json.policy.flags,
            log2_data_unit_size: json.policy.log2_data_unit_size,
            master_key_identifier: hex_array(
                "policy.master_key_identifier",
                &json.policy.master_key_identifier,
            )?,
        };
        if json.protectors.is_empty() {
            return Err(invalid("no protector"));
        }
        if json.protectors.len() > MAX_PROTECTORS {
            return Err(invalid(format!("more than {MAX_PROTECTORS} protectors")));
        }
        let mut record = ConfigRecord {
            policy,
            protectors: Vec::with_capacity(json.protectors.len()),
        };
        // A wrong passphrase tries every passphrase protector: bound their
        // total cost as that of one (in time, not only in memory).
        let mut total_work: u64 = 0;
        for p in json.protectors {
            let (common, rec) = match p {
                ProtectorJson::Passphrase {
                    name,
                    created,
                    kdf,
                    argon2_version,
                    m_cost_kib,
                    t_cost,
                    p_cost,
                    salt,
                    aead,
                    nonce,
                    wrapped_key,
                } => {
                    expect("kdf", &kdf, KDF_ARGON2ID)?;
                    expect("aead", &aead, AEAD_XCHACHA)?;
                    if argon2_version != ARGON2_VERSION_13 {
                        return Err(invalid("argon2_version must be 19 (0x13)"));
                    }
                    let params = Argon2Params {
                        m_cost_kib,
                        t_cost,
                        p_cost,
                    };
                    params.validate().map_err(|e| invalid(e.to_string()))?;
                    total_work += params.work_kib();
                    if total_work > Argon2Params::MAX_WORK_KIB {
                        return Err(invalid(
                            "the passphrase protectors together cost more than m*t = 32 GiB of Argon2id work (minutes to unlock)",
                        ));
                    }
                    (
                        CommonJson { name, created },
                        ProtectorRecord::Passphrase {
                            params,
                            salt: hex_array("salt", &salt)?,
                            nonce: hex_array("nonce", &nonce)?,
                            wrapped_key: hex_array("wrapped_key", &wrapped_key)?,
                        },
                    )
                }
                ProtectorJson::KeyFile {
                    name,
                    created,
                    kdf,
                    salt,
                    aead,
                    nonce,
                    wrapped_key,
                } => {
                    let (salt, nonce, wrapped_key) =
                        hkdf_fields(&kdf, &salt, &aead, &nonce, &wrapped_key)?;
                    (
                        CommonJson { name, created },
                        ProtectorRecord::KeyFile {
                            salt,
                            nonce,
                            wrapped_key,
                        },
                    )
                }
                ProtectorJson::RecoveryKey {
                    name,
                    created,
                    kdf,
                    salt,
                    aead,
                    nonce,
                    wrapped_key,
                } => {
                    if !v2 {
                        return Err(invalid("a recovery_key protector needs config version 2"));
                    }
                    let (salt, nonce, wrapped_key) =
                        hkdf_fields(&kdf, &salt, &aead, &nonce, &wrapped_key)?;
                    (
                        CommonJson { name, created },
                        ProtectorRecord::RecoveryKey {
                            salt,
                            nonce,
                            wrapped_key,
                        },
                    )
                }
            };
            let name = if v2 {
                let name = common
                    .name
                    .ok_or_else(|| invalid("a version-2 protector needs a name"))?;
                check_name(&name).map_err(invalid)?;
                if record.find(&name).is_some() {
                    return Err(invalid(format!("two protectors are named {name:?}")));
                }
                name
            } else {
                if common.name.is_some() || common.created.is_some() {
                    return Err(invalid(
                        "name and created are version-2 fields, this config is version 1",
                    ));
                }
                String::new()
            };
            record.push(Protector {
                name,
                created: common.created,
                record: rec,
            });
        }
        Ok(record)
    }

    /// Serializes to pretty-printed JSON with a trailing newline, as
    /// version [`ConfigRecord::version`]: a version-1 config is written
    /// byte for byte as fscrypt-rs always has.
    pub fn to_json(&self) -> Vec<u8> {
        let p = &self.policy;
        let version = self.version();
        let v2 = version == CONFIG_VERSION_2;
        let json = ConfigJson {
            format: FORMAT_NAME.to_owned(),
            version,
            policy: PolicyJson {
                version: 2,
                contents_encryption_mode: p.contents_mode,
                filenames_encryption_mode: p.filenames_mode,
                flags: p.flags,
                log2_data_unit_size: p.log2_data_unit_size,
                master_key_identifier: hex::encode(p.master_key_identifier),
            },
            protectors: self
                .protectors
                .iter()
                .map(|prot| {
                    let name = v2.then(|| prot.name.clone());
                    let created = if v2 { prot.created } else { None };
                    match &prot.record {
                        ProtectorRecord::Passphrase {
                            params,
                            salt,
                            nonce,
                            wrapped_key,
                        } => ProtectorJson::Passphrase {
                            name,
                            created,
                            kdf: KDF_ARGON2ID.to_owned(),
                            argon2_version: ARGON2_VERSION_13,
                            m_cost_kib: params.m_cost_kib,
                            t_cost: params.t_cost,
                            p_cost: params.p_cost,
                            salt: hex::encode(salt),
                            aead: AEAD_XCHACHA.to_owned(),
                            nonce: hex::encode(nonce),
                            wrapped_key: hex::encode(wrapped_key),
                        },
                        ProtectorRecord::KeyFile {
                            salt,
                            nonce,
                            wrapped_key,
                        } => ProtectorJson::KeyFile {
                            name,
                            created,
                            kdf: KDF_HKDF_SHA512.to_owned(),
                            salt: hex::encode(salt),
                            aead: AEAD_XCHACHA.to_owned(),
                            nonce: hex::encode(nonce),
                            wrapped_key: hex::encode(wrapped_key),
                        },
                        ProtectorRecord::RecoveryKey {
                            salt,
                            nonce,
                            wrapped_key,
                        } => ProtectorJson::RecoveryKey {
                            name,
                            created,
                            kdf: KDF_HKDF_SHA512.to_owned(),
                            salt: hex::encode(salt),
                            aead: AEAD_XCHACHA.to_owned(),
                            nonce: hex::encode(nonce),
                            wrapped_key: hex::encode(wrapped_key),
                        },
                    }
                })
                .collect(),
        };
        // Serializing plain strings and integers cannot fail.
        let mut out = serde_json::to_vec_pretty(&json).unwrap_or_default();
        out.push(b'\n');
        out
    }
}

/// Formats seconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn format_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Seconds since the Unix epoch now (0 if the clock is before 1970).
pub fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Reads a config file, refusing anything over [`MAX_CONFIG_SIZE`] and
/// anything but a regular file (opened with `O_NOFOLLOW | O_NONBLOCK`, so
/// a FIFO or a symbolic link in its place never blocks or redirects).
///
/// # Errors
/// [`ConfigError::Io`] (e.g. `NotFound`), [`ConfigError::TooLarge`],
/// [`ConfigError::NotRegular`].
pub fn read_limited(path: &Path) -> Result<Vec<u8>, ConfigError> {
    let file = open_regular(path)?;
    read_limited_from(&file)
}

/// Opens `path` read-only if it is a regular file.
fn open_regular(path: &Path) -> Result<File, ConfigError> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc_flags::NOFOLLOW | libc_flags::NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        // O_NOFOLLOW on a symbolic link.
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Err(ConfigError::NotRegular("a symbolic link"));
        }
        Err(e) => return Err(e.into()),
    };
    let file_type = file.metadata()?.file_type();
    if !file_type.is_file() {
        use std::os::unix::fs::FileTypeExt;
        return Err(ConfigError::NotRegular(if file_type.is_fifo() {
            "a FIFO"
        } else if file_type.is_dir() {
            "a directory"
        } else if file_type.is_socket() {
            "a socket"
        } else {
            "a device"
        }));
    }
    Ok(file)
}

/// `O_NOFOLLOW` and `O_NONBLOCK` as `custom_flags` values.
mod libc_flags {
    pub const NOFOLLOW: i32 = rustix::fs::OFlags::NOFOLLOW.bits() as i32;
    pub const NONBLOCK: i32 = rustix::fs::OFlags::NONBLOCK.bits() as i32;
}

fn read_limited_from(mut file: &File) -> Result<Vec<u8>, ConfigError> {
    let mut bytes = Vec::new();
    (&mut file)
        .take(MAX_CONFIG_SIZE + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_CONFIG_SIZE {
        return Err(ConfigError::TooLarge);
    }
    Ok(bytes)
}

/// An exclusive `flock` on a vault's config file, held while it is
/// replaced, so that two `passwd`/`protector` commands never interleave.
///
/// The lock is on the config file itself, not on the cipher directory:
/// a mount daemon holds a `flock` on the cipher directory for as long as
/// it serves the vault, and changing a protector of a mounted vault is
/// normal. Because the file is replaced by a rename, a waiter that gets
/// the lock checks that the path still names the inode it locked, and
/// starts over otherwise.
#[derive(Debug)]
pub struct ConfigLock {
    file: File,
}

impl ConfigLock {
    /// Waits for the lock on `dir/name` and returns it with the file's
    /// current contents.
    ///
    /// # Errors
    /// As [`read_limited`].
    pub fn acquire(dir: &Path, name: &str) -> Result<(ConfigLock, Vec<u8>), ConfigError> {
        use std::os::unix::fs::MetadataExt;
        let path = dir.join(name);
        loop {
            let file = open_regular(&path)?;
            loop {
                match rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive) {
                    Ok(()) => break,
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => return Err(std::io::Error::from(e).into()),
                }
            }
            let held = file.metadata()?;
            match std::fs::symlink_metadata(&path) {
                Ok(now) if now.dev() == held.dev() && now.ino() == held.ino() => {
                    let bytes = read_limited_from(&file)?;
                    return Ok((ConfigLock { file }, bytes));
                }
                // Replaced while we waited: lock the new one.
                Ok(_) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl Drop for ConfigLock {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.file, rustix::fs::FlockOperation::Unlock);
    }
}

/// The steps of [`replace_atomic`], for the crash tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The temporary file exists, empty.
    Created,
    /// Half of the new contents are written.
    HalfWritten,
    /// All of it is written and `fsync`ed.
    Synced,
    /// Renamed over the config.
    Renamed,
    /// The directory is `fsync`ed.
    DirSynced,
}

/// What a test hook makes [`replace_atomic_hooked`] do after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) enum HookAction {
    /// Go on.
    Continue,
    /// Fail with an I/O error (normal error path: the temporary file is removed).
    Fail,
    /// Stop dead, as if the process were killed: nothing is cleaned up.
    Crash,
}

/// Replaces `dir/name` with `contents` atomically, mode 0600:
///
/// 1. create `dir/name.tmp-<random>` with `O_CREAT|O_EXCL`, mode 0600;
/// 2. write, `fsync`;
/// 3. `rename` it over `name`;
/// 4. `fsync` the directory.
///
/// A crash at any point leaves the old config or the new one, whole (at
/// worst with a stray temporary file, which nothing reads); on an error
/// the temporary file is removed. The caller holds the [`ConfigLock`].
///
/// # Errors
/// [`ConfigError::Io`].
pub fn replace_atomic(
    dir: &Path,
    name: &str,
    contents: &[u8],
    _lock: &ConfigLock,
) -> Result<(), ConfigError> {
    replace_atomic_hooked(dir, name, contents, &mut |_| HookAction::Continue)
}

/// [`replace_atomic`] with a hook called after each [`Step`].
pub(crate) fn replace_atomic_hooked(
    dir: &Path,
    name: &str,
    contents: &[u8],
    hook: &mut dyn FnMut(Step) -> HookAction,
) -> Result<(), ConfigError> {
    let final_path = dir.join(name);
    let mut rnd = [0u8; 8];
    fscrypt_crypto::random_bytes(&mut rnd).map_err(std::io::Error::other)?;
    let tmp_path = dir.join(format!("{name}.tmp-{}", hex::encode(rnd)));
    let mut crashed = false;
    let mut step = |s: Step, crashed: &mut bool| -> Result<(), ConfigError> {
        match hook(s) {
            HookAction::Continue => Ok(()),
            HookAction::Fail => {
                Err(std::io::Error::other(format!("injected failure after {s:?}")).into())
            }
            HookAction::Crash => {
                *crashed = true;
                Err(std::io::Error::other(format!("injected crash after {s:?}")).into())
            }
        }
    };
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp_path)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        step(Step::Created, &mut crashed)?;
        let half = contents.len() / 2;
        file.write_all(&contents[..half])?;
        step(Step::HalfWritten, &mut crashed)?;
        file.write_all(&contents[half..])?;
        file.sync_all()?;
        drop(file);
        step(Step::Synced, &mut crashed)?;
        std::fs::rename(&tmp_path, &final_path)?;
        step(Step::Renamed, &mut crashed)?;
        File::open(dir)?.sync_all()?;
        step(Step::DirSynced, &mut crashed)?;
        Ok(())
    })();
    if result.is_err() && !crashed {
        let _ = std::fs::remove_file(&tmp_path);
    }
    result
}

/// Writes `contents` as `dir/name`, atomically and never over an existing
/// file, mode 0600:
///
/// 1. create `dir/name.tmp-<random>` with `O_CREAT|O_EXCL`, mode 0600;
/// 2. write, `fsync`;
/// 3. `renameat2(RENAME_NOREPLACE)` onto `name` (on filesystems without it:
///    `link` then `unlink`, which also fails if `name` exists);
/// 4. `fsync` the directory.
///
/// A crash leaves either no config or the complete one; the temporary file
/// is removed on every error path.
///
/// # Errors
/// [`ConfigError::AlreadyExists`] if `dir/name` exists, [`ConfigError::Io`].
pub fn write_new_atomic(dir: &Path, name: &str, contents: &[u8]) -> Result<(), ConfigError> {
    let final_path = dir.join(name);
    if final_path.symlink_metadata().is_ok() {
        return Err(ConfigError::AlreadyExists);
    }
    let mut rnd = [0u8; 8];
    fscrypt_crypto::random_bytes(&mut rnd).map_err(std::io::Error::other)?;
    let tmp_path = dir.join(format!("{name}.tmp-{}", hex::encode(rnd)));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp_path)?;
        // The umask can only clear bits; make sure the owner can read it.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        file.write_all(contents)?;
        file.sync_all()?;
        drop(file);
        match rustix::fs::renameat_with(
            rustix::fs::CWD,
            &tmp_path,
            rustix::fs::CWD,
            &final_path,
            rustix::fs::RenameFlags::NOREPLACE,
        ) {
            Ok(()) => {}
            Err(rustix::io::Errno::EXIST) => return Err(ConfigError::AlreadyExists),
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
                // No RENAME_NOREPLACE here: link(2) fails with EEXIST too.
                match std::fs::hard_link(&tmp_path, &final_path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        return Err(ConfigError::AlreadyExists);
                    }
                    Err(e) => return Err(e.into()),
                }
                std::fs::remove_file(&tmp_path)?;
            }
            Err(e) => return Err(std::io::Error::from(e).into()),
        }
        File::open(dir)?.sync_all()?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp_path);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ConfigRecord {
        ConfigRecord::new(
            PolicyRecord {
                contents_mode: 1,
                filenames_mode: 4,
                flags: 3,
                log2_data_unit_size: 0,
                master_key_identifier: [0xab; 16],
            },
            vec![
                Protector::unnamed(ProtectorRecord::Passphrase {
                    params: Argon2Params {
                        m_cost_kib: 65536,
                        t_cost: 3,
                        p_cost: 1,
                    },
                    salt: [1; SALT_SIZE],
                    nonce: [2; NONCE_SIZE],
                    wrapped_key: [3; WRAPPED_KEY_SIZE],
                }),
                Protector::unnamed(ProtectorRecord::KeyFile {
                    salt: [4; SALT_SIZE],
                    nonce: [5; NONCE_SIZE],
                    wrapped_key: [6; WRAPPED_KEY_SIZE],
                }),
            ],
        )
    }

    fn recovery(n: u8) -> Protector {
        Protector::unnamed(ProtectorRecord::RecoveryKey {
            salt: [n; SALT_SIZE],
            nonce: [n; NONCE_SIZE],
            wrapped_key: [n; WRAPPED_KEY_SIZE],
        })
    }

    #[test]
    fn version_1_unless_something_new_is_used() {
        let c = sample();
        assert_eq!(c.version(), CONFIG_VERSION);
        assert_eq!(c.protectors[0].name, "passphrase");
        assert_eq!(c.protectors[1].name, "key-file");
        let text = String::from_utf8(c.to_json()).unwrap();
        assert!(
            text.contains("\"version\": 1,") && !text.contains("\"name\""),
            "{text}"
        );

        // Each new thing alone makes version 2, and round-trips.
        let mut named = sample();
        named.protectors[0].name = "laptop".into();
        let mut timed = sample();
        timed.protectors[1].created = Some(1_700_000_000);
        let mut two = sample();
        two.push(two.protectors[1].clone().tap_unnamed());
        assert_eq!(two.protectors[2].name, "key-file-2");
        let mut rec = sample();
        rec.push(recovery(7));
        assert_eq!(rec.protectors[2].name, "recovery-key");
        for c in [named, timed, two, rec] {
            assert_eq!(c.version(), CONFIG_VERSION_2);
            let bytes = c.to_json();
            let text = String::from_utf8(bytes.clone()).unwrap();
            assert!(
                text.contains("\"version\": 2,") && text.contains("\"name\""),
                "{text}"
            );
            assert_eq!(ConfigRecord::parse(&bytes).unwrap(), c);
        }
    }

    impl Protector {
        fn tap_unnamed(mut self) -> Protector {
            self.name.clear();
            self
        }
    }

    #[test]
    fn version_2_fields_are_refused_in_version_1_and_names_checked() {
        let mut c = sample();
        c.push(recovery(1));
        let v2 = String::from_utf8(c.to_json()).unwrap();
        let cases = [
            // A version-2 config declared as version 1.
            v2.replace("\"version\": 2,", "\"version\": 1,"),
            // A name missing, invalid or duplicated.
            v2.replace("\"name\": \"key-file\",", ""),
            v2.replace("\"name\": \"key-file\"", "\"name\": \"a b\""),
            v2.replace("\"name\": \"key-file\"", "\"name\": \"passphrase\""),
            v2.replace("\"name\": \"key-file\"", "\"name\": \"\""),
            v2.replace("\"version\": 2,", "\"version\": 3,"),
        ];
        for (i, case) in cases.iter().enumerate() {
            assert_ne!(case, &v2, "case {i} did not change the input");
            assert!(
                matches!(
                    ConfigRecord::parse(case.as_bytes()),
                    Err(ConfigError::Invalid(_))
                ),
                "case {i} parsed"
            );
        }
        assert!(check_name("laptop-2025.main_1").is_ok());
        for bad in ["", "-x", "a/b", "ä", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn utc_formatting() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(format_utc(1_700_000_000), "2023-11-14 22:13:20 UTC");
    }

    #[test]
    fn read_limited_refuses_what_is_not_a_regular_file() {
        let dir =
            std::env::temp_dir().join(format!("fscrypt-rs-config-reg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert!(matches!(
            read_limited(&fifo),
            Err(ConfigError::NotRegular(_))
        ));
        std::fs::write(dir.join("real"), b"x").unwrap();
        std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).unwrap();
        assert!(matches!(
            read_limited(&dir.join("link")),
            Err(ConfigError::NotRegular(_))
        ));
        assert!(matches!(
            read_limited(&dir),
            Err(ConfigError::NotRegular(_))
        ));
        assert_eq!(read_limited(&dir.join("real")).unwrap(), b"x");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn json_round_trip() {
        let c = sample();
        let bytes = c.to_json();
        assert_eq!(ConfigRecord::parse(&bytes).unwrap(), c);
        assert_eq!(
            c.policy.to_uapi_bytes()[..8],
            [2, 1, 4, 3, 0, 0, 0, 0],
            "uapi fscrypt_policy_v2 header"
        );
    }

    #[test]
    fn rejects_bad_configs() {
        let good = String::from_utf8(sample().to_json()).unwrap();
        let cases = [
            good.replace("\"fscrypt-rs vault\"", "\"other\""),
            good.replace("\"version\": 1,", "\"version\": 2,"),
            good.replace("argon2id", "scrypt"),
            good.replace("\"t_cost\": 3", "\"t_cost\": 0"),
            good.replace("\"m_cost_kib\": 65536", "\"m_cost_kib\": 4294967295"),
            // 4 GiB x 1000 passes: hours of work (the bound in time).
            good.replace("\"m_cost_kib\": 65536", "\"m_cost_kib\": 4194304")
                .replace("\"t_cost\": 3", "\"t_cost\": 1000"),
            good.replace("\"t_cost\": 3", "\"t_cost\": 513"),
            good.replace(&"ab".repeat(16), &"ab".repeat(15)),
            good.replace(&"06".repeat(80), &"0g".repeat(80)),
            good.replace("\"flags\": 3,", "\"flags\": 3, \"extra\": 1,"),
            good.replace("key_file", "smartcard"),
            "{}".to_owned(),
            "not json".to_owned(),
        ];
        for (i, case) in cases.iter().enumerate() {
            assert_ne!(case, &good, "case {i} did not change the input");
            assert!(
                matches!(
                    ConfigRecord::parse(case.as_bytes()),
                    Err(ConfigError::Invalid(_))
                ),
                "case {i} parsed"
            );
        }
        let mut none = sample();
        none.protectors.clear();
        assert!(ConfigRecord::parse(&none.to_json()).is_err());
    }

    #[test]
    fn read_refuses_fifos_symlinks_and_directories_at_once() {
        let dir =
            std::env::temp_dir().join(format!("fscrypt-rs-config-fifo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let regular = dir.join("regular");
        std::fs::write(&regular, b"{}").unwrap();
        let link = dir.join("link");
        std::os::unix::fs::symlink(&regular, &link).unwrap();
        // Without O_NONBLOCK the open of a FIFO with no writer blocks
        // forever; bound the test by running it on a thread.
        let (tx, rx) = std::sync::mpsc::channel();
        let paths = (fifo.clone(), link.clone(), dir.clone(), regular.clone());
        std::thread::spawn(move || {
            let results = [
                read_limited(&paths.0),
                read_limited(&paths.1),
                read_limited(&paths.2),
            ];
            let _ = tx.send((results, read_limited(&paths.3).ok()));
        });
        let ([fifo_r, link_r, dir_r], regular_r) = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("reading a FIFO config hangs");
        assert!(
            matches!(fifo_r, Err(ConfigError::NotRegular("a FIFO"))),
            "{fifo_r:?}"
        );
        assert!(
            matches!(link_r, Err(ConfigError::NotRegular("a symbolic link"))),
            "{link_r:?}"
        );
        assert!(
            matches!(dir_r, Err(ConfigError::NotRegular("a directory"))),
            "{dir_r:?}"
        );
        assert_eq!(regular_r.as_deref(), Some(&b"{}"[..]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn atomic_write_is_0600_and_never_overwrites() {
        let t = test_support::TempDir::new("config-test");
        let dir = t.path().to_path_buf();
        let path = dir.join(CONFIG_NAME);
        write_new_atomic(&dir, CONFIG_NAME, b"first").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(matches!(
            write_new_atomic(&dir, CONFIG_NAME, b"second"),
            Err(ConfigError::AlreadyExists)
        ));
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        // No temporary file left behind.
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from(CONFIG_NAME)]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
