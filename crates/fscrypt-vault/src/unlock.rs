//! Unlocking: a vault's config read and validated ([`Vault::open`]), then a
//! passphrase, key file or recovery key ([`Secret`]) turned into the master
//! key (config → protector → unwrapped key → identifier check against the
//! policy).
//!
//! A vault's master key is 64 random bytes; it is never stored in the clear.
//! Each protector (passphrase, key file or recovery key) wraps the same master key, and
//! after unwrapping, its v2 key identifier (spec §4.4) must equal the one in
//! the stored policy. Creating a vault is in [`crate::init`]; the file in
//! [`crate::config`]; the format in docs/vault-format.md, "Vault
//! configuration and protectors".

use std::io;
use std::path::{Path, PathBuf};

use fscrypt::{KeyIdentifier, MasterKey, Policy, PolicyFlags, PolicyV2};
use fscrypt_crypto::SecretBuf;

use crate::config::{
    self, CONFIG_NAME, ConfigError, ConfigRecord, PolicyRecord, Protector, ProtectorKind,
    ProtectorRecord,
};
use crate::cost::Argon2Params;
use crate::error::Error;
use crate::protector::{self, ProtectorError, RecoveryKey};
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

/// A secret given to unlock a vault.
#[derive(Clone, Copy, Debug)]
pub enum Secret<'a> {
    /// A passphrase, as typed (without its line end).
    Passphrase(&'a [u8]),
    /// The contents of a key file (32 or 64 bytes).
    KeyFile(&'a [u8]),
    /// A recovery key ([`RecoveryKey::parse`] of what the user typed).
    RecoveryKey(&'a RecoveryKey),
    /// The secret a sealed protector's device or identity released
    /// (`fscrypt-seal`); tried on protectors of `kind` (with `only`, the
    /// one whose record released it).
    Sealed {
        /// A sealed kind.
        kind: ProtectorKind,
        /// The released secret.
        secret: &'a [u8; protector::SEALED_SECRET_SIZE],
    },
}

impl Secret<'_> {
    /// The protector kind this secret opens.
    pub fn kind(&self) -> ProtectorKind {
        match self {
            Secret::Passphrase(_) => ProtectorKind::Passphrase,
            Secret::KeyFile(_) => ProtectorKind::KeyFile,
            Secret::RecoveryKey(_) => ProtectorKind::RecoveryKey,
            Secret::Sealed { kind, .. } => *kind,
        }
    }

    fn wrong(&self) -> Error {
        match self {
            Secret::Passphrase(_) => Error::WrongPassphrase,
            Secret::KeyFile(_) => Error::WrongKeyFile,
            Secret::RecoveryKey(_) => Error::WrongRecoveryKey,
            Secret::Sealed { kind, .. } => Error::WrongSealed(*kind),
        }
    }
}

/// An opened vault: its validated config.
#[derive(Debug)]
pub struct Vault {
    pub(crate) dir: PathBuf,
    /// The config file it was read from (and is committed to):
    /// `dir/`[`CONFIG_NAME`], or the file given with `--config`.
    pub(crate) config: PathBuf,
    pub(crate) record: ConfigRecord,
    pub(crate) policy: PolicyV2,
    /// The config bytes this was parsed from (a change is only committed
    /// over these same bytes, see [`crate::edit`]).
    pub(crate) bytes: Vec<u8>,
}

impl Vault {
    /// Path of the config file of the vault in `cipherdir` when it is kept
    /// there (the default; see [`Vault::open_with`] for one kept elsewhere).
    pub fn config_path(cipherdir: &Path) -> PathBuf {
        cipherdir.join(CONFIG_NAME)
    }

    /// Opens the vault in `cipherdir`: reads and validates its config,
    /// `cipherdir/`[`CONFIG_NAME`].
    ///
    /// # Errors
    /// As [`Vault::open_with`].
    pub fn open(cipherdir: &Path) -> Result<Vault, Error> {
        Self::open_with(cipherdir, None)
    }

    /// Opens the vault in `cipherdir` with its config read from `config`
    /// (a config kept outside the cipher directory, as `init --config`
    /// writes it), or, when `None`, from `cipherdir/`[`CONFIG_NAME`]. The
    /// config must be a regular file (a symbolic link in its place is
    /// refused); changes are committed to the same file.
    ///
    /// # Errors
    /// [`Error::ConfigElsewhere`] (no config in `cipherdir`, which holds a
    /// vault's root), [`Error::NotAVault`] (no config, no vault root),
    /// [`Error::ConfigNotFound`] (`config` does not exist),
    /// [`Error::BadConfig`], [`Error::BadStoredPolicy`], [`Error::Io`].
    pub fn open_with(cipherdir: &Path, config: Option<&Path>) -> Result<Vault, Error> {
        let path = match config {
            Some(c) => c.to_owned(),
            None => Self::config_path(cipherdir),
        };
        let bytes = match config::read_limited(&path) {
            Ok(b) => b,
            Err(ConfigError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                return Err(if config.is_some() {
                    Error::ConfigNotFound(path)
                } else if cipherdir
                    .join(crate::layout::DIR_META_NAME)
                    .symlink_metadata()
                    .is_ok()
                {
                    Error::ConfigElsewhere(cipherdir.to_owned())
                } else {
                    Error::NotAVault(cipherdir.to_owned())
                });
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
        let policy =
            policy_from_record(&record.policy).map_err(|source| Error::BadStoredPolicy {
                path: path.clone(),
                source,
            })?;
        Ok(Vault {
            dir: cipherdir.to_owned(),
            config: path,
            record,
            policy,
            bytes: bytes.to_vec(),
        })
    }

    /// The config file this vault was read from (and commits changes to).
    pub fn config_file(&self) -> &Path {
        &self.config
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

    /// The protectors, in config order, with their names.
    pub fn protectors(&self) -> &[Protector] {
        &self.record.protectors
    }

    /// The config format version this vault's config is written in (1 or 2).
    pub fn config_version(&self) -> u32 {
        self.record.version()
    }

    /// True if the vault has a protector of `kind`.
    pub fn has_kind(&self, kind: ProtectorKind) -> bool {
        self.record
            .protectors
            .iter()
            .any(|p| p.record.protector_kind() == kind)
    }

    /// True if the vault has a passphrase protector.
    pub fn has_passphrase(&self) -> bool {
        self.has_kind(ProtectorKind::Passphrase)
    }

    /// True if the vault has a key-file protector.
    pub fn has_key_file(&self) -> bool {
        self.has_kind(ProtectorKind::KeyFile)
    }

    /// True if the vault has a recovery-key protector.
    pub fn has_recovery_key(&self) -> bool {
        self.has_kind(ProtectorKind::RecoveryKey)
    }

    /// When `init` made the vault, in seconds since 1970-01-01 UTC, if the
    /// config records it.
    pub fn created(&self) -> Option<u64> {
        self.record
            .protectors
            .iter()
            .filter_map(|p| p.created)
            .min()
    }

    /// The Argon2id parameters of the first passphrase protector.
    pub fn argon2_params(&self) -> Option<Argon2Params> {
        self.record.protectors.iter().find_map(|p| match &p.record {
            ProtectorRecord::Passphrase { params, .. } => Some(*params),
            _ => None,
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

    /// Unwraps the master key with a recovery key.
    ///
    /// # Errors
    /// [`Error::NoSuchProtector`], [`Error::WrongRecoveryKey`],
    /// [`Error::IdentifierMismatch`].
    pub fn unlock_with_recovery_key(&self, key: &RecoveryKey) -> Result<MasterKey, Error> {
        let raw = self.unwrap_with(&Secret::RecoveryKey(key), None)?.0;
        self.master_key_from_bytes(&raw)
    }

    /// Like [`Vault::unlock_with_passphrase`], but returns the raw 64-byte
    /// master key (identifier already checked) in a [`SecretBuf`], e.g. to
    /// hand it to a mount daemon over a pipe.
    ///
    /// # Errors
    /// As [`Vault::unlock_with_passphrase`].
    pub fn unwrap_with_passphrase(&self, passphrase: &[u8]) -> Result<SecretBuf, Error> {
        Ok(self.unwrap_with(&Secret::Passphrase(passphrase), None)?.0)
    }

    /// Like [`Vault::unlock_with_key_file`], but returns the raw 64-byte
    /// master key (identifier already checked).
    ///
    /// # Errors
    /// As [`Vault::unlock_with_key_file`].
    pub fn unwrap_with_key_file(&self, key_file: &[u8]) -> Result<SecretBuf, Error> {
        Ok(self.unwrap_with(&Secret::KeyFile(key_file), None)?.0)
    }

    /// Like [`Vault::unlock_with_recovery_key`], but returns the raw
    /// 64-byte master key (identifier already checked).
    ///
    /// # Errors
    /// As [`Vault::unlock_with_recovery_key`].
    pub fn unwrap_with_recovery_key(&self, key: &RecoveryKey) -> Result<SecretBuf, Error> {
        Ok(self.unwrap_with(&Secret::RecoveryKey(key), None)?.0)
    }

    /// Unwraps the raw master key (identifier checked) with `secret`,
    /// trying each protector of its kind in config order, or only the
    /// protector named `only`. Returns the key and the index of the
    /// protector that opened it.
    ///
    /// # Errors
    /// [`Error::NoSuchProtector`] (no protector of that kind),
    /// [`Error::UnknownProtector`], [`Error::ProtectorKind`] (`only` names
    /// a protector of another kind), [`Error::WrongPassphrase`],
    /// [`Error::WrongKeyFile`], [`Error::WrongRecoveryKey`],
    /// [`Error::IdentifierMismatch`], [`Error::Protector`].
    pub fn unwrap_with(
        &self,
        secret: &Secret<'_>,
        only: Option<&str>,
    ) -> Result<(SecretBuf, usize), Error> {
        let kind = secret.kind();
        if let Some(name) = only {
            let i = self
                .record
                .find(name)
                .ok_or_else(|| Error::UnknownProtector(name.to_owned()))?;
            let found = self.record.protectors[i].record.protector_kind();
            if found != kind {
                return Err(Error::ProtectorKind {
                    name: name.to_owned(),
                    found,
                    given: kind,
                });
            }
        } else if !self.has_kind(kind) {
            return Err(Error::NoSuchProtector(match kind {
                ProtectorKind::Passphrase => "passphrase",
                ProtectorKind::KeyFile => "key file",
                ProtectorKind::RecoveryKey => "recovery key",
                other => other.label(),
            }));
        }
        if let Secret::KeyFile(k) = secret {
            protector::check_key_file_size(k.len())?;
        }
        let policy_bytes = self.record.policy.to_uapi_bytes();
        let ad = wrap::associated_data(kind.ad_byte(), &policy_bytes);
        for (i, p) in self.record.protectors.iter().enumerate() {
            if p.record.protector_kind() != kind || only.is_some_and(|n| n != p.name) {
                continue;
            }
            let (wrapping, nonce, wrapped_key) = match (&p.record, secret) {
                (
                    ProtectorRecord::Passphrase {
                        params,
                        salt,
                        nonce,
                        wrapped_key,
                    },
                    Secret::Passphrase(pass),
                ) => (
                    protector::passphrase_wrapping_key(params, pass, salt)?,
                    nonce,
                    wrapped_key,
                ),
                (
                    ProtectorRecord::KeyFile {
                        salt,
                        nonce,
                        wrapped_key,
                    },
                    Secret::KeyFile(key),
                ) => (
                    protector::key_file_wrapping_key(key, salt)?,
                    nonce,
                    wrapped_key,
                ),
                (
                    ProtectorRecord::RecoveryKey {
                        salt,
                        nonce,
                        wrapped_key,
                    },
                    Secret::RecoveryKey(key),
                ) => (
                    protector::recovery_key_wrapping_key(key, salt)?,
                    nonce,
                    wrapped_key,
                ),
                (
                    ProtectorRecord::Sealed {
                        salt,
                        nonce,
                        wrapped_key,
                        ..
                    },
                    Secret::Sealed { secret, .. },
                ) => (
                    protector::sealed_wrapping_key(secret, salt)?,
                    nonce,
                    wrapped_key,
                ),
                _ => continue,
            };
            match wrap::open(&wrapping, &ad, nonce, wrapped_key) {
                Ok(raw) => return Ok((self.checked(raw)?, i)),
                Err(ProtectorError::WrongSecret) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(secret.wrong())
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
