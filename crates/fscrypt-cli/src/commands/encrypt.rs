//! `fscrypt-rs encrypt DIR`: google/fscrypt-style encryption of an empty
//! directory: a protector (new or given), a new policy whose random key it
//! wraps, the key added to the filesystem keyring, the policy set.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use zeroize::Zeroizing;

use fscrypt_metadata::actions;
use fscrypt_metadata::config::Config;
use fscrypt_metadata::proto::{ProtectorData, SourceType};
use fscrypt_metadata::recovery;
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
    #[arg(long, value_parser = ["custom_passphrase", "raw_key", "pam_passphrase"])]
    pub source: Option<String>,
    /// For `--source pam_passphrase`: the user whose login protector (on
    /// the root filesystem, `$FSCRYPT_ROOT_MNT` or `/`) protects DIR;
    /// default: the caller. The passphrase is that user's login password.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// Name of a new protector (required for new protectors).
    #[arg(long)]
    pub name: Option<String>,
    /// Use this existing protector instead of creating one.
    #[arg(long, value_name = "MOUNTPOINT:ID", conflicts_with_all = ["source", "name", "user"])]
    pub protector: Option<MountId>,
    /// Do not add a recovery passphrase when the protector is on another
    /// filesystem (a login protector on the root filesystem protecting a
    /// directory elsewhere): without it, losing the root filesystem loses
    /// the directory.
    #[arg(long)]
    pub no_recovery: bool,
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
    let chosen = match &args.protector {
        Some(r) => {
            let pstore = Store::new(std::fs::canonicalize(&r.mount)?);
            pstore.check_setup().map_err(gfs::meta)?;
            let p = pstore.protector(&r.id).map_err(gfs::meta)?;
            let what = format!("protector {}", r.id);
            let secret = gfs::read_secret(&args.secret, p.source_type(), &what, false)?;
            let key = actions::open_protector(&p, &secret).map_err(gfs::meta)?;
            Chosen {
                protector: p,
                key,
                store: pstore,
                created: false,
            }
        }
        None => {
            let source = match args.source.as_deref() {
                Some(s) => SourceType::from_name(s).unwrap_or(SourceType::CustomPassphrase),
                None => config.source,
            };
            if source == SourceType::PamPassphrase {
                return encrypt_with(&args, &store, &config, login_protector(&args, &config)?);
            }
            if args.user.is_some() {
                anyhow::bail!("--user is for login protectors: add --source pam_passphrase");
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
            Chosen {
                protector: p,
                key,
                store: store.clone(),
                created: true,
            }
        }
    };
    encrypt_with(&args, &store, &config, chosen)
}

/// The protector a new policy is wrapped by.
struct Chosen {
    protector: fscrypt_metadata::proto::ProtectorData,
    key: fscrypt_metadata::keys::Key32,
    /// Where the protector is (or goes, when created).
    store: Store,
    created: bool,
}

/// The user's login protector on the root filesystem: opened with the
/// login passphrase when it exists, else created.
fn login_protector(args: &Args, config: &Config) -> anyhow::Result<Chosen> {
    if args.name.is_some() {
        anyhow::bail!(
            "login protectors are identified by their user, not a name: drop --name (and give --user NAME)"
        );
    }
    let user = gfs::login_user(args.user.as_deref())?;
    let root = gfs::root_store()?;
    let what = format!("login passphrase of {}", user.name);
    match fscrypt_metadata::login::login_protector(&root, i64::from(user.uid)).map_err(gfs::meta)? {
        Some(p) => {
            let secret = gfs::read_secret(&args.secret, p.source_type(), &what, false)?;
            let key = actions::open_protector(&p, &secret).map_err(gfs::meta)?;
            Ok(Chosen {
                protector: p,
                key,
                store: root,
                created: false,
            })
        }
        None => {
            let secret = gfs::read_secret(&args.secret, SourceType::PamPassphrase, &what, true)?;
            gfs::check_login_passphrase(&user.name, &secret)?;
            let (p, key) = actions::new_protector(
                SourceType::PamPassphrase,
                "",
                &config.hash_costs,
                &secret,
                i64::from(user.uid),
            )
            .map_err(gfs::meta)?;
            Ok(Chosen {
                protector: p,
                key,
                store: root,
                created: true,
            })
        }
    }
}

