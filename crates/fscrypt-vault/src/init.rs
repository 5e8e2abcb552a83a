//! Creating a vault ([`Vault::init`]): a fresh 64-byte master key, the root
//! policy, one wrapped copy of the key per protector, the filesystem root
//! ([`crate::create_root`]), then the config, written last as the commit
//! point.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fscrypt::{EncryptionMode, KeyIdentifier, MasterKey, PolicyFlags, PolicyV2};
use fscrypt_crypto::SecretBuf;

use crate::config::{
    self, CONFIG_NAME, ConfigError, ConfigRecord, PolicyRecord, Protector, ProtectorRecord,
};
use crate::cost::{ARGON2_TARGET, Argon2Params};
use crate::error::{Error, io_err};
use crate::protector::{self, MASTER_KEY_SIZE, ProtectorError, RecoveryKey, SALT_SIZE};
use crate::unlock::{Vault, policy_from_record};
use crate::wrap;

/// How `init` chooses Argon2id parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Argon2Choice {
    /// Calibrate on this machine ([`Argon2Params::calibrate`]); aim for
    /// this duration per derivation.
    Tune(Duration),
    /// Use these parameters (tests; see [`crate::cost::ARGON2_ENV`]).
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
    /// Argon2id parameter choice (default: calibrate to [`ARGON2_TARGET`], or
    /// the [`crate::cost::ARGON2_ENV`] override).
    pub argon2: Argon2Choice,
    /// Also make a recovery-key protector; the key is returned once in
    /// [`InitReport::recovery_key`]. This makes a version-2 config (with
    /// protector names and creation times); without it (the default) the
    /// config is version 1.
    pub recovery_key: bool,
    /// The data format of the new vault's files (`docs/vault-format.md`
    /// §4a): [`crate::layout::Format::LATEST`] by default; format 2 for
    /// `fscrypt-rs init --no-integrity` (no tags, records or bindings:
    /// nothing is authenticated).
    pub format: crate::layout::Format,
    /// Sealed protectors to make (TPM2, PKCS#11, FIDO2, age; sealed by
    /// the caller with the `fscrypt-seal` crate). They make a version-3
    /// config.
    pub sealed: Vec<SealedInit>,
}

/// A sealed protector for [`InitOptions::sealed`]: the record the
/// `fscrypt-seal` crate made and the secret it releases.
#[derive(Debug)]
pub struct SealedInit {
    /// A sealed kind ([`crate::config::ProtectorKind::is_sealed`]).
    pub kind: crate::config::ProtectorKind,
    /// The sealed record (a JSON object, public data).
    pub sealed: serde_json::Value,
    /// The secret the record releases.
    pub secret: SecretBuf,
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
            recovery_key: false,
            format: crate::layout::Format::LATEST,
            sealed: Vec::new(),
        }
    }
}

impl InitOptions {
    /// Checks everything the user chose, before any expensive work: a
    /// protector given, the root policy, the key file's size, a non-empty
    /// passphrase.
    ///
    /// # Errors
    /// [`Error::NoProtector`], the errors of [`InitOptions::policy`], and
    /// the protector's (key file size, empty passphrase).
    pub fn check(&self) -> Result<(), Error> {
        if self.passphrase.is_none() && self.key_file.is_none() && self.sealed.is_empty() {
            return Err(Error::NoProtector);
        }
        for s in &self.sealed {
            if !s.kind.is_sealed()
                || !s.sealed.is_object()
                || s.secret.len() != protector::SEALED_SECRET_SIZE
            {
                return Err(Error::BadSealed(s.kind));
            }
        }
        self.policy(KeyIdentifier::default())?;
        if let Some(key_file) = &self.key_file {
            protector::check_key_file_size(key_file.len())?;
        }
        if self.passphrase.as_ref().is_some_and(|p| p.is_empty()) {
            return Err(ProtectorError::EmptyPassphrase.into());
        }
        Ok(())
    }

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
    /// The recovery key, when [`InitOptions::recovery_key`] asked for one:
    /// show it to the user once; it is not stored anywhere.
    pub recovery_key: Option<RecoveryKey>,
}

/// Where [`Vault::init_with`] writes the config, as
/// [`Vault::init_target`] checked it.
struct InitTarget {
    config_path: PathBuf,
    config_dir: PathBuf,
    config_name: std::ffi::OsString,
    external: bool,
}

