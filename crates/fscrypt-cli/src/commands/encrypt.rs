//! `fscrypt-rs encrypt DIR`: google/fscrypt-style encryption of an empty
//! directory: a protector (new or given), a new policy whose random key it
//! wraps, the key added to the filesystem keyring, the policy set.

use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt_metadata::actions;
use fscrypt_metadata::config::Config;
use fscrypt_metadata::proto::SourceType;
use fscrypt_metadata::store::Store;

use crate::support::gfs::{self, EXIT_ALREADY, EXIT_NOT_EMPTY, MountId, SecretArgs};
use crate::support::kernel;

/// Arguments of `fscrypt-rs encrypt`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Encrypt an empty directory google/fscrypt-style (protector + policy in .fscrypt)",
    long_about = "Create (or reuse, with --protector) a protector, create a policy with a random \
                  key wrapped by it, add the key to the filesystem keyring and set the policy on \
                  the empty directory DIR. The metadata is google/fscrypt 0.3.x's: `fscrypt \
                  unlock` works on the result. Passphrases come from the terminal, --passfile or \
                  one line of stdin.\n\nExit status: 0 done; 12 wrong passphrase or key; 22 not \
                  set up; 23 DIR not empty; 25 DIR already encrypted; 26 no encryption support; \
                  20/21 corrupt or unsafe metadata; 1 error."
)]
pub struct Args {
    /// An empty directory on a filesystem set up with `fscrypt-rs setup`.
    pub dir: PathBuf,
    /// Source of a new protector (default: the config's).
    #[arg(long, value_parser = ["custom_passphrase", "raw_key"])]
    pub source: Option<String>,
    /// Name of a new protector (required for new protectors).
    #[arg(long)]
    pub name: Option<String>,
    /// Use this existing protector instead of creating one.
    #[arg(long, value_name = "MOUNTPOINT:ID", conflicts_with_all = ["source", "name"])]
    pub protector: Option<MountId>,
    /// Secrets.
    #[command(flatten)]
    pub secret: SecretArgs,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Runs `fscrypt-rs encrypt`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.json;
    gfs::report(json, || exec_inner(args))
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    let dir = &args.dir;
    let md =
        std::fs::symlink_metadata(dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    if !md.is_dir() {
        anyhow::bail!("{} is not a directory", dir.display());
    }
    if gfs::dir_policy(dir)?.is_some() {
        return Err(gfs::failure(
            EXIT_ALREADY,
            "already_encrypted",
            format!(
                "{} is already encrypted; see `fscrypt-rs status {}`",
                dir.display(),
                dir.display()
            ),
        ));
    }
    if std::fs::read_dir(dir)?.next().is_some() {
        return Err(gfs::failure(
            EXIT_NOT_EMPTY,
            "directory_not_empty",
            format!(
                "{} is not empty; encrypt an empty directory and move the files in \
                 (--convert is not available yet)",
                dir.display()
            ),
        ));
    }
    let store = gfs::store_of(dir)?;
    let config = Config::load().map_err(gfs::meta)?;
    let (protector, protector_key, new_protector) = match &args.protector {
        Some(r) => {
            let pstore = Store::new(std::fs::canonicalize(&r.mount)?);
            if pstore.mount() != store.mount() {
                anyhow::bail!(
                    "protector {} is on another filesystem; protectors linked from another \
                     filesystem are not supported yet",
                    r.id
                );
            }
            let p = pstore.protector(&r.id).map_err(gfs::meta)?;
            let what = format!("protector {}", r.id);
            let secret = gfs::read_secret(&args.secret, p.source_type(), &what, false)?;
            let key = actions::open_protector(&p, &secret).map_err(gfs::meta)?;
            (p, key, false)
        }
        None => {
            let source = match args.source.as_deref() {
                Some(s) => SourceType::from_name(s).unwrap_or(SourceType::CustomPassphrase),
                None => config.source,
            };
            if source == SourceType::PamPassphrase {
                anyhow::bail!(
                    "login (pam_passphrase) protectors are not supported yet; use --source custom_passphrase or raw_key"
                );
            }
            let Some(name) = args.name.clone() else {
                anyhow::bail!(
                    "{} protectors must be named: add --name NAME",
                    source.name()
                );
            };
            for d in store.protectors().map_err(gfs::meta)? {
                if let Ok(p) = store.protector(&d)
                    && p.name == name
                {
                    anyhow::bail!(
                        "there is already a protector named {name:?} ({d}); use --protector {}:{d} or another --name",
                        store.mount().display()
                    );
                }
            }
            let secret =
                gfs::read_secret(&args.secret, source, &format!("protector {name:?}"), true)?;
            let (p, key) = actions::new_protector(source, &name, &config.hash_costs, &secret, 0)
                .map_err(gfs::meta)?;
            (p, key, true)
        }
    };
    let (policy, policy_key) = actions::new_policy(
        &config.options,
        &protector.protector_descriptor,
        &protector_key,
    )
    .map_err(gfs::meta)?;
    let kpolicy = gfs::kernel_policy(&policy)?;
    // Metadata first (a crash leaves unused metadata, never an encrypted
    // directory without its policy file), then the key, then the policy.
    if new_protector {
        store.put_protector(&protector).map_err(gfs::meta)?;
    }
    let undo = |key_added: bool| {
        if key_added {
            let _ = fscrypt_linux::keyring::remove_key(
                store.mount(),
                gfs::policy_key_spec(&kpolicy).1,
                false,
            );
        }
        let _ = std::fs::remove_file(store.policy_dir().join(&policy.key_descriptor));
        if new_protector {
            let _ =
                std::fs::remove_file(store.protector_dir().join(&protector.protector_descriptor));
        }
    };
    if let Err(e) = store.put_policy(&policy) {
        undo(false);
        return Err(gfs::meta(e));
    }
    if let Err(e) = gfs::add_policy_key(store.mount(), &policy, &policy_key[..]) {
        undo(false);
        return Err(e);
    }
    if let Err(e) = fscrypt_linux::policy::set_policy(dir, &kpolicy) {
        undo(true);
        return Err(e.into());
    }
    if args.json {
        kernel::print_json(&serde_json::json!({
            "ok": true,
            "dir": dir.display().to_string(),
            "policy": policy.key_descriptor,
            "options": gfs::options_json(&policy.opts()),
            "protector": gfs::protector_json(&protector),
            "protector_created": new_protector,
        }))?;
    } else if !args.quiet {
        println!(
            "{} is now encrypted (policy {}, protector {}: {}) and unlocked.",
            dir.display(),
            policy.key_descriptor,
            protector.protector_descriptor,
            gfs::describe_protector(&protector)
        );
    }
    Ok(ExitCode::SUCCESS)
}
