//! `fscrypt-rs protector list|add|remove CIPHERDIR`: the protectors of a
//! vault (passphrases, key files, recovery keys; any number of each, each
//! with a name). Adding or removing one rewrites only the config
//! (atomically, under the config lock): the master key, and so every file,
//! stays the same. Logic: `fscrypt_vault::edit`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use fscrypt_crypto::SecretBuf;
use fscrypt_vault::config::{ProtectorRecord, format_utc};
use fscrypt_vault::{Argon2Params, NewSecret, RecoveryKey, Vault};

use crate::support::secret;
use crate::support::unlock::{ConfigArg, UnlockArgs};

/// Arguments of `fscrypt-rs protector`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: Sub,
}

#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// List the protectors: name, kind, key derivation and its costs,
    /// creation time. Needs no secret and shows none.
    List(ListArgs),
    /// Add a protector. Unlocks the vault first with an existing protector
    /// (a passphrase by default, from the terminal, stdin, --passfile or
    /// --extpass; or --key-file / --recovery-key), then wraps the same
    /// master key with the new secret.
    Add(AddArgs),
    /// Remove a protector. Unlocks the vault first with a protector that
    /// stays, so the vault is known to open afterwards; the last
    /// protector is never removed.
    Remove(RemoveArgs),
}

#[derive(clap::Args, Debug)]
struct ListArgs {
    /// The vault (directory made by `fscrypt-rs init`).
    cipherdir: PathBuf,
    #[command(flatten)]
    config: ConfigArg,
}

/// Kinds of protector `add` makes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// A passphrase (Argon2id), asked twice on a terminal.
    Passphrase,
    /// A key file of 32 or 64 raw bytes: --add-key-file (existing) or
    /// --new-key-file (made now).
    KeyFile,
    /// A new random recovery key, shown once.
    RecoveryKey,
}

/// How to unlock the vault before a change.
#[derive(clap::Args, Debug)]
struct Unlock {
    /// The existing secret that unlocks the vault.
    #[command(flatten)]
    secret: UnlockArgs,
    /// Try only the protector of this name to unlock.
    #[arg(long, value_name = "NAME")]
    unlock_protector: Option<String>,
    /// Where the vault's config is (default: in CIPHERDIR).
    #[command(flatten)]
    config: ConfigArg,
}

#[derive(clap::Args, Debug)]
struct AddArgs {
    /// The vault (directory made by `fscrypt-rs init`).
    cipherdir: PathBuf,
    /// The kind of the new protector.
    #[arg(value_enum)]
    kind: Kind,
    /// Its name (letters, digits, '.', '_', '-'); default: the kind, or
    /// KIND-2, KIND-3, ... when taken.
    #[arg(long)]
    name: Option<String>,
    /// For key-file: the existing key file to add (32 or 64 raw bytes).
    /// (--key-file is the key file that unlocks the vault, as everywhere.)
    #[arg(long, value_name = "FILE", conflicts_with = "new_key_file")]
    add_key_file: Option<PathBuf>,
    /// For key-file: create this key file (64 random bytes, mode 0600).
    #[arg(long, value_name = "FILE")]
    new_key_file: Option<PathBuf>,
    #[command(flatten)]
    unlock: Unlock,
}

#[derive(clap::Args, Debug)]
struct RemoveArgs {
    /// The vault (directory made by `fscrypt-rs init`).
    cipherdir: PathBuf,
    /// The name of the protector to remove (`fscrypt-rs protector list`).
    name: String,
    #[command(flatten)]
    unlock: Unlock,
}

/// Runs `fscrypt-rs protector`.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Sub::List(a) => list(a),
        Sub::Add(a) => add(a),
        Sub::Remove(a) => remove(a),
    }
}

