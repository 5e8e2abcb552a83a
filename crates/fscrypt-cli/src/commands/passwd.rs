//! `fscrypt-rs passwd CIPHERDIR`: change the passphrase of a passphrase
//! protector. The master key, and so every file, stays the same: only the
//! wrapped copy of the key in the config is replaced (atomically, under the
//! config lock). Logic: `fscrypt_vault::edit`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use fscrypt_vault::ProtectorKind;

use crate::support::secret;
use crate::support::unlock::{ConfigArg, UnlockArgs};

/// Arguments of `fscrypt-rs passwd`.
///
/// Asks for the old passphrase (or takes it from --passfile/--extpass, or
/// unlocks with --key-file or --recovery-key instead), checks it, then asks
/// for the new one twice (on a terminal, without echo). When stdin is not a
/// terminal it reads one line per passphrase it needs: the old passphrase
/// (unless given another way), then the new one. A wrong old secret
/// changes nothing and exits with status 12.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The vault (directory made by `fscrypt-rs init`).
    pub cipherdir: PathBuf,
    /// The passphrase protector to change (`fscrypt-rs protector list`
    /// shows the names); default: the one the old passphrase opens, or,
    /// when unlocking with --key-file or --recovery-key, the vault's only
    /// passphrase protector.
    #[arg(long, value_name = "NAME")]
    pub protector: Option<String>,
    /// How to unlock the vault (the old secret): the old passphrase by
    /// default; --key-file or --recovery-key reset a forgotten one.
    #[command(flatten)]
    pub unlock: UnlockArgs,
    /// Where the vault's config is (default: in CIPHERDIR).
    #[command(flatten)]
    pub config: ConfigArg,
}

/// Runs `fscrypt-rs passwd`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let vault = args.config.open(&args.cipherdir)?;
    let dir = args.cipherdir.display();
    if !vault.has_passphrase() {
        bail!(
            "{dir} has no passphrase protector: add one with `fscrypt-rs protector add {dir} passphrase`"
        );
    }
    if let Some(name) = &args.protector {
        match vault.protectors().iter().find(|p| &p.name == name) {
            None => return Err(fscrypt_vault::Error::UnknownProtector(name.clone()).into()),
            Some(p) if p.record.protector_kind() != ProtectorKind::Passphrase => bail!(
                "protector {name:?} is a {} protector: passwd changes passphrases; use `fscrypt-rs protector add/remove` for the others",
                p.record.protector_kind()
            ),
            Some(_) => {}
        }
    }
    // The passphrase protector to change, when the vault is unlocked with
    // another kind of secret: the one named, or the only one.
    let by_passphrase = args.unlock.key_file.is_none() && !args.unlock.recovery_key;
    let target = if by_passphrase {
        None
    } else {
        let passphrases: Vec<usize> = (0..vault.protectors().len())
            .filter(|&i| vault.protectors()[i].record.protector_kind() == ProtectorKind::Passphrase)
            .collect();
        Some(match (&args.protector, passphrases.as_slice()) {
            (Some(name), _) => vault
                .protectors()
                .iter()
                .position(|p| &p.name == name)
                .expect("checked above"),
            (None, [only]) => *only,
            (None, _) => bail!(
                "{dir} has {} passphrase protectors: say which one to change with --protector NAME",
                passphrases.len()
            ),
        })
    };
    let only = if by_passphrase {
        args.protector.as_deref()
    } else {
        None
    };
    let prompt = format!("Old passphrase for {dir}: ");
    let (master, opened) = match args.unlock.unwrap(&vault, only, &prompt, None)? {
        Ok(found) => found,
        Err(code) => return Ok(code),
    };
    let index = target.unwrap_or(opened);
    let name = vault.protectors()[index].name.clone();
    let new = secret::read_passphrase("New passphrase: ", true)?;
    let params = fscrypt_vault::Argon2Params::from_env()?;
    if params.is_some() {
        eprintln!(
            "fscrypt-rs: warning: weak Argon2id costs from {} (meant for tests)",
            fscrypt_vault::cost::ARGON2_ENV
        );
    }
    // The new passphrase is wrapped with the protector's own cost (or the
    // test override): announce that derivation too.
    secret::announce_passphrase_unlock(&vault, Some(&name));
    vault.change_passphrase(index, &master, &new, params)?;
    println!("Changed the passphrase of protector {name:?} of {dir}; the data is unchanged.");
    Ok(ExitCode::SUCCESS)
}
