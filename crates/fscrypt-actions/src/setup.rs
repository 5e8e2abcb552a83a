//! `fscrypt-rs setup`: google/fscrypt's global config (created with
//! Argon2id costs calibrated on this machine, as `fscrypt setup` does) and
//! a filesystem's `.fscrypt` metadata directory.

use std::path::{Path, PathBuf};
use std::time::Duration;

use fscrypt_metadata::config::{self, Config};
use fscrypt_metadata::store::SetupMode;

use crate::context::Context;
use crate::error::{Error, Result};

/// The global config after [`ensure_config`].
#[derive(Clone, Debug)]
pub struct ConfigSetup {
    /// Its path (`$FSCRYPT_CONF`, else `/etc/fscrypt.conf`).
    pub path: PathBuf,
    /// Whether it was created now.
    pub created: bool,
}

/// Creates the global config if there is none: hashing costs that take
/// about `time` seconds here (at most 1 GiB of memory), policy version
/// `policy_version` for new policies; an existing one must be valid.
///
/// # Errors
/// [`Error::Usage`] for a `time` outside (0, 60]; the calibration; an
/// invalid existing config; the write.
pub fn ensure_config(time: f64, policy_version: i64) -> Result<ConfigSetup> {
    let path = config::path();
    let mut created = false;
    if std::fs::symlink_metadata(&path).is_err() {
        if !time.is_finite() || time <= 0.0 || time > 60.0 {
            return Err(Error::Usage(
                "--time must be between 0 and 60 seconds".into(),
            ));
        }
        let costs = config::calibrate_costs(Duration::from_secs_f64(time), 1 << 20)?;
        Config::new(costs, policy_version).save()?;
        created = true;
    } else {
        // An existing config must be valid before anything else is made.
        Config::load()?;
    }
    Ok(ConfigSetup { path, created })
}

/// A filesystem's metadata directory after [`setup_mount`].
#[derive(Clone, Debug)]
pub struct MountSetup {
    /// The filesystem's mount point.
    pub mount: PathBuf,
    /// Its metadata directory (`MOUNT/.fscrypt`).
    pub base_dir: PathBuf,
    /// Whether it was created now.
    pub created: bool,
}

/// Creates `.fscrypt/{policies,protectors}` on the filesystem mounted at
/// `mountpoint` (default: the login filesystem, `$FSCRYPT_ROOT_MNT` or
/// `/`), writable by everyone (01777) with `all_users`, else by its owner
/// only (0755). A filesystem already set up is fine without a
/// `mountpoint`, or when the config was just created
/// (`config_created`); otherwise it is an error, as in google/fscrypt.
///
/// # Errors
/// [`Error::Resolve`] when `mountpoint` cannot be resolved;
/// [`Error::Usage`] when it is not a mount point;
/// [`fscrypt_metadata::Error::AlreadySetup`]; the metadata's.
pub fn setup_mount(
    ctx: &Context,
    mountpoint: Option<&Path>,
    all_users: bool,
    config_created: bool,
) -> Result<MountSetup> {
    let mount = match mountpoint {
        Some(m) => {
            let canon = std::fs::canonicalize(m).map_err(Error::Resolve)?;
            if ctx.mount_of(&canon)?.mount_point != canon {
                return Err(Error::Usage(format!(
                    "{} is not a mount point; give the filesystem's mount point",
                    m.display()
                )));
            }
            canon
        }
        None => config::root_mount(),
    };
    let store = ctx.store_at(&mount);
    let mode = if all_users {
        SetupMode::WorldWritable
    } else {
        SetupMode::SingleUserWritable
    };
    let created = match store.setup(mode) {
        Ok(()) => true,
        Err(fscrypt_metadata::Error::AlreadySetup { .. }) if mountpoint.is_none() => false,
        Err(e @ fscrypt_metadata::Error::AlreadySetup { .. }) if !config_created => {
            return Err(e.into());
        }
        Err(fscrypt_metadata::Error::AlreadySetup { .. }) => false,
        Err(e) => return Err(e.into()),
    };
    Ok(MountSetup {
        base_dir: store.base_dir(),
        mount,
        created,
    })
}

/// The outcome of [`run`].
#[derive(Clone, Debug)]
pub struct Setup {
    /// The global config.
    pub config: ConfigSetup,
    /// The filesystem's metadata.
    pub mount: MountSetup,
}

/// `fscrypt-rs setup [MOUNTPOINT]`: [`ensure_config`], then
/// [`setup_mount`] with the command-line tools' context
/// ([`Context::for_caller`], built once the config exists).
///
/// # Errors
/// As [`ensure_config`] and [`setup_mount`].
pub fn run(
    time: f64,
    policy_version: i64,
    mountpoint: Option<&Path>,
    all_users: bool,
) -> Result<Setup> {
    let config = ensure_config(time, policy_version)?;
    let ctx = Context::for_caller();
    let mount = setup_mount(&ctx, mountpoint, all_users, config.created)?;
    Ok(Setup { config, mount })
}
