//! `fscrypt-rs metadata`: google/fscrypt metadata management: create and
//! destroy protectors and policies, add a protector to a policy or remove
//! it, change a protector's passphrase (or raw key), dump.

use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt_actions::Context;
use fscrypt_actions::metadata::{self, At, NewProtector, Role, SecretFor};
use fscrypt_metadata::proto::SourceType;
use zeroize::Zeroizing;

use crate::support::gfs::{self, MountId, OutputArgs, SecretArgs};
use crate::support::kernel;
use crate::support::secret::PassSource;

/// Arguments of `fscrypt-rs metadata`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Create, destroy, link, re-key or dump google/fscrypt-compatible metadata \
             (.fscrypt, /etc/fscrypt.conf)",
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
    /// Seal a sealed protector's secret (`encrypt --source tpm2`) to the
    /// TPM again, e.g. to its PCRs' current values after a deliberate
    /// firmware or boot change; its passphrase (the recovery passphrase)
    /// does not change.
    Reseal(ResealArgs),
}

/// Arguments of `metadata reseal`.
#[derive(clap::Args, Debug)]
#[command(
    long_about = "Seal the secret of a tpm2 protector made by `encrypt --source tpm2` again: \
                  to the TPM's current PCR values (after a firmware, Secure Boot or boot change \
                  you made on purpose), to other PCRs (--pcrs) or with a PIN (--pin). The \
                  secret comes from the TPM when it still releases it, else from the recovery \
                  passphrase (terminal, --passfile, --extpass or the first line of stdin; case \
                  and dashes do not matter). The protector and its passphrase stay as they \
                  are: google/fscrypt and the recovery passphrase keep working. Exit status: 0 \
                  done; 12 wrong passphrase or PIN; 21 unsafe metadata; 24 no such protector; \
                  1 error."
)]
pub struct ResealArgs {
    /// The sealed protector.
    #[arg(long, value_name = "MOUNTPOINT:ID")]
    pub protector: MountId,
    /// Seal to these PCRs of the SHA-256 bank (default: the ones it was
    /// sealed to).
    #[arg(long, value_name = "N[,N..]", value_delimiter = ',')]
    pub pcrs: Vec<u8>,
    /// Also require a PIN (asked twice); a protector that had one keeps it.
    #[arg(long)]
    pub pin: bool,
    /// The TPM's TCTI (default: $TPM2TOOLS_TCTI, $TCTI, /dev/tpmrm0).
    #[arg(long, value_name = "SPEC")]
    pub tcti: Option<String>,
    /// The PIN (old and new) from the first line of FILE instead of the
    /// terminal.
    #[arg(long, value_name = "FILE")]
    pub pin_file: Option<PathBuf>,
    /// Where the recovery passphrase comes from.
    #[command(flatten)]
    pub pass: PassSource,
    /// `--json`, `--quiet`.
    #[command(flatten)]
    pub out: OutputArgs,
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
        Sub::Reseal(a) => {
            let json = a.out.json;
            gfs::report(json, || reseal(a))
        }
    }
}

/// `metadata reseal`: the same secret sealed again
/// ([`fscrypt_actions::sealed::reseal`]).
// The seal module's options may have more fields than the flags set.
#[allow(clippy::needless_update)]
fn reseal(a: ResealArgs) -> anyhow::Result<ExitCode> {
    use fscrypt_actions::sealed;
    let ctx = Context::for_caller();
    let r = &a.protector;
    let store = ctx.store_at_checked(&r.mount).map_err(gfs::actions)?;
    let located = fscrypt_actions::protector::locate(&ctx, &store, &r.id).map_err(gfs::actions)?;
    let old = match sealed::of(&located).map_err(gfs::actions)? {
        Some(fscrypt_seal::Sealed::Tpm2(t)) => t,
        Some(other) => anyhow::bail!(
            "protector {} is sealed to {}: only tpm2 protectors are resealed (a token or \
             security key releases the same secret wherever it is plugged in)",
            r.id,
            other.kind()
        ),
        None => anyhow::bail!(
            "protector {} is not a sealed protector (made by `encrypt --source tpm2`)",
            r.id
        ),
    };
    let options = fscrypt_seal::SealOptions::Tpm2(fscrypt_seal::tpm2::SealOptions {
        tcti: a.tcti.clone(),
        pcrs: if a.pcrs.is_empty() {
            old.pcrs.iter().map(|p| p.index).collect()
        } else {
            a.pcrs.clone()
        },
        pin: a.pin || old.pin,
        ..Default::default()
    });
    let device = crate::support::seal::DeviceArgs {
        tcti: a.tcti.clone(),
        pin_file: a.pin_file.clone(),
        ..Default::default()
    };
    let pass = match gfs::sealed_passphrase(&device, &located) {
        Some(p) => p,
        None => {
            let what = format!(
                "the recovery passphrase of {} ({})",
                gfs::describe_protector(&located.data),
                r.id
            );
            let p = a.pass.read(&format!("Enter {what}: "), false)?;
            Zeroizing::new(p.to_vec())
        }
    };
    let mut ui = crate::support::seal::Prompter::new(a.pin_file.as_deref(), None);
    let new = sealed::reseal(&located, &pass, &options, &mut ui).map_err(gfs::actions)?;
    let fields = crate::support::seal::describe_sealed(&new);
    done(
        a.out.json,
        a.out.quiet,
        serde_json::json!({"protector": r.id, "sealed": gfs::sealed_json(&new)}),
        &format!(
            "Protector {} resealed ({fields}); its passphrase, the recovery passphrase, is unchanged.",
            r.id
        ),
    )
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

/// A `MOUNT:ID` argument as the actions take it.
fn at(r: &MountId) -> At<'_> {
    At {
        mount: &r.mount,
        id: &r.id,
    }
}

