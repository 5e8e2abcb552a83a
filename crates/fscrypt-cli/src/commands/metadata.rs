//! `fscrypt-rs metadata`: google/fscrypt metadata management: create and
//! destroy protectors and policies, add a protector to a policy or remove
//! it, change a protector's passphrase (or raw key), dump.

use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt_metadata::config::{self, Config};
use fscrypt_metadata::store::Store;

use fscrypt_metadata::actions;
use fscrypt_metadata::proto::{PolicyData, ProtectorData, SourceType};

use crate::support::gfs::{self, MountId, OutputArgs, SecretArgs};
use crate::support::kernel;
use crate::support::secret::PassSource;

/// Arguments of `fscrypt-rs metadata`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Manage google/fscrypt-compatible metadata (.fscrypt, /etc/fscrypt.conf)",
    long_about = "Create, destroy, link and re-key google/fscrypt 0.3.x protectors and policies, \
                  or dump them. Secrets come from the terminal, --passfile or stdin (one line \
                  each, in the order asked), raw keys from --key FILE.\n\nExit status: 0 done; \
                  12 wrong passphrase or key; 20/21 corrupt or unsafe metadata; 22 not set up; \
                  24 no such protector or policy; 1 error."
)]
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
    /// Create a protector or a policy.
    #[command(subcommand)]
    Create(CreateSub),
    /// Remove a protector or a policy file (the data it protects becomes
    /// unreachable through it).
    Destroy(DestroyArgs),
    /// Let a protector unlock a policy too (its key wrapped again).
    AddProtectorToPolicy(AddArgs),
    /// Take a protector's slot out of a policy (never its last one).
    RemoveProtectorFromPolicy(RemoveArgs),
    /// Re-wrap a protector under a new passphrase (or raw key); the
    /// policies it protects stay reachable.
    ChangePassphrase(ChangeArgs),
}

/// `metadata create` subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum CreateSub {
    /// A new protector on MOUNTPOINT (login protectors: on the root
    /// filesystem).
    Protector(CreateProtectorArgs),
    /// A new policy on MOUNTPOINT, its random key wrapped by --protector.
    Policy(CreatePolicyArgs),
}

