//! `fscrypt-rs unlock DIR`: unwrap a google/fscrypt policy's key with one
//! of its protectors and add it to the filesystem keyring.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt_linux::keyring::KeyPresence;
use fscrypt_metadata::actions;
use fscrypt_metadata::proto::{ProtectorData, SourceType};
use fscrypt_metadata::store::Store;

use crate::support::gfs::{self, EXIT_NOT_FOUND, MountId, OutputArgs, SecretArgs};
use crate::support::kernel;

/// Arguments of `fscrypt-rs unlock`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Unlock a google/fscrypt-style encrypted directory",
    long_about = "Read DIR's policy from its filesystem's .fscrypt metadata, open one of its \
                  protectors (passphrase from the terminal, --passfile or one line of stdin; raw \
                  key from --key), unwrap the policy key and add it to the filesystem keyring. \
                  Works on directories encrypted by google/fscrypt 0.3.x.\n\nExit status: 0 \
                  unlocked (or already); 12 wrong passphrase or key; 24 no metadata for DIR's \
                  policy or protector; 20/21 corrupt or unsafe metadata; 22 not set up; 1 error."
)]
pub struct Args {
    /// An encrypted directory.
    pub dir: PathBuf,
    /// The protector to use, when the policy has several.
    #[arg(long, value_name = "MOUNTPOINT:ID")]
    pub unlock_with: Option<MountId>,
    /// Secrets.
    #[command(flatten)]
    pub secret: SecretArgs,
    /// `--json`, `--quiet`.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Runs `fscrypt-rs unlock`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let json = args.out.json;
    gfs::report(json, || exec_inner(args))
}

fn exec_inner(args: Args) -> anyhow::Result<ExitCode> {
    let dir = &args.dir;
    let Some(kpolicy) = gfs::dir_policy(dir)? else {
        anyhow::bail!("{} is not encrypted", dir.display());
    };
    let store = gfs::store_of(dir)?;
    let (descriptor, _) = gfs::policy_key_spec(&kpolicy);
    let policy = store.policy(&descriptor).map_err(gfs::meta)?;
    let done = |already: bool, protector: Option<&str>| -> anyhow::Result<ExitCode> {
        if args.out.json {
            kernel::print_json(&serde_json::json!({
                "ok": true, "dir": dir.display().to_string(), "policy": descriptor,
                "already_unlocked": already, "protector": protector,
            }))?;
        } else if !args.out.quiet {
            if already {
                println!("{} is already unlocked.", dir.display());
            } else {
                println!("{} is now unlocked.", dir.display());
            }
        }
        Ok(ExitCode::SUCCESS)
    };
    if gfs::key_presence(store.mount(), &kpolicy) == Some(KeyPresence::Present) {
        return done(true, None);
    }
    let slots: Vec<&str> = policy
        .wrapped_policy_keys
        .iter()
        .map(|s| s.protector_descriptor.as_str())
        .collect();
    let pick = match &args.unlock_with {
        Some(r) => {
            if !slots.contains(&r.id.as_str()) {
                return Err(gfs::failure(
                    EXIT_NOT_FOUND,
                    "not_found",
                    format!(
                        "protector {} does not protect {}; its protectors: {}",
                        r.id,
                        dir.display(),
                        slots.join(", ")
                    ),
                ));
            }
            let pstore = Store::new(std::fs::canonicalize(&r.mount)?, gfs::trust());
            pstore.check_setup().map_err(gfs::meta)?;
            (pstore, r.id.clone())
        }
        None => {
            // The only protector; or the only one of the kind the secret
            // given fits.
            let mut candidates = Vec::new();
            for d in &slots {
                if let Ok((_, p)) = gfs::locate_protector(&store, d) {
                    candidates.push(p);
                }
            }
            let chosen = match choose_protector(&slots, &candidates, args.secret.key.is_some()) {
                Some(d) => d,
                None if std::io::stdin().is_terminal() => {
                    prompt_for_protector(&store, &candidates)?
                }
                None => {
                    anyhow::bail!(
                        "{} has several protectors; choose one with --unlock-with: {}",
                        dir.display(),
                        protector_list(&store, &candidates).join(", ")
                    );
                }
            };
            (store.clone(), chosen)
        }
    };
    let (pstore, pdesc) = pick;
    let (_, protector) = gfs::locate_protector(&pstore, &pdesc)?;
    let what = format!("{} ({})", gfs::describe_protector(&protector), pdesc);
    let secret = gfs::read_secret(&args.secret, protector.source_type(), &what, false)?;
    let pkey = actions::open_protector(&protector, &secret).map_err(gfs::meta)?;
    let key = gfs::open_policy(&store, &policy, &pdesc, &pkey)?;
    gfs::add_policy_key(store.mount(), &policy, &key[..])?;
    done(false, Some(&pdesc))
}

/// The protector to use when `--unlock-with` is not given, as google/fscrypt
/// chooses: the only one; with `--key`, the only raw-key protector; without,
/// the calling user's login protector, else the only non-raw-key one.
/// `None`: the user must choose.
fn choose_protector(slots: &[&str], candidates: &[ProtectorData], raw_key: bool) -> Option<String> {
    if slots.len() == 1 {
        return Some(slots[0].to_string());
    }
    let only = |f: &dyn Fn(&ProtectorData) -> bool| -> Option<String> {
        let mut it = candidates.iter().filter(|p| f(p));
        match (it.next(), it.next()) {
            (Some(p), None) => Some(p.protector_descriptor.clone()),
            _ => None,
        }
    };
    if raw_key {
        return only(&|p| p.source_type() == SourceType::RawKey);
    }
    let me = i64::from(rustix::process::getuid().as_raw());
    only(&|p| p.source_type() == SourceType::PamPassphrase && p.uid == me)
        .or_else(|| only(&|p| p.source_type() != SourceType::RawKey))
}

/// `MOUNT:ID (description)` for each candidate.
fn protector_list(store: &Store, candidates: &[ProtectorData]) -> Vec<String> {
    candidates
        .iter()
        .map(|p| {
            format!(
                "{}:{} ({})",
                store.mount().display(),
                p.protector_descriptor,
                gfs::describe_protector(p)
            )
        })
        .collect()
}

/// Asks on the terminal which protector to use (a number from the list).
fn prompt_for_protector(store: &Store, candidates: &[ProtectorData]) -> anyhow::Result<String> {
    let list = protector_list(store, candidates);
    eprintln!("The available protectors are:");
    for (i, l) in list.iter().enumerate() {
        eprintln!("  {}. {l}", i + 1);
    }
    eprint!("Enter the number of the protector to use: ");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    match line.trim().parse::<usize>() {
        Ok(n) if (1..=candidates.len()).contains(&n) => {
            Ok(candidates[n - 1].protector_descriptor.clone())
        }
        _ => anyhow::bail!(
            "no protector {:?}: enter a number from 1 to {}",
            line.trim(),
            candidates.len()
        ),
    }
}
