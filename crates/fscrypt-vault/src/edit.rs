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
    self, ConfigError, ConfigLock, ConfigRecord, MAX_PROTECTORS, Protector, ProtectorKind,
    ProtectorRecord,
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
    /// A secret sealed by the `fscrypt-seal` crate, and its sealed record.
    Sealed {
        /// A sealed kind ([`ProtectorKind::is_sealed`]).
        kind: ProtectorKind,
        /// The sealed record to store (a JSON object, public data).
        sealed: &'a serde_json::Value,
        /// The secret the record releases.
        secret: &'a [u8; protector::SEALED_SECRET_SIZE],
    },
}

impl NewSecret<'_> {
    /// The kind of protector this secret makes.
    pub fn kind(&self) -> ProtectorKind {
        match self {
            NewSecret::Passphrase { .. } => ProtectorKind::Passphrase,
            NewSecret::KeyFile(_) => ProtectorKind::KeyFile,
            NewSecret::RecoveryKey(_) => ProtectorKind::RecoveryKey,
            NewSecret::Sealed { kind, .. } => *kind,
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
        NewSecret::Sealed {
            kind,
            sealed,
            secret,
        } => {
            if !kind.is_sealed() || !sealed.is_object() {
                return Err(Error::BadSealed(*kind));
            }
            protector::sealed_wrapping_key(secret, &salt)?
        }
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
        NewSecret::Sealed { kind, sealed, .. } => ProtectorRecord::Sealed {
            kind: *kind,
            sealed: (*sealed).clone(),
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
    /// last protector is never removed; the last standalone one
    /// ([`ProtectorKind::is_standalone`]: passphrase, key file, recovery
    /// key) only with `force`, since what remains can be lost with a
    /// device or locked by a firmware update.
    ///
    /// # Errors
    /// [`Error::UnknownProtector`], [`Error::LastProtector`],
    /// [`Error::LastStandalone`], and as [`Vault::commit`].
    pub fn remove_protector(&self, name: &str, force: bool) -> Result<Vault, Error> {
        let i = self
            .record
            .find(name)
            .ok_or_else(|| Error::UnknownProtector(name.to_owned()))?;
        if self.record.protectors.len() == 1 {
            return Err(Error::LastProtector(name.to_owned()));
        }
        if !force && self.is_last_standalone(i) {
            return Err(Error::LastStandalone(name.to_owned()));
        }
        let mut new = self.record.clone();
        new.protectors.remove(i);
        self.commit(new)
    }

    /// Whether the protector at `index` is the vault's only standalone
    /// one ([`ProtectorKind::is_standalone`]).
    pub fn is_last_standalone(&self, index: usize) -> bool {
        let standalone = |p: &Protector| p.record.protector_kind().is_standalone();
        self.record.protectors.get(index).is_some_and(standalone)
            && self
                .record
                .protectors
                .iter()
                .filter(|p| standalone(p))
                .count()
                == 1
    }

    /// Replaces the sealed protector at `index` with a new one of the same
    /// kind (`protector reseal`: a TPM2 protector sealed again to the
    /// current PCRs), keeping its name and place; commits the config.
    ///
    /// # Errors
    /// [`Error::UnknownProtector`] (index out of range),
    /// [`Error::ProtectorKind`] (another kind), [`Error::IdentifierMismatch`],
    /// [`Error::Protector`], and as [`Vault::commit`].
    pub fn replace_sealed(
        &self,
        index: usize,
        master: &SecretBuf,
        secret: &NewSecret<'_>,
    ) -> Result<Vault, Error> {
        let Some(old) = self.record.protectors.get(index) else {
            return Err(Error::UnknownProtector(format!("#{index}")));
        };
        let found = old.record.protector_kind();
        if found != secret.kind() || !found.is_sealed() {
            return Err(Error::ProtectorKind {
                name: old.name.clone(),
                found,
                given: secret.kind(),
            });
        }
        let raw = self.checked_master(master)?;
        let record = wrap_master(&raw, secret, &self.record.policy.to_uapi_bytes())?;
        let mut new = self.record.clone();
        new.protectors[index] = Protector {
            name: old.name.clone(),
            created: Some(config::now_unix()),
            record,
        };
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
        let path = self.config.clone();
        let bytes = record.to_json();
        // What is written must read back as itself.
        let back = Vault::from_config_bytes(&self.dir, path.clone(), &bytes)?;
        if back.record != record {
            return Err(Error::BadConfig {
                path,
                source: ConfigError::Invalid("the new config does not read back as written".into()),
            });
        }
        let map = |e| Error::config(&path, e);
        let (dir, name) = config::dir_and_name(&path).map_err(map)?;
        let (lock, current) = ConfigLock::acquire(dir, name).map_err(map)?;
        if current != self.bytes {
            return Err(Error::ConfigChanged(path));
        }
        let _ = &lock;
        config::replace_atomic_hooked(dir, name, &bytes, hook).map_err(map)?;
        drop(lock);
        Ok(back)
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::config::{CONFIG_NAME, HookAction, Step};
    use crate::protector::RecoveryKeyError;
    use crate::{Argon2Choice, InitOptions, Secret};

    const CHEAP: Argon2Params = Argon2Params {
        m_cost_kib: 64,
        t_cost: 1,
        p_cost: 1,
    };
    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures");
    const FIXTURE_PASSPHRASE: &[u8] = b"fscrypt-rs vault-v1 fixture";

    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            let mut rnd = [0u8; 6];
            protector::random_bytes(&mut rnd).unwrap();
            let p = std::env::temp_dir().join(format!("fscrypt-edit-{tag}-{}", hex::encode(rnd)));
            std::fs::create_dir(&p).unwrap();
            TempDir(p)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn init(
        dir: &Path,
        pass: Option<&[u8]>,
        key: Option<&[u8]>,
        recovery: bool,
    ) -> crate::InitReport {
        let opts = InitOptions {
            passphrase: pass.map(SecretBuf::from_slice),
            key_file: key.map(SecretBuf::from_slice),
            argon2: Argon2Choice::Fixed(CHEAP),
            recovery_key: recovery,
            ..InitOptions::default()
        };
        Vault::init(dir, &opts).unwrap()
    }

    fn pass(p: &[u8]) -> NewSecret<'_> {
        NewSecret::Passphrase {
            passphrase: p,
            params: CHEAP,
        }
    }

    fn config_bytes(dir: &Path) -> Vec<u8> {
        std::fs::read(Vault::config_path(dir)).unwrap()
    }

    fn names(v: &Vault) -> Vec<&str> {
        v.protectors().iter().map(|p| p.name.as_str()).collect()
    }

    #[test]
    fn v1_fixture_reads_and_writes_back_byte_for_byte_and_unlocks() {
        let bytes = std::fs::read(format!("{FIXTURES}/vault-v1/{CONFIG_NAME}")).unwrap();
        let record = ConfigRecord::parse(&bytes).unwrap();
        assert_eq!(record.version(), 1);
        assert_eq!(
            record.to_json(),
            bytes,
            "a v1 config must be rewritten as it was"
        );
        let key = std::fs::read(format!("{FIXTURES}/vault-v1.key")).unwrap();
        let vault = Vault::open(Path::new(&format!("{FIXTURES}/vault-v1"))).unwrap();
        assert_eq!(names(&vault), ["passphrase", "key-file"]);
        let a = vault.unwrap_with_passphrase(FIXTURE_PASSPHRASE).unwrap();
        let b = vault.unwrap_with_key_file(&key).unwrap();
        assert_eq!(a.as_bytes(), b.as_bytes());
    }

    #[test]
    fn init_without_recovery_key_is_v1_with_one_is_v2() {
        let t = TempDir::new("init");
        init(&t.0, Some(b"pw"), None, false);
        assert_eq!(Vault::open(&t.0).unwrap().config_version(), 1);
        let t2 = TempDir::new("init2");
        let report = init(&t2.0, Some(b"pw"), Some(&[5; 32]), true);
        let vault = Vault::open(&t2.0).unwrap();
        assert_eq!(vault.config_version(), 2);
        assert_eq!(names(&vault), ["passphrase", "key-file", "recovery-key"]);
        assert!(vault.protectors().iter().all(|p| p.created.is_some()));
        let rk = report.recovery_key.unwrap();
        // What the user writes down unlocks.
        let typed = RecoveryKey::parse(rk.display().as_bytes()).unwrap();
        let m = vault.unlock_with_recovery_key(&typed).unwrap();
        assert_eq!(m.identifier(), report.key_identifier);
        let other = RecoveryKey::generate().unwrap();
        assert!(matches!(
            vault.unlock_with_recovery_key(&other),
            Err(Error::WrongRecoveryKey)
        ));
    }

    #[test]
    fn sealed_protectors_make_version_3_unlock_with_their_secret_and_never_remove_the_last_standalone()
     {
        let t = TempDir::new("sealed");
        init(&t.0, None, Some(&[1; 32]), false);
        let v = Vault::open(&t.0).unwrap();
        let (master, _) = v.unwrap_with(&Secret::KeyFile(&[1; 32]), None).unwrap();
        let record = serde_json::json!({"kind": "tpm2", "blob": "00ff"});
        let secret = [7u8; 32];
        let (_, name) = v
            .add_protector(
                &master,
                &NewSecret::Sealed {
                    kind: ProtectorKind::Tpm2,
                    sealed: &record,
                    secret: &secret,
                },
                None,
            )
            .unwrap();
        assert_eq!(name, "tpm2");
        // Stored as version 3, and read back the same.
        let v = Vault::open(&t.0).unwrap();
        assert_eq!(v.config_version(), 3);
        let stored = &v.protectors()[1];
        assert!(matches!(
            &stored.record,
            ProtectorRecord::Sealed { kind: ProtectorKind::Tpm2, sealed, .. } if *sealed == record
        ));
        let (m, i) = v
            .unwrap_with(
                &Secret::Sealed {
                    kind: ProtectorKind::Tpm2,
                    secret: &secret,
                },
                None,
            )
            .unwrap();
        assert_eq!((m.as_bytes(), i), (master.as_bytes(), 1));
        // Another secret, or the right one for another kind, opens nothing.
        let e = v
            .unwrap_with(
                &Secret::Sealed {
                    kind: ProtectorKind::Tpm2,
                    secret: &[8; 32],
                },
                None,
            )
            .unwrap_err();
        assert!(matches!(e, Error::WrongSealed(ProtectorKind::Tpm2)) && e.is_wrong_secret());
        assert!(matches!(
            v.unwrap_with(
                &Secret::Sealed {
                    kind: ProtectorKind::Age,
                    secret: &secret
                },
                None
            ),
            Err(Error::NoSuchProtector("age"))
        ));
        // The key file is the last standalone protector: kept unless forced.
        assert!(matches!(
            v.remove_protector("key-file", false),
            Err(Error::LastStandalone(_))
        ));
        let (v, _) = v.add_protector(&master, &pass(b"pw"), None).unwrap();
        let v = v.remove_protector("key-file", false).unwrap();
        assert!(matches!(
            v.remove_protector("passphrase", false),
            Err(Error::LastStandalone(_))
        ));
        let v = v.remove_protector("passphrase", true).unwrap();
        assert_eq!(names(&v), ["tpm2"]);
        // Resealed: the same name, a new secret; the old one opens nothing.
        let (m, _) = v
            .unwrap_with(
                &Secret::Sealed {
                    kind: ProtectorKind::Tpm2,
                    secret: &secret,
                },
                None,
            )
            .unwrap();
        let v = v
            .replace_sealed(
                0,
                &m,
                &NewSecret::Sealed {
                    kind: ProtectorKind::Tpm2,
                    sealed: &record,
                    secret: &[9; 32],
                },
            )
            .unwrap();
        assert_eq!(names(&v), ["tpm2"]);
        assert!(
            v.unwrap_with(
                &Secret::Sealed {
                    kind: ProtectorKind::Tpm2,
                    secret: &secret
                },
                None
            )
            .is_err()
        );
        v.unwrap_with(
            &Secret::Sealed {
                kind: ProtectorKind::Tpm2,
                secret: &[9; 32],
            },
            None,
        )
        .unwrap();
    }

    #[test]
    fn sealed_kinds_need_version_3_and_an_object() {
        let t = TempDir::new("sealedv");
        init(&t.0, None, Some(&[1; 32]), false);
        let v = Vault::open(&t.0).unwrap();
        let (master, _) = v.unwrap_with(&Secret::KeyFile(&[1; 32]), None).unwrap();
        let record = serde_json::json!({"kind": "age"});
        let (_, _) = v
            .add_protector(
                &master,
                &NewSecret::Sealed {
                    kind: ProtectorKind::Age,
                    sealed: &record,
                    secret: &[3; 32],
                },
                None,
            )
            .unwrap();
        let text = String::from_utf8(config_bytes(&t.0)).unwrap();
        assert!(text.contains("\"version\": 3"), "{text}");
        let as_v2 = text.replace("\"version\": 3", "\"version\": 2");
        assert!(ConfigRecord::parse(as_v2.as_bytes()).is_err());
        let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
        json["protectors"][1]["sealed"] = serde_json::json!("not an object");
        let e = ConfigRecord::parse(json.to_string().as_bytes()).unwrap_err();
        assert!(e.to_string().contains("sealed must be an object"), "{e}");
        assert!(matches!(
            v.add_protector(
                &master,
                &NewSecret::Sealed {
                    kind: ProtectorKind::KeyFile,
                    sealed: &record,
                    secret: &[3; 32]
                },
                None,
            ),
            Err(Error::BadSealed(_))
        ));
    }

    #[test]
    fn add_each_kind_then_remove_each_and_the_last_is_refused() {
        let t = TempDir::new("add");
        let report = init(&t.0, None, Some(&[1; 64]), false);
        let v = Vault::open(&t.0).unwrap();
        let (master, i) = v.unwrap_with(&Secret::KeyFile(&[1; 64]), None).unwrap();
        assert_eq!(i, 0);
        let rk = RecoveryKey::generate().unwrap();
        let (v, n1) = v.add_protector(&master, &pass(b"first"), None).unwrap();
        let (v, n2) = v.add_protector(&master, &pass(b"second"), None).unwrap();
        let (v, n3) = v
            .add_protector(&master, &NewSecret::KeyFile(&[2; 32]), None)
            .unwrap();
        let (v, n4) = v
            .add_protector(&master, &NewSecret::RecoveryKey(&rk), Some("paper"))
            .unwrap();
        assert_eq!(
            [n1.as_str(), &n2, &n3, &n4],
            ["passphrase", "passphrase-2", "key-file-2", "paper"]
        );
        assert!(matches!(
            v.add_protector(&master, &pass(b"x"), Some("paper")),
            Err(Error::NameTaken(_))
        ));
        assert!(matches!(
            v.add_protector(&master, &pass(b"x"), Some("no spaces")),
            Err(Error::BadName(_))
        ));
        // A key that is not this vault's is refused.
        let wrong = SecretBuf::from_slice(&[9; 64]);
        assert!(matches!(
            v.add_protector(&wrong, &pass(b"x"), None),
            Err(Error::IdentifierMismatch { .. })
        ));
        let v = Vault::open(&t.0).unwrap();
        assert_eq!(v.config_version(), 2);
        // Every protector opens the same key.
        let secrets = [
            Secret::KeyFile(&[1; 64]),
            Secret::Passphrase(b"first"),
            Secret::Passphrase(b"second"),
            Secret::KeyFile(&[2; 32]),
            Secret::RecoveryKey(&rk),
        ];
        for (i, s) in secrets.iter().enumerate() {
            let (m, at) = v.unwrap_with(s, None).unwrap();
            assert_eq!(at, i);
            assert_eq!(
                v.master_key_from_bytes(&m).unwrap().identifier(),
                report.key_identifier
            );
        }
        // --protector: only the named one is tried.
        assert!(matches!(
            v.unwrap_with(&Secret::Passphrase(b"first"), Some("passphrase-2")),
            Err(Error::WrongPassphrase)
        ));
        assert!(matches!(
            v.unwrap_with(&Secret::Passphrase(b"first"), Some("paper")),
            Err(Error::ProtectorKind { .. })
        ));
        assert!(matches!(
            v.unwrap_with(&Secret::Passphrase(b"first"), Some("nope")),
            Err(Error::UnknownProtector(_))
        ));
        // Remove them one by one: a removed one no longer unlocks.
        let mut v = v;
        for (name, s) in [
            ("passphrase", Secret::Passphrase(b"first")),
            ("paper", Secret::RecoveryKey(&rk)),
            ("key-file", Secret::KeyFile(&[1; 64])),
            ("key-file-2", Secret::KeyFile(&[2; 32])),
        ] {
            v = v.remove_protector(name, false).unwrap();
            let reopened = Vault::open(&t.0).unwrap();
            assert!(
                reopened
                    .unwrap_with(&s, None)
                    .unwrap_err()
                    .is_wrong_secret()
                    || !reopened.has_kind(s.kind()),
                "{name}"
            );
        }
        assert_eq!(names(&v), ["passphrase-2"]);
        assert!(matches!(
            v.remove_protector("passphrase-2", false),
            Err(Error::LastProtector(_))
        ));
        assert!(matches!(
            v.remove_protector("gone", false),
            Err(Error::UnknownProtector(_))
        ));
        assert!(
            Vault::open(&t.0)
                .unwrap()
                .unwrap_with_passphrase(b"second")
                .is_ok()
        );
    }

    #[test]
    fn config_kept_outside_the_cipher_directory() {
        let t = TempDir::new("extcfg");
        let cipher = t.0.join("cipher");
        let keys = t.0.join("keys");
        std::fs::create_dir(&cipher).unwrap();
        std::fs::create_dir(&keys).unwrap();
        let cfg = keys.join("vault.json");
        let opts = InitOptions {
            passphrase: Some(SecretBuf::from_slice(b"old")),
            argon2: Argon2Choice::Fixed(CHEAP),
            ..InitOptions::default()
        };
        let report = Vault::init_with(&cipher, Some(&cfg), &opts).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&cfg).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // No config (no wrapped key) in the cipher directory, only the root.
        let names: Vec<_> = std::fs::read_dir(&cipher)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [crate::layout::DIR_META_NAME]);
        // Without the config: one line that names --config.
        let e = Vault::open(&cipher).unwrap_err();
        assert!(matches!(e, Error::ConfigElsewhere(_)), "{e}");
        assert!(e.to_string().contains("--config") && !e.to_string().contains('\n'));
        // A second init onto the same config file is refused, the cipher
        // directory left empty.
        let other = t.0.join("other");
        std::fs::create_dir(&other).unwrap();
        assert!(matches!(
            Vault::init_with(&other, Some(&cfg), &opts),
            Err(Error::ConfigExists(_))
        ));
        assert_eq!(std::fs::read_dir(&other).unwrap().count(), 0);
        // Inside the cipher directory under another name: refused.
        assert!(matches!(
            Vault::init_with(&other, Some(&other.join("cfg.json")), &opts),
            Err(Error::ConfigInside(_))
        ));
        assert_eq!(std::fs::read_dir(&other).unwrap().count(), 0);
        // A change is committed to the external file only.
        let v = Vault::open_with(&cipher, Some(&cfg)).unwrap();
        assert_eq!(v.config_file(), cfg);
        let (master, i) = v.unwrap_with(&Secret::Passphrase(b"old"), None).unwrap();
        v.change_passphrase(i, &master, b"new", None).unwrap();
        assert!(!Vault::config_path(&cipher).exists());
        let v = Vault::open_with(&cipher, Some(&cfg)).unwrap();
        let m = v.unlock_with_passphrase(b"new").unwrap();
        assert_eq!(m.identifier(), report.key_identifier);
        assert_eq!(
            std::fs::read_dir(&keys).unwrap().count(),
            1,
            "no temporary file left"
        );
        assert!(matches!(
            Vault::open_with(&cipher, Some(&keys.join("missing.json"))),
            Err(Error::ConfigNotFound(_))
        ));
    }

    #[test]
    fn change_passphrase_keeps_v1_and_the_key() {
        let t = TempDir::new("passwd");
        let report = init(&t.0, Some(b"old"), Some(&[3; 32]), false);
        let v = Vault::open(&t.0).unwrap();
        let (master, i) = v.unwrap_with(&Secret::Passphrase(b"old"), None).unwrap();
        let v = v.change_passphrase(i, &master, b"new", None).unwrap();
        assert_eq!(v.config_version(), 1, "nothing new used: still version 1");
        let v = Vault::open(&t.0).unwrap();
        assert!(matches!(
            v.unwrap_with_passphrase(b"old"),
            Err(Error::WrongPassphrase)
        ));
        let m = v.unlock_with_passphrase(b"new").unwrap();
        assert_eq!(m.identifier(), report.key_identifier);
        assert!(v.unlock_with_key_file(&[3; 32]).is_ok());
        assert!(matches!(
            v.change_passphrase(1, &master, b"x", None),
            Err(Error::ProtectorKind { .. })
        ));
        assert!(matches!(
            v.change_passphrase(0, &master, b"", None),
            Err(Error::Protector(ProtectorError::EmptyPassphrase))
        ));
    }

    #[test]
    fn a_stale_vault_never_overwrites_a_newer_config() {
        let t = TempDir::new("stale");
        init(&t.0, None, Some(&[4; 32]), false);
        let a = Vault::open(&t.0).unwrap();
        let b = Vault::open(&t.0).unwrap();
        let master = a.unwrap_with_key_file(&[4; 32]).unwrap();
        a.add_protector(&master, &pass(b"a"), None).unwrap();
        let after_a = config_bytes(&t.0);
        assert!(matches!(
            b.add_protector(&master, &pass(b"b"), None),
            Err(Error::ConfigChanged(_))
        ));
        assert_eq!(config_bytes(&t.0), after_a);
    }

    #[test]
    fn concurrent_adds_lose_nothing() {
        let t = TempDir::new("race");
        init(&t.0, None, Some(&[6; 32]), false);
        let dir = t.0.clone();
        let threads: Vec<_> = (0..4)
            .map(|n| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    for k in 0..3 {
                        loop {
                            let v = Vault::open(&dir).unwrap();
                            let m = v.unwrap_with_key_file(&[6; 32]).unwrap();
                            let name = format!("t{n}-{k}");
                            match v.add_protector(&m, &NewSecret::KeyFile(&[7; 32]), Some(&name)) {
                                Ok(_) => break,
                                Err(Error::ConfigChanged(_)) => continue,
                                Err(e) => panic!("{e}"),
                            }
                        }
                    }
                })
            })
            .collect();
        for th in threads {
            th.join().unwrap();
        }
        let v = Vault::open(&t.0).unwrap();
        assert_eq!(v.protectors().len(), 1 + 4 * 3);
        let leftovers = std::fs::read_dir(&t.0)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .contains(".tmp-")
            })
            .count();
        assert_eq!(leftovers, 0);
    }

    /// A failure or a crash after each step of the config write leaves a
    /// config that opens with the old set of protectors, or the new one.
    #[test]
    fn failure_or_crash_at_each_step_leaves_old_or_new_set() {
        let steps = [
            Step::Created,
            Step::HalfWritten,
            Step::Synced,
            Step::Renamed,
            Step::DirSynced,
        ];
        for action in [HookAction::Fail, HookAction::Crash] {
            for (k, at) in steps.iter().enumerate() {
                for change in ["add", "remove", "passwd"] {
                    let t = TempDir::new("crash");
                    init(&t.0, Some(b"old"), Some(&[8; 32]), false);
                    let before = config_bytes(&t.0);
                    let v = Vault::open(&t.0).unwrap();
                    let (master, pi) = v.unwrap_with(&Secret::Passphrase(b"old"), None).unwrap();
                    let mut new = v.record.clone();
                    match change {
                        "add" => {
                            let r = wrap_master(
                                &v.checked_master(&master).unwrap(),
                                &pass(b"added"),
                                &new.policy.to_uapi_bytes(),
                            )
                            .unwrap();
                            new.push(Protector {
                                name: String::new(),
                                created: Some(1),
                                record: r,
                            });
                        }
                        "remove" => {
                            new.protectors.remove(1);
                        }
                        _ => {
                            let r = wrap_master(
                                &v.checked_master(&master).unwrap(),
                                &pass(b"new"),
                                &new.policy.to_uapi_bytes(),
                            )
                            .unwrap();
                            new.protectors[pi].record = r;
                        }
                    }
                    let result = v.commit_hooked(new, &mut |s| {
                        if s == *at {
                            action
                        } else {
                            HookAction::Continue
                        }
                    });
                    assert!(result.is_err(), "{action:?} after {at:?} must be reported");
                    let after = config_bytes(&t.0);
                    let reopened = Vault::open(&t.0).unwrap();
                    let renamed = k >= 3;
                    let ctx = format!("{change}, {action:?} after {at:?}");
                    if renamed {
                        assert_ne!(after, before, "{ctx}: the rename happened");
                    } else {
                        assert_eq!(after, before, "{ctx}: old config untouched");
                    }
                    // Old set, or new set: check each secret accordingly.
                    let old_pass = reopened.unwrap_with_passphrase(b"old").is_ok();
                    let key = reopened.unwrap_with_key_file(&[8; 32]).is_ok();
                    match (change, renamed) {
                        (_, false) => assert!(old_pass && key, "{ctx}"),
                        ("add", true) => assert!(
                            old_pass && key && reopened.unwrap_with_passphrase(b"added").is_ok(),
                            "{ctx}"
                        ),
                        ("remove", true) => assert!(old_pass && !key, "{ctx}"),
                        _ => assert!(
                            !old_pass && key && reopened.unwrap_with_passphrase(b"new").is_ok(),
                            "{ctx}"
                        ),
                    }
                    // A failure cleans up its temporary file; after a crash
                    // a stray one may stay, and nothing reads it.
                    let tmps = std::fs::read_dir(&t.0)
                        .unwrap()
                        .filter(|e| {
                            e.as_ref()
                                .unwrap()
                                .file_name()
                                .to_string_lossy()
                                .contains(".tmp-")
                        })
                        .count();
                    if action == HookAction::Fail || renamed {
                        assert_eq!(tmps, 0, "{ctx}");
                    }
                }
            }
        }
    }

    #[test]
    fn recovery_key_round_trip_and_typos() {
        let rk = RecoveryKey::generate().unwrap();
        let shown = rk.display();
        assert_eq!(shown.len(), 56 + 13);
        assert_eq!(shown.split('-').count(), 14);
        assert!(shown.split('-').all(|g| g.len() == 4));
        let same =
            |text: &str| RecoveryKey::parse(text.as_bytes()).unwrap().as_bytes() == rk.as_bytes();
        assert!(same(&shown));
        // Case, spaces, missing or extra dashes, O/0 and I/L/1 confusions.
        assert!(same(&shown.to_lowercase()));
        assert!(same(&shown.replace('-', " ")));
        assert!(same(&shown.replace('-', "")));
        assert!(same(&format!("  {}\n", shown.replace('-', " - "))));
        assert!(same(&shown.replace('0', "O").replace('1', "l")));
        // Every single-character substitution is caught, with its group.
        let chars: Vec<char> = shown.chars().collect();
        let mut hinted = 0;
        for i in (0..chars.len()).filter(|&i| chars[i] != '-') {
            let mut typo = chars.clone();
            typo[i] = if chars[i] == 'X' { 'Y' } else { 'X' };
            let text: String = typo.into_iter().collect();
            match RecoveryKey::parse(text.as_bytes()) {
                Err(RecoveryKeyError::Checksum { hint }) => {
                    let group = i / 5 + 1;
                    if hint == format!(", probably in group {group}") {
                        hinted += 1;
                    }
                }
                other => panic!("typo at {i} not caught: {other:?}"),
            }
        }
        assert!(
            hinted >= 50,
            "the group of a typo is named (got {hinted} of 56)"
        );
        // Swapped neighbours are caught too.
        let plain: Vec<char> = shown.replace('-', "").chars().collect();
        for i in 0..plain.len() - 1 {
            if plain[i] == plain[i + 1] {
                continue;
            }
            let mut t = plain.clone();
            t.swap(i, i + 1);
            let text: String = t.into_iter().collect();
            assert!(matches!(
                RecoveryKey::parse(text.as_bytes()),
                Err(RecoveryKeyError::Checksum { .. })
            ));
        }
        assert!(matches!(
            RecoveryKey::parse(&shown.as_bytes()[..shown.len() - 5]),
            Err(RecoveryKeyError::Length(52))
        ));
        assert!(matches!(
            RecoveryKey::parse(shown.replacen(&shown[5..6], "U", 1).as_bytes()),
            Err(RecoveryKeyError::BadChar('U', _))
        ));
        // The error messages say what to do.
        let msg = RecoveryKey::parse(b"abcd").unwrap_err().to_string();
        assert!(
            msg.contains("56 characters") && msg.contains("this one has 4"),
            "{msg}"
        );
        // Fixed bytes, fixed text: the written form never changes.
        let fixed = RecoveryKey::from_bytes(&[0u8; 32]);
        assert!(fixed.display().starts_with("0000-0000-"));
    }
}
