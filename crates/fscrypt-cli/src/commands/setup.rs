//! `fscrypt-rs setup [MOUNTPOINT]`: google/fscrypt's global config and a
//! filesystem's `.fscrypt` metadata directory.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use fscrypt_metadata::config::{self, Config};
use fscrypt_metadata::store::{SetupMode, Store};

use crate::support::gfs::{self, EXIT_ALREADY, OutputArgs};
use crate::support::kernel;

/// Arguments of `fscrypt-rs setup`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Set up google/fscrypt-compatible metadata (global config, a filesystem's .fscrypt)",
    long_about = "Without MOUNTPOINT: create the global config (/etc/fscrypt.conf, or $FSCRYPT_CONF) \
                  with Argon2id costs that take about --time on this machine, then the metadata \
                  directory of the root filesystem ($FSCRYPT_ROOT_MNT, else /). With MOUNTPOINT: \
                  create MOUNTPOINT/.fscrypt/{policies,protectors} (and the global config if it is \
                  missing). The files are read and written exactly as google/fscrypt 0.3.x does.\n\n\
                  Exit status: 0 done; 25 already set up; 22 bad config; 21 unsafe .fscrypt; 1 error."
)]
pub struct Args {
    /// The mount point of an ext4/f2fs filesystem with encryption enabled.
    pub mountpoint: Option<PathBuf>,
    /// Target time of one passphrase hash for new configs, in seconds
    /// (e.g. 1, 0.5, 0.001).
    #[arg(long, default_value = "1", value_name = "SECONDS")]
    pub time: f64,
    /// Policy version of new policies in a new config (2 is the default
    /// of google/fscrypt 0.3.x; 1 for old kernels).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(i64).range(1..=2))]
    pub policy_version: i64,
    /// Let every user create protectors and policies (directories 01777
    /// instead of 0755).
    #[arg(long)]
    pub all_users: bool,
    /// `--json`, `--quiet`.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Runs `fscrypt-rs setup`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.out.json;
    gfs::report(json, || exec_inner(args))
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    let conf_path = config::path();
    let mut created_config = false;
    if std::fs::symlink_metadata(&conf_path).is_err() {
        if !args.time.is_finite() || args.time <= 0.0 || args.time > 60.0 {
            anyhow::bail!("--time must be between 0 and 60 seconds");
        }
        let costs = config::calibrate_costs(Duration::from_secs_f64(args.time), 1 << 20)
            .map_err(gfs::meta)?;
        Config::new(costs, args.policy_version)
            .save()
            .map_err(gfs::meta)?;
        created_config = true;
    } else {
        // An existing config must be valid before anything else is made.
        Config::load().map_err(gfs::meta)?;
    }
    let mount = match &args.mountpoint {
        Some(m) => {
            let canon = std::fs::canonicalize(m)?;
            if gfs::mount_of(&canon)? != canon {
                anyhow::bail!(
                    "{} is not a mount point; give the filesystem's mount point",
                    m.display()
                );
            }
            canon
        }
        None => config::root_mount(),
    };
    let store = Store::new(&mount, gfs::trust());
    let mode = if args.all_users {
        SetupMode::WorldWritable
    } else {
        SetupMode::SingleUserWritable
    };
    let made = match store.setup(mode) {
        Ok(()) => true,
        Err(fscrypt_metadata::Error::AlreadySetup { .. }) if args.mountpoint.is_none() => false,
        Err(fscrypt_metadata::Error::AlreadySetup { mount }) if !created_config => {
            return Err(gfs::failure(
                EXIT_ALREADY,
                "already_setup",
                format!(
                    "filesystem {} is already set up for fscrypt",
                    mount.display()
                ),
            ));
        }
        Err(fscrypt_metadata::Error::AlreadySetup { .. }) => false,
        Err(e) => return Err(gfs::meta(e)),
    };
    if args.out.json {
        kernel::print_json(&serde_json::json!({
            "ok": true,
            "config": conf_path.display().to_string(),
            "config_created": created_config,
            "mount": mount.display().to_string(),
            "metadata_created": made,
        }))?;
    } else if !args.out.quiet {
        if created_config {
            println!("Created global config file {}.", conf_path.display());
        }
        if made {
            println!(
                "Metadata directories created at {}.",
                store.base_dir().display()
            );
        } else {
            println!("{} is already set up.", store.base_dir().display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
