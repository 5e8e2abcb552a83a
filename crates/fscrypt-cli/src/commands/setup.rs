//! `fscrypt-rs setup [MOUNTPOINT]`: google/fscrypt's global config and a
//! filesystem's `.fscrypt` metadata directory.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::support::gfs::{self, OutputArgs};
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
    let done = fscrypt_actions::setup::run(
        args.time,
        args.policy_version,
        args.mountpoint.as_deref(),
        args.all_users,
    )
    .map_err(gfs::actions)?;
    let (conf, fs) = (&done.config, &done.mount);
    if args.out.json {
        kernel::print_json(&serde_json::json!({
            "ok": true,
            "config": conf.path.display().to_string(),
            "config_created": conf.created,
            "mount": fs.mount.display().to_string(),
            "metadata_created": fs.created,
        }))?;
    } else if !args.out.quiet {
        if conf.created {
            println!("Created global config file {}.", conf.path.display());
        }
        if fs.created {
            println!("Metadata directories created at {}.", fs.base_dir.display());
        } else {
            println!("{} is already set up.", fs.base_dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
