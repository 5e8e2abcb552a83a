//! `fscrypt-rs encrypt DIR`: google/fscrypt-style encryption of an empty
//! directory: a protector (new or given), a new policy whose random key it
//! wraps, the key added to the filesystem keyring, the policy set. With
//! `--convert`, a directory that holds files: the policy goes on an empty
//! directory beside it and `fscrypt_actions::convert` copies, verifies and
//! swaps the tree in (resumably). The transaction is
//! `fscrypt_actions::create`'s; this parses, asks for secrets and renders.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use fscrypt_actions::convert::{self, Conversion, Phase};
use fscrypt_actions::create::{self, Chosen, Created};
use fscrypt_actions::{Context, User, protector, sealed};
use fscrypt_metadata::config::Config;
use fscrypt_metadata::proto::{ProtectorData, SourceType};
use fscrypt_metadata::recovery;
use fscrypt_metadata::store::Store;

use crate::support::gfs::{
    self, EXIT_CONVERT_REFUSED, MountId, OutputArgs, SecretArgs, convert_failure,
};
use crate::support::kernel;
use crate::support::seal::{DeviceArgs, Prompter, SealArgs};

/// Arguments of `fscrypt-rs encrypt`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Encrypt a directory google/fscrypt-style (protector + policy in .fscrypt): an \
             empty one, or with --convert one that holds files",
    long_about = "Create (or reuse, with --protector) a protector, create a policy with a random \
                  key wrapped by it, add the key to the filesystem keyring and set the policy on \
                  the empty directory DIR. The metadata is google/fscrypt 0.3.x's: `fscrypt \
                  unlock` works on the result. Passphrases come from the terminal, --passfile or \
                  one line of stdin.\n\nWith --policy MOUNTPOINT:ID, DIR gets an existing policy of \
                  its filesystem instead (one key for several directories, unlocked and locked \
                  together), opened with one of its protectors (--unlock-with). With \
                  --skip-unlock, DIR is left locked (a key already in the keyring for other \
                  directories stays).\n\nWith --convert, DIR may hold files: they are copied into a \
                  new encrypted directory beside it (.DIR.fscrypt-convert/) with all their \
                  metadata, verified, swapped in atomically, and the plaintext is removed; \
                  files changed while it was swapped in are copied in, and what cannot be \
                  is kept and named (exit 1). A \
                  crash or Ctrl-C leaves the original untouched or the result complete; rerun \
                  the same command to continue. Deleted plaintext blocks may stay readable on \
                  the device until overwritten.\n\nWith --source tpm2|pkcs11|fido2 (and the device \
                  flags --tcti, --pcrs, --pin, --module, --token, --device, --pin-file), the new \
                  protector is a google/fscrypt custom_passphrase protector whose random \
                  passphrase is sealed to that device (the sealed record is kept in \
                  MOUNT/.fscrypt/fscrypt-rs/sealed/): `fscrypt-rs unlock` needs no passphrase. The \
                  passphrase is printed once (even with --quiet; in the JSON as \
                  recovery_passphrase) as the recovery passphrase: with it, google/fscrypt's \
                  `fscrypt unlock` and `fscrypt-rs unlock` unlock DIR when the device refuses \
                  (PCRs changed) or is gone.\n\nExit status: 0 done; 12 wrong passphrase or \
                  key; 22 not set up; 23 DIR not empty (without --convert); 25 DIR already \
                  encrypted; 26 no encryption support; 27 --convert refused (mount point, open \
                  files, too little space, a hard link to outside DIR, or not root and \
                  another user's files or device nodes inside) or a conversion is pending; 130 interrupted \
                  (resumable); 20/21 corrupt or unsafe metadata; 1 error."
)]
pub struct Args {
    /// An empty directory on a filesystem set up with `fscrypt-rs setup`
    /// (with --convert: any directory).
    pub dir: PathBuf,
    /// Encrypt a directory that holds files, in place: copy, verify, swap
    /// atomically, remove the plaintext (resumable: rerun to continue).
    #[arg(long)]
    pub convert: bool,
    /// Source of a new protector (default: the config's). `tpm2`,
    /// `pkcs11`, `fido2`: a custom_passphrase protector (google/fscrypt
    /// unlocks it) whose random passphrase is sealed to that device, so
    /// `fscrypt-rs unlock` needs no prompt; the passphrase is printed once
    /// as the recovery passphrase.
    #[arg(long, value_parser = ["custom_passphrase", "raw_key", "pam_passphrase", "tpm2", "pkcs11", "fido2"])]
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
    /// Policy options instead of the config's, as KEY=VALUE pairs
    /// separated by commas: `version=1|2`, `contents=MODE`,
    /// `filenames=MODE` (google/fscrypt's mode names: AES_256_XTS,
    /// AES_256_CTS, AES_128_CBC, AES_128_CTS, Adiantum, AES_256_HCTR2),
    /// `padding=4|8|16|32`; e.g. `--policy-options version=1,padding=16`.
    #[arg(long, value_name = "KEY=VALUE,...")]
    pub policy_options: Option<String>,
    /// Do not add a recovery passphrase when the protector is on another
    /// filesystem (a login protector on the root filesystem protecting a
    /// directory elsewhere): without it, losing the root filesystem loses
    /// the directory.
    #[arg(long)]
    pub no_recovery: bool,
    /// Encrypt DIR with this existing policy of DIR's filesystem instead
    /// of a new one (one policy, one key, for several directories: they
    /// unlock and lock together). One of its protectors opens it
    /// (--unlock-with, else chosen as `unlock` chooses).
    #[arg(
        long,
        value_name = "MOUNTPOINT:ID",
        conflicts_with_all = ["source", "name", "user", "protector", "policy_options", "convert"]
    )]
    pub policy: Option<MountId>,
    /// With --policy: the protector that opens the policy.
    #[arg(long, value_name = "MOUNTPOINT:ID", requires = "policy")]
    pub unlock_with: Option<MountId>,
    /// Leave DIR locked afterwards: the key is added only long enough to
    /// set the policy (a key that was already in the keyring stays).
    #[arg(long, conflicts_with = "convert")]
    pub skip_unlock: bool,
    /// Secrets.
    #[command(flatten)]
    pub secret: SecretArgs,
    /// Where the device of a sealed protector is (`--source tpm2|pkcs11|fido2`,
    /// or a sealed protector given with --protector / --unlock-with).
    #[command(flatten)]
    pub device: DeviceArgs,
    /// How a new sealed protector is sealed.
    #[command(flatten)]
    pub seal: SealArgs,
    /// `--json`, `--quiet`.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// A new sealed protector's passphrase and record, until the sidecar is
