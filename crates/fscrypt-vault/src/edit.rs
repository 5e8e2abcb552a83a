//! Changing a vault's protectors without touching its data: adding one
//! ([`Vault::add_protector`]), removing one ([`Vault::remove_protector`]),
//! changing a passphrase ([`Vault::change_passphrase`]). The master key, and
//! so every file, stays the same; only the config is rewritten.
//!
//! Every change is committed the same way ([`Vault::commit`]): under the
//! config's [`ConfigLock`], the config on disk must still be the bytes this
//! [`Vault`] was opened from (else [`Error::ConfigChanged`], nothing
//! written), then [`config::replace_atomic`] writes a temporary file,
//! `fsync`s it, renames it over the config and `fsync`s the directory. A
//! crash at any point leaves a config that unlocks with the old set of
//! protectors or with the new one.

use fscrypt_crypto::SecretBuf;
use zeroize::Zeroizing;

use crate::config::{
    self, CONFIG_NAME, ConfigError, ConfigLock, ConfigRecord, MAX_PROTECTORS, Protector,
    ProtectorKind, ProtectorRecord,
};
use crate::cost::Argon2Params;
use crate::error::Error;
use crate::protector::{self, MASTER_KEY_SIZE, ProtectorError, RecoveryKey, SALT_SIZE};
use crate::unlock::Vault;
use crate::wrap;

/// The secret of a protector to be made.
#[derive(Clone, Copy, Debug)]
pub enum NewSecret<'a> {
    /// A passphrase, with the Argon2id costs to derive its wrapping key.
    Passphrase {
        /// The new passphrase (non-empty).
        passphrase: &'a [u8],
        /// Argon2id costs.
        params: Argon2Params,
    },
    /// The contents of a key file (32 or 64 bytes).
    KeyFile(&'a [u8]),
    /// A recovery key ([`RecoveryKey::generate`]).
    RecoveryKey(&'a RecoveryKey),
}

impl NewSecret<'_> {
    /// The kind of protector this secret makes.
    pub fn kind(&self) -> ProtectorKind {
        match self {
            NewSecret::Passphrase { .. } => ProtectorKind::Passphrase,
            NewSecret::KeyFile(_) => ProtectorKind::KeyFile,
            NewSecret::RecoveryKey(_) => ProtectorKind::RecoveryKey,
        }
    }
}

/// Wraps `master` (64 raw bytes) under `secret` for a vault whose root
/// policy has the uapi bytes `policy_bytes`; returns the record. The
/// sealed key is opened again with the same wrapping key before it is
/// returned, so a record that would not unlock is never stored.
///
/// # Errors
/// [`Error::Protector`] (empty passphrase, key file size, RNG, bad costs).
pub fn wrap_master(
    master: &[u8; MASTER_KEY_SIZE],
    secret: &NewSecret<'_>,
    policy_bytes: &[u8; 24],
) -> Result<ProtectorRecord, Error> {
    let mut salt = [0u8; SALT_SIZE];
    protector::random_bytes(&mut salt)?;
    let wrapping = match secret {
        NewSecret::Passphrase { passphrase, params } => {
            params.validate()?;
            protector::passphrase_wrapping_key(params, passphrase, &salt)?
        }
        NewSecret::KeyFile(key) => protector::key_file_wrapping_key(key, &salt)?,
        NewSecret::RecoveryKey(key) => protector::recovery_key_wrapping_key(key, &salt)?,
    };
    let ad = wrap::associated_data(secret.kind().ad_byte(), policy_bytes);
    let (nonce, wrapped_key) = wrap::seal(&wrapping, &ad, master)?;
    let back = wrap::open(&wrapping, &ad, &nonce, &wrapped_key)?;
    if back.as_bytes() != master.as_slice() {
        return Err(ProtectorError::WrongSecret.into());
    }
    Ok(match secret {
        NewSecret::Passphrase { params, .. } => ProtectorRecord::Passphrase {
            params: *params,
            salt,
            nonce,
            wrapped_key,
        },
        NewSecret::KeyFile(_) => ProtectorRecord::KeyFile {
            salt,
            nonce,
            wrapped_key,
        },
        NewSecret::RecoveryKey(_) => ProtectorRecord::RecoveryKey {
            salt,
            nonce,
            wrapped_key,
        },
    })
}

impl Vault {
    /// The raw master key as a fixed-size array, its identifier checked
    /// against this vault's policy.
    fn checked_master(
        &self,
        master: &SecretBuf,
    ) -> Result<Zeroizing<[u8; MASTER_KEY_SIZE]>, Error> {
        self.master_key_from_bytes(master)?;
        let mut out = Zeroizing::new([0u8; MASTER_KEY_SIZE]);
        out.copy_from_slice(master.as_bytes());
        Ok(out)
    }

