//! One [`Context`] per action, built once: the config, the mount table
//! (`/proc/self/mountinfo`, read once), the trusted user (whose metadata
//! is believed: [`fscrypt_metadata::trust::Trust`], honouring
//! `allow_cross_user_metadata`) and the target user (whose keyring gets
//! v1 keys). google/fscrypt keeps the same facts in `actions/context.go`
//! (config, mount, target user) and its trusted-user rule in
//! `filesystem.go`; this follows those facts, not that code.
//!
//! The CLI builds [`Context::for_caller`]; the PAM module
//! [`Context::for_login`].

use std::path::{Path, PathBuf};

use fscrypt_linux::mountinfo::{self, MountInfo};
use fscrypt_metadata::config::Config;
use fscrypt_metadata::links::MainMount;
use fscrypt_metadata::store::Store;
use fscrypt_metadata::trust::Trust;

use crate::error::{Error, Result};
use crate::keyring::{Keyring, V1Keyring};

/// A user: name, uid and primary gid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// The user name.
    pub name: String,
    /// The uid.
    pub uid: u32,
    /// The primary gid.
    pub gid: u32,
}

impl User {
    /// The user named `name` (through NSS).
    ///
    /// # Errors
    /// [`Error::NoSuchUser`], [`Error::UserLookup`].
    pub fn named(name: &str) -> Result<User> {
        let u = nix::unistd::User::from_name(name)
            .map_err(Error::UserLookup)?
            .ok_or_else(|| Error::NoSuchUser {
                name: name.to_string(),
            })?;
        Ok(User::from_nix(u))
    }

    /// The user of `uid`.
    ///
    /// # Errors
    /// [`Error::NoUserName`], [`Error::UserLookup`].
    pub fn of_uid(uid: u32) -> Result<User> {
        let u = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
            .map_err(Error::UserLookup)?
            .ok_or(Error::NoUserName { uid })?;
        Ok(User::from_nix(u))
    }

    /// The user named `name`, or the caller (real uid) when `None`.
    ///
    /// # Errors
    /// As [`User::named`] and [`User::of_uid`].
    pub fn named_or_caller(name: Option<&str>) -> Result<User> {
        match name {
            Some(n) => User::named(n),
            None => User::of_uid(rustix::process::getuid().as_raw()),
        }
    }

    fn from_nix(u: nix::unistd::User) -> User {
        User {
            name: u.name,
            uid: u.uid.as_raw(),
            gid: u.gid.as_raw(),
        }
    }
}

/// The state every action works from.
#[derive(Clone, Debug)]
pub struct Context {
    config: Option<Config>,
    config_path: Option<PathBuf>,
    mounts: Vec<MountInfo>,
    trust: Trust,
    keyring: Keyring,
    login_root: PathBuf,
}

impl Context {
    /// The command-line tools' context: the config of `$FSCRYPT_CONF` (or
    /// `/etc/fscrypt.conf`; unreadable: none, so no cross-user metadata
    /// and v1 keys in the filesystem keyring), metadata trusted as
    /// [`Trust::for_caller`] (the effective uid; every owner as root or
    /// with `allow_cross_user_metadata`), keys in the caller's keyrings,
    /// login protectors on `$FSCRYPT_ROOT_MNT` or `/`.
    pub fn for_caller() -> Context {
        let config = Config::load().ok();
        let allow = config.as_ref().is_some_and(|c| c.allow_cross_user_metadata);
        let root = fscrypt_metadata::config::root_mount();
        Context {
            keyring: Keyring::caller(V1Keyring::from_config(config.as_ref())),
            trust: Trust::for_caller(allow),
            config,
            config_path: None,
            mounts: mountinfo::read_mountinfo().unwrap_or_default(),
            login_root: std::fs::canonicalize(&root).unwrap_or(root),
        }
    }

    /// The context of `user`'s login (the PAM module): the config at
    /// `config` (never `$FSCRYPT_CONF`: the environment is the caller's),
    /// metadata trusted as [`Trust::for_login`] (root and the user, every
    /// owner with `allow_cross_user_metadata`), keys added as the user
    /// ([`Keyring::for_user`]), login protectors on `root`.
    pub fn for_login(user: &User, config: &Path, root: &Path) -> Context {
        let cfg = Config::load_from(config).ok();
        let allow = cfg.as_ref().is_some_and(|c| c.allow_cross_user_metadata);
        Context {
            keyring: Keyring::for_user(
                V1Keyring::from_config(cfg.as_ref()),
                user.uid,
                Some(user.gid),
            ),
            trust: Trust::for_login(user.uid, allow),
            config: cfg,
            config_path: Some(config.to_path_buf()),
            mounts: mountinfo::read_mountinfo().unwrap_or_default(),
            login_root: root.to_path_buf(),
        }
    }

