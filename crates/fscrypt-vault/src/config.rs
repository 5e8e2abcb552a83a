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
/// The only config `version` this code reads and writes.
pub const CONFIG_VERSION: u32 = 1;
/// Largest config file accepted, in bytes (a real one is under 2 KiB).
pub const MAX_CONFIG_SIZE: u64 = 64 * 1024;
/// Most protectors one config may hold.
pub const MAX_PROTECTORS: usize = 32;
/// Protector kind byte in the AEAD associated data: passphrase.
pub const KIND_PASSPHRASE: u8 = 1;
/// Protector kind byte in the AEAD associated data: key file.
pub const KIND_KEY_FILE: u8 = 2;

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

/// One protector as stored.
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
}

impl ProtectorRecord {
    /// The kind byte used in the associated data.
    pub fn kind(&self) -> u8 {
        match self {
            ProtectorRecord::Passphrase { .. } => KIND_PASSPHRASE,
            ProtectorRecord::KeyFile { .. } => KIND_KEY_FILE,
        }
    }
}

/// A parsed vault config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigRecord {
    /// The root policy.
    pub policy: PolicyRecord,
    /// The protectors, in file order (at least one).
    pub protectors: Vec<ProtectorRecord>,
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

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum ProtectorJson {
    Passphrase {
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

impl ConfigRecord {
    /// Parses a config file's bytes.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the offending field (bad JSON,
    /// unknown field, wrong format name or version, bad hex or length,
    /// unsupported KDF/AEAD, no protector or more than [`MAX_PROTECTORS`],
    /// Argon2 parameters out of range).
    pub fn parse(bytes: &[u8]) -> Result<ConfigRecord, ConfigError> {
        let json: ConfigJson =
            serde_json::from_slice(bytes).map_err(|e| invalid(format!("JSON: {e}")))?;
        expect("format", &json.format, FORMAT_NAME)?;
        if json.version != CONFIG_VERSION {
            return Err(invalid(format!(
                "version {} is not supported (this program reads version {CONFIG_VERSION})",
                json.version
            )));
        }
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
        let mut protectors = Vec::with_capacity(json.protectors.len());
        for p in &json.protectors {
            protectors.push(match p {
                ProtectorJson::Passphrase {
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
                    expect("kdf", kdf, KDF_ARGON2ID)?;
                    expect("aead", aead, AEAD_XCHACHA)?;
                    if *argon2_version != ARGON2_VERSION_13 {
                        return Err(invalid("argon2_version must be 19 (0x13)"));
                    }
                    let params = Argon2Params {
                        m_cost_kib: *m_cost_kib,
                        t_cost: *t_cost,
                        p_cost: *p_cost,
                    };
                    params.validate().map_err(|e| invalid(e.to_string()))?;
                    ProtectorRecord::Passphrase {
                        params,
                        salt: hex_array("salt", salt)?,
                        nonce: hex_array("nonce", nonce)?,
                        wrapped_key: hex_array("wrapped_key", wrapped_key)?,
                    }
                }
                ProtectorJson::KeyFile {
                    kdf,
                    salt,
                    aead,
                    nonce,
                    wrapped_key,
                } => {
                    expect("kdf", kdf, KDF_HKDF_SHA512)?;
                    expect("aead", aead, AEAD_XCHACHA)?;
                    ProtectorRecord::KeyFile {
                        salt: hex_array("salt", salt)?,
                        nonce: hex_array("nonce", nonce)?,
                        wrapped_key: hex_array("wrapped_key", wrapped_key)?,
                    }
                }
            });
        }
        Ok(ConfigRecord { policy, protectors })
    }

    /// Serializes to pretty-printed JSON with a trailing newline.
    pub fn to_json(&self) -> Vec<u8> {
        let p = &self.policy;
        let json = ConfigJson {
            format: FORMAT_NAME.to_owned(),
            version: CONFIG_VERSION,
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
                .map(|r| match r {
                    ProtectorRecord::Passphrase {
                        params,
                        salt,
                        nonce,
                        wrapped_key,
                    } => ProtectorJson::Passphrase {
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
                        kdf: KDF_HKDF_SHA512.to_owned(),
                        salt: hex::encode(salt),
                        aead: AEAD_XCHACHA.to_owned(),
                        nonce: hex::encode(nonce),
                        wrapped_key: hex::encode(wrapped_key),
                    },
                })
                .collect(),
        };
        // Serializing plain strings and integers cannot fail.
        let mut out = serde_json::to_vec_pretty(&json).unwrap_or_default();
        out.push(b'\n');
        out
    }
}

/// Reads a config file, refusing anything over [`MAX_CONFIG_SIZE`].
///
/// # Errors
/// [`ConfigError::Io`] (e.g. `NotFound`), [`ConfigError::TooLarge`].
pub fn read_limited(path: &Path) -> Result<Vec<u8>, ConfigError> {
    let file = File::open(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_SIZE + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_CONFIG_SIZE {
        return Err(ConfigError::TooLarge);
    }
    Ok(bytes)
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
        ConfigRecord {
            policy: PolicyRecord {
                contents_mode: 1,
                filenames_mode: 4,
                flags: 3,
                log2_data_unit_size: 0,
                master_key_identifier: [0xab; 16],
            },
            protectors: vec![
                ProtectorRecord::Passphrase {
                    params: Argon2Params {
                        m_cost_kib: 65536,
                        t_cost: 3,
                        p_cost: 1,
                    },
                    salt: [1; SALT_SIZE],
                    nonce: [2; NONCE_SIZE],
                    wrapped_key: [3; WRAPPED_KEY_SIZE],
                },
                ProtectorRecord::KeyFile {
                    salt: [4; SALT_SIZE],
                    nonce: [5; NONCE_SIZE],
                    wrapped_key: [6; WRAPPED_KEY_SIZE],
                },
            ],
        }
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