/// written beside it.
struct NewSealed {
    /// The passphrase (the recovery passphrase shown once).
    pass: zeroize::Zeroizing<Vec<u8>>,
    /// The record for the sidecar.
    record: fscrypt_seal::Sealed,
}

/// Runs `fscrypt-rs encrypt`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.out.json;
    gfs::report(json, || exec_inner(args))
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    let dir = &args.dir;
    let md =
        std::fs::symlink_metadata(dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    if !md.is_dir() {
        anyhow::bail!("{} is not a directory", dir.display());
    }
    let pending = Conversion::pending(dir).map_err(convert_failure)?;
    if let Some(c) = &pending {
        if !args.convert {
            return Err(gfs::failure(
                EXIT_CONVERT_REFUSED,
                "conversion_pending",
                format!("{}: rerun with --convert to continue", c.describe_next()),
            ));
        }
        if !args.out.quiet && !args.out.json {
            eprintln!("fscrypt-rs: {}", c.describe_next());
        }
    }
    let start = match pending {
        Some(c) if c.phase() == Phase::Preparing => Some(Start::Restart(c)),
        Some(c) => return run_conversion(&args, c, None),
        None => None,
    };
    let empty = match create::check_target(dir) {
        Ok(empty) => empty,
        Err(e @ fscrypt_actions::Error::AlreadyEncrypted { .. }) => {
            // A conversion that finished just before its recovery
            // instructions were moved in: deliver them now.
            if let Some(r) = deliver_recovery_readme(dir)? {
                if !args.out.quiet {
                    println!(
                        "The conversion of {} was complete; its recovery passphrase is in {}.",
                        dir.display(),
                        r.display()
                    );
                }
                return Ok(ExitCode::SUCCESS);
            }
            return Err(gfs::actions(e));
        }
        Err(e) => return Err(gfs::actions(e)),
    };
    let start = match start {
        Some(s) => Some(s),
        None if !empty => {
            if !args.convert {
                return Err(gfs::actions(fscrypt_actions::Error::NotEmpty {
                    path: dir.clone(),
                }));
            }
            // Refusals (mount point, open files, space) before anything
            // is written.
            convert::preflight(dir).map_err(convert_failure)?;
            Some(Start::Fresh)
        }
        None => None,
    };
    let ctx = Context::for_caller();
    if let Some(r) = &args.policy {
        return encrypt_with_policy(&args, &ctx, r);
    }
    let store = ctx.store_of(dir).map_err(gfs::actions)?;
    let config = ctx.require_config().map_err(gfs::actions)?;
    let chosen = match &args.protector {
        Some(r) => {
            let pstore = ctx.store_at_checked(&r.mount).map_err(gfs::actions)?;
            let l = protector::locate(&ctx, &pstore, &r.id).map_err(gfs::actions)?;
            let what = format!("protector {}", r.id);
            let secret = match gfs::sealed_passphrase(&args.device, &l) {
                Some(p) => p,
                None => gfs::read_secret(&args.secret, l.data.source_type(), &what, false)?,
            };
            Chosen::open(l.store, l.data, &secret).map_err(gfs::actions)?
        }
        None => {
            if let Some(kind) = args
                .source
                .as_deref()
                .and_then(fscrypt_seal::Kind::from_label)
            {
                let (chosen, new) = sealed_protector(&args, &store, config, kind)?;
                return encrypt_with(&args, &ctx, &store, config, chosen, start, Some(new));
            }
            let source = match args.source.as_deref() {
                Some(s) => SourceType::from_name(s).unwrap_or(SourceType::CustomPassphrase),
                None => config.source,
            };
            if source == SourceType::PamPassphrase {
                let chosen = login_protector(&args, &ctx, config)?;
                return encrypt_with(&args, &ctx, &store, config, chosen, start, None);
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
            if let Some(d) = create::protector_named(&store, &name).map_err(gfs::actions)? {
                anyhow::bail!(
                    "there is already a protector named {name:?} ({d}); use --protector {}:{d} or another --name",
                    store.mount().display()
                );
            }
            let secret =
                gfs::read_secret(&args.secret, source, &format!("protector {name:?}"), true)?;
            Chosen::new(store.clone(), source, &name, &config.hash_costs, &secret, 0)
                .map_err(gfs::actions)?
        }
    };
    encrypt_with(&args, &ctx, &store, config, chosen, start, None)
}

/// A new sealed protector of `kind` (`--source tpm2|pkcs11|fido2`): a
/// random secret sealed to the device, its passphrase
/// ([`sealed::passphrase`]) made into a custom_passphrase protector as
/// `--source custom_passphrase` makes one, named `--name` or after the
/// kind ("tpm2", "tpm2 (2)", ...).
fn sealed_protector(
    args: &Args,
    store: &Store,
    config: &Config,
    kind: fscrypt_seal::Kind,
) -> anyhow::Result<(Chosen, NewSealed)> {
    if args.user.is_some() {
        anyhow::bail!("--user is for login protectors: add --source pam_passphrase");
    }
    if args.secret.key.is_some() || args.secret.pass.is_given() {
        anyhow::bail!(
            "--key, --passfile and --extpass do not apply to --source {kind}: its passphrase is \
             random, sealed to the device, and printed once as the recovery passphrase"
        );
    }
    let name = match &args.name {
        Some(name) => {
            if let Some(d) = create::protector_named(store, name).map_err(gfs::actions)? {
                anyhow::bail!(
                    "there is already a protector named {name:?} ({d}); use --protector {}:{d} or another --name",
                    store.mount().display()
                );
            }
            name.clone()
        }
        None => {
            let mut name = kind.label().to_owned();
            let mut n = 1;
            while create::protector_named(store, &name)
                .map_err(gfs::actions)?
                .is_some()
            {
                n += 1;
                name = format!("{kind} ({n})");
            }
            name
        }
    };
    let options = args.seal.options(kind, &args.device)?;
    let mut ui = Prompter::new(args.device.pin_file.as_deref(), None);
    let (secret, record) = crate::support::seal::seal_new(&options, &mut ui)?;
    let pass = sealed::passphrase(&secret);
    let chosen = Chosen::new(
        store.clone(),
        SourceType::CustomPassphrase,
        &name,
        &config.hash_costs,
        &pass,
        0,
    )
    .map_err(gfs::actions)?;
    Ok((chosen, NewSealed { pass, record }))
}

/// The recovery passphrase of a new sealed protector, shown once (text
/// mode; even with --quiet, as there is no other copy).
fn print_recovery_passphrase(dir: &Path, kind: fscrypt_seal::Kind, pass: &[u8]) {
    let pass = String::from_utf8_lossy(pass);
    let dir = dir.display();
    println!(
        "\nRecovery passphrase of the {kind} protector (shown only now; write it down and keep it \
         away from this machine):\n\n    {pass}\n\n`fscrypt-rs unlock {dir}` asks the {kind} device \
         and needs no passphrase. When the device refuses (for tpm2: a firmware, Secure Boot or \
         boot change to its PCRs; a lost token or key), unlock with `fscrypt unlock {dir}` \
         (google/fscrypt) or `fscrypt-rs unlock {dir}` and type the recovery passphrase exactly \
         as shown.\n"
    );
}

/// How a conversion begins once the protector is chosen.
enum Start {
    /// A new work directory.
    Fresh,
    /// The work directory of a conversion interrupted while being set up.
    Restart(Conversion),
}

/// Ctrl-C during a conversion: stop at the next safe point.
static CANCEL: AtomicBool = AtomicBool::new(false);

const FREED_BLOCKS_NOTE: &str = "the plaintext was deleted, not erased: its freed blocks may \
     remain readable on the device until overwritten (on SSDs possibly longer)";

/// Runs (or continues) a prepared conversion and prints the outcome;
/// `what` describes the policy and protector when they were just made.
fn run_conversion(
    args: &Args,
    mut c: Conversion,
    what: Option<(String, serde_json::Value)>,
) -> anyhow::Result<ExitCode> {
    if ctrlc::set_handler(|| CANCEL.store(true, Ordering::SeqCst)).is_err() && !args.out.quiet {
        eprintln!("fscrypt-rs: warning: no Ctrl-C handler; Ctrl-C still leaves a resumable state");
    }
    let mut bar = crate::support::progress::Bar::new(!args.out.quiet && !args.out.json);
    let r = c.run(&CANCEL, &mut |p| bar.update(p));
    bar.finish();
    let summary = r.map_err(convert_failure)?;
    let readme = deliver_recovery_readme(c.dir())?;
    let dir = c.dir().display().to_string();
    if args.out.json {
        let mut j = serde_json::json!({
            "ok": true,
            "dir": dir,
            "converted": true,
            "objects": summary.objects,
            "bytes": summary.bytes,
            "warning": FREED_BLOCKS_NOTE,
        });
        if let Some((_, v)) = what {
            j["encryption"] = v;
        }
        j["recovery_readme"] = readme.as_ref().map(|p| p.display().to_string()).into();
        kernel::print_json(&j)?;
    } else if !args.out.quiet {
        let how = what.map(|(s, _)| format!(" ({s})")).unwrap_or_default();
        println!(
            "{dir} is now encrypted{how} and unlocked: {} objects, {:.1} MiB copied and verified.",
            summary.objects,
            summary.bytes as f64 / f64::from(1u32 << 20)
        );
        println!("Note: {FREED_BLOCKS_NOTE}.");
        if let Some(r) = &readme {
            println!(
                "A recovery passphrase was added: see {}. Copy it somewhere safe: without it, \
                 losing the root filesystem (where the login protector is) loses this directory.",
                r.display()
            );
        }
    } else {
        eprintln!("fscrypt-rs: note: {FREED_BLOCKS_NOTE}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The user's login protector on the root filesystem: opened with the
/// login passphrase when it exists, else created.
fn login_protector(args: &Args, ctx: &Context, config: &Config) -> anyhow::Result<Chosen> {
    if args.name.is_some() {
        anyhow::bail!(
            "login protectors are identified by their user, not a name: drop --name (and give --user NAME)"
        );
    }
    let user = User::named_or_caller(args.user.as_deref()).map_err(gfs::actions)?;
    let (root, found) = create::login_protector(ctx, &user).map_err(gfs::actions)?;
    let what = format!("login passphrase of {}", user.name);
    match found {
        Some(p) => {
            let secret = gfs::read_secret(&args.secret, p.source_type(), &what, false)?;
            Chosen::open(root, p, &secret).map_err(gfs::actions)
        }
        None => {
            let secret = gfs::read_secret(&args.secret, SourceType::PamPassphrase, &what, true)?;
            gfs::check_login_passphrase(&user.name, &secret)?;
            Chosen::new(
                root,
                SourceType::PamPassphrase,
                "",
                &config.hash_costs,
                &secret,
                user.uid,
            )
            .map_err(gfs::actions)
        }
    }
}

fn encrypt_with(
    args: &Args,
    ctx: &Context,
    store: &Store,
    config: &Config,
    chosen: Chosen,
    start: Option<Start>,
    new_sealed: Option<NewSealed>,
) -> anyhow::Result<ExitCode> {
    let mut conv = match start {
        None => None,
        Some(Start::Fresh) => Some(Conversion::begin(&args.dir).map_err(convert_failure)?),
        Some(Start::Restart(mut c)) => {
            c.restart_preparing().map_err(convert_failure)?;
            // Recovery instructions of the abandoned policy, if any.
            let stash = recovery_stash_of(&args.dir)?;
            if std::fs::symlink_metadata(&stash).is_ok() {
                std::fs::remove_dir_all(&stash)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", stash.display()))?;
            }
            Some(c)
        }
    };
    let target = conv.as_ref().map(Conversion::encrypted_dir);
    let dir: &Path = target.as_deref().unwrap_or(&args.dir);
    let options = create::policy_options(&config.options, args.policy_options.as_deref())
        .map_err(gfs::actions)?;
    let recovery_for = (!args.no_recovery).then_some(args.dir.as_path());
    // A sealed protector's sidecar is written first, beside where the
    // protector goes, and taken away again if the encryption fails.
    let sidecar = match &new_sealed {
        Some(n) => {
            let (pstore, d) = (
                chosen.store.clone(),
                chosen.protector.protector_descriptor.clone(),
            );
            sealed::write(&pstore, &d, &n.record).map_err(gfs::actions)?;
            Some((pstore, d))
        }
        None => None,
    };
    let made = create::create(
        ctx,
        store,
        dir,
        chosen,
        &options,
        recovery_for,
        &config.hash_costs,
    )
    .map_err(|e| {
        if let Some((pstore, d)) = &sidecar {
            let _ = sealed::remove(pstore, d);
        }
        gfs::actions(e)
    })?;
    let sealed_json = new_sealed.as_ref().map(|n| gfs::sealed_json(&n.record));
    if let Some(n) = &new_sealed
        && !args.out.json
    {
        print_recovery_passphrase(&args.dir, n.record.kind(), &n.pass);
    }
    let recovery_passphrase = new_sealed
        .as_ref()
        .map(|n| String::from_utf8_lossy(&n.pass).into_owned());
    let Created {
        policy,
        kernel: kpolicy,
        protector,
        protector_created: new_protector,
        recovery,
        store,
        ..
    } = made;
    let store = &store;
    if let Some(mut c) = conv.take() {
        let text = format!(
            "policy {}, protector {}: {}",
            policy.key_descriptor,
            protector.protector_descriptor,
            gfs::describe_protector(&protector)
        );
        let j = serde_json::json!({
            "policy": policy.key_descriptor,
            "options": gfs::options_json(&policy.opts()),
            "protector": gfs::protector_json(&protector),
            "protector_created": new_protector,
            "sealed": sealed_json,
            "recovery_passphrase": recovery_passphrase,
        });
        // The recovery instructions wait, encrypted under the new policy,
        // in a directory of their own beside DIR (the conversion's work
        // directory is rebuilt on a restart): a conversion interrupted and
        // rerun still delivers them into the finished DIR.
        if let Some((pass, rp)) = &recovery {
            let stash = recovery_stash_of(&args.dir)?;
            std::fs::create_dir(&stash).map_err(|e| anyhow::anyhow!("{}: {e}", stash.display()))?;
            fscrypt_linux::policy::set_policy(&stash, &kpolicy)?;
            let shown = std::path::absolute(&args.dir).unwrap_or_else(|_| args.dir.clone());
            write_recovery_readme(
                store,
                &policy,
                &stash,
                &shown,
                owner_of(&args.dir)?,
                pass,
                rp,
            )?;
        }
        c.mark_prepared().map_err(convert_failure)?;
        return run_conversion(args, c, Some((text, j)));
    }
    let state = if args.skip_unlock {
        "left locked (--skip-unlock)"
    } else {
        "unlocked"
    };
    let readme = match &recovery {
        Some((pass, rp)) => Some(write_recovery_readme(
            store,
            &policy,
            dir,
            &std::path::absolute(dir).unwrap_or_else(|_| dir.to_owned()),
            owner_of(dir)?,
            pass,
            rp,
        )?),
        None => None,
    };
    // Locked only now: the recovery instructions are written inside DIR.
    if args.skip_unlock {
        create::leave_locked(ctx, store, &kpolicy).map_err(gfs::actions)?;
    }
    if args.out.json {
        kernel::print_json(&serde_json::json!({
            "ok": true,
            "dir": dir.display().to_string(),
            "policy": policy.key_descriptor,
            "options": gfs::options_json(&policy.opts()),
            "protector": gfs::protector_json(&protector),
            "protector_created": new_protector,
            "unlocked": !args.skip_unlock,
            "recovery_protector": recovery.as_ref().map(|(_, rp)| gfs::protector_json(rp)),
            "recovery_readme": readme.as_ref().map(|p| p.display().to_string()),
            "sealed": sealed_json,
            "recovery_passphrase": recovery_passphrase,
        }))?;
    } else if !args.out.quiet {
        println!(
            "{} is now encrypted (policy {}, protector {}: {}) and {state}.",
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

/// `encrypt DIR --policy MOUNTPOINT:ID`: DIR (empty) gets an existing
/// policy of its filesystem, opened with one of its protectors.
fn encrypt_with_policy(args: &Args, ctx: &Context, r: &MountId) -> anyhow::Result<ExitCode> {
    let dir = &args.dir;
    let target = create::existing_policy(ctx, &r.mount, &r.id, dir).map_err(gfs::actions)?;
    let located = match &args.unlock_with {
        Some(u) => target.protector(ctx, Some(&u.mount), &u.id),
        None => {
            let candidates = target.candidates(ctx);
            let me = rustix::process::getuid().as_raw();
            let Some(d) =
                protector::choose(&target.slots(), &candidates, args.secret.key.is_some(), me)
            else {
                let list: Vec<String> = candidates
                    .iter()
                    .map(|p| {
                        format!(
                            "{}:{} ({})",
                            target.store.mount().display(),
                            p.protector_descriptor,
                            gfs::describe_protector(p)
                        )
                    })
                    .collect();
                anyhow::bail!(
                    "policy {} has several protectors; choose the one that opens it with --unlock-with: {}",
                    target.descriptor,
                    list.join(", ")
                );
            };
            target.protector(ctx, None, &d)
        }
    }
    .map_err(gfs::actions)?;
    let what = format!(
        "{} ({})",
        gfs::describe_protector(&located.data),
        located.data.protector_descriptor
    );
    let secret = match gfs::sealed_passphrase(&args.device, &located) {
        Some(p) => p,
        None => gfs::read_secret(&args.secret, located.data.source_type(), &what, false)?,
    };
    let was_present =
        create::apply_existing(ctx, &target, &located, &secret).map_err(gfs::actions)?;
    // A key that was already there serves other directories: it stays.
    let left_locked = args.skip_unlock && !was_present;
    if left_locked {
        create::leave_locked(ctx, &target.store, &target.kernel).map_err(gfs::actions)?;
    }
    let state = if left_locked {
        "left locked (--skip-unlock)"
    } else if args.skip_unlock {
        "unlocked (--skip-unlock: the policy's key was already in the keyring for its other directories; `fscrypt-rs lock` locks them all)"
    } else {
        "unlocked"
    };
    if args.out.json {
        kernel::print_json(&serde_json::json!({
            "ok": true,
            "dir": dir.display().to_string(),
            "policy": target.descriptor,
            "policy_reused": true,
            "options": gfs::options_json(&target.policy.opts()),
            "protector": gfs::protector_json(&located.data),
            "protector_created": false,
            "unlocked": !left_locked,
        }))?;
    } else if !args.out.quiet {
        println!(
            "{} is now encrypted with the existing policy {} (opened with protector {}) and {state}.",
            dir.display(),
            target.descriptor,
            what
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Owner (uid, gid) of `path`.
fn owner_of(path: &Path) -> anyhow::Result<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok((m.uid(), m.gid()))
}

/// Where a conversion keeps the recovery instructions until DIR is done:
/// `.NAME.fscrypt-recovery` beside DIR, encrypted with DIR's new policy.
fn recovery_stash_of(dir: &Path) -> anyhow::Result<PathBuf> {
    let work = convert::work_dir_of(dir).map_err(convert_failure)?;
    let name = work.file_name().unwrap_or_default().to_string_lossy();
    Ok(work.with_file_name(name.replace(".fscrypt-convert", ".fscrypt-recovery")))
}

/// After a finished conversion: the waiting recovery instructions moved
/// into DIR ([`recovery::deliver`]).
fn deliver_recovery_readme(dir: &Path) -> anyhow::Result<Option<PathBuf>> {
    recovery::deliver(&recovery_stash_of(dir)?, dir).map_err(gfs::meta)
}

/// Writes the recovery instructions for `rp` into `into` (the encrypted
/// directory, or the stash its conversion delivers them from); their
/// commands name `dir`, the encrypted directory (an absolute path)
/// ([`recovery::write_instructions`]).
fn write_recovery_readme(
    store: &Store,
    policy: &fscrypt_metadata::proto::PolicyData,
    into: &Path,
    dir: &Path,
    owner: (u32, u32),
    pass: &[u8],
    rp: &ProtectorData,
) -> anyhow::Result<PathBuf> {
    let m = store.mount().display();
    let text = recovery::instructions(
        pass,
        &rp.name,
        dir,
        &format!("{m}:{}", rp.protector_descriptor),
        &format!("{m}:{}", policy.key_descriptor),
    );
    recovery::write_instructions(into, owner, &text).map_err(gfs::meta)
}