fn encrypt_with(
    args: &Args,
    store: &Store,
    config: &Config,
    chosen: Chosen,
) -> anyhow::Result<ExitCode> {
    let dir = &args.dir;
    let Chosen {
        protector,
        key: protector_key,
        store: pstore,
        created: new_protector,
    } = chosen;
    // Root encrypting with a user's login protector: the new metadata is
    // the user's (google/fscrypt's rule), so the user can read it.
    let owner = metadata_owner(&protector);
    let store = &store.clone().owned_by(owner);
    let pstore = pstore.owned_by(owner);
    let (mut policy, policy_key) = actions::new_policy(
        &config.options,
        &protector.protector_descriptor,
        &protector_key,
    )
    .map_err(gfs::meta)?;
    let kpolicy = gfs::kernel_policy(&policy)?;
    // google/fscrypt's rule: a policy whose protector is on another
    // filesystem also gets a recovery passphrase, kept beside the policy.
    let elsewhere = pstore.mount() != store.mount();
    let recovery = if elsewhere && !args.no_recovery {
        Some(new_recovery(
            store,
            &mut policy,
            &policy_key,
            dir,
            &config.hash_costs,
        )?)
    } else {
        None
    };
    let drop_recovery = || {
        if let Some((_, rp)) = &recovery {
            let _ = store.remove_protector(&rp.protector_descriptor);
        }
    };
    // Metadata first (a crash leaves unused metadata, never an encrypted
    // directory without its policy file), then the key, then the policy.
    if let Some((_, rp)) = &recovery {
        store.put_protector(rp).map_err(gfs::meta)?;
    }
    if new_protector && let Err(e) = pstore.put_protector(&protector) {
        drop_recovery();
        return Err(gfs::meta(e));
    }
    let linked = if elsewhere {
        let target = gfs::main_mount_of(pstore.mount())?;
        match fscrypt_metadata::login::link_protector(
            store,
            &protector.protector_descriptor,
            &target,
        ) {
            Ok(made) => made,
            Err(e) => {
                if new_protector {
                    let _ = pstore.remove_protector(&protector.protector_descriptor);
                }
                drop_recovery();
                return Err(gfs::meta(e));
            }
        }
    } else {
        false
    };
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
            let _ = pstore.remove_protector(&protector.protector_descriptor);
        }
        if linked {
            let _ = store.remove_protector(&protector.protector_descriptor);
        }
        drop_recovery();
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
    let readme = match &recovery {
        Some((pass, rp)) => Some(write_recovery_readme(store, &policy, dir, pass, rp)?),
        None => None,
    };
    if args.json {
        kernel::print_json(&serde_json::json!({
            "ok": true,
            "dir": dir.display().to_string(),
            "policy": policy.key_descriptor,
            "options": gfs::options_json(&policy.opts()),
            "protector": gfs::protector_json(&protector),
            "protector_created": new_protector,
            "recovery_protector": recovery.as_ref().map(|(_, rp)| gfs::protector_json(rp)),
            "recovery_readme": readme.as_ref().map(|p| p.display().to_string()),
        }))?;
    } else if !args.quiet {
        println!(
            "{} is now encrypted (policy {}, protector {}: {}) and unlocked.",
            dir.display(),
            policy.key_descriptor,
            protector.protector_descriptor,
            gfs::describe_protector(&protector)
        );
        if let Some(r) = &readme {
            println!(
                "A recovery passphrase was added: see {}. Copy it somewhere safe: without it, \
                 losing the root filesystem (where the login protector is) loses this directory.",
                r.display()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Owner (uid, gid) for new metadata: the login protector's user when
/// root writes it, else `None` (the caller's).
fn metadata_owner(p: &ProtectorData) -> Option<(u32, u32)> {
    if p.source_type() != SourceType::PamPassphrase || !rustix::process::geteuid().is_root() {
        return None;
    }
    let uid = u32::try_from(p.uid).ok()?;
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)).ok()??;
    Some((uid, user.gid.as_raw()))
}

/// A recovery protector for `dir` (named so no protector on `store` has
/// the name), added to `policy`; not stored yet.
fn new_recovery(
    store: &Store,
    policy: &mut fscrypt_metadata::proto::PolicyData,
    policy_key: &fscrypt_metadata::actions::PolicyKey,
    dir: &Path,
    costs: &fscrypt_metadata::proto::HashingCosts,
) -> anyhow::Result<(Zeroizing<Vec<u8>>, ProtectorData)> {
    let names: Vec<String> = store
        .protectors()
        .map_err(gfs::meta)?
        .iter()
        .filter_map(|d| store.protector(d).ok().map(|p| p.name))
        .collect();
    let dirname = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    let name = recovery::protector_name(&dirname, |n| names.iter().any(|x| x == n));
    recovery::add_recovery(policy, policy_key, &name, costs).map_err(gfs::meta)
}

/// Writes the recovery instructions into the (now encrypted, unlocked)
/// directory: a new file (never through a symlink), mode 0600, owned by
/// the directory's owner, synced.
fn write_recovery_readme(
    store: &Store,
    policy: &fscrypt_metadata::proto::PolicyData,
    dir: &Path,
    pass: &[u8],
    rp: &ProtectorData,
) -> anyhow::Result<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let path = dir.join(recovery::README_NAME);
    let m = store.mount().display();
    let text = recovery::instructions(
        pass,
        &rp.name,
        &format!("{m}:{}", rp.protector_descriptor),
        &format!("{m}:{}", policy.key_descriptor),
    );
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    f.write_all(text.as_bytes())?;
    let owner = std::fs::metadata(dir)?;
    std::os::unix::fs::fchown(&f, Some(owner.uid()), Some(owner.gid()))?;
    f.sync_all()?;
    Ok(path)
}