fn list(args: ListArgs) -> anyhow::Result<ExitCode> {
    let vault = args.config.open(&args.cipherdir)?;
    let rows: Vec<[String; 4]> = vault
        .protectors()
        .iter()
        .map(|p| {
            let kdf = match &p.record {
                ProtectorRecord::Passphrase { params, .. } => format!(
                    "argon2id m={} KiB t={} p={}",
                    params.m_cost_kib, params.t_cost, params.p_cost
                ),
                _ => "hkdf-sha512".to_owned(),
            };
            let created = p.created.map(format_utc).unwrap_or_else(|| "-".to_owned());
            [
                p.name.clone(),
                p.record.protector_kind().to_string(),
                kdf,
                created,
            ]
        })
        .collect();
    let header = ["NAME", "KIND", "KDF", "CREATED"].map(str::to_owned);
    let mut width = [0usize; 3];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        println!(
            "{:w0$}  {:w1$}  {:w2$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            w0 = width[0],
            w1 = width[1],
            w2 = width[2]
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Unlocks the vault as `unlock` says; returns the raw master key and the
/// index of the protector that opened it, or the exit code of a wrong
/// secret.
fn unlock(vault: &Vault, unlock: &Unlock) -> anyhow::Result<Result<(SecretBuf, usize), ExitCode>> {
    let prompt = format!("Passphrase for {} (to unlock it): ", vault.dir().display());
    unlock
        .secret
        .unwrap(vault, unlock.unlock_protector.as_deref(), &prompt, None)
}

/// Argon2id costs for a new passphrase protector: the test override, else
/// those of an existing passphrase protector, else tuned on this machine.
fn new_passphrase_params(vault: &Vault) -> anyhow::Result<Argon2Params> {
    if let Some(p) = Argon2Params::from_env()? {
        eprintln!(
            "fscrypt-rs: warning: weak Argon2id costs from {} (meant for tests)",
            fscrypt_vault::cost::ARGON2_ENV
        );
        return Ok(p);
    }
    if let Some(p) = vault.argon2_params() {
        return Ok(p);
    }
    eprintln!("fscrypt-rs: measuring Argon2id on this machine (aiming at 1 s per unlock)...");
    Ok(Argon2Params::calibrate(fscrypt_vault::ARGON2_TARGET, None)?.0)
}

fn add(args: AddArgs) -> anyhow::Result<ExitCode> {
    let vault = args.unlock.config.open(&args.cipherdir)?;
    let dir = args.cipherdir.display();
    if args.kind != Kind::KeyFile && (args.add_key_file.is_some() || args.new_key_file.is_some()) {
        bail!("--add-key-file and --new-key-file are for `protector add {dir} key-file`");
    }
    if args.kind == Kind::KeyFile && args.add_key_file.is_none() && args.new_key_file.is_none() {
        bail!(
            "a key-file protector needs --add-key-file FILE (existing) or --new-key-file FILE (made now); --key-file FILE is the key file that unlocks the vault"
        );
    }
    if let Some(name) = &args.name {
        fscrypt_vault::config::check_name(name).map_err(anyhow::Error::msg)?;
        if vault.protectors().iter().any(|p| &p.name == name) {
            return Err(fscrypt_vault::Error::NameTaken(name.clone()).into());
        }
    }
    let (master, _) = match unlock(&vault, &args.unlock)? {
        Ok(found) => found,
        Err(code) => return Ok(code),
    };
    let name = args.name.as_deref();
    let (added, shown_key) = match args.kind {
        Kind::Passphrase => {
            let pass = secret::read_passphrase("New passphrase: ", true)?;
            let params = new_passphrase_params(&vault)?;
            let secret = NewSecret::Passphrase {
                passphrase: &pass,
                params,
            };
            (vault.add_protector(&master, &secret, name)?.1, None)
        }
        Kind::KeyFile => {
            let (key, made) = match (&args.add_key_file, &args.new_key_file) {
                (Some(path), _) => (secret::read_key_file(path)?, None),
                (None, Some(path)) => (secret::generate_key_file(path)?, Some(path)),
                (None, None) => unreachable!("checked above"),
            };
            match vault.add_protector(&master, &NewSecret::KeyFile(&key), name) {
                Ok((_, n)) => (n, None),
                Err(e) => {
                    if let Some(path) = made {
                        let _ = std::fs::remove_file(path);
                    }
                    return Err(e.into());
                }
            }
        }
        Kind::RecoveryKey => {
            let rk = RecoveryKey::generate()?;
            let n = vault
                .add_protector(&master, &NewSecret::RecoveryKey(&rk), name)?
                .1;
            (n, Some(rk))
        }
    };
    let kind = match args.kind {
        Kind::Passphrase => "passphrase",
        Kind::KeyFile => "key-file",
        Kind::RecoveryKey => "recovery-key",
    };
    println!("Added {kind} protector {added:?} to {dir}; the data is unchanged.");
    if let Some(path) = args.add_key_file.as_ref().or(args.new_key_file.as_ref()) {
        println!("  key file: {}", path.display());
    }
    if let Some(rk) = &shown_key {
        secret::show_recovery_key(rk);
    }
    Ok(ExitCode::SUCCESS)
}

fn remove(args: RemoveArgs) -> anyhow::Result<ExitCode> {
    let vault = args.unlock.config.open(&args.cipherdir)?;
    let dir = args.cipherdir.display();
    let Some(target) = vault.protectors().iter().position(|p| p.name == args.name) else {
        return Err(fscrypt_vault::Error::UnknownProtector(args.name.clone()).into());
    };
    if vault.protectors().len() == 1 {
        return Err(fscrypt_vault::Error::LastProtector(args.name.clone()).into());
    }
    let (_master, opened) = match unlock(&vault, &args.unlock)? {
        Ok(found) => found,
        Err(code) => return Ok(code),
    };
    if opened == target {
        bail!(
            "the secret given opens {:?}, the protector being removed: unlock with one that stays (so the vault is known to open afterwards)",
            args.name
        );
    }
    vault.remove_protector(&args.name)?;
    println!(
        "Removed protector {:?} from {dir}; it no longer unlocks the vault. The data is unchanged.",
        args.name
    );
    Ok(ExitCode::SUCCESS)
}
