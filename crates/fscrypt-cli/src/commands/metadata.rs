//! `fscrypt-rs metadata`: google/fscrypt metadata management. This slice
//! has `dump`; create/destroy/add/remove/change-passphrase come later.

use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt_metadata::config::{self, Config};
use fscrypt_metadata::store::Store;

use crate::support::gfs;
use crate::support::kernel;

/// Arguments of `fscrypt-rs metadata`.
#[derive(clap::Args, Debug)]
#[command(about = "Inspect google/fscrypt-compatible metadata (.fscrypt, /etc/fscrypt.conf)")]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub command: Sub,
}

/// `metadata` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Sub {
    /// Print the global config and every protector and policy of a
    /// filesystem (no secrets: salts and wrapped keys are left out).
    Dump(DumpArgs),
}

/// Arguments of `fscrypt-rs metadata dump`.
#[derive(clap::Args, Debug)]
#[command(
    long_about = "Print the global config and every protector and policy of the \
                        filesystem mounted at MOUNTPOINT (default: the root mount, \
                        $FSCRYPT_ROOT_MNT or /). Exit status: 0; 20 corrupt file; 21 unsafe \
                        metadata directory; 22 not set up; 1 error."
)]
pub struct DumpArgs {
    /// The mount point.
    pub mountpoint: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `fscrypt-rs metadata`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Sub::Dump(a) => {
            let json = a.json;
            gfs::report(json, || dump(a))
        }
    }
}

fn dump(args: DumpArgs) -> anyhow::Result<ExitCode> {
    let mount = match &args.mountpoint {
        Some(m) => gfs::mount_of(m)?,
        None => config::root_mount(),
    };
    let store = Store::new(&mount);
    store.check_setup().map_err(gfs::meta)?;
    let conf = Config::load().ok();
    let mut protectors = Vec::new();
    for d in store.protectors().map_err(gfs::meta)? {
        protectors.push(store.protector(&d).map_err(gfs::meta)?);
    }
    let mut policies = Vec::new();
    for d in store.policies().map_err(gfs::meta)? {
        policies.push(store.policy(&d).map_err(gfs::meta)?);
    }
    if args.json {
        kernel::print_json(&serde_json::json!({
            "ok": true,
            "config_path": config::path().display().to_string(),
            "config": conf.as_ref().map(|c| serde_json::from_str::<serde_json::Value>(&c.to_json()).unwrap_or_default()),
            "mount": mount.display().to_string(),
            "setup_mode": store.setup_mode().map(|m| format!("{m:?}")),
            "protectors": protectors.iter().map(gfs::protector_json).collect::<Vec<_>>(),
            "policies": policies.iter().map(|p| serde_json::json!({
                "descriptor": p.key_descriptor,
                "options": gfs::options_json(&p.opts()),
                "protectors": p.wrapped_policy_keys.iter().map(|s| s.protector_descriptor.clone()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut o = String::new();
    match &conf {
        Some(c) => o.push_str(&format!(
            "Config {}:\n{}",
            config::path().display(),
            c.to_json()
        )),
        None => o.push_str(&format!(
            "Config {}: missing or invalid\n",
            config::path().display()
        )),
    }
    o.push_str(&format!(
        "\nFilesystem {} ({}):\n",
        mount.display(),
        store.base_dir().display()
    ));
    for p in &protectors {
        o.push_str(&format!(
            "Protector {}: {}",
            p.protector_descriptor,
            gfs::describe_protector(p)
        ));
        if let Some(c) = &p.costs {
            o.push_str(&format!(
                " (Argon2id t={} m={} KiB p={})",
                c.time, c.memory, c.parallelism
            ));
        }
        o.push('\n');
    }
    for p in &policies {
        let opts = p.opts();
        let slots: Vec<&str> = p
            .wrapped_policy_keys
            .iter()
            .map(|s| s.protector_descriptor.as_str())
            .collect();
        o.push_str(&format!(
            "Policy {}: v{} {} {} padding {}; protectors {}\n",
            p.key_descriptor,
            opts.version(),
            gfs::options_json(&opts)["contents"].as_str().unwrap_or("?"),
            gfs::options_json(&opts)["filenames"]
                .as_str()
                .unwrap_or("?"),
            opts.padding,
            slots.join(", ")
        ));
    }
    kernel::out(format_args!("{o}"))?;
    Ok(ExitCode::SUCCESS)
}
