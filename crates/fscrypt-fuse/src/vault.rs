//! Vaults: a cipher directory plus the config that holds its root policy and
//! its wrapped master key.
//!
//! Owns `fscrypt-rs init` semantics and unlocking. The filesystem (how
//! entries are stored, [`crate::create_root`], [`crate::mount`]) is elsewhere
//! in this crate; the key-wrapping cryptography is in [`protector`], the
//! file layout and atomic write in [`config`]. The format is documented in
//! docs/vault-format.md, "Vault configuration and protectors".
//!
//! A vault's master key is 64 random bytes; it is never stored in the clear.
//! Each protector (passphrase or key file) wraps the same master key, and
//! after unwrapping, its v2 key identifier (spec §4.4) must equal the one in
//! the stored policy.

pub mod config;
pub mod protector;

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fscrypt::{EncryptionMode, KeyIdentifier, MasterKey, Policy, PolicyFlags, PolicyV2};
use fscrypt_crypto::SecretBuf;

pub use config::CONFIG_NAME;
use config::{ConfigError, ConfigRecord, PolicyRecord, ProtectorRecord};
pub use protector::{Argon2Params, ProtectorError};
use protector::{MASTER_KEY_SIZE, SALT_SIZE};

/// Block size in bytes the filesystem reports; data units may not be larger
/// (spec §3.3), so a vault allows data unit sizes 512..=4096.
pub const FS_BLOCK_SIZE: u32 = 4096;

/// Time the passphrase KDF is tuned to take at `init` on this machine.
pub const ARGON2_TARGET: Duration = Duration::from_secs(1);

