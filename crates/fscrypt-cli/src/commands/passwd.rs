//! `fscrypt-rs passwd CIPHERDIR`: change the passphrase of a passphrase
//! protector. The master key, and so every file, stays the same: only the
//! wrapped copy of the key in the config is replaced (atomically, under the
//! config lock). Logic: `fscrypt_vault::edit`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use fscrypt_vault::{ProtectorKind, Secret, Vault};

use crate::support::secret;

/// Arguments of `fscrypt-rs passwd`.
///
/// Asks for the old passphrase, checks it, then asks for the new one twice
/// (on a terminal, without echo). When stdin is not a terminal it reads two
/// lines: the old passphrase, then the new one. A wrong old passphrase
/// changes nothing and exits with status 12.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The vault (directory made by `fscrypt-rs init`).
    pub cipherdir: PathBuf,
    /// The passphrase protector to change (`fscrypt-rs protector list`
    /// shows the names); default: the one the old passphrase opens.
    #[arg(long, value_name = "NAME")]
    pub protector: Option<String>,
}

/// Runs `fscrypt-rs passwd`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let vault = Vault::open(&args.cipherdir)?;
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
    let old = secret::read_passphrase(&format!("Old passphrase for {dir}: "), false)?;
    secret::announce_passphrase_unlock(&vault, args.protector.as_deref());
    let (master, index) =
        match vault.unwrap_with(&Secret::Passphrase(&old), args.protector.as_deref()) {
            Ok(found) => found,
            Err(e) if e.is_wrong_secret() => return Ok(secret::wrong_secret(&e)),
            Err(e) => return Err(e.into()),
        };
    drop(old);
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