/// Where the secrets an action asks for come from.
#[derive(Default)]
struct Secrets {
    /// A new protector's secret, or the named protector's.
    named: SecretArgs,
    /// The `--unlock-with` protector's.
    unlock: SecretArgs,
    /// A raw-key protector's new key file.
    new_key: Option<PathBuf>,
    /// The new passphrase's file.
    new_passfile: Option<PathBuf>,
}

impl Secrets {
    /// Reads the secret `req` asks for (from the terminal, a file or
    /// stdin); a new login protector's passphrase is checked with PAM.
    fn read(&self, req: SecretFor<'_>) -> anyhow::Result<Zeroizing<Vec<u8>>> {
        match req {
            SecretFor::New {
                source,
                what,
                login_user,
            } => {
                let secret = gfs::read_secret(&self.named, source, what, true)?;
                if let Some(user) = login_user {
                    gfs::check_login_passphrase(user, &secret)?;
                }
                Ok(secret)
            }
            SecretFor::Open { protector: p, role } => {
                let args = match role {
                    Role::Named => &self.named,
                    Role::UnlockWith => &self.unlock,
                };
                let what = format!(
                    "{} ({})",
                    gfs::describe_protector(p),
                    p.protector_descriptor
                );
                gfs::read_secret(args, p.source_type(), &what, false)
            }
            SecretFor::Replacement { protector: p } => {
                if p.source_type() == SourceType::RawKey {
                    return gfs::read_secret(
                        &SecretArgs {
                            key: self.new_key.clone(),
                            pass: PassSource::default(),
                        },
                        SourceType::RawKey,
                        "the new raw key (--new-key FILE)",
                        false,
                    );
                }
                let src = PassSource {
                    passfile: self.new_passfile.clone(),
                    ..PassSource::default()
                };
                let pass = src.read(
                    &format!(
                        "Enter the new passphrase for {}: ",
                        gfs::describe_protector(p)
                    ),
                    true,
                )?;
                Ok(Zeroizing::new(pass.to_vec()))
            }
        }
    }

    /// [`Secrets::read`] as an action's callback.
    fn callback(&self) -> impl FnMut(SecretFor<'_>) -> fscrypt_actions::Result<Zeroizing<Vec<u8>>> {
        |req| self.read(req).map_err(gfs::SecretError::wrap)
    }
}

fn create_protector(a: CreateProtectorArgs) -> anyhow::Result<ExitCode> {
    let secrets = Secrets {
        named: a.secret.clone(),
        ..Secrets::default()
    };
    let req = NewProtector {
        mount: &a.mountpoint,
        source: a
            .source
            .as_deref()
            .map(|s| SourceType::from_name(s).unwrap_or(SourceType::CustomPassphrase)),
        name: a.name.as_deref(),
        user: a.user.as_deref(),
    };
    let made = metadata::create_protector(&Context::for_caller(), &req, &mut secrets.callback())
        .map_err(gfs::actions)?;
    let p = &made.protector;
    done(
        a.out.json,
        a.out.quiet,
        serde_json::json!({"mount": made.mount.display().to_string(), "protector": gfs::protector_json(p)}),
        &format!(
            "Protector {} created on {}: {}.",
            p.protector_descriptor,
            made.mount.display(),
            gfs::describe_protector(p)
        ),
    )
}

fn create_policy(a: CreatePolicyArgs) -> anyhow::Result<ExitCode> {
    let secrets = Secrets {
        named: a.secret.clone(),
        ..Secrets::default()
    };
    let made = metadata::create_policy(
        &Context::for_caller(),
        &a.mountpoint,
        at(&a.protector),
        &mut secrets.callback(),
    )
    .map_err(gfs::actions)?;
    let policy = &made.policy;
    done(
        a.out.json,
        a.out.quiet,
        serde_json::json!({"mount": made.mount.display().to_string(), "policy": policy.key_descriptor,
            "options": gfs::options_json(&policy.opts()), "protectors": [made.protector]}),
        &format!(
            "Policy {} created on {}, protected by {}.",
            policy.key_descriptor,
            made.mount.display(),
            made.protector
        ),
    )
}