/// Errors of vault creation and unlocking.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The passphrase does not open any passphrase protector (AEAD
    /// authentication failed for each).
    #[error("wrong passphrase")]
    WrongPassphrase,
    /// The key file does not open any key-file protector.
    #[error("wrong key file")]
    WrongKeyFile,
    /// The vault has no protector of the requested kind.
    #[error("this vault has no {0} protector")]
    NoSuchProtector(&'static str),
    /// `init` was given neither a passphrase nor a key file.
    #[error("a vault needs a passphrase or a key file")]
    NoProtector,
    /// IV_INO_LBLK_64/32 were requested.
    #[error(
        "IV_INO_LBLK_64/32 are refused: they put inode numbers into the IVs, and the inode numbers of a backing directory are not stable (copying, syncing or restoring it changes them)"
    )]
    InodeNumberFlags,
    /// The requested policy is invalid (mode pair, flags, data unit size).
    #[error("invalid policy: {0}")]
    Policy(fscrypt::PolicyError),
    /// Padding other than 4, 8, 16 or 32.
    #[error("filename padding must be 4, 8, 16 or 32 bytes, not {0}")]
    Padding(usize),
    /// The cipher directory already holds a vault config.
    #[error("{0} is already a vault: refusing to overwrite its config")]
    AlreadyInitialized(PathBuf),
    /// The cipher directory is not empty.
    #[error("{0} is not empty: a new vault needs an empty directory")]
    NotEmpty(PathBuf),
    /// The cipher directory has no vault config.
    #[error("{0} is not a vault: {CONFIG_NAME} not found")]
    NotAVault(PathBuf),
    /// The config exists but is invalid.
    #[error("{path}: {source}")]
    BadConfig {
        /// The config file.
        path: PathBuf,
        /// What is wrong with it.
        source: ConfigError,
    },
    /// The stored policy is not a valid v2 policy.
    #[error("{path}: the stored policy is invalid: {source}")]
    BadStoredPolicy {
        /// The config file.
        path: PathBuf,
        /// Why the policy is invalid.
        source: fscrypt::PolicyError,
    },
    /// An unwrapped master key has another identifier than the policy: the
    /// config was tampered with or corrupted.
    #[error(
        "the unwrapped master key has identifier {found}, but the policy names {expected}: the config is corrupt"
    )]
    IdentifierMismatch {
        /// Identifier in the policy.
        expected: KeyIdentifier,
        /// Identifier of the unwrapped key.
        found: KeyIdentifier,
    },
    /// The unwrapped key was refused by the format layer.
    #[error("master key: {0}")]
    MasterKey(fscrypt::KeyError),
    /// A protector-layer failure other than a wrong secret.
    #[error(transparent)]
    Protector(#[from] ProtectorError),
    /// Creating the root directory of the filesystem failed.
    #[error("creating the filesystem root: {0}")]
    CreateRoot(Box<crate::Error>),
    /// An I/O error on `path`.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

impl Error {
    /// True for the errors that mean "the secret the user gave is wrong"
    /// (the CLI exits with a distinct code for them).
    pub fn is_wrong_secret(&self) -> bool {
        matches!(self, Error::WrongPassphrase | Error::WrongKeyFile)
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

/// How `init` chooses Argon2id parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Argon2Choice {
    /// Measure this machine; aim for this duration per derivation.
    Tune(Duration),
    /// Use these parameters (tests; see [`protector::ARGON2_ENV`]).
    Fixed(Argon2Params),
}

/// Options of [`Vault::init`].
pub struct InitOptions {
    /// Contents encryption mode (default AES-256-XTS).
    pub contents_mode: EncryptionMode,
    /// Filenames encryption mode (default AES-256-CTS).
    pub filenames_mode: EncryptionMode,
    /// Filename padding in bytes: 4, 8, 16 or 32 (default 32).
    pub padding: usize,
    /// log2 of the data unit size in bytes; 0 = the filesystem block size
    /// (default 0).
    pub log2_data_unit_size: u8,
    /// Set FSCRYPT_POLICY_FLAG_DIRECT_KEY (Adiantum only).
    pub direct_key: bool,
    /// Requested FSCRYPT_POLICY_FLAG_IV_INO_LBLK_64: always refused.
    pub iv_ino_lblk_64: bool,
    /// Requested FSCRYPT_POLICY_FLAG_IV_INO_LBLK_32: always refused.
    pub iv_ino_lblk_32: bool,
    /// Passphrase for a passphrase protector.
    pub passphrase: Option<SecretBuf>,
    /// Contents of a key file (32 or 64 bytes) for a key-file protector.
    pub key_file: Option<SecretBuf>,
    /// Argon2id parameter choice (default: tune to [`ARGON2_TARGET`], or
    /// the [`protector::ARGON2_ENV`] override).
    pub argon2: Argon2Choice,
}

impl Default for InitOptions {
    fn default() -> Self {
        InitOptions {
            contents_mode: EncryptionMode::AES_256_XTS,
            filenames_mode: EncryptionMode::AES_256_CTS,
            padding: 32,
            log2_data_unit_size: 0,
            direct_key: false,
            iv_ino_lblk_64: false,
            iv_ino_lblk_32: false,
            passphrase: None,
            key_file: None,
            argon2: Argon2Choice::Tune(ARGON2_TARGET),
        }
    }
}

impl InitOptions {
    /// Builds and validates the root policy these options ask for, with
    /// the given master key identifier.
    ///
    /// # Errors
    /// [`Error::InodeNumberFlags`], [`Error::Padding`], [`Error::Policy`].
    pub fn policy(&self, identifier: KeyIdentifier) -> Result<PolicyV2, Error> {
        if self.iv_ino_lblk_64 || self.iv_ino_lblk_32 {
            return Err(Error::InodeNumberFlags);
        }
        let mut flags = PolicyFlags(0)
            .with_padding(self.padding)
            .ok_or(Error::Padding(self.padding))?;
        if self.direct_key {
            flags = flags | PolicyFlags::DIRECT_KEY;
        }
        let record = PolicyRecord {
            contents_mode: self.contents_mode.0,
            filenames_mode: self.filenames_mode.0,
            flags: flags.bits(),
            log2_data_unit_size: self.log2_data_unit_size,
            master_key_identifier: identifier.0,
        };
        policy_from_record(&record).map_err(Error::Policy)
    }
}

/// Parses and validates a stored policy record (spec §3.4) and checks the
/// constraints of a vault: no IV_INO_LBLK flags, data units no larger than
/// the filesystem's block size.
fn policy_from_record(record: &PolicyRecord) -> Result<PolicyV2, fscrypt::PolicyError> {
    let policy = Policy::parse(&record.to_uapi_bytes())?;
    policy.validate_for_block_size(FS_BLOCK_SIZE)?;
    match policy {
        Policy::V2(p) => Ok(p),
        // to_uapi_bytes always writes version 2.
        Policy::V1(_) => Err(fscrypt::PolicyError::UnknownVersion(0)),
    }
}

/// What [`Vault::init`] did.
#[derive(Debug)]
pub struct InitReport {
    /// Identifier of the new master key (spec §4.4).
    pub key_identifier: KeyIdentifier,
    /// The root policy written.
    pub policy: PolicyV2,
    /// Argon2id parameters and the measured time of one derivation with
    /// them, when a passphrase protector was made.
    pub argon2: Option<(Argon2Params, Duration)>,
}

/// An opened vault: its validated config.
#[derive(Debug)]
pub struct Vault {
    dir: PathBuf,
    record: ConfigRecord,
    policy: PolicyV2,
}

impl Vault {
    /// Path of the config file of the vault in `cipherdir`.
    pub fn config_path(cipherdir: &Path) -> PathBuf {
        cipherdir.join(CONFIG_NAME)
    }

    /// Creates a vault in the empty directory `cipherdir`: draws a 64-byte
    /// master key, builds the root policy, wraps the key with each
    /// requested protector, creates the filesystem root
    /// ([`crate::create_root`]) and writes the config atomically (mode
    /// 0600, never over an existing one; the config is the commit point:
    /// if anything fails, entries this call made are removed again).
    ///
    /// # Errors
    /// [`Error::NoProtector`], policy errors ([`InitOptions::policy`]),
    /// [`Error::AlreadyInitialized`], [`Error::NotEmpty`],
    /// [`Error::Protector`] (key file size, empty passphrase, RNG),
    /// [`Error::CreateRoot`], [`Error::Io`].
    pub fn init(cipherdir: &Path, opts: &InitOptions) -> Result<InitReport, Error> {
        if opts.passphrase.is_none() && opts.key_file.is_none() {
            return Err(Error::NoProtector);
        }
        // Validate everything the user chose before any expensive work.
        opts.policy(KeyIdentifier::default())?;
        if let Some(key_file) = &opts.key_file {
            protector::check_key_file_size(key_file.len())?;
        }
        if opts.passphrase.as_ref().is_some_and(|p| p.is_empty()) {
            return Err(ProtectorError::EmptyPassphrase.into());
        }
        if Self::config_path(cipherdir).symlink_metadata().is_ok() {
            return Err(Error::AlreadyInitialized(cipherdir.to_owned()));
        }
        let mut entries = std::fs::read_dir(cipherdir).map_err(io_err(cipherdir))?;
        if entries.next().is_some() {
            return Err(Error::NotEmpty(cipherdir.to_owned()));
        }

        let mut raw_key = SecretBuf::new(MASTER_KEY_SIZE);
        protector::random_bytes(&mut raw_key)?;
        let master = MasterKey::new(&raw_key).map_err(Error::MasterKey)?;
        let raw_key: &[u8; MASTER_KEY_SIZE] = (*raw_key).try_into().expect("64-byte key");
        let identifier = master.identifier();
        let policy = opts.policy(identifier)?;
        let policy_record = record_from_policy(&policy);
        let policy_bytes = policy_record.to_uapi_bytes();

        let mut protectors = Vec::new();
        let mut argon2_report = None;
        if let Some(pass) = &opts.passphrase {
            let params = match opts.argon2 {
                Argon2Choice::Fixed(p) => p,
                Argon2Choice::Tune(target) => match Argon2Params::from_env()? {
                    Some(p) => p,
                    None => Argon2Params::tune(target)?.0,
                },
            };
            let mut salt = [0u8; SALT_SIZE];
            protector::random_bytes(&mut salt)?;
            let start = Instant::now();
            let wrapping = protector::passphrase_wrapping_key(&params, pass, &salt)?;
            argon2_report = Some((params, start.elapsed()));
            let ad = protector::associated_data(config::KIND_PASSPHRASE, &policy_bytes);
            let (nonce, wrapped_key) = protector::seal(&wrapping, &ad, raw_key)?;
            protectors.push(ProtectorRecord::Passphrase {
                params,
                salt,
                nonce,
                wrapped_key,
            });
        }
        if let Some(key_file) = &opts.key_file {
            let mut salt = [0u8; SALT_SIZE];
            protector::random_bytes(&mut salt)?;
            let wrapping = protector::key_file_wrapping_key(key_file, &salt)?;
            let ad = protector::associated_data(config::KIND_KEY_FILE, &policy_bytes);
            let (nonce, wrapped_key) = protector::seal(&wrapping, &ad, raw_key)?;
            protectors.push(ProtectorRecord::KeyFile {
                salt,
                nonce,
                wrapped_key,
            });
        }
        let record = ConfigRecord {
            policy: policy_record,
            protectors,
        };

        let result = crate::create_root(cipherdir, &policy)
            .map_err(|e| Error::CreateRoot(Box::new(e)))
            .and_then(|()| {
                config::write_new_atomic(cipherdir, CONFIG_NAME, &record.to_json()).map_err(|e| {
                    match e {
                        ConfigError::AlreadyExists => {
                            Error::AlreadyInitialized(cipherdir.to_owned())
                        }
                        ConfigError::Io(source) => Error::Io {
                            path: Self::config_path(cipherdir),
                            source,
                        },
                        other => Error::BadConfig {
                            path: Self::config_path(cipherdir),
                            source: other,
                        },
                    }
                })
            });
        if let Err(e) = result {
            if !matches!(e, Error::AlreadyInitialized(_)) {
                remove_new_entries(cipherdir);
            }
            return Err(e);
        }
        Ok(InitReport {
            key_identifier: identifier,
            policy,
            argon2: argon2_report,
        })
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
    fn from_config_bytes(cipherdir: &Path, path: PathBuf, bytes: &[u8]) -> Result<Vault, Error> {
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
        let ad = protector::associated_data(config::KIND_PASSPHRASE, &policy_bytes);
        for p in &self.record.protectors {
            if let ProtectorRecord::Passphrase {
                params,
                salt,
                nonce,
                wrapped_key,
            } = p
            {
                let wrapping = protector::passphrase_wrapping_key(params, passphrase, salt)?;
                match protector::open(&wrapping, &ad, nonce, wrapped_key) {
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
        let ad = protector::associated_data(config::KIND_KEY_FILE, &policy_bytes);
        for p in &self.record.protectors {
            if let ProtectorRecord::KeyFile {
                salt,
                nonce,
                wrapped_key,
            } = p
            {
                let wrapping = protector::key_file_wrapping_key(key_file, salt)?;
                match protector::open(&wrapping, &ad, nonce, wrapped_key) {
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

fn record_from_policy(p: &PolicyV2) -> PolicyRecord {
    PolicyRecord {
        contents_mode: p.contents_mode.0,
        filenames_mode: p.filenames_mode.0,
        flags: p.flags.bits(),
        log2_data_unit_size: p.log2_data_unit_size,
        master_key_identifier: p.master_key_identifier.0,
    }
}

/// After a failed `init` in a directory that was empty: removes what the
/// call created (best effort, errors ignored: the original error is the
/// one to report).
fn remove_new_entries(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            let _ = if entry.file_type().is_ok_and(|t| t.is_dir()) {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
    }
}

#[cfg(test)]
mod tests;