impl Vault {
    /// Checks that a vault can be created in `cipherdir` (with its config
    /// at `config`, or in `cipherdir` when `None`) without drawing a key or
    /// asking for a secret: what [`Vault::init_with`] checks first. A
    /// command calls it before it asks for a passphrase or calibrates
    /// Argon2id, so that a directory that cannot hold a new vault is
    /// refused at once (issue 26 item 5). Nothing is created.
    ///
    /// # Errors
    /// [`Error::AlreadyInitialized`], [`Error::ConfigExists`],
    /// [`Error::ConfigInside`], [`Error::NotEmpty`], [`Error::BadConfig`]
    /// (a config path without a file name), [`Error::Io`] (`cipherdir` or
    /// the config's directory is missing or unreadable).
    pub fn check_init_target(cipherdir: &Path, config: Option<&Path>) -> Result<(), Error> {
        Self::init_target(cipherdir, config).map(|_| ())
    }

    /// [`Vault::check_init_target`], returning where the config goes.
    fn init_target(cipherdir: &Path, config: Option<&Path>) -> Result<InitTarget, Error> {
        let default_path = Self::config_path(cipherdir);
        let config_path = match config {
            None => default_path.clone(),
            Some(c) => c.to_owned(),
        };
        let external = config_path != default_path;
        if default_path.symlink_metadata().is_ok() {
            return Err(Error::AlreadyInitialized(cipherdir.to_owned()));
        }
        let (config_dir, config_name) =
            config::dir_and_name(&config_path).map_err(|e| Error::config(&config_path, e))?;
        let external = external && {
            let canon_dir = std::fs::canonicalize(config_dir).map_err(io_err(config_dir))?;
            let canon_cipher = std::fs::canonicalize(cipherdir).map_err(io_err(cipherdir))?;
            if canon_dir == canon_cipher && config_name == CONFIG_NAME {
                false
            } else if canon_dir.starts_with(&canon_cipher) {
                return Err(Error::ConfigInside(config_path.clone()));
            } else {
                true
            }
        };
        if external && config_path.symlink_metadata().is_ok() {
            return Err(Error::ConfigExists(config_path.clone()));
        }
        let mut entries = std::fs::read_dir(cipherdir).map_err(io_err(cipherdir))?;
        if entries.next().is_some() {
            return Err(Error::NotEmpty(cipherdir.to_owned()));
        }

        let (config_dir, config_name) = (config_dir.to_owned(), config_name.to_owned());
        Ok(InitTarget {
            config_path,
            config_dir,
            config_name,
            external,
        })
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
    /// [`Error::RootExists`], [`Error::CreateRoot`], [`Error::Random`],
    /// [`Error::Io`].
    pub fn init(cipherdir: &Path, opts: &InitOptions) -> Result<InitReport, Error> {
        Self::init_with(cipherdir, None, opts)
    }

    /// [`Vault::init`] with the config written to `config` instead of into
    /// `cipherdir` (gocryptfs `-config`: the wrapped keys stay off a synced
    /// cipher directory, which then holds no config at all; open the vault
    /// with [`Vault::open_with`] and the same path). The file is written
    /// as in the cipher directory: atomically, mode 0600, never over an
    /// existing file. `None` is [`Vault::init`].
    ///
    /// # Errors
    /// As [`Vault::init`], and [`Error::ConfigExists`] (`config` exists),
    /// [`Error::ConfigInside`] (`config` is inside `cipherdir` but not its
    /// default config path), [`Error::Io`] (its directory is missing).
    pub fn init_with(
        cipherdir: &Path,
        config: Option<&Path>,
        opts: &InitOptions,
    ) -> Result<InitReport, Error> {
        // Validate everything the user chose before any expensive work.
        opts.check()?;
        let InitTarget {
            config_path,
            config_dir,
            config_name,
            external,
        } = Self::init_target(cipherdir, config)?;

        let (record, report) = new_record(opts)?;
        let (identifier, policy, argon2_report, recovery_key) = (
            report.key_identifier,
            report.policy,
            report.argon2,
            report.recovery_key,
        );

        let result = crate::create_root_with(cipherdir, &policy, opts.format).and_then(|()| {
            config::write_new_atomic(&config_dir, &config_name, &record.to_json()).map_err(|e| {
                match e {
                    ConfigError::AlreadyExists if external => {
                        Error::ConfigExists(config_path.clone())
                    }
                    ConfigError::AlreadyExists => Error::AlreadyInitialized(cipherdir.to_owned()),
                    other => Error::config(&config_path, other),
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
            recovery_key,
        })
    }
}

/// The config record of a new vault (fresh master key, policy, one wrapped
/// copy of the key per protector) and what to report about it.
fn new_record(opts: &InitOptions) -> Result<(ConfigRecord, InitReport), Error> {
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
                None => Argon2Params::calibrate(target, None)?.0,
            },
        };
        let mut salt = [0u8; SALT_SIZE];
        protector::random_bytes(&mut salt)?;
        let start = Instant::now();
        let wrapping = protector::passphrase_wrapping_key(&params, pass, &salt)?;
        argon2_report = Some((params, start.elapsed()));
        let ad = wrap::associated_data(config::KIND_PASSPHRASE, &policy_bytes);
        let (nonce, wrapped_key) = wrap::seal(&wrapping, &ad, raw_key)?;
        protectors.push(Protector::unnamed(ProtectorRecord::Passphrase {
            params,
            salt,
            nonce,
            wrapped_key,
        }));
    }
    if let Some(key_file) = &opts.key_file {
        let mut salt = [0u8; SALT_SIZE];
        protector::random_bytes(&mut salt)?;
        let wrapping = protector::key_file_wrapping_key(key_file, &salt)?;
        let ad = wrap::associated_data(config::KIND_KEY_FILE, &policy_bytes);
        let (nonce, wrapped_key) = wrap::seal(&wrapping, &ad, raw_key)?;
        protectors.push(Protector::unnamed(ProtectorRecord::KeyFile {
            salt,
            nonce,
            wrapped_key,
        }));
    }
    for s in &opts.sealed {
        let mut secret = zeroize::Zeroizing::new([0u8; protector::SEALED_SECRET_SIZE]);
        if s.secret.len() != secret.len() {
            return Err(Error::BadSealed(s.kind));
        }
        secret.copy_from_slice(&s.secret);
        protectors.push(Protector::unnamed(crate::edit::wrap_master(
            raw_key,
            &crate::edit::NewSecret::Sealed {
                kind: s.kind,
                sealed: &s.sealed,
                secret: &secret,
            },
            &policy_bytes,
        )?));
    }
    let mut recovery_key = None;
    if opts.recovery_key {
        let key = RecoveryKey::generate()?;
        protectors.push(Protector::unnamed(crate::edit::wrap_master(
            raw_key,
            &crate::edit::NewSecret::RecoveryKey(&key),
            &policy_bytes,
        )?));
        recovery_key = Some(key);
    }
    if opts.recovery_key || !opts.sealed.is_empty() {
        let now = config::now_unix();
        for p in &mut protectors {
            p.created = Some(now);
        }
    }
    let record = ConfigRecord::new(policy_record, protectors);
    Ok((
        record,
        InitReport {
            key_identifier: identifier,
            policy,
            argon2: argon2_report,
            recovery_key,
        },
    ))
}

impl Vault {
    /// Prepares the plaintext directory `plain` for reverse mode (issue
    /// 24, `docs/vault-format.md` §13): writes a vault config (fresh master
    /// key, the protectors `opts` asks for) as
    /// [`crate::reverse::REVERSE_CONFIG_NAME`] inside it, atomically, mode
    /// 0600, never over an existing one. Nothing else in `plain` is
    /// touched; the reverse view shows the config as
    /// [`crate::CONFIG_NAME`]. Only format 3 exists in reverse:
    /// `opts.format` must be [`crate::layout::Format::V3`].
    ///
    /// # Errors
    /// [`Error::NoProtector`], policy and protector errors as
    /// [`Vault::init`], [`Error::AlreadyInitialized`] (a reverse config is
    /// there), [`Error::ReverseFormat`], [`Error::Io`] (`plain` is not a
    /// readable directory).
    pub fn init_reverse(plain: &Path, opts: &InitOptions) -> Result<InitReport, Error> {
        if opts.format != crate::layout::Format::V3 {
            return Err(Error::ReverseFormat);
        }
        opts.check()?;
        Vault::check_init_reverse(plain)?;
        let (record, report) = new_record(opts)?;
        let config_path = plain.join(crate::reverse::REVERSE_CONFIG_NAME);
        config::write_new_atomic(
            plain,
            std::ffi::OsStr::new(crate::reverse::REVERSE_CONFIG_NAME),
            &record.to_json(),
        )
        .map_err(|e| match e {
            ConfigError::AlreadyExists => Error::AlreadyInitialized(plain.to_owned()),
            other => Error::config(&config_path, other),
        })?;
        Ok(report)
    }

    /// Checks that `plain` can take a reverse config (a directory without
    /// one), before any secret is asked for.
    ///
    /// # Errors
    /// As [`Vault::init_reverse`].
    pub fn check_init_reverse(plain: &Path) -> Result<(), Error> {
        let meta = std::fs::metadata(plain).map_err(io_err(plain))?;
        if !meta.is_dir() {
            return Err(Error::Io {
                path: plain.to_owned(),
                source: std::io::Error::from_raw_os_error(libc_enotdir()),
            });
        }
        if plain
            .join(crate::reverse::REVERSE_CONFIG_NAME)
            .symlink_metadata()
            .is_ok()
        {
            return Err(Error::AlreadyInitialized(plain.to_owned()));
        }
        Ok(())
    }
}

/// ENOTDIR.
fn libc_enotdir() -> i32 {
    rustix::io::Errno::NOTDIR.raw_os_error()
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
