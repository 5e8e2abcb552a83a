//! Unlocking: a vault's config read and validated ([`Vault::open`]), then a
//! passphrase or key file turned into the master key (config → protector →
//! unwrapped key → identifier check against the policy).
//!
//! A vault's master key is 64 random bytes; it is never stored in the clear.
//! Each protector (passphrase or key file) wraps the same master key, and
//! after unwrapping, its v2 key identifier (spec §4.4) must equal the one in
//! the stored policy. Creating a vault is in [`crate::init`]; the file in
//! [`crate::config`]; the format in docs/vault-format.md, "Vault
//! configuration and protectors".

use std::io;
use std::path::{Path, PathBuf};

use fscrypt::{KeyIdentifier, MasterKey, Policy, PolicyFlags, PolicyV2};
use fscrypt_crypto::SecretBuf;

use crate::config::{self, CONFIG_NAME, ConfigError, ConfigRecord, PolicyRecord, ProtectorRecord};
use crate::cost::Argon2Params;
use crate::error::Error;
use crate::protector::{self, ProtectorError};
use crate::wrap;

/// Block size in bytes the filesystem reports; data units may not be larger
/// (spec §3.3), so a vault allows data unit sizes 512..=4096.
pub const FS_BLOCK_SIZE: u32 = 4096;

/// Parses and validates a stored policy record (spec §3.4) and checks the
/// constraints of a vault: no IV_INO_LBLK flags, data units no larger than
/// the filesystem's block size.
pub(crate) fn policy_from_record(record: &PolicyRecord) -> Result<PolicyV2, fscrypt::PolicyError> {
    let policy = Policy::parse(&record.to_uapi_bytes())?;
    policy.validate_for_block_size(FS_BLOCK_SIZE)?;
    match policy {
        Policy::V2(p) => Ok(p),
        // to_uapi_bytes always writes version 2.
        Policy::V1(_) => Err(fscrypt::PolicyError::UnknownVersion(0)),
    }
}

/// An opened vault: its validated config.
#[derive(Debug)]
pub struct Vault {
    pub(crate) dir: PathBuf,
    pub(crate) record: ConfigRecord,
    pub(crate) policy: PolicyV2,
}

impl Vault {
    /// Path of the config file of the vault in `cipherdir`.
    pub fn config_path(cipherdir: &Path) -> PathBuf {
        cipherdir.join(CONFIG_NAME)
    }

    /// Opens the vault in `cipherdir`: reads and validates its config.
    ///
    /// # Errors
    /// [`Error::NotAVault`] if there is no config, [`Error::BadConfig`],
    /// [`Error::BadStoredPolicy`], [`Error::Io`].
    pub fn open(cipherdir: &Path) -> Result<Vault, Error> {
        let path = Self::config_path(cipherdir);
        let bytes = match config::read_limited(&path) {
            Ok(b) => b,
            Err(ConfigError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                return Err(Error::NotAVault(cipherdir.to_owned()));
            }
            Err(ConfigError::Io(source)) => return Err(Error::Io { path, source }),
            Err(source) => return Err(Error::BadConfig { path, source }),
        };
        Self::from_config_bytes(cipherdir, path, &bytes)
    }

    /// Validates config bytes read from `path` (see [`Vault::open`]).
    pub(crate) fn from_config_bytes(
        cipherdir: &Path,
        path: PathBuf,
        bytes: &[u8],
    ) -> Result<Vault, Error> {
        let record = ConfigRecord::parse(bytes).map_err(|source| Error::BadConfig {
            path: path.clone(),
            source,
        })?;
        if record.policy.flags & (PolicyFlags::IV_INO_LBLK_64.0 | PolicyFlags::IV_INO_LBLK_32.0)
            != 0
        {
            return Err(Error::InodeNumberFlags);
        }
        let policy = policy_from_record(&record.policy)
            .map_err(|source| Error::BadStoredPolicy { path, source })?;
        Ok(Vault {
            dir: cipherdir.to_owned(),
            record,
            policy,
        })
    }

    /// The cipher directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The root policy (spec §3.1); its identifier names the master key.
    pub fn policy(&self) -> &PolicyV2 {
        &self.policy
    }

    /// The master key identifier of the vault (spec §4.4).
    pub fn key_identifier(&self) -> KeyIdentifier {
        self.policy.master_key_identifier
    }

    /// True if the vault has a passphrase protector.
    pub fn has_passphrase(&self) -> bool {
        self.record
            .protectors
            .iter()
            .any(|p| p.kind() == config::KIND_PASSPHRASE)
    }

    /// True if the vault has a key-file protector.
    pub fn has_key_file(&self) -> bool {
        self.record
            .protectors
            .iter()
            .any(|p| p.kind() == config::KIND_KEY_FILE)
    }