fn destroy(a: DestroyArgs) -> anyhow::Result<ExitCode> {
    let ctx = Context::for_caller();
    if let Some(r) = &a.policy {
        let d = metadata::destroy_policy(&ctx, at(r)).map_err(gfs::actions)?;
        return done(
            a.out.json,
            a.out.quiet,
            serde_json::json!({"policy": d}),
            &format!(
                "Policy {d} destroyed; directories using it can no longer be unlocked through fscrypt metadata."
            ),
        );
    }
    let r = a
        .protector
        .as_ref()
        .expect("clap requires --protector or --policy");
    let gone = metadata::destroy_protector(&ctx, at(r), a.force).map_err(gfs::actions)?;
    done(
        a.out.json,
        a.out.quiet,
        serde_json::json!({"protector": r.id, "policies_affected": gone.policies_affected}),
        &format!("Protector {} destroyed on {}.", r.id, gone.mount.display()),
    )
}

fn add_protector(a: AddArgs) -> anyhow::Result<ExitCode> {
    let secrets = Secrets {
        named: SecretArgs {
            key: a.key.clone(),
            pass: a.pass.clone(),
        },
        unlock: SecretArgs {
            key: a.unlock_key.clone(),
            pass: a.pass.clone(),
        },
        ..Secrets::default()
    };
    let added = metadata::add_protector_to_policy(
        &Context::for_caller(),
        at(&a.protector),
        at(&a.policy),
        a.unlock_with.as_ref().map(|r| r.id.as_str()),
        &mut secrets.callback(),
    )
    .map_err(gfs::actions)?;
    done(
        a.out.json,
        a.out.quiet,
        serde_json::json!({"policy": added.policy, "protector": added.protector, "linked": added.linked}),
        &format!(
            "Protector {} now protects policy {}.",
            added.protector, added.policy
        ),
    )
}

fn remove_protector(a: RemoveArgs) -> anyhow::Result<ExitCode> {
    let policy = metadata::remove_protector_from_policy(
        &Context::for_caller(),
        &a.protector.id,
        at(&a.policy),
    )
    .map_err(gfs::actions)?;
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
    let secrets = Secrets {
        named: a.secret.clone(),
        new_key: a.new_key.clone(),
        new_passfile: a.new_passfile.clone(),
        ..Secrets::default()
    };
    let changed = metadata::change_passphrase(
        &Context::for_caller(),
        at(&a.protector),
        &mut secrets.callback(),
    )
    .map_err(gfs::actions)?;
    let q = &changed.protector;
    done(
        a.out.json,
        a.out.quiet,
        serde_json::json!({"protector": q.protector_descriptor, "mount": changed.mount.display().to_string()}),
        &format!(
            "The passphrase of protector {} ({}) is changed.",
            q.protector_descriptor,
            gfs::describe_protector(q)
        ),
    )
}

fn dump(args: DumpArgs) -> anyhow::Result<ExitCode> {
    let d =
        metadata::dump(&Context::for_caller(), args.mountpoint.as_deref()).map_err(gfs::actions)?;
    if args.json {
        kernel::print_json(&serde_json::json!({
            "ok": true,
            "config_path": d.config_path.display().to_string(),
            "config": d.config.as_ref().map(|c| serde_json::from_str::<serde_json::Value>(&c.to_json()).unwrap_or_default()),
            "mount": d.mount.display().to_string(),
            "setup_mode": d.setup_mode.map(|m| format!("{m:?}")),
            "protectors": d.protectors.iter().map(gfs::protector_json).collect::<Vec<_>>(),
            "policies": d.policies.iter().map(|p| serde_json::json!({
                "descriptor": p.key_descriptor,
                "options": gfs::options_json(&p.opts()),
                "protectors": p.wrapped_policy_keys.iter().map(|s| s.protector_descriptor.clone()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "unreadable": d.unreadable.iter().map(|u| serde_json::json!({
                "kind": u.kind, "descriptor": u.descriptor, "error": u.error,
            })).collect::<Vec<_>>(),
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut o = String::new();
    match &d.config {
        Some(c) => o.push_str(&format!(
            "Config {}:\n{}",
            d.config_path.display(),
            c.to_json()
        )),
        None => o.push_str(&format!(
            "Config {}: missing or invalid\n",
            d.config_path.display()
        )),
    }
    o.push_str(&format!(
        "\nFilesystem {} ({}):\n",
        d.mount.display(),
        d.base_dir.display()
    ));
    for p in &d.protectors {
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
    for p in &d.policies {
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
    for u in &d.unreadable {
        o.push_str(&format!(
            "Unreadable {} {}: {}\n",
            u.kind, u.descriptor, u.error
        ));
    }
    kernel::out(format_args!("{o}"))?;
    Ok(ExitCode::SUCCESS)
}
