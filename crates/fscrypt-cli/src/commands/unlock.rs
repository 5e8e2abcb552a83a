//! `fscrypt-rs unlock DIR`: unwrap a google/fscrypt policy's key with one
//! of its protectors and add it to the filesystem keyring.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use fscrypt_actions::Context;
use fscrypt_actions::policy::Target;
use fscrypt_actions::protector;
use fscrypt_linux::keyring::KeyPresence;
use fscrypt_metadata::proto::ProtectorData;
use fscrypt_metadata::store::Store;

use crate::support::gfs::{self, MountId, OutputArgs, SecretArgs};
use crate::support::kernel;
use crate::support::seal::{DeviceArgs, Prompter};

/// Arguments of `fscrypt-rs unlock`.
#[derive(clap::Args, Debug)]
#[command(
    about = "Unlock a google/fscrypt-style encrypted directory",
    long_about = "Read DIR's policy from its filesystem's .fscrypt metadata, open one of its \
                  protectors (passphrase from the terminal, --passfile or one line of stdin; raw \
                  key from --key), unwrap the policy key and add it to the filesystem keyring. \
                  Works on directories encrypted by google/fscrypt 0.3.x.\n\nA sealed protector \
                  (`encrypt --source tpm2|pkcs11|fido2`) is tried first, without a prompt: its \
                  device releases the passphrase (a PIN is asked only when the protector needs \
                  one). When the device refuses (e.g. PCRs changed) the one-line reason is printed \
                  and the passphrase is asked for as usual: type the recovery passphrase shown at \
                  encryption. --no-sealed skips the device.\n\nExit status: 0 \
                  unlocked (or already); 12 wrong passphrase or key; 24 no metadata for DIR's \
                  policy or protector; 20/21 corrupt or unsafe metadata; 22 not set up; 1 error."
)]
pub struct Args {
    /// An encrypted directory.
    pub dir: PathBuf,
    /// The protector to use, when the policy has several.
    #[arg(long, value_name = "MOUNTPOINT:ID")]
    pub unlock_with: Option<MountId>,
    /// Do not ask the device of a sealed protector (tpm2, pkcs11, fido2):
    /// go straight to the passphrase prompt (the recovery passphrase).
    #[arg(long)]
    pub no_sealed: bool,
    /// Where a sealed protector's device is (tpm2: --tcti, else
    /// $TPM2TOOLS_TCTI, $TCTI, /dev/tpmrm0; pkcs11: the record's module and
    /// token unless given).
    #[command(flatten)]
    pub device: DeviceArgs,
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
    let ctx = Context::for_caller();
    let target = Target::open(&ctx, dir).map_err(gfs::actions)?;
    let descriptor = &target.descriptor;
    let done = |already: bool,
                protector: Option<&str>,
                sealed: Option<fscrypt_seal::Kind>|
     -> anyhow::Result<ExitCode> {
        if args.out.json {
            kernel::print_json(&serde_json::json!({
                "ok": true, "dir": dir.display().to_string(), "policy": descriptor,
                "already_unlocked": already, "protector": protector,
                "sealed": sealed.map(fscrypt_seal::Kind::label),
            }))?;
        } else if !args.out.quiet {
            if already {
                println!("{} is already unlocked.", dir.display());
            } else if let Some(kind) = sealed {
                println!(
                    "{} is now unlocked (by its {kind} protector).",
                    dir.display()
                );
            } else {
                println!("{} is now unlocked.", dir.display());
            }
        }
        Ok(ExitCode::SUCCESS)
    };
    if target.presence(&ctx) == Some(KeyPresence::Present) {
        return done(true, None, None);
    }
    // Sealed protectors first: no prompt when a device releases one.
    if !args.no_sealed && args.secret.key.is_none() {
        let only = args.unlock_with.as_ref().map(|r| r.id.as_str());
        let mut ui = Prompter::new(args.device.pin_file.as_deref(), None);
        let attempt = fscrypt_actions::sealed::unlock(
            &ctx,
            &target,
            only,
            &args.device.unseal_options(None),
            &mut ui,
        )
        .map_err(gfs::actions)?;
        if let Some((d, kind)) = &attempt.unlocked {
            return done(false, Some(d), Some(*kind));
        }
        for (d, kind, why) in &attempt.refused {
            let reseal = if *kind == Some(fscrypt_seal::Kind::Tpm2) {
                format!(
                    " (after a change you made on purpose, `fscrypt-rs metadata reseal \
                     --protector {}:{d}` seals it to the new values)",
                    target.store.mount().display()
                )
            } else {
                String::new()
            };
            let kind = kind.map(|k| format!("{k} ")).unwrap_or_default();
            eprintln!(
                "fscrypt-rs: {kind}protector {d} did not unlock {}: {why}",
                dir.display()
            );
            eprintln!("fscrypt-rs: asking for its recovery passphrase instead{reseal}");
        }
    }
    let located = match &args.unlock_with {
        Some(r) => target.protector(&ctx, Some(&r.mount), &r.id),
        None => {
            // The only protector; or the only one of the kind the secret
            // given fits.
            let candidates = target.candidates(&ctx);
            let me = rustix::process::getuid().as_raw();
            let chosen = match protector::choose(
                &target.slots(),
                &candidates,
                args.secret.key.is_some(),
                me,
            ) {
                Some(d) => d,
                None if std::io::stdin().is_terminal() => {
                    prompt_for_protector(&target.store, &candidates)?
                }
                None => {
                    anyhow::bail!(
                        "{} has several protectors; choose one with --unlock-with: {}",
                        dir.display(),
                        protector_list(&target.store, &candidates).join(", ")
                    );
                }
            };
            target.protector(&ctx, None, &chosen)
        }
    }
    .map_err(gfs::actions)?;
    let pdesc = located.data.protector_descriptor.clone();
    let what = format!("{} ({})", gfs::describe_protector(&located.data), pdesc);
    let secret = gfs::read_secret(&args.secret, located.data.source_type(), &what, false)?;
    target
        .unlock(&ctx, &located, &secret)
        .map_err(gfs::actions)?;
    done(false, Some(&pdesc), None)
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