    /// The protectors as stored, in config order.
    pub fn protectors(&self) -> &[ProtectorRecord] {
        &self.record.protectors
    }

    /// When `init` made the vault, in seconds since 1970-01-01 UTC, if the
    /// config records it.
    pub fn created(&self) -> Option<u64> {
        self.record.created
    }

    /// The Argon2id parameters of the first passphrase protector.
    pub fn argon2_params(&self) -> Option<Argon2Params> {
        self.record.protectors.iter().find_map(|p| match p {
            ProtectorRecord::Passphrase { params, .. } => Some(*params),
            ProtectorRecord::KeyFile { .. } => None,
        })
    }

    /// Unwraps the master key with a passphrase: tries each passphrase
    /// protector once (one Argon2id derivation each).
    ///
    /// # Errors
    /// [`Error::NoSuchProtector`], [`Error::WrongPassphrase`] (AEAD
    /// failure), [`Error::IdentifierMismatch`], [`Error::Protector`].
    pub fn unlock_with_passphrase(&self, passphrase: &[u8]) -> Result<MasterKey, Error> {
        let raw = self.unwrap_with_passphrase(passphrase)?;
        self.master_key_from_bytes(&raw)
    }

    /// Unwraps the master key with the contents of a key file (32 or 64
    /// bytes).
    ///
    /// # Errors
    /// [`Error::NoSuchProtector`], [`Error::Protector`] (bad key file
    /// size), [`Error::WrongKeyFile`] (AEAD failure),
    /// [`Error::IdentifierMismatch`].
    pub fn unlock_with_key_file(&self, key_file: &[u8]) -> Result<MasterKey, Error> {
        let raw = self.unwrap_with_key_file(key_file)?;
        self.master_key_from_bytes(&raw)
    }

    /// Like [`Vault::unlock_with_passphrase`], but returns the raw 64-byte
    /// master key (identifier already checked) in a [`SecretBuf`], e.g. to
    /// hand it to a mount daemon over a pipe.
    ///
    /// # Errors
    /// As [`Vault::unlock_with_passphrase`].
    pub fn unwrap_with_passphrase(&self, passphrase: &[u8]) -> Result<SecretBuf, Error> {
        if !self.has_passphrase() {
            return Err(Error::NoSuchProtector("passphrase"));
        }
        let policy_bytes = self.record.policy.to_uapi_bytes();
        let ad = wrap::associated_data(config::KIND_PASSPHRASE, &policy_bytes);
        for p in &self.record.protectors {
            if let ProtectorRecord::Passphrase {
                params,
                salt,
                nonce,
                wrapped_key,
            } = p
            {
                let wrapping = protector::passphrase_wrapping_key(params, passphrase, salt)?;
                match wrap::open(&wrapping, &ad, nonce, wrapped_key) {
                    Ok(raw) => return self.checked(raw),
                    Err(ProtectorError::WrongSecret) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Err(Error::WrongPassphrase)
    }

    /// Like [`Vault::unlock_with_key_file`], but returns the raw 64-byte
    /// master key (identifier already checked).
    ///
    /// # Errors
    /// As [`Vault::unlock_with_key_file`].
    pub fn unwrap_with_key_file(&self, key_file: &[u8]) -> Result<SecretBuf, Error> {
        if !self.has_key_file() {
            return Err(Error::NoSuchProtector("key file"));
        }
        protector::check_key_file_size(key_file.len())?;
        let policy_bytes = self.record.policy.to_uapi_bytes();
        let ad = wrap::associated_data(config::KIND_KEY_FILE, &policy_bytes);
        for p in &self.record.protectors {
            if let ProtectorRecord::KeyFile {
                salt,
                nonce,
                wrapped_key,
            } = p
            {
                let wrapping = protector::key_file_wrapping_key(key_file, salt)?;
                match wrap::open(&wrapping, &ad, nonce, wrapped_key) {
                    Ok(raw) => return self.checked(raw),
                    Err(ProtectorError::WrongSecret) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Err(Error::WrongKeyFile)
    }

    fn checked(&self, raw: SecretBuf) -> Result<SecretBuf, Error> {
        self.master_key_from_bytes(&raw)?;
        Ok(raw)
    }

    /// Builds a [`MasterKey`] from raw bytes and checks that its identifier
    /// (spec §4.4) is this vault's.
    ///
    /// # Errors
    /// [`Error::MasterKey`] (bad length), [`Error::IdentifierMismatch`].
    pub fn master_key_from_bytes(&self, raw: &[u8]) -> Result<MasterKey, Error> {
        let master = MasterKey::new(raw).map_err(Error::MasterKey)?;
        let found = master.identifier();
        let expected = self.key_identifier();
        if found != expected {
            return Err(Error::IdentifierMismatch { expected, found });
        }
        Ok(master)
    }
}
