//! The config file's JSON layout: (de)serialization between the bytes
//! on disk and [`ConfigRecord`], refusing anything malformed.

use serde::{Deserialize, Serialize};

use super::*;

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
    Tpm2(SealedJson),
    Pkcs11(SealedJson),
    Fido2(SealedJson),
    Age(SealedJson),
}

/// The fields of a sealed protector (version 3): a key file's, plus the
/// `sealed` object.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SealedJson {
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    created: Option<u64>,
    kdf: String,
    salt: String,
    aead: String,
    nonce: String,
    wrapped_key: String,
    sealed: serde_json::Value,
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

/// A sealed protector's record (version 3 only): the HKDF fields and a
/// `sealed` JSON object of at most [`MAX_SEALED_SIZE`] bytes.
fn sealed_record(
    kind: ProtectorKind,
    j: SealedJson,
    v3: bool,
) -> Result<(CommonJson, ProtectorRecord), ConfigError> {
    if !v3 {
        return Err(invalid(format!(
            "a {kind} protector needs config version {CONFIG_VERSION_3}"
        )));
    }
    let (salt, nonce, wrapped_key) =
        hkdf_fields(&j.kdf, &j.salt, &j.aead, &j.nonce, &j.wrapped_key)?;
    if !j.sealed.is_object() {
        return Err(invalid(format!(
            "{kind} protector: sealed must be an object"
        )));
    }
    if j.sealed.to_string().len() > MAX_SEALED_SIZE {
        return Err(invalid(format!(
            "{kind} protector: sealed is larger than {MAX_SEALED_SIZE} bytes"
        )));
    }
    Ok((
        CommonJson {
            name: j.name,
            created: j.created,
        },
        ProtectorRecord::Sealed {
            kind,
            sealed: j.sealed,
            salt,
            nonce,
            wrapped_key,
        },
    ))
}

impl ConfigRecord {
    /// Parses a config file's bytes (version 1, 2 or 3).
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
            CONFIG_VERSION_2 | CONFIG_VERSION_3 => true,
            other => {
                return Err(invalid(format!(
                    "version {other} is not supported (this program reads versions {CONFIG_VERSION} to {CONFIG_VERSION_3}); use a newer fscrypt-rs"
                )));
            }
        };
        let v3 = json.version == CONFIG_VERSION_3;
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
                ProtectorJson::Tpm2(j) => sealed_record(ProtectorKind::Tpm2, j, v3)?,
                ProtectorJson::Pkcs11(j) => sealed_record(ProtectorKind::Pkcs11, j, v3)?,
                ProtectorJson::Fido2(j) => sealed_record(ProtectorKind::Fido2, j, v3)?,
                ProtectorJson::Age(j) => sealed_record(ProtectorKind::Age, j, v3)?,
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
        let v2 = version != CONFIG_VERSION;
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
                        ProtectorRecord::Sealed {
                            kind,
                            sealed,
                            salt,
                            nonce,
                            wrapped_key,
                        } => {
                            let j = SealedJson {
                                name,
                                created,
                                kdf: KDF_HKDF_SHA512.to_owned(),
                                salt: hex::encode(salt),
                                aead: AEAD_XCHACHA.to_owned(),
                                nonce: hex::encode(nonce),
                                wrapped_key: hex::encode(wrapped_key),
                                sealed: sealed.clone(),
                            };
                            // Only sealed kinds are ever stored in
                            // ProtectorRecord::Sealed (parse and
                            // wrap_master make them).
                            match kind {
                                ProtectorKind::Pkcs11 => ProtectorJson::Pkcs11(j),
                                ProtectorKind::Fido2 => ProtectorJson::Fido2(j),
                                ProtectorKind::Age => ProtectorJson::Age(j),
                                _ => ProtectorJson::Tpm2(j),
                            }
                        }
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