    /// The config, if it could be read.
    pub fn config(&self) -> Option<&Config> {
        self.config.as_ref()
    }

    /// The config, which this action needs.
    ///
    /// # Errors
    /// [`Error::Metadata`] saying why it cannot be read.
    pub fn require_config(&self) -> Result<&Config> {
        match &self.config {
            Some(c) => Ok(c),
            None => Err(match &self.config_path {
                Some(p) => Config::load_from(p),
                None => Config::load(),
            }
            .err()
            .map(Error::Metadata)
            .unwrap_or_else(|| Error::Usage("the config changed while read".into()))),
        }
    }

    /// Whose metadata is believed.
    pub fn trust(&self) -> Trust {
        self.trust
    }

    /// Where keys go.
    pub fn keyring(&self) -> Keyring {
        self.keyring
    }

    /// The mount table this context was built with.
    pub fn mounts(&self) -> &[MountInfo] {
        &self.mounts
    }

    /// The mount holding `path`.
    ///
    /// # Errors
    /// [`Error::Mount`].
    pub fn mount_of(&self, path: &Path) -> Result<MountInfo> {
        Ok(mountinfo::find_mount_in(&self.mounts, path)?)
    }

    /// The filesystem type mounted at `mount` (empty if unknown).
    pub fn fs_type(&self, mount: &Path) -> String {
        self.mounts
            .iter()
            .rev()
            .find(|m| m.mount_point == mount)
            .map(|m| m.fs_type.clone())
            .unwrap_or_default()
    }

    /// The metadata of the filesystem mounted at `mount`, read with this
    /// context's trust (not checked).
    pub fn store_at(&self, mount: impl Into<PathBuf>) -> Store {
        Store::new(mount, self.trust)
    }

    /// The metadata of the filesystem holding `path`, checked.
    ///
    /// # Errors
    /// Not set up, insecure.
    pub fn store_of(&self, path: &Path) -> Result<Store> {
        let store = self.store_at(self.mount_of(path)?.mount_point);
        store.check_setup()?;
        Ok(store)
    }

    /// The metadata at mount point `mount` (as given by a user, e.g.
    /// `MOUNT:ID`), checked.
    ///
    /// # Errors
    /// The mount point does not exist; not set up, insecure.
    pub fn store_at_checked(&self, mount: &Path) -> Result<Store> {
        let m = std::fs::canonicalize(mount).map_err(|e| Error::io(mount, e))?;
        let store = self.store_at(m);
        store.check_setup()?;
        Ok(store)
    }

    /// The login filesystem, where login protectors live.
    pub fn login_root(&self) -> &Path {
        &self.login_root
    }

    /// The login filesystem's metadata, checked.
    ///
    /// # Errors
    /// [`Error::RootNotSetup`]; insecure.
    pub fn root_store(&self) -> Result<Store> {
        let store = self.store_at(&self.login_root);
        store.check_setup().map_err(|e| match e {
            fscrypt_metadata::Error::NotSetup { mount } => Error::RootNotSetup { mount },
            e => Error::Metadata(e),
        })?;
        Ok(store)
    }

    /// The main mount of every mounted filesystem (the first mount of each
    /// device whose root is the filesystem's root), for following link
    /// files; with `filter`, only the mounts it accepts.
    pub fn main_mounts_where(&self, filter: impl Fn(&MountInfo) -> bool) -> Vec<MainMount> {
        let mut out: Vec<MainMount> = Vec::new();
        for m in &self.mounts {
            if m.root != Path::new("/")
                || !filter(m)
                || out.iter().any(|o| (o.major, o.minor) == (m.major, m.minor))
            {
                continue;
            }
            out.push(MainMount {
                path: m.mount_point.clone(),
                major: m.major,
                minor: m.minor,
            });
        }
        out
    }

    /// Every main mount ([`Context::main_mounts_where`] without a filter).
    pub fn main_mounts(&self) -> Vec<MainMount> {
        self.main_mounts_where(|_| true)
    }

    /// The main mount of the filesystem holding `path`.
    ///
    /// # Errors
    /// [`Error::Mount`].
    pub fn main_mount_of(&self, path: &Path) -> Result<MainMount> {
        let m = self.mount_of(path)?;
        Ok(MainMount {
            path: m.mount_point,
            major: m.major,
            minor: m.minor,
        })
    }
}