/// Arguments of `metadata create protector`.
#[derive(clap::Args, Debug)]
pub struct CreateProtectorArgs {
    /// The mount point.
    pub mountpoint: PathBuf,
    /// The protector's source (default: the config's).
    #[arg(long, value_parser = ["custom_passphrase", "raw_key", "pam_passphrase"])]
    pub source: Option<String>,
    /// Its name (custom_passphrase and raw_key).
    #[arg(long)]
    pub name: Option<String>,
    /// For pam_passphrase: the user (default: the caller).
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// Secrets.
    #[command(flatten)]
    pub secret: SecretArgs,
    /// `--json`, `--quiet`.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Arguments of `metadata create policy`.
#[derive(clap::Args, Debug)]
pub struct CreatePolicyArgs {
    /// The mount point.
    pub mountpoint: PathBuf,
    /// The protector wrapping the new key.
    #[arg(long, value_name = "MOUNTPOINT:ID")]
    pub protector: MountId,
    /// Secrets.
    #[command(flatten)]
    pub secret: SecretArgs,
    /// `--json`, `--quiet`.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Arguments of `metadata destroy`.
#[derive(clap::Args, Debug)]
pub struct DestroyArgs {
    /// A protector to remove.
    #[arg(
        long,
        value_name = "MOUNTPOINT:ID",
        required_unless_present = "policy",
        conflicts_with = "policy"
    )]
    pub protector: Option<MountId>,
    /// A policy to remove.
    #[arg(long, value_name = "MOUNTPOINT:ID")]
    pub policy: Option<MountId>,
    /// Also remove a protector that policies still use (they lose that
    /// way in).
    #[arg(long)]
    pub force: bool,
    /// `--json`, `--quiet`.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Arguments of `metadata add-protector-to-policy`.
#[derive(clap::Args, Debug)]
pub struct AddArgs {
    /// The protector to add.
    #[arg(long, value_name = "MOUNTPOINT:ID")]
    pub protector: MountId,
    /// The policy.
    #[arg(long, value_name = "MOUNTPOINT:ID")]
    pub policy: MountId,
    /// A protector of the policy that opens it (default: its only one).
    #[arg(long, value_name = "MOUNTPOINT:ID")]
    pub unlock_with: Option<MountId>,
    /// The key file of a raw_key protector being added.
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// The key file of a raw_key --unlock-with protector.
    #[arg(long, value_name = "FILE")]
    pub unlock_key: Option<PathBuf>,
    /// Passphrases: the added protector's first, then the unlocking one's.
    #[command(flatten)]
    pub pass: PassSource,
    /// `--json`, `--quiet`.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Arguments of `metadata remove-protector-from-policy`.
#[derive(clap::Args, Debug)]
pub struct RemoveArgs {
    /// The protector.
    #[arg(long, value_name = "MOUNTPOINT:ID")]
    pub protector: MountId,
    /// The policy.
    #[arg(long, value_name = "MOUNTPOINT:ID")]
    pub policy: MountId,
    /// `--json`, `--quiet`.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Arguments of `metadata change-passphrase`.
#[derive(clap::Args, Debug)]
pub struct ChangeArgs {
    /// The protector.
    #[arg(long, value_name = "MOUNTPOINT:ID")]
    pub protector: MountId,
    /// The old secret (passphrase from the terminal, --passfile or the
    /// first line of stdin; raw key: --key).
    #[command(flatten)]
    pub secret: SecretArgs,
    /// The new passphrase's file (default: the terminal, asked twice, or
    /// the next line of stdin).
    #[arg(long, value_name = "FILE")]
    pub new_passfile: Option<PathBuf>,
    /// The new key file of a raw_key protector.
    #[arg(long, value_name = "FILE")]
    pub new_key: Option<PathBuf>,
    /// `--json`, `--quiet`.
    #[command(flatten)]
    pub out: OutputArgs,
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
        Sub::Create(CreateSub::Protector(a)) => {
            let json = a.out.json;
            gfs::report(json, || create_protector(a))
        }
        Sub::Create(CreateSub::Policy(a)) => {
            let json = a.out.json;
            gfs::report(json, || create_policy(a))
        }
        Sub::Destroy(a) => {
            let json = a.out.json;
            gfs::report(json, || destroy(a))
        }
        Sub::AddProtectorToPolicy(a) => {
            let json = a.out.json;
            gfs::report(json, || add_protector(a))
        }
        Sub::RemoveProtectorFromPolicy(a) => {
            let json = a.out.json;
            gfs::report(json, || remove_protector(a))
        }
        Sub::ChangePassphrase(a) => {
            let json = a.out.json;
            gfs::report(json, || change_passphrase(a))
        }
    }
}

/// Prints the result of an edit: JSON, or `text` unless quiet.
fn done(json: bool, quiet: bool, j: serde_json::Value, text: &str) -> anyhow::Result<ExitCode> {
    if json {
        let mut j = j;
        j["ok"] = true.into();
        kernel::print_json(&j)?;
    } else if !quiet {
        println!("{text}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The checked store of the filesystem mounted at (or holding) `mount`.
fn store_at(mount: &std::path::Path) -> anyhow::Result<Store> {
    let m =
        std::fs::canonicalize(mount).map_err(|e| anyhow::anyhow!("{}: {e}", mount.display()))?;
    gfs::store_of(&m)
}

/// A protector named by `MOUNT:ID`: the file there or behind its link.
fn protector_at(r: &MountId) -> anyhow::Result<(Store, ProtectorData)> {
    gfs::locate_protector(&store_at(&r.mount)?, &r.id)
}

/// A policy named by `MOUNT:ID`.
fn policy_at(r: &MountId) -> anyhow::Result<(Store, PolicyData)> {
    let store = store_at(&r.mount)?;
    let p = store.policy(&r.id).map_err(gfs::meta)?;
    Ok((store, p))
}

/// Opens a protector with a secret read as `secret` says.
fn open(p: &ProtectorData, secret: &SecretArgs) -> anyhow::Result<fscrypt_metadata::keys::Key32> {
    let what = format!(
        "{} ({})",
        gfs::describe_protector(p),
        p.protector_descriptor
    );
    let s = gfs::read_secret(secret, p.source_type(), &what, false)?;
    actions::open_protector(p, &s).map_err(gfs::meta)
}

fn create_protector(a: CreateProtectorArgs) -> anyhow::Result<ExitCode> {
    let config = Config::load().map_err(gfs::meta)?;
    let source = match a.source.as_deref() {
        Some(s) => SourceType::from_name(s).unwrap_or(SourceType::CustomPassphrase),
        None => config.source,
    };
    let (store, name, uid) = if source == SourceType::PamPassphrase {
        if a.name.is_some() {
            anyhow::bail!("login protectors are identified by their user: drop --name");
        }
        let user = gfs::login_user(a.user.as_deref())?;
        let root = gfs::root_store()?;
        if store_at(&a.mountpoint)?.mount() != root.mount() {
            anyhow::bail!(
                "login protectors live on the root filesystem {}; give that mount point",
                root.mount().display()
            );
        }
        if let Some(p) = fscrypt_metadata::login::login_protector(&root, i64::from(user.uid))
            .map_err(gfs::meta)?
        {
            return Err(gfs::failure(
                gfs::EXIT_ALREADY,
                "already_exists",
                format!(
                    "user {} already has a login protector ({}:{})",
                    user.name,
                    root.mount().display(),
                    p.protector_descriptor
                ),
            ));
        }
        (root, user.name, i64::from(user.uid))
    } else {
        if a.user.is_some() {
            anyhow::bail!("--user is for login protectors: add --source pam_passphrase");
        }
        let Some(name) = a.name.clone() else {
            anyhow::bail!(
                "{} protectors must be named: add --name NAME",
                source.name()
            );
        };
        let store = store_at(&a.mountpoint)?;
        for d in store.protectors().map_err(gfs::meta)? {
            if store.protector(&d).is_ok_and(|p| p.name == name) {
                anyhow::bail!(
                    "there is already a protector named {name:?} ({d}); choose another --name"
                );
            }
        }
        (store, name, 0)
    };
    let what = if source == SourceType::PamPassphrase {
        "the login protector".to_string()
    } else {
        format!("protector {name:?}")
    };
    let secret = gfs::read_secret(&a.secret, source, &what, true)?;
    // For a login protector `name` is the user's (login protectors have no
    // name of their own).
    let name = if source == SourceType::PamPassphrase {
        gfs::check_login_passphrase(&name, &secret)?;
        String::new()
    } else {
        name
    };
    let (p, _) = actions::new_protector(source, &name, &config.hash_costs, &secret, uid)
        .map_err(gfs::meta)?;
    store.put_protector(&p).map_err(gfs::meta)?;
    done(
        a.out.json,
        a.out.quiet,
        serde_json::json!({"mount": store.mount().display().to_string(), "protector": gfs::protector_json(&p)}),
        &format!(
            "Protector {} created on {}: {}.",
            p.protector_descriptor,
            store.mount().display(),
            gfs::describe_protector(&p)
        ),
    )
}

fn create_policy(a: CreatePolicyArgs) -> anyhow::Result<ExitCode> {
    let config = Config::load().map_err(gfs::meta)?;
    let store = store_at(&a.mountpoint)?;
    let (pstore, prot) = protector_at(&a.protector)?;
    let key = open(&prot, &a.secret)?;
    let (policy, _) = actions::new_policy(&config.options, &prot.protector_descriptor, &key)
        .map_err(gfs::meta)?;
    let linked = link_if_needed(&store, &pstore, &prot.protector_descriptor)?;
    if let Err(e) = store.put_policy(&policy) {
        if linked {
            let _ = store.remove_protector(&prot.protector_descriptor);
        }
        return Err(gfs::meta(e));
    }
    done(
        a.out.json,
        a.out.quiet,
        serde_json::json!({"mount": store.mount().display().to_string(), "policy": policy.key_descriptor,
            "options": gfs::options_json(&policy.opts()), "protectors": [prot.protector_descriptor]}),
        &format!(
            "Policy {} created on {}, protected by {}.",
            policy.key_descriptor,
            store.mount().display(),
            prot.protector_descriptor
        ),
    )
}

/// A link on `store` to a protector kept on `pstore` (another filesystem);
/// whether one was made.
fn link_if_needed(store: &Store, pstore: &Store, d: &str) -> anyhow::Result<bool> {
    if store.mount() == pstore.mount() {
        return Ok(false);
    }
    let target = gfs::main_mount_of(pstore.mount())?;
    fscrypt_metadata::login::link_protector(store, d, &target).map_err(gfs::meta)
}

fn destroy(a: DestroyArgs) -> anyhow::Result<ExitCode> {
    if let Some(r) = &a.policy {
        let (store, p) = policy_at(r)?;
        store.remove_policy(&p.key_descriptor).map_err(gfs::meta)?;
        return done(
            a.out.json,
            a.out.quiet,
            serde_json::json!({"policy": p.key_descriptor}),
            &format!(
                "Policy {} destroyed; directories using it can no longer be unlocked through fscrypt metadata.",
                p.key_descriptor
            ),
        );
    }
    let r = a
        .protector
        .as_ref()
        .expect("clap requires --protector or --policy");
    let store = store_at(&r.mount)?;
    if !store.has_protector(&r.id) && store.link(&r.id).map_err(gfs::meta)?.is_none() {
        return Err(gfs::meta(fscrypt_metadata::Error::NotFound {
            kind: "protector",
            descriptor: r.id.clone(),
            mount: store.mount().to_path_buf(),
        }));
    }
    let users: Vec<String> = fscrypt_metadata::login::policies_using(&store, &r.id)
        .map_err(gfs::meta)?
        .into_iter()
        .map(|p| p.key_descriptor)
        .collect();
    if !users.is_empty() && !a.force {
        anyhow::bail!(
            "protector {} still protects policies {} on {}; remove it from them first              (metadata remove-protector-from-policy), or add --force",
            r.id,
            users.join(", "),
            store.mount().display()
        );
    }
    store.remove_protector(&r.id).map_err(gfs::meta)?;
    done(
        a.out.json,
        a.out.quiet,
        serde_json::json!({"protector": r.id, "policies_affected": users}),
        &format!(
            "Protector {} destroyed on {}.",
            r.id,
            store.mount().display()
        ),
    )
}

fn add_protector(a: AddArgs) -> anyhow::Result<ExitCode> {
    let (store, mut policy) = policy_at(&a.policy)?;
    let (pstore, prot) = protector_at(&a.protector)?;
    if policy
        .wrapped_policy_keys
        .iter()
        .any(|s| s.protector_descriptor == prot.protector_descriptor)
    {
        return Err(gfs::failure(
            gfs::EXIT_ALREADY,
            "already_exists",
            format!(
                "protector {} already protects policy {}",
                prot.protector_descriptor, policy.key_descriptor
            ),
        ));
    }
    let add_secret = SecretArgs {
        key: a.key.clone(),
        pass: a.pass.clone(),
    };
    let new_key = open(&prot, &add_secret)?;
    let slots: Vec<String> = policy
        .wrapped_policy_keys
        .iter()
        .map(|s| s.protector_descriptor.clone())
        .collect();
    let via = match &a.unlock_with {
        Some(r) => r.id.clone(),
        None if slots.len() == 1 => slots[0].clone(),
        None => anyhow::bail!(
            "policy {} has several protectors ({}); choose one with --unlock-with MOUNTPOINT:ID",
            policy.key_descriptor,
            slots.join(", ")
        ),
    };
    let (_, via_prot) = gfs::locate_protector(&store, &via)?;
    let via_secret = SecretArgs {
        key: a.unlock_key.clone(),
        pass: a.pass.clone(),
    };
    let via_key = open(&via_prot, &via_secret)?;
    let pkey = gfs::open_policy(&store, &policy, &via, &via_key)?;
    actions::add_protector_to_policy(&mut policy, &pkey, &prot.protector_descriptor, &new_key)
        .map_err(gfs::meta)?;
    let linked = link_if_needed(&store, &pstore, &prot.protector_descriptor)?;
    if let Err(e) = store.put_policy(&policy) {
        if linked {
            let _ = store.remove_protector(&prot.protector_descriptor);
        }
        return Err(gfs::meta(e));
    }
    done(
        a.out.json,
        a.out.quiet,
        serde_json::json!({"policy": policy.key_descriptor, "protector": prot.protector_descriptor, "linked": linked}),
        &format!(
            "Protector {} now protects policy {}.",
            prot.protector_descriptor, policy.key_descriptor
        ),
    )
}

fn remove_protector(a: RemoveArgs) -> anyhow::Result<ExitCode> {
    let (store, mut policy) = policy_at(&a.policy)?;
    actions::remove_protector_from_policy(&mut policy, &a.protector.id).map_err(gfs::meta)?;
    store.put_policy(&policy).map_err(gfs::meta)?;
    done(
        a.out.json,
        a.out.quiet,
        serde_json::json!({"policy": policy.key_descriptor, "protector": a.protector.id}),
        &format!(
            "Protector {} no longer protects policy {}.",
            a.protector.id, policy.key_descriptor
        ),
    )
}

fn change_passphrase(a: ChangeArgs) -> anyhow::Result<ExitCode> {
    let config = Config::load().map_err(gfs::meta)?;
    let (pstore, prot) = protector_at(&a.protector)?;
    let key = open(&prot, &a.secret)?;
    let new = if prot.source_type() == SourceType::RawKey {
        gfs::read_secret(
            &SecretArgs {
                key: a.new_key.clone(),
                pass: PassSource::default(),
            },
            SourceType::RawKey,
            "the new raw key (--new-key FILE)",
            false,
        )?
    } else {
        let src = PassSource {
            passfile: a.new_passfile.clone(),
            ..PassSource::default()
        };
        let p = src.read(
            &format!(
                "Enter the new passphrase for {}: ",
                gfs::describe_protector(&prot)
            ),
            true,
        )?;
        zeroize::Zeroizing::new(p.to_vec())
    };
    let q =
        actions::rewrap_open_protector(&prot, &key, &new, &config.hash_costs).map_err(gfs::meta)?;
    pstore.put_protector(&q).map_err(gfs::meta)?;
    done(
        a.out.json,
        a.out.quiet,
        serde_json::json!({"protector": q.protector_descriptor, "mount": pstore.mount().display().to_string()}),
        &format!(
            "The passphrase of protector {} ({}) is changed.",
            q.protector_descriptor,
            gfs::describe_protector(&q)
        ),
    )
}

fn dump(args: DumpArgs) -> anyhow::Result<ExitCode> {
    let mount = match &args.mountpoint {
        Some(m) => gfs::mount_of(m)?,
        None => config::root_mount(),
    };
    let store = Store::new(&mount, gfs::trust());
    store.check_setup().map_err(gfs::meta)?;
    let conf = Config::load().ok();
    // One damaged or hostile file is listed as unreadable; it never fails
    // the dump of everything else.
    let mut unreadable: Vec<(&str, String, String)> = Vec::new();
    let mut protectors = Vec::new();
    for d in store.protectors().map_err(gfs::meta)? {
        match store.protector(&d) {
            Ok(p) => protectors.push(p),
            Err(e) => unreadable.push(("protector", d, e.to_string())),
        }
    }
    let mut policies = Vec::new();
    for d in store.policies().map_err(gfs::meta)? {
        match store.policy(&d) {
            Ok(p) => policies.push(p),
            Err(e) => unreadable.push(("policy", d, e.to_string())),
        }
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
            "unreadable": unreadable.iter().map(|(kind, d, e)| serde_json::json!({
                "kind": kind, "descriptor": d, "error": e,
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
    for (kind, d, e) in &unreadable {
        o.push_str(&format!("Unreadable {kind} {d}: {e}\n"));
    }
    kernel::out(format_args!("{o}"))?;
    Ok(ExitCode::SUCCESS)
}