    /// Adds a protector of `secret` wrapping `master` (the raw key from
    /// [`Vault::unwrap_with`] or one of the `unwrap_with_*` methods), named
    /// `name` or by default (`passphrase`, `key-file-2`, ...), with the
    /// current time as its creation time, and commits the config. Returns
    /// the vault as now stored and the new protector's name.
    ///
    /// # Errors
    /// [`Error::BadName`], [`Error::NameTaken`], [`Error::TooManyProtectors`],
    /// [`Error::IdentifierMismatch`] (not this vault's key),
    /// [`Error::Protector`], and as [`Vault::commit`].
    pub fn add_protector(
        &self,
        master: &SecretBuf,
        secret: &NewSecret<'_>,
        name: Option<&str>,
    ) -> Result<(Vault, String), Error> {
        if let Some(n) = name {
            config::check_name(n).map_err(Error::BadName)?;
            if self.record.find(n).is_some() {
                return Err(Error::NameTaken(n.to_owned()));
            }
        }
        if self.record.protectors.len() >= MAX_PROTECTORS {
            return Err(Error::TooManyProtectors);
        }
        let raw = self.checked_master(master)?;
        let record = wrap_master(&raw, secret, &self.record.policy.to_uapi_bytes())?;
        let mut new = self.record.clone();
        new.push(Protector {
            name: name.unwrap_or_default().to_owned(),
            created: Some(config::now_unix()),
            record,
        });
        let name = new
            .protectors
            .last()
            .map(|p| p.name.clone())
            .unwrap_or_default();
        Ok((self.commit(new)?, name))
    }

    /// Removes the protector named `name` and commits the config. The
    /// last protector is never removed.
    ///
    /// # Errors
    /// [`Error::UnknownProtector`], [`Error::LastProtector`], and as
    /// [`Vault::commit`].
    pub fn remove_protector(&self, name: &str) -> Result<Vault, Error> {
        let i = self
            .record
            .find(name)
            .ok_or_else(|| Error::UnknownProtector(name.to_owned()))?;
        if self.record.protectors.len() == 1 {
            return Err(Error::LastProtector(name.to_owned()));
        }
        let mut new = self.record.clone();
        new.protectors.remove(i);
        self.commit(new)
    }

    /// Replaces the passphrase of the protector at `index` (as returned
    /// by [`Vault::unwrap_with`] for the old passphrase) with
    /// `new_passphrase`, keeping its name and place, with `params` or, if
    /// `None`, the protector's current Argon2id costs; commits the config.
    ///
    /// # Errors
    /// [`Error::UnknownProtector`] (index out of range or not a passphrase
    /// protector), [`Error::IdentifierMismatch`], [`Error::Protector`]
    /// (empty passphrase), and as [`Vault::commit`].
    pub fn change_passphrase(
        &self,
        index: usize,
        master: &SecretBuf,
        new_passphrase: &[u8],
        params: Option<Argon2Params>,
    ) -> Result<Vault, Error> {
        let Some(old) = self.record.protectors.get(index) else {
            return Err(Error::UnknownProtector(format!("#{index}")));
        };
        let ProtectorRecord::Passphrase {
            params: old_params, ..
        } = &old.record
        else {
            return Err(Error::ProtectorKind {
                name: old.name.clone(),
                found: old.record.protector_kind(),
                given: ProtectorKind::Passphrase,
            });
        };
        let raw = self.checked_master(master)?;
        let secret = NewSecret::Passphrase {
            passphrase: new_passphrase,
            params: params.unwrap_or(*old_params),
        };
        let record = wrap_master(&raw, &secret, &self.record.policy.to_uapi_bytes())?;
        let mut new = self.record.clone();
        new.protectors[index] = Protector {
            name: old.name.clone(),
            // A version-1 config stays version 1.
            created: old.created.map(|_| config::now_unix()),
            record,
        };
        self.commit(new)
    }

    /// Commits `record` as this vault's config: takes the [`ConfigLock`],
    /// checks that the config is still the one this [`Vault`] was opened
    /// from, replaces it atomically ([`config::replace_atomic`]) and
    /// returns the vault as now stored.
    ///
    /// # Errors
    /// [`Error::ConfigChanged`], [`Error::BadConfig`], [`Error::Io`].
    pub fn commit(&self, record: ConfigRecord) -> Result<Vault, Error> {
        self.commit_hooked(record, &mut |_| config::HookAction::Continue)
    }

    /// [`Vault::commit`] with a test hook after each step of the write.
    pub(crate) fn commit_hooked(
        &self,
        record: ConfigRecord,
        hook: &mut dyn FnMut(config::Step) -> config::HookAction,
    ) -> Result<Vault, Error> {
        let path = Self::config_path(&self.dir);
        let bytes = record.to_json();
        // What is written must read back as itself.
        let back = Vault::from_config_bytes(&self.dir, path.clone(), &bytes)?;
        if back.record != record {
            return Err(Error::BadConfig {
                path,
                source: ConfigError::Invalid("the new config does not read back as written".into()),
            });
        }
        let map = |source: ConfigError| match source {
            ConfigError::Io(source) => Error::Io {
                path: path.clone(),
                source,
            },
            source => Error::BadConfig {
                path: path.clone(),
                source,
            },
        };
        let (lock, current) = ConfigLock::acquire(&self.dir, CONFIG_NAME).map_err(map)?;
        if current != self.bytes {
            return Err(Error::ConfigChanged(path));
        }
        let _ = &lock;
        config::replace_atomic_hooked(&self.dir, CONFIG_NAME, &bytes, hook).map_err(map)?;
        drop(lock);
        Ok(back)
    }
}
